//! A camera image with the boxes drawn in it through the camera's own lens model: each edge is
//! followed in short steps, so edges bend with the distortion, and parts behind the camera are
//! left out rather than wrapped around.

use image::RgbImage;
use nalgebra::Point3;

use crate::camera::{BOX_EDGES, project_box, project_point};
use crate::frame::CameraCalibration;
use crate::geometry::box_corners;

use super::draw::Canvas;
use super::scene::SceneBox;
use super::style::{FLAG_COLOR, LABEL_TEXT, TRUTH_COLOR, class_color};
use super::{RenderError, label_text};

/// Steps each box edge is followed in.
const EDGE_STEPS: usize = 16;

/// The diagonals of the front (heading) face, corners 0, 3, 4, 7.
const FRONT_CROSS: [(usize, usize); 2] = [(0, 7), (3, 4)];

/// The projected pieces of the segment `a`–`b` (sensor frame): runs of consecutive steps that
/// project.
fn projected_runs(calibration: &CameraCalibration, a: &Point3<f64>, b: &Point3<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for k in 0..=EDGE_STEPS {
        let t = k as f64 / EDGE_STEPS as f64;
        let p = a + (b - a) * t;
        match project_point(calibration, &p) {
            Some(px) => run.push((px.x, px.y)),
            None if run.len() > 1 => runs.push(std::mem::take(&mut run)),
            None => run.clear(),
        }
    }
    if run.len() > 1 {
        runs.push(run);
    }
    runs
}

/// Draws the edges of `b` (sensor frame) as seen by the camera.
fn draw_edges(
    canvas: &mut Canvas,
    calibration: &CameraCalibration,
    b: &SceneBox,
    color: image::Rgb<u8>,
    width: u32,
    cross: bool,
) -> Result<(), RenderError> {
    let corners = box_corners(&b.bbox);
    for (i, j) in BOX_EDGES {
        for run in projected_runs(calibration, &corners[i], &corners[j]) {
            canvas.polyline(&run, color, width)?;
        }
    }
    if cross {
        for (i, j) in FRONT_CROSS {
            for run in projected_runs(calibration, &corners[i], &corners[j]) {
                canvas.polyline(&run, color, 1)?;
            }
        }
    }
    Ok(())
}

/// `image` with `boxes` (sensor frame) drawn in class colours, labelled with class, track id and
/// flags (red labels for flagged boxes), and `truth` (sensor frame) in thin white lines. Labels go
/// first and outlines over them, so every outline keeps its colour; nothing is drawn for a box
/// that does not project into the image.
pub fn draw_camera(
    image: &RgbImage,
    calibration: &CameraCalibration,
    boxes: &[SceneBox],
    truth: &[SceneBox],
) -> Result<RgbImage, RenderError> {
    let mut canvas = Canvas::new(image.clone());
    for t in truth {
        if project_box(calibration, &t.bbox).is_some() {
            draw_edges(&mut canvas, calibration, t, TRUTH_COLOR, 1, false)?;
        }
    }
    let visible: Vec<(&SceneBox, [f64; 2])> = boxes
        .iter()
        .filter_map(|b| project_box(calibration, &b.bbox).map(|p| (b, [p.x_min, p.y_min])))
        .collect();
    for (b, top_left) in &visible {
        let text = label_text(&b.class, b.track_id, &b.flags);
        let (background, color) = if b.flags.is_empty() {
            (class_color(&b.class), LABEL_TEXT)
        } else {
            (FLAG_COLOR, TRUTH_COLOR)
        };
        canvas.label(&text, (top_left[0], top_left[1]), 13, background, color)?;
    }
    for (b, _) in &visible {
        draw_edges(&mut canvas, calibration, b, class_color(&b.class), 2, true)?;
    }
    Ok(canvas.image)
}
