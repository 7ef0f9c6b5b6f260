//! Temporal consolidation: tracks per-frame boxes (fused detections) through a sequence in the
//! world frame and turns them into consistent labels — stable track ids, smoothed boxes, filled
//! gaps, extensions past track ends where the points still show the object, one size per rigid
//! object, static objects fused into one world box — each box marked detected, interpolated or
//! extended. An AB3DMOT-style forward-only mode runs through the same code as a baseline.
//! It takes plain `TrackFrame`s (pose, time, boxes) and the sweeps' points on demand; it runs no detector, reads
//! no file and writes no shard. Method and defaults: `docs/tracking.md`.

mod association;
mod config;
mod evidence;
mod input;
mod kalman;
mod output;
mod refinement;
mod tracker;

use std::collections::BTreeMap;

use rayon::prelude::*;
use thiserror::Error;

pub use association::{Candidate, assign};
pub use config::{AssociationMetric, ClassTrackConfig, StaticTest, TrackConfig, TrackMode, TrackingProfiles};
pub use input::{IndexedCount, NoPoints, SweepPoints, TrackFrame, TrackInputBox};
pub use kalman::{CvFilter, FilterStep, flip_near, rts_smooth, unwrap_near};
pub use output::{BoxOrigin, Consolidation, MotionState, TrackSummary, TrackedBox};

use crate::frame::ObjectClass;
use evidence::Evidence;
use input::{PreparedSequence, class_index, prepare};
use refinement::{PlannedBox, refine_class};
use tracker::run_pass;

/// Errors of the tracking module: bad input frames or configuration.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TrackError {
    /// A frame's field is unusable.
    #[error("track input: frame {frame}: field `{field}`: {reason}")]
    Input {
        /// Frame index.
        frame: usize,
        /// The field (`timestamp_micros`, `world_from_sensor`, `boxes`).
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A configuration value is out of range.
    #[error("track config: {class}: field `{field}`: {reason}")]
    Config {
        /// The class whose thresholds are wrong.
        class: ObjectClass,
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Tracks one sequence: in `offline` mode with both passes and the refinement, in
/// `forward_only` mode as the AB3DMOT-style baseline. `points` gives the sweeps' points for the
/// refinement's evidence ([`NoPoints`] when there are none). Boxes come back in the world frame
/// and in each frame's sensor frame, sorted by (frame, track id).
pub fn consolidate(
    frames: &[TrackFrame],
    points: &dyn SweepPoints,
    config: &TrackConfig,
) -> Result<Consolidation, TrackError> {
    config.validate()?;
    let sequence = prepare(frames)?;
    let evidence = Evidence::new(frames, points);
    // Classes are tracked independently, so they run in parallel; collecting in class order keeps
    // the output identical to a sequential run.
    let per_class: Vec<Vec<ClassTrack>> = ObjectClass::ALL
        .par_iter()
        .map(|&class| {
            let ci = class_index(class);
            if sequence.detections.iter().all(|d| d[ci].is_empty()) {
                return Vec::new();
            }
            let c = config.class(class);
            match config.mode {
                TrackMode::Offline => {
                    let n = frames.len();
                    let forward = run_pass(&sequence, ci, c, config.two_stage, 0..n, |_, _| {});
                    let backward = run_pass(&sequence, ci, c, config.two_stage, (0..n).rev(), |_, _| {});
                    refine_class(&forward, &backward, &evidence, &sequence, ci, c)
                        .into_iter()
                        .map(|plan| ClassTrack {
                            class,
                            motion: Some(plan.motion),
                            score: plan.score,
                            num_detected: plan.num_detected,
                            size: plan.size,
                            boxes: plan.boxes,
                        })
                        .collect()
                }
                TrackMode::ForwardOnly => forward_only(&sequence, ci, class, c, config.two_stage),
            }
        })
        .collect();
    let tracks: Vec<ClassTrack> = per_class.into_iter().flatten().collect();
    Ok(finish(frames, &sequence, tracks))
}

/// One class's track before ids are given.
struct ClassTrack {
    class: ObjectClass,
    motion: Option<MotionState>,
    score: f64,
    num_detected: usize,
    size: Option<[f64; 3]>,
    boxes: Vec<PlannedBox>,
}

/// The forward-only baseline of one class: each frame, every live track that AB3DMOT would
/// report (`max_age`, `min_hits`) gives its filtered box; matched ones are `detected`, coasted
/// ones `extended` with the last score decayed per missed frame.
fn forward_only(
    sequence: &PreparedSequence,
    ci: usize,
    class: ObjectClass,
    c: &ClassTrackConfig,
    two_stage: bool,
) -> Vec<ClassTrack> {
    let mut by_id: BTreeMap<u32, ClassTrack> = BTreeMap::new();
    let n = sequence.times_micros.len();
    run_pass(sequence, ci, c, two_stage, 0..n, |f, tracker| {
        for t in &tracker.tracks {
            if !tracker.is_reported(t) {
                continue;
            }
            let matched = t.time_since_update == 0;
            let planned = PlannedBox {
                frame: f,
                box_in_world: t.box_in_world(),
                origin: if matched {
                    BoxOrigin::Detected
                } else {
                    BoxOrigin::Extended
                },
                detection: if matched {
                    t.observations.last().map(|o| o.1)
                } else {
                    None
                },
                score: t.last_score * c.extension_score_decay.powi(t.time_since_update as i32),
            };
            let entry = by_id.entry(t.id).or_insert_with(|| ClassTrack {
                class,
                motion: None,
                score: 0.0,
                num_detected: 0,
                size: None,
                boxes: Vec::new(),
            });
            if matched {
                entry.num_detected += 1;
                entry.score += t.last_score;
            }
            entry.boxes.push(planned);
        }
    });
    by_id
        .into_values()
        .map(|mut t| {
            t.score /= t.num_detected.max(1) as f64;
            t
        })
        .collect()
}

/// Gives ids in order of first appearance (then class, then score), attaches sensor-frame boxes
/// and input indices, and sorts.
fn finish(frames: &[TrackFrame], sequence: &PreparedSequence, mut tracks: Vec<ClassTrack>) -> Consolidation {
    tracks.retain(|t| !t.boxes.is_empty());
    tracks.sort_by(|a, b| {
        let fa = a.boxes.first().map_or(0, |x| x.frame);
        let fb = b.boxes.first().map_or(0, |x| x.frame);
        fa.cmp(&fb)
            .then(class_index(a.class).cmp(&class_index(b.class)))
            .then(b.score.total_cmp(&a.score))
    });
    let mut out = Consolidation::default();
    for (k, t) in tracks.iter().enumerate() {
        let track_id = k as u32 + 1;
        let ci = class_index(t.class);
        for b in &t.boxes {
            let frame = &frames[b.frame];
            let input_index = b.detection.map(|d| sequence.detections[b.frame][ci][d].index);
            out.boxes.push(TrackedBox {
                frame: b.frame,
                track_id,
                class: t.class,
                score: b.score.clamp(0.0, 1.0),
                box_in_world: b.box_in_world,
                box_in_sensor: b.box_in_world.transformed(&frame.world_from_sensor.inverse()),
                origin: b.origin,
                input_index,
                votes: input_index.map_or(0, |i| frame.boxes[i].votes),
            });
        }
        out.tracks.push(TrackSummary {
            track_id,
            class: t.class,
            motion: t.motion,
            first_frame: t.boxes.first().map_or(0, |b| b.frame),
            last_frame: t.boxes.last().map_or(0, |b| b.frame),
            num_detected: t.num_detected,
            score: t.score,
            size: t.size,
        });
    }
    out.boxes
        .sort_by(|a, b| a.frame.cmp(&b.frame).then(a.track_id.cmp(&b.track_id)));
    out
}
