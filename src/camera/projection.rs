//! Point and box projection through a calibrated camera (conventions in the module doc).

use std::ops::RangeInclusive;

use nalgebra::{Point2, Point3, Vector3};

use crate::frame::{CameraAxes, CameraCalibration, Distortion};
use crate::geometry::{Box3, box_corners};

/// Nearest depth in front of the camera that still projects (0.01 m): closer points are treated as
/// behind it, since their normalized coordinates blow up.
pub const MIN_DEPTH_M: f64 = 0.01;

/// Radial factors `1 + k1·r² + k2·r⁴ + k3·r⁶` accepted by the radial-tangential model (Waymo's
/// camera model rejects others): outside it the polynomial no longer describes the lens, so the
/// point is far outside the field of view and does not project.
pub const RADTAN_VALID_RADIAL_FACTOR: RangeInclusive<f64> = 0.8..=1.2;

/// Bisection steps when following a box edge to the last point that projects: 2⁻⁴⁰ of an edge,
/// far below a pixel for any box.
const EDGE_BISECTION_STEPS: usize = 40;

/// Pixel of a point in the camera's own frame, or `None` behind the camera or where the
/// distortion model is invalid. The pixel may lie outside the image.
pub fn project_point_in_camera(calibration: &CameraCalibration, point_in_camera: &Point3<f64>) -> Option<Point2<f64>> {
    let depth = depth_in_camera(calibration, point_in_camera);
    let (u, v) = match calibration.axes {
        CameraAxes::Waymo => (-point_in_camera.y, -point_in_camera.z),
        CameraAxes::OpenCv => (point_in_camera.x, point_in_camera.y),
    };
    if depth.is_nan() || depth <= MIN_DEPTH_M {
        return None;
    }
    project_normalized(calibration, u / depth, v / depth)
}

/// Pixel of a point given by its undistorted normalized image coordinates (right and down over
/// depth), or `None` where the distortion model refuses them.
#[inline]
pub fn project_normalized(calibration: &CameraCalibration, u: f64, v: f64) -> Option<Point2<f64>> {
    let (ud, vd) = match calibration.distortion {
        Distortion::None => (u, v),
        Distortion::RadTan { k1, k2, p1, p2, k3 } => {
            let r2 = u * u + v * v;
            let radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3));
            if !RADTAN_VALID_RADIAL_FACTOR.contains(&radial) {
                return None;
            }
            (
                u * radial + 2.0 * p1 * u * v + p2 * (r2 + 2.0 * u * u),
                v * radial + p1 * (r2 + 2.0 * v * v) + 2.0 * p2 * u * v,
            )
        }
        Distortion::Equidistant { k1, k2, k3, k4 } => {
            let r = (u * u + v * v).sqrt();
            if r < 1e-12 {
                (u, v)
            } else {
                let theta = r.atan();
                let t2 = theta * theta;
                let theta_d = theta * (1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))));
                let scale = theta_d / r;
                (u * scale, v * scale)
            }
        }
    };
    Some(Point2::new(
        ud * calibration.fx + calibration.cx,
        vd * calibration.fy + calibration.cy,
    ))
}

/// Depth of a point in the camera's own frame along its optical axis (m); ≤ [`MIN_DEPTH_M`] is
/// behind the camera.
pub fn depth_in_camera(calibration: &CameraCalibration, point_in_camera: &Point3<f64>) -> f64 {
    match calibration.axes {
        CameraAxes::Waymo => point_in_camera.x,
        CameraAxes::OpenCv => point_in_camera.z,
    }
}

/// The camera's optical axis (unit, pointing out of the lens) in the sensor frame.
pub fn optical_axis_in_sensor(calibration: &CameraCalibration) -> Vector3<f64> {
    let axis = match calibration.axes {
        CameraAxes::Waymo => Vector3::x(),
        CameraAxes::OpenCv => Vector3::z(),
    };
    calibration.sensor_from_camera.rotation * axis
}

/// Pixel of a point in the sensor frame, or `None` behind the camera or where the distortion
/// model is invalid. The pixel may lie outside the image.
pub fn project_point(calibration: &CameraCalibration, point_in_sensor: &Point3<f64>) -> Option<Point2<f64>> {
    let point_in_camera = calibration.sensor_from_camera.inverse_transform_point(point_in_sensor);
    project_point_in_camera(calibration, &point_in_camera)
}

/// The 12 edges of a box as index pairs into [`geometry::box_corners`](crate::geometry::box_corners):
/// the bottom ring, the top ring, then the four verticals.
pub const BOX_EDGES: [(usize, usize); 12] = [
    (0, 1),
    (1, 2),
    (2, 3),
    (3, 0),
    (4, 5),
    (5, 6),
    (6, 7),
    (7, 4),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
];

/// A box's footprint in an image: the axis-aligned hull of its projection, clipped to the image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProjectedBox {
    /// Left edge (px), clipped to `[0, width]`.
    pub x_min: f64,
    /// Top edge (px), clipped to `[0, height]`.
    pub y_min: f64,
    /// Right edge (px), clipped to `[0, width]`.
    pub x_max: f64,
    /// Bottom edge (px), clipped to `[0, height]`.
    pub y_max: f64,
    /// Area of the clipped hull over the unclipped one, in `[0, 1]`.
    pub in_image_fraction: f64,
    /// How many of the 8 corners project (in front of the camera, valid distortion).
    pub corners_projected: usize,
}

impl ProjectedBox {
    /// Centre `(x, y)` of the clipped box (px).
    pub fn center(&self) -> Point2<f64> {
        Point2::new(0.5 * (self.x_min + self.x_max), 0.5 * (self.y_min + self.y_max))
    }
}

/// Projects a box given in the sensor frame into the image: its projecting corners, plus, on each
/// of its 12 edges with one end that projects and one that does not (behind the camera's near
/// plane [`MIN_DEPTH_M`] or outside the distortion model's valid range), the last projecting
/// point found by bisection, so a box reaching out of the field of view keeps its
/// extent towards the image border. The hull of all projected points is clipped to the image.
/// `None` when nothing projects or the hull misses the image.
pub fn project_box(calibration: &CameraCalibration, box_in_sensor: &Box3) -> Option<ProjectedBox> {
    let corners_in_camera: Vec<Point3<f64>> = box_corners(box_in_sensor)
        .iter()
        .map(|p| calibration.sensor_from_camera.inverse_transform_point(p))
        .collect();
    let project = |p: &Point3<f64>| project_point_in_camera(calibration, p);
    let corners_projected = corners_in_camera.iter().filter(|p| project(p).is_some()).count();
    let mut pixels: Vec<Point2<f64>> = corners_in_camera.iter().filter_map(project).collect();
    for (a, b) in BOX_EDGES {
        let (pa, pb) = (corners_in_camera[a], corners_in_camera[b]);
        let (inside, outside) = match (project(&pa).is_some(), project(&pb).is_some()) {
            (true, false) => (pa, pb),
            (false, true) => (pb, pa),
            _ => continue,
        };
        // Bisect for the last projecting point between `inside` and `outside`.
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..EDGE_BISECTION_STEPS {
            let mid = 0.5 * (lo + hi);
            if project(&(inside + (outside - inside) * mid)).is_some() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if let Some(px) = project(&(inside + (outside - inside) * lo)) {
            pixels.push(px);
        }
    }
    if pixels.is_empty() {
        return None;
    }
    let (mut lo, mut hi) = (Vector3::repeat(f64::INFINITY), Vector3::repeat(f64::NEG_INFINITY));
    for p in &pixels {
        lo.x = lo.x.min(p.x);
        lo.y = lo.y.min(p.y);
        hi.x = hi.x.max(p.x);
        hi.y = hi.y.max(p.y);
    }
    let (w, h) = (f64::from(calibration.width), f64::from(calibration.height));
    let x_min = lo.x.clamp(0.0, w);
    let x_max = hi.x.clamp(0.0, w);
    let y_min = lo.y.clamp(0.0, h);
    let y_max = hi.y.clamp(0.0, h);
    if x_max <= x_min || y_max <= y_min {
        return None;
    }
    let full_area = (hi.x - lo.x) * (hi.y - lo.y);
    let clipped_area = (x_max - x_min) * (y_max - y_min);
    let in_image_fraction = if full_area > 0.0 {
        (clipped_area / full_area).clamp(0.0, 1.0)
    } else {
        1.0
    };
    Some(ProjectedBox {
        x_min,
        y_min,
        x_max,
        y_max,
        in_image_fraction,
        corners_projected,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use nalgebra::{Isometry3, Translation3, UnitQuaternion};

    /// A 200 × 100 camera at the sensor origin, f = 100 px, principal point at the centre.
    pub(in crate::camera) fn calibration(axes: CameraAxes, distortion: Distortion) -> CameraCalibration {
        CameraCalibration {
            width: 200,
            height: 100,
            fx: 100.0,
            fy: 100.0,
            cx: 100.0,
            cy: 50.0,
            distortion,
            axes,
            sensor_from_camera: Isometry3::identity(),
        }
    }

    #[test]
    fn waymo_axes_look_along_x_with_left_and_up_negative_pixels() {
        let c = calibration(CameraAxes::Waymo, Distortion::None);
        // 10 m ahead, 1 m left, 0.5 m up: u = −0.1, v = −0.05.
        let p = project_point(&c, &Point3::new(10.0, 1.0, 0.5)).unwrap();
        assert_abs_diff_eq!(p, Point2::new(90.0, 45.0), epsilon = 1e-12);
        assert!(project_point(&c, &Point3::new(-10.0, 0.0, 0.0)).is_none());
        assert!(project_point(&c, &Point3::new(0.0, 1.0, 0.0)).is_none());
    }

    #[test]
    fn opencv_axes_look_along_z_with_right_and_down_positive_pixels() {
        let c = calibration(CameraAxes::OpenCv, Distortion::None);
        let p = project_point(&c, &Point3::new(1.0, 0.5, 10.0)).unwrap();
        assert_abs_diff_eq!(p, Point2::new(110.0, 55.0), epsilon = 1e-12);
        assert!(project_point(&c, &Point3::new(1.0, 0.5, -10.0)).is_none());
    }

    #[test]
    fn the_same_camera_in_both_conventions_projects_alike() {
        // An OpenCV camera mounted looking along the sensor's +x: camera z = sensor x,
        // camera x = −sensor y, camera y = −sensor z.
        let r = nalgebra::Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0);
        let rot = UnitQuaternion::from_matrix(&r);
        let t = Translation3::new(1.5, -0.2, 1.0);
        let mut opencv = calibration(
            CameraAxes::OpenCv,
            Distortion::RadTan {
                k1: -0.1,
                k2: 0.01,
                p1: 0.001,
                p2: -0.002,
                k3: 0.0,
            },
        );
        opencv.sensor_from_camera = Isometry3::from_parts(t, rot);
        let mut waymo = opencv.clone();
        waymo.axes = CameraAxes::Waymo;
        waymo.sensor_from_camera = Isometry3::from_parts(t, UnitQuaternion::identity());
        for p in [Point3::new(12.0, 3.0, -1.0), Point3::new(5.0, -1.0, 2.0)] {
            let a = project_point(&opencv, &p).unwrap();
            let b = project_point(&waymo, &p).unwrap();
            assert_abs_diff_eq!(a, b, epsilon = 1e-9);
        }
    }

    #[test]
    fn radtan_matches_hand_computed_distortion() {
        let c = calibration(
            CameraAxes::OpenCv,
            Distortion::RadTan {
                k1: 0.1,
                k2: 0.0,
                p1: 0.01,
                p2: 0.02,
                k3: 0.0,
            },
        );
        // u = 0.3, v = 0.4: r² = 0.25, radial = 1.025,
        // u_d = 0.3075 + 2·0.01·0.12 + 0.02·(0.25 + 0.18) = 0.3075 + 0.0024 + 0.0086 = 0.3185,
        // v_d = 0.41 + 0.01·(0.25 + 0.32) + 2·0.02·0.12 = 0.41 + 0.0057 + 0.0048 = 0.4205.
        let p = project_point(&c, &Point3::new(0.3, 0.4, 1.0)).unwrap();
        assert_abs_diff_eq!(p, Point2::new(131.85, 92.05), epsilon = 1e-9);
        // r² = 4 gives a radial factor of 1.4: outside the valid range.
        assert!(project_point(&c, &Point3::new(2.0, 0.0, 1.0)).is_none());
    }

    #[test]
    fn equidistant_matches_hand_computed_distortion() {
        let c = calibration(
            CameraAxes::OpenCv,
            Distortion::Equidistant {
                k1: 0.1,
                k2: 0.0,
                k3: 0.0,
                k4: 0.0,
            },
        );
        // r = 1: θ = π/4, θ_d = θ(1 + 0.1θ²), pixel x = cx + fx·θ_d.
        let theta = std::f64::consts::FRAC_PI_4;
        let p = project_point(&c, &Point3::new(1.0, 0.0, 1.0)).unwrap();
        assert_abs_diff_eq!(p.x, 100.0 + 100.0 * theta * (1.0 + 0.1 * theta * theta), epsilon = 1e-9);
        assert_abs_diff_eq!(p.y, 50.0, epsilon = 1e-12);
    }

    #[test]
    fn box_edges_are_the_twelve_unit_length_edges_of_a_unit_cube() {
        let corners = box_corners(&Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.3));
        let mut seen = std::collections::HashSet::new();
        for (a, b) in BOX_EDGES {
            assert_abs_diff_eq!((corners[a] - corners[b]).norm(), 1.0, epsilon = 1e-12);
            assert!(seen.insert((a.min(b), a.max(b))));
        }
        assert_eq!(seen.len(), 12);
    }

    #[test]
    fn box_projection_is_the_clipped_hull() {
        let c = calibration(CameraAxes::Waymo, Distortion::None);
        // A 2 m cube 10 m ahead: near face at x = 9 spans ±1/9 → ±11.1 px.
        let b = Box3::new(10.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0);
        let p = project_box(&c, &b).unwrap();
        assert_abs_diff_eq!(p.x_min, 100.0 - 100.0 / 9.0, epsilon = 1e-9);
        assert_abs_diff_eq!(p.y_max, 50.0 + 100.0 / 9.0, epsilon = 1e-9);
        assert_eq!(p.corners_projected, 8);
        assert_abs_diff_eq!(p.in_image_fraction, 1.0);
        // Half of a box straddling the right image edge is clipped away.
        let side = Box3::new(10.0, -10.0, 0.0, 0.1, 2.0, 2.0, 0.0);
        let q = project_box(&c, &side).unwrap();
        assert_abs_diff_eq!(q.x_max, 200.0);
        assert!(q.in_image_fraction > 0.4 && q.in_image_fraction < 0.6, "{q:?}");
        // A box behind the camera does not project; one around it keeps its front part.
        assert!(project_box(&c, &Box3::new(-10.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0)).is_none());
        let around = project_box(&c, &Box3::new(0.0, 0.0, 0.0, 20.0, 1.0, 1.0, 0.0)).unwrap();
        assert!(
            around.corners_projected == 4 && around.in_image_fraction < 1.0,
            "{around:?}"
        );
    }
}
