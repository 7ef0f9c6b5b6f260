//! The pipeline's RGB class check on a hand-made log: a box seen on a red image is judged by the
//! mean-colour crop model of tests/fixtures/classify/ (red → vehicle), a box whose only image does
//! not decode gets `no_image` and no verdict (the run goes on), a box behind the camera or cut by
//! the image border `out_of_view`, a box without LiDAR returns in it `no_points`, and a wrong
//! class against a confident verdict is flagged `class_conflict`.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use boxlayer::PointCloud;
use boxlayer::classify::Classifier;
use boxlayer::frame::{
    CameraAxes, CameraCalibration, CameraView, Distortion, Frame, GroundTruthBox, ImageData, ObjectClass, Platform,
};
use boxlayer::geometry::Box3;
use boxlayer::pipeline::{DetectionsFrom, LayerOrigin, PipelineConfig, SequenceJob, run_sequence};
use boxlayer::sources::{SequenceMeta, Source, SourceError};
use image::{Rgb, RgbImage};
use nalgebra::Isometry3;

/// A pinhole camera with OpenCV axes looking along the sensor's x axis, 200 × 100 px.
fn calibration() -> CameraCalibration {
    // Camera z (forward) = sensor x, camera x (right) = −sensor y, camera y (down) = −sensor z.
    let rotation = nalgebra::UnitQuaternion::from_matrix(&nalgebra::Matrix3::new(
        0.0, 0.0, 1.0, //
        -1.0, 0.0, 0.0, //
        0.0, -1.0, 0.0,
    ));
    CameraCalibration {
        width: 200,
        height: 100,
        fx: 100.0,
        fy: 100.0,
        cx: 100.0,
        cy: 50.0,
        distortion: Distortion::None,
        axes: CameraAxes::OpenCv,
        sensor_from_camera: Isometry3::from_parts(nalgebra::Translation3::identity(), rotation),
    }
}

struct HandMade {
    meta: SequenceMeta,
}

fn label(track: &str, class: ObjectClass, x: f64, y: f64) -> GroundTruthBox {
    GroundTruthBox {
        box_in_sensor: Box3::new(x, y, 0.0, 4.0, 2.0, 2.0, 0.0),
        class,
        source_label: class.as_str().to_string(),
        track_id: track.to_string(),
        num_points: None,
        velocity_mps: None,
    }
}

impl Source for HandMade {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }
    fn len(&self) -> usize {
        2
    }
    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let mut png = Vec::new();
        RgbImage::from_pixel(200, 100, Rgb([220, 10, 10]))
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let (data, ground_truth, returns_at) = if index == 0 {
            // A vehicle 10 m ahead, labelled a pedestrian; a vehicle behind the camera; one on
            // the image's right border (half of it outside); one 20 m ahead without returns.
            (
                png,
                vec![
                    label("a", ObjectClass::Pedestrian, 10.0, 0.0),
                    label("b", ObjectClass::Vehicle, -10.0, 0.0),
                    label("d", ObjectClass::Vehicle, 10.0, -10.0),
                    label("e", ObjectClass::Vehicle, 20.0, 6.0),
                ],
                vec![(10.0, 0.0), (-10.0, 0.0), (10.0, -10.0)],
            )
        } else {
            (
                b"not an image".to_vec(),
                vec![label("c", ObjectClass::Vehicle, 10.0, 0.0)],
                vec![(10.0, 0.0)],
            )
        };
        // 27 returns around each box's centre, well inside it.
        let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
        for (cx, cy) in returns_at {
            for i in 0..27 {
                x.push((cx + f64::from(i % 3 - 1) * 0.5) as f32);
                y.push((cy + f64::from(i / 3 % 3 - 1) * 0.5) as f32);
                z.push((f64::from(i / 9 - 1) * 0.5) as f32);
            }
        }
        let intensity = vec![0.0; x.len()];
        let cloud = PointCloud::from_columns(x, y, z, intensity).unwrap();
        Ok(Frame {
            sequence: "hand_made".into(),
            index,
            timestamp_micros: index as i64 * 100_000,
            platform: Platform::Vehicle,
            cloud,
            world_from_sensor: Isometry3::identity(),
            imu: Vec::new(),
            cameras: vec![CameraView::new(
                "front",
                calibration(),
                index as i64 * 100_000,
                ImageData::Encoded(Arc::from(data)),
            )],
            ground_truth,
            notes: Vec::new(),
        })
    }
}

#[test]
fn verdicts_notes_and_conflicts_follow_the_images() {
    let classifier =
        Classifier::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/classify/crop_rgb")).unwrap();
    let mut config = PipelineConfig {
        origin: LayerOrigin::Labels,
        ..PipelineConfig::default()
    };
    config.stages.camera_check = true;
    config.stages.normalize = false;
    // The mean-colour model's softmax on this red is e^0.863 / (e^0.863 + 2 e^0.039) ≈ 0.53.
    config.camera.conflict_score = 0.5;
    let source = HandMade {
        meta: SequenceMeta {
            name: "hand_made".into(),
            platform: Platform::Vehicle,
            source_kind: "test",
            path: PathBuf::from("hand_made"),
            skipped: Vec::new(),
        },
    };
    let layer = run_sequence(
        &SequenceJob {
            config: &config,
            source: &source,
            platform: Platform::Vehicle,
            detections: DetectionsFrom::Given(&BTreeMap::new()),
            frames: None,
            scratch_dir: None,
            progress: false,
            normalize: None,
            fusion_frame: boxlayer::DetectorFrame::Sensor,
            views: &[],
            classifier: Some(&classifier),
            stop: None,
        },
        None,
    )
    .unwrap();
    let by_track: BTreeMap<&str, &boxlayer::shards::BoxRow> = layer
        .boxes
        .iter()
        .map(|r| (r.source_track_id.as_deref().unwrap(), r))
        .collect();
    assert_eq!(by_track.len(), 5);
    let a = by_track["a"];
    assert_eq!(a.best_camera.as_deref(), Some("front"));
    assert_eq!(
        (a.rgb_class.as_deref(), a.rgb_agrees, a.rgb_note.as_deref()),
        (Some("vehicle"), Some(false), None)
    );
    let e = (220.0f64 / 255.0).exp();
    let expected = (e / (e + (10.0f64 / 255.0).exp() * 2.0)) as f32;
    assert!(
        (a.rgb_score.unwrap() as f32 - expected).abs() < 1e-3,
        "{:?} vs {expected}",
        a.rgb_score
    );
    assert!(a.flags.contains(&"class_conflict".to_string()), "{:?}", a.flags);
    let b = by_track["b"];
    assert_eq!(
        (b.rgb_class.as_deref(), b.rgb_note.as_deref()),
        (None, Some("out_of_view"))
    );
    assert!(b.flags.contains(&"out_of_view".to_string()));
    let d = by_track["d"];
    let fraction = d.cameras[0].in_image_fraction;
    assert!((0.2..0.8).contains(&fraction), "{fraction}");
    assert_eq!(
        (d.rgb_class.as_deref(), d.rgb_note.as_deref()),
        (None, Some("out_of_view"))
    );
    let unseen = by_track["e"];
    assert_eq!(
        (unseen.num_points_inside, unseen.best_camera.as_deref()),
        (0, Some("front"))
    );
    assert_eq!(
        (unseen.rgb_class.as_deref(), unseen.rgb_note.as_deref()),
        (None, Some("no_points"))
    );
    let c = by_track["c"];
    assert_eq!(
        (c.rgb_class.as_deref(), c.rgb_note.as_deref()),
        (None, Some("no_image"))
    );
    assert!(!c.flags.contains(&"class_conflict".to_string()));
}
