//! Fuzzes the TFRecord framing reader: any bytes, both damage policies, every record read back.
#![no_main]

use std::io::Write;

use boxlayer::sources::OnCorrupt;
use boxlayer::sources::waymo::tfrecord::TfRecordReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader works on files (positional reads), so each input goes through a tmpfs file.
    let dir = std::env::temp_dir().join(format!("boxlayer-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("input.tfrecord");
    let Ok(mut file) = std::fs::File::create(&path) else { return };
    if file.write_all(data).is_err() {
        return;
    }
    drop(file);
    for policy in [OnCorrupt::Skip, OnCorrupt::Fail] {
        if let Ok(reader) = TfRecordReader::open(&path, policy) {
            for i in 0..reader.len() {
                let _ = reader.read(i);
            }
        }
    }
});
