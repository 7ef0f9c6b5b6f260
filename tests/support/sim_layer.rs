//! Finished sequence folders built from simulated logs, with the simulator's truth as the
//! detections (no ONNX: the tests using them read layers, they do not judge detectors).

use std::path::{Path, PathBuf};

use boxlayer::Platform;
use boxlayer::demo::simulate_log;
use boxlayer::pipeline::{PipelineConfig, RunOptions, run};
use serde_json::{Value, json};

/// A simulated log and its truth as detections.
#[allow(dead_code)]
pub struct SimLog {
    /// The platform.
    pub platform: Platform,
    /// The data root (`<root>/logs`); the log lies in `<platform>/` under it.
    pub data_root: PathBuf,
    /// The log.
    pub log: PathBuf,
    /// The simulator's truth (JSON lines, sensor frame).
    pub truth: PathBuf,
    /// The truth as detections of a detector called `truth`, score 0.9 (JSON lines).
    pub detections: PathBuf,
}

/// The folders of one simulated layer.
#[allow(dead_code)]
pub struct SimLayer {
    /// The run's output root (`<root>/shards`).
    pub out: PathBuf,
    /// The sequence folder.
    pub sequence: PathBuf,
    /// The run's data root (`<root>/logs`); the manifest's source is relative to it.
    pub data_root: PathBuf,
    /// The log.
    pub log: PathBuf,
    /// The simulator's truth (JSON lines, sensor frame).
    pub truth: PathBuf,
}

/// Simulates `frames` sweeps of `platform` under `<root>/logs/<platform>/` and writes its truth
/// as detections.
pub fn simulate_with_detections(platform: Platform, seed: u64, frames: usize, root: &Path) -> SimLog {
    let data_root = root.join("logs");
    let log = simulate_log(platform, frames, seed, &data_root.join(platform.as_str())).unwrap();
    let mut text = String::new();
    for line in std::fs::read_to_string(&log.truth).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let detection = json!({"sequence": v["sequence"], "frame": v["frame"], "box": v["box"],
            "class": v["class"], "score": 0.9, "detector": "truth"});
        text.push_str(&format!("{detection}\n"));
    }
    let detections = root.join(format!("{platform}_detections.jsonl"));
    std::fs::write(&detections, text).unwrap();
    SimLog {
        platform,
        data_root,
        log: log.path,
        truth: log.truth,
        detections,
    }
}

/// Runs `pipelines/demo.toml` on a simulated log into `out`; returns the sequence folder.
pub fn run_layer(sim: &SimLog, out: &Path) -> PathBuf {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/demo.toml");
    let options = RunOptions {
        data_root: sim.data_root.clone(),
        input: Some(sim.log.clone()),
        platform: Some(sim.platform),
        detections: Some(sim.detections.clone()),
        ..RunOptions::new(PipelineConfig::load(&config).unwrap(), out.to_path_buf())
    };
    run(&options).unwrap().sequences[0].dir.clone()
}

/// Simulates `platform` under `<root>/logs` and runs the pipeline on it into `<root>/shards`.
#[allow(dead_code)]
pub fn sim_layer(platform: Platform, seed: u64, frames: usize, root: &Path) -> SimLayer {
    let sim = simulate_with_detections(platform, seed, frames, root);
    let out = root.join("shards");
    let sequence = run_layer(&sim, &out);
    SimLayer {
        out,
        sequence,
        data_root: sim.data_root,
        log: sim.log,
        truth: sim.truth,
    }
}
