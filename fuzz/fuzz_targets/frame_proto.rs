//! Fuzzes the Frame proto decoder and its conversion to a boxlayer `Frame` (labels, cameras,
//! range images), plus the zlib matrix decoder.
#![no_main]

use boxlayer::sources::waymo::range_image::decompress_matrix;
use boxlayer::sources::waymo::{WaymoConfig, frame_from_proto, proto};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = proto::Frame::decode(data) {
        let _ = frame_from_proto(frame, "fuzz", 0, &WaymoConfig::default());
    }
    let _ = proto::FrameSummary::decode(data);
    let _ = decompress_matrix(data, 4);
});
