//! What decides a fusion method's BEV AP on one class (the fusion study's `--diagnose`): AP at
//! the class's threshold, AP with localisation all but ignored (IoU > 0.1: detection and ranking
//! only), AP with the ranking made perfect (scores replaced by each box's best IoU with a GT box:
//! localisation only), recall at both thresholds, how the loosely matched boxes' IoUs fall
//! around the threshold, their centre, size and yaw errors, duplicates and false positives.

use std::collections::BTreeMap;

use boxlayer::ObjectClass;
use boxlayer::eval::{
    ClassThresholds, DetectionConfig, EvalBox, FrameKey, MatchOutcome, ThresholdRule, evaluate_detection, match_frame,
};
use boxlayer::geometry::{iou_bev, wrap_angle};

/// IoU above which a prediction counts as found-but-maybe-mislocalised.
pub const LOOSE_IOU: f64 = 0.1;

/// One method's diagnosis for one class.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Diagnosis {
    /// GT boxes of the class.
    pub num_gt: usize,
    /// Predictions of the class.
    pub num_pred: usize,
    /// BEV AP R40 at the class threshold.
    pub ap: f64,
    /// BEV all-point AP at the class threshold (finer than R40's 2.5-point recall steps).
    pub ap_all_points: f64,
    /// BEV AP R40 at IoU > 0.1.
    pub ap_loose: f64,
    /// BEV AP R40 at the class threshold with scores replaced by each box's best GT IoU.
    pub ap_oracle_rank: f64,
    /// Share of GT matched at the class threshold (all predictions).
    pub recall: f64,
    /// Share of GT matched at IoU > 0.1 (all predictions).
    pub recall_loose: f64,
    /// Loose matches (greedy by score at IoU > 0.1).
    pub loose_matches: usize,
    /// Share of loose matches whose IoU passes the class threshold.
    pub pass_share: f64,
    /// Share of loose matches within 0.1 below the threshold.
    pub just_below_share: f64,
    /// Mean IoU of loose matches.
    pub mean_iou: f64,
    /// Mean and median BEV centre error of loose matches (m).
    pub centre_error_m: [f64; 2],
    /// Mean squared BEV centre error of loose matches (m²).
    pub centre_mse_m2: f64,
    /// Mean relative |error| of length and width of loose matches (unitless).
    pub size_rel_error: [f64; 2],
    /// Mean signed relative error of length and width of loose matches (unitless; < 0 too small).
    pub size_rel_bias: [f64; 2],
    /// Mean and median yaw error modulo π of loose matches (rad; a flip is not an error in BEV).
    pub yaw_error_rad: [f64; 2],
    /// Unmatched predictions overlapping (IoU > 0.1) a GT box another prediction took.
    pub duplicates: usize,
    /// Unmatched predictions overlapping no GT box.
    pub false_positives: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// (threshold, AP R40, recall, all-point AP) per threshold.
fn ap_at(gt: &[EvalBox], pred: &[EvalBox], class: ObjectClass, thresholds: Vec<f64>) -> Vec<(f64, f64, f64, f64)> {
    let config = DetectionConfig::bev_only(ClassThresholds::none().with(class, thresholds));
    evaluate_detection(gt, pred, &config, ThresholdRule::Strict)
        .iter()
        .filter(|r| r.class == class)
        .map(|r| {
            let recall = if r.num_gt > 0 {
                r.num_tp as f64 / r.num_gt as f64
            } else {
                f64::NAN
            };
            (
                r.threshold,
                r.ap_r40.unwrap_or(f64::NAN),
                recall,
                r.ap_all_points.unwrap_or(f64::NAN),
            )
        })
        .collect()
}

/// Diagnoses `pred` against `gt` for `class` at BEV IoU > `threshold`.
pub fn diagnose(gt: &[EvalBox], pred: &[EvalBox], class: ObjectClass, threshold: f64) -> Diagnosis {
    let gt: Vec<EvalBox> = gt.iter().filter(|b| b.class == class).cloned().collect();
    let pred: Vec<EvalBox> = pred.iter().filter(|b| b.class == class).cloned().collect();
    let mut d = Diagnosis {
        num_gt: gt.len(),
        num_pred: pred.len(),
        ..Diagnosis::default()
    };
    for (t, ap, recall, all_points) in ap_at(&gt, &pred, class, vec![threshold, LOOSE_IOU]) {
        if t == threshold {
            (d.ap, d.recall, d.ap_all_points) = (ap, recall, all_points);
        } else {
            (d.ap_loose, d.recall_loose) = (ap, recall);
        }
    }
    let mut frames: BTreeMap<&FrameKey, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, b) in gt.iter().enumerate() {
        frames.entry(&b.frame).or_default().0.push(i);
    }
    for (i, b) in pred.iter().enumerate() {
        frames.entry(&b.frame).or_default().1.push(i);
    }
    let mut oracle = pred.clone();
    let (mut ious, mut centre, mut yaw) = (Vec::new(), Vec::new(), Vec::new());
    let (mut size_abs, mut size_signed) = (Vec::new(), Vec::new());
    for (g, p) in frames.values() {
        let affinity: Vec<Vec<f64>> = p
            .iter()
            .map(|&pi| g.iter().map(|&gi| iou_bev(&pred[pi].bbox, &gt[gi].bbox)).collect())
            .collect();
        for (k, &pi) in p.iter().enumerate() {
            oracle[pi].score = affinity[k].iter().copied().fold(0.0, f64::max);
        }
        let scores: Vec<f64> = p.iter().map(|&pi| pred[pi].score).collect();
        let outcomes = match_frame(
            &affinity,
            &scores,
            &vec![false; g.len()],
            LOOSE_IOU,
            ThresholdRule::Strict,
        );
        for (k, outcome) in outcomes.iter().enumerate() {
            match *outcome {
                MatchOutcome::TruePositive { gt: gk, affinity: iou } => {
                    let (a, b) = (&pred[p[k]].bbox, &gt[g[gk]].bbox);
                    ious.push(iou);
                    centre.push((a.x - b.x).hypot(a.y - b.y));
                    let e = wrap_angle(a.yaw - b.yaw).abs();
                    yaw.push(e.min(std::f64::consts::PI - e));
                    let (rl, rw) = (a.l / b.l - 1.0, a.w / b.w - 1.0);
                    size_abs.push([rl.abs(), rw.abs()]);
                    size_signed.push([rl, rw]);
                }
                _ => {
                    if affinity[k].iter().any(|&a| a > LOOSE_IOU) {
                        d.duplicates += 1;
                    } else {
                        d.false_positives += 1;
                    }
                }
            }
        }
    }
    d.ap_oracle_rank = ap_at(&gt, &oracle, class, vec![threshold])
        .first()
        .map_or(f64::NAN, |r| r.1);
    d.loose_matches = ious.len();
    let n = ious.len().max(1) as f64;
    d.pass_share = ious.iter().filter(|&&i| i > threshold).count() as f64 / n;
    d.just_below_share = ious.iter().filter(|&&i| i <= threshold && i > threshold - 0.1).count() as f64 / n;
    d.mean_iou = mean(&ious);
    d.centre_mse_m2 = mean(&centre.iter().map(|e| e * e).collect::<Vec<_>>());
    d.centre_error_m = [mean(&centre), median(centre)];
    d.yaw_error_rad = [mean(&yaw), median(yaw)];
    for k in 0..2 {
        d.size_rel_error[k] = mean(&size_abs.iter().map(|s| s[k]).collect::<Vec<_>>());
        d.size_rel_bias[k] = mean(&size_signed.iter().map(|s| s[k]).collect::<Vec<_>>());
    }
    d
}

/// The markdown header of [`row`].
pub const HEADER: &str = "| method | class | AP | AP all-point | AP@0.1 | AP, ideal ranking | recall | recall@0.1 | preds | \
pass / just below | mean IoU | centre err mean / median (m) | rel. size error l, w | bias l, w | yaw err mean / median (rad) | dup | FP |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";

/// One markdown row of a diagnosis.
pub fn row(method: &str, class: ObjectClass, d: &Diagnosis) -> String {
    format!(
        "| {method} | {class} | {:.1} | {:.2} | {:.1} | {:.1} | {:.3} | {:.3} | {} | {:.3} / {:.3} | {:.3} | {:.3} / {:.3} | {:.3}, {:.3} | {:+.3}, {:+.3} | {:.4} / {:.4} | {} | {} |\n",
        100.0 * d.ap,
        100.0 * d.ap_all_points,
        100.0 * d.ap_loose,
        100.0 * d.ap_oracle_rank,
        d.recall,
        d.recall_loose,
        d.num_pred,
        d.pass_share,
        d.just_below_share,
        d.mean_iou,
        d.centre_error_m[0],
        d.centre_error_m[1],
        d.size_rel_error[0],
        d.size_rel_error[1],
        d.size_rel_bias[0],
        d.size_rel_bias[1],
        d.yaw_error_rad[0],
        d.yaw_error_rad[1],
        d.duplicates,
        d.false_positives,
    )
}
