//! `EvalConfig`: thresholds, classes, bins and options of every metric; `impl Default` is the one
//! place the defaults live.

use serde::{Deserialize, Serialize};

use super::EvalError;
use super::affinity::{GroundingIou, IouKind};
use crate::frame::ObjectClass;

/// How an affinity is compared with its threshold, for every metric (detection, tracking, grounding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThresholdRule {
    /// `IoU > δ` (and `distance < d`): 3EED's Acc@δ formula and KITTI/OpenPCDet's `overlap > min_overlap`.
    Strict,
    /// `IoU ≥ δ` (and `distance ≤ d`): Anywhere3D, ViGiL3D, nuScenes' 2 m gate.
    Inclusive,
}

impl ThresholdRule {
    /// Whether `value` passes `threshold` under this rule.
    pub fn passes(self, value: f64, threshold: f64) -> bool {
        match self {
            ThresholdRule::Strict => value > threshold,
            ThresholdRule::Inclusive => value >= threshold,
        }
    }

    /// The comparison symbol, for tables and docs.
    pub fn symbol(self) -> &'static str {
        match self {
            ThresholdRule::Strict => ">",
            ThresholdRule::Inclusive => ">=",
        }
    }
}

/// Every evaluation option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Threshold comparison for all metrics; default `strict` (`>`), 3EED's rule.
    pub threshold_rule: ThresholdRule,
    /// Detection AP options.
    pub detection: DetectionConfig,
    /// Tracking CLEAR-MOT / AMOTA options.
    pub tracking: TrackingConfig,
    /// Grounding Acc@δ / mIoU options.
    pub grounding: GroundingConfig,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            threshold_rule: ThresholdRule::Strict,
            detection: DetectionConfig::default(),
            tracking: TrackingConfig::default(),
            grounding: GroundingConfig::default(),
        }
    }
}

/// IoU thresholds per class (unitless, in [0, 1]); a class with an empty list is not evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassThresholds {
    /// Vehicle thresholds; default `[0.7, 0.5]`.
    pub vehicle: Vec<f64>,
    /// Pedestrian thresholds; default `[0.5, 0.25]`.
    pub pedestrian: Vec<f64>,
    /// Cyclist thresholds; default `[0.5, 0.25]`.
    pub cyclist: Vec<f64>,
    /// Unknown-class thresholds; default `[]` (not evaluated).
    pub unknown: Vec<f64>,
}

impl Default for ClassThresholds {
    fn default() -> Self {
        Self {
            vehicle: vec![0.7, 0.5],
            pedestrian: vec![0.5, 0.25],
            cyclist: vec![0.5, 0.25],
            unknown: Vec::new(),
        }
    }
}

impl ClassThresholds {
    /// No class evaluated (every list empty).
    pub fn none() -> Self {
        Self {
            vehicle: Vec::new(),
            pedestrian: Vec::new(),
            cyclist: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// These thresholds with `class`'s list replaced by `thresholds`.
    pub fn with(mut self, class: ObjectClass, thresholds: Vec<f64>) -> Self {
        *match class {
            ObjectClass::Vehicle => &mut self.vehicle,
            ObjectClass::Pedestrian => &mut self.pedestrian,
            ObjectClass::Cyclist => &mut self.cyclist,
            ObjectClass::Unknown => &mut self.unknown,
        } = thresholds;
        self
    }

    /// The thresholds of one class.
    pub fn of(&self, class: ObjectClass) -> &[f64] {
        match class {
            ObjectClass::Vehicle => &self.vehicle,
            ObjectClass::Pedestrian => &self.pedestrian,
            ObjectClass::Cyclist => &self.cyclist,
            ObjectClass::Unknown => &self.unknown,
        }
    }
}

/// Detection AP options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectionConfig {
    /// Overlap measures to evaluate; default `["bev", "three_d"]`.
    pub iou_kinds: Vec<IouKind>,
    /// IoU thresholds per class; default vehicle 0.7/0.5, pedestrian and cyclist 0.5/0.25.
    pub thresholds: ClassThresholds,
    /// Score at which recall and precision are also reported (unitless); default 0.5.
    pub recall_score: f64,
    /// Ignore GT boxes known to hold zero LiDAR points (Waymo LEVEL rule); default false.
    pub ignore_zero_point_gt: bool,
    /// Lower edges of the BEV range bins (m), ascending, last bin open; default `[0, 30, 50]`.
    pub range_bins_m: Vec<f64>,
    /// Lower edges of the points-in-box bins (points), ascending, last bin open; default `[0, 1, 100, 900]`.
    pub point_bins: Vec<u64>,
}

impl Default for DetectionConfig {
    fn default() -> Self {
        Self {
            iou_kinds: vec![IouKind::Bev, IouKind::ThreeD],
            thresholds: ClassThresholds::default(),
            recall_score: 0.5,
            ignore_zero_point_gt: false,
            range_bins_m: vec![0.0, 30.0, 50.0],
            point_bins: vec![0, 1, 100, 900],
        }
    }
}

impl DetectionConfig {
    /// BEV AP only, at `thresholds`, without range or points-in-box bins; other fields default.
    pub fn bev_only(thresholds: ClassThresholds) -> Self {
        Self {
            iou_kinds: vec![IouKind::Bev],
            thresholds,
            range_bins_m: Vec::new(),
            point_bins: Vec::new(),
            ..Self::default()
        }
    }
}

/// Tracking CLEAR-MOT and AMOTA options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackingConfig {
    /// Classes to evaluate; default vehicle, pedestrian, cyclist.
    pub classes: Vec<ObjectClass>,
    /// How GT and predictions are associated; default `center_distance` (nuScenes).
    pub matching: IouKind,
    /// IoU threshold when `matching` is an IoU (unitless); default 0.25 (AB3DMOT on KITTI).
    pub iou_threshold: f64,
    /// Centre-distance gate when `matching` is `center_distance` (m, BEV); default 2.0 (nuScenes).
    pub max_center_distance_m: f64,
    /// Number of recall steps for AMOTA/sAMOTA (recalls k/n, k = 1..n); default 40.
    pub recall_steps: u32,
    /// Recalls below this are dropped from AMOTA (not from sAMOTA); default 0.1 (nuScenes).
    pub amota_min_recall: f64,
    /// Fraction of its life a GT track must be matched to count as mostly tracked; default 0.8.
    pub mostly_tracked_ratio: f64,
    /// Fraction of its life at or below which a GT track counts as mostly lost; default 0.2.
    pub mostly_lost_ratio: f64,
}

impl Default for TrackingConfig {
    fn default() -> Self {
        Self {
            classes: vec![ObjectClass::Vehicle, ObjectClass::Pedestrian, ObjectClass::Cyclist],
            matching: IouKind::CenterDistance,
            iou_threshold: 0.25,
            max_center_distance_m: 2.0,
            recall_steps: 40,
            amota_min_recall: 0.1,
            mostly_tracked_ratio: 0.8,
            mostly_lost_ratio: 0.2,
        }
    }
}

impl TrackingConfig {
    /// The affinity threshold for `matching`: the IoU threshold, or minus the distance gate.
    pub fn affinity_threshold(&self) -> f64 {
        match self.matching {
            IouKind::CenterDistance => -self.max_center_distance_m,
            IouKind::Bev | IouKind::ThreeD => self.iou_threshold,
        }
    }
}

/// Grounding Acc@δ / mIoU options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroundingConfig {
    /// The IoU between a GT box and a predicted box; default `rotated_vs_axis_aligned_3d` (3EED).
    pub iou: GroundingIou,
    /// Acc@δ thresholds (unitless); default `[0.25, 0.5]`.
    pub thresholds: Vec<f64>,
}

impl Default for GroundingConfig {
    fn default() -> Self {
        Self {
            iou: GroundingIou::RotatedVsAxisAligned3d,
            thresholds: vec![0.25, 0.5],
        }
    }
}

impl EvalConfig {
    /// Checks ranges and orderings the metrics rely on.
    pub fn validate(&self) -> Result<(), EvalError> {
        let bad = |field: &'static str, reason: String| Err(EvalError::Config { field, reason });
        let d = &self.detection;
        for class in ObjectClass::ALL {
            if let Some(t) = d.thresholds.of(class).iter().find(|t| !(0.0..=1.0).contains(*t)) {
                return bad(
                    "detection.thresholds",
                    format!("{class} threshold {t} is outside [0, 1]"),
                );
            }
        }
        if d.iou_kinds.contains(&IouKind::CenterDistance) {
            return bad(
                "detection.iou_kinds",
                "detection AP uses IoU thresholds; `center_distance` is for tracking".into(),
            );
        }
        if !d.range_bins_m.windows(2).all(|w| w[0] < w[1]) || d.range_bins_m.iter().any(|v| !v.is_finite()) {
            return bad(
                "detection.range_bins_m",
                "edges must be finite and strictly ascending".into(),
            );
        }
        if !d.point_bins.windows(2).all(|w| w[0] < w[1]) {
            return bad("detection.point_bins", "edges must be strictly ascending".into());
        }
        let t = &self.tracking;
        if t.recall_steps == 0 {
            return bad("tracking.recall_steps", "must be at least 1".into());
        }
        if t.max_center_distance_m.is_nan() || t.max_center_distance_m <= 0.0 {
            return bad("tracking.max_center_distance_m", "must be positive".into());
        }
        if !(0.0..=1.0).contains(&t.iou_threshold) {
            return bad(
                "tracking.iou_threshold",
                format!("{} is outside [0, 1]", t.iou_threshold),
            );
        }
        if let Some(v) = self.grounding.thresholds.iter().find(|v| !(0.0..=1.0).contains(*v)) {
            return bad("grounding.thresholds", format!("{v} is outside [0, 1]"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bev_only_evaluates_just_the_listed_classes_in_bev_without_bins() {
        let t = ClassThresholds::none()
            .with(ObjectClass::Vehicle, vec![0.7])
            .with(ObjectClass::Pedestrian, vec![0.5]);
        assert_eq!(t.of(ObjectClass::Vehicle), &[0.7]);
        assert_eq!(t.of(ObjectClass::Pedestrian), &[0.5]);
        assert!(t.of(ObjectClass::Cyclist).is_empty() && t.of(ObjectClass::Unknown).is_empty());
        let c = DetectionConfig::bev_only(t.clone());
        assert_eq!(c.iou_kinds, vec![IouKind::Bev]);
        assert_eq!(c.thresholds, t);
        assert!(c.range_bins_m.is_empty() && c.point_bins.is_empty());
        assert_eq!(c.recall_score, DetectionConfig::default().recall_score);
    }

    #[test]
    fn empty_toml_gives_defaults_and_unknown_fields_are_rejected() {
        let c: EvalConfig = toml::from_str("").unwrap();
        assert_eq!(c, EvalConfig::default());
        let c: EvalConfig = toml::from_str("[detection]\nrecall_score = 0.3\n").unwrap();
        assert_eq!(c.detection.recall_score, 0.3);
        assert_eq!(c.detection.thresholds.vehicle, vec![0.7, 0.5]);
        assert!(toml::from_str::<EvalConfig>("[detection]\nrecal_score = 0.3\n").is_err());
    }

    /// The TOML example in docs/eval.md spells out exactly the defaults.
    #[test]
    fn documented_example_is_the_default() {
        let doc = include_str!("../../docs/eval.md");
        let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
        let end = start + doc[start..].find("```").unwrap();
        let c: EvalConfig = toml::from_str(&doc[start..end]).unwrap();
        assert_eq!(c, EvalConfig::default());
    }

    #[test]
    fn validate_names_the_field() {
        let mut c = EvalConfig::default();
        c.detection.range_bins_m = vec![0.0, 50.0, 30.0];
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("detection.range_bins_m"), "{e}");
        let mut c = EvalConfig::default();
        c.grounding.thresholds = vec![1.5];
        assert!(c.validate().unwrap_err().to_string().contains("grounding.thresholds"));
    }
}
