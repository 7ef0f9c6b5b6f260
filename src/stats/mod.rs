//! Dataset statistics of a box layer (3EED Table 6, Table 10, Fig. 4, Fig. 13): `boxlayer stats`.
//!
//! [`compute`] reads the complete sequence folders under a run's output root (frames, boxes,
//! tracks and a sample of the kept points) and gathers, per platform and over all of them, the
//! counts, objects per frame, points per box, the targets' (ρ, θ) bins, the points' elevation
//! angles, class counts, track lengths and review-flag rates ([`DatasetStats`], serialisable to
//! the JSON of `docs/stats.md`). [`DatasetStats::table`] prints them; [`plots`] draws them as PNG.

mod accumulate;
mod plot;
mod read;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use thiserror::Error;

use crate::shards::ShardError;

pub use plot::{PLOT_HEIGHT, PLOT_WIDTH, Plot, plots};

use accumulate::Accumulator;

/// Errors computing or drawing statistics; each names the file (or plot) and what was wrong.
#[derive(Debug, Error)]
pub enum StatsError {
    /// A shard file could not be read (the error names it).
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// No complete sequence folder at or under the path.
    #[error("{path}: no complete sequence folder (with boxes.parquet and _SUCCESS); {incomplete} incomplete skipped")]
    NoSequences {
        /// The path given.
        path: PathBuf,
        /// Incomplete folders found there.
        incomplete: usize,
    },
    /// A file holds something the statistics cannot use (a bad manifest, a missing frame).
    #[error("{path}: {detail}")]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A plot could not be drawn or encoded.
    #[error("plot `{name}`: {detail}")]
    Plot {
        /// The plot's name.
        name: String,
        /// What went wrong.
        detail: String,
    },
}

/// What [`compute`] samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsOptions {
    /// At most this many frames with kept points per sequence feed the point-elevation histogram
    /// (evenly spaced; 0 reads no points).
    pub point_frames: usize,
}

impl Default for StatsOptions {
    fn default() -> Self {
        Self { point_frames: 50 }
    }
}

/// Labels of the objects-per-frame bins (3EED Table 10, with an empty-frame bin).
pub const OBJECTS_PER_FRAME_BINS: [&str; 6] = ["0", "1-3", "4-6", "7-9", "10-12", "13+"];
/// Labels of the points-per-box bins (3EED Fig. 13).
pub const POINTS_PER_BOX_BINS: [&str; 6] = ["0-99", "100-299", "300-499", "500-699", "700-899", "900+"];
/// Labels of the track-length bins (boxes per track).
pub const TRACK_LENGTH_BINS: [&str; 6] = ["1", "2-4", "5-9", "10-19", "20-49", "50+"];
/// Number of ρ bins: 10 m wide from 0 to 80 m, then 80 m and beyond.
pub const RHO_BINS: usize = 9;
/// Number of θ bins: 10° wide from −90° to 90°.
pub const THETA_BINS: usize = 18;
/// Number of point-elevation bins: 5° wide from −90° to 90°.
pub const ELEVATION_BINS: usize = 36;

/// Counts per bin, with each bin's label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// Bin labels, in order.
    pub labels: Vec<String>,
    /// Count per bin (same length as `labels`).
    pub counts: Vec<u64>,
}

impl Histogram {
    fn new(labels: impl IntoIterator<Item = String>, counts: &[u64]) -> Self {
        Self {
            labels: labels.into_iter().collect(),
            counts: counts.to_vec(),
        }
    }

    /// The sum of the counts.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Boxes per frame (3EED Table 6 "objects per scene", Table 10).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectsPerFrame {
    /// Mean box rows per frame of `frames.parquet` (a frame without boxes counts 0); null without frames.
    pub mean: Option<f64>,
    /// Frames per bin of their box count ([`OBJECTS_PER_FRAME_BINS`]).
    pub histogram: Histogram,
}

/// LiDAR points inside each box (`num_points_inside`; 3EED Table 6, Fig. 13).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointsPerBox {
    /// Mean `num_points_inside` over box rows; null without boxes.
    pub mean: Option<f64>,
    /// Boxes per bin ([`POINTS_PER_BOX_BINS`]).
    pub histogram: Histogram,
    /// Boxes with fewer than 100 points.
    pub below_100: u64,
    /// Their share of the boxes; null without boxes.
    pub below_100_fraction: Option<f64>,
    /// Boxes with 900 points or more.
    pub at_least_900: u64,
    /// Their share of the boxes; null without boxes.
    pub at_least_900_fraction: Option<f64>,
}

/// Box rows binned by the target's BEV range ρ and relative pitch θ (3EED Fig. 4 left).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetPolar {
    /// ρ bin labels (m): `0-10` … `70-80`, `80+`.
    pub rho_labels: Vec<String>,
    /// θ bin labels (degrees): `-90..-80` … `80..90`.
    pub theta_labels: Vec<String>,
    /// `counts[ρ bin][θ bin]`: box rows.
    pub counts: Vec<Vec<u64>>,
    /// Box rows with a non-finite ρ or θ (in no bin).
    pub non_finite: u64,
}

/// Elevation angles of kept LiDAR points in the gravity-aligned frame (3EED Fig. 4 right).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointElevation {
    /// Frames with kept points (`num_points_kept` > 0 and a `points_file`).
    pub frames_with_points: u64,
    /// Of them, the frames read (at most `point_frames` per sequence, evenly spaced).
    pub frames_used: u64,
    /// Points of those frames in the histogram.
    pub points_used: u64,
    /// Points of those frames left out: at the sensor's origin, or not finite.
    pub points_skipped: u64,
    /// Points per 5° elevation bin from −90° to 90° (labels `-90..-85` … `85..90`).
    pub histogram: Histogram,
}

/// Boxes per track.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackLengths {
    /// Mean `num_boxes` over tracks; null without tracks.
    pub mean: Option<f64>,
    /// Tracks per bin ([`TRACK_LENGTH_BINS`]).
    pub histogram: Histogram,
}

/// How many boxes carry something, and their share of the boxes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    /// Boxes.
    pub count: u64,
    /// `count / boxes`; null without boxes.
    pub fraction: Option<f64>,
}

/// The statistics of one platform's sequences (or of all).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlatformStats {
    /// Complete sequence folders.
    pub sequences: u64,
    /// Rows of `frames.parquet`.
    pub frames: u64,
    /// Rows of `boxes.parquet`.
    pub boxes: u64,
    /// Rows of `tracks.parquet`.
    pub tracks: u64,
    /// Boxes per frame.
    pub objects_per_frame: ObjectsPerFrame,
    /// Points per box.
    pub points_per_box: PointsPerBox,
    /// Box rows by (ρ, θ).
    pub target_polar: TargetPolar,
    /// Elevation of kept points.
    pub point_elevation: PointElevation,
    /// Box rows per class.
    pub boxes_by_class: BTreeMap<String, u64>,
    /// Tracks per class.
    pub tracks_by_class: BTreeMap<String, u64>,
    /// Boxes per track.
    pub track_lengths: TrackLengths,
    /// Per review flag: boxes carrying it.
    pub flags: BTreeMap<String, Rate>,
    /// Box rows per `review_status`.
    pub review_status: BTreeMap<String, u64>,
    /// Box rows per `origin`.
    pub origin: BTreeMap<String, u64>,
}

/// The statistics of a box layer: per platform and over all of it (`docs/stats.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetStats {
    /// The path the statistics were computed from.
    pub input: String,
    /// [`StatsOptions::point_frames`] used.
    pub point_frames: usize,
    /// Incomplete sequence folders skipped (`boxes.parquet` without `_SUCCESS`, or `.partial`).
    pub incomplete_skipped: u64,
    /// Per platform (`vehicle`, `drone`, `quadruped`, as each folder's `manifest.json` says).
    pub platforms: BTreeMap<String, PlatformStats>,
    /// Over every sequence.
    pub all: PlatformStats,
}

impl DatasetStats {
    /// The platforms in display order: vehicle, drone, quadruped, then any other by name.
    pub fn platform_order(&self) -> Vec<&str> {
        let rank = |p: &str| match p {
            "vehicle" => 0,
            "drone" => 1,
            "quadruped" => 2,
            _ => 3,
        };
        let mut names: Vec<&str> = self.platforms.keys().map(String::as_str).collect();
        names.sort_by_key(|p| (rank(p), p.to_string()));
        names
    }

    /// The terminal table: one column per platform, then `all`.
    pub fn table(&self) -> String {
        table::render(self)
    }
}

/// The statistics of the complete sequence folders at or under `out_dir` (a run's output root or
/// one sequence folder); incomplete folders are skipped with a warning.
pub fn compute(out_dir: &Path, options: &StatsOptions) -> Result<DatasetStats, StatsError> {
    let dirs = crate::shards::sequence_dirs(out_dir);
    let incomplete = read::incomplete_dirs(out_dir);
    if !incomplete.is_empty() {
        tracing::warn!(
            "{}: {} incomplete sequence folders skipped (no _SUCCESS, or .partial): {}",
            out_dir.display(),
            incomplete.len(),
            incomplete
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if dirs.is_empty() {
        return Err(StatsError::NoSequences {
            path: out_dir.to_path_buf(),
            incomplete: incomplete.len(),
        });
    }
    let per_sequence: Vec<(String, Accumulator)> = dirs
        .par_iter()
        .map(|dir| sequence_stats(dir, options))
        .collect::<Result<_, _>>()?;
    let mut platforms: BTreeMap<String, Accumulator> = BTreeMap::new();
    let mut all = Accumulator::default();
    for (platform, acc) in &per_sequence {
        platforms.entry(platform.clone()).or_default().merge(acc);
        all.merge(acc);
    }
    Ok(DatasetStats {
        input: out_dir.display().to_string(),
        point_frames: options.point_frames,
        incomplete_skipped: incomplete.len() as u64,
        platforms: platforms.iter().map(|(p, a)| (p.clone(), a.finish())).collect(),
        all: all.finish(),
    })
}

/// One sequence folder's platform and accumulated statistics.
fn sequence_stats(dir: &Path, options: &StatsOptions) -> Result<(String, Accumulator), StatsError> {
    let platform = read::platform(dir)?;
    let frames = read::frames(&dir.join("frames.parquet"))?;
    let boxes = read::boxes(&dir.join("boxes.parquet"))?;
    let tracks = read::tracks(&dir.join("tracks.parquet"))?;
    let mut acc = Accumulator {
        sequences: 1,
        ..Accumulator::default()
    };
    acc.add_frames_and_boxes(&frames, &boxes);
    acc.add_tracks(&tracks);
    let with_points: Vec<&read::FrameInfo> = {
        let mut v: Vec<&read::FrameInfo> = frames
            .iter()
            .filter(|f| f.num_points_kept > 0 && f.points_file.is_some())
            .collect();
        v.sort_by_key(|f| f.frame_index);
        v
    };
    acc.elevation_frames_with_points = with_points.len() as u64;
    let chosen: Vec<&read::FrameInfo> = sample_positions(with_points.len(), options.point_frames)
        .into_iter()
        .map(|i| with_points[i])
        .collect();
    read::add_point_elevations(dir, &chosen, &mut acc)?;
    Ok((platform, acc))
}

/// Positions of `k` evenly spaced items among `n`: `floor(i (n − 1) / (k − 1))` for `i` in `0..k`
/// when `n > k` (deduplicated), all `n` otherwise.
pub fn sample_positions(n: usize, k: usize) -> Vec<usize> {
    if n <= k {
        return (0..n).collect();
    }
    match k {
        0 => Vec::new(),
        1 => vec![0],
        _ => {
            let mut v: Vec<usize> = (0..k).map(|i| i * (n - 1) / (k - 1)).collect();
            v.dedup();
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_positions_spread_over_the_frames() {
        assert_eq!(sample_positions(3, 5), vec![0, 1, 2]);
        assert_eq!(sample_positions(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(sample_positions(5, 1), vec![0]);
        assert_eq!(sample_positions(5, 0), Vec::<usize>::new());
        assert_eq!(sample_positions(2000, 50).len(), 50);
        assert_eq!(*sample_positions(2000, 50).last().unwrap(), 1999);
    }
}
