//! `EvalReport`: every result of one evaluation, serialised as JSON and printed as terminal tables.

use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

use super::config::ThresholdRule;
use super::detection::DetectionResult;
use super::grounding::GroundingResult;
use super::tracking::TrackingResult;

/// All results of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// The threshold comparison used throughout.
    pub threshold_rule: ThresholdRule,
    /// GT detection/tracking boxes read.
    pub num_gt_boxes: usize,
    /// Predicted detection/tracking boxes read.
    pub num_pred_boxes: usize,
    /// Detection results per class, overlap measure and threshold.
    pub detection: Vec<DetectionResult>,
    /// Tracking results per class (empty when either side lacks track ids).
    pub tracking: Vec<TrackingResult>,
    /// Grounding results (absent when the GT has no queries).
    pub grounding: Option<GroundingResult>,
    /// What may make the scores mean less than they seem: prediction sequences the ground truth
    /// does not hold, frames left unscored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{:.2}", 100.0 * v))
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

impl fmt::Display for EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = self.threshold_rule.symbol();
        let mut out = String::new();
        writeln!(
            out,
            "boxes: {} GT, {} predicted; match when IoU {rule} threshold",
            self.num_gt_boxes, self.num_pred_boxes
        )?;
        if !self.detection.is_empty() {
            let score = self.detection.first().map_or(0.0, |d| d.score_threshold);
            writeln!(
                out,
                "\ndetection (AP and recall in %; rec@s = recall at score >= {score}; mean errors of matches)"
            )?;
            writeln!(
                out,
                "{:<11} {:<4} {:>5} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
                "class", "iou", "thr", "num_gt", "num_tp", "AP_R40", "AP_all", "rec@s", "ctr_m", "size_m", "yaw_rad"
            )?;
            // Classes with neither GT nor predictions are in the JSON only.
            for d in self.detection.iter().filter(|d| d.num_gt > 0 || d.num_pred > 0) {
                let size = d.errors.mean_size_error_m.map(|s| (s[0] + s[1] + s[2]) / 3.0);
                writeln!(
                    out,
                    "{:<11} {:<4} {:>5.2} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
                    d.class.as_str(),
                    d.iou_kind.as_str(),
                    d.threshold,
                    d.num_gt,
                    d.num_tp,
                    pct(d.ap_r40),
                    pct(d.ap_all_points),
                    pct(d.recall_at_score),
                    num(d.errors.mean_center_error_m, 3),
                    num(size, 3),
                    num(d.errors.mean_yaw_error_rad, 3),
                )?;
            }
            writeln!(
                out,
                "\ndetection breakdowns (AP in %; bins without GT or predictions left out)"
            )?;
            writeln!(
                out,
                "{:<11} {:<4} {:>5} {:<9} {:<10} {:>7} {:>7} {:>7}",
                "class", "iou", "thr", "by", "bin", "num_gt", "AP_R40", "AP_all"
            )?;
            for d in &self.detection {
                for b in d.breakdowns.iter().filter(|b| b.num_gt > 0 || b.num_pred > 0) {
                    writeln!(
                        out,
                        "{:<11} {:<4} {:>5.2} {:<9} {:<10} {:>7} {:>7} {:>7}",
                        d.class.as_str(),
                        d.iou_kind.as_str(),
                        d.threshold,
                        b.by,
                        b.bin,
                        b.num_gt,
                        pct(b.ap_r40),
                        pct(b.ap_all_points)
                    )?;
                }
            }
        }
        if !self.tracking.is_empty() {
            writeln!(out, "\ntracking (MOTA, AMOTA, sAMOTA in %)")?;
            writeln!(
                out,
                "{:<11} {:<16} {:>5} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>5} {:>5} {:>4} {:>4} {:>7}",
                "class",
                "matching",
                "thr",
                "MOTA",
                "AMOTA",
                "sAMOTA",
                "num_gt",
                "FP",
                "FN",
                "IDS",
                "Frag",
                "MT",
                "ML",
                "MOTP_m"
            )?;
            for t in &self.tracking {
                let c = &t.clear_mot;
                writeln!(
                    out,
                    "{:<11} {:<16} {:>5.2} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>5} {:>5} {:>4} {:>4} {:>7}",
                    t.class.as_str(),
                    t.matching.as_str(),
                    t.threshold,
                    pct(c.mota),
                    pct(t.amota),
                    pct(t.samota),
                    c.num_gt,
                    c.false_positives,
                    c.false_negatives,
                    c.id_switches,
                    c.fragmentations,
                    c.mostly_tracked,
                    c.mostly_lost,
                    num(c.motp_center_m, 3)
                )?;
            }
        }
        if let Some(g) = &self.grounding {
            writeln!(
                out,
                "\ngrounding ({} IoU, correct when IoU {} δ; in %)",
                g.iou.as_str(),
                g.threshold_rule
            )?;
            let mut header = format!("{:<14} {:>8}", "subset", "queries");
            if let Some(first) = g.summaries.first() {
                for a in &first.accuracy {
                    write!(header, " {:>9}", format!("Acc@{}", a.threshold))?;
                }
            }
            writeln!(out, "{header} {:>7}", "mIoU")?;
            for s in &g.summaries {
                let mut row = format!("{:<14} {:>8}", s.subset, s.num_queries);
                for a in &s.accuracy {
                    write!(row, " {:>9.2}", 100.0 * a.accuracy)?;
                }
                writeln!(out, "{row} {:>7.2}", 100.0 * s.miou)?;
            }
            if g.num_missing_predictions > 0 {
                writeln!(
                    out,
                    "{} GT queries had no prediction (scored as IoU 0)",
                    g.num_missing_predictions
                )?;
            }
        }
        for w in &self.warnings {
            writeln!(out, "\nwarning: {w}")?;
        }
        f.write_str(&out)
    }
}
