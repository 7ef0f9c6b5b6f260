//! `TrackConfig` (one platform: per-class thresholds, mode) and `TrackingProfiles` (one
//! `TrackConfig` per platform). `impl Default` is the one place the defaults live; the
//! AB3DMOT-style baseline is a named preset built from them. A partial table in a file
//! overrides only the fields it names, on top of that class's and platform's defaults.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};

use super::TrackError;
use crate::frame::{ObjectClass, Platform};

/// How a predicted track and a detection are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssociationMetric {
    /// Bird's-eye-view generalized IoU (SimpleTrack, AB3DMOT); a pair passes when GIoU > `min_giou`.
    GiouBev,
    /// BEV centre distance (CenterPoint); a pair passes when distance < `max_center_distance_m`.
    CenterDistance,
}

/// How a track is judged static (both compare a displacement with `static_max_displacement_m`
/// and a per-axis BEV centre variance with `static_max_variance_m2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaticTest {
    /// MS3D: the first and last detections' centres, and the mean squared deviation from the
    /// mean centre.
    Ms3d,
    /// The same statistics made robust to a minority of off-centre boxes (few-point objects
    /// seen from one side): score-weighted median centres of the first and last
    /// min(10, ⌈n/3⌉) detections, and the median squared distance from the median centre
    /// divided by 2 ln 2 (the per-axis variance under Gaussian noise).
    Robust,
}

/// Which passes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackMode {
    /// Forward and backward passes merged, then smoothing, gap filling, extension, static
    /// refinement and pruning (the whole sequence is available).
    Offline,
    /// One causal forward pass, output as AB3DMOT does (confirmed tracks, `max_age` coasting).
    ForwardOnly,
}

/// Tracking and refinement thresholds of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassTrackConfig {
    /// Association measure; default `giou_bev`.
    pub association: AssociationMetric,
    /// Smallest BEV GIoU (exclusive) of an accepted pair for `giou_bev` (unitless, −1…1);
    /// default −0.5 (SimpleTrack's 1.5 "distance"), vehicles −0.2 (AB3DMOT's KITTI car),
    /// pedestrians −0.6.
    pub min_giou: f64,
    /// BEV centre-distance gate (m, exclusive), applied before the GIoU and as the threshold of
    /// `center_distance`; default vehicle 5, pedestrian 2, cyclist 3, unknown 3.
    pub max_center_distance_m: f64,
    /// Detections at or above this score take part in the first association stage and may start
    /// tracks (unitless); default 0.2: the pipeline's fused scores are scaled by the share of
    /// detectors that voted (`pipelines/base.toml`'s `[fusion]`), so a box one detector of three saw scores
    /// at most 1/3 (SimpleTrack's 0.5 is for one detector's raw scores).
    pub high_score: f64,
    /// Detections in `[low_score, high_score)` may only extend tracks left unmatched by the
    /// first stage (two-stage association); lower ones are ignored (unitless); default 0.1.
    pub low_score: f64,
    /// Largest Mahalanobis distance (unitless, in standard deviations of the predicted BEV
    /// centre plus the measurement noise) of a detection a track may take, on top of the gate
    /// above; 0 turns it off; default 3 (χ² with 2 degrees of freedom: p ≈ 0.011).
    pub max_mahalanobis_distance: f64,
    /// Matches before a track is output by the forward-only mode (AB3DMOT `min_hits`); default 2.
    pub min_hits: u32,
    /// Frames without a match after which a track ends (AB3DMOT `max_age`); default 10
    /// (the baseline preset uses 2).
    pub max_age_frames: u32,
    /// Standard deviation of a detection's centre, per axis (m); default vehicle 0.3, others 0.15.
    pub position_std_m: f64,
    /// Standard deviation of a detection's yaw (rad); default 0.15 (pedestrians 0.4).
    pub yaw_std_rad: f64,
    /// White-noise acceleration of the constant-velocity model, per axis (m/s²); default
    /// vehicle 3, pedestrian 1.5, cyclist 2.5, unknown 3.
    pub acceleration_std_mps2: f64,
    /// White-noise angular acceleration of the yaw model (rad/s²); default 1 (pedestrians 3).
    pub yaw_acceleration_std_radps2: f64,
    /// Prior standard deviation of a new track's velocity, per axis (m/s); default vehicle 10,
    /// pedestrian 2, cyclist 5, unknown 5.
    pub initial_velocity_std_mps: f64,
    /// One size for the whole track (rigid objects); otherwise sizes stay per frame; default
    /// true for vehicles, false for pedestrians, cyclists and unknown.
    pub rigid: bool,
    /// Observations at or above this score set a rigid track's size (median); default 0.5.
    pub size_min_score: f64,
    /// How a track is judged static; default `robust`.
    pub static_test: StaticTest,
    /// A track whose first-to-last observed BEV centres are closer than this is a static
    /// candidate (m); default 1.0 (MS3D).
    pub static_max_displacement_m: f64,
    /// …and whose mean BEV centre variance (x and y averaged) is below this (m²); default 0.1 (MS3D).
    pub static_max_variance_m2: f64,
    /// Tracks with fewer observations are short; default 3.
    pub min_observations: u32,
    /// A short track is kept only if its best score reaches this (unitless); default 0.8.
    pub short_track_min_score: f64,
    /// Any track whose mean observation score is below this is dropped (unitless); default 0.2.
    pub min_mean_score: f64,
    /// Gaps of at most this many frames inside a track are filled (where the points, if any,
    /// show the object; see `fill_min_points`); default 20.
    pub max_gap_frames: u32,
    /// A filled (interpolated) box needs at least this many points inside it (bottom raised by
    /// `evidence_ground_margin_m`) when the frame has points; with fewer the object is taken to
    /// be hidden there (no LiDAR return, so no label) and the frame is left empty, the track
    /// keeping its id. With points, static gaps longer than `max_gap_frames` are filled on this
    /// test too. 0 fills regardless of points (and never across long static gaps); default 1.
    pub fill_min_points: u32,
    /// The box of that test is grown by this much on each side and on top (m): a sparse
    /// object's few returns often lie just outside a fitted box; default 0.2.
    pub fill_box_growth_m: f64,
    /// Re-identification across gaps of any length: two tracks whose facing ends are still
    /// (every centre of the end window within this distance of its median) and whose robust end
    /// centres are closer than this are one object (m); default vehicle 1.0, others 0.5.
    pub reid_max_distance_m: f64,
    /// …and whose robust lengths and widths differ by at most this factor (unitless, ≥ 1);
    /// default 1.25.
    pub reid_max_size_ratio: f64,
    /// A track never detected in a frame where a static track is, with lengths and widths
    /// within `reid_max_size_ratio` of its size, whose detections overlap its fused box at a
    /// median BEV IoU above this, and which lies inside its detected span (or before or after
    /// it, with no more detections), is that object's other detections (a partial view pulls a
    /// sparse parked car's box off its centre) and joins it. Single detections of moving
    /// tracks that overlap a static track's fused box above this, in a frame where it has none,
    /// join it too (inside its span, or matching its size). Unitless, 0…1; 1 disables both;
    /// default 0.3.
    pub static_absorb_min_iou: f64,
    /// Frames a dynamic track may be extended past each end on points evidence; default 10 (CTRL).
    pub extension_max_frames: u32,
    /// Points (sensor frame) the predicted box must hold for an extension or a static
    /// propagation; default vehicle 10, others 4.
    pub evidence_min_points: u32,
    /// The evidence box's bottom is raised by this much so ground returns do not count (m); default 0.2.
    pub evidence_ground_margin_m: f64,
    /// Score factor per extended frame (unitless); default 0.9.
    pub extension_score_decay: f64,
    /// Frames a static track's fused box may be propagated past each end; default 20 (MS3D: 10–40).
    pub static_propagation_frames: u32,
    /// Score factor per propagated static frame (unitless); default 0.98 (MS3D).
    pub static_score_decay: f64,
    /// Score factor of interpolated boxes relative to the track score (unitless); default 0.9.
    pub interpolation_score_factor: f64,
    /// Weight of the detection's own score in a detected box's score; the rest is the track
    /// score (unitless, 0…1); default 0.5.
    pub detection_score_weight: f64,
    /// A track reaches its full score at this many observations (fewer scale it down
    /// linearly); default 5.
    pub full_score_observations: u32,
    /// Moving objects go forwards: a dynamic track whose detections point against its own
    /// travel is turned round, overriding the detectors' vote (their direction is often a
    /// guess); default true.
    pub heading_from_motion: bool,
    /// …when its ends are at least this far apart against its heading (m); default 3.0…
    pub heading_min_travel_m: f64,
    /// …and it covers them at this speed or more (m/s; 1 m/s is 3.6 km/h); default 1.0.
    pub heading_min_speed_mps: f64,
}

impl Default for ClassTrackConfig {
    fn default() -> Self {
        Self {
            association: AssociationMetric::GiouBev,
            min_giou: -0.5,
            max_center_distance_m: 5.0,
            max_mahalanobis_distance: 3.0,
            high_score: 0.2,
            low_score: 0.1,
            min_hits: 2,
            max_age_frames: 10,
            position_std_m: 0.3,
            yaw_std_rad: 0.15,
            acceleration_std_mps2: 3.0,
            yaw_acceleration_std_radps2: 1.0,
            initial_velocity_std_mps: 10.0,
            rigid: true,
            size_min_score: 0.5,
            static_test: StaticTest::Robust,
            static_max_displacement_m: 1.0,
            static_max_variance_m2: 0.1,
            min_observations: 3,
            short_track_min_score: 0.8,
            min_mean_score: 0.2,
            max_gap_frames: 20,
            fill_min_points: 1,
            fill_box_growth_m: 0.2,
            reid_max_distance_m: 1.0,
            reid_max_size_ratio: 1.25,
            static_absorb_min_iou: 0.3,
            extension_max_frames: 10,
            evidence_min_points: 10,
            evidence_ground_margin_m: 0.2,
            extension_score_decay: 0.9,
            static_propagation_frames: 20,
            static_score_decay: 0.98,
            interpolation_score_factor: 0.9,
            detection_score_weight: 0.5,
            full_score_observations: 5,
            heading_from_motion: true,
            heading_min_travel_m: 3.0,
            heading_min_speed_mps: 1.0,
        }
    }
}

/// Tracking configuration of one platform: mode and per-class thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackConfig {
    /// Offline (bidirectional + refinement) or forward-only; default `offline`.
    pub mode: TrackMode,
    /// Let low-score detections extend tracks in a second association stage; default true
    /// (the baseline preset turns it off).
    pub two_stage: bool,
    /// Vehicle thresholds; defaults as documented on `ClassTrackConfig`.
    #[serde(deserialize_with = "vehicle_overrides")]
    pub vehicle: ClassTrackConfig,
    /// Pedestrian thresholds.
    #[serde(deserialize_with = "pedestrian_overrides")]
    pub pedestrian: ClassTrackConfig,
    /// Cyclist thresholds.
    #[serde(deserialize_with = "cyclist_overrides")]
    pub cyclist: ClassTrackConfig,
    /// Unknown-class thresholds.
    #[serde(deserialize_with = "unknown_overrides")]
    pub unknown: ClassTrackConfig,
}

impl Default for TrackConfig {
    fn default() -> Self {
        // AB3DMOT's KITTI car threshold; SimpleTrack's −0.5 let parked neighbours swap ids.
        let vehicle = ClassTrackConfig {
            min_giou: -0.2,
            ..ClassTrackConfig::default()
        };
        let pedestrian = ClassTrackConfig {
            min_giou: -0.6,
            max_center_distance_m: 2.0,
            position_std_m: 0.15,
            yaw_std_rad: 0.4,
            acceleration_std_mps2: 1.5,
            yaw_acceleration_std_radps2: 3.0,
            initial_velocity_std_mps: 2.0,
            rigid: false,
            evidence_min_points: 4,
            reid_max_distance_m: 0.5,
            ..ClassTrackConfig::default()
        };
        let cyclist = ClassTrackConfig {
            max_center_distance_m: 3.0,
            position_std_m: 0.15,
            acceleration_std_mps2: 2.5,
            initial_velocity_std_mps: 5.0,
            rigid: false,
            evidence_min_points: 4,
            reid_max_distance_m: 0.5,
            ..ClassTrackConfig::default()
        };
        let unknown = ClassTrackConfig {
            max_center_distance_m: 3.0,
            initial_velocity_std_mps: 5.0,
            rigid: false,
            evidence_min_points: 4,
            reid_max_distance_m: 0.5,
            ..ClassTrackConfig::default()
        };
        Self {
            mode: TrackMode::Offline,
            two_stage: true,
            vehicle,
            pedestrian,
            cyclist,
            unknown,
        }
    }
}

impl TrackConfig {
    /// The AB3DMOT-style baseline: forward only, one association stage on detections at or
    /// above `high_score`, `min_hits` 3, `max_age` 2 (AB3DMOT's KITTI car setting); every other
    /// value as `default()`.
    pub fn forward_only_baseline() -> Self {
        let mut config = Self {
            mode: TrackMode::ForwardOnly,
            two_stage: false,
            ..Self::default()
        };
        for class in ObjectClass::ALL {
            let c = config.class_mut(class);
            c.min_hits = 3;
            c.max_age_frames = 2;
        }
        config
    }

    /// The thresholds of one class.
    pub fn class(&self, class: ObjectClass) -> &ClassTrackConfig {
        match class {
            ObjectClass::Vehicle => &self.vehicle,
            ObjectClass::Pedestrian => &self.pedestrian,
            ObjectClass::Cyclist => &self.cyclist,
            ObjectClass::Unknown => &self.unknown,
        }
    }

    /// The thresholds of one class, mutable.
    pub fn class_mut(&mut self, class: ObjectClass) -> &mut ClassTrackConfig {
        match class {
            ObjectClass::Vehicle => &mut self.vehicle,
            ObjectClass::Pedestrian => &mut self.pedestrian,
            ObjectClass::Cyclist => &mut self.cyclist,
            ObjectClass::Unknown => &mut self.unknown,
        }
    }

    /// Checks every value's range.
    pub fn validate(&self) -> Result<(), TrackError> {
        for class in ObjectClass::ALL {
            let c = self.class(class);
            let bad = |field: &'static str, reason: &str| TrackError::Config {
                class,
                field,
                reason: reason.to_string(),
            };
            let positive = [
                ("max_center_distance_m", c.max_center_distance_m),
                ("position_std_m", c.position_std_m),
                ("yaw_std_rad", c.yaw_std_rad),
                ("acceleration_std_mps2", c.acceleration_std_mps2),
                ("yaw_acceleration_std_radps2", c.yaw_acceleration_std_radps2),
                ("initial_velocity_std_mps", c.initial_velocity_std_mps),
            ];
            for (field, v) in positive {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(bad(field, "must be a positive finite number"));
                }
            }
            let unit = [
                ("extension_score_decay", c.extension_score_decay),
                ("static_score_decay", c.static_score_decay),
                ("interpolation_score_factor", c.interpolation_score_factor),
                ("detection_score_weight", c.detection_score_weight),
                ("static_absorb_min_iou", c.static_absorb_min_iou),
            ];
            for (field, v) in unit {
                if !(0.0..=1.0).contains(&v) {
                    return Err(bad(field, "must be in [0, 1]"));
                }
            }
            if c.max_mahalanobis_distance.is_nan() || c.max_mahalanobis_distance < 0.0 {
                return Err(bad("max_mahalanobis_distance", "must be a non-negative number"));
            }
            if c.reid_max_distance_m.is_nan() || c.reid_max_distance_m < 0.0 {
                return Err(bad("reid_max_distance_m", "must be a non-negative number"));
            }
            if c.reid_max_size_ratio.is_nan() || c.reid_max_size_ratio < 1.0 {
                return Err(bad("reid_max_size_ratio", "must be at least 1"));
            }
            if !(-1.0..=1.0).contains(&c.min_giou) {
                return Err(bad("min_giou", "must be in [-1, 1]"));
            }
            if c.low_score.is_nan() || c.high_score.is_nan() || c.low_score > c.high_score {
                return Err(bad("low_score", "must not exceed high_score"));
            }
            if c.max_age_frames == 0 {
                return Err(bad("max_age_frames", "must be at least 1"));
            }
            if c.static_max_displacement_m.is_nan()
                || c.static_max_variance_m2.is_nan()
                || c.evidence_ground_margin_m.is_nan()
            {
                return Err(bad("static_max_displacement_m", "must be a number"));
            }
            if c.fill_box_growth_m.is_nan() || c.fill_box_growth_m < 0.0 {
                return Err(bad("fill_box_growth_m", "must be a non-negative number"));
            }
        }
        Ok(())
    }
}

/// Deserializes a partial table as overrides of `base` (`config_overlay`), so a table that sets
/// one field keeps the other defaults of its own class or platform (not the generic `Default` of
/// its type); unknown keys are still rejected by the target type.
fn overlay<'de, T, D>(base: T, deserializer: D) -> Result<T, D::Error>
where
    T: Serialize + DeserializeOwned,
    D: Deserializer<'de>,
{
    crate::config_overlay::deserialize_over(base, deserializer)
}

fn vehicle_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<ClassTrackConfig, D::Error> {
    overlay(TrackConfig::default().vehicle, d)
}
fn pedestrian_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<ClassTrackConfig, D::Error> {
    overlay(TrackConfig::default().pedestrian, d)
}
fn cyclist_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<ClassTrackConfig, D::Error> {
    overlay(TrackConfig::default().cyclist, d)
}
fn unknown_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<ClassTrackConfig, D::Error> {
    overlay(TrackConfig::default().unknown, d)
}
fn vehicle_platform_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<TrackConfig, D::Error> {
    overlay(TrackingProfiles::default().vehicle, d)
}
fn drone_platform_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<TrackConfig, D::Error> {
    overlay(TrackingProfiles::default().drone, d)
}
fn quadruped_platform_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<TrackConfig, D::Error> {
    overlay(TrackingProfiles::default().quadruped, d)
}
fn other_platform_overrides<'de, D: Deserializer<'de>>(d: D) -> Result<TrackConfig, D::Error> {
    overlay(TrackingProfiles::default().other, d)
}

/// One `TrackConfig` per platform; the pipeline picks the one of the sequence's platform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackingProfiles {
    /// Car (Waymo) sequences; default `TrackConfig::default()`.
    #[serde(deserialize_with = "vehicle_platform_overrides")]
    pub vehicle: TrackConfig,
    /// Drone (M3ED falcon) sequences; default `TrackConfig::default()` with vehicle position
    /// noise 0.4 m (boxes seen from above at long range are looser).
    #[serde(deserialize_with = "drone_platform_overrides")]
    pub drone: TrackConfig,
    /// Quadruped (M3ED spot) sequences; default `TrackConfig::default()`.
    #[serde(deserialize_with = "quadruped_platform_overrides")]
    pub quadruped: TrackConfig,
    /// Any other platform; default `TrackConfig::default()`.
    #[serde(deserialize_with = "other_platform_overrides")]
    pub other: TrackConfig,
}

impl Default for TrackingProfiles {
    fn default() -> Self {
        let mut drone = TrackConfig::default();
        drone.vehicle.position_std_m = 0.4;
        Self {
            vehicle: TrackConfig::default(),
            drone,
            quadruped: TrackConfig::default(),
            other: TrackConfig::default(),
        }
    }
}

impl TrackingProfiles {
    /// The configuration of one platform.
    pub fn for_platform(&self, platform: Platform) -> &TrackConfig {
        match platform {
            Platform::Vehicle => &self.vehicle,
            Platform::Drone => &self.drone,
            Platform::Quadruped => &self.quadruped,
            Platform::Other => &self.other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_round_trip_through_toml() {
        let profiles = TrackingProfiles::default();
        for p in Platform::ALL {
            profiles.for_platform(p).validate().unwrap();
        }
        let text = toml::to_string(&profiles).unwrap();
        let back: TrackingProfiles = toml::from_str(&text).unwrap();
        assert_eq!(back, profiles);
    }

    #[test]
    fn partial_toml_keeps_other_defaults_and_rejects_unknown_keys() {
        let c: TrackConfig = toml::from_str("mode = \"forward_only\"\n[pedestrian]\nmin_hits = 4\n").unwrap();
        assert_eq!(c.mode, TrackMode::ForwardOnly);
        assert_eq!(c.pedestrian.min_hits, 4);
        assert_eq!(c.pedestrian.max_center_distance_m, 2.0);
        assert!(toml::from_str::<TrackConfig>("[vehicle]\nmin_hitz = 4\n").is_err());
        // Platform tables keep their own defaults too, down to the class level.
        let p: TrackingProfiles =
            toml::from_str("[drone.vehicle]\nmin_hits = 5\n[drone.cyclist]\nrigid = true\n").unwrap();
        assert_eq!(p.drone.vehicle.min_hits, 5);
        assert_eq!(p.drone.vehicle.position_std_m, 0.4);
        assert!(p.drone.cyclist.rigid);
        assert_eq!(p.drone.cyclist.max_center_distance_m, 3.0);
        assert_eq!(p.vehicle, TrackConfig::default());
        assert!(toml::from_str::<TrackingProfiles>("[drone]\nmood = \"offline\"\n").is_err());
    }

    #[test]
    fn validation_names_the_field() {
        let mut c = TrackConfig::default();
        c.cyclist.low_score = 0.9;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("cyclist") && e.contains("low_score"), "{e}");
        let mut c = TrackConfig::default();
        c.vehicle.reid_max_size_ratio = 0.9;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("vehicle") && e.contains("reid_max_size_ratio"), "{e}");
        let mut c = TrackConfig::default();
        c.cyclist.static_absorb_min_iou = 1.5;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("cyclist") && e.contains("static_absorb_min_iou"), "{e}");
        let mut c = TrackConfig::default();
        c.pedestrian.fill_box_growth_m = -0.1;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("fill_box_growth_m"), "{e}");
        let mut c = TrackConfig::default();
        c.unknown.max_mahalanobis_distance = f64::NAN;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("max_mahalanobis_distance")
        );
    }

    #[test]
    fn baseline_preset_is_forward_only() {
        let b = TrackConfig::forward_only_baseline();
        assert_eq!(b.mode, TrackMode::ForwardOnly);
        assert!(!b.two_stage);
        assert_eq!(b.vehicle.max_age_frames, 2);
        assert_eq!(b.vehicle.min_hits, 3);
    }
}
