//! `boxlayer export mcap` (issue 24) on layers built from simulated logs: a Waymo (vehicle)
//! sequence with cameras and a drone sequence, exported with their logs and from the shards
//! alone, read back by an independent Python reader (`tools/check_mcap_export.py`, PyPI `mcap` +
//! pyarrow) that compares channels, message counts and one frame's box poses with the shards;
//! and read back here with the `mcap` crate, a cube's size compared with its box row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use boxlayer::Platform;
use boxlayer::shards::read_box_rows;
use serde_json::Value;

#[path = "support/sim_layer.rs"]
mod sim_layer;

use sim_layer::{SimLog, run_layer, simulate_with_detections};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs the pipeline on a simulated log into `root/shards`; returns the run's output folder and
/// the sequence folder.
fn layer(sim: &SimLog, root: &Path) -> (PathBuf, PathBuf) {
    let out = root.join("shards");
    let dir = run_layer(sim, &out);
    (out, dir)
}

fn boxlayer(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "boxlayer {args:?} failed:\n{text}");
    text
}

fn check(mcap: &Path, sequence: &Path, extra: &[&str]) -> String {
    let output = Command::new("python3")
        .arg(repo("tools/check_mcap_export.py"))
        .arg(mcap)
        .arg(sequence)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install mcap, numpy and pyarrow with `make setup`"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "check_mcap_export.py failed:\n{text}");
    assert!(text.contains("check_mcap_export: ok"), "{text}");
    text
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Each topic's message count and the decoded JSON messages of `topic`, read with the `mcap` crate.
fn read_back(path: &Path, topic: &str) -> (BTreeMap<String, usize>, Vec<(u64, Value)>) {
    let bytes = std::fs::read(path).unwrap();
    let mut counts = BTreeMap::new();
    let mut messages = Vec::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        *counts.entry(m.channel.topic.clone()).or_default() += 1;
        assert_eq!(m.channel.message_encoding, "json");
        if m.channel.topic == topic {
            messages.push((m.log_time, serde_json::from_slice(&m.data).unwrap()));
        }
    }
    (counts, messages)
}

#[test]
fn mcap_exports_read_back_with_the_shards_channels_counts_and_box_poses() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // The two simulations (the slow part) side by side.
    let (vehicle_sim, drone_sim) = std::thread::scope(|scope| {
        let vehicle = scope.spawn(|| simulate_with_detections(Platform::Vehicle, 81, 4, root));
        let drone = simulate_with_detections(Platform::Drone, 82, 8, root);
        (vehicle.join().unwrap(), drone)
    });
    let (shards, vehicle_dir) = layer(&vehicle_sim, root);
    let (_, drone_dir) = layer(&drone_sim, root);
    let (vehicle_log, drone_log) = (vehicle_sim.log, drone_sim.log);

    // Waymo with its log: cameras, points from the log, sensor frame.
    let vehicle = root.join("vehicle.mcap");
    let text = boxlayer(&["export", "mcap", s(&vehicle_dir), s(&vehicle), "--log", s(&vehicle_log)]);
    assert!(text.contains("/lidar/points: 4 messages"), "{text}");
    assert!(vehicle.is_file() && !root.join("vehicle.mcap.partial").exists());
    let report = check(
        &vehicle,
        &vehicle_dir,
        &["--expect-log", "yes", "--expect-frame", "sensor"],
    );
    assert!(report.contains("points from log"), "{report}");

    // Independently of the Python reader: one cube's size and centre are its box row's, and the
    // file holds images of the simulated Waymo cameras.
    let (counts, updates) = read_back(&vehicle, "/boxes");
    assert_eq!(counts["/boxes"], 4);
    assert!(
        counts
            .keys()
            .any(|t| t.starts_with("/camera/") && t.ends_with("/image")),
        "{counts:?}"
    );
    let rows = read_box_rows(&vehicle_dir.join("boxes.parquet")).unwrap();
    let row = rows.iter().max_by_key(|b| b.frame_index).unwrap();
    let (_, update) = updates
        .iter()
        .find(|(t, _)| *t == row.timestamp_us as u64 * 1000)
        .unwrap();
    let track_id = row.track_id.to_string();
    let entity = update["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"].as_str() == Some(track_id.as_str()))
        .unwrap();
    let cube = &entity["cubes"][0];
    for (axis, k) in [("x", 3), ("y", 4), ("z", 5)] {
        approx::assert_abs_diff_eq!(cube["size"][axis].as_f64().unwrap(), row.box_sensor[k], epsilon = 1e-9);
    }
    for (axis, k) in [("x", 0), ("y", 1), ("z", 2)] {
        approx::assert_abs_diff_eq!(
            cube["pose"]["position"][axis].as_f64().unwrap(),
            row.box_sensor[k],
            epsilon = 1e-9
        );
    }
    assert_eq!(entity["frame_id"], "sensor");
    assert!(
        entity["texts"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with(&format!("#{}", row.track_id))
    );

    // Drone in the normalized frame from a run folder holding two sequences: one is chosen.
    let drone_name = drone_dir.file_name().unwrap().to_str().unwrap().to_string();
    let drone = root.join("drone.mcap");
    boxlayer(&[
        "export",
        "mcap",
        s(&shards),
        s(&drone),
        "--sequences",
        &drone_name,
        "--log",
        s(&drone_log),
        "--frame",
        "normalized",
    ]);
    check(
        &drone,
        &drone_dir,
        &["--expect-log", "yes", "--expect-frame", "normalized", "--frame", "3"],
    );

    // Both sequences from the shards alone: a folder of `<platform>/<sequence>.mcap`, stored points.
    let both = root.join("both");
    let text = boxlayer(&["export", "mcap", s(&shards), s(&both), "--without-log"]);
    assert!(text.contains("2 sequences"), "{text}");
    for dir in [&vehicle_dir, &drone_dir] {
        let platform = dir.parent().unwrap().file_name().unwrap().to_str().unwrap();
        let name = dir.file_name().unwrap().to_str().unwrap();
        let file = both.join(platform).join(format!("{name}.mcap"));
        let report = check(&file, dir, &["--expect-log", "no"]);
        assert!(report.contains("points from stored"), "{report}");
        let (counts, _) = read_back(&file, "/boxes");
        assert!(!counts.keys().any(|t| t.starts_with("/camera/")), "{counts:?}");
    }
}

#[test]
fn a_missing_sequence_name_fails_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let sim = simulate_with_detections(Platform::Drone, 83, 2, root);
    let (shards, _) = layer(&sim, root);
    let out = root.join("x.mcap");
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args([
            "export",
            "mcap",
            s(&shards),
            s(&out),
            "--sequences",
            "nope",
            "--without-log",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("nope"));
    assert!(!out.exists() && !root.join("x.mcap.partial").exists());
}
