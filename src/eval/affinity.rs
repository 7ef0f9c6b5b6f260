//! How close a prediction is to a GT box, as one number where larger is better: an IoU, or minus
//! a centre distance, so that one matching routine and one threshold rule serve every measure.

use serde::{Deserialize, Serialize};

use crate::geometry::{self, Box3};

/// The overlap measure used to match predictions to ground truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IouKind {
    /// Rotated IoU of the boxes' footprints in the xy plane.
    Bev,
    /// Rotated 3D IoU (BEV overlap × z overlap over the union volume).
    ThreeD,
    /// Euclidean distance of the box centres in the xy plane (nuScenes); affinity = −distance.
    CenterDistance,
}

impl IouKind {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            IouKind::Bev => "bev",
            IouKind::ThreeD => "3d",
            IouKind::CenterDistance => "center_distance",
        }
    }
}

/// The affinity of a prediction to a GT box: IoU for `Bev`/`ThreeD`, minus the BEV centre
/// distance (m) for `CenterDistance`. Larger is better for every kind.
pub fn affinity(kind: IouKind, gt: &Box3, pred: &Box3) -> f64 {
    match kind {
        IouKind::Bev => geometry::iou_bev(gt, pred),
        IouKind::ThreeD => geometry::iou_3d(gt, pred),
        IouKind::CenterDistance => -bev_center_distance(gt, pred),
    }
}

/// Distance between two box centres in the xy plane (m).
pub fn bev_center_distance(a: &Box3, b: &Box3) -> f64 {
    (a.x - b.x).hypot(a.y - b.y)
}

/// The IoU used for grounding queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroundingIou {
    /// 3D IoU of the rotated GT box and the prediction taken as axis-aligned (its yaw, pitch and
    /// roll ignored): 3EED's `iou3d_rotated_vs_aligned`, for models that predict centre + size.
    #[serde(rename = "rotated_vs_axis_aligned_3d")]
    RotatedVsAxisAligned3d,
    /// BEV IoU of the rotated GT footprint and the axis-aligned prediction footprint.
    #[serde(rename = "rotated_vs_axis_aligned_bev")]
    RotatedVsAxisAlignedBev,
    /// Rotated 3D IoU of both boxes as given.
    #[serde(rename = "rotated_3d")]
    Rotated3d,
    /// Rotated BEV IoU of both boxes as given.
    #[serde(rename = "rotated_bev")]
    RotatedBev,
}

impl GroundingIou {
    /// The name used in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GroundingIou::RotatedVsAxisAligned3d => "rotated_vs_axis_aligned_3d",
            GroundingIou::RotatedVsAxisAlignedBev => "rotated_vs_axis_aligned_bev",
            GroundingIou::Rotated3d => "rotated_3d",
            GroundingIou::RotatedBev => "rotated_bev",
        }
    }
}

/// The grounding IoU of a prediction against a GT box.
pub fn grounding_iou(kind: GroundingIou, gt: &Box3, pred: &Box3) -> f64 {
    match kind {
        GroundingIou::RotatedVsAxisAligned3d => geometry::iou_rotated_vs_axis_aligned(gt, pred),
        GroundingIou::RotatedVsAxisAlignedBev => geometry::iou_bev_rotated_vs_axis_aligned(gt, pred),
        GroundingIou::Rotated3d => geometry::iou_3d(gt, pred),
        GroundingIou::RotatedBev => geometry::iou_bev(gt, pred),
    }
}
