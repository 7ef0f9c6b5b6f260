//! Tracking and offline refinement on hand-built sequences whose truth is known: gap filling,
//! crossing targets, heading flips, static propagation, pruning, ego-motion compensation,
//! extension on points evidence, and the forward-only baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::f64::consts::PI;

use boxlayer::frame::ObjectClass;
use boxlayer::geometry::{Box3, wrap_angle};
use boxlayer::track::{BoxOrigin, Consolidation, MotionState, TrackConfig, TrackError, TrackInputBox, TrackMode};
use boxlayer::{PointCloud, geometry::pose::isometry_from_euler};
use nalgebra::{Isometry3, Vector3};

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

const PERIOD_MICROS: i64 = 100_000;

/// A hand-built sweep: the tracker's input and, optionally, its points.
#[derive(Debug, Clone)]
struct TestFrame {
    timestamp_micros: i64,
    world_from_sensor: Isometry3<f64>,
    boxes: Vec<TrackInputBox>,
    points_in_sensor: Option<PointCloud>,
}

/// Tracks the hand-built frames, their points given through the tracker's points provider.
fn consolidate(frames: &[TestFrame], config: &TrackConfig) -> Result<Consolidation, TrackError> {
    let track: Vec<boxlayer::track::TrackFrame> = frames
        .iter()
        .map(|f| boxlayer::track::TrackFrame {
            timestamp_micros: f.timestamp_micros,
            world_from_sensor: f.world_from_sensor,
            boxes: f.boxes.clone(),
        })
        .collect();
    let points: Vec<Option<std::sync::Arc<PointCloud>>> = frames
        .iter()
        .map(|f| f.points_in_sensor.clone().map(std::sync::Arc::new))
        .collect();
    boxlayer::track::consolidate(&track, &points, config)
}

/// A frame at index `i` seen from `world_from_sensor`, with boxes given in the world frame.
fn frame(
    i: usize,
    world_from_sensor: Isometry3<f64>,
    boxes_in_world: &[(Box3, ObjectClass, f64)],
    points_in_world: Option<&[[f64; 3]]>,
) -> TestFrame {
    let sensor_from_world = world_from_sensor.inverse();
    let points_in_sensor = points_in_world.map(|pts| {
        let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
        for p in pts {
            let q = sensor_from_world * nalgebra::Point3::new(p[0], p[1], p[2]);
            x.push(q.x as f32);
            y.push(q.y as f32);
            z.push(q.z as f32);
        }
        let n = x.len();
        PointCloud::from_columns(x, y, z, vec![0.0; n]).unwrap()
    });
    TestFrame {
        timestamp_micros: 1_000_000 + i as i64 * PERIOD_MICROS,
        world_from_sensor,
        boxes: boxes_in_world
            .iter()
            .map(|(b, class, score)| TrackInputBox {
                box3: b.transformed(&sensor_from_world),
                class: *class,
                score: *score,
                votes: 3,
            })
            .collect(),
        points_in_sensor,
    }
}

/// A 4.5 × 1.9 × 1.6 m car centred at (x, y, 0.8) with heading `yaw`.
fn car(x: f64, y: f64, yaw: f64) -> Box3 {
    Box3::new(x, y, 0.8, 4.5, 1.9, 1.6, yaw)
}

/// 40 points filling the lower 80 % of a box (no ground points), plus a ring of ground points
/// around it at z = 0 that must never count as evidence.
fn points_of(b: &Box3) -> Vec<[f64; 3]> {
    let mut out = Vec::new();
    let (s, c) = b.yaw.sin_cos();
    for i in 0..5 {
        for j in 0..4 {
            for k in 0..2 {
                let u = (i as f64 / 4.0 - 0.5) * 0.8 * b.l;
                let v = (j as f64 / 3.0 - 0.5) * 0.8 * b.w;
                let w = (k as f64 - 0.5) * 0.5 * b.h;
                out.push([b.x + c * u - s * v, b.y + s * u + c * v, b.z + w]);
            }
        }
    }
    for a in 0..24 {
        let t = a as f64 * PI / 12.0;
        out.push([b.x + 1.5 * t.cos(), b.y + 1.0 * t.sin(), 0.0]);
    }
    out
}

/// The frames of the output boxes of one origin, in output order.
fn frames_of(out: &Consolidation, origin: BoxOrigin) -> Vec<usize> {
    out.boxes
        .iter()
        .filter(|b| b.origin == origin)
        .map(|b| b.frame)
        .collect()
}

fn ids(out: &Consolidation) -> BTreeSet<u32> {
    out.boxes.iter().map(|b| b.track_id).collect()
}

/// A car at 10 m/s seen at 10 Hz for 100 frames, 30 % of its detections missing (never the
/// first or last), centre noise σ = 0.1 m: one track, a box in every frame, and every filled
/// box within 0.2 m of the truth.
#[test]
fn constant_velocity_target_with_missing_detections_is_one_track_with_gaps_filled() {
    let mut rng = Rng(7);
    let truth = |i: usize| car(5.0 + 1.0 * i as f64, 2.0 + 0.3 * i as f64, 0.3f64.atan());
    let n = 100;
    let mut missing = BTreeSet::new();
    while missing.len() < 30 {
        let k = 1 + (rng.uniform(0.0, 1.0) * (n - 2) as f64) as usize;
        missing.insert(k);
    }
    let frames: Vec<TestFrame> = (0..n)
        .map(|i| {
            let mut b = truth(i);
            b.x += rng.normal(0.1);
            b.y += rng.normal(0.1);
            b.yaw += rng.normal(0.05);
            let boxes = if missing.contains(&i) {
                vec![]
            } else {
                vec![(b, ObjectClass::Vehicle, 0.8)]
            };
            frame(i, Isometry3::identity(), &boxes, None)
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1, "one track expected, got {:?}", ids(&out));
    assert_eq!(out.boxes.len(), n);
    for b in &out.boxes {
        let t = truth(b.frame);
        let error = (b.box_in_world.x - t.x).hypot(b.box_in_world.y - t.y);
        if missing.contains(&b.frame) {
            assert_eq!(b.origin, BoxOrigin::Interpolated, "frame {}", b.frame);
            assert!(error < 0.2, "frame {}: filled box {error:.3} m from truth", b.frame);
        } else {
            assert_eq!(b.origin, BoxOrigin::Detected);
        }
    }
    assert_eq!(out.tracks[0].motion, Some(MotionState::Dynamic));
}

/// Two cars on perpendicular paths through the same point, 0.1 s apart, with noise: each
/// truth keeps one track id, and the two ids differ.
#[test]
fn crossing_targets_keep_their_ids() {
    let mut rng = Rng(11);
    let n = 60;
    let a = |i: usize| car(-30.0 + 1.0 * i as f64, 0.0, 0.0);
    let b = |i: usize| car(0.0, -29.0 + 1.0 * i as f64, PI / 2.0);
    let frames: Vec<TestFrame> = (0..n)
        .map(|i| {
            let noisy = |mut x: Box3, rng: &mut Rng| {
                x.x += rng.normal(0.1);
                x.y += rng.normal(0.1);
                x
            };
            let boxes = [
                (noisy(a(i), &mut rng), ObjectClass::Vehicle, 0.9),
                (noisy(b(i), &mut rng), ObjectClass::Vehicle, 0.9),
            ];
            frame(i, Isometry3::identity(), &boxes, None)
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    let mut ids_of: [BTreeSet<u32>; 2] = Default::default();
    for i in 0..n {
        for (k, t) in [a(i), b(i)].iter().enumerate() {
            let nearest = out
                .frame_boxes(i)
                .iter()
                .min_by(|p, q| {
                    let d = |x: &Box3| (x.x - t.x).hypot(x.y - t.y);
                    d(&p.box_in_world).total_cmp(&d(&q.box_in_world))
                })
                .unwrap();
            ids_of[k].insert(nearest.track_id);
        }
    }
    assert_eq!(ids_of[0].len(), 1, "{ids_of:?}");
    assert_eq!(ids_of[1].len(), 1, "{ids_of:?}");
    assert_ne!(ids_of[0], ids_of[1]);
}

/// Frames 20–27 report the car pointing backwards (yaw + π): still one track, and every
/// output heading is the true one (the flipped minority is outvoted).
#[test]
fn heading_flip_does_not_break_the_track() {
    let n = 50;
    let yaw: f64 = 2.9;
    let truth = |i: usize| car(0.8 * i as f64 * yaw.cos(), 0.8 * i as f64 * yaw.sin(), yaw);
    let frames: Vec<TestFrame> = (0..n)
        .map(|i| {
            let mut b = truth(i);
            if (20..28).contains(&i) {
                b.yaw = wrap_angle(b.yaw + PI);
            }
            frame(i, Isometry3::identity(), &[(b, ObjectClass::Vehicle, 0.8)], None)
        })
        .collect();
    for config in [TrackConfig::default(), TrackConfig::forward_only_baseline()] {
        let out = consolidate(&frames, &config).unwrap();
        assert_eq!(ids(&out).len(), 1, "{:?}", config.mode);
        if config.mode == TrackMode::Offline {
            assert_eq!(out.boxes.len(), n);
            for b in &out.boxes {
                let e = wrap_angle(b.box_in_world.yaw - yaw).abs();
                assert!(e < 0.05, "frame {}: yaw error {e}", b.frame);
            }
        }
    }
}

/// A parked car detected in frames 0–29 and 40–59 (missed 30–39), then only visible in the
/// points for frames 60–69 and gone after: the missed frames get the fused box, the
/// point-supported frames after the end get it too (extended), nothing after that.
#[test]
fn static_object_is_fused_and_propagated() {
    let mut rng = Rng(3);
    let parked = car(12.0, -4.0, 1.0);
    let frames: Vec<TestFrame> = (0..80)
        .map(|i| {
            let mut b = parked;
            b.x += rng.normal(0.08);
            b.y += rng.normal(0.08);
            b.l += rng.normal(0.1);
            let detected = i < 30 || (40..60).contains(&i);
            let boxes = if detected {
                vec![(b, ObjectClass::Vehicle, 0.7)]
            } else {
                vec![]
            };
            let points = if i < 70 { points_of(&parked) } else { Vec::new() };
            frame(i, Isometry3::identity(), &boxes, Some(&points))
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 1);
    assert_eq!(out.tracks[0].motion, Some(MotionState::Static));
    let frames_out: Vec<usize> = out.boxes.iter().map(|b| b.frame).collect();
    assert_eq!(frames_out, (0..70).collect::<Vec<_>>());
    let fused = out.boxes[0].box_in_world;
    for b in &out.boxes {
        assert_eq!(b.box_in_world, fused, "one world box for a static object");
        let expected = match b.frame {
            30..=39 => BoxOrigin::Interpolated,
            60..=69 => BoxOrigin::Extended,
            _ => BoxOrigin::Detected,
        };
        assert_eq!(b.origin, expected, "frame {}", b.frame);
    }
    assert!((fused.x - parked.x).hypot(fused.y - parked.y) < 0.1);
    assert!((fused.l - parked.l).abs() < 0.1);
}

/// Clutter boxes living one or two frames at score 0.55 are dropped; a short but confident
/// (0.9) two-frame object is kept; a long real track is kept.
#[test]
fn short_low_score_tracks_are_dropped() {
    let mut rng = Rng(5);
    let frames: Vec<TestFrame> = (0..40)
        .map(|i| {
            let mut boxes = vec![(car(0.4 * i as f64, 10.0, 0.0), ObjectClass::Vehicle, 0.8)];
            if i % 5 == 0 || i % 5 == 1 {
                // A clutter box at a fresh place every 5 frames, lasting 2 frames.
                let k = (i / 5) as f64;
                boxes.push((
                    car(-40.0 + 10.0 * k, -20.0 + rng.normal(0.05), 0.0),
                    ObjectClass::Vehicle,
                    0.55,
                ));
            }
            if i == 20 || i == 21 {
                boxes.push((car(30.0, 30.0, 0.0), ObjectClass::Vehicle, 0.9));
            }
            frame(i, Isometry3::identity(), &boxes, None)
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 2, "{:?}", out.tracks);
    assert!(out.boxes.iter().all(|b| b.box_in_world.y > 0.0), "clutter survived");
    // The baseline reports the clutter (AB3DMOT outputs every track during its first min_hits frames).
    let baseline = consolidate(&frames, &TrackConfig::forward_only_baseline()).unwrap();
    assert!(baseline.boxes.iter().any(|b| b.box_in_world.y < 0.0));
}

/// The platform drives at 10 m/s and turns slowly past a parked car: in the sensor frame the
/// car sweeps past, in the world it stands still. One static track whose world box stays put,
/// and whose sensor-frame boxes follow the truth.
#[test]
fn ego_motion_is_compensated() {
    let mut rng = Rng(13);
    let parked = car(40.0, 6.0, 0.2);
    let n = 60;
    let pose = |i: usize| {
        let t = i as f64 * 0.1;
        isometry_from_euler(Vector3::new(10.0 * t, 0.5 * t * t, 0.0), 0.05 * t, 0.02, -0.01)
    };
    let frames: Vec<TestFrame> = (0..n)
        .map(|i| {
            let mut b = parked;
            b.x += rng.normal(0.1);
            b.y += rng.normal(0.1);
            frame(i, pose(i), &[(b, ObjectClass::Vehicle, 0.8)], None)
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 1);
    assert_eq!(out.tracks[0].motion, Some(MotionState::Static));
    assert_eq!(out.boxes.len(), n);
    for b in &out.boxes {
        let expected_in_sensor = parked.transformed(&pose(b.frame).inverse());
        let e = (b.box_in_sensor.x - expected_in_sensor.x).hypot(b.box_in_sensor.y - expected_in_sensor.y);
        assert!(e < 0.15, "frame {}: sensor-frame error {e}", b.frame);
    }
}

/// A car's detections stop at frame 39 but its points stay for 5 more frames: the track is
/// extended on the motion model through exactly those frames, within 0.3 m of the truth.
#[test]
fn dynamic_track_is_extended_while_points_show_it() {
    let truth = |i: usize| car(0.9 * i as f64, 3.0, 0.0);
    let frames: Vec<TestFrame> = (0..60)
        .map(|i| {
            let boxes = if i < 40 {
                vec![(truth(i), ObjectClass::Vehicle, 0.8)]
            } else {
                vec![]
            };
            let points = if i < 45 { points_of(&truth(i)) } else { Vec::new() };
            frame(i, Isometry3::identity(), &boxes, Some(&points))
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 1);
    let extended = frames_of(&out, BoxOrigin::Extended);
    assert_eq!(extended, (40..45).collect::<Vec<_>>());
    for b in &out.boxes {
        let t = truth(b.frame);
        assert!((b.box_in_world.x - t.x).abs() < 0.3, "frame {}", b.frame);
    }
    // Ground points alone are no evidence: with only the ground ring, nothing is extended.
    let ground_only: Vec<TestFrame> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut f = f.clone();
            if i >= 40 {
                let pts: Vec<[f64; 3]> = points_of(&truth(i)).into_iter().filter(|p| p[2] == 0.0).collect();
                f.points_in_sensor = frame(i, Isometry3::identity(), &[], Some(&pts)).points_in_sensor;
            }
            f
        })
        .collect();
    let out = consolidate(&ground_only, &TrackConfig::default()).unwrap();
    assert!(out.boxes.iter().all(|b| b.origin != BoxOrigin::Extended));
}

/// Vehicles get one size for the whole track (the median), pedestrians keep their per-frame
/// sizes.
#[test]
fn rigid_tracks_share_one_size_and_pedestrians_keep_theirs() {
    let mut rng = Rng(17);
    let frames: Vec<TestFrame> = (0..30)
        .map(|i| {
            let mut v = car(i as f64, 0.0, 0.0);
            v.l += rng.normal(0.2);
            let mut p = Box3::new(0.0, 10.0 + 0.14 * i as f64, 0.9, 0.6, 0.6, 1.8, PI / 2.0);
            p.l = 0.5 + 0.02 * i as f64;
            let boxes = [(v, ObjectClass::Vehicle, 0.8), (p, ObjectClass::Pedestrian, 0.8)];
            frame(i, Isometry3::identity(), &boxes, None)
        })
        .collect();
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    let mut lengths: BTreeMap<ObjectClass, BTreeSet<u64>> = BTreeMap::new();
    for b in &out.boxes {
        lengths
            .entry(b.class)
            .or_default()
            .insert((b.box_in_world.l * 1e6).round() as u64);
    }
    assert_eq!(lengths[&ObjectClass::Vehicle].len(), 1);
    assert_eq!(lengths[&ObjectClass::Pedestrian].len(), 30);
    let vehicle = out.tracks.iter().find(|t| t.class == ObjectClass::Vehicle).unwrap();
    assert!((vehicle.size.unwrap()[0] - 4.5).abs() < 0.15);
}

/// A 5-frame detection gap: the offline tracker bridges it, the AB3DMOT-style baseline
/// (max_age 2) starts a new track, and marks its one coasted frame as extended.
#[test]
fn baseline_breaks_where_offline_bridges() {
    let frames: Vec<TestFrame> = (0..40)
        .map(|i| {
            let boxes = if (15..20).contains(&i) {
                vec![]
            } else {
                vec![(car(i as f64, 0.0, 0.0), ObjectClass::Vehicle, 0.8)]
            };
            frame(i, Isometry3::identity(), &boxes, None)
        })
        .collect();
    let offline = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&offline).len(), 1);
    let baseline = consolidate(&frames, &TrackConfig::forward_only_baseline()).unwrap();
    assert_eq!(ids(&baseline).len(), 2);
    let coasted = frames_of(&baseline, BoxOrigin::Extended);
    assert_eq!(coasted, vec![15]);
    // The new track is confirmed after 3 hits, so frames 20 and 21 are not reported.
    assert!(baseline.frame_boxes(20).is_empty() && baseline.frame_boxes(21).is_empty());
    assert_eq!(baseline.frame_boxes(22).len(), 1);
}

#[test]
fn bad_input_is_reported_with_its_frame() {
    let mut frames: Vec<TestFrame> = (0..3).map(|i| frame(i, Isometry3::identity(), &[], None)).collect();
    frames[2].timestamp_micros = frames[1].timestamp_micros;
    let e = consolidate(&frames, &TrackConfig::default()).unwrap_err();
    assert!(matches!(
        e,
        TrackError::Input {
            frame: 2,
            field: "timestamp_micros",
            ..
        }
    ));
    let mut frames: Vec<TestFrame> = (0..2).map(|i| frame(i, Isometry3::identity(), &[], None)).collect();
    frames[1].boxes.push(TrackInputBox {
        box3: Box3::new(f64::NAN, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0),
        class: ObjectClass::Vehicle,
        score: 0.5,
        votes: 1,
    });
    let e = consolidate(&frames, &TrackConfig::default()).unwrap_err().to_string();
    assert!(e.contains("frame 1") && e.contains("box 0"), "{e}");
}

/// A parked car unseen for 40 frames (longer than `max_gap_frames`, 20) is still one track (one
/// id, one fused box), but the long gap is left empty; a car that moved away in between is not
/// joined.
#[test]
fn still_object_is_joined_across_a_long_gap() {
    let build = |second: Box3| -> Vec<TestFrame> {
        (0..100)
            .map(|i| {
                let boxes = match i {
                    0..30 => vec![(car(20.0, 5.0, 0.4), ObjectClass::Vehicle, 0.8)],
                    70.. => vec![(second, ObjectClass::Vehicle, 0.8)],
                    _ => vec![],
                };
                frame(i, Isometry3::identity(), &boxes, None)
            })
            .collect()
    };
    let out = consolidate(&build(car(20.05, 5.0, 0.4)), &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 1);
    assert_eq!(out.boxes.len(), 60);
    assert!(out.boxes.iter().all(|b| b.origin == BoxOrigin::Detected));
    assert!(out.boxes.iter().all(|b| b.box_in_world == out.boxes[0].box_in_world));
    let out = consolidate(&build(car(26.0, 5.0, 0.4)), &TrackConfig::default()).unwrap();
    assert_eq!(out.tracks.len(), 2);
}

/// `n` frames of parked cars: `cars[k]` is detected (σ = 0.15 m centre noise, score 0.7) in the
/// frames where `seen(k, i)` holds, and its points are in the sweep there too; elsewhere the
/// sweep has only far-away wall points (the car is hidden: no return).
fn parked_sequence(n: usize, cars: &[Box3], seen: impl Fn(usize, usize) -> bool, seed: u64) -> Vec<TestFrame> {
    noisy_parked_sequence(n, cars, seen, seed, 0.15)
}

/// As `parked_sequence`, with centre noise σ = `sigma_m`.
fn noisy_parked_sequence(
    n: usize,
    cars: &[Box3],
    seen: impl Fn(usize, usize) -> bool,
    seed: u64,
    sigma_m: f64,
) -> Vec<TestFrame> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let mut boxes = Vec::new();
            let mut points: Vec<[f64; 3]> = (0..50).map(|k| [-30.0, k as f64 * 0.5 - 12.0, 1.0]).collect();
            for (k, c) in cars.iter().enumerate() {
                if seen(k, i) {
                    let mut b = *c;
                    b.x += rng.normal(sigma_m);
                    b.y += rng.normal(sigma_m);
                    b.l += rng.normal(0.1);
                    boxes.push((b, ObjectClass::Vehicle, 0.7));
                    points.extend(points_of(c));
                }
            }
            frame(i, Isometry3::identity(), &boxes, Some(&points))
        })
        .collect()
}

/// The output track of each truth car: the ids of the detected boxes within 1 m of it.
fn ids_near(out: &Consolidation, c: &Box3) -> BTreeSet<u32> {
    out.boxes
        .iter()
        .filter(|b| b.origin == BoxOrigin::Detected)
        .filter(|b| (b.box_in_world.x - c.x).hypot(b.box_in_world.y - c.y) < 1.0)
        .map(|b| b.track_id)
        .collect()
}

/// A parked car seen in frames 0–29, hidden (no detection, no return) for 60 frames, seen
/// again in 90–119: one id, and nothing is output while it is hidden.
#[test]
fn parked_car_hidden_for_60_frames_keeps_its_id() {
    let parked = car(15.0, 6.0, 0.3);
    let frames = parked_sequence(120, &[parked], |_, i| !(30..90).contains(&i), 5);
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1, "{:?}", out.tracks);
    assert!(out.boxes.iter().all(|b| !(30..90).contains(&b.frame)));
    assert_eq!(out.boxes.len(), 60);
}

/// A hidden stretch of a parked car whose points come back before its detections do is filled
/// exactly where the points show it (a long static gap, filled on evidence).
#[test]
fn long_static_gap_is_filled_where_the_points_show_the_object() {
    let parked = car(15.0, 6.0, 0.3);
    let mut frames = parked_sequence(120, &[parked], |_, i| !(30..90).contains(&i), 6);
    // Frames 60–89: still undetected, but the car's points are back.
    for f in frames.iter_mut().take(90).skip(60) {
        let mut cloud_points = points_of(&parked);
        cloud_points.push([-30.0, 0.0, 1.0]);
        *f = frame(f_index(f), Isometry3::identity(), &[], Some(&cloud_points));
    }
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1);
    let filled = frames_of(&out, BoxOrigin::Interpolated);
    assert_eq!(filled, (60..90).collect::<Vec<_>>());
}

/// The frame index of a `frame(...)` built by this file (from its timestamp).
fn f_index(f: &TestFrame) -> usize {
    ((f.timestamp_micros - 1_000_000) / PERIOD_MICROS) as usize
}

/// Two parked cars of equal size side by side (2.6 m apart), each hidden for a different long
/// stretch: each keeps one id of its own, and the ids do not swap.
#[test]
fn parked_neighbours_of_equal_size_do_not_swap_ids() {
    let cars = [car(10.0, 3.0, 0.0), car(10.0, 5.6, 0.0)];
    let frames = parked_sequence(
        150,
        &cars,
        |k, i| match k {
            0 => !(20..70).contains(&i),
            _ => !(50..110).contains(&i),
        },
        9,
    );
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    let (a, b) = (ids_near(&out, &cars[0]), ids_near(&out, &cars[1]));
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(b.len(), 1, "{b:?}");
    assert!(a.is_disjoint(&b));
    assert_eq!(ids(&out).len(), 2);
}

/// A car parked in frames 0–39 leaves; a van (6.5 × 2.4 m) parks on the same spot in frames
/// 80–119: two ids. The same car coming back would have kept its id.
#[test]
fn different_sized_car_on_the_same_spot_gets_a_new_id() {
    let spot = car(18.0, -2.0, 0.5);
    let van = Box3::new(spot.x, spot.y, 1.2, 6.5, 2.4, 2.4, spot.yaw);
    let frames = parked_sequence(120, &[spot, van], |k, i| if k == 0 { i < 40 } else { i >= 80 }, 11);
    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 2, "{:?}", out.tracks);
    let same = parked_sequence(120, &[spot, spot], |k, i| if k == 0 { i < 40 } else { i >= 80 }, 11);
    let out = consolidate(&same, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1, "{:?}", out.tracks);
}

/// A moving car undetected for 8 frames: where the points show it the gap is filled, where the
/// sweep has points but none on the car (hidden) the frames stay empty; one id either way.
#[test]
fn hidden_gap_frames_of_a_moving_car_stay_empty() {
    let truth = |i: usize| car(5.0 + 0.8 * i as f64, 1.0, 0.0);
    let build = |points_on_car: bool| -> Vec<TestFrame> {
        (0..60)
            .map(|i| {
                let gap = (25..33).contains(&i);
                let boxes = if gap {
                    vec![]
                } else {
                    vec![(truth(i), ObjectClass::Vehicle, 0.8)]
                };
                let mut points = vec![[-30.0, 0.0, 1.0]];
                if !gap || points_on_car {
                    points.extend(points_of(&truth(i)));
                }
                frame(i, Isometry3::identity(), &boxes, Some(&points))
            })
            .collect()
    };
    let out = consolidate(&build(true), &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1);
    assert_eq!(out.boxes.len(), 60);
    let out = consolidate(&build(false), &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1);
    let frames_out: BTreeSet<usize> = out.boxes.iter().map(|b| b.frame).collect();
    assert_eq!(frames_out, (0..25).chain(33..60).collect());
}

/// A parked car seen every frame for 120 frames, but in every other frame of 40–79 its
/// detection is pulled 1.2 m forward along its heading (only its front shows): a second
/// tracklet the tracker's gate keeps apart, lying inside the car's span, never detected in the
/// same frame as it. It is the parked car's missed frames: one id, one box per frame, every box
/// on the fused static box. With absorption off (`static_absorb_min_iou` 1) it stays a second
/// track, which is what makes the ID switches this guards against.
#[test]
fn partial_view_detections_of_a_parked_car_join_its_static_track() {
    let parked = car(15.0, 6.0, 0.3);
    let mut rng = Rng(21);
    let (s, c) = parked.yaw.sin_cos();
    let frames: Vec<TestFrame> = (0..120)
        .map(|i| {
            let mut b = parked;
            if (40..80).contains(&i) && i % 2 == 1 {
                b.x += 1.2 * c;
                b.y += 1.2 * s;
            }
            b.x += rng.normal(0.1);
            b.y += rng.normal(0.1);
            let mut points = points_of(&parked);
            points.push([-30.0, 0.0, 1.0]);
            frame(
                i,
                Isometry3::identity(),
                &[(b, ObjectClass::Vehicle, 0.7)],
                Some(&points),
            )
        })
        .collect();
    let mut off = TrackConfig::default();
    off.vehicle.static_absorb_min_iou = 1.0;
    let out = consolidate(&frames, &off).unwrap();
    assert!(ids(&out).len() >= 2, "{:?}", out.tracks);

    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1, "{:?}", out.tracks);
    assert_eq!(out.tracks[0].motion, Some(MotionState::Static));
    assert_eq!(out.tracks[0].num_detected, 120);
    let frames_out: Vec<usize> = out.boxes.iter().map(|b| b.frame).collect();
    assert_eq!(frames_out, (0..120).collect::<Vec<_>>());
    assert!(out.boxes.iter().all(|b| b.origin == BoxOrigin::Detected));
    for b in &out.boxes {
        assert_eq!(b.box_in_world, out.boxes[0].box_in_world);
    }
    let fused = out.boxes[0].box_in_world;
    assert!((fused.x - parked.x).hypot(fused.y - parked.y) < 0.2, "{fused:?}");
}

/// A parked car seen in frames 0–29, hidden (no detection, no return) for 60 frames, then seen
/// again in 90–119 from the other side, its boxes pulled 1.2 m along its heading: the two still
/// stretches are too far apart for re-identification (1 m), but the second one's boxes overlap
/// the first one's fused box — one id, nothing output while hidden. Off, two ids.
#[test]
fn parked_car_seen_off_centre_after_a_long_gap_keeps_its_id() {
    let parked = car(15.0, 6.0, 0.3);
    let (s, c) = parked.yaw.sin_cos();
    let mut frames = parked_sequence(120, &[parked], |_, i| !(30..90).contains(&i), 8);
    for f in frames.iter_mut().skip(90) {
        for b in &mut f.boxes {
            b.box3.x += 1.2 * c;
            b.box3.y += 1.2 * s;
        }
    }
    let mut off = TrackConfig::default();
    off.vehicle.static_absorb_min_iou = 1.0;
    let out = consolidate(&frames, &off).unwrap();
    assert_eq!(ids(&out).len(), 2, "{:?}", out.tracks);

    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    assert_eq!(ids(&out).len(), 1, "{:?}", out.tracks);
    assert_eq!(out.tracks[0].num_detected, 60);
    assert_eq!(out.boxes.len(), 60);
    assert!(out.boxes.iter().all(|b| !(30..90).contains(&b.frame)));
}

/// Two parked cars side by side (2.6 m apart), boxes with σ = 0.3 m centre noise. A is seen in
/// frames 0–29, 60–63 and 120–149; B in 0–55 and 67–149. The young track born on A at frame 60
/// coasts into B's return and follows B: B's boxes from there carry another id. Those
/// detections overlap B's fused box, so they go back to B's static track: each car keeps one
/// id of its own. With absorption off (`static_absorb_min_iou` 1) B has two ids.
#[test]
fn track_drifting_between_parked_cars_gives_their_detections_back() {
    let cars = [car(10.0, 3.0, 0.0), car(10.0, 5.6, 0.0)];
    let seen = |k: usize, i: usize| match k {
        0 => i < 30 || (60..64).contains(&i) || (120..150).contains(&i),
        _ => i < 56 || (67..150).contains(&i),
    };
    let frames = noisy_parked_sequence(150, &cars, seen, 3, 0.3);
    let mut off = TrackConfig::default();
    off.vehicle.static_absorb_min_iou = 1.0;
    let out = consolidate(&frames, &off).unwrap();
    assert_eq!(ids_near(&out, &cars[1]).len(), 2, "{:?}", out.tracks);

    let out = consolidate(&frames, &TrackConfig::default()).unwrap();
    let (a, b) = (ids_near(&out, &cars[0]), ids_near(&out, &cars[1]));
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(b.len(), 1, "{b:?}");
    assert!(a.is_disjoint(&b));
    assert_eq!(ids(&out).len(), 2, "{:?}", out.tracks);
}
