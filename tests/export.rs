//! `boxlayer export` and `import` (issue 23) on layers built from simulated logs: the 3EED and
//! KITTI exports pass independent Python readers that follow 3EED's loader and KITTI's devkit
//! conventions; the Xtreme1 upload reads back with `pcd-rs`; an Xtreme1 export edited as the
//! tool writes it imports exactly its edits, with history, and a second import changes nothing;
//! bad exports leave the shards untouched.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use boxlayer::Platform;
use boxlayer::export::{
    ExportFrame, ImportOptions, LogLocation, SequenceLog, ThreeEedOptions, XTREME1_ZIP, Xtreme1Options, export_3eed,
    export_xtreme1, import_xtreme1,
};
use boxlayer::shards::{BoxRow, read_box_rows, read_edit_rows, read_track_rows};
use serde_json::{Value, json};

#[path = "support/sim_layer.rs"]
mod sim_layer;

use sim_layer::sim_layer;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A finished sequence folder of `platform` built from a simulated log (truth as detections);
/// returns the run's output folder, the sequence folder and the data root the manifest's source
/// is relative to.
fn layer(platform: Platform, seed: u64, frames: usize, root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let layer = sim_layer(platform, seed, frames, root);
    (layer.out, layer.sequence, layer.data_root)
}

/// Every file under `dir` by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn python(script: &str, args: &[&Path]) -> String {
    let output = Command::new("python3")
        .arg(repo(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); install Python 3, numpy, pyarrow and Pillow with `make setup`")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{script} failed:\n{text}");
    text
}

#[test]
fn three_eed_and_kitti_exports_pass_readers_that_follow_3eed_and_the_kitti_devkit() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Both logs under one data root, as `run --data-root` finds them.
    let (shards, _, data) = layer(Platform::Drone, 71, 6, root);
    let (_, _, vehicle_data) = layer(Platform::Vehicle, 72, 3, root);
    assert_eq!(data, vehicle_data);

    let out = root.join("3eed");
    let options = ThreeEedOptions {
        log: LogLocation::DataRoot(data.clone()),
        ..ThreeEedOptions::default()
    };
    let summary = export_3eed(&shards, &out, &options).unwrap();
    assert_eq!(summary.sequences, 2);
    assert!(summary.samples >= 4 && summary.boxes >= summary.samples, "{summary:?}");
    assert!(out.join("waymo").is_dir() && out.join("drone").is_dir());
    let text = python("tools/check_3eed_export.py", &[&out, &shards]);
    assert!(
        text.contains(&format!(
            "check_3eed_export: {} views passed, 0 failed",
            summary.samples
        )),
        "{text}"
    );
    // boxlayer's own grounding evaluator reads the export as 3EED ground truth.
    let data3eed = boxlayer::eval::input::load_3eed(&out).unwrap();
    assert_eq!(data3eed.queries.len(), summary.boxes);

    let normalized = root.join("3eed_normalized");
    let options = ThreeEedOptions {
        frame: ExportFrame::Normalized,
        crop_to_camera: false,
        log: LogLocation::DataRoot(data.clone()),
        ..ThreeEedOptions::default()
    };
    export_3eed(&shards, &normalized, &options).unwrap();
    python(
        "tools/check_3eed_export.py",
        &[&normalized, &shards, Path::new("--crop"), Path::new("none")],
    );

    // `--images log` (through the command line): each view's image.jpg is the log's own JPEG,
    // byte for byte, where the default resamples it onto the pinhole twin.
    let raw = root.join("3eed_log_images");
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["export", "3eed"])
        .args([&shards, &raw])
        .arg("--data-root")
        .arg(&data)
        .args(["--images", "log"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    python(
        "tools/check_3eed_export.py",
        &[&raw, &shards, Path::new("--images"), Path::new("log")],
    );
    let vehicle_dir = boxlayer::shards::sequence_dirs(&shards)
        .into_iter()
        .find(|d| d.parent().unwrap().ends_with("vehicle"))
        .unwrap();
    let sequence = boxlayer::export::ShardSequence::load(&vehicle_dir).unwrap();
    let log = SequenceLog::open(&sequence, &LogLocation::DataRoot(data.clone()))
        .unwrap()
        .unwrap();
    let names = ["FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT"];
    let mut compared = 0;
    for view in std::fs::read_dir(raw.join("waymo").join(&sequence.manifest.sequence)).unwrap() {
        let view = view.unwrap().path();
        let (frame, k) = view.file_name().unwrap().to_str().unwrap().split_once('_').unwrap();
        let frame = log.frame(frame.parse().unwrap()).unwrap();
        let camera = frame
            .cameras
            .iter()
            .find(|c| c.name == names[k.parse::<usize>().unwrap()])
            .unwrap();
        let meta: Value = serde_json::from_slice(&std::fs::read(view.join("meta_info.json")).unwrap()).unwrap();
        if let boxlayer::frame::Distortion::RadTan { k1, k2, p1, p2, k3 } = camera.calibration.distortion {
            assert_eq!(meta["camera_distortion"], json!([k1, k2, p1, p2, k3]));
        } else {
            panic!("a Waymo camera without radial-tangential distortion");
        }
        let written = std::fs::read(view.join("image.jpg")).unwrap();
        assert!(
            written == camera.encoded().unwrap(),
            "{}: not the log's JPEG",
            view.display()
        );
        let resampled = std::fs::read(out.join(view.strip_prefix(&raw).unwrap()).join("image.jpg")).unwrap();
        assert!(
            resampled != written,
            "{}: the default export did not resample",
            view.display()
        );
        compared += 1;
    }
    assert!(compared >= 3, "{compared} views compared");

    // KITTI through the command line.
    let kitti = root.join("kitti");
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(["export", "kitti"])
        .args([&shards, &kitti])
        .arg("--data-root")
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(": 2 sequences, 9 samples,"), "{stdout}");
    let text = python("tools/check_kitti_export.py", &[&kitti, &shards]);
    assert!(
        text.contains("check_kitti_export: 9 samples passed, 0 failed"),
        "{text}"
    );

    // Without the logs a 3EED export (camera views) is refused before anything is written.
    let e = export_3eed(
        &shards,
        &root.join("refused"),
        &ThreeEedOptions {
            log: LogLocation::DataRoot(root.join("nowhere")),
            ..ThreeEedOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("is not there"), "{e}");
    assert!(!root.join("refused").exists() && !root.join("refused.partial").exists());
}

/// The upload's result objects per frame name.
fn upload_results(zip_path: &Path) -> (String, BTreeMap<String, Vec<Value>>, Vec<String>) {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
    let (mut scene, mut results, mut frames) = (String::new(), BTreeMap::new(), Vec::new());
    for k in 0..archive.len() {
        let mut file = archive.by_index(k).unwrap();
        let name = file.name().unwrap().into_owned();
        let parts: Vec<&str> = name.split('/').collect();
        scene = parts[0].to_string();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        match parts[1] {
            "result" => {
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                let stem = parts[2].trim_end_matches(".json").to_string();
                results.insert(stem, v["objects"].as_array().unwrap().clone());
            }
            "lidar_point_cloud_0" => {
                frames.push(parts[2].trim_end_matches(".pcd").to_string());
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("f.pcd");
                std::fs::write(&path, &bytes).unwrap();
                let reader = pcd_rs::DynReader::open(&path).unwrap();
                assert!(reader.meta().num_points > 0);
            }
            "camera_config" => {
                let v: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(v[0]["cameraExternal"].as_array().unwrap().len(), 16);
                assert_eq!(v[0]["rowMajor"], json!(true));
            }
            _ => {}
        }
    }
    (scene, results, frames)
}

/// An object as Xtreme1's export writes it (exactly its ten fields; a new 32-hex id).
fn as_exported(object: &Value, k: usize) -> Value {
    json!({
        "id": format!("{:032x}", 0x9f2c_0000_u64 + k as u64),
        "type": "3D_BOX",
        "classId": object["classId"],
        "className": object["className"],
        "trackId": object["trackId"],
        "trackName": object["trackName"],
        "classValues": [],
        "contour": {
            "viewIndex": 0, "pointN": 0, "points": [],
            "center3D": object["contour"]["center3D"],
            "size3D": object["contour"]["size3D"],
            "rotation3D": object["contour"]["rotation3D"],
        },
        "modelConfidence": object["modelConfidence"],
        "modelClass": Value::Null,
    })
}

/// Writes an Xtreme1 export zip: `<dataset>-<time>/<scene>/{data,result}/NAME.json`.
fn write_export(path: &Path, scene: &str, frames: &[String], results: &BTreeMap<String, Vec<Value>>) {
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default();
    let top = "boxlayer-review-20261203101500";
    for (k, name) in frames.iter().enumerate() {
        let data = json!({
            "dataId": 30917 + k, "version": "Xtreme1 v0.9.1", "name": name, "type": "LIDAR_FUSION",
            "lidarPointClouds": [{"filename": format!("{name}.pcd"), "url": "http://x/y",
                "zipPath": format!("upload/{scene}/lidar_point_cloud_0/{name}.pcd")}],
        });
        zip.start_file(format!("{top}/{scene}/data/{name}.json"), options)
            .unwrap();
        zip.write_all(data.to_string().as_bytes()).unwrap();
        if let Some(objects) = results.get(name).filter(|o| !o.is_empty()) {
            let result = json!([{"version": "Xtreme1 v0.9.1", "dataId": 30917 + k, "sourceName": "Ground Truth",
                "classificationValues": Value::Null, "objects": objects}]);
            zip.start_file(format!("{top}/{scene}/result/{name}.json"), options)
                .unwrap();
            zip.write_all(result.to_string().as_bytes()).unwrap();
        }
    }
    zip.finish().unwrap();
}

fn shift(object: &mut Value, key: &str, axis: &str, by: f64) {
    let v = object["contour"][key][axis].as_f64().unwrap();
    object["contour"][key][axis] = json!(v + by);
}

#[test]
fn an_xtreme1_round_trip_applies_exactly_the_edits_with_history_and_twice_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (shards, dir, logs) = layer(Platform::Drone, 73, 8, root);
    let before = read_box_rows(&dir.join("boxes.parquet")).unwrap();
    let upload = root.join("upload");
    let options = Xtreme1Options {
        frames: Some(0..5),
        log: LogLocation::DataRoot(logs.clone()),
        ..Xtreme1Options::default()
    };
    let summary = export_xtreme1(&shards, &upload, &options).unwrap();
    assert_eq!(summary.out, upload.join(XTREME1_ZIP));
    assert_eq!((summary.samples, summary.images), (5, 5));
    let classes: Value = serde_json::from_str(&std::fs::read_to_string(upload.join("classes.json")).unwrap()).unwrap();
    assert_eq!(classes[1], json!({"id": 2, "name": "pedestrian"}));
    let (scene, results, frames) = upload_results(&summary.out);
    assert_eq!(frames, ["000000", "000001", "000002", "000003", "000004"]);
    assert_eq!(scene, format!("scene_{}", sequence_name(&dir)));

    // The annotator's work, frame by frame (frames with at least two boxes).
    let busy: Vec<String> = frames
        .iter()
        .filter(|f| results.get(*f).is_some_and(|o| o.len() >= 2))
        .cloned()
        .collect();
    assert!(busy.len() >= 4, "need four frames with two boxes: {busy:?}");
    let (a, b, c, d) = (&busy[0], &busy[1], &busy[2], &busy[3]);
    let track = |frame: &str, k: usize| -> i64 { results[frame][k]["trackId"].as_str().unwrap().parse().unwrap() };
    let moved = track(a, 0);
    let resized = track(a, 1);
    let reclassed = track(b, 0);
    let deleted = track(b, 1);
    let wiped: Vec<i64> = (0..results[d].len()).map(|k| track(d, k)).collect();
    let mut edited = results.clone();
    shift(&mut edited.get_mut(a).unwrap()[0], "center3D", "x", 0.5);
    shift(&mut edited.get_mut(a).unwrap()[1], "size3D", "x", 0.3);
    let was_vehicle = edited[b][0]["className"] == json!("vehicle");
    let (new_name, new_id) = if was_vehicle { ("pedestrian", 2) } else { ("vehicle", 1) };
    edited.get_mut(b).unwrap()[0]["className"] = json!(new_name);
    edited.get_mut(b).unwrap()[0]["classId"] = json!(new_id);
    edited.get_mut(b).unwrap().remove(1);
    let mut added = edited[c][0].clone();
    shift(&mut added, "center3D", "y", 30.0);
    added["className"] = json!("cyclist");
    added["classId"] = json!(3);
    added["trackId"] = json!("Xn3k9aQ2pL0sT7vB");
    added["trackName"] = json!("99");
    edited.get_mut(c).unwrap().push(added);
    edited.get_mut(d).unwrap().clear();
    for objects in edited.values_mut() {
        let exported: Vec<Value> = objects.iter().enumerate().map(|(k, o)| as_exported(o, k)).collect();
        *objects = exported;
    }
    let export = root.join("boxlayer-review-20261203101500.zip");
    write_export(&export, &scene, &frames, &edited);

    let options = ImportOptions {
        time_unix_s: 1_796_000_000,
        ..ImportOptions::default()
    };
    let s = import_xtreme1(&export, &shards, &options).unwrap();
    assert_eq!(
        (s.moved, s.reclassed, s.added, s.rejected),
        (2, 1, 1, 1 + wiped.len()),
        "{s:?}"
    );
    let after = read_box_rows(&dir.join("boxes.parquet")).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    let exported_frames: Vec<i64> = frames.iter().map(|f| f.parse().unwrap()).collect();
    let find = |rows: &[BoxRow], frame: &str, track: i64| -> BoxRow {
        let f: i64 = frame.parse().unwrap();
        rows.iter()
            .find(|r| r.frame_index == f && r.track_id == track)
            .unwrap()
            .clone()
    };
    for old in &before {
        let new = after.iter().find(|r| r.box_id == old.box_id).unwrap();
        let frame = format!("{:06}", old.frame_index);
        if !exported_frames.contains(&old.frame_index) {
            assert_eq!(new, old, "a box of a frame not exported changed");
            continue;
        }
        let mut expected = old.clone();
        if frame == *d && wiped.contains(&old.track_id) || frame == *b && old.track_id == deleted {
            expected.review_status = "rejected".into();
            assert_eq!(new, &expected);
            continue;
        }
        expected.review_status = "verified".into();
        if frame == *a && old.track_id == moved {
            assert!((new.box_sensor[0] - old.box_sensor[0] - 0.5).abs() < 1e-9);
            assert!((new.box_world[0] - old.box_world[0]).abs() > 0.1);
            expected.box_sensor = new.box_sensor;
            expected.box_world = new.box_world;
            expected.box_normalized = new.box_normalized;
            expected.aabb_normalized = new.aabb_normalized;
            expected.bev_range_m = new.bev_range_m;
            expected.relative_pitch_rad = new.relative_pitch_rad;
            expected.num_points_inside = new.num_points_inside;
        } else if frame == *a && old.track_id == resized {
            assert!((new.box_sensor[3] - old.box_sensor[3] - 0.3).abs() < 1e-9);
            assert_eq!(&new.box_sensor[..3], &old.box_sensor[..3]);
            expected.box_sensor = new.box_sensor;
            expected.box_world = new.box_world;
            expected.box_normalized = new.box_normalized;
            expected.aabb_normalized = new.aabb_normalized;
            expected.num_points_inside = new.num_points_inside;
        } else if frame == *b && old.track_id == reclassed {
            expected.class = new_name.into();
        }
        assert_eq!(new, &expected, "frame {frame} track {}", old.track_id);
    }
    let new_box = after.iter().find(|r| r.origin == "manual").unwrap();
    assert_eq!(new_box.class, "cyclist");
    assert_eq!(new_box.source_track_id.as_deref(), Some("xtreme1:Xn3k9aQ2pL0sT7vB"));
    assert_eq!(new_box.review_status, "verified");
    assert_eq!(format!("{:06}", new_box.frame_index), *c);
    let anchor = find(&before, c, track(c, 0));
    assert!((new_box.box_sensor[1] - anchor.box_sensor[1] - 30.0).abs() < 1e-9);
    let tracks = read_track_rows(&dir.join("tracks.parquet")).unwrap();
    let t = tracks.iter().find(|t| t.track_id == new_box.track_id).unwrap();
    assert_eq!((t.num_boxes, t.class.as_str()), (1, "cyclist"));

    // The history: one row per change, with what it was and what it became.
    let edits = read_edit_rows(&dir.join("edits.parquet")).unwrap();
    let count = |field: &str| edits.iter().filter(|e| e.field == field).count();
    assert_eq!((count("box"), count("class"), count("created")), (2, 1, 1));
    let status_changes = before
        .iter()
        .filter(|old| {
            after
                .iter()
                .any(|r| r.box_id == old.box_id && r.review_status != old.review_status)
        })
        .count();
    assert_eq!(count("review_status"), status_changes);
    let class_edit = edits.iter().find(|e| e.field == "class").unwrap();
    assert_eq!(class_edit.after.as_deref(), Some(format!("\"{new_name}\"").as_str()));
    assert!(
        edits
            .iter()
            .all(|e| e.time_unix_s == 1_796_000_000 && e.source.ends_with(".zip"))
    );
    // review.parquet holds only what still needs a look.
    let review = read_box_rows(&dir.join("review.parquet")).unwrap();
    assert!(review.iter().all(|r| r.review_status == "flagged"));
    python(
        "tools/check_shards.py",
        &[Path::new("--schema"), &repo("docs/schema.md"), &dir],
    );

    // The same export again: nothing to do, no folder rewritten.
    let snapshot = files(&dir);
    let again = import_xtreme1(&export, &shards, &options).unwrap();
    assert_eq!((again.edits, again.sequences_changed), (0, 0), "{again:?}");
    assert!(files(&dir) == snapshot, "a second import changed the folder");
}

fn sequence_name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn bad_exports_are_refused_with_the_file_and_object_named_and_the_shards_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (shards, dir, logs) = layer(Platform::Drone, 74, 4, root);
    let upload = root.join("upload");
    let options = Xtreme1Options {
        log: LogLocation::DataRoot(logs),
        ..Xtreme1Options::default()
    };
    let summary = export_xtreme1(&shards, &upload, &options).unwrap();
    let (scene, results, frames) = upload_results(&summary.out);
    let exported: BTreeMap<String, Vec<Value>> = results
        .iter()
        .map(|(f, o)| {
            (
                f.clone(),
                o.iter().enumerate().map(|(k, v)| as_exported(v, k)).collect(),
            )
        })
        .collect();
    let first = frames
        .iter()
        .find(|f| exported.get(*f).is_some_and(|o| !o.is_empty()))
        .unwrap()
        .clone();
    let snapshot = files(&dir);
    let attempt = |name: &str, frames: &[String], results: &BTreeMap<String, Vec<Value>>| -> String {
        let path = root.join(name);
        write_export(&path, &scene, frames, results);
        let e = import_xtreme1(&path, &shards, &ImportOptions::default()).unwrap_err();
        assert!(files(&dir) == snapshot, "{name}: the shards changed");
        format!("{e}")
    };

    let mut renamed = frames.clone();
    let mut moved_results = exported.clone();
    let objects = moved_results.remove(&first).unwrap();
    moved_results.insert("000999".into(), objects);
    *renamed.iter_mut().find(|f| **f == first).unwrap() = "000999".into();
    let e = attempt("renamed.zip", &renamed, &moved_results);
    assert!(e.contains("frame name `000999` is no frame of sequence"), "{e}");

    let mut unknown = exported.clone();
    unknown.get_mut(&first).unwrap()[0]["className"] = json!("Boat");
    let e = attempt("unknown.zip", &frames, &unknown);
    assert!(
        e.contains("unknown class `Boat`") && e.contains(&format!("result/{first}.json")),
        "{e}"
    );

    let mut nulls = exported.clone();
    nulls.get_mut(&first).unwrap()[0]["contour"]["size3D"]["y"] = Value::Null;
    let e = attempt("null.zip", &frames, &nulls);
    assert!(e.contains("object 0: contour.size3D.y is not a finite number"), "{e}");

    // NaN as Python's json.dump writes it: not JSON.
    let path = root.join("nan.zip");
    write_export(&path, &scene, &frames, &exported);
    let bytes = std::fs::read(&path).unwrap();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let file = std::fs::File::create(root.join("nan2.zip")).unwrap();
    let mut out = zip::ZipWriter::new(file);
    for k in 0..archive.len() {
        let mut entry = archive.by_index(k).unwrap();
        let name = entry.name().unwrap().into_owned();
        let mut text = String::new();
        entry.read_to_string(&mut text).unwrap();
        if name.ends_with(&format!("result/{first}.json")) {
            let x = exported[&first][0]["contour"]["center3D"]["x"].to_string();
            text = text.replacen(&format!("\"x\":{x}"), "\"x\":NaN", 1);
        }
        out.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        out.write_all(text.as_bytes()).unwrap();
    }
    out.finish().unwrap();
    let e = import_xtreme1(&root.join("nan2.zip"), &shards, &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    assert!(files(&dir) == snapshot);

    let whole = std::fs::read(&path).unwrap();
    let truncated = root.join("truncated.zip");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    let e = import_xtreme1(&truncated, &shards, &ImportOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("truncated.zip") && e.to_string().contains("zip"),
        "{e}"
    );
    assert!(files(&dir) == snapshot);
    // The intact export imports.
    import_xtreme1(&path, &shards, &ImportOptions::default()).unwrap();
}
