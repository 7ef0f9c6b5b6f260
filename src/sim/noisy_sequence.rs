//! Simulated sequences with noisy detections: consecutive 10 Hz sweeps of one platform, each with
//! its ground truth, its LiDAR returns and the detections of several noise-modelled detectors,
//! for tuning fusion and tracking before trained detectors exist.

use nalgebra::Isometry3;

use super::config::SimConfig;
use super::detection_noise::{DetectionNoiseModel, DetectorNoiseProfile};
use super::simulator::{ObjectTruth, SimError, Simulator};
use crate::boxes::Detection;
use crate::cloud::PointCloud;
use crate::frame::{Frame, Platform};
use crate::sources::{SequenceMeta, Source, SourceError};

/// One sweep of a noisy sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisyFrame {
    /// 0-based sweep index.
    pub index: usize,
    /// Start of the sweep (µs).
    pub timestamp_micros: i64,
    /// Sensor pose in the world at the sweep's reference (mid-sweep) time.
    pub world_from_sensor: Isometry3<f64>,
    /// Labelled objects with at least one LiDAR return (`num_lidar_points >= 1`), by track id.
    pub truth: Vec<ObjectTruth>,
    /// Detections of every detector, sensor frame, detector by detector in profile order.
    pub detections: Vec<Detection>,
    /// The sweep's returns in the sensor frame (m), for points-in-box evidence.
    pub points: Vec<[f32; 3]>,
}

/// A simulated sequence with noisy detections.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisySequence {
    /// Sequence name used in evaluator frame keys (`sim_<platform>_seed<seed>`).
    pub sequence: String,
    /// The platform simulated.
    pub platform: Platform,
    /// Consecutive sweeps from index 0.
    pub frames: Vec<NoisyFrame>,
}

/// Simulates `frames` consecutive sweeps of `platform` from `seed` (overriding `config.frames`)
/// and runs one noise model per profile (all seeded by `seed`) on each sweep's truth and clutter
/// (`DetectionNoiseModel::detect_in_world`, so false positives persist on the same clutter).
pub fn simulate_noisy_sequence(
    config: SimConfig,
    platform: Platform,
    frames: usize,
    seed: u64,
    profiles: &[DetectorNoiseProfile],
) -> Result<NoisySequence, SimError> {
    let config = SimConfig { frames, ..config };
    let simulator = Simulator::new(config, platform, seed)?;
    let models: Vec<DetectionNoiseModel> = profiles
        .iter()
        .map(|p| DetectionNoiseModel::new(p.clone(), seed))
        .collect();
    // Clutter out to the farthest detector range (infinite for an exact profile).
    let clutter_range = profiles.iter().map(|p| p.max_range_m).fold(0.0f64, f64::max);
    let mut out = Vec::with_capacity(frames);
    for index in 0..frames {
        let sweep = simulator.sweep(index)?;
        let truth: Vec<ObjectTruth> = sweep
            .objects
            .iter()
            .filter(|o| o.num_lidar_points >= 1)
            .cloned()
            .collect();
        let clutter = simulator.clutter_in_sensor(&sweep, clutter_range);
        let detections = models
            .iter()
            .flat_map(|m| m.detect_in_world(index, &truth, &clutter, &sweep.world_from_sensor))
            .collect();
        let points = simulator
            .sweep_points(&sweep)
            .iter()
            .map(|p| [p.position.x as f32, p.position.y as f32, p.position.z as f32])
            .collect();
        out.push(NoisyFrame {
            index,
            timestamp_micros: sweep.timestamp_micros,
            world_from_sensor: sweep.world_from_sensor,
            truth,
            detections,
            points,
        });
    }
    Ok(NoisySequence {
        sequence: format!("sim_{}_seed{seed}", platform.as_str()),
        platform,
        frames: out,
    })
}

/// A noise-model sequence as a [`Source`], so studies run it through `pipeline::run_sequence`
/// with its detections given: each frame's points (intensity 0), time, pose and truth as labels.
pub struct NoisySource<'a> {
    sequence: &'a NoisySequence,
    meta: SequenceMeta,
}

impl<'a> NoisySource<'a> {
    /// Wraps `sequence`.
    pub fn new(sequence: &'a NoisySequence) -> Self {
        Self {
            sequence,
            meta: SequenceMeta {
                name: sequence.sequence.clone(),
                platform: sequence.platform,
                source_kind: "sim-noisy",
                path: std::path::PathBuf::new(),
                skipped: Vec::new(),
            },
        }
    }
}

impl Source for NoisySource<'_> {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.sequence.frames.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let f = self.sequence.frames.get(index).ok_or(SourceError::FrameOutOfRange {
            path: self.meta.path.clone(),
            index,
            len: self.len(),
        })?;
        let column = |k: usize| f.points.iter().map(|p| p[k]).collect();
        let cloud = PointCloud::from_columns(column(0), column(1), column(2), vec![0.0; f.points.len()])
            .map_err(|e| SourceError::corrupt(&self.meta.path, format!("frame {index}"), e.to_string()))?;
        Ok(Frame {
            sequence: self.sequence.sequence.clone(),
            index: f.index,
            timestamp_micros: f.timestamp_micros,
            platform: self.sequence.platform,
            cloud,
            world_from_sensor: f.world_from_sensor,
            imu: Vec::new(),
            cameras: Vec::new(),
            ground_truth: f.truth.iter().map(ObjectTruth::to_ground_truth_box).collect(),
            notes: Vec::new(),
        })
    }
}
