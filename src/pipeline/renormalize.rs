//! `boxlayer normalize`: re-normalize a finished sequence folder with another platform profile,
//! without rerunning detection. Each frame's inputs are rebuilt from what the folder stores (the
//! pose, the kept points for the ground fit) and, given the log, its IMU and full sweeps; the
//! frames' normalization columns and every box's `box_normalized` / `aabb_normalized` are
//! recomputed from the stored sensor-frame values, and the folder is replaced as a whole, so a
//! crash leaves the old folder, never a mix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::PipelineError;
use super::config::PipelineConfig;
use crate::cloud::PointCloud;
use crate::frame::Frame;
use crate::geometry::pose::{isometry_from_row_major, row_major_from_isometry};
use crate::geometry::{Box3, aabb};
use crate::normalize::{FrameInputs, FrameNormalization, LoadedProfile, normalize_sequence};
use crate::shards::{
    BoxRow, FrameRow, NormalizationRecord, Replacement, RunManifest, SUCCESS_FILE, ShardError, ShardOptions,
    read_box_rows, read_frame_rows, read_points_frame, replace_sequence,
};
use crate::sources::Source;

/// What one re-normalization did.
#[derive(Debug, Clone, PartialEq)]
pub struct RenormalizeSummary {
    /// The folder.
    pub dir: PathBuf,
    /// Frames re-normalized.
    pub frames: usize,
    /// Of them, frames whose ground fit had points (stored or from the log).
    pub frames_with_points: usize,
    /// Of them, frames with IMU samples from the log.
    pub frames_with_imu: usize,
    /// Box rows recomputed.
    pub boxes: usize,
}

/// Re-normalizes the finished sequence folder `dir` with `profile`; `log` (the sequence's log,
/// opened) supplies IMU samples and the sweeps whose points were not kept.
pub fn renormalize(
    dir: &Path,
    profile: &LoadedProfile,
    log: Option<&dyn Source>,
) -> Result<RenormalizeSummary, PipelineError> {
    let shard = |e| PipelineError::Shard(e);
    if !dir.join(SUCCESS_FILE).is_file() {
        return Err(PipelineError::Config(format!(
            "{}: not a finished sequence folder (no {SUCCESS_FILE})",
            dir.display()
        )));
    }
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path).map_err(|source| PipelineError::Io {
        path: manifest_path.clone(),
        source,
    })?;
    let mut manifest: RunManifest = serde_json::from_str(&text).map_err(|e| {
        PipelineError::Shard(ShardError::Parquet {
            path: manifest_path.clone(),
            detail: e.to_string(),
        })
    })?;
    let mut frames = read_frame_rows(&dir.join("frames.parquet")).map_err(shard)?;
    let mut boxes = read_box_rows(&dir.join("boxes.parquet")).map_err(shard)?;
    let log_frames: HashMap<i64, usize> = match log {
        Some(source) => (0..source.len())
            .filter_map(|k| source.frame(k).ok().map(|f| (f.index as i64, k)))
            .collect(),
        None => HashMap::new(),
    };
    let (mut with_points, mut with_imu) = (0, 0);
    let mut inputs = Vec::with_capacity(frames.len());
    for row in &frames {
        let mut frame = match (log, log_frames.get(&row.frame_index)) {
            (Some(source), Some(&k)) => source.frame(k)?,
            _ => stored_frame(dir, row, &manifest)?,
        };
        // The pose is the stored one: the layer's boxes were placed with it.
        frame.world_from_sensor = isometry_from_row_major(&row.world_from_sensor, 1e-6).ok_or_else(|| {
            PipelineError::Config(format!(
                "{}: frame {}: world_from_sensor is not rigid",
                dir.display(),
                row.frame_index
            ))
        })?;
        with_points += usize::from(!frame.cloud.is_empty());
        with_imu += usize::from(!frame.imu.is_empty());
        inputs.push(FrameInputs::from_frame(&frame, &profile.profile));
    }
    let normalized = normalize_sequence(&inputs, &profile.profile);
    let mut by_frame = HashMap::new();
    for (row, n) in frames.iter_mut().zip(normalized) {
        by_frame.insert(row.frame_index, n.normalized_from_sensor);
        set_frame_normalization(row, n);
    }
    for b in &mut boxes {
        renormalize_box(b, by_frame.get(&b.frame_index));
    }
    manifest.normalization = Some(NormalizationRecord {
        profile: profile.profile.name.clone(),
        origin: profile.origin.clone(),
        sha256: profile.sha256.clone(),
        // A loaded profile always writes back (its unit test reads every shipped one back).
        profile_toml: toml::to_string(&profile.profile).unwrap_or_default(),
    });
    replace_folder(dir, &manifest, &frames, &boxes)?;
    Ok(RenormalizeSummary {
        dir: dir.to_path_buf(),
        frames: frames.len(),
        frames_with_points: with_points,
        frames_with_imu: with_imu,
        boxes: boxes.len(),
    })
}

/// Writes the folder anew with its new frames and boxes (`shards::replace_sequence`).
fn replace_folder(
    dir: &Path,
    manifest: &RunManifest,
    frames: &[FrameRow],
    boxes: &[BoxRow],
) -> Result<(), PipelineError> {
    let replacement = Replacement {
        frames: Some(frames),
        boxes: Some(boxes),
        ..Replacement::default()
    };
    replace_sequence(dir, manifest, shard_options(manifest), replacement)?;
    Ok(())
}

/// The shard options a folder was written with (its manifest's config), for rewriting it.
pub fn shard_options(manifest: &RunManifest) -> ShardOptions {
    let outputs = toml::from_str::<PipelineConfig>(&manifest.config_toml)
        .map(|c| c.outputs)
        .unwrap_or_default();
    ShardOptions {
        compression_level: outputs.compression_level,
        row_group_rows: outputs.row_group_rows,
        frames_per_part: outputs.frames_per_part,
    }
}

/// A frame rebuilt from the folder alone: its stored points (none when not kept), no IMU.
fn stored_frame(dir: &Path, row: &FrameRow, manifest: &RunManifest) -> Result<Frame, PipelineError> {
    let cloud = match &row.points_file {
        Some(file) => match read_points_frame(&dir.join(file), row.frame_index)? {
            Some(p) => PointCloud::from_columns(p.x, p.y, p.z, p.intensity).map_err(|e| {
                PipelineError::Config(format!("{}: frame {}: {e}", dir.join(file).display(), row.frame_index))
            })?,
            None => PointCloud::new(),
        },
        None => PointCloud::new(),
    };
    Ok(Frame {
        sequence: manifest.sequence.clone(),
        index: row.frame_index.max(0) as usize,
        timestamp_micros: row.timestamp_us,
        platform: manifest.platform.parse().unwrap_or(crate::frame::Platform::Other),
        cloud,
        world_from_sensor: nalgebra::Isometry3::identity(),
        imu: Vec::new(),
        cameras: Vec::new(),
        ground_truth: Vec::new(),
        notes: Vec::new(),
    })
}

/// A frame row's normalization columns from its normalization.
pub(super) fn set_frame_normalization(row: &mut FrameRow, n: FrameNormalization) {
    row.normalized_from_sensor = Some(row_major_from_isometry(&n.normalized_from_sensor));
    row.gravity_method = Some(n.up.method.as_str().to_string());
    row.gravity_inputs = n.inputs.iter().map(|m| m.as_str().to_string()).collect();
    row.gravity_confidence = Some(n.confidence);
    row.sensor_height_m = n.sensor_height_m;
    row.normalization_notes = n.notes;
}

/// `box_normalized` and `aabb_normalized` from the box's sensor-frame values; null without a
/// normalization.
pub(super) fn renormalize_box(b: &mut BoxRow, normalized_from_sensor: Option<&nalgebra::Isometry3<f64>>) {
    match normalized_from_sensor {
        Some(n) => {
            let boxed = Box3::from_array(b.box_sensor).transformed(n);
            let (lo, hi) = aabb(&boxed);
            b.box_normalized = Some(boxed.to_array());
            b.aabb_normalized = Some([lo.x, lo.y, lo.z, hi.x, hi.y, hi.z]);
        }
        None => {
            b.box_normalized = None;
            b.aabb_normalized = None;
        }
    }
}
