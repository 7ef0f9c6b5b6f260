//! The box layer on disk: one folder per sequence holding Parquet files (zstd) for frames, points,
//! boxes, tracks, raw detections and the boxes to review, a `manifest.json` and `_SUCCESS`, written
//! last. Rows are plain structs ([`FrameRow`], [`BoxRow`], …); this module turns them into Arrow
//! columns named after their frame and unit (`docs/schema.md`), writes every file under a
//! temporary name and renames it into place, and reads the files back. It runs no stage.

mod manifest;
pub(crate) mod reader;
mod schema;
mod writer;

use std::path::PathBuf;

use thiserror::Error;

pub use manifest::{
    ClassifierRecord, DetectorRecord, FrameError, NormalizationRecord, RunManifest, SCHEMA_VERSION, SequenceCounts,
    StageTimes,
};
pub use reader::{
    read_box_rows, read_detection_rows, read_edit_rows, read_frame_rows, read_points_frame, read_track_rows,
    sequence_dirs,
};
pub use schema::{
    BOX_ELEMENT_ORDER, box_schema, detection_schema, edit_schema, frame_schema, points_schema, review_schema,
    track_schema,
};
pub use writer::{
    DetectionsWriter, OLD_SUFFIX, PointsWriter, Replacement, SUCCESS_FILE, SequenceWriter, ShardOptions,
    is_temporary_name, replace_sequence, staging_dir,
};

/// Errors writing or reading shards; each names the file.
#[derive(Debug, Error)]
pub enum ShardError {
    /// The operating system refused a read or write.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Arrow or Parquet refused the data or the file.
    #[error("{path}: {detail}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A file does not follow the schema (missing column, wrong type, bad value).
    #[error("{path}: column `{column}`: {detail}")]
    Schema {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// What is wrong.
        detail: String,
    },
}

/// One camera's view of a box.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraFootprint {
    /// Camera name (`FRONT`, `ovc_rgb`).
    pub camera: String,
    /// Whether the box's centre lies in front of the camera inside its image.
    pub in_fov: bool,
    /// The projected corners' bounding rectangle clipped to the image, `[u_min, v_min, u_max, v_max]`
    /// in pixels; `None` when no corner projects.
    pub box_2d_px: Option<[f64; 4]>,
    /// Share of the unclipped projected rectangle inside the image (0…1).
    pub in_image_fraction: f64,
    /// Share of the footprint hidden by nearer LiDAR returns (`crate::camera::CameraReturns`);
    /// `None` when no return falls in it or nothing projects.
    pub occlusion: Option<f64>,
}

/// One frame of a sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameRow {
    /// 0-based position in the sequence (the source's frame index).
    pub frame_index: i64,
    /// Sweep time (µs, the source's clock).
    pub timestamp_us: i64,
    /// Sensor pose in the world frame, row-major 4×4.
    pub world_from_sensor: [f64; 16],
    /// Normalized frame from sensor frame, row-major 4×4; `None` while normalization is off.
    pub normalized_from_sensor: Option<[f64; 16]>,
    /// The gravity estimate's method (`fused`, `imu`, … `mounting` when nothing worked); `None`
    /// while normalization is off.
    pub gravity_method: Option<String>,
    /// The estimates that went into it (`imu`, `ground`, `pose_3eed`, …), sorted.
    pub gravity_inputs: Vec<String>,
    /// Its confidence, 1 / (1 + (sigma / 0.5°)²).
    pub gravity_confidence: Option<f64>,
    /// The sensor's height above the fitted ground along up (m), where known.
    pub sensor_height_m: Option<f64>,
    /// Why this frame's normalization is weaker than usual, one line each.
    pub normalization_notes: Vec<String>,
    /// What the reader noticed about the frame and went on (dropped non-finite points, a
    /// skipped label), one line each.
    pub source_notes: Vec<String>,
    /// LiDAR points in the sweep.
    pub num_points: i64,
    /// Points of it written to `points/` (0 when not kept).
    pub num_points_kept: i64,
    /// The points file holding them (`points/part-00000.parquet`); `None` when not kept.
    pub points_file: Option<String>,
    /// Raw detections of every detector.
    pub num_detections: i64,
    /// Fused boxes.
    pub num_fused: i64,
    /// Final boxes (rows of `boxes.parquet`).
    pub num_boxes: i64,
    /// Cameras with a view of this frame.
    pub cameras: Vec<String>,
}

/// One detector's raw box.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectionRow {
    /// Frame index.
    pub frame_index: i64,
    /// Sweep time (µs).
    pub timestamp_us: i64,
    /// The detector's name.
    pub detector: String,
    /// Position among this detector's boxes of this frame (highest score first).
    pub detection_index: i64,
    /// Canonical class.
    pub class: String,
    /// Detector score (0…1).
    pub score: f32,
    /// The box in the sensor frame.
    pub box_sensor: [f64; 9],
}

/// One final box of the layer.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxRow {
    /// Frame index.
    pub frame_index: i64,
    /// Sweep time (µs).
    pub timestamp_us: i64,
    /// Unique in the sequence: position in (frame, track id) order.
    pub box_id: i64,
    /// Track id (from 1), unique in the sequence.
    pub track_id: i64,
    /// The source's own object id for label boxes (Waymo label id); `None` otherwise.
    pub source_track_id: Option<String>,
    /// Canonical class.
    pub class: String,
    /// Confidence (0…1; 1 for labels).
    pub score: f64,
    /// The box in the sensor frame.
    pub box_sensor: [f64; 9],
    /// The box in the world frame.
    pub box_world: [f64; 9],
    /// The box in the normalized frame; `None` while normalization is off.
    pub box_normalized: Option<[f64; 9]>,
    /// Axis-aligned bounds in the normalized frame `[x_min, y_min, z_min, x_max, y_max, z_max]`.
    pub aabb_normalized: Option<[f64; 6]>,
    /// Detector boxes merged into the supporting fused box (0 when not detected).
    pub num_votes: i32,
    /// Detectors that voted, sorted.
    pub detectors: Vec<String>,
    /// `detected`, `interpolated`, `extended` or `label`.
    pub origin: String,
    /// LiDAR points of the frame inside the box.
    pub num_points_inside: i64,
    /// The source's own count for label boxes (Waymo `num_lidar_points_in_box`).
    pub source_num_points: Option<i64>,
    /// BEV distance from the sensor to the box centre, in the sensor frame (m).
    pub bev_range_m: f64,
    /// Elevation of the box centre seen from the sensor, `atan2(z, ρ)` in the sensor frame (rad).
    pub relative_pitch_rad: f64,
    /// Velocity in the world frame (m/s), from the track; `None` for a one-box track.
    pub velocity_world_mps: Option<[f64; 3]>,
    /// Whether the track moves (its motion state); `None` when undecided.
    pub moving: Option<bool>,
    /// Each camera's view of it.
    pub cameras: Vec<CameraFootprint>,
    /// The camera that sees most of it (largest visible area); `None` when none does.
    pub best_camera: Option<String>,
    /// Class the RGB check saw for the box's track; `None` while the check is off or had no view.
    pub rgb_class: Option<String>,
    /// Its score; `None` with `rgb_class`.
    pub rgb_score: Option<f64>,
    /// Whether `rgb_class` is the box's class; `None` with `rgb_class`.
    pub rgb_agrees: Option<bool>,
    /// Why the check has no verdict (`no_camera`, `out_of_view`, `too_small`,
    /// `no_points`, `occluded`, `no_image`, `unmatched`); `None` when it has one or the check is off.
    pub rgb_note: Option<String>,
    /// Review flags (`few_points`, `short_track`, `low_score`, `size_outlier`, `out_of_view`, `class_conflict`).
    pub flags: Vec<String>,
    /// `auto`, `flagged`, `verified` or `rejected`.
    pub review_status: String,
}

/// One track of the layer.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackRow {
    /// Track id.
    pub track_id: i64,
    /// The source's own object id for label tracks.
    pub source_track_id: Option<String>,
    /// Canonical class.
    pub class: String,
    /// `static`, `dynamic`, or `None` when undecided.
    pub motion: Option<String>,
    /// First frame with a box.
    pub first_frame: i64,
    /// Last frame with a box.
    pub last_frame: i64,
    /// Boxes (rows of `boxes.parquet`).
    pub num_boxes: i64,
    /// Boxes supported by a detection (or labels).
    pub num_detected: i64,
    /// Track score (0…1).
    pub score: f64,
    /// The one size of a rigid track `(l, w, h)` (m); `None` when sizes vary per frame.
    pub size_lwh_m: Option<[f64; 3]>,
}

/// One human correction of a box (`edits.parquet`).
#[derive(Debug, Clone, PartialEq)]
pub struct EditRow {
    /// Frame index of the box.
    pub frame_index: i64,
    /// The box's `box_id`.
    pub box_id: i64,
    /// Its track id (after the edit).
    pub track_id: i64,
    /// What changed: `box`, `class`, `review_status` or `created`.
    pub field: String,
    /// The value before, as JSON text; `None` for a created box.
    pub before: Option<String>,
    /// The value after, as JSON text.
    pub after: Option<String>,
    /// Where the correction came from (`xtreme1:<export file name>`).
    pub source: String,
    /// sha256 of the imported file.
    pub import_sha256: String,
    /// When it was imported (seconds since the Unix epoch).
    pub time_unix_s: i64,
}

/// One frame's points for `points/part-*.parquet`, in the sensor frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PointsFrame {
    /// Frame index.
    pub frame_index: i64,
    /// x (m).
    pub x: Vec<f32>,
    /// y (m).
    pub y: Vec<f32>,
    /// z (m).
    pub z: Vec<f32>,
    /// The source's intensity.
    pub intensity: Vec<f32>,
}
