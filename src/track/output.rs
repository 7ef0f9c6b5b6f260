//! The tracker's output: per-frame boxes with track id and origin, and one summary per track.

use serde::{Deserialize, Serialize};

use crate::frame::ObjectClass;
use crate::geometry::Box3;

/// Where an output box came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoxOrigin {
    /// A detection in this frame supports it (its geometry may be smoothed over the track).
    Detected,
    /// Filled inside a track where no detection was associated: the motion model's
    /// interpolation, or a static object's fused box.
    Interpolated,
    /// Past a track's first or last detection, on points evidence (or an AB3DMOT-style
    /// coasted prediction in the forward-only mode).
    Extended,
}

impl BoxOrigin {
    /// The lower-case name used in shards (`detected`, `interpolated`, `extended`).
    pub fn as_str(self) -> &'static str {
        match self {
            BoxOrigin::Detected => "detected",
            BoxOrigin::Interpolated => "interpolated",
            BoxOrigin::Extended => "extended",
        }
    }
}

/// Whether a track's object moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MotionState {
    /// Parked or standing: one fused world box for the whole track.
    Static,
    /// Moving: a smoothed box per frame.
    Dynamic,
}

/// One output box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackedBox {
    /// Frame index in the input.
    pub frame: usize,
    /// Track id, unique in the sequence (from 1, in order of first appearance).
    pub track_id: u32,
    /// Class of the track.
    pub class: ObjectClass,
    /// Confidence (unitless, 0…1): blends the detection's score and the track's.
    pub score: f64,
    /// The box in the world frame.
    pub box_in_world: Box3,
    /// The box in the frame's sensor frame.
    pub box_in_sensor: Box3,
    /// Where it came from.
    pub origin: BoxOrigin,
    /// Index of the supporting input box in the frame's `boxes` (detected boxes only).
    pub input_index: Option<usize>,
    /// Detectors that voted for the supporting input box (0 when not detected).
    pub votes: u32,
}

/// One track's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackSummary {
    /// Track id.
    pub track_id: u32,
    /// Class.
    pub class: ObjectClass,
    /// Static or dynamic (`None` in the forward-only mode, which does not decide it).
    pub motion: Option<MotionState>,
    /// First frame with an output box.
    pub first_frame: usize,
    /// Last frame with an output box.
    pub last_frame: usize,
    /// Frames with an associated detection.
    pub num_detected: usize,
    /// Track score (unitless): mean detection score, scaled down for short tracks.
    pub score: f64,
    /// The one size `(l, w, h)` of a rigid or static track (m); `None` when sizes are per frame.
    pub size: Option<[f64; 3]>,
}

/// The result of tracking one sequence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Consolidation {
    /// Every output box, sorted by (frame, track id).
    pub boxes: Vec<TrackedBox>,
    /// Every track, sorted by id.
    pub tracks: Vec<TrackSummary>,
}

impl Consolidation {
    /// The boxes of one frame (a slice of `boxes`).
    pub fn frame_boxes(&self, frame: usize) -> &[TrackedBox] {
        let start = self.boxes.partition_point(|b| b.frame < frame);
        let end = self.boxes.partition_point(|b| b.frame <= frame);
        &self.boxes[start..end]
    }
}
