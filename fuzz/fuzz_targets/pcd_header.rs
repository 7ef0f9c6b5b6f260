//! Fuzzes the PCD reader on arbitrary bytes as a whole `.pcd` file (header, then ascii, binary or
//! binary_compressed data), under both non-finite policies and a small `max_file_bytes` so that
//! a header promising huge data is refused before it is allocated. Any input must give a cloud
//! or a `PcdError`: a panic, a hang (`-timeout`) or a runaway allocation (`-rss_limit_mb`) is a
//! bug. Seed it with a few files `boxlayer::sources::pcd::write_pcd` writes.
#![no_main]

use boxlayer::sources::layout::NonFinite;
use boxlayer::sources::pcd::{PcdConfig, decode_pcd, parse_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_header(data);
    for non_finite in [NonFinite::Drop, NonFinite::Fail] {
        let config = PcdConfig {
            max_file_bytes: 64 << 20,
            non_finite,
            ..PcdConfig::default()
        };
        if let Ok(pcd) = decode_pcd(data, &config) {
            assert_eq!(pcd.cloud.x().len(), pcd.cloud.intensity().len());
        }
    }
});
