//! The boxes that flow between stages: one detector's [`Detection`] and fusion's [`FusedBox`].
//! They live here, apart from the stages that make them, so that `fuse` needs nothing of
//! `detect` and a user's own detections (JSON lines) enter fusion as the same type.

use serde::{Deserialize, Serialize};

use crate::frame::ObjectClass;
use crate::geometry::Box3;

/// One detected object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// The box in the frame of the cloud given to the detector.
    pub box3: Box3,
    /// boxlayer class, mapped from the detector's label by the manifest.
    pub class: ObjectClass,
    /// Detector score in [0, 1].
    pub score: f32,
    /// The detector's name.
    pub detector: String,
}

/// One fused box: the box, its class and score, and who voted for it.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedBox {
    /// The fused box, in the frame the detections shared.
    pub box3: Box3,
    /// Canonical class.
    pub class: ObjectClass,
    /// Fused score in [0, 1].
    pub score: f32,
    /// Number of input boxes merged into this one (1 for an unmerged box).
    pub votes: u32,
    /// Names of the detectors that voted, sorted, each once.
    pub detectors: Vec<String>,
    /// Indices of the merged boxes in the input slice, ascending.
    pub members: Vec<usize>,
}
