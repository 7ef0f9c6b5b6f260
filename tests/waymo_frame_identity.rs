//! Frame identity in Waymo v1 segments (issue 18, "Frame identity after a damaged record"): a
//! frame's index is its record's position in the file, so a damaged record leaves a gap instead
//! of shifting every later frame; records spliced in from another segment are refused; duplicated
//! records are kept (and reported). All inputs are generated here.

use std::path::{Path, PathBuf};

use boxlayer::eval::input::load_waymo_labels;
use boxlayer::sources::waymo::tfrecord::{HEADER_BYTES, TfRecordWriter};
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source, proto};
use boxlayer::sources::{Source, SourceError};
use prost::Message;

const SEGMENT: &str = "segment_a";

/// A frame with one vehicle label, an identity pose and no lasers or cameras.
fn frame(context: &str, timestamp_micros: i64, x: f64) -> Vec<u8> {
    let mut identity = vec![0.0; 16];
    for i in 0..4 {
        identity[i * 5] = 1.0;
    }
    proto::Frame {
        context: Some(proto::Context {
            name: Some(context.to_string()),
            ..Default::default()
        }),
        timestamp_micros: Some(timestamp_micros),
        pose: Some(proto::Transform { transform: identity }),
        laser_labels: vec![proto::Label {
            bbox: Some(proto::LabelBox {
                center_x: Some(x),
                center_y: Some(0.0),
                center_z: Some(1.0),
                length: Some(4.0),
                width: Some(2.0),
                height: Some(1.5),
                heading: Some(0.0),
            }),
            r#type: Some(1),
            id: Some(format!("car-{timestamp_micros}")),
            ..Default::default()
        }],
        ..Default::default()
    }
    .encode_to_vec()
}

/// Writes `records` and returns the path and each record's header offset.
fn write(dir: &Path, records: &[Vec<u8>]) -> (PathBuf, Vec<u64>) {
    let path = dir.join("seg.tfrecord");
    let mut w = TfRecordWriter::create(&path).unwrap();
    let mut offsets = Vec::new();
    let mut at = 0;
    for r in records {
        offsets.push(at);
        w.write_record(r).unwrap();
        at += HEADER_BYTES + r.len() as u64 + 4;
    }
    w.finish().unwrap();
    (path, offsets)
}

fn labels_only() -> WaymoConfig {
    WaymoConfig {
        lidars: Vec::new(),
        cameras: false,
        ..WaymoConfig::default()
    }
}

fn five_frames() -> Vec<Vec<u8>> {
    (0..5)
        .map(|i| frame(SEGMENT, 1_000_000 * (i + 1), i as f64 * 10.0))
        .collect()
}

/// A flipped data byte in record 1 of 5: the frames after it keep indices 2, 3, 4.
#[test]
fn a_damaged_record_leaves_a_gap_not_a_shift() {
    let dir = tempfile::tempdir().unwrap();
    let (path, offsets) = write(dir.path(), &five_frames());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(offsets[1] + HEADER_BYTES + 3) as usize] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();

    let source = WaymoV1Source::open(&path, labels_only()).unwrap();
    assert_eq!(source.len(), 4);
    let indices: Vec<usize> = (0..source.len()).map(|i| source.frame(i).unwrap().index).collect();
    assert_eq!(indices, [0, 2, 3, 4]);
    assert_eq!(source.meta().skipped.len(), 1);
    assert_eq!(
        source.meta().skipped[0].location,
        format!("record 1 at offset {}", offsets[1])
    );

    // eval --format waymo: the labels keep their frame, so predictions keyed by position match.
    let data = load_waymo_labels(&path).unwrap();
    let mut frames: Vec<(u64, f64)> = data.boxes.iter().map(|b| (b.frame.frame, b.bbox.x)).collect();
    frames.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(frames, [(0, 0.0), (2, 20.0), (3, 30.0), (4, 40.0)]);
}

/// A record of another segment in the middle is refused, naming the record and both names.
#[test]
fn a_record_from_another_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = five_frames();
    records[3] = frame("segment_b", 4_000_000, 30.0);
    let (path, offsets) = write(dir.path(), &records);
    let e = WaymoV1Source::open(&path, labels_only()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SourceError::Corrupt { .. }), "{text}");
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!("record 3 at offset {}", offsets[3])), "{text}");
    assert!(text.contains("segment_a") && text.contains("segment_b"), "{text}");
    assert!(load_waymo_labels(&path).is_err());
}

/// A duplicated record (same timestamp) is kept at its own position and reported, not merged.
#[test]
fn a_duplicated_record_keeps_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = five_frames();
    records.insert(2, records[1].clone());
    let (path, _) = write(dir.path(), &records);
    let source = WaymoV1Source::open(&path, labels_only()).unwrap();
    assert_eq!(source.len(), 6);
    let frames: Vec<(usize, i64)> = (0..6)
        .map(|i| {
            let f = source.frame(i).unwrap();
            (f.index, f.timestamp_micros)
        })
        .collect();
    assert_eq!(frames[1], (1, 2_000_000));
    assert_eq!(frames[2], (2, 2_000_000));
    assert_eq!(frames[5], (5, 5_000_000));
}

/// Issue 18: one NaN label aborted a whole `eval`; it now costs only that label (with a warning
/// naming the frame), and fails under `on_corrupt = "fail"`.
#[test]
fn a_nan_label_costs_only_that_label() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = five_frames();
    let mut bad: proto::Frame = proto::Frame::decode(&records[2][..]).unwrap();
    let mut extra = bad.laser_labels[0].clone();
    extra.bbox.as_mut().unwrap().center_y = Some(f64::NAN);
    extra.id = Some("nan-car".into());
    bad.laser_labels.push(extra);
    records[2] = bad.encode_to_vec();
    let (path, _) = write(dir.path(), &records);
    let data = load_waymo_labels(&path).unwrap();
    assert_eq!(data.boxes.len(), 5);
    assert!(data.boxes.iter().all(|b| b.bbox.y.is_finite()));
    let fail = WaymoConfig {
        on_corrupt: boxlayer::sources::OnCorrupt::Fail,
        ..labels_only()
    };
    let source = WaymoV1Source::open(&path, fail).unwrap();
    let e = source.frame(2).unwrap_err().to_string();
    assert!(e.contains("nan-car"), "{e}");
}

/// `eval` with a damaged ground-truth record: predictions made on the undamaged segment score
/// AP 1 (issue 18: they scored 28.8 when frames were renumbered), and the prediction on the
/// unreadable frame is left unscored instead of counting as a false positive.
#[test]
fn eval_of_correct_predictions_against_damaged_ground_truth_scores_one() {
    let dir = tempfile::tempdir().unwrap();
    let (path, offsets) = write(dir.path(), &five_frames());
    let pred: String = load_waymo_labels(&path)
        .unwrap()
        .boxes
        .iter()
        .map(|b| boxlayer::eval::input::to_json_line(b) + "\n")
        .collect();
    let pred_path = dir.path().join("pred.jsonl");
    std::fs::write(&pred_path, pred).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(offsets[1] + HEADER_BYTES + 3) as usize] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();

    let report = boxlayer::eval::run(
        &path,
        boxlayer::eval::InputFormat::Waymo,
        &pred_path,
        boxlayer::eval::InputFormat::Jsonl,
        &boxlayer::eval::EvalConfig::default(),
    )
    .unwrap();
    assert_eq!((report.num_gt_boxes, report.num_pred_boxes), (4, 4));
    let scored: Vec<_> = report.detection.iter().filter(|r| r.num_gt > 0).collect();
    assert!(!scored.is_empty());
    for r in scored {
        assert_eq!(r.num_tp, 4, "{r:?}");
        assert!((r.ap_r40.unwrap() - 1.0).abs() < 1e-9, "{r:?}");
    }
}
