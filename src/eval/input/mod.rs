//! The evaluation inputs as plain data (`EvalBox`, `GroundingQuery`) and one small loader per input
//! kind, chosen by `InputFormat`. Loaders read box lists only — never point clouds or images —
//! so a new kind (boxlayer shards, simulator truth, Waymo labels) plugs in as one more function.

mod jsonl;
mod shards;
mod sim;
mod three_eed;
mod truth;
mod waymo;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::EvalError;
use crate::frame::{ObjectClass, Platform};
use crate::geometry::Box3;

pub use jsonl::{load_jsonl, to_json_line, to_json_row};
pub use shards::load_shards;
pub use sim::{detection_box, noisy_sequence_detections, noisy_sequence_truth, object_truth_box};
pub use three_eed::{class_from_3eed_name, load_3eed};
pub use truth::load_truth_parquet;
pub use waymo::{load_waymo_labels, load_waymo_labels_with_gaps};

/// Which frame of which sequence a box belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FrameKey {
    /// Sequence name (Waymo context name, M3ED sequence name, any string).
    pub sequence: String,
    /// Frame position in the sequence; tracking walks frames in this order.
    pub frame: u64,
}

/// One box to evaluate, ground truth or prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalBox {
    /// The frame it belongs to.
    pub frame: FrameKey,
    /// The box, in whatever frame both sides share (the sensor frame for range bins).
    pub bbox: Box3,
    /// Canonical class.
    pub class: ObjectClass,
    /// Confidence (unitless); 1 for ground truth.
    pub score: f64,
    /// Object identity across frames, for tracking.
    pub track_id: Option<String>,
    /// LiDAR points inside the box, when known.
    pub num_points: Option<u64>,
    /// The platform that recorded the frame, when known.
    pub platform: Option<Platform>,
}

/// One grounding query: the boxes of the referred objects (GT) or the predicted boxes (prediction).
#[derive(Debug, Clone, PartialEq)]
pub struct GroundingQuery {
    /// Query id; GT and prediction queries pair up by it.
    pub id: String,
    /// The frame the query is asked about.
    pub frame: FrameKey,
    /// The platform that recorded the frame, when known.
    pub platform: Option<Platform>,
    /// The referred objects (GT) or the predicted boxes; several for multi-object queries.
    pub boxes: Vec<Box3>,
}

/// Everything one side (GT or prediction) provides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalData {
    /// Boxes for detection and tracking.
    pub boxes: Vec<EvalBox>,
    /// Grounding queries, in file order.
    pub queries: Vec<GroundingQuery>,
}

/// The supported input kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputFormat {
    /// A folder tree in the 3EED release layout (`<platform>/<sequence>/<NNNN_k>/meta_info.json`).
    #[serde(rename = "3eed")]
    ThreeEed,
    /// One JSON object per line, one box per object (`docs/eval.md`).
    Jsonl,
    /// A Waymo v1 segment (`.tfrecord`): its 3D laser labels, as ground truth.
    Waymo,
    /// `boxlayer run` output: a sequence folder or a folder of them (`boxes.parquet`).
    Shards,
    /// The simulator's ground-truth Parquet (`<seq>_boxes_gt.parquet`).
    Truth,
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputFormat::ThreeEed => "3eed",
            InputFormat::Jsonl => "jsonl",
            InputFormat::Waymo => "waymo",
            InputFormat::Shards => "shards",
            InputFormat::Truth => "truth",
        })
    }
}

impl FromStr for InputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "3eed" => Ok(InputFormat::ThreeEed),
            "jsonl" => Ok(InputFormat::Jsonl),
            "waymo" => Ok(InputFormat::Waymo),
            "shards" => Ok(InputFormat::Shards),
            "truth" => Ok(InputFormat::Truth),
            other => Err(format!(
                "unknown input format `{other}` (expected 3eed, jsonl, waymo, shards or truth)"
            )),
        }
    }
}

impl InputFormat {
    /// The format a path most likely holds: a folder of shards is `shards`, another folder 3EED,
    /// a `.tfrecord` Waymo, a `*_boxes_gt.parquet` simulator truth, else JSON lines.
    pub fn guess(path: &Path) -> InputFormat {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if path.is_dir() && shards::looks_like_shards(path) {
            InputFormat::Shards
        } else if path.is_dir() {
            InputFormat::ThreeEed
        } else if matches!(ext.as_deref(), Some("tfrecord" | "tfrecords")) {
            InputFormat::Waymo
        } else if truth::looks_like_truth(path) {
            InputFormat::Truth
        } else {
            InputFormat::Jsonl
        }
    }
}

/// Loads one side of an evaluation from a path in the given format.
pub fn load(path: &Path, format: InputFormat) -> Result<EvalData, EvalError> {
    match format {
        InputFormat::ThreeEed => load_3eed(path),
        InputFormat::Jsonl => load_jsonl(path),
        InputFormat::Waymo => load_waymo_labels(path),
        InputFormat::Shards => shards::load_shards(path),
        InputFormat::Truth => load_truth_parquet(path),
    }
}

/// `text` with its bare `NaN`, `Infinity` and `-Infinity` tokens (outside JSON strings, as
/// Python's `json` writes non-finite floats) replaced by `with`, or `None` when it has none.
/// Loaders use it to tell a label with a non-finite value, skipped with a warning, from damage.
pub(crate) fn replace_non_finite_tokens(text: &str, with: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut found = false;
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if let Some(token) = ["-Infinity", "Infinity", "NaN"].iter().find(|t| rest.starts_with(**t)) {
            out.push_str(with);
            found = true;
            rest = &rest[token.len()..];
            continue;
        }
        in_string = c == '"';
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    found.then_some(out)
}

/// A box from 6 (`cx, cy, cz, l, w, h`, axis-aligned), 7 (`+ yaw`) or 9 (`+ pitch, roll`) values.
pub(crate) fn box_from_values(values: &[f64]) -> Result<Box3, String> {
    let b = match values.len() {
        6 => Box3::new(values[0], values[1], values[2], values[3], values[4], values[5], 0.0),
        7 => Box3::new(
            values[0], values[1], values[2], values[3], values[4], values[5], values[6],
        ),
        9 => Box3::from_array([
            values[0], values[1], values[2], values[3], values[4], values[5], values[6], values[7], values[8],
        ]),
        n => return Err(format!("expected 6, 7 or 9 box values, got {n}")),
    };
    if !b.is_valid() {
        return Err(format!("box {values:?} has a non-finite value or a negative size"));
    }
    Ok(b)
}
