//! Model files are confined to the detector folder (issue 18, "Detector model paths"): a manifest
//! naming `../x.onnx`, `../../etc/passwd`, an absolute path or a symlink leading out is refused
//! before the file is opened or hashed, unless `[models] allow_outside_folder = true`.

use std::path::{Path, PathBuf};

use boxlayer::detect::{DetectError, Detector};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/detect")
        .join(rel)
}

/// `root/det/detector.toml` from the single-graph fixture with its model at `file`, and a copy of
/// the model at `root/outside.onnx`. Returns the detector folder.
fn detector(root: &Path, file: &str, allow_outside: bool) -> PathBuf {
    let text = std::fs::read_to_string(fixture("single_center/detector.toml")).unwrap();
    let text = text
        .replace("file = \"../single_center_nchw.onnx\"", &format!("file = {file:?}"))
        .replace(
            "allow_outside_folder = true",
            &format!("allow_outside_folder = {allow_outside}"),
        );
    let dir = root.join("det");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("detector.toml"), text).unwrap();
    std::fs::copy(fixture("single_center_nchw.onnx"), root.join("outside.onnx")).unwrap();
    dir
}

fn refused_as_outside(dir: &Path) {
    match Detector::load(dir) {
        Ok(_) => panic!("{} loaded a model from outside its folder", dir.display()),
        Err(e) => {
            assert!(matches!(e, DetectError::Invalid { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.contains("models.graph.file"), "{text}");
            assert!(text.contains("outside the detector folder"), "{text}");
            assert!(text.contains("allow_outside_folder"), "{text}");
        }
    }
}

#[test]
fn a_parent_relative_model_path_is_refused() {
    let root = tempfile::tempdir().unwrap();
    refused_as_outside(&detector(root.path(), "../outside.onnx", false));
}

#[test]
fn a_path_to_etc_passwd_is_refused_without_hashing() {
    let root = tempfile::tempdir().unwrap();
    // Deep enough to reach `/` from any temporary folder; a sha256 mismatch would mean it was hashed.
    let file = format!("{}etc/passwd", "../".repeat(32));
    refused_as_outside(&detector(root.path(), &file, false));
    refused_as_outside(&detector(root.path(), "/etc/passwd", false));
}

#[test]
fn an_absolute_model_path_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside.onnx");
    let dir = detector(root.path(), outside.to_str().unwrap(), false);
    refused_as_outside(&dir);
}

#[test]
fn a_symlink_leading_out_of_the_folder_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = detector(root.path(), "model.onnx", false);
    std::os::unix::fs::symlink(root.path().join("outside.onnx"), dir.join("model.onnx")).unwrap();
    refused_as_outside(&dir);
}

#[test]
fn a_model_inside_the_folder_loads() {
    let root = tempfile::tempdir().unwrap();
    let dir = detector(root.path(), "sub/model.onnx", false);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::copy(fixture("single_center_nchw.onnx"), dir.join("sub/model.onnx")).unwrap();
    Detector::load(&dir).unwrap();
}

#[test]
fn allow_outside_folder_opts_in() {
    let root = tempfile::tempdir().unwrap();
    Detector::load(&detector(root.path(), "../outside.onnx", true)).unwrap();
}
