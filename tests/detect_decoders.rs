//! Decoder round trips: boxes encoded by hand (tools/make_decoder_models.py) into anchor-head and
//! CenterPoint-head tensors, returned by tiny ONNX graphs, must decode back through the whole
//! detector (pillarise → encoder → scatter → head → decode → NMS) to the same boxes.

use std::path::{Path, PathBuf};

use boxlayer::detect::Detector;
use boxlayer::{ObjectClass, PointCloud};
use serde::Deserialize;

#[derive(Deserialize)]
struct ExpectedBox {
    #[serde(rename = "box")]
    values: [f64; 7],
    label: String,
    score: f32,
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/detect")
        .join(rel)
}

fn expected() -> Vec<ExpectedBox> {
    serde_json::from_str(&std::fs::read_to_string(fixture("boxes.json")).unwrap()).unwrap()
}

/// A few points inside the grid so that the encoder and scatter have real input.
fn cloud() -> PointCloud {
    PointCloud::from_columns(
        vec![0.5, 1.3, 4.1, 4.15, 6.0],
        vec![-2.0, 0.1, 2.5, 2.45, -3.1],
        vec![-1.0, 0.0, -0.5, 0.2, 0.5],
        vec![0.1, 0.2, 0.3, 0.4, 0.5],
    )
    .unwrap()
}

fn class_of(label: &str) -> ObjectClass {
    match label {
        "Car" => ObjectClass::Vehicle,
        "Pedestrian" => ObjectClass::Pedestrian,
        "Cyclist" => ObjectClass::Cyclist,
        other => panic!("unexpected label {other}"),
    }
}

fn angle_diff(a: f64, b: f64) -> f64 {
    boxlayer::geometry::wrap_angle(a - b).abs()
}

fn assert_round_trip(detector_dir: &str) {
    let detector = Detector::load(&fixture(detector_dir)).unwrap();
    let detections = detector.detect(&cloud()).unwrap();
    let expected = expected();
    assert_eq!(detections.len(), expected.len(), "{detector_dir}: {detections:#?}");
    // Sorted by score, highest first; the fixture's boxes have distinct scores in that order.
    for (d, e) in detections.iter().zip(&expected) {
        let b = d.box3.to_array();
        for (k, (got, want)) in b.iter().zip(&e.values).take(6).enumerate() {
            assert!(
                (got - want).abs() < 1e-3,
                "{detector_dir}: value {k}: got {got}, expected {want} ({d:?})"
            );
        }
        assert!(
            angle_diff(b[6], e.values[6]) < 1e-4,
            "{detector_dir}: yaw {} vs {}",
            b[6],
            e.values[6]
        );
        assert_eq!((b[7], b[8]), (0.0, 0.0));
        assert_eq!(d.class, class_of(&e.label));
        assert!((d.score - e.score).abs() < 1e-5, "{} vs {}", d.score, e.score);
        assert_eq!(d.detector, detector_dir);
    }
}

#[test]
fn anchor_head_nchw_round_trip_openpcdet_conventions() {
    assert_round_trip("anchor_nchw");
}

#[test]
fn anchor_head_nhwc_round_trip_zhulf_conventions() {
    assert_round_trip("anchor_nhwc");
}

#[test]
fn center_head_nchw_round_trip() {
    assert_round_trip("center_nchw");
}

#[test]
fn center_head_nhwc_round_trip() {
    assert_round_trip("center_nhwc");
}

#[test]
fn a_higher_threshold_drops_the_weaker_boxes() {
    let mut manifest = boxlayer::detect::DetectorManifest::load(&fixture("center_nchw")).unwrap();
    // Scores are σ(3), σ(2), σ(1) ≈ 0.95, 0.88, 0.73.
    manifest.postprocess.score_threshold = 0.9;
    let detector = Detector::from_manifest(manifest, &fixture("center_nchw")).unwrap();
    assert_eq!(detector.detect(&cloud()).unwrap().len(), 1);
}

#[test]
fn single_graph_family_feeds_pillars_coords_and_counts() {
    assert_round_trip("single_center");
}

/// Issue 18: NaN intensity on a fifth of the points reached the encoder (a NaN feature poisons
/// its pillar) with no word. Such points are dropped and counted before pillarising.
#[test]
fn points_with_nan_intensity_are_dropped_before_pillarising() {
    let detector = Detector::load(&fixture("center_nchw")).unwrap();
    let clean = detector.pillarize(&cloud()).unwrap();
    let good = cloud();
    // One more point in the pillar of each of the first two, with a NaN or infinite intensity.
    let mut x = good.x().to_vec();
    let mut y = good.y().to_vec();
    let mut z = good.z().to_vec();
    let mut intensity = good.intensity().to_vec();
    for (k, bad) in [(0, f32::NAN), (1, f32::INFINITY)] {
        x.push(good.x()[k] + 0.01);
        y.push(good.y()[k]);
        z.push(good.z()[k]);
        intensity.push(bad);
    }
    let dirty = PointCloud::from_columns(x, y, z, intensity).unwrap();
    let pillars = detector.pillarize(&dirty).unwrap();
    assert!(pillars.features.iter().all(|v| v.is_finite()));
    assert_eq!(pillars.num_points, clean.num_points);
    assert_eq!(pillars.features, clean.features);
    assert_eq!(
        detector.detect(&dirty).unwrap().len(),
        detector.detect(&cloud()).unwrap().len()
    );
}
