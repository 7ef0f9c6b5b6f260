//! The `boxlayer` binary: `--help` lists the working commands, `demo` runs end to end and writes
//! ground truth the evaluator reads, `inspect` summarises a model and refuses what it cannot read.

use std::path::Path;
use std::process::Command;

fn boxlayer() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_boxlayer"));
    c.env(
        "ORT_DYLIB_PATH",
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".ort/libonnxruntime.so"),
    );
    c
}

#[test]
fn help_lists_the_working_commands() {
    let out = boxlayer().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    let mut sorted = commands.clone();
    sorted.sort();
    assert_eq!(sorted, ["demo", "detect", "eval", "inspect", "simulate"], "{text}");
}

#[test]
fn demo_writes_ground_truth_that_eval_scores_perfectly() {
    let dir = tempfile::tempdir().unwrap();
    let out = boxlayer()
        .args(["demo", "--frames", "2", "--consolidation-frames", "12", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8(out.stdout).unwrap();
    let gt_files: Vec<&str> = report
        .lines()
        .filter(|l| l.ends_with("_boxes_gt.jsonl"))
        .map(str::trim)
        .collect();
    assert_eq!(gt_files.len(), 3, "{report}");
    // Drone and quadruped go through real M3ED files and the reader.
    assert!(dir.path().join("drone/falcon_sim_seed7_data.h5").is_file());
    assert!(dir.path().join("quadruped/spot_sim_seed7_pose_gt.h5").is_file());
    for (platform, gt) in ["vehicle", "drone", "quadruped"].into_iter().zip(gt_files) {
        let row = report
            .lines()
            .find(|l| l.starts_with(platform))
            .unwrap_or_else(|| panic!("{report}"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[1], "2", "{row}");
        assert!(fields[2].parse::<f64>().unwrap() > 1000.0, "points per sweep: {row}");
        // Boxes and points agree: the median in-box ratio is about 1.
        let ratio: f64 = fields[5].parse().unwrap();
        assert!((0.9..=1.2).contains(&ratio), "in-box ratio: {row}");
        assert!(
            gt.contains(platform) || gt.contains(if platform == "drone" { "falcon" } else { "spot" }),
            "{gt}"
        );
        let data = boxlayer::eval::input::load_jsonl(Path::new(gt)).unwrap();
        assert!(!data.boxes.is_empty());
        assert!(data.boxes.iter().all(|b| b.num_points.is_some() && b.frame.frame < 2));
        assert!(data.boxes.iter().any(|b| b.num_points > Some(0)));
        // Ground truth scored against itself: every class present has AP 1.
        let json = dir.path().join(format!("{platform}.json"));
        let eval = boxlayer()
            .arg("eval")
            .arg("--gt")
            .arg(gt)
            .arg("--pred")
            .arg(gt)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        let text = std::fs::read_to_string(&json).unwrap();
        assert!(text.contains("\"ap_r40\""), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut seen = 0;
        walk_ap(&v, &mut |ap| {
            seen += 1;
            assert!((ap - 1.0).abs() < 1e-12, "AP {ap} in {platform}");
        });
        assert!(seen > 0);
    }
    check_consolidation(&report, dir.path());
}

/// The consolidation table: for vehicles, fusing the three modelled detectors beats the best of
/// them and tracking beats fusion (seed 7, 12 sweeps), and the written consolidated boxes score
/// the printed AP when `eval` reads them back.
fn check_consolidation(report: &str, dir: &Path) {
    let table: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("consolidation:"))
        .collect();
    for platform in ["vehicle", "drone", "quadruped"] {
        let row = table
            .iter()
            .find(|l| l.starts_with(platform))
            .unwrap_or_else(|| panic!("{report}"));
        // platform, detector, best veh / ped, fused veh / ped, consolidated veh / ped, MOTA, IDS/GT
        let f: Vec<&str> = row.split_whitespace().collect();
        let (best, fused, consolidated): (f64, f64, f64) =
            (f[2].parse().unwrap(), f[5].parse().unwrap(), f[8].parse().unwrap());
        assert!(fused > best && consolidated >= fused, "{row}");
        let mota: f64 = f[11].parse().unwrap();
        assert!(mota > 0.5, "{row}");

        let sequence = format!("sim_{platform}_seed7");
        let truth = dir.join(format!("{platform}/{sequence}_consolidation_gt.jsonl"));
        let boxes = dir.join(format!("{platform}/{sequence}_consolidated.jsonl"));
        let data = boxlayer::eval::input::load_jsonl(&boxes).unwrap();
        assert!(!data.boxes.is_empty() && data.boxes.iter().all(|b| b.track_id.is_some()));
        let json = dir.join(format!("{platform}_consolidated.json"));
        let eval = boxlayer()
            .arg("eval")
            .arg("--gt")
            .arg(&truth)
            .arg("--pred")
            .arg(&boxes)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let vehicle_bev_07 = v["detection"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["class"] == "vehicle" && r["iou_kind"] == "bev" && r["threshold"] == 0.7)
            .unwrap();
        let ap = vehicle_bev_07["ap_r40"].as_f64().unwrap();
        assert!((100.0 * ap - consolidated).abs() <= 0.05 + 1e-9, "{ap} vs {row}");
    }
}

/// Calls `f` with every numeric `ap_r40` value in the report.
fn walk_ap(v: &serde_json::Value, f: &mut impl FnMut(f64)) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                match (k.as_str(), x.as_f64()) {
                    ("ap_r40", Some(ap)) => f(ap),
                    _ => walk_ap(x, f),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|x| walk_ap(x, f)),
        _ => {}
    }
}

#[test]
fn inspect_summarises_a_model_and_refuses_unknown_files() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/affine.onnx");
    let out = boxlayer().arg("inspect").arg(&model).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("ONNX model") && text.contains("x ") && text.contains("[?, 3]"),
        "{text}"
    );

    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("notes.xyz");
    std::fs::write(&odd, b"hello").unwrap();
    let out = boxlayer().arg("inspect").arg(&odd).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("notes.xyz: not a format boxlayer reads yet"), "{err}");
}
