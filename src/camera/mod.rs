//! Camera models: projecting points and boxes given in the sensor frame into image pixels, for
//! Waymo-style (x forward) and OpenCV-style (z forward) cameras with radial-tangential or
//! equidistant distortion. It reads no file and knows no source: calibrations arrive in a
//! [`CameraCalibration`](crate::frame::CameraCalibration).
//!
//! Conventions:
//! - Input points are in the frame's **sensor frame**; `CameraCalibration::sensor_from_camera`
//!   maps camera coordinates into it, so a point goes to the camera by its inverse.
//! - Camera axes: [`CameraAxes::Waymo`](crate::frame::CameraAxes) has x forward (optical axis),
//!   y left, z up; normalized image coordinates are `u = −y/x`, `v = −z/x`, depth `x`.
//!   [`CameraAxes::OpenCv`](crate::frame::CameraAxes) has x right, y down, z forward:
//!   `u = x/z`, `v = y/z`, depth `z`.
//! - Pixels: `(u_distorted·fx + cx, v_distorted·fy + cy)`, x to the right, y down, origin at the
//!   **left/top edge of the first pixel** (pixel (0, 0) covers `[0, 1) × [0, 1)`), as Waymo's
//!   projected labels and OpenCV use. A point at depth ≤ [`MIN_DEPTH_M`] is behind the camera.

mod projection;
mod undistort;
mod visibility;

pub use projection::{
    BOX_EDGES, MIN_DEPTH_M, ProjectedBox, RADTAN_VALID_RADIAL_FACTOR, depth_in_camera, optical_axis_in_sensor,
    project_box, project_point, project_point_in_camera,
};
pub use undistort::{Undistorter, pinhole};
pub use visibility::{BoxView, CameraReturns, OCCLUSION_GRID, OCCLUSION_MARGIN_M, best_view, box_views};
