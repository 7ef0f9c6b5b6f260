//! Fuzzes the M3ED reader: the input is a `<seq>_data.h5` file, opened beside a pristine pose
//! file (named by `BOXLAYER_FUZZ_POSE`, optional), under both damage policies; every sweep is
//! decoded and the summary read. libhdf5 is not instrumented, so what this finds is what a user
//! would see: a signal, a hang (`-timeout`), a runaway allocation (`-rss_limit_mb`,
//! `-malloc_limit_mb`) or a panic. Seed it with a simulated file (`fuzz/run_m3ed.sh` does).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use boxlayer::sources::{OnCorrupt, Source};
use libfuzzer_sys::fuzz_target;

/// The scratch folder of this process, holding the pose file once.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::var_os("BOXLAYER_FUZZ_TMP").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = base.join(format!("boxlayer-fuzz-m3ed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz scratch folder");
        if let Some(pose) = std::env::var_os("BOXLAYER_FUZZ_POSE") {
            std::fs::copy(&pose, dir.join("fuzz_pose_gt.h5")).expect("copy BOXLAYER_FUZZ_POSE");
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let path = scratch().join("fuzz_data.h5");
    if std::fs::write(&path, data).is_err() {
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
