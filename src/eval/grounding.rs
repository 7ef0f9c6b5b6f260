//! Grounding metrics, the seeds' yardstick: per query, the IoU of each referred GT object with
//! the predicted box assigned to it; Acc@δ (a query counts only if every referred object passes δ)
//! and mIoU over queries, overall, per platform and for single- and multi-object queries.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::affinity::{GroundingIou, grounding_iou};
use super::config::{GroundingConfig, ThresholdRule};
use super::input::GroundingQuery;
use crate::frame::Platform;

/// The outcome of one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundingQueryResult {
    /// Query id.
    pub id: String,
    /// The platform of the query's frame, when known.
    pub platform: Option<Platform>,
    /// Number of referred GT objects.
    pub num_targets: usize,
    /// Number of predicted boxes (0 when the prediction side lacks the query).
    pub num_predicted: usize,
    /// IoU of each referred object with its assigned prediction (0 when none is assigned).
    pub target_ious: Vec<f64>,
    /// Mean of `target_ious`: the query's IoU for mIoU.
    pub iou: f64,
    /// Whether the query is correct at each configured threshold (all targets pass).
    pub correct: Vec<bool>,
}

/// Acc@δ for one threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AccuracyAt {
    /// δ.
    pub threshold: f64,
    /// Fraction of queries correct at δ.
    pub accuracy: f64,
}

/// Acc@δ and mIoU over one set of queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundingSummary {
    /// Which queries: `all`, `single_object`, `multi_object`, or a platform name.
    pub subset: String,
    /// Number of queries.
    pub num_queries: usize,
    /// Acc@δ per configured threshold.
    pub accuracy: Vec<AccuracyAt>,
    /// Mean query IoU.
    pub miou: f64,
}

/// Grounding results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundingResult {
    /// The IoU used.
    pub iou: GroundingIou,
    /// `>` or `>=`.
    pub threshold_rule: String,
    /// GT queries with no prediction (scored IoU 0, incorrect).
    pub num_missing_predictions: usize,
    /// Summaries: `all` first, then `single_object`, `multi_object` and platforms that occur.
    pub summaries: Vec<GroundingSummary>,
    /// Every query, in GT order.
    pub queries: Vec<GroundingQueryResult>,
}

/// Scores one query: targets and predictions are paired greedily by falling IoU (one prediction
/// per target; extra predictions are ignored).
fn score_query(
    gt: &GroundingQuery,
    pred: Option<&GroundingQuery>,
    config: &GroundingConfig,
    rule: ThresholdRule,
) -> GroundingQueryResult {
    let predicted = pred.map(|p| p.boxes.as_slice()).unwrap_or_default();
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (t, target) in gt.boxes.iter().enumerate() {
        for (k, p) in predicted.iter().enumerate() {
            pairs.push((grounding_iou(config.iou, target, p), t, k));
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut target_ious = vec![0.0; gt.boxes.len()];
    let mut target_done = vec![false; gt.boxes.len()];
    let mut pred_done = vec![false; predicted.len()];
    for (iou, t, k) in pairs {
        if target_done[t] || pred_done[k] {
            continue;
        }
        target_done[t] = true;
        pred_done[k] = true;
        target_ious[t] = iou;
    }
    let iou = if target_ious.is_empty() {
        0.0
    } else {
        target_ious.iter().sum::<f64>() / target_ious.len() as f64
    };
    let correct = config
        .thresholds
        .iter()
        .map(|&d| !target_ious.is_empty() && target_ious.iter().all(|&v| rule.passes(v, d)))
        .collect();
    GroundingQueryResult {
        id: gt.id.clone(),
        platform: gt.platform,
        num_targets: gt.boxes.len(),
        num_predicted: predicted.len(),
        target_ious,
        iou,
        correct,
    }
}

fn summarize(subset: &str, queries: &[&GroundingQueryResult], thresholds: &[f64]) -> GroundingSummary {
    let n = queries.len();
    let fraction = |count: usize| if n == 0 { 0.0 } else { count as f64 / n as f64 };
    GroundingSummary {
        subset: subset.to_string(),
        num_queries: n,
        accuracy: thresholds
            .iter()
            .enumerate()
            .map(|(i, &threshold)| AccuracyAt {
                threshold,
                accuracy: fraction(queries.iter().filter(|q| q.correct[i]).count()),
            })
            .collect(),
        miou: if n == 0 {
            0.0
        } else {
            queries.iter().map(|q| q.iou).sum::<f64>() / n as f64
        },
    }
}

/// Scores every GT query against the prediction query with the same id.
pub fn evaluate_grounding(
    gt: &[GroundingQuery],
    pred: &[GroundingQuery],
    config: &GroundingConfig,
    rule: ThresholdRule,
) -> GroundingResult {
    let by_id: HashMap<&str, &GroundingQuery> = pred.iter().map(|q| (q.id.as_str(), q)).collect();
    let queries: Vec<GroundingQueryResult> = gt
        .iter()
        .map(|q| score_query(q, by_id.get(q.id.as_str()).copied(), config, rule))
        .collect();
    let num_missing_predictions = gt.iter().filter(|q| !by_id.contains_key(q.id.as_str())).count();
    let all: Vec<&GroundingQueryResult> = queries.iter().collect();
    let mut summaries = vec![summarize("all", &all, &config.thresholds)];
    let single: Vec<_> = all.iter().copied().filter(|q| q.num_targets == 1).collect();
    let multi: Vec<_> = all.iter().copied().filter(|q| q.num_targets > 1).collect();
    if !multi.is_empty() {
        summaries.push(summarize("single_object", &single, &config.thresholds));
        summaries.push(summarize("multi_object", &multi, &config.thresholds));
    }
    for platform in Platform::ALL {
        let subset: Vec<_> = all.iter().copied().filter(|q| q.platform == Some(platform)).collect();
        if !subset.is_empty() {
            summaries.push(summarize(platform.as_str(), &subset, &config.thresholds));
        }
    }
    GroundingResult {
        iou: config.iou,
        threshold_rule: rule.symbol().to_string(),
        num_missing_predictions,
        summaries,
        queries,
    }
}
