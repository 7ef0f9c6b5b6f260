//! Writes M3ED-format files: `<seq>_data.h5` (Ouster LEGACY packets built from per-pixel
//! measurements, metadata JSON, sweep times, OVC RGB images with calibration, OVC IMU) and
//! `<seq>_pose_gt.h5`, with the dataset names, types, LZF compression and chunking of the real
//! files. The simulator writes its sequences with it and the tests build fixtures with it.
//!
//! Not written (nothing in boxlayer reads them): the Prophesee event streams and their
//! `*_map_prophesee_*` index maps, the gray OVC cameras and the Ouster IMU packets.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Group};
use image::RgbImage;
use nalgebra::Isometry3;
use ndarray::{Array1, Array2, Array3, ArrayView3, s};
use thiserror::Error;

use crate::atomic_file::partial_path;
use crate::frame::{CameraCalibration, Distortion};
use crate::geometry::pose::row_major_from_isometry;

use super::metadata::{MetadataFlavour, OusterMetadata};
use super::sweep::{RANGE_MASK, VALID_COLUMN_STATUS};

/// Creates (truncating) an HDF5 file whose root group stores no modification time, so equal
/// content gives equal bytes. Writers create `partial_path(final)` and [`commit`] it when done.
fn create_file(path: &Path) -> hdf5::Result<hdf5::File> {
    hdf5::File::with_options()
        .with_fcpl(|p| p.obj_track_times(false))
        .create(path)
}

/// Closes an HDF5 file written under `partial_path(path)` (all its handles must be dropped) and
/// renames it to `path`, so a file under its final name is always complete (issue 18: a killed
/// `simulate` left half-written `.h5` files under their final names).
fn commit(path: &Path, file: hdf5::File) -> Result<(), WriteError> {
    file.flush().map_err(hdf5_error(path, "flush"))?;
    file.close().map_err(hdf5_error(path, "close"))?;
    std::fs::rename(partial_path(path), path).map_err(|e| WriteError::Io {
        path: path.to_path_buf(),
        what: format!("rename from {}", partial_path(path).display()),
        error: e,
    })
}

/// Encoder ticks per revolution of an OS1.
const ENCODER_TICKS_PER_TURN: u64 = 90_112;

/// Errors writing M3ED files.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The HDF5 library refused an operation.
    #[error("{path}: {what}: {detail}")]
    Hdf5 {
        /// The file.
        path: PathBuf,
        /// The dataset or step.
        what: String,
        /// The library's message.
        detail: String,
    },
    /// The operating system refused a step (the final rename).
    #[error("{path}: {what}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The step.
        what: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The caller's data does not fit the format.
    #[error("{path}: {what}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was being written.
        what: String,
        /// What was wrong.
        detail: String,
    },
}

/// One sweep's measurements per (beam row, measurement column), row-major
/// (`[row * columns_per_frame + column]`), in the sensor's own staggered order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SweepPixels {
    /// RANGE (mm, 20 bits); 0 = no return.
    pub range_mm: Vec<u32>,
    /// REFLECTIVITY.
    pub reflectivity: Vec<u16>,
    /// SIGNAL.
    pub signal: Vec<u16>,
    /// NEAR_IR.
    pub near_ir: Vec<u16>,
}

impl SweepPixels {
    /// All-zero pixels (no returns) for `rows × columns`.
    pub fn empty(rows: usize, columns: usize) -> Self {
        SweepPixels {
            range_mm: vec![0; rows * columns],
            reflectivity: vec![0; rows * columns],
            signal: vec![0; rows * columns],
            near_ir: vec![0; rows * columns],
        }
    }
}

/// Everything fixed for a whole data file.
#[derive(Debug, Clone)]
pub struct M3edWriterSetup {
    /// The Ouster metadata (beam angles, data format).
    pub metadata: OusterMetadata,
    /// Which JSON layout to store it in.
    pub metadata_flavour: MetadataFlavour,
    /// LiDAR → Prophesee-left (`/ouster/calib/T_to_prophesee_left`).
    pub lidar_to_prophesee_left: Isometry3<f64>,
    /// The RGB camera, placed by `sensor_from_camera`; `None` writes no `/ovc/rgb`.
    pub rgb: Option<CameraCalibration>,
    /// OVC IMU → Prophesee-left.
    pub imu_to_prophesee_left: Isometry3<f64>,
    /// Ouster `frame_id` of the first row.
    pub first_frame_id: u16,
    /// Root attribute `version`.
    pub version: String,
    /// Root attribute `raw_bag_name`.
    pub raw_bag_name: String,
}

/// Streams one `<seq>_data.h5`: sweeps and images go to disk as they come, times and IMU
/// samples are written by [`M3edWriter::finish`].
pub struct M3edWriter {
    path: PathBuf,
    file: hdf5::File,
    setup: M3edWriterSetup,
    data: Dataset,
    rows: usize,
    ts_start: Vec<i64>,
    ts_end: Vec<i64>,
    rgb: Option<Dataset>,
    image_times: Vec<i64>,
    imu_times: Vec<i64>,
    imu_accel: Vec<[f64; 3]>,
    imu_omega: Vec<[f64; 3]>,
}

/// Maps an HDF5 error on `path` while writing `what` to a `WriteError`.
fn hdf5_error(path: &Path, what: &str) -> impl FnOnce(hdf5::Error) -> WriteError + use<> {
    let (path, what) = (path.to_path_buf(), what.to_string());
    move |e| WriteError::Hdf5 {
        path,
        what,
        detail: e.to_string(),
    }
}

/// Creates group `name` under `parent` without object times (`shown` names it in errors).
fn new_group(path: &Path, parent: &hdf5::Group, name: &str, shown: &str) -> Result<hdf5::Group, WriteError> {
    parent
        .create_group_builder()
        .obj_track_times(false)
        .create(name)
        .map_err(hdf5_error(path, shown))
}

/// Writes scalar variable-length string attributes on the file's root.
fn write_text_attributes(path: &Path, file: &hdf5::File, attributes: &[(&str, &str)]) -> Result<(), WriteError> {
    for &(name, value) in attributes {
        let v = vlen(path, name, value)?;
        file.new_attr::<VarLenUnicode>()
            .shape(())
            .create(name)
            .and_then(|a| a.write_scalar(&v))
            .map_err(hdf5_error(path, &format!("attribute {name}")))?;
    }
    Ok(())
}

fn vlen(path: &Path, what: &str, text: &str) -> Result<VarLenUnicode, WriteError> {
    VarLenUnicode::from_str(text).map_err(|e| WriteError::Invalid {
        path: path.to_path_buf(),
        what: what.to_string(),
        detail: e.to_string(),
    })
}

/// The LEGACY packets of one sweep as one `/ouster/data` row: `packets_per_frame` slots of
/// `slot_bytes` (the packet plus ouster-ros' padding byte), columns in measurement-id order.
pub fn encode_sweep_packets(
    metadata: &OusterMetadata,
    frame_id: u16,
    ts_start_ns: u64,
    ts_end_ns: u64,
    pixels: &SweepPixels,
    slot_bytes: usize,
) -> Vec<u8> {
    let f = &metadata.data_format;
    let rows = f.pixels_per_column;
    let columns = f.columns_per_frame;
    let column_bytes = f.column_bytes();
    let packets = f.packets_per_frame();
    let mut out = vec![0u8; packets * slot_bytes];
    let window = f.window_columns();
    let span = window.saturating_sub(1).max(1) as u64;
    for step in 0..window {
        let c = (f.column_window.0 + step) % columns;
        let packet = step / f.columns_per_packet;
        let at = packet * slot_bytes + (step % f.columns_per_packet) * column_bytes;
        let col = &mut out[at..at + column_bytes];
        let t = ts_start_ns + (ts_end_ns.saturating_sub(ts_start_ns)) * step as u64 / span;
        col[0..8].copy_from_slice(&t.to_le_bytes());
        col[8..10].copy_from_slice(&(c as u16).to_le_bytes());
        col[10..12].copy_from_slice(&frame_id.to_le_bytes());
        let encoder = (c as u64 * ENCODER_TICKS_PER_TURN / columns as u64) as u32;
        col[12..16].copy_from_slice(&encoder.to_le_bytes());
        for r in 0..rows {
            let k = r * columns + c;
            let px = 16 + 12 * r;
            let get16 = |v: &[u16]| v.get(k).copied().unwrap_or(0);
            let range = pixels.range_mm.get(k).copied().unwrap_or(0) & RANGE_MASK;
            col[px..px + 4].copy_from_slice(&range.to_le_bytes());
            col[px + 4..px + 6].copy_from_slice(&get16(&pixels.reflectivity).to_le_bytes());
            col[px + 6..px + 8].copy_from_slice(&get16(&pixels.signal).to_le_bytes());
            col[px + 8..px + 10].copy_from_slice(&get16(&pixels.near_ir).to_le_bytes());
        }
        let status_at = 16 + 12 * rows;
        col[status_at..status_at + 4].copy_from_slice(&VALID_COLUMN_STATUS.to_le_bytes());
    }
    out
}

fn distortion_fields(d: &Distortion) -> (&'static str, [f64; 4]) {
    match *d {
        Distortion::None => ("none", [0.0; 4]),
        // Kalibr's radtan has four coefficients; a k3 term cannot be stored and is dropped.
        Distortion::RadTan { k1, k2, p1, p2, .. } => ("radtan", [k1, k2, p1, p2]),
        Distortion::Equidistant { k1, k2, k3, k4 } => ("equidistant", [k1, k2, k3, k4]),
    }
}

impl M3edWriter {
    /// Creates `path` (overwriting) with the fixed parts: metadata, calibration, root attributes.
    /// The file is written as `path.partial` and renamed to `path` by [`M3edWriter::finish`], so
    /// an interrupted writer never leaves a file that looks complete.
    pub fn create(path: &Path, setup: M3edWriterSetup) -> Result<Self, WriteError> {
        let h5 = |what: &str| hdf5_error(path, what);
        let file = create_file(&partial_path(path)).map_err(h5("create"))?;
        write_text_attributes(
            path,
            &file,
            &[
                ("version", setup.version.as_str()),
                ("raw_bag_name", setup.raw_bag_name.as_str()),
                ("creation_date", "1970-01-01 00:00:00"),
            ],
        )?;
        let ouster = new_group(path, &file, "ouster", "group /ouster")?;
        let json = setup.metadata.to_json(setup.metadata_flavour);
        write_string(path, &ouster, "metadata", &json)?;
        let f = &setup.metadata.data_format;
        let packets = f.packets_per_frame();
        // ouster-ros sizes its packet buffer one byte larger than the packet.
        let slot = f.packet_bytes() + 1;
        let data = ouster
            .new_dataset::<u8>()
            .obj_track_times(false)
            .chunk((1, packets, slot))
            .lzf()
            .shape((0.., packets, slot))
            .create("data")
            .map_err(h5("dataset /ouster/data"))?;
        let calib = new_group(path, &ouster, "calib", "group /ouster/calib")?;
        write_matrix(path, &calib, "T_to_prophesee_left", &setup.lidar_to_prophesee_left)?;

        let ovc = new_group(path, &file, "ovc", "group /ovc")?;
        let rgb = match &setup.rgb {
            None => None,
            Some(cal) => {
                let group = new_group(path, &ovc, "rgb", "group /ovc/rgb")?;
                let (w, h) = (cal.width as usize, cal.height as usize);
                let ds = group
                    .new_dataset::<u8>()
                    .obj_track_times(false)
                    .chunk((1, h, w, 3))
                    .lzf()
                    .shape((0.., h, w, 3))
                    .create("data")
                    .map_err(h5("dataset /ovc/rgb/data"))?;
                let calib = new_group(path, &group, "calib", "group /ovc/rgb/calib")?;
                write_string(path, &calib, "camera_model", "pinhole")?;
                write_f64s(path, &calib, "intrinsics", &[cal.fx, cal.fy, cal.cx, cal.cy])?;
                let (model, coeffs) = distortion_fields(&cal.distortion);
                write_string(path, &calib, "distortion_model", model)?;
                write_f64s(path, &calib, "distortion_coeffs", &coeffs)?;
                calib
                    .new_dataset_builder()
                    .obj_track_times(false)
                    .with_data(&Array1::from(vec![i64::from(cal.width), i64::from(cal.height)]))
                    .create("resolution")
                    .map_err(h5("dataset /ovc/rgb/calib/resolution"))?;
                // camera → prophesee-left = (lidar → prophesee-left) · (camera → lidar).
                let camera_to_pl = setup.lidar_to_prophesee_left * cal.sensor_from_camera;
                write_matrix(path, &calib, "T_to_prophesee_left", &camera_to_pl)?;
                Some(ds)
            }
        };
        let imu_calib = ovc
            .create_group_builder()
            .obj_track_times(false)
            .create("imu")
            .and_then(|g| g.create_group_builder().obj_track_times(false).create("calib"))
            .map_err(h5("group /ovc/imu/calib"))?;
        write_matrix(path, &imu_calib, "T_to_prophesee_left", &setup.imu_to_prophesee_left)?;
        Ok(M3edWriter {
            path: path.to_path_buf(),
            file,
            setup,
            data,
            rows: 0,
            ts_start: Vec::new(),
            ts_end: Vec::new(),
            rgb,
            image_times: Vec::new(),
            imu_times: Vec::new(),
            imu_accel: Vec::new(),
            imu_omega: Vec::new(),
        })
    }

    fn err(&self, what: &str) -> impl Fn(hdf5::Error) -> WriteError + '_ {
        let what = what.to_string();
        move |e| WriteError::Hdf5 {
            path: self.path.clone(),
            what: what.clone(),
            detail: e.to_string(),
        }
    }

    fn append_row(&mut self, row: &[u8]) -> Result<(), WriteError> {
        let shape = self.data.shape();
        let view = ArrayView3::from_shape((1, shape[1], shape[2]), row).map_err(|e| WriteError::Invalid {
            path: self.path.clone(),
            what: "sweep row".into(),
            detail: e.to_string(),
        })?;
        let n = self.rows;
        self.data
            .resize((n + 1, shape[1], shape[2]))
            .map_err(self.err("resize /ouster/data"))?;
        self.data
            .write_slice(view, s![n..n + 1, .., ..])
            .map_err(self.err("write /ouster/data"))?;
        self.rows += 1;
        Ok(())
    }

    /// Appends a sweep measured from `ts_start` to `ts_end` (µs, global time base).
    pub fn write_sweep(&mut self, ts_start: i64, ts_end: i64, pixels: &SweepPixels) -> Result<(), WriteError> {
        let f = &self.setup.metadata.data_format;
        let n = f.pixels_per_column * f.columns_per_frame;
        for (name, len) in [
            ("range_mm", pixels.range_mm.len()),
            ("reflectivity", pixels.reflectivity.len()),
            ("signal", pixels.signal.len()),
            ("near_ir", pixels.near_ir.len()),
        ] {
            if len != n {
                return Err(WriteError::Invalid {
                    path: self.path.clone(),
                    what: format!("sweep {} {name}", self.rows),
                    detail: format!("expected {n} pixels, got {len}"),
                });
            }
        }
        if ts_end < ts_start || ts_start <= 0 {
            return Err(WriteError::Invalid {
                path: self.path.clone(),
                what: format!("sweep {}", self.rows),
                detail: format!("times must be positive and ordered, got {ts_start}..{ts_end}"),
            });
        }
        let frame_id = self.setup.first_frame_id.wrapping_add(self.rows as u16);
        let slot = self.data.shape()[2];
        // Column stamps are sensor-clock ns; the simulator's sensor clock is the global clock.
        let row = encode_sweep_packets(
            &self.setup.metadata,
            frame_id,
            ts_start as u64 * 1000,
            ts_end as u64 * 1000,
            pixels,
            slot,
        );
        self.append_row(&row)?;
        self.ts_start.push(ts_start);
        self.ts_end.push(ts_end);
        Ok(())
    }

    /// Appends the all-zero row (times 0) M3ED leaves where the sensor skipped a frame.
    pub fn write_skipped_sweep(&mut self) -> Result<(), WriteError> {
        let shape = self.data.shape();
        let row = vec![0u8; shape[1] * shape[2]];
        self.append_row(&row)?;
        self.ts_start.push(0);
        self.ts_end.push(0);
        Ok(())
    }

    /// Appends an RGB image taken at `timestamp_micros`, stored BGR as M3ED does.
    pub fn write_image(&mut self, timestamp_micros: i64, image: &RgbImage) -> Result<(), WriteError> {
        let Some(ds) = &self.rgb else {
            return Err(WriteError::Invalid {
                path: self.path.clone(),
                what: "image".into(),
                detail: "the setup has no RGB camera".into(),
            });
        };
        let shape = ds.shape();
        let (h, w) = (shape[1], shape[2]);
        if (image.width() as usize, image.height() as usize) != (w, h) {
            return Err(WriteError::Invalid {
                path: self.path.clone(),
                what: format!("image {}", self.image_times.len()),
                detail: format!("{}×{} but the camera is {w}×{h}", image.width(), image.height()),
            });
        }
        let mut bgr = image.as_raw().clone();
        for px in bgr.chunks_exact_mut(3) {
            px.swap(0, 2);
        }
        let arr = Array3::from_shape_vec((h, w, 3), bgr).map_err(|e| WriteError::Invalid {
            path: self.path.clone(),
            what: "image".into(),
            detail: e.to_string(),
        })?;
        let n = self.image_times.len();
        ds.resize((n + 1, h, w, 3)).map_err(self.err("resize /ovc/rgb/data"))?;
        ds.write_slice(&arr.insert_axis(ndarray::Axis(0)), s![n..n + 1, .., .., ..])
            .map_err(self.err("write /ovc/rgb/data"))?;
        self.image_times.push(timestamp_micros);
        Ok(())
    }

    /// Appends one OVC IMU row; NaN values are stored as given (M3ED marks missing samples so).
    pub fn write_imu(&mut self, timestamp_micros: i64, accel_mps2: [f64; 3], omega_radps: [f64; 3]) {
        self.imu_times.push(timestamp_micros);
        self.imu_accel.push(accel_mps2);
        self.imu_omega.push(omega_radps);
    }

    /// Writes the per-sweep, per-image and IMU arrays, closes the file and renames it into place.
    pub fn finish(self) -> Result<PathBuf, WriteError> {
        let path = self.path.clone();
        let ouster = self.file.group("ouster").map_err(self.err("group /ouster"))?;
        write_times(&path, &ouster, "ts_start", &self.ts_start, true)?;
        write_times(&path, &ouster, "ts_end", &self.ts_end, true)?;
        let ovc = self.file.group("ovc").map_err(self.err("group /ovc"))?;
        if self.rgb.is_some() {
            write_times(&path, &ovc, "ts", &self.image_times, false)?;
        }
        let imu = ovc.group("imu").map_err(self.err("group /ovc/imu"))?;
        write_times(&path, &imu, "ts", &self.imu_times, false)?;
        for (name, rows) in [("accel", &self.imu_accel), ("omega", &self.imu_omega)] {
            let flat: Vec<f64> = rows.iter().flatten().copied().collect();
            let arr = Array2::from_shape_vec((rows.len(), 3), flat).map_err(|e| WriteError::Invalid {
                path: path.clone(),
                what: format!("/ovc/imu/{name}"),
                detail: e.to_string(),
            })?;
            imu.new_dataset_builder()
                .obj_track_times(false)
                .with_data(&arr)
                .create(name)
                .map_err(self.err(&format!("dataset /ovc/imu/{name}")))?;
        }
        drop((ouster, ovc, imu));
        let M3edWriter { file, data, rgb, .. } = self;
        // Every handle into the file goes before it closes, so the close writes it whole.
        drop((data, rgb));
        commit(&path, file)?;
        Ok(path)
    }
}

fn write_string(path: &Path, group: &Group, name: &str, text: &str) -> Result<(), WriteError> {
    let value = vlen(path, name, text)?;
    group
        .new_dataset::<VarLenUnicode>()
        .obj_track_times(false)
        .shape(())
        .create(name)
        .and_then(|ds| ds.write_scalar(&value))
        .map_err(|e| WriteError::Hdf5 {
            path: path.to_path_buf(),
            what: format!("dataset {}/{name}", group.name()),
            detail: e.to_string(),
        })
}

fn write_f64s(path: &Path, group: &Group, name: &str, values: &[f64]) -> Result<(), WriteError> {
    group
        .new_dataset_builder()
        .obj_track_times(false)
        .with_data(&Array1::from(values.to_vec()))
        .create(name)
        .map(|_| ())
        .map_err(|e| WriteError::Hdf5 {
            path: path.to_path_buf(),
            what: format!("dataset {}/{name}", group.name()),
            detail: e.to_string(),
        })
}

fn write_matrix(path: &Path, group: &Group, name: &str, pose: &Isometry3<f64>) -> Result<(), WriteError> {
    let m = row_major_from_isometry(pose);
    let arr = Array2::from_shape_vec((4, 4), m.to_vec()).map_err(|e| WriteError::Invalid {
        path: path.to_path_buf(),
        what: name.to_string(),
        detail: e.to_string(),
    })?;
    group
        .new_dataset_builder()
        .obj_track_times(false)
        .with_data(&arr)
        .create(name)
        .map(|_| ())
        .map_err(|e| WriteError::Hdf5 {
            path: path.to_path_buf(),
            what: format!("dataset {}/{name}", group.name()),
            detail: e.to_string(),
        })
}

fn write_times(path: &Path, group: &Group, name: &str, times: &[i64], lzf: bool) -> Result<(), WriteError> {
    let arr = Array1::from(times.to_vec());
    let builder = group.new_dataset_builder().obj_track_times(false);
    let result = if lzf && !times.is_empty() {
        builder
            .chunk(times.len().min(40_000))
            .lzf()
            .with_data(&arr)
            .create(name)
    } else {
        builder.with_data(&arr).create(name)
    };
    result.map(|_| ()).map_err(|e| WriteError::Hdf5 {
        path: path.to_path_buf(),
        what: format!("dataset {}/{name}", group.name()),
        detail: e.to_string(),
    })
}

/// How `write_pose_gt` stores `/ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoseTimeType {
    /// int64 µs, as M3ED writes since February 2025.
    Int64,
    /// float64 µs, as older released files have.
    Float64,
}

/// Writes `<seq>_pose_gt.h5` (as `path.partial`, renamed when complete): `/Ln_T_L0` = inverse of each sensor pose, `/Cn_T_C0` for the
/// Prophesee-left camera, `/ts`, a zero `/ts_map_prophesee_left` (no events are written) and
/// the root attributes.
pub fn write_pose_gt(
    path: &Path,
    times: &[i64],
    world_from_sensor: &[Isometry3<f64>],
    lidar_to_prophesee_left: &Isometry3<f64>,
    time_type: PoseTimeType,
) -> Result<(), WriteError> {
    let h5 = |what: &str| hdf5_error(path, what);
    if times.len() != world_from_sensor.len() {
        return Err(WriteError::Invalid {
            path: path.to_path_buf(),
            what: "poses".into(),
            detail: format!("{} times for {} poses", times.len(), world_from_sensor.len()),
        });
    }
    let file = create_file(&partial_path(path)).map_err(h5("create"))?;
    let n = times.len();
    let mut ln_t_l0 = Vec::with_capacity(n * 16);
    let mut cn_t_c0 = Vec::with_capacity(n * 16);
    let cam_from_lidar = *lidar_to_prophesee_left;
    for pose in world_from_sensor {
        let current_from_world = pose.inverse();
        ln_t_l0.extend(row_major_from_isometry(&current_from_world));
        cn_t_c0.extend(row_major_from_isometry(
            &(cam_from_lidar * current_from_world * cam_from_lidar.inverse()),
        ));
    }
    for (name, values) in [("Ln_T_L0", ln_t_l0), ("Cn_T_C0", cn_t_c0)] {
        let arr = Array3::from_shape_vec((n, 4, 4), values).map_err(|e| WriteError::Invalid {
            path: path.to_path_buf(),
            what: name.into(),
            detail: e.to_string(),
        })?;
        file.new_dataset_builder()
            .obj_track_times(false)
            .with_data(&arr)
            .create(name)
            .map_err(h5(&format!("dataset /{name}")))?;
    }
    match time_type {
        PoseTimeType::Int64 => file
            .new_dataset_builder()
            .obj_track_times(false)
            .with_data(&Array1::from(times.to_vec()))
            .create("ts")
            .map(|_| ()),
        PoseTimeType::Float64 => file
            .new_dataset_builder()
            .obj_track_times(false)
            .with_data(&Array1::from(times.iter().map(|&t| t as f64).collect::<Vec<_>>()))
            .create("ts")
            .map(|_| ()),
    }
    .map_err(h5("dataset /ts"))?;
    file.new_dataset_builder()
        .obj_track_times(false)
        .with_data(&Array1::from(vec![0u64; n]))
        .create("ts_map_prophesee_left")
        .map_err(h5("dataset /ts_map_prophesee_left"))?;
    write_text_attributes(
        path,
        &file,
        &[
            ("cam_name", "/prophesee/left"),
            ("version", "boxlayer-sim"),
            ("creation_date", "1970-01-01 00:00:00"),
        ],
    )?;
    commit(path, file)
}
