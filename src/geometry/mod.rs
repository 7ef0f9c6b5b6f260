//! Box geometry: the `Box3` shape, poses, and exact queries over boxes (corners, points-in-box,
//! rotated BEV and 3D IoU, GIoU, NMS). Queries are free functions over plain shapes, named
//! operation first (`iou_bev`, `points_in_box`); every result is exact up to floating-point
//! rounding, never sampled. It knows no file format, detector or tracker.

mod bev_cells;
mod box3;
mod convex_polygon;
mod corners;
mod giou;
mod iou;
mod nms;
mod points_in_box;
mod polyhedron;
pub mod pose;

pub use bev_cells::{BevCells, BevLayout};
pub use box3::{Box3, wrap_angle};
pub use corners::{aabb, bev_corners, box_corners};
pub use giou::{giou_3d, giou_3d_9dof, giou_3d_9dof_eps, giou_3d_eps, giou_bev};
pub use iou::{
    iou_3d, iou_3d_9dof, iou_3d_9dof_eps, iou_3d_eps, iou_3d_yaw_only, iou_bev, iou_bev_rotated_vs_axis_aligned,
    iou_rotated_vs_axis_aligned,
};
pub use nms::{nms_bev, nms_circle};
pub use points_in_box::{count_points_in_box, count_points_in_box_xyz, points_in_box, points_in_box_mask};

/// The tolerance used by geometry queries that compare floats (1e-9, in metres or radians):
/// far below any sensor's resolution, far above f64 rounding on coordinates of a few km.
pub const EPS: f64 = 1e-9;

#[cfg(test)]
mod testutil;
