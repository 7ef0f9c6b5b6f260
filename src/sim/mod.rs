//! Simulates outdoor scenes and the sensors of the three platforms (a car with a
//! Waymo-TOP-like LiDAR, a drone and a quadruped with an Ouster OS1-64) and returns each sweep
//! in memory with exact ground truth: range images or Ouster measurement grids, poses, IMU
//! samples, and every labelled object's box with the number of LiDAR returns it produced.
//! Output is deterministic: the same config, platform and seed give identical sweeps, each
//! computed directly from its index. The simulation itself knows no file format; only
//! `write_m3ed` hands sweeps to the M3ED writer in `sources::m3ed`, and `write_waymo` to the
//! TFRecord writer and protos in `sources::waymo`. `camera_render` rasterises the scene through
//! real camera models. `detection_noise` and `noisy_sequence` turn the ground truth into seeded,
//! plausibly wrong detections of several modelled detectors; they run no real detector.

mod camera_render;
mod config;
pub mod detection_noise;
mod lidar;
pub mod noisy_sequence;
mod object;
mod path;
mod platform;
mod scene;
pub mod shape;
mod simulator;
pub mod terrain;
mod write_m3ed;
mod write_truth;
mod write_waymo;

pub use camera_render::{
    CameraRenderConfig, MAP_STEP_PX, render_camera, render_camera_at, render_camera_posed, undistort_ray,
};
pub use config::{
    DroneConfig, ImuConfig, LidarConfig, QuadrupedConfig, SceneConfig, SimConfig, TerrainConfig, VehicleConfig,
};
pub use detection_noise::{ClassNoise, DetectionNoiseModel, DetectorNoiseProfile, standard_detector_profiles};
pub use lidar::{
    OS1_BEAM_ORIGIN_MM, OS1_IMU_TO_SENSOR, OS1_LIDAR_TO_SENSOR, OUSTER_BEAMS, OUSTER_COLUMNS, OusterCalibration,
    TOP_COLUMNS, TOP_INCLINATION_MAX_RAD, TOP_INCLINATION_MIN_RAD, TOP_ROWS, TopCalibration,
};
pub use noisy_sequence::{NoisyFrame, NoisySequence, NoisySource, simulate_noisy_sequence};
pub use object::FineLabel;
pub use platform::GRAVITY_MPS2;
pub use simulator::{
    LidarCalibration, LidarSweep, ObjectTruth, OusterScan, SWEEP_PERIOD_MICROS, SimError, SimSweep, Simulator,
    SweepPoint, TopRangeImage,
};
pub use terrain::TerrainKind;
pub use write_m3ed::{
    M3edWriteSummary, OVC_IMAGE_PERIOD_MICROS, SimWriteError, default_sequence_name, m3ed_prefix, ouster_metadata,
    ovc_image_times, ovc_rgb_calibration, sensor_from_prophesee_left, simulate_m3ed, sweep_pixels, sweep_times_micros,
    write_m3ed_sequence,
};
pub use write_truth::{TruthParquetPaths, TruthTables, TruthWriteError, truth_json_line};
pub use write_waymo::{
    CAMERA_SHUTTER_S, CameraRenderer, DEFAULT_CAMERA_IMAGES, DEFAULT_JPEG_QUALITY, WaymoWriteError, WaymoWriteOptions,
    WaymoWriteSummary, camera_calibrations, default_segment_name, laser_calibration, laser_label, projected_labels,
    segment_file_name, simulate_waymo, simulate_waymo_with, top_range_images, upright_box, write_waymo_segment,
    write_waymo_segment_with,
};
