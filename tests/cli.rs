//! The `boxlayer` binary: `--help` lists the working commands, `demo` runs the pipeline end to
//! end and `eval` reads its shards to the scores it printed, `inspect` summarises a model and refuses what it cannot read.

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

/// Simulates a vehicle segment of `frames` frames from `seed`, without images, into `dir`.
fn simulate_vehicle(dir: &Path, frames: usize, seed: u64) {
    let out = boxlayer()
        .args(["simulate", "--platform", "vehicle", "--cameras", "none", "--frames"])
        .arg(frames.to_string())
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
    assert_eq!(
        sorted,
        [
            "bench",
            "demo",
            "detect",
            "eval",
            "export",
            "fuse",
            "import",
            "inspect",
            "merge",
            "normalize",
            "render",
            "report",
            "run",
            "simulate",
            "stats",
            "track"
        ],
        "{text}"
    );
}

#[test]
fn demo_runs_the_pipeline_and_eval_reads_its_shards_to_the_printed_scores() {
    let dir = tempfile::tempdir().unwrap();
    let out = boxlayer()
        .args(["demo", "--frames", "4", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8(out.stdout).unwrap();
    // The logs are real files of each platform's format, the shards complete folders.
    let logs = dir.path().join("logs");
    assert!(
        logs.join("vehicle/segment-sim_seed7_with_camera_labels.tfrecord")
            .is_file()
    );
    assert!(logs.join("drone/falcon_sim_seed7_data.h5").is_file());
    assert!(logs.join("quadruped/spot_sim_seed7_pose_gt.h5").is_file());
    let table: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("quality against"))
        .collect();
    for (platform, sequence) in [
        ("vehicle", "sim_seed7"),
        ("drone", "falcon_sim_seed7"),
        ("quadruped", "spot_sim_seed7"),
    ] {
        let shards = dir.path().join("shards").join(platform).join(sequence);
        assert!(shards.join("_SUCCESS").is_file(), "{}", shards.display());
        let row = table
            .iter()
            .find(|l| l.starts_with(platform))
            .unwrap_or_else(|| panic!("{report}"));
        // platform, detector, best veh / ped, KBF veh / ped, WBF veh / ped, consolidated veh / ped, MOTA, IDS/GT
        let f: Vec<&str> = row.split_whitespace().collect();
        let consolidated: f64 = f[11].parse().unwrap_or_else(|_| panic!("{row}"));

        // The truth scored against itself gives AP 1; the shards, read by `eval`, score what the demo printed.
        let truth = logs.join(platform).join(format!("{sequence}_boxes_gt.jsonl"));
        let json = dir.path().join(format!("{platform}_self.json"));
        let eval = boxlayer()
            .arg("eval")
            .arg("--gt")
            .arg(&truth)
            .arg("--pred")
            .arg(&truth)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let mut seen = 0;
        walk_ap(&v, &mut |ap| {
            seen += 1;
            assert!((ap - 1.0).abs() < 1e-12, "AP {ap} in {platform}");
        });
        assert!(seen > 0);

        // The demo scores against the objects the detectors could see (≥ 1 return, |x|, |y| <
        // 51.2 m, the bundled detectors' widest range); `eval` gets the same truth, filtered here.
        let visible: String = std::fs::read_to_string(&truth)
            .unwrap()
            .lines()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let b = v["box"].as_array().unwrap();
                v["num_points"].as_u64().is_none_or(|n| n >= 1)
                    && b[0].as_f64().unwrap().abs() < 51.2
                    && b[1].as_f64().unwrap().abs() < 51.2
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let visible_path = dir.path().join(format!("{platform}_visible.jsonl"));
        std::fs::write(&visible_path, visible).unwrap();
        let json = dir.path().join(format!("{platform}_shards.json"));
        let eval = boxlayer()
            .arg("eval")
            .arg("--gt")
            .arg(&visible_path)
            .arg("--pred")
            .arg(&shards)
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

/// Issue 18: a closed standard output (`boxlayer … | head`) ends the output quietly instead of
/// panicking (exit 101). The read end of the pipe is closed before the child starts, so its first
/// write fails with EPIPE every time.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0i32; 2];
    // SAFETY: `pipe` fills two fresh descriptors; each is owned once below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end);
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/affine.onnx");
    let out = boxlayer()
        .arg("inspect")
        .arg(&model)
        .stdout(std::process::Stdio::from(write_end))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// Issue 18: `--json -` means standard output for `eval` as for `detect`.
#[test]
fn eval_json_dash_writes_the_report_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let gt = dir.path().join("gt.jsonl");
    std::fs::write(
        &gt,
        "{\"sequence\":\"s\",\"frame\":0,\"box\":[1,2,0,4,2,1.5,0],\"class\":\"vehicle\"}\n",
    )
    .unwrap();
    let out = boxlayer()
        .current_dir(dir.path())
        .args(["eval", "--json", "-", "--gt"])
        .arg(&gt)
        .arg("--pred")
        .arg(&gt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path().join("-").exists(), "no file named `-`");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["detection"].is_array());
}

/// Issue 18: an `ORT_DYLIB_PATH` that points at no file is an error naming it, not silently ignored.
#[test]
fn a_missing_ort_dylib_path_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("000000.bin");
    std::fs::write(&bin, [0u8; 32]).unwrap();
    let detector = Path::new(env!("CARGO_MANIFEST_DIR")).join("detectors/centerpoint_pillar_sim");
    let out = boxlayer()
        .env("ORT_DYLIB_PATH", dir.path().join("nowhere.so"))
        .arg("detect")
        .arg("--detector")
        .arg(&detector)
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nowhere.so") && err.contains("not a file"), "{err}");
}

/// Issue 18: `inspect --check` decodes every frame, so damage after frame 0 is found and listed
/// and the exit status says so; the plain summary of the same file still works.
#[test]
fn inspect_check_decodes_every_frame_and_lists_damage() {
    let dir = tempfile::tempdir().unwrap();
    simulate_vehicle(dir.path(), 3, 0);
    let segment = dir.path().join("segment-sim_seed0_with_camera_labels.tfrecord");
    let check = |path: &Path| boxlayer().args(["inspect", "--check"]).arg(path).output().unwrap();
    let out = check(&segment);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("(waymo-v1): 3 of 3 frames decoded") && text.contains("; 0 damaged"),
        "{text}"
    );

    // Flip a byte in the middle of the last record's data (TFRecord framing: u64 length,
    // u32 CRC, data, u32 CRC).
    let mut bytes = std::fs::read(&segment).unwrap();
    let mut at = 0usize;
    let mut starts = Vec::new();
    while at + 12 <= bytes.len() {
        let n = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        starts.push((at, n));
        at += 16 + n;
    }
    assert_eq!(starts.len(), 3);
    let (last, n) = starts[2];
    bytes[last + 12 + n / 2] ^= 0x5a;
    let damaged = dir.path().join("damaged.tfrecord");
    std::fs::write(&damaged, &bytes).unwrap();
    let plain = boxlayer().arg("inspect").arg(&damaged).output().unwrap();
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let out = check(&damaged);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(text.contains("; 1 damaged") && text.contains("record 2"), "{text}");
    assert!(err.contains("damaged.tfrecord: 1 damaged records or frames"), "{err}");

    // A first record whose framing is sound but whose payload is not a frame: the summary
    // describes the next frame instead of failing, the check lists the bad one.
    let mut w = boxlayer::sources::waymo::tfrecord::TfRecordWriter::new(Vec::new());
    w.write_record(b"not a Frame proto \xff\xff\xff").unwrap();
    let mut first_bad = w.finish().unwrap();
    first_bad.extend_from_slice(&std::fs::read(&segment).unwrap()[starts[1].0..]);
    let first_bad_path = dir.path().join("first_bad.tfrecord");
    std::fs::write(&first_bad_path, &first_bad).unwrap();
    let plain = boxlayer().arg("inspect").arg(&first_bad_path).output().unwrap();
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(
        plain.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    assert!(
        text.contains("2 frames, 1 damaged records skipped") && text.contains("lidars (frame 1)"),
        "{text}"
    );
    let out = check(&first_bad_path);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("; 1 damaged"), "{text}");

    // A folder of KITTI sweeps, which the summary does not know: the check still reads it.
    let kitti = dir.path().join("kitti");
    std::fs::create_dir(&kitti).unwrap();
    std::fs::write(kitti.join("000000.bin"), [0u8; 32]).unwrap();
    std::fs::write(kitti.join("000001.bin"), [0u8; 17]).unwrap();
    let out = check(&kitti);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("(kitti-bin)") && text.contains("000001.bin"), "{text}");
}

/// Issue 18: `simulate --platform other` is refused by the argument parser with what it does
/// write, and `--cameras none` writes a segment without images.
#[test]
fn simulate_names_its_platforms_and_takes_no_cameras() {
    let dir = tempfile::tempdir().unwrap();
    let out = boxlayer()
        .args(["simulate", "--platform", "other", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`vehicle`") && err.contains("`drone`") && err.contains("`quadruped`"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
    simulate_vehicle(dir.path(), 1, 0);
    let segment = dir.path().join("segment-sim_seed0_with_camera_labels.tfrecord");
    let out = boxlayer().arg("inspect").arg(&segment).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FRONT") && text.contains("image none"), "{text}");
    assert!(!text.contains(" bytes\n  "), "no camera has an image: {text}");
}

/// Issue 18: an error prints its cause once, not once in the message and again from the chain.
#[test]
fn an_error_prints_its_cause_once() {
    let out = boxlayer()
        .args(["inspect", "/nonexistent/log.tfrecord"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// `boxlayer track` on per-frame boxes a user brings: the simulator's truth boxes of a short
/// segment with one frame's boxes removed come back as tracks, the removed frame filled by
/// interpolation, every output box within 1 m of a true one and every track following one object.
#[test]
fn track_fills_a_missing_frame_and_keeps_identities() {
    let dir = tempfile::tempdir().unwrap();
    simulate_vehicle(dir.path(), 8, 3);
    let truth = std::fs::read_to_string(dir.path().join("sim_seed3_boxes_gt.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = truth.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Well-seen vehicles only, and nothing of frame 4.
    let seen = |r: &serde_json::Value| r["class"] == "vehicle" && r["num_points"].as_u64().unwrap_or(0) >= 20;
    let mut input = String::new();
    for r in rows.iter().filter(|r| seen(r) && r["frame"] != 4) {
        let mut r = r.clone();
        r.as_object_mut().unwrap().remove("track_id");
        r["score"] = 0.9.into();
        input.push_str(&format!("{r}\n"));
    }
    let boxes = dir.path().join("boxes.jsonl");
    std::fs::write(&boxes, input).unwrap();
    let out = boxlayer()
        .args(["track", "--platform", "vehicle", "--out", "-", "--config"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/demo.toml"))
        .arg("--log")
        .arg(dir.path().join("segment-sim_seed3_with_camera_labels.tfrecord"))
        .arg(&boxes)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tracked: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!tracked.is_empty());
    // Each output box is matched to the nearest true box of its frame (within 1 m); each output
    // track must follow one true object throughout.
    let centre = |r: &serde_json::Value| (r["box"][0].as_f64().unwrap(), r["box"][1].as_f64().unwrap());
    let mut identity: std::collections::BTreeMap<String, String> = Default::default();
    let mut filled = 0;
    for t in &tracked {
        let (x, y) = centre(t);
        let nearest = rows
            .iter()
            .filter(|r| r["frame"] == t["frame"] && r["class"] == "vehicle")
            .map(|r| {
                let (a, b) = centre(r);
                ((a - x).hypot(b - y), r["track_id"].as_str().unwrap().to_string())
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap();
        assert!(nearest.0 < 1.0, "{t} is {:.2} m from any true box", nearest.0);
        let id = t["track_id"].as_str().unwrap().to_string();
        let previous = identity.entry(id.clone()).or_insert_with(|| nearest.1.clone());
        assert_eq!(*previous, nearest.1, "track {id} switches objects at {t}");
        if t["frame"] == 4 {
            // Between two detections, or (a track that starts at 5 or ends at 3) extended on
            // the frame's points.
            assert!(t["origin"] == "interpolated" || t["origin"] == "extended", "{t}");
            filled += usize::from(t["origin"] == "interpolated");
        }
    }
    let in_frame_3 = rows.iter().filter(|r| seen(r) && r["frame"] == 3).count();
    assert!(
        filled * 10 >= in_frame_3 * 8,
        "frame 4 filled with {filled} boxes; frame 3 has {in_frame_3}"
    );
}
