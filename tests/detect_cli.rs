//! `boxlayer detect --detector DIR FILE.bin --json -` prints the detector's boxes as JSON lines,
//! the detections format `fuse` and `eval` read.

use std::path::Path;
use std::process::Command;

#[test]
fn detect_subcommand_exports_the_decoded_boxes_as_json() {
    let dir = std::env::temp_dir().join(format!("boxlayer-detect-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sweep = dir.join("000000.bin");
    let points: [[f32; 4]; 2] = [[1.0, 0.5, -1.0, 0.2], [4.2, -2.0, 0.0, 0.7]];
    let bytes: Vec<u8> = points.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&sweep, bytes).unwrap();
    let detector = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/detect/center_nhwc");
    let out = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["detect", "--detector"])
        .arg(&detector)
        .arg(&sweep)
        .args(["--frame", "0", "--json", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // One JSON line per box: the detections format, boxes as DESIGN.md's 9 values.
    let text = String::from_utf8(out.stdout).unwrap();
    let detections: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // tests/fixtures/detect/boxes.json: car, pedestrian, cyclist in score order.
    let classes: Vec<&str> = detections.iter().map(|d| d["class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["vehicle", "pedestrian", "cyclist"]);
    for d in &detections {
        assert_eq!(d["box"].as_array().unwrap().len(), 9, "{d}");
        assert_eq!(
            (d["frame"].as_u64(), d["detector"].as_str()),
            (Some(0), Some("center_nhwc"))
        );
        assert!(d["sequence"].is_string());
    }
    assert!((detections[0]["box"][0].as_f64().unwrap() - 1.234).abs() < 1e-3);

    // `--detector` also takes the manifest path itself, to the same boxes.
    let by_manifest = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["detect", "--detector"])
        .arg(detector.join("detector.toml"))
        .arg(&sweep)
        .args(["--json", "-"])
        .output()
        .unwrap();
    assert!(
        by_manifest.status.success(),
        "{}",
        String::from_utf8_lossy(&by_manifest.stderr)
    );
    assert_eq!(String::from_utf8(by_manifest.stdout).unwrap(), text);

    // The same file is the input of `fuse` and a prediction list for `eval`.
    let lines = dir.join("detections.jsonl");
    std::fs::write(&lines, &text).unwrap();
    let fused = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["fuse", "--platform", "vehicle", "--out", "-", "--config"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/base.toml"))
        .arg(&lines)
        .output()
        .unwrap();
    assert!(fused.status.success(), "{}", String::from_utf8_lossy(&fused.stderr));
    assert_eq!(String::from_utf8_lossy(&fused.stdout).lines().count(), 3);
    let eval = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["eval", "--json", "-", "--gt"])
        .arg(&lines)
        .arg("--pred")
        .arg(&lines)
        .output()
        .unwrap();
    assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
    let report: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    assert_eq!(report["num_pred_boxes"], 3);

    let bad = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["detect", "--detector"])
        .arg(&detector)
        .arg(dir.join("missing.bin"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.bin"));
}

/// `detect --frames A..B` runs every frame of a range with one detector load: each good frame's
/// boxes under its own index, a frame that does not decode skipped with a warning naming it.
#[test]
fn detect_frames_runs_a_range_and_skips_a_bad_frame() {
    let dir = tempfile::tempdir().unwrap();
    let sweeps = dir.path().join("velodyne");
    std::fs::create_dir(&sweeps).unwrap();
    let point: Vec<u8> = [1.0f32, 0.5, -1.0, 0.2].iter().flat_map(|v| v.to_le_bytes()).collect();
    for name in ["000000.bin", "000001.bin", "000003.bin"] {
        std::fs::write(sweeps.join(name), &point).unwrap();
    }
    std::fs::write(sweeps.join("000002.bin"), [0u8; 17]).unwrap();
    let detector = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/detect/center_nhwc");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .args(["detect", "--detector"])
            .arg(&detector)
            .arg(&sweeps)
            .args(["--frames", "0..10"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("000002.bin"));
    let frames: std::collections::BTreeSet<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["frame"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(frames.into_iter().collect::<Vec<_>>(), [0, 1, 3]);
    let out = run(&[]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.lines().all(|l| l.starts_with("center_nhwc: frame ")), "{table}");
}

/// A detector trained in the normalized frame (`input_frame = "normalized"`) needs the log's
/// platform profile; with it, `detect` gives the boxes `boxlayer run` detects on the same frames
/// (each frame gravity-aligned by its own estimate, boxes back in the sensor frame), level in
/// the simulator's true gravity frame.
#[test]
fn a_normalized_frame_detector_takes_the_platform_profile_and_detects_as_the_pipeline_does() {
    use boxlayer::Platform;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let log = boxlayer::demo::simulate_log(Platform::Drone, 2, 44, &tmp.path().join("log")).unwrap();
    let detector = repo.join("detectors/centerpoint_pillar_v2");
    let detect = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .args(["detect", "--detector"])
            .arg(&detector)
            .arg(&log.path)
            .args(["--frames", "0..2", "--json", "-"])
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = detect(&[]);
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        text.contains("centerpoint_pillar_v2") && text.contains("input_frame") && text.contains("--profile"),
        "{text}"
    );
    // `--no-normalize` gives the points as read (they are tilted ~40° here, so the boxes are
    // level in the sensor frame, not in the true gravity frame as below).
    let as_read = detect(&["--no-normalize"]);
    assert!(as_read.status.success(), "{}", String::from_utf8_lossy(&as_read.stderr));
    for l in String::from_utf8(as_read.stdout).unwrap().lines() {
        let d: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(
            (d["box"][7].as_f64(), d["box"][8].as_f64()),
            (Some(0.0), Some(0.0)),
            "{d}"
        );
    }

    let out = detect(&["--profile", "m3ed_drone"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());

    let config = boxlayer::pipeline::PipelineConfig::load(&repo.join("pipelines/demo.toml")).unwrap();
    let summary = boxlayer::pipeline::run(&boxlayer::pipeline::RunOptions {
        input: Some(log.path.clone()),
        platform: Some(Platform::Drone),
        ..boxlayer::pipeline::RunOptions::new(config, tmp.path().join("out"))
    })
    .unwrap();
    let rows = boxlayer::shards::read_detection_rows(&summary.sequences[0].dir.join("detections.parquet")).unwrap();
    let mut ran: Vec<(i64, [f64; 9])> = rows
        .iter()
        .filter(|r| r.detector == "centerpoint_pillar_v2")
        .map(|r| (r.frame_index, r.box_sensor))
        .collect();
    let mut detected: Vec<(i64, [f64; 9])> = lines
        .iter()
        .map(|l| {
            let b: Vec<f64> = l["box"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            (l["frame"].as_i64().unwrap(), b.try_into().unwrap())
        })
        .collect();
    let order = |a: &(i64, [f64; 9]), b: &(i64, [f64; 9])| a.0.cmp(&b.0).then(a.1[0].total_cmp(&b.1[0]));
    ran.sort_by(order);
    detected.sort_by(order);
    assert_eq!(ran.len(), detected.len());
    for (r, d) in ran.iter().zip(&detected) {
        assert_eq!(r.0, d.0);
        assert!(
            r.1.iter().zip(&d.1).all(|(a, b)| (a - b).abs() < 1e-6),
            "{r:?} vs {d:?}"
        );
    }

    // Level in the simulator's true gravity frame: the sensor pitched 25–55° down, the boxes
    // upright within the per-frame estimate's error.
    let sim = boxlayer::sim::Simulator::new(
        boxlayer::sim::SimConfig {
            frames: 2,
            ..boxlayer::sim::SimConfig::default()
        },
        Platform::Drone,
        44,
    )
    .unwrap();
    for (frame, b) in &detected {
        let start = sim.config().start_time_micros + frame * boxlayer::sim::SWEEP_PERIOD_MICROS;
        let up = sim
            .world_from_sensor_at(start + boxlayer::sim::SWEEP_PERIOD_MICROS / 2)
            .rotation
            .inverse()
            * nalgebra::Vector3::z();
        let box_up = boxlayer::geometry::Box3::from_array(*b).rotation() * nalgebra::Vector3::z();
        let tilt = boxlayer::normalize::angle_between(&box_up, &up).to_degrees();
        assert!(tilt < 2.0, "frame {frame}: box {tilt:.2}° off the true vertical");
    }
}
