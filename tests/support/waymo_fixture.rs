//! The Waymo fixtures live outside the repository (`../shared/fixtures/waymo/`: Waymo Open Dataset
//! data may not be redistributed). A clone without them skips the tests that need them, with one
//! message; on CI (`CI` set) their absence is a failure, so the suite never passes by skipping.
//! `BOXLAYER_SHARED` names the shared folder when it is not beside the checkout (`.ci/run` sets it
//! for a clone made elsewhere from a checkout that has it).

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The shared folder: `BOXLAYER_SHARED`, else `../shared` beside the checkout.
pub fn shared_dir() -> PathBuf {
    std::env::var_os("BOXLAYER_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// The fixture `name`, or `None` when the folder is absent and `CI` is unset.
pub fn waymo_fixture(name: &str) -> Option<PathBuf> {
    let dir = shared_dir().join("fixtures/waymo");
    let path = dir.join(name);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{}: Waymo fixture missing on CI",
        path.display()
    );
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        eprintln!(
            "skipped: the Waymo fixtures ({}) are not here; the tests that read them do nothing",
            dir.display()
        )
    });
    None
}
