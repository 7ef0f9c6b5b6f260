//! Up from the pose: exact when the world frame is gravity-aligned (Waymo's global frame), and
//! 3EED / Pi3DET's virtual pose, which takes roll and pitch relative to the first pose of the log
//! (`../shared/reference/m3ed-format.md`, "Platform normalisation").

use nalgebra::{Isometry3, Rotation3, Translation3, Unit, UnitQuaternion, Vector3};

use crate::geometry::Box3;
use crate::geometry::pose::euler_from_rotation;

/// The world's up (+z) seen in the sensor frame of `world_from_sensor`.
pub fn up_from_pose(world_from_sensor: &Isometry3<f64>) -> Unit<Vector3<f64>> {
    Unit::new_normalize(world_from_sensor.rotation.inverse() * Vector3::z())
}

/// 3EED's virtual pose `V` for a frame whose pose relative to the first one is
/// `l0_from_sensor` (`L0_T_Ln`): roll and pitch of `as_euler('xyz')` removed through
/// `R_y(pitch)·R_x(roll)`, heading kept; a drone is also lifted by the pose height `P[2,3]`, less
/// 1.7 m for labels (`label`). `p_virtual = V · p_sensor`.
pub fn virtual_pose_3eed(l0_from_sensor: &Isometry3<f64>, drone: bool, label: bool) -> Isometry3<f64> {
    // scipy's extrinsic 'xyz' angles are the Rz·Ry·Rx decomposition.
    let (_, pitch, roll) = euler_from_rotation(&l0_from_sensor.rotation.to_rotation_matrix());
    let r =
        Rotation3::from_axis_angle(&Vector3::y_axis(), pitch) * Rotation3::from_axis_angle(&Vector3::x_axis(), roll);
    let dz = if drone {
        l0_from_sensor.translation.vector.z - if label { 1.7 } else { 0.0 }
    } else {
        0.0
    };
    Isometry3::from_parts(
        Translation3::new(0.0, 0.0, dz),
        UnitQuaternion::from_rotation_matrix(&r),
    )
}

/// 3EED's `convert_boxes_from_vir_to_n`: a 7-dof box in the virtual frame `V` taken to the
/// sensor frame — centre by `V⁻¹`, yaw plus the yaw angle of `V⁻¹`'s `as_euler('xyz')`, pitch
/// and roll dropped. Kept for reproducing their labels; [`super::Normalization`] maps full 9-dof
/// boxes exactly.
pub fn box_from_virtual_3eed(virtual_from_sensor: &Isometry3<f64>, b: &Box3) -> Box3 {
    let t = virtual_from_sensor.inverse();
    let c = t * nalgebra::Point3::new(b.x, b.y, b.z);
    let (yaw, _, _) = euler_from_rotation(&t.rotation.to_rotation_matrix());
    Box3::new(c.x, c.y, c.z, b.l, b.w, b.h, crate::geometry::wrap_angle(b.yaw + yaw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::pose::isometry_from_euler;
    use nalgebra::Point3;

    /// `L0_T_Ln` = scipy `from_euler('xyz', [0.07, -0.12, 1.1])` (extrinsic: roll, pitch, yaw)
    /// and translation (3, −2, 4.5).
    fn pose() -> Isometry3<f64> {
        isometry_from_euler(Vector3::new(3.0, -2.0, 4.5), 1.1, -0.12, 0.07)
    }

    /// Golden values from scipy 1.17 (the snippet is in `docs/normalization.md`):
    /// `R.from_euler('y', pitch) * R.from_euler('x', roll)`, applied to (10, 1, −2).
    #[test]
    fn virtual_pose_matches_scipy_golden_values() {
        let v = virtual_pose_3eed(&pose(), false, false);
        let expected = [
            0.9928086358538663,
            -0.00837301263884796,
            -0.11941903212358956,
            0.0,
            0.9975510002532796,
            -0.06994284733753271,
            0.11971220728891947,
            0.06943986285291108,
            0.9903772477561182,
        ];
        let m = v.rotation.to_rotation_matrix();
        for r in 0..3 {
            for c in 0..3 {
                assert!((m[(r, c)] - expected[r * 3 + c]).abs() < 1e-12, "V[{r},{c}]");
            }
        }
        let p = v * Point3::new(10.0, 1.0, -2.0);
        assert!((p - Point3::new(10.158551410146993, 1.137436694928345, -0.7141925597701307)).norm() < 1e-12);
        let d = virtual_pose_3eed(&pose(), true, false) * Point3::new(10.0, 1.0, -2.0);
        assert!((d.z - 3.785807440229869).abs() < 1e-12);
        let labels = virtual_pose_3eed(&pose(), true, true);
        assert!((labels.translation.vector.z - (4.5 - 1.7)).abs() < 1e-12);
    }

    #[test]
    fn virtual_box_conversion_matches_scipy_golden_values() {
        let v = virtual_pose_3eed(&pose(), true, false);
        let b = box_from_virtual_3eed(&v, &Box3::new(5.0, 2.0, -1.0, 4.0, 2.0, 1.5, 0.3));
        assert!((b.x - 4.305626039180274).abs() < 1e-12);
        assert!((b.y - 1.5713176916213085).abs() < 1e-12);
        assert!((b.z - -6.184055717951664).abs() < 1e-12);
        assert!((b.yaw - 0.2915665377695702).abs() < 1e-12);
        assert_eq!((b.pitch, b.roll), (0.0, 0.0));
    }

    #[test]
    fn the_virtual_pose_levels_the_first_frames_z_axis() {
        // In the virtual frame, L0's z axis is +z: the method is gravity alignment exactly when
        // the first frame was level.
        let p = pose();
        let v = virtual_pose_3eed(&p, false, false);
        let l0_z_in_sensor = p.rotation.inverse() * Vector3::z();
        assert!((v.rotation * l0_z_in_sensor - Vector3::z()).norm() < 1e-12);
        assert!((up_from_pose(&p).into_inner() - l0_z_in_sensor).norm() < 1e-15);
    }
}
