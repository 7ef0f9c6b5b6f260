//! Simulator options, deserialisable from TOML. `impl Default` is the one place defaults live.

use serde::{Deserialize, Serialize};

use super::terrain::TerrainKind;

/// Everything a simulated sequence depends on besides the platform and the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Sweeps in the sequence; the scene is laid out to cover them (default 200 = 20 s).
    pub frames: usize,
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
