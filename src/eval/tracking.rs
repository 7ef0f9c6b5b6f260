//! Tracking metrics per class: CLEAR-MOT (MOTA, MOTP, FP, FN, ID switches, fragmentations,
//! mostly tracked / lost) with IoU or centre-distance association, and AMOTA (nuScenes) / sAMOTA
//! (AB3DMOT) over recall thresholds. Boxes without a track id take no part.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::affinity::{IouKind, affinity, bev_center_distance};
use super::config::{ThresholdRule, TrackingConfig};
use super::detection::FrameMembers;
use super::input::EvalBox;
use crate::frame::ObjectClass;

/// CLEAR-MOT counts and ratios over all sequences of one class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClearMot {
    /// GT boxes (over all frames).
    pub num_gt: usize,
    /// Predicted boxes taken part.
    pub num_pred: usize,
    /// Matched pairs.
    pub num_matches: usize,
    /// Unmatched predictions.
    pub false_positives: usize,
    /// Unmatched GT boxes.
    pub false_negatives: usize,
    /// GT objects matched to a different predicted track than at their previous match.
    pub id_switches: usize,
    /// Times a GT object's tracking resumed after being lost while present.
    pub fragmentations: usize,
    /// Distinct GT objects.
    pub num_gt_tracks: usize,
    /// GT objects matched in at least `mostly_tracked_ratio` of their frames.
    pub mostly_tracked: usize,
    /// GT objects matched in at most `mostly_lost_ratio` of their frames.
    pub mostly_lost: usize,
    /// The others.
    pub partially_tracked: usize,
    /// `1 − (FN + FP + IDS) / num_gt`; `None` without GT.
    pub mota: Option<f64>,
    /// Mean BEV centre distance of the matches (m); `None` without matches.
    pub motp_center_m: Option<f64>,
    /// Mean IoU of the matches when association is by IoU; `None` otherwise.
    pub motp_iou: Option<f64>,
}

/// Tracking results of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackingResult {
    /// The class.
    pub class: ObjectClass,
    /// How GT and predictions were associated.
    pub matching: IouKind,
    /// The IoU threshold, or the distance gate (m) for `center_distance`.
    pub threshold: f64,
    /// CLEAR-MOT with every prediction.
    pub clear_mot: ClearMot,
    /// nuScenes AMOTA: mean MOTAR over recalls k/n ≥ `amota_min_recall`; `None` without GT.
    pub amota: Option<f64>,
    /// Mean MOTP (m) over the reachable recalls of AMOTA; `None` if none is reachable.
    pub amotp_m: Option<f64>,
    /// AB3DMOT sAMOTA: mean MOTAR over all recalls k/n, k = 1..n; `None` without GT.
    pub samota: Option<f64>,
}

/// What happened to one GT object over its frames in a sequence.
#[derive(Default)]
struct GtLife {
    /// Frames it is present in.
    present: usize,
    /// Frames it is matched in.
    matched: usize,
    /// Times its matching resumed after a miss.
    fragmentations: usize,
    /// Matched in some earlier frame.
    ever_matched: bool,
    /// Matched in its previous present frame.
    matched_last: bool,
}

/// One frame of one sequence: which boxes, and their affinities `[pred][gt]`.
struct TrackFrame {
    gt: Vec<usize>,
    pred: Vec<usize>,
    affinity: Vec<Vec<f64>>,
}

/// CLEAR-MOT over frames grouped by sequence (frames in order), using predictions with
/// score ≥ `min_score`. Also returns the scores of the matched predictions.
fn clear_mot_frames(
    sequences: &[Vec<TrackFrame>],
    gt: &[EvalBox],
    pred: &[EvalBox],
    config: &TrackingConfig,
    rule: ThresholdRule,
    min_score: f64,
) -> (ClearMot, Vec<f64>) {
    let threshold = config.affinity_threshold();
    let mut m = ClearMot::default();
    let mut matched_scores = Vec::new();
    let (mut center_sum, mut iou_sum) = (0.0, 0.0);
    for frames in sequences {
        // GT track id → predicted track id of its last match (persists over gaps, as in CLEAR-MOT).
        let mut last_match: HashMap<&str, &str> = HashMap::new();
        let mut life: BTreeMap<&str, GtLife> = BTreeMap::new();
        for f in frames {
            let preds: Vec<usize> = (0..f.pred.len())
                .filter(|&k| pred[f.pred[k]].score >= min_score)
                .collect();
            let gt_id = |g: usize| gt[f.gt[g]].track_id.as_deref().unwrap_or_default();
            let pred_id = |k: usize| pred[f.pred[k]].track_id.as_deref().unwrap_or_default();
            let mut gt_match: Vec<Option<usize>> = vec![None; f.gt.len()];
            let mut pred_taken = vec![false; f.pred.len()];
            // 1. Keep last correspondences that are still within the threshold.
            for (g, slot) in gt_match.iter_mut().enumerate() {
                let Some(&h) = last_match.get(gt_id(g)) else { continue };
                if let Some(&k) = preds
                    .iter()
                    .find(|&&k| !pred_taken[k] && pred_id(k) == h && rule.passes(f.affinity[k][g], threshold))
                {
                    *slot = Some(k);
                    pred_taken[k] = true;
                }
            }
            // 2. Optimal assignment over the rest: most matches first, then the largest total
            //    affinity (CLEAR-MOT's minimum-distance assignment, as py-motmetrics solves it).
            let free_gt: Vec<usize> = (0..f.gt.len()).filter(|&g| gt_match[g].is_none()).collect();
            let free_pred: Vec<usize> = preds.iter().copied().filter(|&k| !pred_taken[k]).collect();
            for (g, k) in optimal_pairs(&free_gt, &free_pred, |g, k| {
                let a = f.affinity[k][g];
                rule.passes(a, threshold).then_some(a)
            }) {
                gt_match[g] = Some(k);
                pred_taken[k] = true;
                if last_match.get(gt_id(g)).is_some_and(|&h| h != pred_id(k)) {
                    m.id_switches += 1;
                }
            }
            // 3. Count.
            m.num_gt += f.gt.len();
            m.num_pred += preds.len();
            for (g, slot) in gt_match.iter().enumerate() {
                let entry = life.entry(gt_id(g)).or_default();
                entry.present += 1;
                match slot {
                    Some(k) => {
                        if entry.ever_matched && !entry.matched_last {
                            entry.fragmentations += 1;
                        }
                        entry.matched += 1;
                        entry.ever_matched = true;
                        entry.matched_last = true;
                        last_match.insert(gt_id(g), pred_id(*k));
                        m.num_matches += 1;
                        matched_scores.push(pred[f.pred[*k]].score);
                        let (a, b) = (&gt[f.gt[g]].bbox, &pred[f.pred[*k]].bbox);
                        center_sum += bev_center_distance(a, b);
                        iou_sum += f.affinity[*k][g];
                    }
                    None => {
                        entry.matched_last = false;
                        m.false_negatives += 1;
                    }
                }
            }
            m.false_positives += preds.iter().filter(|&&k| !pred_taken[k]).count();
        }
        for object in life.into_values() {
            m.num_gt_tracks += 1;
            m.fragmentations += object.fragmentations;
            let ratio = object.matched as f64 / object.present as f64;
            if ratio >= config.mostly_tracked_ratio {
                m.mostly_tracked += 1;
            } else if ratio <= config.mostly_lost_ratio {
                m.mostly_lost += 1;
            } else {
                m.partially_tracked += 1;
            }
        }
    }
    if m.num_gt > 0 {
        m.mota = Some(1.0 - (m.false_negatives + m.false_positives + m.id_switches) as f64 / m.num_gt as f64);
    }
    if m.num_matches > 0 {
        m.motp_center_m = Some(center_sum / m.num_matches as f64);
        if config.matching != IouKind::CenterDistance {
            m.motp_iou = Some(iou_sum / m.num_matches as f64);
        }
    }
    (m, matched_scores)
}

/// The (row, column) pairs of a maximum-cardinality, then maximum-total-affinity assignment
/// between `rows` and `columns`; `affinity` is `None` where a pair may not match. Affinities are
/// compared at 1e-9 resolution (they are IoUs or negated distances in metres).
fn optimal_pairs(
    rows: &[usize],
    columns: &[usize],
    affinity: impl Fn(usize, usize) -> Option<f64>,
) -> Vec<(usize, usize)> {
    if rows.is_empty() || columns.is_empty() {
        return Vec::new();
    }
    // Shift affinities to be positive and scale to integers; a forbidden pair weighs 0 while
    // every allowed pair outweighs any sum of differences between allowed pairs, so the number
    // of matches is maximised first.
    let allowed: Vec<Option<f64>> = rows
        .iter()
        .flat_map(|&r| columns.iter().map(move |&c| (r, c)))
        .map(|(r, c)| affinity(r, c))
        .collect();
    let lowest = allowed.iter().flatten().fold(f64::INFINITY, |a, &b| a.min(b));
    if !lowest.is_finite() {
        return Vec::new();
    }
    let span = allowed.iter().flatten().fold(0.0f64, |a, &b| a.max(b - lowest));
    let scale = 1e9;
    let n = rows.len().max(columns.len()) as i64;
    let base = (span * scale).ceil() as i64 * (n + 1) + 1;
    let weight = |v: Option<f64>| v.map_or(0, |a| base + ((a - lowest) * scale).round() as i64);
    let transpose = rows.len() > columns.len();
    let (nr, nc) = if transpose {
        (columns.len(), rows.len())
    } else {
        (rows.len(), columns.len())
    };
    let mut values = Vec::with_capacity(nr * nc);
    for i in 0..nr {
        for j in 0..nc {
            let (r, c) = if transpose { (j, i) } else { (i, j) };
            values.push(weight(allowed[r * columns.len() + c]));
        }
    }
    let Ok(matrix) = pathfinding::matrix::Matrix::from_vec(nr, nc, values) else {
        return Vec::new();
    };
    let (_, assignment) = pathfinding::kuhn_munkres::kuhn_munkres(&matrix);
    let mut pairs: Vec<(usize, usize)> = assignment
        .into_iter()
        .enumerate()
        .map(|(i, j)| if transpose { (j, i) } else { (i, j) })
        .filter(|&(r, c)| allowed[r * columns.len() + c].is_some())
        .map(|(r, c)| (rows[r], columns[c]))
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Groups one class's tracked boxes by sequence and frame and computes the affinities.
fn track_frames(gt: &[EvalBox], pred: &[EvalBox], class: ObjectClass, kind: IouKind) -> Vec<Vec<TrackFrame>> {
    let mut by_frame: BTreeMap<(&str, u64), FrameMembers> = BTreeMap::new();
    let keep = |b: &EvalBox| b.class == class && b.track_id.is_some();
    for (i, b) in gt.iter().enumerate().filter(|(_, b)| keep(b)) {
        by_frame
            .entry((&b.frame.sequence, b.frame.frame))
            .or_default()
            .gt
            .push(i);
    }
    for (i, b) in pred.iter().enumerate().filter(|(_, b)| keep(b)) {
        by_frame
            .entry((&b.frame.sequence, b.frame.frame))
            .or_default()
            .pred
            .push(i);
    }
    let mut sequences: Vec<Vec<TrackFrame>> = Vec::new();
    let mut current: Option<&str> = None;
    for ((sequence, _), FrameMembers { gt: g, pred: p }) in by_frame {
        if current != Some(sequence) {
            sequences.push(Vec::new());
            current = Some(sequence);
        }
        let affinity = p
            .iter()
            .map(|&pi| {
                g.iter()
                    .map(|&gi| affinity(kind, &gt[gi].bbox, &pred[pi].bbox))
                    .collect()
            })
            .collect();
        if let Some(frames) = sequences.last_mut() {
            frames.push(TrackFrame {
                gt: g,
                pred: p,
                affinity,
            });
        }
    }
    sequences
}

/// CLEAR-MOT of one class with every prediction (scores ignored).
pub fn clear_mot(
    gt: &[EvalBox],
    pred: &[EvalBox],
    class: ObjectClass,
    config: &TrackingConfig,
    rule: ThresholdRule,
) -> ClearMot {
    let sequences = track_frames(gt, pred, class, config.matching);
    clear_mot_frames(&sequences, gt, pred, config, rule, f64::NEG_INFINITY).0
}

/// CLEAR-MOT and AMOTA/sAMOTA for every configured class that has tracked GT boxes.
///
/// For recall r = k/n the score threshold is the score of the ⌈r·P⌉-th best matched prediction of
/// the run with every prediction (P = number of GT boxes); CLEAR-MOT is rerun with the predictions
/// at or above it, and MOTAR_r = 1 − (IDS + FP + FN − (1 − r)·P)/(r·P) clipped to [0, 1] (the
/// upper clip matters only when ties or rounding push the recall above r). A recall the full run
/// never reaches scores MOTAR_r = 0.
pub fn evaluate_tracking(
    gt: &[EvalBox],
    pred: &[EvalBox],
    config: &TrackingConfig,
    rule: ThresholdRule,
) -> Vec<TrackingResult> {
    let mut results = Vec::new();
    for &class in &config.classes {
        if !gt.iter().any(|b| b.class == class && b.track_id.is_some()) {
            continue;
        }
        let sequences = track_frames(gt, pred, class, config.matching);
        let (full, mut scores) = clear_mot_frames(&sequences, gt, pred, config, rule, f64::NEG_INFINITY);
        scores.sort_by(|a, b| b.total_cmp(a));
        let p = full.num_gt;
        let n = config.recall_steps as usize;
        let (mut amota_sum, mut amota_count, mut samota_sum) = (0.0, 0usize, 0.0);
        let (mut amotp_sum, mut amotp_count) = (0.0, 0usize);
        for k in 1..=n {
            let r = k as f64 / n as f64;
            let needed = (k * p).div_ceil(n);
            let motar = match scores.get(needed.saturating_sub(1)) {
                Some(&min_score) if needed > 0 => {
                    let (at, _) = clear_mot_frames(&sequences, gt, pred, config, rule, min_score);
                    let errors = (at.id_switches + at.false_positives + at.false_negatives) as f64;
                    if r >= config.amota_min_recall
                        && let Some(motp) = at.motp_center_m
                    {
                        amotp_sum += motp;
                        amotp_count += 1;
                    }
                    (1.0 - (errors - (1.0 - r) * p as f64) / (r * p as f64)).clamp(0.0, 1.0)
                }
                _ => 0.0,
            };
            samota_sum += motar;
            if r >= config.amota_min_recall {
                amota_sum += motar;
                amota_count += 1;
            }
        }
        let defined = p > 0;
        results.push(TrackingResult {
            class,
            matching: config.matching,
            threshold: match config.matching {
                IouKind::CenterDistance => config.max_center_distance_m,
                IouKind::Bev | IouKind::ThreeD => config.iou_threshold,
            },
            clear_mot: full,
            amota: (defined && amota_count > 0).then(|| amota_sum / amota_count as f64),
            amotp_m: (amotp_count > 0).then(|| amotp_sum / amotp_count as f64),
            samota: defined.then(|| samota_sum / n as f64),
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::optimal_pairs;

    /// Affinities P–A 0.9, P–B 0.6, Q–A 0.6, Q–B forbidden: greedy takes P–A and strands B; the
    /// optimal assignment matches both (P–B, Q–A), as CLEAR-MOT asks.
    #[test]
    fn assignment_maximises_matches_before_affinity() {
        let (a, b, p, q) = (0, 1, 10, 11);
        let aff = |g: usize, k: usize| match (g, k) {
            (0, 10) => Some(0.9),
            (1, 10) => Some(0.6),
            (0, 11) => Some(0.6),
            _ => None,
        };
        assert_eq!(optimal_pairs(&[a, b], &[p, q], aff), vec![(a, q), (b, p)]);
    }

    /// With all pairs allowed the larger total wins (0.9 + 0.5 > 0.7 + 0.6), in either orientation
    /// (more rows than columns is transposed internally); forbidden-only input gives nothing.
    #[test]
    fn assignment_maximises_total_affinity() {
        let table = [[0.9, 0.7], [0.6, 0.5]];
        let aff = |g: usize, k: usize| Some(table[g][k]);
        assert_eq!(optimal_pairs(&[0, 1], &[0, 1], aff), vec![(0, 0), (1, 1)]);
        let aff3 = |g: usize, k: usize| if g == 2 { None } else { Some(table[g][k]) };
        assert_eq!(optimal_pairs(&[0, 1, 2], &[0, 1], aff3), vec![(0, 0), (1, 1)]);
        assert!(optimal_pairs(&[0], &[0], |_, _| None).is_empty());
        assert!(optimal_pairs(&[], &[0], |_, _| Some(1.0)).is_empty());
    }
}
