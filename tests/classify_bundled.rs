//! The bundled crop classifier `classifiers/crop_sim/` (trained on simulated renders only,
//! `tools/train_classifier.py`) loads with its sha256 verified and says vehicle / pedestrian /
//! background on REAL camera images: the five cameras of
//! `../shared/fixtures/waymo/frame_with_cameras.tfrecord` (never trained on), every
//! TYPE_VEHICLE / TYPE_PEDESTRIAN / TYPE_CYCLIST label that is at least half visible (in-image
//! fraction ≥ 0.5, less than half of its projected box covered by nearer labels' boxes, at least
//! `min_side_px` on each side) plus one background window per such label (the label's size, at
//! a seeded position whose IoU with every label's box, signs included, is below 0.1). It is also
//! checked on freshly simulated renders of held-out seeds, through the training set's own window
//! rules (`examples/support/crop_windows.rs`). `--nocapture` prints the confusion tables and the
//! time per crop; the model card (`classifiers/crop_sim/README.md`) gives the measured figures.

#[path = "support/waymo_fixture.rs"]
mod waymo_fixture;

#[path = "../examples/support/crop_windows.rs"]
#[allow(dead_code)]
mod crop_windows;

use std::path::{Path, PathBuf};
use std::time::Instant;

use boxlayer::camera::project_box;
use boxlayer::classify::{Classifier, NoVerdict, PixelRect, RgbClass, RgbVerdict};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source};
use crop_windows::{WindowRules, covered_share, iou, scene_images};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Accuracy floor over vehicle / pedestrian / background on the real Waymo crops: measured
/// 13/16 = 0.812 (model card), less one crop.
const MIN_REAL_ACCURACY: f64 = 0.75;
/// Accuracy floor over all crops of the held-out simulated renders: measured 191/197 = 0.970.
const MIN_SIM_ACCURACY: f64 = 0.94;
/// Held-out simulator base seed (training used base seed 1: scene seeds 1000–1359).
const SIM_SEED: u64 = 9001;
/// Held-out scenes rendered (vehicle, vehicle, drone, vehicle, quadruped).
const SIM_SCENES: usize = 5;

const NAMES: [&str; 4] = ["background", "vehicle", "pedestrian", "cyclist"];

fn bundled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("classifiers/crop_sim")
}

/// Column of a verdict in the confusion table: the label index, 4 = unknown, 5 = no verdict.
fn column(verdict: &Result<RgbVerdict, NoVerdict>) -> usize {
    match verdict {
        Ok(v) => match v.class {
            RgbClass::Background => 0,
            RgbClass::Vehicle => 1,
            RgbClass::Pedestrian => 2,
            RgbClass::Cyclist => 3,
            RgbClass::Unknown => 4,
        },
        Err(_) => 5,
    }
}

/// Rows truth, columns verdict.
type Confusion = [[usize; 6]; 4];

fn print_confusion(title: &str, c: &Confusion) {
    println!("{title} (rows truth, columns verdict)");
    println!(
        "{:>12} {:>10} {:>8} {:>10} {:>8} {:>8} {:>10}",
        "", "background", "vehicle", "pedestrian", "cyclist", "unknown", "no verdict"
    );
    for (name, row) in NAMES.iter().zip(c) {
        let n: usize = row.iter().sum();
        println!(
            "{name:>12} {:>10} {:>8} {:>10} {:>8} {:>8} {:>10}   recall {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            if n > 0 {
                format!("{:.3}", row[name_index(name)] as f64 / n as f64)
            } else {
                "-".into()
            }
        );
    }
}

fn name_index(name: &str) -> usize {
    NAMES.iter().position(|n| *n == name).unwrap()
}

/// Right / all over the rows `classes`.
fn accuracy(c: &Confusion, classes: &[usize]) -> (usize, usize) {
    let right = classes.iter().map(|&k| c[k][k]).sum();
    let all = classes.iter().map(|&k| c[k].iter().sum::<usize>()).sum();
    (right, all)
}

#[test]
fn bundled_classifier_loads_and_is_small() {
    let classifier = Classifier::load(&bundled_dir()).unwrap();
    assert_eq!(classifier.name(), "crop_sim");
    assert_eq!(classifier.manifest().output.labels, NAMES);
    let bytes = std::fs::metadata(bundled_dir().join("model.onnx")).unwrap().len();
    assert!(bytes < 8 << 20, "model.onnx is {bytes} bytes");
}

#[test]
fn real_waymo_crops_are_classified() {
    let Some(path) = waymo_fixture::waymo_fixture("frame_with_cameras.tfrecord") else {
        return;
    };
    let source = WaymoV1Source::open(&path, WaymoConfig::default()).unwrap();
    let frame = source.frame(0).unwrap();
    let classifier = Classifier::load(&bundled_dir()).unwrap();
    let min_side = classifier.manifest().crop.min_side_px;
    let mut confusion: Confusion = [[0; 6]; 4];
    let mut occluded: Confusion = [[0; 6]; 4];
    let (mut crops, mut seconds) = (0usize, 0.0f64);
    for (camera_index, camera) in frame.cameras.iter().enumerate() {
        let image = camera.image().unwrap();
        let calibration = &camera.calibration;
        let eye = calibration.sensor_from_camera.translation.vector;
        // Every label's projected box (signs too), nearest first.
        let mut projected: Vec<(PixelRect, f64, f64, Option<usize>)> = frame
            .ground_truth
            .iter()
            .filter_map(|gt| {
                let p = project_box(calibration, &gt.box_in_sensor)?;
                let label = match gt.source_label.as_str() {
                    "TYPE_VEHICLE" => Some(1),
                    "TYPE_PEDESTRIAN" => Some(2),
                    "TYPE_CYCLIST" => Some(3),
                    _ => None,
                };
                let distance = (gt.box_in_sensor.center().coords - eye).norm();
                Some((
                    [p.x_min, p.y_min, p.x_max, p.y_max],
                    distance,
                    p.in_image_fraction,
                    label,
                ))
            })
            .collect();
        projected.sort_by(|a, b| a.1.total_cmp(&b.1));
        let all: Vec<PixelRect> = projected.iter().map(|p| p.0).collect();
        // (window, label, strict): strict = at least half visible (the asserted set); the rest
        // are labels 50–90 % covered by nearer ones, reported only.
        let mut windows: Vec<(PixelRect, usize, bool)> = Vec::new();
        for (k, (rect, _, fraction, label)) in projected.iter().enumerate() {
            let Some(label) = label else { continue };
            let (w, h) = (rect[2] - rect[0], rect[3] - rect[1]);
            let covered = covered_share(rect, &all[..k]);
            if *fraction >= 0.5 && w >= min_side && h >= min_side && covered < 0.9 {
                windows.push((*rect, *label, covered < 0.5));
            }
        }
        // One background window per object, its size, at a seeded position clear of every label.
        let mut rng = ChaCha8Rng::seed_from_u64(0xB0C5 + camera_index as u64);
        let (width, height) = (f64::from(image.width()), f64::from(image.height()));
        let objects: Vec<(PixelRect, bool)> = windows.iter().map(|w| (w.0, w.2)).collect();
        for (rect, strict) in objects {
            let (w, h) = (rect[2] - rect[0], rect[3] - rect[1]);
            if w >= width || h >= height {
                continue;
            }
            for _ in 0..100 {
                let x0 = rng.random_range(0.0..width - w);
                let y0 = rng.random_range(0.0..height - h);
                let window = [x0, y0, x0 + w, y0 + h];
                if all.iter().all(|o| iou(&window, o) < 0.1) {
                    windows.push((window, 0, strict));
                    break;
                }
            }
        }
        let rects: Vec<PixelRect> = windows.iter().map(|w| w.0).collect();
        let start = Instant::now();
        let verdicts = classifier.check(&image, &rects).unwrap();
        seconds += start.elapsed().as_secs_f64();
        crops += rects.len();
        for ((_, truth, strict), verdict) in windows.iter().zip(&verdicts) {
            let table = if *strict { &mut confusion } else { &mut occluded };
            table[*truth][column(verdict)] += 1;
        }
    }
    print_confusion(
        "partly occluded real labels (50-90 % covered by nearer boxes) and their background windows, not asserted",
        &occluded,
    );
    let (right, all) = accuracy(&occluded, &[0, 1, 2]);
    println!("accuracy over vehicle/pedestrian/background {right}/{all}");
    print_confusion("real Waymo crops (frame_with_cameras.tfrecord, 5 cameras)", &confusion);
    let (right, all) = accuracy(&confusion, &[0, 1, 2]);
    let acc = right as f64 / all as f64;
    println!(
        "accuracy over vehicle/pedestrian/background {right}/{all} = {acc:.3}; {:.2} ms per crop",
        1e3 * seconds / crops as f64
    );
    assert!(all >= 16, "only {all} real crops");
    assert!(acc >= MIN_REAL_ACCURACY, "real accuracy {acc:.3} < {MIN_REAL_ACCURACY}");
}

#[test]
fn held_out_simulated_crops_are_classified() {
    let classifier = Classifier::load(&bundled_dir()).unwrap();
    let rules = WindowRules {
        sweeps_per_scene: 1,
        min_side_px: classifier.manifest().crop.min_side_px,
        bg_ratio: 1.0,
        near_miss: 0.3,
    };
    let mut confusion: Confusion = [[0; 6]; 4];
    let (mut crops, mut seconds) = (0usize, 0.0f64);
    for scene in 0..SIM_SCENES {
        for labelled in scene_images(scene, SIM_SEED, &rules).unwrap() {
            let rects: Vec<PixelRect> = labelled.windows.iter().map(|w| w.0).collect();
            let start = Instant::now();
            let verdicts = classifier.check(&labelled.image, &rects).unwrap();
            seconds += start.elapsed().as_secs_f64();
            crops += rects.len();
            for ((_, truth), verdict) in labelled.windows.iter().zip(&verdicts) {
                confusion[*truth as usize][column(verdict)] += 1;
            }
        }
    }
    print_confusion("held-out simulated crops", &confusion);
    let (right, all) = accuracy(&confusion, &[0, 1, 2, 3]);
    let acc = right as f64 / all as f64;
    println!(
        "accuracy {right}/{all} = {acc:.3}; {:.2} ms per crop (cut, resize, ONNX, batches of up to 32)",
        1e3 * seconds / crops as f64
    );
    assert!(all >= 60, "only {all} simulated crops");
    assert!(acc >= MIN_SIM_ACCURACY, "sim accuracy {acc:.3} < {MIN_SIM_ACCURACY}");
}
