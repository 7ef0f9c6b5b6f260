//! Box geometry: the `Box3` shape, poses, and exact queries over boxes (corners, points-in-box,
//! rotated BEV and 3D IoU, GIoU, NMS). Queries are free functions over plain shapes, named
//! operation first (`iou_bev`, `points_in_box`). It knows no file format, detector or tracker.

mod box3;
pub mod pose;

pub use box3::{Box3, wrap_angle};

/// The tolerance used by geometry queries that compare floats (1e-9, in metres or radians):
/// far below any sensor's resolution, far above f64 rounding on coordinates of a few km.
pub const EPS: f64 = 1e-9;
