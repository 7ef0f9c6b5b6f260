//! Pictures of a box layer: bird's-eye views, camera overlays and track strips (`boxlayer render`),
//! drawn from a finished sequence folder and, for images and full sweeps, its log.
//!
//! Conventions shared by every picture: one colour per class (`style::class_color`), a red mark
//! on flagged boxes, ground truth in white (dashed in bird's-eye views), labels `class #track`.

mod bev;
mod camera;
mod draw;
mod scene;
mod style;
mod tile;

use std::path::PathBuf;

use image::RgbImage;
use thiserror::Error;

pub use bev::{BevOptions, BevView, ColorBy, draw_bev};
pub use camera::draw_camera;
pub use draw::{Canvas, png_bytes};
pub use scene::{FrameScene, SceneBox, frame_row, load_frame_scene, load_truth, scene_frame};
pub use style::{BACKGROUND, FLAG_COLOR, LABEL_TEXT, TRUTH_COLOR, class_color, track_color, viridis};
pub use tile::{TileOptions, box_tile, evenly_spaced, render_track};

use crate::eval::{EvalBox, EvalError};
use crate::export::{ExportError, SequenceLog, ShardSequence};
use crate::geometry::Box3;

/// Errors drawing a picture; each names the folder or file and the frame.
#[derive(Debug, Error)]
pub enum RenderError {
    /// The sequence folder or its log could not be read.
    #[error(transparent)]
    Read(#[from] ExportError),
    /// The truth file could not be read.
    #[error("read the truth {path}")]
    Truth {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: EvalError,
    },
    /// The frame is not in the sequence.
    #[error("{path}: no frame {frame} (frames {})", match (first, last) { (Some(a), Some(b)) => format!("{a}–{b}"), _ => "none".to_string() })]
    NoFrame {
        /// The sequence folder.
        path: PathBuf,
        /// The frame asked for.
        frame: i64,
        /// Its first frame.
        first: Option<i64>,
        /// Its last frame.
        last: Option<i64>,
    },
    /// The track is not in the sequence.
    #[error("{path}: no track {track}")]
    NoTrack {
        /// The sequence folder.
        path: PathBuf,
        /// The track asked for.
        track: i64,
    },
    /// The frame has no such camera (or no cameras at all).
    #[error("{path}: frame {frame} has no camera `{camera}` (it has: {available})")]
    NoCamera {
        /// The log.
        path: PathBuf,
        /// The frame.
        frame: i64,
        /// The camera asked for.
        camera: String,
        /// The cameras it has.
        available: String,
    },
    /// Drawing failed (most often: no font for the labels).
    #[error("draw: {0}")]
    Draw(String),
    /// The PNG could not be encoded.
    #[error("encode PNG: {0}")]
    Png(String),
    /// The picture could not be written.
    #[error("write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// The label of a box: `class #track`, then its flags.
pub fn label_text(class: &str, track_id: Option<i64>, flags: &[String]) -> String {
    let mut s = match track_id {
        Some(id) => format!("{class} #{id}"),
        None => class.to_string(),
    };
    if !flags.is_empty() {
        s.push_str(" · ");
        s.push_str(&flags.join(", "));
    }
    s
}

/// The bird's-eye view of frame `frame_index`: the log's full sweep when `log` is given, else the
/// points the run kept; `truth` boxes of this frame dashed.
pub fn render_bev(
    sequence: &ShardSequence,
    log: Option<&SequenceLog>,
    frame_index: i64,
    truth: &[EvalBox],
    options: &BevOptions,
) -> Result<RgbImage, RenderError> {
    scene::frame_row(sequence, frame_index)?;
    let frame = log.map(|l| l.frame(frame_index)).transpose()?;
    let scene = load_frame_scene(sequence, frame.as_ref(), frame_index, truth)?;
    draw_bev(&scene, options)
}

/// Frame `frame_index` of camera `camera` (default: the camera most of the frame's boxes are best
/// seen in, else the first) with the layer's boxes and `truth` drawn in.
pub fn render_camera(
    sequence: &ShardSequence,
    log: &SequenceLog,
    frame_index: i64,
    camera: Option<&str>,
    truth: &[EvalBox],
) -> Result<RgbImage, RenderError> {
    scene::frame_row(sequence, frame_index)?;
    let frame = log.frame(frame_index)?;
    let rows: Vec<_> = sequence.boxes.iter().filter(|b| b.frame_index == frame_index).collect();
    let name = match camera {
        Some(c) => c.to_string(),
        None => {
            let mut votes: Vec<(usize, &str)> = frame
                .cameras
                .iter()
                .map(|v| {
                    let n = rows
                        .iter()
                        .filter(|b| b.best_camera.as_deref() == Some(&v.name))
                        .count();
                    (n, v.name.as_str())
                })
                .collect();
            // Most votes first; the earlier camera on ties.
            votes.sort_by_key(|v| std::cmp::Reverse(v.0));
            votes.first().map(|v| v.1.to_string()).unwrap_or_default()
        }
    };
    let Some(view) = frame.cameras.iter().find(|v| v.name == name) else {
        return Err(RenderError::NoCamera {
            path: sequence.dir.clone(),
            frame: frame_index,
            camera: name,
            available: frame
                .cameras
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let image = view
        .image()
        .map_err(|e| RenderError::Draw(format!("frame {frame_index}: {e}")))?;
    let boxes: Vec<SceneBox> = rows
        .iter()
        .map(|b| SceneBox {
            bbox: Box3::from_array(b.box_sensor),
            class: b.class.clone(),
            track_id: Some(b.track_id),
            flags: b.flags.clone(),
        })
        .collect();
    let truth: Vec<SceneBox> = truth
        .iter()
        .filter(|t| t.frame.sequence == sequence.manifest.sequence && t.frame.frame as i64 == frame_index)
        .map(|t| SceneBox {
            bbox: t.bbox,
            class: t.class.as_str().to_string(),
            track_id: None,
            flags: Vec::new(),
        })
        .collect();
    draw_camera(&image, &view.calibration, &boxes, &truth)
}

/// Writes `image` as a PNG file.
pub fn save_png(image: &RgbImage, path: &std::path::Path) -> Result<(), RenderError> {
    let bytes = png_bytes(image)?;
    crate::atomic_file::write_atomic(path, &bytes).map_err(|source| RenderError::Io {
        path: path.to_path_buf(),
        source,
    })
}
