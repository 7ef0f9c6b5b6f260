//! Small pictures of one box: its camera crop over its bird's-eye surroundings with a caption
//! (the report's gallery), and a track's strip of such tiles over time.

use image::imageops::{FilterType, crop_imm, resize};
use image::{Rgb, RgbImage};

use crate::eval::EvalBox;
use crate::export::{SequenceLog, ShardSequence};
use crate::frame::Frame;
use crate::geometry::Box3;
use crate::shards::BoxRow;

use super::bev::{BevOptions, BevView, ColorBy, draw_boxes, draw_points};
use super::camera::draw_camera;
use super::draw::Canvas;
use super::scene::{SceneBox, load_frame_scene};
use super::style::{BACKGROUND, TRUTH_COLOR};
use super::{RenderError, label_text};

/// Height of a tile's caption (px).
const CAPTION_PX: u32 = 40;

/// Grey of an empty panel.
const EMPTY: Rgb<u8> = Rgb([60, 60, 66]);

/// What a tile shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TileOptions {
    /// Side of the camera and bird's-eye panels (px).
    pub size_px: u32,
}

impl Default for TileOptions {
    fn default() -> Self {
        Self { size_px: 240 }
    }
}

/// The camera panel: the box's footprint in its best camera, with a margin, squared and scaled.
fn camera_panel(frame: Option<&Frame>, b: &BoxRow, size: u32) -> Result<Option<RgbImage>, RenderError> {
    let (Some(frame), Some(best)) = (frame, b.best_camera.as_deref()) else {
        return Ok(None);
    };
    let Some(view) = frame.cameras.iter().find(|v| v.name == best) else {
        return Ok(None);
    };
    let Some(rect) = b.cameras.iter().find(|c| c.camera == best).and_then(|c| c.box_2d_px) else {
        return Ok(None);
    };
    let image = view
        .image()
        .map_err(|e| RenderError::Draw(format!("frame {}: {e}", b.frame_index)))?;
    let target = SceneBox {
        bbox: Box3::from_array(b.box_sensor),
        class: b.class.clone(),
        track_id: Some(b.track_id),
        flags: b.flags.clone(),
    };
    let drawn = draw_camera(&image, &view.calibration, std::slice::from_ref(&target), &[])?;
    let (w, h) = drawn.dimensions();
    let side = ((rect[2] - rect[0]).max(rect[3] - rect[1]) * 1.5)
        .max(48.0)
        .min(f64::from(w.min(h)));
    let cx = 0.5 * (rect[0] + rect[2]);
    let cy = 0.5 * (rect[1] + rect[3]);
    let x0 = (cx - 0.5 * side).clamp(0.0, f64::from(w) - side) as u32;
    let y0 = (cy - 0.5 * side).clamp(0.0, f64::from(h) - side) as u32;
    let s = side as u32;
    let crop = crop_imm(&drawn, x0, y0, s, s).to_image();
    Ok(Some(resize(&crop, size, size, FilterType::Triangle)))
}

/// The tile of box `b`: camera crop (when the log has the box's best camera), bird's-eye view
/// around it with the frame's other boxes, and a caption with frame, class, track, score and flags.
pub fn box_tile(
    sequence: &ShardSequence,
    log: Option<&SequenceLog>,
    b: &BoxRow,
    truth: &[EvalBox],
    options: &TileOptions,
) -> Result<RgbImage, RenderError> {
    let size = options.size_px.max(64);
    let frame = log.map(|l| l.frame(b.frame_index)).transpose()?;
    let scene = load_frame_scene(sequence, frame.as_ref(), b.frame_index, truth)?;
    let mut tile = Canvas::filled(size, 2 * size + CAPTION_PX, BACKGROUND);

    match camera_panel(frame.as_ref(), b, size)? {
        Some(panel) => image::imageops::replace(&mut tile.image, &panel, 0, 0),
        None => {
            tile.rect((0.0, 0.0), (f64::from(size) - 1.0, f64::from(size) - 1.0), EMPTY)?;
            tile.text("no camera view", (8.0, 8.0), 13, TRUTH_COLOR)?;
        }
    }

    let target = SceneBox::from_row(sequence, b, scene.frame)?;
    let reach = 0.5 * target.bbox.l.max(target.bbox.w);
    let bev = BevOptions {
        size_px: size,
        range_m: (3.0 * reach).max(6.0),
        center: [target.bbox.x, target.bbox.y],
        color_by: ColorBy::Height,
        labels: false,
    };
    let view = BevView::of(&bev);
    let mut panel = Canvas::filled(size, size, BACKGROUND);
    draw_points(&mut panel, &scene, &view, bev.color_by);
    for t in &scene.truth {
        panel.dashed_outline(&view.footprint(&t.bbox), TRUTH_COLOR, 4, 3)?;
    }
    draw_boxes(&mut panel, &scene.boxes, &view, false, Some(b.track_id))?;
    image::imageops::replace(&mut tile.image, &panel.image, 0, i64::from(size));

    let y = f64::from(2 * size);
    tile.text(
        &format!(
            "frame {} · {}",
            b.frame_index,
            label_text(&b.class, Some(b.track_id), &[])
        ),
        (4.0, y + 3.0),
        12,
        TRUTH_COLOR,
    )?;
    let flags = if b.flags.is_empty() {
        "no flags".to_string()
    } else {
        b.flags.join(", ")
    };
    tile.text(
        &format!("score {:.2} · {flags}", b.score),
        (4.0, y + 21.0),
        12,
        TRUTH_COLOR,
    )?;
    Ok(tile.image)
}

/// The track strip of `track_id`: up to `columns` of its boxes evenly spaced in time, one tile
/// each, under a title line.
pub fn render_track(
    sequence: &ShardSequence,
    log: Option<&SequenceLog>,
    track_id: i64,
    columns: usize,
    options: &TileOptions,
) -> Result<RgbImage, RenderError> {
    let boxes: Vec<&BoxRow> = sequence.boxes.iter().filter(|b| b.track_id == track_id).collect();
    if boxes.is_empty() {
        return Err(RenderError::NoTrack {
            path: sequence.dir.clone(),
            track: track_id,
        });
    }
    let chosen = evenly_spaced(boxes.len(), columns.max(1));
    let tiles = chosen
        .iter()
        .map(|&i| box_tile(sequence, log, boxes[i], &[], options))
        .collect::<Result<Vec<_>, _>>()?;
    let (tw, th) = tiles[0].dimensions();
    const TITLE_PX: u32 = 28;
    let mut strip = Canvas::filled(
        tw * tiles.len() as u32 + 2 * (tiles.len() as u32 - 1),
        th + TITLE_PX,
        BACKGROUND,
    );
    for (k, tile) in tiles.iter().enumerate() {
        image::imageops::replace(
            &mut strip.image,
            tile,
            i64::from((tw + 2) * k as u32),
            i64::from(TITLE_PX),
        );
    }
    let (first, last) = (boxes[0], boxes[boxes.len() - 1]);
    strip.text(
        &format!(
            "{} · {} · frames {}–{} · {} boxes ({} shown)",
            sequence.manifest.sequence,
            label_text(&first.class, Some(track_id), &[]),
            first.frame_index,
            last.frame_index,
            boxes.len(),
            tiles.len()
        ),
        (6.0, 6.0),
        14,
        TRUTH_COLOR,
    )?;
    Ok(strip.image)
}

/// Up to `k` positions of `0..n`, evenly spaced, first and last included.
pub fn evenly_spaced(n: usize, k: usize) -> Vec<usize> {
    if n <= k {
        return (0..n).collect();
    }
    if k == 1 {
        return vec![0];
    }
    let mut out: Vec<usize> = (0..k).map(|i| i * (n - 1) / (k - 1)).collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evenly_spaced_positions() {
        assert_eq!(evenly_spaced(3, 8), vec![0, 1, 2]);
        assert_eq!(evenly_spaced(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(evenly_spaced(100, 1), vec![0]);
        assert_eq!(evenly_spaced(5, 5), vec![0, 1, 2, 3, 4]);
    }
}
