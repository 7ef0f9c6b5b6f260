//! Exports simulated sweeps as a detector training set: per sweep the points a detector receives
//! at inference, as little-endian f32 `x, y, z, intensity, ring` (`ring`: the beam, 0 = highest,
//! for beam-dropout augmentation) in `<out>/<platform>_<seed>_<sweep>.bin`, and one JSON line
//! per sweep in `<out>/labels.jsonl`:
//! `{"file", "platform", "seed", "sweep", "frame", "objects": [{"box": [x, y, z, l, w, h, yaw,
//! pitch, roll], "class", "num_points", "track_id"}]}` (DESIGN.md's 9-value boxes);
//! `<out>/meta.json` names the point fields, the frame and the options.
//!
//! `--frame sensor` (the default) keeps the source reader's cloud: sensor frame, x forward,
//! y left, z up (Waymo: the vehicle frame, origin on the ground). `--frame normalized` gives the
//! platform profile's normalized frame (`detector.input_frame = "normalized"`), built from the
//! simulator's true gravity and sensor height with the profile's altitude rule, so points and
//! boxes are what a detector sees in the pipeline up to the estimator's error (~0.5°).
//! `--vary` draws per sequence (from its seed) other sensor heights, drone pitch, range noise and
//! dropout, and denser pedestrian and cyclist traffic, so a model does not learn one mount.
//! `--hard-clutter P` simulates a share P of the sequences (drawn from each seed) with the clutter
//! detectors take for objects (`scene.hard_clutter`: hedges, fences, trailers, street fronts, signs).
//! `--ground-z Z` moves the normalized sweeps and boxes vertically so the ground lies at z = Z on
//! every platform (the profiles put it at 0 for the vehicle, −1.8 m for the drone and quadruped);
//! `meta.json` records it, and `tools/train/train.py` writes it into the model's `ground_z_m`.
//!
//! `cargo run --release --example export_training_set -- --out /work/trainset --seeds 1000..1060 --stride 10`
//!
//! The bundled first-generation detectors are trained on vehicle seeds 1000–1059 (`--seeds` is a
//! half-open range); seeds from 5000 up are held out for evaluation
//! (`examples/detector_quality.rs`, `tests/detect_bundled.rs`) and must never be exported for
//! training.

#[path = "support/sim_cloud.rs"]
mod sim_cloud;
#[path = "support/sim_frame.rs"]
mod sim_frame;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use boxlayer::Platform;
use boxlayer::normalize::Profile;
use boxlayer::sim::{LidarSweep, OUSTER_COLUMNS, SimConfig, SimSweep, Simulator, TOP_COLUMNS};
use clap::{Parser, ValueEnum};
use nalgebra::Isometry3;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use serde_json::json;

/// First seed reserved for held-out evaluation.
const FIRST_HELD_OUT_SEED: u64 = 5000;

#[derive(Parser)]
struct Args {
    /// Output folder (created).
    #[arg(long)]
    out: PathBuf,
    /// Sequence seeds, a half-open range `a..b`.
    #[arg(long, default_value = "1000..1060")]
    seeds: String,
    /// Platform of the sequences: vehicle, drone or quadruped.
    #[arg(long, default_value = "vehicle")]
    platform: Platform,
    /// Sweeps per sequence.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    /// Every k-th sweep is exported (sweeps 0, k, 2k, …).
    #[arg(long, default_value_t = 10)]
    stride: usize,
    /// Frame of the points and boxes.
    #[arg(long, value_enum, default_value_t = Frame::Sensor)]
    frame: Frame,
    /// Platform profile of `--frame normalized` (default: the platform's shipped one).
    #[arg(long)]
    profile: Option<String>,
    /// Draw sensor mount, noise and traffic per sequence from its seed.
    #[arg(long)]
    vary: bool,
    /// Share of the sequences (drawn from each seed) simulated with `scene.hard_clutter`.
    #[arg(long, default_value_t = 0.0)]
    hard_clutter: f64,
    /// Move the sweeps of `--frame normalized` vertically so the ground lies at this z (m) on
    /// every platform; a model trained on them declares it as `ground_z_m` (default: the
    /// profile's own level: 0 for the vehicle, −1.8 m for the drone and quadruped).
    #[arg(long, allow_hyphen_values = true)]
    ground_z: Option<f64>,
}

/// How far up the sweeps are moved for `--ground-z` (m; 0 without it).
fn ground_shift(args: &Args, profile: Option<&Profile>) -> anyhow::Result<f64> {
    let Some(wanted) = args.ground_z else {
        return Ok(0.0);
    };
    let profile = profile.context("--ground-z needs --frame normalized (the profile places the ground)")?;
    let ground = profile
        .ground_z_m(boxlayer::frame::DetectorFrame::Normalized)
        .with_context(|| {
            format!(
                "--ground-z: profile `{}` places no ground in its normalized frame",
                profile.name
            )
        })?;
    anyhow::ensure!(wanted.is_finite(), "--ground-z {wanted}: not a number");
    Ok(wanted - ground)
}

/// The frame the set is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Frame {
    /// The source reader's frame.
    Sensor,
    /// The platform profile's normalized frame.
    Normalized,
}

/// The simulator configuration of one sequence: the defaults, or with `vary` a mount, noise and
/// traffic drawn from the seed (uniform ranges; the held-out sequences keep the defaults).
fn sequence_config(frames: usize, seed: u64, vary: bool, hard_clutter: f64) -> SimConfig {
    let mut c = SimConfig {
        frames,
        ..SimConfig::default()
    };
    // Its own stream, so that adding clutter leaves the `vary` draws as they were.
    let mut clutter_rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xC1_77E2);
    c.scene.hard_clutter = clutter_rng.random_bool(hard_clutter.clamp(0.0, 1.0));
    if vary {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5EED_7A21_u64);
        c.vehicle.lidar_height_m = rng.random_range(1.5..2.6);
        c.drone.sensor_pitch_down_deg = rng.random_range(25.0..55.0);
        c.quadruped.sensor_height_m = rng.random_range(0.35..1.0);
        c.lidar.range_noise_m = rng.random_range(0.01..0.05);
        c.lidar.dropout = rng.random_range(0.0..0.15);
        c.lidar.beam_offset_deg = rng.random_range(0.0..0.1);
        c.scene.vehicles_per_km *= rng.random_range(0.8..1.6);
        c.scene.pedestrians_per_km *= rng.random_range(1.5..3.5);
        c.scene.cyclists_per_km *= rng.random_range(1.5..3.5);
        c.scene.parking_occupancy = rng.random_range(0.2..0.8);
    }
    c
}

/// The beam (0 = highest) of each return, in `sim_cloud`'s order.
fn rings(sweep: &SimSweep) -> Vec<f32> {
    match &sweep.lidar {
        LidarSweep::Top(image) => image
            .range_m
            .iter()
            .enumerate()
            .filter(|(_, r)| **r > 0.0)
            .map(|(k, _)| (k / TOP_COLUMNS) as f32)
            .collect(),
        LidarSweep::Ouster(scan) => scan
            .range_mm
            .iter()
            .enumerate()
            .filter(|(_, r)| **r != 0)
            .map(|(k, _)| (k / OUSTER_COLUMNS) as f32)
            .collect(),
    }
}

/// One sequence's label lines (one per exported sweep) and its point and box counts.
struct SeedExport {
    lines: Vec<serde_json::Value>,
    points: usize,
    boxes: usize,
}

/// Simulates one sequence and writes its exported sweeps' points.
fn export_seed(args: &Args, profile: Option<&Profile>, seed: u64) -> anyhow::Result<SeedExport> {
    let shift = ground_shift(args, profile)?;
    let sim = Simulator::new(
        sequence_config(args.frames, seed, args.vary, args.hard_clutter),
        args.platform,
        seed,
    )?;
    let mut out = SeedExport {
        lines: Vec::new(),
        points: 0,
        boxes: 0,
    };
    for index in (0..sim.len()).step_by(args.stride) {
        let sweep = sim.sweep(index)?;
        let cloud = sim_cloud::sim_cloud(&sim, &sweep)?;
        let ring = rings(&sweep);
        anyhow::ensure!(
            ring.len() == cloud.len(),
            "seed {seed} sweep {index}: rings do not match the points"
        );
        let to_frame = match profile {
            Some(p) => {
                Isometry3::translation(0.0, 0.0, shift)
                    * sim_frame::true_normalization(&sweep, p).with_context(|| format!("seed {seed} sweep {index}"))?
            }
            None => Isometry3::identity(),
        };
        let name = format!("{}_{seed}_{index:03}.bin", args.platform);
        let cloud = sim_frame::transformed(&cloud, &to_frame)?;
        let mut bytes = Vec::with_capacity(cloud.len() * 20);
        for (i, &r) in ring.iter().enumerate() {
            for v in [cloud.x()[i], cloud.y()[i], cloud.z()[i], cloud.intensity()[i], r] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        let path = args.out.join(&name);
        std::fs::write(&path, &bytes).with_context(|| format!("{}", path.display()))?;
        let objects: Vec<_> = sweep
            .objects
            .iter()
            .map(|o| {
                let b = o.box_in_sensor.transformed(&to_frame);
                json!({
                    "box": [b.x, b.y, b.z, b.l, b.w, b.h, b.yaw, b.pitch, b.roll],
                    "class": o.class.as_str(),
                    "num_points": o.num_lidar_points,
                    "track_id": o.track_id,
                })
            })
            .collect();
        out.boxes += objects.len();
        out.points += cloud.len();
        out.lines.push(json!({
            "file": name,
            "platform": args.platform.to_string(),
            "seed": seed,
            "sweep": index,
            "frame": format!("{:?}", args.frame).to_lowercase(),
            "objects": objects,
        }));
    }
    Ok(out)
}

fn parse_range(text: &str) -> anyhow::Result<std::ops::Range<u64>> {
    let (a, b) = text
        .split_once("..")
        .with_context(|| format!("--seeds `{text}`: expected a..b"))?;
    Ok(a.trim().parse()?..b.trim().parse()?)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let seeds = parse_range(&args.seeds)?;
    anyhow::ensure!(
        seeds.end <= FIRST_HELD_OUT_SEED,
        "--seeds {}: seeds from {FIRST_HELD_OUT_SEED} up are held out for evaluation",
        args.seeds
    );
    anyhow::ensure!(args.stride > 0, "--stride must be positive");
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}", args.out.display()))?;
    let labels_path = args.out.join("labels.jsonl");
    let mut labels = BufWriter::new(File::create(&labels_path).with_context(|| format!("{}", labels_path.display()))?);
    let profile = match args.frame {
        Frame::Sensor => None,
        Frame::Normalized => {
            let name = match args.profile.as_deref() {
                Some(name) => name,
                None => sim_frame::default_profile(args.platform)?,
            };
            Some(
                Profile::load(name)
                    .with_context(|| format!("--profile {name}"))?
                    .profile,
            )
        }
    };
    ground_shift(&args, profile.as_ref())?;
    std::fs::write(
        args.out.join("meta.json"),
        serde_json::to_string_pretty(&json!({
            "point_fields": ["x", "y", "z", "intensity", "ring"],
            "platform": args.platform.to_string(),
            "frame": format!("{:?}", args.frame).to_lowercase(),
            "profile": profile.as_ref().map(|p| p.name.clone()),
            "seeds": args.seeds,
            "frames": args.frames,
            "stride": args.stride,
            "vary": args.vary,
            "hard_clutter": args.hard_clutter,
            "ground_z_m": args.ground_z,
        }))?,
    )?;
    let start = Instant::now();
    // Sequences are simulated in parallel (each writes its own sweep files); their label lines
    // are written in seed order, so the set does not depend on the thread count.
    let per_seed: Vec<SeedExport> = seeds
        .into_par_iter()
        .map(|seed| export_seed(&args, profile.as_ref(), seed))
        .collect::<anyhow::Result<_>>()?;
    let (mut sweeps, mut points, mut boxes) = (0usize, 0usize, 0usize);
    for seed in per_seed {
        for line in &seed.lines {
            writeln!(labels, "{line}")?;
        }
        sweeps += seed.lines.len();
        points += seed.points;
        boxes += seed.boxes;
    }
    labels.flush()?;
    println!(
        "{sweeps} sweeps, {points} points, {boxes} labelled objects in {} ({:.0} s)",
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
