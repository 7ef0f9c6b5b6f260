//! Writes the training set of the bundled crop classifier (`classifiers/crop_sim/`): crops of
//! simulated camera images around projected ground-truth boxes (vehicle, pedestrian, cyclist)
//! and background windows, cut by `boxlayer::classify::cut_crop` with the `[crop]`/`[input]` of
//! the shipped manifest, so training and inference crops look the same.
//!
//! `cargo run --release --example classifier_crops -- --out DIR --seed S --scenes N
//!  [--sweeps-per-scene 3] [--manifest classifiers/crop_sim] [--bg-ratio 1.0] [--near-miss 0.3]`
//!
//! Each scene is a fresh simulator (seed `S·1000 + scene`), the platform cycling vehicle,
//! vehicle, drone, vehicle, quadruped; a few sweeps spread over its sequence, each rendered with
//! its own random look (sun azimuth and elevation, ambient light, haze, ground texture). The car
//! renders two or three of its five Waymo-like cameras (`sim::camera_calibrations`) at half or
//! full resolution; the drone and the quadruped render the M3ED OVC camera
//! (`sim::ovc_rgb_calibration`) at full or 3/4 resolution, so views from above and from low down
//! are in the set.
//!
//! The scenes have more pedestrians (20–70 per km) and cyclists (8–30 per km) than the default
//! and label everything within 200 m, so background windows hold no unlabelled far car.
//!
//! Objects: every labelled object with at least 2 LiDAR returns whose projected box has
//! `in_image_fraction` ≥ 0.5, is at least `min_side_px` on each side, and is less than half
//! covered by nearer objects' boxes (8×8 sample grid). Background: random windows with the
//! sizes and aspects of objects (this image's and a log-uniform prior) whose IoU with every
//! projected object box is below 0.1, plus "near miss" windows shifted 0.6–0.9 of a box off an
//! object (IoU with every object box below 0.3).
//!
//! The scenes and windows come from `support/crop_windows.rs` (shared with
//! `tests/classify_bundled.rs`). Writes `DIR/crops.npy` (uint8 `[N, H, W, 3]`), `DIR/labels.npy` (int64: 0 background,
//! 1 vehicle, 2 pedestrian, 3 cyclist, the manifest's label order), `DIR/groups.npy` (int64 scene
//! index, for a held-out split by scene), `DIR/platforms.npy` (int64: 0 vehicle, 1 drone,
//! 2 quadruped) and `DIR/summary.json` (arguments, counts, time).

#[path = "support/crop_windows.rs"]
mod crop_windows;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use boxlayer::classify::{ClassifierManifest, cut_crop};
use clap::Parser;
use crop_windows::{FRAMES, WindowRules, scene_images};
use rayon::prelude::*;
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Output folder.
    #[arg(long)]
    out: PathBuf,
    /// Base seed (scene seeds are `seed·1000 + scene`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated scenes.
    #[arg(long, default_value_t = 40)]
    scenes: usize,
    /// Sweeps rendered per scene.
    #[arg(long, default_value_t = 3)]
    sweeps_per_scene: usize,
    /// Classifier folder whose `[crop]` and `[input]` cut the crops.
    #[arg(long, default_value = "classifiers/crop_sim")]
    manifest: PathBuf,
    /// Random background windows per accepted object in an image (at least 2 per image).
    #[arg(long, default_value_t = 1.0)]
    bg_ratio: f64,
    /// Near-miss background windows per accepted object.
    #[arg(long, default_value_t = 0.3)]
    near_miss: f64,
}

/// The crops of some scenes.
#[derive(Default)]
struct Crops {
    pixels: Vec<u8>,
    labels: Vec<i64>,
    groups: Vec<i64>,
    platforms: Vec<i64>,
    images: usize,
}

impl Crops {
    fn append(&mut self, other: Crops) {
        self.pixels.extend(other.pixels);
        self.labels.extend(other.labels);
        self.groups.extend(other.groups);
        self.platforms.extend(other.platforms);
        self.images += other.images;
    }
}

/// The crops of one scene, cut with the manifest's `[crop]` and `[input]`.
fn scene_crops(scene: usize, args: &Args, rules: &WindowRules, manifest: &ClassifierManifest) -> anyhow::Result<Crops> {
    let mut out = Crops::default();
    for labelled in scene_images(scene, args.seed, rules)? {
        out.images += 1;
        for (rect, label) in &labelled.windows {
            if let Some(crop) = cut_crop(&labelled.image, *rect, &manifest.crop, &manifest.input) {
                out.pixels.extend_from_slice(crop.as_raw());
                out.labels.push(*label);
                out.groups.push(scene as i64);
                out.platforms.push(labelled.platform);
            }
        }
    }
    Ok(out)
}

/// Writes an `.npy` (format 1.0) file.
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> anyhow::Result<()> {
    let shape_text = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("{}", path.display()))?);
    file.write_all(b"\x93NUMPY\x01\x00")?;
    file.write_all(&u16::try_from(header.len())?.to_le_bytes())?;
    file.write_all(header.as_bytes())?;
    file.write_all(data)?;
    file.flush()?;
    Ok(())
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.sweeps_per_scene == 0 || args.sweeps_per_scene > FRAMES {
        bail!("--sweeps-per-scene must be 1..={FRAMES}");
    }
    let manifest = ClassifierManifest::load(&args.manifest)?;
    let rules = WindowRules {
        sweeps_per_scene: args.sweeps_per_scene,
        min_side_px: manifest.crop.min_side_px,
        bg_ratio: args.bg_ratio,
        near_miss: args.near_miss,
    };
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}", args.out.display()))?;
    let start = Instant::now();
    let parts: Vec<Crops> = (0..args.scenes)
        .into_par_iter()
        .map(|scene| scene_crops(scene, &args, &rules, &manifest))
        .collect::<anyhow::Result<_>>()?;
    let mut all = Crops::default();
    for part in parts {
        all.append(part);
    }
    let n = all.labels.len();
    let (h, w) = (manifest.input.height as usize, manifest.input.width as usize);
    write_npy(&args.out.join("crops.npy"), "|u1", &[n, h, w, 3], &all.pixels)?;
    write_npy(&args.out.join("labels.npy"), "<i8", &[n], &i64_bytes(&all.labels))?;
    write_npy(&args.out.join("groups.npy"), "<i8", &[n], &i64_bytes(&all.groups))?;
    write_npy(&args.out.join("platforms.npy"), "<i8", &[n], &i64_bytes(&all.platforms))?;
    let count = |l: i64| all.labels.iter().filter(|&&x| x == l).count();
    let per_platform = |p: i64| all.platforms.iter().filter(|&&x| x == p).count();
    let summary = json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "seed": args.seed,
        "scenes": args.scenes,
        "sweeps_per_scene": args.sweeps_per_scene,
        "images": all.images,
        "crops": n,
        "per_label": {
            "background": count(0), "vehicle": count(1), "pedestrian": count(2), "cyclist": count(3),
        },
        "per_platform": { "vehicle": per_platform(0), "drone": per_platform(1), "quadruped": per_platform(2) },
        "crop": { "context": manifest.crop.context, "square": manifest.crop.square, "min_side_px": manifest.crop.min_side_px },
        "input": { "width": w, "height": h },
        "seconds": start.elapsed().as_secs_f64(),
    });
    std::fs::write(args.out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
