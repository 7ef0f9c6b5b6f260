//! Fusion configuration: the method, one table per class, and per-platform overrides. Defaults
//! are MS3D's (`docs/MS3D_PARAMETERS.md` and `box_fusion_utils.py` in `darrenjkt/MS3D`, see the
//! reference's §2.2) except where `docs/fusion.md` says why not.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::FuseError;
use super::kde::Bandwidth;
use crate::frame::{ObjectClass, Platform};

/// How one frame's detections become fused boxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionMethod {
    /// MS3D-style KDE box fusion: radius clusters, minimum votes, KDE per cluster, then NMS.
    Kbf,
    /// Weighted Boxes Fusion adapted to rotated 3D boxes (greedy 3D-IoU clusters, weighted means).
    Wbf,
    /// One detector's boxes only (the class's `single_detector`, or the most heavily weighted).
    SingleDetector,
    /// Every detector's boxes pooled, then BEV NMS.
    UnionNms,
}

/// How KBF places a fused box's centre.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CentreEstimate {
    /// The centre of the member at the density mode (MS3D: "aggregating can lead to odd centering").
    Member,
    /// The density peak itself: mean-shift from that member (a weighted-mean centre for pairs).
    Peak,
}

/// How KBF places a fused box's heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum YawEstimate {
    /// The heading of the member at the yaw density's mode (MS3D).
    Member,
    /// The density peak of the box axis: every member's yaw, turned by π when it points more
    /// than π/2 away from the mode member's heading (the same footprint), mean-shifted from that
    /// heading under `yaw_bandwidth` (the weighted mean for pairs); the direction stays the
    /// mode member's.
    Peak,
}

/// Fusion parameters of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassFusionConfig {
    /// Whether boxes of this class are fused at all (dropped otherwise); default true except
    /// for `unknown` (MS3D fuses only vehicle, pedestrian and cyclist).
    pub enabled: bool,
    /// Boxes scoring at or below this are dropped before fusion (unitless); default MS3D's
    /// `NEG_TH`: vehicle 0.2, pedestrian 0.2, cyclist 0.3 (above its global 0.1), unknown 0.2.
    pub score_threshold: f64,
    /// Clustering radius around each box centre, 3D distance, inclusive (m); default MS3D's
    /// `RADIUS`: vehicle 1.5, pedestrian 0.3, cyclist 0.2, unknown 1.0.
    pub radius_m: f64,
    /// Fewest boxes a cluster needs to produce a fused box (KBF only); default 3 for every
    /// class (MS3D's custom-data template; its benchmark default 4 assumes a larger ensemble
    /// than three detectors could ever fill).
    pub min_votes: u32,
    /// BEV IoU above which a lower-scored fused box is suppressed (KBF) (unitless); default
    /// MS3D's `NMS`: vehicle 0.1, pedestrian 0.3, cyclist 0.1, unknown 0.1.
    pub nms_iou: f64,
    /// Weight of each detector, by detector name (unitless, ≥ 0; 0 drops its boxes); a detector
    /// not listed weighs 1. A box's KDE weight is its score × its detector's weight. Default empty.
    pub detector_weights: BTreeMap<String, f64>,
    /// Bandwidth of the centre KDE that picks the centre member; default factor 1.0 (MS3D `bw_c`).
    pub centre_bandwidth: Bandwidth,
    /// Whether the centre is the mode member's or the density peak; default `member` (MS3D).
    pub centre_estimate: CentreEstimate,
    /// Bandwidth of the l, w, h KDEs whose peaks give the sizes; default factor 2.0 (`bw_dim`).
    pub size_bandwidth: Bandwidth,
    /// Bandwidth of the yaw KDE that picks the heading member (and, with `yaw_estimate = peak`,
    /// of the axis density); default factor 0.1 (`bw_ry`).
    pub yaw_bandwidth: Bandwidth,
    /// Whether the heading is the mode member's or the axis density's peak; default `member` (MS3D).
    pub yaw_estimate: YawEstimate,
    /// Bandwidth of the score KDE whose peak gives the score; default factor 2.0 (`bw_score`).
    pub score_bandwidth: Bandwidth,
    /// Whether the size KDEs use the box weights (MS3D's do not); default false.
    pub weighted_sizes: bool,
    /// Centre spread below which an axis counts as degenerate for the centre KDE (m²); default
    /// 1e-6 (1 mm standard deviation). See `docs/fusion.md` "Singular covariance".
    pub centre_min_variance_m2: f64,
    /// Whether a fused score is multiplied by the weight share of the detectors that voted (as
    /// WBF does), so boxes fewer detectors agree on rank lower; default false (MS3D does not).
    pub score_by_detector_share: bool,
    /// Whether that share (and WBF's rescaling) counts only the detectors that could have seen
    /// the box's place, when the caller says where each sees (`fuse::Roster`); default true.
    pub share_where_seen: bool,
    /// KBF: with s > 0, a fused score is multiplied by the members' centre agreement
    /// `Σ wᵢ·exp(−dᵢ²/2s²) / Σ wᵢ` (dᵢ the BEV distance of member i's centre from the fused
    /// centre, wᵢ its KDE weight; the fused centre's relative kernel density at scale s), so boxes
    /// whose detectors disagree on the place rank lower (m); default 0 (off; not in MS3D).
    pub agreement_sigma_m: f64,
    /// WBF: 3D IoU with a cluster's running fused box above which a box joins it (unitless);
    /// default 0.55 (ZFTurbo's `iou_thr`).
    pub wbf_iou: f64,
    /// Union + NMS: BEV IoU above which a lower-scored box is suppressed (unitless); default the
    /// same as `nms_iou`.
    pub union_nms_iou: f64,
    /// Single-detector method: the detector to keep; default none (the most heavily weighted
    /// detector of the frame, ties by name).
    pub single_detector: Option<String>,
}

impl ClassFusionConfig {
    /// The defaults of one class (the single place they live).
    pub fn default_for(class: ObjectClass) -> Self {
        let (enabled, score_threshold, radius_m, nms_iou) = match class {
            ObjectClass::Vehicle => (true, 0.2, 1.5, 0.1),
            ObjectClass::Pedestrian => (true, 0.2, 0.3, 0.3),
            ObjectClass::Cyclist => (true, 0.3, 0.2, 0.1),
            ObjectClass::Unknown => (false, 0.2, 1.0, 0.1),
        };
        Self {
            enabled,
            score_threshold,
            radius_m,
            min_votes: 3,
            nms_iou,
            detector_weights: BTreeMap::new(),
            centre_bandwidth: Bandwidth::Factor(1.0),
            centre_estimate: CentreEstimate::Member,
            size_bandwidth: Bandwidth::Factor(2.0),
            yaw_bandwidth: Bandwidth::Factor(0.1),
            yaw_estimate: YawEstimate::Member,
            score_bandwidth: Bandwidth::Factor(2.0),
            weighted_sizes: false,
            centre_min_variance_m2: 1e-6,
            score_by_detector_share: false,
            share_where_seen: true,
            agreement_sigma_m: 0.0,
            wbf_iou: 0.55,
            union_nms_iou: nms_iou,
            single_detector: None,
        }
    }

    /// The weight of `detector`'s boxes (1 when not listed).
    pub fn detector_weight(&self, detector: &str) -> f64 {
        self.detector_weights.get(detector).copied().unwrap_or(1.0)
    }

    fn validate(&self, class: ObjectClass) -> Result<(), FuseError> {
        let bad = |field: &'static str, reason: String| FuseError::Config {
            class,
            field,
            reason,
            platform: None,
        };
        let unit = |field: &'static str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(bad(field, format!("{v} is outside [0, 1]")))
            }
        };
        unit("score_threshold", self.score_threshold)?;
        unit("nms_iou", self.nms_iou)?;
        unit("wbf_iou", self.wbf_iou)?;
        unit("union_nms_iou", self.union_nms_iou)?;
        if !(self.radius_m.is_finite() && self.radius_m > 0.0) {
            return Err(bad("radius_m", format!("{} is not a positive distance", self.radius_m)));
        }
        if !(self.agreement_sigma_m.is_finite() && self.agreement_sigma_m >= 0.0) {
            return Err(bad(
                "agreement_sigma_m",
                format!("{} is not a non-negative distance", self.agreement_sigma_m),
            ));
        }
        if self.min_votes == 0 {
            return Err(bad("min_votes", "must be at least 1".into()));
        }
        if !(self.centre_min_variance_m2.is_finite() && self.centre_min_variance_m2 >= 0.0) {
            return Err(bad(
                "centre_min_variance_m2",
                format!("{} is not a non-negative number", self.centre_min_variance_m2),
            ));
        }
        for (field, b) in [
            ("centre_bandwidth", self.centre_bandwidth),
            ("size_bandwidth", self.size_bandwidth),
            ("yaw_bandwidth", self.yaw_bandwidth),
            ("score_bandwidth", self.score_bandwidth),
        ] {
            if !b.is_valid() {
                return Err(bad(field, format!("{b:?} is not finite and positive")));
            }
        }
        for (name, w) in &self.detector_weights {
            if !(w.is_finite() && *w >= 0.0) {
                return Err(bad(
                    "detector_weights",
                    format!("detector `{name}`: weight {w} is not ≥ 0"),
                ));
            }
        }
        Ok(())
    }
}

impl Default for ClassFusionConfig {
    fn default() -> Self {
        Self::default_for(ObjectClass::Vehicle)
    }
}

/// Every fusion option: the method, one table per class and per-platform overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FusionConfig {
    /// The fusion method; default `kbf`.
    pub method: FusionMethod,
    /// Vehicle parameters; default [`ClassFusionConfig::default_for`] vehicle.
    #[serde(deserialize_with = "deserialize_vehicle")]
    pub vehicle: ClassFusionConfig,
    /// Pedestrian parameters; default [`ClassFusionConfig::default_for`] pedestrian.
    #[serde(deserialize_with = "deserialize_pedestrian")]
    pub pedestrian: ClassFusionConfig,
    /// Cyclist parameters; default [`ClassFusionConfig::default_for`] cyclist.
    #[serde(deserialize_with = "deserialize_cyclist")]
    pub cyclist: ClassFusionConfig,
    /// Unknown-class parameters; default [`ClassFusionConfig::default_for`] unknown (disabled).
    #[serde(deserialize_with = "deserialize_unknown")]
    pub unknown: ClassFusionConfig,
    /// Changes applied on top of the above for one platform; default none.
    pub platforms: PlatformOverrides,
}

/// Reads a class table as changes to that class's own defaults, so `[pedestrian] radius_m = 0.4`
/// keeps every other pedestrian default (`config_overlay`).
fn deserialize_class<'de, D: Deserializer<'de>>(d: D, class: ObjectClass) -> Result<ClassFusionConfig, D::Error> {
    crate::config_overlay::deserialize_over(ClassFusionConfig::default_for(class), d)
}
fn deserialize_vehicle<'de, D: Deserializer<'de>>(d: D) -> Result<ClassFusionConfig, D::Error> {
    deserialize_class(d, ObjectClass::Vehicle)
}
fn deserialize_pedestrian<'de, D: Deserializer<'de>>(d: D) -> Result<ClassFusionConfig, D::Error> {
    deserialize_class(d, ObjectClass::Pedestrian)
}
fn deserialize_cyclist<'de, D: Deserializer<'de>>(d: D) -> Result<ClassFusionConfig, D::Error> {
    deserialize_class(d, ObjectClass::Cyclist)
}
fn deserialize_unknown<'de, D: Deserializer<'de>>(d: D) -> Result<ClassFusionConfig, D::Error> {
    deserialize_class(d, ObjectClass::Unknown)
}

fn vehicle_default() -> ClassFusionConfig {
    ClassFusionConfig::default_for(ObjectClass::Vehicle)
}
fn pedestrian_default() -> ClassFusionConfig {
    ClassFusionConfig::default_for(ObjectClass::Pedestrian)
}
fn cyclist_default() -> ClassFusionConfig {
    ClassFusionConfig::default_for(ObjectClass::Cyclist)
}
fn unknown_default() -> ClassFusionConfig {
    ClassFusionConfig::default_for(ObjectClass::Unknown)
}

impl Default for FusionConfig {
    fn default() -> Self {
        Self {
            method: FusionMethod::Kbf,
            vehicle: vehicle_default(),
            pedestrian: pedestrian_default(),
            cyclist: cyclist_default(),
            unknown: unknown_default(),
            platforms: PlatformOverrides::default(),
        }
    }
}

impl FusionConfig {
    /// The parameters of one class.
    pub fn class(&self, class: ObjectClass) -> &ClassFusionConfig {
        match class {
            ObjectClass::Vehicle => &self.vehicle,
            ObjectClass::Pedestrian => &self.pedestrian,
            ObjectClass::Cyclist => &self.cyclist,
            ObjectClass::Unknown => &self.unknown,
        }
    }

    /// The parameters of one class, mutably.
    pub fn class_mut(&mut self, class: ObjectClass) -> &mut ClassFusionConfig {
        match class {
            ObjectClass::Vehicle => &mut self.vehicle,
            ObjectClass::Pedestrian => &mut self.pedestrian,
            ObjectClass::Cyclist => &mut self.cyclist,
            ObjectClass::Unknown => &mut self.unknown,
        }
    }

    /// The configuration in force on `platform`: this one with that platform's table laid over it
    /// key by key (`config_overlay`) and no overrides left. An override naming an unknown key or
    /// holding a value of the wrong type is [`FuseError::Override`].
    pub fn for_platform(&self, platform: Platform) -> Result<FusionConfig, FuseError> {
        let mut base = self.clone();
        base.platforms = PlatformOverrides::default();
        let table = self.platforms.of(platform);
        if table.is_empty() {
            return Ok(base);
        }
        crate::config_overlay::overlaid(&base, toml::Value::Table(table.clone()))
            .map_err(|reason| FuseError::Override { platform, reason })
    }

    /// Checks every class table, and every platform's resolved tables.
    pub fn validate(&self) -> Result<(), FuseError> {
        for platform in Platform::ALL {
            let resolved = self.for_platform(platform)?;
            for class in ObjectClass::ALL {
                resolved
                    .class(class)
                    .validate(class)
                    .map_err(|e| e.on_platform(platform))?;
            }
        }
        Ok(())
    }
}

/// Overrides per platform: each a partial `FusionConfig` table (`method`, class tables with any
/// of their fields) laid over the resolved config for that platform's sequences.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlatformOverrides {
    /// Overrides for vehicle (Waymo) sweeps; default none.
    pub vehicle: toml::Table,
    /// Overrides for drone sweeps; default none.
    pub drone: toml::Table,
    /// Overrides for quadruped sweeps; default none.
    pub quadruped: toml::Table,
    /// Overrides for other platforms; default none.
    pub other: toml::Table,
}

impl PlatformOverrides {
    /// The overrides of one platform.
    pub fn of(&self, platform: Platform) -> &toml::Table {
        match platform {
            Platform::Vehicle => &self.vehicle,
            Platform::Drone => &self.drone,
            Platform::Quadruped => &self.quadruped,
            Platform::Other => &self.other,
        }
    }

    /// The overrides of one platform, mutably.
    pub fn of_mut(&mut self, platform: Platform) -> &mut toml::Table {
        match platform {
            Platform::Vehicle => &mut self.vehicle,
            Platform::Drone => &mut self.drone,
            Platform::Quadruped => &mut self.quadruped,
            Platform::Other => &mut self.other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ms3d_values() {
        let c = FusionConfig::default();
        assert_eq!(c.method, FusionMethod::Kbf);
        assert_eq!(
            [c.vehicle.radius_m, c.pedestrian.radius_m, c.cyclist.radius_m],
            [1.5, 0.3, 0.2]
        );
        assert_eq!(
            [c.vehicle.nms_iou, c.pedestrian.nms_iou, c.cyclist.nms_iou],
            [0.1, 0.3, 0.1]
        );
        assert_eq!(
            [
                c.vehicle.score_threshold,
                c.pedestrian.score_threshold,
                c.cyclist.score_threshold
            ],
            [0.2, 0.2, 0.3]
        );
        assert_eq!(c.vehicle.size_bandwidth, Bandwidth::Factor(2.0));
        assert_eq!(c.vehicle.yaw_bandwidth, Bandwidth::Factor(0.1));
        assert!(!c.unknown.enabled);
        c.validate().unwrap();
    }

    #[test]
    fn toml_with_platform_overrides() {
        let text = r#"
method = "kbf"
[pedestrian]
radius_m = 0.4
detector_weights = { centerpoint = 2.0 }
[platforms.drone]
method = "wbf"
[platforms.drone.pedestrian]
radius_m = 0.6
centre_bandwidth = { sigma = 0.2 }
yaw_estimate = "peak"
"#;
        let c: FusionConfig = toml::from_str(text).unwrap();
        // Unset fields of a class table keep that class's defaults, not the vehicle's.
        assert_eq!(c.pedestrian.nms_iou, 0.3);
        assert_eq!(c.cyclist.radius_m, 0.2);
        assert_eq!(c.pedestrian.detector_weight("centerpoint"), 2.0);
        assert_eq!(c.pedestrian.detector_weight("other"), 1.0);
        let drone = c.for_platform(Platform::Drone).unwrap();
        assert_eq!(drone.method, FusionMethod::Wbf);
        assert_eq!(drone.pedestrian.radius_m, 0.6);
        assert_eq!(drone.pedestrian.centre_bandwidth, Bandwidth::Absolute(0.2));
        assert_eq!(drone.pedestrian.yaw_estimate, YawEstimate::Peak);
        assert_eq!(drone.vehicle.yaw_estimate, YawEstimate::Member);
        assert_eq!(drone.pedestrian.detector_weight("centerpoint"), 2.0);
        let car = c.for_platform(Platform::Vehicle).unwrap();
        assert_eq!(car.method, FusionMethod::Kbf);
        assert_eq!(car.pedestrian.radius_m, 0.4);
        // Round trip.
        let back: FusionConfig = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(toml::from_str::<FusionConfig>("[vehicle]\nradius = 1.0\n").is_err());
        assert!(toml::from_str::<FusionConfig>("[vehicle]\nyaw_estimate = \"mean\"\n").is_err());
    }

    #[test]
    fn validation_names_class_field_and_platform() {
        let mut c = FusionConfig::default();
        c.platforms.quadruped = toml::from_str("[cyclist]\nradius_m = -1.0\n").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("quadruped") && err.contains("cyclist") && err.contains("radius_m"),
            "{err}"
        );
        let mut c = FusionConfig::default();
        c.platforms.drone = toml::from_str("[cyclist]\nradius = 1.0\n").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("drone") && err.contains("radius"), "{err}");
        let mut c = FusionConfig::default();
        c.vehicle.detector_weights.insert("a".into(), f64::NAN);
        assert!(c.validate().is_err());
    }
}
