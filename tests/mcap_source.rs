//! The ROS 2 MCAP reader and bag writer: simulated M3ED frames (IMU, a camera, poses) written as
//! a bag read back to the same points, poses, IMU samples and images, through mountings in
//! `/tf_static` that are not identity; the PyPI `mcap` + `mcap-ros2-support` readers find the same
//! messages in that bag (`tools/check_mcap.py`); a damaged chunk or a bag cut short loses only its
//! own sweeps, the others keep their identity; a point cloud whose layout disagrees with its fields
//! is refused naming the file, the sweep and the problem.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::frame::{Frame, ImuSample, Platform};
use boxlayer::sim::{SimConfig, Simulator, default_sequence_name, write_m3ed_sequence};
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use boxlayer::sources::mcap::msgs::{Header, PointCloud2, PointField, RosMessage, Time};
use boxlayer::sources::mcap::{BagWriteOptions, McapConfig, McapSource, write_bag};
use boxlayer::sources::{OnCorrupt, Source, SourceError};
use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};

/// Three simulated drone sweeps read through the M3ED reader, made once for all tests.
fn sim_frames() -> &'static [Frame] {
    static FRAMES: OnceLock<Vec<Frame>> = OnceLock::new();
    FRAMES.get_or_init(|| {
        let config = SimConfig {
            frames: 3,
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Platform::Drone, 11).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let name = default_sequence_name(Platform::Drone, 11).unwrap();
        let summary = write_m3ed_sequence(&sim, 3, dir.path(), &name).unwrap();
        let source = M3edSource::open(&summary.data_path, M3edConfig::default()).unwrap();
        let frames: Vec<Frame> = (0..source.len()).map(|i| source.frame(i).unwrap()).collect();
        for f in &frames {
            assert!(
                !f.imu.is_empty() && !f.cameras.is_empty(),
                "sim frames carry IMU and a camera"
            );
            f.cameras[0].image().unwrap();
        }
        frames
    })
}

/// Mountings that are not identity, so the reader must compose and rotate.
fn mounted_options() -> BagWriteOptions {
    BagWriteOptions {
        base_from_lidar: Isometry3::from_parts(
            Translation3::new(0.3, -0.1, 1.2),
            UnitQuaternion::from_euler_angles(0.01, -0.02, 0.4),
        ),
        lidar_from_imu: UnitQuaternion::from_euler_angles(3.1, 0.05, -1.5),
        ..BagWriteOptions::default()
    }
}

fn pose_gap(a: &Isometry3<f64>, b: &Isometry3<f64>) -> f64 {
    (a.to_homogeneous() - b.to_homogeneous()).abs().max()
}

fn assert_same_cloud(read: &PointCloud, written: &PointCloud, what: &str) {
    assert_eq!(read.len(), written.len(), "{what}: point count");
    for i in 0..written.len() {
        let d = (read.point(i) - written.point(i)).norm();
        assert!(d <= 1e-6, "{what}: point {i} off by {d} m");
    }
    assert_eq!(read.intensity(), written.intensity(), "{what}: intensity");
    let names = |c: &PointCloud| c.channels().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
    assert_eq!(names(read), names(written), "{what}: channels");
    for (name, data) in written.channels() {
        match (read.channel(name), data) {
            // PointField has no int64: values outside int32 (absolute µs times) go as float64 and
            // come back through the point layout as float32.
            (Some(ChannelData::F32(r)), ChannelData::I64(w)) if w.iter().any(|&v| i32::try_from(v).is_err()) => {
                for (a, b) in r.iter().zip(w) {
                    assert!(
                        (f64::from(*a) - *b as f64).abs() <= 1e-7 * (*b as f64).abs(),
                        "{what}: {name}"
                    );
                }
            }
            (r, w) => assert_eq!(r, Some(w), "{what}: channel {name}"),
        }
    }
}

fn imu_pool(frames: &[Frame]) -> Vec<ImuSample> {
    let mut pool: BTreeMap<i64, ImuSample> = BTreeMap::new();
    for f in frames {
        for s in &f.imu {
            pool.insert(s.timestamp_micros, *s);
        }
    }
    pool.into_values().collect()
}

#[test]
fn simulated_frames_read_back_from_a_bag() {
    let frames = sim_frames();
    let options = mounted_options();
    for raw_images in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drone.mcap");
        let options = BagWriteOptions {
            raw_images,
            ..options.clone()
        };
        let written = write_bag(&path, frames, &options).unwrap();
        assert_eq!(written.messages["/points"], 3);
        assert!(
            written.notes.iter().all(|n| n.contains("written as float64")),
            "{:?}",
            written.notes
        );
        // The frames carry the image the M3ED reader paired with mid-sweep (40, 160 and 240 ms
        // for sweeps stamped 0, 100 and 200 ms): paired at the stamp, sweep 1's is 60 ms off,
        // beyond the 50 ms tolerance; paired half a scan later, every sweep gets its own.
        let at_stamp = McapSource::open(&path, McapConfig::default()).unwrap();
        assert_eq!(at_stamp.frame(1).unwrap().cameras.len(), 0);
        let config = McapConfig {
            image_offset_micros: 50_000,
            ..McapConfig::default()
        };
        let source = McapSource::open(&path, config).unwrap();
        assert!(source.indexed_from_summary());
        assert_eq!((source.len(), source.meta().source_kind), (3, "mcap"));
        assert!(source.meta().skipped.is_empty());
        let topics = source.topics();
        assert_eq!(topics.pointcloud, "/points");
        assert_eq!(topics.imu.as_deref(), Some("/imu"));
        assert_eq!(topics.odometry.as_deref(), Some("/odom"));
        assert_eq!(topics.cameras.len(), 1, "{topics:?}");
        let pool = imu_pool(frames);
        let [lo, hi] = source.imu_window_micros();
        assert!(lo < 0 && hi > 0, "default window is centred on the stamp: {lo} {hi}");
        for (i, want) in frames.iter().enumerate() {
            let got = source.frame(i).unwrap();
            let what = format!("raw_images={raw_images} sweep {i}");
            assert_eq!(got.index, i);
            assert_eq!(got.timestamp_micros, want.timestamp_micros, "{what}");
            assert_eq!(got.platform, Platform::Vehicle);
            assert!(got.notes.is_empty(), "{what}: {:?}", got.notes);
            assert_same_cloud(&got.cloud, &want.cloud, &what);
            let gap = pose_gap(&got.world_from_sensor, &want.world_from_sensor);
            assert!(gap <= 1e-9, "{what}: pose off by {gap}");

            let expected: Vec<&ImuSample> = pool
                .iter()
                .filter(|s| (want.timestamp_micros + lo..want.timestamp_micros + hi).contains(&s.timestamp_micros))
                .collect();
            assert!(!expected.is_empty(), "{what}: no IMU sample in the window");
            assert_eq!(got.imu.len(), expected.len(), "{what}: IMU samples");
            for (a, b) in got.imu.iter().zip(expected) {
                assert_eq!(a.timestamp_micros, b.timestamp_micros);
                assert!((a.accel_mps2 - b.accel_mps2).norm() <= 1e-9, "{what}: accel");
                assert!((a.gyro_radps - b.gyro_radps).norm() <= 1e-9, "{what}: gyro");
            }

            assert_eq!(got.cameras.len(), want.cameras.len(), "{what}: cameras");
            let (g, w) = (&got.cameras[0], &want.cameras[0]);
            assert_eq!(g.name, w.name);
            assert_eq!(g.timestamp_micros, w.timestamp_micros);
            let (gc, wc) = (&g.calibration, &w.calibration);
            assert_eq!((gc.width, gc.height, gc.axes), (wc.width, wc.height, wc.axes));
            for (a, b) in [(gc.fx, wc.fx), (gc.fy, wc.fy), (gc.cx, wc.cx), (gc.cy, wc.cy)] {
                assert!((a - b).abs() <= 1e-9, "{what}: intrinsics {a} vs {b}");
            }
            assert_eq!(gc.distortion, wc.distortion, "{what}");
            assert!(
                pose_gap(&gc.sensor_from_camera, &wc.sensor_from_camera) <= 1e-9,
                "{what}: mounting"
            );
            assert_eq!(g.encoded().is_some(), !raw_images);
            assert_eq!(
                g.image().unwrap().as_raw(),
                w.image().unwrap().as_raw(),
                "{what}: pixels"
            );
        }
        let e = source.frame(3).unwrap_err();
        assert!(matches!(e, SourceError::FrameOutOfRange { .. }), "{e}");
    }
}

#[test]
fn python_mcap_reads_the_bag_rust_wrote() {
    let frames = sim_frames();
    let options = mounted_options();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drone.mcap");
    write_bag(&path, frames, &options).unwrap();
    let source = McapSource::open(&path, McapConfig::default()).unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/check_mcap.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); install Python 3 and `pip install -r tools/requirements-test.txt`")
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check_mcap.py failed (are mcap and mcap-ros2-support installed? `pip install -r tools/requirements-test.txt`):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["profile"], "ros2");
    for (topic, schema) in [
        ("/points", "sensor_msgs/msg/PointCloud2"),
        ("/imu", "sensor_msgs/msg/Imu"),
        ("/odom", "nav_msgs/msg/Odometry"),
        ("/tf_static", "tf2_msgs/msg/TFMessage"),
        ("/ovc_rgb/image_raw/compressed", "sensor_msgs/msg/CompressedImage"),
        ("/ovc_rgb/camera_info", "sensor_msgs/msg/CameraInfo"),
    ] {
        let t = &report["topics"][topic];
        assert_eq!(t["schema"], schema, "{topic}: {t}");
        assert_eq!(
            (t["schema_encoding"].as_str(), t["encoding"].as_str()),
            (Some("ros2msg"), Some("cdr"))
        );
    }
    let sweeps = report["sweeps"].as_array().unwrap();
    assert_eq!(sweeps.len(), 3);
    for (i, s) in sweeps.iter().enumerate() {
        let frame = source.frame(i).unwrap();
        assert_eq!(s["stamp_ns"].as_i64(), Some(frame.timestamp_micros * 1000));
        assert_eq!(s["frame_id"], "lidar");
        assert_eq!(s["points"].as_u64(), Some(frame.cloud.len() as u64));
        let first = &s["first"];
        let p = frame.cloud.point(0);
        for (axis, v) in [("x", p.x), ("y", p.y), ("z", p.z)] {
            let py = first[axis].as_f64().unwrap();
            assert!((py - v).abs() <= 1e-6, "sweep {i} {axis}: python {py}, rust {v}");
        }
        assert_eq!(first["intensity"].as_f64(), Some(f64::from(frame.cloud.intensity()[0])));
        let names: Vec<String> = frame.cloud.channels().map(|(n, _)| n.to_string()).collect();
        let fields: Vec<String> = s["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        assert_eq!(fields[..4], ["x", "y", "z", "intensity"]);
        assert_eq!(fields[4..], names[..]);
    }
    // IMU samples: as many as written, in the IMU frame (rotated back they are the frames' samples).
    let pool = imu_pool(frames);
    let imu = report["imu"].as_array().unwrap();
    assert_eq!(imu.len(), pool.len());
    for (py, want) in imu.iter().zip(&pool) {
        assert_eq!(py["stamp_ns"].as_i64(), Some(want.timestamp_micros * 1000));
        let v = |k: &str| {
            let a = py[k].as_array().unwrap();
            Vector3::new(a[0].as_f64().unwrap(), a[1].as_f64().unwrap(), a[2].as_f64().unwrap())
        };
        assert!((options.lidar_from_imu * v("accel") - want.accel_mps2).norm() <= 1e-9);
        assert!((options.lidar_from_imu * v("gyro") - want.gyro_radps).norm() <= 1e-9);
    }
    // Odometry: the base's pose, which the LiDAR mounting turns back into the frames' poses.
    let odometry = report["odometry"].as_array().unwrap();
    assert_eq!(odometry.len(), 3);
    for (o, frame) in odometry.iter().zip(frames) {
        assert_eq!(
            (o["frame_id"].as_str(), o["child_frame_id"].as_str()),
            (Some("odom"), Some("base_link"))
        );
        let world_from_base = frame.world_from_sensor * options.base_from_lidar.inverse();
        let p = o["position"].as_array().unwrap();
        for (k, v) in world_from_base.translation.vector.iter().enumerate() {
            assert!((p[k].as_f64().unwrap() - v).abs() <= 1e-9);
        }
    }
    let info = &report["camera_info"][0];
    let c = &frames[0].cameras[0].calibration;
    assert_eq!(info["k"][0].as_f64(), Some(c.fx));
    assert_eq!(info["k"][5].as_f64(), Some(c.cy));
    assert_eq!(report["images"][0]["format"], "png");
    let tf: Vec<(String, String)> = report["tf_static"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["parent"].as_str().unwrap().into(),
                t["child"].as_str().unwrap().into(),
            )
        })
        .collect();
    for edge in [("base_link", "lidar"), ("lidar", "imu"), ("lidar", "ovc_rgb_optical")] {
        assert!(tf.contains(&(edge.0.into(), edge.1.into())), "{edge:?} not in {tf:?}");
    }
}

/// Five small frames 100 ms apart with IMU samples, no camera.
fn small_frames() -> Vec<Frame> {
    (0..5)
        .map(|k| {
            let n = 300;
            let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.1 + k as f32).collect();
            let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
            let z: Vec<f32> = vec![-1.5; n];
            let mut cloud = PointCloud::from_columns(x, y, z, vec![0.5; n]).unwrap();
            cloud
                .add_channel("ring", ChannelData::U16((0..n as u16).collect()))
                .unwrap();
            let t = 1_700_000_000_000_000 + k as i64 * 100_000;
            Frame {
                sequence: "small".into(),
                index: k,
                timestamp_micros: t,
                platform: Platform::Vehicle,
                cloud,
                world_from_sensor: Isometry3::translation(k as f64, 0.0, 0.0),
                imu: (0..10)
                    .map(|j| ImuSample {
                        timestamp_micros: t - 50_000 + j * 10_000,
                        accel_mps2: Vector3::new(0.0, 0.0, 9.81),
                        gyro_radps: Vector3::new(0.0, 0.0, 0.01 * j as f64),
                    })
                    .collect(),
                cameras: Vec::new(),
                ground_truth: Vec::new(),
                notes: Vec::new(),
            }
        })
        .collect()
}

fn small_bag(dir: &Path) -> (std::path::PathBuf, Vec<Frame>) {
    let frames = small_frames();
    let path = dir.join("small.mcap");
    let options = BagWriteOptions {
        chunk_size: 1024,
        ..BagWriteOptions::default()
    };
    write_bag(&path, &frames, &options).unwrap();
    (path, frames)
}

/// The chunk holding frame `k`'s sweep: its start offset and length.
fn chunk_of_sweep(bytes: &[u8], stamp_micros: i64) -> (u64, u64) {
    let summary = mcap::Summary::read(bytes).unwrap().unwrap();
    for index in &summary.chunk_indexes {
        // A chunk of schema and channel records only has no message index.
        let messages = summary.read_message_indexes(bytes, index).unwrap_or_default();
        for (channel, entries) in messages {
            if channel.topic == "/points" && entries.iter().any(|e| e.log_time == stamp_micros as u64 * 1000) {
                return (index.chunk_start_offset, index.chunk_length);
            }
        }
    }
    panic!("no chunk holds the sweep at {stamp_micros}");
}

fn config(on_corrupt: OnCorrupt) -> McapConfig {
    McapConfig {
        on_corrupt,
        ..McapConfig::default()
    }
}

#[test]
fn a_damaged_chunk_skips_its_sweeps_and_the_others_keep_their_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (path, frames) = small_bag(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let (start, len) = chunk_of_sweep(&bytes, frames[2].timestamp_micros);
    for b in &mut bytes[(start + len / 2) as usize..(start + len / 2 + 16) as usize] {
        *b ^= 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();

    let source = McapSource::open(&path, config(OnCorrupt::Skip)).unwrap();
    assert!(source.indexed_from_summary());
    let read: Vec<Frame> = (0..source.len()).map(|i| source.frame(i).unwrap()).collect();
    assert_eq!(read.iter().map(|f| f.index).collect::<Vec<_>>(), [0, 1, 3, 4]);
    for f in &read {
        let want = &frames[f.index];
        assert_eq!(f.timestamp_micros, want.timestamp_micros);
        assert_same_cloud(&f.cloud, &want.cloud, &format!("sweep {}", f.index));
    }
    let skipped = &source.meta().skipped;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].location, format!("chunk at offset {start}"));
    assert!(
        skipped[0].detail.starts_with("sweep 2 (log time"),
        "{}",
        skipped[0].detail
    );

    let e = McapSource::open(&path, config(OnCorrupt::Fail)).err().unwrap();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}: chunk at offset {start}: ", path.display())),
        "{text}"
    );
}

#[test]
fn a_bag_cut_short_reads_the_sweeps_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (path, frames) = small_bag(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let (start, len) = chunk_of_sweep(&bytes, frames[3].timestamp_micros);
    std::fs::write(&path, &bytes[..(start + len / 2) as usize]).unwrap();

    let source = McapSource::open(&path, config(OnCorrupt::Skip)).unwrap();
    assert!(!source.indexed_from_summary(), "the summary is gone with the tail");
    assert_eq!(source.len(), 3);
    for (i, want) in frames.iter().take(3).enumerate() {
        let f = source.frame(i).unwrap();
        assert_eq!(f.index, i);
        assert_same_cloud(&f.cloud, &want.cloud, &format!("sweep {i}"));
        let gap = pose_gap(&f.world_from_sensor, &want.world_from_sensor);
        assert!(gap <= 1e-9, "sweep {i}: pose off by {gap}");
    }
    let skipped = &source.meta().skipped;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].location, format!("chunk at offset {start}"));
    assert!(
        skipped[0].detail.contains("the rest of the file is not read"),
        "{skipped:?}"
    );

    let e = McapSource::open(&path, config(OnCorrupt::Fail)).err().unwrap();
    assert!(
        e.to_string()
            .contains(&format!("small.mcap: chunk at offset {start}: ")),
        "{e}"
    );
}

/// A bag of hand-made `PointCloud2` messages on `topics`, one per `(topic, message)`.
fn hand_bag(path: &Path, messages: &[(&str, PointCloud2<'_>)]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut writer = mcap::WriteOptions::new().profile("ros2").create(file).unwrap();
    let schema = writer
        .add_schema(PointCloud2::NAME, "ros2msg", PointCloud2::definition().as_bytes())
        .unwrap();
    for (k, (topic, cloud)) in messages.iter().enumerate() {
        let channel = writer.add_channel(schema, topic, "cdr", &BTreeMap::new()).unwrap();
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: k as u32,
            log_time: 1_000 + k as u64,
            publish_time: 1_000 + k as u64,
        };
        writer.write_to_known_channel(&header, &cloud.encode()).unwrap();
    }
    writer.finish().unwrap();
}

fn cloud(point_step: u32, datatype: u8, row_step: u32, data_len: usize) -> PointCloud2<'static> {
    let field = |name: &str, offset| PointField {
        name: name.into(),
        offset,
        datatype,
        count: 1,
    };
    PointCloud2 {
        header: Header {
            stamp: Time { sec: 10, nanosec: 0 },
            frame_id: "os_lidar".into(),
        },
        height: 1,
        width: 2,
        fields: vec![field("x", 0), field("y", 4), field("z", 8)],
        is_bigendian: false,
        point_step,
        row_step,
        data: Cow::Owned(vec![0u8; data_len]),
        is_dense: true,
    }
}

#[test]
fn point_clouds_that_disagree_with_their_fields_are_refused_naming_file_sweep_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.mcap");
    hand_bag(
        &path,
        &[
            ("/os/points", cloud(12, 7, 24, 24)),
            ("/os/points", cloud(10, 7, 20, 20)),
            ("/os/points", cloud(12, 9, 24, 24)),
            ("/os/points", cloud(12, 7, 24, 30)),
            ("/other/points", cloud(12, 7, 24, 24)),
        ],
    );
    let e = McapSource::open(&path, McapConfig::default()).err().unwrap();
    assert!(
        e.to_string()
            .contains("2 PointCloud2 topics (`/os/points`, `/other/points`)"),
        "{e}"
    );
    let config = McapConfig {
        pointcloud_topic: Some("/os/points".into()),
        ..McapConfig::default()
    };
    let source = McapSource::open(&path, config).unwrap();
    assert_eq!(source.len(), 4);
    assert_eq!(source.lidar_frame(), "os_lidar");
    let f = source.frame(0).unwrap();
    assert_eq!((f.cloud.len(), f.timestamp_micros), (2, 10_000_000));
    for (i, problem) in [
        (1, "field `z` (1 × f32 at offset 8) does not fit a 10-byte point"),
        (2, "field `x` has unknown datatype 9"),
        (3, "30 bytes of point data, expected 1 rows × 24 bytes"),
    ] {
        let e = source.frame(i).unwrap_err().to_string();
        let head = format!("{}: sweep {i} (chunk at offset ", path.display());
        assert!(
            e.starts_with(&head) && e.contains(problem),
            "{e}\nwants {head}… {problem}"
        );
    }
    let e = McapSource::open(
        &path,
        McapConfig {
            pointcloud_topic: Some("/nope".into()),
            ..McapConfig::default()
        },
    )
    .err()
    .unwrap();
    assert!(
        e.to_string().contains("topic `/nope`") && e.to_string().contains("`/os/points`"),
        "{e}"
    );
}
