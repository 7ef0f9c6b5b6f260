//! The Waymo fixtures live outside the repository (`../shared/fixtures/waymo/`: Waymo Open Dataset
//! data may not be redistributed). A clone without them skips the tests that need them, with one
//! message; on CI (`CI` set) their absence is a failure, so the suite never passes by skipping.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The fixture `name`, or `None` when the folder is absent and `CI` is unset.
pub fn waymo_fixture(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/waymo");
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
