//! Generalized IoU (GIoU = IoU − (C − U) / C, U the union, C the smallest enclosing convex
//! shape) for BEV footprints and 3D boxes.
//!
//! Enclosing shapes: BEV uses the convex hull of both footprints (area); 3D yaw-only pairs use
//! that hull × the union of the z ranges (a vertical prism, as yaw-only detectors define it);
//! other 3D pairs use the convex hull of all 16 corners (volume). The prism is larger than the
//! 3D hull when the z ranges differ, so `giou_3d` switches definition at pitch = roll = 0;
//! `giou_3d_9dof` always uses the 3D hull.

use nalgebra::Point2;

use super::convex_polygon::convex_hull;
use super::corners::CORNER_SIGNS;
use super::iou::{Footprint, ratio};
use super::polyhedron::{box_intersection_volume, convex_hull_volume};
use super::{Box3, EPS};
use nalgebra::Vector3;

/// GIoU from the intersection, union and enclosing measure; 0 when the enclosing measure is 0
/// or not finite (degenerate boxes), else clamped to [−1, IoU].
fn giou(intersection: f64, union: f64, enclosing: f64) -> f64 {
    if !(enclosing > 0.0 && enclosing.is_finite() && union.is_finite()) {
        return 0.0;
    }
    let iou = ratio(intersection, union);
    let penalty = ((enclosing - union) / enclosing).clamp(0.0, 1.0);
    (iou - penalty).max(-1.0)
}

/// The area of the convex hull of both footprints, relative to `fa`'s centre.
fn enclosing_area(fa: &Footprint, fb: &Footprint) -> f64 {
    let d = fb.center - fa.center;
    let mut points = [Point2::origin(); 8];
    for k in 0..4 {
        points[k] = Point2::from(fa.offsets[k]);
        points[k + 4] = Point2::from(d + fb.offsets[k]);
    }
    convex_hull(&points).area()
}

/// The BEV GIoU of two footprints: IoU − (C − U)/C with C the area of the convex hull of both
/// footprints. In [−1, 1] and ≤ `iou_bev`; degenerate (zero-area) pairs give 0.
pub fn giou_bev(a: &Box3, b: &Box3) -> f64 {
    let (fa, fb) = (Footprint::of(a), Footprint::of(b));
    let inter = fa.intersection_area(&fb);
    giou(inter, fa.area + fb.area - inter, enclosing_area(&fa, &fb))
}

/// The 3D GIoU: for two yaw-only boxes (|pitch|, |roll| ≤ `EPS`) C is the convex hull of the
/// footprints × the union z span; otherwise `giou_3d_9dof`. In [−1, 1] and ≤ `iou_3d`.
pub fn giou_3d(a: &Box3, b: &Box3) -> f64 {
    giou_3d_eps(a, b, EPS)
}

/// `giou_3d` with an explicit tolerance `eps`: the angle (rad) under which pitch and roll count
/// as zero, and the distance (m) of `giou_3d_9dof_eps`.
pub fn giou_3d_eps(a: &Box3, b: &Box3, eps: f64) -> f64 {
    if !(a.is_yaw_only(eps) && b.is_yaw_only(eps)) {
        return giou_3d_9dof_eps(a, b, eps);
    }
    let (fa, fb) = (Footprint::of(a), Footprint::of(b));
    let (a_lo, a_hi) = (a.z - 0.5 * a.h, a.z + 0.5 * a.h);
    let (b_lo, b_hi) = (b.z - 0.5 * b.h, b.z + 0.5 * b.h);
    let z_overlap = (a_hi.min(b_hi) - a_lo.max(b_lo)).max(0.0);
    let inter = if a.h > 0.0 && b.h > 0.0 {
        fa.intersection_area(&fb) * z_overlap
    } else {
        0.0
    };
    let union = a.volume() + b.volume() - inter;
    let enclosing = enclosing_area(&fa, &fb) * (a_hi.max(b_hi) - a_lo.min(b_lo));
    giou(inter, union, enclosing)
}

/// The 3D GIoU with C the volume of the convex hull of both boxes' 16 corners, for boxes of any
/// orientation.
pub fn giou_3d_9dof(a: &Box3, b: &Box3) -> f64 {
    giou_3d_9dof_eps(a, b, EPS)
}

/// `giou_3d_9dof` with an explicit tolerance `eps` (m) for coplanar faces and hull planes.
pub fn giou_3d_9dof_eps(a: &Box3, b: &Box3, eps: f64) -> f64 {
    if !(a.is_valid() && b.is_valid()) {
        return 0.0;
    }
    let inter = box_intersection_volume(a, b, eps);
    let union = a.volume() + b.volume() - inter;
    // Corners relative to a's centre, so large coordinates keep their precision.
    let origin = a.center();
    let mut points = [Vector3::zeros(); 16];
    for (k, bx) in [a, b].into_iter().enumerate() {
        let rotation = bx.rotation();
        let center = bx.center() - origin;
        let half = bx.half_extents();
        for (i, [sx, sy, sz]) in CORNER_SIGNS.into_iter().enumerate() {
            points[8 * k + i] = center + rotation * Vector3::new(sx * half.x, sy * half.y, sz * half.z);
        }
    }
    giou(inter, union, convex_hull_volume(&points, eps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::testutil::{box_7dof, box_9dof, rotate_about_z, transform_box};
    use crate::geometry::{iou_3d, iou_bev};
    use approx::assert_abs_diff_eq;
    use nalgebra::Isometry3;
    use proptest::prelude::*;
    use std::f64::consts::PI;

    #[test]
    fn hand_computed_bev_and_3d() {
        // Two unit squares 2 m apart along x: IoU 0, U = 2, C = 3×1 → GIoU = −1/3.
        let a = Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        let b = Box3::new(2.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(giou_bev(&a, &b), -1.0 / 3.0, epsilon = 1e-12);
        assert_abs_diff_eq!(giou_3d(&a, &b), -1.0 / 3.0, epsilon = 1e-12);
        assert_abs_diff_eq!(giou_3d_9dof(&a, &b), -1.0 / 3.0, epsilon = 1e-12);
        // Diagonal offset (1, 1): hull is the hexagon of area 4 − 2·(1/2) = 3, U = 2.
        let c = Box3::new(1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(giou_bev(&a, &c), -1.0 / 3.0, epsilon = 1e-12);
        // Offset by 0.5 m: IoU = 1/3 and the union is convex, so GIoU = IoU.
        let d = Box3::new(0.5, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(giou_3d(&a, &d), 1.0 / 3.0, epsilon = 1e-12);
        // Offset diagonally in x and z by 1 m: yaw-only prism C = 2 (footprint) × 2 (z) = 4,
        // U = 2 → −1/2; the 3D hull of the corners is the prism minus two triangular prisms of
        // volume 1/2 each, C = 3 → −1/3.
        let e = Box3::new(1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(giou_3d(&a, &e), -0.5, epsilon = 1e-12);
        assert_abs_diff_eq!(giou_3d_9dof(&a, &e), -1.0 / 3.0, epsilon = 1e-12);
    }

    #[test]
    fn degenerate_boxes_give_zero() {
        let a = Box3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        assert_eq!(giou_bev(&a, &a), 0.0);
        assert_eq!(giou_3d(&a, &a), 0.0);
        assert_eq!(giou_3d_9dof(&a, &Box3 { x: f64::NAN, ..a }), 0.0);
    }

    proptest! {
        #[test]
        fn giou_properties_yaw_only(a in box_7dof(), b in box_7dof(), angle in -PI..PI, dx in -50.0..50.0, dy in -50.0..50.0) {
            for (g, i, g_ba, g_aa, g_moved) in [
                (giou_bev(&a, &b), iou_bev(&a, &b), giou_bev(&b, &a), giou_bev(&a, &a),
                 giou_bev(&rotate_about_z(&a, angle, dx, dy), &rotate_about_z(&b, angle, dx, dy))),
                (giou_3d(&a, &b), iou_3d(&a, &b), giou_3d(&b, &a), giou_3d(&a, &a),
                 giou_3d(&rotate_about_z(&a, angle, dx, dy), &rotate_about_z(&b, angle, dx, dy))),
            ] {
                prop_assert!((-1.0..=1.0).contains(&g), "{g}");
                prop_assert!(g <= i + 1e-12, "giou {g} > iou {i}");
                prop_assert!((g - g_ba).abs() < 1e-12);
                prop_assert!((g_aa - 1.0).abs() < 1e-12);
                prop_assert!((g - g_moved).abs() < 1e-9, "{g} vs {g_moved}");
            }
        }

        #[test]
        fn giou_properties_9dof(
            a in box_9dof(), b in box_9dof(),
            axis in (-1.0..1.0, -1.0..1.0, -1.0..1.0), t in (-20.0..20.0, -20.0..20.0, -20.0..20.0),
        ) {
            let g = giou_3d(&a, &b);
            prop_assert!((-1.0..=1.0).contains(&g), "{g}");
            prop_assert!(g <= iou_3d(&a, &b) + 1e-12);
            prop_assert!((g - giou_3d(&b, &a)).abs() < 1e-9);
            prop_assert!((giou_3d(&a, &a) - 1.0).abs() < 1e-9);
            let motion = Isometry3::new(Vector3::new(t.0, t.1, t.2), Vector3::new(axis.0, axis.1, axis.2));
            let moved = giou_3d_9dof(&transform_box(&a, &motion), &transform_box(&b, &motion));
            prop_assert!((g - moved).abs() < 1e-9, "{g} vs {moved}");
        }
    }
}
