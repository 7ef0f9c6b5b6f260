//! Evaluation: measures predicted boxes against ground truth — detection AP per class (BEV and 3D
//! IoU, 40-point and all-point interpolation, breakdowns by range, points and platform), tracking
//! CLEAR-MOT and AMOTA/sAMOTA, and grounding Acc@δ/mIoU per query. It takes plain `EvalBox` and
//! `GroundingQuery` lists; the loaders in `input` only read box lists (3EED `meta_info.json`
//! folders, JSON lines), never sensor data, and the module runs no detector or tracker.
//! Definitions are written out in `docs/eval.md`.

mod affinity;
mod ap;
mod config;
mod detection;
mod grounding;
pub mod input;
mod report;
mod tracking;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use affinity::{GroundingIou, IouKind, affinity, grounding_iou};
pub use ap::{PrecisionRecallPoint, ScoredMatch, ap_all_points, ap_r40, precision_recall_curve};
pub use config::{ClassThresholds, DetectionConfig, EvalConfig, GroundingConfig, ThresholdRule, TrackingConfig};
pub use detection::{BreakdownResult, DetectionResult, MatchErrors, MatchOutcome, evaluate_detection, match_frame};
pub use grounding::{AccuracyAt, GroundingQueryResult, GroundingResult, GroundingSummary, evaluate_grounding};
pub use input::{EvalBox, EvalData, FrameKey, GroundingQuery, InputFormat, load};
pub use report::EvalReport;
pub use tracking::{ClearMot, TrackingResult, clear_mot, evaluate_tracking};

/// Errors of the evaluation module: unreadable or malformed inputs and bad configuration.
#[derive(Debug, Error)]
pub enum EvalError {
    /// A file or folder could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A file's contents do not follow the input format.
    #[error("{path}: {location}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where in the file (`line 12`, `ground_info[3].bbox_3d`).
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// No `meta_info.json` or box line was found under a path.
    #[error("{path}: no boxes found ({expected})")]
    Empty {
        /// The file or folder searched.
        path: PathBuf,
        /// What was looked for.
        expected: &'static str,
    },
    /// A sensor log holding labels could not be read.
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
    /// The report could not be serialised to JSON.
    #[error("{path}: cannot serialise the report: {reason}")]
    Serialize {
        /// The file it was meant for.
        path: PathBuf,
        /// The serialiser's message.
        reason: String,
    },
    /// The configuration is inconsistent (a threshold outside its range, unsorted bins).
    #[error("eval config: field `{field}`: {reason}")]
    Config {
        /// The offending field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl EvalError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.to_path_buf(),
            error: source,
        }
    }

    pub(crate) fn parse(path: &Path, location: impl Into<String>, reason: impl Into<String>) -> Self {
        EvalError::Parse {
            path: path.to_path_buf(),
            location: location.into(),
            reason: reason.into(),
        }
    }
}

/// Computes every metric the data allows: detection always, tracking when both sides carry track
/// ids, grounding when both sides carry queries.
pub fn evaluate(gt: &EvalData, pred: &EvalData, config: &EvalConfig) -> Result<EvalReport, EvalError> {
    config.validate()?;
    let detection = evaluate_detection(&gt.boxes, &pred.boxes, &config.detection, config.threshold_rule);
    let has_tracks = |d: &EvalData| d.boxes.iter().any(|b| b.track_id.is_some());
    let tracking = if has_tracks(gt) && has_tracks(pred) {
        evaluate_tracking(&gt.boxes, &pred.boxes, &config.tracking, config.threshold_rule)
    } else {
        Vec::new()
    };
    let grounding = if !gt.queries.is_empty() {
        Some(evaluate_grounding(
            &gt.queries,
            &pred.queries,
            &config.grounding,
            config.threshold_rule,
        ))
    } else {
        None
    };
    let warnings = sequence_warnings(gt, pred);
    for w in &warnings {
        tracing::warn!("{w}");
    }
    Ok(EvalReport {
        threshold_rule: config.threshold_rule,
        num_gt_boxes: gt.boxes.len(),
        num_pred_boxes: pred.boxes.len(),
        detection,
        tracking,
        grounding,
        warnings,
    })
}

/// Sequences shown by name in a warning before the rest are only counted.
const SEQUENCES_SHOWN: usize = 5;

/// Warns of prediction sequences the ground truth does not hold (their boxes can only be false
/// positives), most of all when none matches, which scores every class 0.
fn sequence_warnings(gt: &EvalData, pred: &EvalData) -> Vec<String> {
    use std::collections::BTreeSet;
    let sequences = |d: &EvalData| -> BTreeSet<String> { d.boxes.iter().map(|b| b.frame.sequence.clone()).collect() };
    let (gt_seqs, pred_seqs) = (sequences(gt), sequences(pred));
    let unmatched: Vec<&String> = pred_seqs.difference(&gt_seqs).collect();
    if unmatched.is_empty() || gt_seqs.is_empty() {
        return Vec::new();
    }
    let list = |names: Vec<&String>| {
        let mut text = names
            .iter()
            .take(SEQUENCES_SHOWN)
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > SEQUENCES_SHOWN {
            text.push_str(&format!(" and {} more", names.len() - SEQUENCES_SHOWN));
        }
        text
    };
    if unmatched.len() == pred_seqs.len() {
        vec![format!(
            "no prediction sequence is in the ground truth: predictions name {}, the ground truth {}; \
             every prediction is a false positive (check the sequence names)",
            list(pred_seqs.iter().collect()),
            list(gt_seqs.iter().collect())
        )]
    } else {
        vec![format!(
            "{} of {} prediction sequences are not in the ground truth, their boxes count as false \
             positives: {}",
            unmatched.len(),
            pred_seqs.len(),
            list(unmatched)
        )]
    }
}

/// Loads ground truth and predictions from two paths in one input format and evaluates them.
/// Frames a Waymo ground-truth segment holds but could not read (damaged records) are left
/// unscored: predictions on them are dropped with a warning.
pub fn run(
    gt_path: &Path,
    gt_format: InputFormat,
    pred_path: &Path,
    pred_format: InputFormat,
    config: &EvalConfig,
) -> Result<EvalReport, EvalError> {
    config.validate()?;
    let (gt, unreadable) = match gt_format {
        InputFormat::Waymo => input::load_waymo_labels_with_gaps(gt_path)?,
        format => (load(gt_path, format)?, Vec::new()),
    };
    let mut pred = load(pred_path, pred_format)?;
    if !unreadable.is_empty() {
        // A damaged GT record leaves its frame without labels: predictions there are left out
        // rather than scored as false positives (issue 18).
        let gaps: std::collections::BTreeSet<&FrameKey> = unreadable.iter().collect();
        let before = pred.boxes.len();
        pred.boxes.retain(|b| !gaps.contains(&b.frame));
        pred.queries.retain(|q| !gaps.contains(&q.frame));
        let frames: Vec<String> = unreadable.iter().map(|k| k.frame.to_string()).collect();
        tracing::warn!(
            "{}: frames {} could not be read; {} predictions on them are not scored",
            gt_path.display(),
            frames.join(", "),
            before - pred.boxes.len()
        );
    }
    let mut report = evaluate(&gt, &pred, config)?;
    if !unreadable.is_empty() {
        report.warnings.push(format!(
            "{}: {} frames could not be read and are not scored",
            gt_path.display(),
            unreadable.len()
        ));
    }
    Ok(report)
}

/// Writes a report as pretty-printed JSON.
pub fn write_json_report(path: &Path, report: &EvalReport) -> Result<(), EvalError> {
    let text = serde_json::to_string_pretty(report).map_err(|e| EvalError::Serialize {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    std::fs::write(path, text + "\n").map_err(|e| EvalError::io(path, e))
}

/// Reads an `EvalConfig` from a TOML file (missing fields take their defaults).
pub fn read_config(path: &Path) -> Result<EvalConfig, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    let config: EvalConfig = toml::from_str(&text).map_err(|e| EvalError::parse(path, "toml", e.to_string()))?;
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ObjectClass;
    use crate::geometry::Box3;

    fn data(sequences: &[&str]) -> EvalData {
        let mut d = EvalData::default();
        for (i, s) in sequences.iter().enumerate() {
            d.boxes.push(EvalBox {
                frame: FrameKey {
                    sequence: s.to_string(),
                    frame: 0,
                },
                bbox: Box3::from_array([10.0 * i as f64, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0, 0.0, 0.0]),
                class: ObjectClass::Vehicle,
                score: 1.0,
                track_id: None,
                num_points: None,
                platform: None,
            });
        }
        d
    }

    /// Issue 18: an `eval` whose predictions name no ground-truth sequence printed AP 0 without a
    /// word; the report now says so, in the table and the JSON.
    #[test]
    fn predictions_on_unknown_sequences_are_warned_of() {
        let config = EvalConfig::default();
        let gt = data(&["seg_a", "seg_b"]);
        let report = evaluate(&gt, &data(&["seg_a", "seg_b"]), &config).unwrap();
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert!(!report.to_string().contains("warning"));

        let report = evaluate(&gt, &data(&["segA", "segB"]), &config).unwrap();
        assert_eq!(report.warnings.len(), 1);
        let w = &report.warnings[0];
        assert!(w.starts_with("no prediction sequence is in the ground truth"), "{w}");
        assert!(w.contains("`segA`, `segB`") && w.contains("`seg_a`, `seg_b`"), "{w}");
        assert!(report.to_string().contains("\nwarning: no prediction sequence"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["warnings"][0], serde_json::json!(w));

        let report = evaluate(&gt, &data(&["seg_a", "seg_c"]), &config).unwrap();
        assert_eq!(
            report.warnings,
            ["1 of 2 prediction sequences are not in the ground truth, their boxes count as false positives: `seg_c`"]
        );
    }
}
