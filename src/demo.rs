//! `boxlayer demo`: the whole of what boxlayer can do so far, on data it makes itself. It
//! simulates a short vehicle, drone and quadruped sequence, rebuilds each sweep's point cloud as
//! a reader would, measures every ground-truth box against the points (exact points-in-box), and
//! writes the ground truth as JSON lines that `boxlayer eval` reads. It grows stage by stage into
//! the full pipeline run.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use thiserror::Error;

use crate::cloud::PointCloud;
use crate::eval::input::to_json_line;
use crate::eval::{EvalBox, FrameKey};
use crate::frame::Platform;
use crate::geometry::{Box3, count_points_in_box};
use crate::sim::{SimConfig, SimError, Simulator};

/// Errors from the demo.
#[derive(Debug, Error)]
pub enum DemoError {
    /// The simulator refused its configuration or a sweep.
    #[error("simulate {platform}: {source}")]
    Sim {
        /// The platform being simulated.
        platform: Platform,
        /// The simulator's error.
        source: SimError,
    },
    /// An output file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What the demo runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOptions {
    /// Sweeps per platform (default 5).
    pub frames: usize,
    /// Simulator seed (default 7).
    pub seed: u64,
    /// Output folder (default `demo-out`).
    pub out: PathBuf,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            frames: 5,
            seed: 7,
            out: PathBuf::from("demo-out"),
        }
    }
}

/// One platform's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformSummary {
    /// The platform.
    pub platform: Platform,
    /// Sweeps simulated.
    pub sweeps: usize,
    /// Mean LiDAR returns per sweep.
    pub points_per_sweep: f64,
    /// Mean labelled objects with at least one return, per sweep.
    pub objects_per_sweep: f64,
    /// Median returns per such object.
    pub median_points_per_object: f64,
    /// Median over objects of points-in-box (box grown by 0.1 m on each side and at the top,
    /// bottom kept) ÷ the object's true returns: near 1 when boxes and points agree; above 1
    /// where ground or clutter points fall inside, below where range noise pushes returns out.
    pub points_in_box_ratio: f64,
    /// Mean wall time per simulated sweep (ms).
    pub ms_per_sweep: f64,
    /// Ground truth written for `boxlayer eval` (JSON lines).
    pub ground_truth_path: PathBuf,
}

/// Runs the demo and returns its report as text.
pub fn run(options: &DemoOptions) -> Result<String, DemoError> {
    std::fs::create_dir_all(&options.out).map_err(|source| DemoError::Io {
        path: options.out.clone(),
        source,
    })?;
    let mut summaries = Vec::new();
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        summaries.push(simulate_platform(platform, options)?);
    }
    Ok(render(&summaries, options))
}

fn simulate_platform(platform: Platform, options: &DemoOptions) -> Result<PlatformSummary, DemoError> {
    let sim_err = |source| DemoError::Sim { platform, source };
    let config = SimConfig {
        frames: options.frames.max(1),
        ..SimConfig::default()
    };
    let sim = Simulator::new(config, platform, options.seed).map_err(sim_err)?;
    let gt_path = options.out.join(format!("{platform}_ground_truth.jsonl"));
    let sequence = format!("sim_{platform}_seed{}", options.seed);
    let mut gt_lines = String::new();
    let (mut points, mut objects) = (0usize, 0usize);
    let (mut per_object, mut ratios) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for index in 0..sim.len() {
        let sweep = sim.sweep(index).map_err(sim_err)?;
        let sweep_points = sim.sweep_points(&sweep);
        let cloud = cloud_of(sweep_points.iter().map(|p| p.position));
        points += cloud.len();
        for object in sweep.objects.iter().filter(|o| o.num_lidar_points > 0) {
            objects += 1;
            per_object.push(object.num_lidar_points as f64);
            let b = object.box_in_sensor;
            let grown = Box3 {
                l: b.l + 0.2,
                w: b.w + 0.2,
                h: b.h + 0.1,
                z: b.z + 0.05,
                ..b
            };
            ratios.push(count_points_in_box(&cloud, &grown) as f64 / f64::from(object.num_lidar_points));
            let row = EvalBox {
                frame: FrameKey {
                    sequence: sequence.clone(),
                    frame: index as u64,
                },
                bbox: object.box_in_sensor,
                class: object.class,
                score: 1.0,
                track_id: Some(object.track_id.to_string()),
                num_points: Some(u64::from(object.num_lidar_points)),
                platform: Some(platform),
            };
            gt_lines.push_str(&to_json_line(&row));
            gt_lines.push('\n');
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    write_file(&gt_path, gt_lines.as_bytes())?;
    let sweeps = sim.len();
    per_object.sort_by(f64::total_cmp);
    ratios.sort_by(f64::total_cmp);
    Ok(PlatformSummary {
        platform,
        sweeps,
        points_per_sweep: points as f64 / sweeps as f64,
        objects_per_sweep: objects as f64 / sweeps as f64,
        median_points_per_object: per_object.get(per_object.len() / 2).copied().unwrap_or(0.0),
        points_in_box_ratio: ratios.get(ratios.len() / 2).copied().unwrap_or(0.0),
        ms_per_sweep: 1e3 * elapsed / sweeps as f64,
        ground_truth_path: gt_path,
    })
}

fn cloud_of(points: impl Iterator<Item = nalgebra::Point3<f64>>) -> PointCloud {
    let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
    for p in points {
        x.push(p.x as f32);
        y.push(p.y as f32);
        z.push(p.z as f32);
    }
    let n = x.len();
    // Equal lengths by construction, so this cannot fail; fall back to an empty cloud regardless.
    PointCloud::from_columns(x, y, z, vec![0.0; n]).unwrap_or_default()
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), DemoError> {
    let io = |source| DemoError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("partial");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn render(summaries: &[PlatformSummary], options: &DemoOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "boxlayer demo: {} sweeps per platform, seed {}",
        options.frames, options.seed
    );
    let _ = writeln!(
        out,
        "{:<10} {:>7} {:>13} {:>13} {:>16} {:>14} {:>10}",
        "platform", "sweeps", "points/sweep", "objects/sweep", "median pts/obj", "in-box ratio", "ms/sweep"
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "{:<10} {:>7} {:>13.0} {:>13.1} {:>16.0} {:>14.2} {:>10.1}",
            s.platform.as_str(),
            s.sweeps,
            s.points_per_sweep,
            s.objects_per_sweep,
            s.median_points_per_object,
            s.points_in_box_ratio,
            s.ms_per_sweep
        );
    }
    let _ = writeln!(
        out,
        "ground truth (JSON lines, `boxlayer eval --gt FILE --pred FILE` reads it):"
    );
    for s in summaries {
        let _ = writeln!(out, "  {}", s.ground_truth_path.display());
    }
    out
}
