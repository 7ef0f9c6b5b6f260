//! `boxlayer bench`: the pipeline's speed against its ONNX-bound limit. It simulates a vehicle
//! log, runs the whole pipeline on it (wall time), then runs only the detectors on the same
//! sweeps, each detector given the points the pipeline gave it (sensor or normalized frame), with
//! the same threads, and sums the time spent inside their ONNX sessions; the limit is that sum
//! spread over the threads. The detectors-only boxes are compared with the run's
//! `detections.parquet`, which shows that both runs fed the networks the same tensors. The ratio
//! says how much boxlayer's own stages (reading, pillars, decoding, fusion, tracking, box rows,
//! Parquet) add to the networks.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::sequence::{detect_frame, normalized_cloud};
use super::{
    LoadedConfig, PipelineError, RunOptions, RunSummary, detector_views, load_detectors, run, sequence_detectors,
};
use crate::boxes::Detection;
use crate::frame::{DetectorFrame, Platform};
use crate::normalize::{FrameInputs, normalize_frame};
use crate::shards::read_detection_rows;

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
    /// Raw boxes of the pipeline run (rows of its `detections.parquet`).
    pub pipeline_boxes: usize,
    /// Boxes of the detectors-only run.
    pub detectors_only_boxes: usize,
    /// Whether the detectors-only run found exactly the pipeline's raw boxes (frame, detector,
    /// class, score and box bit for bit, in order).
    pub same_boxes: bool,
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
            "raw boxes                   {:>8}    in the pipeline, {} detectors only: {}",
            self.pipeline_boxes,
            self.detectors_only_boxes,
            if self.same_boxes {
                "the same, bit for bit"
            } else {
                "they differ (the two runs did not feed the networks the same points)"
            }
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
        writeln!(
            f,
            "pipeline / detectors only   {:>8.3}    (what boxlayer adds to the detectors' own runs)",
            self.pipeline_s / self.detectors_only_s.max(1e-9)
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
    let reader_options = config
        .reader_options(&options.config.path)
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let source = crate::sources::open(&options.log, None, &reader_options)?;
    let run_with = |config: LoadedConfig, out: PathBuf| -> Result<(RunSummary, f64), PipelineError> {
        // A finished folder of an earlier bench would be replaced, and removed, inside the run:
        // it goes before the clock starts, so every bench times a run into an empty folder.
        let dir = out.join(Platform::Vehicle.as_str()).join(&source.meta().name);
        if matches!(super::resume::on_disk(&dir), super::resume::OnDisk::Finished(_)) {
            std::fs::remove_dir_all(&dir).map_err(|source| PipelineError::Io {
                path: dir.clone(),
                source,
            })?;
        }
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

    // The same sweeps through the detectors alone, each given the points the pipeline gave it:
    // in the sensor frame, or moved into the sweep's normalized frame, prepared before the clock
    // starts so that only the detectors run inside it.
    let profile = config
        .normalization_profile(&options.config.path, Platform::Vehicle, source.meta().source_kind)
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let profile = profile.as_ref().map(|l| &l.profile);
    let run_options = RunOptions {
        input: Some(options.log.clone()),
        platform: Some(Platform::Vehicle),
        ..RunOptions::new(options.config.clone(), options.out.clone())
    };
    let frames: Vec<DetectorFrame> = detector_views(&run_options, Platform::Vehicle, profile)?
        .iter()
        .map(|v| v.frame)
        .collect();
    let loaded = load_detectors(&options.config, threads)?;
    let detectors = sequence_detectors(config, &loaded, &frames, Platform::Vehicle, profile);
    let sweeps = (0..source.len())
        .map(|i| {
            let frame = source.frame(i)?;
            let normalized = profile.map(|p| normalize_frame(&FrameInputs::from_frame(&frame, p), p));
            let moved = normalized.and_then(|n| normalized_cloud(&detectors, &frame.cloud, &n).map(|moved| (n, moved)));
            Ok((frame.index as i64, frame.cloud, moved))
        })
        .collect::<Result<Vec<_>, PipelineError>>()?;
    let pool = super::sequence::thread_pool(threads)?;
    let started = Instant::now();
    let found: Result<Vec<(Vec<Detection>, Duration)>, PipelineError> = pool.install(|| {
        sweeps
            .par_iter()
            .map(|(index, cloud, moved)| {
                detect_frame(&detectors, cloud, moved.as_ref().map(|(n, c)| (n, c))).map_err(|source| {
                    PipelineError::Detect {
                        sequence: source_name(&options.log),
                        frame: *index,
                        source: Box::new(source),
                    }
                })
            })
            .collect()
    });
    let detectors_only_s = started.elapsed().as_secs_f64();
    let found = found?;
    let onnx_cpu_s = found.iter().map(|(_, t)| t.as_secs_f64()).sum();
    let stored = summary
        .sequences
        .iter()
        .map(|s| read_detection_rows(&s.dir.join("detections.parquet")))
        .collect::<Result<Vec<_>, _>>()?
        .concat();
    let detectors_only: Vec<(i64, &Detection)> = sweeps
        .iter()
        .zip(&found)
        .flat_map(|((index, _, _), (boxes, _))| boxes.iter().map(move |d| (*index, d)))
        .collect();
    let same_boxes = stored.len() == detectors_only.len()
        && stored.iter().zip(&detectors_only).all(|(row, (index, d))| {
            row.frame_index == *index
                && row.detector == d.detector
                && row.class == d.class.as_str()
                && row.score.to_bits() == d.score.to_bits()
                && row.box_sensor.map(f64::to_bits) == d.box3.to_array().map(f64::to_bits)
        });
    Ok(BenchReport {
        frames: sweeps.len(),
        run: summary,
        threads,
        pipeline_s,
        onnx_cpu_s,
        detectors_only_s,
        pipeline_boxes: stored.len(),
        detectors_only_boxes: detectors_only.len(),
        same_boxes,
        without_camera_check_s,
    })
}

fn source_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
