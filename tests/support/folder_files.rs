//! Every file of a folder by name, with its bytes, for the writers' same-seed-same-bytes tests.

use std::collections::BTreeMap;
use std::path::Path;

/// File name → contents of every entry of `dir`.
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}
