//! Issue 20: one simulated log written in every format boxlayer reads reads back the same, and
//! `detect` gives the same boxes for the same points whatever the format. Simulated drone and
//! quadruped logs (M3ED HDF5: sweeps, poses, IMU, a camera) and a car segment (Waymo v1 TFRecord) are
//! read natively, their frames written as a KITTI sequence folder, PCD files (binary, ascii,
//! binary_compressed), `.npy` arrays and a ROS 2 MCAP bag, read back, and run through a bundled
//! detector with `detect_file`, the function behind `boxlayer detect` (the PCD, NumPy and MCAP
//! round trips field by field are `tests/pcd_npy_sources.rs` and `tests/mcap_source.rs`).

use std::path::{Path, PathBuf};

use boxlayer::cloud::PointCloud;
use boxlayer::detect::{DetectInput, detect_file};
use boxlayer::frame::{Distortion, Frame, Platform};
use boxlayer::sim::{SimConfig, WaymoWriteOptions, simulate_m3ed, simulate_waymo_with};
use boxlayer::sources::kitti::{KittiBinSource, KittiConfig, write_kitti_sequence};
use boxlayer::sources::mcap::{BagWriteOptions, write_bag};
use boxlayer::sources::npy::write_npy;
use boxlayer::sources::pcd::{PcdEncoding, write_pcd};
use boxlayer::sources::{Source, SourceOptions, open};

const SWEEPS: usize = 3;

fn detector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("detectors/pointpillars_anchor_sim")
}

fn small_config() -> SimConfig {
    SimConfig {
        frames: SWEEPS,
        ..SimConfig::default()
    }
}

/// Frames of a simulated M3ED log (drone or quadruped), read natively.
fn m3ed_log(dir: &Path, platform: Platform) -> (PathBuf, Vec<Frame>) {
    let summary = simulate_m3ed(small_config(), platform, SWEEPS, 11, dir).unwrap();
    let source = open(&summary.data_path, None, &SourceOptions::default()).unwrap();
    let frames = (0..source.len()).map(|i| source.frame(i).unwrap()).collect();
    (summary.data_path, frames)
}

/// Frames of a simulated car segment without camera images, read natively (Waymo v1).
fn car_log(dir: &Path) -> (PathBuf, Vec<Frame>) {
    let options = WaymoWriteOptions {
        cameras: Vec::new(),
        ..WaymoWriteOptions::default()
    };
    let summary = simulate_waymo_with(small_config(), &options, SWEEPS, 12, dir).unwrap();
    let source = open(&summary.segment_path, None, &SourceOptions::default()).unwrap();
    let frames = (0..source.len()).map(|i| source.frame(i).unwrap()).collect();
    (summary.segment_path, frames)
}

fn assert_same_points(a: &Frame, b: &Frame, what: &str) {
    assert_eq!(a.cloud.len(), b.cloud.len(), "{what}: point count");
    for (axis, (u, v)) in [
        ("x", (a.cloud.x(), b.cloud.x())),
        ("y", (a.cloud.y(), b.cloud.y())),
        ("z", (a.cloud.z(), b.cloud.z())),
        ("intensity", (a.cloud.intensity(), b.cloud.intensity())),
    ] {
        let worst = u.iter().zip(v).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-6, "{what}: {axis} differs by up to {worst}");
    }
}

fn assert_same_pose(a: &Frame, b: &Frame, what: &str) {
    let d = a.world_from_sensor.inverse() * b.world_from_sensor;
    assert!(
        d.translation.vector.norm() < 1e-9,
        "{what}: pose translation off by {}",
        d.translation.vector.norm()
    );
    assert!(
        d.rotation.angle() < 1e-9,
        "{what}: pose rotation off by {} rad",
        d.rotation.angle()
    );
}

/// The frame's x, y, z and intensity alone (what every format carries).
fn base_cloud(frame: &Frame) -> PointCloud {
    let c = &frame.cloud;
    PointCloud::from_columns(c.x().to_vec(), c.y().to_vec(), c.z().to_vec(), c.intensity().to_vec()).unwrap()
}

/// The boxes `detect` finds on frame `frame` of `path`: box, class and score, bit for bit.
fn boxes(path: &Path, frame: usize) -> Vec<String> {
    let report = detect_file(&detector_dir(), path, frame, &DetectInput::default()).unwrap();
    report
        .detections
        .iter()
        .map(|d| format!("{:?} {:?} {}", d.box3, d.class, d.score))
        .collect()
}

/// A drone log as a KITTI folder: the same points, times, poses and camera image back; IMU
/// samples have no place in KITTI odometry and are not written.
#[test]
fn a_kitti_sequence_folder_reads_back_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut frames) = m3ed_log(dir.path(), Platform::Drone);
    assert!(frames.iter().all(|f| !f.cameras.is_empty() && !f.imu.is_empty()));
    // The simulated M3ED camera is distorted; KITTI's are rectified: a distorted camera is not
    // written, an undistorted one is.
    let skipped = write_kitti_sequence(&dir.path().join("distorted"), &frames).unwrap();
    assert_eq!((skipped.images, skipped.cameras_skipped.len()), (0, 1), "{skipped:?}");
    for f in &mut frames {
        for c in &mut f.cameras {
            c.calibration.distortion = Distortion::None;
        }
    }
    let root = dir.path().join("kitti/sequences/00");
    let summary = write_kitti_sequence(&root, &frames).unwrap();
    assert_eq!((summary.sweeps, summary.images), (SWEEPS, SWEEPS));
    let source = KittiBinSource::open(&root, KittiConfig::default()).unwrap();
    assert_eq!(source.len(), SWEEPS);
    for (i, native) in frames.iter().enumerate() {
        let back = source.frame(i).unwrap();
        let what = format!("kitti frame {i}");
        assert_same_points(native, &back, &what);
        assert_same_pose(native, &back, &what);
        assert_eq!(back.timestamp_micros, native.timestamp_micros, "{what}");
        let (a, b) = (&native.cameras[0], &back.cameras[0]);
        assert_eq!(
            a.image().unwrap().as_raw(),
            b.image().unwrap().as_raw(),
            "{what}: image pixels"
        );
        let (ca, cb) = (&a.calibration, &b.calibration);
        assert_eq!((ca.width, ca.height), (cb.width, cb.height));
        for (u, v) in [(ca.fx, cb.fx), (ca.fy, cb.fy), (ca.cx, cb.cx), (ca.cy, cb.cy)] {
            assert!((u - v).abs() < 1e-9, "{what}: intrinsics {u} vs {v}");
        }
        let mount = ca.sensor_from_camera.inverse() * cb.sensor_from_camera;
        assert!(
            mount.translation.vector.norm() < 1e-9 && mount.rotation.angle() < 1e-9,
            "{what}: camera mount"
        );
    }
}

/// The same sweep gives the same boxes from its native log and from each other format.
#[test]
fn detect_gives_the_same_boxes_for_the_same_points_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    // The quadruped, not the drone: the bundled detectors find boxes in its sweeps to compare.
    let logs = [
        ("quadruped", m3ed_log(dir.path(), Platform::Quadruped)),
        ("car", car_log(dir.path())),
    ];
    for (name, (native_path, frames)) in logs {
        let kitti = dir.path().join(format!("{name}_kitti"));
        write_kitti_sequence(&kitti, &frames).unwrap();
        let frame = SWEEPS - 1;
        let native = boxes(&native_path, frame);
        assert!(
            !native.is_empty() || name == "drone",
            "{name}: the car sweep has boxes to compare"
        );
        assert_eq!(boxes(&kitti, frame), native, "{name}: KITTI folder");
        // One sweep on its own, as `detect` is most often given one.
        let single = kitti.join(format!("velodyne/{frame:06}.bin"));
        assert_eq!(boxes(&single, 0), native, "{name}: one .bin");
        // A nuScenes `*.pcd.bin` (five floats a point, the fifth the ring) is read with its own
        // layout: the same boxes as its first four columns.
        let nuscenes = dir.path().join(format!("n008__LIDAR_TOP__{name}.pcd.bin"));
        let c = &frames[frame].cloud;
        let bytes: Vec<u8> = (0..c.len())
            .flat_map(|i| [c.x()[i], c.y()[i], c.z()[i], c.intensity()[i], (i % 32) as f32])
            .flat_map(f32::to_le_bytes)
            .collect();
        std::fs::write(&nuscenes, bytes).unwrap();
        assert_eq!(boxes(&nuscenes, 0), native, "{name}: nuScenes .pcd.bin");
        let pcd = dir.path().join(format!("{name}_pcd"));
        std::fs::create_dir_all(&pcd).unwrap();
        for (i, f) in frames.iter().enumerate() {
            write_pcd(&pcd.join(format!("{i:06}.pcd")), &base_cloud(f), PcdEncoding::Binary).unwrap();
        }
        assert_eq!(boxes(&pcd, frame), native, "{name}: PCD binary folder");
        let last = base_cloud(&frames[frame]);
        for (file, encoding) in [
            ("ascii.pcd", PcdEncoding::Ascii),
            ("lzf.pcd", PcdEncoding::BinaryCompressed),
        ] {
            let path = dir.path().join(format!("{name}_{file}"));
            write_pcd(&path, &last, encoding).unwrap();
            assert_eq!(boxes(&path, 0), native, "{name}: {file}");
        }
        let npy = dir.path().join(format!("{name}.npy"));
        write_npy(&npy, &last, &["x", "y", "z", "intensity"]).unwrap();
        assert_eq!(boxes(&npy, 0), native, "{name}: .npy");
        let bag = dir.path().join(format!("{name}.mcap"));
        write_bag(&bag, &frames, &BagWriteOptions::default()).unwrap();
        assert_eq!(boxes(&bag, frame), native, "{name}: MCAP bag");
    }
}
