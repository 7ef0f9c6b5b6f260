//! The z offset of the normalized frame: none, a fixed number, 3EED's pose height, or the fitted
//! ground placed at a canonical depth below the sensor.

use serde::{Deserialize, Serialize};

/// How a profile sets the normalized frame's z offset (points move by it along z).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum AltitudeRule {
    /// No offset: the origin stays on the sensor.
    None,
    /// A fixed offset (m); 3EED's quadruped annotation frame is −1.3.
    Fixed {
        /// The offset (m).
        offset_m: f64,
    },
    /// The pose height `P[2,3]` plus `offset_m` (3EED's drone rule: 0 for points, −1.7 for labels).
    Pose {
        /// Added to the pose height (m).
        offset_m: f64,
    },
    /// The fitted ground put `sensor_height_m` below the origin, as if the sensor were a car's
    /// roof LiDAR at that height.
    Ground {
        /// Height the sensor appears at above the ground (m).
        sensor_height_m: f64,
    },
}

/// The offset for one frame: `pose_z` is the pose's z (m), `ground_height_m` the sensor's height
/// above the fitted ground (m), where known. `None` when the rule needs what is missing.
pub fn altitude_offset(rule: &AltitudeRule, pose_z: Option<f64>, ground_height_m: Option<f64>) -> Option<f64> {
    match *rule {
        AltitudeRule::None => Some(0.0),
        AltitudeRule::Fixed { offset_m } => Some(offset_m),
        AltitudeRule::Pose { offset_m } => pose_z.map(|z| z + offset_m),
        // Ground at −h + offset must land at −sensor_height.
        AltitudeRule::Ground { sensor_height_m } => ground_height_m.map(|h| h - sensor_height_m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_gives_its_hand_computed_offset() {
        assert_eq!(altitude_offset(&AltitudeRule::None, None, None), Some(0.0));
        assert_eq!(
            altitude_offset(&AltitudeRule::Fixed { offset_m: -1.3 }, None, None),
            Some(-1.3)
        );
        assert_eq!(
            altitude_offset(&AltitudeRule::Pose { offset_m: -1.7 }, Some(12.0), None),
            Some(10.3)
        );
        assert_eq!(
            altitude_offset(&AltitudeRule::Pose { offset_m: 0.0 }, None, Some(3.0)),
            None
        );
        // A drone 25 m up made to look like a 1.8 m car LiDAR: ground at −25 + 23.2 = −1.8.
        let g = AltitudeRule::Ground { sensor_height_m: 1.8 };
        assert!((altitude_offset(&g, None, Some(25.0)).unwrap() - 23.2).abs() < 1e-12);
        assert_eq!(altitude_offset(&g, Some(1.0), None), None);
    }
}
