//! The demo's consolidation stage: per-frame boxes of three modelled detectors (the simulator's
//! detection-noise model stands in for ONNX detectors: the two bundled networks are trained on the
//! vehicle platform only, `detectors/*/README.md`, and a third is needed for the ensemble) → KDE box
//! fusion with `pipelines/fusion.toml` → offline tracking with the default `TrackingProfiles` →
//! scored against the simulator's truth at each step. It writes the consolidated boxes and their
//! truth as JSON lines that `boxlayer eval` reads.

use std::path::{Path, PathBuf};

use super::{DemoError, write_file};
use crate::cloud::PointCloud;
use crate::eval::input::to_json_line;
use crate::eval::{
    ClassThresholds, DetectionConfig, EvalBox, FrameKey, ThresholdRule, TrackingConfig, evaluate_detection,
    evaluate_tracking,
};
use crate::frame::{ObjectClass, Platform};
use crate::fuse::{Fuser, FusionConfig};
use crate::sim::{NoisySequence, SimConfig, simulate_noisy_sequence, standard_detector_profiles};
use crate::track::{TrackFrame, TrackInputBox, TrackingProfiles, consolidate};

/// The fusion settings the demo runs with (`pipelines/fusion.toml`, embedded).
pub const FUSION_TOML: &str = include_str!("../../pipelines/fusion.toml");

/// BEV AP (R40) of vehicles at IoU 0.7 and pedestrians at 0.5; `None` without GT of the class.
pub type VehiclePedestrianAp = [Option<f64>; 2];

/// One platform's consolidation figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsolidationSummary {
    /// The platform.
    pub platform: Platform,
    /// Consecutive sweeps (10 Hz) consolidated.
    pub frames: usize,
    /// The modelled detector with the best vehicle AP, and its AP.
    pub best_single: (String, VehiclePedestrianAp),
    /// AP of the fused per-frame boxes.
    pub fused: VehiclePedestrianAp,
    /// AP of the consolidated (tracked, gap-filled, refined) boxes.
    pub consolidated: VehiclePedestrianAp,
    /// Vehicle MOTA of the consolidated tracks (centre distance ≤ 2 m, nuScenes matching).
    pub vehicle_mota: Option<f64>,
    /// Vehicle identity switches.
    pub vehicle_id_switches: usize,
    /// Vehicle GT tracks.
    pub vehicle_gt_tracks: usize,
    /// The truth these figures were scored against (JSON lines).
    pub truth_path: PathBuf,
    /// The consolidated boxes with track ids (JSON lines).
    pub consolidated_path: PathBuf,
}

/// Simulates `frames` sweeps of `platform`, runs detections → fusion → tracking and scores each.
pub fn consolidate_platform(
    platform: Platform,
    frames: usize,
    seed: u64,
    out: &Path,
) -> Result<ConsolidationSummary, DemoError> {
    let fusion: FusionConfig = toml::from_str(FUSION_TOML).map_err(|e| DemoError::Config {
        what: "pipelines/fusion.toml",
        reason: e.to_string(),
    })?;
    let config = SimConfig {
        frames: frames.max(2),
        ..SimConfig::default()
    };
    let profiles = standard_detector_profiles();
    let sequence = simulate_noisy_sequence(config, platform, frames.max(2), seed, &profiles)
        .map_err(|source| DemoError::Sim { platform, source })?;
    let truth = sequence.truth_eval_boxes();

    let mut best_single = (String::new(), [None, None]);
    for profile in &profiles {
        let ap = bev_ap(&truth, &sequence.detector_eval_boxes(&profile.name));
        if best_single.0.is_empty() || ap[0].unwrap_or(-1.0) > best_single.1[0].unwrap_or(-1.0) {
            best_single = (profile.name.clone(), ap);
        }
    }

    let fuser = Fuser::new(&fusion, platform)?;
    let mut fused = Vec::with_capacity(sequence.frames.len());
    for frame in &sequence.frames {
        let boxes = fuser.fuse(&frame.detections)?;
        fused.push(
            boxes
                .into_iter()
                .map(|b| TrackInputBox {
                    box3: b.box3,
                    class: b.class,
                    score: f64::from(b.score),
                    votes: b.votes,
                })
                .collect::<Vec<_>>(),
        );
    }
    let fused_eval: Vec<EvalBox> = fused
        .iter()
        .enumerate()
        .flat_map(|(f, boxes)| boxes.iter().map(move |b| (f, b)))
        .map(|(f, b)| eval_box(&sequence, f, b.box3, b.class, b.score, None))
        .collect();

    let track_frames = track_frames(&sequence, fused);
    let consolidation = consolidate(&track_frames, TrackingProfiles::default().for_platform(platform))?;
    let consolidated: Vec<EvalBox> = consolidation
        .boxes
        .iter()
        .map(|b| {
            let id = Some(b.track_id.to_string());
            eval_box(&sequence, b.frame, b.box_in_sensor, b.class, b.score, id)
        })
        .collect();
    let tracking = evaluate_tracking(&truth, &consolidated, &TrackingConfig::default(), ThresholdRule::Strict);
    let vehicle = tracking.iter().find(|r| r.class == ObjectClass::Vehicle);

    let dir = out.join(platform.as_str());
    let truth_path = dir.join(format!("{}_consolidation_gt.jsonl", sequence.sequence));
    let consolidated_path = dir.join(format!("{}_consolidated.jsonl", sequence.sequence));
    write_json_lines(&truth_path, &truth)?;
    write_json_lines(&consolidated_path, &consolidated)?;
    Ok(ConsolidationSummary {
        platform,
        frames: sequence.frames.len(),
        best_single,
        fused: bev_ap(&truth, &fused_eval),
        consolidated: bev_ap(&truth, &consolidated),
        vehicle_mota: vehicle.and_then(|r| r.clear_mot.mota),
        vehicle_id_switches: vehicle.map_or(0, |r| r.clear_mot.id_switches),
        vehicle_gt_tracks: vehicle.map_or(0, |r| r.clear_mot.num_gt_tracks),
        truth_path,
        consolidated_path,
    })
}

/// The tracker's input: fused boxes, poses, times and each sweep's points (for track extension).
fn track_frames(sequence: &NoisySequence, fused: Vec<Vec<TrackInputBox>>) -> Vec<TrackFrame> {
    sequence
        .frames
        .iter()
        .zip(fused)
        .map(|(frame, boxes)| {
            let column = |k: usize| frame.points.iter().map(|p| p[k]).collect::<Vec<f32>>();
            // Equal lengths by construction; an error would only drop the track-extension evidence.
            let cloud = PointCloud::from_columns(column(0), column(1), column(2), vec![0.0; frame.points.len()]).ok();
            TrackFrame {
                timestamp_micros: frame.timestamp_micros,
                world_from_sensor: frame.world_from_sensor,
                boxes,
                points_in_sensor: cloud,
            }
        })
        .collect()
}

fn eval_box(
    sequence: &NoisySequence,
    frame: usize,
    bbox: crate::geometry::Box3,
    class: ObjectClass,
    score: f64,
    track_id: Option<String>,
) -> EvalBox {
    EvalBox {
        frame: FrameKey {
            sequence: sequence.sequence.clone(),
            frame: frame as u64,
        },
        bbox,
        class,
        score,
        track_id,
        num_points: None,
        platform: Some(sequence.platform),
    }
}

/// BEV AP R40, vehicles at IoU 0.7 and pedestrians at 0.5 (strict `>`).
fn bev_ap(truth: &[EvalBox], predicted: &[EvalBox]) -> VehiclePedestrianAp {
    let config = DetectionConfig::bev_only(
        ClassThresholds::none()
            .with(ObjectClass::Vehicle, vec![0.7])
            .with(ObjectClass::Pedestrian, vec![0.5]),
    );
    let results = evaluate_detection(truth, predicted, &config, ThresholdRule::Strict);
    [ObjectClass::Vehicle, ObjectClass::Pedestrian]
        .map(|class| results.iter().find(|r| r.class == class).and_then(|r| r.ap_r40))
}

fn write_json_lines(path: &Path, boxes: &[EvalBox]) -> Result<(), DemoError> {
    let mut text = String::new();
    for b in boxes {
        text.push_str(&to_json_line(b));
        text.push('\n');
    }
    write_file(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_fusion_config_parses_and_validates_for_every_platform() {
        let config: FusionConfig = toml::from_str(FUSION_TOML).unwrap();
        for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
            Fuser::new(&config, platform).unwrap();
        }
        assert_eq!(config.vehicle.min_votes, 1);
        assert_eq!(config.vehicle.radius_m, 1.5);
    }
}
