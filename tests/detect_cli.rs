//! `boxlayer detect --detector DIR FILE.bin --json -` prints the detector's boxes as JSON.

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
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["points"], 2);
    let detections = report["detections"].as_array().unwrap();
    // tests/fixtures/detect/boxes.json: car, pedestrian, cyclist in score order.
    let classes: Vec<&str> = detections.iter().map(|d| d["class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["vehicle", "pedestrian", "cyclist"]);
    assert!((detections[0]["box3"]["x"].as_f64().unwrap() - 1.234).abs() < 1e-3);

    let bad = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["detect", "--detector"])
        .arg(&detector)
        .arg(dir.join("missing.bin"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.bin"));
}
