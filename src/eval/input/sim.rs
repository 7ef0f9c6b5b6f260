//! The simulator's ground-truth types (`sim::ObjectTruth`, `sim::NoisySequence`) and detections
//! as evaluation input. The simulator emits its own types; the conversion to evaluator boxes lives
//! here, on the evaluator's side.

use super::{EvalBox, FrameKey};
use crate::boxes::Detection;
use crate::frame::Platform;
use crate::sim::{NoisySequence, ObjectTruth};

/// One simulated object as a ground-truth box of frame `frame` of `sequence` (sensor frame,
/// score 1, track id as decimal text, its LiDAR return count).
pub fn object_truth_box(object: &ObjectTruth, sequence: &str, frame: usize, platform: Platform) -> EvalBox {
    EvalBox {
        frame: FrameKey {
            sequence: sequence.to_string(),
            frame: frame as u64,
        },
        bbox: object.box_in_sensor,
        class: object.class,
        score: 1.0,
        track_id: Some(object.track_id.to_string()),
        num_points: Some(u64::from(object.num_lidar_points)),
        platform: Some(platform),
    }
}

/// One detection as a prediction box of frame `frame` of `sequence` (no track id).
pub fn detection_box(detection: &Detection, sequence: &str, frame: usize, platform: Platform) -> EvalBox {
    EvalBox {
        frame: FrameKey {
            sequence: sequence.to_string(),
            frame: frame as u64,
        },
        bbox: detection.box3,
        class: detection.class,
        score: f64::from(detection.score),
        track_id: None,
        num_points: None,
        platform: Some(platform),
    }
}

/// Every frame's truth of a noise-model sequence as ground-truth boxes.
pub fn noisy_sequence_truth(seq: &NoisySequence) -> Vec<EvalBox> {
    seq.frames
        .iter()
        .flat_map(|f| {
            f.truth
                .iter()
                .map(move |o| object_truth_box(o, &seq.sequence, f.index, seq.platform))
        })
        .collect()
}

/// Every frame's boxes of the detector named `detector` in a noise-model sequence.
pub fn noisy_sequence_detections(seq: &NoisySequence, detector: &str) -> Vec<EvalBox> {
    seq.frames
        .iter()
        .flat_map(|f| {
            f.detections
                .iter()
                .filter(move |d| d.detector == detector)
                .map(move |d| detection_box(d, &seq.sequence, f.index, seq.platform))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::input::to_json_line;
    use crate::sim::{SimConfig, Simulator};

    /// The simulator writes its JSON-lines truth itself (`sim::truth_json_line`); read as the
    /// evaluator reads it, each line is the box this module makes of the object.
    #[test]
    fn the_simulators_truth_lines_are_the_evaluators_boxes() {
        let config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Platform::Quadruped, 4).unwrap();
        let sweep = sim.sweep(1).unwrap();
        assert!(!sweep.objects.is_empty());
        for o in &sweep.objects {
            let written = crate::sim::truth_json_line(o, "spot", 1, Platform::Quadruped);
            assert_eq!(
                written,
                to_json_line(&object_truth_box(o, "spot", 1, Platform::Quadruped))
            );
        }
    }
}
