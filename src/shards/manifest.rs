//! `manifest.json`: what a sequence folder holds and how it was made — schema version, the
//! resolved config and its hash, the detectors' model hashes, counts, stage times and the frames
//! that could not be read. Clock times live here and nowhere in the Parquet files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the shard schema (`docs/schema.md`); a reader refuses a major version it does not know.
pub const SCHEMA_VERSION: &str = "1.4";

/// One detector of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectorRecord {
    /// The manifest's name.
    pub name: String,
    /// Its folder as the config names it.
    pub path: String,
    /// Fusion weight.
    pub weight: f64,
    /// `(role, sha256)` of every model file (`encoder`, `head`, `model`).
    pub models: Vec<(String, String)>,
}

/// Counts over the sequence.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SequenceCounts {
    /// Frames written (rows of `frames.parquet`).
    pub frames: u64,
    /// Frames the source could not read (listed in `errors`).
    pub frames_skipped: u64,
    /// LiDAR points read.
    pub points: u64,
    /// Points written to `points/`.
    pub points_kept: u64,
    /// Raw detections (rows of `detections.parquet`).
    pub detections: u64,
    /// Fused boxes.
    pub fused: u64,
    /// Final boxes (rows of `boxes.parquet`).
    pub boxes: u64,
    /// Boxes per class.
    pub boxes_by_class: BTreeMap<String, u64>,
    /// Boxes per origin.
    pub boxes_by_origin: BTreeMap<String, u64>,
    /// Tracks (rows of `tracks.parquet`).
    pub tracks: u64,
    /// Flagged boxes (rows of `review.parquet`).
    pub flagged: u64,
}

/// Wall time of each pass (s).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StageTimes {
    /// Pass 1: read, detect, fuse, write points (wall time of the parallel pass).
    pub per_frame_s: f64,
    /// Of which, summed over frames: reading.
    pub read_cpu_s: f64,
    /// Summed over frames: detectors (pillarise, ONNX, decode, NMS).
    pub detect_cpu_s: f64,
    /// Summed over frames: the normalization inputs (IMU, ground fit), plus the sequence step.
    #[serde(default)]
    pub normalize_cpu_s: f64,
    /// Summed over frames: the detectors' ONNX sessions alone.
    pub onnx_cpu_s: f64,
    /// Summed over frames: fusion.
    pub fuse_cpu_s: f64,
    /// Pass 2: tracking.
    pub track_s: f64,
    /// Pass 2: setting the tracked boxes on the ground (`stages.ground_contact`).
    #[serde(default)]
    pub ground_contact_s: f64,
    /// Pass 3: box rows (points inside, cameras, occlusion, flags).
    pub describe_s: f64,
    /// The RGB class check: reading the chosen views' images and classifying them.
    #[serde(default)]
    pub camera_s: f64,
    /// Writing the tables.
    pub write_s: f64,
    /// The whole sequence.
    pub total_s: f64,
}

/// A frame or record that could not be used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameError {
    /// Frame index when known.
    pub frame_index: Option<i64>,
    /// Where (`record 41 at offset 1234`, `frame 7`).
    pub location: String,
    /// What was wrong.
    pub detail: String,
}

/// The contents of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    /// [`SCHEMA_VERSION`].
    pub schema_version: String,
    /// boxlayer's version.
    pub boxlayer_version: String,
    /// The source's sequence name.
    pub sequence: String,
    /// The platform.
    pub platform: String,
    /// The reader (`waymo-v1`, `m3ed`, …).
    pub source_kind: String,
    /// The log as the data manifest names it (relative to the data root), or its file name.
    pub source: String,
    /// `detect` or `labels`.
    pub origin: String,
    /// Which pass the run started from (`read` for a full run, `fuse`, `track`).
    pub started_from: String,
    /// The resolved pipeline config (TOML).
    pub config_toml: String,
    /// Its sha256.
    pub config_sha256: String,
    /// The detectors.
    pub detectors: Vec<DetectorRecord>,
    /// Counts.
    pub counts: SequenceCounts,
    /// Stage times.
    pub stage_times: StageTimes,
    /// Frames and records that could not be used.
    pub errors: Vec<FrameError>,
    /// Self-evaluation against the source's labels (`detect` origin on a labelled source):
    /// AP per class and MOTA; `null` otherwise.
    pub scores: Option<serde_json::Value>,
    /// When the run finished (seconds since the Unix epoch).
    pub finished_unix_s: u64,
    /// The platform profile the frames were normalized with; `null` while normalization is off.
    #[serde(default)]
    pub normalization: Option<NormalizationRecord>,
    /// The RGB check's classifier; `null` while the check is off.
    #[serde(default)]
    pub classifier: Option<ClassifierRecord>,
    /// `[A, B]` when the run took only positions `A..B` of the log's frames (`--frames`); `null`
    /// for every frame. With `config_sha256`, what `--resume` compares.
    #[serde(default)]
    pub frames: Option<[u64; 2]>,
}

/// The image model of the RGB class check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierRecord {
    /// The manifest's name.
    pub name: String,
    /// Its folder as the config names it.
    pub path: String,
    /// sha256 of its ONNX file.
    pub sha256: String,
}

/// The profile a sequence was normalized with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizationRecord {
    /// The profile's name.
    pub profile: String,
    /// Where it came from: a file, or `builtin:<name>`.
    pub origin: String,
    /// sha256 of its TOML text.
    pub sha256: String,
    /// The profile as used (TOML, every default written out).
    pub profile_toml: String,
}
