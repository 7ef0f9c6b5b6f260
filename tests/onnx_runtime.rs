//! ONNX Runtime is found, loads, and runs models: a hand-checkable affine graph and the real
//! CenterPoint pillar encoders from tests/fixtures/shared/onnx-pfn/.

use std::path::{Path, PathBuf};

use boxlayer::detect::{describe_model, open_session};
use ndarray::{Array2, Array3};
use ort::value::Tensor;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn affine_model_runs_and_matches_hand_computation() {
    let model = fixture("tests/fixtures/affine.onnx");
    let mut session = open_session(&model, 1).expect("ONNX Runtime loads (run `make setup`)");
    let x = Array2::from_shape_vec((2, 3), vec![1.0f32, 0.0, 0.0, 1.0, -1.0, 2.0]).unwrap();
    let outputs = session
        .run(ort::inputs!["x" => Tensor::from_array(x).unwrap()])
        .unwrap();
    let (shape, y) = outputs["y"].try_extract_tensor::<f32>().unwrap();
    assert_eq!(&**shape, &[2, 2]);
    // Row 0: [1,0,0]·W + b = [1, 2] + [0.5, -1]; row 1: [1,-1,2]·W = [1-3+10, 2-4+12] + b.
    assert_eq!(y, &[1.5, 1.0, 8.5, 9.0]);
}

#[test]
fn describe_lists_dynamic_axes() {
    let info = describe_model(&fixture("tests/fixtures/affine.onnx")).unwrap();
    assert_eq!(info.inputs.len(), 1);
    assert_eq!(info.inputs[0].name, "x");
    assert_eq!(info.inputs[0].shape, vec![-1, 3]);
    assert_eq!(info.outputs[0].shape, vec![-1, 2]);
    assert_eq!(info.producer.as_deref(), Some("boxlayer-tools"));
}

#[test]
fn real_pillar_encoder_runs_and_zero_pillars_agree_across_layouts() {
    let point_major = fixture("tests/fixtures/shared/onnx-pfn/carkusl_pfe.onnx");
    let channel_major = fixture("tests/fixtures/shared/onnx-pfn/carkusl_pfe_sim.onnx");
    if !point_major.exists() {
        panic!(
            "fixture missing: {} (the shared/ folder sits beside the repository)",
            point_major.display()
        );
    }
    let info = describe_model(&point_major).unwrap();
    assert_eq!(info.inputs[0].shape, vec![5268, 20, 10]);
    assert_eq!(info.outputs[0].shape, vec![5268, 64]);

    // One pillar with a few points, the rest zero; both layouts must give the same features.
    let mut pm = Array3::<f32>::zeros((5268, 20, 10));
    for p in 0..5 {
        for c in 0..10 {
            pm[[0, p, c]] = (p as f32 * 0.3 - c as f32 * 0.1).sin();
        }
    }
    let cm = pm
        .clone()
        .permuted_axes([2, 0, 1])
        .as_standard_layout()
        .insert_axis(ndarray::Axis(0))
        .to_owned();

    let mut s1 = open_session(&point_major, 1).unwrap();
    let out1 = s1
        .run(ort::inputs!["input.1" => Tensor::from_array(pm).unwrap()])
        .unwrap();
    let (shape1, f1) = out1[0].try_extract_tensor::<f32>().unwrap();
    assert_eq!(&**shape1, &[5268, 64]);
    let mut s2 = open_session(&channel_major, 1).unwrap();
    let out2 = s2
        .run(ort::inputs!["input.1" => Tensor::from_array(cm).unwrap()])
        .unwrap();
    let (shape2, f2) = out2[0].try_extract_tensor::<f32>().unwrap();
    assert_eq!(&**shape2, &[1, 64, 5268, 1]);
    // f2 is [1, 64, N, 1]: feature c of pillar n sits at c * N + n.
    let n = 5268;
    let mut worst = 0.0f32;
    for pillar in [0usize, 1, 5267] {
        for c in 0..64 {
            worst = worst.max((f1[pillar * 64 + c] - f2[c * n + pillar]).abs());
        }
    }
    assert!(worst < 5e-5, "layouts disagree by {worst}");
    // The PFN ends in ReLU + max-pool: features are non-negative and finite.
    assert!(f1.iter().all(|v| v.is_finite() && *v >= 0.0));
    // The populated pillar differs from an empty one.
    assert!((0..64).any(|c| (f1[c] - f1[64 + c]).abs() > 1e-4));
}

#[test]
fn missing_model_names_the_file() {
    let err = open_session(Path::new("/nonexistent/model.onnx"), 1).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/model.onnx: opening ONNX model failed"),
        "{err}"
    );
}
