//! Exact intersection-over-union of oriented boxes: rotated bird's-eye-view (BEV) IoU by convex
//! polygon clipping, 3D IoU for yaw-only boxes (BEV intersection × z overlap) and for full 9-dof
//! boxes (convex polyhedron intersection), and the rotated-vs-axis-aligned variants.

use nalgebra::{Point2, Vector2};

use super::convex_polygon::intersection_area_with_centered_rect;
use super::polyhedron::box_intersection_volume;
use super::{Box3, EPS};

/// A box's footprint, prepared once for many BEV queries (NMS): the centre, the yaw's
/// cosine and sine, the half length and width, the area and the circumscribed circle's radius.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Footprint {
    pub(crate) center: Point2<f64>,
    cos: f64,
    sin: f64,
    half_l: f64,
    half_w: f64,
    pub(crate) area: f64,
    radius: f64,
}

impl Footprint {
    /// The footprint of `b` (x, y, l, w, yaw). A box with a zero, negative or NaN length or width
    /// has area 0 and intersects nothing.
    pub(crate) fn of(b: &Box3) -> Self {
        let (sin, cos) = b.yaw.sin_cos();
        let (half_l, half_w) = (0.5 * b.l, 0.5 * b.w);
        let valid = b.l > 0.0 && b.w > 0.0;
        Self {
            center: Point2::new(b.x, b.y),
            cos,
            sin,
            half_l,
            half_w,
            area: if valid { b.l * b.w } else { 0.0 },
            radius: if valid {
                (half_l * half_l + half_w * half_w).sqrt()
            } else {
                f64::NEG_INFINITY
            },
        }
    }

    /// The corners' offsets from the centre, counter-clockwise from local (+l/2, +w/2).
    pub(crate) fn corner_offsets(&self) -> [Vector2<f64>; 4] {
        let (c, s) = (self.cos, self.sin);
        [(1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)].map(|(sx, sy)| {
            let (lx, ly) = (sx * self.half_l, sy * self.half_w);
            Vector2::new(c * lx - s * ly, s * lx + c * ly)
        })
    }

    /// The area common to both footprints.
    ///
    /// Computed in `other`'s box frame, where `other` is the centred axis-aligned rectangle
    /// |x| ≤ l/2, |y| ≤ w/2: `self`'s corners are brought there with the relative rotation
    /// (from the stored cosines and sines, no trigonometry) and clipped by the four axis lines.
    pub(crate) fn intersection_area(&self, other: &Footprint) -> f64 {
        if self.area <= 0.0 || other.area <= 0.0 {
            return 0.0;
        }
        let d = self.center - other.center;
        let reach = self.radius + other.radius;
        // Circumscribed circles apart (or a NaN centre): no overlap, skip the clipping.
        let circles_meet = d.norm_squared() <= reach * reach;
        if !circles_meet {
            return 0.0;
        }
        let (co, so) = (other.cos, other.sin);
        // Rotation by (yaw_self − yaw_other) and self's centre, both in other's frame.
        let (c, s) = (self.cos * co + self.sin * so, self.sin * co - self.cos * so);
        let center = Point2::new(co * d.x + so * d.y, co * d.y - so * d.x);
        let corners = [(1.0, 1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)].map(|(sx, sy)| {
            let (lx, ly) = (sx * self.half_l, sy * self.half_w);
            center + Vector2::new(c * lx - s * ly, s * lx + c * ly)
        });
        intersection_area_with_centered_rect(&corners, other.half_l, other.half_w)
    }

    /// The BEV IoU of two footprints.
    pub(crate) fn iou(&self, other: &Footprint) -> f64 {
        let inter = self.intersection_area(other);
        ratio(inter, self.area + other.area - inter)
    }
}

/// `intersection / union` clamped to [0, 1]; 0 when either is 0 or not finite.
pub(crate) fn ratio(intersection: f64, union: f64) -> f64 {
    let r = intersection / union;
    if intersection > 0.0 && union > 0.0 && r.is_finite() {
        r.min(1.0)
    } else {
        0.0
    }
}

/// The rotated bird's-eye-view IoU of two boxes' footprints (x, y, l, w, yaw; z, h, pitch and
/// roll ignored). Zero-size or non-finite boxes give 0; a box with itself gives 1 (to ~1e-15).
pub fn iou_bev(a: &Box3, b: &Box3) -> f64 {
    if circles_apart(a, b) {
        return 0.0;
    }
    Footprint::of(a).iou(&Footprint::of(b))
}

/// Whether the footprints' circumscribed circles do not meet (or a centre is NaN), as
/// [`Footprint::intersection_area`] decides it, but before any trigonometry: then the boxes
/// share no area and every BEV-based IoU is 0. Most pairs an evaluation scores are such.
fn circles_apart(a: &Box3, b: &Box3) -> bool {
    let radius = |b: &Box3| {
        let (half_l, half_w) = (0.5 * b.l, 0.5 * b.w);
        (half_l * half_l + half_w * half_w).sqrt()
    };
    let (dx, dy) = (a.x - b.x, a.y - b.y);
    let reach = radius(a) + radius(b);
    let meet = dx * dx + dy * dy <= reach * reach;
    !meet
}

/// The 3D IoU of two boxes treated as yaw-only (their pitch and roll ignored): BEV intersection
/// area × overlap of the z ranges over the union of volumes. `iou_3d` calls it when both boxes
/// are yaw-only; call it directly only when ignoring pitch and roll is what you mean.
pub fn iou_3d_yaw_only(a: &Box3, b: &Box3) -> f64 {
    if circles_apart(a, b) {
        return 0.0;
    }
    let inter_area = Footprint::of(a).intersection_area(&Footprint::of(b));
    let z_overlap = ((a.z + 0.5 * a.h).min(b.z + 0.5 * b.h) - (a.z - 0.5 * a.h).max(b.z - 0.5 * b.h)).max(0.0);
    let inter = if a.h > 0.0 && b.h > 0.0 {
        inter_area * z_overlap
    } else {
        0.0
    };
    ratio(inter, a.volume() + b.volume() - inter)
}

/// The exact 3D IoU of two boxes of any orientation, by convex polyhedron intersection (each
/// box's faces clipped by the other's 6 half-spaces, volume by the divergence theorem).
pub fn iou_3d_9dof(a: &Box3, b: &Box3) -> f64 {
    iou_3d_9dof_eps(a, b, EPS)
}

/// `iou_3d_9dof` with an explicit tolerance `eps` (m): faces whose vertices all lie within
/// `eps` of a face plane of the other box count as lying in it (shared or touching faces).
pub fn iou_3d_9dof_eps(a: &Box3, b: &Box3, eps: f64) -> f64 {
    let inter = box_intersection_volume(a, b, eps);
    ratio(inter, a.volume() + b.volume() - inter)
}

/// The exact 3D IoU of two boxes: the yaw-only formula when both have |pitch|, |roll| ≤ `EPS`,
/// otherwise `iou_3d_9dof`. Zero-size or non-finite boxes give 0.
pub fn iou_3d(a: &Box3, b: &Box3) -> f64 {
    iou_3d_eps(a, b, EPS)
}

/// `iou_3d` with an explicit tolerance `eps`: the angle (rad) under which pitch and roll count
/// as zero, and the coplanarity distance (m) of `iou_3d_9dof_eps`.
pub fn iou_3d_eps(a: &Box3, b: &Box3, eps: f64) -> f64 {
    if a.is_yaw_only(eps) && b.is_yaw_only(eps) {
        iou_3d_yaw_only(a, b)
    } else {
        iou_3d_9dof_eps(a, b, eps)
    }
}

/// `b` with its yaw, pitch and roll set to 0 (edges along the parent frame's axes).
fn axis_aligned(b: &Box3) -> Box3 {
    Box3 {
        yaw: 0.0,
        pitch: 0.0,
        roll: 0.0,
        ..*b
    }
}

/// The 3D IoU of `rotated` against `axis_aligned` treated as axis-aligned (its yaw, pitch and
/// roll ignored), as 3EED's grounding metric scores an axis-aligned prediction against the
/// rotated ground truth.
pub fn iou_rotated_vs_axis_aligned(rotated: &Box3, axis_aligned_box: &Box3) -> f64 {
    iou_3d(rotated, &axis_aligned(axis_aligned_box))
}

/// The BEV IoU of `rotated` against `axis_aligned` treated as axis-aligned (its yaw ignored).
pub fn iou_bev_rotated_vs_axis_aligned(rotated: &Box3, axis_aligned_box: &Box3) -> f64 {
    iou_bev(rotated, &axis_aligned(axis_aligned_box))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::testutil::{box_7dof, box_9dof, rotate_about_z, transform_box};
    use approx::assert_abs_diff_eq;
    use nalgebra::{Isometry3, Vector3};
    use proptest::prelude::*;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

    /// The overlap area of two concentric unit squares, one turned by θ ∈ [0, π/2]: four corner
    /// triangles with legs u and u·tanθ are cut off, and the octagon's edges are all equal,
    /// 1 − u − u·tanθ = u / cosθ, so u = cosθ / (1 + sinθ + cosθ) and the area is 1 − 2u²·tanθ.
    fn concentric_unit_squares_overlap(theta: f64) -> f64 {
        let (s, c) = theta.sin_cos();
        1.0 - 2.0 * s * c / (1.0 + s + c).powi(2)
    }

    #[test]
    fn square_overlap_formula_matches_the_octagon() {
        // At 45° the overlap is the regular octagon of area 2(√2 − 1).
        assert_abs_diff_eq!(
            concentric_unit_squares_overlap(FRAC_PI_4),
            2.0 * (2f64.sqrt() - 1.0),
            epsilon = 1e-15
        );
        assert_abs_diff_eq!(concentric_unit_squares_overlap(0.0), 1.0);
    }

    #[test]
    fn unit_cubes_offset_by_half_a_metre() {
        let a = Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        let b = Box3::new(0.5, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(iou_3d(&a, &b), 1.0 / 3.0, epsilon = 1e-12);
        assert_abs_diff_eq!(iou_3d_9dof(&a, &b), 1.0 / 3.0, epsilon = 1e-12);
        assert_abs_diff_eq!(iou_bev(&a, &b), 1.0 / 3.0, epsilon = 1e-12);
        // Offset along z instead: BEV identical, 3D 1/3.
        let c = Box3::new(0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(iou_bev(&a, &c), 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(iou_3d(&a, &c), 1.0 / 3.0, epsilon = 1e-12);
    }

    #[test]
    fn box_turned_45_degrees_against_itself_axis_aligned() {
        let rotated = Box3::new(3.0, -2.0, 1.0, 1.0, 1.0, 1.0, FRAC_PI_4);
        let octagon = 2.0 * (2f64.sqrt() - 1.0);
        let expected = octagon / (2.0 - octagon);
        assert_abs_diff_eq!(
            iou_bev_rotated_vs_axis_aligned(&rotated, &rotated),
            expected,
            epsilon = 1e-12
        );
        assert_abs_diff_eq!(
            iou_rotated_vs_axis_aligned(&rotated, &rotated),
            expected,
            epsilon = 1e-12
        );
        assert_abs_diff_eq!(
            iou_bev(&rotated, &Box3 { yaw: 0.0, ..rotated }),
            expected,
            epsilon = 1e-12
        );
        // The axis-aligned argument's own rotation is ignored.
        let tilted = Box3 {
            yaw: 1.0,
            pitch: 0.3,
            roll: -0.2,
            ..rotated
        };
        assert_abs_diff_eq!(
            iou_rotated_vs_axis_aligned(&rotated, &tilted),
            expected,
            epsilon = 1e-12
        );
    }

    #[test]
    fn bev_iou_of_a_turned_square_for_many_angles() {
        for k in 0..=20 {
            let theta = FRAC_PI_2 * k as f64 / 20.0;
            let a = Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
            let b = Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, theta);
            let o = concentric_unit_squares_overlap(theta);
            assert_abs_diff_eq!(iou_bev(&a, &b), o / (2.0 - o), epsilon = 1e-12);
        }
    }

    #[test]
    fn pitched_box_against_itself() {
        // Pitch turns the box about its y axis; with yaw = 0 that is the world y axis, so both
        // boxes have the same y extent and the intersection is the overlap of their x–z cross
        // sections (squares of side a when l = h = a) times w. For a square turned by θ that is
        // a²·(1 − 2 sinθ cosθ / (1 + sinθ + cosθ)²) (see concentric_unit_squares_overlap).
        let side = 2.0;
        let w = 0.7;
        for theta in [0.1, 0.5, FRAC_PI_4, 1.2] {
            let flat = Box3::new(1.0, 2.0, 3.0, side, w, side, 0.0);
            let pitched = Box3 { pitch: theta, ..flat };
            let inter = side * side * concentric_unit_squares_overlap(theta) * w;
            let expected = inter / (2.0 * flat.volume() - inter);
            assert_abs_diff_eq!(iou_3d(&flat, &pitched), expected, epsilon = 1e-12);
            assert_abs_diff_eq!(iou_rotated_vs_axis_aligned(&pitched, &flat), expected, epsilon = 1e-12);
        }
    }

    #[test]
    fn cube_turned_a_quarter_turn_is_itself() {
        let cube = Box3::new(10.0, -4.0, 1.0, 2.0, 2.0, 2.0, 0.3);
        for (pitch, roll) in [(0.0, FRAC_PI_2), (FRAC_PI_2, 0.0), (FRAC_PI_2, FRAC_PI_2), (0.0, PI)] {
            let turned = Box3 { pitch, roll, ..cube };
            assert_abs_diff_eq!(iou_3d(&cube, &turned), 1.0, epsilon = 1e-12);
        }
        // A 2×1×1 box rolled a quarter turn about its long axis is still itself.
        let bar = Box3::new(0.0, 0.0, 0.0, 2.0, 1.0, 1.0, 0.0);
        assert_abs_diff_eq!(iou_3d(&bar, &Box3 { roll: FRAC_PI_2, ..bar }), 1.0, epsilon = 1e-12);
        // Pitched a quarter turn, its length stands along z: the overlap is a 1×1×1 cube.
        assert_abs_diff_eq!(
            iou_3d(
                &bar,
                &Box3 {
                    pitch: FRAC_PI_2,
                    ..bar
                }
            ),
            1.0 / 3.0,
            epsilon = 1e-12
        );
    }

    #[test]
    fn touching_disjoint_and_degenerate_boxes() {
        let a = Box3::new(0.0, 0.0, 0.0, 2.0, 1.0, 1.0, 0.4);
        let far = Box3::new(10.0, 0.0, 0.0, 2.0, 1.0, 1.0, 0.4);
        assert_eq!(iou_bev(&a, &far), 0.0);
        assert_eq!(iou_3d(&a, &far), 0.0);
        // Stacked exactly on top: BEV identical, 3D touching.
        let above = Box3 { z: 1.0, ..a };
        assert_abs_diff_eq!(iou_3d(&a, &above), 0.0, epsilon = 1e-12);
        let above_tilted = Box3 {
            z: 1.0,
            pitch: 1e-3,
            ..a
        };
        assert!(iou_3d(&a, &above_tilted) < 1e-3);
        // Side by side along the heading.
        let (s, c) = 0.4f64.sin_cos();
        let ahead = Box3 {
            x: 2.0 * c,
            y: 2.0 * s,
            ..a
        };
        assert_abs_diff_eq!(iou_bev(&a, &ahead), 0.0, epsilon = 1e-12);
        let ahead_9dof = Box3 { roll: 1e-12, ..ahead };
        assert_abs_diff_eq!(
            iou_3d_9dof(&Box3 { roll: 1e-12, ..a }, &ahead_9dof),
            0.0,
            epsilon = 1e-9
        );
        // Zero-size and NaN boxes.
        let flat = Box3 { h: 0.0, ..a };
        assert_eq!(iou_3d(&flat, &flat), 0.0);
        assert_eq!(iou_3d_9dof(&flat, &flat), 0.0);
        let point = Box3 { l: 0.0, w: 0.0, ..a };
        assert_eq!(iou_bev(&point, &point), 0.0);
        let nan = Box3 { x: f64::NAN, ..a };
        assert_eq!(iou_bev(&a, &nan), 0.0);
        assert_eq!(iou_3d(&a, &nan), 0.0);
        assert_eq!(iou_3d_9dof(&a, &Box3 { pitch: f64::NAN, ..a }), 0.0);
    }

    #[test]
    fn nested_boxes() {
        let outer = Box3::from_array([0.0, 0.0, 0.0, 4.0, 4.0, 4.0, 0.2, 0.3, 0.4]);
        let inner = Box3::from_array([0.1, 0.0, -0.1, 1.0, 1.0, 1.0, 1.0, -0.5, 2.0]);
        assert_abs_diff_eq!(iou_3d(&outer, &inner), 1.0 / 64.0, epsilon = 1e-12);
    }

    #[test]
    fn far_from_the_origin() {
        // World-frame coordinates a few km out keep full precision.
        let a = Box3::new(4000.0, -2500.0, 30.0, 1.0, 1.0, 1.0, 0.0);
        let b = Box3 { x: 4000.5, ..a };
        assert_abs_diff_eq!(iou_bev(&a, &b), 1.0 / 3.0, epsilon = 1e-12);
        assert_abs_diff_eq!(iou_3d_9dof(&a, &b), 1.0 / 3.0, epsilon = 1e-12);
    }

    /// `b` moved by `fraction` of its extent along its own local axis `axis` (0 = x, 1 = y, 2 = z).
    fn slid_along_own_axis(b: &Box3, axis: usize, fraction: f64) -> Box3 {
        let mut local = Vector3::zeros();
        local[axis] = fraction * b.size()[axis];
        let shift = b.rotation() * local;
        Box3 {
            x: b.x + shift.x,
            y: b.y + shift.y,
            z: b.z + shift.z,
            ..*b
        }
    }

    proptest! {
        /// The circle test before the footprints changes no IoU: with centres up to 8 m apart
        /// (pairs that meet, touch and miss), `iou_bev` equals the footprints' IoU bit for bit.
        #[test]
        fn the_early_circle_test_gives_the_footprints_iou(
            a in box_7dof(),
            b in box_7dof(),
            dx in -6.0..6.0f64,
            dy in -6.0..6.0f64,
        ) {
            let b = Box3 { x: b.x + dx, y: b.y + dy, ..b };
            let full = Footprint::of(&a).iou(&Footprint::of(&b));
            prop_assert_eq!(iou_bev(&a, &b).to_bits(), full.to_bits());
            if circles_apart(&a, &b) {
                prop_assert_eq!(full, 0.0);
            }
        }

        /// A copy slid by a fraction f of its extent along its own axis shares four faces' planes
        /// with the original (the coplanar case) and overlaps by 1 − f: IoU = (1 − f) / (1 + f).
        #[test]
        fn copy_slid_along_its_own_axis(b in box_9dof(), axis in 0usize..3, fraction in 0.0..1.0) {
            let moved = slid_along_own_axis(&b, axis, fraction);
            let expected = (1.0 - fraction) / (1.0 + fraction);
            let got = iou_3d_9dof(&b, &moved);
            prop_assert!((got - expected).abs() < 1e-9, "{got} vs {expected}");
            // Touching exactly face to face.
            let touching = iou_3d_9dof(&b, &slid_along_own_axis(&b, axis, 1.0));
            prop_assert!(touching.abs() < 1e-9, "{touching}");
            let yaw_only = Box3 { pitch: 0.0, roll: 0.0, ..b };
            if axis < 2 {
                let bev = iou_bev(&yaw_only, &slid_along_own_axis(&yaw_only, axis, fraction));
                prop_assert!((bev - expected).abs() < 1e-9, "{bev} vs {expected}");
            }
        }

        /// Tilts far below and far above the coplanarity tolerance change the IoU continuously.
        #[test]
        fn nearly_yaw_only_pairs_are_continuous(a in box_7dof(), b in box_7dof(), exponent in -13.0f64..-7.0, sign in prop::bool::ANY) {
            let tilt = if sign { 10f64.powf(exponent) } else { -(10f64.powf(exponent)) };
            let a_tilted = Box3 { pitch: tilt, ..a };
            let b_tilted = Box3 { roll: -tilt, ..b };
            let flat = iou_3d_yaw_only(&a, &b);
            let tilted = iou_3d_9dof(&a_tilted, &b_tilted);
            prop_assert!((flat - tilted).abs() < 1e-5, "{flat} vs {tilted} at tilt {tilt}");
            let self_iou = iou_3d_9dof(&a, &a_tilted);
            prop_assert!((self_iou - 1.0).abs() < 1e-5, "{self_iou} at tilt {tilt}");
        }

        #[test]
        fn bev_iou_properties(a in box_7dof(), b in box_7dof(), angle in -PI..PI, dx in -50.0..50.0, dy in -50.0..50.0) {
            let ab = iou_bev(&a, &b);
            prop_assert!((0.0..=1.0).contains(&ab), "{ab}");
            prop_assert!((ab - iou_bev(&b, &a)).abs() < 1e-12, "not symmetric: {a:?} {b:?}");
            prop_assert!((iou_bev(&a, &a) - 1.0).abs() < 1e-12);
            let moved = iou_bev(&rotate_about_z(&a, angle, dx, dy), &rotate_about_z(&b, angle, dx, dy));
            prop_assert!((ab - moved).abs() < 1e-9, "{ab} vs {moved} for {a:?} {b:?}");
        }

        #[test]
        fn yaw_only_3d_iou_properties(a in box_7dof(), b in box_7dof(), angle in -PI..PI, dx in -50.0..50.0, dy in -50.0..50.0) {
            let ab = iou_3d(&a, &b);
            prop_assert!((0.0..=1.0).contains(&ab), "{ab}");
            prop_assert!((ab - iou_3d(&b, &a)).abs() < 1e-12);
            prop_assert!((iou_3d(&a, &a) - 1.0).abs() < 1e-12);
            let moved = iou_3d(&rotate_about_z(&a, angle, dx, dy), &rotate_about_z(&b, angle, dx, dy));
            prop_assert!((ab - moved).abs() < 1e-9, "{ab} vs {moved}");
            // The general path agrees with the yaw-only formula.
            let general = iou_3d_9dof(&a, &b);
            prop_assert!((ab - general).abs() < 1e-9, "yaw-only {ab} vs 9-dof {general} for {a:?} {b:?}");
        }

        #[test]
        fn rotated_vs_axis_aligned(a in box_9dof(), b in box_9dof()) {
            let aligned = Box3 { yaw: 0.0, pitch: 0.0, roll: 0.0, ..b };
            let v = iou_rotated_vs_axis_aligned(&a, &b);
            prop_assert!((0.0..=1.0).contains(&v));
            prop_assert!((v - iou_3d(&aligned, &a)).abs() < 1e-12);
            let bev = iou_bev_rotated_vs_axis_aligned(&a, &b);
            prop_assert!((bev - iou_bev(&aligned, &a)).abs() < 1e-12);
        }

        #[test]
        fn full_3d_iou_properties(
            a in box_9dof(), b in box_9dof(),
            axis in (-1.0..1.0, -1.0..1.0, -1.0..1.0), t in (-20.0..20.0, -20.0..20.0, -20.0..20.0),
        ) {
            let ab = iou_3d(&a, &b);
            prop_assert!((0.0..=1.0).contains(&ab), "{ab}");
            prop_assert!((ab - iou_3d(&b, &a)).abs() < 1e-12, "not symmetric: {a:?} {b:?}");
            prop_assert!((iou_3d(&a, &a) - 1.0).abs() < 1e-12);
            let motion = Isometry3::new(Vector3::new(t.0, t.1, t.2), Vector3::new(axis.0, axis.1, axis.2));
            let moved = iou_3d_9dof(&transform_box(&a, &motion), &transform_box(&b, &motion));
            prop_assert!((ab - moved).abs() < 1e-9, "{ab} vs {moved} for {a:?} {b:?}");
        }
    }
}
