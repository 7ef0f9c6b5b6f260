//! Writes a simulated drone or quadruped sequence as a real M3ED pair, `<seq>_data.h5` +
//! `<seq>_pose_gt.h5`, through the M3ED writer, plus the simulator's ground truth as
//! `<seq>_boxes_gt.jsonl` in the evaluator's JSON-lines box format (`docs/eval.md`).
//!
//! Mapping (the reader must get back exactly what the simulator cast):
//! - metadata: the sweep's `OusterCalibration` angles, beam-origin offset and transforms, 2048×10
//!   LEGACY, 16 columns per packet, `pixel_shift_by_row` from the beam azimuths;
//! - `/ouster/data`: one row per sweep, pixel (beam, measurement column) = the scan's
//!   `beam * 2048 + column` (both are indexed by measurement id, so no restaggering);
//!   `ts_start` / `ts_end` = first / last column timestamp (µs, floor);
//! - `/ovc/imu`: the sweeps' IMU samples in the Ouster sensor frame, NaN rows kept; the IMU's
//!   `T_to_prophesee_left` equals the LiDAR's, since both streams are in the sensor frame;
//! - `<seq>_pose_gt.h5`: per sweep `Ln_T_L0 = (W_0⁻¹·W_n)⁻¹` with `W_n` the simulator's
//!   mid-sweep `world_from_sensor` (the frame of its boxes), stamped with the sweep's `ts_end`
//!   because M3ED tooling pairs poses with sweeps by nearest `ts_end`;
//! - `/ovc/rgb`: the OVC colour camera ([`ovc_rgb_calibration`], 1280×800, radtan, rigid on the
//!   Ouster) rendered by `sim::render_camera_at` at the OVC's 25 Hz (a 40,000 µs grid from the
//!   sequence start), the sensor and the objects at each image's own time; stored BGR.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Matrix3, Translation3, UnitQuaternion};
use rayon::prelude::*;
use thiserror::Error;

use super::camera_render::{CameraRenderConfig, render_camera_at};

use super::lidar::{OUSTER_BEAMS, OUSTER_COLUMNS, OusterCalibration};
use super::simulator::{LidarCalibration, LidarSweep, OusterScan, SWEEP_PERIOD_MICROS, SimError, Simulator};
use super::write_truth::{TruthParquetPaths, TruthTables, TruthWriteError};
use crate::atomic_file::AtomicFile;
use crate::frame::{CameraAxes, CameraCalibration, Distortion, Platform};
use crate::sources::m3ed::metadata::DataFormat;
use crate::sources::m3ed::{
    M3edWriter, M3edWriterSetup, MetadataFlavour, OusterMetadata, PoseTimeType, SweepPixels, WriteError, write_pose_gt,
};

/// Errors writing a simulated sequence as M3ED files.
#[derive(Debug, Error)]
pub enum SimWriteError {
    /// The simulator refused a sweep.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The M3ED writer failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The ground-truth Parquet files could not be written.
    #[error(transparent)]
    Truth(#[from] TruthWriteError),
    /// The platform carries no OS1 (the car's Waymo writer is a separate path).
    #[error(
        "platform `{0}`: M3ED files hold an OS1; the car is written as a Waymo segment (`sim::write_waymo_segment`)"
    )]
    NotOuster(Platform),
    /// The sequence name would make the reader infer another platform.
    #[error(
        "sequence name `{name}`: a {platform} sequence must start with `{prefix}` (the reader derives the platform from it)"
    )]
    BadName {
        /// The name given.
        name: String,
        /// The simulated platform.
        platform: Platform,
        /// The prefix it needs.
        prefix: &'static str,
    },
    /// Reading or writing a plain file failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SimWriteError + '_ {
    move |source| SimWriteError::Io {
        path: path.to_path_buf(),
        error: source,
    }
}

/// What [`write_m3ed_sequence`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct M3edWriteSummary {
    /// The sequence name (file-name prefix).
    pub sequence: String,
    /// `<seq>_data.h5`.
    pub data_path: PathBuf,
    /// `<seq>_pose_gt.h5`.
    pub pose_path: PathBuf,
    /// `<seq>_boxes_gt.jsonl`.
    pub truth_path: PathBuf,
    /// `<seq>_boxes_gt.parquet` and `<seq>_frames_gt.parquet` (set when the sequence is complete).
    pub truth_parquet: Option<TruthParquetPaths>,
    /// LiDAR returns per sweep.
    pub points_per_sweep: Vec<usize>,
    /// Labelled objects (boxes written) per sweep.
    pub objects_per_sweep: Vec<usize>,
    /// Labelled objects with at least one return, per sweep.
    pub objects_hit_per_sweep: Vec<usize>,
    /// IMU rows written (NaN gaps included).
    pub imu_rows: usize,
    /// RGB images written to `/ovc/rgb/data`.
    pub images: usize,
    /// Size of the files together (bytes).
    pub bytes_written: u64,
}

/// `mean …, min …, max …` of per-sweep counts, for the writers' one-screen summaries.
pub(crate) fn stats(v: &[usize]) -> String {
    let n = v.len().max(1);
    let mean = v.iter().sum::<usize>() as f64 / n as f64;
    let min = v.iter().min().copied().unwrap_or(0);
    let max = v.iter().max().copied().unwrap_or(0);
    format!("mean {mean:.1}, min {min}, max {max}")
}

impl M3edWriteSummary {
    /// A one-screen text summary (what `boxlayer simulate` prints), `elapsed` the run time.
    pub fn display(&self, elapsed: std::time::Duration) -> String {
        let mut out = String::new();
        out.push_str(&format!("sequence       {}\n", self.sequence));
        out.push_str(&format!("sweeps         {}\n", self.points_per_sweep.len()));
        out.push_str(&format!("points/sweep   {}\n", stats(&self.points_per_sweep)));
        out.push_str(&format!(
            "objects/sweep  {} (boxes written)\n",
            stats(&self.objects_per_sweep)
        ));
        out.push_str(&format!("  with points  {}\n", stats(&self.objects_hit_per_sweep)));
        out.push_str(&format!("imu rows       {}\n", self.imu_rows));
        let c = ovc_rgb_calibration();
        out.push_str(&format!(
            "rgb images     {} ({}×{}, {} Hz)\n",
            self.images,
            c.width,
            c.height,
            1_000_000 / OVC_IMAGE_PERIOD_MICROS
        ));
        for path in [&self.data_path, &self.pose_path, &self.truth_path] {
            out.push_str(&format!("wrote          {}\n", path.display()));
        }
        if let Some(parquet) = &self.truth_parquet {
            for path in [&parquet.boxes, &parquet.frames] {
                out.push_str(&format!("wrote          {}\n", path.display()));
            }
        }
        out.push_str(&format!(
            "bytes written  {} ({:.1} MiB)\n",
            self.bytes_written,
            self.bytes_written as f64 / (1024.0 * 1024.0)
        ));
        out.push_str(&format!("time           {:.2} s\n", elapsed.as_secs_f64()));
        out
    }
}

/// The M3ED name prefix of a platform (`falcon_` drone, `spot_` quadruped).
pub fn m3ed_prefix(platform: Platform) -> Option<&'static str> {
    match platform {
        Platform::Drone => Some("falcon_"),
        Platform::Quadruped => Some("spot_"),
        _ => None,
    }
}

/// The default sequence name: `falcon_sim_seed<seed>` or `spot_sim_seed<seed>`.
pub fn default_sequence_name(platform: Platform, seed: u64) -> Option<String> {
    m3ed_prefix(platform).map(|p| format!("{p}sim_seed{seed}"))
}

/// The Ouster metadata whose XYZ lookup table reproduces every ray of `calib`.
pub fn ouster_metadata(calib: &OusterCalibration) -> OusterMetadata {
    let columns = calib.columns_per_frame;
    // Destaggering lines up beams that point the same way: measurement column c of beam i looks
    // where column c + azimuth_i·W/360 of a zero-offset beam would (as os1_64_2048x10 does).
    let min_az = calib
        .beam_azimuth_angles_deg
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let shifts = calib
        .beam_azimuth_angles_deg
        .iter()
        .map(|a| ((a - min_az) * columns as f64 / 360.0).round() as i64)
        .collect();
    OusterMetadata {
        flavour: MetadataFlavour::LegacyFlat,
        lidar_mode: format!("{columns}x10"),
        beam_altitude_angles_deg: calib.beam_altitude_angles_deg.clone(),
        beam_azimuth_angles_deg: calib.beam_azimuth_angles_deg.clone(),
        lidar_origin_to_beam_origin_mm: calib.lidar_origin_to_beam_origin_mm,
        beam_origin_z_mm: 0.0,
        lidar_to_sensor_transform: calib.lidar_to_sensor_transform,
        imu_to_sensor_transform: calib.imu_to_sensor_transform,
        data_format: DataFormat {
            pixels_per_column: calib.pixels_per_column,
            columns_per_packet: 16,
            columns_per_frame: columns,
            pixel_shift_by_row: shifts,
            column_window: (0, columns - 1),
            udp_profile_lidar: "LEGACY".into(),
        },
    }
}

/// The scan's pixels in the writer's layout. Both are `[beam * columns + measurement id]`, so
/// this is a copy, not a restaggering.
pub fn sweep_pixels(scan: &OusterScan) -> SweepPixels {
    SweepPixels {
        range_mm: scan.range_mm.clone(),
        reflectivity: scan.reflectivity.clone(),
        signal: scan.signal.clone(),
        near_ir: scan.near_ir.clone(),
    }
}

/// `(ts_start, ts_end)` (µs) of a scan: its first and last column timestamps, floored to µs.
pub fn sweep_times_micros(scan: &OusterScan) -> Option<(i64, i64)> {
    let first = scan.column_timestamp_ns.first()?;
    let last = scan.column_timestamp_ns.last()?;
    Some((first.div_euclid(1000), last.div_euclid(1000)))
}

/// Where the (not simulated) Prophesee-left camera sits: 8 cm ahead of, 3 cm left of and 6 cm
/// below the Ouster sensor origin, looking along the sensor's x axis (camera x right, y down).
pub fn sensor_from_prophesee_left() -> Isometry3<f64> {
    // Columns: the camera's x, y, z axes in the sensor frame.
    let rotation = Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0);
    Isometry3::from_parts(
        Translation3::new(0.08, 0.03, -0.06),
        UnitQuaternion::from_matrix(&rotation),
    )
}

/// Time between OVC images (µs): 25 Hz, as M3ED re-times `/ovc/ts`.
pub const OVC_IMAGE_PERIOD_MICROS: i64 = 40_000;

/// The simulated OVC colour camera: 1280×800 (M3ED's `/ovc/rgb`), a ~70° × 48° lens with mild
/// barrel distortion (Kalibr radtan), 8 cm ahead of, 2 cm right of and 6 cm below the Ouster
/// sensor origin, looking along the sensor's x axis (camera x right, y down, z forward).
pub fn ovc_rgb_calibration() -> CameraCalibration {
    let prophesee = sensor_from_prophesee_left();
    CameraCalibration {
        width: 1280,
        height: 800,
        fx: 905.0,
        fy: 903.5,
        cx: 641.3,
        cy: 398.2,
        distortion: Distortion::RadTan {
            k1: -0.118,
            k2: 0.082,
            p1: 0.00045,
            p2: -0.00031,
            k3: 0.0,
        },
        axes: CameraAxes::OpenCv,
        sensor_from_camera: Isometry3::from_parts(Translation3::new(0.08, -0.02, -0.06), prophesee.rotation),
    }
}

/// OVC image times (µs) in `[start, end)`: the 25 Hz grid that starts at `origin`.
pub fn ovc_image_times(origin: i64, start: i64, end: i64) -> Vec<i64> {
    let first = (start - origin).div_euclid(OVC_IMAGE_PERIOD_MICROS)
        + i64::from((start - origin).rem_euclid(OVC_IMAGE_PERIOD_MICROS) != 0);
    (first..)
        .map(|k| origin + k * OVC_IMAGE_PERIOD_MICROS)
        .take_while(|&t| t < end)
        .collect()
}

/// Writes sweeps `0..frames` of `sim` into `out_dir` as `<sequence_name>_data.h5`,
/// `<sequence_name>_pose_gt.h5` and `<sequence_name>_boxes_gt.jsonl` (boxes in each sweep's
/// sensor frame, one line per labelled object per sweep). Same simulator, frames and name give
/// identical bytes.
pub fn write_m3ed_sequence(
    sim: &Simulator,
    frames: usize,
    out_dir: &Path,
    sequence_name: &str,
) -> Result<M3edWriteSummary, SimWriteError> {
    let platform = sim.platform();
    let LidarCalibration::Ouster(calib) = sim.calibration() else {
        return Err(SimWriteError::NotOuster(platform));
    };
    let prefix = m3ed_prefix(platform).ok_or(SimWriteError::NotOuster(platform))?;
    if !sequence_name.starts_with(prefix) || sequence_name.contains(['/', '\\']) {
        return Err(SimWriteError::BadName {
            name: sequence_name.to_string(),
            platform,
            prefix,
        });
    }
    if frames == 0 || frames > sim.len() {
        return Err(SimError::InvalidConfig {
            field: "frames",
            reason: format!("{frames} sweeps asked for, the simulator has 1..={}", sim.len()),
        }
        .into());
    }
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let data_path = out_dir.join(format!("{sequence_name}_data.h5"));
    let pose_path = out_dir.join(format!("{sequence_name}_pose_gt.h5"));
    let truth_path = out_dir.join(format!("{sequence_name}_boxes_gt.jsonl"));

    let lidar_to_prophesee_left = sensor_from_prophesee_left().inverse();
    let setup = M3edWriterSetup {
        metadata: ouster_metadata(calib),
        metadata_flavour: MetadataFlavour::LegacyFlat,
        lidar_to_prophesee_left,
        rgb: Some(ovc_rgb_calibration()),
        // The simulated IMU samples are in the Ouster sensor frame, so the OVC IMU sits there.
        imu_to_prophesee_left: lidar_to_prophesee_left,
        first_frame_id: 0,
        version: "boxlayer-sim".into(),
        raw_bag_name: format!("{sequence_name}.bag"),
    };
    let mut writer = M3edWriter::create(&data_path, setup)?;
    // Every file is written under a temporary name and renamed when complete (issue 18: a killed
    // `simulate` left files that looked complete); the JSON-lines truth is renamed last.
    let mut truth = AtomicFile::create(&truth_path).map_err(io(&truth_path))?;

    let mut summary = M3edWriteSummary {
        sequence: sequence_name.to_string(),
        data_path: data_path.clone(),
        pose_path: pose_path.clone(),
        truth_path: truth_path.clone(),
        truth_parquet: None,
        points_per_sweep: Vec::with_capacity(frames),
        objects_per_sweep: Vec::with_capacity(frames),
        objects_hit_per_sweep: Vec::with_capacity(frames),
        imu_rows: 0,
        images: 0,
        bytes_written: 0,
    };
    let mut pose_times = Vec::with_capacity(frames);
    let mut l0_from_sensor = Vec::with_capacity(frames);
    let mut world_from_l0: Option<Isometry3<f64>> = None;
    let mut truth_tables = TruthTables::new(sequence_name, platform);
    for index in 0..frames {
        let sweep = sim.sweep(index)?;
        let LidarSweep::Ouster(scan) = &sweep.lidar else {
            return Err(SimWriteError::NotOuster(platform));
        };
        if scan.range_mm.len() != OUSTER_BEAMS * OUSTER_COLUMNS {
            return Err(WriteError::Invalid {
                path: data_path.clone(),
                what: format!("sweep {index}"),
                detail: format!("{} pixels in the simulated scan", scan.range_mm.len()),
            }
            .into());
        }
        let (ts_start, ts_end) = sweep_times_micros(scan).ok_or_else(|| WriteError::Invalid {
            path: data_path.clone(),
            what: format!("sweep {index}"),
            detail: "no column timestamps".into(),
        })?;
        writer.write_sweep(ts_start, ts_end, &sweep_pixels(scan))?;
        for s in &sweep.imu {
            // NaN rows stay NaN: M3ED marks missing VectorNav samples so.
            writer.write_imu(
                s.timestamp_micros,
                [s.accel_mps2.x, s.accel_mps2.y, s.accel_mps2.z],
                [s.gyro_radps.x, s.gyro_radps.y, s.gyro_radps.z],
            );
        }
        summary.imu_rows += sweep.imu.len();

        // The camera images taken during this sweep, rendered in parallel, written in order.
        let camera = ovc_rgb_calibration();
        let render_config = CameraRenderConfig::default();
        let times = ovc_image_times(
            sim.config().start_time_micros,
            sweep.timestamp_micros,
            sweep.timestamp_micros + SWEEP_PERIOD_MICROS,
        );
        let images = times
            .par_iter()
            .map(|&t| render_camera_at(sim, t, &camera, &render_config))
            .collect::<Result<Vec<_>, SimError>>()?;
        for (&t, image) in times.iter().zip(&images) {
            writer.write_image(t, image)?;
        }
        summary.images += images.len();

        // M3ED's world is the first pose's frame L0.
        let w0 = *world_from_l0.get_or_insert(sweep.world_from_sensor);
        pose_times.push(ts_end);
        l0_from_sensor.push(w0.inverse() * sweep.world_from_sensor);

        for object in &sweep.objects {
            let text = super::truth_json_line(object, sequence_name, index, platform);
            writeln!(truth, "{text}").map_err(io(&truth_path))?;
        }
        truth_tables.push_sweep(index, &sweep);
        summary
            .points_per_sweep
            .push(scan.range_mm.iter().filter(|&&r| r != 0).count());
        summary.objects_per_sweep.push(sweep.objects.len());
        summary
            .objects_hit_per_sweep
            .push(sweep.objects.iter().filter(|o| o.num_lidar_points > 0).count());
    }
    // The pose file goes in place before the data file: a data file without its pose file
    // would read as a sequence without poses.
    write_pose_gt(
        &pose_path,
        &pose_times,
        &l0_from_sensor,
        &lidar_to_prophesee_left,
        PoseTimeType::Int64,
    )?;
    writer.finish()?;
    let parquet = truth_tables.write(out_dir)?;
    truth.commit().map_err(io(&truth_path))?;
    for path in [&data_path, &pose_path, &truth_path, &parquet.boxes, &parquet.frames] {
        summary.bytes_written += std::fs::metadata(path).map_err(io(path))?.len();
    }
    summary.truth_parquet = Some(parquet);
    Ok(summary)
}

/// Simulates `frames` sweeps of `platform` from `seed` with `config` and writes them with
/// [`write_m3ed_sequence`] under the default name into `out_dir` (what `boxlayer simulate` runs).
pub fn simulate_m3ed(
    mut config: super::SimConfig,
    platform: Platform,
    frames: usize,
    seed: u64,
    out_dir: &Path,
) -> Result<M3edWriteSummary, SimWriteError> {
    let name = default_sequence_name(platform, seed).ok_or(SimWriteError::NotOuster(platform))?;
    config.frames = frames;
    let sim = Simulator::new(config, platform, seed)?;
    write_m3ed_sequence(&sim, frames, out_dir, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::m3ed::XyzLut;
    use rand::SeedableRng;

    #[test]
    fn metadata_lut_gives_the_simulated_rays() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let calib = OusterCalibration::generate(0.05, &mut rng);
        let lut = XyzLut::new(&ouster_metadata(&calib));
        for &(beam, column, range) in &[(0usize, 0usize, 5_000u32), (13, 700, 23_456), (63, 2047, 900)] {
            let expect = calib.point_in_sensor(beam, column, range);
            let got = lut.point(beam, column, range);
            for k in 0..3 {
                assert!((f64::from(got[k]) - expect[k]).abs() < 1e-4, "{got:?} vs {expect:?}");
            }
        }
    }

    #[test]
    fn prophesee_camera_looks_along_sensor_x() {
        let pose = sensor_from_prophesee_left();
        let forward = pose.rotation * nalgebra::Vector3::z();
        let right = pose.rotation * nalgebra::Vector3::x();
        assert!((forward - nalgebra::Vector3::x()).norm() < 1e-12);
        assert!((right + nalgebra::Vector3::y()).norm() < 1e-12);
    }

    #[test]
    fn ovc_images_sit_on_the_25_hz_grid() {
        // Sweep 0 (0–100 ms) holds images at 0, 40 and 80 ms; sweep 1 at 120 and 160 ms.
        assert_eq!(ovc_image_times(0, 0, 100_000), vec![0, 40_000, 80_000]);
        assert_eq!(ovc_image_times(0, 100_000, 200_000), vec![120_000, 160_000]);
        assert_eq!(ovc_image_times(7, 100_000, 200_000), vec![120_007, 160_007]);
        assert!(ovc_image_times(0, 1, 39_999).is_empty());
        let c = ovc_rgb_calibration();
        assert_eq!((c.width, c.height), (1280, 800));
        // It looks along the sensor's x axis.
        let forward = c.sensor_from_camera.rotation * nalgebra::Vector3::z();
        assert!((forward - nalgebra::Vector3::x()).norm() < 1e-12);
    }

    #[test]
    fn names_follow_the_m3ed_prefixes() {
        assert_eq!(
            default_sequence_name(Platform::Drone, 4).as_deref(),
            Some("falcon_sim_seed4")
        );
        assert_eq!(
            default_sequence_name(Platform::Quadruped, 0).as_deref(),
            Some("spot_sim_seed0")
        );
        assert_eq!(default_sequence_name(Platform::Vehicle, 0), None);
    }
}
