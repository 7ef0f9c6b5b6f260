//! A finished sequence folder built from a simulated log, with the simulator's truth as the
//! detections (no ONNX: the tests using it read layers, they do not judge detectors).

use std::path::{Path, PathBuf};

use boxlayer::Platform;
use boxlayer::demo::simulate_log;
use boxlayer::pipeline::{PipelineConfig, RunOptions, run};
use serde_json::{Value, json};

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

/// Simulates `frames` sweeps of `platform` under `<root>/logs/<platform>/` and runs
/// `pipelines/demo.toml` on them into `<root>/shards`, the truth standing in for detections.
pub fn sim_layer(platform: Platform, seed: u64, frames: usize, root: &Path) -> SimLayer {
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
    let out = root.join("shards");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/demo.toml");
    let options = RunOptions {
        data_root: data_root.clone(),
        input: Some(log.path.clone()),
        platform: Some(platform),
        detections: Some(detections),
        ..RunOptions::new(PipelineConfig::load(&config).unwrap(), out.clone())
    };
    let summary = run(&options).unwrap();
    SimLayer {
        out,
        sequence: summary.sequences[0].dir.clone(),
        data_root,
        log: log.path,
        truth: log.truth,
    }
}
