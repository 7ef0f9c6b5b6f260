//! Round trip: synthetic segments written with `TfRecordWriter` (range images built from the
//! real TOP and FRONT calibrations, per-pixel pose set) read back to the same points and boxes,
//! through the v1 reader and through the v2 Parquet layout (issue 5 acceptance).

mod waymo_support;

use boxlayer::cloud::ChannelData;
use boxlayer::frame::{Frame, ObjectClass};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::{LaserName, LidarReturn, TfRecordWriter, WaymoConfig, WaymoV1Source, WaymoV2Source};
use prost::Message;
use waymo_support::{Rng, SyntheticFrame, real_context, synthetic_frame, write_v2};

fn u8_channel<'a>(frame: &'a Frame, name: &str) -> &'a [u8] {
    match frame.cloud.channel(name) {
        Some(ChannelData::U8(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

fn f32_channel<'a>(frame: &'a Frame, name: &str) -> &'a [f32] {
    match frame.cloud.channel(name) {
        Some(ChannelData::F32(v)) => v,
        other => panic!("channel {name}: {other:?}"),
    }
}

/// Every expected point comes back once, within 1 mm, with its channels; nothing else comes back.
fn assert_points(frame: &Frame, expected: &SyntheticFrame) -> f64 {
    assert_eq!(frame.cloud.len(), expected.points.len());
    let (range, elong) = (f32_channel(frame, "range"), f32_channel(frame, "elongation"));
    let (laser, ret, nlz) = (
        u8_channel(frame, "laser_id"),
        u8_channel(frame, "return_index"),
        u8_channel(frame, "in_no_label_zone"),
    );
    let mut worst = 0.0f64;
    for e in &expected.points {
        let i = frame
            .cloud
            .intensity()
            .iter()
            .position(|t| *t == e.intensity)
            .unwrap_or_else(|| panic!("point tagged {} missing", e.intensity));
        let got = frame.cloud.point(i);
        let err = (got - e.point).norm();
        worst = worst.max(err);
        assert!(err < 1e-3, "point {}: {got} vs {} ({err} m)", e.intensity, e.point);
        assert_eq!((range[i], elong[i]), (e.range, e.elongation));
        assert_eq!((laser[i], ret[i], nlz[i] == 1), (e.laser, e.return_index, e.in_nlz));
    }
    worst
}

fn assert_boxes(frame: &Frame, expected: &SyntheticFrame) {
    assert_eq!(frame.ground_truth.len(), expected.boxes.len());
    for e in &expected.boxes {
        let gt = frame.ground_truth.iter().find(|g| g.track_id == e.id).unwrap();
        assert_eq!(gt.box_in_sensor, e.box_in_vehicle, "box {} is exact", e.id);
        assert_eq!(gt.num_points, Some(e.num_points as u32));
        let v = gt.velocity_mps.unwrap();
        assert_eq!((v.x, v.y), e.speed);
        let class = match e.label_type {
            1 => ObjectClass::Vehicle,
            2 => ObjectClass::Pedestrian,
            4 => ObjectClass::Cyclist,
            _ => ObjectClass::Unknown,
        };
        assert_eq!(gt.class, class);
    }
}

/// `None` without the Waymo fixtures (outside CI).
fn segment(n_frames: usize) -> Option<(boxlayer::sources::waymo::proto::Context, Vec<SyntheticFrame>)> {
    let (mut context, _) = real_context()?;
    context.name = Some("synthetic_0001".to_string());
    let mut rng = Rng(42);
    let frames = (0..n_frames)
        .map(|i| synthetic_frame(&context, i, 300, 80, 12, &mut rng))
        .collect();
    Some((context, frames))
}

#[test]
fn v1_segment_written_by_the_writer_reads_back_points_and_boxes() {
    let Some((_, frames)) = segment(3) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment-synthetic_0001_with_camera_labels.tfrecord");
    let mut writer = TfRecordWriter::create(&path).unwrap();
    for f in &frames {
        writer.write_record(&f.proto.encode_to_vec()).unwrap();
    }
    assert_eq!(writer.records(), 3);
    writer.finish().unwrap();

    let source = WaymoV1Source::open(&path, WaymoConfig::default()).unwrap();
    assert_eq!((source.len(), source.meta().name.as_str()), (3, "synthetic_0001"));
    // Random access, in reverse order.
    let mut worst = 0.0f64;
    for i in (0..3).rev() {
        let frame = source.frame(i).unwrap();
        assert_eq!(frame.index, i);
        assert_eq!(frame.timestamp_micros, frames[i].proto.timestamp_micros.unwrap());
        let pose_err = (frame.world_from_sensor.to_homogeneous() - frames[i].world_from_vehicle.to_homogeneous())
            .abs()
            .max();
        assert!(pose_err < 1e-9);
        worst = worst.max(assert_points(&frame, &frames[i]));
        assert_boxes(&frame, &frames[i]);
    }
    println!("v1 round trip: worst point error {:.2e} m", worst);

    // The config picks lidars and returns.
    let config = WaymoConfig {
        lidars: vec![LaserName::Top],
        returns: vec![LidarReturn::Second],
        cameras: false,
        ..WaymoConfig::default()
    };
    let source = WaymoV1Source::open(&path, config).unwrap();
    let frame = source.frame(1).unwrap();
    let expected = frames[1]
        .points
        .iter()
        .filter(|p| p.laser == 1 && p.return_index == 2)
        .count();
    assert_eq!(frame.cloud.len(), expected);
    assert!(u8_channel(&frame, "return_index").iter().all(|r| *r == 2));
}

#[test]
fn v2_layout_of_the_same_segment_reads_back_the_same_frames() {
    let Some((context, frames)) = segment(2) else {
        return;
    };
    let Some((_, images)) = real_context() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_v2(dir.path(), "synthetic_0001", &context, &frames, &images);

    let source = WaymoV2Source::open(dir.path(), WaymoConfig::default()).unwrap();
    assert_eq!((source.len(), source.meta().name.as_str()), (2, "synthetic_0001"));
    assert_eq!(source.meta().source_kind, "waymo-v2");
    for i in [1, 0] {
        let frame = source.frame(i).unwrap();
        assert_eq!(frame.timestamp_micros, frames[i].proto.timestamp_micros.unwrap());
        assert_points(&frame, &frames[i]);
        assert_boxes(&frame, &frames[i]);
    }
    // The real JPEGs come back on the first frame, decodable at the calibrated size.
    let frame = source.frame(0).unwrap();
    assert_eq!(frame.cameras.len(), 5);
    let side = frame.cameras.iter().find(|c| c.name == "SIDE_LEFT").unwrap();
    let img = side.image().unwrap();
    assert_eq!((img.width(), img.height()), (1920, 886));
    assert!(source.frame(1).unwrap().cameras.is_empty());

    let summary = boxlayer::inspect::inspect(dir.path()).unwrap();
    println!("{summary}");
    assert!(summary.contains("segment `synthetic_0001`: 2 frames"));
    assert!(summary.contains("labels (24 in all frames)"));
}

#[test]
fn v2_refuses_a_folder_without_components() {
    let dir = tempfile::tempdir().unwrap();
    let e = WaymoV2Source::open(dir.path(), WaymoConfig::default()).unwrap_err();
    assert!(matches!(e, boxlayer::sources::SourceError::Incompatible { .. }), "{e}");
}

/// Issue 18: NaN intensities passed silently into frames (and cut a detector's boxes from 125
/// to 11). The reader drops such points, counts them and warns naming the frame.
#[test]
fn points_with_a_nan_intensity_are_dropped() {
    let Some((_, mut frames)) = segment(1) else {
        return;
    };
    let f = &mut frames[0];
    // FRONT's first return (laser 2, return 1): every other return gets a NaN intensity.
    let (_, _, image) = f
        .images
        .iter()
        .find(|(laser, ret, _)| (*laser, *ret) == (2, 1))
        .cloned()
        .expect("the FRONT image");
    let mut image = image;
    let mut poisoned = 0usize;
    for px in image.data.chunks_exact_mut(image.channels) {
        if px[0] > 0.0 {
            if poisoned.is_multiple_of(2) {
                px[1] = f32::NAN;
            }
            poisoned += 1;
        }
    }
    let poisoned = poisoned.div_ceil(2);
    assert!(poisoned > 0);
    let front = f.proto.lasers.iter_mut().find(|l| l.name == Some(2)).unwrap();
    front.ri_return1.as_mut().unwrap().range_image_compressed = Some(image.compress());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment-synthetic_0001_with_camera_labels.tfrecord");
    let mut writer = TfRecordWriter::create(&path).unwrap();
    writer.write_record(&f.proto.encode_to_vec()).unwrap();
    writer.finish().unwrap();
    let frame = WaymoV1Source::open(&path, WaymoConfig::default())
        .unwrap()
        .frame(0)
        .unwrap();
    assert_eq!(frame.cloud.len(), f.points.len() - poisoned);
    assert!(frame.cloud.intensity().iter().all(|v| v.is_finite()));
}
