//! Measures a detector on held-out simulated sequences: BEV AP R40 per class (vehicle @0.7 and
//! @0.5, pedestrian and cyclist @0.5 and @0.25; `crate::eval`, strict `>`), recall and centre
//! error of the near, well-seen vehicles (≥ 30 returns, < 30 m) and precision of the confident
//! (score ≥ 0.3) vehicle detections within 30 m, as the bundled-detector test checks them
//! (2 m BEV centre gate) with the quantiles of that centre error and its signed offset along the
//! sensor ray and the true heading, their vertical placement (vehicle AP with 3D IoU beside BEV,
//! and the vertical centre offset of the found near vehicles, gravity-aligned), and the time of each stage of
//! `Detector::detect_timed` on one thread, with the pre+post share of the ONNX time. The numbers
//! of the model cards in `detectors/*/README.md` come from this command.
//!
//! `cargo run --release --example detector_quality -- --detector detectors/NAME [--seeds 5000,5001,5002]
//!  [--frames 200] [--stride 10] [--platforms vehicle,drone,quadruped] [--json out.json]
//!  [--fit-noise-profile profile.toml]`
//!
//! `--frame normalized` feeds the detector each sweep in its platform profile's normalized frame
//! (`detector.input_frame = "normalized"`; built from the simulator's true gravity and sensor
//! height, `support/sim_frame.rs`) and brings its boxes back to the sensor frame, as the pipeline
//! does; headings are compared in the frame the detector saw.
//!
//! Ground truth: every labelled object with at least one LiDAR return whose BEV centre lies inside
//! the detector's `point_cloud_range` (the rest cannot be detected by construction). Sweeps are
//! the source readers' clouds (`support/sim_cloud.rs`): Waymo TOP for the vehicle, OS1 for the
//! drone and quadruped, in each platform's own sensor frame. Seeds from 5000 up are held out from
//! training (`examples/export_training_set.rs`).

#[path = "support/sim_cloud.rs"]
mod sim_cloud;
#[path = "support/sim_frame.rs"]
mod sim_frame;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use boxlayer::detect::{Detector, StageTimings};
use boxlayer::eval::{ClassThresholds, DetectionConfig, EvalBox, FrameKey, IouKind, ThresholdRule, evaluate_detection};
use boxlayer::sim::{DetectorNoiseProfile, SimConfig, Simulator};
use boxlayer::{ObjectClass, Platform};
use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Detector folder.
    #[arg(long)]
    detector: PathBuf,
    /// Held-out sequence seeds (comma-separated, ≥ 5000).
    #[arg(long, default_value = "5000,5001,5002", value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Platforms to measure on (comma-separated).
    #[arg(long, default_value = "vehicle,drone,quadruped", value_delimiter = ',')]
    platforms: Vec<Platform>,
    /// Sweeps per sequence.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    /// Every k-th sweep is measured.
    #[arg(long, default_value_t = 10)]
    stride: usize,
    /// Also write every number as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also fit the detection-noise model to the detector's boxes on every measured sweep of
    /// every platform (`DetectorNoiseProfile::fit`) and write the profile here as TOML.
    #[arg(long)]
    fit_noise_profile: Option<PathBuf>,
    /// Frame of the detector's input: the sensor frame, or the platform profile's normalized frame.
    #[arg(long, default_value = "sensor", value_parser = ["sensor", "normalized"])]
    frame: String,
    /// Simulate with the hard clutter (hedges, bushes, fences, trailers, street fronts, sign
    /// posts: `SceneConfig::hard_clutter`).
    #[arg(long)]
    hard_clutter: bool,
}

/// A confident box whose centre lies within this of a clutter object's footprint, and farther
/// than `NEAR_MATCH_M` from every labelled object, is a false box on clutter (m).
const CLUTTER_MARGIN_M: f64 = 0.5;

/// A found near vehicle's heading counts as correct within this of the truth (degrees).
const HEADING_TOLERANCE_DEG: f64 = 30.0;

/// Near, well-seen vehicles: what `tests/detect_bundled.rs` requires a detector to find.
const NEAR_MIN_POINTS: u32 = 30;
/// BEV range limit of the near vehicles (m).
const NEAR_MAX_RANGE_M: f64 = 30.0;
/// A detection within this BEV centre distance of a near vehicle finds it (m).
const NEAR_MATCH_M: f64 = 2.0;
/// Only vehicle detections with at least this score count for the near-vehicle numbers.
const NEAR_MIN_SCORE: f32 = 0.3;

fn detection_config() -> DetectionConfig {
    DetectionConfig {
        ignore_zero_point_gt: true,
        iou_kinds: vec![IouKind::Bev, IouKind::ThreeD],
        ..DetectionConfig::bev_only(ClassThresholds::default())
    }
}

/// Per-stage times of the measured sweeps.
#[derive(Default)]
struct Times(Vec<StageTimings>);

impl Times {
    fn mean_ms(&self, f: impl Fn(&StageTimings) -> Duration) -> f64 {
        let n = self.0.len().max(1) as f64;
        self.0.iter().map(|t| f(t).as_secs_f64() * 1e3).sum::<f64>() / n
    }
}

/// Near-vehicle recall and precision bookkeeping.
#[derive(Default)]
struct Near {
    /// Near, well-seen GT vehicles.
    total: usize,
    /// Of them, those with a confident vehicle detection within `NEAR_MATCH_M`.
    found: usize,
    /// Sum of the BEV centre distances of the found ones (m).
    centre_error_sum_m: f64,
    /// Each found one's BEV centre distance (m).
    centre_errors_m: Vec<f64>,
    /// Each found one's signed BEV centre offset (detection − truth) along the sensor → object
    /// ray and along the true heading (m).
    centre_offsets_m: Vec<[f64; 2]>,
    /// Each found one's vertical centre offset (detection − truth), gravity-aligned (m).
    vertical_offsets_m: Vec<f64>,
    /// Of the found ones, those whose heading is within `HEADING_TOLERANCE_DEG` of the truth,
    /// and those off by more than 180° − that (flipped).
    heading_correct: usize,
    heading_flipped: usize,
    /// Confident vehicle detections closer than `NEAR_MAX_RANGE_M`.
    detections: usize,
    /// Of them, those within `NEAR_MATCH_M` of a GT vehicle (any point count).
    true_detections: usize,
}

/// Confident boxes (score ≥ `NEAR_MIN_SCORE`, any class) that match no labelled object within
/// `NEAR_MATCH_M`: all of them, and those standing on clutter.
#[derive(Default)]
struct FalseBoxes {
    unmatched: usize,
    on_clutter: usize,
}

struct PlatformResult {
    platform: Platform,
    sweeps: usize,
    gt: Vec<EvalBox>,
    pred: Vec<EvalBox>,
    times: Times,
    near: Near,
    false_boxes: FalseBoxes,
}

fn measure(detector: &Detector, platform: Platform, args: &Args) -> anyhow::Result<PlatformResult> {
    let range = detector.manifest().pillars.point_cloud_range;
    let inside = |x: f64, y: f64| x >= range[0] && x < range[3] && y >= range[1] && y < range[4];
    let mut config = SimConfig {
        frames: args.frames,
        ..SimConfig::default()
    };
    config.scene.hard_clutter = args.hard_clutter;
    // Clutter footprints are tested in the gravity-aligned frame, whatever the detector sees.
    let level_profile = boxlayer::normalize::Profile::load(sim_frame::default_profile(platform)?)?.profile;
    let mut out = PlatformResult {
        platform,
        sweeps: 0,
        gt: Vec::new(),
        pred: Vec::new(),
        times: Times::default(),
        near: Near::default(),
        false_boxes: FalseBoxes::default(),
    };
    let profile = match args.frame.as_str() {
        "normalized" => Some(boxlayer::normalize::Profile::load(sim_frame::default_profile(platform)?)?.profile),
        _ => None,
    };
    // Where the ground lies in the points the detector gets, for a manifest with `ground_z_m`.
    let ground = match &profile {
        Some(p) => p.ground_z_m(boxlayer::frame::DetectorFrame::Normalized),
        None => level_profile.ground_z_m(boxlayer::frame::DetectorFrame::Sensor),
    };
    for &seed in &args.seeds {
        anyhow::ensure!(seed >= 5000, "seed {seed}: seeds below 5000 may be training seeds");
        let sim = Simulator::new(config.clone(), platform, seed)?;
        let sequence = format!("{platform}_{seed}");
        for index in (0..sim.len()).step_by(args.stride.max(1)) {
            let sweep = sim.sweep(index)?;
            let cloud = sim_cloud::sim_cloud(&sim, &sweep)?;
            let to_frame = match &profile {
                Some(p) => sim_frame::true_normalization(&sweep, p)?,
                None => nalgebra::Isometry3::identity(),
            };
            let (mut detections, timings) =
                detector.detect_timed_on_ground(&sim_frame::transformed(&cloud, &to_frame)?, ground)?;
            // Headings in the detector's frame; boxes back in the sensor frame.
            let headings: Vec<f64> = detections.iter().map(|d| d.box3.yaw).collect();
            let from_frame = to_frame.inverse();
            for d in &mut detections {
                d.box3 = d.box3.transformed(&from_frame);
            }
            // The first call pays for ONNX Runtime's lazy set-up; it is not timed.
            if out.sweeps > 0 {
                out.times.0.push(timings);
            }
            out.sweeps += 1;
            let confident: Vec<_> = detections
                .iter()
                .zip(&headings)
                .filter(|(d, _)| d.class == ObjectClass::Vehicle && d.score >= NEAR_MIN_SCORE)
                .collect();
            for (d, _) in &confident {
                if d.box3.x.hypot(d.box3.y) < NEAR_MAX_RANGE_M {
                    out.near.detections += 1;
                    let hit = sweep.objects.iter().any(|o| {
                        o.class == ObjectClass::Vehicle
                            && (o.box_in_sensor.x - d.box3.x).hypot(o.box_in_sensor.y - d.box3.y) < NEAR_MATCH_M
                    });
                    out.near.true_detections += usize::from(hit);
                }
            }
            let level = sim_frame::true_normalization(&sweep, &level_profile)?;
            let clutter: Vec<_> = sim
                .clutter_in_sensor(&sweep, range[3].max(-range[0]) + 10.0)
                .iter()
                .map(|b| b.transformed(&level))
                .collect();
            let labelled: Vec<_> = sweep
                .objects
                .iter()
                .map(|o| o.box_in_sensor.transformed(&level))
                .collect();
            for d in detections.iter().filter(|d| d.score >= NEAR_MIN_SCORE) {
                let c = d.box3.transformed(&level);
                if labelled.iter().any(|o| (o.x - c.x).hypot(o.y - c.y) < NEAR_MATCH_M) {
                    continue;
                }
                out.false_boxes.unmatched += 1;
                let on = clutter.iter().any(|b| {
                    let (dx, dy) = (c.x - b.x, c.y - b.y);
                    let (sin, cos) = b.yaw.sin_cos();
                    (cos * dx + sin * dy).abs() <= 0.5 * b.l + CLUTTER_MARGIN_M
                        && (-sin * dx + cos * dy).abs() <= 0.5 * b.w + CLUTTER_MARGIN_M
                });
                out.false_boxes.on_clutter += usize::from(on);
            }
            let frame = FrameKey {
                sequence: sequence.clone(),
                frame: index as u64,
            };
            for o in &sweep.objects {
                let b = o.box_in_sensor;
                if o.num_lidar_points == 0 || !inside(b.x, b.y) {
                    continue;
                }
                out.gt
                    .push(boxlayer::eval::input::object_truth_box(o, &sequence, index, platform));
                if o.class == ObjectClass::Vehicle
                    && o.num_lidar_points >= NEAR_MIN_POINTS
                    && b.x.hypot(b.y) < NEAR_MAX_RANGE_M
                {
                    out.near.total += 1;
                    let nearest = confident
                        .iter()
                        .map(|&(d, &heading)| {
                            let (dx, dy) = (d.box3.x - b.x, d.box3.y - b.y);
                            (dx, dy, dx.hypot(dy), heading, d.box3)
                        })
                        .min_by(|p, q| p.2.total_cmp(&q.2));
                    if let Some((dx, dy, distance, heading, found)) = nearest
                        && distance < NEAR_MATCH_M
                    {
                        let truth = o.box_in_sensor.transformed(&to_frame).yaw;
                        let off = boxlayer::geometry::wrap_angle(heading - truth).abs().to_degrees();
                        out.near.heading_correct += usize::from(off <= HEADING_TOLERANCE_DEG);
                        out.near.heading_flipped += usize::from(off >= 180.0 - HEADING_TOLERANCE_DEG);
                        out.near.found += 1;
                        out.near.centre_error_sum_m += distance;
                        out.near.centre_errors_m.push(distance);
                        let range = b.x.hypot(b.y).max(1e-9);
                        let radial = (dx * b.x + dy * b.y) / range;
                        let along = dx * b.yaw.cos() + dy * b.yaw.sin();
                        out.near.centre_offsets_m.push([radial, along]);
                        out.near
                            .vertical_offsets_m
                            .push(found.transformed(&level).z - b.transformed(&level).z);
                    }
                }
            }
            out.pred.extend(detections.iter().map(|d| EvalBox {
                frame: frame.clone(),
                bbox: d.box3,
                class: d.class,
                score: f64::from(d.score),
                track_id: None,
                num_points: None,
                platform: Some(platform),
            }));
        }
    }
    Ok(out)
}

fn fmt_ap(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{:.1}", 100.0 * v))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // "One thread": rayon (pillarise) on one thread; ONNX Runtime threads come from the manifest.
    rayon::ThreadPoolBuilder::new().num_threads(1).build_global()?;
    let detector = Detector::load(&args.detector)?;
    let onnx_threads = detector.manifest().runtime.threads;
    println!(
        "detector `{}` ({}), seeds {:?}, {} sweeps per sequence, every {}th; ONNX Runtime intra-op threads {}\n",
        detector.name(),
        args.detector.display(),
        args.seeds,
        args.frames,
        args.stride,
        onnx_threads
    );
    let mut results = Vec::new();
    for &platform in &args.platforms {
        results.push(measure(&detector, platform, &args)?);
    }

    println!(
        "| platform | sweeps | GT boxes (veh/ped/cyc) | vehicle AP@0.7 | vehicle AP@0.5 | pedestrian AP@0.5 | pedestrian AP@0.25 | cyclist AP@0.5 | cyclist AP@0.25 | near-vehicle recall | near-vehicle centre error | near-vehicle precision | heading within 30° (flipped) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let evals: Vec<_> = results
        .iter()
        .map(|r| evaluate_detection(&r.gt, &r.pred, &detection_config(), ThresholdRule::Strict))
        .collect();
    let mut json_platforms = Vec::new();
    for (r, eval) in results.iter().zip(&evals) {
        let ap = |class: ObjectClass, t: f64| {
            eval.iter()
                .find(|e| e.class == class && e.iou_kind == IouKind::Bev && (e.threshold - t).abs() < 1e-9)
                .and_then(|e| e.ap_r40)
        };
        let count = |class: ObjectClass| r.gt.iter().filter(|b| b.class == class).count();
        let recall = (r.near.total > 0).then(|| r.near.found as f64 / r.near.total as f64);
        let centre = (r.near.found > 0).then(|| r.near.centre_error_sum_m / r.near.found as f64);
        let precision = (r.near.detections > 0).then(|| r.near.true_detections as f64 / r.near.detections as f64);
        let share = |n: usize| (r.near.found > 0).then(|| n as f64 / r.near.found as f64);
        let (heading, flipped) = (share(r.near.heading_correct), share(r.near.heading_flipped));
        let pct = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{:.1} %", 100.0 * v));
        println!(
            "| {} | {} | {}/{}/{} | {} | {} | {} | {} | {} | {} | {} ({}/{}) | {} | {} ({}/{}) | {} ({}) |",
            r.platform,
            r.sweeps,
            count(ObjectClass::Vehicle),
            count(ObjectClass::Pedestrian),
            count(ObjectClass::Cyclist),
            fmt_ap(ap(ObjectClass::Vehicle, 0.7)),
            fmt_ap(ap(ObjectClass::Vehicle, 0.5)),
            fmt_ap(ap(ObjectClass::Pedestrian, 0.5)),
            fmt_ap(ap(ObjectClass::Pedestrian, 0.25)),
            fmt_ap(ap(ObjectClass::Cyclist, 0.5)),
            fmt_ap(ap(ObjectClass::Cyclist, 0.25)),
            recall.map_or_else(|| "–".to_string(), |v| format!("{:.3}", v)),
            r.near.found,
            r.near.total,
            centre.map_or_else(|| "–".to_string(), |v| format!("{:.2} m", v)),
            precision.map_or_else(|| "–".to_string(), |v| format!("{:.3}", v)),
            r.near.true_detections,
            r.near.detections,
            pct(heading),
            pct(flipped),
        );
        json_platforms.push(json!({
            "platform": r.platform.to_string(),
            "sweeps": r.sweeps,
            "gt": {"vehicle": count(ObjectClass::Vehicle), "pedestrian": count(ObjectClass::Pedestrian), "cyclist": count(ObjectClass::Cyclist)},
            "bev_ap_r40": eval.iter().filter(|e| e.iou_kind == IouKind::Bev).map(|e| json!({
                "class": e.class.as_str(), "threshold": e.threshold, "ap_r40": e.ap_r40,
                "num_gt": e.num_gt, "num_pred": e.num_pred, "num_tp": e.num_tp,
            })).collect::<Vec<Value>>(),
            "near_vehicles": {
                "total": r.near.total, "found": r.near.found, "recall": recall, "mean_centre_error_m": centre,
                "detections": r.near.detections, "true_detections": r.near.true_detections, "precision": precision,
                "heading_correct": heading, "heading_flipped": flipped,
            },
        }));
    }

    println!(
        "\nFalse boxes: confident (score ≥ {NEAR_MIN_SCORE}) boxes of any class farther than {NEAR_MATCH_M} m from every \
         labelled object, per sweep, and those on clutter (centre within {CLUTTER_MARGIN_M} m of an unlabelled object's \
         footprint){}:\n",
        if args.hard_clutter {
            "; scenes with the hard clutter"
        } else {
            ""
        }
    );
    println!("| platform | sweeps | false boxes per sweep | on clutter per sweep |");
    println!("|---|---|---|---|");
    let mut json_false = Vec::new();
    for r in &results {
        let per = |n: usize| n as f64 / r.sweeps.max(1) as f64;
        println!(
            "| {} | {} | {:.2} | {:.2} |",
            r.platform,
            r.sweeps,
            per(r.false_boxes.unmatched),
            per(r.false_boxes.on_clutter)
        );
        json_false.push(json!({
            "platform": r.platform.to_string(),
            "false_boxes_per_sweep": per(r.false_boxes.unmatched),
            "on_clutter_per_sweep": per(r.false_boxes.on_clutter),
        }));
    }

    println!(
        "\nNear-vehicle BEV centre error quantiles (m; found vehicles only, so cut at the {NEAR_MATCH_M} m gate). \
         For isotropic 2-D Gaussian errors p90 / p50 = 1.82 and p99 / p50 = 2.58; larger ratios are heavier tails:\n"
    );
    println!("| platform | found | p50 | p90 | p99 | p90 / p50 | p99 / p50 |");
    println!("|---|---|---|---|---|---|---|");
    let mut json_errors = Vec::new();
    for r in &results {
        let mut errors = r.near.centre_errors_m.clone();
        errors.sort_by(f64::total_cmp);
        // Nearest-rank quantile.
        let q = |p: f64| {
            let rank = ((p * errors.len() as f64).ceil() as usize).clamp(1, errors.len().max(1));
            errors.get(rank - 1).copied()
        };
        let (p50, p90, p99) = (q(0.5), q(0.9), q(0.99));
        let cell = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
        let ratio = |a: Option<f64>| match (a, p50) {
            (Some(a), Some(m)) if m > 0.0 => format!("{:.2}", a / m),
            _ => "–".to_string(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.platform,
            errors.len(),
            cell(p50),
            cell(p90),
            cell(p99),
            ratio(p90),
            ratio(p99)
        );
        json_errors.push(json!({
            "platform": r.platform.to_string(), "found": errors.len(),
            "p50_m": p50, "p90_m": p90, "p99_m": p99,
        }));
    }

    println!(
        "\nNear-vehicle signed BEV centre offset (detection − truth, m; found vehicles only): along the sensor → \
         object ray (negative: placed towards the sensor) and along the true heading (negative: towards the tail):\n"
    );
    println!("| platform | found | ray mean | ray median | ray sd | heading mean | heading median | heading sd |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut json_offsets = Vec::new();
    for r in &results {
        let stats = |k: usize| {
            let mut v: Vec<f64> = r.near.centre_offsets_m.iter().map(|o| o[k]).collect();
            v.sort_by(f64::total_cmp);
            let n = v.len().max(1) as f64;
            let mean = v.iter().sum::<f64>() / n;
            let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            (mean, v.get(v.len() / 2).copied().unwrap_or(f64::NAN), sd)
        };
        let (ray, heading) = (stats(0), stats(1));
        println!(
            "| {} | {} | {:+.3} | {:+.3} | {:.3} | {:+.3} | {:+.3} | {:.3} |",
            r.platform,
            r.near.centre_offsets_m.len(),
            ray.0,
            ray.1,
            ray.2,
            heading.0,
            heading.1,
            heading.2
        );
        json_offsets.push(json!({
            "platform": r.platform.to_string(), "found": r.near.centre_offsets_m.len(),
            "ray_mean_m": ray.0, "ray_median_m": ray.1, "ray_sd_m": ray.2,
            "heading_mean_m": heading.0, "heading_median_m": heading.1, "heading_sd_m": heading.2,
        }));
    }

    println!(
        "\nVertical placement: vehicle AP with 3D IoU (BEV overlap × height overlap) beside BEV, and the found \
         near vehicles' vertical centre offset (detection − truth, m, gravity-aligned; BEV AP does not see it):\n"
    );
    println!(
        "| platform | vehicle AP@0.7 BEV / 3D | vehicle AP@0.5 BEV / 3D | found | z offset median | z offset mean | mean abs z offset | p90 abs z offset |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut json_vertical = Vec::new();
    for (r, eval) in results.iter().zip(&evals) {
        let ap = |kind: IouKind, t: f64| {
            eval.iter()
                .find(|e| e.class == ObjectClass::Vehicle && e.iou_kind == kind && (e.threshold - t).abs() < 1e-9)
                .and_then(|e| e.ap_r40)
        };
        let mut z = r.near.vertical_offsets_m.clone();
        z.sort_by(f64::total_cmp);
        let mut abs: Vec<f64> = z.iter().map(|v| v.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let n = z.len().max(1) as f64;
        let (median, mean) = (z.get(z.len() / 2).copied(), z.iter().sum::<f64>() / n);
        let abs_mean = abs.iter().sum::<f64>() / n;
        let abs_p90 = abs.get(((0.9 * abs.len() as f64).ceil() as usize).max(1) - 1).copied();
        let cell = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:+.2}"));
        let plain = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
        let found = !z.is_empty();
        println!(
            "| {} | {} / {} | {} / {} | {} | {} | {} | {} | {} |",
            r.platform,
            fmt_ap(ap(IouKind::Bev, 0.7)),
            fmt_ap(ap(IouKind::ThreeD, 0.7)),
            fmt_ap(ap(IouKind::Bev, 0.5)),
            fmt_ap(ap(IouKind::ThreeD, 0.5)),
            z.len(),
            cell(median),
            cell(found.then_some(mean)),
            plain(found.then_some(abs_mean)),
            plain(abs_p90),
        );
        json_vertical.push(json!({
            "platform": r.platform.to_string(),
            "vehicle_ap_r40": {"bev_0.7": ap(IouKind::Bev, 0.7), "3d_0.7": ap(IouKind::ThreeD, 0.7),
                               "bev_0.5": ap(IouKind::Bev, 0.5), "3d_0.5": ap(IouKind::ThreeD, 0.5)},
            "found": z.len(), "z_offset_median_m": median, "z_offset_mean_m": found.then_some(mean),
            "abs_z_offset_mean_m": found.then_some(abs_mean), "abs_z_offset_p90_m": abs_p90,
        }));
    }

    println!("\nPer-stage time, mean over the timed sweeps (ms, rayon and ONNX Runtime on one thread each):\n");
    println!(
        "| platform | timed sweeps | pillarise | encoder | scatter | head | decode+NMS | pre+post | ONNX | pre+post / ONNX |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut json_times = Vec::new();
    for r in &results {
        let t = &r.times;
        let (pre_post, onnx) = (t.mean_ms(StageTimings::pre_post), t.mean_ms(StageTimings::onnx));
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} % |",
            r.platform,
            t.0.len(),
            t.mean_ms(|s| s.pillarize),
            t.mean_ms(|s| s.encoder),
            t.mean_ms(|s| s.scatter),
            t.mean_ms(|s| s.head),
            t.mean_ms(|s| s.decode),
            pre_post,
            onnx,
            100.0 * pre_post / onnx.max(1e-9)
        );
        json_times.push(json!({
            "platform": r.platform.to_string(), "timed_sweeps": t.0.len(),
            "pillarize_ms": t.mean_ms(|s| s.pillarize), "encoder_ms": t.mean_ms(|s| s.encoder),
            "scatter_ms": t.mean_ms(|s| s.scatter), "head_ms": t.mean_ms(|s| s.head),
            "decode_ms": t.mean_ms(|s| s.decode), "pre_post_share_of_onnx": pre_post / onnx.max(1e-9),
        }));
    }
    if let Some(path) = &args.fit_noise_profile {
        let gt: Vec<EvalBox> = results.iter().flat_map(|r| r.gt.iter().cloned()).collect();
        let pred: Vec<EvalBox> = results.iter().flat_map(|r| r.pred.iter().cloned()).collect();
        let profile = DetectorNoiseProfile {
            name: detector.name().to_string(),
            ..DetectorNoiseProfile::fit(&gt, &pred)
        };
        // The file says where it came from: rerunning its second line rewrites it.
        let command: Vec<String> = std::env::args().skip(1).collect();
        let text = format!(
            "# Fitted by DetectorNoiseProfile::fit to this detector's boxes on held-out simulated sweeps ({}):\n\
             # cargo run --release --example detector_quality -- {}\n{}",
            args.platforms
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            command.join(" "),
            toml::to_string(&profile)?
        );
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("\nFitted noise profile written to {}", path.display());
    }
    if let Some(path) = &args.json {
        let doc = json!({
            "detector": detector.name(),
            "seeds": args.seeds,
            "frames": args.frames,
            "stride": args.stride,
            "quality": json_platforms,
            "timings": json_times,
            "near_vehicle_centre_error_quantiles": json_errors,
            "false_boxes": json_false,
            "frame": args.frame,
            "hard_clutter": args.hard_clutter,
            "near_vehicle_centre_offsets": json_offsets,
            "vertical_placement": json_vertical,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
    }
    Ok(())
}
