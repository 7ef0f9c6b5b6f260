//! Labelled windows in simulated camera images, shared by `examples/classifier_crops.rs` (the
//! bundled crop classifier's training set) and `tests/classify_bundled.rs` (its sim check on
//! held-out seeds), so both see the same scenes, looks, cameras and selection rules (described
//! in `examples/classifier_crops.rs`).

use anyhow::Context;
use boxlayer::camera::project_box;
use boxlayer::classify::PixelRect;
use boxlayer::frame::{CameraCalibration, Platform};
use boxlayer::sim::{
    CameraRenderConfig, SimConfig, Simulator, camera_calibrations, ovc_rgb_calibration, render_camera_posed,
};
use boxlayer::sources::waymo::convert::camera_calibration;
use boxlayer::{ObjectClass, geometry::Box3};
use image::RgbImage;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How windows are chosen.
#[derive(Debug, Clone)]
pub struct WindowRules {
    /// Sweeps rendered per scene.
    pub sweeps_per_scene: usize,
    /// Smallest object side kept (px): the manifest's `crop.min_side_px`.
    pub min_side_px: f64,
    /// Random background windows per accepted object in an image (at least 2 per image).
    pub bg_ratio: f64,
    /// Near-miss background windows per accepted object.
    pub near_miss: f64,
}

/// One rendered image with its labelled windows.
pub struct LabelledImage {
    pub image: RgbImage,
    /// Window (px) and label index (0 background, 1 vehicle, 2 pedestrian, 3 cyclist).
    pub windows: Vec<(PixelRect, i64)>,
    /// 0 vehicle, 1 drone, 2 quadruped.
    pub platform: i64,
}

/// Label indices, the manifest's `[output] labels` order.
pub const BACKGROUND: i64 = 0;

/// The label index of a class (`None`: not one the classifier knows).
pub fn label_of(class: ObjectClass) -> Option<i64> {
    match class {
        ObjectClass::Vehicle => Some(1),
        ObjectClass::Pedestrian => Some(2),
        ObjectClass::Cyclist => Some(3),
        _ => None,
    }
}

/// Sweeps in each simulated sequence (6 s); the scene is laid out for them.
pub const FRAMES: usize = 60;

/// IoU of two pixel rectangles.
pub fn iou(a: &PixelRect, b: &PixelRect) -> f64 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area = |r: &PixelRect| (r[2] - r[0]) * (r[3] - r[1]);
    let union = area(a) + area(b) - inter;
    if union > 0.0 { inter / union } else { 0.0 }
}

/// Share of `rect` covered by the union of `others` (8×8 sample grid).
pub fn covered_share(rect: &PixelRect, others: &[PixelRect]) -> f64 {
    let mut covered = 0;
    for i in 0..8 {
        for j in 0..8 {
            let x = rect[0] + (rect[2] - rect[0]) * (f64::from(i) + 0.5) / 8.0;
            let y = rect[1] + (rect[3] - rect[1]) * (f64::from(j) + 0.5) / 8.0;
            if others.iter().any(|o| x >= o[0] && x < o[2] && y >= o[1] && y < o[3]) {
                covered += 1;
            }
        }
    }
    f64::from(covered) / 64.0
}

/// A random look for one rendered sweep.
fn render_config(rng: &mut ChaCha8Rng) -> CameraRenderConfig {
    CameraRenderConfig {
        sun_azimuth_deg: rng.random_range(0.0..360.0),
        sun_elevation_deg: rng.random_range(8.0..80.0),
        ambient: rng.random_range(0.25..0.75),
        haze_distance_m: 10f64.powf(rng.random_range(2.4..3.5)),
        ground_texture: rng.random_range(0.02..0.25),
        ..CameraRenderConfig::default()
    }
}

/// `calibration` at `scale` of its resolution.
fn scaled(calibration: &CameraCalibration, scale: f64) -> CameraCalibration {
    let mut c = calibration.clone();
    c.width = (f64::from(c.width) * scale).round() as u32;
    c.height = (f64::from(c.height) * scale).round() as u32;
    c.fx *= scale;
    c.fy *= scale;
    c.cx *= scale;
    c.cy *= scale;
    c
}

/// The labelled windows of one rendered image.
fn image_windows(
    image: &RgbImage,
    calibration: &CameraCalibration,
    objects: &[(ObjectClass, Box3, u32)],
    rules: &WindowRules,
    rng: &mut ChaCha8Rng,
) -> Vec<(PixelRect, i64)> {
    let mut out = Vec::new();
    let eye = calibration.sensor_from_camera.translation.vector;
    // Every object's projected box with its distance from the camera, nearest first.
    let mut projected: Vec<(PixelRect, f64, f64, Option<i64>, u32)> = objects
        .iter()
        .filter_map(|(class, b, points)| {
            let p = project_box(calibration, b)?;
            let distance = (b.center().coords - eye).norm();
            Some((
                [p.x_min, p.y_min, p.x_max, p.y_max],
                distance,
                p.in_image_fraction,
                label_of(*class),
                *points,
            ))
        })
        .collect();
    projected.sort_by(|a, b| a.1.total_cmp(&b.1));
    let all: Vec<PixelRect> = projected.iter().map(|p| p.0).collect();
    let min_side = rules.min_side_px;
    let (width, height) = (f64::from(image.width()), f64::from(image.height()));
    let mut sizes = Vec::new();
    for (k, (rect, _, fraction, label, points)) in projected.iter().enumerate() {
        let Some(label) = label else { continue };
        let (w, h) = (rect[2] - rect[0], rect[3] - rect[1]);
        if *fraction < 0.5 || w < min_side || h < min_side || *points < 2 || covered_share(rect, &all[..k]) >= 0.5 {
            continue;
        }
        out.push((*rect, *label));
        sizes.push((w, h, *rect));
    }
    let objects_here = sizes.len();
    // Random background windows of object-like sizes.
    let wanted = ((objects_here as f64 * rules.bg_ratio).round() as usize).max(2);
    let mut tries = 0;
    let mut got = 0;
    while got < wanted && tries < wanted * 30 {
        tries += 1;
        let (w, h) = if !sizes.is_empty() && rng.random_bool(0.5) {
            let (w, h, _) = sizes[rng.random_range(0..sizes.len())];
            let s = rng.random_range(0.7..1.5);
            (w * s, h * s)
        } else {
            let h = 10f64.powf(rng.random_range(1.15..2.6)) * height / 1280.0 * 1.5;
            let aspect = 10f64.powf(rng.random_range(-0.45..0.4));
            (h * aspect, h)
        };
        if w < min_side || h < min_side || w >= width || h >= height {
            continue;
        }
        let x0 = rng.random_range(0.0..width - w);
        let y0 = rng.random_range(0.0..height - h);
        let rect = [x0, y0, x0 + w, y0 + h];
        if all.iter().any(|o| iou(&rect, o) >= 0.1) {
            continue;
        }
        out.push((rect, BACKGROUND));
        got += 1;
    }
    // Near misses: windows shifted 0.6–0.9 of a box off an object.
    let near = (objects_here as f64 * rules.near_miss).round() as usize;
    for _ in 0..near {
        for _ in 0..10 {
            let (w, h, r) = sizes[rng.random_range(0..sizes.len())];
            let angle = rng.random_range(0.0..std::f64::consts::TAU);
            let shift = rng.random_range(0.6..0.9);
            let (dx, dy) = (angle.cos() * shift * w, angle.sin() * shift * h);
            let rect = [r[0] + dx, r[1] + dy, r[2] + dx, r[3] + dy];
            if rect[0] < 0.0 || rect[1] < 0.0 || rect[2] > width || rect[3] > height {
                continue;
            }
            if all.iter().any(|o| iou(&rect, o) >= 0.3) {
                continue;
            }
            out.push((rect, BACKGROUND));
            break;
        }
    }
    out
}

/// The rendered images of one simulated scene (seed `base_seed·1000 + scene`) with their windows.
pub fn scene_images(scene: usize, base_seed: u64, rules: &WindowRules) -> anyhow::Result<Vec<LabelledImage>> {
    let platform = [
        Platform::Vehicle,
        Platform::Vehicle,
        Platform::Drone,
        Platform::Vehicle,
        Platform::Quadruped,
    ][scene % 5];
    let platform_index = match platform {
        Platform::Vehicle => 0,
        Platform::Drone => 1,
        _ => 2,
    };
    let seed = base_seed * 1000 + scene as u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4352_4f50_5345_5421);
    let mut config = SimConfig {
        frames: FRAMES,
        ..SimConfig::default()
    };
    // Every object a camera can resolve is labelled (so no background window holds an unlabelled
    // car), and more people and bicycles than the LiDAR studies use.
    config.vehicle.max_range_m = 200.0;
    config.lidar.ouster_max_range_m = 200.0;
    config.scene.pedestrians_per_km = rng.random_range(20.0..70.0);
    config.scene.cyclists_per_km = rng.random_range(8.0..30.0);
    config.scene.parking_occupancy = rng.random_range(0.2..0.7);
    let sim = Simulator::new(config, platform, seed).with_context(|| format!("scene {scene}"))?;
    let cameras: Vec<CameraCalibration> = match platform {
        Platform::Vehicle => camera_calibrations(&sim)
            .iter()
            .map(|c| camera_calibration(c).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?,
        _ => vec![ovc_rgb_calibration()],
    };
    let sweeps = rules.sweeps_per_scene.clamp(1, FRAMES);
    let mut out = Vec::new();
    for k in 0..sweeps {
        let index = (k * FRAMES / sweeps + rng.random_range(0..FRAMES / sweeps)).min(FRAMES - 1);
        let sweep = sim.sweep(index)?;
        let objects: Vec<(ObjectClass, Box3, u32)> = sweep
            .objects
            .iter()
            .map(|o| (o.class, o.box_in_sensor, o.num_lidar_points))
            .collect();
        let look = render_config(&mut rng);
        let chosen: Vec<(CameraCalibration, f64)> = match platform {
            Platform::Vehicle => {
                let n = rng.random_range(2..=3);
                let mut order: Vec<usize> = (0..cameras.len()).collect();
                for i in 0..order.len() {
                    let j = rng.random_range(i..order.len());
                    order.swap(i, j);
                }
                order[..n]
                    .iter()
                    .map(|&i| (cameras[i].clone(), if rng.random_bool(0.3) { 1.0 } else { 0.5 }))
                    .collect()
            }
            _ => vec![(cameras[0].clone(), if rng.random_bool(0.5) { 1.0 } else { 0.75 })],
        };
        for (camera, scale) in chosen {
            let camera = scaled(&camera, scale);
            let image = render_camera_posed(
                &sim,
                sweep.reference_time_micros,
                &sweep.world_from_sensor,
                &camera,
                &look,
            )?;
            let windows = image_windows(&image, &camera, &objects, rules, &mut rng);
            out.push(LabelledImage {
                image,
                windows,
                platform: platform_index,
            });
        }
    }
    Ok(out)
}
