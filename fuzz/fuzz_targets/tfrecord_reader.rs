//! Fuzzes the TFRecord framing reader: any bytes, both damage policies, every record read back.
//!
//! Random byte flips almost never forge a header whose length CRC matches (odds 2⁻³²), so inputs
//! starting with `L` are a structured case instead (issue 18: a length near 2⁶⁴ behind a valid
//! CRC panicked): the next 8 bytes are a record length, framed with its correct CRC between two
//! good records, followed by the rest of the input. `fuzz/tfrecord.dict` seeds such lengths.
#![no_main]

use std::io::Write;

use boxlayer::sources::OnCorrupt;
use boxlayer::sources::waymo::tfrecord::{TfRecordReader, TfRecordWriter, masked_crc32c};
use libfuzzer_sys::fuzz_target;

/// `good record | forged header (length from the input, matching CRC) | rest | good record`.
fn forged_length_case(data: &[u8]) -> Option<Vec<u8>> {
    let rest = data.strip_prefix(b"L")?;
    let len: [u8; 8] = rest.get(..8)?.try_into().ok()?;
    let mut w = TfRecordWriter::new(Vec::new());
    w.write_record(b"before").ok()?;
    let mut bytes = w.finish().ok()?;
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    bytes.extend_from_slice(&rest[8..]);
    let mut w = TfRecordWriter::new(bytes);
    w.write_record(b"after").ok()?;
    w.finish().ok()
}

fuzz_target!(|data: &[u8]| {
    // The reader works on files (positional reads), so each input goes through a tmpfs file.
    let dir = std::env::temp_dir().join(format!("boxlayer-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("input.tfrecord");
    let Ok(mut file) = std::fs::File::create(&path) else { return };
    let bytes = forged_length_case(data);
    if file.write_all(bytes.as_deref().unwrap_or(data)).is_err() {
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
