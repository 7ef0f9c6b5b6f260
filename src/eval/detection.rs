//! Detection AP per class: greedy score-ranked matching per frame (each prediction takes the
//! unmatched GT box it overlaps most, one GT per prediction), then 40-point and all-point AP, recall
//! and precision at a fixed score, mean errors of the matches, and the same AP restricted to
//! range, points-in-box and platform bins.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::affinity::{IouKind, affinity};
use super::ap::{ap_all_points, ap_r40};
use super::config::{DetectionConfig, ThresholdRule};
use super::input::{EvalBox, FrameKey};
use crate::frame::{ObjectClass, Platform};
use crate::geometry::wrap_angle;

use super::ap::ScoredMatch;

/// What became of one prediction in a frame's matching.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum MatchOutcome {
    /// Matched the GT box at this index with this affinity.
    TruePositive {
        /// Index of the GT box in the frame's GT list.
        gt: usize,
        /// The affinity of the pair (IoU, or minus the centre distance).
        affinity: f64,
    },
    /// Matched no GT box.
    FalsePositive,
    /// Matched only an ignored GT box: counted neither way.
    Ignored,
}

/// Greedy matching of one frame. `affinity[p][g]` is prediction p against GT g. Predictions are
/// taken by falling score (equal scores in input order); each takes the unmatched, not-ignored GT
/// box of highest affinity that passes `threshold` under `rule` (equal affinities: lowest index);
/// failing that, an unmatched ignored GT box that passes makes it `Ignored`; otherwise it is a
/// false positive. Returns one outcome per prediction, in input order.
pub fn match_frame(
    affinity: &[Vec<f64>],
    scores: &[f64],
    gt_ignored: &[bool],
    threshold: f64,
    rule: ThresholdRule,
) -> Vec<MatchOutcome> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut gt_taken = vec![false; gt_ignored.len()];
    let mut outcomes = vec![MatchOutcome::FalsePositive; scores.len()];
    for p in order {
        let best = |want_ignored: bool| {
            let mut best: Option<(usize, f64)> = None;
            for (g, &a) in affinity[p].iter().enumerate() {
                if gt_taken[g] || gt_ignored[g] != want_ignored || !rule.passes(a, threshold) {
                    continue;
                }
                if best.is_none_or(|(_, b)| a > b) {
                    best = Some((g, a));
                }
            }
            best
        };
        if let Some((g, a)) = best(false) {
            gt_taken[g] = true;
            outcomes[p] = MatchOutcome::TruePositive { gt: g, affinity: a };
        } else if let Some((g, _)) = best(true) {
            gt_taken[g] = true;
            outcomes[p] = MatchOutcome::Ignored;
        }
    }
    outcomes
}

/// Mean errors of the true positives (centre, size, yaw), over `num_matches` pairs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MatchErrors {
    /// Number of matched pairs the means are over.
    pub num_matches: usize,
    /// Mean 3D distance between matched centres (m).
    pub mean_center_error_m: Option<f64>,
    /// Mean absolute error of length, width and height (m).
    pub mean_size_error_m: Option<[f64; 3]>,
    /// Mean absolute yaw difference, wrapped to [0, π] (rad).
    pub mean_yaw_error_rad: Option<f64>,
}

/// AP of one class restricted to one bin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakdownResult {
    /// What the bins split by: `range_m`, `points` or `platform`.
    pub by: String,
    /// The bin (`0-30`, `50+`, `drone`).
    pub bin: String,
    /// GT boxes in the bin (not ignored).
    pub num_gt: usize,
    /// Predictions counted (true + false positives).
    pub num_pred: usize,
    /// 40-point AP.
    pub ap_r40: Option<f64>,
    /// All-point AP.
    pub ap_all_points: Option<f64>,
}

/// Detection results of one class, overlap measure and threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectionResult {
    /// The class.
    pub class: ObjectClass,
    /// The overlap measure.
    pub iou_kind: IouKind,
    /// The IoU threshold.
    pub threshold: f64,
    /// GT boxes counted (not ignored).
    pub num_gt: usize,
    /// Predictions counted (true + false positives).
    pub num_pred: usize,
    /// True positives.
    pub num_tp: usize,
    /// 40-point interpolated AP (KITTI R40); `None` without GT.
    pub ap_r40: Option<f64>,
    /// All-point interpolated AP; `None` without GT.
    pub ap_all_points: Option<f64>,
    /// The score at which recall and precision are reported.
    pub score_threshold: f64,
    /// Recall of the predictions with score ≥ `score_threshold`; `None` without GT.
    pub recall_at_score: Option<f64>,
    /// Precision of the predictions with score ≥ `score_threshold`; `None` without such predictions.
    pub precision_at_score: Option<f64>,
    /// Mean errors of the true positives.
    pub errors: MatchErrors,
    /// AP per range, points-in-box and platform bin.
    pub breakdowns: Vec<BreakdownResult>,
}

/// Indices of one frame's GT and predicted boxes.
#[derive(Default)]
pub(crate) struct FrameMembers {
    pub(crate) gt: Vec<usize>,
    pub(crate) pred: Vec<usize>,
}

/// One frame of one class: box indices and the affinity matrix `[pred][gt]`.
struct FrameCase {
    gt: Vec<usize>,
    pred: Vec<usize>,
    affinity: Vec<Vec<f64>>,
}

/// The counted predictions of one subset, and the matched (gt, pred) index pairs.
struct SubsetOutcome {
    matches: Vec<ScoredMatch>,
    num_gt: usize,
    pairs: Vec<(usize, usize)>,
}

/// How one subset is matched: threshold, rule and whether zero-point GT is ignored.
struct MatchSettings {
    threshold: f64,
    rule: ThresholdRule,
    ignore_zero_point_gt: bool,
}

/// Matches every frame with GT outside `gt_in` (and zero-point GT, if so set) ignored; unmatched
/// predictions count as false positives only inside `pred_in`.
fn evaluate_subset(
    cases: &[FrameCase],
    gt: &[EvalBox],
    pred: &[EvalBox],
    settings: &MatchSettings,
    gt_in: &dyn Fn(&EvalBox) -> bool,
    pred_in: &dyn Fn(&EvalBox) -> bool,
) -> SubsetOutcome {
    let MatchSettings {
        threshold,
        rule,
        ignore_zero_point_gt,
    } = *settings;
    let mut out = SubsetOutcome {
        matches: Vec::new(),
        num_gt: 0,
        pairs: Vec::new(),
    };
    for case in cases {
        let gt_ignored: Vec<bool> = case
            .gt
            .iter()
            .map(|&g| !gt_in(&gt[g]) || (ignore_zero_point_gt && gt[g].num_points == Some(0)))
            .collect();
        out.num_gt += gt_ignored.iter().filter(|i| !**i).count();
        let scores: Vec<f64> = case.pred.iter().map(|&p| pred[p].score).collect();
        let outcomes = match_frame(&case.affinity, &scores, &gt_ignored, threshold, rule);
        for (k, outcome) in outcomes.iter().enumerate() {
            let p = case.pred[k];
            match outcome {
                MatchOutcome::TruePositive { gt: g, .. } => {
                    out.matches.push(ScoredMatch {
                        score: pred[p].score,
                        is_tp: true,
                    });
                    out.pairs.push((case.gt[*g], p));
                }
                MatchOutcome::FalsePositive if pred_in(&pred[p]) => out.matches.push(ScoredMatch {
                    score: pred[p].score,
                    is_tp: false,
                }),
                MatchOutcome::FalsePositive | MatchOutcome::Ignored => {}
            }
        }
    }
    out
}

fn match_errors(pairs: &[(usize, usize)], gt: &[EvalBox], pred: &[EvalBox]) -> MatchErrors {
    if pairs.is_empty() {
        return MatchErrors::default();
    }
    let n = pairs.len() as f64;
    let (mut center, mut size, mut yaw) = (0.0, [0.0; 3], 0.0);
    for &(g, p) in pairs {
        let (a, b) = (&gt[g].bbox, &pred[p].bbox);
        center += (a.center() - b.center()).norm();
        size[0] += (a.l - b.l).abs();
        size[1] += (a.w - b.w).abs();
        size[2] += (a.h - b.h).abs();
        yaw += wrap_angle(b.yaw - a.yaw).abs();
    }
    MatchErrors {
        num_matches: pairs.len(),
        mean_center_error_m: Some(center / n),
        mean_size_error_m: Some(size.map(|s| s / n)),
        mean_yaw_error_rad: Some(yaw / n),
    }
}

/// BEV distance of a box centre from its frame's origin, the sensor (m).
fn bev_range_m(b: &EvalBox) -> f64 {
    b.bbox.x.hypot(b.bbox.y)
}

/// `"lo-hi"` for a closed bin, `"lo+"` for the last, open one.
fn range_label(edges: &[f64], i: usize) -> String {
    match edges.get(i + 1) {
        Some(hi) => format!("{}-{}", edges[i], hi),
        None => format!("{}+", edges[i]),
    }
}

/// Evaluates every configured class, overlap measure and threshold. Classes with an empty
/// threshold list are skipped; results are ordered by class, measure, then threshold as configured.
pub fn evaluate_detection(
    gt: &[EvalBox],
    pred: &[EvalBox],
    config: &DetectionConfig,
    rule: ThresholdRule,
) -> Vec<DetectionResult> {
    // Predictions may not carry a platform; they take the one of their frame's GT.
    let mut frame_platform: BTreeMap<&FrameKey, Platform> = BTreeMap::new();
    for b in gt {
        if let Some(p) = b.platform {
            frame_platform.entry(&b.frame).or_insert(p);
        }
    }
    let platform_of = |b: &EvalBox| b.platform.or_else(|| frame_platform.get(&b.frame).copied());
    let mut platforms: Vec<Platform> = gt.iter().filter_map(|b| b.platform).collect();
    platforms.sort();
    platforms.dedup();

    let mut results = Vec::new();
    for class in ObjectClass::ALL {
        let thresholds = config.thresholds.of(class);
        if thresholds.is_empty() {
            continue;
        }
        let mut by_frame: BTreeMap<&FrameKey, FrameMembers> = BTreeMap::new();
        for (i, b) in gt.iter().enumerate().filter(|(_, b)| b.class == class) {
            by_frame.entry(&b.frame).or_default().gt.push(i);
        }
        for (i, b) in pred.iter().enumerate().filter(|(_, b)| b.class == class) {
            by_frame.entry(&b.frame).or_default().pred.push(i);
        }
        for &kind in &config.iou_kinds {
            let cases: Vec<FrameCase> = by_frame
                .values()
                .map(|FrameMembers { gt: g, pred: p }| FrameCase {
                    affinity: p
                        .iter()
                        .map(|&pi| {
                            g.iter()
                                .map(|&gi| affinity(kind, &gt[gi].bbox, &pred[pi].bbox))
                                .collect()
                        })
                        .collect(),
                    gt: g.clone(),
                    pred: p.clone(),
                })
                .collect();
            for &threshold in thresholds {
                let settings = MatchSettings {
                    threshold,
                    rule,
                    ignore_zero_point_gt: config.ignore_zero_point_gt,
                };
                let subset = |gt_in: &dyn Fn(&EvalBox) -> bool, pred_in: &dyn Fn(&EvalBox) -> bool| {
                    evaluate_subset(&cases, gt, pred, &settings, gt_in, pred_in)
                };
                let all = subset(&|_| true, &|_| true);
                let mut breakdowns = Vec::new();
                let mut push = |by: &str, bin: String, s: SubsetOutcome| {
                    breakdowns.push(BreakdownResult {
                        by: by.to_string(),
                        bin,
                        num_gt: s.num_gt,
                        num_pred: s.matches.len(),
                        ap_r40: ap_r40(&s.matches, s.num_gt),
                        ap_all_points: ap_all_points(&s.matches, s.num_gt),
                    });
                };
                let edges = &config.range_bins_m;
                for i in 0..edges.len() {
                    let lo = edges[i];
                    let hi = edges.get(i + 1).copied().unwrap_or(f64::INFINITY);
                    let inside = move |b: &EvalBox| (lo..hi).contains(&bev_range_m(b));
                    push("range_m", range_label(edges, i), subset(&inside, &inside));
                }
                let edges = &config.point_bins;
                for i in 0..edges.len() {
                    let lo = edges[i];
                    let hi = edges.get(i + 1).copied();
                    let in_bin = move |n: u64| n >= lo && hi.is_none_or(|h| n < h);
                    let label = match edges.get(i + 1) {
                        Some(&h) if h == lo + 1 => format!("{lo}"),
                        Some(&h) => format!("{lo}-{}", h - 1),
                        None => format!("{lo}+"),
                    };
                    // GT with an unknown count is in no points bin; a prediction with an unknown count
                    // is in every bin (an unmatched one is a false positive in each).
                    let gt_inside = move |b: &EvalBox| b.num_points.is_some_and(in_bin);
                    let pred_inside = move |b: &EvalBox| b.num_points.is_none_or(in_bin);
                    if gt.iter().any(|b| b.num_points.is_some()) {
                        push("points", label, subset(&gt_inside, &pred_inside));
                    }
                }
                for &platform in &platforms {
                    let inside = |b: &EvalBox| platform_of(b) == Some(platform);
                    push("platform", platform.to_string(), subset(&inside, &inside));
                }

                let at_score: Vec<&ScoredMatch> =
                    all.matches.iter().filter(|m| m.score >= config.recall_score).collect();
                let tp_at_score = at_score.iter().filter(|m| m.is_tp).count();
                results.push(DetectionResult {
                    class,
                    iou_kind: kind,
                    threshold,
                    num_gt: all.num_gt,
                    num_pred: all.matches.len(),
                    num_tp: all.pairs.len(),
                    ap_r40: ap_r40(&all.matches, all.num_gt),
                    ap_all_points: ap_all_points(&all.matches, all.num_gt),
                    score_threshold: config.recall_score,
                    recall_at_score: (all.num_gt > 0).then(|| tp_at_score as f64 / all.num_gt as f64),
                    precision_at_score: (!at_score.is_empty()).then(|| tp_at_score as f64 / at_score.len() as f64),
                    errors: match_errors(&all.pairs, gt, pred),
                    breakdowns,
                });
            }
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two GT boxes; predictions (score): p0 (0.5) overlaps g0 at 0.8 and g1 at 0.6; p1 (0.9)
    /// overlaps g0 at 0.7 only. p1 goes first and takes g0; p0 then takes g1 (0.6 > 0.5).
    #[test]
    fn higher_score_matches_first_and_each_gt_once() {
        let affinity = vec![vec![0.8, 0.6], vec![0.7, 0.0]];
        let out = match_frame(&affinity, &[0.5, 0.9], &[false, false], 0.5, ThresholdRule::Strict);
        assert_eq!(out[1], MatchOutcome::TruePositive { gt: 0, affinity: 0.7 });
        assert_eq!(out[0], MatchOutcome::TruePositive { gt: 1, affinity: 0.6 });
        // At 0.6 (strict), p0 cannot take g1 any more.
        let out = match_frame(&affinity, &[0.5, 0.9], &[false, false], 0.6, ThresholdRule::Strict);
        assert_eq!(out[0], MatchOutcome::FalsePositive);
        let out = match_frame(&affinity, &[0.5, 0.9], &[false, false], 0.6, ThresholdRule::Inclusive);
        assert_eq!(out[0], MatchOutcome::TruePositive { gt: 1, affinity: 0.6 });
    }

    /// A counted GT is preferred to an ignored one even at lower affinity; a prediction that only
    /// reaches an ignored GT is `Ignored`.
    #[test]
    fn ignored_gt_absorbs_but_does_not_count() {
        let affinity = vec![vec![0.9, 0.6], vec![0.8, 0.0]];
        let out = match_frame(&affinity, &[0.9, 0.8], &[true, false], 0.5, ThresholdRule::Strict);
        assert_eq!(out[0], MatchOutcome::TruePositive { gt: 1, affinity: 0.6 });
        assert_eq!(out[1], MatchOutcome::Ignored);
        let out = match_frame(&[vec![0.3]], &[0.9], &[true], 0.5, ThresholdRule::Strict);
        assert_eq!(out[0], MatchOutcome::FalsePositive);
    }
}
