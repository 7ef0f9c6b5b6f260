//! Output that appears whole or not at all (issue 18, "Partial output that looks complete"): the
//! M3ED writers and the simulator's JSON-lines and Parquet truth write under `<name>.partial`
//! and rename when complete, so an interrupted writer or a killed `simulate` never leaves a
//! file under its final name that reads as complete.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use boxlayer::atomic_file::{PARTIAL_SUFFIX, partial_path};
use boxlayer::eval::input::load_jsonl;
use boxlayer::frame::Platform;
use boxlayer::sim::{SimConfig, Simulator, default_sequence_name, write_m3ed_sequence};
use boxlayer::sources::m3ed::{M3edConfig, M3edSource, M3edWriter, M3edWriterSetup, MetadataFlavour, OusterMetadata};
use boxlayer::sources::m3ed::{PoseTimeType, SweepPixels, write_pose_gt};
use nalgebra::Isometry3;

fn setup() -> M3edWriterSetup {
    M3edWriterSetup {
        metadata: OusterMetadata::os1_64_2048x10(),
        metadata_flavour: MetadataFlavour::LegacyFlat,
        lidar_to_prophesee_left: Isometry3::identity(),
        rgb: None,
        imu_to_prophesee_left: Isometry3::identity(),
        first_frame_id: 0,
        version: "test".into(),
        raw_bag_name: "test.bag".into(),
    }
}

/// A writer dropped before `finish` (a crash, an error on the way) leaves only `.partial`.
#[test]
fn an_unfinished_m3ed_writer_leaves_no_file_under_the_final_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spot_partial_1_data.h5");
    let mut writer = M3edWriter::create(&path, setup()).unwrap();
    writer.write_skipped_sweep().unwrap();
    assert!(!path.exists());
    assert!(partial_path(&path).exists());
    drop(writer);
    assert!(!path.exists(), "an unfinished file stands under its final name");

    let mut writer = M3edWriter::create(&path, setup()).unwrap();
    let f = OusterMetadata::os1_64_2048x10().data_format;
    let pixels = SweepPixels::empty(f.pixels_per_column, f.columns_per_frame);
    writer.write_sweep(1_000_000, 1_099_951, &pixels).unwrap();
    assert_eq!(writer.finish().unwrap(), path);
    assert!(path.exists());
    assert!(!partial_path(&path).exists());

    let pose = dir.path().join("spot_partial_1_pose_gt.h5");
    write_pose_gt(
        &pose,
        &[1_099_951],
        &[Isometry3::identity()],
        &Isometry3::identity(),
        PoseTimeType::Int64,
    )
    .unwrap();
    assert!(pose.exists() && !partial_path(&pose).exists());
}

/// A failure after the sensor files (here: the Parquet truth cannot take its name) leaves the
/// JSON-lines truth under its temporary name, never a complete-looking truncated file.
#[test]
fn a_failed_sequence_write_leaves_no_complete_looking_truth() {
    let dir = tempfile::tempdir().unwrap();
    let config = SimConfig {
        frames: 1,
        ..SimConfig::default()
    };
    let sim = Simulator::new(config, Platform::Quadruped, 4).unwrap();
    let name = default_sequence_name(Platform::Quadruped, 4).unwrap();
    // A folder where the Parquet box table should go makes its rename fail.
    std::fs::create_dir_all(dir.path().join(format!("{name}_boxes_gt.parquet/blocker"))).unwrap();
    assert!(write_m3ed_sequence(&sim, 1, dir.path(), &name).is_err());
    assert!(!dir.path().join(format!("{name}_boxes_gt.jsonl")).exists());
}

/// Every file a `simulate` killed at some point left under a final name is complete: the data
/// file opens and decodes, the truth loads, and nothing but `.partial` files is half-written.
#[test]
fn a_killed_simulate_leaves_only_complete_files_under_final_names() {
    for kill_after_ms in [150u64, 500, 1_000] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .args([
                "simulate",
                "--platform",
                "quadruped",
                "--frames",
                "6",
                "--seed",
                "9",
                "--out",
            ])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(kill_after_ms) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        check_complete(dir.path());
    }
}

fn check_complete(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(PARTIAL_SUFFIX) || name.ends_with(".tmp") {
            continue;
        }
        if name.ends_with("_data.h5") {
            let source = M3edSource::open(&path, M3edConfig::default()).unwrap();
            assert!(source.has_poses(), "{name}: a data file stands without its pose file");
            for i in 0..source.summary().unwrap().sweeps {
                boxlayer::sources::Source::frame(&source, i).unwrap();
            }
        } else if name.ends_with(".jsonl") {
            load_jsonl(&path).unwrap();
        } else if name.ends_with("_pose_gt.h5") || name.ends_with(".parquet") {
            assert!(std::fs::metadata(&path).unwrap().len() > 0, "{name}");
        } else {
            panic!("unexpected file {name}");
        }
    }
}
