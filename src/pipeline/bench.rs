//! `boxlayer bench`: the pipeline's speed against its ONNX-bound limit. It simulates a vehicle
//! log, runs the whole pipeline on it (wall time), then runs only the detectors on the same
//! sweeps with the same threads and sums the time spent inside their ONNX sessions; the limit is
//! that sum spread over the threads. The ratio says how much boxlayer's own stages (reading,
//! pillars, decoding, fusion, tracking, box rows, Parquet) add to the networks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::{LoadedConfig, PipelineError, RunOptions, RunSummary, load_detectors, run};
use crate::frame::Platform;

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The pipeline config (its detectors are timed).
    pub config: LoadedConfig,
    /// The simulated log (a vehicle Waymo segment).
    pub log: PathBuf,
    /// Where the shards go.
    pub out: PathBuf,
}

/// The bench's figures.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// The pipeline run.
    pub run: RunSummary,
    /// Sweeps.
    pub frames: usize,
    /// Threads of both runs.
    pub threads: usize,
    /// Wall time of the pipeline (s).
    pub pipeline_s: f64,
    /// ONNX session time summed over sweeps and detectors in the detectors-only run (s).
    pub onnx_cpu_s: f64,
    /// Wall time of the detectors-only run (s).
    pub detectors_only_s: f64,
    /// With `stages.camera_check` on: the same pipeline run with the check off (wall time, s).
    pub without_camera_check_s: Option<f64>,
}

impl BenchReport {
    /// The ONNX-bound limit: the ONNX time spread over the threads (s).
    pub fn onnx_bound_s(&self) -> f64 {
        self.onnx_cpu_s / self.threads.max(1) as f64
    }
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} sweeps, {} threads", self.frames, self.threads)?;
        writeln!(
            f,
            "pipeline wall time          {:>8.2} s  ({:.2} sweeps/s)",
            self.pipeline_s,
            self.frames as f64 / self.pipeline_s.max(1e-9)
        )?;
        writeln!(
            f,
            "detectors only, wall time   {:>8.2} s  (pillars, ONNX, decoding on sweeps held in memory)",
            self.detectors_only_s
        )?;
        writeln!(
            f,
            "ONNX sessions, summed       {:>8.2} s  -> ONNX-bound limit {:.2} s",
            self.onnx_cpu_s,
            self.onnx_bound_s()
        )?;
        writeln!(
            f,
            "pipeline / ONNX-bound limit {:>8.3}",
            self.pipeline_s / self.onnx_bound_s().max(1e-9)
        )?;
        if let Some(off) = self.without_camera_check_s {
            writeln!(
                f,
                "RGB class check             {:>8.2} s in its pass; pipeline {:.2} s with it, {:.2} s without: +{:.1} %",
                self.run.camera_s,
                self.pipeline_s,
                off,
                100.0 * (self.pipeline_s / off.max(1e-9) - 1.0)
            )?;
        }
        Ok(())
    }
}

/// Runs the bench.
pub fn bench(options: &BenchOptions) -> Result<BenchReport, PipelineError> {
    let config = &options.config.config;
    let threads = if config.runtime.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        config.runtime.threads
    };
    let run_with = |config: LoadedConfig, out: PathBuf| -> Result<(RunSummary, f64), PipelineError> {
        let started = Instant::now();
        let summary = run(&RunOptions {
            input: Some(options.log.clone()),
            platform: Some(Platform::Vehicle),
            ..RunOptions::new(config, out)
        })?
        .into_complete()?;
        Ok((summary, started.elapsed().as_secs_f64()))
    };
    let (summary, pipeline_s) = run_with(options.config.clone(), options.out.clone())?;
    // With the RGB check on, the same run without it says what the check adds.
    let without_camera_check_s = if config.stages.camera_check {
        let mut off = options.config.clone();
        off.config.stages.camera_check = false;
        Some(run_with(off, options.out.join("without-camera-check"))?.1)
    } else {
        None
    };

    // The same sweeps, read into memory first, through the detectors alone.
    let reader_options = config
        .reader_options(&options.config.path)
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let source = crate::sources::open(&options.log, None, &reader_options)?;
    let clouds = (0..source.len())
        .map(|i| source.frame(i).map(|f| f.cloud))
        .collect::<Result<Vec<_>, _>>()?;
    let loaded = load_detectors(&options.config, threads)?;
    let detectors: Vec<&crate::detect::Detector> = loaded
        .iter()
        .zip(&config.detectors)
        .filter(|(_, entry)| entry.runs_on(Platform::Vehicle))
        .map(|(d, _)| d)
        .collect();
    let pool = super::sequence::thread_pool(threads)?;
    let started = Instant::now();
    let onnx: Result<Vec<Duration>, PipelineError> = pool.install(|| {
        clouds
            .par_iter()
            .enumerate()
            .map(|(i, cloud)| {
                let mut onnx = Duration::ZERO;
                for d in detectors.iter() {
                    let (_, t) = d.detect_timed(cloud).map_err(|source| PipelineError::Detect {
                        sequence: source_name(&options.log),
                        frame: i as i64,
                        source: Box::new(source),
                    })?;
                    onnx += t.onnx();
                }
                Ok(onnx)
            })
            .collect()
    });
    let detectors_only_s = started.elapsed().as_secs_f64();
    let onnx_cpu_s = onnx?.iter().map(Duration::as_secs_f64).sum();
    Ok(BenchReport {
        frames: clouds.len(),
        run: summary,
        threads,
        pipeline_s,
        onnx_cpu_s,
        detectors_only_s,
        without_camera_check_s,
    })
}

fn source_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
