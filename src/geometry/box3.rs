//! The 9-value oriented 3D box shared by every stage (DESIGN.md "Box" convention).

use nalgebra::{Isometry3, Point3, Rotation3, Translation3, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};

use super::pose::rotation_from_euler;

/// An oriented 3D box `[x, y, z, l, w, h, yaw, pitch, roll]` with its geometric centre at
/// `(x, y, z)`, `l` along the box's local x (heading), `w` along y, `h` along z and rotation
/// `R = Rz(yaw)·Ry(pitch)·Rx(roll)`; metres and radians. 7-dof boxes have pitch = roll = 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Box3 {
    /// Centre x (m).
    pub x: f64,
    /// Centre y (m).
    pub y: f64,
    /// Centre z (m), the geometric centre, not the bottom.
    pub z: f64,
    /// Length along the box's local x axis, its heading (m).
    pub l: f64,
    /// Width along the box's local y axis (m).
    pub w: f64,
    /// Height along the box's local z axis (m).
    pub h: f64,
    /// Rotation about z, counter-clockwise from +x (rad).
    pub yaw: f64,
    /// Rotation about the once-rotated y axis (rad).
    pub pitch: f64,
    /// Rotation about the twice-rotated x axis (rad).
    pub roll: f64,
}

impl Box3 {
    /// A 7-dof box (pitch = roll = 0).
    pub fn new(x: f64, y: f64, z: f64, l: f64, w: f64, h: f64, yaw: f64) -> Self {
        Self {
            x,
            y,
            z,
            l,
            w,
            h,
            yaw,
            pitch: 0.0,
            roll: 0.0,
        }
    }

    /// A box from the 9 values in DESIGN.md order `[x, y, z, l, w, h, yaw, pitch, roll]`.
    pub fn from_array(v: [f64; 9]) -> Self {
        let [x, y, z, l, w, h, yaw, pitch, roll] = v;
        Self {
            x,
            y,
            z,
            l,
            w,
            h,
            yaw,
            pitch,
            roll,
        }
    }

    /// The 9 values in DESIGN.md order `[x, y, z, l, w, h, yaw, pitch, roll]`.
    pub fn to_array(&self) -> [f64; 9] {
        [
            self.x, self.y, self.z, self.l, self.w, self.h, self.yaw, self.pitch, self.roll,
        ]
    }

    /// The box centre.
    pub fn center(&self) -> Point3<f64> {
        Point3::new(self.x, self.y, self.z)
    }

    /// The full extents `(l, w, h)`.
    pub fn size(&self) -> Vector3<f64> {
        Vector3::new(self.l, self.w, self.h)
    }

    /// Half extents `(l/2, w/2, h/2)`.
    pub fn half_extents(&self) -> Vector3<f64> {
        self.size() * 0.5
    }

    /// Volume (m³).
    pub fn volume(&self) -> f64 {
        self.l * self.w * self.h
    }

    /// Whether pitch and roll are both zero within `eps`, so yaw-only fast paths apply.
    pub fn is_yaw_only(&self, eps: f64) -> bool {
        self.pitch.abs() <= eps && self.roll.abs() <= eps
    }

    /// The box's rotation `Rz(yaw)·Ry(pitch)·Rx(roll)`.
    pub fn rotation(&self) -> Rotation3<f64> {
        rotation_from_euler(self.yaw, self.pitch, self.roll)
    }

    /// The rigid transform from the box's local frame (origin at the centre) to its parent frame.
    pub fn parent_from_box(&self) -> Isometry3<f64> {
        Isometry3::from_parts(
            Translation3::new(self.x, self.y, self.z),
            UnitQuaternion::from_rotation_matrix(&self.rotation()),
        )
    }

    /// All 9 values are finite and the extents are non-negative.
    pub fn is_valid(&self) -> bool {
        self.to_array().iter().all(|v| v.is_finite()) && self.l >= 0.0 && self.w >= 0.0 && self.h >= 0.0
    }

    /// The same box seen from another frame: `target_from_source` maps this box's frame into
    /// the target frame; the result's Euler angles follow the DESIGN.md convention.
    pub fn transformed(&self, target_from_source: &Isometry3<f64>) -> Box3 {
        let pose = target_from_source * self.parent_from_box();
        let c = pose.translation.vector;
        let (yaw, pitch, roll) = super::pose::euler_from_rotation(&pose.rotation.to_rotation_matrix());
        Box3 {
            x: c.x,
            y: c.y,
            z: c.z,
            l: self.l,
            w: self.w,
            h: self.h,
            yaw,
            pitch,
            roll,
        }
    }
}

/// Wraps an angle into `[-π, π)`.
pub fn wrap_angle(a: f64) -> f64 {
    use std::f64::consts::{PI, TAU};
    let r = (a + PI).rem_euclid(TAU) - PI;
    // rem_euclid can return TAU itself for tiny negative inputs through rounding.
    if r >= PI { r - TAU } else { r }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use std::f64::consts::PI;

    #[test]
    fn wrap_angle_lands_in_half_open_range() {
        for a in [-10.0, -PI, -PI + 1e-12, 0.0, PI, 3.0 * PI, 7.5] {
            let w = wrap_angle(a);
            assert!((-PI..PI).contains(&w), "{a} -> {w}");
            assert_abs_diff_eq!(
                (w - a)
                    .rem_euclid(2.0 * PI)
                    .min(2.0 * PI - (w - a).rem_euclid(2.0 * PI)),
                0.0,
                epsilon = 1e-9
            );
        }
        assert_abs_diff_eq!(wrap_angle(PI), -PI);
    }

    #[test]
    fn array_round_trip() {
        let v = [1.0, 2.0, 3.0, 4.0, 2.0, 1.5, 0.3, -0.1, 0.05];
        assert_eq!(Box3::from_array(v).to_array(), v);
    }

    #[test]
    fn transform_then_inverse_returns_box() {
        let b = Box3::from_array([1.0, -2.0, 0.5, 4.0, 2.0, 1.5, 2.9, 0.2, -0.3]);
        let t = Isometry3::new(Vector3::new(3.0, 1.0, -2.0), Vector3::new(0.1, -0.2, 1.3));
        let back = b.transformed(&t).transformed(&t.inverse());
        for (a, e) in back.to_array().iter().zip(b.to_array()) {
            assert_abs_diff_eq!(*a, e, epsilon = 1e-9);
        }
    }
}
