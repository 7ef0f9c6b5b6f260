//! Random and mutated bytes never panic the TFRecord reader, the Frame decoder or the range-image
//! decoder: the in-tree stand-in for the `fuzz/` targets, run by `cargo test`.

use boxlayer::sources::OnCorrupt;
use boxlayer::sources::waymo::range_image::decompress_matrix;
use boxlayer::sources::waymo::tfrecord::{TfRecordReader, TfRecordWriter};
use boxlayer::sources::waymo::{WaymoConfig, frame_from_proto, proto};
use proptest::prelude::*;
use prost::Message;

fn valid_file() -> Vec<u8> {
    let frame = proto::Frame {
        context: Some(proto::Context {
            name: Some("seg".into()),
            ..Default::default()
        }),
        timestamp_micros: Some(7),
        ..Default::default()
    };
    let mut w = TfRecordWriter::new(Vec::new());
    for _ in 0..3 {
        w.write_record(&frame.encode_to_vec()).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_tfrecord_files_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8), cut in any::<usize>()) {
        let mut bytes = valid_file();
        for (at, v) in flips {
            let n = bytes.len();
            bytes[at % n] ^= v;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.tfrecord");
        std::fs::write(&path, &bytes).unwrap();
        for policy in [OnCorrupt::Skip, OnCorrupt::Fail] {
            if let Ok(reader) = TfRecordReader::open(&path, policy) {
                prop_assert!(reader.len() <= 3 + reader.skipped().len());
                for i in 0..reader.len() {
                    let _ = reader.read(i);
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic_the_proto_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(frame) = proto::Frame::decode(&bytes[..]) {
            let _ = frame_from_proto(frame, "seg", 0, &WaymoConfig::default());
        }
        let _ = proto::FrameSummary::decode(&bytes[..]);
        let _ = decompress_matrix(&bytes, 4);
    }
}
