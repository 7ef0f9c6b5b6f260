//! The online tracker of one class: constant-velocity Kalman prediction, gated BEV-GIoU (or
//! centre-distance) affinities, two-stage optimal assignment, birth and death by hits and age.
//! It runs over frames in either direction; the offline refinement runs it forward and backward.

use super::association::{Candidate, assign};
use super::config::{AssociationMetric, ClassTrackConfig};
use super::input::{PreparedSequence, WorldDetection};
use super::kalman::{CvFilter, flip_near};
use crate::geometry::{Box3, giou_bev, wrap_angle};

/// A live track's filter state and history.
#[derive(Debug, Clone)]
pub(crate) struct LiveTrack {
    /// Id, unique within one pass.
    pub id: u32,
    /// Centre x, y, z filters (world frame, m).
    pub centre: [CvFilter; 3],
    /// Yaw filter (rad, kept wrapped to [−π, π) between steps).
    pub yaw: CvFilter,
    /// Length, width, height (m).
    pub size: [f64; 3],
    /// Summed score weight behind `size` (rigid tracks average their sizes).
    pub size_weight: f64,
    /// World pitch and roll of the last matched box (rad).
    pub pitch_roll: [f64; 2],
    /// Matched frames.
    pub hits: u32,
    /// Frames since the last match (0 when matched in the current frame).
    pub time_since_update: u32,
    /// Score of the last matched detection.
    pub last_score: f64,
    /// `(frame, index in that frame's class list)` of every matched detection, in pass order.
    pub observations: Vec<(usize, usize)>,
}

impl LiveTrack {
    /// The track's current box in the world frame.
    pub fn box_in_world(&self) -> Box3 {
        Box3::from_array([
            self.centre[0].value,
            self.centre[1].value,
            self.centre[2].value,
            self.size[0],
            self.size[1],
            self.size[2],
            wrap_angle(self.yaw.value),
            self.pitch_roll[0],
            self.pitch_roll[1],
        ])
    }
}

/// A finished track of one pass: its matched detections.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tracklet {
    /// `(frame, index in that frame's class list)`, in frame order.
    pub observations: Vec<(usize, usize)>,
}

/// The tracker of one class.
pub(crate) struct Tracker<'a> {
    config: &'a ClassTrackConfig,
    two_stage: bool,
    /// Live tracks.
    pub tracks: Vec<LiveTrack>,
    /// Tracks that ended.
    pub finished: Vec<LiveTrack>,
    next_id: u32,
    last_time_micros: Option<i64>,
    /// Frames processed so far.
    pub frame_count: u32,
    candidates: Vec<Candidate>,
    predicted: Vec<Box3>,
}

impl<'a> Tracker<'a> {
    /// An empty tracker.
    pub fn new(config: &'a ClassTrackConfig, two_stage: bool) -> Self {
        Self {
            config,
            two_stage,
            tracks: Vec::new(),
            finished: Vec::new(),
            next_id: 0,
            last_time_micros: None,
            frame_count: 0,
            candidates: Vec::new(),
            predicted: Vec::new(),
        }
    }

    /// Processes one frame: predict, associate (two stages), update, start new tracks. Tracks
    /// that reached `max_age_frames` without a match are retired by `retire`, which the caller
    /// runs after reading this frame's output.
    pub fn step(&mut self, frame: usize, time_micros: i64, detections: &[WorldDetection]) {
        let c = self.config;
        let dt_s = self.last_time_micros.map_or(0.0, |t| (time_micros - t) as f64 * 1e-6);
        self.last_time_micros = Some(time_micros);
        self.frame_count += 1;
        self.predicted.clear();
        for t in &mut self.tracks {
            for axis in &mut t.centre {
                *axis = axis.predicted(dt_s, c.acceleration_std_mps2);
            }
            t.yaw = t.yaw.predicted(dt_s, c.yaw_acceleration_std_radps2);
            t.time_since_update += 1;
            self.predicted.push(t.box_in_world());
        }
        let mut detection_taken = vec![false; detections.len()];
        let mut track_taken = vec![false; self.tracks.len()];
        // Stage 1: confident detections against every track; stage 2: the rest against the
        // tracks stage 1 left unmatched (they may extend tracks, never start them).
        let stages: &[(f64, f64)] = if self.two_stage {
            &[(c.high_score, f64::INFINITY), (c.low_score, c.high_score)]
        } else {
            &[(c.high_score, f64::INFINITY)]
        };
        for &(lo, hi) in stages {
            self.candidates.clear();
            for (d, det) in detections.iter().enumerate() {
                if detection_taken[d] || det.score < lo || det.score >= hi {
                    continue;
                }
                for (k, p) in self.predicted.iter().enumerate() {
                    if track_taken[k] || !within_motion_gate(&self.tracks[k], &det.box_in_world, c) {
                        continue;
                    }
                    if let Some(margin) = affinity_margin(c, p, &det.box_in_world) {
                        self.candidates.push(Candidate {
                            track: k,
                            detection: d,
                            margin,
                        });
                    }
                }
            }
            for (k, d) in assign(self.tracks.len(), detections.len(), &self.candidates) {
                track_taken[k] = true;
                detection_taken[d] = true;
                update(&mut self.tracks[k], &detections[d], frame, d, c);
            }
        }
        for (d, det) in detections.iter().enumerate() {
            if !detection_taken[d] && det.score >= c.high_score {
                let track = new_track(self.next_id, det, frame, d, c);
                self.next_id += 1;
                self.tracks.push(track);
            }
        }
    }

    /// Moves tracks unmatched for `max_age_frames` frames to `finished`.
    pub fn retire(&mut self) {
        let max_age = self.config.max_age_frames;
        let mut k = 0;
        while k < self.tracks.len() {
            if self.tracks[k].time_since_update >= max_age {
                let t = self.tracks.remove(k);
                self.finished.push(t);
            } else {
                k += 1;
            }
        }
    }

    /// Whether a live track is output by the forward-only mode (AB3DMOT's rule).
    pub fn is_reported(&self, t: &LiveTrack) -> bool {
        t.time_since_update < self.config.max_age_frames
            && (t.hits >= self.config.min_hits || self.frame_count <= self.config.min_hits)
    }

    /// Every track of the pass (finished and live), as tracklets in frame order.
    pub fn into_tracklets(mut self) -> Vec<Tracklet> {
        self.finished.append(&mut self.tracks);
        self.finished.sort_by_key(|t| t.id);
        self.finished
            .into_iter()
            .map(|t| {
                let mut observations = t.observations;
                observations.sort_unstable();
                Tracklet { observations }
            })
            .collect()
    }
}

/// The affinity margin of a predicted track box and a detection, or `None` outside the gate.
pub(crate) fn affinity_margin(c: &ClassTrackConfig, predicted: &Box3, detection: &Box3) -> Option<f64> {
    let distance = (predicted.x - detection.x).hypot(predicted.y - detection.y);
    if distance.is_nan() || distance >= c.max_center_distance_m {
        return None;
    }
    match c.association {
        AssociationMetric::CenterDistance => Some(c.max_center_distance_m - distance),
        AssociationMetric::GiouBev => {
            let g = giou_bev(predicted, detection);
            (g > c.min_giou).then_some(g - c.min_giou)
        }
    }
}

/// Whether a detection lies inside the track's predicted BEV position uncertainty: the
/// Mahalanobis distance of the centre innovation, `√(Σ dx² / (P_xx + R))` over x and y with
/// the filter's predicted variance P and the measurement variance R = `position_std_m²`, is at
/// most `max_mahalanobis_distance` (0 turns the gate off). A track that has settled on a still
/// object has a small P, so it cannot jump to a neighbour's detection while its own object is
/// unseen; a young or long-unseen track has a large one and keeps the plain gate.
pub(crate) fn within_motion_gate(track: &LiveTrack, detection: &Box3, c: &ClassTrackConfig) -> bool {
    if c.max_mahalanobis_distance <= 0.0 {
        return true;
    }
    let r = c.position_std_m * c.position_std_m;
    let d2: f64 = [detection.x, detection.y]
        .iter()
        .zip(&track.centre)
        .map(|(z, axis)| (z - axis.value).powi(2) / (axis.covariance[0] + r))
        .sum();
    d2 <= c.max_mahalanobis_distance * c.max_mahalanobis_distance
}

fn new_track(id: u32, det: &WorldDetection, frame: usize, d: usize, c: &ClassTrackConfig) -> LiveTrack {
    let b = &det.box_in_world;
    let axis = |v: f64| CvFilter::new(v, c.position_std_m, c.initial_velocity_std_mps);
    LiveTrack {
        id,
        centre: [axis(b.x), axis(b.y), axis(b.z)],
        yaw: CvFilter::new(wrap_angle(b.yaw), c.yaw_std_rad, 1.0),
        size: [b.l, b.w, b.h],
        size_weight: det.score.max(1e-3),
        pitch_roll: [b.pitch, b.roll],
        hits: 1,
        time_since_update: 0,
        last_score: det.score,
        observations: vec![(frame, d)],
    }
}

fn update(t: &mut LiveTrack, det: &WorldDetection, frame: usize, d: usize, c: &ClassTrackConfig) {
    let b = &det.box_in_world;
    for (axis, z) in t.centre.iter_mut().zip([b.x, b.y, b.z]) {
        *axis = axis.updated(z, c.position_std_m);
    }
    // Orientation correction: a detection pointing the other way is a heading flip, not a turn.
    let (yaw_measured, _) = flip_near(b.yaw, t.yaw.value);
    t.yaw = t.yaw.updated(yaw_measured, c.yaw_std_rad);
    t.yaw.value = wrap_angle(t.yaw.value);
    let w = det.score.max(1e-3);
    if c.rigid {
        let total = t.size_weight + w;
        for (s, m) in t.size.iter_mut().zip([b.l, b.w, b.h]) {
            *s = (*s * t.size_weight + m * w) / total;
        }
        t.size_weight = total;
    } else {
        t.size = [b.l, b.w, b.h];
    }
    t.pitch_roll = [b.pitch, b.roll];
    t.hits += 1;
    t.time_since_update = 0;
    t.last_score = det.score;
    t.observations.push((frame, d));
}

/// Runs one class's tracker over `order` (frame indices, forward or backward) and returns its
/// tracklets; `on_frame` sees the tracker after each frame's step, before retirement.
pub(crate) fn run_pass(
    sequence: &PreparedSequence,
    class_index: usize,
    config: &ClassTrackConfig,
    two_stage: bool,
    order: impl Iterator<Item = usize>,
    mut on_frame: impl FnMut(usize, &Tracker),
) -> Vec<Tracklet> {
    let mut tracker = Tracker::new(config, two_stage);
    for f in order {
        tracker.step(f, sequence.times_micros[f], &sequence.detections[f][class_index]);
        on_frame(f, &tracker);
        tracker.retire();
    }
    tracker.into_tracklets()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::TrackConfig;

    fn detection(x: f64, y: f64) -> WorldDetection {
        WorldDetection {
            box_in_world: Box3::new(x, y, 0.8, 4.5, 1.9, 1.6, 0.0),
            score: 0.9,
            index: 0,
        }
    }

    /// A track seen once: predicted 0.1 s ahead its x variance is 0.3² + 0.1²·10² + 3²·0.1⁴/4
    /// = 1.0902, so with R = 0.09 a detection 2.5 m off lies √(6.25 / 1.1802) = 2.30 σ away:
    /// inside the 3 σ gate. After 30 frames on the same spot the variance has collapsed and the
    /// same 2.5 m offset (a parked neighbour) is far outside, while 0.3 m is still inside.
    #[test]
    fn mahalanobis_gate_tightens_on_a_settled_still_track() {
        let c = TrackConfig::default().vehicle;
        let mut t = new_track(0, &detection(0.0, 0.0), 0, 0, &c);
        let predict = |t: &mut LiveTrack| {
            for axis in &mut t.centre {
                *axis = axis.predicted(0.1, c.acceleration_std_mps2);
            }
        };
        predict(&mut t);
        let p = t.centre[0].covariance[0];
        assert!((p - (0.09 + 1.0 + 9.0 * 1e-4 / 4.0)).abs() < 1e-9, "{p}");
        assert!(within_motion_gate(&t, &detection(0.0, 2.5).box_in_world, &c));
        for f in 1..30 {
            update(&mut t, &detection(0.0, 0.0), f, 0, &c);
            predict(&mut t);
        }
        assert!(!within_motion_gate(&t, &detection(0.0, 2.5).box_in_world, &c));
        assert!(within_motion_gate(&t, &detection(0.3, 0.0).box_in_world, &c));
        let off = ClassTrackConfig {
            max_mahalanobis_distance: 0.0,
            ..c.clone()
        };
        assert!(within_motion_gate(&t, &detection(0.0, 2.5).box_in_world, &off));
    }
}
