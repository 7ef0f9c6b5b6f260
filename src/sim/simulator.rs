//! The simulator: builds a scene and a platform route from a seed, then casts each sweep.
//! Casting bins the scene's objects by the azimuth interval their bounding spheres cover as
//! seen from the LiDAR, so each column tests only the few objects that can lie on its rays.

use nalgebra::{Isometry3, Matrix3, Point3, UnitQuaternion, Vector2, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use thiserror::Error;

use super::config::SimConfig;
use super::lidar::{
    OUSTER_BEAMS, OUSTER_COLUMNS, OusterCalibration, ReturnModel, TOP_COLUMNS, TOP_ROWS, TopCalibration, TraceHit,
    gaussian, roll_pitch_yaw, rotation_gap, world_ray,
};
use super::object::FineLabel;
use super::path::{Path, SpeedProfile};
use super::platform::{PlatformMotion, ideal_imu};
use super::scene::{EGO_LANE_OFFSET_M, QUADRUPED_OFFSET_M, Region, Scene, SceneObject, build_scene, grid_route};
use super::shape::Ray;
use super::terrain::Terrain;
use crate::frame::{GroundTruthBox, ImuSample, ObjectClass, Platform};
use crate::geometry::Box3;

/// Time between sweeps and length of one sweep (µs): 10 Hz.
pub const SWEEP_PERIOD_MICROS: i64 = 100_000;
/// Azimuth bins used to find the objects a column can hit.
const AZIMUTH_BINS: usize = 720;
/// How far beyond the platform route the scene is laid out (m).
const SCENE_MARGIN_M: f64 = 90.0;

/// Errors creating a simulator or asking it for a sweep.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SimError {
    /// A config value is out of its valid range.
    #[error("sim config: field `{field}`: {reason}")]
    InvalidConfig {
        /// The field, dotted (`drone.min_altitude_m`).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The platform has no sensor model.
    #[error("sim: platform `{0}` cannot be simulated (expected vehicle, drone or quadruped)")]
    UnsupportedPlatform(Platform),
    /// A sweep index past the configured sequence.
    #[error("sim: sweep {index} out of range (sequence has {len} sweeps)")]
    SweepOutOfRange {
        /// The requested index.
        index: usize,
        /// Number of sweeps.
        len: usize,
    },
}

/// The LiDAR a simulator models.
#[derive(Debug, Clone, PartialEq)]
pub enum LidarCalibration {
    /// The car's Waymo-TOP-like LiDAR.
    Top(TopCalibration),
    /// The drone's or quadruped's OS1-64 (boxed: it holds two 4×4 matrices).
    Ouster(Box<OusterCalibration>),
}

/// One Waymo-TOP-like sweep: a 64 × 2650 range image, row-major (`row * TOP_COLUMNS + column`),
/// row 0 the highest inclination.
#[derive(Debug, Clone, PartialEq)]
pub struct TopRangeImage {
    /// Range from the LiDAR origin (m); 0 = no return.
    pub range_m: Vec<f32>,
    /// Intensity (unitless, ~reflectivity; retro-reflectors exceed 1).
    pub intensity: Vec<f32>,
    /// Pulse elongation (unitless).
    pub elongation: Vec<f32>,
    /// Track id of the labelled object each return hit; 0 for clutter, ground or no return.
    pub track_id: Vec<u32>,
    /// Vehicle pose in the world when each column was measured (every row of a column shares it).
    pub column_world_from_vehicle: Vec<Isometry3<f64>>,
}

impl TopRangeImage {
    /// Waymo's per-pixel pose of `column`: `[roll, pitch, yaw, x, y, z]`, vehicle → world.
    pub fn pixel_pose(&self, column: usize) -> [f64; 6] {
        let p = &self.column_world_from_vehicle[column];
        let (roll, pitch, yaw) = roll_pitch_yaw(&p.rotation.to_rotation_matrix());
        let t = p.translation.vector;
        [roll, pitch, yaw, t.x, t.y, t.z]
    }
}

/// One OS1-64 sweep: 64 beams × 2048 measurement columns, indexed `beam * OUSTER_COLUMNS + column`
/// (not staggered: column c holds measurement id c of every beam).
#[derive(Debug, Clone, PartialEq)]
pub struct OusterScan {
    /// RANGE (mm, fits 20 bits); 0 = no return.
    pub range_mm: Vec<u32>,
    /// REFLECTIVITY (calibrated: 0–100 for diffuse targets).
    pub reflectivity: Vec<u16>,
    /// SIGNAL (photon counts).
    pub signal: Vec<u16>,
    /// NEAR_IR (ambient counts).
    pub near_ir: Vec<u16>,
    /// Track id of the labelled object each return hit; 0 for clutter, ground or no return.
    pub track_id: Vec<u32>,
    /// Time each column was measured (ns, same clock as the µs timestamps × 1000).
    pub column_timestamp_ns: Vec<i64>,
}

/// The LiDAR data of one sweep.
#[derive(Debug, Clone, PartialEq)]
pub enum LidarSweep {
    /// Waymo-TOP-like range image.
    Top(TopRangeImage),
    /// OS1-64 measurement grid.
    Ouster(OusterScan),
}

/// Ground truth of one labelled object at a sweep's reference time.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectTruth {
    /// Track id, stable over the sequence (from 1).
    pub track_id: u32,
    /// Canonical class.
    pub class: ObjectClass,
    /// Fine label.
    pub label: FineLabel,
    /// Tight box of the object's shape in the sensor frame.
    pub box_in_sensor: Box3,
    /// The same box in the world frame.
    pub box_in_world: Box3,
    /// LiDAR returns in this sweep whose ray hit one of the object's parts.
    pub num_lidar_points: u32,
    /// Velocity in the world frame (m/s).
    pub velocity_in_world: Vector3<f64>,
}

impl ObjectTruth {
    /// This object as the crate's `GroundTruthBox` (track id as decimal text).
    pub fn to_ground_truth_box(&self) -> GroundTruthBox {
        GroundTruthBox {
            box_in_sensor: self.box_in_sensor,
            class: self.class,
            source_label: self.label.as_str().to_string(),
            track_id: self.track_id.to_string(),
            num_points: Some(self.num_lidar_points),
            // sensor_from_world = R(box in sensor) · R(box in world)ᵀ: the same box, two frames.
            velocity_mps: Some(
                self.box_in_sensor.rotation() * self.box_in_world.rotation().inverse() * self.velocity_in_world,
            ),
        }
    }
}

/// One simulated sweep with its ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSweep {
    /// 0-based sweep index.
    pub index: usize,
    /// Start of the sweep (µs); Waymo's `Frame.timestamp_micros`, M3ED's `ts_start`.
    pub timestamp_micros: i64,
    /// Mid-sweep time (µs), the time of `world_from_sensor` and of the boxes.
    pub reference_time_micros: i64,
    /// Sensor pose in the world at the reference time (for the car: the vehicle frame).
    pub world_from_sensor: Isometry3<f64>,
    /// The LiDAR measurements.
    pub lidar: LidarSweep,
    /// Labelled objects within the LiDAR's range, sorted by track id.
    pub objects: Vec<ObjectTruth>,
    /// Unit vector along gravity (down) in the sensor frame.
    pub gravity_in_sensor: Vector3<f64>,
    /// Terrain height under the sensor origin (world z, m).
    pub ground_height_m: f64,
    /// Height of the sensor origin above that terrain (m).
    pub sensor_height_above_ground_m: f64,
    /// IMU samples during the sweep, in the sensor frame (empty for the car); NaN where missing.
    pub imu: Vec<ImuSample>,
}

/// One LiDAR return as a reader reconstructs it, in the sweep's sensor frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPoint {
    /// Position (m): Waymo TOP points are motion-compensated with the per-pixel pose; OS1
    /// points are not de-skewed (as M3ED readers give them).
    pub position: Point3<f64>,
    /// Track id of the labelled object hit, 0 otherwise.
    pub track_id: u32,
}

/// A seeded, deterministic scene-and-sensor simulator for one platform.
#[derive(Debug, Clone)]
pub struct Simulator {
    config: SimConfig,
    platform: Platform,
    seed: u64,
    scene: Scene,
    motion: PlatformMotion,
    calibration: LidarCalibration,
    body_from_sensor: Isometry3<f64>,
    sensor_from_lidar: Isometry3<f64>,
    /// Every pixel's ray in the LiDAR frame (origin, unit direction), column-major:
    /// `column * rows + row`, computed once from the calibration.
    rays_in_lidar: Vec<(Point3<f64>, Vector3<f64>)>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> SimError {
    SimError::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

fn validate(config: &SimConfig) -> Result<(), SimError> {
    config.validate()?;
    if config.frames == 0 {
        return Err(invalid("frames", "must be at least 1"));
    }
    if config.scene.block_pitch_m.is_nan() || config.scene.block_pitch_m < 40.0 {
        return Err(invalid("scene.block_pitch_m", "must be at least 40 m"));
    }
    let d = &config.drone;
    if !(d.min_altitude_m >= 1.0 && d.max_altitude_m >= d.min_altitude_m) {
        return Err(invalid(
            "drone.min_altitude_m",
            format!("need 1 ≤ min ({}) ≤ max ({})", d.min_altitude_m, d.max_altitude_m),
        ));
    }
    if !(config.vehicle.max_range_m > 0.0 && config.lidar.ouster_max_range_m > 0.0) {
        return Err(invalid("vehicle.max_range_m", "ranges must be positive"));
    }
    if config.imu.rate_hz.is_nan() || config.imu.rate_hz <= 0.0 {
        return Err(invalid("imu.rate_hz", "must be positive"));
    }
    for (field, v) in [
        ("lidar.dropout", config.lidar.dropout),
        ("imu.gap_probability", config.imu.gap_probability),
        ("scene.parking_occupancy", config.scene.parking_occupancy),
        ("scene.stop_probability", config.scene.stop_probability),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid(field, format!("{v} is not a probability")));
        }
    }
    Ok(())
}

/// Mixes a seed and counters into one 64-bit seed (SplitMix64 finaliser per word).
pub(crate) fn mix_seed(words: &[u64]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    for &w in words {
        h ^= w
            .wrapping_add(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(h << 6)
            .wrapping_add(h >> 2);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
    }
    h
}

/// Stream tags so independent random draws never share a generator.
const STREAM_COLUMN: u64 = 1;
const STREAM_IMU: u64 = 2;
const STREAM_IMU_GAP: u64 = 3;

/// A drone route from `start`: a chain of 30–60 m legs turning by 20–90° either way.
fn drone_route(start: Vector2<f64>, duration_s: f64, speed: f64, rng: &mut impl rand::Rng) -> Option<Path> {
    let mut corners = vec![start];
    let mut heading: f64 = rng.random_range(0.0..std::f64::consts::TAU);
    let mut length = 0.0;
    while length < speed * duration_s + 60.0 {
        let leg = rng.random_range(30.0..60.0);
        let last = corners[corners.len() - 1];
        corners.push(last + Vector2::new(heading.cos(), heading.sin()) * leg);
        length += leg;
        let turn = rng.random_range(20f64..90.0).to_radians();
        heading += if rng.random_bool(0.5) { turn } else { -turn };
    }
    Path::from_corners(&corners, 10.0)
}

/// Radius around a take-off point kept free of static objects (m).
const TAKEOFF_PAD_RADIUS_M: f64 = 4.0;

/// Where the drone route starts: the middle of the first block.
fn drone_start(pitch: f64) -> Vector2<f64> {
    Vector2::repeat(0.5 * pitch)
}

/// Per-sweep view of the scene: the objects that can be hit and the azimuth bins over them.
struct SweepScene<'a> {
    objects: Vec<&'a SceneObject>,
    /// `object_from_world` and the bounding-sphere centre for objects that do not move during the sweep.
    fixed: Vec<Option<(Isometry3<f64>, Point3<f64>)>>,
    bins: Vec<Vec<u32>>,
    everywhere: Vec<u32>,
}

/// An object a column's rays may hit, with its pose at the column's time.
struct Candidate<'a> {
    object: &'a SceneObject,
    /// `object_from_world` as a rotation matrix and translation (cheaper per ray than a quaternion).
    rotation: Matrix3<f64>,
    translation: Vector3<f64>,
    /// Bounding-sphere centre in the world.
    centre: Point3<f64>,
    radius_sq: f64,
    /// Squared distance from the LiDAR, for nearest-first order.
    distance_sq: f64,
}

/// One TOP pixel: range, intensity, elongation, track id.
type TopPixel = (f32, f32, f32, u32);

/// A raw trace result per beam of a column.
type ColumnHits = Vec<Option<TraceHit>>;

impl Simulator {
    /// Builds the scene and the platform's route for `config` from `seed`.
    pub fn new(config: SimConfig, platform: Platform, seed: u64) -> Result<Simulator, SimError> {
        validate(&config)?;
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(&[seed, platform as u64]));
        let t = &config.terrain;
        let terrain = Terrain::generate(
            t.kind,
            t.slope_deg,
            t.rolling_amplitude_m,
            t.rolling_wavelength_m,
            &mut rng,
        );
        let duration_s = config.frames as f64 * SWEEP_PERIOD_MICROS as f64 * 1e-6 + 1.0;
        let pitch = config.scene.block_pitch_m;
        let legs_for = |speed: f64| ((speed * duration_s + 2.0 * pitch) / pitch).ceil() as usize + 1;
        let route_error = || invalid("scene.block_pitch_m", "could not lay out a route");
        let (motion, calibration, body_from_sensor, sensor_from_lidar) = match platform {
            Platform::Vehicle => {
                let v = &config.vehicle;
                let calib = TopCalibration::generate(v.lidar_height_m, config.lidar.beam_offset_deg, &mut rng);
                let route = grid_route(
                    pitch,
                    Vector2::zeros(),
                    Vector2::new(1.0, 0.0),
                    legs_for(v.speed_mps),
                    EGO_LANE_OFFSET_M,
                    8.0,
                    &mut rng,
                )
                .ok_or_else(route_error)?;
                let s_start = 20.0;
                let stops: Vec<(f64, f64)> = route
                    .junction_s
                    .iter()
                    .filter_map(|&s| {
                        let stop = rng.random_bool(config.scene.stop_probability);
                        let wait = rng.random_range(2.0..6.0);
                        (stop && s - 14.0 > s_start + 1.0).then_some((s - 14.0, wait))
                    })
                    .collect();
                let profile = SpeedProfile::with_stops(s_start, v.speed_mps, 2.0, &stops);
                let lidar = calib.vehicle_from_lidar;
                (
                    PlatformMotion::Vehicle {
                        path: route.path,
                        profile,
                    },
                    LidarCalibration::Top(calib),
                    Isometry3::identity(),
                    lidar,
                )
            }
            Platform::Drone | Platform::Quadruped => {
                let calib = OusterCalibration::generate(config.lidar.beam_offset_deg, &mut rng);
                let sensor_from_lidar = calib.sensor_from_lidar();
                let phase = rng.random_range(0.0..std::f64::consts::TAU);
                let (motion, body_from_sensor) = if platform == Platform::Drone {
                    let d = config.drone.clone();
                    let path =
                        drone_route(drone_start(pitch), duration_s, d.speed_mps, &mut rng).ok_or_else(route_error)?;
                    let profile = SpeedProfile::with_stops(0.0, d.speed_mps, 1.0, &[]);
                    let mount = Isometry3::from_parts(
                        nalgebra::Translation3::identity(),
                        UnitQuaternion::from_axis_angle(&Vector3::y_axis(), d.sensor_pitch_down_deg.to_radians()),
                    );
                    let yaw0 = rng.random_range(-std::f64::consts::PI..std::f64::consts::PI);
                    let altitude_period_s = rng.random_range(40.0..80.0);
                    (
                        PlatformMotion::Drone {
                            path,
                            profile,
                            config: d,
                            yaw0,
                            phase,
                            altitude_period_s,
                        },
                        mount,
                    )
                } else {
                    let q = config.quadruped.clone();
                    let route = grid_route(
                        pitch,
                        Vector2::zeros(),
                        Vector2::new(1.0, 0.0),
                        legs_for(q.speed_mps),
                        QUADRUPED_OFFSET_M,
                        1.5,
                        &mut rng,
                    )
                    .ok_or_else(route_error)?;
                    let profile = SpeedProfile::with_stops(20.0, q.speed_mps, 0.5, &[]);
                    (
                        PlatformMotion::Quadruped {
                            path: route.path,
                            profile,
                            config: q,
                            phase,
                        },
                        Isometry3::identity(),
                    )
                };
                (
                    motion,
                    LidarCalibration::Ouster(Box::new(calib)),
                    body_from_sensor,
                    sensor_from_lidar,
                )
            }
            Platform::Other => return Err(SimError::UnsupportedPlatform(platform)),
        };
        // The scene covers the whole route plus the sensor's useful range.
        let mut lo = Vector2::repeat(f64::INFINITY);
        let mut hi = Vector2::repeat(f64::NEG_INFINITY);
        let steps = (duration_s * 2.0).ceil() as usize;
        for k in 0..=steps {
            let p = motion.world_from_body(&terrain, k as f64 * 0.5).translation.vector;
            lo = lo.inf(&p.xy());
            hi = hi.sup(&p.xy());
        }
        let region = Region {
            min: lo - Vector2::repeat(SCENE_MARGIN_M),
            max: hi + Vector2::repeat(SCENE_MARGIN_M),
        };
        // Like M3ED's penno_parking flights, the drone takes off over a parking lot.
        let parking_at = (platform == Platform::Drone).then(|| drone_start(pitch));
        // A drone that takes off rests on a clear pad.
        let pad = (platform == Platform::Drone && config.drone.takeoff_s > 0.0).then(|| drone_start(pitch));
        let mut scene = build_scene(&config, terrain, region, duration_s, parking_at, &mut rng);
        if let Some(at) = pad {
            scene.clear_around(at, TAKEOFF_PAD_RADIUS_M);
        }
        let rays_in_lidar = match &calibration {
            LidarCalibration::Top(c) => (0..TOP_COLUMNS)
                .flat_map(|w| (0..TOP_ROWS).map(move |row| (Point3::origin(), c.direction_in_lidar(row, w))))
                .collect(),
            LidarCalibration::Ouster(c) => (0..OUSTER_COLUMNS)
                .flat_map(|col| (0..OUSTER_BEAMS).map(move |b| c.beam_in_lidar(b, col)))
                .collect(),
        };
        Ok(Simulator {
            rays_in_lidar,
            config,
            platform,
            seed,
            scene,
            motion,
            calibration,
            body_from_sensor,
            sensor_from_lidar,
        })
    }

    /// Number of sweeps in the sequence.
    pub fn len(&self) -> usize {
        self.config.frames
    }

    /// Whether the sequence has no sweeps (never: the config requires at least one).
    pub fn is_empty(&self) -> bool {
        self.config.frames == 0
    }

    /// The platform simulated.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// The config in use.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The seed the scene was drawn from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The LiDAR's calibration (constant over the sequence).
    pub fn calibration(&self) -> &LidarCalibration {
        &self.calibration
    }

    /// The LiDAR frame's pose in the sensor frame (the TOP extrinsic, or the OS1's
    /// `lidar_to_sensor_transform` in metres).
    pub fn sensor_from_lidar(&self) -> Isometry3<f64> {
        self.sensor_from_lidar
    }

    /// Number of objects in the scene (clutter and labelled).
    pub fn scene_object_count(&self) -> usize {
        self.scene.objects.len()
    }

    /// Terrain height at world `(x, y)` (m).
    pub fn ground_height(&self, x: f64, y: f64) -> f64 {
        self.scene.terrain.height(x, y)
    }

    /// The scene (terrain, roads, objects), for the camera renderer.
    pub(crate) fn scene(&self) -> &Scene {
        &self.scene
    }

    /// The scene, for tests that stage their own objects.
    #[cfg(test)]
    pub(crate) fn scene_mut(&mut self) -> &mut Scene {
        &mut self.scene
    }

    /// Seconds since the sequence start (the time base of the scene's motion).
    pub(crate) fn seconds(&self, time_micros: i64) -> f64 {
        (time_micros - self.config.start_time_micros) as f64 * 1e-6
    }

    fn world_from_sensor_s(&self, t: f64) -> Isometry3<f64> {
        self.motion.world_from_body(&self.scene.terrain, t) * self.body_from_sensor
    }

    /// Sensor pose in the world at `time_micros`.
    pub fn world_from_sensor_at(&self, time_micros: i64) -> Isometry3<f64> {
        self.world_from_sensor_s(self.seconds(time_micros))
    }

    /// IMU samples (sensor frame) on the IMU's fixed time grid in `[start_micros, end_micros)`.
    pub fn imu_samples(&self, start_micros: i64, end_micros: i64) -> Vec<ImuSample> {
        let period = (1e6 / self.config.imu.rate_hz).round().max(1.0) as i64;
        let origin = self.config.start_time_micros;
        let first =
            (start_micros - origin).div_euclid(period) + i64::from((start_micros - origin).rem_euclid(period) != 0);
        let cfg = &self.config.imu;
        let mut out = Vec::new();
        let mut k = first;
        loop {
            let t_us = origin + k * period;
            if t_us >= end_micros {
                break;
            }
            let gap_seed = mix_seed(&[self.seed, STREAM_IMU_GAP, k.div_euclid(4) as u64]);
            let missing = ChaCha8Rng::seed_from_u64(gap_seed).random::<f64>() < cfg.gap_probability;
            let (accel, gyro) = if missing {
                (Vector3::repeat(f64::NAN), Vector3::repeat(f64::NAN))
            } else {
                let (f, w) = ideal_imu(|t| self.world_from_sensor_s(t), self.seconds(t_us));
                let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(&[self.seed, STREAM_IMU, k as u64]));
                let na = Vector3::from_fn(|_, _| gaussian(&mut rng) * cfg.accel_noise_mps2);
                let ng = Vector3::from_fn(|_, _| gaussian(&mut rng) * cfg.gyro_noise_radps);
                (f + na, w + ng)
            };
            out.push(ImuSample {
                timestamp_micros: t_us,
                accel_mps2: accel,
                gyro_radps: gyro,
            });
            k += 1;
        }
        out
    }

    /// Sweep `index`: LiDAR data, poses, IMU and ground truth, computed directly from the index.
    pub fn sweep(&self, index: usize) -> Result<SimSweep, SimError> {
        if index >= self.config.frames {
            return Err(SimError::SweepOutOfRange {
                index,
                len: self.config.frames,
            });
        }
        let start_us = self.config.start_time_micros + index as i64 * SWEEP_PERIOD_MICROS;
        let ref_us = start_us + SWEEP_PERIOD_MICROS / 2;
        let t0 = self.seconds(start_us);
        let t_ref = self.seconds(ref_us);
        let rolling = self.config.rolling_shutter;
        let column_time = |fraction: f64| if rolling { t0 + fraction * 0.1 } else { t_ref };
        let world_from_sensor = self.world_from_sensor_s(t_ref);
        let world_from_lidar_ref = world_from_sensor * self.sensor_from_lidar;

        let (max_range, e_max, az_margin) = match &self.calibration {
            LidarCalibration::Top(c) => (
                self.config.vehicle.max_range_m,
                c.beam_inclinations_rad.iter().fold(0.0f64, |m, v| m.max(v.abs())),
                0.0,
            ),
            LidarCalibration::Ouster(c) => (
                self.config.lidar.ouster_max_range_m,
                c.beam_altitude_angles_deg
                    .iter()
                    .fold(0.0f64, |m, v| m.max(v.abs()))
                    .to_radians(),
                c.beam_azimuth_angles_deg
                    .iter()
                    .fold(0.0f64, |m, v| m.max(v.abs()))
                    .to_radians(),
            ),
        };
        let sweep_scene = self.prepare(&world_from_lidar_ref, t0, t_ref, max_range, e_max, az_margin);

        let seed = self.seed;
        let lidar = match &self.calibration {
            LidarCalibration::Top(calib) => {
                let model = ReturnModel {
                    range_at_10pct_m: self.config.lidar.top_range_at_10pct_m,
                    max_range_m: max_range,
                    range_noise_m: self.config.lidar.range_noise_m,
                    dropout: self.config.lidar.dropout,
                };
                let columns: Vec<(Isometry3<f64>, Vec<TopPixel>)> = (0..TOP_COLUMNS)
                    .into_par_iter()
                    .map(|w| {
                        let t = column_time((w as f64 + 0.5) / TOP_COLUMNS as f64);
                        let world_from_vehicle = self.motion.world_from_body(&self.scene.terrain, t);
                        let world_from_lidar = world_from_vehicle * self.body_from_sensor * self.sensor_from_lidar;
                        let az = calib.column_azimuth(w);
                        let rays = self.rays_in_lidar[w * TOP_ROWS..(w + 1) * TOP_ROWS].iter().copied();
                        let hits = self.trace_column(&sweep_scene, &world_from_lidar, t, az, rays, max_range);
                        let mut rng =
                            ChaCha8Rng::seed_from_u64(mix_seed(&[seed, STREAM_COLUMN, index as u64, w as u64]));
                        let pixels = hits
                            .iter()
                            .map(|hit| {
                                let Some(hit) = hit else { return (0.0, 0.0, 0.0, 0) };
                                match model.measure(hit, hit.t, &mut rng) {
                                    Some(r) => {
                                        let rho = hit.surface.reflectivity as f64;
                                        let c = hit.cos_incidence;
                                        let intensity =
                                            (rho * (0.3 + 0.7 * c) * (0.95 + 0.1 * rng.random::<f64>())).max(0.0);
                                        let elongation = hit.surface.elongation as f64
                                            + 0.5 * (1.0 - c).powi(2)
                                            + 0.05 * rng.random::<f64>();
                                        (r as f32, intensity as f32, elongation as f32, hit.track_id)
                                    }
                                    None => (0.0, 0.0, 0.0, 0),
                                }
                            })
                            .collect();
                        (world_from_vehicle, pixels)
                    })
                    .collect();
                let n = TOP_ROWS * TOP_COLUMNS;
                let mut image = TopRangeImage {
                    range_m: vec![0.0; n],
                    intensity: vec![0.0; n],
                    elongation: vec![0.0; n],
                    track_id: vec![0; n],
                    column_world_from_vehicle: Vec::with_capacity(TOP_COLUMNS),
                };
                for (w, (pose, pixels)) in columns.into_iter().enumerate() {
                    image.column_world_from_vehicle.push(pose);
                    for (row, (r, i, e, id)) in pixels.into_iter().enumerate() {
                        let k = row * TOP_COLUMNS + w;
                        image.range_m[k] = r;
                        image.intensity[k] = i;
                        image.elongation[k] = e;
                        image.track_id[k] = id;
                    }
                }
                LidarSweep::Top(image)
            }
            LidarCalibration::Ouster(calib) => {
                let model = ReturnModel {
                    range_at_10pct_m: self.config.lidar.ouster_range_at_10pct_m,
                    max_range_m: max_range,
                    range_noise_m: self.config.lidar.range_noise_m,
                    dropout: self.config.lidar.dropout,
                };
                let n_mm = calib.lidar_origin_to_beam_origin_mm;
                type Pixel = (u32, u16, u16, u16, u32);
                let columns: Vec<Vec<Pixel>> = (0..OUSTER_COLUMNS)
                    .into_par_iter()
                    .map(|c| {
                        let t = column_time(c as f64 / OUSTER_COLUMNS as f64);
                        let world_from_lidar = self.world_from_sensor_s(t) * self.sensor_from_lidar;
                        let az = calib.encoder_angle(c);
                        let rays = self.rays_in_lidar[c * OUSTER_BEAMS..(c + 1) * OUSTER_BEAMS]
                            .iter()
                            .copied();
                        let hits = self.trace_column(&sweep_scene, &world_from_lidar, t, az, rays, max_range);
                        let mut rng =
                            ChaCha8Rng::seed_from_u64(mix_seed(&[seed, STREAM_COLUMN, index as u64, c as u64]));
                        hits.iter()
                            .map(|hit| {
                                let sky = 1500.0 + 80.0 * (rng.random::<f64>() - 0.5);
                                let Some(hit) = hit else {
                                    return (0, 0, 0, sky.clamp(0.0, 65535.0) as u16, 0);
                                };
                                let rho = hit.surface.reflectivity as f64;
                                let ambient = (300.0 + 1200.0 * rho + 60.0 * (rng.random::<f64>() - 0.5))
                                    .clamp(0.0, 65535.0) as u16;
                                // The Ouster range runs from the lidar origin: r = t + n.
                                let range_m = hit.t + n_mm * 0.001;
                                match model.measure(hit, range_m, &mut rng) {
                                    Some(r) => {
                                        let range_mm = ((r * 1000.0).round() as u32).min(0x000F_FFFF);
                                        let reflectivity = (rho.min(1.0) * 100.0 + 4.0 * (rng.random::<f64>() - 0.5))
                                            .clamp(1.0, 255.0)
                                            as u16;
                                        let signal = (15.0 * model.signal(hit, r) * (0.9 + 0.2 * rng.random::<f64>()))
                                            .clamp(1.0, 65535.0)
                                            as u16;
                                        (range_mm, reflectivity, signal, ambient, hit.track_id)
                                    }
                                    None => (0, 0, 0, ambient, 0),
                                }
                            })
                            .collect()
                    })
                    .collect();
                let n = OUSTER_BEAMS * OUSTER_COLUMNS;
                let mut scan = OusterScan {
                    range_mm: vec![0; n],
                    reflectivity: vec![0; n],
                    signal: vec![0; n],
                    near_ir: vec![0; n],
                    track_id: vec![0; n],
                    column_timestamp_ns: (0..OUSTER_COLUMNS)
                        .map(|c| start_us * 1000 + (c as i64 * SWEEP_PERIOD_MICROS * 1000) / OUSTER_COLUMNS as i64)
                        .collect(),
                };
                for (c, pixels) in columns.into_iter().enumerate() {
                    for (b, (r, refl, sig, nir, id)) in pixels.into_iter().enumerate() {
                        let k = b * OUSTER_COLUMNS + c;
                        scan.range_mm[k] = r;
                        scan.reflectivity[k] = refl;
                        scan.signal[k] = sig;
                        scan.near_ir[k] = nir;
                        scan.track_id[k] = id;
                    }
                }
                LidarSweep::Ouster(scan)
            }
        };

        // Ground truth at the reference time.
        let sensor_from_world = world_from_sensor.inverse();
        let lidar_origin = world_from_lidar_ref.translation.vector;
        let track_ids = match &lidar {
            LidarSweep::Top(image) => &image.track_id,
            LidarSweep::Ouster(scan) => &scan.track_id,
        };
        let mut counts = std::collections::BTreeMap::<u32, u32>::new();
        for &id in track_ids.iter().filter(|&&id| id != 0) {
            *counts.entry(id).or_default() += 1;
        }
        let mut objects = Vec::new();
        for object in &self.scene.objects {
            let Some(label) = object.label else { continue };
            let pose = object.world_from_object(&self.scene.terrain, t_ref);
            let box_in_world = object.shape.label_box.transformed(&pose);
            let hits = counts.get(&object.track_id).copied().unwrap_or(0);
            let distance = (box_in_world.center().coords - lidar_origin).norm();
            if hits == 0 && distance > max_range {
                continue;
            }
            let before = object
                .world_from_object(&self.scene.terrain, t_ref - 0.05)
                .translation
                .vector;
            let after = object
                .world_from_object(&self.scene.terrain, t_ref + 0.05)
                .translation
                .vector;
            objects.push(ObjectTruth {
                track_id: object.track_id,
                class: label.class(),
                label,
                box_in_sensor: object.shape.label_box.transformed(&(sensor_from_world * pose)),
                box_in_world,
                num_lidar_points: hits,
                velocity_in_world: (after - before) / 0.1,
            });
        }
        objects.sort_by_key(|o| o.track_id);

        let origin = world_from_sensor.translation.vector;
        let ground = self.scene.terrain.height(origin.x, origin.y);
        let imu = if self.platform == Platform::Vehicle {
            Vec::new()
        } else {
            self.imu_samples(start_us, start_us + SWEEP_PERIOD_MICROS)
        };
        Ok(SimSweep {
            index,
            timestamp_micros: start_us,
            reference_time_micros: ref_us,
            world_from_sensor,
            lidar,
            objects,
            gravity_in_sensor: world_from_sensor.rotation.inverse() * Vector3::new(0.0, 0.0, -1.0),
            ground_height_m: ground,
            sensor_height_above_ground_m: origin.z - ground,
            imu,
        })
    }

    /// Finds the objects a sweep can hit and bins them by the LiDAR-frame azimuth interval
    /// their bounding spheres cover, widened for the platform's and objects' motion.
    fn prepare(
        &self,
        world_from_lidar_ref: &Isometry3<f64>,
        t0: f64,
        t_ref: f64,
        max_range: f64,
        e_max: f64,
        az_margin: f64,
    ) -> SweepScene<'_> {
        let rolling = self.config.rolling_shutter;
        // How far the LiDAR moves and turns during the sweep, relative to the reference pose.
        let (mut shift, mut turn) = (0.0f64, 0.0f64);
        if rolling {
            for k in 0..=20 {
                let p = self.world_from_sensor_s(t0 + 0.1 * k as f64 / 20.0) * self.sensor_from_lidar;
                shift = shift.max((p.translation.vector - world_from_lidar_ref.translation.vector).norm());
                turn = turn.max(rotation_gap(&p.rotation, &world_from_lidar_ref.rotation));
            }
            // Margin for motion between the samples.
            shift *= 1.1;
            turn *= 1.1;
        }
        let lidar_from_world = world_from_lidar_ref.inverse();
        let bin_width = std::f64::consts::TAU / AZIMUTH_BINS as f64;
        let mut sweep = SweepScene {
            objects: Vec::new(),
            fixed: Vec::new(),
            bins: vec![Vec::new(); AZIMUTH_BINS],
            everywhere: Vec::new(),
        };
        for object in &self.scene.objects {
            let moving = rolling && object.max_speed() > 0.0;
            let pose = object.world_from_object(&self.scene.terrain, t_ref);
            let centre = lidar_from_world * (pose * object.shape.local_box.center());
            let motion_margin = if moving { object.max_speed() * 0.06 } else { 0.0 };
            let radius = object.shape.bounding_radius + motion_margin + shift + 0.03;
            let d = centre.coords.norm();
            if d - radius > max_range {
                continue;
            }
            let index = sweep.objects.len() as u32;
            let place = |sweep: &mut SweepScene<'_>| {
                if d <= radius {
                    sweep.everywhere.push(index);
                    return;
                }
                let alpha = (radius / d).asin() + turn;
                let elevation = (centre.z / d).asin();
                if elevation.abs() - alpha > e_max {
                    // Above or below every beam: never hit, but keep the index valid.
                    return;
                }
                if alpha >= std::f64::consts::FRAC_PI_2 - elevation.abs() {
                    sweep.everywhere.push(index);
                    return;
                }
                let half = (alpha.sin() / elevation.cos()).min(1.0).asin() + az_margin + bin_width;
                if half >= std::f64::consts::PI {
                    sweep.everywhere.push(index);
                    return;
                }
                let az = centre.y.atan2(centre.x);
                let lo = ((az - half) / bin_width).floor() as i64;
                let hi = ((az + half) / bin_width).floor() as i64;
                for b in lo..=hi {
                    sweep.bins[b.rem_euclid(AZIMUTH_BINS as i64) as usize].push(index);
                }
            };
            place(&mut sweep);
            sweep.objects.push(object);
            sweep
                .fixed
                .push((!moving).then(|| (pose.inverse(), pose * object.shape.local_box.center())));
        }
        sweep
    }

    /// Traces the rays of one column (LiDAR frame origins and directions) at time `t`.
    fn trace_column(
        &self,
        sweep: &SweepScene<'_>,
        world_from_lidar: &Isometry3<f64>,
        t: f64,
        azimuth: f64,
        rays: impl Iterator<Item = (Point3<f64>, Vector3<f64>)>,
        max_range: f64,
    ) -> ColumnHits {
        let bin_width = std::f64::consts::TAU / AZIMUTH_BINS as f64;
        let bin = ((azimuth / bin_width).floor() as i64).rem_euclid(AZIMUTH_BINS as i64) as usize;
        let mut candidates: Vec<Candidate<'_>> = sweep.bins[bin]
            .iter()
            .chain(&sweep.everywhere)
            .map(|&i| {
                let i = i as usize;
                let object = sweep.objects[i];
                let (object_from_world, centre) = match &sweep.fixed[i] {
                    Some((inverse, centre)) => (*inverse, *centre),
                    None => {
                        let pose = object.world_from_object(&self.scene.terrain, t);
                        (pose.inverse(), pose * object.shape.local_box.center())
                    }
                };
                Candidate {
                    object,
                    rotation: object_from_world.rotation.to_rotation_matrix().into_inner(),
                    translation: object_from_world.translation.vector,
                    centre,
                    radius_sq: object.shape.bounding_radius * object.shape.bounding_radius,
                    distance_sq: (centre - world_from_lidar.translation.vector).coords.norm_squared(),
                }
            })
            .collect();
        // Nearest first, so a hit prunes the farther objects by their bounding spheres.
        candidates.sort_by(|a, b| a.distance_sq.total_cmp(&b.distance_sq));
        rays.map(|(origin, dir)| {
            let ray = world_ray(world_from_lidar, origin, dir);
            self.trace(&ray, &candidates, max_range + 0.1)
        })
        .collect()
    }

    /// The nearest surface along a world ray among `candidates` and the ground.
    fn trace(&self, ray: &Ray, candidates: &[Candidate<'_>], t_max: f64) -> Option<TraceHit> {
        let mut best: Option<TraceHit> = None;
        let mut limit = t_max;
        for c in candidates {
            // Bounding-sphere test in the world frame before moving the ray into the object's.
            let oc = ray.origin - c.centre;
            let b = oc.dot(&ray.dir);
            let cc = oc.norm_squared() - c.radius_sq;
            let disc = b * b - cc;
            if disc < 0.0 || (cc > 0.0 && b > 0.0) || -b - disc.sqrt() > limit {
                continue;
            }
            let local = Ray {
                origin: Point3::from(c.rotation * ray.origin.coords + c.translation),
                dir: c.rotation * ray.dir,
            };
            if let Some((hit, surface)) = c.object.shape.intersect(&local, limit) {
                limit = hit.t;
                best = Some(TraceHit {
                    t: hit.t,
                    cos_incidence: local.dir.dot(&hit.normal).abs(),
                    surface,
                    track_id: c.object.track_id,
                });
            }
        }
        if let Some(hit) = self.scene.terrain.intersect(ray, limit) {
            let p = ray.at(hit.t);
            best = Some(TraceHit {
                t: hit.t,
                cos_incidence: ray.dir.dot(&hit.normal).abs(),
                surface: self.scene.roads.surface_at(p.x, p.y),
                track_id: 0,
            });
        }
        best
    }

    /// Unlabelled static clutter (buildings, walls, poles, trees) near the sensor of `sweep`: each
    /// object's tight box, cut at the terrain under its centre (the part above ground), in the
    /// sweep's sensor frame; kept when its BEV footprint reaches within `max_range_m` of the sensor.
    pub fn clutter_in_sensor(&self, sweep: &SimSweep, max_range_m: f64) -> Vec<Box3> {
        let sensor_from_world = sweep.world_from_sensor.inverse();
        let mut out = Vec::new();
        for object in &self.scene.objects {
            if object.label.is_some() {
                continue;
            }
            let pose = object.world_from_object(&self.scene.terrain, 0.0);
            let mut b = object.shape.local_box.transformed(&pose);
            let reach = 0.5 * b.l.hypot(b.w);
            // Static clutter stands upright: cut the part sunk below the terrain.
            let ground = self.scene.terrain.height(b.x, b.y);
            let top = b.z + 0.5 * b.h;
            let bottom = b.z - 0.5 * b.h;
            if bottom < ground && top > ground {
                b.h = top - ground;
                b.z = 0.5 * (top + ground);
            }
            let in_sensor = b.transformed(&sensor_from_world);
            if in_sensor.x.hypot(in_sensor.y) - reach <= max_range_m {
                out.push(in_sensor);
            }
        }
        out
    }

    /// The sweep's returns as a reader reconstructs them, in the sweep's sensor frame.
    pub fn sweep_points(&self, sweep: &SimSweep) -> Vec<SweepPoint> {
        match (&self.calibration, &sweep.lidar) {
            (LidarCalibration::Top(calib), LidarSweep::Top(image)) => {
                let vehicle_from_world = sweep.world_from_sensor.inverse();
                let mut out = Vec::new();
                for row in 0..TOP_ROWS {
                    for w in 0..TOP_COLUMNS {
                        let k = row * TOP_COLUMNS + w;
                        let r = image.range_m[k];
                        if r <= 0.0 {
                            continue;
                        }
                        let p = calib.point_in_vehicle(row, w, r as f64);
                        let world = image.column_world_from_vehicle[w] * p;
                        out.push(SweepPoint {
                            position: vehicle_from_world * world,
                            track_id: image.track_id[k],
                        });
                    }
                }
                out
            }
            (LidarCalibration::Ouster(calib), LidarSweep::Ouster(scan)) => {
                let mut out = Vec::new();
                for b in 0..OUSTER_BEAMS {
                    for c in 0..OUSTER_COLUMNS {
                        let k = b * OUSTER_COLUMNS + c;
                        if scan.range_mm[k] == 0 {
                            continue;
                        }
                        out.push(SweepPoint {
                            position: calib.point_in_sensor(b, c, scan.range_mm[k]),
                            track_id: scan.track_id[k],
                        });
                    }
                }
                out
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::object::{ObjectShape, Part, Surface, vehicle_shape};
    use crate::sim::scene::Motion;
    use crate::sim::terrain::TerrainKind;

    /// A standing quadruped on flat ground with the scene replaced by `objects` placed in the
    /// sensor frame of sweep 0 as `(shape, x, y, track id)`.
    fn staged(objects: Vec<(ObjectShape, f64, f64, u32)>) -> Simulator {
        let mut config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        config.terrain.kind = TerrainKind::Flat;
        config.quadruped.speed_mps = 0.0;
        config.lidar.dropout = 0.0;
        let mut sim = Simulator::new(config, Platform::Quadruped, 5).unwrap();
        let world_from_sensor = sim.world_from_sensor_at(sim.config.start_time_micros + 50_000);
        sim.scene.objects = objects
            .into_iter()
            .map(|(shape, x, y, track_id)| {
                let p = world_from_sensor * Point3::new(x, y, 0.0);
                let (yaw, _, _) = crate::geometry::pose::euler_from_isometry(&world_from_sensor);
                SceneObject {
                    shape,
                    motion: Motion::Static(crate::sim::platform::pose(Vector3::new(p.x, p.y, 0.0), yaw, 0.0, 0.0)),
                    label: Some(FineLabel::Van),
                    track_id,
                }
            })
            .collect();
        sim
    }

    fn screen() -> ObjectShape {
        ObjectShape::new(vec![Part::cuboid(
            Vector3::new(0.5, 3.0, 3.0),
            Vector3::new(0.0, 0.0, 1.5),
            Surface::diffuse(0.5),
        )])
    }

    fn car() -> ObjectShape {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        vehicle_shape(FineLabel::Car, &mut rng)
    }

    fn hits(sweep: &SimSweep, track: u32) -> u32 {
        sweep
            .objects
            .iter()
            .find(|o| o.track_id == track)
            .map_or(0, |o| o.num_lidar_points)
    }

    #[test]
    fn an_object_behind_another_gets_no_hits() {
        let occluded = staged(vec![(screen(), 8.0, 0.0, 1), (car(), 16.0, 0.0, 2)])
            .sweep(0)
            .unwrap();
        assert!(hits(&occluded, 1) > 200, "screen: {}", hits(&occluded, 1));
        assert_eq!(hits(&occluded, 2), 0, "the car behind the screen must not be hit");
        assert!(
            occluded.objects.iter().any(|o| o.track_id == 2),
            "the hidden car is still labelled"
        );
        let visible = staged(vec![(car(), 16.0, 0.0, 2)]).sweep(0).unwrap();
        assert!(hits(&visible, 2) > 50, "car alone: {}", hits(&visible, 2));
    }

    #[test]
    fn nearer_of_two_side_by_side_hits_wins_per_ray() {
        // A car half-hidden: the screen covers y ∈ [−1.5, 1.5] at 8 m; a car at 16 m, y = 3
        // peeks out past the screen's left edge, so it gets some but fewer hits than alone.
        let partial = staged(vec![(screen(), 8.0, 0.0, 1), (car(), 16.0, 2.6, 2)])
            .sweep(0)
            .unwrap();
        let alone = staged(vec![(car(), 16.0, 2.6, 2)]).sweep(0).unwrap();
        let (p, a) = (hits(&partial, 2), hits(&alone, 2));
        assert!(p > 0 && p < a, "partially occluded {p}, alone {a}");
    }

    #[test]
    fn mix_seed_separates_streams() {
        assert_ne!(mix_seed(&[1, 2, 3]), mix_seed(&[1, 3, 2]));
        assert_ne!(mix_seed(&[0]), mix_seed(&[1]));
        assert_eq!(mix_seed(&[7, 8]), mix_seed(&[7, 8]));
    }
}
