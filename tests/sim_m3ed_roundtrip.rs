//! Simulated drone and quadruped sequences written as M3ED files (issues 4 and 6) read back
//! through `M3edSource` to exactly what the simulator cast: the same returns per (beam,
//! measurement column) within 1 mm, its poses relative to the first sweep, its IMU samples
//! (NaN rows dropped by the reader), and JSON-lines ground truth whose point counts match the
//! read-back returns carrying each object's track id (and, cast without rolling shutter or range
//! noise, lie in its box). Two runs of one seed give identical bytes, `tools/check_m3ed_h5.py`
//! (h5py) finds the documented M3ED tree in the files, and `boxlayer simulate` writes a readable
//! sequence (the car's Waymo segment is tested in `tests/sim_waymo_roundtrip.rs`).

#[path = "support/folder_files.rs"]
mod folder_files;
use folder_files::files;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::eval::input::load_jsonl;
use boxlayer::frame::Platform;
use boxlayer::geometry::{Box3, count_points_in_box};
use boxlayer::sim::{
    LidarSweep, OUSTER_COLUMNS, SimConfig, Simulator, default_sequence_name, simulate_m3ed, write_m3ed_sequence,
};
use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};

const SWEEPS: usize = 3;

/// How the sweeps are cast.
#[derive(Clone, Copy, PartialEq)]
enum Casting {
    /// Default config: rolling shutter and range noise, as M3ED sweeps are.
    Realistic,
    /// Every column cast from the mid-sweep pose without range noise, so each return lies on
    /// its object's surface in the frame of the boxes and points-in-box can be checked.
    Frozen,
}

fn simulator(platform: Platform, seed: u64, casting: Casting) -> Simulator {
    let mut config = SimConfig {
        frames: SWEEPS,
        ..SimConfig::default()
    };
    // Enough IMU gaps that NaN rows are written and dropped again within three sweeps.
    config.imu.gap_probability = 0.2;
    if casting == Casting::Frozen {
        config.rolling_shutter = false;
        config.lidar.range_noise_m = 0.0;
    }
    Simulator::new(config, platform, seed).unwrap()
}

fn u16_channel<'a>(cloud: &'a PointCloud, name: &str) -> &'a [u16] {
    match cloud.channel(name) {
        Some(ChannelData::U16(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

fn roundtrip(platform: Platform, seed: u64, casting: Casting) {
    let sim = simulator(platform, seed, casting);
    let dir = tempfile::tempdir().unwrap();
    let name = default_sequence_name(platform, seed).unwrap();
    let summary = write_m3ed_sequence(&sim, SWEEPS, dir.path(), &name).unwrap();
    assert_eq!(summary.points_per_sweep.len(), SWEEPS);

    let source = M3edSource::open(&summary.data_path, M3edConfig::default()).unwrap();
    assert_eq!(source.len(), SWEEPS);
    assert_eq!(source.meta().name, name);
    assert_eq!(source.meta().platform, platform);
    assert!(source.has_poses());
    let truth = load_jsonl(&summary.truth_path).unwrap();

    let first_pose = sim.sweep(0).unwrap().world_from_sensor;
    let (mut imu_rows, mut nan_rows) = (0, 0);
    let mut shortfalls = Vec::new();
    for index in 0..SWEEPS {
        let sweep = sim.sweep(index).unwrap();
        let LidarSweep::Ouster(scan) = &sweep.lidar else {
            panic!("not an Ouster sweep")
        };
        let frame = source.frame(index).unwrap();
        assert_eq!(frame.platform, platform);
        assert_eq!(frame.timestamp_micros, sweep.timestamp_micros);

        // Points: the simulator's returns keyed by (beam, measurement column), in its order.
        let expected = sim.sweep_points(&sweep);
        let keys: Vec<(usize, usize)> = (0..scan.range_mm.len())
            .filter(|&k| scan.range_mm[k] != 0)
            .map(|k| (k / OUSTER_COLUMNS, k % OUSTER_COLUMNS))
            .collect();
        assert_eq!(keys.len(), expected.len());
        assert_eq!(frame.cloud.len(), expected.len(), "sweep {index}: point count");
        assert_eq!(summary.points_per_sweep[index], expected.len());
        let ring = u16_channel(&frame.cloud, "ring");
        let column = u16_channel(&frame.cloud, "column");
        let read: HashMap<(usize, usize), usize> = (0..frame.cloud.len())
            .map(|i| ((ring[i] as usize, column[i] as usize), i))
            .collect();
        assert_eq!(
            read.len(),
            frame.cloud.len(),
            "sweep {index}: a channel pair read twice"
        );
        let mut read_track = vec![0u32; frame.cloud.len()];
        for (key, point) in keys.iter().zip(&expected) {
            let i = *read
                .get(key)
                .unwrap_or_else(|| panic!("sweep {index}: pixel {key:?} not read back"));
            let d = (frame.cloud.point(i) - point.position).norm();
            assert!(d <= 1e-3, "sweep {index}: pixel {key:?} off by {d} m");
            read_track[i] = point.track_id;
        }

        // Pose: M3ED's world is the first sweep's sensor frame.
        let expected_pose = first_pose.inverse() * sweep.world_from_sensor;
        let gap = (frame.world_from_sensor.to_homogeneous() - expected_pose.to_homogeneous())
            .abs()
            .max();
        assert!(gap <= 1e-6, "sweep {index}: pose off by {gap}");
        if index == 0 {
            assert!(
                (frame.world_from_sensor.to_homogeneous() - nalgebra::Matrix4::identity())
                    .abs()
                    .max()
                    < 1e-12
            );
        }

        // IMU: every finite sample between ts_start and ts_end, bit for bit.
        imu_rows += sweep.imu.len();
        nan_rows += sweep.imu.iter().filter(|s| s.accel_mps2.x.is_nan()).count();
        let entry = &source.sweeps()[index];
        let sim_imu: Vec<_> = sweep
            .imu
            .iter()
            .filter(|s| s.accel_mps2.iter().chain(s.gyro_radps.iter()).all(|v| v.is_finite()))
            .filter(|s| (entry.ts_start..=entry.ts_end).contains(&s.timestamp_micros))
            .cloned()
            .collect();
        assert!(!sim_imu.is_empty());
        assert_eq!(frame.imu, sim_imu, "sweep {index}: IMU");

        // Ground truth: one line per labelled object, counts equal to the read-back hits.
        let boxes: Vec<_> = truth.boxes.iter().filter(|b| b.frame.frame == index as u64).collect();
        assert_eq!(boxes.len(), sweep.objects.len(), "sweep {index}: boxes");
        let mut hits = BTreeMap::<u32, u64>::new();
        for &t in read_track.iter().filter(|&&t| t != 0) {
            *hits.entry(t).or_default() += 1;
        }
        let mut hit_objects = 0;
        for (b, object) in boxes.iter().zip(&sweep.objects) {
            let track: u32 = b.track_id.as_deref().unwrap().parse().unwrap();
            assert_eq!(track, object.track_id);
            assert_eq!(b.class, object.class);
            assert_eq!(b.platform, Some(platform));
            assert_eq!(b.frame.sequence, name);
            let n = b.num_points.unwrap();
            assert_eq!(
                n,
                hits.get(&track).copied().unwrap_or(0),
                "sweep {index}: track {track}"
            );
            assert!((b.bbox.x - object.box_in_sensor.x).abs() < 1e-9);
            if n > 0 {
                hit_objects += 1;
                // 1 cm larger on each side for the mm range quantisation and f32 points.
                let grown = Box3 {
                    l: b.bbox.l + 0.02,
                    w: b.bbox.w + 0.02,
                    h: b.bbox.h + 0.02,
                    ..b.bbox
                };
                let inside = count_points_in_box(&frame.cloud, &grown) as u64;
                shortfalls.push((track, n, n.saturating_sub(inside)));
            }
        }
        assert!(hit_objects > 0, "sweep {index}: no object was hit");
        assert_eq!(hits.len(), hit_objects, "sweep {index}: hits on unlabelled track ids");
    }
    assert!(nan_rows > 0, "no IMU gap was simulated");
    assert_eq!(summary.imu_rows, imu_rows, "NaN rows are written too");
    // Points are not de-skewed and boxes are at mid-sweep: with a rolling shutter a walking
    // quadruped's 2 Hz gait tilts far returns by metres, so the box check needs frozen casting.
    // Then every return lies on its object (the box counts ground or neighbours too, hence ≥).
    if casting == Casting::Frozen {
        assert!(!shortfalls.is_empty());
        for &(track, n, short) in &shortfalls {
            assert_eq!(short, 0, "track {track}: {short} of {n} hit points outside its box");
        }
    }
}

#[test]
fn drone_sequence_reads_back_to_the_simulation() {
    roundtrip(Platform::Drone, 11, Casting::Realistic);
}

#[test]
fn quadruped_sequence_reads_back_to_the_simulation() {
    roundtrip(Platform::Quadruped, 12, Casting::Frozen);
}

#[test]
fn same_seed_gives_identical_bytes_and_the_h5_tree_is_documented() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = SimConfig::default();
    simulate_m3ed(config.clone(), Platform::Quadruped, 2, 5, a.path()).unwrap();
    // HDF5 stores object times with a one-second resolution: make the second run a later second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    simulate_m3ed(config.clone(), Platform::Quadruped, 2, 5, b.path()).unwrap();
    let (fa, fb) = (files(a.path()), files(b.path()));
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        [
            "spot_sim_seed5_boxes_gt.jsonl",
            "spot_sim_seed5_boxes_gt.parquet",
            "spot_sim_seed5_data.h5",
            "spot_sim_seed5_frames_gt.parquet",
            "spot_sim_seed5_pose_gt.h5"
        ]
    );
    for (name, bytes) in &fa {
        assert!(bytes == &fb[name], "{name} differs between two runs of seed 5");
    }
    let c = tempfile::tempdir().unwrap();
    simulate_m3ed(config, Platform::Quadruped, 2, 6, c.path()).unwrap();
    assert_ne!(
        fa["spot_sim_seed5_data.h5"],
        std::fs::read(c.path().join("spot_sim_seed6_data.h5")).unwrap()
    );

    // The documented tree, checked by h5py (tools/requirements-test.txt); fails when it is missing.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_m3ed_h5.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(a.path().join("spot_sim_seed5_data.h5"))
        .arg(a.path().join("spot_sim_seed5_pose_gt.h5"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install Python 3 and h5py with `make setup`"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check_m3ed_h5.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for needle in [
        "/ouster/data uint8 (2, 128, 12609) lzf",
        "/Ln_T_L0 float64 (2, 4, 4)",
        "mtime 0",
    ] {
        assert!(stdout.contains(needle), "missing `{needle}` in:\n{stdout}");
    }
}

#[test]
fn simulate_cli_writes_a_drone_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let run = |platform: &str| {
        Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .args([
                "simulate",
                "--platform",
                platform,
                "--frames",
                "1",
                "--seed",
                "3",
                "--out",
            ])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let drone = run("drone");
    let stdout = String::from_utf8_lossy(&drone.stdout);
    assert!(
        drone.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&drone.stderr)
    );
    for needle in [
        "falcon_sim_seed3",
        "sweeps         1",
        "points/sweep",
        "objects/sweep",
        "bytes written",
    ] {
        assert!(stdout.contains(needle), "missing `{needle}` in:\n{stdout}");
    }
    let source = M3edSource::open(&dir.path().join("falcon_sim_seed3_data.h5"), M3edConfig::default()).unwrap();
    assert_eq!((source.len(), source.meta().platform), (1, Platform::Drone));
}
