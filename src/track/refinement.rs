//! Offline refinement of one class's tracks, using the whole sequence: forward and backward
//! passes merged; heading made consistent along each track; static/dynamic classification;
//! Rauch–Tung–Striebel smoothing that also fills gaps on the motion model; one size per rigid
//! track; static objects fused into one world box; short, low-evidence tracks dropped; tracks
//! that are a static object's off-centre detections folded into it, and single detections of
//! moving tracks that lie on a static object handed back to it; then extension past track ends
//! (and static propagation) where the points still show the object.

use std::collections::BTreeMap;
use std::f64::consts::{FRAC_PI_2, PI};

use super::association::{Candidate, assign};
use super::config::{ClassTrackConfig, StaticTest};
use super::evidence::Evidence;
use super::input::{PreparedSequence, WorldDetection};
use super::kalman::{CvFilter, FilterStep, flip_near, rts_smooth};
use super::output::{BoxOrigin, MotionState};
use super::tracker::{Tracklet, affinity_margin};
use crate::geometry::{Box3, iou_bev, wrap_angle};

/// A refined box before ids and sensor-frame boxes are attached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PlannedBox {
    /// Frame index.
    pub frame: usize,
    /// The box in the world frame.
    pub box_in_world: Box3,
    /// Where it came from.
    pub origin: BoxOrigin,
    /// Index of the supporting detection in the frame's class list.
    pub detection: Option<usize>,
    /// Its score.
    pub score: f64,
}

/// The state at one end of a track, from which it is extended.
#[derive(Debug, Clone, Copy, PartialEq)]
struct EndState {
    frame: usize,
    box_in_world: Box3,
    velocity: [f64; 3],
}

/// One refined track of one class.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrackPlan {
    /// Static or dynamic.
    pub motion: MotionState,
    /// Track score.
    pub score: f64,
    /// Detections associated.
    pub num_detected: usize,
    /// The single size of rigid and static tracks.
    pub size: Option<[f64; 3]>,
    /// Boxes, in frame order.
    pub boxes: Vec<PlannedBox>,
    head: EndState,
    tail: EndState,
}

/// Merges the two passes' tracklets into observation groups `frame → detection`.
///
/// Forward tracklets are primary. A backward tracklet that shares detections with several
/// forward tracklets joins them when their frame spans do not overlap (the forward pass broke
/// the object, the backward pass did not); its detections no forward tracklet took (low-score
/// boxes before a track's birth, typically) go to the group it shares most detections with,
/// where that group has no detection in the frame, or form a group of their own.
pub(crate) fn merge_passes(
    forward: &[Tracklet],
    backward: &[Tracklet],
    detections_per_frame: &[usize],
) -> Vec<BTreeMap<usize, usize>> {
    let mut owner: Vec<Vec<Option<usize>>> = detections_per_frame.iter().map(|&n| vec![None; n]).collect();
    for (k, t) in forward.iter().enumerate() {
        for &(f, d) in &t.observations {
            owner[f][d] = Some(k);
        }
    }
    let mut parent: Vec<usize> = (0..forward.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut span: Vec<(usize, usize)> = forward
        .iter()
        .map(|t| {
            let first = t.observations.first().map_or(0, |o| o.0);
            let last = t.observations.last().map_or(0, |o| o.0);
            (first, last)
        })
        .collect();
    for b in backward {
        let owners: Vec<usize> = b.observations.iter().filter_map(|&(f, d)| owner[f][d]).collect();
        for pair in owners.windows(2) {
            let (ra, rb) = (find(&mut parent, pair[0]), find(&mut parent, pair[1]));
            if ra == rb {
                continue;
            }
            let (sa, sb) = (span[ra], span[rb]);
            if sa.1 < sb.0 || sb.1 < sa.0 {
                let (keep, gone) = (ra.min(rb), ra.max(rb));
                parent[gone] = keep;
                span[keep] = (sa.0.min(sb.0), sa.1.max(sb.1));
            }
        }
    }
    // Groups from the joined forward tracklets, in order of their smallest member.
    let mut group_of_root: BTreeMap<usize, usize> = BTreeMap::new();
    let mut groups: Vec<BTreeMap<usize, usize>> = Vec::new();
    let mut group_owner: Vec<Vec<Option<usize>>> = detections_per_frame.iter().map(|&n| vec![None; n]).collect();
    for (k, t) in forward.iter().enumerate() {
        let r = find(&mut parent, k);
        let g = *group_of_root.entry(r).or_insert_with(|| {
            groups.push(BTreeMap::new());
            groups.len() - 1
        });
        for &(f, d) in &t.observations {
            groups[g].insert(f, d);
            group_owner[f][d] = Some(g);
        }
    }
    for b in backward {
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for &(f, d) in &b.observations {
            if let Some(g) = group_owner[f][d] {
                *counts.entry(g).or_default() += 1;
            }
        }
        let unclaimed: Vec<(usize, usize)> = b
            .observations
            .iter()
            .copied()
            .filter(|&(f, d)| group_owner[f][d].is_none())
            .collect();
        if unclaimed.is_empty() {
            continue;
        }
        // Most shared detections; ties go to the older group.
        let target = counts
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(&g, _)| g);
        let g = match target {
            Some(g) => g,
            None => {
                groups.push(BTreeMap::new());
                groups.len() - 1
            }
        };
        for (f, d) in unclaimed {
            if let std::collections::btree_map::Entry::Vacant(slot) = groups[g].entry(f) {
                slot.insert(d);
                group_owner[f][d] = Some(g);
            }
        }
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// Least-squares BEV velocity (m/s) of the last (`from_end`) or first `window` observations of
/// a group; zero with fewer than two.
fn group_velocity(
    group: &BTreeMap<usize, usize>,
    sequence: &PreparedSequence,
    class_index: usize,
    from_end: bool,
    window: usize,
) -> [f64; 2] {
    let pick: Vec<(usize, usize)> = if from_end {
        group.iter().rev().take(window).map(|(&f, &d)| (f, d)).collect()
    } else {
        group.iter().take(window).map(|(&f, &d)| (f, d)).collect()
    };
    if pick.len() < 2 {
        return [0.0; 2];
    }
    let samples: Vec<(f64, f64, f64)> = pick
        .iter()
        .map(|&(f, d)| {
            let b = &sequence.detections[f][class_index][d].box_in_world;
            (sequence.times_micros[f] as f64 * 1e-6, b.x, b.y)
        })
        .collect();
    let m = samples.len() as f64;
    let mt = samples.iter().map(|s| s.0).sum::<f64>() / m;
    let (mx, my) = (
        samples.iter().map(|s| s.1).sum::<f64>() / m,
        samples.iter().map(|s| s.2).sum::<f64>() / m,
    );
    let stt: f64 = samples.iter().map(|s| (s.0 - mt).powi(2)).sum();
    if stt.is_nan() || stt <= 0.0 {
        return [0.0; 2];
    }
    [
        samples.iter().map(|s| (s.0 - mt) * (s.1 - mx)).sum::<f64>() / stt,
        samples.iter().map(|s| (s.0 - mt) * (s.2 - my)).sum::<f64>() / stt,
    ]
}

/// Observations at each end of a group used to estimate its end velocity and its robust end box
/// for stitching.
const STITCH_END_WINDOW: usize = 10;

/// The robust box at one end of an observation group, for re-identification.
#[derive(Debug, Clone, Copy, PartialEq)]
struct EndSummary {
    /// Score-weighted median centre (world, m).
    centre: [f64; 2],
    /// Score-weighted median length and width (m).
    length_width: [f64; 2],
    /// Every centre of the window lies within `reid_max_distance_m` of the median centre.
    still: bool,
}

/// The robust box of the last (`from_end`) or first `STITCH_END_WINDOW` observations of a group.
fn end_summary(
    group: &BTreeMap<usize, usize>,
    sequence: &PreparedSequence,
    class_index: usize,
    from_end: bool,
    c: &ClassTrackConfig,
) -> EndSummary {
    let window: Vec<&WorldDetection> = if from_end {
        group
            .iter()
            .rev()
            .take(STITCH_END_WINDOW)
            .map(|(&f, &d)| &sequence.detections[f][class_index][d])
            .collect()
    } else {
        group
            .iter()
            .take(STITCH_END_WINDOW)
            .map(|(&f, &d)| &sequence.detections[f][class_index][d])
            .collect()
    };
    let median = |value: &dyn Fn(&Box3) -> f64| {
        weighted_median(
            window
                .iter()
                .map(|d| (value(&d.box_in_world), d.score.max(1e-3)))
                .collect(),
        )
    };
    let centre = [median(&|b| b.x), median(&|b| b.y)];
    let still = window
        .iter()
        .all(|d| (d.box_in_world.x - centre[0]).hypot(d.box_in_world.y - centre[1]) <= c.reid_max_distance_m);
    EndSummary {
        centre,
        length_width: [median(&|b| b.l), median(&|b| b.w)],
        still,
    }
}

/// Whether two robust end boxes are one still object: both still, centres closer than
/// `reid_max_distance_m`, lengths and widths within `reid_max_size_ratio` of each other.
/// Returns the centre distance (m).
fn same_still_object(a: &EndSummary, b: &EndSummary, c: &ClassTrackConfig) -> Option<f64> {
    if !(a.still && b.still) {
        return None;
    }
    let distance = (a.centre[0] - b.centre[0]).hypot(a.centre[1] - b.centre[1]);
    let ratio_ok = a.length_width.iter().zip(&b.length_width).all(|(&x, &y)| {
        let (lo, hi) = (x.min(y), x.max(y));
        lo > 0.0 && hi <= c.reid_max_size_ratio * lo
    });
    (distance < c.reid_max_distance_m && ratio_ok).then_some(distance)
}

/// Joins observation groups that are one object seen in separate stretches, as one global
/// assignment (Kuhn–Munkres over every allowed (earlier group, later group) pair, at most one
/// successor and one predecessor per group):
///
/// - *motion link*, for gaps longer than the tracker's `max_age_frames` but at most
///   `max_gap_frames`: the earlier group's last box, moved on its least-squares end velocity to
///   the later group's first frame, passes the association gate with the later group's first box;
/// - *re-identification* of a still object across any gap (ImmortalTracker keeps such tracks
///   alive; MS3D keeps a static object's id): the robust boxes (score-weighted medians of the
///   last / first `STITCH_END_WINDOW` observations) at the facing ends are both still, their
///   centres closer than `reid_max_distance_m`, their lengths and widths within
///   `reid_max_size_ratio` — a different-sized object arriving at the same spot is not joined.
///
/// A pair's weight is 1 − distance / gate (m / m) of its best link, so the assignment first
/// makes as many links as it can, then the tightest ones.
pub(crate) fn stitch_groups(
    groups: Vec<BTreeMap<usize, usize>>,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Vec<BTreeMap<usize, usize>> {
    let ends: Vec<((usize, usize), (usize, usize))> = groups
        .iter()
        .filter_map(|g| {
            let (first, last) = (g.iter().next()?, g.iter().next_back()?);
            Some(((*first.0, *first.1), (*last.0, *last.1)))
        })
        .collect();
    if ends.len() != groups.len() {
        return groups;
    }
    let velocities: Vec<[f64; 2]> = groups
        .iter()
        .map(|g| group_velocity(g, sequence, class_index, true, STITCH_END_WINDOW))
        .collect();
    let tails: Vec<EndSummary> = groups
        .iter()
        .map(|g| end_summary(g, sequence, class_index, true, c))
        .collect();
    let heads: Vec<EndSummary> = groups
        .iter()
        .map(|g| end_summary(g, sequence, class_index, false, c))
        .collect();
    let mut candidates: Vec<Candidate> = Vec::new();
    for (a, (_, (fa, da))) in ends.iter().enumerate() {
        for (b, ((fb, db), _)) in ends.iter().enumerate() {
            if fb <= fa {
                continue;
            }
            let mut weight = None::<f64>;
            if let Some(distance) = same_still_object(&tails[a], &heads[b], c) {
                weight = Some(1.0 - distance / c.reid_max_distance_m);
            }
            if fb - fa <= c.max_gap_frames as usize + 1 {
                let dt = (sequence.times_micros[*fb] - sequence.times_micros[*fa]) as f64 * 1e-6;
                let mut predicted = sequence.detections[*fa][class_index][*da].box_in_world;
                predicted.x += velocities[a][0] * dt;
                predicted.y += velocities[a][1] * dt;
                let target = &sequence.detections[*fb][class_index][*db].box_in_world;
                if affinity_margin(c, &predicted, target).is_some() {
                    let distance = (predicted.x - target.x).hypot(predicted.y - target.y);
                    let w = 1.0 - distance / c.max_center_distance_m;
                    weight = Some(weight.map_or(w, |x| x.max(w)));
                }
            }
            if let Some(w) = weight {
                candidates.push(Candidate {
                    track: a,
                    detection: b,
                    margin: w.max(0.0),
                });
            }
        }
    }
    let mut successor: Vec<Option<usize>> = vec![None; groups.len()];
    let mut has_predecessor = vec![false; groups.len()];
    for (a, b) in assign(groups.len(), groups.len(), &candidates) {
        successor[a] = Some(b);
        has_predecessor[b] = true;
    }
    let mut groups: Vec<Option<BTreeMap<usize, usize>>> = groups.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for (start, &joined_later) in has_predecessor.iter().enumerate() {
        if joined_later {
            continue;
        }
        let mut joined = BTreeMap::new();
        let mut k = Some(start);
        while let Some(i) = k {
            if let Some(g) = groups[i].take() {
                joined.extend(g);
            }
            k = successor[i];
        }
        out.push(joined);
    }
    out
}

/// Weighted median of `values` (weights ≥ 0; equal weights when they sum to 0).
fn weighted_median(mut pairs: Vec<(f64, f64)>) -> f64 {
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    if total.is_nan() || total <= 0.0 {
        return pairs.get(pairs.len() / 2).map_or(0.0, |p| p.0);
    }
    let mut acc = 0.0;
    for &(v, w) in &pairs {
        acc += w;
        if acc >= 0.5 * total {
            return v;
        }
    }
    pairs.last().map_or(0.0, |p| p.0)
}

/// A static track's boxes: its fused box in every frame of its span, `detected` where the group
/// has a detection, `interpolated` in gap frames where the points show the object. Without
/// points, gaps longer than `max_gap_frames` (a parked object joined across a long occlusion)
/// keep the id but are not filled: the object may be fully hidden there. With points, every gap
/// frame is filled exactly where the points show it.
fn static_boxes(
    group: &BTreeMap<usize, usize>,
    fused: &Box3,
    score: f64,
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Vec<PlannedBox> {
    let (Some((&first, _)), Some((&last, _))) = (group.first_key_value(), group.last_key_value()) else {
        return Vec::new();
    };
    let mut boxes = Vec::new();
    for f in first..=last {
        let planned = match group.get(&f) {
            Some(&d) => PlannedBox {
                frame: f,
                box_in_world: *fused,
                origin: BoxOrigin::Detected,
                detection: Some(d),
                score: c.detection_score_weight * sequence.detections[f][class_index][d].score
                    + (1.0 - c.detection_score_weight) * score,
            },
            None => {
                let previous = group.range(..=f).next_back().map_or(f, |(&p, _)| p);
                let next = group.range(f..).next().map_or(f, |(&n, _)| n);
                let long = next - previous > c.max_gap_frames as usize + 1;
                let fill = match raised_box_points(evidence, f, fused, c.fill_box_growth_m, c) {
                    Some(points) if c.fill_min_points > 0 => points >= c.fill_min_points as usize,
                    _ => !long,
                };
                if !fill {
                    continue;
                }
                PlannedBox {
                    frame: f,
                    box_in_world: *fused,
                    origin: BoxOrigin::Interpolated,
                    detection: None,
                    score: score * c.interpolation_score_factor,
                }
            }
        };
        boxes.push(planned);
    }
    boxes
}

/// Track score: mean detection score × min(1, detections / `full_score_observations`).
fn track_score(scores: impl Iterator<Item = f64>, c: &ClassTrackConfig) -> f64 {
    let (sum, n) = scores.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        return 0.0;
    }
    sum / n as f64 * (n as f64 / c.full_score_observations.max(1) as f64).min(1.0)
}

/// Whether a track's detections (in frame order) are one static object: small displacement
/// between its ends and small centre spread, by `static_test`.
fn is_static_track(obs: &[(usize, &WorldDetection)], c: &ClassTrackConfig) -> bool {
    let n = obs.len();
    let (Some(first), Some(last)) = (obs.first(), obs.last()) else {
        return false;
    };
    if n < 2 {
        return false;
    }
    let centre = |o: &(usize, &WorldDetection)| [o.1.box_in_world.x, o.1.box_in_world.y];
    let (displacement, variance) = match c.static_test {
        StaticTest::Ms3d => {
            let (a, b) = (centre(first), centre(last));
            let mean = obs.iter().map(centre).fold([0.0; 2], |m, p| [m[0] + p[0], m[1] + p[1]]);
            let mean = [mean[0] / n as f64, mean[1] / n as f64];
            let variance = obs
                .iter()
                .map(|o| {
                    let p = centre(o);
                    0.5 * ((p[0] - mean[0]).powi(2) + (p[1] - mean[1]).powi(2))
                })
                .sum::<f64>()
                / n as f64;
            ((b[0] - a[0]).hypot(b[1] - a[1]), variance)
        }
        StaticTest::Robust => {
            let median_centre = |part: &[(usize, &WorldDetection)]| {
                let axis =
                    |k: usize| weighted_median(part.iter().map(|o| (centre(o)[k], o.1.score.max(1e-3))).collect());
                [axis(0), axis(1)]
            };
            let k = n.div_ceil(3).min(STITCH_END_WINDOW);
            let (a, b) = (median_centre(&obs[..k]), median_centre(&obs[n - k..]));
            let m = median_centre(obs);
            let squared = obs
                .iter()
                .map(|o| {
                    let p = centre(o);
                    ((p[0] - m[0]).powi(2) + (p[1] - m[1]).powi(2), 1.0)
                })
                .collect();
            (
                (b[0] - a[0]).hypot(b[1] - a[1]),
                weighted_median(squared) / (2.0 * std::f64::consts::LN_2),
            )
        }
    };
    displacement < c.static_max_displacement_m && variance < c.static_max_variance_m2
}

/// Refines one observation group; `None` when the track is dropped (short and weak, or weak).
/// A track's travel against its heading (m; negative: along it) and its speed (m/s): the
/// displacement between the score-weighted median centres of its first and last
/// min(10, ⌈n/3⌉) observations (as the robust static test takes them), projected on the
/// circular mean of its chained headings, over the time between those windows' middle
/// observations. Ends rather than steps, so detection jitter neither piles up nor reads as travel.
fn travel_against_heading(obs: &[(usize, &WorldDetection)], yaws: &[f64], times_micros: &[i64]) -> (f64, f64) {
    let n = obs.len();
    if n < 2 {
        return (0.0, 0.0);
    }
    let median_centre = |part: &[(usize, &WorldDetection)]| {
        let axis = |k: usize| {
            weighted_median(
                part.iter()
                    .map(|o| ([o.1.box_in_world.x, o.1.box_in_world.y][k], o.1.score.max(1e-3)))
                    .collect(),
            )
        };
        [axis(0), axis(1)]
    };
    let k = n.div_ceil(3).min(STITCH_END_WINDOW);
    let (a, b) = (median_centre(&obs[..k]), median_centre(&obs[n - k..]));
    let (sin, cos) = yaws.iter().fold((0.0, 0.0), |(s, c), y| (s + y.sin(), c + y.cos()));
    let heading = sin.atan2(cos);
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let micros = |i: usize| times_micros.get(obs[i].0).copied().unwrap_or(0);
    let dt_s = (micros(n - 1 - k / 2) - micros(k / 2)) as f64 * 1e-6;
    let speed = if dt_s > 0.0 { dx.hypot(dy) / dt_s } else { 0.0 };
    (-(dx * heading.cos() + dy * heading.sin()), speed)
}

pub(crate) fn refine_group(
    group: &BTreeMap<usize, usize>,
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Option<TrackPlan> {
    let obs: Vec<(usize, &WorldDetection)> = group
        .iter()
        .map(|(&f, &d)| (f, &sequence.detections[f][class_index][d]))
        .collect();
    let n = obs.len();
    let (first_obs, last_obs) = (obs.first()?, obs.last()?);
    let mean_score = obs.iter().map(|o| o.1.score).sum::<f64>() / n as f64;
    let peak_score = obs.iter().map(|o| o.1.score).fold(f64::NEG_INFINITY, f64::max);
    if (n < c.min_observations as usize && peak_score < c.short_track_min_score) || mean_score < c.min_mean_score {
        return None;
    }
    let score = track_score(obs.iter().map(|o| o.1.score), c);

    // Heading: chain each yaw to the previous one with the π-flip correction, then turn the
    // whole chain around if most of the (score-weighted) detections point the other way.
    let mut yaws = Vec::with_capacity(n);
    for (k, (_, det)) in obs.iter().enumerate() {
        let y = match k {
            0 => wrap_angle(det.box_in_world.yaw),
            _ => flip_near(det.box_in_world.yaw, yaws[k - 1]).0,
        };
        yaws.push(y);
    }
    let (mut agree, mut disagree) = (0.0, 0.0);
    for ((_, det), y) in obs.iter().zip(&yaws) {
        if wrap_angle(det.box_in_world.yaw - y).abs() < FRAC_PI_2 {
            agree += det.score;
        } else {
            disagree += det.score;
        }
    }
    if disagree > agree {
        yaws.iter_mut().for_each(|y| *y += PI);
    }

    let weights: Vec<f64> = obs.iter().map(|o| o.1.score.max(1e-3)).collect();
    let median_of = |f: &dyn Fn(&Box3) -> f64, confident_only: bool| {
        let pairs: Vec<(f64, f64)> = obs
            .iter()
            .zip(&weights)
            .filter(|(o, _)| !confident_only || o.1.score >= c.size_min_score)
            .map(|(o, &w)| (f(&o.1.box_in_world), w))
            .collect();
        if pairs.is_empty() {
            weighted_median(
                obs.iter()
                    .zip(&weights)
                    .map(|(o, &w)| (f(&o.1.box_in_world), w))
                    .collect(),
            )
        } else {
            weighted_median(pairs)
        }
    };
    let pitch = median_of(&|b| b.pitch, false);
    let roll = median_of(&|b| b.roll, false);
    let median_size = [
        median_of(&|b| b.l, true),
        median_of(&|b| b.w, true),
        median_of(&|b| b.h, true),
    ];

    let is_static = is_static_track(&obs, c);
    if !is_static && c.heading_from_motion {
        let (against_m, speed_mps) = travel_against_heading(&obs, &yaws, &sequence.times_micros);
        if against_m >= c.heading_min_travel_m && speed_mps >= c.heading_min_speed_mps {
            yaws.iter_mut().for_each(|y| *y += PI);
        }
    }

    let blend = |s: f64| c.detection_score_weight * s + (1.0 - c.detection_score_weight) * score;
    if is_static {
        let (sin, cos) = yaws
            .iter()
            .zip(&weights)
            .fold((0.0, 0.0), |(s, co), (y, w)| (s + w * y.sin(), co + w * y.cos()));
        let fused = Box3::from_array([
            median_of(&|b| b.x, false),
            median_of(&|b| b.y, false),
            median_of(&|b| b.z, false),
            median_size[0],
            median_size[1],
            median_size[2],
            sin.atan2(cos),
            pitch,
            roll,
        ]);
        let boxes = static_boxes(group, &fused, score, evidence, sequence, class_index, c);
        let end = |frame| EndState {
            frame,
            box_in_world: fused,
            velocity: [0.0; 3],
        };
        return Some(TrackPlan {
            motion: MotionState::Static,
            score,
            num_detected: n,
            size: Some(median_size),
            boxes,
            head: end(first_obs.0),
            tail: end(last_obs.0),
        });
    }

    // Dynamic: smooth each segment (split where a gap exceeds max_gap_frames).
    let mut boxes = Vec::new();
    let mut head = None;
    let mut tail = None;
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && obs[end].0 - obs[end - 1].0 <= c.max_gap_frames as usize + 1 {
            end += 1;
        }
        let segment = &obs[start..end];
        let segment_yaws = &yaws[start..end];
        let (f0, f1) = (segment[0].0, segment[segment.len() - 1].0);
        let mut filters: [Vec<FilterStep>; 4] = Default::default();
        let mut k = 0;
        for f in f0..=f1 {
            let measured = (segment[k].0 == f).then(|| {
                let b = &segment[k].1.box_in_world;
                let m = [b.x, b.y, b.z, segment_yaws[k]];
                k += 1;
                m
            });
            for (axis, steps) in filters.iter_mut().enumerate() {
                let (std, accel, rate_std) = if axis == 3 {
                    (c.yaw_std_rad, c.yaw_acceleration_std_radps2, 1.0)
                } else {
                    (c.position_std_m, c.acceleration_std_mps2, c.initial_velocity_std_mps)
                };
                let step = match steps.last() {
                    None => {
                        let z = measured.map_or(0.0, |m| m[axis]);
                        let s = CvFilter::new(z, std, rate_std);
                        FilterStep {
                            predicted: s,
                            filtered: s,
                            dt_s: 0.0,
                        }
                    }
                    Some(previous) => {
                        let dt_s = (sequence.times_micros[f] - sequence.times_micros[f - 1]) as f64 * 1e-6;
                        let predicted = previous.filtered.predicted(dt_s, accel);
                        let filtered = measured.map_or(predicted, |m| predicted.updated(m[axis], std));
                        FilterStep {
                            predicted,
                            filtered,
                            dt_s,
                        }
                    }
                };
                steps.push(step);
            }
        }
        let smooth: Vec<Vec<(f64, f64)>> = filters.iter().map(|s| rts_smooth(s)).collect();
        // Non-rigid sizes: the detection's where detected, linear in between.
        let mut k = 0;
        for (i, f) in (f0..=f1).enumerate() {
            while k + 1 < segment.len() && segment[k + 1].0 <= f {
                k += 1;
            }
            let size = if c.rigid {
                median_size
            } else {
                let a = &segment[k].1.box_in_world;
                match segment.get(k + 1) {
                    Some(next) if segment[k].0 < f => {
                        let b = &next.1.box_in_world;
                        let t = (f - segment[k].0) as f64 / (next.0 - segment[k].0) as f64;
                        [a.l + t * (b.l - a.l), a.w + t * (b.w - a.w), a.h + t * (b.h - a.h)]
                    }
                    _ => [a.l, a.w, a.h],
                }
            };
            let b = Box3::from_array([
                smooth[0][i].0,
                smooth[1][i].0,
                smooth[2][i].0,
                size[0],
                size[1],
                size[2],
                wrap_angle(smooth[3][i].0),
                pitch,
                roll,
            ]);
            let velocity = [smooth[0][i].1, smooth[1][i].1, smooth[2][i].1];
            // A gap frame whose points do not show the object (fully hidden) stays empty.
            let hidden = !group.contains_key(&f)
                && c.fill_min_points > 0
                && raised_box_points(evidence, f, &b, c.fill_box_growth_m, c)
                    .is_some_and(|n| n < c.fill_min_points as usize);
            let (origin, detection, s) = match group.get(&f) {
                Some(&d) => (
                    BoxOrigin::Detected,
                    Some(d),
                    blend(sequence.detections[f][class_index][d].score),
                ),
                None => (BoxOrigin::Interpolated, None, score * c.interpolation_score_factor),
            };
            if !hidden {
                boxes.push(PlannedBox {
                    frame: f,
                    box_in_world: b,
                    origin,
                    detection,
                    score: s,
                });
            }
            let state = EndState {
                frame: f,
                box_in_world: b,
                velocity,
            };
            if head.is_none() {
                head = Some(state);
            }
            tail = Some(state);
        }
        start = end;
    }
    Some(TrackPlan {
        motion: MotionState::Dynamic,
        score,
        num_detected: n,
        size: c.rigid.then_some(median_size),
        boxes,
        head: head?,
        tail: tail?,
    })
}

/// The frame's points inside `box_in_world` grown by `growth_m` on every side but the bottom,
/// with its bottom raised by `evidence_ground_margin_m` (so ground returns do not count);
/// `None` without points.
fn raised_box_points(
    evidence: &Evidence,
    frame: usize,
    box_in_world: &Box3,
    growth_m: f64,
    c: &ClassTrackConfig,
) -> Option<usize> {
    let margin = c.evidence_ground_margin_m.clamp(0.0, 0.9 * box_in_world.h);
    let mut raised = *box_in_world;
    raised.l += 2.0 * growth_m;
    raised.w += 2.0 * growth_m;
    raised.z += 0.5 * (margin + growth_m);
    raised.h += growth_m - margin;
    evidence.count(frame, &raised)
}

/// Whether the frame's points show an object in `box_in_world`: `None` without points,
/// otherwise whether at least `evidence_min_points` fall inside its raised box.
fn points_evidence(evidence: &Evidence, frame: usize, box_in_world: &Box3, c: &ClassTrackConfig) -> Option<bool> {
    raised_box_points(evidence, frame, box_in_world, 0.0, c).map(|n| n >= c.evidence_min_points as usize)
}

/// BEV IoU above which an extension would run into another track's box.
const EXTENSION_OVERLAP_IOU: f64 = 0.1;

/// Extends each plan past both ends (dynamic: on the end state's motion, `extension_max_frames`;
/// static: the fused box, `static_propagation_frames`) while the points show the object and no
/// other box of the class is there. Frames without points extend static tracks (as MS3D
/// propagates them) but not dynamic ones. Plans are visited by falling score so stronger tracks
/// claim contested frames first; `occupied[frame]` holds every box of the class.
pub(crate) fn extend_plans(
    plans: &mut [TrackPlan],
    evidence: &Evidence,
    times_micros: &[i64],
    occupied: &mut [Vec<Box3>],
    c: &ClassTrackConfig,
) {
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by(|&a, &b| plans[b].score.total_cmp(&plans[a].score).then(a.cmp(&b)));
    for k in order {
        let plan = &plans[k];
        if plan.num_detected < c.min_observations as usize {
            continue;
        }
        let (max_frames, decay) = match plan.motion {
            MotionState::Static => (c.static_propagation_frames, c.static_score_decay),
            MotionState::Dynamic => (c.extension_max_frames, c.extension_score_decay),
        };
        let mut added = Vec::new();
        for (end, direction) in [(plan.head, -1i64), (plan.tail, 1i64)] {
            for step in 1..=max_frames as i64 {
                let f = end.frame as i64 + direction * step;
                if f < 0 || f >= times_micros.len() as i64 {
                    break;
                }
                let f = f as usize;
                let dt_s = (times_micros[f] - times_micros[end.frame]) as f64 * 1e-6;
                let mut b = end.box_in_world;
                b.x += end.velocity[0] * dt_s;
                b.y += end.velocity[1] * dt_s;
                b.z += end.velocity[2] * dt_s;
                if occupied[f].iter().any(|o| iou_bev(o, &b) > EXTENSION_OVERLAP_IOU) {
                    break;
                }
                let accepted = match points_evidence(evidence, f, &b, c) {
                    Some(seen) => seen,
                    None => plan.motion == MotionState::Static,
                };
                if !accepted {
                    break;
                }
                occupied[f].push(b);
                added.push(PlannedBox {
                    frame: f,
                    box_in_world: b,
                    origin: BoxOrigin::Extended,
                    detection: None,
                    score: plan.score * decay.powi(step as i32),
                });
            }
        }
        let plan = &mut plans[k];
        plan.boxes.extend(added);
        plan.boxes.sort_by_key(|b| b.frame);
    }
}

/// Each plan's detected frames: frame → detection index in the frame's class list.
fn detected_frames(plans: &[TrackPlan]) -> Vec<BTreeMap<usize, usize>> {
    plans
        .iter()
        .map(|p| {
            p.boxes
                .iter()
                .filter_map(|b| b.detection.map(|d| (b.frame, d)))
                .collect()
        })
        .collect()
}

/// Whether a length and width agree with `size`'s within the factor `ratio` (≥ 1).
fn same_footprint(length_width: [f64; 2], size: &[f64; 3], ratio: f64) -> bool {
    length_width.iter().zip(size).all(|(&x, &y)| {
        let (lo, hi) = (x.min(y), x.max(y));
        lo > 0.0 && hi <= ratio * lo
    })
}

/// Folds tracks that are a static object's other detections into its static track
/// (`static_absorb_min_iou`): a track never detected in one of the static track's detected
/// frames, whose robust length and width match its size within `reid_max_size_ratio` and whose
/// detections overlap its fused box at a median BEV IoU above the threshold. Either the track
/// lies inside the static track's detected span (a static object seen before and after it is
/// there during it), or it lies before or after it and the static track has at least as many
/// detections (the better-observed box decides). Tracks are visited shortest span first; each
/// joins the matching static track it overlaps most, whose boxes are then rebuilt over the
/// joined detections on its fused box (not refitted: the joined boxes are the off-centre ones),
/// gap frames filled on the points as in `static_boxes`.
pub(crate) fn absorb_into_static(
    plans: Vec<TrackPlan>,
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Vec<TrackPlan> {
    if c.static_absorb_min_iou >= 1.0 {
        return plans;
    }
    let mut detected = detected_frames(&plans);
    let detection = |f: usize, d: usize| &sequence.detections[f][class_index][d];
    let ends = |m: &BTreeMap<usize, usize>| match (m.first_key_value(), m.last_key_value()) {
        (Some((&first, _)), Some((&last, _))) => Some((first, last)),
        _ => None,
    };
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&k| (ends(&detected[k]).map_or(0, |(first, last)| last - first), k));
    let mut absorbed = vec![false; plans.len()];
    let mut plans = plans;
    for b in order {
        let Some((first, last)) = ends(&detected[b]) else {
            continue;
        };
        let robust = |value: &dyn Fn(&Box3) -> f64| {
            weighted_median(
                detected[b]
                    .iter()
                    .map(|(&f, &d)| (value(&detection(f, d).box_in_world), detection(f, d).score.max(1e-3)))
                    .collect(),
            )
        };
        let length_width = [robust(&|x| x.l), robust(&|x| x.w)];
        // Every box of the track lies within `reach` of `centre`: a static box whose bounding
        // circle stays farther away overlaps none of them (IoU 0), without computing any IoU.
        let centre = [robust(&|x| x.x), robust(&|x| x.y)];
        let reach = detected[b]
            .iter()
            .map(|(&f, &d)| {
                let x = &detection(f, d).box_in_world;
                (x.x - centre[0]).hypot(x.y - centre[1]) + 0.5 * x.l.hypot(x.w)
            })
            .fold(0.0, f64::max);
        let mut best: Option<(f64, usize, Box3)> = None;
        for a in 0..plans.len() {
            let plan = &plans[a];
            if a == b || absorbed[a] || plan.motion != MotionState::Static {
                continue;
            }
            let (Some((a_first, a_last)), Some(size), Some(fused)) = (
                ends(&detected[a]),
                plan.size,
                plan.boxes.first().map(|x| x.box_in_world),
            ) else {
                continue;
            };
            if (fused.x - centre[0]).hypot(fused.y - centre[1]) > reach + 0.5 * fused.l.hypot(fused.w) {
                continue;
            }
            let inside = a_first <= first && last <= a_last;
            let outside = last < a_first || a_last < first;
            if !(inside || (outside && detected[a].len() >= detected[b].len()))
                || detected[b].keys().any(|f| detected[a].contains_key(f))
            {
                continue;
            }
            if !same_footprint(length_width, &size, c.reid_max_size_ratio) {
                continue;
            }
            let overlap = weighted_median(
                detected[b]
                    .iter()
                    .map(|(&f, &d)| (iou_bev(&detection(f, d).box_in_world, &fused), 1.0))
                    .collect(),
            );
            if overlap > c.static_absorb_min_iou && best.is_none_or(|(o, _, _)| overlap > o) {
                best = Some((overlap, a, fused));
            }
        }
        let Some((_, a, fused)) = best else {
            continue;
        };
        absorbed[b] = true;
        let moved = std::mem::take(&mut detected[b]);
        detected[a].extend(moved);
        rebuild_static(&mut plans[a], &detected[a], &fused, evidence, sequence, class_index, c);
    }
    plans
        .into_iter()
        .zip(absorbed)
        .filter_map(|(p, gone)| (!gone).then_some(p))
        .collect()
}

/// Rebuilds static track `target` over its observation group `group` on its fused box `fused`.
fn rebuild_static(
    target: &mut TrackPlan,
    group: &BTreeMap<usize, usize>,
    fused: &Box3,
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) {
    let detections = &sequence.detections;
    target.score = track_score(group.iter().map(|(&f, &d)| detections[f][class_index][d].score), c);
    target.num_detected = group.len();
    target.boxes = static_boxes(group, fused, target.score, evidence, sequence, class_index, c);
    if let (Some(head), Some(tail)) = (target.boxes.first(), target.boxes.last()) {
        target.head.frame = head.frame;
        target.tail.frame = tail.frame;
    }
}

/// Hands single detections of moving tracks to the static track whose object they show
/// (`static_absorb_min_iou`). A detection moves when the static track has no detection in its
/// frame and the detection overlaps the static track's fused box at a BEV IoU above the
/// threshold, where the frame lies inside the static track's detected span or the detection's
/// length and width are within `reid_max_size_ratio` of the static size (the same object seen
/// again, not another one on its spot). Such detections are where a track drifts across a row
/// of parked cars, taking each car's detections while that car's own track is in a gap or has
/// ended: a moving object cannot overlap a parked one. Static tracks that gain detections are
/// rebuilt on their fused box; tracks that lose some are refined again from the rest, and
/// dropped if that is too weak.
pub(crate) fn reassign_detections_to_static(
    plans: Vec<TrackPlan>,
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Vec<TrackPlan> {
    if c.static_absorb_min_iou >= 1.0 {
        return plans;
    }
    let mut detected = detected_frames(&plans);
    // (plan, fused box, its BEV half-diagonal, size, first and last detected frame) of every
    // static track.
    let statics: Vec<(usize, Box3, f64, [f64; 3], usize, usize)> = plans
        .iter()
        .enumerate()
        .filter(|(_, p)| p.motion == MotionState::Static)
        .filter_map(|(a, p)| {
            let (first, last) = (detected[a].first_key_value()?, detected[a].last_key_value()?);
            let fused = p.boxes.first()?.box_in_world;
            Some((a, fused, 0.5 * fused.l.hypot(fused.w), p.size?, *first.0, *last.0))
        })
        .collect();
    if statics.is_empty() {
        return plans;
    }
    let mut gained = vec![false; plans.len()];
    let mut lost = vec![false; plans.len()];
    for b in 0..plans.len() {
        if plans[b].motion == MotionState::Static {
            continue;
        }
        let frames: Vec<(usize, usize)> = detected[b].iter().map(|(&f, &d)| (f, d)).collect();
        for (f, d) in frames {
            let det = &sequence.detections[f][class_index][d].box_in_world;
            let reach = 0.5 * det.l.hypot(det.w);
            let mut best: Option<(f64, usize)> = None;
            for (a, fused, radius, size, first, last) in &statics {
                // Boxes whose bounding circles do not meet have BEV IoU 0.
                let (dx, dy) = (fused.x - det.x, fused.y - det.y);
                if dx * dx + dy * dy > (reach + radius) * (reach + radius)
                    || detected[*a].contains_key(&f)
                    || !((*first..=*last).contains(&f) || same_footprint([det.l, det.w], size, c.reid_max_size_ratio))
                {
                    continue;
                }
                let overlap = iou_bev(det, fused);
                if overlap > c.static_absorb_min_iou && best.is_none_or(|(o, _)| overlap > o) {
                    best = Some((overlap, *a));
                }
            }
            if let Some((_, a)) = best {
                detected[b].remove(&f);
                detected[a].insert(f, d);
                (lost[b], gained[a]) = (true, true);
            }
        }
    }
    let mut kept = Vec::with_capacity(plans.len());
    for (k, mut plan) in plans.into_iter().enumerate() {
        if lost[k] {
            kept.extend(refine_group(&detected[k], evidence, sequence, class_index, c));
            continue;
        }
        if gained[k]
            && let Some(fused) = plan.boxes.first().map(|x| x.box_in_world)
        {
            rebuild_static(&mut plan, &detected[k], &fused, evidence, sequence, class_index, c);
        }
        kept.push(plan);
    }
    kept
}

/// Refines one class: merge the passes, stitch, refine each group, absorb into static tracks
/// (whole tracks, then single detections), extend.
pub(crate) fn refine_class(
    forward: &[Tracklet],
    backward: &[Tracklet],
    evidence: &Evidence,
    sequence: &PreparedSequence,
    class_index: usize,
    c: &ClassTrackConfig,
) -> Vec<TrackPlan> {
    let counts: Vec<usize> = sequence.detections.iter().map(|d| d[class_index].len()).collect();
    let groups = stitch_groups(merge_passes(forward, backward, &counts), sequence, class_index, c);
    let plans: Vec<TrackPlan> = groups
        .iter()
        .filter_map(|g| refine_group(g, evidence, sequence, class_index, c))
        .collect();
    let plans = absorb_into_static(plans, evidence, sequence, class_index, c);
    let mut plans = reassign_detections_to_static(plans, evidence, sequence, class_index, c);
    let mut occupied: Vec<Vec<Box3>> = vec![Vec::new(); sequence.times_micros.len()];
    for plan in &plans {
        for b in &plan.boxes {
            occupied[b.frame].push(b.box_in_world);
        }
    }
    extend_plans(&mut plans, evidence, &sequence.times_micros, &mut occupied, c);
    plans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracklet(obs: &[(usize, usize)]) -> Tracklet {
        Tracklet {
            observations: obs.to_vec(),
        }
    }

    /// Forward broke one object into A (frames 0–2) and B (5–6); the backward tracklet saw it
    /// whole, including an unclaimed low-score detection at frame 3: one group of 6.
    /// A concurrent forward tracklet C (frames 1–5) that backward also touched is not joined
    /// (its span overlaps).
    #[test]
    fn backward_pass_joins_broken_tracks_and_adds_unclaimed_detections() {
        let counts = vec![2; 7];
        let forward = vec![
            tracklet(&[(0, 0), (1, 0), (2, 0)]),
            tracklet(&[(5, 0), (6, 0)]),
            tracklet(&[(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]),
        ];
        let backward = vec![
            tracklet(&[(1, 0), (2, 0), (3, 0), (5, 0), (6, 0)]),
            tracklet(&[(2, 0), (3, 1)]),
        ];
        let groups = merge_passes(&forward, &backward, &counts);
        assert_eq!(groups.len(), 2);
        let joined: Vec<(usize, usize)> = groups[0].iter().map(|(&f, &d)| (f, d)).collect();
        assert_eq!(joined, vec![(0, 0), (1, 0), (2, 0), (3, 0), (5, 0), (6, 0)]);
        assert_eq!(groups[1].len(), 5);
    }

    fn detections_at(centres: &[[f64; 2]]) -> Vec<WorldDetection> {
        centres
            .iter()
            .enumerate()
            .map(|(index, c)| WorldDetection {
                box_in_world: Box3::new(c[0], c[1], 0.8, 4.5, 1.9, 1.6, 0.0),
                score: 0.7,
                index,
            })
            .collect()
    }

    fn judged_static(centres: &[[f64; 2]], test: StaticTest) -> bool {
        let detections = detections_at(centres);
        let obs: Vec<(usize, &WorldDetection)> = detections.iter().enumerate().collect();
        let c = ClassTrackConfig {
            static_test: test,
            ..ClassTrackConfig::default()
        };
        is_static_track(&obs, &c)
    }

    /// Nine boxes on the spot and a last one 2 m off (a partial view): MS3D's first-to-last
    /// displacement (2 m) calls it moving; the robust ends (medians of 4) and spread do not.
    /// A car moving 0.5 m per frame is moving by both tests.
    #[test]
    fn robust_static_test_ignores_one_off_centre_box() {
        let mut parked = vec![[10.0, 5.0]; 9];
        parked.push([12.0, 5.0]);
        assert!(!judged_static(&parked, StaticTest::Ms3d));
        assert!(judged_static(&parked, StaticTest::Robust));
        let moving: Vec<[f64; 2]> = (0..10).map(|i| [0.5 * i as f64, 0.0]).collect();
        assert!(!judged_static(&moving, StaticTest::Ms3d));
        assert!(!judged_static(&moving, StaticTest::Robust));
    }

    /// Robust spread by hand: ends and median at the origin (displacement 0); squared distances
    /// {0 ×3, 0.2 ×4}, lower median 0.2, over 2 ln 2 → 0.144 m² > 0.1: not static. With 0.12 m²
    /// the estimate is 0.087 < 0.1: static.
    #[test]
    fn robust_static_spread_is_the_median_squared_distance_over_2_ln_2() {
        let spread = |d2: f64| {
            let r = d2.sqrt();
            vec![
                [0.0, 0.0],
                [r, 0.0],
                [0.0, 0.0],
                [-r, 0.0],
                [0.0, r],
                [0.0, 0.0],
                [0.0, -r],
            ]
        };
        assert!(!judged_static(&spread(0.2), StaticTest::Robust));
        assert!(judged_static(&spread(0.12), StaticTest::Robust));
    }

    #[test]
    fn weighted_median_follows_weights() {
        assert_eq!(weighted_median(vec![(1.0, 1.0), (2.0, 1.0), (10.0, 5.0)]), 10.0);
        assert_eq!(weighted_median(vec![(3.0, 1.0), (1.0, 1.0), (2.0, 1.0)]), 2.0);
        assert_eq!(weighted_median(vec![(3.0, 0.0), (1.0, 0.0)]), 3.0);
    }

    /// Parked cars A (4.5 × 1.9 m) and B, side by side 2.6 m apart, each with a static track of
    /// its early frames (A 0–29, B 0–55). A third, moving track drifted from A (frames 60–79)
    /// to B (83–99). Each of its detections overlaps one car's fused box where that car's track
    /// has none, so they all go back: two static tracks, A detected in 0–29 and 60–79, B in
    /// 0–55 and 83–99. When the boxes from 83 on are a van's (6.5 × 2.4 m), outside B's span,
    /// they are another object on B's spot and stay a track of their own.
    #[test]
    fn drifting_track_gives_parked_cars_their_detections_back() {
        let a = Box3::new(10.0, 3.0, 0.8, 4.5, 1.9, 1.6, 0.0);
        let b = Box3::new(10.0, 5.6, 0.8, 4.5, 1.9, 1.6, 0.0);
        let van = Box3::new(10.0, 5.6, 1.2, 6.5, 2.4, 2.4, 0.0);
        let c = ClassTrackConfig::default();
        let run = |late_b: Box3| {
            let n = 100;
            let mut detections: Vec<[Vec<WorldDetection>; 4]> = (0..n).map(|_| Default::default()).collect();
            let mut groups: [BTreeMap<usize, usize>; 3] = Default::default();
            for (f, frame) in detections.iter_mut().enumerate() {
                let on_a = (f < 30).then_some(0).or((60..80).contains(&f).then_some(2));
                let on_b = (f < 56).then_some((1, b)).or((f >= 83).then_some((2, late_b)));
                for (group, box_in_world) in [on_a.map(|g| (g, a)), on_b].into_iter().flatten() {
                    let index = frame[0].len();
                    frame[0].push(WorldDetection {
                        box_in_world,
                        score: 0.7,
                        index,
                    });
                    groups[group].insert(f, index);
                }
            }
            let sequence = PreparedSequence {
                times_micros: (0..n as i64).map(|i| i * 100_000).collect(),
                detections,
            };
            let evidence = Evidence::new(&[], &crate::track::NoPoints);
            let plans: Vec<TrackPlan> = groups
                .iter()
                .filter_map(|g| refine_group(g, &evidence, &sequence, 0, &c))
                .collect();
            let motions: Vec<MotionState> = plans.iter().map(|p| p.motion).collect();
            assert_eq!(
                motions,
                [MotionState::Static, MotionState::Static, MotionState::Dynamic]
            );
            reassign_detections_to_static(plans, &evidence, &sequence, 0, &c)
                .into_iter()
                .map(|p| {
                    let frames: Vec<usize> = p
                        .boxes
                        .iter()
                        .filter(|x| x.detection.is_some())
                        .map(|x| x.frame)
                        .collect();
                    (p.motion, frames)
                })
                .collect::<Vec<_>>()
        };
        let plans = run(b);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0], (MotionState::Static, (0..30).chain(60..80).collect()));
        assert_eq!(plans[1], (MotionState::Static, (0..56).chain(83..100).collect()));
        let plans = run(van);
        assert_eq!(plans.len(), 3);
        assert_eq!(plans[0].1, (0..30).chain(60..80).collect::<Vec<_>>());
        assert_eq!(plans[1].1, (0..56).collect::<Vec<_>>());
        assert_eq!(plans[2].1, (83..100).collect::<Vec<_>>());
    }

    /// A car moving +x at 0.5 m a frame whose detections mostly point backwards (yaw π, seven of
    /// ten) is turned to face its travel (yaw 0); with `heading_from_motion` off it keeps the
    /// vote. Creeping 0.1 m a frame (1.9 m in all, under `heading_min_travel_m`) it keeps the
    /// vote too. Going 0.25 m a frame, its robust ends (medians of 7 at frames 3 and 16) are
    /// 3.25 m apart: at a frame a second that is 0.25 m/s, under `heading_min_speed_mps`, and
    /// it keeps the vote; at ten frames a second (2.5 m/s) it is turned.
    #[test]
    fn moving_tracks_face_their_travel() {
        let plan = |step_m: f64, frame_us: i64, from_motion: bool| {
            let detections: Vec<[Vec<WorldDetection>; 4]> = (0..20)
                .map(|f| {
                    let yaw = if f % 10 < 7 { PI } else { 0.0 };
                    let det = WorldDetection {
                        box_in_world: Box3::new(step_m * f as f64, 2.0, 0.8, 4.5, 1.9, 1.6, yaw),
                        score: 0.7,
                        index: 0,
                    };
                    [vec![det], Vec::new(), Vec::new(), Vec::new()]
                })
                .collect();
            let sequence = PreparedSequence {
                times_micros: (0..20).map(|i| i * frame_us).collect(),
                detections,
            };
            let group: BTreeMap<usize, usize> = (0..20).map(|f| (f, 0)).collect();
            let c = ClassTrackConfig {
                heading_from_motion: from_motion,
                ..ClassTrackConfig::default()
            };
            let evidence = Evidence::new(&[], &crate::track::NoPoints);
            let plan = refine_group(&group, &evidence, &sequence, 0, &c).unwrap();
            assert_eq!(plan.motion, MotionState::Dynamic);
            let cos: Vec<f64> = plan.boxes.iter().map(|b| b.box_in_world.yaw.cos()).collect();
            assert_eq!(cos.len(), 20);
            cos.iter().sum::<f64>() / cos.len() as f64
        };
        assert!(plan(0.5, 100_000, true) > 0.99);
        assert!(plan(0.5, 100_000, false) < -0.99);
        assert!(plan(0.1, 100_000, true) < -0.99);
        assert!(plan(0.25, 1_000_000, true) < -0.99);
        assert!(plan(0.25, 100_000, true) > 0.99);
    }
}
