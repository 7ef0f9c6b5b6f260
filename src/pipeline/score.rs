//! Scores a sequence's layer against ground truth at each step — every single detector, the
//! fused boxes (KBF as configured and WBF beside it), the consolidated layer — with the
//! evaluator's BEV AP (R40; vehicles at IoU 0.7, pedestrians and cyclists at 0.5) and vehicle
//! CLEAR-MOT, and how often the matched vehicles' headings are right or turned round. The run writes it into `manifest.json` when the source has labels; the demo and
//! `docs/pipeline.md` print it against the simulator's truth.

use std::collections::BTreeMap;

use nalgebra::Isometry3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::sequence::SequenceLayer;
use crate::boxes::Detection;
use crate::eval::{
    ClassThresholds, DetectionConfig, EvalBox, FrameKey, ThresholdRule, TrackingConfig, evaluate_detection,
    evaluate_tracking,
};
use crate::frame::{DetectorFrame, GroundTruthBox, ObjectClass, Platform};
use crate::fuse::{FuseError, Fuser, FusionConfig, FusionMethod};
use crate::geometry::pose::isometry_from_row_major;
use crate::geometry::{Box3, iou_bev, wrap_angle};

/// BEV AP R40 per class (`None`: no ground truth of the class).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClassAp {
    /// Vehicles at IoU 0.7.
    pub vehicle: Option<f64>,
    /// Pedestrians at IoU 0.5.
    pub pedestrian: Option<f64>,
    /// Cyclists at IoU 0.5.
    pub cyclist: Option<f64>,
}

/// A layer's scores at each step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerScores {
    /// Each detector alone, by name.
    pub detectors: BTreeMap<String, ClassAp>,
    /// The detector with the best vehicle AP (ties: the first name).
    pub best_single: Option<String>,
    /// The fused boxes as configured.
    pub fused: ClassAp,
    /// The same detections fused by rotated 3D WBF (the baseline).
    pub fused_wbf: ClassAp,
    /// The final layer.
    pub consolidated: ClassAp,
    /// Vehicle MOTA of the final layer (centre distance ≤ 2 m).
    pub vehicle_mota: Option<f64>,
    /// Vehicle identity switches.
    pub vehicle_id_switches: usize,
    /// Vehicle ground-truth tracks.
    pub vehicle_gt_tracks: usize,
    /// Headings of the fused vehicles matched to the truth.
    #[serde(default)]
    pub fused_vehicle_heading: Option<HeadingShares>,
    /// Headings of the final layer's vehicles matched to the truth.
    #[serde(default)]
    pub vehicle_heading: Option<HeadingShares>,
}

/// Largest heading error counted as right, and smallest counted as turned round (its
/// complement to 180°).
pub const HEADING_TOLERANCE_DEG: f64 = 30.0;

/// BEV IoU at which a vehicle box counts as matched to a true one for its heading.
pub const HEADING_MATCH_IOU: f64 = 0.5;

/// How the headings of boxes matched to the truth compare with it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HeadingShares {
    /// Boxes matched (BEV IoU ≥ [`HEADING_MATCH_IOU`], greedily by score within each frame).
    pub matched: usize,
    /// Share within [`HEADING_TOLERANCE_DEG`] of the true heading.
    pub correct: f64,
    /// Share within [`HEADING_TOLERANCE_DEG`] of the true heading turned by 180°.
    pub flipped: f64,
}

/// Heading shares of the vehicles in `predicted` against those in `truth`; `None` when none
/// matched.
pub fn vehicle_heading(truth: &[EvalBox], predicted: &[EvalBox]) -> Option<HeadingShares> {
    let mut frames: BTreeMap<&FrameKey, (Vec<&EvalBox>, Vec<&EvalBox>)> = BTreeMap::new();
    for b in truth.iter().filter(|b| b.class == ObjectClass::Vehicle) {
        frames.entry(&b.frame).or_default().0.push(b);
    }
    for b in predicted.iter().filter(|b| b.class == ObjectClass::Vehicle) {
        if let Some(entry) = frames.get_mut(&b.frame) {
            entry.1.push(b);
        }
    }
    let (mut matched, mut correct, mut flipped) = (0usize, 0usize, 0usize);
    for (truth, mut predicted) in frames.into_values() {
        predicted.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut taken = vec![false; truth.len()];
        for p in predicted {
            let best = truth
                .iter()
                .enumerate()
                .filter(|(i, _)| !taken[*i])
                .map(|(i, t)| (i, iou_bev(&p.bbox, &t.bbox)))
                .filter(|(_, iou)| *iou >= HEADING_MATCH_IOU)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((i, _)) = best else {
                continue;
            };
            taken[i] = true;
            matched += 1;
            let off = wrap_angle(p.bbox.yaw - truth[i].bbox.yaw).abs().to_degrees();
            correct += usize::from(off <= HEADING_TOLERANCE_DEG);
            flipped += usize::from(off >= 180.0 - HEADING_TOLERANCE_DEG);
        }
    }
    (matched > 0).then(|| HeadingShares {
        matched,
        correct: correct as f64 / matched as f64,
        flipped: flipped as f64 / matched as f64,
    })
}

fn key(sequence: &str, frame: i64) -> FrameKey {
    FrameKey {
        sequence: sequence.to_string(),
        frame: frame as u64,
    }
}

fn eval_box(
    sequence: &str,
    frame: i64,
    bbox: Box3,
    class: ObjectClass,
    score: f64,
    track: Option<String>,
    platform: Platform,
) -> EvalBox {
    EvalBox {
        frame: key(sequence, frame),
        bbox,
        class,
        score,
        track_id: track,
        num_points: None,
        platform: Some(platform),
    }
}

/// The source's labels of a layer as evaluator ground truth.
pub fn label_truth(layer: &SequenceLayer, sequence: &str, platform: Platform) -> Vec<EvalBox> {
    layer
        .frames
        .iter()
        .zip(&layer.labels)
        .flat_map(|(f, labels)| labels.iter().map(move |l: &GroundTruthBox| (f.frame_index, l)))
        .map(|(frame, l)| EvalBox {
            frame: key(sequence, frame),
            bbox: l.box_in_sensor,
            class: l.class,
            score: 1.0,
            track_id: Some(l.track_id.clone()),
            num_points: l.num_points.map(u64::from),
            platform: Some(platform),
        })
        .collect()
}

/// The ground truth a layer is scored against: objects with at least one LiDAR return (when the
/// truth counts them) whose centre lies within `max_abs_xy_m` of the sensor in x and y (the
/// detectors' range; `None`: no limit), as the bundled detectors' model cards count them.
pub fn visible_truth(truth: &[EvalBox], max_abs_xy_m: Option<f64>) -> Vec<EvalBox> {
    truth
        .iter()
        .filter(|b| b.num_points.is_none_or(|n| n >= 1))
        .filter(|b| max_abs_xy_m.is_none_or(|r| b.bbox.x.abs() < r && b.bbox.y.abs() < r))
        .cloned()
        .collect()
}

/// BEV AP R40: vehicles at 0.7, pedestrians and cyclists at 0.5 (strict `>`).
pub fn class_ap(truth: &[EvalBox], predicted: &[EvalBox]) -> ClassAp {
    let config = DetectionConfig::bev_only(
        ClassThresholds::none()
            .with(ObjectClass::Vehicle, vec![0.7])
            .with(ObjectClass::Pedestrian, vec![0.5])
            .with(ObjectClass::Cyclist, vec![0.5]),
    );
    let results = evaluate_detection(truth, predicted, &config, ThresholdRule::Strict);
    let ap = |class| results.iter().find(|r| r.class == class).and_then(|r| r.ap_r40);
    ClassAp {
        vehicle: ap(ObjectClass::Vehicle),
        pedestrian: ap(ObjectClass::Pedestrian),
        cyclist: ap(ObjectClass::Cyclist),
    }
}

/// Scores `layer` against `truth` (boxes in the sensor frame, keyed by sequence and frame index).
pub fn score_layer(
    truth: &[EvalBox],
    layer: &SequenceLayer,
    sequence: &str,
    platform: Platform,
    fusion: &FusionConfig,
    fusion_frame: DetectorFrame,
    views: &[super::DetectorView],
) -> Result<LayerScores, FuseError> {
    let mut per_detector: BTreeMap<String, Vec<EvalBox>> = BTreeMap::new();
    for d in &layer.detections {
        let class = d.class.parse().unwrap_or(ObjectClass::Unknown);
        per_detector.entry(d.detector.clone()).or_default().push(eval_box(
            sequence,
            d.frame_index,
            Box3::from_array(d.box_sensor),
            class,
            f64::from(d.score),
            None,
            platform,
        ));
    }
    let detectors: BTreeMap<String, ClassAp> = per_detector
        .par_iter()
        .map(|(name, boxes)| (name.clone(), class_ap(truth, boxes)))
        .collect();
    let best_single = detectors
        .iter()
        .max_by(|a, b| {
            let va = a.1.vehicle.unwrap_or(-1.0);
            let vb = b.1.vehicle.unwrap_or(-1.0);
            va.total_cmp(&vb).then(b.0.cmp(a.0))
        })
        .map(|(n, _)| n.clone());
    let fused: Vec<EvalBox> = layer
        .frames
        .iter()
        .zip(&layer.fused)
        .flat_map(|(f, boxes)| boxes.iter().map(move |b| (f.frame_index, b)))
        .map(|(frame, b)| eval_box(sequence, frame, b.box3, b.class, f64::from(b.score), None, platform))
        .collect();
    // WBF on the same detections, for the side-by-side row.
    let mut wbf_config = fusion.clone();
    wbf_config.method = FusionMethod::Wbf;
    let wbf = Fuser::new(&wbf_config, platform)?;
    let mut by_frame: BTreeMap<i64, Vec<Detection>> = BTreeMap::new();
    for d in &layer.detections {
        by_frame.entry(d.frame_index).or_default().push(Detection {
            box3: Box3::from_array(d.box_sensor),
            class: d.class.parse().unwrap_or(ObjectClass::Unknown),
            score: d.score,
            detector: d.detector.clone(),
        });
    }
    // Fused where KBF fused them: gravity-aligned when the detectors were (the sequence's
    // normalization here, within ~1.5° of pass 1's per-frame one).
    let normalized: BTreeMap<i64, Isometry3<f64>> = layer
        .frames
        .iter()
        .filter(|_| fusion_frame == DetectorFrame::Normalized)
        .filter_map(|f| {
            let m = f.normalized_from_sensor.as_ref()?;
            Some((f.frame_index, isometry_from_row_major(m, 1e-6)?))
        })
        .collect();
    let fused_wbf: Vec<Vec<EvalBox>> = by_frame
        .par_iter_mut()
        .map(|(frame, detections)| {
            let n = normalized.get(frame);
            if let Some(n) = n {
                for d in detections.iter_mut() {
                    d.box3 = d.box3.transformed(n);
                }
            }
            let fused = super::sequence::fuse_with_views(&wbf, detections, views, n)?;
            Ok(fused
                .into_iter()
                .map(|b| {
                    eval_box(
                        sequence,
                        *frame,
                        n.map_or(b.box3, |n| b.box3.transformed(&n.inverse())),
                        b.class,
                        f64::from(b.score),
                        None,
                        platform,
                    )
                })
                .collect())
        })
        .collect::<Result<_, FuseError>>()?;
    let fused_wbf: Vec<EvalBox> = fused_wbf.into_iter().flatten().collect();
    let consolidated: Vec<EvalBox> = layer
        .boxes
        .iter()
        .map(|b| {
            eval_box(
                sequence,
                b.frame_index,
                Box3::from_array(b.box_sensor),
                b.class.parse().unwrap_or(ObjectClass::Unknown),
                b.score,
                Some(b.track_id.to_string()),
                platform,
            )
        })
        .collect();
    // The scores are independent of one another: computed side by side.
    let ((fused_ap, fused_wbf_ap), (consolidated_ap, tracking)) = rayon::join(
        || rayon::join(|| class_ap(truth, &fused), || class_ap(truth, &fused_wbf)),
        || {
            rayon::join(
                || class_ap(truth, &consolidated),
                || evaluate_tracking(truth, &consolidated, &TrackingConfig::default(), ThresholdRule::Strict),
            )
        },
    );
    let vehicle = tracking.iter().find(|r| r.class == ObjectClass::Vehicle);
    Ok(LayerScores {
        detectors,
        best_single,
        fused: fused_ap,
        fused_wbf: fused_wbf_ap,
        consolidated: consolidated_ap,
        vehicle_mota: vehicle.and_then(|r| r.clear_mot.mota),
        vehicle_id_switches: vehicle.map_or(0, |r| r.clear_mot.id_switches),
        vehicle_gt_tracks: vehicle.map_or(0, |r| r.clear_mot.num_gt_tracks),
        fused_vehicle_heading: vehicle_heading(truth, &fused),
        vehicle_heading: vehicle_heading(truth, &consolidated),
    })
}

#[cfg(test)]
mod tests {
    use std::f64::consts::FRAC_PI_4;

    use super::*;

    fn vehicle(frame: i64, x: f64, yaw: f64, score: f64) -> EvalBox {
        sized(frame, x, yaw, score, [4.5, 2.0])
    }

    fn sized(frame: i64, x: f64, yaw: f64, score: f64, [l, w]: [f64; 2]) -> EvalBox {
        let bbox = Box3::from_array([x, 0.0, 0.0, l, w, 1.6, yaw, 0.0, 0.0]);
        eval_box("s", frame, bbox, ObjectClass::Vehicle, score, None, Platform::Vehicle)
    }

    #[test]
    fn heading_shares_count_right_turned_and_wrong_headings_of_matched_vehicles() {
        // Frame 1's square box turned 45° still overlaps at BEV IoU 0.83 / 1.17 = 0.71.
        let truth = [
            vehicle(0, 0.0, 0.3, 1.0),
            vehicle(0, 10.0, -1.0, 1.0),
            sized(1, 0.0, 2.0, 1.0, [2.0, 2.0]),
        ];
        let predicted = [
            vehicle(0, 0.2, 0.3 + 0.4, 0.9),                    // 23° off: right
            vehicle(0, 10.1, -1.0 + std::f64::consts::PI, 0.8), // turned round
            vehicle(0, 0.1, 0.3, 0.5),                          // its truth already taken
            vehicle(0, 30.0, 0.0, 0.9),                         // no truth there
            sized(1, 0.0, 2.0 + FRAC_PI_4, 0.7, [2.0, 2.0]),    // 45° off: neither
            vehicle(2, 0.0, 0.0, 0.9),                          // a frame without truth
        ];
        let shares = vehicle_heading(&truth, &predicted).unwrap();
        assert_eq!(shares.matched, 3);
        assert!((shares.correct - 1.0 / 3.0).abs() < 1e-12, "{shares:?}");
        assert!((shares.flipped - 1.0 / 3.0).abs() < 1e-12, "{shares:?}");
        assert_eq!(vehicle_heading(&truth, &predicted[3..4]), None);
    }
}
