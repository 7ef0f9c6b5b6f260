//! Scores a sequence's layer against ground truth at each step — every single detector, the
//! fused boxes (KBF as configured and WBF beside it), the consolidated layer — with the
//! evaluator's BEV AP (R40; vehicles at IoU 0.7, pedestrians and cyclists at 0.5) and vehicle
//! CLEAR-MOT. The run writes it into `manifest.json` when the source has labels; the demo and
//! `docs/pipeline.md` print it against the simulator's truth.

use std::collections::BTreeMap;

use nalgebra::Isometry3;
use serde::{Deserialize, Serialize};

use super::sequence::SequenceLayer;
use crate::boxes::Detection;
use crate::eval::{
    ClassThresholds, DetectionConfig, EvalBox, FrameKey, ThresholdRule, TrackingConfig, evaluate_detection,
    evaluate_tracking,
};
use crate::frame::{DetectorFrame, GroundTruthBox, ObjectClass, Platform};
use crate::fuse::{FuseError, Fuser, FusionConfig, FusionMethod};
use crate::geometry::Box3;
use crate::geometry::pose::isometry_from_row_major;

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
        .iter()
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
    let mut fused_wbf = Vec::new();
    for (frame, detections) in &mut by_frame {
        let n = normalized.get(frame);
        if let Some(n) = n {
            for d in detections.iter_mut() {
                d.box3 = d.box3.transformed(n);
            }
        }
        for b in wbf.fuse(detections)? {
            fused_wbf.push(eval_box(
                sequence,
                *frame,
                n.map_or(b.box3, |n| b.box3.transformed(&n.inverse())),
                b.class,
                f64::from(b.score),
                None,
                platform,
            ));
        }
    }
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
    let tracking = evaluate_tracking(truth, &consolidated, &TrackingConfig::default(), ThresholdRule::Strict);
    let vehicle = tracking.iter().find(|r| r.class == ObjectClass::Vehicle);
    Ok(LayerScores {
        detectors,
        best_single,
        fused: class_ap(truth, &fused),
        fused_wbf: class_ap(truth, &fused_wbf),
        consolidated: class_ap(truth, &consolidated),
        vehicle_mota: vehicle.and_then(|r| r.clear_mot.mota),
        vehicle_id_switches: vehicle.map_or(0, |r| r.clear_mot.id_switches),
        vehicle_gt_tracks: vehicle.map_or(0, |r| r.clear_mot.num_gt_tracks),
    })
}
