//! A seeded detection-noise model: turns ground-truth boxes into the detections a LiDAR 3D
//! detector would plausibly output — centre, size, yaw and z errors that grow with BEV range and
//! with sparsity (few LiDAR returns), heading flips by π, misses that grow as returns fall,
//! false positives on static clutter, and scores calibrated on each box's hidden BEV IoU.
//! Every draw comes from a generator seeded by (seed, detector name, frame, track id), so any
//! frame and object can be asked for in any order. Definitions are in `docs/simulator.md`.

use nalgebra::{Point3, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::lidar::gaussian;
use super::simulator::{ObjectTruth, mix_seed};
use crate::detect::Detection;
use crate::frame::ObjectClass;
use crate::geometry::{Box3, iou_bev, wrap_angle};

/// Stream tags: one per kind of draw, so object and false-positive generators never coincide.
const STREAM_OBJECT: u64 = 0x6f62_6a65_6374;
const STREAM_FALSE_POSITIVE: u64 = 0x6661_6c73_6570;

/// How one detector errs on one class. `growth(r, n) = 1 + range_gain_per_m·r +
/// sparsity_gain·sparsity(n)` with `sparsity(n) = sparse_points / (sparse_points + n)` scales
/// every σ below (`r` = BEV range of the true centre, `n` = its LiDAR returns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassNoise {
    /// σ of the centre error along each BEV axis at range 0 with dense points (m); default 0.10.
    pub center_sigma_m: f64,
    /// σ of the centre error along z at range 0 with dense points (m); default 0.08.
    pub z_sigma_m: f64,
    /// σ of the log of each extent's scale factor (unitless; 0.05 ≈ 5 %); default 0.05.
    pub size_sigma: f64,
    /// Multiplicative bias of every extent (unitless; < 1 under-estimates); default 1.0.
    pub size_bias: f64,
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
            z_sigma_m: 0.08,
            size_sigma: 0.05,
            size_bias: 1.0,
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
            z_sigma_m: 0.0,
            size_sigma: 0.0,
            size_bias: 1.0,
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
    /// Errors on pedestrians; default `ClassNoise::default()` with 0.06 m centre σ, 0.08 size σ,
    /// 0.3 rad yaw σ and flip probabilities 0.10 / 0.30.
    pub pedestrian: ClassNoise,
    /// Errors on cyclists; default `ClassNoise::default()` with 0.08 m centre σ, 0.15 rad yaw σ.
    pub cyclist: ClassNoise,
    /// Mean number of false positives per frame (Poisson), placed on static clutter; default 1.0.
    pub false_positives_per_frame: f64,
    /// Share of false positives per class `[vehicle, pedestrian, cyclist]` (unitless, normalised
    /// when drawn); default `[0.4, 0.45, 0.15]`.
    pub false_positive_class_share: [f64; 3],
    /// False positives get a hidden quality uniform in `[0, this]` in place of an IoU
    /// (unitless); default 0.5.
    pub false_positive_quality_max: f64,
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
                center_sigma_m: 0.06,
                size_sigma: 0.08,
                yaw_sigma_rad: 0.3,
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
            false_positive_class_share: [0.4, 0.45, 0.15],
            false_positive_quality_max: 0.5,
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
            center_sigma_m: 0.09,
            z_sigma_m: 0.08,
            size_sigma: 0.10,
            yaw_sigma_rad: 0.35,
            range_gain_per_m: 0.015,
            flip_probability_dense: 0.15,
            flip_probability_sparse: 0.35,
            recall_max: 0.85,
            points_at_half_recall: 12.0,
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
        false_positive_class_share: [0.35, 0.5, 0.15],
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
            center_sigma_m: 0.06,
            size_sigma: 0.08,
            yaw_sigma_rad: 0.25,
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
        false_positive_class_share: [0.4, 0.45, 0.15],
        false_positive_quality_max: 0.6,
        ..base.clone()
    };
    let second_shifted = DetectorNoiseProfile {
        name: "second_shifted".to_string(),
        vehicle: ClassNoise {
            center_sigma_m: 0.15,
            z_sigma_m: 0.12,
            size_sigma: 0.07,
            size_bias: 0.92,
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
            center_sigma_m: 0.10,
            z_sigma_m: 0.10,
            size_sigma: 0.12,
            size_bias: 0.93,
            yaw_sigma_rad: 0.4,
            range_gain_per_m: 0.02,
            flip_probability_dense: 0.15,
            flip_probability_sparse: 0.35,
            recall_max: 0.80,
            points_at_half_recall: 15.0,
            miss_range_gain_per_m: 0.005,
            ..ClassNoise::default()
        },
        cyclist: ClassNoise {
            center_sigma_m: 0.12,
            size_sigma: 0.10,
            size_bias: 0.93,
            yaw_sigma_rad: 0.2,
            flip_probability_dense: 0.05,
            flip_probability_sparse: 0.25,
            recall_max: 0.80,
            points_at_half_recall: 12.0,
            miss_range_gain_per_m: 0.004,
            ..ClassNoise::default()
        },
        false_positives_per_frame: 2.0,
        false_positive_class_share: [0.45, 0.4, 0.15],
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
        // Fixed draw order: detection, centre, size, yaw, flip, score.
        let n = object.num_lidar_points;
        if rng.random::<f64>() >= noise.detection_probability(range, n) {
            return None;
        }
        let g = noise.growth(range, n);
        let mut b = *truth;
        b.x += noise.center_sigma_m * g * gaussian(&mut rng);
        b.y += noise.center_sigma_m * g * gaussian(&mut rng);
        b.z += noise.z_sigma_m * g * gaussian(&mut rng);
        b.l *= noise.size_bias * (noise.size_sigma * g * gaussian(&mut rng)).exp();
        b.w *= noise.size_bias * (noise.size_sigma * g * gaussian(&mut rng)).exp();
        b.h *= noise.size_bias * (noise.size_sigma * g * gaussian(&mut rng)).exp();
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
    /// of unlabelled static things) within `max_range_m`, with class-typical sizes.
    pub fn false_positives(&self, frame_index: usize, clutter: &[Box3]) -> Vec<Detection> {
        let p = &self.profile;
        let candidates: Vec<&Box3> = clutter
            .iter()
            .filter(|c| bev_range(c) - 0.5 * c.l.hypot(c.w) <= p.max_range_m)
            .collect();
        if candidates.is_empty() {
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
        let total: f64 = share.iter().sum();
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let clutter = candidates[rng.random_range(0..candidates.len())];
            let u = rng.random::<f64>() * total;
            let class = if u < share[0] || total <= 0.0 {
                ObjectClass::Vehicle
            } else if u < share[0] + share[1] {
                ObjectClass::Pedestrian
            } else {
                ObjectClass::Cyclist
            };
            let size = typical_size(class).map(|v| v * (0.08 * gaussian(&mut rng)).exp());
            let Some(local) = place_on(clutter, size.z, &mut rng) else {
                continue;
            };
            let centre = clutter.parent_from_box() * local;
            let centre_range = centre.x.hypot(centre.y);
            if centre_range.is_nan() || centre_range > p.max_range_m {
                continue;
            }
            let turn = f64::from(rng.random_range(0..4u8)) * std::f64::consts::FRAC_PI_2;
            let b = Box3 {
                x: centre.x,
                y: centre.y,
                z: centre.z,
                l: size.x,
                w: size.y,
                h: size.z,
                yaw: wrap_angle(clutter.yaw + turn + 0.1 * gaussian(&mut rng)),
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

    /// Detections of one frame, in the sensor frame (same frame as `ObjectTruth::box_in_sensor`).
    pub fn detect(
        &self,
        frame_index: usize,
        objects: &[ObjectTruth],
        clutter: &[Box3],
    ) -> Vec<crate::detect::Detection> {
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
