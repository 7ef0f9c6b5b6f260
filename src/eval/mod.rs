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
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
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
            source,
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
    Ok(EvalReport {
        threshold_rule: config.threshold_rule,
        num_gt_boxes: gt.boxes.len(),
        num_pred_boxes: pred.boxes.len(),
        detection,
        tracking,
        grounding,
    })
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
    evaluate(&gt, &pred, config)
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
