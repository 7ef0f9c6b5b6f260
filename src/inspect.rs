//! `boxlayer inspect`: a one-screen summary of any input boxlayer can read. It recognises a file
//! by its extension and contents and refuses what it cannot read, naming the file.

use std::fmt::Write as _;
use std::path::Path;

use thiserror::Error;

use crate::detect;
use crate::sources::waymo::{self, WaymoConfig, WaymoV1Source, WaymoV2Source};
use crate::sources::{Source, SourceError};

/// Errors from `inspect`.
#[derive(Debug, Error)]
pub enum InspectError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
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
pub const KNOWN_KINDS: &str = "ONNX models (.onnx), Waymo v1 segments (.tfrecord), Waymo v2 split folders";

/// Returns a short human-readable summary of the file at `path`.
pub fn inspect(path: &Path) -> Result<String, InspectError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| InspectError::Io {
        path: shown.clone(),
        source,
    })?;
    if meta.is_dir() && waymo::v2::is_v2_folder(path) {
        return inspect_waymo_v2(path);
    }
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("onnx") => inspect_onnx(path, meta.len()),
        Some("tfrecord" | "tfrecords") => inspect_waymo_v1(path, meta.len()),
        _ => Err(InspectError::Unsupported {
            path: shown,
            known: KNOWN_KINDS,
        }),
    }
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
    let first = source.frame_proto(0)?;
    let context = first.context.clone().unwrap_or_default();
    let _ = writeln!(out, "lidars (frame 0):");
    let frame0 = source.frame(0)?;
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
    for i in 0..source.len() {
        let p = source.frame_proto(i)?;
        types.extend(p.laser_labels.iter().map(|l| l.r#type.unwrap_or(0)));
    }
    let _ = writeln!(
        out,
        "labels ({} in all frames): {}",
        types.len(),
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
