//! Detection-noise model: determinism and random access, error statistics against the profile,
//! misses and flips against their formulas, false positives on clutter, the exact profile, and
//! simulated noisy sequences evaluated with `eval::evaluate`.

use boxlayer::eval::{EvalConfig, EvalData, IouKind, evaluate};
use boxlayer::geometry::{Box3, wrap_angle};
use boxlayer::sim::{
    ClassNoise, DetectionNoiseModel, DetectorNoiseProfile, FineLabel, ObjectTruth, SimConfig, simulate_noisy_sequence,
    standard_detector_profiles,
};
use boxlayer::{ObjectClass, Platform};
use nalgebra::{Point3, Vector3};

fn car_at(track_id: u32, x: f64, y: f64, points: u32) -> ObjectTruth {
    let b = Box3::new(x, y, 0.8, 4.5, 1.9, 1.6, 0.3);
    ObjectTruth {
        track_id,
        class: ObjectClass::Vehicle,
        label: FineLabel::Car,
        box_in_sensor: b,
        box_in_world: b,
        num_lidar_points: points,
        velocity_in_world: Vector3::zeros(),
    }
}

/// A vehicle-only profile with no misses, flips, false positives or score cut.
fn vehicle_profile(name: &str, vehicle: ClassNoise) -> DetectorNoiseProfile {
    DetectorNoiseProfile {
        name: name.to_string(),
        min_score: 0.0,
        false_positives_per_frame: 0.0,
        vehicle,
        ..DetectorNoiseProfile::default()
    }
}

fn no_miss_noise() -> ClassNoise {
    ClassNoise {
        center_sigma_m: 0.2,
        center_outlier_probability: 0.0,
        center_outlier_scale: 1.0,
        z_sigma_m: 0.1,
        size_sigma: 0.06,
        size_bias: 0.9,
        size_track_correlation: 0.0,
        yaw_sigma_rad: 0.05,
        range_gain_per_m: 0.01,
        sparsity_gain: 0.5,
        sparse_points: 50.0,
        flip_probability_dense: 0.0,
        flip_probability_sparse: 0.0,
        recall_max: 1.0,
        points_at_half_recall: 0.0,
        miss_range_gain_per_m: 0.0,
    }
}

fn std_dev(v: &[f64]) -> f64 {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn draws_are_random_access_and_per_detector() {
    let profiles = standard_detector_profiles();
    let a = DetectionNoiseModel::new(profiles[0].clone(), 7);
    let b = DetectionNoiseModel::new(profiles[0].clone(), 7);
    let objects: Vec<ObjectTruth> = (1..=40).map(|i| car_at(i, 5.0 + i as f64, 2.0, 150)).collect();
    let clutter = [Box3::new(20.0, 8.0, 1.0, 0.3, 12.0, 2.0, 0.0)];
    // b answers other frames and a subset first: nothing may change frame 3's answer.
    let _ = b.detect(9, &objects, &clutter);
    let _ = b.detect(3, &objects[10..], &clutter);
    let da = a.detect(3, &objects, &clutter);
    assert_eq!(da, b.detect(3, &objects, &clutter));
    // One object's detection does not depend on the others.
    let alone = a.detect(3, &objects[5..6], &[]);
    let with_all: Vec<_> = da
        .iter()
        .filter(|d| (d.box3.x - objects[5].box_in_sensor.x).abs() < 0.5)
        .collect();
    assert_eq!(alone.len(), with_all.len());
    if let (Some(x), Some(y)) = (alone.first(), with_all.first()) {
        assert_eq!(x, *y);
    }
    // Another frame, seed or detector draws differently.
    assert_ne!(da, a.detect(4, &objects, &clutter));
    assert_ne!(
        da,
        DetectionNoiseModel::new(profiles[0].clone(), 8).detect(3, &objects, &clutter)
    );
    let renamed = DetectorNoiseProfile {
        name: "other".to_string(),
        ..profiles[0].clone()
    };
    let dr = DetectionNoiseModel::new(renamed, 7).detect(3, &objects, &clutter);
    assert!(dr.iter().all(|d| d.detector == "other"));
    let xs = |d: &[boxlayer::detect::Detection]| d.iter().map(|d| d.box3.x).collect::<Vec<_>>();
    assert_ne!(xs(&da), xs(&dr));
    // The three standard detectors are distinct.
    let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 3);
    assert!(names[0] != names[1] && names[1] != names[2] && names[0] != names[2]);
    assert!(profiles[0] != profiles[1] && profiles[1] != profiles[2]);
}

#[test]
fn errors_match_the_configured_sigmas() {
    let noise = no_miss_noise();
    let model = DetectionNoiseModel::new(vehicle_profile("stats", noise.clone()), 1);
    let (range, points) = (30.0, 50);
    // growth = 1 + 0.01·30 + 0.5·50/(50+50) = 1.55
    let g = 1.0 + 0.01 * range + 0.5 * 0.5;
    assert!((noise.growth(range, points) - g).abs() < 1e-12);
    let n = 4000;
    let objects: Vec<ObjectTruth> = (1..=n).map(|i| car_at(i, range, 0.0, points)).collect();
    let detections = model.detect(0, &objects, &[]);
    assert_eq!(detections.len(), n as usize, "no misses configured");
    let dx: Vec<f64> = detections.iter().map(|d| d.box3.x - range).collect();
    let dy: Vec<f64> = detections.iter().map(|d| d.box3.y).collect();
    let dz: Vec<f64> = detections.iter().map(|d| d.box3.z - 0.8).collect();
    let dyaw: Vec<f64> = detections.iter().map(|d| wrap_angle(d.box3.yaw - 0.3)).collect();
    let log_l: Vec<f64> = detections.iter().map(|d| (d.box3.l / 4.5).ln()).collect();
    for (what, values, sigma) in [
        ("x", &dx, 0.2 * g),
        ("y", &dy, 0.2 * g),
        ("z", &dz, 0.1 * g),
        ("yaw", &dyaw, 0.05 * g),
        ("log l", &log_l, 0.06 * g),
    ] {
        let s = std_dev(values);
        assert!((s / sigma - 1.0).abs() < 0.1, "{what}: std {s}, configured {sigma}");
    }
    // Unbiased centre, biased size: mean log scale = ln 0.9.
    assert!(mean(&dx).abs() < 4.0 * 0.2 * g / (n as f64).sqrt());
    assert!((mean(&log_l) - 0.9f64.ln()).abs() < 0.01, "{}", mean(&log_l));
    // Nearer and denser objects err less.
    let near: Vec<ObjectTruth> = (1..=n).map(|i| car_at(i, 5.0, 0.0, 2000)).collect();
    let near_dx: Vec<f64> = model.detect(0, &near, &[]).iter().map(|d| d.box3.x - 5.0).collect();
    assert!(std_dev(&near_dx) < 0.75 * std_dev(&dx));
}

/// With `center_outlier_probability` 0.1 and scale 5, a BEV centre error beyond 4 σ (σ = the
/// Gaussian's, growth included) has probability 0.1·P(|z| > 0.8) + 0.9·P(|z| > 4) = 0.0424 per
/// axis (binomial s.d. over 4,000 boxes: 0.0032); without the tail it is 6·10⁻⁵.
#[test]
fn centre_tail_puts_the_configured_share_of_boxes_far_off() {
    let (range, points) = (30.0, 50);
    let share_beyond_4_sigma = |noise: ClassNoise| {
        let sigma = noise.center_sigma_m * noise.growth(range, points);
        let model = DetectionNoiseModel::new(vehicle_profile("tail", noise), 3);
        let objects: Vec<ObjectTruth> = (1..=4000).map(|i| car_at(i, range, 0.0, points)).collect();
        let detections = model.detect(0, &objects, &[]);
        assert_eq!(detections.len(), 4000);
        let far = detections
            .iter()
            .filter(|d| (d.box3.x - range).abs() > 4.0 * sigma)
            .count();
        far as f64 / 4000.0
    };
    let tailed = share_beyond_4_sigma(ClassNoise {
        center_outlier_probability: 0.1,
        center_outlier_scale: 5.0,
        ..no_miss_noise()
    });
    assert!((tailed - 0.0424).abs() < 4.0 * 0.0032, "{tailed}");
    let gaussian = share_beyond_4_sigma(no_miss_noise());
    assert!(gaussian < 0.003, "{gaussian}");
}

#[test]
fn miss_rate_follows_points_and_range() {
    let noise = ClassNoise {
        recall_max: 0.95,
        points_at_half_recall: 8.0,
        miss_range_gain_per_m: 0.004,
        ..no_miss_noise()
    };
    let model = DetectionNoiseModel::new(vehicle_profile("misses", noise.clone()), 2);
    let n = 4000u32;
    let mut previous = -1.0;
    for points in [0u32, 2, 8, 30, 300] {
        for range in [10.0, 60.0] {
            let objects: Vec<ObjectTruth> = (1..=n).map(|i| car_at(i, range, 0.0, points)).collect();
            let rate = model.detect(0, &objects, &[]).len() as f64 / f64::from(n);
            // p = 0.95 · n²/(n² + 64) · (1 − 0.004·r), written out independently.
            let p = 0.95 * f64::from(points * points) / f64::from(points * points + 64) * (1.0 - 0.004 * range);
            let se = (p * (1.0 - p) / f64::from(n)).sqrt().max(1e-9);
            assert!(
                (rate - p).abs() <= 4.0 * se + 1e-12,
                "{points} pts at {range} m: rate {rate}, p {p}"
            );
            if range == 10.0 {
                assert!(rate > previous, "detection rate must rise with points");
                previous = rate;
            }
        }
    }
    // Beyond the detector's range nothing is detected.
    let far = car_at(1, 80.0, 0.0, 500);
    assert!(model.detect(0, &[far], &[]).is_empty());
}

#[test]
fn heading_flips_follow_sparsity() {
    let noise = ClassNoise {
        yaw_sigma_rad: 0.02,
        flip_probability_dense: 0.04,
        flip_probability_sparse: 0.44,
        sparse_points: 10.0,
        ..no_miss_noise()
    };
    let model = DetectionNoiseModel::new(vehicle_profile("flips", noise), 3);
    let n = 4000u32;
    // p(n) = 0.04 + 0.40 · 10/(10 + n)
    for (points, p) in [(0u32, 0.44), (10, 0.24), (390, 0.05)] {
        let objects: Vec<ObjectTruth> = (1..=n).map(|i| car_at(i, 20.0, 0.0, points)).collect();
        let detections = model.detect(0, &objects, &[]);
        let flipped = detections
            .iter()
            .filter(|d| wrap_angle(d.box3.yaw - 0.3).abs() > std::f64::consts::FRAC_PI_2)
            .count();
        let rate = flipped as f64 / detections.len() as f64;
        let se = (p * (1.0 - p) / detections.len() as f64).sqrt();
        assert!((rate - p).abs() < 4.0 * se, "{points} pts: flip rate {rate}, p {p}");
    }
}

#[test]
fn scores_rank_good_boxes_above_bad_ones_and_false_positives() {
    let profile = DetectorNoiseProfile {
        min_score: 0.0,
        false_positives_per_frame: 6.0,
        vehicle: ClassNoise {
            center_sigma_m: 0.3,
            size_bias: 1.0,
            size_sigma: 0.03,
            ..no_miss_noise()
        },
        ..DetectorNoiseProfile::default()
    };
    let model = DetectionNoiseModel::new(profile, 4);
    let objects: Vec<ObjectTruth> = (1..=2000).map(|i| car_at(i, 25.0, 0.0, 100)).collect();
    let clutter = [Box3::new(15.0, -10.0, 3.0, 0.5, 0.5, 6.0, 0.0)];
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for d in model.detect(0, &objects, &[]) {
        let iou = boxlayer::geometry::iou_bev(&d.box3, &objects[0].box_in_sensor);
        if iou > 0.8 {
            good.push(f64::from(d.score));
        } else if iou < 0.5 {
            bad.push(f64::from(d.score));
        }
    }
    let fp: Vec<f64> = (0..400)
        .flat_map(|f| model.detect(f, &[], &clutter))
        .map(|d| f64::from(d.score))
        .collect();
    assert!(
        good.len() > 100 && bad.len() > 100 && fp.len() > 1000,
        "{} {} {}",
        good.len(),
        bad.len(),
        fp.len()
    );
    assert!(
        mean(&good) > mean(&bad) + 0.3,
        "good {} bad {}",
        mean(&good),
        mean(&bad)
    );
    assert!(mean(&fp) < mean(&bad), "false positives skew low: {}", mean(&fp));
    assert!(fp.iter().all(|s| (0.0..=1.0).contains(s)));
}

/// Whether `p` (sensor frame) lies in `clutter`'s BEV footprint grown by `margin`.
fn on_clutter(p: &Point3<f64>, clutter: &Box3, margin: f64) -> bool {
    let local = clutter.parent_from_box().inverse() * p;
    local.x.abs() <= 0.5 * clutter.l + margin && local.y.abs() <= 0.5 * clutter.w + margin
}

#[test]
fn false_positives_lie_on_clutter_at_the_configured_rate() {
    let profile = DetectorNoiseProfile {
        min_score: 0.0,
        false_positives_per_frame: 2.5,
        ..DetectorNoiseProfile::default()
    };
    let model = DetectionNoiseModel::new(profile, 5);
    let clutter = [
        Box3::new(12.0, 6.0, 3.0, 0.4, 0.4, 6.0, 0.0),      // pole
        Box3::new(-20.0, 4.0, 1.0, 0.3, 15.0, 2.0, 0.7),    // wall
        Box3::new(30.0, -30.0, 9.0, 20.0, 25.0, 18.0, 0.2), // building
        Box3::new(200.0, 0.0, 9.0, 20.0, 25.0, 18.0, 0.0),  // out of range
    ];
    let frames = 2000;
    let mut count = 0usize;
    for f in 0..frames {
        for d in model.detect(f, &[], &clutter) {
            count += 1;
            let c = d.box3.center();
            assert!(
                clutter[..3].iter().any(|k| on_clutter(&c, k, 1e-6)),
                "frame {f}: false positive at {c} is on no clutter"
            );
            assert!(c.x.hypot(c.y) <= 75.2);
            let typical_h = match d.class {
                ObjectClass::Vehicle => 1.65,
                ObjectClass::Pedestrian => 1.75,
                _ => 1.7,
            };
            assert!((d.box3.h / typical_h).ln().abs() < 0.5, "{:?}", d.box3);
        }
    }
    let rate = count as f64 / frames as f64;
    // Poisson mean 2.5 ± 4 standard errors.
    assert!((rate - 2.5).abs() < 4.0 * (2.5 / frames as f64).sqrt(), "rate {rate}");
    assert!(model.detect(0, &[], &[]).is_empty(), "no clutter, no false positives");
}

fn small_config() -> SimConfig {
    SimConfig::default()
}

#[test]
fn exact_profile_returns_the_truth_and_scores_ap_one() {
    let exact = DetectorNoiseProfile::exact("exact");
    let seq =
        simulate_noisy_sequence(small_config(), Platform::Quadruped, 3, 21, std::slice::from_ref(&exact)).unwrap();
    assert_eq!(seq.frames.len(), 3);
    let mut total = 0;
    for (i, frame) in seq.frames.iter().enumerate() {
        assert_eq!(frame.index, i);
        assert!(!frame.points.is_empty());
        assert!(frame.truth.iter().all(|o| o.num_lidar_points >= 1));
        assert_eq!(frame.detections.len(), frame.truth.len());
        for (d, o) in frame.detections.iter().zip(&frame.truth) {
            assert_eq!(d.box3, o.box_in_sensor);
            assert_eq!(d.class, o.class);
            assert_eq!(d.detector, "exact");
        }
        total += frame.truth.len();
    }
    assert!(total > 0, "the scene must hold visible objects");
    let gt = EvalData {
        boxes: boxlayer::eval::input::noisy_sequence_truth(&seq),
        queries: Vec::new(),
    };
    let pred = EvalData {
        boxes: boxlayer::eval::input::noisy_sequence_detections(&seq, "exact"),
        queries: Vec::new(),
    };
    assert_eq!(gt.boxes.len(), total);
    let report = evaluate(&gt, &pred, &EvalConfig::default()).unwrap();
    let with_gt: Vec<_> = report.detection.iter().filter(|r| r.num_gt > 0).collect();
    assert!(!with_gt.is_empty());
    for r in with_gt {
        assert_eq!(r.ap_r40, Some(1.0), "{:?} {:?} @{}", r.class, r.iou_kind, r.threshold);
    }
}

#[test]
fn noisy_sequence_is_deterministic_and_its_false_positives_sit_on_clutter() {
    let fp_only = DetectorNoiseProfile {
        false_positives_per_frame: 4.0,
        min_score: 0.0,
        ..DetectorNoiseProfile::exact("fp_only")
    };
    let profiles = vec![standard_detector_profiles()[1].clone(), fp_only];
    let a = simulate_noisy_sequence(small_config(), Platform::Drone, 3, 4, &profiles).unwrap();
    let b = simulate_noisy_sequence(small_config(), Platform::Drone, 3, 4, &profiles).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.sequence, "sim_drone_seed4");
    assert!(
        a.frames
            .windows(2)
            .all(|w| w[1].timestamp_micros - w[0].timestamp_micros == 100_000)
    );
    let sim = boxlayer::sim::Simulator::new(
        SimConfig {
            frames: 3,
            ..small_config()
        },
        Platform::Drone,
        4,
    )
    .unwrap();
    let mut fps = 0;
    for frame in &a.frames {
        let sweep = sim.sweep(frame.index).unwrap();
        let clutter = sim.clutter_in_sensor(&sweep, f64::INFINITY);
        assert!(!clutter.is_empty());
        for d in frame.detections.iter().filter(|d| d.detector == "fp_only") {
            if frame.truth.iter().any(|o| o.box_in_sensor == d.box3) {
                continue;
            }
            fps += 1;
            assert!(
                clutter.iter().any(|k| on_clutter(&d.box3.center(), k, 1e-6)),
                "{:?}",
                d.box3
            );
        }
    }
    assert!(fps > 0, "four false positives per frame expected");
    // The centre-based detector's boxes evaluate, with AP strictly between 0 and 1 for vehicles.
    let gt = EvalData {
        boxes: boxlayer::eval::input::noisy_sequence_truth(&a),
        queries: Vec::new(),
    };
    let pred = EvalData {
        boxes: boxlayer::eval::input::noisy_sequence_detections(&a, &profiles[0].name),
        queries: Vec::new(),
    };
    assert!(!pred.boxes.is_empty());
    let report = evaluate(&gt, &pred, &EvalConfig::default()).unwrap();
    let bev = report
        .detection
        .iter()
        .find(|r| r.class == ObjectClass::Vehicle && r.iou_kind == IouKind::Bev && r.threshold == 0.5)
        .unwrap();
    if bev.num_gt > 0 {
        let ap = bev.ap_r40.unwrap();
        assert!(ap > 0.0 && ap <= 1.0, "{ap}");
    }
}

/// A sensor-frame object of `class` at `(x, y)` with `points` returns.
fn object_at(track_id: u32, class: ObjectClass, x: f64, y: f64, yaw: f64, points: u32) -> ObjectTruth {
    let (label, l, w, h) = match class {
        ObjectClass::Pedestrian => (FineLabel::Pedestrian, 0.8, 0.7, 1.75),
        ObjectClass::Cyclist => (FineLabel::Cyclist, 1.8, 0.7, 1.7),
        _ => (FineLabel::Car, 4.6, 1.9, 1.6),
    };
    let b = Box3::new(x, y, 0.5 * h, l, w, h, yaw);
    ObjectTruth {
        track_id,
        class,
        label,
        box_in_sensor: b,
        box_in_world: b,
        num_lidar_points: points,
        velocity_in_world: Vector3::zeros(),
    }
}

/// Detections of `profile` over `frames` synthetic frames (one track per cell of a 6 m grid in
/// y > 0, each visible in a fifth of the frames with fresh points; clutter in y < −20) as
/// evaluator boxes: (truth, detections).
fn synthetic_run(
    profile: DetectorNoiseProfile,
    frames: usize,
) -> (Vec<boxlayer::eval::EvalBox>, Vec<boxlayer::eval::EvalBox>) {
    use rand::{RngExt, SeedableRng};
    let model = DetectionNoiseModel::new(profile, 99);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let clutter = [
        Box3::new(10.0, -30.0, 3.0, 0.4, 0.4, 6.0, 0.0),
        Box3::new(-25.0, -40.0, 1.0, 0.3, 15.0, 2.0, 0.4),
        Box3::new(30.0, -45.0, 9.0, 20.0, 12.0, 18.0, 0.1),
    ];
    let cells: Vec<(f64, f64)> = (-10..=10)
        .flat_map(|i| (0..11).map(move |j| (6.0 * f64::from(i), 3.0 + 6.0 * f64::from(j))))
        .collect();
    let (mut truth, mut detections) = (Vec::new(), Vec::new());
    for f in 0..frames {
        // Each cell holds one track of a fixed class; a fifth of the cells show up per frame.
        let chosen: Vec<(usize, (f64, f64))> = cells
            .iter()
            .copied()
            .enumerate()
            .filter(|_| rng.random_bool(0.2))
            .collect();
        let objects: Vec<ObjectTruth> = chosen
            .into_iter()
            .map(|(cell, (x, y))| {
                let track = cell as u32 + 1;
                let u = (cell as f64 * 0.618_034).fract();
                let class = if u < 0.6 {
                    ObjectClass::Vehicle
                } else if u < 0.9 {
                    ObjectClass::Pedestrian
                } else {
                    ObjectClass::Cyclist
                };
                let points = (2000f64.powf(rng.random::<f64>())) as u32;
                object_at(track, class, x, y, rng.random_range(-3.0..3.0), points)
            })
            .collect();
        truth.extend(
            objects
                .iter()
                .map(|o| boxlayer::eval::input::object_truth_box(o, "synthetic", f, Platform::Vehicle)),
        );
        detections.extend(
            model
                .detect(f, &objects, &clutter)
                .iter()
                .map(|d| boxlayer::eval::input::detection_box(d, "synthetic", f, Platform::Vehicle)),
        );
    }
    (truth, detections)
}

fn assert_close(what: &str, fitted: f64, expected: f64, tolerance: f64) {
    assert!(
        (fitted - expected).abs() <= tolerance,
        "{what}: fitted {fitted}, configured {expected} (± {tolerance})"
    );
}

#[test]
fn fitting_the_models_own_output_recovers_its_parameters() {
    let vehicle = ClassNoise {
        center_sigma_m: 0.12,
        center_outlier_probability: 0.0,
        center_outlier_scale: 1.0,
        z_sigma_m: 0.08,
        size_sigma: 0.05,
        size_bias: 0.93,
        size_track_correlation: 0.5,
        yaw_sigma_rad: 0.05,
        range_gain_per_m: 0.015,
        sparsity_gain: 1.0,
        sparse_points: 30.0,
        flip_probability_dense: 0.02,
        flip_probability_sparse: 0.2,
        recall_max: 0.95,
        points_at_half_recall: 6.0,
        miss_range_gain_per_m: 0.004,
    };
    let profile = DetectorNoiseProfile {
        name: "truth_profile".to_string(),
        min_score: 0.0,
        vehicle: vehicle.clone(),
        false_positives_per_frame: 2.0,
        score_noise: 0.5,
        ..DetectorNoiseProfile::default()
    };
    let frames = 500;
    let (truth, detections) = synthetic_run(profile.clone(), frames);
    let fitted = DetectorNoiseProfile::fit(&truth, &detections);
    let v = &fitted.vehicle;
    assert_close("centre σ", v.center_sigma_m, 0.12, 0.012);
    // Gaussian errors: no tail is worth its parameters.
    assert_eq!(v.center_outlier_probability, 0.0);
    assert_close("z σ", v.z_sigma_m, 0.08, 0.012);
    assert_close("size bias", v.size_bias, 0.93, 0.01);
    assert_close("size σ", v.size_sigma, 0.05, 0.0075);
    assert_close("yaw σ", v.yaw_sigma_rad, 0.05, 0.0075);
    assert_close("size track correlation", v.size_track_correlation, 0.5, 0.1);
    // The σ growth over the data: compare g at two corners rather than the collinear parameters.
    for (r, n) in [(10.0, 1000), (60.0, 5)] {
        assert_close(
            &format!("growth at {r} m, {n} pts"),
            v.growth(r, n),
            vehicle.growth(r, n),
            0.15 * vehicle.growth(r, n),
        );
    }
    for n in [2u32, 30, 500] {
        assert_close(
            &format!("flip p at {n} pts"),
            v.flip_probability(n),
            vehicle.flip_probability(n),
            0.03,
        );
    }
    for (r, n) in [(10.0, 3), (10.0, 500), (60.0, 20)] {
        let p = vehicle.detection_probability(r, n);
        assert_close(
            &format!("detection p at {r} m, {n} pts"),
            v.detection_probability(r, n),
            p,
            0.04,
        );
    }
    assert_close("false positives / frame", fitted.false_positives_per_frame, 2.0, 0.2);
    assert_close(
        "score slope",
        fitted.score_slope,
        profile.score_slope,
        0.2 * profile.score_slope,
    );
    assert_close("score mid", fitted.score_quality_mid, profile.score_quality_mid, 0.05);
    assert_close("score noise", fitted.score_noise, profile.score_noise, 0.1);
    assert_close(
        "false-positive quality max",
        fitted.false_positive_quality_max,
        profile.false_positive_quality_max,
        0.1,
    );
    assert!(fitted.max_range_m <= 75.2 && fitted.max_range_m > 55.0);
    // Pedestrians, fitted from fewer boxes with default noise: centre σ and flips still close.
    let (p, q) = (&fitted.pedestrian, &profile.pedestrian);
    assert_close(
        "pedestrian centre σ",
        p.center_sigma_m,
        q.center_sigma_m,
        0.15 * q.center_sigma_m,
    );
    // The fitted profile serialises to TOML and back.
    let text = toml::to_string(&fitted).unwrap();
    let back: DetectorNoiseProfile = toml::from_str(&text).unwrap();
    assert_eq!(back, fitted);
}

#[test]
fn fitting_recovers_a_heavy_centre_tail() {
    let vehicle = ClassNoise {
        center_sigma_m: 0.10,
        center_outlier_probability: 0.1,
        center_outlier_scale: 4.0,
        ..ClassNoise::default()
    };
    let profile = DetectorNoiseProfile {
        name: "tailed".to_string(),
        min_score: 0.0,
        vehicle,
        ..DetectorNoiseProfile::default()
    };
    let (truth, detections) = synthetic_run(profile, 400);
    let v = DetectorNoiseProfile::fit(&truth, &detections).vehicle;
    assert_close("core centre σ", v.center_sigma_m, 0.10, 0.012);
    assert_close("tail share", v.center_outlier_probability, 0.1, 0.03);
    assert_close("tail σ multiple", v.center_outlier_scale, 4.0, 0.8);
}

#[test]
fn fitting_an_exact_detector_gives_zero_noise() {
    let exact = DetectorNoiseProfile::exact("exact");
    let (truth, detections) = synthetic_run(exact, 40);
    assert_eq!(truth.len(), detections.len());
    let fitted = DetectorNoiseProfile::fit(&truth, &detections);
    for c in [&fitted.vehicle, &fitted.pedestrian] {
        assert_eq!(c.center_sigma_m, 0.0);
        assert_eq!(c.yaw_sigma_rad, 0.0);
        assert_eq!(c.size_bias, 1.0);
        assert_eq!(c.flip_probability_dense, 0.0);
        assert_eq!(c.recall_max, 1.0);
        assert_eq!(c.detection_probability(50.0, 1), 1.0);
    }
    assert_eq!(fitted.false_positives_per_frame, 0.0);
}

#[test]
fn eval_cli_writes_the_fitted_profile() {
    let profile = DetectorNoiseProfile {
        min_score: 0.0,
        ..standard_detector_profiles()[0].clone()
    };
    let (truth, detections) = synthetic_run(profile.clone(), 200);
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, boxes: &[boxlayer::eval::EvalBox]| {
        let path = dir.path().join(name);
        let text: String = boxes
            .iter()
            .map(|b| boxlayer::eval::input::to_json_line(b) + "\n")
            .collect();
        std::fs::write(&path, text).unwrap();
        path
    };
    let gt = write("gt.jsonl", &truth);
    let pred = write("pointpillars.jsonl", &detections);
    let out = dir.path().join("profile.toml");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["eval", "--gt"])
        .arg(&gt)
        .arg("--pred")
        .arg(&pred)
        .arg("--fit-noise-profile")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let fitted: DetectorNoiseProfile = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(fitted.name, "pointpillars");
    // The same boxes fitted in-process give the same profile (up to the name).
    let direct = DetectorNoiseProfile::fit(&truth, &detections);
    assert_close(
        "centre σ (cli vs library)",
        fitted.vehicle.center_sigma_m,
        direct.vehicle.center_sigma_m,
        1e-9,
    );
    assert_close(
        "centre σ",
        fitted.vehicle.center_sigma_m,
        profile.vehicle.center_sigma_m,
        0.02,
    );
    assert_close(
        "false positives / frame",
        fitted.false_positives_per_frame,
        profile.false_positives_per_frame,
        0.3,
    );
}

#[test]
fn false_positives_return_to_the_same_clutter_while_the_sensor_moves() {
    use nalgebra::{Isometry3, Translation3, UnitQuaternion};
    // Ten poles on a line in the world; the sensor drives past them along x.
    let poles_in_world: Vec<Box3> = (0..10)
        .map(|i| Box3::new(8.0 * f64::from(i), 6.0, 3.0, 0.3, 0.3, 6.0, 0.0))
        .collect();
    let top_share = |persistence: f64| -> (f64, bool) {
        let profile = DetectorNoiseProfile {
            min_score: 0.0,
            false_positives_per_frame: 3.0,
            false_positive_persistence: persistence,
            ..DetectorNoiseProfile::default()
        };
        let model = DetectionNoiseModel::new(profile, 8);
        let mut per_pole = [0usize; 10];
        let mut classes: Vec<Option<ObjectClass>> = vec![None; 10];
        let mut stable_class = true;
        for f in 0..300 {
            let world_from_sensor = Isometry3::from_parts(
                Translation3::new(0.1 * f as f64, 0.0, 0.0),
                UnitQuaternion::from_axis_angle(&Vector3::z_axis(), 0.001 * f as f64),
            );
            let sensor_from_world = world_from_sensor.inverse();
            let clutter: Vec<Box3> = poles_in_world
                .iter()
                .map(|b| b.transformed(&sensor_from_world))
                .collect();
            for d in model.detect_in_world(f, &[], &clutter, &world_from_sensor) {
                let c = world_from_sensor * d.box3.center();
                let pole = poles_in_world
                    .iter()
                    .position(|p| on_clutter(&c, p, 1e-6))
                    .expect("on a pole");
                per_pole[pole] += 1;
                stable_class &= *classes[pole].get_or_insert(d.class) == d.class;
            }
        }
        let total: usize = per_pole.iter().sum();
        (*per_pole.iter().max().unwrap() as f64 / total as f64, stable_class)
    };
    let (even, _) = top_share(0.0);
    let (persistent, stable) = top_share(2.5);
    // Even spread: about 1/10 each; persistent: a few poles take most.
    assert!(even < 0.15, "top pole share {even} without persistence");
    assert!(persistent > 0.3, "top pole share {persistent} with persistence");
    assert!(stable, "a pole is always mistaken for the same class");
}
