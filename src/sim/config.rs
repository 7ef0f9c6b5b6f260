//! Simulator options, deserialisable from TOML. `impl Default` is the one place defaults live.

use serde::{Deserialize, Serialize};

use super::simulator::SimError;
use super::terrain::TerrainKind;

/// Everything a simulated sequence depends on besides the platform and the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Sweeps in the sequence; the scene is laid out to cover them (default 200 = 20 s).
    pub frames: usize,
    /// The most sweeps `frames` may ask for (default 100,000 ≈ 2.8 h): the scene and route are
    /// laid out up front, so a runaway `frames` would allocate until the machine dies.
    pub max_frames: usize,
    /// Start time of sweep 0 (µs since the Unix epoch; default 1_600_000_000_000_000).
    pub start_time_micros: i64,
    /// Whether the platform and actors move during a sweep (rolling shutter); default true.
    pub rolling_shutter: bool,
    /// Ground surface.
    pub terrain: TerrainConfig,
    /// Roads, clutter and actor densities.
    pub scene: SceneConfig,
    /// The car and its Waymo-TOP-like LiDAR.
    pub vehicle: VehicleConfig,
    /// The drone and its OS1-64.
    pub drone: DroneConfig,
    /// The quadruped and its OS1-64.
    pub quadruped: QuadrupedConfig,
    /// LiDAR noise and detection model.
    pub lidar: LidarConfig,
    /// IMU noise and gaps.
    pub imu: ImuConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            frames: 200,
            max_frames: 100_000,
            start_time_micros: 1_600_000_000_000_000,
            rolling_shutter: true,
            terrain: TerrainConfig::default(),
            scene: SceneConfig::default(),
            vehicle: VehicleConfig::default(),
            drone: DroneConfig::default(),
            quadruped: QuadrupedConfig::default(),
            lidar: LidarConfig::default(),
            imu: ImuConfig::default(),
        }
    }
}

/// Ground surface options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TerrainConfig {
    /// `flat`, `sloped` or `rolling` (default `rolling`).
    pub kind: TerrainKind,
    /// Slope of a `sloped` terrain (degrees; default 3).
    pub slope_deg: f64,
    /// Summed wave amplitude of a `rolling` terrain (m; default 0.8).
    pub rolling_amplitude_m: f64,
    /// Typical wavelength of a `rolling` terrain (m; default 90).
    pub rolling_wavelength_m: f64,
}

impl Default for TerrainConfig {
    fn default() -> Self {
        Self {
            kind: TerrainKind::Rolling,
            slope_deg: 3.0,
            rolling_amplitude_m: 0.8,
            rolling_wavelength_m: 90.0,
        }
    }
}

/// Road grid, clutter and actor densities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SceneConfig {
    /// Distance between parallel roads of the grid (m; default 110).
    pub block_pitch_m: f64,
    /// Fraction of blocks that are parking lots (default 0.3); the rest are buildings or parks.
    pub parking_lot_fraction: f64,
    /// Fraction of blocks that are parks with trees and paths (default 0.2).
    pub park_fraction: f64,
    /// Occupied share of parking stalls; curb spaces get half of it (default 0.4).
    pub parking_occupancy: f64,
    /// Moving vehicles per km of road (default 12).
    pub vehicles_per_km: f64,
    /// Walking pedestrians per km of sidewalk (default 14).
    pub pedestrians_per_km: f64,
    /// Cyclists per km of road (default 3).
    pub cyclists_per_km: f64,
    /// Share of moving vehicles that are vans, buses, trucks (default `[0.15, 0.05, 0.08]`).
    pub van_bus_truck_share: [f64; 3],
    /// Share of intersections where a vehicle stops (default 0.35).
    pub stop_probability: f64,
    /// Also draw the clutter that looks most like objects to a detector (default false): hedges,
    /// bushes, fences, unhitched trailers, irregular street fronts and sign posts, all
    /// unlabelled. Off, the scene (and every byte the simulator writes) is as before.
    pub hard_clutter: bool,
}

impl Default for SceneConfig {
    fn default() -> Self {
        Self {
            block_pitch_m: 110.0,
            parking_lot_fraction: 0.3,
            park_fraction: 0.2,
            parking_occupancy: 0.4,
            vehicles_per_km: 12.0,
            pedestrians_per_km: 14.0,
            cyclists_per_km: 3.0,
            van_bus_truck_share: [0.15, 0.05, 0.08],
            stop_probability: 0.35,
            hard_clutter: false,
        }
    }
}

/// The car platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VehicleConfig {
    /// Cruise speed (m/s; default 9).
    pub speed_mps: f64,
    /// Height of the TOP LiDAR above the vehicle frame's ground-level origin (m; default 2.0).
    pub lidar_height_m: f64,
    /// Range cut-off of the TOP LiDAR (m; default 75, as Waymo truncates TOP).
    pub max_range_m: f64,
}

impl Default for VehicleConfig {
    fn default() -> Self {
        Self {
            speed_mps: 9.0,
            lidar_height_m: 2.0,
            max_range_m: 75.0,
        }
    }
}

/// The drone platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DroneConfig {
    /// Lowest flight height above the ground (m; default 5).
    pub min_altitude_m: f64,
    /// Highest flight height above the ground (m; default 40).
    pub max_altitude_m: f64,
    /// Horizontal cruise speed (m/s; default 3).
    pub speed_mps: f64,
    /// Downward pitch of the LiDAR mount (degrees; default 40).
    pub sensor_pitch_down_deg: f64,
    /// Amplitude of the roll/pitch attitude wobble (degrees; default 4).
    pub wobble_deg: f64,
    /// Slow yaw rate on top of the flight heading (degrees/s; default 4).
    pub yaw_rate_dps: f64,
    /// Nose-up tilt at the first sweep beyond the terrain's, as if taking off from a tilted pad
    /// (degrees; default 0): in flight it fades out over `start_tilt_s`; with `takeoff_s` it is
    /// held on the ground and gone once airborne.
    pub start_tilt_deg: f64,
    /// How long the start tilt takes to fade out when the log starts in flight (s; default 3).
    pub start_tilt_s: f64,
    /// Climb from the ground to the flight height (s; default 0: the log starts in flight). With
    /// it the log starts on the ground, as M3ED's flights do (their poses are relative to the
    /// take-off pose): the drone rests on the terrain, tilted with it, for `ground_wait_s`, then
    /// rises while it speeds up along its route.
    pub takeoff_s: f64,
    /// How long the drone rests on the ground before it climbs (s; default 2; with `takeoff_s`).
    pub ground_wait_s: f64,
    /// The LiDAR's height above the ground while the drone rests on it (m; default 0.35).
    pub rest_sensor_height_m: f64,
}

impl Default for DroneConfig {
    fn default() -> Self {
        Self {
            min_altitude_m: 5.0,
            max_altitude_m: 40.0,
            speed_mps: 3.0,
            sensor_pitch_down_deg: 40.0,
            wobble_deg: 4.0,
            yaw_rate_dps: 4.0,
            start_tilt_deg: 0.0,
            start_tilt_s: 3.0,
            takeoff_s: 0.0,
            ground_wait_s: 2.0,
            rest_sensor_height_m: 0.35,
        }
    }
}

/// The quadruped platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuadrupedConfig {
    /// Walking speed (m/s; default 1.25; 0 stands still without gait).
    pub speed_mps: f64,
    /// Height of the LiDAR above the ground (m; default 0.6).
    pub sensor_height_m: f64,
    /// Gait frequency of the body oscillation (Hz; default 2).
    pub gait_frequency_hz: f64,
    /// Gait roll amplitude (degrees; default 2.5).
    pub roll_amplitude_deg: f64,
    /// Gait pitch amplitude (degrees; default 1.5).
    pub pitch_amplitude_deg: f64,
    /// Vertical bounce amplitude (m; default 0.015).
    pub bounce_m: f64,
}

impl Default for QuadrupedConfig {
    fn default() -> Self {
        Self {
            speed_mps: 1.25,
            sensor_height_m: 0.6,
            gait_frequency_hz: 2.0,
            roll_amplitude_deg: 2.5,
            pitch_amplitude_deg: 1.5,
            bounce_m: 0.015,
        }
    }
}

/// LiDAR noise and detection model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LidarConfig {
    /// Standard deviation of the range noise (m; default 0.02).
    pub range_noise_m: f64,
    /// Probability that any return is lost (default 0.01).
    pub dropout: f64,
    /// Range at which a 10 %-reflective target at normal incidence is at the detection
    /// threshold, Waymo TOP (m; default 65).
    pub top_range_at_10pct_m: f64,
    /// The same for the OS1-64 (m; default 40, the OS1 data-sheet figure).
    pub ouster_range_at_10pct_m: f64,
    /// Range cut-off of the OS1-64 (m; default 120).
    pub ouster_max_range_m: f64,
    /// Standard deviation of the per-beam calibration offsets from nominal (degrees; default 0.03).
    pub beam_offset_deg: f64,
}

impl Default for LidarConfig {
    fn default() -> Self {
        Self {
            range_noise_m: 0.02,
            dropout: 0.01,
            top_range_at_10pct_m: 65.0,
            ouster_range_at_10pct_m: 40.0,
            ouster_max_range_m: 120.0,
            beam_offset_deg: 0.03,
        }
    }
}

/// IMU noise and gaps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImuConfig {
    /// Sample rate (Hz; default 400, the M3ED OVC IMU).
    pub rate_hz: f64,
    /// Accelerometer white noise (m/s²; default 0.02).
    pub accel_noise_mps2: f64,
    /// Gyroscope white noise (rad/s; default 0.002).
    pub gyro_noise_radps: f64,
    /// Probability that a block of 4 samples is missing (NaN; default 0.01).
    pub gap_probability: f64,
}

impl Default for ImuConfig {
    fn default() -> Self {
        Self {
            rate_hz: 400.0,
            accel_noise_mps2: 0.02,
            gyro_noise_radps: 0.002,
            gap_probability: 0.01,
        }
    }
}

/// One numeric field's valid range, for [`SimConfig::validate`].
struct Bound {
    field: &'static str,
    value: f64,
    min: f64,
    max: f64,
}

impl SimConfig {
    /// Checks every field against its valid range (finite, within physical and memory-safe
    /// limits), naming the first offending field. [`Simulator::new`](super::Simulator::new) runs
    /// it before laying anything out. Issue 18: `range_noise_m = nan` wrote sweeps with 0 points,
    /// a NaN speed was blamed on `scene.block_pitch_m`, and huge values allocated without end.
    pub fn validate(&self) -> Result<(), SimError> {
        let invalid = |field: &'static str, reason: String| SimError::InvalidConfig { field, reason };
        if self.frames == 0 {
            return Err(invalid("frames", "must be at least 1".into()));
        }
        if self.frames > self.max_frames {
            return Err(invalid(
                "frames",
                format!(
                    "{} is over the cap of {} (raise `max_frames` to allow it)",
                    self.frames, self.max_frames
                ),
            ));
        }
        let duration_micros = i64::try_from(self.frames)
            .ok()
            .and_then(|n| n.checked_mul(200_000))
            .and_then(|d| self.start_time_micros.checked_add(d));
        if duration_micros.is_none() {
            return Err(invalid(
                "start_time_micros",
                format!("{} + the sequence's duration overflows", self.start_time_micros),
            ));
        }
        let (t, sc, v, d, q, l, i) = (
            &self.terrain,
            &self.scene,
            &self.vehicle,
            &self.drone,
            &self.quadruped,
            &self.lidar,
            &self.imu,
        );
        let b = |field, value, min, max| Bound { field, value, min, max };
        let bounds = [
            b("terrain.slope_deg", t.slope_deg, -45.0, 45.0),
            b("terrain.rolling_amplitude_m", t.rolling_amplitude_m, 0.0, 50.0),
            b("terrain.rolling_wavelength_m", t.rolling_wavelength_m, 1.0, 10_000.0),
            b("scene.block_pitch_m", sc.block_pitch_m, 40.0, 10_000.0),
            b("scene.parking_lot_fraction", sc.parking_lot_fraction, 0.0, 1.0),
            b("scene.park_fraction", sc.park_fraction, 0.0, 1.0),
            b("scene.parking_occupancy", sc.parking_occupancy, 0.0, 1.0),
            b("scene.vehicles_per_km", sc.vehicles_per_km, 0.0, 1_000.0),
            b("scene.pedestrians_per_km", sc.pedestrians_per_km, 0.0, 1_000.0),
            b("scene.cyclists_per_km", sc.cyclists_per_km, 0.0, 1_000.0),
            b("scene.van_bus_truck_share", sc.van_bus_truck_share[0], 0.0, 1.0),
            b("scene.van_bus_truck_share", sc.van_bus_truck_share[1], 0.0, 1.0),
            b("scene.van_bus_truck_share", sc.van_bus_truck_share[2], 0.0, 1.0),
            b("scene.stop_probability", sc.stop_probability, 0.0, 1.0),
            b("vehicle.speed_mps", v.speed_mps, 0.0, 60.0),
            b("vehicle.lidar_height_m", v.lidar_height_m, 0.0, 10.0),
            b("vehicle.max_range_m", v.max_range_m, 1.0, 1_000.0),
            b("drone.min_altitude_m", d.min_altitude_m, 1.0, 500.0),
            b("drone.max_altitude_m", d.max_altitude_m, 1.0, 500.0),
            b("drone.speed_mps", d.speed_mps, 0.0, 50.0),
            b("drone.sensor_pitch_down_deg", d.sensor_pitch_down_deg, -90.0, 90.0),
            b("drone.wobble_deg", d.wobble_deg, 0.0, 45.0),
            b("drone.yaw_rate_dps", d.yaw_rate_dps, -360.0, 360.0),
            b("drone.start_tilt_deg", d.start_tilt_deg, -45.0, 45.0),
            b("drone.start_tilt_s", d.start_tilt_s, 0.1, 600.0),
            b("drone.takeoff_s", d.takeoff_s, 0.0, 600.0),
            b("drone.ground_wait_s", d.ground_wait_s, 0.0, 600.0),
            b("drone.rest_sensor_height_m", d.rest_sensor_height_m, 0.05, 5.0),
            b("quadruped.speed_mps", q.speed_mps, 0.0, 10.0),
            b("quadruped.sensor_height_m", q.sensor_height_m, 0.05, 10.0),
            b("quadruped.gait_frequency_hz", q.gait_frequency_hz, 0.0, 20.0),
            b("quadruped.roll_amplitude_deg", q.roll_amplitude_deg, 0.0, 45.0),
            b("quadruped.pitch_amplitude_deg", q.pitch_amplitude_deg, 0.0, 45.0),
            b("quadruped.bounce_m", q.bounce_m, 0.0, 1.0),
            b("lidar.range_noise_m", l.range_noise_m, 0.0, 10.0),
            b("lidar.dropout", l.dropout, 0.0, 1.0),
            b("lidar.top_range_at_10pct_m", l.top_range_at_10pct_m, 0.1, 1_000.0),
            b("lidar.ouster_range_at_10pct_m", l.ouster_range_at_10pct_m, 0.1, 1_000.0),
            b("lidar.ouster_max_range_m", l.ouster_max_range_m, 1.0, 1_000.0),
            b("lidar.beam_offset_deg", l.beam_offset_deg, 0.0, 5.0),
            b("imu.rate_hz", i.rate_hz, 1.0, 10_000.0),
            b("imu.accel_noise_mps2", i.accel_noise_mps2, 0.0, 100.0),
            b("imu.gyro_noise_radps", i.gyro_noise_radps, 0.0, 100.0),
            b("imu.gap_probability", i.gap_probability, 0.0, 1.0),
        ];
        for Bound { field, value, min, max } in bounds {
            // Negated so that NaN fails too.
            if !(value >= min && value <= max) {
                return Err(invalid(field, format!("{value} is not in {min} ..= {max}")));
            }
        }
        if d.max_altitude_m < d.min_altitude_m {
            return Err(invalid(
                "drone.min_altitude_m",
                format!("need min ({}) ≤ max ({})", d.min_altitude_m, d.max_altitude_m),
            ));
        }
        if sc.parking_lot_fraction + sc.park_fraction > 1.0 {
            return Err(invalid(
                "scene.park_fraction",
                format!(
                    "parking_lot_fraction + park_fraction = {} exceeds 1",
                    sc.parking_lot_fraction + sc.park_fraction
                ),
            ));
        }
        if sc.van_bus_truck_share.iter().sum::<f64>() > 1.0 {
            return Err(invalid(
                "scene.van_bus_truck_share",
                format!("shares {:?} sum over 1", sc.van_bus_truck_share),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_valid() {
        SimConfig::default().validate().unwrap();
    }

    fn field_of(config: SimConfig) -> &'static str {
        match config.validate() {
            Err(SimError::InvalidConfig { field, .. }) => field,
            other => panic!("expected an invalid-config error, got {other:?}"),
        }
    }

    /// Issue 18: NaN and runaway values are refused at load, each naming its own field.
    #[test]
    fn non_finite_and_huge_values_name_their_field() {
        let d = SimConfig::default;
        let mut c = d();
        c.lidar.range_noise_m = f64::NAN;
        assert_eq!(field_of(c), "lidar.range_noise_m");
        let mut c = d();
        c.drone.speed_mps = f64::NAN;
        assert_eq!(field_of(c), "drone.speed_mps");
        let mut c = d();
        c.vehicle.speed_mps = f64::INFINITY;
        assert_eq!(field_of(c), "vehicle.speed_mps");
        let mut c = d();
        c.scene.vehicles_per_km = 1e12;
        assert_eq!(field_of(c), "scene.vehicles_per_km");
        let mut c = d();
        c.imu.rate_hz = 1e15;
        assert_eq!(field_of(c), "imu.rate_hz");
        let mut c = d();
        c.frames = 1_000_000_000;
        assert_eq!(field_of(c), "frames");
        let mut c = d();
        c.frames = 1_000_000_000;
        c.max_frames = usize::MAX;
        c.start_time_micros = i64::MAX - 10;
        assert_eq!(field_of(c), "start_time_micros");
        let mut c = d();
        c.frames = 150_000;
        c.max_frames = 200_000;
        c.validate().unwrap();
    }

    #[test]
    fn a_nan_in_a_toml_file_names_its_field() {
        let c: SimConfig = toml::from_str("[lidar]\nrange_noise_m = nan\n").unwrap();
        assert_eq!(field_of(c), "lidar.range_noise_m");
    }
}
