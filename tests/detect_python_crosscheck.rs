//! Issue #25: Python onnxruntime and boxlayer give the same boxes for the same sweep, per detector.
//! Held-out simulated sweeps (seed 5000, sweep 0 of the vehicle, drone and quadruped platforms;
//! seeds from 5000 up never go into training) are written as raw float32 `x, y, z, intensity`
//! `.bin` files, run through `boxlayer detect --json`, and checked by
//! `tools/check_detector_onnx.py`, which re-implements the manifest's pillarise → encoder →
//! scatter → head → decode → NMS path with numpy and onnxruntime alone: every box on either side
//! must have one of the same class on the other within 1 mm (centre and sizes), 1e-4 rad (yaw)
//! and 1e-4 (score), for every bundled detector. A copy of boxlayer's output with one box moved
//! by 2 mm must fail the check. Fails, not skips, when python3, numpy or onnxruntime is missing
//! (`make setup`).

#[path = "../examples/support/sim_cloud.rs"]
mod sim_cloud;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use boxlayer::Platform;
use boxlayer::PointCloud;
use boxlayer::sim::{SimConfig, Simulator};
use serde_json::Value;

/// The bundled detectors checked.
const DETECTORS: [&str; 4] = [
    "centerpoint_pillar_sim",
    "pointpillars_anchor_sim",
    "centerpoint_pillar_v2",
    "centerpoint_pillar032_v2",
];
/// Held-out sweeps: platform, seed, sweep index (the drone's and quadruped's OS1 sweeps in the
/// sensor frame, intensity = reflectivity, lie outside the detectors' training domain, which
/// changes what they find, not whether both sides agree).
const SWEEPS: [(Platform, u64, usize); 3] = [
    (Platform::Vehicle, 5000, 0),
    (Platform::Drone, 5000, 0),
    (Platform::Quadruped, 5000, 0),
];
/// How far the negative check moves one of boxlayer's boxes (m): twice the tolerance.
const MOVE_M: f64 = 0.002;

/// The simulated sweep's cloud, as its source reader would give it.
fn simulated_cloud(platform: Platform, seed: u64, index: usize) -> PointCloud {
    let config = SimConfig {
        frames: index + 1,
        ..SimConfig::default()
    };
    let sim = Simulator::new(config, platform, seed).unwrap();
    let sweep = sim.sweep(index).unwrap();
    sim_cloud::sim_cloud(&sim, &sweep).unwrap()
}

/// Writes `cloud` as little-endian float32 `x, y, z, intensity` per point.
fn write_bin(path: &Path, cloud: &PointCloud) {
    let columns = [cloud.x(), cloud.y(), cloud.z(), cloud.intensity()];
    let bytes: Vec<u8> = (0..cloud.len())
        .flat_map(|i| columns.map(|c| c[i]))
        .flat_map(f32::to_le_bytes)
        .collect();
    std::fs::write(path, bytes).unwrap();
}

/// The detector folder of a bundled detector.
fn detector_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("detectors").join(name)
}

/// Runs `boxlayer detect` on the sweep and writes its boxes as JSON lines to `out`.
fn boxlayer_detect(detector: &str, sweep: &Path, out: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args([
            "detect",
            "--kind",
            "kitti-bin",
            "--fields",
            "x,y,z,intensity",
            "--detector",
        ])
        .arg(detector_dir(detector))
        .arg(sweep)
        // Both sides get the same points, whatever frame the detector was trained in.
        .arg("--no-normalize")
        .arg("--json")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "boxlayer detect --detector {detector} {}:\n{}",
        sweep.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `tools/check_detector_onnx.py` against boxlayer's JSON lines.
fn python_check(detector: &str, sweep: &Path, against: &Path) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_detector_onnx.py");
    Command::new("python3")
        .arg(&script)
        .arg("--detector")
        .arg(detector_dir(detector))
        .arg("--sweep")
        .arg(sweep)
        .arg("--against")
        .arg(against)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); install Python 3 with numpy and onnxruntime (`make setup`)")
        })
}

/// The JSON summary on the check's last line of output.
fn summary(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "no JSON summary from check_detector_onnx.py ({e}; are numpy and onnxruntime installed? `make setup`):\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A copy of boxlayer's JSON lines with the first box moved by `MOVE_M` along y.
fn move_first_box(lines: &str) -> String {
    let mut out = String::new();
    for (i, line) in lines.lines().enumerate() {
        let mut value: Value = serde_json::from_str(line).unwrap();
        if i == 0 {
            let y = value["box"][1].as_f64().unwrap();
            value["box"][1] = (y + MOVE_M).into();
        }
        out.push_str(&value.to_string());
        out.push('\n');
    }
    out
}

#[test]
fn python_onnxruntime_gives_boxlayers_boxes_on_held_out_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let mut moved_checked = false;
    for (platform, seed, index) in SWEEPS {
        let sweep = dir.path().join(format!("{}_{seed}_{index:03}.bin", platform.as_str()));
        write_bin(&sweep, &simulated_cloud(platform, seed, index));
        for detector in DETECTORS {
            let what = format!("{detector} on {} seed {seed} sweep {index}", platform.as_str());
            let boxes = dir.path().join(format!("{detector}_{}.jsonl", platform.as_str()));
            boxlayer_detect(detector, &sweep, &boxes);
            let output = python_check(detector, &sweep, &boxes);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{what}: check_detector_onnx.py exited {}:\n{stdout}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
            let result = summary(&output);
            eprintln!("{what}: {result}");
            assert!(
                result["matched"].as_u64().unwrap() > 0,
                "{what}: no boxes to compare:\n{stdout}"
            );

            // The check must fail when boxlayer's boxes are off: one box moved by twice the tolerance.
            let text = std::fs::read_to_string(&boxes).unwrap();
            if moved_checked || text.is_empty() {
                continue;
            }
            let moved = dir.path().join("moved.jsonl");
            std::fs::write(&moved, move_first_box(&text)).unwrap();
            let output = python_check(detector, &sweep, &moved);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert_eq!(output.status.code(), Some(1), "{what}, one box moved 2 mm:\n{stdout}");
            assert!(
                stdout.contains("MISMATCH: boxlayer line 1:"),
                "{what}, one box moved 2 mm: the moved box is not named:\n{stdout}"
            );
            assert_eq!(
                summary(&output)["mismatches"],
                2,
                "{what}, one box moved 2 mm:\n{stdout}"
            );
            moved_checked = true;
        }
    }
    assert!(moved_checked, "no detector found a box to move");
}
