//! A seeded detection-noise model: turns ground-truth boxes into the detections a LiDAR 3D
//! detector would plausibly output — centre, size, yaw and z errors that grow with BEV range and
//! with sparsity (few LiDAR returns), heading flips by π, misses that grow as returns fall,
//! false positives on static clutter, and scores calibrated on each box's hidden BEV IoU.
//! Every draw comes from a generator seeded by (seed, detector name, frame, track id), so any
//! frame and object can be asked for in any order. Definitions are in `docs/simulator.md`.

use nalgebra::{Isometry3, Point3, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::lidar::gaussian;
use super::simulator::{ObjectTruth, mix_seed};
use crate::boxes::Detection;
use crate::eval::{EvalBox, FrameKey};
use crate::frame::ObjectClass;
use crate::geometry::{Box3, iou_bev, wrap_angle};

/// Stream tags: one per kind of draw, so object and false-positive generators never coincide.
const STREAM_OBJECT: u64 = 0x6f62_6a65_6374;
const STREAM_FALSE_POSITIVE: u64 = 0x6661_6c73_6570;
const STREAM_CLUTTER: u64 = 0x636c_7574_7465;
const STREAM_TRACK: u64 = 0x7472_6163_6b73;

/// How one detector errs on one class. `growth(r, n) = 1 + range_gain_per_m·r +
/// sparsity_gain·sparsity(n)` with `sparsity(n) = sparse_points / (sparse_points + n)` scales
/// every σ below (`r` = BEV range of the true centre, `n` = its LiDAR returns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassNoise {
    /// σ of the centre error along each BEV axis at range 0 with dense points (m); default 0.10.
    pub center_sigma_m: f64,
    /// Probability that a detection's BEV centre error comes from the wide component (unitless,
    /// 0–1): real networks place most boxes tightly and a few far off (partial views, a box on
    /// the wrong part of an object); default 0 (Gaussian only; no extra random draw).
    pub center_outlier_probability: f64,
    /// σ of the wide component as a multiple of the centre σ (unitless, ≥ 1); default 4.
    pub center_outlier_scale: f64,
    /// σ of the centre error along z at range 0 with dense points (m); default 0.08.
    pub z_sigma_m: f64,
    /// σ of the log of each extent's scale factor (unitless; 0.05 ≈ 5 %); default 0.05.
    pub size_sigma: f64,
    /// Multiplicative bias of every extent (unitless; < 1 under-estimates); default 1.0.
    pub size_bias: f64,
    /// Share of the log-size error variance that is fixed per track (unitless, 0–1): a detector
    /// mis-sizes the same object alike from frame to frame; default 0.5.
    pub size_track_correlation: f64,
    /// σ of the yaw error, flips aside (rad); default 0.04.
    pub yaw_sigma_rad: f64,
    /// Relative growth of every σ per metre of BEV range (1/m); default 0.01.
    pub range_gain_per_m: f64,
    /// Relative growth of every σ at full sparsity (unitless); default 1.0.
    pub sparsity_gain: f64,
    /// Returns at which `sparsity(n)` is ½ (points); default 30.
    pub sparse_points: f64,
    /// Heading-flip (yaw + π) probability with dense points (unitless); default 0.01.
    pub flip_probability_dense: f64,
    /// Heading-flip probability as the returns go to 0 (unitless); default 0.10.
    pub flip_probability_sparse: f64,
    /// Detection probability of a well-seen object near the sensor (unitless); default 0.97.
    pub recall_max: f64,
    /// Returns at which the detection probability is half of `recall_max` (points); 0 disables
    /// point-driven misses; default 5.
    pub points_at_half_recall: f64,
    /// Linear loss of detection probability per metre of BEV range (1/m); default 0.002.
    pub miss_range_gain_per_m: f64,
}

impl Default for ClassNoise {
    fn default() -> Self {
        Self {
            center_sigma_m: 0.10,
            center_outlier_probability: 0.0,
            center_outlier_scale: 4.0,
            z_sigma_m: 0.08,
            size_sigma: 0.05,
            size_bias: 1.0,
            size_track_correlation: 0.5,
            yaw_sigma_rad: 0.04,
            range_gain_per_m: 0.01,
            sparsity_gain: 1.0,
            sparse_points: 30.0,
            flip_probability_dense: 0.01,
            flip_probability_sparse: 0.10,
            recall_max: 0.97,
            points_at_half_recall: 5.0,
            miss_range_gain_per_m: 0.002,
        }
    }
}

impl ClassNoise {
    /// No error at all: every object is detected exactly.
    pub fn exact() -> Self {
        Self {
            center_sigma_m: 0.0,
            center_outlier_probability: 0.0,
            center_outlier_scale: 1.0,
            z_sigma_m: 0.0,
            size_sigma: 0.0,
            size_bias: 1.0,
            size_track_correlation: 0.0,
            yaw_sigma_rad: 0.0,
            range_gain_per_m: 0.0,
            sparsity_gain: 0.0,
            sparse_points: 30.0,
            flip_probability_dense: 0.0,
            flip_probability_sparse: 0.0,
            recall_max: 1.0,
            points_at_half_recall: 0.0,
            miss_range_gain_per_m: 0.0,
        }
    }

    /// `sparsity(n) = sparse_points / (sparse_points + n)`, in (0, 1] (unitless).
    pub fn sparsity(&self, num_points: u32) -> f64 {
        if self.sparse_points <= 0.0 {
            return 0.0;
        }
        self.sparse_points / (self.sparse_points + f64::from(num_points))
    }

    /// The factor every σ is multiplied by at BEV range `range_m` with `num_points` returns.
    pub fn growth(&self, range_m: f64, num_points: u32) -> f64 {
        1.0 + self.range_gain_per_m * range_m + self.sparsity_gain * self.sparsity(num_points)
    }

    /// Probability of a heading flip with `num_points` returns.
    pub fn flip_probability(&self, num_points: u32) -> f64 {
        let s = self.sparsity(num_points);
        (self.flip_probability_dense + (self.flip_probability_sparse - self.flip_probability_dense) * s).clamp(0.0, 1.0)
    }

    /// Probability the object is detected (before the score threshold).
    pub fn detection_probability(&self, range_m: f64, num_points: u32) -> f64 {
        let points = if self.points_at_half_recall <= 0.0 {
            1.0
        } else {
            let n = f64::from(num_points);
            let n50 = self.points_at_half_recall;
            n * n / (n * n + n50 * n50)
        };
        let range = (1.0 - self.miss_range_gain_per_m * range_m).clamp(0.0, 1.0);
        (self.recall_max * points * range).clamp(0.0, 1.0)
    }
}

/// The error profile of one detector (all classes, false positives and scores).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectorNoiseProfile {
    /// Detector name, copied into every `Detection::detector`; default `"detector"`.
    pub name: String,
    /// Objects whose true centre is farther than this in BEV are never detected, and false
    /// positives stay inside it (m); default 75.2 (the Waymo models' point-cloud range).
    pub max_range_m: f64,
    /// Detections scoring below this are dropped (unitless); default 0.1.
    pub min_score: f64,
    /// Errors on vehicles; default `ClassNoise::default()`.
    pub vehicle: ClassNoise,
    /// Errors on pedestrians; default `ClassNoise::default()` with 0.04 m centre σ, 0.06 size σ,
    /// 0.3 rad yaw σ, sparsity gain 0.7 and flip probabilities 0.10 / 0.30.
    pub pedestrian: ClassNoise,
    /// Errors on cyclists; default `ClassNoise::default()` with 0.08 m centre σ, 0.15 rad yaw σ.
    pub cyclist: ClassNoise,
    /// Mean number of false positives per frame (Poisson), placed on static clutter; default 1.0.
    pub false_positives_per_frame: f64,
    /// Share of false positives per class `[vehicle, pedestrian, cyclist]` (unitless, normalised
    /// when drawn); default `[0.6, 0.3, 0.1]`.
    pub false_positive_class_share: [f64; 3],
    /// False positives get a hidden quality uniform in `[0, this]` in place of an IoU
    /// (unitless); default 0.45.
    pub false_positive_quality_max: f64,
    /// σ of the log-normal confusability of each clutter object, which weights where false
    /// positives land (unitless): 0 spreads them evenly over the clutter in range, larger values
    /// make the same few objects fire frame after frame, as real detectors do; default 1.5.
    pub false_positive_persistence: f64,
    /// Score = logistic(`score_slope`·(quality − `score_quality_mid`) + `score_noise`·N(0,1)):
    /// slope per unit of quality (unitless); default 10.
    pub score_slope: f64,
    /// The quality (hidden BEV IoU) that scores 0.5 on average (unitless); default 0.5.
    pub score_quality_mid: f64,
    /// σ of the score noise in logit units (unitless); default 0.5.
    pub score_noise: f64,
}

impl Default for DetectorNoiseProfile {
    fn default() -> Self {
        Self {
            name: "detector".to_string(),
            max_range_m: 75.2,
            min_score: 0.1,
            vehicle: ClassNoise::default(),
            pedestrian: ClassNoise {
                center_sigma_m: 0.04,
                size_sigma: 0.06,
                yaw_sigma_rad: 0.3,
                sparsity_gain: 0.7,
                flip_probability_dense: 0.10,
                flip_probability_sparse: 0.30,
                ..ClassNoise::default()
            },
            cyclist: ClassNoise {
                center_sigma_m: 0.08,
                yaw_sigma_rad: 0.15,
                ..ClassNoise::default()
            },
            false_positives_per_frame: 1.0,
            false_positive_class_share: [0.6, 0.3, 0.1],
            false_positive_quality_max: 0.45,
            false_positive_persistence: 1.5,
            score_slope: 10.0,
            score_quality_mid: 0.5,
            score_noise: 0.5,
        }
    }
}

impl DetectorNoiseProfile {
    /// A detector without error: every object it is given comes back exactly, no false positives.
    pub fn exact(name: &str) -> Self {
        Self {
            name: name.to_string(),
            max_range_m: f64::INFINITY,
            min_score: 0.0,
            vehicle: ClassNoise::exact(),
            pedestrian: ClassNoise::exact(),
            cyclist: ClassNoise::exact(),
            false_positives_per_frame: 0.0,
            score_noise: 0.0,
            ..Self::default()
        }
    }

    /// The noise of one class (`Unknown` uses the vehicle parameters).
    pub fn class_noise(&self, class: ObjectClass) -> &ClassNoise {
        match class {
            ObjectClass::Pedestrian => &self.pedestrian,
            ObjectClass::Cyclist => &self.cyclist,
            ObjectClass::Vehicle | ObjectClass::Unknown => &self.vehicle,
        }
    }

    /// The calibrated score of a box of hidden quality `quality` with standard-normal draw `z`.
    pub fn score(&self, quality: f64, z: f64) -> f64 {
        logistic(self.score_slope * (quality - self.score_quality_mid) + self.score_noise * z)
    }
}

/// Three distinct detectors: `pointpillars` (anchor-based pillars: good on vehicles, weak on
/// pedestrians, direction-classifier flips), `centerpoint` (centre-based: better heading and
/// pedestrians, more false positives) and `second_shifted` (a noisier voxel model run across a
/// domain gap: sizes under-estimated, more misses). `docs/simulator.md` explains the values.
pub fn standard_detector_profiles() -> Vec<DetectorNoiseProfile> {
    let base = DetectorNoiseProfile::default();
    let pointpillars = DetectorNoiseProfile {
        name: "pointpillars".to_string(),
        vehicle: ClassNoise {
            center_sigma_m: 0.10,
            yaw_sigma_rad: 0.04,
            flip_probability_dense: 0.02,
            flip_probability_sparse: 0.15,
            recall_max: 0.97,
            points_at_half_recall: 5.0,
            ..ClassNoise::default()
        },
        pedestrian: ClassNoise {
            center_sigma_m: 0.045,
            z_sigma_m: 0.08,
            size_sigma: 0.07,
            yaw_sigma_rad: 0.3,
            range_gain_per_m: 0.008,
            sparsity_gain: 0.5,
            flip_probability_dense: 0.15,
            flip_probability_sparse: 0.35,
            recall_max: 0.85,
            points_at_half_recall: 8.0,
            miss_range_gain_per_m: 0.004,
            ..ClassNoise::default()
        },
        cyclist: ClassNoise {
            center_sigma_m: 0.10,
            size_sigma: 0.08,
            yaw_sigma_rad: 0.15,
            flip_probability_dense: 0.05,
            flip_probability_sparse: 0.25,
            recall_max: 0.85,
            points_at_half_recall: 10.0,
            ..ClassNoise::default()
        },
        false_positives_per_frame: 1.5,
        false_positive_class_share: [0.55, 0.3, 0.15],
        false_positive_quality_max: 0.4,
        ..base.clone()
    };
    let centerpoint = DetectorNoiseProfile {
        name: "centerpoint".to_string(),
        vehicle: ClassNoise {
            center_sigma_m: 0.09,
            yaw_sigma_rad: 0.03,
            flip_probability_dense: 0.005,
            flip_probability_sparse: 0.05,
            recall_max: 0.98,
            points_at_half_recall: 4.0,
            ..ClassNoise::default()
        },
        pedestrian: ClassNoise {
            center_sigma_m: 0.03,
            size_sigma: 0.05,
            yaw_sigma_rad: 0.2,
            range_gain_per_m: 0.008,
            sparsity_gain: 0.5,
            flip_probability_dense: 0.08,
            flip_probability_sparse: 0.25,
            recall_max: 0.93,
            points_at_half_recall: 6.0,
            ..ClassNoise::default()
        },
        cyclist: ClassNoise {
            center_sigma_m: 0.08,
            yaw_sigma_rad: 0.10,
            flip_probability_dense: 0.02,
            flip_probability_sparse: 0.15,
            recall_max: 0.90,
            points_at_half_recall: 6.0,
            ..ClassNoise::default()
        },
        false_positives_per_frame: 3.0,
        false_positive_class_share: [0.6, 0.3, 0.1],
        false_positive_quality_max: 0.5,
        ..base.clone()
    };
    let second_shifted = DetectorNoiseProfile {
        name: "second_shifted".to_string(),
        vehicle: ClassNoise {
            center_sigma_m: 0.15,
            z_sigma_m: 0.12,
            size_sigma: 0.07,
            size_bias: 0.94,
            yaw_sigma_rad: 0.06,
            range_gain_per_m: 0.015,
            flip_probability_dense: 0.02,
            flip_probability_sparse: 0.12,
            recall_max: 0.92,
            points_at_half_recall: 10.0,
            miss_range_gain_per_m: 0.004,
            ..ClassNoise::default()
        },
        pedestrian: ClassNoise {
            center_sigma_m: 0.055,
            z_sigma_m: 0.10,
            size_sigma: 0.08,
            size_bias: 0.94,
            yaw_sigma_rad: 0.35,
            range_gain_per_m: 0.01,
            sparsity_gain: 0.6,
            flip_probability_dense: 0.15,
            flip_probability_sparse: 0.35,
            recall_max: 0.80,
            points_at_half_recall: 10.0,
            miss_range_gain_per_m: 0.005,
            ..ClassNoise::default()
        },
        cyclist: ClassNoise {
            center_sigma_m: 0.12,
            size_sigma: 0.10,
            size_bias: 0.94,
            yaw_sigma_rad: 0.2,
            flip_probability_dense: 0.05,
            flip_probability_sparse: 0.25,
            recall_max: 0.80,
            points_at_half_recall: 12.0,
            miss_range_gain_per_m: 0.004,
            ..ClassNoise::default()
        },
        false_positives_per_frame: 2.0,
        false_positive_class_share: [0.6, 0.3, 0.1],
        false_positive_quality_max: 0.45,
        score_noise: 0.8,
        ..base
    };
    vec![pointpillars, centerpoint, second_shifted]
}

/// One detector's noise model: a profile and a seed.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectionNoiseModel {
    profile: DetectorNoiseProfile,
    seed: u64,
    /// Stable hash of the detector name (FNV-1a), so detectors draw independently.
    name_hash: u64,
}

/// FNV-1a over the bytes of `s`: stable across Rust versions, unlike `DefaultHasher`.
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// BEV range of a box centre from the sensor origin (m).
pub fn bev_range(b: &Box3) -> f64 {
    b.x.hypot(b.y)
}

/// A Poisson draw of mean `mean` (Knuth's product method; normal approximation above 30).
fn poisson(mean: f64, rng: &mut impl rand::Rng) -> usize {
    if mean.is_nan() || mean <= 0.0 {
        return 0;
    }
    if mean > 30.0 {
        return (mean + mean.sqrt() * gaussian(rng)).round().max(0.0) as usize;
    }
    let limit = (-mean).exp();
    let mut product: f64 = rng.random();
    let mut k = 0;
    while product > limit {
        product *= rng.random::<f64>();
        k += 1;
    }
    k
}

/// Typical extents `(l, w, h)` of a false positive of `class` (m).
fn typical_size(class: ObjectClass) -> Vector3<f64> {
    match class {
        ObjectClass::Pedestrian => Vector3::new(0.85, 0.75, 1.75),
        ObjectClass::Cyclist => Vector3::new(1.8, 0.7, 1.7),
        ObjectClass::Vehicle | ObjectClass::Unknown => Vector3::new(4.6, 1.9, 1.65),
    }
}

impl DetectionNoiseModel {
    /// A model of the detector `profile` whose draws derive from `seed`.
    pub fn new(profile: DetectorNoiseProfile, seed: u64) -> Self {
        let name_hash = stable_hash(&profile.name);
        Self {
            profile,
            seed,
            name_hash,
        }
    }

    /// The profile in use.
    pub fn profile(&self) -> &DetectorNoiseProfile {
        &self.profile
    }

    /// The detection of one object, or `None` when it is missed or scores below `min_score`.
    pub fn detect_object(&self, frame_index: usize, object: &ObjectTruth) -> Option<Detection> {
        let p = &self.profile;
        let noise = p.class_noise(object.class);
        let truth = &object.box_in_sensor;
        let range = bev_range(truth);
        if range.is_nan() || range > p.max_range_m {
            return None;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(&[
            self.seed,
            STREAM_OBJECT,
            self.name_hash,
            frame_index as u64,
            u64::from(object.track_id),
        ]));
        // Fixed draw order: detection, (centre tail, only when enabled), centre, size, yaw,
        // flip, score.
        let n = object.num_lidar_points;
        if rng.random::<f64>() >= noise.detection_probability(range, n) {
            return None;
        }
        let g = noise.growth(range, n);
        let mut centre_sigma = noise.center_sigma_m * g;
        if noise.center_outlier_probability > 0.0 && rng.random::<f64>() < noise.center_outlier_probability {
            centre_sigma *= noise.center_outlier_scale;
        }
        let mut b = *truth;
        b.x += centre_sigma * gaussian(&mut rng);
        b.y += centre_sigma * gaussian(&mut rng);
        b.z += noise.z_sigma_m * g * gaussian(&mut rng);
        // Log-size error: a per-track part (its own generator, the same every frame) and a
        // per-frame part, mixed to unit variance.
        let rho = noise.size_track_correlation.clamp(0.0, 1.0);
        let mut track_rng = ChaCha8Rng::seed_from_u64(mix_seed(&[
            self.seed,
            STREAM_TRACK,
            self.name_hash,
            u64::from(object.track_id),
        ]));
        for extent in [&mut b.l, &mut b.w, &mut b.h] {
            let z = rho.sqrt() * gaussian(&mut track_rng) + (1.0 - rho).sqrt() * gaussian(&mut rng);
            *extent *= noise.size_bias * (noise.size_sigma * g * z).exp();
        }
        let yaw_error = noise.yaw_sigma_rad * g * gaussian(&mut rng);
        let flip = rng.random::<f64>() < noise.flip_probability(n);
        if yaw_error != 0.0 || flip {
            b.yaw = wrap_angle(b.yaw + yaw_error + if flip { std::f64::consts::PI } else { 0.0 });
        }
        let quality = iou_bev(&b, truth);
        let score = p.score(quality, gaussian(&mut rng));
        (score >= p.min_score).then(|| Detection {
            box3: b,
            class: object.class,
            score: score as f32,
            detector: p.name.clone(),
        })
    }

    /// The false positives of one frame: a Poisson count placed on `clutter` (sensor-frame boxes
    /// of unlabelled static things) within `max_range_m`, with class-typical sizes. Which clutter
    /// fires, and its false positive's class, size and place, are keyed by the clutter's centre
    /// in the sensor frame: persistent over frames only for a still sensor (see
    /// `false_positives_in_world`).
    pub fn false_positives(&self, frame_index: usize, clutter: &[Box3]) -> Vec<Detection> {
        self.false_positives_keyed(frame_index, clutter, &Isometry3::identity())
    }

    /// As `false_positives`, with the clutter keyed by its centre in the world
    /// (`world_from_sensor` of the frame), so the same clutter object draws the same false
    /// positive from frame to frame while the sensor moves.
    pub fn false_positives_in_world(
        &self,
        frame_index: usize,
        clutter: &[Box3],
        world_from_sensor: &Isometry3<f64>,
    ) -> Vec<Detection> {
        self.false_positives_keyed(frame_index, clutter, world_from_sensor)
    }

    fn false_positives_keyed(
        &self,
        frame_index: usize,
        clutter: &[Box3],
        key_from_sensor: &Isometry3<f64>,
    ) -> Vec<Detection> {
        let p = &self.profile;
        // Each clutter object in range with its stable key and confusability weight.
        let candidates: Vec<(&Box3, u64, f64)> = clutter
            .iter()
            .filter(|c| bev_range(c) - 0.5 * c.l.hypot(c.w) <= p.max_range_m)
            .map(|c| {
                let centre = key_from_sensor * c.center();
                // Centimetre cells: static clutter keeps its key through pose round trips.
                let key = mix_seed(&[
                    (centre.x * 100.0).round() as i64 as u64,
                    (centre.y * 100.0).round() as i64 as u64,
                ]);
                let mut keyed = self.clutter_rng(key);
                let weight = (p.false_positive_persistence * gaussian(&mut keyed)).exp();
                (c, key, weight)
            })
            .filter(|(_, _, w)| w.is_finite())
            .collect();
        let total_weight: f64 = candidates.iter().map(|c| c.2).sum();
        if candidates.is_empty() || total_weight.is_nan() || total_weight <= 0.0 {
            return Vec::new();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(&[
            self.seed,
            STREAM_FALSE_POSITIVE,
            self.name_hash,
            frame_index as u64,
        ]));
        let count = poisson(p.false_positives_per_frame, &mut rng);
        let share = p
            .false_positive_class_share
            .map(|s| if s.is_finite() { s.max(0.0) } else { 0.0 });
        let total_share: f64 = share.iter().sum();
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            // The clutter, by confusability weight.
            let mut u = rng.random::<f64>() * total_weight;
            let mut chosen = &candidates[candidates.len() - 1];
            for c in &candidates {
                if u < c.2 {
                    chosen = c;
                    break;
                }
                u -= c.2;
            }
            let (clutter, key, _) = *chosen;
            // What this clutter object is mistaken for, and where: the same every frame.
            let mut keyed = self.clutter_rng(key);
            let _weight_draw = gaussian(&mut keyed);
            let u = keyed.random::<f64>() * total_share;
            let class = if u < share[0] || total_share <= 0.0 {
                ObjectClass::Vehicle
            } else if u < share[0] + share[1] {
                ObjectClass::Pedestrian
            } else {
                ObjectClass::Cyclist
            };
            let size = typical_size(class).map(|v| v * (0.08 * gaussian(&mut keyed)).exp());
            let turn = f64::from(keyed.random_range(0..4u8)) * std::f64::consts::FRAC_PI_2;
            let Some(local) = place_on(clutter, size.z, &mut keyed) else {
                continue;
            };
            let centre = clutter.parent_from_box() * local;
            let centre_range = centre.x.hypot(centre.y);
            if centre_range.is_nan() || centre_range > p.max_range_m {
                continue;
            }
            // Per-frame variation: size and yaw jitter, quality and score.
            let jitter = Vector3::from_fn(|_, _| (0.03 * gaussian(&mut rng)).exp());
            let b = Box3 {
                x: centre.x,
                y: centre.y,
                z: centre.z,
                l: size.x * jitter.x,
                w: size.y * jitter.y,
                h: size.z * jitter.z,
                yaw: wrap_angle(clutter.yaw + turn + 0.05 * gaussian(&mut rng)),
                pitch: clutter.pitch,
                roll: clutter.roll,
            };
            let quality = rng.random::<f64>() * p.false_positive_quality_max;
            let score = p.score(quality, gaussian(&mut rng));
            if score >= p.min_score {
                out.push(Detection {
                    box3: b,
                    class,
                    score: score as f32,
                    detector: p.name.clone(),
                });
            }
        }
        out
    }

    /// The generator of one clutter object's stable draws.
    fn clutter_rng(&self, key: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(mix_seed(&[self.seed, STREAM_CLUTTER, self.name_hash, key]))
    }

    /// `detect` with false positives keyed in the world (`false_positives_in_world`): what
    /// `simulate_noisy_sequence` uses, so clutter mistaken once tends to be mistaken again.
    pub fn detect_in_world(
        &self,
        frame_index: usize,
        objects: &[ObjectTruth],
        clutter: &[Box3],
        world_from_sensor: &Isometry3<f64>,
    ) -> Vec<Detection> {
        let mut out: Vec<Detection> = objects
            .iter()
            .filter_map(|o| self.detect_object(frame_index, o))
            .collect();
        out.extend(self.false_positives_in_world(frame_index, clutter, world_from_sensor));
        out
    }

    /// Detections of one frame, in the sensor frame (same frame as `ObjectTruth::box_in_sensor`).
    pub fn detect(
        &self,
        frame_index: usize,
        objects: &[ObjectTruth],
        clutter: &[Box3],
    ) -> Vec<crate::boxes::Detection> {
        let mut out: Vec<Detection> = objects
            .iter()
            .filter_map(|o| self.detect_object(frame_index, o))
            .collect();
        out.extend(self.false_positives(frame_index, clutter));
        out
    }
}

/// Where on a clutter box a false positive of height `height` sits, in the clutter's local frame:
/// small clutter (trees, poles) near its middle, large clutter (walls, buildings) on a side that
/// faces the sensor; the false positive stands on the clutter's bottom face.
fn place_on(clutter: &Box3, height: f64, rng: &mut impl rand::Rng) -> Option<Point3<f64>> {
    let (hl, hw, hh) = (0.5 * clutter.l, 0.5 * clutter.w, 0.5 * clutter.h);
    if !(hl.is_finite() && hw.is_finite() && hh.is_finite()) {
        return None;
    }
    let z = -hh + 0.5 * height;
    if hl.max(hw) <= 3.0 {
        let x = rng.random_range(-1.0..=1.0) * hl.min(0.5);
        let y = rng.random_range(-1.0..=1.0) * hw.min(0.5);
        return Some(Point3::new(x, y, z));
    }
    // The sensor origin in the clutter's frame, to find the sides facing it.
    let sensor = clutter.parent_from_box().inverse() * Point3::origin();
    // Sides as (outward normal axis, sign, half length along the side).
    let sides = [(0usize, 1.0, hw), (0, -1.0, hw), (1, 1.0, hl), (1, -1.0, hl)];
    let facing: Vec<(usize, f64, f64)> = sides
        .into_iter()
        .filter(|&(axis, sign, _)| sign * sensor[axis] > [hl, hw][axis])
        .collect();
    let facing = if facing.is_empty() { sides.to_vec() } else { facing };
    let total: f64 = facing.iter().map(|s| s.2).sum();
    let mut u = rng.random::<f64>() * total;
    let mut chosen = facing[facing.len() - 1];
    for s in &facing {
        if u < s.2 {
            chosen = *s;
            break;
        }
        u -= s.2;
    }
    let (axis, sign, half) = chosen;
    let along = rng.random_range(-1.0..=1.0) * half;
    let point = if axis == 0 {
        Point3::new(sign * hl, along, z)
    } else {
        Point3::new(along, sign * hw, z)
    };
    Some(point)
}

/// Classes with fewer matched boxes than this keep the default `ClassNoise` when fitting.
pub const FIT_MIN_MATCHES: usize = 20;

/// BEV centre distance within which a detection may match a true box of its class (m).
fn match_gate_m(class: ObjectClass) -> f64 {
    match class {
        ObjectClass::Pedestrian => 1.0,
        ObjectClass::Cyclist => 1.5,
        ObjectClass::Vehicle | ObjectClass::Unknown => 2.0,
    }
}

fn class_index(class: ObjectClass) -> usize {
    match class {
        ObjectClass::Vehicle | ObjectClass::Unknown => 0,
        ObjectClass::Pedestrian => 1,
        ObjectClass::Cyclist => 2,
    }
}

/// A matched (truth, detection) pair as the fit sees it.
struct FitPair {
    /// (sequence, track id) of the true box, when it has one.
    track: Option<(String, String)>,
    range_m: f64,
    points: Option<u64>,
    /// Centre errors x, y, z (m).
    centre: [f64; 3],
    /// Log size ratios l, w, h.
    log_size: [f64; 3],
    /// Yaw error with the flip removed (rad).
    yaw: f64,
    flipped: bool,
}

/// A true box and whether it was detected.
struct FitTruth {
    range_m: f64,
    points: Option<u64>,
    detected: bool,
}

/// Least squares `y ≈ X·c` for up to 3 features via the normal equations; `None` when singular.
fn least_squares<const K: usize>(rows: &[([f64; K], f64)]) -> Option<[f64; K]> {
    let mut a = nalgebra::DMatrix::<f64>::zeros(K, K);
    let mut b = nalgebra::DVector::<f64>::zeros(K);
    for (x, y) in rows {
        for i in 0..K {
            b[i] += x[i] * y;
            for j in 0..K {
                a[(i, j)] += x[i] * x[j];
            }
        }
    }
    let c = a.lu().solve(&b)?;
    c.iter().all(|v| v.is_finite()).then(|| std::array::from_fn(|i| c[i]))
}

fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

/// A heavy tail of the BEV centre error: a wide Gaussian component mixed into the core one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CentreTail {
    /// σ of the core component, per BEV axis (normalised units).
    core_sigma: f64,
    /// Share of errors drawn from the wide component.
    probability: f64,
    /// σ of the wide component over the core σ.
    scale: f64,
}

/// EM iterations of the centre-tail fit (it converges in far fewer on real data).
const TAIL_EM_ITERATIONS: usize = 500;

/// Fits a two-component zero-mean isotropic 2-D Gaussian scale mixture to squared BEV centre
/// errors `r²` (already divided by the σ growth) by EM, and keeps it only when it is worth its
/// two extra parameters by the Bayesian information criterion, its wide σ is at least 1.5 times
/// the core's and its share lies in [0.5 %, 50 %]; otherwise `None` (a single Gaussian).
fn fit_centre_tail(r_sq: &[f64]) -> Option<CentreTail> {
    let n = r_sq.len() as f64;
    if r_sq.len() < FIT_MIN_MATCHES {
        return None;
    }
    // ln of the 2-D isotropic Gaussian density of r² under variance v (per axis).
    let ln_density = |r2: f64, v: f64| -(2.0 * std::f64::consts::PI * v).ln() - r2 / (2.0 * v);
    let single_var = r_sq.iter().sum::<f64>() / (2.0 * n);
    if single_var <= 0.0 || !single_var.is_finite() {
        return None;
    }
    let single_ll: f64 = r_sq.iter().map(|&r2| ln_density(r2, single_var)).sum();
    let (mut core_var, mut wide_var, mut q) = (0.5 * single_var, 4.0 * single_var, 0.1f64);
    let mut mixture_ll = f64::NEG_INFINITY;
    for _ in 0..TAIL_EM_ITERATIONS {
        let (mut w_sum, mut w_r2, mut c_r2, mut ll) = (0.0, 0.0, 0.0, 0.0);
        for &r2 in r_sq {
            let a = (1.0 - q).ln() + ln_density(r2, core_var);
            let b = q.ln() + ln_density(r2, wide_var);
            let top = a.max(b);
            let total = top + ((a - top).exp() + (b - top).exp()).ln();
            let wide = (b - total).exp();
            ll += total;
            w_sum += wide;
            w_r2 += wide * r2;
            c_r2 += (1.0 - wide) * r2;
        }
        mixture_ll = ll;
        if w_sum <= 0.0 || w_sum >= n || c_r2 <= 0.0 {
            return None;
        }
        q = w_sum / n;
        wide_var = w_r2 / (2.0 * w_sum);
        core_var = c_r2 / (2.0 * (n - w_sum));
        if wide_var < core_var {
            std::mem::swap(&mut wide_var, &mut core_var);
            q = 1.0 - q;
        }
    }
    let scale = (wide_var / core_var).sqrt();
    let worth_it = 2.0 * (mixture_ll - single_ll) > 2.0 * n.ln();
    (worth_it && scale >= 1.5 && (0.005..=0.5).contains(&q) && scale.is_finite()).then(|| CentreTail {
        core_sigma: core_var.sqrt(),
        probability: q,
        scale,
    })
}

/// Fits one class's parameters; `default` fills what the data cannot tell.
fn fit_class(pairs: &[FitPair], truths: &[FitTruth], max_range_m: f64, default: &ClassNoise) -> ClassNoise {
    if pairs.len() < FIT_MIN_MATCHES {
        return default.clone();
    }
    let with_points = pairs.iter().all(|p| p.points.is_some()) && truths.iter().all(|t| t.points.is_some());
    let pts = |p: Option<u64>| u32::try_from(p.unwrap_or(0)).unwrap_or(u32::MAX);
    let abs_scale = (std::f64::consts::PI / 2.0).sqrt();
    // Range and sparsity gains from E|e| = σ·g·√(2/π), linear in [1, r, s(n)]; sparse_points by
    // the smallest residual over a grid.
    let mut best: Option<(f64, f64, f64, f64)> = None; // (residual, a, b, sparse_points)
    let grid: &[f64] = if with_points {
        &[3.0, 5.0, 10.0, 20.0, 30.0, 50.0, 100.0, 200.0]
    } else {
        &[30.0]
    };
    for &sp in grid {
        let probe = ClassNoise {
            sparse_points: sp,
            ..ClassNoise::default()
        };
        let rows: Vec<([f64; 3], f64)> = pairs
            .iter()
            .flat_map(|p| {
                let s = if with_points {
                    probe.sparsity(pts(p.points))
                } else {
                    0.0
                };
                [0, 1].map(|k| ([1.0, p.range_m, s], p.centre[k].abs() * abs_scale))
            })
            .collect();
        let (a, b, residual) = if with_points {
            match least_squares(&rows) {
                Some(c) => {
                    let r: f64 = rows
                        .iter()
                        .map(|(x, y)| (y - c[0] - c[1] * x[1] - c[2] * x[2]).powi(2))
                        .sum();
                    (c[1] / c[0], c[2] / c[0], r)
                }
                None => continue,
            }
        } else {
            let rows2: Vec<([f64; 2], f64)> = rows.iter().map(|(x, y)| ([x[0], x[1]], *y)).collect();
            match least_squares(&rows2) {
                Some(c) => (c[1] / c[0], 0.0, 0.0),
                None => continue,
            }
        };
        let (a, b) = if a.is_finite() && b.is_finite() {
            (a.max(0.0), b.max(0.0))
        } else {
            (0.0, 0.0)
        };
        if best.is_none_or(|(r, ..)| residual < r) {
            best = Some((residual, a, b, sp));
        }
    }
    let (_, range_gain, sparsity_gain, sparse_points) = best.unwrap_or((0.0, 0.0, 0.0, default.sparse_points));
    let mut fitted = ClassNoise {
        range_gain_per_m: range_gain,
        sparsity_gain,
        sparse_points,
        ..default.clone()
    };
    let g: Vec<f64> = pairs.iter().map(|p| fitted.growth(p.range_m, pts(p.points))).collect();
    let rms = |f: &dyn Fn(&FitPair) -> Vec<f64>| -> f64 {
        let mut sum = 0.0;
        let mut count = 0usize;
        for (p, g) in pairs.iter().zip(&g) {
            for v in f(p) {
                sum += (v / g).powi(2);
                count += 1;
            }
        }
        if count == 0 { 0.0 } else { (sum / count as f64).sqrt() }
    };
    fitted.center_sigma_m = rms(&|p| vec![p.centre[0], p.centre[1]]);
    let normalised_sq: Vec<f64> = pairs
        .iter()
        .zip(&g)
        .map(|(p, g)| (p.centre[0] / g).powi(2) + (p.centre[1] / g).powi(2))
        .collect();
    if let Some(tail) = fit_centre_tail(&normalised_sq) {
        fitted.center_sigma_m = tail.core_sigma;
        fitted.center_outlier_probability = tail.probability;
        fitted.center_outlier_scale = tail.scale;
    } else {
        fitted.center_outlier_probability = 0.0;
    }
    fitted.z_sigma_m = rms(&|p| vec![p.centre[2]]);
    let n3 = 3.0 * pairs.len() as f64;
    let log_bias = pairs.iter().flat_map(|p| p.log_size).sum::<f64>() / n3;
    fitted.size_bias = log_bias.exp();
    fitted.size_sigma = rms(&|p| p.log_size.iter().map(|v| v - log_bias).collect());
    fitted.yaw_sigma_rad = rms(&|p| vec![p.yaw]);
    // Per-track share of the log-size variance: correlation of normalised log-size errors of
    // consecutive detections of one track (pairs come in frame order).
    if fitted.size_sigma > 0.0 {
        let mut last: std::collections::HashMap<&(String, String), [f64; 3]> = Default::default();
        let (mut cross, mut square) = (0.0, 0.0);
        for (p, g) in pairs.iter().zip(&g) {
            let z = p.log_size.map(|v| (v - log_bias) / (fitted.size_sigma * g));
            let Some(track) = &p.track else { continue };
            if let Some(previous) = last.insert(track, z) {
                for k in 0..3 {
                    cross += previous[k] * z[k];
                    square += 0.5 * (previous[k] * previous[k] + z[k] * z[k]);
                }
            }
        }
        if square > 0.0 {
            fitted.size_track_correlation = (cross / square).clamp(0.0, 1.0);
        }
    }
    // Flips: linear in sparsity.
    let flip_rows: Vec<([f64; 2], f64)> = pairs
        .iter()
        .map(|p| {
            let s = if with_points {
                fitted.sparsity(pts(p.points))
            } else {
                0.0
            };
            ([1.0, s], if p.flipped { 1.0 } else { 0.0 })
        })
        .collect();
    let flip_mean = flip_rows.iter().map(|r| r.1).sum::<f64>() / flip_rows.len() as f64;
    let (dense, sparse) = match (with_points, least_squares(&flip_rows)) {
        (true, Some(c)) => (c[0], c[0] + c[1]),
        _ => (flip_mean, flip_mean),
    };
    fitted.flip_probability_dense = dense.clamp(0.0, 1.0);
    fitted.flip_probability_sparse = sparse.clamp(0.0, 1.0);
    // Misses: maximum likelihood over a grid of (points at half recall, range gain), recall_max
    // from the detected share given both.
    let in_range: Vec<&FitTruth> = truths.iter().filter(|t| t.range_m <= max_range_m).collect();
    let detected = in_range.iter().filter(|t| t.detected).count() as f64;
    let n50_grid: Vec<f64> = if with_points {
        std::iter::once(0.0)
            .chain((0..36).map(|k| 0.5 * 1.16f64.powi(k)))
            .collect()
    } else {
        vec![0.0]
    };
    let mut best_ll = f64::NEG_INFINITY;
    for &n50 in &n50_grid {
        for k in 0..=40 {
            let m = 0.0005 * f64::from(k);
            let probe = ClassNoise {
                recall_max: 1.0,
                points_at_half_recall: n50,
                miss_range_gain_per_m: m,
                ..ClassNoise::default()
            };
            let f: Vec<f64> = in_range
                .iter()
                .map(|t| probe.detection_probability(t.range_m, pts(t.points)))
                .collect();
            let total: f64 = f.iter().sum();
            if total <= 0.0 {
                continue;
            }
            let recall = (detected / total).clamp(0.0, 1.0);
            let ll: f64 = in_range
                .iter()
                .zip(&f)
                .map(|(t, f)| {
                    let p = (recall * f).clamp(1e-9, 1.0 - 1e-9);
                    if t.detected { p.ln() } else { (1.0 - p).ln() }
                })
                .sum();
            if ll > best_ll {
                best_ll = ll;
                fitted.recall_max = recall;
                fitted.points_at_half_recall = n50;
                fitted.miss_range_gain_per_m = m;
            }
        }
    }
    fitted
}

impl DetectorNoiseProfile {
    /// Measures a detector's profile from its boxes and the truth of the same frames (any frame,
    /// e.g. the sensor frame; `EvalBox::num_points` of the truth drives the sparsity terms, which
    /// are left out when any truth box lacks it). Detections match the nearest same-class true
    /// box within a BEV centre gate (2 / 1 / 1.5 m for vehicle / pedestrian / cyclist), highest
    /// score first; a yaw error beyond ±π/2 counts as a flip; the BEV centre error gets a heavy
    /// tail (`center_outlier_*`) only when a two-component fit beats one Gaussian by BIC. Classes
    /// with fewer than `FIT_MIN_MATCHES` matches keep `DetectorNoiseProfile::default()`'s values.
    /// The method is written out in `docs/simulator.md`.
    pub fn fit(truth: &[EvalBox], detections: &[EvalBox]) -> DetectorNoiseProfile {
        let default = DetectorNoiseProfile::default();
        let mut frames: std::collections::BTreeMap<&FrameKey, (Vec<&EvalBox>, Vec<&EvalBox>)> = Default::default();
        for t in truth {
            frames.entry(&t.frame).or_default().0.push(t);
        }
        for d in detections {
            frames.entry(&d.frame).or_default().1.push(d);
        }
        let mut pairs: [Vec<FitPair>; 3] = Default::default();
        let mut truths: [Vec<FitTruth>; 3] = Default::default();
        // (class index, score) of unmatched detections; (quality, score) of matched ones.
        let mut false_positives: Vec<(usize, f64)> = Vec::new();
        let mut calibration: Vec<(f64, f64)> = Vec::new();
        let mut max_detected_range: f64 = 0.0;
        let mut min_score = f64::INFINITY;
        for (gt, det) in frames.values() {
            let mut taken = vec![false; gt.len()];
            let mut order: Vec<&&EvalBox> = det.iter().collect();
            order.sort_by(|a, b| b.score.total_cmp(&a.score));
            for d in order {
                min_score = min_score.min(d.score);
                let c = class_index(d.class);
                let gate = match_gate_m(d.class);
                let nearest = gt
                    .iter()
                    .enumerate()
                    .filter(|(i, t)| !taken[*i] && class_index(t.class) == c)
                    .map(|(i, t)| (i, (t.bbox.x - d.bbox.x).hypot(t.bbox.y - d.bbox.y)))
                    .filter(|(_, dist)| *dist <= gate)
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                let Some((i, _)) = nearest else {
                    false_positives.push((c, d.score));
                    continue;
                };
                taken[i] = true;
                let t = &gt[i].bbox;
                let b = &d.bbox;
                let dyaw = wrap_angle(b.yaw - t.yaw);
                let flipped = dyaw.abs() > std::f64::consts::FRAC_PI_2;
                let range_m = bev_range(t);
                max_detected_range = max_detected_range.max(range_m);
                pairs[c].push(FitPair {
                    track: gt[i].track_id.clone().map(|id| (gt[i].frame.sequence.clone(), id)),
                    range_m,
                    points: gt[i].num_points,
                    centre: [b.x - t.x, b.y - t.y, b.z - t.z],
                    log_size: [(b.l / t.l).ln(), (b.w / t.w).ln(), (b.h / t.h).ln()],
                    yaw: if flipped {
                        wrap_angle(dyaw + std::f64::consts::PI)
                    } else {
                        dyaw
                    },
                    flipped,
                });
                calibration.push((iou_bev(b, t), d.score));
            }
            for (t, taken) in gt.iter().zip(&taken) {
                truths[class_index(t.class)].push(FitTruth {
                    range_m: bev_range(&t.bbox),
                    points: t.num_points,
                    detected: *taken,
                });
            }
        }
        let max_range_m = if pairs.iter().all(Vec::is_empty) {
            default.max_range_m
        } else {
            max_detected_range
        };
        let classes = [&default.vehicle, &default.pedestrian, &default.cyclist];
        let [vehicle, pedestrian, cyclist] =
            std::array::from_fn(|c| fit_class(&pairs[c], &truths[c], max_range_m, classes[c]));
        let mut fitted = DetectorNoiseProfile {
            name: "fitted".to_string(),
            max_range_m,
            min_score: if min_score.is_finite() {
                min_score
            } else {
                default.min_score
            },
            vehicle,
            pedestrian,
            cyclist,
            false_positives_per_frame: false_positives.len() as f64 / frames.len().max(1) as f64,
            ..default.clone()
        };
        if !false_positives.is_empty() {
            let mut share = [0.0; 3];
            for (c, _) in &false_positives {
                share[*c] += 1.0 / false_positives.len() as f64;
            }
            fitted.false_positive_class_share = share;
        }
        // Score calibration: logit(score) = slope·quality + intercept + noise.
        let rows: Vec<([f64; 2], f64)> = calibration.iter().map(|&(q, s)| ([1.0, q], logit(s))).collect();
        if calibration.len() >= FIT_MIN_MATCHES
            && let Some([intercept, slope]) = least_squares(&rows)
            && slope > 1e-6
        {
            fitted.score_slope = slope;
            fitted.score_quality_mid = -intercept / slope;
            let residual: f64 = rows.iter().map(|(x, y)| (y - intercept - slope * x[1]).powi(2)).sum();
            fitted.score_noise = (residual / (rows.len() - 2) as f64).sqrt();
            if !false_positives.is_empty() {
                // FP logit mean = slope·(Q/2 − mid) ⇒ Q = 2·(mean/slope + mid).
                let mean = false_positives.iter().map(|(_, s)| logit(*s)).sum::<f64>() / false_positives.len() as f64;
                fitted.false_positive_quality_max = (2.0 * (mean / slope + fitted.score_quality_mid)).clamp(0.0, 1.0);
            }
        }
        fitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_mean_and_variance_match() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let draws: Vec<f64> = (0..20_000).map(|_| poisson(2.5, &mut rng) as f64).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!((mean - 2.5).abs() < 0.05, "mean {mean}");
        assert!((var - 2.5).abs() < 0.1, "variance {var}");
        assert_eq!(poisson(0.0, &mut rng), 0);
    }

    #[test]
    fn detection_probability_follows_points_and_range() {
        let c = ClassNoise {
            recall_max: 0.9,
            points_at_half_recall: 10.0,
            miss_range_gain_per_m: 0.005,
            ..ClassNoise::default()
        };
        // n = n50 ⇒ half of recall_max; range 40 m ⇒ × 0.8.
        assert!((c.detection_probability(0.0, 10) - 0.45).abs() < 1e-12);
        assert!((c.detection_probability(40.0, 10) - 0.36).abs() < 1e-12);
        assert_eq!(c.detection_probability(0.0, 0), 0.0);
        assert_eq!(ClassNoise::exact().detection_probability(500.0, 0), 1.0);
    }

    #[test]
    fn growth_and_flip_probability_hand_values() {
        let c = ClassNoise {
            range_gain_per_m: 0.02,
            sparsity_gain: 1.0,
            sparse_points: 20.0,
            flip_probability_dense: 0.0,
            flip_probability_sparse: 0.4,
            ..ClassNoise::default()
        };
        // 1 + 0.02·50 + 20/(20+20) = 2.5
        assert!((c.growth(50.0, 20) - 2.5).abs() < 1e-12);
        assert!((c.flip_probability(20) - 0.2).abs() < 1e-12);
        assert!((c.flip_probability(0) - 0.4).abs() < 1e-12);
    }

    #[test]
    fn false_positive_on_a_wall_sits_on_its_facing_side() {
        let wall = Box3::new(20.0, 0.0, 1.0, 0.3, 10.0, 2.0, 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..50 {
            let p = place_on(&wall, 1.7, &mut rng).unwrap();
            // The wall is thin along x; the side facing the origin is x = −0.15 (local).
            assert!((p.x + 0.15).abs() < 1e-12 && p.y.abs() <= 5.0, "{p}");
            assert!((p.z - (-1.0 + 0.85)).abs() < 1e-12);
        }
    }
}
