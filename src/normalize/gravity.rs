//! What every gravity estimator returns: the up direction in the sensor frame, its uncertainty
//! and the method that produced it.

use nalgebra::{Unit, Vector3};
use serde::{Deserialize, Serialize};

/// How an up direction was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GravityMethod {
    /// The pose in a gravity-aligned world frame (Waymo's global frame).
    Pose,
    /// 3EED / Pi3DET's virtual pose: roll and pitch relative to the first pose of the log.
    #[serde(rename = "pose_3eed")]
    Pose3eed,
    /// The accelerometer, gyro-aligned to the sweep time, the platform's acceleration removed.
    Imu,
    /// A robust plane fit on the lowest returns.
    Ground,
    /// The others combined by their uncertainties and smoothed over the sequence.
    Fused,
    /// Nothing usable: the sensor's nominal mounting from the profile.
    Mounting,
}

impl GravityMethod {
    /// The name used in profiles, tables and notes.
    pub fn as_str(self) -> &'static str {
        match self {
            GravityMethod::Pose => "pose",
            GravityMethod::Pose3eed => "pose_3eed",
            GravityMethod::Imu => "imu",
            GravityMethod::Ground => "ground",
            GravityMethod::Fused => "fused",
            GravityMethod::Mounting => "mounting",
        }
    }
}

impl std::fmt::Display for GravityMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An up direction (away from gravity) in the sensor frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpEstimate {
    /// Unit vector pointing up, in the sensor frame.
    pub up: Unit<Vector3<f64>>,
    /// One-sigma angular uncertainty (rad), finite and positive.
    pub sigma_rad: f64,
    /// The estimator that produced it.
    pub method: GravityMethod,
}

impl UpEstimate {
    /// An estimate, its sigma floored at 1e-6 rad so weights stay finite.
    pub fn new(up: Unit<Vector3<f64>>, sigma_rad: f64, method: GravityMethod) -> UpEstimate {
        let sigma_rad = if sigma_rad.is_finite() {
            sigma_rad.max(1e-6)
        } else {
            std::f64::consts::PI
        };
        UpEstimate { up, sigma_rad, method }
    }
}

/// The angle between two directions (rad), in `[0, π]`, accurate for tiny angles.
pub fn angle_between(a: &Vector3<f64>, b: &Vector3<f64>) -> f64 {
    a.cross(b).norm().atan2(a.dot(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angle_between_is_exact_for_hand_cases() {
        let x = Vector3::x();
        assert_eq!(angle_between(&x, &x), 0.0);
        assert!((angle_between(&x, &Vector3::y()) - std::f64::consts::FRAC_PI_2).abs() < 1e-15);
        assert!((angle_between(&x, &-x) - std::f64::consts::PI).abs() < 1e-15);
        // 1 µrad: acos(dot) would lose it in rounding.
        let tiny = Vector3::new(1.0, 1e-6, 0.0);
        assert!((angle_between(&x, &tiny) - 1e-6).abs() < 1e-15);
    }

    #[test]
    fn sigma_is_kept_positive_and_finite() {
        let up = Vector3::z_axis();
        assert_eq!(UpEstimate::new(up, 0.0, GravityMethod::Imu).sigma_rad, 1e-6);
        assert_eq!(
            UpEstimate::new(up, f64::NAN, GravityMethod::Imu).sigma_rad,
            std::f64::consts::PI
        );
    }
}
