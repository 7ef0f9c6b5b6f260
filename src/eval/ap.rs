//! Average precision from score-ranked match outcomes: the precision/recall curve, its 40-point
//! interpolation (KITTI R40, as OpenPCDet reports it) and its all-point interpolation (VOC 2010+).

use serde::{Deserialize, Serialize};

/// One counted prediction: its score and whether it matched a GT box.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoredMatch {
    /// Detection score (unitless, larger is more confident).
    pub score: f64,
    /// Whether the prediction is a true positive.
    pub is_tp: bool,
}

/// One point of a precision/recall curve: all predictions with score ≥ `score` taken as positive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrecisionRecallPoint {
    /// The score threshold (inclusive).
    pub score: f64,
    /// True positives at or above the score.
    pub tp: usize,
    /// False positives at or above the score.
    pub fp: usize,
    /// `tp / (tp + fp)`.
    pub precision: f64,
    /// `tp / num_gt`.
    pub recall: f64,
}

/// The precision/recall curve, one point per distinct score (highest first), so predictions with
/// equal scores enter together and the curve does not depend on input order. Empty when
/// `num_gt` is 0.
pub fn precision_recall_curve(matches: &[ScoredMatch], num_gt: usize) -> Vec<PrecisionRecallPoint> {
    if num_gt == 0 {
        return Vec::new();
    }
    let mut sorted: Vec<ScoredMatch> = matches.to_vec();
    sorted.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut curve = Vec::new();
    let (mut tp, mut fp) = (0usize, 0usize);
    for (i, m) in sorted.iter().enumerate() {
        if m.is_tp {
            tp += 1;
        } else {
            fp += 1;
        }
        let group_ends = sorted.get(i + 1).is_none_or(|next| next.score != m.score);
        if group_ends {
            curve.push(PrecisionRecallPoint {
                score: m.score,
                tp,
                fp,
                precision: tp as f64 / (tp + fp) as f64,
                recall: tp as f64 / num_gt as f64,
            });
        }
    }
    curve
}

/// KITTI/OpenPCDet 40-point AP: `(1/40) Σ_{i=1..40} max{precision_k : recall_k ≥ i/40}` (0 when no
/// point reaches the recall). `None` when there is no GT box. The recall test is done in integers
/// (`tp·40 ≥ i·num_gt`) so it is exact.
pub fn ap_r40(matches: &[ScoredMatch], num_gt: usize) -> Option<f64> {
    ap_sampled(matches, num_gt, 40)
}

/// AP sampled at recalls `i/n`, `i = 1..n`, with the interpolated precision (see `ap_r40`).
pub(crate) fn ap_sampled(matches: &[ScoredMatch], num_gt: usize, n: usize) -> Option<f64> {
    if num_gt == 0 || n == 0 {
        return None;
    }
    let curve = precision_recall_curve(matches, num_gt);
    let envelope = precision_envelope(&curve);
    let mut sum = 0.0;
    let mut k = 0;
    for i in 1..=n {
        // First curve point whose recall reaches i/n; recall never decreases along the curve.
        while k < curve.len() && curve[k].tp * n < i * num_gt {
            k += 1;
        }
        if k == curve.len() {
            break;
        }
        sum += envelope[k];
    }
    Some(sum / n as f64)
}

/// All-point AP: `Σ_k (recall_k − recall_{k−1}) · max{precision_j : j ≥ k}` over the curve
/// points, with `recall_0 = 0`. `None` when there is no GT box.
pub fn ap_all_points(matches: &[ScoredMatch], num_gt: usize) -> Option<f64> {
    if num_gt == 0 {
        return None;
    }
    let curve = precision_recall_curve(matches, num_gt);
    let envelope = precision_envelope(&curve);
    let mut previous_recall = 0.0;
    let mut sum = 0.0;
    for (point, p) in curve.iter().zip(&envelope) {
        sum += (point.recall - previous_recall) * p;
        previous_recall = point.recall;
    }
    Some(sum)
}

/// `max{precision_j : j ≥ k}` for every k: the interpolated precision.
fn precision_envelope(curve: &[PrecisionRecallPoint]) -> Vec<f64> {
    let mut envelope: Vec<f64> = curve.iter().map(|p| p.precision).collect();
    for k in (0..envelope.len().saturating_sub(1)).rev() {
        envelope[k] = envelope[k].max(envelope[k + 1]);
    }
    envelope
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    fn m(score: f64, is_tp: bool) -> ScoredMatch {
        ScoredMatch { score, is_tp }
    }

    /// Crafted curve, 3 GT boxes, predictions by falling score: TP, FP, TP, FP, TP.
    /// Points (recall, precision): (1/3, 1), (1/3, 1/2), (2/3, 2/3), (2/3, 1/2), (1, 3/5).
    /// Interpolated precision (max to the right): 1, 2/3, 2/3, 3/5, 3/5.
    /// All-point: 1/3·1 + 0 + 1/3·2/3 + 0 + 1/3·3/5 = (15 + 10 + 9)/45 = 34/45.
    /// R40: recall i/40 ≤ 1/3 for i = 1..13 → 1; ≤ 2/3 for i = 14..26 → 2/3; i = 27..40 → 3/5:
    /// (13 + 13·2/3 + 14·3/5)/40 = (195 + 130 + 126)/(15·40) = 451/600.
    #[test]
    fn crafted_curve_matches_hand_computation() {
        // Deliberately shuffled: the curve sorts by score.
        let matches = [m(0.7, true), m(0.9, true), m(0.5, true), m(0.8, false), m(0.6, false)];
        let curve = precision_recall_curve(&matches, 3);
        assert_eq!(curve.len(), 5);
        assert_abs_diff_eq!(curve[2].precision, 2.0 / 3.0, epsilon = 1e-15);
        assert_abs_diff_eq!(curve[4].recall, 1.0, epsilon = 1e-15);
        assert_abs_diff_eq!(ap_all_points(&matches, 3).unwrap(), 34.0 / 45.0, epsilon = 1e-12);
        assert_abs_diff_eq!(ap_r40(&matches, 3).unwrap(), 451.0 / 600.0, epsilon = 1e-12);
    }

    /// Equal scores enter together: one TP and one FP tied at 0.9 give a single point
    /// (recall 1/2, precision 1/2), whatever their order; then a TP at 0.5 gives (1, 2/3).
    /// All-point: 1/2·2/3 + 1/2·2/3 = 2/3. R40: every recall step sees max(1/2, 2/3) or 2/3 → 2/3.
    #[test]
    fn ties_do_not_depend_on_order() {
        let a = [m(0.9, true), m(0.9, false), m(0.5, true)];
        let b = [m(0.9, false), m(0.9, true), m(0.5, true)];
        for ms in [a, b] {
            assert_eq!(precision_recall_curve(&ms, 2).len(), 2);
            assert_abs_diff_eq!(ap_all_points(&ms, 2).unwrap(), 2.0 / 3.0, epsilon = 1e-12);
            assert_abs_diff_eq!(ap_r40(&ms, 2).unwrap(), 2.0 / 3.0, epsilon = 1e-12);
        }
    }

    /// Half the GT found with perfect precision: all-point 0.5, R40 20/40 = 0.5; none found → 0;
    /// no GT → undefined.
    #[test]
    fn partial_and_degenerate_cases() {
        let half = [m(0.9, true), m(0.8, true)];
        assert_abs_diff_eq!(ap_all_points(&half, 4).unwrap(), 0.5, epsilon = 1e-12);
        assert_abs_diff_eq!(ap_r40(&half, 4).unwrap(), 0.5, epsilon = 1e-12);
        assert_eq!(ap_r40(&[m(0.9, false)], 2), Some(0.0));
        assert_eq!(ap_all_points(&[], 2), Some(0.0));
        assert_eq!(ap_r40(&half, 0), None);
    }
}
