//! Rotation and pose helpers on `nalgebra` types, in the Euler convention R = Rz(yaw)·Ry(pitch)·Rx(roll).

use nalgebra::{Isometry3, Matrix4, Rotation3, Translation3, UnitQuaternion, Vector3};

/// The rotation `Rz(yaw)·Ry(pitch)·Rx(roll)` (Waymo's "3-2-1", DESIGN.md's box convention).
pub fn rotation_from_euler(yaw: f64, pitch: f64, roll: f64) -> Rotation3<f64> {
    // nalgebra's from_euler_angles(roll, pitch, yaw) is exactly Rz(yaw)·Ry(pitch)·Rx(roll);
    // the unit tests pin that against the explicit product.
    Rotation3::from_euler_angles(roll, pitch, yaw)
}

/// `(yaw, pitch, roll)` of a rotation, the inverse of [`rotation_from_euler`], with
/// pitch in `[-π/2, π/2]`; at gimbal lock (|pitch| = π/2) roll is set to 0.
pub fn euler_from_rotation(r: &Rotation3<f64>) -> (f64, f64, f64) {
    let m = r.matrix();
    // R[2,0] = -sin(pitch).
    let sp = (-m[(2, 0)]).clamp(-1.0, 1.0);
    let pitch = sp.asin();
    let cp = (m[(2, 1)].powi(2) + m[(2, 2)].powi(2)).sqrt();
    if cp > 1e-12 {
        let roll = m[(2, 1)].atan2(m[(2, 2)]);
        let yaw = m[(1, 0)].atan2(m[(0, 0)]);
        (yaw, pitch, roll)
    } else {
        // Gimbal lock: only yaw ∓ roll is defined; put it all in yaw.
        let yaw = (-m[(0, 1)]).atan2(m[(1, 1)]);
        (yaw, pitch, 0.0)
    }
}

/// A pose from a translation and Euler angles `Rz(yaw)·Ry(pitch)·Rx(roll)`.
pub fn isometry_from_euler(translation: Vector3<f64>, yaw: f64, pitch: f64, roll: f64) -> Isometry3<f64> {
    Isometry3::from_parts(
        Translation3::from(translation),
        UnitQuaternion::from_rotation_matrix(&rotation_from_euler(yaw, pitch, roll)),
    )
}

/// `(yaw, pitch, roll)` of a pose's rotation.
pub fn euler_from_isometry(pose: &Isometry3<f64>) -> (f64, f64, f64) {
    euler_from_rotation(&pose.rotation.to_rotation_matrix())
}

/// A pose from a row-major 4×4 homogeneous matrix (Waymo `Transform`, M3ED `T_*`), or `None`
/// when a value is not finite, the upper-left 3×3 block is not a rotation within `eps` or the last
/// row is not `0 0 0 1`.
pub fn isometry_from_row_major(m: &[f64; 16], eps: f64) -> Option<Isometry3<f64>> {
    // NaN fails no `>` comparison below and an infinite translation passes the rotation checks,
    // so non-finite values are refused first (issue 18: NaN pose rows became NaN world poses).
    if !m.iter().all(|v| v.is_finite()) {
        return None;
    }
    let mat = Matrix4::from_row_slice(m);
    if (mat[(3, 0)].abs() > eps)
        || (mat[(3, 1)].abs() > eps)
        || (mat[(3, 2)].abs() > eps)
        || ((mat[(3, 3)] - 1.0).abs() > eps)
    {
        return None;
    }
    let r = mat.fixed_view::<3, 3>(0, 0).into_owned();
    let orthogonality = (r.transpose() * r - nalgebra::Matrix3::identity()).abs().max();
    if orthogonality > eps || (r.determinant() - 1.0).abs() > eps {
        return None;
    }
    let rot = Rotation3::from_matrix_unchecked(r);
    let t = Vector3::new(mat[(0, 3)], mat[(1, 3)], mat[(2, 3)]);
    Some(Isometry3::from_parts(
        Translation3::from(t),
        UnitQuaternion::from_rotation_matrix(&rot),
    ))
}

/// The row-major 4×4 homogeneous matrix of a pose.
pub fn row_major_from_isometry(pose: &Isometry3<f64>) -> [f64; 16] {
    let m = pose.to_homogeneous();
    let mut out = [0.0; 16];
    for r in 0..4 {
        for c in 0..4 {
            out[r * 4 + c] = m[(r, c)];
        }
    }
    out
}

/// A pose as the three rows of its 3 × 4 matrix, for moving many points: a row is a dot product,
/// where a quaternion rotation per point costs several times more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineRows(pub [[f64; 4]; 3]);

impl AffineRows {
    /// The rows of `pose`.
    pub fn from_isometry(pose: &Isometry3<f64>) -> Self {
        let m = pose.to_homogeneous();
        Self(std::array::from_fn(|r| std::array::from_fn(|c| m[(r, c)])))
    }

    /// Coordinate `r` of `pose · p`.
    #[inline]
    pub fn coordinate(&self, r: usize, p: [f64; 3]) -> f64 {
        let m = &self.0[r];
        m[0] * p[0] + m[1] * p[1] + m[2] * p[2] + m[3]
    }

    /// Coordinate `r` of the rotation alone applied to `p` (a direction, or a point relative to
    /// the pose's origin).
    #[inline]
    pub fn rotated(&self, r: usize, p: [f64; 3]) -> f64 {
        let m = &self.0[r];
        m[0] * p[0] + m[1] * p[1] + m[2] * p[2]
    }

    /// `pose · p`.
    #[inline]
    pub fn apply(&self, p: [f64; 3]) -> [f64; 3] {
        [self.coordinate(0, p), self.coordinate(1, p), self.coordinate(2, p)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use nalgebra::Matrix3;
    use proptest::prelude::*;

    #[test]
    fn affine_rows_move_points_as_the_isometry_does() {
        let pose = isometry_from_euler(Vector3::new(3.0, -7.5, 1.25), 2.1, -0.3, 0.15);
        let rows = AffineRows::from_isometry(&pose);
        for p in [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [-40.0, 12.5, -1.8]] {
            let expected = pose * nalgebra::Point3::new(p[0], p[1], p[2]);
            let got = rows.apply(p);
            for r in 0..3 {
                assert_abs_diff_eq!(got[r], expected[r], epsilon = 1e-12);
                assert_abs_diff_eq!(
                    rows.rotated(r, p) + pose.translation.vector[r],
                    expected[r],
                    epsilon = 1e-12
                );
            }
        }
    }

    /// Issue 18: a NaN or infinite value passed the rigidity checks (NaN compares false).
    #[test]
    fn non_finite_matrices_are_not_rigid() {
        let identity = row_major_from_isometry(&Isometry3::identity());
        assert!(isometry_from_row_major(&identity, 1e-6).is_some());
        for at in [0, 3, 5, 11, 15] {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let mut m = identity;
                m[at] = bad;
                assert!(isometry_from_row_major(&m, 1e-6).is_none(), "value {bad} at {at}");
            }
        }
        assert!(isometry_from_row_major(&[0.0; 16], 1e-6).is_none());
    }

    fn rz(a: f64) -> Matrix3<f64> {
        Matrix3::new(a.cos(), -a.sin(), 0.0, a.sin(), a.cos(), 0.0, 0.0, 0.0, 1.0)
    }
    fn ry(a: f64) -> Matrix3<f64> {
        Matrix3::new(a.cos(), 0.0, a.sin(), 0.0, 1.0, 0.0, -a.sin(), 0.0, a.cos())
    }
    fn rx(a: f64) -> Matrix3<f64> {
        Matrix3::new(1.0, 0.0, 0.0, 0.0, a.cos(), -a.sin(), 0.0, a.sin(), a.cos())
    }

    #[test]
    fn matches_explicit_zyx_product() {
        let (yaw, pitch, roll) = (0.7, -0.3, 0.2);
        let expected = rz(yaw) * ry(pitch) * rx(roll);
        let got = rotation_from_euler(yaw, pitch, roll);
        assert_abs_diff_eq!(*got.matrix(), expected, epsilon = 1e-12);
    }

    #[test]
    fn yaw_rotates_x_towards_y() {
        let r = rotation_from_euler(std::f64::consts::FRAC_PI_2, 0.0, 0.0);
        assert_abs_diff_eq!(r * Vector3::x(), Vector3::y(), epsilon = 1e-12);
    }

    #[test]
    fn gimbal_lock_keeps_the_rotation() {
        let r = rotation_from_euler(0.4, std::f64::consts::FRAC_PI_2, 0.1);
        let (y, p, ro) = euler_from_rotation(&r);
        assert_abs_diff_eq!(*rotation_from_euler(y, p, ro).matrix(), *r.matrix(), epsilon = 1e-9);
    }

    #[test]
    fn row_major_round_trip_and_rejects_non_rigid() {
        let p = isometry_from_euler(Vector3::new(1.0, 2.0, 3.0), 0.3, 0.2, -0.1);
        let m = row_major_from_isometry(&p);
        let back = isometry_from_row_major(&m, 1e-9).unwrap();
        assert_abs_diff_eq!(back.to_homogeneous(), p.to_homogeneous(), epsilon = 1e-12);
        let mut scaled = m;
        scaled[0] *= 2.0;
        assert!(isometry_from_row_major(&scaled, 1e-6).is_none());
        let mut bad_row = m;
        bad_row[12] = 0.5;
        assert!(isometry_from_row_major(&bad_row, 1e-6).is_none());
    }

    proptest! {
        #[test]
        fn euler_round_trip(yaw in -3.1f64..3.1, pitch in -1.5f64..1.5, roll in -3.1f64..3.1) {
            let (y, p, r) = euler_from_rotation(&rotation_from_euler(yaw, pitch, roll));
            prop_assert!((y - yaw).abs() < 1e-9 && (p - pitch).abs() < 1e-9 && (r - roll).abs() < 1e-9,
                "({yaw},{pitch},{roll}) -> ({y},{p},{r})");
        }
    }
}
