//! `boxlayer demo`: the whole of what boxlayer can do so far, on data it makes itself. It
//! simulates a short vehicle, drone and quadruped sequence, writes them in their real formats
//! (a Waymo v1 segment with rendered camera images; M3ED `_data.h5` / `_pose_gt.h5` with RGB)
//! and reads them back through the Waymo and M3ED readers; measures every ground-truth box
//! against the points it reads (exact points-in-box); and writes the ground truth as JSON lines
//! that `boxlayer eval` reads. Then, per platform, it runs the consolidation stages on a longer
//! sequence (`consolidation`): three modelled detectors → KDE box fusion → offline tracking,
//! scored against the truth. It grows stage by stage into the full pipeline run.

mod consolidation;

pub use consolidation::{ConsolidationSummary, FUSION_TOML, VehiclePedestrianAp, consolidate_platform};

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use thiserror::Error;

use crate::cloud::PointCloud;
use crate::eval::EvalError;
use crate::eval::input::load_jsonl;
use crate::frame::Platform;
use crate::fuse::FuseError;
use crate::geometry::{Box3, count_points_in_box};
use crate::sim::{
    SimConfig, SimError, SimWriteError, Simulator, WaymoWriteError, default_segment_name, default_sequence_name,
    write_m3ed_sequence, write_waymo_segment,
};
use crate::sources::m3ed::{M3edConfig, M3edSource};
use crate::sources::waymo::{WaymoConfig, WaymoV1Source};
use crate::sources::{Source, SourceError};
use crate::track::TrackError;

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
    /// The simulated sequence could not be written as M3ED files.
    #[error("write {platform} sequence: {source}")]
    Write {
        /// The platform being simulated.
        platform: Platform,
        /// The writer's error.
        source: SimWriteError,
    },
    /// The simulated vehicle sequence could not be written as a Waymo segment.
    #[error("write vehicle segment: {0}")]
    WriteWaymo(#[from] WaymoWriteError),
    /// A written file could not be read back.
    #[error("read back: {0}")]
    Source(#[from] SourceError),
    /// The written ground truth could not be read back.
    #[error("read back ground truth: {0}")]
    Truth(#[from] EvalError),
    /// An embedded configuration does not parse.
    #[error("{what}: {reason}")]
    Config {
        /// Which configuration.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Fusion refused its configuration or a frame's boxes.
    #[error("fuse: {0}")]
    Fuse(#[from] FuseError),
    /// The tracker refused its configuration or the sequence.
    #[error("track: {0}")]
    Track(#[from] TrackError),
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
    /// Consecutive sweeps per platform for the consolidation stages (default 40).
    pub consolidation_frames: usize,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            frames: 5,
            seed: 7,
            out: PathBuf::from("demo-out"),
            consolidation_frames: 40,
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
    /// How the points reached the measurement (`Waymo v1 segment` or `M3ED files`).
    pub path_taken: &'static str,
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
    let mut consolidations = Vec::new();
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        summaries.push(simulate_platform(platform, options)?);
    }
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        consolidations.push(consolidate_platform(
            platform,
            options.consolidation_frames,
            options.seed,
            &options.out,
        )?);
    }
    Ok(render(&summaries, &consolidations, options))
}

/// Per-object figures gathered over a sequence.
#[derive(Default)]
struct Tally {
    points: usize,
    objects: usize,
    points_per_object: Vec<f64>,
    in_box_ratios: Vec<f64>,
}

impl Tally {
    /// Adds one sweep: its points and the true boxes (with their true return counts) in its frame.
    fn add(&mut self, cloud: &PointCloud, truth: impl Iterator<Item = (Box3, u64)>) {
        self.points += cloud.len();
        for (b, returns) in truth.filter(|(_, n)| *n > 0) {
            self.objects += 1;
            self.points_per_object.push(returns as f64);
            let grown = Box3 {
                l: b.l + 0.2,
                w: b.w + 0.2,
                h: b.h + 0.1,
                z: b.z + 0.05,
                ..b
            };
            self.in_box_ratios
                .push(count_points_in_box(cloud, &grown) as f64 / returns as f64);
        }
    }

    fn summary(
        mut self,
        platform: Platform,
        sweeps: usize,
        elapsed_s: f64,
        path_taken: &'static str,
        gt: PathBuf,
    ) -> PlatformSummary {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let n = sweeps.max(1) as f64;
        PlatformSummary {
            platform,
            sweeps,
            points_per_sweep: self.points as f64 / n,
            objects_per_sweep: self.objects as f64 / n,
            median_points_per_object: median(&mut self.points_per_object),
            points_in_box_ratio: median(&mut self.in_box_ratios),
            ms_per_sweep: 1e3 * elapsed_s / n,
            path_taken,
            ground_truth_path: gt,
        }
    }
}

fn simulate_platform(platform: Platform, options: &DemoOptions) -> Result<PlatformSummary, DemoError> {
    let config = SimConfig {
        frames: options.frames.max(1),
        ..SimConfig::default()
    };
    let sim = Simulator::new(config, platform, options.seed).map_err(|source| DemoError::Sim { platform, source })?;
    match default_sequence_name(platform, options.seed) {
        Some(name) => through_m3ed_files(&sim, &name, options),
        None => through_waymo_segment(&sim, &default_segment_name(options.seed), options),
    }
}

/// Simulate → M3ED `_data.h5` / `_pose_gt.h5` → `M3edSource` → measure, the way real drone and
/// quadruped logs enter the pipeline.
fn through_m3ed_files(sim: &Simulator, name: &str, options: &DemoOptions) -> Result<PlatformSummary, DemoError> {
    let platform = sim.platform();
    let started = Instant::now();
    let dir = options.out.join(platform.as_str());
    let written =
        write_m3ed_sequence(sim, sim.len(), &dir, name).map_err(|source| DemoError::Write { platform, source })?;
    let source = M3edSource::open(&written.data_path, M3edConfig::default())?;
    let tally = measure(&source, &written.truth_path)?;
    let elapsed = started.elapsed().as_secs_f64();
    Ok(tally.summary(platform, source.len(), elapsed, "M3ED files", written.truth_path))
}

/// Simulate → Waymo v1 segment (TOP range images, five rendered cameras, laser labels) →
/// `WaymoV1Source` → measure, the way real Waymo logs enter the pipeline.
fn through_waymo_segment(sim: &Simulator, name: &str, options: &DemoOptions) -> Result<PlatformSummary, DemoError> {
    let platform = sim.platform();
    let started = Instant::now();
    let dir = options.out.join(platform.as_str());
    let written = write_waymo_segment(sim, sim.len(), &dir, name)?;
    let source = WaymoV1Source::open(&written.segment_path, WaymoConfig::default())?;
    let tally = measure(&source, &written.truth_path)?;
    let elapsed = started.elapsed().as_secs_f64();
    Ok(tally.summary(platform, source.len(), elapsed, "Waymo v1 segment", written.truth_path))
}

/// Reads every frame of `source` and measures it against the ground truth in `truth_path`.
fn measure(source: &dyn Source, truth_path: &Path) -> Result<Tally, DemoError> {
    let truth = load_jsonl(truth_path)?;
    let mut tally = Tally::default();
    for index in 0..source.len() {
        let frame = source.frame(index)?;
        let boxes = truth.boxes.iter().filter(|b| b.frame.frame == index as u64);
        tally.add(&frame.cloud, boxes.map(|b| (b.bbox, b.num_points.unwrap_or(0))));
    }
    Ok(tally)
}

/// Writes `bytes` to a temporary name beside `path`, then renames it into place.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), DemoError> {
    let io = |source| DemoError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension("partial");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn render(summaries: &[PlatformSummary], consolidations: &[ConsolidationSummary], options: &DemoOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "boxlayer demo: {} sweeps per platform, seed {}",
        options.frames, options.seed
    );
    let _ = writeln!(
        out,
        "{:<10} {:>7} {:>13} {:>13} {:>16} {:>14} {:>10}  points from",
        "platform", "sweeps", "points/sweep", "objects/sweep", "median pts/obj", "in-box ratio", "ms/sweep",
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "{:<10} {:>7} {:>13.0} {:>13.1} {:>16.0} {:>14.2} {:>10.1}  {}",
            s.platform.as_str(),
            s.sweeps,
            s.points_per_sweep,
            s.objects_per_sweep,
            s.median_points_per_object,
            s.points_in_box_ratio,
            s.ms_per_sweep,
            s.path_taken
        );
    }
    let _ = writeln!(
        out,
        "ground truth (JSON lines, `boxlayer eval --gt FILE --pred FILE` reads it):"
    );
    for s in summaries {
        let _ = writeln!(out, "  {}", s.ground_truth_path.display());
    }
    let _ = writeln!(
        out,
        "\nconsolidation: {} sweeps per platform, three modelled detectors (sim::standard_detector_profiles) \
         -> KDE box fusion (pipelines/fusion.toml) -> offline tracking; BEV AP R40 vehicle@0.7 / pedestrian@0.5",
        options.consolidation_frames
    );
    let _ = writeln!(
        out,
        "{:<10} {:>28} {:>14} {:>14} {:>10} {:>12}",
        "platform", "best single detector", "fused", "consolidated", "veh MOTA", "veh IDS/GT"
    );
    let ap = |v: &VehiclePedestrianAp| {
        let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{:.1}", 100.0 * x));
        format!("{} / {}", pct(v[0]), pct(v[1]))
    };
    for c in consolidations {
        let _ = writeln!(
            out,
            "{:<10} {:>28} {:>14} {:>14} {:>10} {:>12}",
            c.platform.as_str(),
            format!("{} {}", c.best_single.0, ap(&c.best_single.1)),
            ap(&c.fused),
            ap(&c.consolidated),
            c.vehicle_mota.map_or_else(|| "-".to_string(), |m| format!("{m:.3}")),
            format!("{}/{}", c.vehicle_id_switches, c.vehicle_gt_tracks),
        );
    }
    let _ = writeln!(
        out,
        "consolidated boxes (JSON lines, with track ids) and the truth they were scored against:"
    );
    for c in consolidations {
        let _ = writeln!(out, "  {}", c.consolidated_path.display());
        let _ = writeln!(out, "  {}", c.truth_path.display());
    }
    out
}
