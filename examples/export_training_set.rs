//! Exports simulated sweeps as a detector training set: per sweep the points exactly as a
//! detector receives them at inference (the source reader's cloud: sensor frame, x forward,
//! y left, z up; Waymo TOP raw intensity for the vehicle, OS1 REFLECTIVITY for drone/quadruped)
//! as little-endian f32 `x, y, z, intensity` in `<out>/<platform>_<seed>_<sweep>.bin`, and one
//! JSON line per sweep in `<out>/labels.jsonl`:
//! `{"file", "platform", "seed", "sweep", "objects": [{"box": [x, y, z, l, w, h, yaw, pitch, roll],
//! "class", "num_points", "track_id"}]}` (DESIGN.md's 9-value sensor-frame boxes).
//!
//! `cargo run --release --example export_training_set -- --out /work/trainset --seeds 1000..1060 --stride 10`
//!
//! The bundled detectors are trained on vehicle seeds 1000–1059 (`--seeds` is a half-open
//! range); seeds from 5000 up are held out for evaluation (`examples/detector_quality.rs`,
//! `tests/detect_bundled.rs`) and must never be exported for training.

#[path = "support/sim_cloud.rs"]
mod sim_cloud;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use boxlayer::Platform;
use boxlayer::sim::{SimConfig, Simulator};
use clap::Parser;
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
    let config = SimConfig {
        frames: args.frames,
        ..SimConfig::default()
    };
    let start = Instant::now();
    let (mut sweeps, mut points, mut boxes) = (0usize, 0usize, 0usize);
    for seed in seeds {
        let sim = Simulator::new(config.clone(), args.platform, seed)?;
        for index in (0..sim.len()).step_by(args.stride) {
            let sweep = sim.sweep(index)?;
            let cloud = sim_cloud::sim_cloud(&sim, &sweep)?;
            let name = format!("{}_{seed}_{index:03}.bin", args.platform);
            let mut bytes = Vec::with_capacity(cloud.len() * 16);
            for i in 0..cloud.len() {
                for v in [cloud.x()[i], cloud.y()[i], cloud.z()[i], cloud.intensity()[i]] {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
            }
            let path = args.out.join(&name);
            std::fs::write(&path, &bytes).with_context(|| format!("{}", path.display()))?;
            let objects: Vec<_> = sweep
                .objects
                .iter()
                .map(|o| {
                    let b = o.box_in_sensor;
                    json!({
                        "box": [b.x, b.y, b.z, b.l, b.w, b.h, b.yaw, b.pitch, b.roll],
                        "class": o.class.as_str(),
                        "num_points": o.num_lidar_points,
                        "track_id": o.track_id,
                    })
                })
                .collect();
            boxes += objects.len();
            points += cloud.len();
            sweeps += 1;
            let line = json!({
                "file": name,
                "platform": args.platform.to_string(),
                "seed": seed,
                "sweep": index,
                "objects": objects,
            });
            writeln!(labels, "{line}")?;
        }
        eprintln!(
            "seed {seed}: {sweeps} sweeps so far, {:.0} s",
            start.elapsed().as_secs_f64()
        );
    }
    labels.flush()?;
    println!(
        "{sweeps} sweeps, {points} points, {boxes} labelled objects in {} ({:.0} s)",
        args.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
