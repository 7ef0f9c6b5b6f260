//! Fuzzes the M3ED reader on damaged copies of a simulated `<seq>_data.h5` (named by
//! `BOXLAYER_FUZZ_SEED`), opened beside a pristine pose file (`BOXLAYER_FUZZ_POSE`, optional),
//! under both damage policies; every sweep is decoded and the summary read.
//!
//! An input is a list of edits to the pristine file, not the file itself, so the corpus stays
//! small and `-rss_limit_mb` measures the reader, not the fuzzer's copies of a 4 MB file: after a
//! mode byte, 6-byte edits `u32 offset (mod the file length), u8 value, u8 op`, where op % 8 == 0
//! truncates the file at the offset and any other op XORs the byte there with the value (0 as
//! 0xff). A mode byte with its low bit set takes the rest of the input as the whole file instead.
//! libhdf5 is not instrumented, so what this finds is what a user would see: a signal, a hang
//! (`-timeout`), a runaway allocation (`-rss_limit_mb`, `-malloc_limit_mb`) or a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use boxlayer::sources::{OnCorrupt, Source};
use libfuzzer_sys::fuzz_target;

/// The scratch folder of this process (holding the pose file once) and the pristine file.
fn setup() -> &'static (PathBuf, Vec<u8>) {
    static SETUP: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let base = std::env::var_os("BOXLAYER_FUZZ_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = base.join(format!("boxlayer-fuzz-m3ed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz scratch folder");
        if let Some(pose) = std::env::var_os("BOXLAYER_FUZZ_POSE") {
            std::fs::copy(&pose, dir.join("fuzz_pose_gt.h5")).expect("copy BOXLAYER_FUZZ_POSE");
        }
        let seed = std::env::var_os("BOXLAYER_FUZZ_SEED").expect("BOXLAYER_FUZZ_SEED names the pristine data file");
        let pristine = std::fs::read(&seed).expect("read BOXLAYER_FUZZ_SEED");
        (dir, pristine)
    })
}

/// The file an input stands for.
fn file_of(data: &[u8], pristine: &[u8]) -> Vec<u8> {
    match data.split_first() {
        Some((mode, rest)) if mode & 1 == 1 => rest.to_vec(),
        Some((_, edits)) => {
            let mut file = pristine.to_vec();
            for edit in edits.chunks_exact(6) {
                if file.is_empty() {
                    break;
                }
                let at = u32::from_le_bytes([edit[0], edit[1], edit[2], edit[3]]) as usize % file.len();
                if edit[5] % 8 == 0 {
                    file.truncate(at);
                } else {
                    file[at] ^= if edit[4] == 0 { 0xff } else { edit[4] };
                }
            }
            file
        }
        None => pristine.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let (dir, pristine) = setup();
    let path = dir.join("fuzz_data.h5");
    if std::fs::write(&path, file_of(data, pristine)).is_err() {
        return;
    }
    for on_corrupt in [OnCorrupt::Skip, OnCorrupt::Fail] {
        let config = M3edConfig {
            on_corrupt,
            ..M3edConfig::default()
        };
        if let Ok(source) = M3edSource::open(&path, config) {
            for i in 0..source.len() {
                let _ = source.frame(i);
            }
            let _ = source.summary();
        }
    }
});
