//! Writer-made drone and quadruped sequences (OS1-64, 2048×10) read back to the written points
//! (1 mm), images (exact), poses and IMU samples; damage injected into a copy (skipped-frame
//! rows, missing packets, bad status words) is reported with its sweep index.

use std::path::{Path, PathBuf};

use boxlayer::cloud::ChannelData;
use boxlayer::frame::{CameraAxes, CameraCalibration, Distortion, Platform};
use boxlayer::geometry::pose::isometry_from_euler;
use boxlayer::sources::m3ed::{
    M3edConfig, M3edSource, M3edWriter, M3edWriterSetup, MetadataFlavour, OusterMetadata, PoseTimeType, SweepPixels,
    XyzLut, write_pose_gt,
};
use boxlayer::sources::{OnCorrupt, Source, SourceError};
use image::RgbImage;
use nalgebra::{Isometry3, Point3, Vector3};
use ndarray::{Array1, Ix2, s};

const T0: i64 = 1_000_000;
const SWEEP_US: i64 = 100_000;
const IMAGE_US: i64 = 40_000;
const IMAGE_OFFSET_US: i64 = 3_000;
const IMU_US: i64 = 2_500;
const CAMERA_W: u32 = 64;
const CAMERA_H: u32 = 40;

/// One written return: its pixel, the exact ray-cast point and its reflectivity.
struct Hit {
    pixel: (usize, usize),
    point: Point3<f64>,
    reflectivity: u16,
}

/// What sequence to write.
struct Spec<'a> {
    name: &'a str,
    /// Sensor height above the ground plane (m).
    height: f64,
    sweeps: usize,
    /// Rows written as skipped frames.
    skipped: &'a [usize],
    distortion: Distortion,
    flavour: MetadataFlavour,
    pose_times: PoseTimeType,
}

struct Written {
    data: PathBuf,
    /// Per written row (None for a skipped row): sensor-frame points keyed by (row, column).
    points: Vec<Option<Vec<Hit>>>,
    ts_start: Vec<i64>,
    poses: Vec<Isometry3<f64>>,
    images: Vec<(i64, RgbImage)>,
    imu: Vec<(i64, [f64; 3], [f64; 3])>,
    calibration: CameraCalibration,
    lidar_to_pl: Isometry3<f64>,
}

/// Casts every pixel's ray at a ground plane `height` below the sensor and a wall at `wall_x`
/// ahead; returns the pixels to write and the exact hit points.
fn cast_sweep(lut: &XyzLut, height: f64, wall_x: f64, sweep: usize) -> (SweepPixels, Vec<Hit>) {
    let mut pixels = SweepPixels::empty(lut.rows(), lut.columns());
    let mut hits = Vec::new();
    for row in 0..lut.rows() {
        for column in 0..lut.columns() {
            let (origin, dir) = lut.ray(row, column).unwrap();
            let mut t = f64::INFINITY;
            if dir.z < -1e-6 {
                t = t.min((-height - origin.z) / dir.z);
            }
            if dir.x > 1e-6 {
                t = t.min((wall_x - origin.x) / dir.x);
            }
            if !(0.5..120.0).contains(&t) {
                continue;
            }
            let k = row * lut.columns() + column;
            let range_mm = (t * 1000.0).round() as u32;
            pixels.range_mm[k] = range_mm;
            let reflectivity = ((row * 31 + column * 7 + sweep) % 255) as u16 + 1;
            pixels.reflectivity[k] = reflectivity;
            pixels.signal[k] = (column % 1000) as u16;
            pixels.near_ir[k] = (row * 100 + sweep) as u16;
            hits.push(Hit {
                pixel: (row, column),
                point: origin + dir * t,
                reflectivity,
            });
        }
    }
    (pixels, hits)
}

fn image_for(j: usize) -> RgbImage {
    RgbImage::from_fn(CAMERA_W, CAMERA_H, |x, y| {
        image::Rgb([x as u8 * 3, y as u8 * 5, (x + 2 * y + j as u32) as u8])
    })
}

/// Writes `<name>_data.h5` and `<name>_pose_gt.h5` with `sweeps` rows; rows in `skipped` are
/// all-zero skipped frames.
fn lidar_to_prophesee_left() -> Isometry3<f64> {
    isometry_from_euler(Vector3::new(-0.02, 0.11, -0.05), 0.03, -0.01, 0.02)
}

/// An IMU mounted a quarter turn from the LiDAR, as the OVC's VectorNav is from the Ouster.
fn imu_to_prophesee_left() -> Isometry3<f64> {
    isometry_from_euler(
        Vector3::new(0.04, -0.03, 0.01),
        std::f64::consts::FRAC_PI_2,
        0.02,
        -0.05,
    )
}

fn write_sequence(dir: &Path, spec: Spec) -> Written {
    let Spec {
        name,
        height,
        sweeps,
        skipped,
        distortion,
        flavour,
        pose_times,
    } = spec;
    let metadata = OusterMetadata::os1_64_2048x10();
    let lut = XyzLut::new(&metadata);
    // Camera looking forward: OpenCV z (optical axis) = sensor x, x = −y, y = −z.
    let camera_rotation = nalgebra::Rotation3::from_matrix_unchecked(nalgebra::Matrix3::new(
        0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0,
    ));
    let calibration = CameraCalibration {
        width: CAMERA_W,
        height: CAMERA_H,
        fx: 50.5,
        fy: 50.25,
        cx: 32.1,
        cy: 19.9,
        distortion,
        axes: CameraAxes::OpenCv,
        sensor_from_camera: Isometry3::from_parts(
            Vector3::new(0.1, 0.05, -0.08).into(),
            nalgebra::UnitQuaternion::from_rotation_matrix(&camera_rotation),
        ),
    };
    let lidar_to_pl = lidar_to_prophesee_left();
    let setup = M3edWriterSetup {
        metadata: metadata.clone(),
        metadata_flavour: flavour,
        lidar_to_prophesee_left: lidar_to_pl,
        rgb: Some(calibration.clone()),
        imu_to_prophesee_left: imu_to_prophesee_left(),
        first_frame_id: 65_530,
        version: "test".into(),
        raw_bag_name: format!("{name}.bag"),
    };
    let data = dir.join(format!("{name}_data.h5"));
    let mut writer = M3edWriter::create(&data, setup).unwrap();
    let mut points = Vec::new();
    let mut ts_start = Vec::new();
    let mut poses = Vec::new();
    let mut pose_ts = Vec::new();
    // One pose before the first sweep: poses must be matched by time, not by index.
    pose_ts.push(T0 - SWEEP_US);
    poses.push(Isometry3::identity());
    for k in 0..sweeps {
        let start = T0 + k as i64 * SWEEP_US;
        if skipped.contains(&k) {
            writer.write_skipped_sweep().unwrap();
            points.push(None);
            ts_start.push(0);
            continue;
        }
        let (pixels, hits) = cast_sweep(&lut, height, 15.0 + k as f64 * 0.7, k);
        let end = start + SWEEP_US * 2047 / 2048;
        writer.write_sweep(start, end, &pixels).unwrap();
        points.push(Some(hits));
        ts_start.push(start);
        pose_ts.push(end + 3);
        poses.push(isometry_from_euler(
            Vector3::new(0.5 * k as f64, -0.2 * k as f64, height),
            0.1 * k as f64,
            0.02,
            -0.01 * k as f64,
        ));
    }
    let mut images = Vec::new();
    let mut t = T0 + IMAGE_OFFSET_US;
    let mut j = 0;
    while t < T0 + sweeps as i64 * SWEEP_US {
        let img = image_for(j);
        writer.write_image(t, &img).unwrap();
        images.push((t, img));
        t += IMAGE_US;
        j += 1;
    }
    let mut imu = Vec::new();
    let mut t = T0 - 10 * IMU_US;
    let mut i = 0usize;
    while t < T0 + (sweeps as i64 + 1) * SWEEP_US {
        let mut accel = [0.01 * i as f64, -0.02, 9.81];
        let omega = [0.001 * i as f64, 0.002, -0.003];
        if i % 7 == 3 {
            // A missing VectorNav sample.
            accel[1] = f64::NAN;
        }
        writer.write_imu(t, accel, omega);
        imu.push((t, accel, omega));
        t += IMU_US;
        i += 1;
    }
    writer.finish().unwrap();
    // pose_ts[0] belongs to the extra pose; the rest follow the written sweeps.
    write_pose_gt(
        &dir.join(format!("{name}_pose_gt.h5")),
        &pose_ts,
        &poses,
        &lidar_to_pl,
        pose_times,
    )
    .unwrap();
    Written {
        data,
        points,
        ts_start,
        poses: poses[1..].to_vec(),
        images,
        imu,
        calibration,
        lidar_to_pl,
    }
}

fn u16_channel<'a>(cloud: &'a boxlayer::PointCloud, name: &str) -> &'a [u16] {
    match cloud.channel(name) {
        Some(ChannelData::U16(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

fn check_read_back(w: &Written, platform: Platform, name: &str) {
    let source = M3edSource::open(&w.data, M3edConfig::default()).unwrap();
    let meta = source.meta();
    assert_eq!(meta.name, name);
    assert_eq!(meta.platform, platform);
    let written_rows: Vec<usize> = (0..w.points.len()).filter(|&r| w.points[r].is_some()).collect();
    assert_eq!(source.len(), written_rows.len());
    assert_eq!(meta.skipped.len(), w.points.len() - written_rows.len());
    assert!(source.has_poses());

    for (index, &row) in written_rows.iter().enumerate() {
        let (frame, report) = source.frame_with_report(index).unwrap();
        assert!(report.is_complete(), "sweep {row}: {}", report.describe());
        // Frame identity is the `/ouster/data` row, gaps left by skipped rows included (issue 18).
        assert_eq!(frame.index, row);
        assert_eq!(frame.timestamp_micros, w.ts_start[row]);
        // Points: every written hit comes back once, within 1 mm, with its own reflectivity.
        let hits = w.points[row].as_ref().unwrap();
        let cloud = &frame.cloud;
        assert_eq!(cloud.len(), hits.len(), "sweep {row}");
        let rings = u16_channel(cloud, "ring");
        let columns = u16_channel(cloud, "column");
        let mut by_pixel = std::collections::HashMap::new();
        for k in 0..cloud.len() {
            by_pixel.insert((rings[k] as usize, columns[k] as usize), k);
        }
        for hit in hits {
            let k = by_pixel[&hit.pixel];
            let got = cloud.point(k);
            let (p, pixel) = (hit.point, hit.pixel);
            assert!((got - p).norm() < 1e-3, "sweep {row} pixel {pixel:?}: {got:?} vs {p:?}");
            assert_eq!(cloud.intensity()[k], hit.reflectivity as f32);
        }
        // Pose: matched by time (the pose file has an extra leading pose).
        let pose = &w.poses[written_rows.iter().position(|&x| x == row).unwrap()];
        assert!((frame.world_from_sensor.translation.vector - pose.translation.vector).norm() < 1e-9);
        assert!(frame.world_from_sensor.rotation.angle_to(&pose.rotation) < 1e-9);
        // Image: the one nearest the moment the sweep looks along the camera's axis (sensor +x,
        // which the OS1's lidar frame, turned 180° about z, has at measurement 1024 less the
        // beams' mean azimuth offset), bit-exact after the BGR round trip.
        let meta = OusterMetadata::os1_64_2048x10();
        let mean_offset_deg = meta.beam_azimuth_angles_deg.iter().sum::<f64>() / 64.0;
        let column = 1024.0 - mean_offset_deg * 2048.0 / 360.0;
        let end = w.ts_start[row] + SWEEP_US * 2047 / 2048;
        let scanned = w.ts_start[row] + ((end - w.ts_start[row]) as f64 * column / 2047.0).round() as i64;
        let nearest = w.images.iter().min_by_key(|(t, _)| (t - scanned).abs()).unwrap();
        assert!((nearest.0 - frame.timestamp_micros - 50_000).abs() <= 25_000);
        assert_eq!(frame.cameras.len(), 1);
        let view = &frame.cameras[0];
        assert_eq!(view.timestamp_micros, nearest.0);
        assert_eq!(*view.image().unwrap(), nearest.1);
        // Calibration and the LiDAR → camera chain.
        let cal = &view.calibration;
        assert_eq!(cal.distortion, w.calibration.distortion);
        assert_eq!(
            (cal.width, cal.height, cal.fx, cal.cy),
            (CAMERA_W, CAMERA_H, 50.5, 19.9)
        );
        let want = w.calibration.sensor_from_camera;
        assert!((cal.sensor_from_camera.translation.vector - want.translation.vector).norm() < 1e-9);
        assert!(cal.sensor_from_camera.rotation.angle_to(&want.rotation) < 1e-9);
        // IMU: exactly the finite samples inside [ts_start, ts_end], rotated from the IMU frame
        // into the LiDAR sensor frame through the two Prophesee-left extrinsics.
        let sensor_from_imu = (lidar_to_prophesee_left().inverse() * imu_to_prophesee_left()).rotation;
        let end = frame.timestamp_micros + SWEEP_US * 2047 / 2048;
        let expect: Vec<_> = w
            .imu
            .iter()
            .filter(|(t, a, g)| *t >= frame.timestamp_micros && *t <= end && a.iter().chain(g).all(|v| v.is_finite()))
            .collect();
        assert_eq!(frame.imu.len(), expect.len(), "sweep {row}");
        assert!(!expect.is_empty());
        for (got, (t, a, g)) in frame.imu.iter().zip(expect) {
            assert_eq!(got.timestamp_micros, *t);
            assert!((got.accel_mps2 - sensor_from_imu * Vector3::from(*a)).norm() < 1e-9);
            assert!((got.gyro_radps - sensor_from_imu * Vector3::from(*g)).norm() < 1e-9);
            // A quarter turn: the x axis of the IMU is (nearly) the y axis of the sensor.
            assert!((sensor_from_imu * Vector3::x() - Vector3::y()).norm() < 0.1);
        }
    }
}

#[test]
fn drone_sequence_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let name = "falcon_outdoor_day_penno_parking_1";
    let w = write_sequence(
        dir.path(),
        Spec {
            name,
            height: 12.0,
            sweeps: 6,
            skipped: &[],
            distortion: Distortion::RadTan {
                k1: -0.1,
                k2: 0.02,
                p1: 0.001,
                p2: -0.002,
                k3: 0.0,
            },
            flavour: MetadataFlavour::LegacyFlat,
            pose_times: PoseTimeType::Int64,
        },
    );
    check_read_back(&w, Platform::Drone, name);
    // The stored chain matches the reference: rgb_T_lidar = inv(T_rgb) · T_lidar.
    let file = hdf5::File::open(&w.data).unwrap();
    let t_rgb = file
        .dataset("ovc/rgb/calib/T_to_prophesee_left")
        .unwrap()
        .read_raw::<f64>()
        .unwrap();
    let t_rgb = nalgebra::Matrix4::from_row_slice(&t_rgb);
    let rgb_from_lidar = t_rgb.try_inverse().unwrap() * w.lidar_to_pl.to_homogeneous();
    let expect = w.calibration.sensor_from_camera.inverse().to_homogeneous();
    assert!((rgb_from_lidar - expect).abs().max() < 1e-9);
}

#[test]
fn quadruped_sequence_with_a_skipped_frame_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let name = "spot_outdoor_day_skatepark_1";
    let w = write_sequence(
        dir.path(),
        Spec {
            name,
            height: 0.6,
            sweeps: 5,
            skipped: &[2],
            distortion: Distortion::Equidistant {
                k1: 0.3,
                k2: -0.05,
                k3: 0.01,
                k4: -0.002,
            },
            flavour: MetadataFlavour::Nested,
            pose_times: PoseTimeType::Float64,
        },
    );
    check_read_back(&w, Platform::Quadruped, name);
    let source = M3edSource::open(&w.data, M3edConfig::default()).unwrap();
    assert_eq!(source.meta().skipped[0].location, "sweep 2");
    assert!(source.meta().skipped[0].detail.contains("skipped frame"));
    assert_eq!(source.sweeps()[2].row, 3);
    // One screen of inspect output names the gap.
    let text = boxlayer::inspect::inspect(&w.data).unwrap();
    assert!(text.contains("4 sweeps of 5 rows (1 skipped)"), "{text}");
    assert!(text.contains("sweep 2: skipped frame"), "{text}");
    assert!(text.contains("equidistant"), "{text}");
    assert!(text.lines().count() <= 24, "{text}");
}

/// Overwrites row `row` of `/ouster/data` in place after `edit` changes its bytes.
fn edit_row(path: &Path, row: usize, edit: impl FnOnce(&mut [u8], usize)) {
    let file = hdf5::File::open_rw(path).unwrap();
    let ds = file.dataset("ouster/data").unwrap();
    let slot = ds.shape()[2];
    let mut bytes = ds.read_slice::<u8, _, Ix2>(s![row, .., ..]).unwrap();
    edit(bytes.as_slice_mut().unwrap(), slot);
    ds.write_slice(&bytes.insert_axis(ndarray::Axis(0)), s![row..row + 1, .., ..])
        .unwrap();
}

fn set_times(path: &Path, row: usize, start: i64, end: i64) {
    let file = hdf5::File::open_rw(path).unwrap();
    for (name, v) in [("ouster/ts_start", start), ("ouster/ts_end", end)] {
        let ds = file.dataset(name).unwrap();
        ds.write_slice(&Array1::from(vec![v]), s![row..row + 1]).unwrap();
    }
}

#[test]
fn injected_damage_is_reported_with_its_sweep_index() {
    let dir = tempfile::tempdir().unwrap();
    let name = "falcon_outdoor_day_penno_trees";
    let w = write_sequence(
        dir.path(),
        Spec {
            name,
            height: 8.0,
            sweeps: 6,
            skipped: &[],
            distortion: Distortion::None,
            flavour: MetadataFlavour::LegacyFlat,
            pose_times: PoseTimeType::Int64,
        },
    );
    let copy = dir.path().join("falcon_damaged_data.h5");
    std::fs::copy(&w.data, &copy).unwrap();
    let column_bytes = 16 + 12 * 64 + 4;
    // Sweep 1: packets 5 and 6 never arrived (columns 80..112).
    edit_row(&copy, 1, |b, slot| b[5 * slot..7 * slot].fill(0));
    // Sweep 3: three columns with a bad status word.
    edit_row(&copy, 3, |b, slot| {
        for (packet, col) in [(0, 3), (10, 0), (127, 15)] {
            let at = packet * slot + (col + 1) * column_bytes - 4;
            b[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        }
    });
    // Sweep 4: an all-zero row whose times were left in place.
    edit_row(&copy, 4, |b, _| b.fill(0));
    // Sweep 5: a skipped frame (all-zero row, times zero).
    edit_row(&copy, 5, |b, _| b.fill(0));
    set_times(&copy, 5, 0, 0);

    let source = M3edSource::open(&copy, M3edConfig::default()).unwrap();
    assert_eq!(source.len(), 5);
    let skipped = &source.meta().skipped;
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].location, "sweep 5");

    let (frame, report) = source.frame_with_report(1).unwrap();
    assert_eq!(report.missing_packets, 2);
    assert_eq!(report.missing_columns(), 32);
    assert_eq!(
        report.describe(),
        "partial sweep: 2016 of 2048 columns (2 packets missing)"
    );
    let columns = u16_channel(&frame.cloud, "column");
    assert!(columns.iter().all(|&c| !(80..112).contains(&c)));
    let kept = w.points[1]
        .as_ref()
        .unwrap()
        .iter()
        .filter(|h| !(80..112).contains(&h.pixel.1))
        .count();
    assert_eq!(frame.cloud.len(), kept);

    let (frame, report) = source.frame_with_report(3).unwrap();
    assert_eq!(report.bad_status_columns, 3);
    assert_eq!(report.valid_columns, 2045);
    let columns = u16_channel(&frame.cloud, "column");
    for bad in [3u16, 160, 2047] {
        assert!(!columns.contains(&bad), "column {bad} has a bad status");
    }

    let e = source.frame(4).unwrap_err();
    assert!(matches!(e, SourceError::Corrupt { .. }));
    assert!(
        e.to_string()
            .contains("sweep 4: skipped frame (all-zero row); no valid column"),
        "{e}"
    );

    drop(source);
    // With `fail`, the skipped frame stops the open, and the partial sweeps stop their frames.
    let fail = M3edConfig {
        on_corrupt: OnCorrupt::Fail,
        ..M3edConfig::default()
    };
    let e = M3edSource::open(&copy, fail.clone()).err().unwrap();
    assert!(e.to_string().contains("sweep 5: skipped frame"), "{e}");
    set_times(&copy, 5, T0 + 5 * SWEEP_US, T0 + 5 * SWEEP_US + 99_000);
    let source = M3edSource::open(&copy, fail).unwrap();
    let e = source.frame(1).unwrap_err();
    assert!(
        e.to_string().contains("sweep 1: partial sweep: 2016 of 2048 columns"),
        "{e}"
    );
    let e = source.frame(3).unwrap_err();
    assert!(
        e.to_string()
            .contains("sweep 3: partial sweep: 2045 of 2048 columns (3 columns with bad status)"),
        "{e}"
    );
    assert!(source.frame(0).is_ok());
}

#[test]
fn a_sweep_without_a_pose_is_skipped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let name = "spot_forest_easy_1";
    let w = write_sequence(
        dir.path(),
        Spec {
            name,
            height: 0.5,
            sweeps: 3,
            skipped: &[],
            distortion: Distortion::None,
            flavour: MetadataFlavour::LegacyFlat,
            pose_times: PoseTimeType::Int64,
        },
    );
    // Rewrite the pose file with the last sweep's pose missing.
    let times: Vec<i64> = (0..2).map(|k| T0 + k * SWEEP_US + SWEEP_US * 2047 / 2048).collect();
    write_pose_gt(
        &dir.path().join(format!("{name}_pose_gt.h5")),
        &times,
        &w.poses[..2],
        &w.lidar_to_pl,
        PoseTimeType::Int64,
    )
    .unwrap();
    let source = M3edSource::open(&w.data, M3edConfig::default()).unwrap();
    assert_eq!(source.len(), 2);
    assert_eq!(source.meta().skipped[0].location, "sweep 2");
    assert!(source.meta().skipped[0].detail.starts_with("no pose within 50000 µs"));
}

#[test]
fn non_m3ed_hdf5_is_incompatible_and_stripped_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.h5");
    hdf5::File::create(&other).unwrap().create_group("something").unwrap();
    let e = M3edSource::open(&other, M3edConfig::default()).err().unwrap();
    assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
    let stripped = dir.path().join("spot_forest_road_2_data.h5");
    hdf5::File::create(&stripped).unwrap().create_group("ovc").unwrap();
    let e = M3edSource::open(&stripped, M3edConfig::default()).err().unwrap();
    assert!(e.to_string().contains("stripped M3ED test sequence"), "{e}");
}
