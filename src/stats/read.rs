//! Reads what the statistics need from a sequence folder, and only that: the few columns of
//! frames, boxes and tracks (Parquet projection), x, y, z of the sampled frames' kept points, the
//! manifest's platform, and the incomplete folders beside the complete ones.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

use super::StatsError;
use super::accumulate::{Accumulator, elevation_bin};
use crate::shards::reader::{Columns, read_projected};
use crate::shards::{SUCCESS_FILE, ShardError};

/// The frame columns the statistics use.
#[derive(Debug, Clone)]
pub(super) struct FrameInfo {
    pub frame_index: i64,
    /// Rotation of `normalized_from_sensor` (row-major 3×3); `None` when the matrix is null.
    pub rotation: Option<[f64; 9]>,
    pub num_points_kept: i64,
    pub points_file: Option<String>,
}

/// The box columns the statistics use.
#[derive(Debug, Clone)]
pub(super) struct BoxInfo {
    pub frame_index: i64,
    pub class: String,
    pub num_points_inside: i64,
    pub bev_range_m: f64,
    pub relative_pitch_rad: f64,
    pub flags: Vec<String>,
    pub review_status: String,
    pub origin: String,
}

/// The track columns the statistics use.
#[derive(Debug, Clone)]
pub(super) struct TrackInfo {
    pub class: String,
    pub num_boxes: i64,
}

fn parquet_error(path: &Path, e: impl ToString) -> StatsError {
    StatsError::Shard(ShardError::Parquet {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

fn schema_error(path: &Path, column: &str, detail: &str) -> StatsError {
    StatsError::Shard(ShardError::Schema {
        path: path.to_path_buf(),
        column: column.to_string(),
        detail: detail.to_string(),
    })
}

/// The rotation parts of a nullable row-major `mat4` column.
fn rotations(c: &Columns, name: &str) -> Result<Vec<Option<[f64; 9]>>, StatsError> {
    Ok(c.fixed::<16>(name)?
        .into_iter()
        .map(|m| m.map(|m| [m[0], m[1], m[2], m[4], m[5], m[6], m[8], m[9], m[10]]))
        .collect())
}

/// The frames of `frames.parquet`.
pub(super) fn frames(path: &Path) -> Result<Vec<FrameInfo>, StatsError> {
    let columns = [
        "frame_index",
        "normalized_from_sensor",
        "num_points_kept",
        "points_file",
    ];
    let mut out = Vec::new();
    for batch in read_projected(path, &columns)? {
        let c = Columns { path, batch: &batch };
        let index = c.i64s_required("frame_index")?;
        let rotation = rotations(&c, "normalized_from_sensor")?;
        let kept = c.i64s_required("num_points_kept")?;
        let file = c.strings("points_file")?;
        for (((frame_index, rotation), num_points_kept), points_file) in
            index.into_iter().zip(rotation).zip(kept).zip(file)
        {
            out.push(FrameInfo {
                frame_index,
                rotation,
                num_points_kept,
                points_file,
            });
        }
    }
    Ok(out)
}

/// The boxes of `boxes.parquet`.
pub(super) fn boxes(path: &Path) -> Result<Vec<BoxInfo>, StatsError> {
    let columns = [
        "frame_index",
        "class",
        "num_points_inside",
        "bev_range_m",
        "relative_pitch_rad",
        "flags",
        "review_status",
        "origin",
    ];
    let mut out = Vec::new();
    for batch in read_projected(path, &columns)? {
        let c = Columns { path, batch: &batch };
        let frame = c.i64s_required("frame_index")?;
        let class = c.strings_required("class")?;
        let inside = c.i64s_required("num_points_inside")?;
        let range = c.f64s_required("bev_range_m")?;
        let pitch = c.f64s_required("relative_pitch_rad")?;
        let flags = c.string_lists("flags")?;
        let status = c.strings_required("review_status")?;
        let origin = c.strings_required("origin")?;
        for i in 0..batch.num_rows() {
            out.push(BoxInfo {
                frame_index: frame[i],
                class: class[i].clone(),
                num_points_inside: inside[i],
                bev_range_m: range[i],
                relative_pitch_rad: pitch[i],
                flags: flags[i].clone(),
                review_status: status[i].clone(),
                origin: origin[i].clone(),
            });
        }
    }
    Ok(out)
}

/// The tracks of `tracks.parquet`.
pub(super) fn tracks(path: &Path) -> Result<Vec<TrackInfo>, StatsError> {
    let mut out = Vec::new();
    for batch in read_projected(path, &["class", "num_boxes"])? {
        let c = Columns { path, batch: &batch };
        let class = c.strings_required("class")?;
        let boxes = c.i64s_required("num_boxes")?;
        out.extend(
            class
                .into_iter()
                .zip(boxes)
                .map(|(class, num_boxes)| TrackInfo { class, num_boxes }),
        );
    }
    Ok(out)
}

/// The platform of a sequence folder: `manifest.json`'s `platform`, else the parent folder's name.
pub(super) fn platform(dir: &Path) -> Result<String, StatsError> {
    let path = dir.join("manifest.json");
    let from_folder = || {
        dir.parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "other".to_string())
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!("{}: missing; the platform is the folder's", path.display());
            return Ok(from_folder());
        }
        Err(source) => return Err(StatsError::Shard(ShardError::Io { path, source })),
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| StatsError::Data {
        path: path.clone(),
        detail: format!("not JSON: {e}"),
    })?;
    match value.get("platform") {
        Some(serde_json::Value::String(p)) => Ok(p.clone()),
        None => Ok(from_folder()),
        Some(other) => Err(StatsError::Data {
            path,
            detail: format!("`platform` is not a string: {other}"),
        }),
    }
}

/// The incomplete sequence folders at or under `path`, where `sequence_dirs` looks: a folder with
/// `boxes.parquet` but no `_SUCCESS`, or a `.partial` folder.
pub(super) fn incomplete_dirs(path: &Path) -> Vec<PathBuf> {
    let has = |p: &Path, f: &str| p.join(f).is_file();
    let complete = |p: &Path| has(p, "boxes.parquet") && has(p, SUCCESS_FILE) && !is_partial(p);
    let incomplete = |p: &Path| is_partial(p) || (has(p, "boxes.parquet") && !has(p, SUCCESS_FILE));
    let children = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|r| {
                r.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    if complete(path) {
        return Vec::new();
    }
    if incomplete(path) {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for a in children(path) {
        if complete(&a) {
            continue;
        }
        if incomplete(&a) {
            out.push(a);
            continue;
        }
        out.extend(children(&a).into_iter().filter(|b| incomplete(b)));
    }
    out
}

fn is_partial(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".partial"))
}

/// Adds the elevation angles of the kept points of `frames` (of the sequence folder `dir`) to
/// `acc`: x, y, z only, each points file opened once, its files in parallel.
pub(super) fn add_point_elevations(dir: &Path, frames: &[&FrameInfo], acc: &mut Accumulator) -> Result<(), StatsError> {
    let mut by_file: HashMap<&str, Vec<&FrameInfo>> = HashMap::new();
    for f in frames {
        if let Some(file) = f.points_file.as_deref() {
            by_file.entry(file).or_default().push(f);
        }
    }
    let mut files: Vec<(&str, Vec<&FrameInfo>)> = by_file.into_iter().collect();
    files.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<Elevations> = files
        .par_iter()
        .map(|(file, frames)| file_elevations(&dir.join(file), frames))
        .collect::<Result<_, _>>()?;
    for p in parts {
        acc.elevation_frames_used += p.frames;
        acc.elevation_points_used += p.used;
        acc.elevation_points_skipped += p.skipped;
        for (a, b) in acc.elevation.iter_mut().zip(p.bins) {
            *a += b;
        }
    }
    Ok(())
}

struct Elevations {
    frames: u64,
    used: u64,
    skipped: u64,
    bins: [u64; super::ELEVATION_BINS],
}

/// The elevation histogram of `frames`' points in one points file (one row group per frame, found
/// by its `frame_index` statistics).
fn file_elevations(path: &Path, frames: &[&FrameInfo]) -> Result<Elevations, StatsError> {
    let file = File::open(path).map_err(|source| {
        StatsError::Shard(ShardError::Io {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet_error(path, e))?;
    let schema = builder.parquet_schema();
    let names = ["frame_index", "x_sensor_m", "y_sensor_m", "z_sensor_m"];
    let mut leaves = Vec::new();
    for name in names {
        let i = (0..schema.num_columns())
            .find(|&i| schema.column(i).path().string() == name)
            .ok_or_else(|| schema_error(path, name, "missing"))?;
        leaves.push(i);
    }
    let frame_leaf = leaves[0];
    let mut wanted: HashMap<i64, Option<[f64; 9]>> = frames.iter().map(|f| (f.frame_index, f.rotation)).collect();
    let mut groups = Vec::new();
    for (g, rg) in builder.metadata().row_groups().iter().enumerate() {
        if let Some(parquet::file::statistics::Statistics::Int64(s)) = rg.column(frame_leaf).statistics()
            && let (Some(min), Some(max)) = (s.min_opt(), s.max_opt())
            && min == max
            && wanted.contains_key(min)
        {
            groups.push(g);
        }
    }
    let mask = ProjectionMask::leaves(schema, leaves);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(groups)
        .with_batch_size(1 << 20)
        .build()
        .map_err(|e| parquet_error(path, e))?;
    let mut out = Elevations {
        frames: 0,
        used: 0,
        skipped: 0,
        bins: [0; super::ELEVATION_BINS],
    };
    let mut seen: HashMap<i64, ()> = HashMap::new();
    for batch in reader {
        let batch = batch.map_err(|e| parquet_error(path, e))?;
        let c = Columns { path, batch: &batch };
        let frame = c.i64s_required("frame_index")?;
        let (x, y, z) = (c.f32s("x_sensor_m")?, c.f32s("y_sensor_m")?, c.f32s("z_sensor_m")?);
        let mut current: Option<(i64, Option<[f64; 9]>)> = None;
        for i in 0..frame.len() {
            let rotation = match current {
                Some((f, r)) if f == frame[i] => r,
                _ => {
                    let Some(&r) = wanted.get(&frame[i]) else {
                        return Err(StatsError::Data {
                            path: path.to_path_buf(),
                            detail: format!("frame {} found in a row group of another frame", frame[i]),
                        });
                    };
                    seen.insert(frame[i], ());
                    current = Some((frame[i], r));
                    r
                }
            };
            match elevation_bin(x[i], y[i], z[i], rotation.as_ref()) {
                Some(b) => {
                    out.bins[b] += 1;
                    out.used += 1;
                }
                None => out.skipped += 1,
            }
        }
    }
    wanted.retain(|f, _| !seen.contains_key(f));
    if let Some(missing) = wanted.keys().min() {
        return Err(StatsError::Data {
            path: path.to_path_buf(),
            detail: format!(
                "frames.parquet says frame {missing} has kept points here, but no row group holds it ({} frames missing)",
                wanted.len()
            ),
        });
    }
    out.frames = frames.len() as u64;
    Ok(out)
}
