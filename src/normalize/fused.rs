//! One sequence's normalization: the per-frame inputs (pose, IMU specific force, ground fit),
//! the profile's estimator over them, the fused estimator (every absolute estimate taken into
//! the pose's world frame, weighted by its uncertainty and averaged over a time window, then
//! brought back to each frame), fallbacks with notes where an input is missing, and the altitude.

use nalgebra::{Isometry3, Unit, Vector3};

use super::altitude::{AltitudeRule, altitude_offset};
use super::gravity::{GravityMethod, UpEstimate, angle_between};
use super::ground::{GroundFit, fit_ground};
use super::imu::{SpecificForce, platform_acceleration, sweep_specific_force, up_from_specific_force};
use super::pose::up_from_pose;
use super::profile::{PoseFrame, Profile};
use super::transform::{Normalization, normalized_from_sensor};
use crate::frame::Frame;

/// Sigma of the nominal mounting, the last resort (rad): 5°.
const MOUNTING_SIGMA_RAD: f64 = 5.0 * std::f64::consts::PI / 180.0;

/// The sigma at which confidence is one half (rad): 0.5°.
const HALF_CONFIDENCE_SIGMA_RAD: f64 = 0.5 * std::f64::consts::PI / 180.0;

/// What one frame offers the estimators.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameInputs {
    /// Sweep time (µs).
    pub timestamp_micros: i64,
    /// The sensor's pose in the log's world frame, where the log has one.
    pub world_from_sensor: Option<Isometry3<f64>>,
    /// The sweep's mean specific force, where the IMU gave one.
    pub imu: Option<SpecificForce>,
    /// The ground plane, where one was found.
    pub ground: Option<GroundFit>,
    /// What went wrong computing these (IMU rows dropped, no ground found).
    pub notes: Vec<String>,
}

/// One frame's normalization.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameNormalization {
    /// Up in the sensor frame, with the method that gave it (`mounting` when nothing did).
    pub up: UpEstimate,
    /// The estimates that went into it.
    pub inputs: Vec<GravityMethod>,
    /// 1 / (1 + (sigma / 0.5°)²): 1 when sure, ½ at 0.5°.
    pub confidence: f64,
    /// The z offset of the altitude rule (m).
    pub altitude_offset_m: f64,
    /// The sensor's height above the fitted ground along up (m), where known.
    pub sensor_height_m: Option<f64>,
    /// The normalized frame from the sensor frame.
    pub normalized_from_sensor: Isometry3<f64>,
    /// Why the estimate is weaker than usual, one line each.
    pub notes: Vec<String>,
}

impl FrameInputs {
    /// What `frame` offers under `profile`: the pose (unless the profile says the log has none),
    /// the IMU's specific force (if the method uses it) and the ground fit (if the method or the
    /// altitude rule uses it), the fit looking low along the best prior at hand: the absolute
    /// pose, the IMU's force, or the mounting.
    pub fn from_frame(frame: &Frame, profile: &Profile) -> FrameInputs {
        let g = &profile.gravity;
        let mut notes = Vec::new();
        let world_from_sensor = (g.pose != PoseFrame::None).then_some(frame.world_from_sensor);
        let uses_imu = matches!(g.method, GravityMethod::Imu | GravityMethod::Fused);
        let uses_ground = matches!(g.method, GravityMethod::Ground | GravityMethod::Fused)
            || matches!(profile.altitude, AltitudeRule::Ground { .. });
        let imu = if uses_imu {
            let f = sweep_specific_force(&frame.imu);
            match &f {
                None if frame.imu.is_empty() => notes.push("no IMU samples in the sweep".to_string()),
                None => notes.push(format!("none of {} IMU samples usable", frame.imu.len())),
                Some(f) if f.dropped > 0 => notes.push(format!(
                    "{} of {} IMU samples unusable (non-finite, past a gap, or a shock)",
                    f.dropped,
                    f.dropped + f.samples
                )),
                Some(_) => {}
            }
            f
        } else {
            None
        };
        let ground = if uses_ground {
            let prior = match (g.pose, &imu) {
                (PoseFrame::Absolute, _) => up_from_pose(&frame.world_from_sensor),
                (_, Some(f)) if f.mean_mps2.norm() > 1.0 => Unit::new_normalize(f.mean_mps2),
                _ => profile.mounting.nominal_up(),
            };
            let c = &frame.cloud;
            let fit = fit_ground(c.x(), c.y(), c.z(), &prior, &g.ground_params());
            if fit.is_none() {
                notes.push(format!("no ground plane among {} returns", c.len()));
            }
            fit
        } else {
            None
        };
        FrameInputs {
            timestamp_micros: frame.timestamp_micros,
            world_from_sensor,
            imu,
            ground,
            notes,
        }
    }
}

/// Weighted mean direction of unit vectors with weights; `None` when they cancel.
fn weighted_mean(items: impl Iterator<Item = (Vector3<f64>, f64)>) -> Option<(Unit<Vector3<f64>>, f64)> {
    let (sum, weight) = items.fold((Vector3::zeros(), 0.0), |(s, w), (v, k)| (s + v * k, w + k));
    (weight > 0.0 && sum.norm() > 1e-12 * weight).then(|| (Unit::new_normalize(sum), weight))
}

/// Per frame, the segment it belongs to: a new one starts after a missing pose or a pose jump
/// (faster than the profile's turn rate or speed), with a note on the frame after the jump.
fn pose_segments(frames: &[FrameInputs], profile: &Profile, notes: &mut [Vec<String>]) -> Vec<usize> {
    let g = &profile.gravity;
    let mut segment = vec![0usize; frames.len()];
    for i in 1..frames.len() {
        let (a, b) = (&frames[i - 1], &frames[i]);
        let jumped = match (&a.world_from_sensor, &b.world_from_sensor) {
            (Some(pa), Some(pb)) => {
                let dt = ((b.timestamp_micros - a.timestamp_micros) as f64 * 1e-6).max(1e-3);
                let turn = (pa.rotation.inverse() * pb.rotation).angle().to_degrees();
                let moved = (pb.translation.vector - pa.translation.vector).norm();
                let jump = turn / dt > g.max_turn_rate_dps || moved / dt > g.max_speed_mps;
                if jump {
                    notes[i].push(format!(
                        "pose jumps {turn:.2}° and {moved:.2} m from the frame before; attitude history restarts"
                    ));
                }
                jump
            }
            _ => true,
        };
        segment[i] = segment[i - 1] + usize::from(jumped);
    }
    segment
}

/// The IMU estimate of frame `i`, its platform acceleration from the neighbouring poses of the
/// same segment (central where it can, one-sided at a segment's ends).
fn imu_estimate(
    frames: &[FrameInputs],
    segment: &[usize],
    i: usize,
    profile: &Profile,
    notes: &mut Vec<String>,
) -> Option<UpEstimate> {
    let force = frames[i].imu.as_ref()?;
    let same = |j: usize| j < frames.len() && segment[j] == segment[i] && frames[j].world_from_sensor.is_some();
    let triple = if i >= 1 && same(i - 1) && same(i + 1) {
        Some([i - 1, i, i + 1])
    } else if same(i + 1) && same(i + 2) {
        Some([i, i + 1, i + 2])
    } else if i >= 2 && same(i - 1) && same(i - 2) {
        Some([i - 2, i - 1, i])
    } else {
        None
    };
    let accel = match (&frames[i].world_from_sensor, triple) {
        (Some(pose), Some(t)) => {
            let at = |k: usize| {
                (
                    frames[t[k]].world_from_sensor.as_ref().expect("checked by same()"),
                    frames[t[k]].timestamp_micros,
                )
            };
            platform_acceleration([at(0), at(1), at(2)]).map(|a| pose.rotation.inverse() * a)
        }
        _ => None,
    };
    if accel.is_none() && profile.gravity.pose != PoseFrame::None {
        notes.push("platform acceleration unknown (no neighbouring poses): IMU estimate widened".to_string());
    }
    up_from_specific_force(force, accel, &profile.gravity.imu_params())
}

/// One frame's normalization from its own inputs alone (no neighbours' poses or IMU): what
/// detectors trained in the normalized frame see before the sequence's estimate exists (within
/// ~1.5° of it).
pub fn normalize_frame(inputs: &FrameInputs, profile: &Profile) -> Normalization {
    Normalization {
        normalized_from_sensor: normalize_sequence(std::slice::from_ref(inputs), profile)[0].normalized_from_sensor,
    }
}

/// Every frame's normalization under `profile`. Never fails: a frame whose inputs are missing
/// gets the nearest estimate carried by the pose, or the mounting, with a lower confidence and a
/// note saying so.
pub fn normalize_sequence(frames: &[FrameInputs], profile: &Profile) -> Vec<FrameNormalization> {
    let g = &profile.gravity;
    let n = frames.len();
    let mut notes: Vec<Vec<String>> = frames.iter().map(|f| f.notes.clone()).collect();
    let segment = pose_segments(frames, profile, &mut notes);
    let imu: Vec<Option<UpEstimate>> = (0..n)
        .map(|i| imu_estimate(frames, &segment, i, profile, &mut notes[i]))
        .collect();
    let ground: Vec<Option<UpEstimate>> = frames.iter().map(|f| f.ground.as_ref().map(|g| g.up)).collect();
    let pose: Vec<Option<UpEstimate>> = frames
        .iter()
        .map(|f| {
            let method = if g.pose == PoseFrame::Absolute {
                GravityMethod::Pose
            } else {
                GravityMethod::Pose3eed
            };
            f.world_from_sensor
                .map(|p| UpEstimate::new(up_from_pose(&p), g.pose_sigma_deg.to_radians(), method))
        })
        .collect();
    let chosen: Vec<Option<(UpEstimate, Vec<GravityMethod>)>> = match g.method {
        GravityMethod::Pose | GravityMethod::Pose3eed => pose.iter().map(|e| e.map(|e| (e, vec![e.method]))).collect(),
        GravityMethod::Imu => imu.iter().map(|e| e.map(|e| (e, vec![GravityMethod::Imu]))).collect(),
        GravityMethod::Ground | GravityMethod::Mounting => ground
            .iter()
            .map(|e| e.map(|e| (e, vec![GravityMethod::Ground])))
            .collect(),
        GravityMethod::Fused => fused(frames, &segment, &pose, &imu, &ground, profile),
    };
    let ups = fill_missing(frames, &segment, chosen, profile, &mut notes);
    let heights = sensor_heights(frames, &segment, &ups, profile, &mut notes);
    ups.into_iter()
        .zip(heights)
        .zip(notes)
        .enumerate()
        .map(|(i, (((up, inputs), height), mut notes))| {
            let pose_z = frames[i].world_from_sensor.map(|p| p.translation.vector.z);
            let offset = altitude_offset(&profile.altitude, pose_z, height).unwrap_or_else(|| {
                notes.push("altitude rule has nothing to go on: no offset".to_string());
                0.0
            });
            FrameNormalization {
                confidence: 1.0 / (1.0 + (up.sigma_rad / HALF_CONFIDENCE_SIGMA_RAD).powi(2)),
                normalized_from_sensor: normalized_from_sensor(&up.up, offset),
                up,
                inputs,
                altitude_offset_m: offset,
                sensor_height_m: height,
                notes,
            }
        })
        .collect()
}

/// The fused estimator. With an absolute pose: per frame, pose, IMU and ground combined by
/// inverse variance. Without a pose: per frame, IMU and ground combined. With a relative pose:
/// per segment and estimator, the estimates taken into the world frame and averaged over
/// ±`smoothing_s`, those more than max(4 × the window's scatter, 0.5°) from that mean dropped
/// and the mean taken again; each estimator's mean has sigma² = random² / count + floor² (random:
/// the window's scatter from 5 estimates on, their own sigmas before), the
/// floor being its systematic part that no averaging removes (IMU misalignment, ground slope);
/// the means are combined by inverse variance and brought back by each frame's pose.
fn fused(
    frames: &[FrameInputs],
    segment: &[usize],
    pose: &[Option<UpEstimate>],
    imu: &[Option<UpEstimate>],
    ground: &[Option<UpEstimate>],
    profile: &Profile,
) -> Vec<Option<(UpEstimate, Vec<GravityMethod>)>> {
    let g = &profile.gravity;
    let per_frame = |i: usize, with_pose: bool| {
        let items: Vec<UpEstimate> = [if with_pose { pose[i] } else { None }, imu[i], ground[i]]
            .into_iter()
            .flatten()
            .collect();
        combine(&items)
    };
    match g.pose {
        PoseFrame::Absolute => (0..frames.len()).map(|i| per_frame(i, true)).collect(),
        PoseFrame::None => (0..frames.len()).map(|i| per_frame(i, false)).collect(),
        PoseFrame::Relative => {
            let window = (g.smoothing_s * 1e6) as i64;
            let in_window = |i: usize, j: usize| {
                segment[i] == segment[j] && (frames[i].timestamp_micros - frames[j].timestamp_micros).abs() <= window
            };
            let blocks: Vec<(GravityMethod, f64, Vec<Option<WindowStats>>)> = [
                (GravityMethod::Imu, imu, g.imu_params().floor_rad),
                (GravityMethod::Ground, ground, g.ground_params().slope_sigma_rad),
            ]
            .into_iter()
            .map(|(method, estimates, floor)| {
                let items: Vec<WorldItem> = (0..frames.len())
                    .filter_map(|i| {
                        let (p, e) = (frames[i].world_from_sensor.as_ref()?, estimates[i]?);
                        Some(WorldItem {
                            frame: i,
                            up: p.rotation * e.up.into_inner(),
                            random_var: (e.sigma_rad.powi(2) - floor * floor).max(0.0),
                        })
                    })
                    .collect();
                let first = window_stats(frames.len(), &items, &in_window);
                let kept: Vec<WorldItem> = items
                    .into_iter()
                    .filter(|it| {
                        first[it.frame].as_ref().is_none_or(|st| {
                            angle_between(&it.up, &st.mean) <= (4.0 * st.scatter_rad).max(0.5f64.to_radians())
                        })
                    })
                    .collect();
                (method, floor, window_stats(frames.len(), &kept, &in_window))
            })
            .collect();
            (0..frames.len())
                .map(|i| {
                    let p = frames[i].world_from_sensor?;
                    let mut methods = vec![GravityMethod::Pose3eed];
                    let (mut sum, mut weight) = (Vector3::zeros(), 0.0);
                    for (method, floor, stats) in &blocks {
                        let Some(st) = &stats[i] else { continue };
                        // The window's own scatter once it has enough estimates to show it
                        // (a bounce that only changes the force's length does not tilt).
                        let random = if st.count >= MIN_FOR_SCATTER {
                            st.scatter_rad.powi(2)
                        } else {
                            st.mean_random_var
                        };
                        let w = 1.0 / (random / st.count as f64 + floor * floor).max(1e-12);
                        sum += st.mean.into_inner() * w;
                        weight += w;
                        methods.push(*method);
                    }
                    let mean = sum.try_normalize(1e-12)?;
                    methods.sort();
                    let up = Unit::new_normalize(p.rotation.inverse() * mean);
                    Some((
                        UpEstimate::new(up, (1.0 / weight).sqrt(), GravityMethod::Fused),
                        methods,
                    ))
                })
                .collect()
        }
    }
}

/// Fewest estimates in a window for their scatter to stand for their random error.
const MIN_FOR_SCATTER: usize = 5;

/// One estimate taken into the world frame.
struct WorldItem {
    frame: usize,
    up: Vector3<f64>,
    /// Its variance less the estimator's floor (rad²).
    random_var: f64,
}

/// The estimates of one estimator in one frame's window.
struct WindowStats {
    /// Their mean direction.
    mean: Unit<Vector3<f64>>,
    /// How many.
    count: usize,
    /// Their RMS angle from the mean (rad), from the mean resultant length `R`: √(2(1 − R)).
    scatter_rad: f64,
    /// The mean of their own random variances (rad²).
    mean_random_var: f64,
}

/// For every frame, the statistics of the items whose frame is in its window. Windows are
/// contiguous runs of frames moving forward with the frame (times increase), so prefix sums and
/// two pointers do it in O(n).
fn window_stats(
    frames: usize,
    items: &[WorldItem],
    in_window: &dyn Fn(usize, usize) -> bool,
) -> Vec<Option<WindowStats>> {
    // Per frame: (Σ up, count, Σ random variance), then prefix sums.
    let mut prefix: Vec<(Vector3<f64>, usize, f64)> = vec![(Vector3::zeros(), 0, 0.0); frames + 1];
    for it in items {
        let slot = &mut prefix[it.frame + 1];
        slot.0 += it.up;
        slot.1 += 1;
        slot.2 += it.random_var;
    }
    for k in 1..=frames {
        let (s, c, v) = prefix[k - 1];
        prefix[k].0 += s;
        prefix[k].1 += c;
        prefix[k].2 += v;
    }
    let (mut lo, mut hi) = (0usize, 0usize);
    (0..frames)
        .map(|i| {
            while lo < i && !in_window(i, lo) {
                lo += 1;
            }
            hi = hi.max(i + 1);
            while hi < frames && in_window(i, hi) {
                hi += 1;
            }
            let sum = prefix[hi].0 - prefix[lo].0;
            let count = prefix[hi].1 - prefix[lo].1;
            if count == 0 {
                return None;
            }
            let resultant = (sum.norm() / count as f64).min(1.0);
            Some(WindowStats {
                mean: Unit::try_new(sum, 1e-12)?,
                count,
                scatter_rad: (2.0 * (1.0 - resultant)).max(0.0).sqrt(),
                mean_random_var: (prefix[hi].2 - prefix[lo].2) / count as f64,
            })
        })
        .collect()
}

/// Estimates of one frame combined by inverse variance.
fn combine(items: &[UpEstimate]) -> Option<(UpEstimate, Vec<GravityMethod>)> {
    let (up, weight) = weighted_mean(items.iter().map(|e| (e.up.into_inner(), 1.0 / e.sigma_rad.powi(2))))?;
    let mut methods: Vec<GravityMethod> = items.iter().map(|e| e.method).collect();
    methods.sort();
    methods.dedup();
    Some((
        UpEstimate::new(up, (1.0 / weight).sqrt(), GravityMethod::Fused),
        methods,
    ))
}

/// Frames without an estimate take the nearest one of their segment carried by the pose (sigma
/// grown by 0.1° per frame apart), or else the mounting.
fn fill_missing(
    frames: &[FrameInputs],
    segment: &[usize],
    chosen: Vec<Option<(UpEstimate, Vec<GravityMethod>)>>,
    profile: &Profile,
    notes: &mut [Vec<String>],
) -> Vec<(UpEstimate, Vec<GravityMethod>)> {
    let method = profile.gravity.method;
    (0..frames.len())
        .map(|i| {
            if let Some(c) = &chosen[i] {
                return c.clone();
            }
            let nearest = (0..frames.len())
                .filter(|&j| chosen[j].is_some() && segment[j] == segment[i])
                .min_by_key(|&j| j.abs_diff(i));
            if let (Some(j), Some(pi)) = (nearest, &frames[i].world_from_sensor)
                && let (Some((e, inputs)), Some(pj)) = (&chosen[j], &frames[j].world_from_sensor)
            {
                notes[i].push(format!("no {method} estimate: carried from frame {j} by the pose"));
                let up = Unit::new_normalize(pi.rotation.inverse() * (pj.rotation * e.up.into_inner()));
                let sigma = e.sigma_rad + 0.1f64.to_radians() * j.abs_diff(i) as f64;
                return (UpEstimate::new(up, sigma, e.method), inputs.clone());
            }
            notes[i].push(format!("no {method} estimate: the nominal mounting is used"));
            (
                UpEstimate::new(
                    profile.mounting.nominal_up(),
                    MOUNTING_SIGMA_RAD,
                    GravityMethod::Mounting,
                ),
                vec![GravityMethod::Mounting],
            )
        })
        .collect()
}

/// Radius around the point under the sensor within which ground samples give its height (m).
const UNDER_SENSOR_RADIUS_M: f64 = 3.0;

/// The note of a frame whose height is extrapolated from its own sweep's ground, not seen under it.
pub const EXTRAPOLATED_HEIGHT: &str =
    "ground under the sensor not seen: height extrapolated from the sweep's nearest ground";

/// Farthest a frame outside the smoothing window may have seen the ground under the sensor from
/// for its samples to count (m): farther returns are blurred by the sweep's own motion (M3ED
/// sweeps are not de-skewed).
const OUTSIDE_MAX_RANGE_M: f64 = 15.0;

/// Fewest ground samples under the sensor for a height from them.
const MIN_SAMPLES_UNDER: usize = 3;

/// Ground samples nearest the point under the sensor that the local plane is fitted to.
const LOCAL_SAMPLES: usize = 12;

/// The sensor's height above the ground under it from a plane fitted to the sweep's ground samples
/// nearest the point under the sensor (rather than the whole sweep's plane): height = a of
/// `h = a + b·s + c·t` over those samples' horizontal coordinates `(s, t)` along `up`. `None`
/// when too few samples or a degenerate spread.
fn local_height(fit: &GroundFit, up: &Unit<Vector3<f64>>) -> Option<f64> {
    let u = up.into_inner();
    let helper = if u.x.abs() < 0.9 { Vector3::x() } else { Vector3::y() };
    let e1 = u.cross(&helper).normalize();
    let e2 = u.cross(&e1);
    let mut near: Vec<(f64, f64, f64, f64)> = fit
        .samples
        .iter()
        .map(|q| {
            let v = Vector3::new(f64::from(q[0]), f64::from(q[1]), f64::from(q[2]));
            let (s, t) = (e1.dot(&v), e2.dot(&v));
            (s * s + t * t, s, t, -u.dot(&v))
        })
        .collect();
    if near.len() < LOCAL_SAMPLES {
        return None;
    }
    near.sort_by(|a, b| a.0.total_cmp(&b.0));
    near.truncate(LOCAL_SAMPLES);
    // Least squares for (a, b, c): the normal equations of [1 s t] · x = h.
    let mut ata = nalgebra::Matrix3::zeros();
    let mut atb = Vector3::zeros();
    for &(_, s, t, h) in &near {
        let row = Vector3::new(1.0, s, t);
        ata += row * row.transpose();
        atb += row * h;
    }
    let x = ata.try_inverse()? * atb;
    x[0].is_finite().then_some(x[0])
}

/// The sensor's height above the ground along each frame's up: with a pose, the median height
/// over the ground samples of the segment's frames within the smoothing window that lie within
/// 3 m of the point under the sensor (a drone flies over ground it saw ahead of it), or of the
/// frames nearest in time outside the window that saw it from within 15 m (with a note); else the
/// frame's own plane along up; else carried from the nearest fitted frame by the pose's rise.
fn sensor_heights(
    frames: &[FrameInputs],
    segment: &[usize],
    ups: &[(UpEstimate, Vec<GravityMethod>)],
    profile: &Profile,
    notes: &mut [Vec<String>],
) -> Vec<Option<f64>> {
    let own: Vec<Option<f64>> = frames
        .iter()
        .zip(ups)
        .map(|(f, (u, _))| {
            let fit = f.ground.as_ref()?;
            let along = fit.up.up.dot(&u.up);
            (along > 0.5).then(|| local_height(fit, &u.up).unwrap_or(fit.height_m / along))
        })
        .collect();
    if !matches!(profile.altitude, AltitudeRule::Ground { .. }) {
        return own;
    }
    let window = (profile.gravity.smoothing_s * 1e6) as i64;
    // Heights above frame j's ground samples seen from within `max_range` that lie within the
    // radius of the point under frame i's sensor.
    let heights_under = |j: usize, pi: &Isometry3<f64>, up_world: &Vector3<f64>, max_range: f64, out: &mut Vec<f64>| {
        let (Some(pj), Some(fit)) = (&frames[j].world_from_sensor, &frames[j].ground) else {
            return;
        };
        for q in &fit.samples {
            let v = nalgebra::Point3::new(f64::from(q[0]), f64::from(q[1]), f64::from(q[2]));
            if v.coords.norm() > max_range {
                continue;
            }
            let d = (pj * v).coords - pi.translation.vector;
            let h = -up_world.dot(&d);
            if d.norm_squared() - h * h < UNDER_SENSOR_RADIUS_M * UNDER_SENSOR_RADIUS_M {
                out.push(h);
            }
        }
    };
    let under: Vec<Option<f64>> = (0..frames.len())
        .map(|i| {
            let pi = frames[i].world_from_sensor.as_ref()?;
            let up_world = pi.rotation * ups[i].0.up.into_inner();
            let dt = |j: usize| (frames[j].timestamp_micros - frames[i].timestamp_micros).abs();
            let mut heights: Vec<f64> = Vec::new();
            for j in (0..frames.len()).filter(|&j| segment[j] == segment[i] && dt(j) <= window) {
                heights_under(j, pi, &up_world, f64::INFINITY, &mut heights);
            }
            if heights.len() < MIN_SAMPLES_UNDER {
                // Ground seen from near by outside the window (a drone hovering over the pad it
                // took off from): the frames nearest in time that saw it.
                let mut outside: Vec<usize> = (0..frames.len())
                    .filter(|&j| segment[j] == segment[i] && dt(j) > window)
                    .collect();
                outside.sort_by_key(|&j| dt(j));
                for j in outside {
                    heights_under(j, pi, &up_world, OUTSIDE_MAX_RANGE_M, &mut heights);
                    if heights.len() >= MIN_SAMPLES_UNDER {
                        notes[i].push(format!(
                            "ground under the sensor last seen {:.1} s away (frame {j})",
                            dt(j) as f64 * 1e-6
                        ));
                        break;
                    }
                }
            }
            (heights.len() >= MIN_SAMPLES_UNDER).then(|| {
                heights.sort_by(f64::total_cmp);
                heights[heights.len() / 2]
            })
        })
        .collect();
    (0..frames.len())
        .map(|i| {
            if let Some(h) = under[i] {
                return Some(h);
            }
            if let Some(h) = own[i] {
                notes[i].push(EXTRAPOLATED_HEIGHT.to_string());
                return Some(h);
            }
            let nearest = (0..frames.len())
                .filter(|&j| own[j].is_some() && segment[j] == segment[i])
                .min_by_key(|&j| j.abs_diff(i));
            match (nearest, &frames[i].world_from_sensor) {
                (Some(j), Some(pi)) => {
                    let pj = frames[j].world_from_sensor.as_ref()?;
                    let up_world = pi.rotation * ups[i].0.up.into_inner();
                    let rise = up_world.dot(&(pi.translation.vector - pj.translation.vector));
                    notes[i].push(format!("no ground fit: height carried from frame {j} by the pose"));
                    Some(own[j]? + rise)
                }
                _ => {
                    notes[i].push("no ground fit: the mounting height is used".to_string());
                    Some(profile.mounting.height_m)
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ImuSample;
    use crate::geometry::pose::isometry_from_euler;
    use crate::normalize::ground::GroundFit;
    use crate::normalize::profile::Profile;

    /// A platform rocking ±3° while driving at 2 m/s and turning, started 4° nose up: per frame
    /// the world (gravity-aligned) pose and the log's pose relative to the first one.
    fn motion(n: usize) -> Vec<(Isometry3<f64>, Isometry3<f64>)> {
        let world: Vec<Isometry3<f64>> = (0..n)
            .map(|i| {
                let t = i as f64 * 0.1;
                let pitch = -4f64.to_radians() * (1.0 - (t / 3.0).min(1.0)) + 3f64.to_radians() * (1.3 * t).sin();
                let roll = 3f64.to_radians() * (0.7 * t).cos();
                isometry_from_euler(Vector3::new(2.0 * t, 0.1 * t * t, 0.0), 0.2 * t, pitch, roll)
            })
            .collect();
        world.iter().map(|w| (*w, world[0].inverse() * w)).collect()
    }

    fn inputs(motion: &[(Isometry3<f64>, Isometry3<f64>)]) -> Vec<FrameInputs> {
        motion
            .iter()
            .enumerate()
            .map(|(i, (world, relative))| {
                let t0 = i as i64 * 100_000;
                let up = world.rotation.inverse() * Vector3::z();
                // The platform's acceleration (0, 0.2, 0) m/s² in the world, seen in the sensor.
                let accel = world.rotation.inverse() * Vector3::new(0.0, 0.2, 0.0);
                let samples: Vec<ImuSample> = (0..40)
                    .map(|k| ImuSample {
                        timestamp_micros: t0 + k * 2500,
                        accel_mps2: up * 9.80665 + accel,
                        gyro_radps: Vector3::zeros(),
                    })
                    .collect();
                // The ground leans 2° (a slope) and says so through its sigma.
                let across = Unit::new_normalize(up.cross(&Vector3::x()));
                let lean = nalgebra::Rotation3::from_axis_angle(&across, 2f64.to_radians());
                FrameInputs {
                    timestamp_micros: t0,
                    world_from_sensor: Some(*relative),
                    imu: super::sweep_specific_force(&samples),
                    ground: Some(GroundFit {
                        up: UpEstimate::new(
                            Unit::new_normalize(lean * up),
                            1.5f64.to_radians(),
                            GravityMethod::Ground,
                        ),
                        height_m: 1.8,
                        inliers: 500,
                        candidates: 600,
                        rms_m: 0.02,
                        samples: Vec::new(),
                    }),
                    notes: Vec::new(),
                }
            })
            .collect()
    }

    fn profile(method: GravityMethod) -> Profile {
        let mut p = Profile::load("m3ed_quadruped").unwrap().profile;
        p.gravity.method = method;
        p
    }

    fn tilt_deg(n: &FrameNormalization, world: &Isometry3<f64>) -> f64 {
        angle_between(&n.up.up, &(world.rotation.inverse() * Vector3::z())).to_degrees()
    }

    #[test]
    fn fused_finds_gravity_where_the_first_pose_is_tilted_and_pose_3eed_is_off_by_it() {
        let m = motion(60);
        let frames = inputs(&m);
        let fused = normalize_sequence(&frames, &profile(GravityMethod::Fused));
        let first_tilt = angle_between(&(m[0].0.rotation.inverse() * Vector3::z()), &Vector3::z()).to_degrees();
        for (n, (world, _)) in fused.iter().zip(&m) {
            assert!(tilt_deg(n, world) < 0.05, "{}", tilt_deg(n, world));
            assert!(n.confidence > 0.9);
            assert!(n.inputs.contains(&GravityMethod::Imu) && n.inputs.contains(&GravityMethod::Ground));
        }
        let virtual_pose = normalize_sequence(&frames, &profile(GravityMethod::Pose3eed));
        for (n, (world, _)) in virtual_pose.iter().zip(&m) {
            assert!(
                (tilt_deg(n, world) - first_tilt).abs() < 0.01,
                "{} vs {first_tilt}",
                tilt_deg(n, world)
            );
        }
        // The ground alone carries its 2° lean; the IMU alone has the acceleration removed.
        let ground = normalize_sequence(&frames, &profile(GravityMethod::Ground));
        assert!((tilt_deg(&ground[30], &m[30].0) - 2.0).abs() < 1e-6);
        let imu = normalize_sequence(&frames, &profile(GravityMethod::Imu));
        assert!(tilt_deg(&imu[30], &m[30].0) < 0.01, "{}", tilt_deg(&imu[30], &m[30].0));
    }

    #[test]
    fn degraded_inputs_lower_confidence_and_leave_notes_never_nan() {
        let m = motion(60);
        let mut frames = inputs(&m);
        // 10 % NaN IMU rows everywhere, a 1 s gap (frames 20..30 without samples), a sweep
        // without ground, and a pose that jumps 30° and 8 m at frame 45 (a relocalization).
        for f in &mut frames {
            if let Some(imu) = &mut f.imu {
                imu.dropped = 4;
                imu.samples = 36;
            }
        }
        for f in &mut frames[20..30] {
            f.imu = None;
            f.notes.push("no IMU samples in the sweep".into());
        }
        frames[25].ground = None;
        let jump = isometry_from_euler(Vector3::new(8.0, 0.0, 0.0), 30f64.to_radians(), 0.0, 0.0);
        for f in &mut frames[45..] {
            f.world_from_sensor = f.world_from_sensor.map(|p| jump * p);
        }
        let out = normalize_sequence(&frames, &profile(GravityMethod::Fused));
        for (i, n) in out.iter().enumerate() {
            assert!(
                n.normalized_from_sensor.to_homogeneous().iter().all(|v| v.is_finite()),
                "frame {i}"
            );
            assert!(n.confidence.is_finite() && n.altitude_offset_m.is_finite());
        }
        assert!(
            out[45].notes.iter().any(|m| m.contains("pose jumps")),
            "{:?}",
            out[45].notes
        );
        assert!(out[25].notes.iter().any(|m| m.contains("IMU")), "{:?}", out[25].notes);
        // The jump does not tilt the estimate: each side of it is averaged on its own.
        for i in [10, 25, 44, 45, 59] {
            assert!(
                tilt_deg(&out[i], &m[i].0) < 0.1,
                "frame {i}: {}",
                tilt_deg(&out[i], &m[i].0)
            );
        }
        // IMU alone: the gap frames have nothing and take the nearest estimate, weaker.
        let imu = normalize_sequence(&frames, &profile(GravityMethod::Imu));
        assert!(
            imu[25].confidence < imu[10].confidence,
            "{} vs {}",
            imu[25].confidence,
            imu[10].confidence
        );
        assert!(
            imu[25].notes.iter().any(|m| m.contains("carried from frame")),
            "{:?}",
            imu[25].notes
        );
        // Nothing at all: the mounting, with a note and a low confidence.
        let mut bare = frames.clone();
        for f in &mut bare {
            f.imu = None;
            f.ground = None;
            f.world_from_sensor = None;
        }
        let none = normalize_sequence(&bare, &profile(GravityMethod::Fused));
        assert_eq!(none[0].up.method, GravityMethod::Mounting);
        assert!(none[0].confidence < 0.05);
        assert!(none[0].notes.iter().any(|m| m.contains("mounting")));
    }

    #[test]
    fn the_local_plane_extrapolates_a_sloping_ground_to_the_point_under_the_sensor() {
        // Ground seen only 8–30 m ahead, rising 5 cm per metre away from the sensor, which is
        // 20 m above the ground under it: the nearest samples' plane puts it there exactly.
        let samples: Vec<[f32; 3]> = (0..12)
            .flat_map(|i| (-3..=3).map(move |j| (8.0 + 2.0 * i as f64, 4.0 * j as f64)))
            .map(|(x, y)| [x as f32, y as f32, (-20.0 + 0.05 * x) as f32])
            .collect();
        let fit = GroundFit {
            up: UpEstimate::new(Vector3::z_axis(), 0.01, GravityMethod::Ground),
            height_m: 19.0,
            inliers: samples.len(),
            candidates: samples.len(),
            rms_m: 0.0,
            samples,
        };
        let h = super::local_height(&fit, &Vector3::z_axis()).unwrap();
        assert!((h - 20.0).abs() < 1e-4, "{h}");
        let few = GroundFit {
            samples: fit.samples[..5].to_vec(),
            ..fit
        };
        assert!(super::local_height(&few, &Vector3::z_axis()).is_none());
    }

    #[test]
    fn the_ground_rule_puts_the_ground_at_the_canonical_depth() {
        let m = motion(10);
        let frames = inputs(&m);
        let out = normalize_sequence(&frames, &profile(GravityMethod::Fused));
        // Quadruped profile: ground rule with 1.8 m; the fits say the sensor is 1.8 m up along
        // the ground's normal, 2° from up.
        let expected = 1.8 / 2f64.to_radians().cos() - 1.8;
        assert!(
            (out[3].altitude_offset_m - expected).abs() < 1e-3,
            "{}",
            out[3].altitude_offset_m
        );
        assert!(out[3].notes.iter().any(|m| m == EXTRAPOLATED_HEIGHT));
    }

    #[test]
    fn a_hovering_drone_takes_its_height_from_the_pad_it_saw_before_the_window() {
        // Level and at rest on flat ground (z = 0) for 2 s, sensor 0.35 m up, seeing its pad;
        // then it climbs to 20 m by 8 s and hovers there for 22 s, seeing only a ramp that rises
        // 5 cm per metre from 10 m ahead (whose plane, extrapolated, would put it 20.5 m up).
        let height = |i: usize| 0.35 + (20.0 - 0.35) * ((i as f64 - 20.0) / 60.0).clamp(0.0, 1.0);
        let frames: Vec<FrameInputs> = (0..300)
            .map(|i| {
                let h = height(i);
                let samples: Vec<[f32; 3]> = if i < 20 {
                    (-2..=2)
                        .flat_map(|x| (-2..=2).map(move |y| [x as f32, y as f32, -h as f32]))
                        .collect()
                } else {
                    (0..13)
                        .flat_map(|k| (-2..=2).map(move |j| (15.0 + 2.0 * k as f64, 4.0 * j as f64)))
                        .map(|(x, y)| [x as f32, y as f32, (-h + 0.05 * (x - 10.0)) as f32])
                        .collect()
                };
                let t0 = i as i64 * 100_000;
                let imu: Vec<ImuSample> = (0..40)
                    .map(|k| ImuSample {
                        timestamp_micros: t0 + k * 2500,
                        accel_mps2: Vector3::z() * 9.80665,
                        gyro_radps: Vector3::zeros(),
                    })
                    .collect();
                FrameInputs {
                    timestamp_micros: t0,
                    world_from_sensor: Some(Isometry3::translation(0.0, 0.0, h - 0.35)),
                    imu: super::sweep_specific_force(&imu),
                    ground: Some(GroundFit {
                        up: UpEstimate::new(Vector3::z_axis(), 0.01, GravityMethod::Ground),
                        height_m: h,
                        inliers: samples.len(),
                        candidates: samples.len(),
                        rms_m: 0.0,
                        samples,
                    }),
                    notes: Vec::new(),
                }
            })
            .collect();
        let mut p = Profile::load("m3ed_drone").unwrap().profile;
        p.mounting.pitch_down_deg = 0.0;
        assert_eq!(p.gravity.smoothing_s, 10.0);
        let out = normalize_sequence(&frames, &p);
        for (i, n) in out.iter().enumerate() {
            let h = n.sensor_height_m.unwrap();
            assert!((h - height(i)).abs() < 1e-4, "frame {i}: {h} against {}", height(i));
        }
        // Within 10 s of the pad frames, the window holds them; past it, the note says where from.
        assert!(
            !out[100]
                .notes
                .iter()
                .any(|m| m.starts_with("ground under the sensor last seen"))
        );
        assert!(
            out[290]
                .notes
                .iter()
                .any(|m| m == "ground under the sensor last seen 27.1 s away (frame 19)"),
            "{:?}",
            out[290].notes
        );
    }
}
