//! Image models drop in by manifest: the tiny YOLOv5 / YOLOv8 exports and the mean-colour crop
//! classifier of tests/fixtures/classify/ (written by tools/make_test_models.py, whose doc lists
//! their fixed outputs) decode to boxes and classes computed here by hand; bad manifests and
//! models fail with errors that say what is wrong.

use std::path::{Path, PathBuf};

use boxlayer::classify::{Classifier, ClassifierManifest, NoVerdict, RgbClass, YoloLayout};
use image::{Rgb, RgbImage};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/classify")
        .join(name)
}

/// The mean of the input tensor for a uniform 114 image: the letterbox pads with 114 too.
const M: f32 = 114.0 / 255.0;

fn assert_rect(got: [f64; 4], want: [f64; 4]) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-4, "got {got:?}, want {want:?}");
    }
}

#[test]
fn yolo_layouts_decode_to_hand_computed_boxes() {
    // A 64 × 32 image letterboxes into 32 × 32 at scale 0.5 with 8-px bars above and below, so
    // input (x, y) is image ((x) / 0.5, (y − 8) / 0.5).
    let image = RgbImage::from_pixel(64, 32, Rgb([114, 114, 114]));
    let g = 1.0 + M;
    for (name, layout, person, car) in [
        ("yolo_v5", YoloLayout::V5, 0.6 * g * 0.6 * g, 0.6 * g * 0.4 * g),
        ("yolo_v8", YoloLayout::V8, 0.6 * g, 0.4 * g),
    ] {
        let c = Classifier::load(&fixture(name)).unwrap();
        assert_eq!(c.manifest().yolo.layout, layout);
        let d = c.detect(&image).unwrap();
        // Candidate 1 is suppressed by candidate 0 (IoU 0.778), candidate 3's mapped scores are
        // under the threshold and its best label (dog) is not mapped.
        assert_eq!(d.len(), 2, "{name}: {d:?}");
        // Candidate 0: input (10, 16, 8, 12) → [6, 10, 14, 22] → image [12, 4, 28, 28].
        assert_eq!(d[0].label, 0, "{name}");
        assert!((d[0].score - person).abs() < 1e-5, "{name}: {} vs {person}", d[0].score);
        assert_rect(d[0].rect, [12.0, 4.0, 28.0, 28.0]);
        // Candidate 2: input (24, 16, 6, 6) → [21, 13, 27, 19] → image [42, 10, 54, 22].
        assert_eq!(d[1].label, 1, "{name}");
        assert!((d[1].score - car).abs() < 1e-5, "{name}");
        assert_rect(d[1].rect, [42.0, 10.0, 54.0, 22.0]);

        let boxes = [
            [12.0, 4.0, 28.0, 28.0],
            [40.0, 10.0, 54.0, 22.0],
            [0.0, 0.0, 5.0, 5.0],
            [30.0, 0.0, 42.0, 12.0],
        ];
        let v = c.check(&image, &boxes).unwrap();
        let hit = v[0].unwrap();
        assert_eq!(hit.class, RgbClass::Pedestrian);
        assert_eq!(v[1].unwrap().class, RgbClass::Vehicle, "IoU 144/168 with the car");
        assert_eq!(v[2], Err(NoVerdict::TooSmall));
        assert_eq!(v[3], Err(NoVerdict::Unmatched), "IoU with the car box is 0.05");
    }
}

#[test]
fn crop_classifier_batches_crops_and_applies_softmax() {
    // Left half red, right half blue.
    let image = RgbImage::from_fn(40, 20, |x, _| if x < 20 { Rgb([200, 0, 0]) } else { Rgb([0, 0, 200]) });
    let c = Classifier::load(&fixture("crop_rgb")).unwrap();
    let v = c
        .check(
            &image,
            &[[0.0, 0.0, 20.0, 20.0], [20.0, 0.0, 40.0, 20.0], [0.0, 0.0, 3.0, 3.0]],
        )
        .unwrap();
    // Logits (200/255, 0, 0): softmax e^0.784 / (e^0.784 + 2).
    let e = (200.0f32 / 255.0).exp();
    let want = e / (e + 2.0);
    let red = v[0].unwrap();
    assert_eq!(red.class, RgbClass::Vehicle);
    assert!((red.score - want).abs() < 1e-5, "{} vs {want}", red.score);
    let blue = v[1].unwrap();
    assert_eq!(blue.class, RgbClass::Background);
    assert!((blue.score - want).abs() < 1e-5);
    assert_eq!(v[2], Err(NoVerdict::TooSmall), "3 px is under min_side_px = 4");
}

fn copy_fixture(name: &str, edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(name).join("model.onnx"), dir.path().join("model.onnx")).unwrap();
    let text = std::fs::read_to_string(fixture(name).join("classifier.toml")).unwrap();
    std::fs::write(dir.path().join("classifier.toml"), edit(&text)).unwrap();
    dir
}

#[test]
fn an_input_shape_unlike_the_manifest_is_refused_at_load() {
    let dir = copy_fixture("crop_rgb", |t| t.replace("width = 16", "width = 24"));
    let e = Classifier::load(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("input `image`") && e.contains("[N, 3, 16, 24]") && e.contains("[-1, 3, 16, 16]"),
        "{e}"
    );
    let dir = copy_fixture("yolo_v8", |t| t.replace("layout = \"v8\"", "layout = \"v5\""));
    let c = Classifier::load(dir.path()).unwrap();
    let e = c.detect(&RgbImage::new(32, 32)).unwrap_err().to_string();
    assert!(e.contains("inference failed") && e.contains("[1, N, 8]"), "{e}");
}

#[test]
fn a_changed_model_or_a_bad_manifest_names_the_file_and_key() {
    let dir = copy_fixture("crop_rgb", |t| t.to_string());
    std::fs::write(dir.path().join("model.onnx"), b"not a model").unwrap();
    let e = Classifier::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("model.onnx") && e.contains("sha256 mismatch"), "{e}");
    let dir = copy_fixture("crop_rgb", |t| t.replace("blue = \"background\"", "blue = \"tree\""));
    let e = ClassifierManifest::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("classifier.toml") && e.contains("tree"), "{e}");
    let dir = copy_fixture("crop_rgb", |t| t.replace("min_side_px = 4", "min_side_px = -1"));
    let e = Classifier::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("crop.min_side_px"), "{e}");
}
