//! Manifest and model validation at load: wrong shapes or names, a bad sha256, a missing file and
//! unknown keys fail with the documented messages (docs/detectors.md "Load-time checks"), never a panic.

use std::path::{Path, PathBuf};

use boxlayer::detect::{DetectError, Detector, DetectorManifest};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/detect")
        .join(rel)
}

/// Copies a fixture manifest into a fresh folder (removed when dropped) with `edit` applied; model
/// paths become absolute.
fn edited(name: &str, edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let src = fixture(name);
    let text = std::fs::read_to_string(src.join("detector.toml")).unwrap();
    let text = text.replace("file = \"../", &format!("file = \"{}/../", src.display()));
    let dir = tempfile::Builder::new()
        .prefix(&format!("boxlayer-detect-{name}-"))
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("detector.toml"), edit(text)).unwrap();
    dir
}

fn load_err(dir: impl AsRef<Path>) -> DetectError {
    let dir = dir.as_ref();
    match Detector::load(dir) {
        Ok(_) => panic!("{} loaded but should not", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn a_wrong_static_pillar_count_names_detector_tensor_and_shapes() {
    let dir = edited("carkusl_pfe", |t| {
        t.replace("max_pillars = 5268", "max_pillars = 30000")
    });
    let err = load_err(&dir);
    assert!(matches!(err, DetectError::TensorMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "detector `carkusl_pfe`: model carkusl_pfe.onnx: tensor `input.1`: expected shape [30000, 20, 10], \
         got shape [5268, 20, 10]"
    );
}

#[test]
fn a_wrong_layout_is_caught() {
    let dir = edited("carkusl_pfe_sim", |t| {
        t.replace("layout = \"channel_major\"", "layout = \"point_major\"")
    });
    let err = load_err(&dir).to_string();
    assert!(
        err.contains("expected shape [5268, 20, 10], got shape [1, 10, 5268, 20]"),
        "{err}"
    );
}

#[test]
fn a_wrong_feature_width_is_caught_on_the_encoder_output() {
    let dir = edited("anchor_nchw", |t| t.replace("channels = 4", "channels = 8"));
    let err = load_err(&dir).to_string();
    assert!(
        err.contains("tensor `features`: expected shape [64, 8] or [64, 1, 8], got shape [-1, 4]"),
        "{err}"
    );
}

#[test]
fn a_wrong_head_output_size_names_the_output() {
    // Two more anchor rotations per class: the head has 6 anchors per cell, not 9.
    let dir = edited("anchor_nchw", |t| {
        t.replace("rotations = [0.0, ", "rotations = [0.7, 0.0, ")
    });
    let err = load_err(&dir).to_string();
    assert_eq!(
        err,
        "detector `anchor_nchw`: model anchor_head_nchw.onnx: tensor `cls_preds`: expected shape [1, 27, 8, 8], \
         got shape [1, 18, 8, 8]"
    );
}

#[test]
fn a_wrong_tensor_name_lists_what_the_model_has() {
    let dir = edited("center_nhwc", |t| {
        t.replace("heatmap = \"hm_1\"", "heatmap = \"heatmap_1\"")
    });
    let err = load_err(&dir);
    assert!(matches!(err, DetectError::MissingTensor { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("detector `center_nhwc`: model center_head_nhwc.onnx: no output tensor `heatmap_1`"),
        "{text}"
    );
    assert!(text.contains("`hm_1` [1, 8, 8, 2]"), "{text}");
}

#[test]
fn a_bad_sha256_fails_before_any_session_opens() {
    let dir = edited("anchor_nhwc", |t| {
        let at = t.find("sha256 = \"").unwrap() + 10;
        let mut t = t;
        t.replace_range(at..at + 4, "0000");
        t
    });
    let err = load_err(&dir);
    assert!(matches!(err, DetectError::Sha256Mismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("sha256 mismatch: manifest says 0000"), "{err}");
}

#[test]
fn a_missing_model_file_is_named() {
    let dir = edited("center_nchw", |t| {
        t.replace("center_head_nchw.onnx", "no_such_head.onnx")
    });
    let err = load_err(&dir);
    assert!(matches!(err, DetectError::MissingModel { .. }), "{err:?}");
    assert!(err.to_string().contains("no_such_head.onnx not found"), "{err}");
}

#[test]
fn unknown_keys_and_bad_values_are_rejected() {
    let dir = edited("center_nchw", |t| {
        t.replace("[postprocess]", "[postprocess]\nnms_iou = 0.3")
    });
    let err = load_err(&dir);
    assert!(matches!(err, DetectError::Manifest { .. }), "{err:?}");
    assert!(err.to_string().contains("unknown field `nms_iou`"), "{err}");

    let dir = edited("center_nchw", |t| {
        t.replace("out_size_factor = 2", "out_size_factor = 3")
    });
    assert_eq!(
        load_err(&dir).to_string(),
        "detector `center_nchw`: head.center.out_size_factor: grid 16×16 is not divisible by 3"
    );
}

/// Issue 18: `threads = 100000` hung inside ONNX Runtime; it is refused at load, naming the field.
#[test]
fn runaway_thread_and_session_counts_are_refused_naming_the_field() {
    let dir = edited("center_nchw", |t| format!("{t}\n[runtime]\nthreads = 100000\n"));
    assert_eq!(
        load_err(&dir).to_string(),
        "detector `center_nchw`: runtime.threads: must be at most 1024 (0 = ONNX Runtime's default), got 100000"
    );
    let dir = edited("center_nchw", |t| format!("{t}\n[runtime]\nsessions = 100000\n"));
    assert_eq!(
        load_err(&dir).to_string(),
        "detector `center_nchw`: runtime.sessions: must be between 1 and 256, got 100000"
    );
}

#[test]
fn every_test_manifest_parses() {
    for entry in std::fs::read_dir(fixture("")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("detector.toml").is_file() {
            let m = DetectorManifest::load(&dir).unwrap();
            assert!(!m.name.is_empty());
        }
    }
}
