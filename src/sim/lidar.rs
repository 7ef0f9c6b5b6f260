//! LiDAR beam models and the ray-casting engine. The Waymo-TOP-like model follows the Waymo
//! range-image conventions (row 0 = highest inclination, column azimuth from the extrinsic's
//! yaw); the OS1-64 model follows the Ouster lookup-table formula that M3ED readers invert, so
//! a pixel's ray is exactly the ray a reader reconstructs for it.

use nalgebra::{Isometry3, Matrix4, Point3, Rotation3, Translation3, UnitQuaternion, Vector3};
use rand::RngExt;

use super::object::Surface;
use super::shape::Ray;
use crate::geometry::pose::{isometry_from_row_major, rotation_from_euler};

/// Rows of the TOP range image.
pub const TOP_ROWS: usize = 64;
/// Columns of the TOP range image.
pub const TOP_COLUMNS: usize = 2650;
/// Lowest TOP beam inclination (rad), Waymo's `beam_inclination_min`.
pub const TOP_INCLINATION_MIN_RAD: f64 = -0.312;
/// Highest TOP beam inclination (rad), Waymo's `beam_inclination_max`.
pub const TOP_INCLINATION_MAX_RAD: f64 = 0.045;
/// Beams of the OS1-64.
pub const OUSTER_BEAMS: usize = 64;
/// Measurement columns per OS1-64 frame in 2048×10 mode.
pub const OUSTER_COLUMNS: usize = 2048;
/// OS1 design `lidar_to_sensor_transform` (row-major, mm): 180° about z, 36.18 mm up.
pub const OS1_LIDAR_TO_SENSOR: [f64; 16] = [
    -1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 36.18, 0.0, 0.0, 0.0, 1.0,
];
/// OS1 design `imu_to_sensor_transform` (row-major, mm).
pub const OS1_IMU_TO_SENSOR: [f64; 16] = [
    1.0, 0.0, 0.0, 6.253, 0.0, 1.0, 0.0, -11.775, 0.0, 0.0, 1.0, 7.645, 0.0, 0.0, 0.0, 1.0,
];
/// OS1-64 `lidar_origin_to_beam_origin_mm`.
pub const OS1_BEAM_ORIGIN_MM: f64 = 15.806;

/// The calibration of the Waymo-TOP-like LiDAR, in Waymo `LaserCalibration` terms.
#[derive(Debug, Clone, PartialEq)]
pub struct TopCalibration {
    /// Beam inclinations (rad), ascending as Waymo stores them: index 0 is the lowest beam,
    /// which is range-image row 63.
    pub beam_inclinations_rad: Vec<f64>,
    /// `beam_inclination_min` (rad).
    pub inclination_min_rad: f64,
    /// `beam_inclination_max` (rad).
    pub inclination_max_rad: f64,
    /// The LiDAR's pose in the vehicle frame (Waymo `extrinsic`).
    pub vehicle_from_lidar: Isometry3<f64>,
}

impl TopCalibration {
    /// Non-uniform inclinations between the documented min and max, denser towards the
    /// horizon (as on the real TOP), each perturbed by a small calibration offset.
    pub fn generate(lidar_height_m: f64, beam_offset_deg: f64, rng: &mut impl rand::Rng) -> TopCalibration {
        let span = TOP_INCLINATION_MAX_RAD - TOP_INCLINATION_MIN_RAD;
        let n = TOP_ROWS;
        // u = 0 at the top beam; spacing grows from 0.6× to 1.4× the mean towards the bottom.
        let spacing_at_top = 0.6;
        let map = |u: f64| spacing_at_top * u + (1.0 - spacing_at_top) * u * u;
        let jitter = beam_offset_deg.to_radians().min(0.2 * span / n as f64);
        let mut incl: Vec<f64> = (0..n)
            .map(|i| {
                let u = (n - 1 - i) as f64 / (n - 1) as f64;
                TOP_INCLINATION_MAX_RAD - 0.004 - (span - 0.008) * map(u) + jitter * rng.random_range(-1.0..1.0)
            })
            .collect();
        incl.sort_by(f64::total_cmp);
        TopCalibration {
            beam_inclinations_rad: incl,
            inclination_min_rad: TOP_INCLINATION_MIN_RAD,
            inclination_max_rad: TOP_INCLINATION_MAX_RAD,
            // Like the real TOP: ahead of the rear axle, rotated about z by ~148°.
            vehicle_from_lidar: Isometry3::from_parts(
                Translation3::new(1.43, 0.0, lidar_height_m),
                UnitQuaternion::from_rotation_matrix(&rotation_from_euler(148f64.to_radians(), 0.0, 0.0)),
            ),
        }
    }

    /// Inclination of range-image row `row` (row 0 = highest) (rad).
    pub fn row_inclination(&self, row: usize) -> f64 {
        self.beam_inclinations_rad[TOP_ROWS - 1 - row]
    }

    /// Azimuth of column `column` in the LiDAR frame (rad): Waymo's
    /// `(2·(W − w − 0.5)/W − 1)·π − yaw(extrinsic)`.
    pub fn column_azimuth(&self, column: usize) -> f64 {
        let m = self.vehicle_from_lidar.rotation.to_rotation_matrix();
        let az_correction = m[(1, 0)].atan2(m[(0, 0)]);
        let ratio = (TOP_COLUMNS as f64 - column as f64 - 0.5) / TOP_COLUMNS as f64;
        (2.0 * ratio - 1.0) * std::f64::consts::PI - az_correction
    }

    /// Unit direction of pixel `(row, column)` in the LiDAR frame.
    pub fn direction_in_lidar(&self, row: usize, column: usize) -> Vector3<f64> {
        let az = self.column_azimuth(column);
        let incl = self.row_inclination(row);
        Vector3::new(az.cos() * incl.cos(), az.sin() * incl.cos(), incl.sin())
    }

    /// The vehicle-frame point of pixel `(row, column)` with range `range_m`, as Waymo's
    /// range-image conversion computes it before the per-pixel pose.
    pub fn point_in_vehicle(&self, row: usize, column: usize, range_m: f64) -> Point3<f64> {
        self.vehicle_from_lidar * Point3::from(self.direction_in_lidar(row, column) * range_m)
    }
}

/// The calibration of the OS1-64, in Ouster metadata terms (angles in degrees, lengths in mm).
#[derive(Debug, Clone, PartialEq)]
pub struct OusterCalibration {
    /// `beam_altitude_angles` (degrees, up positive), one per beam, beam 0 the highest.
    pub beam_altitude_angles_deg: Vec<f64>,
    /// `beam_azimuth_angles` (degrees), one per beam.
    pub beam_azimuth_angles_deg: Vec<f64>,
    /// `lidar_origin_to_beam_origin_mm`.
    pub lidar_origin_to_beam_origin_mm: f64,
    /// `lidar_to_sensor_transform`, row-major 4×4, translation in mm.
    pub lidar_to_sensor_transform: [f64; 16],
    /// `imu_to_sensor_transform`, row-major 4×4, translation in mm.
    pub imu_to_sensor_transform: [f64; 16],
    /// `columns_per_frame` (2048).
    pub columns_per_frame: usize,
    /// `pixels_per_column` (64).
    pub pixels_per_column: usize,
}

impl OusterCalibration {
    /// An OS1-64 in 2048×10 mode: altitudes evenly spread over ±22.5°, the four-beam azimuth
    /// stagger of ±3.1°/±1.05°, the OS1 design transforms, each angle perturbed by a small offset.
    pub fn generate(beam_offset_deg: f64, rng: &mut impl rand::Rng) -> OusterCalibration {
        let n = OUSTER_BEAMS;
        let jitter = beam_offset_deg.min(0.2 * 45.0 / n as f64);
        let altitudes = (0..n)
            .map(|i| 22.5 - 45.0 * i as f64 / (n - 1) as f64 + jitter * rng.random_range(-1.0..1.0))
            .collect();
        let stagger = [3.1, 1.05, -1.05, -3.1];
        let azimuths = (0..n)
            .map(|i| stagger[i % 4] + jitter * rng.random_range(-1.0..1.0))
            .collect();
        OusterCalibration {
            beam_altitude_angles_deg: altitudes,
            beam_azimuth_angles_deg: azimuths,
            lidar_origin_to_beam_origin_mm: OS1_BEAM_ORIGIN_MM,
            lidar_to_sensor_transform: OS1_LIDAR_TO_SENSOR,
            imu_to_sensor_transform: OS1_IMU_TO_SENSOR,
            columns_per_frame: OUSTER_COLUMNS,
            pixels_per_column: OUSTER_BEAMS,
        }
    }

    /// `lidar_to_sensor_transform` as a pose in metres.
    pub fn sensor_from_lidar(&self) -> Isometry3<f64> {
        let mut m = self.lidar_to_sensor_transform;
        for i in [3, 7, 11] {
            m[i] *= 0.001;
        }
        isometry_from_row_major(&m, 1e-6).unwrap_or_else(|| {
            // Not a rigid transform: fall back to its translation only, never panic.
            Isometry3::translation(m[3], m[7], m[11])
        })
    }

    /// Encoder angle of measurement column `column` (rad): θ_enc = 2π − c·2π/W.
    pub fn encoder_angle(&self, column: usize) -> f64 {
        std::f64::consts::TAU - column as f64 * std::f64::consts::TAU / self.columns_per_frame as f64
    }

    /// Beam origin (m) and unit direction of `(beam, column)` in the LiDAR frame.
    pub fn beam_in_lidar(&self, beam: usize, column: usize) -> (Point3<f64>, Vector3<f64>) {
        let theta_enc = self.encoder_angle(column);
        let theta_az = -self.beam_azimuth_angles_deg[beam].to_radians();
        let phi = self.beam_altitude_angles_deg[beam].to_radians();
        let n = self.lidar_origin_to_beam_origin_mm * 0.001;
        let dir = Vector3::new(
            (theta_enc + theta_az).cos() * phi.cos(),
            (theta_enc + theta_az).sin() * phi.cos(),
            phi.sin(),
        );
        (Point3::new(n * theta_enc.cos(), n * theta_enc.sin(), 0.0), dir)
    }

    /// The sensor-frame point (m) of `(beam, column)` with `range_mm`, by the Ouster XYZ
    /// lookup-table formula: ((r − n)·dir + n·(cos θ_enc, sin θ_enc, 0)) mapped by
    /// `lidar_to_sensor_transform`, then mm → m.
    pub fn point_in_sensor(&self, beam: usize, column: usize, range_mm: u32) -> Point3<f64> {
        let theta_enc = self.encoder_angle(column);
        let theta_az = -self.beam_azimuth_angles_deg[beam].to_radians();
        let phi = self.beam_altitude_angles_deg[beam].to_radians();
        let n = self.lidar_origin_to_beam_origin_mm;
        let r = range_mm as f64;
        let x = (r - n) * (theta_enc + theta_az).cos() * phi.cos() + n * theta_enc.cos();
        let y = (r - n) * (theta_enc + theta_az).sin() * phi.cos() + n * theta_enc.sin();
        let z = (r - n) * phi.sin();
        let m = Matrix4::from_row_slice(&self.lidar_to_sensor_transform);
        let p = m * nalgebra::Vector4::new(x, y, z, 1.0);
        Point3::new(p.x, p.y, p.z) * 0.001
    }
}

/// What a traced ray met first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TraceHit {
    /// Distance from the ray origin (m).
    pub t: f64,
    /// |cos| of the angle between the ray and the surface normal.
    pub cos_incidence: f64,
    /// The surface.
    pub surface: Surface,
    /// Track id of a labelled object, 0 otherwise.
    pub track_id: u32,
}

/// Detection and noise model shared by both sensors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReturnModel {
    /// Range at which ρ = 0.1 at normal incidence is at the threshold (m).
    pub range_at_10pct_m: f64,
    /// Hard range cut-off (m).
    pub max_range_m: f64,
    /// Range noise σ (m).
    pub range_noise_m: f64,
    /// Base dropout probability.
    pub dropout: f64,
}

impl ReturnModel {
    /// Relative signal, 1 at the detection threshold: ρ·cosθ / r² scaled by the 10 % range.
    pub fn signal(&self, hit: &TraceHit, range_m: f64) -> f64 {
        let rho = hit.surface.reflectivity as f64;
        rho * hit.cos_incidence.max(0.05) / 0.1 * (self.range_at_10pct_m / range_m.max(0.1)).powi(2)
    }

    /// The measured range of a hit, or `None` when the return is lost.
    pub fn measure(&self, hit: &TraceHit, range_m: f64, rng: &mut impl rand::Rng) -> Option<f64> {
        let s = self.signal(hit, range_m);
        // The detection probability ramps from 0 to 1 across the threshold.
        let p_detect = ((s - 0.8) / 0.4).clamp(0.0, 1.0);
        let p_keep = p_detect * (1.0 - self.dropout) * (1.0 - hit.surface.dropout as f64);
        let u: f64 = rng.random();
        let noise = gaussian(rng) * self.range_noise_m;
        if u >= p_keep {
            return None;
        }
        let measured = range_m + noise;
        (measured > 0.3 && measured <= self.max_range_m).then_some(measured)
    }
}

/// A standard normal sample (Box–Muller).
pub(crate) fn gaussian(rng: &mut impl rand::Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-300);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A ray in the world, for tracing.
pub(crate) fn world_ray(world_from_lidar: &Isometry3<f64>, origin: Point3<f64>, dir: Vector3<f64>) -> Ray {
    Ray {
        origin: world_from_lidar * origin,
        dir: world_from_lidar.rotation * dir,
    }
}

/// Largest angle between two rotations (rad).
pub(crate) fn rotation_gap(a: &UnitQuaternion<f64>, b: &UnitQuaternion<f64>) -> f64 {
    a.angle_to(b)
}

/// Euler `(roll, pitch, yaw)` of a rotation, Waymo's per-pixel pose order.
pub(crate) fn roll_pitch_yaw(r: &Rotation3<f64>) -> (f64, f64, f64) {
    let (yaw, pitch, roll) = crate::geometry::pose::euler_from_rotation(r);
    (roll, pitch, yaw)
}
