//! Damaged Waymo inputs give the documented error and lose no good frame (issue 5 acceptance):
//! flipped data byte, flipped length byte (wrong length CRC), truncated file, empty file,
//! garbage payload behind valid framing, non-TFRecord input.

mod waymo_support;

use std::path::{Path, PathBuf};

use boxlayer::sources::waymo::tfrecord::{HEADER_BYTES, TfRecordReader, TfRecordWriter};
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source, proto};
use boxlayer::sources::{OnCorrupt, Source, SourceError};
use prost::Message;

/// Three small frames (calibrations and labels of the stripped real frame) with distinct
/// timestamps; `None` without the Waymo fixtures (outside CI).
fn three_records() -> Option<Vec<Vec<u8>>> {
    let source = WaymoV1Source::open(
        &waymo_support::fixture("frame_calib_labels.tfrecord")?,
        WaymoConfig::default(),
    )
    .unwrap();
    let base: proto::Frame = source.frame_proto(0).unwrap();
    (0..3)
        .map(|i| {
            let mut f = base.clone();
            f.timestamp_micros = Some(1_000_000 * (i + 1));
            f.encode_to_vec()
        })
        .collect::<Vec<_>>()
        .into()
}

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

fn corrupt_byte(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn skip() -> WaymoConfig {
    WaymoConfig::default()
}

fn fail() -> WaymoConfig {
    WaymoConfig {
        on_corrupt: OnCorrupt::Fail,
        ..WaymoConfig::default()
    }
}

/// Skip policy: the two good frames, in order, and one report naming the middle record.
fn assert_middle_skipped(path: &Path, offsets: &[u64], detail: &str) {
    let source = WaymoV1Source::open(path, skip()).unwrap();
    assert_eq!(source.len(), 2);
    assert_eq!(source.timestamps_micros(), &[1_000_000, 3_000_000]);
    assert_eq!(source.frame(0).unwrap().timestamp_micros, 1_000_000);
    assert_eq!(source.frame(1).unwrap().timestamp_micros, 3_000_000);
    let skipped = &source.meta().skipped;
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].location, format!("record 1 at offset {}", offsets[1]));
    assert!(skipped[0].detail.contains(detail), "{:?}", skipped[0]);
}

fn assert_fails_naming(path: &Path, offsets: &[u64], detail: &str) {
    let e = WaymoV1Source::open(path, fail()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SourceError::Corrupt { .. }), "{text}");
    assert!(
        text.starts_with(&format!(
            "{}: record 1 at offset {}: {detail}",
            path.display(),
            offsets[1]
        )),
        "{text}"
    );
}

#[test]
fn flipped_data_byte_skips_one_record_or_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(records) = three_records() else {
        return;
    };
    let (path, offsets) = write(dir.path(), &records);
    corrupt_byte(&path, offsets[1] + HEADER_BYTES + 100);
    assert_middle_skipped(&path, &offsets, "bad data crc");
    assert_fails_naming(&path, &offsets, "bad data crc");
}

#[test]
fn flipped_length_byte_resynchronises_on_the_next_record() {
    let dir = tempfile::tempdir().unwrap();
    let Some(records) = three_records() else {
        return;
    };
    let (path, offsets) = write(dir.path(), &records);
    corrupt_byte(&path, offsets[1] + 2);
    assert_middle_skipped(&path, &offsets, "bad length crc");
    assert_fails_naming(&path, &offsets, "bad length crc");
}

#[test]
fn wrong_length_crc_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let Some(records) = three_records() else {
        return;
    };
    let (path, offsets) = write(dir.path(), &records);
    corrupt_byte(&path, offsets[1] + 9);
    assert_middle_skipped(&path, &offsets, "bad length crc");
}

#[test]
fn garbage_payload_with_valid_framing_is_skipped() {
    let Some(mut records) = three_records() else {
        return;
    };
    records[1] = (0..4000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (path, offsets) = write(dir.path(), &records);
    assert_middle_skipped(&path, &offsets, "not a Waymo Frame");
    assert_fails_naming(&path, &offsets, "not a Waymo Frame");
}

#[test]
fn truncated_file_keeps_the_complete_records() {
    let dir = tempfile::tempdir().unwrap();
    let Some(records) = three_records() else {
        return;
    };
    let (path, offsets) = write(dir.path(), &records);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 10).unwrap();
    let source = WaymoV1Source::open(&path, skip()).unwrap();
    assert_eq!(source.len(), 2);
    let s = &source.meta().skipped;
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].location, format!("record 2 at offset {}", offsets[2]));
    assert!(s[0].detail.starts_with("truncated record"), "{:?}", s[0]);
    let e = WaymoV1Source::open(&path, fail()).unwrap_err().to_string();
    assert!(
        e.contains(&format!("record 2 at offset {}: truncated record", offsets[2])),
        "{e}"
    );
    // A tail shorter than a header is reported too.
    file.set_len(offsets[2] + 5).unwrap();
    let reader = TfRecordReader::open(&path, OnCorrupt::Skip).unwrap();
    assert_eq!(reader.len(), 2);
    assert!(reader.skipped()[0].detail.starts_with("truncated record header"));
}

#[test]
fn empty_file_has_no_frames_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.tfrecord");
    std::fs::write(&path, b"").unwrap();
    assert!(TfRecordReader::open(&path, OnCorrupt::Fail).unwrap().is_empty());
    let e = WaymoV1Source::open(&path, skip()).unwrap_err();
    assert!(matches!(e, SourceError::Missing { .. }), "{e}");
    assert!(e.to_string().contains("no readable record"), "{e}");
}

#[test]
fn non_tfrecord_input_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, b"this is not a tfrecord file at all").unwrap();
    let e = WaymoV1Source::open(&path, skip()).unwrap_err();
    assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("{}: not a Waymo v1 TFRecord file", path.display())
    );
    let e = WaymoV1Source::open(dir.path(), skip()).unwrap_err();
    assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
    // A `.tfrecord` whose only header is damaged is read, not refused: it is reported as damage.
    let bad = dir.path().join("bad.tfrecord");
    std::fs::write(&bad, [0u8; 64]).unwrap();
    let e = WaymoV1Source::open(&bad, skip()).unwrap_err();
    assert!(e.to_string().contains("1 damaged records skipped"), "{e}");
}

#[test]
fn out_of_range_frame_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let Some(records) = three_records() else {
        return;
    };
    let (path, _) = write(dir.path(), &records);
    let source = WaymoV1Source::open(&path, skip()).unwrap();
    let e = source.frame(3).unwrap_err();
    assert!(
        matches!(e, SourceError::FrameOutOfRange { index: 3, len: 3, .. }),
        "{e}"
    );
}
