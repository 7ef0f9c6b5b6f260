//! `boxlayer eval` end to end: runs the built binary on the fixtures in `tests/fixtures/eval/`
//! and checks the numbers in the JSON it writes against values worked out by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use approx::assert_abs_diff_eq;
use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/eval")
        .join(rel)
}

fn run_eval(args: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .arg("eval")
        .args(args)
        .arg("--json")
        .arg(&json_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "boxlayer eval failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    (stdout, json)
}

fn detection<'a>(report: &'a Value, class: &str, iou: &str, threshold: f64) -> &'a Value {
    report["detection"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["class"] == class && d["iou_kind"] == iou && d["threshold"].as_f64() == Some(threshold))
        .unwrap_or_else(|| panic!("no {class} {iou} {threshold} result"))
}

/// 3EED layout. GT: a car (4×2×1.5 m, yaw 0) and a pedestrian on Waymo segA, and a car yawed 90° on
/// drone seqB. Predictions are axis-aligned (6 values): the segA car shifted 1 m = l/4 along x
/// (IoU 0.6), the pedestrian exact (IoU 1), the seqB car 4×2 at yaw 0 (overlap 2×2 = 4 m² of 8 + 8 − 4:
/// IoU 1/3 in BEV and 3D).
/// Grounding: Acc@0.25 = 3/3, Acc@0.5 = 2/3 (strict `>`), mIoU = (0.6 + 1 + 1/3)/3 = 29/45.
/// Detection, vehicle @0.5: TP 0.9 then FP 0.7 of 2 GT → AP 1/2 both ways; @0.7: AP 0;
/// waymo bin AP 1, drone bin AP 0. Pedestrian: AP 1. The pedestrian listed again in `others` counts once.
#[test]
fn eval_3eed_layout_writes_expected_json() {
    let gt = fixture("3eed-gt");
    let pred = fixture("3eed-pred");
    let (stdout, report) = run_eval(&[
        "--gt",
        gt.to_str().unwrap(),
        "--pred",
        pred.to_str().unwrap(),
        "--format",
        "3eed",
    ]);
    assert!(stdout.contains("grounding"), "{stdout}");
    assert!(stdout.contains("AP_R40"), "{stdout}");
    assert_eq!(report["num_gt_boxes"], 3);
    assert_eq!(report["threshold_rule"], "strict");

    let g = &report["grounding"];
    assert_eq!(g["iou"], "rotated_vs_axis_aligned_3d");
    let all = &g["summaries"][0];
    assert_eq!(all["subset"], "all");
    assert_eq!(all["num_queries"], 3);
    assert_abs_diff_eq!(all["accuracy"][0]["accuracy"].as_f64().unwrap(), 1.0, epsilon = 1e-12);
    assert_abs_diff_eq!(
        all["accuracy"][1]["accuracy"].as_f64().unwrap(),
        2.0 / 3.0,
        epsilon = 1e-12
    );
    assert_abs_diff_eq!(all["miou"].as_f64().unwrap(), 29.0 / 45.0, epsilon = 1e-9);
    let ious: Vec<f64> = g["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["iou"].as_f64().unwrap())
        .collect();
    // Sorted folder order: drone/seqB before waymo/segA.
    assert_abs_diff_eq!(ious[0], 1.0 / 3.0, epsilon = 1e-9);
    assert_abs_diff_eq!(ious[1], 0.6, epsilon = 1e-9);
    assert_abs_diff_eq!(ious[2], 1.0, epsilon = 1e-9);

    for iou in ["bev", "three_d"] {
        let v = detection(&report, "vehicle", iou, 0.5);
        assert_eq!(v["num_gt"], 2);
        assert_abs_diff_eq!(v["ap_r40"].as_f64().unwrap(), 0.5, epsilon = 1e-12);
        assert_abs_diff_eq!(v["ap_all_points"].as_f64().unwrap(), 0.5, epsilon = 1e-12);
        let bins = v["breakdowns"].as_array().unwrap();
        let platform = |name: &str| bins.iter().find(|b| b["by"] == "platform" && b["bin"] == name).unwrap();
        assert_abs_diff_eq!(
            platform("vehicle")["ap_all_points"].as_f64().unwrap(),
            1.0,
            epsilon = 1e-12
        );
        assert_abs_diff_eq!(
            platform("drone")["ap_all_points"].as_f64().unwrap(),
            0.0,
            epsilon = 1e-12
        );
        assert_eq!(detection(&report, "vehicle", iou, 0.7)["ap_r40"].as_f64(), Some(0.0));
        let p = detection(&report, "pedestrian", iou, 0.5);
        assert_eq!(p["num_gt"], 1);
        assert_abs_diff_eq!(p["ap_r40"].as_f64().unwrap(), 1.0, epsilon = 1e-12);
    }
    assert_eq!(
        report["tracking"].as_array().unwrap().len(),
        0,
        "3EED fixture has no track ids"
    );
}

/// JSON lines with tracks. Vehicle: 4 frames on the GT, predicted id 1 then 2 → 4 TP, 1 ID switch,
/// MOTA = 1 − 1/4 = 0.75, AP 1. Pedestrian: one GT, one prediction 27 m away → FP 1, FN 1,
/// MOTA = 1 − 2/1 = −1, AP 0. Format is inferred from the file.
#[test]
fn eval_jsonl_with_tracks_writes_expected_json() {
    let gt = fixture("gt.jsonl");
    let pred = fixture("pred.jsonl");
    let (stdout, report) = run_eval(&["--gt", gt.to_str().unwrap(), "--pred", pred.to_str().unwrap()]);
    assert!(stdout.contains("tracking"), "{stdout}");
    assert_abs_diff_eq!(
        detection(&report, "vehicle", "three_d", 0.7)["ap_r40"]
            .as_f64()
            .unwrap(),
        1.0,
        epsilon = 1e-12
    );
    assert_eq!(
        detection(&report, "pedestrian", "bev", 0.25)["ap_all_points"].as_f64(),
        Some(0.0)
    );
    let tracking = report["tracking"].as_array().unwrap();
    let vehicle = tracking.iter().find(|t| t["class"] == "vehicle").unwrap();
    assert_eq!(vehicle["matching"], "center_distance");
    assert_eq!(vehicle["clear_mot"]["id_switches"], 1);
    assert_eq!(vehicle["clear_mot"]["num_matches"], 4);
    assert_abs_diff_eq!(vehicle["clear_mot"]["mota"].as_f64().unwrap(), 0.75, epsilon = 1e-12);
    let pedestrian = tracking.iter().find(|t| t["class"] == "pedestrian").unwrap();
    assert_eq!(pedestrian["clear_mot"]["false_positives"], 1);
    assert_eq!(pedestrian["clear_mot"]["false_negatives"], 1);
    assert_abs_diff_eq!(pedestrian["clear_mot"]["mota"].as_f64().unwrap(), -1.0, epsilon = 1e-12);
}

/// A config file replaces the vehicle thresholds by [0.3]: both fixture cars (IoU 0.6 and 1/3)
/// now match → AP 1; only the 0.3 result exists.
#[test]
fn eval_reads_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("eval.toml");
    std::fs::write(&config, "[detection.thresholds]\nvehicle = [0.3]\n").unwrap();
    let gt = fixture("3eed-gt");
    let pred = fixture("3eed-pred");
    let (_, report) = run_eval(&[
        "--gt",
        gt.to_str().unwrap(),
        "--pred",
        pred.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let vehicle: Vec<&Value> = report["detection"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["class"] == "vehicle")
        .collect();
    assert_eq!(vehicle.len(), 2, "bev and 3d at 0.3 only");
    for v in vehicle {
        assert_eq!(v["threshold"].as_f64(), Some(0.3));
        assert_abs_diff_eq!(v["ap_all_points"].as_f64().unwrap(), 1.0, epsilon = 1e-12);
    }
    std::fs::write(&config, "[detection]\nrecal_score = 0.3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["eval", "--gt"])
        .arg(&gt)
        .arg("--pred")
        .arg(&pred)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("eval.toml") && stderr.contains("recal_score"),
        "{stderr}"
    );
}

#[test]
fn eval_reports_bad_input_with_its_path() {
    let out = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["eval", "--gt"])
        .arg(fixture("gt.jsonl"))
        .arg("--pred")
        .arg(fixture("missing.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.jsonl"), "{stderr}");
}
