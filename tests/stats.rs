//! `boxlayer stats` (issue 24) on a layer built from simulated drone and quadruped logs: the JSON
//! agrees with an independent pyarrow + numpy recomputation (`tools/check_stats.py`), a few
//! numbers agree with counts taken here from the shard rows, the seven plots decode at their
//! size, incomplete folders are skipped and counted, and `--json -` prints JSON alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use boxlayer::Platform;
use boxlayer::shards::{read_box_rows, read_frame_rows, read_track_rows, sequence_dirs};
use serde_json::Value;

#[path = "support/sim_layer.rs"]
mod sim_layer;

use sim_layer::{run_layer, simulate_with_detections};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A finished sequence folder of `platform` under `out`, built from a simulated log with the
/// simulator's truth as the detections (no ONNX); returns the sequence folder.
fn layer(platform: Platform, seed: u64, frames: usize, root: &Path, out: &Path) -> PathBuf {
    run_layer(&simulate_with_detections(platform, seed, frames, root), out)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

fn boxlayer(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "boxlayer {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn stats_match_an_independent_recomputation_and_the_shard_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("shards");
    let drone = layer(Platform::Drone, 11, 20, tmp.path(), &out);
    let quadruped = layer(Platform::Quadruped, 12, 20, tmp.path(), &out);
    // Two incomplete folders beside them: an interrupted `.partial` and one without `_SUCCESS`.
    let partial = drone.with_file_name(format!("{}.partial", drone.file_name().unwrap().to_string_lossy()));
    copy_dir(&drone, &partial);
    let unfinished = quadruped.with_file_name("spot_unfinished");
    copy_dir(&quadruped, &unfinished);
    std::fs::remove_file(unfinished.join("_SUCCESS")).unwrap();
    assert_eq!(sequence_dirs(&out).len(), 2);

    let json_path = tmp.path().join("stats.json");
    let plots = tmp.path().join("plots");
    let output = boxlayer(&[
        "stats".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
        json_path.as_os_str(),
        "--plots".as_ref(),
        plots.as_os_str(),
        "--point-frames".as_ref(),
        "7".as_ref(),
    ]);
    let table = String::from_utf8(output.stdout).unwrap();
    for word in [
        "statistic",
        "drone",
        "quadruped",
        "all",
        "objects per frame",
        "points per box",
    ] {
        assert!(table.contains(word), "{word} missing from the table:\n{table}");
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 incomplete sequence folders skipped"), "{stderr}");

    // The independent recomputation.
    let check = Command::new("python3")
        .arg(repo("tools/check_stats.py"))
        .arg(&out)
        .arg(&json_path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install numpy and pyarrow with `make setup`"));
    assert!(
        check.status.success(),
        "check_stats.py failed:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // Counts taken here from the shard rows.
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(stats["incomplete_skipped"], 2);
    assert_eq!(stats["point_frames"], 7);
    for (name, dir) in [("drone", &drone), ("quadruped", &quadruped)] {
        let p = &stats["platforms"][name];
        let frames = read_frame_rows(&dir.join("frames.parquet")).unwrap();
        let boxes = read_box_rows(&dir.join("boxes.parquet")).unwrap();
        let tracks = read_track_rows(&dir.join("tracks.parquet")).unwrap();
        assert_eq!(p["sequences"], 1);
        assert_eq!(p["frames"], 20);
        assert_eq!(p["boxes"], boxes.len());
        assert_eq!(p["tracks"], tracks.len());
        // Frames with no box row: the first objects-per-frame bin.
        let empty = frames
            .iter()
            .filter(|f| !boxes.iter().any(|b| b.frame_index == f.frame_index))
            .count();
        assert_eq!(p["objects_per_frame"]["histogram"]["counts"][0], empty);
        let below_100 = boxes.iter().filter(|b| b.num_points_inside < 100).count();
        assert_eq!(p["points_per_box"]["below_100"], below_100);
        assert_eq!(p["points_per_box"]["histogram"]["counts"][0], below_100);
        // Boxes nearer than 10 m: the first ρ row, summed over θ.
        let near = boxes.iter().filter(|b| b.bev_range_m < 10.0).count() as u64;
        let row: u64 = p["target_polar"]["counts"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(row, near);
        let single = tracks.iter().filter(|t| t.num_boxes == 1).count();
        assert_eq!(p["track_lengths"]["histogram"]["counts"][0], single);
        let mut classes: BTreeMap<String, u64> = BTreeMap::new();
        for b in &boxes {
            *classes.entry(b.class.clone()).or_default() += 1;
        }
        assert_eq!(p["boxes_by_class"], serde_json::to_value(&classes).unwrap());
        // Every frame keeps its points (`outputs.points = "all"`): 7 of the 20 are read.
        assert_eq!(p["point_elevation"]["frames_with_points"], 20);
        assert_eq!(p["point_elevation"]["frames_used"], 7);
        assert!(p["point_elevation"]["points_used"].as_u64().unwrap() > 0);
    }
    assert_eq!(stats["all"]["frames"], 40);
    assert_eq!(stats["all"]["point_elevation"]["frames_used"], 14);

    // Seven plots, each a 900 × 500 PNG.
    let names = [
        "objects_per_frame",
        "points_per_box",
        "target_polar",
        "point_elevation",
        "class_counts",
        "track_lengths",
        "flag_rates",
    ];
    let mut found: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<String> = names.iter().map(|n| format!("{n}.png")).collect();
    expected.sort();
    assert_eq!(found, expected);
    for name in names {
        let image = image::open(plots.join(format!("{name}.png"))).unwrap();
        assert_eq!((image.width(), image.height()), (900, 500), "{name}");
    }

    // `--json -`: JSON alone on standard output, the same statistics; one sequence folder alone.
    let output = boxlayer(&[
        "stats".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
        "--point-frames".as_ref(),
        "7".as_ref(),
    ]);
    let again: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(again, stats);
    let output = boxlayer(&[
        "stats".as_ref(),
        drone.as_os_str(),
        "--json".as_ref(),
        "-".as_ref(),
        "--point-frames".as_ref(),
        "7".as_ref(),
    ]);
    let one: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(one["all"]["boxes"], stats["platforms"]["drone"]["boxes"]);
    assert_eq!(one["incomplete_skipped"], 0);
}

#[test]
fn a_folder_without_sequences_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .arg("stats")
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no complete sequence folder"), "{stderr}");
    assert!(stderr.contains(&tmp.path().display().to_string()), "{stderr}");
}
