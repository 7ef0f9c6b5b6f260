//! `boxlayer demo`: the product on data it makes itself. It simulates a short vehicle, drone and
//! quadruped sequence in their real formats (a Waymo v1 segment with rendered camera images and
//! laser labels; M3ED `_data.h5` / `_pose_gt.h5` with RGB) under `<out>/logs/`, runs the whole
//! pipeline on them with the bundled ONNX detectors (`pipelines/demo.toml`) into
//! `<out>/shards/<platform>/<sequence>/`, prints each step's quality against the simulator's
//! truth (every single detector, the fused boxes (KBF and WBF), the consolidated layer) and writes
//! the HTML report `<out>/report.html`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::eval::EvalError;
use crate::export::LogLocation;
use crate::frame::Platform;
use crate::pipeline::{PipelineConfig, PipelineError, RunOptions, RunSummary};
use crate::report::{ReportError, ReportOptions, ReportSummary, write_report};
use crate::sim::{SimConfig, SimWriteError, WaymoWriteError, WaymoWriteOptions, simulate_m3ed, simulate_waymo_with};

/// The demo's pipeline config, read from the repository the binary was built from.
pub const DEMO_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/pipelines/demo.toml");

/// Errors from the demo.
#[derive(Debug, Error)]
pub enum DemoError {
    /// A simulated sequence could not be written as M3ED files.
    #[error("simulate {platform}")]
    Sim {
        /// The platform being simulated.
        platform: Platform,
        /// The writer's error.
        source: SimWriteError,
    },
    /// The simulated vehicle sequence could not be written as a Waymo segment.
    #[error("simulate vehicle")]
    SimWaymo(#[from] WaymoWriteError),
    /// The pipeline failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// The truth could not be read back.
    #[error("read the simulated truth")]
    Truth(#[from] EvalError),
    /// The HTML report could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// What the demo runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOptions {
    /// Sweeps per platform (default 40).
    pub frames: usize,
    /// Simulator seed (default 7).
    pub seed: u64,
    /// Output folder (default `demo-out`): `logs/` and `shards/` inside.
    pub out: PathBuf,
    /// The pipeline config (default [`DEMO_CONFIG`]).
    pub config: PathBuf,
    /// Show progress bars on a terminal.
    pub progress: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            frames: 40,
            seed: 7,
            out: PathBuf::from("demo-out"),
            config: PathBuf::from(DEMO_CONFIG),
            progress: false,
        }
    }
}

/// One simulated log and its truth.
#[derive(Debug, Clone)]
pub struct SimulatedLog {
    /// The platform.
    pub platform: Platform,
    /// The log (`.tfrecord` or `_data.h5`).
    pub path: PathBuf,
    /// Its ground truth (JSON lines, sensor-frame boxes).
    pub truth: PathBuf,
}

/// Simulates `frames` sweeps of `platform` into `dir` in the platform's real format.
pub fn simulate_log(platform: Platform, frames: usize, seed: u64, dir: &Path) -> Result<SimulatedLog, DemoError> {
    let config = SimConfig::default();
    match platform {
        Platform::Vehicle => {
            let written = simulate_waymo_with(config, &WaymoWriteOptions::default(), frames, seed, dir)?;
            Ok(SimulatedLog {
                platform,
                path: written.segment_path,
                truth: written.truth_path,
            })
        }
        _ => {
            let written = simulate_m3ed(config, platform, frames, seed, dir)
                .map_err(|source| DemoError::Sim { platform, source })?;
            Ok(SimulatedLog {
                platform,
                path: written.data_path,
                truth: written.truth_path,
            })
        }
    }
}

/// Runs the demo and returns its report as text.
pub fn run(options: &DemoOptions) -> Result<String, DemoError> {
    let config = PipelineConfig::load(&options.config).map_err(PipelineError::from)?;
    let mut runs = Vec::new();
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        let log = simulate_log(
            platform,
            options.frames,
            options.seed,
            &options.out.join("logs").join(platform.as_str()),
        )?;
        let summary = crate::pipeline::run(&RunOptions {
            data_root: options.out.join("logs"),
            input: Some(log.path.clone()),
            platform: Some(platform),
            truth: Some(log.truth.clone()),
            progress: options.progress,
            ..RunOptions::new(config.clone(), options.out.join("shards"))
        })?
        .into_complete()?;
        runs.push((log, summary));
    }
    let report = write_report(
        &options.out.join("shards"),
        &options.out.join("report.html"),
        &ReportOptions {
            log: LogLocation::DataRoot(options.out.join("logs")),
            ..ReportOptions::default()
        },
    )?;
    Ok(render(&runs, &report, options))
}

fn render(runs: &[(SimulatedLog, RunSummary)], report: &ReportSummary, options: &DemoOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "boxlayer demo: {} sweeps per platform, seed {}, config {}",
        options.frames,
        options.seed,
        options.config.display()
    );
    let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{:.1}", 100.0 * v));
    let _ = writeln!(
        out,
        "\nquality against the simulator's truth, BEV AP R40 vehicle@0.7 / pedestrian@0.5:"
    );
    let _ = writeln!(
        out,
        "{:<10} {:>34} {:>13} {:>13} {:>13} {:>9} {:>8}",
        "platform", "best single detector", "fused (KBF)", "fused (WBF)", "consolidated", "veh MOTA", "IDS/GT"
    );
    for (log, summary) in runs {
        for s in &summary.sequences {
            let Some(sc) = &s.scores else {
                continue;
            };
            let pair = |a: &crate::pipeline::ClassAp| format!("{} / {}", pct(a.vehicle), pct(a.pedestrian));
            let best = sc
                .best_single
                .as_ref()
                .and_then(|n| sc.detectors.get(n).map(|ap| format!("{n} {}", pair(ap))))
                .unwrap_or_else(|| "-".to_string());
            let _ = writeln!(
                out,
                "{:<10} {:>34} {:>13} {:>13} {:>13} {:>9} {:>8}",
                log.platform.as_str(),
                best,
                pair(&sc.fused),
                pair(&sc.fused_wbf),
                pair(&sc.consolidated),
                sc.vehicle_mota.map_or_else(|| "-".to_string(), |m| format!("{m:.3}")),
                format!("{}/{}", sc.vehicle_id_switches, sc.vehicle_gt_tracks)
            );
        }
    }
    let _ = writeln!(
        out,
        "\nshards (`boxlayer eval --format shards`, pyarrow, DuckDB read them):"
    );
    for (_, summary) in runs {
        let _ = write!(out, "{summary}");
        for s in &summary.sequences {
            let _ = writeln!(out, "  {}", s.dir.display());
        }
    }
    let _ = writeln!(out, "logs and their truth: {}", options.out.join("logs").display());
    let _ = writeln!(
        out,
        "report (statistics, plots, {} flagged boxes shown): {}",
        report.gallery,
        report.path.display()
    );
    out
}
