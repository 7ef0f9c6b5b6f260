//! Which points of a cloud lie inside an oriented box.
//!
//! A point p is inside when its coordinates in the box frame, `local = Rᵀ·(p − centre)`, satisfy
//! |local| ≤ half extents on all three axes: the boundary counts as inside, and a point exactly
//! on a face is decided by the f64 rounding of that transform (~1e-15 m for points near the
//! box). Points are converted from f32 to f64 exactly and the test runs in f64: fast enough for
//! the throughput target, and it never moves a point by f32 rounding of a far-away centre.
//! Boxes with |pitch|, |roll| ≤ `EPS` take a yaw-only path (2×2 rotation, plain z range).
//! NaN coordinates are outside; a box with a negative or NaN extent contains nothing.

use super::{Box3, EPS};
use crate::cloud::PointCloud;

/// Points are tested in blocks of this many, giving one bit mask per block.
const BLOCK: usize = 64;

/// The box frame of one box, precomputed once per query.
#[derive(Debug, Clone, Copy)]
struct BoxFrame {
    center: [f64; 3],
    /// Rows of Rᵀ: the box's local x, y, z axes in the parent frame.
    axes: [[f64; 3]; 3],
    half: [f64; 3],
    yaw_only: bool,
}

impl BoxFrame {
    fn new(b: &Box3) -> Self {
        let m = b.rotation().into_inner();
        let axes = [0, 1, 2].map(|c| [m[(0, c)], m[(1, c)], m[(2, c)]]);
        let yaw_only = b.is_yaw_only(EPS);
        let axes = if yaw_only {
            let (s, c) = b.yaw.sin_cos();
            [[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]]
        } else {
            axes
        };
        Self {
            center: [b.x, b.y, b.z],
            axes,
            half: [0.5 * b.l, 0.5 * b.w, 0.5 * b.h],
            yaw_only,
        }
    }

    /// Bit k of the result is set when point `k` of the block is inside (blocks ≤ 64 points).
    #[inline(always)]
    fn block_mask(&self, x: &[f32], y: &[f32], z: &[f32]) -> u64 {
        let n = x.len().min(y.len()).min(z.len()).min(BLOCK);
        let [cx, cy, cz] = self.center;
        let [hx, hy, hz] = self.half;
        let mut inside = [false; BLOCK];
        if self.yaw_only {
            let [c, s, _] = self.axes[0];
            for k in 0..n {
                let dx = x[k] as f64 - cx;
                let dy = y[k] as f64 - cy;
                let dz = z[k] as f64 - cz;
                let lx = c * dx + s * dy;
                let ly = c * dy - s * dx;
                inside[k] = (lx.abs() <= hx) & (ly.abs() <= hy) & (dz.abs() <= hz);
            }
        } else {
            let [ax, ay, az] = self.axes;
            for k in 0..n {
                let dx = x[k] as f64 - cx;
                let dy = y[k] as f64 - cy;
                let dz = z[k] as f64 - cz;
                let lx = ax[0] * dx + ax[1] * dy + ax[2] * dz;
                let ly = ay[0] * dx + ay[1] * dy + ay[2] * dz;
                let lz = az[0] * dx + az[1] * dy + az[2] * dz;
                inside[k] = (lx.abs() <= hx) & (ly.abs() <= hy) & (lz.abs() <= hz);
            }
        }
        let mut mask = 0u64;
        for (k, &v) in inside[..n].iter().enumerate() {
            mask |= (v as u64) << k;
        }
        mask
    }

    /// Calls `f(start, mask)` for each block of 64 points starting at index `start`.
    #[inline(always)]
    fn for_each_block(&self, x: &[f32], y: &[f32], z: &[f32], mut f: impl FnMut(usize, u64)) {
        let n = x.len().min(y.len()).min(z.len());
        let mut start = 0;
        while start < n {
            let end = (start + BLOCK).min(n);
            f(start, self.block_mask(&x[start..end], &y[start..end], &z[start..end]));
            start = end;
        }
    }
}

/// The indices (ascending) of the cloud's points inside `b`, boundary included.
pub fn points_in_box(cloud: &PointCloud, b: &Box3) -> Vec<u32> {
    let frame = BoxFrame::new(b);
    let mut out = Vec::new();
    frame.for_each_block(cloud.x(), cloud.y(), cloud.z(), |start, mut mask| {
        while mask != 0 {
            let k = mask.trailing_zeros() as usize;
            // Clouds hold far fewer than 2³² points (a sweep is ~10⁵).
            out.push((start + k) as u32);
            mask &= mask - 1;
        }
    });
    out
}

/// The number of the cloud's points inside `b`, boundary included.
pub fn count_points_in_box(cloud: &PointCloud, b: &Box3) -> usize {
    count_points_in_box_xyz(cloud.x(), cloud.y(), cloud.z(), b)
}

/// The number of points inside `b`, boundary included, for points given as coordinate slices
/// (the first `min(x.len(), y.len(), z.len())` are tested).
pub fn count_points_in_box_xyz(x: &[f32], y: &[f32], z: &[f32], b: &Box3) -> usize {
    let frame = BoxFrame::new(b);
    let mut count = 0usize;
    frame.for_each_block(x, y, z, |_, mask| count += mask.count_ones() as usize);
    count
}

/// Fills `out` with one flag per point (true = inside `b`, boundary included) for the points
/// given as coordinate slices; `out` is cleared first, and only the first
/// `min(x.len(), y.len(), z.len())` points are tested.
pub fn points_in_box_mask(x: &[f32], y: &[f32], z: &[f32], b: &Box3, out: &mut Vec<bool>) {
    let frame = BoxFrame::new(b);
    out.clear();
    frame.for_each_block(x, y, z, |start, mask| {
        let len = (x.len().min(y.len()).min(z.len()) - start).min(BLOCK);
        out.extend((0..len).map(|k| (mask >> k) & 1 == 1));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::box_corners;
    use crate::geometry::corners::FACE_CORNERS;
    use crate::geometry::testutil::SeededRng;
    use nalgebra::{Point3, Vector3};
    use proptest::prelude::*;

    /// The brute-force reference: inside when on the inner side of all 6 face planes built from
    /// `box_corners` (outward normal from the face's corners), together with the smallest
    /// distance to a plane so callers can skip points too close to call.
    fn corner_plane_test(b: &Box3, p: Point3<f64>) -> (bool, f64) {
        let c = box_corners(b);
        let mut inside = true;
        let mut closest = f64::INFINITY;
        for face in FACE_CORNERS {
            let [p0, p1, p2, _] = face.map(|i| c[i]);
            let normal: Vector3<f64> = (p1 - p0).cross(&(p2 - p1)).normalize();
            let d = normal.dot(&(p - p0));
            inside &= d <= 0.0;
            closest = closest.min(d.abs());
        }
        (inside, closest)
    }

    fn cloud(points: &[[f32; 3]]) -> PointCloud {
        PointCloud::from_columns(
            points.iter().map(|p| p[0]).collect(),
            points.iter().map(|p| p[1]).collect(),
            points.iter().map(|p| p[2]).collect(),
            vec![0.0; points.len()],
        )
        .unwrap()
    }

    #[test]
    fn hand_placed_points() {
        // A 4×2×2 box turned 90°: it spans x ∈ [−1, 1], y ∈ [−2, 2], z ∈ [−1, 1].
        let b = Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 2.0, std::f64::consts::FRAC_PI_2);
        let pts = [
            [0.0, 0.0, 0.0],
            [0.0, 1.9, 0.0],
            [1.5, 0.0, 0.0],
            [0.0, 0.0, 1.5],
            [0.5, -1.5, -0.9],
            [0.0, 2.0, 0.0], // on the front face: inside
            [f32::NAN, 0.0, 0.0],
        ];
        let c = cloud(&pts);
        assert_eq!(points_in_box(&c, &b), vec![0, 1, 4, 5]);
        assert_eq!(count_points_in_box(&c, &b), 4);
        let mut mask = vec![true; 3];
        points_in_box_mask(c.x(), c.y(), c.z(), &b, &mut mask);
        assert_eq!(mask, vec![true, true, false, false, true, true, false]);
        // Pitched a quarter turn, the length stands along z.
        let standing = Box3 {
            pitch: std::f64::consts::FRAC_PI_2,
            ..Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 2.0, 0.0)
        };
        assert_eq!(
            points_in_box(&cloud(&[[0.0, 0.0, 1.9], [1.9, 0.0, 0.0]]), &standing),
            vec![0]
        );
        // An empty box contains nothing but the centre, a negative one nothing at all.
        let empty = Box3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        assert_eq!(points_in_box(&c, &empty), vec![0]);
        assert!(points_in_box(&c, &Box3 { l: -1.0, ..b }).is_empty());
    }

    /// Random points around random boxes, from a fixed seed so failures reproduce.
    fn random_case(rng: &mut SeededRng, yaw_only: bool) -> (Box3, PointCloud) {
        let mut u = |lo: f64, hi: f64| rng.uniform(lo, hi);
        let b = Box3::from_array([
            u(-20.0, 20.0),
            u(-20.0, 20.0),
            u(-2.0, 2.0),
            u(0.3, 6.0),
            u(0.3, 3.0),
            u(0.3, 3.0),
            u(-3.2, 3.2),
            if yaw_only { 0.0 } else { u(-1.6, 1.6) },
            if yaw_only { 0.0 } else { u(-3.2, 3.2) },
        ]);
        let n = 1000;
        let reach = 0.45 * b.size().norm();
        let mut cols = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..n {
            for (k, col) in cols.iter_mut().enumerate() {
                col.push((b.center()[k] + u(-reach, reach)) as f32);
            }
        }
        let [x, y, z] = cols;
        (b, PointCloud::from_columns(x, y, z, vec![0.0; n]).unwrap())
    }

    fn check_against_corner_planes(b: &Box3, c: &PointCloud) -> usize {
        let got = points_in_box(c, b);
        let mut mask = Vec::new();
        points_in_box_mask(c.x(), c.y(), c.z(), b, &mut mask);
        assert_eq!(count_points_in_box(c, b), got.len());
        assert_eq!(mask.len(), c.len());
        let mut inside_count = 0;
        for (i, &flag) in mask.iter().enumerate() {
            let (inside, closest) = corner_plane_test(b, c.point(i));
            assert_eq!(flag, got.binary_search(&(i as u32)).is_ok());
            // Points within 1e-9 m of a face are decided by rounding; both answers are right.
            if closest > 1e-9 {
                assert_eq!(flag, inside, "point {i} {:?} box {b:?}", c.point(i));
            }
            inside_count += inside as usize;
        }
        inside_count
    }

    #[test]
    fn agrees_with_corner_planes_on_random_boxes() {
        let mut rng = SeededRng::new(42);
        let mut inside = 0;
        for case in 0..200 {
            let (b, c) = random_case(&mut rng, case % 4 == 0);
            inside += check_against_corner_planes(&b, &c);
        }
        // The sampling reaches both answers often (guards against a test that cannot fail).
        assert!(inside > 10_000 && inside < 190_000, "{inside}");
    }

    #[test]
    fn yaw_only_path_agrees_with_the_general_path() {
        let mut rng = SeededRng::new(7);
        for _ in 0..100 {
            let (b, c) = random_case(&mut rng, true);
            assert!(BoxFrame::new(&b).yaw_only);
            // The same box through the 9-dof arithmetic.
            let mut general = BoxFrame::new(&b);
            general.yaw_only = false;
            let m = b.rotation().into_inner();
            general.axes = [0, 1, 2].map(|col| [m[(0, col)], m[(1, col)], m[(2, col)]]);
            for start in (0..c.len()).step_by(BLOCK) {
                let end = (start + BLOCK).min(c.len());
                let (x, y, z) = (&c.x()[start..end], &c.y()[start..end], &c.z()[start..end]);
                let fast = BoxFrame::new(&b).block_mask(x, y, z);
                let slow = general.block_mask(x, y, z);
                // Differences only for points within rounding of a face.
                for k in 0..end - start {
                    if (fast >> k) & 1 != (slow >> k) & 1 {
                        let (_, closest) = corner_plane_test(&b, c.point(start + k));
                        assert!(closest < 1e-9, "point {} box {b:?}", start + k);
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn mask_and_indices_agree(b in crate::geometry::testutil::box_9dof(), pts in prop::collection::vec((-4.0f32..4.0, -4.0f32..4.0, -3.0f32..3.0), 0..200)) {
            let c = cloud(&pts.iter().map(|p| [p.0, p.1, p.2]).collect::<Vec<_>>());
            let idx = points_in_box(&c, &b);
            let mut mask = Vec::new();
            points_in_box_mask(c.x(), c.y(), c.z(), &b, &mut mask);
            let from_mask: Vec<u32> = mask.iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| i as u32).collect();
            prop_assert_eq!(&idx, &from_mask);
            prop_assert_eq!(count_points_in_box(&c, &b), idx.len());
        }
    }
}
