//! One frame's detections → fused boxes, class by class, with the configured method.

use super::cluster::radius_clusters;
use super::config::{ClassFusionConfig, FusionConfig, FusionMethod};
use super::kbf::{KbfMember, KbfScratch, fuse_cluster_in};
use super::wbf::weighted_boxes_fusion;
use super::{FuseError, FusedBox};
use crate::boxes::Detection;
use crate::frame::{ObjectClass, Platform};
use crate::geometry::{Box3, iou_bev, nms_bev};

/// A validated fusion configuration for one platform, ready to fuse frames.
#[derive(Debug, Clone)]
pub struct Fuser {
    config: FusionConfig,
    platform: Platform,
}

/// Fuses one frame's detections (all detectors, one shared frame) with `config` as resolved for
/// `platform`. Builds a [`Fuser`] each call; keep one to fuse many frames.
pub fn fuse_boxes(
    detections: &[Detection],
    config: &FusionConfig,
    platform: Platform,
) -> Result<Vec<FusedBox>, FuseError> {
    Fuser::new(config, platform)?.fuse(detections)
}

/// Whether a detector (by name) could have seen a box at a place (in the frame fused in).
pub type Sees<'a> = &'a (dyn Fn(&str, &Box3) -> bool + Sync);

/// The detectors a frame was run with and where each can see. A detector that could not have
/// seen a box's place (outside its input grid) does not count against it in the vote share
/// (KBF's `score_by_detector_share`, WBF's rescaling); one with no box in the frame still does.
#[derive(Clone, Copy)]
pub struct Roster<'a> {
    /// Every detector run on the frame, also those with no box in it.
    pub detectors: &'a [&'a str],
    /// Whether `detector` could have seen a box at `box3` (in the frame fused in).
    pub sees: Sees<'a>,
}

/// The frame's detectors and their view: the roster's (and any other that voted), or, without
/// a roster, those with a box in the frame, each seeing everywhere.
struct Voters<'a> {
    all: Vec<&'a str>,
    sees: Option<Sees<'a>>,
}

impl Voters<'_> {
    /// The detectors that could have voted for `b`: those that did and those that see its place.
    /// With `where_seen` false, every detector of the frame.
    fn eligible<'s>(
        &'s self,
        voted: &'s [String],
        b: &'s Box3,
        where_seen: bool,
    ) -> impl Iterator<Item = &'s str> + 's {
        let sees = self.sees.filter(|_| where_seen);
        self.all
            .iter()
            .copied()
            .filter(move |d| sees.is_none_or(|sees| sees(d, b)) || voted.iter().any(|v| v == d))
    }
}

/// The input boxes of one class that pass its score threshold and weigh more than zero.
struct ClassInput {
    /// Indices into the frame's detections.
    indices: Vec<usize>,
    /// Detector weight of each.
    detector_weights: Vec<f64>,
}

impl Fuser {
    /// Resolves `config` for `platform` and validates it.
    pub fn new(config: &FusionConfig, platform: Platform) -> Result<Self, FuseError> {
        config.validate()?;
        Ok(Self {
            config: config.for_platform(platform)?,
            platform,
        })
    }

    /// The resolved configuration in force.
    pub fn config(&self) -> &FusionConfig {
        &self.config
    }

    /// The platform the configuration was resolved for.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// Fuses one frame: every enabled class in `ObjectClass::ALL` order, each class's boxes by
    /// descending score (ties by first member). Fails on a detection with non-finite values, a
    /// negative size or a score outside [0, 1].
    pub fn fuse(&self, detections: &[Detection]) -> Result<Vec<FusedBox>, FuseError> {
        self.fuse_with(detections, None)
    }

    /// Fuses one frame as [`Fuser::fuse`] does, with the vote shares taken over `roster`: every
    /// detector run on the frame, each counted only where it could see.
    pub fn fuse_with(&self, detections: &[Detection], roster: Option<&Roster>) -> Result<Vec<FusedBox>, FuseError> {
        validate_detections(detections)?;
        let mut detectors: Vec<&str> = detections.iter().map(|d| d.detector.as_str()).collect();
        if let Some(r) = roster {
            detectors.extend_from_slice(r.detectors);
        }
        detectors.sort_unstable();
        detectors.dedup();
        let voters = Voters {
            all: detectors,
            sees: roster.map(|r| r.sees),
        };
        let mut out = Vec::new();
        for class in ObjectClass::ALL {
            let config = self.config.class(class);
            if !config.enabled {
                continue;
            }
            let input = select(detections, class, config);
            if input.indices.is_empty() {
                continue;
            }
            let mut fused = match self.config.method {
                FusionMethod::Kbf => kbf(detections, &input, class, config, &voters)?,
                FusionMethod::Wbf => wbf(detections, &input, class, config, &voters),
                FusionMethod::SingleDetector => single_detector(detections, &input, class, config, &voters.all),
                FusionMethod::UnionNms => union_nms(detections, &input, class, config),
            };
            fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.members.cmp(&b.members)));
            out.extend(fused);
        }
        Ok(out)
    }
}

fn validate_detections(detections: &[Detection]) -> Result<(), FuseError> {
    for (index, d) in detections.iter().enumerate() {
        let reason = if !d.box3.to_array().iter().all(|v| v.is_finite()) {
            Some("box has a non-finite value".to_string())
        } else if d.box3.l < 0.0 || d.box3.w < 0.0 || d.box3.h < 0.0 {
            Some(format!("negative size ({}, {}, {})", d.box3.l, d.box3.w, d.box3.h))
        } else if !(0.0..=1.0).contains(&d.score) {
            Some(format!("score {} is outside [0, 1]", d.score))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(FuseError::Detection {
                index,
                detector: d.detector.clone(),
                reason,
            });
        }
    }
    Ok(())
}

fn select(detections: &[Detection], class: ObjectClass, config: &ClassFusionConfig) -> ClassInput {
    let mut input = ClassInput {
        indices: Vec::new(),
        detector_weights: Vec::new(),
    };
    for (i, d) in detections.iter().enumerate() {
        if d.class != class || f64::from(d.score) <= config.score_threshold {
            continue;
        }
        let w = config.detector_weight(&d.detector);
        if w * f64::from(d.score) > 0.0 {
            input.indices.push(i);
            input.detector_weights.push(w);
        }
    }
    input
}

/// A fused box's bookkeeping: members (input indices, ascending), votes and detector names.
fn fused_box(
    detections: &[Detection],
    mut members: Vec<usize>,
    box3: Box3,
    class: ObjectClass,
    score: f64,
) -> FusedBox {
    members.sort_unstable();
    let mut names: Vec<String> = members.iter().map(|&i| detections[i].detector.clone()).collect();
    names.sort_unstable();
    names.dedup();
    FusedBox {
        box3,
        class,
        score: score.clamp(0.0, 1.0) as f32,
        votes: members.len() as u32,
        detectors: names,
        members,
    }
}

/// The share of the weight of the detectors that could have voted for `b` held by those that did.
fn detector_share(voted: &[String], b: &Box3, voters: &Voters, config: &ClassFusionConfig) -> f64 {
    let total: f64 = voters
        .eligible(voted, b, config.share_where_seen)
        .map(|d| config.detector_weight(d))
        .sum();
    if total <= 0.0 {
        return 1.0;
    }
    voted.iter().map(|d| config.detector_weight(d)).sum::<f64>() / total
}

/// The members' weighted agreement with the fused centre, `Σ wᵢ·exp(−dᵢ²/2s²) / Σ wᵢ` in (0, 1]
/// (dᵢ: BEV distance of member i's centre from `fused`'s); 1 when the weights sum to 0.
fn centre_agreement(members: &[KbfMember], fused: &Box3, sigma_m: f64) -> f64 {
    let total: f64 = members.iter().map(|m| m.weight).sum();
    if total <= 0.0 {
        return 1.0;
    }
    let scale = -0.5 / (sigma_m * sigma_m);
    members
        .iter()
        .map(|m| {
            let d2 = (m.box3.x - fused.x).powi(2) + (m.box3.y - fused.y).powi(2);
            m.weight * (scale * d2).exp()
        })
        .sum::<f64>()
        / total
}

fn kbf(
    detections: &[Detection],
    input: &ClassInput,
    class: ObjectClass,
    config: &ClassFusionConfig,
    voters: &Voters,
) -> Result<Vec<FusedBox>, FuseError> {
    let centres: Vec<[f64; 3]> = input
        .indices
        .iter()
        .map(|&i| {
            let b = &detections[i].box3;
            [b.x, b.y, b.z]
        })
        .collect();
    let clusters = radius_clusters(&centres, config.radius_m, config.min_votes as usize)?;
    let mut fused = Vec::with_capacity(clusters.len());
    let mut members = Vec::new();
    let mut scratch = KbfScratch::default();
    for cluster in clusters {
        members.clear();
        members.extend(cluster.iter().map(|&k| {
            let d = &detections[input.indices[k]];
            let score = f64::from(d.score);
            KbfMember {
                box3: d.box3,
                score,
                weight: score * input.detector_weights[k],
            }
        }));
        let (box3, score) = fuse_cluster_in(&members, config, &mut scratch)?;
        let indices = cluster.iter().map(|&k| input.indices[k]).collect();
        let mut b = fused_box(detections, indices, box3, class, score);
        if config.score_by_detector_share {
            b.score = (f64::from(b.score) * detector_share(&b.detectors, &b.box3, voters, config)) as f32;
        }
        if config.agreement_sigma_m > 0.0 {
            b.score = (f64::from(b.score) * centre_agreement(&members, &box3, config.agreement_sigma_m)) as f32;
        }
        fused.push(b);
    }
    let boxes: Vec<Box3> = fused.iter().map(|b| b.box3).collect();
    let scores: Vec<f32> = fused.iter().map(|b| b.score).collect();
    let kept = nms_bev(&boxes, &scores, config.nms_iou);
    let mut slots: Vec<Option<FusedBox>> = fused.into_iter().map(Some).collect();
    Ok(kept.into_iter().filter_map(|k| slots[k].take()).collect())
}

fn wbf(
    detections: &[Detection],
    input: &ClassInput,
    class: ObjectClass,
    config: &ClassFusionConfig,
    voters: &Voters,
) -> Vec<FusedBox> {
    let boxes: Vec<Box3> = input.indices.iter().map(|&i| detections[i].box3).collect();
    let scores: Vec<f64> = input.indices.iter().map(|&i| f64::from(detections[i].score)).collect();
    let clusters = weighted_boxes_fusion(&boxes, &scores, &input.detector_weights, config.wbf_iou);
    // ZFTurbo's rescaling: avg(score × weight) × min(#models, #boxes) / Σ model weights, with the
    // frame's detectors that could have seen the box as the models.
    clusters
        .into_iter()
        .map(|c| {
            let indices = c.members.iter().map(|&k| input.indices[k]).collect();
            let mut b = fused_box(detections, indices, c.box3, class, 0.0);
            let (models, model_weight) = voters
                .eligible(&b.detectors, &b.box3, config.share_where_seen)
                .fold((0usize, 0.0), |(n, w), d| (n + 1, w + config.detector_weight(d)));
            let n = c.members.len() as f64;
            let score = if model_weight > 0.0 {
                c.mean_weighted_score * (models.max(1) as f64).min(n) / model_weight
            } else {
                c.mean_weighted_score
            };
            b.score = score.clamp(0.0, 1.0) as f32;
            b
        })
        .collect()
}

fn single_detector(
    detections: &[Detection],
    input: &ClassInput,
    class: ObjectClass,
    config: &ClassFusionConfig,
    all_detectors: &[&str],
) -> Vec<FusedBox> {
    let chosen: Option<&str> = match &config.single_detector {
        Some(name) => Some(name.as_str()),
        None => all_detectors.iter().copied().max_by(|a, b| {
            config
                .detector_weight(a)
                .total_cmp(&config.detector_weight(b))
                .then(b.cmp(a))
        }),
    };
    let Some(chosen) = chosen else {
        return Vec::new();
    };
    input
        .indices
        .iter()
        .filter(|&&i| detections[i].detector == chosen)
        .map(|&i| {
            let d = &detections[i];
            fused_box(detections, vec![i], d.box3, class, f64::from(d.score))
        })
        .collect()
}

fn union_nms(
    detections: &[Detection],
    input: &ClassInput,
    class: ObjectClass,
    config: &ClassFusionConfig,
) -> Vec<FusedBox> {
    let boxes: Vec<Box3> = input.indices.iter().map(|&i| detections[i].box3).collect();
    let scores: Vec<f32> = input.indices.iter().map(|&i| detections[i].score).collect();
    let kept = nms_bev(&boxes, &scores, config.union_nms_iou);
    // Each suppressed box votes for the kept box it overlaps most (one exists above the threshold).
    let mut voters: Vec<Vec<usize>> = kept.iter().map(|&k| vec![k]).collect();
    let mut is_kept = vec![false; boxes.len()];
    for &k in &kept {
        is_kept[k] = true;
    }
    for j in (0..boxes.len()).filter(|&j| !is_kept[j]) {
        let best = kept
            .iter()
            .enumerate()
            .filter(|&(_, &k)| footprints_may_touch(&boxes[k], &boxes[j]))
            .map(|(slot, &k)| (slot, iou_bev(&boxes[k], &boxes[j])))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        if let Some((slot, _)) = best {
            voters[slot].push(j);
        }
    }
    kept.iter()
        .zip(voters)
        .map(|(&k, v)| {
            let indices = v.iter().map(|&j| input.indices[j]).collect();
            let d = &detections[input.indices[k]];
            fused_box(detections, indices, d.box3, class, f64::from(d.score))
        })
        .collect()
}

/// Whether the BEV circumscribed circles of two boxes meet (a cheap test before an exact IoU).
pub(crate) fn footprints_may_touch(a: &Box3, b: &Box3) -> bool {
    let reach = 0.5 * (a.l.hypot(a.w) + b.l.hypot(b.w));
    let (dx, dy) = (a.x - b.x, a.y - b.y);
    dx * dx + dy * dy <= reach * reach
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(x: f64, y: f64, yaw: f64, score: f32, detector: &str) -> Detection {
        Detection {
            box3: Box3::new(x, y, 0.8, 4.5, 1.9, 1.6, yaw),
            class: ObjectClass::Vehicle,
            score,
            detector: detector.into(),
        }
    }

    fn config(method: FusionMethod, min_votes: u32) -> FusionConfig {
        let mut c = FusionConfig {
            method,
            ..FusionConfig::default()
        };
        c.vehicle.min_votes = min_votes;
        c
    }

    #[test]
    fn kbf_drops_singletons_and_records_voters() {
        let dets = vec![
            det(10.0, 0.0, 0.0, 0.9, "a"),
            det(10.2, 0.1, 0.02, 0.8, "b"),
            det(10.1, -0.1, 0.01, 0.7, "c"),
            det(40.0, 5.0, 1.0, 0.95, "a"), // alone
        ];
        let fused = fuse_boxes(&dets, &config(FusionMethod::Kbf, 2), Platform::Vehicle).unwrap();
        assert_eq!(fused.len(), 1);
        assert_eq!(fused[0].votes, 3);
        assert_eq!(fused[0].detectors, vec!["a", "b", "c"]);
        assert_eq!(fused[0].members, vec![0, 1, 2]);
        // With min_votes 1 the loner survives too, as itself.
        let fused = fuse_boxes(&dets, &config(FusionMethod::Kbf, 1), Platform::Vehicle).unwrap();
        assert_eq!(fused.len(), 2);
        let loner = fused.iter().find(|b| b.members == vec![3]).unwrap();
        assert_eq!((loner.box3, loner.votes, loner.score), (dets[3].box3, 1, 0.95));
    }

    #[test]
    fn baselines_on_one_frame() {
        let dets = vec![
            det(10.0, 0.0, 0.0, 0.9, "a"),
            det(10.2, 0.1, 0.02, 0.6, "b"),
            det(40.0, 5.0, 1.0, 0.5, "b"),
            det(40.0, 5.0, 1.0, 0.1, "c"), // below the 0.2 score threshold
        ];
        let union = fuse_boxes(&dets, &config(FusionMethod::UnionNms, 3), Platform::Vehicle).unwrap();
        assert_eq!(union.len(), 2);
        assert_eq!((union[0].members.clone(), union[0].votes), (vec![0, 1], 2));
        assert_eq!(union[0].box3, dets[0].box3);
        let wbf = fuse_boxes(&dets, &config(FusionMethod::Wbf, 3), Platform::Vehicle).unwrap();
        assert_eq!(wbf.len(), 2);
        // Three detectors in the frame (c counts though its box is dropped): the pair scores
        // avg(0.9, 0.6) × 2/3, the loner 0.5 × 1/3.
        approx::assert_relative_eq!(wbf[0].score, 0.5, max_relative = 1e-6);
        approx::assert_relative_eq!(wbf[1].score, 0.5 / 3.0, max_relative = 1e-6);
        let mut single = config(FusionMethod::SingleDetector, 3);
        single.vehicle.single_detector = Some("b".into());
        let only_b = fuse_boxes(&dets, &single, Platform::Vehicle).unwrap();
        assert_eq!(only_b.iter().map(|b| b.members[0]).collect::<Vec<_>>(), vec![1, 2]);
        single.vehicle.single_detector = None;
        single.vehicle.detector_weights.insert("c".into(), 3.0);
        // c is the heaviest, but its only box is below the threshold.
        assert!(fuse_boxes(&dets, &single, Platform::Vehicle).unwrap().is_empty());
    }

    #[test]
    fn a_detector_that_cannot_see_a_place_does_not_count_against_a_box_there() {
        // a and b see ±60 m, c only ±40 m; d ran on the frame and found nothing.
        let dets = vec![
            det(10.0, 0.0, 0.0, 0.8, "a"),
            det(10.1, 0.0, 0.0, 0.8, "b"),
            det(10.0, 0.1, 0.0, 0.8, "c"),
            det(50.0, 0.0, 0.0, 0.8, "a"),
            det(50.1, 0.0, 0.0, 0.8, "b"),
        ];
        let sees = |name: &str, b: &Box3| {
            if name == "c" {
                b.x.abs() <= 40.0
            } else {
                b.x.abs() <= 60.0
            }
        };
        let roster = Roster {
            detectors: &["a", "b", "c", "d"],
            sees: &sees,
        };
        let mut kbf_config = config(FusionMethod::Kbf, 1);
        kbf_config.vehicle.score_by_detector_share = true;
        let fuser = Fuser::new(&kbf_config, Platform::Vehicle).unwrap();
        let score_at = |fused: &[FusedBox], x: f64| fused.iter().find(|b| (b.box3.x - x).abs() < 1.0).unwrap().score;
        // Without a roster: the three detectors with boxes, seeing everywhere.
        let plain = fuser.fuse(&dets).unwrap();
        approx::assert_relative_eq!(score_at(&plain, 10.0), 0.8, max_relative = 1e-6);
        approx::assert_relative_eq!(score_at(&plain, 50.0), 0.8 * 2.0 / 3.0, max_relative = 1e-6);
        // With it: d counts everywhere (3 of 4 near, 2 of 3 far: c cannot see 50 m).
        let seen = fuser.fuse_with(&dets, Some(&roster)).unwrap();
        approx::assert_relative_eq!(score_at(&seen, 10.0), 0.8 * 3.0 / 4.0, max_relative = 1e-6);
        approx::assert_relative_eq!(score_at(&seen, 50.0), 0.8 * 2.0 / 3.0, max_relative = 1e-6);
        // WBF's models are the detectors that could have seen the box: avg × min(n, models) / models.
        let wbf = Fuser::new(&config(FusionMethod::Wbf, 1), Platform::Vehicle).unwrap();
        let seen = wbf.fuse_with(&dets, Some(&roster)).unwrap();
        approx::assert_relative_eq!(score_at(&seen, 10.0), 0.8 * 3.0 / 4.0, max_relative = 1e-6);
        approx::assert_relative_eq!(score_at(&seen, 50.0), 0.8 * 2.0 / 3.0, max_relative = 1e-6);
        // Told to count every detector of the frame: d and c count everywhere.
        let mut everywhere = kbf_config.clone();
        everywhere.vehicle.share_where_seen = false;
        let seen = Fuser::new(&everywhere, Platform::Vehicle)
            .unwrap()
            .fuse_with(&dets, Some(&roster))
            .unwrap();
        approx::assert_relative_eq!(score_at(&seen, 50.0), 0.8 * 2.0 / 4.0, max_relative = 1e-6);
        // A voter counts even where its view says it cannot see.
        let blind = |_: &str, _: &Box3| false;
        let roster = Roster {
            detectors: &["a", "b", "c", "d"],
            sees: &blind,
        };
        let seen = fuser.fuse_with(&dets, Some(&roster)).unwrap();
        approx::assert_relative_eq!(score_at(&seen, 10.0), 0.8, max_relative = 1e-6);
    }

    #[test]
    fn bad_detection_is_named() {
        let mut d = det(0.0, 0.0, 0.0, 0.5, "pp");
        d.box3.l = f64::NAN;
        let err = fuse_boxes(
            &[det(1.0, 1.0, 0.0, 0.5, "a"), d],
            &FusionConfig::default(),
            Platform::Drone,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("detection 1") && err.contains("`pp`"), "{err}");
    }
}
