//! The Waymo v1 reader and the camera model against real Waymo frames and v2 Parquet files
//! (`../shared/fixtures/waymo/`, issue 5 acceptance).

use std::collections::BTreeMap;

use boxlayer::camera::project_box;
use boxlayer::frame::{CameraAxes, ObjectClass};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::v2::{ComponentTable, camera_from_name};
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source};

#[path = "support/waymo_fixture.rs"]
mod waymo_fixture;

/// The fixture, or an early return from the test when it is absent outside CI.
macro_rules! fixture {
    ($name:expr) => {
        match waymo_fixture::waymo_fixture($name) {
            Some(path) => path,
            None => return,
        }
    };
}

#[test]
fn frame_with_cameras_decodes_cameras_labels_and_metadata() {
    let source = WaymoV1Source::open(&fixture!("frame_with_cameras.tfrecord"), WaymoConfig::default()).unwrap();
    assert_eq!(source.len(), 1);
    assert_eq!(source.meta().name, "1024360143612057520_3580_000_3600_000");
    assert!(source.meta().skipped.is_empty());
    let frame = source.frame(0).unwrap();
    assert_eq!(frame.timestamp_micros, 1553735853462203);
    assert_eq!(frame.sequence, "1024360143612057520_3580_000_3600_000");
    // The fixture's lasers are empty messages: no range images, no points.
    assert!(frame.cloud.is_empty());

    // All five cameras decode to their calibrated size.
    let names: Vec<&str> = frame.cameras.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT"]);
    for camera in &frame.cameras {
        let image = camera.image().unwrap();
        let c = &camera.calibration;
        assert_eq!((image.width(), image.height()), (c.width, c.height), "{}", camera.name);
        assert_eq!(c.width, 1920);
        assert_eq!(c.height, if camera.name.starts_with("SIDE") { 886 } else { 1280 });
        assert_eq!(c.axes, CameraAxes::Waymo);
        // Camera time is 20–70 ms after the frame time.
        let dt = camera.timestamp_micros - frame.timestamp_micros;
        assert!((15_000..80_000).contains(&dt), "{} dt {dt}", camera.name);
    }

    // 75 labels: 37 VEHICLE, 12 PEDESTRIAN, 25 SIGN, 1 CYCLIST, every one with an id.
    assert_eq!(frame.ground_truth.len(), 75);
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for gt in &frame.ground_truth {
        *by_type.entry(gt.source_label.as_str()).or_default() += 1;
        assert!(!gt.track_id.is_empty());
        let expected_class = match gt.source_label.as_str() {
            "TYPE_VEHICLE" => ObjectClass::Vehicle,
            "TYPE_PEDESTRIAN" => ObjectClass::Pedestrian,
            "TYPE_CYCLIST" => ObjectClass::Cyclist,
            _ => ObjectClass::Unknown,
        };
        assert_eq!(gt.class, expected_class);
        assert!(gt.velocity_mps.is_some(), "metadata speed present in this file");
    }
    assert_eq!(
        by_type,
        BTreeMap::from([
            ("TYPE_CYCLIST", 1),
            ("TYPE_PEDESTRIAN", 12),
            ("TYPE_SIGN", 25),
            ("TYPE_VEHICLE", 37)
        ])
    );
    let ids: std::collections::HashSet<&str> = frame.ground_truth.iter().map(|g| g.track_id.as_str()).collect();
    assert_eq!(ids.len(), 75, "ids are unique");
    // The reference's example pedestrian: width 0.87 (field 4), length 1.03 (field 5).
    let ped = frame
        .ground_truth
        .iter()
        .find(|g| (g.box_in_sensor.x - 10.23).abs() < 0.01 && (g.box_in_sensor.y - 1.98).abs() < 0.01)
        .expect("example pedestrian");
    assert_eq!(ped.class, ObjectClass::Pedestrian);
    assert!((ped.box_in_sensor.l - 1.03).abs() < 0.01 && (ped.box_in_sensor.w - 0.87).abs() < 0.01);
    assert!((ped.box_in_sensor.h - 1.59).abs() < 0.01 && (ped.box_in_sensor.yaw - 1.549).abs() < 0.001);
    assert_eq!(ped.num_points, Some(300));
}

/// The camera-model convention check: projecting each 3D label with the parsed calibration
/// reproduces the file's `projected_lidar_labels` (reference §1.3).
#[test]
fn projected_lidar_labels_are_reproduced_by_the_camera_model() {
    let source = WaymoV1Source::open(&fixture!("frame_with_cameras.tfrecord"), WaymoConfig::default()).unwrap();
    let frame = source.frame(0).unwrap();
    let projected = source.frame_proto(0).unwrap().projected_lidar_labels;
    let mut all_errors = Vec::new();
    let mut visible_errors = Vec::new();
    let mut unmatched = 0;
    let mut per_camera: Vec<(String, Vec<f64>)> = Vec::new();
    for camera_labels in &projected {
        let camera_name = boxlayer::sources::waymo::proto::camera_name_str(camera_labels.name.unwrap());
        let camera = frame.cameras.iter().find(|c| c.name == camera_name).unwrap();
        per_camera.push((camera_name.to_string(), Vec::new()));
        for label in &camera_labels.labels {
            let id = label.id.as_deref().unwrap();
            let laser_id = id
                .strip_suffix(&format!("_{camera_name}"))
                .expect("id is <laser id>_<camera>");
            let gt = frame.ground_truth.iter().find(|g| g.track_id == laser_id).unwrap();
            let b = label.bbox.as_ref().unwrap();
            // 2D boxes: length is the extent along image x, width along image y.
            let (cx, cy, len, wid) = (
                b.center_x.unwrap(),
                b.center_y.unwrap(),
                b.length.unwrap(),
                b.width.unwrap(),
            );
            let expected = [cx - len / 2.0, cy - wid / 2.0, cx + len / 2.0, cy + wid / 2.0];
            let Some(p) = project_box(&camera.calibration, &gt.box_in_sensor) else {
                unmatched += 1;
                continue;
            };
            let got = [p.x_min, p.y_min, p.x_max, p.y_max];
            let err = got.iter().zip(expected).map(|(g, e)| (g - e).abs()).fold(0.0, f64::max);
            if err > 1.0 {
                println!(
                    "{camera_name} {laser_id}: expected {expected:.1?} got {got:.1?} corners {} fraction {:.2}",
                    p.corners_projected, p.in_image_fraction
                );
            }
            all_errors.push(err);
            if let Some((_, errors)) = per_camera.last_mut() {
                errors.push(err);
            }
            if p.corners_projected == 8 && p.in_image_fraction == 1.0 {
                visible_errors.push(err);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let n_all = all_errors.len();
    let n_visible = visible_errors.len();
    let max_visible = visible_errors.iter().copied().fold(0.0, f64::max);
    let max_all = all_errors.iter().copied().fold(0.0, f64::max);
    let (median_all, median_visible) = (median(&mut all_errors), median(&mut visible_errors));
    println!(
        "projected_lidar_labels: {n_all} matched ({unmatched} not projected): median {median_all:.3} px, \
         max {max_all:.3} px; fully visible {n_visible}: median {median_visible:.3} px, max {max_visible:.3} px"
    );
    assert!(n_all > 20 && n_visible >= 10, "{n_all} {n_visible}");
    // Every one of the five cameras, not only their pool, within 1 px median.
    assert_eq!(per_camera.len(), 5);
    for (camera, errors) in &mut per_camera {
        assert!(!errors.is_empty(), "{camera}: no label projected");
        let m = median(errors);
        println!("{camera}: {} labels, median {m:.3} px", errors.len());
        assert!(m < 1.0, "{camera}: median {m} px");
    }
    assert!(median_all < 1.0, "median over all matched labels {median_all} px");
    assert!(
        median_visible < 1.0,
        "median over fully visible labels {median_visible} px"
    );
    assert!(max_visible < 2.0, "max over fully visible labels {max_visible} px");
}

#[test]
fn stripped_frame_without_images_or_lasers_reads() {
    let source = WaymoV1Source::open(&fixture!("frame_calib_labels.tfrecord"), WaymoConfig::default()).unwrap();
    assert_eq!(source.meta().name, "1071392229495085036_1844_790_1864_790");
    let frame = source.frame(0).unwrap();
    assert_eq!(frame.timestamp_micros, 1507315488219118);
    assert!(frame.cameras.is_empty() && frame.cloud.is_empty());
    let signs = frame
        .ground_truth
        .iter()
        .filter(|g| g.source_label == "TYPE_SIGN")
        .count();
    let vehicles = frame
        .ground_truth
        .iter()
        .filter(|g| g.class == ObjectClass::Vehicle)
        .count();
    assert_eq!((frame.ground_truth.len(), signs, vehicles), (18, 17, 1));
    // The TOP calibration: 64 ascending inclinations between min and max.
    let context = source.frame_proto(0).unwrap().context.unwrap();
    let top = context.laser_calibrations.iter().find(|c| c.name == Some(1)).unwrap();
    assert_eq!(top.beam_inclinations.len(), 64);
    assert!(top.beam_inclinations.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn v2_vehicle_pose_reads_float_transforms() {
    let t = ComponentTable::read(&fixture!("v2_vehicle_pose.parquet"), &[], None).unwrap();
    assert_eq!(t.num_rows(), 199);
    let ts = t.i64_column("key.frame_timestamp_micros").unwrap();
    assert_eq!(ts.iter().flatten().min(), Some(&1552440195362591));
    assert_eq!(ts.iter().flatten().max(), Some(&1552440215162553));
    let poses = t
        .f64_list_column("[VehiclePoseComponent].world_from_vehicle.transform")
        .unwrap();
    for values in poses.iter().map(|p| p.as_ref().unwrap()) {
        // Row-major 4×4 rigid transform stored as float32: last row 0 0 0 1, rotation orthonormal.
        assert_eq!(values.len(), 16);
        assert_eq!(&values[12..], &[0.0, 0.0, 0.0, 1.0]);
        boxlayer::sources::waymo::convert::isometry_from_values(values, "pose").unwrap();
    }
    let names = t.string_column("key.segment_context_name").unwrap();
    assert!(
        names
            .iter()
            .all(|n| n.as_deref() == Some("10023947602400723454_1120_000_1140_000"))
    );
}

#[test]
fn v2_camera_hkp_reads_string_enums_and_list_columns() {
    let t = ComponentTable::read(&fixture!("v2_camera_hkp.parquet"), &[], None).unwrap();
    assert_eq!(t.num_rows(), 15_844);
    let cameras = t.enum_column("key.camera_name", camera_from_name).unwrap();
    assert!(cameras.iter().all(|c| matches!(c, Some(1..=5))));
    assert!(cameras.contains(&Some(1)));
    let ts = t.i64_column("key.frame_timestamp_micros").unwrap();
    let distinct: std::collections::BTreeSet<i64> = ts.into_iter().flatten().collect();
    assert_eq!(distinct.len(), 199);
    let xs = t
        .f64_list_column("[CameraHumanKeypointsComponent].camera_keypoints[*].keypoint_2d.location_px.x")
        .unwrap();
    let non_empty = xs.iter().filter(|x| x.as_ref().is_some_and(|v| !v.is_empty())).count();
    assert_eq!(non_empty, 498);
    assert!(xs.iter().flatten().all(|v| v.len() <= 14));
    // Only selected rows: the row selection returns exactly those rows.
    let some = ComponentTable::read(
        &fixture!("v2_camera_hkp.parquet"),
        &["key.camera_name"],
        Some(&[0, 1, 2, 15_843]),
    )
    .unwrap();
    assert_eq!(some.num_rows(), 4);
    assert!(!some.has_column("key.frame_timestamp_micros"));
}

#[test]
fn inspect_summarises_a_tfrecord() {
    let summary = boxlayer::inspect::inspect(&fixture!("frame_with_cameras.tfrecord")).unwrap();
    println!("{summary}");
    assert!(summary.contains("Waymo v1 segment `1024360143612057520_3580_000_3600_000`"));
    assert!(summary.contains("1 frames"));
    assert!(summary.contains("TOP"));
    assert!(summary.contains("FRONT_LEFT   1920x1280"));
    assert!(summary.contains("TYPE_CYCLIST 1, TYPE_PEDESTRIAN 12, TYPE_SIGN 25, TYPE_VEHICLE 37"));
    assert!(summary.lines().count() <= 24, "one screen");
}
