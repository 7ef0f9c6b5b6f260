//! `boxlayer inspect`: a one-screen summary of any input boxlayer can read. It recognises a file
//! by its extension and contents (any log a source reads gets at least the generic summary) and
//! refuses what it cannot read, naming the file and the kinds it knows.

use std::fmt::Write as _;
use std::path::Path;

use thiserror::Error;

use crate::detect;
use crate::frame::Distortion;
use crate::geometry::pose::euler_from_isometry;
use crate::sources::m3ed::{M3edConfig, M3edSource};
use crate::sources::waymo::{self, WaymoConfig, WaymoV1Source, WaymoV2Source};
use crate::sources::{Source, SourceError};

/// Errors from `inspect`.
#[derive(Debug, Error)]
pub enum InspectError {
    /// The file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// No reader recognises the file.
    #[error("{path}: not a format boxlayer reads yet (known: {known})")]
    Unsupported {
        /// The file.
        path: String,
        /// The kinds `inspect` understands now.
        known: &'static str,
    },
    /// An ONNX model failed to open.
    #[error(transparent)]
    Model(#[from] detect::RuntimeError),
    /// A sensor log failed to open or decode.
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// The input kinds `inspect` understands, for messages and `--help`.
pub const KNOWN_KINDS: &str = "ONNX models (.onnx), M3ED data files (.h5), Waymo v1 segments (.tfrecord), Waymo v2 split \
     folders, KITTI .bin sweeps and sequence folders, PCD and .npy files or folders, ROS 2 MCAP bags";

/// Returns a short human-readable summary of the file at `path`.
pub fn inspect(path: &Path) -> Result<String, InspectError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| InspectError::Io {
        path: shown.clone(),
        error: source,
    })?;
    if meta.is_dir() && waymo::v2::is_v2_folder(path) {
        return inspect_waymo_v2(path);
    }
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("onnx") => inspect_onnx(path, meta.len()),
        Some("h5" | "hdf5") => inspect_m3ed(path, meta.len()),
        Some("tfrecord" | "tfrecords") => inspect_waymo_v1(path, meta.len()),
        _ => match crate::sources::open(path, None, &crate::sources::SourceOptions::default()) {
            Ok(source) => inspect_source(path, source.as_ref()),
            Err(SourceError::Incompatible { .. }) => Err(InspectError::Unsupported {
                path: shown,
                known: KNOWN_KINDS,
            }),
            Err(e) => Err(e.into()),
        },
    }
}

/// The summary of a log any source reads: its frames, time span, poses, the first frame's
/// points, channels, IMU and cameras (the KITTI, PCD, NumPy and MCAP readers, which have no
/// summary of their own).
fn inspect_source(path: &Path, source: &dyn Source) -> Result<String, InspectError> {
    let meta = source.meta();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} log, sequence {} ({}), {} frames ({} skipped as damaged)",
        path.display(),
        meta.source_kind,
        meta.name,
        meta.platform,
        source.len(),
        meta.skipped.len()
    );
    for s in &meta.skipped {
        let _ = writeln!(out, "  skipped: {}: {}", s.location, s.detail);
    }
    let Some((first_index, first)) = (0..source.len()).find_map(|i| source.frame(i).ok().map(|f| (i, f))) else {
        let _ = writeln!(out, "no frame decodes (run `inspect --check` for each frame's error)");
        return Ok(out);
    };
    let last = match source.len().checked_sub(1) {
        Some(l) if l > first_index => source.frame(l).ok(),
        _ => None,
    };
    if let Some(last) = &last {
        let span = (last.timestamp_micros - first.timestamp_micros) as f64 / 1e6;
        let moved = (last.world_from_sensor.translation.vector - first.world_from_sensor.translation.vector).norm();
        let _ = writeln!(
            out,
            "time:   {:.3} s from frame {} to frame {}, {:.2} Hz; the sensor moves {moved:.2} m between them",
            span,
            first.index,
            last.index,
            rate_hz(source.len(), first.timestamp_micros, last.timestamp_micros)
        );
    }
    let channels: Vec<String> = first
        .cloud
        .channels()
        .map(|(name, data)| format!("{name} {}", data.type_name()))
        .collect();
    let _ = writeln!(
        out,
        "frame {}: {} points, channels [{}], {} IMU samples, cameras [{}]",
        first.index,
        first.cloud.len(),
        channels.join(", "),
        first.imu.len(),
        first
            .cameras
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some((lo, hi)) = first.cloud.bounds() {
        let _ = writeln!(
            out,
            "        bounds x [{:.1}, {:.1}] y [{:.1}, {:.1}] z [{:.1}, {:.1}] m",
            lo[0], hi[0], lo[1], hi[1], lo[2], hi[2]
        );
    }
    for note in &first.notes {
        let _ = writeln!(out, "        note: {note}");
    }
    for c in &first.cameras {
        let cal = &c.calibration;
        let _ = writeln!(
            out,
            "camera {}: {}x{} fx {:.1} fy {:.1} cx {:.1} cy {:.1}",
            c.name, cal.width, cal.height, cal.fx, cal.fy, cal.cx, cal.cy
        );
    }
    Ok(out)
}

/// What [`check`] found decoding every frame of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReport {
    /// The log.
    pub path: std::path::PathBuf,
    /// The reader that opened it (`waymo-v1`, `m3ed`, `kitti-bin`, …).
    pub source_kind: &'static str,
    /// Frames the reader's index holds (damaged records skipped at open are not among them).
    pub frames: usize,
    /// Frames that decoded.
    pub decoded: usize,
    /// Points of the smallest, median and largest decoded frame.
    pub points: Option<[usize; 3]>,
    /// Every damaged record or frame: records the index skipped, then frames that did not decode.
    pub damaged: Vec<String>,
}

impl CheckReport {
    /// Whether every record and frame was readable.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty()
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "check: {} ({}): {} of {} frames decoded",
            self.path.display(),
            self.source_kind,
            self.decoded,
            self.frames
        )?;
        if let Some([min, median, max]) = self.points {
            write!(f, ", points/frame min {min}, median {median}, max {max}")?;
        }
        writeln!(f, "; {} damaged", self.damaged.len())?;
        for d in &self.damaged {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

/// Opens any log a source reads (damaged records skipped and listed) and decodes every frame,
/// so damage past frame 0 is found; nothing stops at the first bad frame.
pub fn check(path: &Path) -> Result<CheckReport, InspectError> {
    let source = crate::sources::open(path, None, &crate::sources::SourceOptions::default())?;
    let meta = source.meta();
    let mut damaged: Vec<String> = meta
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.location, s.detail))
        .collect();
    let mut points = Vec::with_capacity(source.len());
    for i in 0..source.len() {
        match source.frame(i) {
            Ok(frame) => points.push(frame.cloud.len()),
            Err(e) => damaged.push(format!("frame {i}: {e}")),
        }
    }
    points.sort_unstable();
    Ok(CheckReport {
        path: path.to_path_buf(),
        source_kind: meta.source_kind,
        frames: source.len(),
        decoded: points.len(),
        points: (!points.is_empty()).then(|| [points[0], points[points.len() / 2], points[points.len() - 1]]),
        damaged,
    })
}

/// Counts of label types, sorted by type name.
fn label_counts(types: impl Iterator<Item = i32>) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for t in types {
        *counts.entry(waymo::proto::label_type_str(t)).or_insert(0usize) += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

fn inspect_waymo_v1(path: &Path, bytes: u64) -> Result<String, InspectError> {
    let source = WaymoV1Source::open(path, WaymoConfig::default())?;
    let meta = source.meta();
    let ts = source.timestamps_micros();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: Waymo v1 segment `{}`, {} bytes, {} frames, {} damaged records skipped",
        path.display(),
        meta.name,
        bytes,
        source.len(),
        meta.skipped.len()
    );
    for s in meta.skipped.iter().take(5) {
        let _ = writeln!(out, "  skipped {}: {}", s.location, s.detail);
    }
    if let (Some(first), Some(last)) = (ts.iter().min(), ts.iter().max()) {
        let _ = writeln!(out, "time: {first} .. {last} µs ({:.1} s)", (last - first) as f64 / 1e6);
    }
    // The first frame that decodes describes the sensors: a damaged frame 0 costs only itself.
    let mut undecodable = Vec::new();
    let mut described = None;
    for i in 0..source.len() {
        match source.frame_proto(i).and_then(|p| Ok((p, source.frame(i)?))) {
            Ok(pair) => {
                described = Some(pair);
                break;
            }
            Err(e) => undecodable.push(e),
        }
    }
    for e in &undecodable {
        let _ = writeln!(out, "  undecodable: {e}");
    }
    let Some((first, frame0)) = described else {
        let _ = writeln!(out, "no frame decodes");
        return Ok(out);
    };
    let context = first.context.clone().unwrap_or_default();
    // Named by its index in the file, which a skipped record before it leaves unchanged.
    let _ = writeln!(out, "lidars (frame {}):", frame0.index);
    for c in &context.laser_calibrations {
        let name = c.name.and_then(waymo::LaserName::from_i32);
        let laser = first.lasers.iter().find(|l| l.name == c.name);
        let has = |r: Option<&waymo::proto::RangeImage>| {
            r.is_some_and(|r| r.range_image_compressed.as_ref().is_some_and(|b| !b.is_empty()))
        };
        let points = match (name, frame0.cloud.channel("laser_id")) {
            (Some(n), Some(crate::cloud::ChannelData::U8(ids))) => ids.iter().filter(|i| **i == n as u8).count(),
            _ => 0,
        };
        let _ = writeln!(
            out,
            "  {:<10} beams {:>2} ({}), returns: {}{}, {} points",
            name.map_or("UNKNOWN", waymo::LaserName::as_str),
            c.beam_inclinations.len(),
            if c.beam_inclinations.is_empty() {
                "uniform"
            } else {
                "listed"
            },
            if has(laser.and_then(|l| l.ri_return1.as_ref())) {
                "1"
            } else {
                "-"
            },
            if has(laser.and_then(|l| l.ri_return2.as_ref())) {
                "2"
            } else {
                "-"
            },
            points
        );
    }
    let _ = writeln!(out, "cameras:");
    for c in &context.camera_calibrations {
        let name = waymo::proto::camera_name_str(c.name.unwrap_or(0));
        let image = first
            .images
            .iter()
            .find(|i| i.name == c.name)
            .and_then(|i| i.image.as_ref());
        let _ = writeln!(
            out,
            "  {:<12} {}x{} f {:.1} image {}",
            name,
            c.width.unwrap_or(0),
            c.height.unwrap_or(0),
            c.intrinsic.first().copied().unwrap_or(0.0),
            image.map_or_else(|| "none".to_string(), |b| format!("{} bytes", b.len()))
        );
    }
    let mut types = Vec::new();
    let mut unread = 0;
    for i in 0..source.len() {
        match source.frame_proto(i) {
            Ok(p) => types.extend(p.laser_labels.iter().map(|l| l.r#type.unwrap_or(0))),
            Err(_) => unread += 1,
        }
    }
    let _ = writeln!(
        out,
        "labels ({} in {} frames): {}",
        types.len(),
        if unread == 0 {
            "all".to_string()
        } else {
            format!("{} of {}", source.len() - unread, source.len())
        },
        label_counts(types.into_iter())
    );
    Ok(out)
}

fn inspect_waymo_v2(folder: &Path) -> Result<String, InspectError> {
    let contexts = waymo::v2::contexts(folder)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: Waymo v2 folder, {} segments",
        folder.display(),
        contexts.len()
    );
    for tag in waymo::v2::COMPONENTS {
        let files = std::fs::read_dir(folder.join(tag)).map(|d| d.count()).unwrap_or(0);
        let _ = writeln!(out, "  {tag:<20} {files} files");
    }
    for context in contexts.iter().take(3) {
        let source = WaymoV2Source::open_segment(folder, context, WaymoConfig::default())?;
        let _ = writeln!(out, "segment `{context}`: {} frames", source.len());
        let lidars: Vec<String> = source
            .laser_calibrations()
            .iter()
            .map(|c| {
                let name = c
                    .name
                    .and_then(waymo::LaserName::from_i32)
                    .map_or("UNKNOWN", waymo::LaserName::as_str);
                format!("{name} ({} beams)", c.beam_inclinations.len())
            })
            .collect();
        let _ = writeln!(
            out,
            "  lidars: {}",
            if lidars.is_empty() {
                "none".to_string()
            } else {
                lidars.join(", ")
            }
        );
        let cameras: Vec<String> = source
            .camera_calibrations()
            .iter()
            .map(|c| {
                format!(
                    "{} {}x{}",
                    waymo::proto::camera_name_str(c.name.unwrap_or(0)),
                    c.width.unwrap_or(0),
                    c.height.unwrap_or(0)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  cameras: {}",
            if cameras.is_empty() {
                "none".to_string()
            } else {
                cameras.join(", ")
            }
        );
        let lidar_box = folder.join("lidar_box").join(format!("{context}.parquet"));
        if lidar_box.is_file() {
            let t = waymo::v2::ComponentTable::read(&lidar_box, &["[LiDARBoxComponent].type"], None)?;
            let types = t.enum_column("[LiDARBoxComponent].type", waymo::proto::label_type_from_name)?;
            let _ = writeln!(
                out,
                "  labels ({} in all frames): {}",
                types.len(),
                label_counts(types.into_iter().flatten())
            );
        } else {
            let _ = writeln!(out, "  labels: no lidar_box component");
        }
    }
    if contexts.len() > 3 {
        let _ = writeln!(out, "… and {} more segments", contexts.len() - 3);
    }
    Ok(out)
}

fn inspect_onnx(path: &Path, bytes: u64) -> Result<String, InspectError> {
    let info = detect::describe_model(path)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: ONNX model, {} bytes, producer {}",
        path.display(),
        bytes,
        info.producer.as_deref().unwrap_or("unknown")
    );
    for (title, tensors) in [("inputs", &info.inputs), ("outputs", &info.outputs)] {
        let _ = writeln!(out, "{title}:");
        for t in tensors {
            let dims: Vec<String> = t
                .shape
                .iter()
                .map(|d| if *d < 0 { "?".to_string() } else { d.to_string() })
                .collect();
            let _ = writeln!(out, "  {:<24} {} [{}]", t.name, t.element_type, dims.join(", "));
        }
    }
    Ok(out)
}

/// Gaps listed by name before the rest are only counted.
const GAPS_SHOWN: usize = 5;

fn rate_hz(count: usize, first: i64, last: i64) -> f64 {
    if count < 2 || last <= first {
        return 0.0;
    }
    (count - 1) as f64 * 1e6 / (last - first) as f64
}

fn inspect_m3ed(path: &Path, bytes: u64) -> Result<String, InspectError> {
    let source = M3edSource::open(path, M3edConfig::default())?;
    let summary = source.summary()?;
    let meta = source.meta();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: M3ED data file, {:.1} MB, sequence {} ({})",
        path.display(),
        bytes as f64 / 1e6,
        meta.name,
        meta.platform
    );
    let sweeps = source.sweeps();
    let (first, last) = match (sweeps.first(), sweeps.last()) {
        (Some(a), Some(b)) => (a.ts_start, b.ts_end),
        _ => (0, 0),
    };
    let duration_s = (last - first) as f64 / 1e6;
    let _ = writeln!(
        out,
        "lidar:  {} sweeps of {} rows ({} skipped), {}x{} {} {}, {:.1} s, {:.2} Hz",
        summary.sweeps,
        summary.rows,
        meta.skipped.len(),
        summary.pixels_per_column,
        summary.columns_per_frame,
        summary.lidar_mode,
        summary.udp_profile,
        duration_s,
        rate_hz(
            sweeps.len(),
            sweeps.first().map_or(0, |s| s.ts_start),
            sweeps.last().map_or(0, |s| s.ts_start)
        ),
    );
    match summary.images {
        Some((n, a, b)) => {
            let _ = writeln!(out, "rgb:    {n} images, {:.2} Hz", rate_hz(n, a, b));
        }
        None => {
            let _ = writeln!(out, "rgb:    none");
        }
    }
    match summary.imu {
        Some((n, a, b)) => {
            let _ = writeln!(out, "imu:    {n} finite samples, {:.1} Hz", rate_hz(n, a, b));
        }
        None => {
            let _ = writeln!(out, "imu:    none");
        }
    }
    match summary.poses {
        Some(n) => {
            let _ = writeln!(out, "poses:  {n} in pose_gt, {} sweeps matched", sweeps.len());
        }
        None => {
            let _ = writeln!(out, "poses:  no pose_gt file beside it");
        }
    }
    if let Some(cal) = &summary.rgb_calibration {
        let distortion = match cal.distortion {
            Distortion::None => "none".to_string(),
            Distortion::RadTan { k1, k2, p1, p2, .. } => format!("radtan [{k1:.4}, {k2:.4}, {p1:.4}, {p2:.4}]"),
            Distortion::Equidistant { k1, k2, k3, k4 } => {
                format!("equidistant [{k1:.4}, {k2:.4}, {k3:.4}, {k4:.4}]")
            }
        };
        let t = cal.sensor_from_camera.translation.vector;
        let (yaw, pitch, roll) = euler_from_isometry(&cal.sensor_from_camera);
        let _ = writeln!(
            out,
            "calib:  rgb {}x{} fx {:.1} fy {:.1} cx {:.1} cy {:.1}, {distortion}",
            cal.width, cal.height, cal.fx, cal.fy, cal.cx, cal.cy
        );
        let _ = writeln!(
            out,
            "        rgb in lidar: t [{:.3}, {:.3}, {:.3}] m, yaw/pitch/roll [{:.1}, {:.1}, {:.1}] deg",
            t.x,
            t.y,
            t.z,
            yaw.to_degrees(),
            pitch.to_degrees(),
            roll.to_degrees()
        );
    }
    // Gaps: skipped rows, and sweep-to-sweep steps over 1.5 times the median step.
    let mut steps: Vec<i64> = sweeps.windows(2).map(|w| w[1].ts_start - w[0].ts_start).collect();
    steps.sort_unstable();
    let median = steps.get(steps.len() / 2).copied().unwrap_or(0);
    let mut gaps: Vec<String> = meta
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.location, s.detail))
        .collect();
    for w in sweeps.windows(2) {
        let step = w[1].ts_start - w[0].ts_start;
        if median > 0 && step * 2 > median * 3 {
            gaps.push(format!(
                "sweep {} -> {}: {:.3} s (median step {:.3} s)",
                w[0].row,
                w[1].row,
                step as f64 / 1e6,
                median as f64 / 1e6
            ));
        }
    }
    let _ = writeln!(out, "gaps:   {}", gaps.len());
    for g in gaps.iter().take(GAPS_SHOWN) {
        let _ = writeln!(out, "  {g}");
    }
    if gaps.len() > GAPS_SHOWN {
        let _ = writeln!(out, "  … and {} more", gaps.len() - GAPS_SHOWN);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::PointCloud;
    use crate::frame::{Frame, Platform};
    use nalgebra::{Isometry3, Translation3, UnitQuaternion};

    fn frame(i: usize) -> Frame {
        let cloud = PointCloud::from_columns(
            vec![1.0, 2.0, f32::NAN, 4.0],
            vec![0.5; 4],
            vec![-1.5; 4],
            vec![0.1, 0.2, 0.3, 0.4],
        )
        .unwrap();
        Frame {
            sequence: "s".into(),
            index: i,
            timestamp_micros: 1_000_000 + i as i64 * 100_000,
            platform: Platform::Vehicle,
            cloud,
            world_from_sensor: Isometry3::from_parts(
                Translation3::new(2.0 * i as f64, 0.0, 0.0),
                UnitQuaternion::identity(),
            ),
            imu: Vec::new(),
            cameras: Vec::new(),
            ground_truth: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The KITTI, PCD, `.npy` and MCAP readers have no summary of their own: `inspect` gives each
    /// the generic one (kind, frames, span, first frame's points and notes).
    #[test]
    fn every_source_kind_is_summarised() {
        let dir = tempfile::tempdir().unwrap();
        let frames: Vec<Frame> = (0..3).map(frame).collect();
        let kitti = dir.path().join("kitti");
        crate::sources::kitti::write_kitti_sequence(&kitti, &frames).unwrap();
        let pcd = dir.path().join("pcd");
        std::fs::create_dir(&pcd).unwrap();
        let npy = dir.path().join("npy");
        std::fs::create_dir(&npy).unwrap();
        for (i, f) in frames.iter().enumerate() {
            let p = pcd.join(format!("{i:06}.pcd"));
            crate::sources::pcd::write_pcd(&p, &f.cloud, crate::sources::pcd::PcdEncoding::Binary).unwrap();
            crate::sources::npy::write_npy(
                &npy.join(format!("{i:06}.npy")),
                &f.cloud,
                &["x", "y", "z", "intensity"],
            )
            .unwrap();
        }
        let bag = dir.path().join("run.mcap");
        crate::sources::mcap::write_bag(&bag, &frames, &crate::sources::mcap::BagWriteOptions::default()).unwrap();
        for (path, kind) in [(&kitti, "kitti-bin"), (&pcd, "pcd"), (&npy, "npy"), (&bag, "mcap")] {
            let text = inspect(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                text.contains(&format!("{kind} log")) && text.contains("3 frames"),
                "{text}"
            );
            assert!(text.contains("frame 0: 3 points"), "{text}");
            assert!(
                text.contains("note: 1 point with a non-finite x, y or z dropped"),
                "{text}"
            );
        }
        // Where the format keeps times and poses, the span and the motion are read back.
        for path in [&kitti, &bag] {
            let text = inspect(path).unwrap();
            assert!(
                text.contains("time:   0.200 s") && text.contains("moves 4.00 m"),
                "{text}"
            );
        }
    }
}
