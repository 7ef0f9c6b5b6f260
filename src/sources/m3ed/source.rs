//! [`M3edSource`]: random access to the sweeps of one M3ED `<seq>_data.h5`, with the RGB image
//! nearest the moment the sweep scans the camera's view, the OVC IMU samples of the sweep and the
//! FasterLIO pose from `<seq>_pose_gt.h5`.
//!
//! The Ouster spins through its sweep in 100 ms and M3ED does not deskew it, so an object is
//! where the sweep saw it at the time its column was measured. A sweep is paired with the image
//! nearest the time the LiDAR looks along the camera's optical axis (`ts_start` plus that
//! column's share of the sweep; mid-sweep for a forward camera), not with the sweep's start:
//! a legged robot's gait turns the camera by degrees in 50 ms.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hdf5::Dataset;
use image::RgbImage;
use nalgebra::{Isometry3, Vector3};
use ndarray::{Ix2, Ix3, s};
use serde::{Deserialize, Serialize};

use crate::camera::optical_axis_in_sensor;
use crate::frame::{CameraAxes, CameraCalibration, CameraView, Distortion, Frame, ImageData, ImuSample, Platform};
use crate::geometry::pose::isometry_from_row_major;
use crate::sources::{OnCorrupt, SequenceMeta, SkippedRecord, Source, SourceError};

use super::h5;
use super::metadata::OusterMetadata;
use super::sweep::{DecodedSweep, SweepReport};
use super::xyz::XyzLut;

/// The kind name used in errors.
const KIND: &str = "M3ED HDF5";

/// How far a calibration matrix may be from a rigid transform (the stored values went through
/// float32 YAML and numpy products).
const RIGID_EPS: f64 = 1e-4;

/// The largest `/ouster/data` row read as one sweep (64 MiB; an OS1-128 sweep is ≈ 1.6 MB).
const MAX_SWEEP_BYTES: u64 = 64 << 20;

/// The largest RGB image read (256 MiB; M3ED's are 1280 × 800 × 3 ≈ 3 MB).
const MAX_IMAGE_BYTES: u64 = 256 << 20;

/// The camera name M3ED's colour camera gets in frames.
pub const RGB_CAMERA: &str = "ovc_rgb";

/// How the M3ED reader matches streams to sweeps and treats damaged sweeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct M3edConfig {
    /// What to do with damaged sweeps (skipped frames, partial sweeps, unmatched poses); default `skip`.
    pub on_corrupt: OnCorrupt,
    /// Pose file; default none, meaning `<seq>_pose_gt.h5` beside the data file when it exists.
    pub pose_file: Option<PathBuf>,
    /// Largest gap between a sweep's `ts_end` and its pose's `ts` (µs); default 50,000 (half a sweep).
    pub pose_tolerance_micros: i64,
    /// Largest gap between the time the sweep looks along the camera's axis and the nearest RGB
    /// image (µs); default 20,000 (half the 25 Hz period). Sweeps without an image that close get
    /// no camera view.
    pub image_tolerance_micros: i64,
    /// IMU samples from `ts_start − margin` to `ts_end + margin` go with a sweep (µs); default 0.
    pub imu_margin_micros: i64,
}

impl Default for M3edConfig {
    fn default() -> Self {
        Self {
            on_corrupt: OnCorrupt::Skip,
            pose_file: None,
            pose_tolerance_micros: 50_000,
            image_tolerance_micros: 20_000,
            imu_margin_micros: 0,
        }
    }
}

/// One readable sweep: its row in `/ouster/data`, its times and its pose.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepEntry {
    /// Row index in `/ouster/data` (the "sweep index" used in reports).
    pub row: usize,
    /// Time of the first column (µs).
    pub ts_start: i64,
    /// Time of the last column (µs).
    pub ts_end: i64,
    /// Sensor pose in the first-pose (L0) world frame; identity when the sequence has no poses.
    pub world_from_sensor: Isometry3<f64>,
}

/// The poses of a pose file, sorted by time.
struct PoseTrack {
    /// Pose times (µs).
    times: Vec<i64>,
    /// `inv(Ln_T_L0)` per pose.
    world_from_sensor: Vec<Isometry3<f64>>,
}

struct ImageStream {
    data: Dataset,
    timestamps: Vec<i64>,
    calibration: CameraCalibration,
    /// Share of the sweep (0 at `ts_start`, 1 at `ts_end`) at which the LiDAR looks along the
    /// camera's optical axis.
    scan_fraction: f64,
    width: usize,
    height: usize,
}

struct ImuStream {
    timestamps: Vec<i64>,
    omega: Dataset,
    accel: Dataset,
    /// The LiDAR sensor frame from the IMU frame: `/ouster/calib/T_to_prophesee_left`⁻¹ ·
    /// `/ovc/imu/calib/T_to_prophesee_left`; identity when either is absent.
    sensor_from_imu: nalgebra::UnitQuaternion<f64>,
}

/// Plain facts about an opened sequence, for `boxlayer inspect` and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct M3edSummary {
    /// Rows in `/ouster/data`.
    pub rows: usize,
    /// Readable sweeps.
    pub sweeps: usize,
    /// `lidar_mode` and `udp_profile_lidar` from the metadata.
    pub lidar_mode: String,
    /// UDP profile.
    pub udp_profile: String,
    /// Beams × columns per sweep.
    pub pixels_per_column: usize,
    /// Columns per sweep.
    pub columns_per_frame: usize,
    /// Number of RGB images and their first/last time (µs).
    pub images: Option<(usize, i64, i64)>,
    /// RGB calibration, when present.
    pub rgb_calibration: Option<CameraCalibration>,
    /// Finite OVC IMU samples and their first/last time (µs).
    pub imu: Option<(usize, i64, i64)>,
    /// Number of poses in the pose file, if one was found.
    pub poses: Option<usize>,
}

/// Random access to the sweeps of one M3ED sequence.
pub struct M3edSource {
    meta: SequenceMeta,
    config: M3edConfig,
    data: Dataset,
    slot_bytes: usize,
    ouster: OusterMetadata,
    lut: XyzLut,
    sweeps: Vec<SweepEntry>,
    rows_total: usize,
    images: Option<ImageStream>,
    imu: Option<ImuStream>,
    pose_count: Option<usize>,
    // Keeps the file open for the datasets' lifetime.
    _file: hdf5::File,
}

/// The sequence name and platform a file name implies: `falcon_outdoor_day_penno_parking_1_data.h5`
/// → (`falcon_outdoor_day_penno_parking_1`, drone); `spot_*` → quadruped, `car_*` → vehicle.
pub fn sequence_from_file_name(path: &Path) -> (String, Platform) {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let name = stem.strip_suffix("_data").unwrap_or(stem).to_string();
    let platform = match name.split('_').next() {
        Some("falcon") => Platform::Drone,
        Some("spot") => Platform::Quadruped,
        Some("car") => Platform::Vehicle,
        _ => Platform::Other,
    };
    (name, platform)
}

/// Whether the first bytes of `path` carry the HDF5 signature (at 0 or a user-block offset).
fn has_hdf5_signature(path: &Path) -> Result<bool, SourceError> {
    const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";
    let mut file = std::fs::File::open(path).map_err(|e| SourceError::io(path, e))?;
    let mut head = vec![0u8; 2048 + 8];
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) => return Err(SourceError::io(path, e)),
        }
    }
    Ok([0usize, 512, 1024, 2048]
        .iter()
        .any(|&at| filled >= at + 8 && &head[at..at + 8] == SIGNATURE))
}

fn rigid(path: &Path, what: &str, m: &[f64]) -> Result<Isometry3<f64>, SourceError> {
    let m: [f64; 16] = m
        .try_into()
        .map_err(|_| SourceError::corrupt(path, what, format!("expected 16 values, got {}", m.len())))?;
    isometry_from_row_major(&m, RIGID_EPS).ok_or_else(|| SourceError::corrupt(path, what, "not a rigid 4×4 transform"))
}

impl M3edSource {
    /// Opens `path`, refusing anything that is not an M3ED data file before reading data.
    pub fn open(path: &Path, config: M3edConfig) -> Result<Self, SourceError> {
        let incompatible = || SourceError::Incompatible {
            path: path.to_path_buf(),
            kind: KIND,
        };
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if !matches!(ext.as_deref(), Some("h5" | "hdf5")) || !has_hdf5_signature(path)? {
            return Err(incompatible());
        }
        let file = open_read_only(path)?;
        if !h5::link_exists(&file, "ouster") {
            if h5::link_exists(&file, "ovc") || h5::link_exists(&file, "prophesee") {
                // Test sequences are published stripped of the LiDAR and RGB groups.
                return Err(SourceError::Missing {
                    path: path.to_path_buf(),
                    what: "group /ouster (a stripped M3ED test sequence has no LiDAR)".into(),
                });
            }
            return Err(incompatible());
        }
        let ouster_group = file
            .group("ouster")
            .map_err(|e| SourceError::corrupt(path, "group /ouster", e.to_string()))?;
        let metadata_ds = h5::dataset(path, &ouster_group, "metadata")?;
        let metadata_json = h5::read_string(path, &metadata_ds)?;
        let ouster = OusterMetadata::parse(&metadata_json)
            .map_err(|e| SourceError::corrupt(path, "dataset /ouster/metadata", e.to_string()))?;
        let format = &ouster.data_format;
        if !format.udp_profile_lidar.eq_ignore_ascii_case("LEGACY") {
            return Err(SourceError::corrupt(
                path,
                "dataset /ouster/metadata",
                format!(
                    "udp_profile_lidar `{}` is not decoded (only LEGACY)",
                    format.udp_profile_lidar
                ),
            ));
        }

        let data = h5::dataset(path, &ouster_group, "data")?;
        let shape = data.shape();
        if shape.len() != 3 {
            return Err(SourceError::corrupt(
                path,
                "dataset /ouster/data",
                format!("expected 3 dimensions [sweeps, packets, bytes], found {shape:?}"),
            ));
        }
        // An int16 dataset read as bytes converts (clamps) every value: refuse it (issue 18: int16
        // data gave empty sweeps), and size the dataspace before anything trusts its row count.
        h5::check_u8(path, &data)?;
        h5::checked_size(path, &data)?;
        let (rows, packets, slot_bytes) = (shape[0], shape[1], shape[2]);
        if (packets as u64).saturating_mul(slot_bytes as u64) > MAX_SWEEP_BYTES {
            return Err(SourceError::corrupt(
                path,
                "dataset /ouster/data",
                format!("rows of {packets} × {slot_bytes} bytes are over the {MAX_SWEEP_BYTES}-byte sweep limit"),
            ));
        }
        if slot_bytes < format.packet_bytes() || packets * format.columns_per_packet < format.window_columns() {
            return Err(SourceError::corrupt(
                path,
                "dataset /ouster/data",
                format!(
                    "rows of {packets} × {slot_bytes} bytes cannot hold a sweep of {} columns in {}-byte packets",
                    format.window_columns(),
                    format.packet_bytes()
                ),
            ));
        }
        let ts_start_all = h5::read_times(path, &h5::dataset(path, &ouster_group, "ts_start")?)?;
        let ts_end_all = h5::read_times(path, &h5::dataset(path, &ouster_group, "ts_end")?)?;
        for (name, len) in [("ts_start", ts_start_all.len()), ("ts_end", ts_end_all.len())] {
            if len != rows {
                return Err(SourceError::corrupt(
                    path,
                    format!("dataset /ouster/{name}"),
                    format!("{len} times for {rows} sweeps"),
                ));
            }
        }

        let (name, platform) = sequence_from_file_name(path);
        let mut skipped = Vec::new();
        let mut report = |row: usize, detail: String| -> Result<(), SourceError> {
            let location = format!("sweep {row}");
            match config.on_corrupt {
                OnCorrupt::Fail => Err(SourceError::corrupt(path, location, detail)),
                OnCorrupt::Skip => {
                    tracing::warn!("{}: {location}: {detail}; skipped", path.display());
                    skipped.push(SkippedRecord { location, detail });
                    Ok(())
                }
            }
        };

        // Poses, RGB and IMU are optional streams: a damaged one is dropped with a note under
        // `skip` instead of refusing the LiDAR (issue 18), and fails the open under `fail`.
        let degrade = |stream: &str, e: SourceError| -> Result<(), SourceError> {
            match config.on_corrupt {
                OnCorrupt::Fail => Err(e),
                OnCorrupt::Skip => {
                    tracing::warn!("{}: {stream} dropped: {e}", path.display());
                    Ok(())
                }
            }
        };
        let poses = match Self::load_poses(path, &name, &config) {
            Ok(p) => p,
            Err(e) => {
                degrade("poses", e)?;
                None
            }
        };
        let mut sweeps = Vec::with_capacity(rows);
        for row in 0..rows {
            let (start, end) = (ts_start_all[row], ts_end_all[row]);
            if start == 0 && end == 0 {
                report(row, "skipped frame (ts_start = ts_end = 0)".into())?;
                continue;
            }
            if end < start {
                report(row, format!("ts_end {end} before ts_start {start}"))?;
                continue;
            }
            let world_from_sensor = match &poses {
                None => Isometry3::identity(),
                Some(track) => match nearest(&track.times, end) {
                    Some(k) if (track.times[k] - end).abs() <= config.pose_tolerance_micros => {
                        track.world_from_sensor[k]
                    }
                    _ => {
                        report(
                            row,
                            format!("no pose within {} µs of ts_end {end}", config.pose_tolerance_micros),
                        )?;
                        continue;
                    }
                },
            };
            sweeps.push(SweepEntry {
                row,
                ts_start: start,
                ts_end: end,
                world_from_sensor,
            });
        }

        let lidar_to_pl = || -> Result<Option<Isometry3<f64>>, SourceError> {
            match h5::optional_dataset(path, &file, "ouster/calib/T_to_prophesee_left")? {
                Some(ds) => Ok(Some(rigid(
                    path,
                    "dataset /ouster/calib/T_to_prophesee_left",
                    &h5::read_f64s(path, &ds)?,
                )?)),
                None => Ok(None),
            }
        };
        let lut = XyzLut::new(&ouster);
        let columns = ouster.data_format.columns_per_frame;
        let images = match lidar_to_pl().and_then(|pl| Self::load_images(path, &file, pl.as_ref(), &lut, columns)) {
            Ok(images) => images,
            Err(e) => {
                degrade("RGB camera", e)?;
                None
            }
        };
        let imu = match lidar_to_pl().and_then(|pl| Self::load_imu(path, &file, pl.as_ref())) {
            Ok(imu) => imu,
            Err(e) => {
                degrade("IMU", e)?;
                None
            }
        };
        Ok(M3edSource {
            meta: SequenceMeta {
                name,
                platform,
                source_kind: "m3ed",
                path: path.to_path_buf(),
                skipped,
            },
            config,
            data,
            slot_bytes,
            ouster,
            lut,
            sweeps,
            rows_total: rows,
            images,
            imu,
            pose_count: poses.as_ref().map(|p| p.times.len()),
            _file: file,
        })
    }

    /// Every pose of the pose file, or `None` when there is no pose file.
    fn load_poses(data_path: &Path, sequence: &str, config: &M3edConfig) -> Result<Option<PoseTrack>, SourceError> {
        let pose_path = match &config.pose_file {
            Some(p) => p.clone(),
            None => {
                let candidate = data_path.with_file_name(format!("{sequence}_pose_gt.h5"));
                if !candidate.exists() {
                    return Ok(None);
                }
                candidate
            }
        };
        let path = pose_path.as_path();
        let file = open_read_only(path)?;
        let times = h5::read_times(path, &h5::dataset(path, &file, "ts")?)?;
        let ds = h5::dataset(path, &file, "Ln_T_L0")?;
        let shape = ds.shape();
        if shape.len() != 3 || shape[1] != 4 || shape[2] != 4 || shape[0] != times.len() {
            return Err(SourceError::corrupt(
                path,
                "dataset /Ln_T_L0",
                format!("expected [{}, 4, 4], found {shape:?}", times.len()),
            ));
        }
        let values = h5::read_f64s(path, &ds)?;
        if times.windows(2).any(|w| w[1] < w[0]) {
            return Err(SourceError::corrupt(path, "dataset /ts", "pose times are not sorted"));
        }
        let mut kept_times = Vec::with_capacity(times.len());
        let mut poses = Vec::with_capacity(times.len());
        for (k, m) in values.chunks_exact(16).enumerate() {
            // Ln_T_L0 maps world (first-frame) coordinates into sweep n's frame; its inverse is
            // the sensor pose in the world. A non-finite or non-rigid row is dropped (its sweep
            // then finds no pose and is reported) rather than becoming a NaN world pose.
            match rigid(path, &format!("dataset /Ln_T_L0 row {k}"), m) {
                Ok(current_from_world) => {
                    kept_times.push(times[k]);
                    poses.push(current_from_world.inverse());
                }
                Err(e) => match config.on_corrupt {
                    OnCorrupt::Fail => return Err(e),
                    OnCorrupt::Skip => tracing::warn!("{e}; pose dropped"),
                },
            }
        }
        Ok(Some(PoseTrack {
            times: kept_times,
            world_from_sensor: poses,
        }))
    }

    fn load_images(
        path: &Path,
        file: &hdf5::File,
        lidar_to_pl: Option<&Isometry3<f64>>,
        lut: &XyzLut,
        columns: usize,
    ) -> Result<Option<ImageStream>, SourceError> {
        let Some(data) = h5::optional_dataset(path, file, "ovc/rgb/data")? else {
            return Ok(None);
        };
        h5::check_u8(path, &data)?;
        let (shape, _) = h5::checked_size(path, &data)?;
        if shape.len() == 4 && (shape[1] as u64).saturating_mul(shape[2] as u64).saturating_mul(3) > MAX_IMAGE_BYTES {
            return Err(SourceError::corrupt(
                path,
                "dataset /ovc/rgb/data",
                format!(
                    "images of {}×{} pixels are over the {MAX_IMAGE_BYTES}-byte image limit",
                    shape[2], shape[1]
                ),
            ));
        }
        if shape.len() != 4 || shape[3] != 3 {
            return Err(SourceError::corrupt(
                path,
                "dataset /ovc/rgb/data",
                format!("expected [N, H, W, 3], found {shape:?}"),
            ));
        }
        let timestamps = h5::read_times(path, &h5::dataset(path, file, "ovc/ts")?)?;
        if timestamps.len() != shape[0] {
            return Err(SourceError::corrupt(
                path,
                "dataset /ovc/ts",
                format!("{} times for {} RGB images", timestamps.len(), shape[0]),
            ));
        }
        let Some(lidar_to_pl) = lidar_to_pl else {
            return Err(SourceError::Missing {
                path: path.to_path_buf(),
                what: "dataset /ouster/calib/T_to_prophesee_left (needed to place the RGB camera)".into(),
            });
        };
        let calibration = read_camera_calibration(path, file, "ovc/rgb/calib", lidar_to_pl)?;
        if (calibration.width as usize, calibration.height as usize) != (shape[2], shape[1]) {
            return Err(SourceError::corrupt(
                path,
                "dataset /ovc/rgb/calib/resolution",
                format!(
                    "{}×{} but images are {}×{}",
                    calibration.width, calibration.height, shape[2], shape[1]
                ),
            ));
        }
        // A camera looking straight up or down is scanned all sweep long: its middle.
        let scan_fraction = lut
            .column_facing(&optical_axis_in_sensor(&calibration))
            .map_or(0.5, |c| (c / (columns.max(2) - 1) as f64).clamp(0.0, 1.0));
        Ok(Some(ImageStream {
            data,
            timestamps,
            calibration,
            scan_fraction,
            width: shape[2],
            height: shape[1],
        }))
    }

    fn load_imu(
        path: &Path,
        file: &hdf5::File,
        lidar_to_pl: Option<&Isometry3<f64>>,
    ) -> Result<Option<ImuStream>, SourceError> {
        let Some(ts) = h5::optional_dataset(path, file, "ovc/imu/ts")? else {
            return Ok(None);
        };
        let timestamps = h5::read_times(path, &ts)?;
        let omega = h5::dataset(path, file, "ovc/imu/omega")?;
        let accel = h5::dataset(path, file, "ovc/imu/accel")?;
        for (name, ds) in [("omega", &omega), ("accel", &accel)] {
            if ds.shape() != [timestamps.len(), 3] {
                return Err(SourceError::corrupt(
                    path,
                    format!("dataset /ovc/imu/{name}"),
                    format!("expected [{}, 3], found {:?}", timestamps.len(), ds.shape()),
                ));
            }
        }
        let imu_to_pl = match h5::optional_dataset(path, file, "ovc/imu/calib/T_to_prophesee_left")? {
            Some(ds) => Some(rigid(
                path,
                "dataset /ovc/imu/calib/T_to_prophesee_left",
                &h5::read_f64s(path, &ds)?,
            )?),
            None => None,
        };
        let sensor_from_imu = match (lidar_to_pl, imu_to_pl) {
            (Some(lidar), Some(imu)) => (lidar.inverse() * imu).rotation,
            _ => nalgebra::UnitQuaternion::identity(),
        };
        Ok(Some(ImuStream {
            timestamps,
            omega,
            accel,
            sensor_from_imu,
        }))
    }

    /// The parsed Ouster metadata.
    pub fn ouster_metadata(&self) -> &OusterMetadata {
        &self.ouster
    }

    /// The XYZ lookup table built from the metadata.
    pub fn lut(&self) -> &XyzLut {
        &self.lut
    }

    /// The readable sweeps, in frame order.
    pub fn sweeps(&self) -> &[SweepEntry] {
        &self.sweeps
    }

    /// Whether a pose file was found and used.
    pub fn has_poses(&self) -> bool {
        self.pose_count.is_some()
    }

    /// The configuration the source was opened with.
    pub fn config(&self) -> &M3edConfig {
        &self.config
    }

    fn entry(&self, index: usize) -> Result<&SweepEntry, SourceError> {
        self.sweeps.get(index).ok_or_else(|| SourceError::FrameOutOfRange {
            path: self.meta.path.clone(),
            index,
            len: self.sweeps.len(),
        })
    }

    /// Reads and decodes the packets of frame `index` (one `/ouster/data` row, nothing more).
    pub fn decode_sweep(&self, index: usize) -> Result<DecodedSweep, SourceError> {
        let mut sweep = DecodedSweep::new(&self.ouster.data_format);
        self.decode_sweep_into(index, &mut sweep)?;
        Ok(sweep)
    }

    /// Like [`M3edSource::decode_sweep`], reusing `sweep`'s buffers.
    pub fn decode_sweep_into(&self, index: usize, sweep: &mut DecodedSweep) -> Result<(), SourceError> {
        let row = self.entry(index)?.row;
        let path = &self.meta.path;
        let location = format!("sweep {row}");
        let packets = self
            .data
            .read_slice::<u8, _, Ix2>(s![row, .., ..])
            .map_err(|e| SourceError::corrupt(path, location.clone(), format!("reading /ouster/data: {e}")))?;
        let bytes = packets
            .as_slice()
            .ok_or_else(|| SourceError::corrupt(path, location.clone(), "row is not contiguous"))?;
        sweep
            .decode_into(bytes, self.slot_bytes, &self.ouster.data_format)
            .map_err(|e| SourceError::corrupt(path, location, e.to_string()))
    }

    /// Frame `index` together with what was wrong with its sweep. A partial sweep keeps its valid
    /// columns under `OnCorrupt::Skip` (and is logged) and is an error under `Fail`; a row with no
    /// valid column (an all-zero row behind non-zero times) is always an error.
    pub fn frame_with_report(&self, index: usize) -> Result<(Frame, SweepReport), SourceError> {
        let entry = self.entry(index)?.clone();
        let path = &self.meta.path;
        let location = format!("sweep {}", entry.row);
        let sweep = self.decode_sweep(index)?;
        let report = sweep.report.clone();
        if report.all_zero || report.valid_columns == 0 {
            return Err(SourceError::corrupt(
                path,
                location,
                format!("{}; no valid column", report.describe()),
            ));
        }
        if !report.is_complete() {
            match self.config.on_corrupt {
                OnCorrupt::Fail => return Err(SourceError::corrupt(path, location, report.describe())),
                OnCorrupt::Skip => tracing::warn!(
                    "{}: {location}: {}; kept the {} valid columns",
                    path.display(),
                    report.describe(),
                    report.valid_columns
                ),
            }
        }
        let cloud = sweep
            .to_cloud(&self.lut, &self.ouster.data_format, entry.ts_start, entry.ts_end)
            .map_err(|e| SourceError::corrupt(path, location.clone(), e.to_string()))?;
        let cameras = match self.camera_view(&entry, &location)? {
            Some(view) => vec![view],
            None => Vec::new(),
        };
        let imu = self.imu_samples(
            entry.ts_start - self.config.imu_margin_micros,
            entry.ts_end + self.config.imu_margin_micros,
            &location,
        )?;
        let frame = Frame {
            sequence: self.meta.name.clone(),
            // The row, not the readable-sweep ordinal: a skipped row leaves a gap, never a shift.
            index: entry.row,
            timestamp_micros: entry.ts_start,
            platform: self.meta.platform,
            cloud,
            world_from_sensor: entry.world_from_sensor,
            imu,
            cameras,
            ground_truth: Vec::new(),
            notes: Vec::new(),
        };
        Ok((frame, report))
    }

    /// The RGB image nearest the time `entry`'s sweep looks along the camera's axis (within the
    /// configured tolerance), converted BGR → RGB.
    fn camera_view(&self, entry: &SweepEntry, location: &str) -> Result<Option<CameraView>, SourceError> {
        let Some(stream) = &self.images else {
            return Ok(None);
        };
        let time = entry.ts_start + ((entry.ts_end - entry.ts_start) as f64 * stream.scan_fraction).round() as i64;
        let Some(k) = nearest(&stream.timestamps, time) else {
            return Ok(None);
        };
        if (stream.timestamps[k] - time).abs() > self.config.image_tolerance_micros {
            return Ok(None);
        }
        let path = &self.meta.path;
        let bgr = stream
            .data
            .read_slice::<u8, _, Ix3>(s![k, .., .., ..])
            .map_err(|e| SourceError::corrupt(path, format!("{location}: image {k}"), e.to_string()))?;
        let mut rgb = bgr.as_standard_layout().into_owned().into_raw_vec_and_offset().0;
        // M3ED stores OpenCV's BGR order.
        for px in rgb.chunks_exact_mut(3) {
            px.swap(0, 2);
        }
        let image = RgbImage::from_raw(stream.width as u32, stream.height as u32, rgb).ok_or_else(|| {
            SourceError::corrupt(
                path,
                format!("{location}: image {k}"),
                "pixel count does not match its size",
            )
        })?;
        Ok(Some(CameraView::new(
            RGB_CAMERA,
            stream.calibration.clone(),
            stream.timestamps[k],
            ImageData::Decoded(Arc::new(image)),
        )))
    }

    /// OVC IMU samples with `from ≤ t ≤ to` in the LiDAR sensor frame, skipping rows with any
    /// non-finite value.
    fn imu_samples(&self, from: i64, to: i64, location: &str) -> Result<Vec<ImuSample>, SourceError> {
        let Some(stream) = &self.imu else {
            return Ok(Vec::new());
        };
        let lo = stream.timestamps.partition_point(|&t| t < from);
        let hi = stream.timestamps.partition_point(|&t| t <= to);
        if lo >= hi {
            return Ok(Vec::new());
        }
        let path = &self.meta.path;
        let read = |ds: &Dataset, name: &str| {
            ds.read_slice::<f64, _, Ix2>(s![lo..hi, ..])
                .map_err(|e| SourceError::corrupt(path, format!("{location}: /ovc/imu/{name}"), e.to_string()))
        };
        let omega = read(&stream.omega, "omega")?;
        let accel = read(&stream.accel, "accel")?;
        let mut samples = Vec::with_capacity(hi - lo);
        for (i, (w, a)) in omega.outer_iter().zip(accel.outer_iter()).enumerate() {
            if w.iter().chain(a.iter()).any(|v| !v.is_finite()) {
                // The VectorNav stream marks missing samples with NaN.
                continue;
            }
            // Into the LiDAR sensor frame (rotation only: the lever arm's centripetal term is
            // below the accelerometer noise at these rates).
            let r = &stream.sensor_from_imu;
            samples.push(ImuSample {
                timestamp_micros: stream.timestamps[lo + i],
                accel_mps2: r * Vector3::new(a[0], a[1], a[2]),
                gyro_radps: r * Vector3::new(w[0], w[1], w[2]),
            });
        }
        Ok(samples)
    }

    /// Facts about the sequence for `inspect`: counts, times, calibration.
    pub fn summary(&self) -> Result<M3edSummary, SourceError> {
        let imu = match &self.imu {
            None => None,
            Some(stream) => {
                let path = &self.meta.path;
                let omega = h5::read_f64s(path, &stream.omega)?;
                let accel = h5::read_f64s(path, &stream.accel)?;
                let finite: Vec<i64> = stream
                    .timestamps
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| {
                        omega[i * 3..i * 3 + 3]
                            .iter()
                            .chain(&accel[i * 3..i * 3 + 3])
                            .all(|v| v.is_finite())
                    })
                    .map(|(_, t)| *t)
                    .collect();
                Some((
                    finite.len(),
                    finite.first().copied().unwrap_or(0),
                    finite.last().copied().unwrap_or(0),
                ))
            }
        };
        Ok(M3edSummary {
            rows: self.rows_total,
            sweeps: self.sweeps.len(),
            lidar_mode: self.ouster.lidar_mode.clone(),
            udp_profile: self.ouster.data_format.udp_profile_lidar.clone(),
            pixels_per_column: self.ouster.data_format.pixels_per_column,
            columns_per_frame: self.ouster.data_format.columns_per_frame,
            images: self.images.as_ref().map(|s| {
                (
                    s.timestamps.len(),
                    s.timestamps.first().copied().unwrap_or(0),
                    s.timestamps.last().copied().unwrap_or(0),
                )
            }),
            rgb_calibration: self.images.as_ref().map(|s| s.calibration.clone()),
            imu,
            poses: self.pose_count,
        })
    }
}

impl Source for M3edSource {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.sweeps.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        self.frame_with_report(index).map(|(frame, _)| frame)
    }

    fn cameras(&self, index: usize) -> Result<Vec<CameraView>, SourceError> {
        let entry = self.entry(index)?;
        let location = format!("sweep {}", entry.row);
        Ok(self.camera_view(entry, &location)?.into_iter().collect())
    }
}

/// Index of the value in sorted `times` closest to `t`.
fn nearest(times: &[i64], t: i64) -> Option<usize> {
    if times.is_empty() {
        return None;
    }
    let i = times.partition_point(|&x| x < t);
    if i == 0 {
        return Some(0);
    }
    if i == times.len() {
        return Some(times.len() - 1);
    }
    Some(if (times[i] - t).abs() < (t - times[i - 1]).abs() {
        i
    } else {
        i - 1
    })
}

/// A Kalibr-style calibration group (`intrinsics`, `distortion_model`, `distortion_coeffs`,
/// `resolution`, `T_to_prophesee_left`) as a camera placed in the LiDAR sensor frame.
fn read_camera_calibration(
    path: &Path,
    file: &hdf5::File,
    group: &str,
    lidar_to_pl: &Isometry3<f64>,
) -> Result<CameraCalibration, SourceError> {
    let read = |name: &str| -> Result<Vec<f64>, SourceError> {
        h5::read_f64s(path, &h5::dataset(path, file, &format!("{group}/{name}"))?)
    };
    let where_ = |name: &str| format!("dataset /{group}/{name}");
    let intrinsics = read("intrinsics")?;
    let [fx, fy, cx, cy] = intrinsics[..] else {
        return Err(SourceError::corrupt(
            path,
            where_("intrinsics"),
            format!("expected [fx, fy, cx, cy], got {} values", intrinsics.len()),
        ));
    };
    let resolution = read("resolution")?;
    let [width, height] = resolution[..] else {
        return Err(SourceError::corrupt(
            path,
            where_("resolution"),
            format!("expected [width, height], got {} values", resolution.len()),
        ));
    };
    let model = h5::read_string(path, &h5::dataset(path, file, &format!("{group}/distortion_model"))?)?;
    let coeffs = read("distortion_coeffs")?;
    let need = |n: usize| -> Result<(), SourceError> {
        if coeffs.len() == n {
            Ok(())
        } else {
            Err(SourceError::corrupt(
                path,
                where_("distortion_coeffs"),
                format!("`{model}` needs {n} values, got {}", coeffs.len()),
            ))
        }
    };
    let distortion = match model.trim() {
        "radtan" | "plumb_bob" => {
            need(4)?;
            Distortion::RadTan {
                k1: coeffs[0],
                k2: coeffs[1],
                p1: coeffs[2],
                p2: coeffs[3],
                k3: 0.0,
            }
        }
        "equidistant" | "fisheye" => {
            need(4)?;
            Distortion::Equidistant {
                k1: coeffs[0],
                k2: coeffs[1],
                k3: coeffs[2],
                k4: coeffs[3],
            }
        }
        "none" => Distortion::None,
        other => {
            return Err(SourceError::corrupt(
                path,
                where_("distortion_model"),
                format!("unknown model `{other}` (expected radtan or equidistant)"),
            ));
        }
    };
    let camera_to_pl = rigid(path, &where_("T_to_prophesee_left"), &read("T_to_prophesee_left")?)?;
    // camera_from_lidar = inv(T_cam) · T_lidar; the camera's pose in the sensor frame is its inverse.
    let camera_from_lidar = camera_to_pl.inverse() * lidar_to_pl;
    Ok(CameraCalibration {
        width: width as u32,
        height: height as u32,
        fx,
        fy,
        cx,
        cy,
        distortion,
        axes: CameraAxes::OpenCv,
        sensor_from_camera: camera_from_lidar.inverse(),
    })
}

/// Opens an M3ED file for reading without HDF5's file lock: logs are inputs nobody writes while
/// boxlayer reads them, many workers read them at once, and cluster file systems without `flock`
/// (Lustre without `-o flock`, some NFS mounts) make a locking open fail outright. Needs HDF5 ≥ 1.10.7.
fn open_read_only(path: &Path) -> Result<hdf5::File, SourceError> {
    hdf5::File::with_options()
        .with_fapl(|p| p.file_locking(false))
        .open(path)
        .map_err(|e| SourceError::corrupt(path, "file", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_give_sequence_and_platform() {
        let cases = [
            (
                "/d/falcon_outdoor_day_penno_parking_1_data.h5",
                "falcon_outdoor_day_penno_parking_1",
                Platform::Drone,
            ),
            (
                "spot_outdoor_day_skatepark_1_data.h5",
                "spot_outdoor_day_skatepark_1",
                Platform::Quadruped,
            ),
            ("car_urban_day_horse_data.h5", "car_urban_day_horse", Platform::Vehicle),
            ("other.h5", "other", Platform::Other),
        ];
        for (file, name, platform) in cases {
            assert_eq!(sequence_from_file_name(Path::new(file)), (name.to_string(), platform));
        }
    }

    #[test]
    fn config_reads_from_toml_with_defaults_and_rejects_unknown_keys() {
        let c: M3edConfig = toml::from_str("on_corrupt = \"fail\"\npose_tolerance_micros = 10").unwrap();
        assert_eq!(c.on_corrupt, OnCorrupt::Fail);
        assert_eq!(c.pose_tolerance_micros, 10);
        assert_eq!(c.image_tolerance_micros, M3edConfig::default().image_tolerance_micros);
        assert!(toml::from_str::<M3edConfig>("pose_tolerance = 1").is_err());
    }

    #[test]
    fn nearest_picks_the_closest_time() {
        let t = [0, 100, 200];
        assert_eq!(nearest(&t, -5), Some(0));
        assert_eq!(nearest(&t, 149), Some(1));
        assert_eq!(nearest(&t, 151), Some(2));
        assert_eq!(nearest(&t, 999), Some(2));
        assert_eq!(nearest(&[], 1), None);
    }

    #[test]
    fn non_hdf5_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x_data.h5");
        std::fs::write(&p, b"not an hdf5 file at all").unwrap();
        let e = M3edSource::open(&p, M3edConfig::default()).err().unwrap();
        assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
        let e = M3edSource::open(Path::new("seq.tfrecord"), M3edConfig::default())
            .err()
            .unwrap();
        assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
    }
}
