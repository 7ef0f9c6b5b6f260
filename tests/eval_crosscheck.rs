//! Cross-check of detection AP against an independent numpy implementation
//! (`tools/eval_crosscheck.py`, issue 3 acceptance): 1,000 random axis-aligned GT boxes and about
//! as many predictions (jittered copies, misses, false boxes, tied scores, zero-point GT) are
//! written as JSON lines; both sides must agree on every AP to 1e-9. The Python side computes IoU
//! in closed form for axis-aligned boxes, so it shares nothing with the Rust geometry code.
//! Fails, not skips, when python3 or numpy is missing.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use boxlayer::eval::{self, EvalConfig, InputFormat, IouKind};
use serde_json::Value;

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

const CLASSES: [(&str, [f64; 3]); 3] = [
    ("vehicle", [4.5, 1.9, 1.6]),
    ("pedestrian", [0.8, 0.7, 1.75]),
    ("cyclist", [1.8, 0.7, 1.7]),
];

fn line(seq: &str, frame: u64, b: [f64; 6], class: &str, score: Option<f64>, points: Option<u64>) -> String {
    let mut s = format!(
        r#"{{"sequence":"{seq}","frame":{frame},"box":[{},{},{},{},{},{},0.0],"class":"{class}""#,
        b[0], b[1], b[2], b[3], b[4], b[5]
    );
    if let Some(score) = score {
        write!(s, r#","score":{score}"#).unwrap();
    }
    if let Some(points) = points {
        write!(s, r#","num_points":{points}"#).unwrap();
    }
    s.push_str("}\n");
    s
}

/// Writes 1,000 GT boxes over 40 frames of 2 sequences and their predictions.
fn write_case(dir: &Path, seed: u64) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut rng = Rng(seed);
    let (mut gt, mut pred) = (String::new(), String::new());
    for i in 0..1000u64 {
        let seq = if i % 2 == 0 { "a" } else { "b" };
        let frame = (i / 2) % 20;
        let (class, size) = CLASSES[(rng.next_u64() % 3) as usize];
        let scale = rng.uniform(0.85, 1.15);
        let b = [
            rng.uniform(-70.0, 70.0),
            rng.uniform(-70.0, 70.0),
            rng.uniform(-1.0, 1.0),
            size[0] * scale,
            size[1] * scale,
            size[2] * scale,
        ];
        let points = if rng.uniform(0.0, 1.0) < 0.1 {
            0
        } else {
            rng.next_u64() % 2000
        };
        gt.push_str(&line(seq, frame, b, class, None, Some(points)));
        // 85 % detected with jitter; scores on a 0.01 grid so ties occur.
        if rng.uniform(0.0, 1.0) < 0.85 {
            let jitter = rng.uniform(0.0, 0.6) * size[1];
            let p = [
                b[0] + rng.uniform(-jitter, jitter),
                b[1] + rng.uniform(-jitter, jitter),
                b[2] + rng.uniform(-0.3, 0.3),
                b[3] * rng.uniform(0.8, 1.2),
                b[4] * rng.uniform(0.8, 1.2),
                b[5] * rng.uniform(0.8, 1.2),
            ];
            let score = (rng.uniform(0.05, 1.0) * 100.0).round() / 100.0;
            pred.push_str(&line(seq, frame, p, class, Some(score), None));
        }
        // 20 % chance of a false box somewhere in the same frame.
        if rng.uniform(0.0, 1.0) < 0.2 {
            let (class, size) = CLASSES[(rng.next_u64() % 3) as usize];
            let p = [
                rng.uniform(-70.0, 70.0),
                rng.uniform(-70.0, 70.0),
                0.0,
                size[0],
                size[1],
                size[2],
            ];
            let score = (rng.uniform(0.05, 1.0) * 100.0).round() / 100.0;
            pred.push_str(&line(seq, frame, p, class, Some(score), None));
        }
    }
    let (gt_path, pred_path) = (dir.join("gt.jsonl"), dir.join("pred.jsonl"));
    std::fs::write(&gt_path, gt).unwrap();
    std::fs::write(&pred_path, pred).unwrap();
    (gt_path, pred_path)
}

fn python_results(gt: &Path, pred: &Path, out: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/eval_crosscheck.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg("--gt")
        .arg(gt)
        .arg("--pred")
        .arg(pred)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install Python 3 and numpy with `make setup`"));
    assert!(
        output.status.success(),
        "tools/eval_crosscheck.py failed (is numpy installed? `make setup`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    json["results"].as_array().unwrap().clone()
}

fn assert_close(rust: Option<f64>, python: &Value, what: &str) {
    match (rust, python.as_f64()) {
        (None, None) => {}
        (Some(r), Some(p)) => assert!((r - p).abs() <= 1e-9, "{what}: rust {r} vs python {p}"),
        (r, _) => panic!("{what}: rust {r:?} vs python {python}"),
    }
}

#[test]
fn detection_ap_matches_independent_python_on_1000_random_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let (gt_path, pred_path) = write_case(dir.path(), 42);
    let python = python_results(&gt_path, &pred_path, &dir.path().join("python.json"));
    assert_eq!(python.len(), 2 * 3 * 2 * 2, "python rows");

    let gt = eval::load(&gt_path, InputFormat::Jsonl).unwrap();
    let pred = eval::load(&pred_path, InputFormat::Jsonl).unwrap();
    assert_eq!(gt.boxes.len(), 1000);
    let mut checked = 0;
    let mut nontrivial = 0;
    for ignore_zero in [false, true] {
        let mut config = EvalConfig::default();
        config.detection.ignore_zero_point_gt = ignore_zero;
        config.detection.point_bins.clear();
        let rust = eval::evaluate_detection(&gt.boxes, &pred.boxes, &config.detection, config.threshold_rule);
        for row in python.iter().filter(|r| r["ignore_zero_point_gt"] == ignore_zero) {
            let kind = if row["iou_kind"] == "bev" {
                IouKind::Bev
            } else {
                IouKind::ThreeD
            };
            let r = rust
                .iter()
                .find(|d| {
                    d.class.as_str() == row["class"]
                        && d.iou_kind == kind
                        && Some(d.threshold) == row["threshold"].as_f64()
                })
                .unwrap_or_else(|| panic!("no rust result for {row}"));
            let what = format!("{} {:?} {} ignore_zero={ignore_zero}", r.class, r.iou_kind, r.threshold);
            assert_eq!(Some(r.num_gt as u64), row["num_gt"].as_u64(), "{what}: num_gt");
            assert_eq!(Some(r.num_pred as u64), row["num_pred"].as_u64(), "{what}: num_pred");
            assert_close(r.ap_r40, &row["ap_r40"], &format!("{what}: AP R40"));
            assert_close(r.ap_all_points, &row["ap_all_points"], &format!("{what}: AP all-point"));
            if r.ap_all_points.is_some_and(|a| a > 0.05 && a < 0.95) {
                nontrivial += 1;
            }
            let bins: Vec<_> = r.breakdowns.iter().filter(|b| b.by == "range_m").collect();
            let python_bins = row["range_bins"].as_array().unwrap();
            assert_eq!(bins.len(), python_bins.len());
            for (b, p) in bins.iter().zip(python_bins) {
                let what = format!("{what} range {}", b.bin);
                assert_eq!(Some(b.num_gt as u64), p["num_gt"].as_u64(), "{what}: num_gt");
                assert_eq!(Some(b.num_pred as u64), p["num_pred"].as_u64(), "{what}: num_pred");
                assert_close(b.ap_r40, &p["ap_r40"], &format!("{what}: AP R40"));
                assert_close(b.ap_all_points, &p["ap_all_points"], &format!("{what}: AP all-point"));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
    // The case must exercise the curve, not just AP 0 or 1 everywhere.
    assert!(
        nontrivial >= 12,
        "only {nontrivial} results strictly between 0.05 and 0.95"
    );
}
