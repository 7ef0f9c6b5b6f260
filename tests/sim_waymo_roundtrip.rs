//! Simulated car sequences written as Waymo v1 segments (issues 4 and 5) read back through
//! `WaymoV1Source` to exactly what the simulator cast: every TOP return of
//! `Simulator::sweep_points` in the same order within 1 mm (after the reader's float32 per-pixel
//! pose), the stored range, intensity and elongation bit for bit, the frame pose and timestamps,
//! every labelled object's upright 7-dof box, class, track id, point count and velocity exactly,
//! the camera calibrations and JPEGs of the calibrated size; hit returns of static objects lie in
//! their JSON-lines ground-truth boxes. Two runs of one seed give identical bytes,
//! `tools/check_waymo_tfrecord.py` (an independent framing + protobuf walk) accepts the file, and
//! `boxlayer simulate --platform vehicle` writes a segment that `boxlayer inspect` summarises.

#[path = "support/folder_files.rs"]
mod folder_files;
#[path = "support/waymo_fixture.rs"]
mod waymo_fixture;

use folder_files::files;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::eval::input::load_jsonl;
use boxlayer::frame::Platform;
use boxlayer::geometry::{Box3, points_in_box_mask};
use boxlayer::sim::{
    DEFAULT_CAMERA_IMAGES, LidarSweep, SimConfig, Simulator, WaymoWriteOptions, camera_calibrations,
    default_segment_name, render_camera, segment_file_name, simulate_waymo_with, upright_box, write_waymo_segment_with,
};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::convert::{camera_calibration, label_type};
use boxlayer::sources::waymo::range_image::decompress_matrix;
use boxlayer::sources::waymo::{CameraName, WaymoConfig, WaymoV1Source};

const SWEEPS: usize = 2;

fn f32_channel<'a>(cloud: &'a PointCloud, name: &str) -> &'a [f32] {
    match cloud.channel(name) {
        Some(ChannelData::F32(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

fn u8_channel<'a>(cloud: &'a PointCloud, name: &str) -> &'a [u8] {
    match cloud.channel(name) {
        Some(ChannelData::U8(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

#[test]
fn vehicle_segment_reads_back_to_the_simulation() {
    let mut config = SimConfig {
        frames: SWEEPS,
        ..SimConfig::default()
    };
    // No range noise, so every return of a static object lies on its surface; the rolling
    // shutter stays on, so the per-pixel pose differs column by column.
    config.lidar.range_noise_m = 0.0;
    let sim = Simulator::new(config, Platform::Vehicle, 21).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = default_segment_name(21);
    let options = WaymoWriteOptions {
        cameras: vec![CameraName::SideLeft],
        ..WaymoWriteOptions::default()
    };
    let summary = write_waymo_segment_with(
        &sim,
        SWEEPS,
        dir.path(),
        &name,
        &options,
        &render_camera,
        DEFAULT_CAMERA_IMAGES,
    )
    .unwrap();
    assert_eq!(summary.segment_path, dir.path().join(segment_file_name(&name)));
    assert_eq!(summary.cameras, [CameraName::SideLeft]);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        leftovers.len(),
        4,
        "only the segment and the ground truth (JSON lines, two Parquet files) remain: {leftovers:?}"
    );

    let source = WaymoV1Source::open(&summary.segment_path, WaymoConfig::default()).unwrap();
    assert_eq!(source.len(), SWEEPS);
    assert_eq!(source.meta().name, name);
    assert_eq!(source.meta().platform, Platform::Vehicle);
    assert!(source.meta().skipped.is_empty());
    let truth = load_jsonl(&summary.truth_path).unwrap();
    let calibrations = camera_calibrations(&sim);

    let mut unique = BTreeMap::<i32, BTreeSet<u32>>::new();
    let mut static_hits_checked = 0;
    let sweeps: Vec<_> = (0..SWEEPS).map(|i| sim.sweep(i).unwrap()).collect();
    for (index, sweep) in sweeps.iter().enumerate() {
        let LidarSweep::Top(image) = &sweep.lidar else {
            panic!("not a TOP sweep")
        };
        let frame = source.frame(index).unwrap();
        assert_eq!(frame.timestamp_micros, sweep.timestamp_micros);
        assert_eq!(source.timestamps_micros()[index], sweep.timestamp_micros);
        let pose_gap = (frame.world_from_sensor.to_homogeneous() - sweep.world_from_sensor.to_homogeneous())
            .abs()
            .max();
        assert!(pose_gap < 1e-12, "frame {index}: pose off by {pose_gap}");

        // Points: the reader's order (return 1, row-major) is the simulator's.
        let expected = sim.sweep_points(sweep);
        assert_eq!(frame.cloud.len(), expected.len(), "frame {index}: point count");
        assert_eq!(summary.points_per_sweep[index], expected.len());
        let mut worst = 0.0f64;
        for (i, e) in expected.iter().enumerate() {
            let d = (frame.cloud.point(i) - e.position).norm();
            worst = worst.max(d);
        }
        assert!(worst <= 1e-3, "frame {index}: a point is {worst} m off");
        eprintln!("frame {index}: {} points, worst {worst:.1e} m off", expected.len());
        let valid: Vec<usize> = (0..image.range_m.len()).filter(|&k| image.range_m[k] > 0.0).collect();
        let pick = |v: &[f32]| valid.iter().map(|&k| v[k]).collect::<Vec<f32>>();
        assert_eq!(f32_channel(&frame.cloud, "range"), pick(&image.range_m));
        assert_eq!(frame.cloud.intensity(), pick(&image.intensity));
        assert_eq!(f32_channel(&frame.cloud, "elongation"), pick(&image.elongation));
        assert!(u8_channel(&frame.cloud, "laser_id").iter().all(|&l| l == 1));
        assert!(u8_channel(&frame.cloud, "return_index").iter().all(|&r| r == 1));
        assert!(u8_channel(&frame.cloud, "in_no_label_zone").iter().all(|&z| z == 0));

        // Boxes: one label per labelled object, in track order.
        assert_eq!(frame.ground_truth.len(), sweep.objects.len());
        assert_eq!(summary.objects_per_sweep[index], sweep.objects.len());
        assert!(sweep.objects.iter().any(|o| o.num_lidar_points > 0));
        for (gt, object) in frame.ground_truth.iter().zip(&sweep.objects) {
            assert_eq!(gt.track_id, object.track_id.to_string());
            assert_eq!(gt.class, object.class);
            assert_eq!(
                gt.box_in_sensor,
                upright_box(&object.box_in_sensor),
                "track {}",
                object.track_id
            );
            let b = object.box_in_sensor;
            assert_eq!(
                [
                    gt.box_in_sensor.x,
                    gt.box_in_sensor.l,
                    gt.box_in_sensor.w,
                    gt.box_in_sensor.h
                ],
                [b.x, b.l, b.w, b.h]
            );
            let dyaw = (gt.box_in_sensor.yaw - b.yaw).rem_euclid(std::f64::consts::TAU);
            assert!(dyaw < 1e-12 || std::f64::consts::TAU - dyaw < 1e-12);
            assert_eq!(gt.num_points, Some(object.num_lidar_points));
            assert_eq!(gt.velocity_mps, object.to_ground_truth_box().velocity_mps);
            unique
                .entry(label_type(object.class))
                .or_default()
                .insert(object.track_id);
        }

        // Raw proto: return 2 is the all −1 grid, return 1 has the pose, labels have accelerations.
        let p = source.frame_proto(index).unwrap();
        let top = &p.lasers[0];
        let second = top
            .ri_return2
            .as_ref()
            .unwrap()
            .range_image_compressed
            .as_ref()
            .unwrap();
        let second = decompress_matrix(second, 4).unwrap();
        assert_eq!((second.height, second.width), (64, 2650));
        assert!(second.data.iter().all(|&v| v == -1.0));
        let pose = top
            .ri_return1
            .as_ref()
            .unwrap()
            .range_image_pose_compressed
            .as_ref()
            .unwrap();
        assert_eq!(decompress_matrix(pose, 6).unwrap().data.len(), 64 * 2650 * 6);
        // Accelerations: the velocity change between the two sweeps, in this sweep's vehicle
        // frame, for tracks labelled in both; none for the others.
        let other = &sweeps[1 - index];
        let mut with_accel = 0;
        for (label, object) in p.laser_labels.iter().zip(&sweep.objects) {
            let m = label.metadata.as_ref().unwrap();
            let got = m
                .accel_x
                .map(|x| nalgebra::Vector3::new(x, m.accel_y.unwrap(), m.accel_z.unwrap()));
            let Some(o) = other.objects.iter().find(|o| o.track_id == object.track_id) else {
                assert_eq!(got, None, "track {} is in one sweep only", object.track_id);
                continue;
            };
            let (v0, v1) = if index == 0 {
                (object.velocity_in_world, o.velocity_in_world)
            } else {
                (o.velocity_in_world, object.velocity_in_world)
            };
            let expect = sweep.world_from_sensor.rotation.inverse() * ((v1 - v0) / 0.1);
            assert!((got.unwrap() - expect).norm() < 1e-9, "track {}", object.track_id);
            with_accel += 1;
        }
        assert!(with_accel > 0);
        assert_eq!(p.projected_lidar_labels.len(), 5);
        let projected: usize = p.projected_lidar_labels.iter().map(|c| c.labels.len()).sum();
        assert!(projected > 0, "frame {index}: no label projects into any camera");

        // Cameras: the chosen one, with the written calibration and a rendered image of that size.
        let names: Vec<&str> = frame.cameras.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["SIDE_LEFT"]);
        for view in &frame.cameras {
            let k = CameraName::from_name(&view.name).unwrap() as usize - 1;
            assert_eq!(view.calibration, camera_calibration(&calibrations[k]).unwrap());
            assert_eq!(view.timestamp_micros, sweep.reference_time_micros);
            let decoded = view.image().unwrap();
            assert_eq!(decoded.dimensions(), (view.calibration.width, view.calibration.height));
            let colours: BTreeSet<[u8; 3]> = decoded.pixels().step_by(97).map(|p| p.0).collect();
            assert!(colours.len() > 100, "a flat image: {} colours", colours.len());
        }

        // Ground truth lines: the simulator's 9-dof boxes; hit returns of static objects lie in
        // them (moving actors smear over the rolling sweep, so they are left out).
        let boxes: Vec<_> = truth.boxes.iter().filter(|b| b.frame.frame == index as u64).collect();
        assert_eq!(boxes.len(), sweep.objects.len());
        for (b, object) in boxes.iter().zip(&sweep.objects) {
            assert_eq!(b.bbox, object.box_in_sensor);
            assert_eq!(b.track_id.as_deref(), Some(object.track_id.to_string().as_str()));
            if object.num_lidar_points == 0 || object.velocity_in_world.norm() > 0.0 {
                continue;
            }
            let grown = Box3 {
                l: b.bbox.l + 0.02,
                w: b.bbox.w + 0.02,
                h: b.bbox.h + 0.02,
                ..b.bbox
            };
            let hits: Vec<usize> = (0..expected.len())
                .filter(|&i| expected[i].track_id == object.track_id)
                .collect();
            assert_eq!(hits.len() as u32, object.num_lidar_points);
            let column = |v: &[f32]| hits.iter().map(|&i| v[i]).collect::<Vec<f32>>();
            let (x, y, z) = (
                column(frame.cloud.x()),
                column(frame.cloud.y()),
                column(frame.cloud.z()),
            );
            let mut mask = Vec::new();
            points_in_box_mask(&x, &y, &z, &grown, &mut mask);
            let inside = mask.iter().filter(|&&m| m).count();
            assert_eq!(
                inside,
                hits.len(),
                "track {}: hit returns outside its box",
                object.track_id
            );
            static_hits_checked += 1;
        }
    }
    assert!(static_hits_checked > 0, "no static object was hit");

    // Stats: unique labelled objects per type over the segment.
    let context = source.frame_proto(0).unwrap().context.unwrap();
    let counts: Vec<(i32, i32)> = context
        .stats
        .unwrap()
        .laser_object_counts
        .iter()
        .map(|c| (c.r#type.unwrap(), c.count.unwrap()))
        .collect();
    let expected: Vec<(i32, i32)> = unique.iter().map(|(t, ids)| (*t, ids.len() as i32)).collect();
    assert_eq!(counts, expected);
}

#[test]
fn same_seed_gives_identical_bytes_and_an_independent_check_accepts_the_segment() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let config = SimConfig::default();
    // One camera keeps the debug-build run short; all five are calibrated either way.
    let options = WaymoWriteOptions {
        cameras: vec![CameraName::SideRight],
        ..WaymoWriteOptions::default()
    };
    simulate_waymo_with(config.clone(), &options, SWEEPS, 5, a.path()).unwrap();
    simulate_waymo_with(config, &options, SWEEPS, 5, b.path()).unwrap();
    let (fa, fb) = (files(a.path()), files(b.path()));
    let segment = segment_file_name("sim_seed5");
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        [
            "segment-sim_seed5_with_camera_labels.tfrecord",
            "sim_seed5_boxes_gt.jsonl",
            "sim_seed5_boxes_gt.parquet",
            "sim_seed5_frames_gt.parquet"
        ]
    );
    for (name, bytes) in &fa {
        assert!(bytes == &fb[name], "{name} differs between two runs of seed 5");
    }

    // Independent check: CRCs, protobuf walk, zlib sizes, JPEG decode (tools/requirements-test.txt).
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_waymo_tfrecord.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(a.path().join(&segment))
        .args(["--frames", "2", "--cameras", "1", "--top"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install Python 3 with `make setup`"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check_waymo_tfrecord.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for needle in [
        "context `sim_seed5`",
        "TOP/1 [64, 2650, 4]",
        "pose [64, 2650, 6]",
        "TOP/2 [64, 2650, 4] 0 returns",
        "5 camera calibrations",
        "1 JPEG images",
        "laser TOP 64 inclinations",
        "camera SIDE_LEFT 1920x886 rs 5",
        "ok 2 records",
    ] {
        assert!(stdout.contains(needle), "missing `{needle}` in:\n{stdout}");
    }

    // The checker is no rubber stamp: one flipped byte in the last record's data is found.
    let mut damaged = fa[&segment].clone();
    let at = damaged.len() - 100;
    damaged[at] ^= 0x40;
    let damaged_path = c.path().join("damaged.tfrecord");
    std::fs::write(&damaged_path, damaged).unwrap();
    let output = Command::new("python3")
        .arg(&script)
        .arg(&damaged_path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("record 1 at offset"));
    assert!(String::from_utf8_lossy(&output.stdout).contains("bad data crc"));
}

fn field<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line `{prefix}` in:\n{text}"))
        .trim()
}

#[test]
fn simulate_cli_writes_a_vehicle_segment_that_inspect_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let simulate = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_boxlayer"))
            .args([
                "simulate",
                "--platform",
                "vehicle",
                "--frames",
                "1",
                "--seed",
                "3",
                "--out",
            ])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = simulate(&["--cameras", "FRONT,REAR"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("unknown Waymo camera `REAR`"), "{stderr}");
    // One rendered camera keeps the debug-build run short.
    let simulate = simulate(&["--cameras", "SIDE_RIGHT"]);
    let stdout = String::from_utf8_lossy(&simulate.stdout).into_owned();
    assert!(
        simulate.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&simulate.stderr)
    );
    assert_eq!(field(&stdout, "segment"), "sim_seed3");
    assert_eq!(field(&stdout, "frames"), "1");
    assert!(
        field(&stdout, "cameras").starts_with("1 JPEG q90 per frame: SIDE_RIGHT"),
        "{stdout}"
    );
    // With one frame the mean is the count: "mean 119659.0, min 119659, max 119659 (…)".
    let count = |line: &str| -> usize {
        line.split("min ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let points = count(field(&stdout, "points/sweep"));
    let labels = count(field(&stdout, "objects/sweep"));
    assert!(points > 50_000, "{stdout}");
    assert!(labels > 0, "{stdout}");

    let segment = dir.path().join("segment-sim_seed3_with_camera_labels.tfrecord");
    let inspect = Command::new(env!("CARGO_BIN_EXE_boxlayer"))
        .arg("inspect")
        .arg(&segment)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    for needle in [
        "Waymo v1 segment `sim_seed3`".to_string(),
        "1 frames, 0 damaged records skipped".to_string(),
        format!("TOP        beams 64 (listed), returns: 12, {points} points"),
        "FRONT        1920x1280".to_string(),
        "image none".to_string(),
        "SIDE_RIGHT   1920x886".to_string(),
        format!("labels ({labels} in all frames)"),
    ] {
        assert!(text.contains(&needle), "missing `{needle}` in:\n{text}");
    }
}

/// The simulated cameras are the real car's: same names and sizes, focal lengths within 1 %,
/// principal points within 10 px, optical axes within 1° in yaw and pitch, positions within 3 cm
/// (x, y) of `frame_with_cameras.tfrecord`; heights 7 cm below the TOP LiDAR on both.
#[test]
fn camera_calibrations_are_modelled_on_the_real_car() {
    let Some(real_path) = waymo_fixture::waymo_fixture("frame_with_cameras.tfrecord") else {
        return;
    };
    let real = WaymoV1Source::open(&real_path, WaymoConfig::default()).unwrap();
    let real = real.frame_proto(0).unwrap().context.unwrap();
    let real_top_z = real
        .laser_calibrations
        .iter()
        .find(|c| c.name == Some(1))
        .and_then(|c| c.extrinsic.as_ref())
        .unwrap()
        .transform[11];
    let sim = Simulator::new(
        SimConfig {
            frames: 1,
            ..SimConfig::default()
        },
        Platform::Vehicle,
        4,
    )
    .unwrap();
    let top_z = sim.sensor_from_lidar().translation.vector.z;
    // Yaw and downward pitch of the optical axis (camera +x) in the vehicle frame.
    let axis = |c: &boxlayer::CameraCalibration| {
        let a = c.sensor_from_camera.rotation * nalgebra::Vector3::x();
        (a.y.atan2(a.x).to_degrees(), (-a.z).asin().to_degrees())
    };
    for simulated in camera_calibrations(&sim) {
        let r = real
            .camera_calibrations
            .iter()
            .find(|r| r.name == simulated.name)
            .unwrap();
        let (s, r) = (camera_calibration(&simulated).unwrap(), camera_calibration(r).unwrap());
        assert_eq!((s.width, s.height), (r.width, r.height));
        assert!((s.fx / r.fx - 1.0).abs() < 0.01, "{} vs {}", s.fx, r.fx);
        assert!((s.cx - r.cx).abs() < 10.0 && (s.cy - r.cy).abs() < 10.0);
        let ((sy, sp), (ry, rp)) = (axis(&s), axis(&r));
        assert!(
            (sy - ry).abs() < 1.0 && (sp - rp).abs() < 1.0,
            "yaw {sy} vs {ry}, pitch {sp} vs {rp}"
        );
        let (st, rt) = (
            s.sensor_from_camera.translation.vector,
            r.sensor_from_camera.translation.vector,
        );
        assert!((st.x - rt.x).abs() < 0.03 && (st.y - rt.y).abs() < 0.03, "{st} vs {rt}");
        assert!(((top_z - st.z) - (real_top_z - rt.z)).abs() < 0.01);
        assert_eq!(
            simulated.rolling_shutter_direction,
            Some(5),
            "rendered images are global shutter"
        );
    }
}
