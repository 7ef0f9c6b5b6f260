//! The three passes over one sequence, and the only place that knows the order of the stages:
//!
//! 1. per frame, in parallel windows: read → detect (every detector) → fuse; keep the small
//!    results (frame metadata, raw and fused boxes) and spill the points to a scratch file;
//! 2. per sequence: track the fused boxes in the world frame (or take the source's labels);
//! 3. per frame, in parallel: final boxes → points inside, range and pitch, camera footprints
//!    and occlusion, flags → box rows; then track rows;
//! 4. the RGB class check (`stages.camera_check`): each track's best views are read again from
//!    the source and classified, and the track's vote is compared with each box's class.
//!
//! Each stage is a plain function of its own module; this file only hands data between them.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::time::{Duration, Instant};

use nalgebra::{Isometry3, Point3};
use rayon::prelude::*;

use super::PipelineError;
use super::config::{LayerOrigin, PipelineConfig, PointsKept, ReviewConfig};
use super::scratch::ScratchPoints;
use super::shared_runs::Board;
use crate::boxes::{Detection, FusedBox};
use crate::camera::{BoxView, CameraReturns, best_view, box_views, project_point};
use crate::classify::Classifier;
use crate::cloud::PointCloud;
use crate::detect::Detector;
use crate::frame::{CameraCalibration, DetectorFrame, GroundTruthBox, ObjectClass, Platform};
use crate::fuse::Fuser;
use crate::geometry::Box3;
use crate::ground_contact::{ContactFrame, set_on_ground};
use crate::normalize::{ClassSizes, FrameInputs, Normalization, Profile, normalize_frame, normalize_sequence};
use crate::shards::{
    BoxRow, CameraFootprint, DetectionRow, DetectionsWriter, FrameError, FrameRow, PointsFrame, PointsWriter,
    StageTimes, TrackRow,
};
use crate::sources::{OnCorrupt, Source};
use crate::track::{
    BoxOrigin, Consolidation, MotionState, SweepPoints, TrackFrame, TrackInputBox, TrackSummary, TrackedBox,
    consolidate,
};

/// A detector as a sequence runs it.
#[derive(Clone, Copy)]
pub struct SequenceDetector<'a> {
    /// The loaded detector.
    pub detector: &'a Detector,
    /// The frame of the points it is given (`Normalized` needs [`SequenceJob::normalize`]).
    pub frame: DetectorFrame,
    /// Where the ground lies in those points (z, m), when the platform profile fixes it; a
    /// detector whose manifest sets `ground_z_m` gets them moved there.
    pub ground_z_m: Option<f64>,
}

/// Where a detector can see: a box whose place is outside its input grid is not counted against
/// it when fusion weighs the votes (`fuse::Roster`).
#[derive(Debug, Clone, PartialEq)]
pub struct DetectorView {
    /// The detector's name, as its boxes carry it.
    pub name: String,
    /// The frame of the points it takes.
    pub frame: DetectorFrame,
    /// Its grid's `point_cloud_range` `[x_min, y_min, z_min, x_max, y_max, z_max]` (m, in `frame`).
    pub range: [f64; 6],
}

impl DetectorView {
    /// Whether a box in this detector's frame has its BEV centre inside the grid and its height
    /// span meets the grid's z range.
    pub fn sees(&self, b: &Box3) -> bool {
        let r = &self.range;
        (r[0]..=r[3]).contains(&b.x)
            && (r[1]..=r[4]).contains(&b.y)
            && b.z - 0.5 * b.h <= r[5]
            && b.z + 0.5 * b.h >= r[2]
    }

    /// Whether the detector could have seen a box given in the fusion frame, where
    /// `normalized_from_sensor` (when fused gravity-aligned) takes sensor-frame boxes.
    pub fn sees_fused(&self, b: &Box3, normalized_from_sensor: Option<&Isometry3<f64>>) -> bool {
        match (self.frame, normalized_from_sensor) {
            (DetectorFrame::Sensor, Some(n)) => self.sees(&b.transformed(&n.inverse())),
            _ => self.sees(b),
        }
    }
}

/// Fuses one frame's detections with `views` as the roster of detectors that ran (none when
/// empty), `normalized_from_sensor` given when the boxes are gravity-aligned.
pub(super) fn fuse_with_views(
    fuser: &Fuser,
    detections: &[Detection],
    views: &[DetectorView],
    normalized_from_sensor: Option<&Isometry3<f64>>,
) -> Result<Vec<FusedBox>, crate::fuse::FuseError> {
    let names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
    let sees = |name: &str, b: &Box3| {
        views
            .iter()
            .find(|v| v.name == name)
            .is_none_or(|v| v.sees_fused(b, normalized_from_sensor))
    };
    let roster = crate::fuse::Roster {
        detectors: &names,
        sees: &sees,
    };
    fuser.fuse_with(detections, (!views.is_empty()).then_some(&roster))
}

/// Where pass 1 takes each frame's raw detections from.
pub enum DetectionsFrom<'a> {
    /// Run these detectors on every frame's points.
    Detectors(&'a [SequenceDetector<'a>]),
    /// Given, by frame index (a stored `detections.parquet`, a user's JSON lines, a noise model).
    Given(&'a BTreeMap<i64, Vec<Detection>>),
}

/// One sequence to run.
pub struct SequenceJob<'a> {
    /// The configuration.
    pub config: &'a PipelineConfig,
    /// The log.
    pub source: &'a dyn Source,
    /// The platform that recorded it.
    pub platform: Platform,
    /// The raw detections.
    pub detections: DetectionsFrom<'a>,
    /// Positions of the source's readable frames to run (default: all).
    pub frames: Option<Range<usize>>,
    /// Folder for the points scratch file (the sequence's staging folder); `None`: the system's
    /// temporary folder.
    pub scratch_dir: Option<&'a std::path::Path>,
    /// Show a progress bar of the per-frame pass (only on a terminal; log lines otherwise).
    pub progress: bool,
    /// The platform profile to normalize with; `None` leaves the normalized columns null.
    pub normalize: Option<&'a Profile>,
    /// The frame boxes are fused in: `Normalized` (needs `normalize`) when any detector of the
    /// sequence sees normalized points, so that every vote is compared gravity-aligned.
    pub fusion_frame: DetectorFrame,
    /// The detectors behind the raw detections and where each can see. A detector without a view
    /// here (a user's own) counts in the frames it has a box in, everywhere.
    pub views: &'a [DetectorView],
    /// The RGB class check's image model (`stages.camera_check`); `None`: no check.
    pub classifier: Option<&'a Classifier>,
    /// Looked at between windows of frames and between passes: once raised, the sequence ends
    /// with `PipelineError::Interrupted`.
    pub stop: Option<&'a super::StopSignal>,
}

/// What one sequence produced, before it is written.
#[derive(Debug, Default)]
pub struct SequenceLayer {
    /// One row per frame read, in order.
    pub frames: Vec<FrameRow>,
    /// Every detector's raw boxes; empty when [`FrameWriters`] took them.
    pub detections: Vec<DetectionRow>,
    /// Fused boxes per frame (same order as `frames`).
    pub fused: Vec<Vec<FusedBox>>,
    /// The final boxes, sorted by (frame, track id).
    pub boxes: Vec<BoxRow>,
    /// The tracks, sorted by id.
    pub tracks: Vec<TrackRow>,
    /// The tracker's own output the box rows were made of (frames by position in `frames`), for
    /// studies that look inside tracking; empty in `labels` mode.
    pub consolidation: Consolidation,
    /// Frames that could not be read (policy `skip`).
    pub errors: Vec<FrameError>,
    /// The source's labels per frame (same order as `frames`), for self-scoring.
    pub labels: Vec<Vec<GroundTruthBox>>,
    /// Stage times.
    pub times: StageTimes,
    /// LiDAR points read.
    pub points_read: u64,
}

/// What pass 1 keeps of a frame.
struct FrameResult {
    row: FrameRow,
    cameras: Vec<(String, CameraCalibration)>,
    world_from_sensor: Isometry3<f64>,
    detections: Vec<Detection>,
    fused: Vec<FusedBox>,
    labels: Vec<GroundTruthBox>,
    cloud: PointCloud,
    inputs: Option<FrameInputs>,
    read: Duration,
    detect: Duration,
    onnx: Duration,
    fuse: Duration,
    normalize: Duration,
}

fn row_major(m: &Isometry3<f64>) -> [f64; 16] {
    let h = m.to_homogeneous();
    let mut out = [0.0; 16];
    for r in 0..4 {
        for c in 0..4 {
            out[r * 4 + c] = h[(r, c)];
        }
    }
    out
}

/// `cloud` moved into the normalized frame `n`, when one of `detectors` takes its points there.
pub fn normalized_cloud(
    detectors: &[SequenceDetector<'_>],
    cloud: &PointCloud,
    n: &Normalization,
) -> Option<PointCloud> {
    detectors.iter().any(|d| d.frame == DetectorFrame::Normalized).then(|| {
        let mut moved = cloud.clone();
        n.cloud_to_normalized(&mut moved);
        moved
    })
}

/// One detector's run on a sweep: its boxes in the sensor frame, the time inside its ONNX
/// sessions, and its whole time.
pub(super) type DetectorRun = Result<(Vec<Detection>, Duration, Duration), crate::detect::DetectError>;

/// Runs detector `d` on one sweep: on `cloud` when it takes sensor-frame points, else on
/// `normalized` (the sweep's normalization and its points moved there, [`normalized_cloud`]).
pub(super) fn detect_one(
    d: &SequenceDetector<'_>,
    cloud: &PointCloud,
    normalized: Option<(&Normalization, &PointCloud)>,
) -> DetectorRun {
    let started = Instant::now();
    let (boxes, timings) = match (d.frame, normalized) {
        (DetectorFrame::Normalized, Some((n, moved))) => {
            let (mut boxes, timings) = d.detector.detect_timed_on_ground(moved, d.ground_z_m)?;
            for b in &mut boxes {
                b.box3 = n.box_to_sensor(&b.box3);
            }
            (boxes, timings)
        }
        _ => d.detector.detect_timed_on_ground(cloud, d.ground_z_m)?,
    };
    Ok((boxes, timings.onnx(), started.elapsed()))
}

/// Runs `detectors` on one sweep, each on the points [`detect_one`] gives it. Returns every box
/// in the sensor frame, in detector order, and the time spent inside the detectors' ONNX
/// sessions.
pub fn detect_frame(
    detectors: &[SequenceDetector<'_>],
    cloud: &PointCloud,
    normalized: Option<(&Normalization, &PointCloud)>,
) -> Result<(Vec<Detection>, Duration), crate::detect::DetectError> {
    let mut onnx = Duration::ZERO;
    let mut all = Vec::new();
    for d in detectors {
        let (mut boxes, in_sessions, _) = detect_one(d, cloud, normalized)?;
        onnx += in_sessions;
        all.append(&mut boxes);
    }
    Ok((all, onnx))
}

/// Pass 1 on one frame. Its detector runs go through `board`, where an idle worker may take
/// some over.
fn first_pass_frame<'j>(
    source: &dyn Source,
    position: usize,
    job: &'j SequenceJob,
    fuser: &Fuser,
    board: &Board<'j>,
) -> Result<FrameResult, PipelineError> {
    let started = Instant::now();
    let mut frame = source.frame(position)?;
    let read = started.elapsed();
    let started = Instant::now();
    let profile = job.normalize;
    let inputs = profile.map(|p| FrameInputs::from_frame(&frame, p));
    // Detectors that take gravity-aligned points get them with this frame's own estimate (the
    // sequence's is not known yet), and fusion compares the votes there; every raw box is kept
    // in the sensor frame.
    let normalized = match (profile, &inputs) {
        (Some(p), Some(i)) => Some(normalize_frame(i, p)),
        _ => None,
    };
    let moved = match (&job.detections, &normalized) {
        (DetectionsFrom::Detectors(detectors), Some(n)) => {
            normalized_cloud(detectors, &frame.cloud, n).map(|cloud| (*n, cloud))
        }
        _ => None,
    };
    let normalize = started.elapsed();
    let frame_index = frame.index as i64;
    let detect_error = |source| PipelineError::Detect {
        sequence: frame.sequence.clone(),
        frame: frame_index,
        source: Box::new(source),
    };
    let mut onnx = Duration::ZERO;
    let mut detect = Duration::ZERO;
    let raw: Vec<Detection> = match &job.detections {
        DetectionsFrom::Detectors(detectors) => {
            let (cloud, runs) = board.run(detectors, std::mem::take(&mut frame.cloud), moved);
            frame.cloud = cloud;
            let mut all = Vec::new();
            for run in runs {
                let (mut boxes, in_sessions, whole) = run.map_err(detect_error)?;
                onnx += in_sessions;
                detect += whole;
                all.append(&mut boxes);
            }
            all
        }
        DetectionsFrom::Given(given) => given.get(&frame_index).cloned().unwrap_or_default(),
    };
    let started = Instant::now();
    // A box fusion cannot use (non-finite, negative size, score outside [0, 1]) is dropped with
    // a note rather than failing the frame: one bad output of one network loses nothing else.
    let fusion_frame = normalized
        .as_ref()
        .filter(|_| job.fusion_frame == DetectorFrame::Normalized);
    let usable: Vec<Detection> = raw
        .iter()
        .filter(|d| {
            let ok = d.box3.is_valid() && d.score.is_finite() && (0.0..=1.0).contains(&d.score);
            if !ok {
                tracing::warn!(
                    "{}: frame {frame_index}: detector `{}`: unusable box dropped before fusion",
                    frame.sequence,
                    d.detector
                );
            }
            ok
        })
        .map(|d| match &fusion_frame {
            Some(n) => Detection {
                box3: n.box_to_normalized(&d.box3),
                ..d.clone()
            },
            None => d.clone(),
        })
        .collect();
    let fused_in = fusion_frame.map(|n| n.normalized_from_sensor);
    let mut fused =
        fuse_with_views(fuser, &usable, job.views, fused_in.as_ref()).map_err(|source| PipelineError::Fuse {
            sequence: frame.sequence.clone(),
            frame: frame_index,
            source,
        })?;
    if let Some(n) = &fusion_frame {
        for f in &mut fused {
            f.box3 = n.box_to_sensor(&f.box3);
        }
    }
    let fuse = started.elapsed();
    let cameras: Vec<(String, CameraCalibration)> = frame
        .cameras
        .iter()
        .map(|c| (c.name.clone(), c.calibration.clone()))
        .collect();
    Ok(FrameResult {
        row: FrameRow {
            frame_index,
            timestamp_us: frame.timestamp_micros,
            world_from_sensor: row_major(&frame.world_from_sensor),
            normalized_from_sensor: None,
            gravity_method: None,
            gravity_inputs: Vec::new(),
            gravity_confidence: None,
            sensor_height_m: None,
            normalization_notes: Vec::new(),
            source_notes: frame.notes.clone(),
            num_points: frame.cloud.len() as i64,
            num_points_kept: 0,
            points_file: None,
            num_detections: raw.len() as i64,
            num_fused: fused.len() as i64,
            num_boxes: 0,
            cameras: cameras.iter().map(|(n, _)| n.clone()).collect(),
        },
        cameras,
        world_from_sensor: frame.world_from_sensor,
        detections: raw,
        fused,
        labels: frame.ground_truth,
        cloud: frame.cloud,
        inputs,
        read,
        detect,
        onnx,
        fuse,
        normalize,
    })
}

/// The points of `cloud` that `kept` keeps for frame `frame_index`.
fn kept_points(
    kept: PointsKept,
    every: usize,
    frame_index: i64,
    cloud: &PointCloud,
    cameras: &[(String, CameraCalibration)],
) -> Option<PointsFrame> {
    let all = || PointsFrame {
        frame_index,
        x: cloud.x().to_vec(),
        y: cloud.y().to_vec(),
        z: cloud.z().to_vec(),
        intensity: cloud.intensity().to_vec(),
    };
    match kept {
        PointsKept::None => None,
        PointsKept::All => Some(all()),
        PointsKept::EveryKth => (frame_index.rem_euclid(every as i64) == 0).then(all),
        PointsKept::CameraFov if cameras.is_empty() => Some(all()),
        PointsKept::CameraFov => {
            let mut out = PointsFrame {
                frame_index,
                ..PointsFrame::default()
            };
            for i in 0..cloud.len() {
                let p = Point3::new(
                    f64::from(cloud.x()[i]),
                    f64::from(cloud.y()[i]),
                    f64::from(cloud.z()[i]),
                );
                let seen = cameras.iter().any(|(_, c)| {
                    project_point(c, &p).is_some_and(|px| {
                        px.x >= 0.0 && px.y >= 0.0 && px.x < f64::from(c.width) && px.y < f64::from(c.height)
                    })
                });
                if seen {
                    out.x.push(cloud.x()[i]);
                    out.y.push(cloud.y()[i]);
                    out.z.push(cloud.z()[i]);
                    out.intensity.push(cloud.intensity()[i]);
                }
            }
            Some(out)
        }
    }
}

/// Per-frame context passes 3 and 4 need.
pub(super) struct FrameContext {
    /// The frame's position in the source (`Source::frame(position)`).
    pub(super) position: usize,
    pub(super) row: FrameRow,
    cameras: Vec<(String, CameraCalibration)>,
    world_from_sensor: Isometry3<f64>,
    inputs: Option<FrameInputs>,
}

/// What pass 1 keeps and writes, window by window, in frame order.
struct FirstPassState<'a, 'w> {
    name: &'a str,
    config: &'a PipelineConfig,
    points: Option<&'w mut PointsWriter>,
    detections: Option<&'w mut DetectionsWriter>,
    scratch: &'a mut ScratchPoints,
    scratch_path: &'a std::path::Path,
    layer: &'a mut SequenceLayer,
    contexts: Vec<FrameContext>,
    times: StageTimes,
}

impl FirstPassState<'_, '_> {
    /// Keeps one window's frames: errors under the `skip` policy become manifest entries, good
    /// frames their rows, points and scratch copy.
    fn keep(&mut self, window: Vec<(Result<FrameResult, PipelineError>, usize)>) -> Result<(), PipelineError> {
        let config = self.config;
        let mut detections = Vec::new();
        for (result, position) in window {
            let mut r = match result {
                Ok(r) => r,
                Err(PipelineError::Source(e)) if config.source.on_corrupt == OnCorrupt::Skip => {
                    tracing::warn!("{}: frame at position {position} skipped: {e}", self.name);
                    self.layer.errors.push(FrameError {
                        frame_index: None,
                        location: format!("readable frame {position}"),
                        detail: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            let times = &mut self.times;
            times.read_cpu_s += r.read.as_secs_f64();
            times.detect_cpu_s += r.detect.as_secs_f64();
            times.onnx_cpu_s += r.onnx.as_secs_f64();
            times.fuse_cpu_s += r.fuse.as_secs_f64();
            times.normalize_cpu_s += r.normalize.as_secs_f64();
            self.layer.points_read += r.cloud.len() as u64;
            if let Some(writer) = self.points.as_deref_mut()
                && let Some(kept) = kept_points(
                    config.outputs.points,
                    config.outputs.points_every,
                    r.row.frame_index,
                    &r.cloud,
                    &r.cameras,
                )
            {
                r.row.num_points_kept = kept.x.len() as i64;
                r.row.points_file = Some(writer.write(kept)?);
            }
            self.scratch.push(&r.cloud).map_err(|source| PipelineError::Io {
                path: self.scratch_path.to_path_buf(),
                source,
            })?;
            push_detection_rows(&mut detections, &r);
            self.layer.fused.push(r.fused);
            self.layer.labels.push(r.labels);
            self.contexts.push(FrameContext {
                position,
                row: r.row,
                cameras: r.cameras,
                world_from_sensor: r.world_from_sensor,
                inputs: r.inputs,
            });
        }
        match self.detections.as_deref_mut() {
            Some(writer) => writer.write(&detections)?,
            None => self.layer.detections.append(&mut detections),
        }
        Ok(())
    }
}

/// Where pass 1 writes as it goes: the kept points and the detectors' raw boxes (a shard
/// folder's writers, [`crate::shards::SequenceWriter::frame_writers`]).
pub struct FrameWriters<'w> {
    /// Receives the kept points, frame by frame in order.
    pub points: &'w mut PointsWriter,
    /// Receives the raw detections, window by window in frame order; they are then not kept in
    /// [`SequenceLayer::detections`].
    pub detections: &'w mut DetectionsWriter,
}

/// Runs the three passes over one sequence. `writers` receive the kept points and the raw
/// detections as pass 1 goes; `None` keeps no points and the detections in the layer.
pub fn run_sequence(job: &SequenceJob, writers: Option<FrameWriters<'_>>) -> Result<SequenceLayer, PipelineError> {
    let total_started = Instant::now();
    let config = job.config;
    let source = job.source;
    let name = source.meta().name.clone();
    let fuser = Fuser::new(&config.fusion, job.platform).map_err(|e| PipelineError::Config(e.to_string()))?;
    let positions: Vec<usize> = match &job.frames {
        Some(r) => (r.start.min(source.len())..r.end.min(source.len())).collect(),
        None => (0..source.len()).collect(),
    };
    let mut layer = SequenceLayer::default();
    for skipped in &source.meta().skipped {
        layer.errors.push(FrameError {
            frame_index: None,
            location: skipped.location.clone(),
            detail: skipped.detail.clone(),
        });
    }
    let scratch_dir = job
        .scratch_dir
        .map(|d| d.to_path_buf())
        .unwrap_or_else(std::env::temp_dir);
    let scratch_path = scratch_dir.join(format!(
        ".points-scratch-{}-{}.bin",
        std::process::id(),
        sanitize(&name)
    ));
    let mut scratch = ScratchPoints::create(&scratch_path).map_err(|source| PipelineError::Io {
        path: scratch_path.clone(),
        source,
    })?;

    // ---- pass 1: read → detect → fuse, frames streamed in order ----------------------------
    // Every thread of the pool takes the next frame in order as soon as it is free (no barrier
    // between windows), and a writer thread keeps the results in frame order as they arrive:
    // rows, points and scratch copy frame by frame, the raw detections window by window.
    let pass_started = Instant::now();
    let (points, detections) = match writers {
        Some(w) => (Some(w.points), Some(w.detections)),
        None => (None, None),
    };
    let mut state = FirstPassState {
        name: &name,
        config,
        points,
        detections,
        scratch: &mut scratch,
        scratch_path: &scratch_path,
        layer: &mut layer,
        contexts: Vec::with_capacity(positions.len()),
        times: StageTimes::default(),
    };
    let bar = super::progress_bar(job.progress, positions.len() as u64, &format!("frames of {name}"));
    stream_first_pass(job, &fuser, &positions, &mut state, bar.as_ref())?;
    let FirstPassState {
        mut contexts,
        mut times,
        ..
    } = state;
    scratch.seal().map_err(|source| PipelineError::Io {
        path: scratch_path.clone(),
        source,
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    times.per_frame_s = pass_started.elapsed().as_secs_f64();
    tracing::info!(
        "{name}: {} frames read, detected and fused in {:.1} s ({} skipped)",
        contexts.len(),
        times.per_frame_s,
        layer.errors.len()
    );
    let stopped = || job.stop.map_or(Ok(()), |s| s.check());

    // ---- normalization over the sequence ---------------------------------------------------
    if let Some(profile) = job.normalize {
        let started = Instant::now();
        // Pass 1 gave every frame its inputs; one without would only mean a frame without any.
        let inputs: Vec<FrameInputs> = contexts
            .iter_mut()
            .map(|c| {
                c.inputs.take().unwrap_or_else(|| FrameInputs {
                    timestamp_micros: c.row.timestamp_us,
                    world_from_sensor: None,
                    imu: None,
                    ground: None,
                    notes: vec!["no normalization inputs".into()],
                })
            })
            .collect();
        for (ctx, n) in contexts.iter_mut().zip(normalize_sequence(&inputs, profile)) {
            super::renormalize::set_frame_normalization(&mut ctx.row, n);
        }
        times.normalize_cpu_s += started.elapsed().as_secs_f64();
    }

    // ---- pass 2: tracking (or the source's labels) ---------------------------------------
    stopped()?;
    let pass_started = Instant::now();
    let mut consolidation = match config.origin {
        LayerOrigin::Detect if config.stages.track => {
            track_fused(&name, &contexts, &layer.fused, &scratch, config, job.platform)?
        }
        LayerOrigin::Detect => one_frame_tracks(&contexts, &layer.fused),
        LayerOrigin::Labels => Consolidation::default(),
    };
    times.track_s = pass_started.elapsed().as_secs_f64();
    tracing::info!(
        "{name}: {} tracks in {:.2} s",
        consolidation.tracks.len(),
        times.track_s
    );
    if config.origin == LayerOrigin::Detect
        && config.stages.ground_contact
        && config.ground_contact.runs_on(job.platform)
    {
        let started = Instant::now();
        let frames: Vec<ContactFrame> = contexts
            .iter()
            .map(|c| ContactFrame {
                normalized_from_sensor: c
                    .row
                    .normalized_from_sensor
                    .and_then(|m| crate::geometry::pose::isometry_from_row_major(&m, 1e-6)),
                world_from_sensor: c.world_from_sensor,
            })
            .collect();
        let placed = set_on_ground(&mut consolidation, &frames, &scratch, &config.ground_contact);
        times.ground_contact_s = started.elapsed().as_secs_f64();
        tracing::info!(
            "{name}: {} of {} boxes set on the ground ({} by their class's median shift; median shift {}) in {:.2} s",
            placed.moved,
            placed.boxes,
            placed.by_class_bias,
            placed
                .median_shift_m
                .map_or_else(|| "-".to_string(), |s| format!("{s:+.2} m")),
            times.ground_contact_s
        );
    }

    // ---- pass 3: box rows ----------------------------------------------------------------
    stopped()?;
    let review = Review {
        config: &config.review,
        sizes: job.normalize.map(|p| p.class_sizes).unwrap_or_default(),
    };
    let pass_started = Instant::now();
    let (boxes, tracks) = match config.origin {
        LayerOrigin::Detect => detected_rows(&contexts, &layer.fused, &consolidation, &scratch, &review),
        LayerOrigin::Labels => label_rows(&contexts, &layer.labels, &scratch, &review),
    };
    let mut boxes = normalized_boxes(&contexts, boxes);
    times.describe_s = pass_started.elapsed().as_secs_f64();

    // ---- pass 4: the RGB class check -----------------------------------------------------
    stopped()?;
    if let Some(classifier) = job.classifier {
        let started = Instant::now();
        let check = super::camera_pass::CameraCheck {
            classifier,
            config: &config.camera,
            review: &config.review,
        };
        check.run(&name, source, &contexts, &mut boxes)?;
        times.camera_s = started.elapsed().as_secs_f64();
        tracing::info!("{name}: RGB class check in {:.2} s", times.camera_s);
    }
    let per_frame = boxes_per_frame(&contexts, &boxes);
    for (ctx, n) in contexts.iter_mut().zip(per_frame) {
        ctx.row.num_boxes = n;
    }
    layer.boxes = boxes;
    layer.tracks = tracks;
    layer.consolidation = consolidation;
    layer.frames = contexts.into_iter().map(|c| c.row).collect();
    times.total_s = total_started.elapsed().as_secs_f64();
    layer.times = times;
    Ok(layer)
}

/// Pass 1 over `positions`: each pool thread computes the next unclaimed frame
/// ([`rayon::broadcast`], one loop per thread, so no loop waits inside another's frame), and a
/// writer thread puts the results back in frame order and hands them to `state` in windows of
/// `runtime.window_frames` positions. No thread starts a frame a window or more past the last
/// one put in order, so one slow frame does not let results pile up: at most two windows are
/// held (the batch being filled and the frames ahead of it), as in the windowed pass before. The first error `state` refuses (or a stop signal) ends the pass;
/// frames already claimed finish and are dropped.
fn stream_first_pass(
    job: &SequenceJob,
    fuser: &Fuser,
    positions: &[usize],
    state: &mut FirstPassState<'_, '_>,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<(), PipelineError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    type Computed = (usize, Result<FrameResult, PipelineError>);
    let window = job.config.runtime.window_frames.max(1);
    let next = AtomicUsize::new(0);
    // Frames put in order so far; a thread waits while its frame is a window or more past it.
    // The frame the writer waits for is never held back, since it is below that bound.
    let handed_on = AtomicUsize::new(0);
    let ended = AtomicBool::new(false);
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Computed>(window);
    let board = Board::default();
    std::thread::scope(|scope| {
        let handed_on = &handed_on;
        let ended = &ended;
        let writer = scope.spawn(move || -> Result<(), PipelineError> {
            // However the writer ends (done, an error, a panic), no thread waits for it any more.
            struct EndOnDrop<'a>(&'a AtomicBool);
            impl Drop for EndOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _end = EndOnDrop(ended);
            let mut waiting: BTreeMap<usize, Result<FrameResult, PipelineError>> = BTreeMap::new();
            let mut expected = 0;
            let mut batch = Vec::with_capacity(window);
            for (k, result) in receiver {
                waiting.insert(k, result);
                while let Some(result) = waiting.remove(&expected) {
                    batch.push((result, positions[expected]));
                    expected += 1;
                    handed_on.store(expected, Ordering::Release);
                    if batch.len() == window || expected == positions.len() {
                        let done = batch.len() as u64;
                        state.keep(std::mem::replace(&mut batch, Vec::with_capacity(window)))?;
                        if let Some(bar) = bar {
                            bar.inc(done);
                        }
                    }
                }
            }
            Ok(())
        });
        let board = &board;
        rayon::broadcast(|_| {
            let sender = sender.clone();
            while !ended.load(Ordering::Relaxed) {
                if job.stop.is_some_and(|s| s.check().is_err()) {
                    ended.store(true, Ordering::Relaxed);
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= positions.len() {
                    break;
                }
                while k >= handed_on.load(Ordering::Acquire) + window && !ended.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                if ended.load(Ordering::Relaxed) {
                    break;
                }
                let taken = board.take_frame();
                let result = first_pass_frame(job.source, positions[k], job, fuser, board);
                drop(taken);
                if sender.send((k, result)).is_err() {
                    // The writer stopped on an error.
                    ended.store(true, Ordering::Relaxed);
                    break;
                }
            }
            // No frame left to take: run detectors of the frames other workers are still on.
            while board.busy() && !ended.load(Ordering::Relaxed) {
                if !board.help() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        });
        drop(sender);
        writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })?;
    // A stop signal ends the pass with the frames not yet claimed unread.
    job.stop.map_or(Ok(()), |s| s.check())
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn push_detection_rows(rows: &mut Vec<DetectionRow>, r: &FrameResult) {
    let mut per_detector: HashMap<&str, i64> = HashMap::new();
    for d in &r.detections {
        let k = per_detector.entry(d.detector.as_str()).or_insert(0);
        rows.push(DetectionRow {
            frame_index: r.row.frame_index,
            timestamp_us: r.row.timestamp_us,
            detector: d.detector.clone(),
            detection_index: *k,
            class: d.class.as_str().to_string(),
            score: d.score,
            box_sensor: d.box3.to_array(),
        });
        *k += 1;
    }
}

/// Every box row of a normalized frame also in the normalized frame, with its corners' bounds.
fn normalized_boxes(contexts: &[FrameContext], mut boxes: Vec<BoxRow>) -> Vec<BoxRow> {
    let by_frame: HashMap<i64, Isometry3<f64>> = contexts
        .iter()
        .filter_map(|c| {
            let m = c.row.normalized_from_sensor?;
            Some((
                c.row.frame_index,
                crate::geometry::pose::isometry_from_row_major(&m, 1e-6)?,
            ))
        })
        .collect();
    for b in &mut boxes {
        super::renormalize::renormalize_box(b, by_frame.get(&b.frame_index));
    }
    boxes
}

fn boxes_per_frame(contexts: &[FrameContext], boxes: &[BoxRow]) -> Vec<i64> {
    let mut counts: HashMap<i64, i64> = HashMap::new();
    for b in boxes {
        *counts.entry(b.frame_index).or_insert(0) += 1;
    }
    contexts
        .iter()
        .map(|c| counts.get(&c.row.frame_index).copied().unwrap_or(0))
        .collect()
}

/// The tracker on the fused boxes; frame positions are the pass's positions.
fn track_fused(
    name: &str,
    contexts: &[FrameContext],
    fused: &[Vec<FusedBox>],
    points: &dyn SweepPoints,
    config: &PipelineConfig,
    platform: Platform,
) -> Result<Consolidation, PipelineError> {
    let frames: Vec<TrackFrame> = contexts
        .iter()
        .zip(fused)
        .map(|(c, boxes)| TrackFrame {
            timestamp_micros: c.row.timestamp_us,
            world_from_sensor: c.world_from_sensor,
            boxes: boxes.iter().map(track_input).collect(),
        })
        .collect();
    consolidate(&frames, points, config.tracking.for_platform(platform)).map_err(|source| PipelineError::Track {
        sequence: name.to_string(),
        source,
    })
}

/// The tracker's view of a fused box.
pub fn track_input(b: &FusedBox) -> TrackInputBox {
    TrackInputBox {
        box3: b.box3,
        class: b.class,
        score: f64::from(b.score),
        votes: b.votes,
    }
}

/// With tracking off, every fused box is a one-frame track of its own.
fn one_frame_tracks(contexts: &[FrameContext], fused: &[Vec<FusedBox>]) -> Consolidation {
    let mut out = Consolidation::default();
    for (f, (c, boxes)) in contexts.iter().zip(fused).enumerate() {
        for (i, b) in boxes.iter().enumerate() {
            let track_id = out.tracks.len() as u32 + 1;
            out.boxes.push(TrackedBox {
                frame: f,
                track_id,
                class: b.class,
                score: f64::from(b.score),
                box_in_world: b.box3.transformed(&c.world_from_sensor),
                box_in_sensor: b.box3,
                origin: BoxOrigin::Detected,
                input_index: Some(i),
                votes: b.votes,
            });
            out.tracks.push(TrackSummary {
                track_id,
                class: b.class,
                motion: None,
                first_frame: f,
                last_frame: f,
                num_detected: 1,
                score: f64::from(b.score),
                size: None,
            });
        }
    }
    out
}

/// A box ready for its row: everything but the per-frame measurements.
struct PlannedRow {
    position: usize,
    track_id: i64,
    source_track_id: Option<String>,
    class: ObjectClass,
    score: f64,
    box_sensor: Box3,
    box_world: Box3,
    num_votes: i32,
    detectors: Vec<String>,
    origin: &'static str,
    source_num_points: Option<i64>,
    velocity_world_mps: Option<[f64; 3]>,
    moving: Option<bool>,
    track_boxes: usize,
    review_status: &'static str,
}

/// Central-difference velocity of each box of a track in the world frame (one-sided at the
/// ends); `None` for a one-box track. Input: the track's `(position, world box, time µs)` in order.
fn track_velocities(boxes: &[(usize, Box3, i64)]) -> Vec<Option<[f64; 3]>> {
    let n = boxes.len();
    (0..n)
        .map(|k| {
            if n < 2 {
                return None;
            }
            let (a, b) = (k.saturating_sub(1), (k + 1).min(n - 1));
            let dt = (boxes[b].2 - boxes[a].2) as f64 * 1e-6;
            if dt <= 0.0 {
                return None;
            }
            let (p, q) = (&boxes[a].1, &boxes[b].1);
            Some([(q.x - p.x) / dt, (q.y - p.y) / dt, (q.z - p.z) / dt])
        })
        .collect()
}

/// Rows of the detect origin: the tracker's boxes (with the fused box's voters) and tracks.
fn detected_rows(
    contexts: &[FrameContext],
    fused: &[Vec<FusedBox>],
    consolidation: &Consolidation,
    points: &ScratchPoints,
    review: &Review,
) -> (Vec<BoxRow>, Vec<TrackRow>) {
    let mut by_track: BTreeMap<u32, Vec<&TrackedBox>> = BTreeMap::new();
    for b in &consolidation.boxes {
        by_track.entry(b.track_id).or_default().push(b);
    }
    let summaries: HashMap<u32, &TrackSummary> = consolidation.tracks.iter().map(|t| (t.track_id, t)).collect();
    let mut planned = Vec::with_capacity(consolidation.boxes.len());
    for (track_id, boxes) in &by_track {
        let summary = summaries.get(track_id);
        let motion = summary.and_then(|s| s.motion);
        let samples: Vec<(usize, Box3, i64)> = boxes
            .iter()
            .map(|b| (b.frame, b.box_in_world, contexts[b.frame].row.timestamp_us))
            .collect();
        let velocities = track_velocities(&samples);
        for (b, velocity) in boxes.iter().zip(velocities) {
            let voters = b.input_index.and_then(|i| fused[b.frame].get(i));
            let velocity = match motion {
                Some(MotionState::Static) => Some([0.0; 3]),
                _ => velocity,
            };
            planned.push(PlannedRow {
                position: b.frame,
                track_id: i64::from(b.track_id),
                source_track_id: None,
                class: b.class,
                score: b.score,
                box_sensor: b.box_in_sensor,
                box_world: b.box_in_world,
                num_votes: b.votes as i32,
                detectors: voters.map(|f| f.detectors.clone()).unwrap_or_default(),
                origin: b.origin.as_str(),
                source_num_points: None,
                velocity_world_mps: velocity,
                moving: motion.map(|m| m == MotionState::Dynamic),
                track_boxes: boxes.len(),
                review_status: "auto",
            });
        }
    }
    let boxes = describe_all(contexts, planned, points, review);
    let tracks = consolidation
        .tracks
        .iter()
        .map(|t| TrackRow {
            track_id: i64::from(t.track_id),
            source_track_id: None,
            class: t.class.as_str().to_string(),
            motion: t.motion.map(|m| match m {
                MotionState::Static => "static".to_string(),
                MotionState::Dynamic => "dynamic".to_string(),
            }),
            first_frame: contexts[t.first_frame].row.frame_index,
            last_frame: contexts[t.last_frame].row.frame_index,
            num_boxes: by_track.get(&t.track_id).map_or(0, |b| b.len() as i64),
            num_detected: t.num_detected as i64,
            score: t.score,
            size_lwh_m: t.size,
        })
        .collect();
    (boxes, tracks)
}

/// Rows of the labels origin: the source's boxes with their own ids (track ids numbered in order
/// of first appearance, then id), verified by definition.
fn label_rows(
    contexts: &[FrameContext],
    labels: &[Vec<GroundTruthBox>],
    points: &ScratchPoints,
    review: &Review,
) -> (Vec<BoxRow>, Vec<TrackRow>) {
    let mut ids: BTreeMap<String, i64> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for frame_labels in labels {
        let mut new: Vec<&String> = frame_labels
            .iter()
            .map(|l| &l.track_id)
            .filter(|id| !ids.contains_key(*id))
            .collect();
        new.sort();
        new.dedup();
        for id in new {
            ids.insert(id.clone(), order.len() as i64 + 1);
            order.push(id.clone());
        }
    }
    let mut per_track: BTreeMap<i64, Vec<(usize, Box3, i64)>> = BTreeMap::new();
    for (p, frame_labels) in labels.iter().enumerate() {
        for l in frame_labels {
            let world = l.box_in_sensor.transformed(&contexts[p].world_from_sensor);
            per_track
                .entry(ids[&l.track_id])
                .or_default()
                .push((p, world, contexts[p].row.timestamp_us));
        }
    }
    let velocities: HashMap<(i64, usize), Option<[f64; 3]>> = per_track
        .iter()
        .flat_map(|(id, samples)| {
            track_velocities(samples)
                .into_iter()
                .zip(samples.iter())
                .map(move |(v, s)| ((*id, s.0), v))
        })
        .collect();
    let mut planned = Vec::new();
    for (p, frame_labels) in labels.iter().enumerate() {
        for l in frame_labels {
            let track_id = ids[&l.track_id];
            let velocity = l
                .velocity_mps
                .map(|v| [v.x, v.y, v.z])
                .or_else(|| velocities.get(&(track_id, p)).copied().flatten());
            planned.push(PlannedRow {
                position: p,
                track_id,
                source_track_id: Some(l.track_id.clone()),
                class: l.class,
                score: 1.0,
                box_sensor: l.box_in_sensor,
                box_world: l.box_in_sensor.transformed(&contexts[p].world_from_sensor),
                num_votes: 0,
                detectors: Vec::new(),
                origin: "label",
                source_num_points: l.num_points.map(i64::from),
                velocity_world_mps: velocity,
                moving: velocity.map(|v| v[0].hypot(v[1]) > MOVING_SPEED_MPS),
                track_boxes: per_track.get(&track_id).map_or(0, Vec::len),
                review_status: "verified",
            });
        }
    }
    planned.sort_by(|a, b| a.position.cmp(&b.position).then(a.track_id.cmp(&b.track_id)));
    let boxes = describe_all(contexts, planned, points, review);
    let classes: HashMap<i64, String> = boxes.iter().map(|b| (b.track_id, b.class.clone())).collect();
    let tracks = per_track
        .iter()
        .map(|(id, samples)| {
            let moving = samples.iter().any(|s| {
                velocities
                    .get(&(*id, s.0))
                    .copied()
                    .flatten()
                    .is_some_and(|v| v[0].hypot(v[1]) > MOVING_SPEED_MPS)
            });
            TrackRow {
                track_id: *id,
                source_track_id: Some(order[(*id - 1) as usize].clone()),
                class: classes.get(id).cloned().unwrap_or_default(),
                motion: Some(if moving { "dynamic" } else { "static" }.to_string()),
                first_frame: contexts[samples[0].0].row.frame_index,
                last_frame: contexts[samples[samples.len() - 1].0].row.frame_index,
                num_boxes: samples.len() as i64,
                num_detected: samples.len() as i64,
                score: 1.0,
                size_lwh_m: None,
            }
        })
        .collect();
    (boxes, tracks)
}

/// Speed above which a labelled object counts as moving (m/s).
const MOVING_SPEED_MPS: f64 = 0.5;

/// What the review flags are judged by: the config's thresholds and the profile's class sizes.
struct Review<'a> {
    config: &'a ReviewConfig,
    sizes: ClassSizes,
}

/// Pass 3: measures every planned box on its frame's points and cameras (frames in parallel,
/// rows in the planned order) and numbers the rows.
fn describe_all(
    contexts: &[FrameContext],
    planned: Vec<PlannedRow>,
    points: &ScratchPoints,
    review: &Review,
) -> Vec<BoxRow> {
    let mut by_frame: Vec<Vec<PlannedRow>> = (0..contexts.len()).map(|_| Vec::new()).collect();
    for p in planned {
        by_frame[p.position].push(p);
    }
    let rows: Vec<Vec<BoxRow>> = by_frame
        .into_par_iter()
        .enumerate()
        .map(|(position, planned)| {
            if planned.is_empty() {
                return Vec::new();
            }
            let cloud = points.read(position);
            let ctx = &contexts[position];
            let returns: Vec<CameraReturns> = ctx
                .cameras
                .iter()
                .map(|(_, c)| CameraReturns::new(c, cloud.as_deref().unwrap_or(&EMPTY_CLOUD)))
                .collect();
            let cameras: Vec<(&CameraCalibration, &CameraReturns)> =
                ctx.cameras.iter().map(|(_, c)| c).zip(&returns).collect();
            planned
                .into_iter()
                .map(|p| {
                    // Read from the scratch file's rows of cells, as the tracker's evidence is.
                    let inside = cloud
                        .as_ref()
                        .and_then(|_| points.count_in_box(position, &p.box_sensor));
                    describe_box(ctx, &cameras, inside.unwrap_or(0), p, review)
                })
                .collect()
        })
        .collect();
    let mut rows: Vec<BoxRow> = rows.into_iter().flatten().collect();
    for (i, r) in rows.iter_mut().enumerate() {
        r.box_id = i as i64;
    }
    rows
}

/// A cloud without points, for frames whose points are not at hand.
static EMPTY_CLOUD: std::sync::LazyLock<PointCloud> = std::sync::LazyLock::new(PointCloud::default);

fn describe_box(
    ctx: &FrameContext,
    camera_returns: &[(&CameraCalibration, &CameraReturns)],
    points_inside: usize,
    p: PlannedRow,
    review: &Review,
) -> BoxRow {
    let (sizes, review) = (&review.sizes, review.config);
    let b = p.box_sensor;
    let num_points_inside = points_inside as i64;
    let bev_range_m = b.x.hypot(b.y);
    let relative_pitch_rad = b.z.atan2(bev_range_m);
    let views = box_views(camera_returns, &b);
    let cameras: Vec<CameraFootprint> = ctx
        .cameras
        .iter()
        .enumerate()
        .map(|(i, (name, calibration))| {
            let view = views.iter().find(|v| v.camera == i);
            camera_footprint(name, calibration, &b, view)
        })
        .collect();
    let best = best_view(&views);
    let best_camera = best.map(|v| ctx.cameras[v.camera].0.clone());
    let mut flags = Vec::new();
    if num_points_inside < i64::from(review.min_points) {
        flags.push("few_points".to_string());
    }
    if p.track_boxes < review.min_track_boxes as usize {
        flags.push("short_track".to_string());
    }
    if p.score < review.min_score {
        flags.push("low_score".to_string());
    }
    if let Some(t) = sizes.of(p.class) {
        let off = [b.l, b.w, b.h]
            .iter()
            .zip(t)
            .any(|(s, t)| *s > t * review.size_factor || *s * review.size_factor < t);
        if off {
            flags.push("size_outlier".to_string());
        }
    }
    if !cameras.is_empty() && best_camera.is_none() {
        flags.push("out_of_view".to_string());
    }
    if best
        .and_then(|v| v.occlusion)
        .is_some_and(|o| o >= review.max_occlusion)
    {
        flags.push("occluded".to_string());
    }
    let review_status = if p.review_status == "auto" && review.queues(&flags) {
        "flagged"
    } else {
        p.review_status
    };
    BoxRow {
        frame_index: ctx.row.frame_index,
        timestamp_us: ctx.row.timestamp_us,
        box_id: 0,
        track_id: p.track_id,
        source_track_id: p.source_track_id,
        class: p.class.as_str().to_string(),
        score: p.score,
        box_sensor: b.to_array(),
        box_world: p.box_world.to_array(),
        box_normalized: None,
        aabb_normalized: None,
        num_votes: p.num_votes,
        detectors: p.detectors,
        origin: p.origin.to_string(),
        num_points_inside,
        source_num_points: p.source_num_points,
        bev_range_m,
        relative_pitch_rad,
        velocity_world_mps: p.velocity_world_mps,
        moving: p.moving,
        cameras,
        best_camera,
        rgb_class: None,
        rgb_score: None,
        rgb_agrees: None,
        rgb_note: None,
        flags,
        review_status: review_status.to_string(),
    }
}

fn camera_footprint(name: &str, calibration: &CameraCalibration, b: &Box3, view: Option<&BoxView>) -> CameraFootprint {
    let centre = project_point(calibration, &Point3::new(b.x, b.y, b.z));
    let in_fov = centre.is_some_and(|px| {
        px.x >= 0.0 && px.y >= 0.0 && px.x < f64::from(calibration.width) && px.y < f64::from(calibration.height)
    });
    let projected = view.map(|v| v.footprint);
    CameraFootprint {
        camera: name.to_string(),
        in_fov,
        box_2d_px: projected.map(|p| [p.x_min, p.y_min, p.x_max, p.y_max]),
        in_image_fraction: projected.map_or(0.0, |p| p.in_image_fraction),
        occlusion: view.and_then(|v| v.occlusion),
    }
}

/// The pool the per-frame passes run on.
pub(crate) fn thread_pool(threads: usize) -> Result<rayon::ThreadPool, PipelineError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| PipelineError::Config(format!("runtime.threads: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocities_are_central_differences_in_the_world_frame() {
        let b = |x: f64| Box3::new(x, 2.0 * x, 0.0, 1.0, 1.0, 1.0, 0.0);
        let v = track_velocities(&[(0, b(0.0), 0), (1, b(1.0), 100_000), (2, b(3.0), 200_000)]);
        let expected = [[10.0, 20.0, 0.0], [15.0, 30.0, 0.0], [20.0, 40.0, 0.0]];
        for (got, want) in v.iter().zip(expected) {
            let got = got.unwrap();
            for k in 0..3 {
                approx::assert_abs_diff_eq!(got[k], want[k], epsilon = 1e-9);
            }
        }
        assert_eq!(track_velocities(&[(0, b(0.0), 0)]), vec![None]);
    }

    #[test]
    fn a_detector_sees_boxes_inside_its_grid_in_its_own_frame() {
        let view = |frame| DetectorView {
            name: "d".into(),
            frame,
            range: [-40.96, -40.96, -3.0, 40.96, 40.96, 5.0],
        };
        let (sensor, normalized) = (view(DetectorFrame::Sensor), view(DetectorFrame::Normalized));
        let car = |x: f64, z: f64| Box3::new(x, 0.0, z, 4.5, 1.9, 1.6, 0.0);
        assert!(sensor.sees(&car(40.0, 0.8)));
        assert!(!sensor.sees(&car(41.0, 0.8)));
        // Its height span (±0.8 m) only has to meet the z range.
        assert!(sensor.sees(&car(0.0, -3.7)) && !sensor.sees(&car(0.0, -3.9)));
        assert!(sensor.sees(&car(0.0, 5.7)) && !sensor.sees(&car(0.0, 5.9)));
        // A drone 50 m up: the normalized frame is the sensor frame raised by 50 m, so a car
        // 49 m below the sensor is at z = 1 when fused gravity-aligned.
        let n = Isometry3::translation(0.0, 0.0, 50.0);
        let fused = car(10.0, 1.0);
        assert!(normalized.sees_fused(&fused, Some(&n)));
        assert!(!sensor.sees_fused(&fused, Some(&n)));
        assert!(sensor.sees_fused(&fused, None));
    }

    #[test]
    fn row_major_writes_rows_first() {
        let m = Isometry3::translation(1.0, 2.0, 3.0);
        let r = row_major(&m);
        assert_eq!((r[3], r[7], r[11], r[15]), (1.0, 2.0, 3.0, 1.0));
        assert_eq!((r[0], r[5], r[10]), (1.0, 1.0, 1.0));
    }

    #[test]
    fn every_kth_keeps_frames_divisible_by_k() {
        let cloud = PointCloud::from_columns(vec![1.0], vec![2.0], vec![3.0], vec![4.0]).unwrap();
        assert!(kept_points(PointsKept::EveryKth, 5, 10, &cloud, &[]).is_some());
        assert!(kept_points(PointsKept::EveryKth, 5, 11, &cloud, &[]).is_none());
        assert!(kept_points(PointsKept::None, 5, 10, &cloud, &[]).is_none());
        assert_eq!(
            kept_points(PointsKept::All, 5, 11, &cloud, &[]).unwrap().intensity,
            vec![4.0]
        );
    }
}
