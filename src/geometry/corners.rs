//! Corners and axis-aligned bounds of a `Box3`.

use nalgebra::{Point2, Point3, Vector3};

use super::Box3;

/// Signs of the 8 corners in the box frame, in the order `box_corners` documents.
pub(crate) const CORNER_SIGNS: [[f64; 3]; 8] = [
    [1.0, 1.0, -1.0],
    [-1.0, 1.0, -1.0],
    [-1.0, -1.0, -1.0],
    [1.0, -1.0, -1.0],
    [1.0, 1.0, 1.0],
    [-1.0, 1.0, 1.0],
    [-1.0, -1.0, 1.0],
    [1.0, -1.0, 1.0],
];

/// The 6 faces of a box as indices into `box_corners`, each counter-clockwise seen from outside
/// (so the right-hand normal points out), in the order bottom, top, +x, −x, +y, −y.
pub(crate) const FACE_CORNERS: [[usize; 4]; 6] = [
    [0, 3, 2, 1],
    [4, 5, 6, 7],
    [3, 0, 4, 7],
    [1, 2, 6, 5],
    [0, 1, 5, 4],
    [2, 3, 7, 6],
];

/// The 8 corners of a box in its parent frame.
///
/// Order: the bottom face (local z = −h/2) counter-clockwise seen from above (+z), starting at
/// local (+l/2, +w/2): (+l/2,+w/2), (−l/2,+w/2), (−l/2,−w/2), (+l/2,−w/2); then the top face
/// (local z = +h/2) in the same order. Corners 0, 3, 4, 7 are the front (heading) face.
pub fn box_corners(b: &Box3) -> [Point3<f64>; 8] {
    let rotation = b.rotation();
    let center = b.center();
    let half = b.half_extents();
    CORNER_SIGNS.map(|[sx, sy, sz]| center + rotation * Vector3::new(sx * half.x, sy * half.y, sz * half.z))
}

/// The 4 corners of a box's footprint on the ground plane (x, y, l, w, yaw; pitch and roll are
/// ignored), counter-clockwise starting at local (+l/2, +w/2), as in `box_corners`' bottom face.
pub fn bev_corners(b: &Box3) -> [Point2<f64>; 4] {
    let (s, c) = b.yaw.sin_cos();
    let (hl, hw) = (0.5 * b.l, 0.5 * b.w);
    [(hl, hw), (-hl, hw), (-hl, -hw), (hl, -hw)]
        .map(|(lx, ly)| Point2::new(b.x + c * lx - s * ly, b.y + s * lx + c * ly))
}

/// The axis-aligned bounds `(min, max)` of a (possibly rotated) box: the tightest axis-aligned
/// box containing all 8 corners.
pub fn aabb(b: &Box3) -> (Point3<f64>, Point3<f64>) {
    let m = b.rotation().into_inner();
    let half = b.half_extents();
    // Each world axis' half extent is the sum of the box axes' projections onto it.
    let reach = m.abs() * half;
    let center = b.center();
    (center - reach, center + reach)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use std::f64::consts::FRAC_PI_2;

    #[test]
    fn corners_of_an_axis_aligned_box_follow_the_documented_order() {
        let b = Box3::new(1.0, 2.0, 3.0, 4.0, 2.0, 1.0, 0.0);
        let c = box_corners(&b);
        let expected = [
            [3.0, 3.0, 2.5],
            [-1.0, 3.0, 2.5],
            [-1.0, 1.0, 2.5],
            [3.0, 1.0, 2.5],
            [3.0, 3.0, 3.5],
            [-1.0, 3.0, 3.5],
            [-1.0, 1.0, 3.5],
            [3.0, 1.0, 3.5],
        ];
        for (p, e) in c.iter().zip(expected) {
            assert_abs_diff_eq!(*p, Point3::from(e), epsilon = 1e-12);
        }
    }

    #[test]
    fn yaw_turns_the_heading_towards_y() {
        // Heading along +y after a quarter turn: the front face (corners 0 and 3) is at y = +l/2.
        let b = Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 1.0, FRAC_PI_2);
        let c = box_corners(&b);
        assert_abs_diff_eq!(c[0], Point3::new(-1.0, 2.0, -0.5), epsilon = 1e-12);
        assert_abs_diff_eq!(c[3], Point3::new(1.0, 2.0, -0.5), epsilon = 1e-12);
        let bev = bev_corners(&b);
        for k in 0..4 {
            assert_abs_diff_eq!(bev[k], Point2::new(c[k].x, c[k].y), epsilon = 1e-12);
        }
    }

    #[test]
    fn bev_corners_are_counter_clockwise() {
        let b = Box3::new(5.0, -3.0, 0.0, 4.0, 2.0, 1.0, 2.3);
        let p = bev_corners(&b);
        let mut twice_area = 0.0;
        for i in 0..4 {
            let (a, c) = (p[i], p[(i + 1) % 4]);
            twice_area += a.x * c.y - c.x * a.y;
        }
        assert_abs_diff_eq!(twice_area, 2.0 * 8.0, epsilon = 1e-9);
    }

    #[test]
    fn pitch_moves_the_front_face_up() {
        // Pitch is a rotation about local y: positive pitch turns +x towards −z.
        let b = Box3::from_array([0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0, FRAC_PI_2, 0.0]);
        let c = box_corners(&b);
        assert_abs_diff_eq!(c[0], Point3::new(0.0, 1.0, -1.0), epsilon = 1e-12);
    }

    #[test]
    fn aabb_contains_exactly_the_corners() {
        let b = Box3::from_array([1.0, -2.0, 0.5, 4.0, 2.0, 1.5, 0.7, 0.3, -0.4]);
        let (lo, hi) = aabb(&b);
        let c = box_corners(&b);
        for k in 0..3 {
            let min = c.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min);
            let max = c.iter().map(|p| p[k]).fold(f64::NEG_INFINITY, f64::max);
            assert_abs_diff_eq!(lo[k], min, epsilon = 1e-12);
            assert_abs_diff_eq!(hi[k], max, epsilon = 1e-12);
        }
    }

    #[test]
    fn faces_point_outwards() {
        let b = Box3::from_array([0.3, 0.2, -0.1, 3.0, 2.0, 1.0, 0.4, -0.2, 0.9]);
        let c = box_corners(&b);
        for face in FACE_CORNERS {
            let [p0, p1, p2, _] = face.map(|i| c[i]);
            let normal = (p1 - p0).cross(&(p2 - p1));
            assert!(normal.dot(&(p0 - b.center())) > 0.0, "face {face:?}");
        }
    }
}
