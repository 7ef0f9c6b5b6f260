//! The normalized frame and the maps into and out of it: the sensor frame turned so that up is
//! +z with the heading kept (the sensor's x axis projected on the level plane stays the x axis),
//! origin on the sensor, shifted by the altitude offset along z.

use nalgebra::{Isometry3, Matrix3, Point3, Rotation3, Translation3, Unit, UnitQuaternion, Vector3};

use crate::cloud::PointCloud;
use crate::geometry::Box3;

/// `normalized_from_sensor` for an up direction in the sensor frame and a z offset (m): rows of
/// the rotation are the level heading x′, y′ = up × x′ and up; points move by `z_offset` along z.
pub fn normalized_from_sensor(up: &Unit<Vector3<f64>>, z_offset: f64) -> Isometry3<f64> {
    let z = up.into_inner();
    // The sensor's x axis on the level plane; its y axis when x points (nearly) straight up.
    let mut x = Vector3::x() - z * z.x;
    if x.norm() < 1e-6 {
        let y = Vector3::y() - z * z.y;
        x = y.cross(&z);
    }
    let x = x.normalize();
    let y = z.cross(&x);
    let m = Matrix3::from_rows(&[x.transpose(), y.transpose(), z.transpose()]);
    Isometry3::from_parts(
        Translation3::new(0.0, 0.0, z_offset),
        UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(m)),
    )
}

/// One frame's normalization, applied to points and 9-dof boxes either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalization {
    /// The normalized frame from the sensor frame.
    pub normalized_from_sensor: Isometry3<f64>,
}

impl Normalization {
    /// A point in the normalized frame.
    pub fn point_to_normalized(&self, p: &Point3<f64>) -> Point3<f64> {
        self.normalized_from_sensor * p
    }

    /// A normalized-frame point back in the sensor frame.
    pub fn point_to_sensor(&self, p: &Point3<f64>) -> Point3<f64> {
        self.normalized_from_sensor.inverse_transform_point(p)
    }

    /// A sensor-frame box in the normalized frame (all 9 dof).
    pub fn box_to_normalized(&self, b: &Box3) -> Box3 {
        b.transformed(&self.normalized_from_sensor)
    }

    /// A normalized-frame box back in the sensor frame (all 9 dof).
    pub fn box_to_sensor(&self, b: &Box3) -> Box3 {
        b.transformed(&self.normalized_from_sensor.inverse())
    }

    /// A sensor-frame cloud in the normalized frame, in place.
    pub fn cloud_to_normalized(&self, cloud: &mut PointCloud) {
        cloud.transform(&self.normalized_from_sensor);
    }

    /// A normalized-frame cloud back in the sensor frame, in place.
    pub fn cloud_to_sensor(&self, cloud: &mut PointCloud) {
        cloud.transform(&self.normalized_from_sensor.inverse());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::pose::{euler_from_rotation, isometry_from_euler, rotation_from_euler};
    use crate::geometry::wrap_angle;
    use crate::normalize::pose::{up_from_pose, virtual_pose_3eed};

    #[test]
    fn up_becomes_z_and_the_heading_is_kept() {
        // A sensor pitched 40° down and rolled 5° in a level world, heading 1.2 rad.
        let world_from_sensor = rotation_from_euler(1.2, 40f64.to_radians(), 5f64.to_radians());
        let up = Unit::new_normalize(world_from_sensor.inverse() * Vector3::z());
        let n = normalized_from_sensor(&up, 0.0);
        assert!((n.rotation * up.into_inner() - Vector3::z()).norm() < 1e-12);
        // normalized = R_z(−heading) · world: the world rotated about z only.
        let world_from_normalized = world_from_sensor * n.rotation.inverse().to_rotation_matrix();
        let (yaw, pitch, roll) = euler_from_rotation(&world_from_normalized);
        assert!((yaw - 1.2).abs() < 1e-12 && pitch.abs() < 1e-12 && roll.abs() < 1e-12);
    }

    #[test]
    fn the_3eed_virtual_pose_is_this_frame_for_the_first_frames_up() {
        let p = isometry_from_euler(Vector3::new(1.0, 2.0, 7.5), -2.0, 0.2, -0.15);
        let ours = normalized_from_sensor(&up_from_pose(&p), p.translation.vector.z);
        let theirs = virtual_pose_3eed(&p, true, false);
        assert!((ours.to_homogeneous() - theirs.to_homogeneous()).abs().max() < 1e-12);
    }

    #[test]
    fn points_and_boxes_round_trip() {
        let up = Unit::new_normalize(Vector3::new(0.3, -0.5, 0.8));
        let t = Normalization {
            normalized_from_sensor: normalized_from_sensor(&up, -1.3),
        };
        let p = Point3::new(12.5, -7.25, 0.5);
        assert!((t.point_to_sensor(&t.point_to_normalized(&p)) - p).norm() < 1e-9);
        let b = Box3::from_array([20.0, -3.0, -1.0, 4.5, 1.9, 1.6, 2.9, 0.05, -0.08]);
        let back = t.box_to_sensor(&t.box_to_normalized(&b));
        for (k, (u, v)) in b.to_array().iter().zip(back.to_array()).enumerate() {
            let d = if k >= 6 { wrap_angle(u - v).abs() } else { (u - v).abs() };
            assert!(d < 1e-9, "dof {k}: {u} vs {v}");
        }
        let mut cloud =
            PointCloud::from_columns(vec![p.x as f32], vec![p.y as f32], vec![p.z as f32], vec![0.0]).unwrap();
        t.cloud_to_normalized(&mut cloud);
        let q = t.point_to_normalized(&p);
        assert!((f64::from(cloud.x()[0]) - q.x).abs() < 1e-5 && (f64::from(cloud.z()[0]) - q.z).abs() < 1e-5);
        t.cloud_to_sensor(&mut cloud);
        assert!((f64::from(cloud.y()[0]) - p.y).abs() < 1e-5);
    }

    #[test]
    fn a_sensor_looking_straight_down_keeps_a_defined_heading() {
        let up = Unit::new_normalize(Vector3::new(-1.0, 0.0, 0.0));
        let n = normalized_from_sensor(&up, 0.0);
        assert!((n.rotation * up.into_inner() - Vector3::z()).norm() < 1e-12);
        assert!(n.to_homogeneous().iter().all(|v| v.is_finite()));
    }
}
