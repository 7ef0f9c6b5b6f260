//! Bird's-eye view of a frame: points coloured by height or intensity, boxes in class colours with
//! a heading tick and their track id, a red dot on flagged boxes, truth as white dashes.
//!
//! The view looks down the scene frame's z axis with x pointing up the image and y to the left,
//! so a vehicle platform drives up the picture; the view's centre is the middle of the image.

use image::RgbImage;

use crate::geometry::{Box3, bev_corners};

use super::RenderError;
use super::draw::Canvas;
use super::scene::{FrameScene, SceneBox};
use super::style::{BACKGROUND, FLAG_COLOR, TRUTH_COLOR, class_color, viridis};

/// What colours the points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorBy {
    /// Height along z, from the 2nd to the 98th percentile of the frame's points.
    #[default]
    Height,
    /// Intensity (0…1, Waymo's through tanh).
    Intensity,
}

/// What a bird's-eye view shows.
#[derive(Debug, Clone, PartialEq)]
pub struct BevOptions {
    /// Image width and height (px).
    pub size_px: u32,
    /// Half the side of the square shown (m).
    pub range_m: f64,
    /// The ground point `(x, y)` at the image centre (m).
    pub center: [f64; 2],
    /// What colours the points.
    pub color_by: ColorBy,
    /// Write track ids and the frame caption.
    pub labels: bool,
}

impl Default for BevOptions {
    fn default() -> Self {
        Self {
            size_px: 1000,
            range_m: 60.0,
            center: [0.0, 0.0],
            color_by: ColorBy::Height,
            labels: true,
        }
    }
}

/// The map from the ground plane (m) to pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BevView {
    /// The ground point at the image centre.
    pub center: [f64; 2],
    /// Metres per pixel.
    pub m_per_px: f64,
    /// Image width (px).
    pub width: u32,
    /// Image height (px).
    pub height: u32,
}

impl BevView {
    /// The square view of `options`.
    pub fn of(options: &BevOptions) -> Self {
        let size = options.size_px.max(16);
        Self {
            center: options.center,
            m_per_px: 2.0 * options.range_m.max(0.5) / f64::from(size),
            width: size,
            height: size,
        }
    }

    /// Pixel `(column, row)` of the ground point `(x, y)`.
    pub fn to_px(&self, x: f64, y: f64) -> (f64, f64) {
        (
            0.5 * f64::from(self.width) - (y - self.center[1]) / self.m_per_px,
            0.5 * f64::from(self.height) - (x - self.center[0]) / self.m_per_px,
        )
    }

    /// The pixel corners of a box's footprint, in `bev_corners`' order.
    pub fn footprint(&self, b: &Box3) -> Vec<(f64, f64)> {
        bev_corners(b).iter().map(|p| self.to_px(p.x, p.y)).collect()
    }

    /// The pixel ends of a box's heading tick: its centre and the middle of its front edge.
    pub fn heading_tick(&self, b: &Box3) -> [(f64, f64); 2] {
        let (s, c) = b.yaw.sin_cos();
        let front = (b.x + 0.5 * b.l * c, b.y + 0.5 * b.l * s);
        [self.to_px(b.x, b.y), self.to_px(front.0, front.1)]
    }
}

/// The `lo`-th and `hi`-th quantiles of `values` (0…1), or `None` when empty.
fn quantiles(values: &[f32], lo: f64, hi: f64) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<f32> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let at = |q: f64, v: &mut Vec<f32>| {
        let k = ((v.len() - 1) as f64 * q).round() as usize;
        *v.select_nth_unstable_by(k, f32::total_cmp).1
    };
    let a = at(lo, &mut v);
    let b = at(hi, &mut v);
    Some((f64::from(a), f64::from(b)))
}

/// Draws the points of `scene` onto `canvas`.
pub(super) fn draw_points(canvas: &mut Canvas, scene: &FrameScene, view: &BevView, color_by: ColorBy) {
    let heights: Vec<f32> = scene.points.iter().map(|p| p[2]).collect();
    let (z0, z1) = quantiles(&heights, 0.02, 0.98).unwrap_or((0.0, 1.0));
    let span = (z1 - z0).max(1e-3);
    for (i, p) in scene.points.iter().enumerate() {
        let (u, v) = view.to_px(f64::from(p[0]), f64::from(p[1]));
        if u < 0.0 || v < 0.0 || u >= f64::from(view.width) || v >= f64::from(view.height) {
            continue;
        }
        let t = match color_by {
            ColorBy::Height => (f64::from(p[2]) - z0) / span,
            ColorBy::Intensity => f64::from(scene.intensity.get(i).copied().unwrap_or(0.0)),
        };
        canvas.pixel(u as i64, v as i64, viridis(0.15 + 0.85 * t));
    }
}

/// Draws `boxes` onto `canvas`: flag dots and ids first, outlines and heading ticks over them.
pub(super) fn draw_boxes(
    canvas: &mut Canvas,
    boxes: &[SceneBox],
    view: &BevView,
    labels: bool,
    highlight: Option<i64>,
) -> Result<(), RenderError> {
    for b in boxes.iter().filter(|b| !b.flags.is_empty()) {
        canvas.dot(view.to_px(b.bbox.x, b.bbox.y), 3, FLAG_COLOR)?;
    }
    if labels {
        for b in boxes {
            let Some(id) = b.track_id else { continue };
            let corners = view.footprint(&b.bbox);
            let right = corners.iter().map(|c| c.0).fold(f64::MIN, f64::max);
            let top = corners.iter().map(|c| c.1).fold(f64::MAX, f64::min);
            canvas.text(&format!("#{id}"), (right + 3.0, top - 4.0), 12, class_color(&b.class))?;
        }
    }
    for b in boxes {
        let color = class_color(&b.class);
        let width = if highlight.is_some() && highlight == b.track_id {
            3
        } else {
            2
        };
        canvas.outline(&view.footprint(&b.bbox), color, width)?;
        let [c, f] = view.heading_tick(&b.bbox);
        canvas.polyline(&[c, f], color, 2)?;
    }
    Ok(())
}

/// A bird's-eye view of `scene`.
pub fn draw_bev(scene: &FrameScene, options: &BevOptions) -> Result<RgbImage, RenderError> {
    let view = BevView::of(options);
    let mut canvas = Canvas::filled(view.width, view.height, BACKGROUND);
    draw_points(&mut canvas, scene, &view, options.color_by);
    for t in &scene.truth {
        canvas.dashed_outline(&view.footprint(&t.bbox), TRUTH_COLOR, 4, 3)?;
    }
    if options.labels {
        let caption = format!(
            "frame {} · {} frame · {} boxes{}",
            scene.frame_index,
            scene.frame.as_str(),
            scene.boxes.len(),
            if scene.truth.is_empty() {
                String::new()
            } else {
                format!(" · {} truth (dashed)", scene.truth.len())
            }
        );
        canvas.text(&caption, (8.0, 6.0), 14, TRUTH_COLOR)?;
        // A 10 m scale bar, bottom left.
        let bar = 10.0 / view.m_per_px;
        let y = f64::from(view.height) - 14.0;
        canvas.polyline(&[(10.0, y), (10.0 + bar, y)], TRUTH_COLOR, 2)?;
        canvas.text("10 m", (14.0 + bar, y - 8.0), 12, TRUTH_COLOR)?;
    }
    draw_boxes(&mut canvas, &scene.boxes, &view, options.labels, None)?;
    Ok(canvas.image)
}
