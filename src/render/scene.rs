//! One frame of a finished sequence gathered for drawing: its points and boxes in one frame of
//! reference (gravity-aligned where the run normalized), and the truth boxes when given.

use std::path::Path;

use crate::eval::{EvalBox, InputFormat, load};
use crate::export::{ExportFrame, ShardSequence, frame_points, intensity_01, points_in};
use crate::frame::Frame;
use crate::geometry::Box3;
use crate::shards::{BoxRow, FrameRow};

use super::RenderError;

/// A box to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct SceneBox {
    /// The box, in the scene's frame.
    pub bbox: Box3,
    /// Canonical class.
    pub class: String,
    /// Track id; `None` for truth boxes.
    pub track_id: Option<i64>,
    /// Review flags.
    pub flags: Vec<String>,
}

impl SceneBox {
    /// A layer box in the frame `frame` of `sequence`.
    pub fn from_row(sequence: &ShardSequence, b: &BoxRow, frame: ExportFrame) -> Result<Self, RenderError> {
        Ok(Self {
            bbox: sequence.box_in(b, frame)?,
            class: b.class.clone(),
            track_id: Some(b.track_id),
            flags: b.flags.clone(),
        })
    }
}

/// A frame's points and boxes, ready to draw.
#[derive(Debug, Clone)]
pub struct FrameScene {
    /// The frame index.
    pub frame_index: i64,
    /// The frame of reference of points and boxes.
    pub frame: ExportFrame,
    /// Points (m); empty when the run kept none and there is no log.
    pub points: Vec<[f32; 3]>,
    /// Their intensity, 0…1.
    pub intensity: Vec<f32>,
    /// The layer's boxes.
    pub boxes: Vec<SceneBox>,
    /// Ground-truth boxes, when given.
    pub truth: Vec<SceneBox>,
}

/// The frame row with index `frame_index`.
pub fn frame_row(sequence: &ShardSequence, frame_index: i64) -> Result<&FrameRow, RenderError> {
    sequence
        .frames
        .binary_search_by_key(&frame_index, |r| r.frame_index)
        .map(|i| &sequence.frames[i])
        .map_err(|_| RenderError::NoFrame {
            path: sequence.dir.clone(),
            frame: frame_index,
            first: sequence.frames.first().map(|r| r.frame_index),
            last: sequence.frames.last().map(|r| r.frame_index),
        })
}

/// The frame of reference pictures of `row` use: the normalized frame where the run normalized,
/// else the sensor frame.
pub fn scene_frame(row: &FrameRow) -> ExportFrame {
    if row.normalized_from_sensor.is_some() {
        ExportFrame::Normalized
    } else {
        ExportFrame::Sensor
    }
}

/// Gathers frame `frame_index` of `sequence`: points from `log_frame` when given, else the stored
/// ones; the layer's boxes; the boxes of `truth` that belong to this sequence and frame.
pub fn load_frame_scene(
    sequence: &ShardSequence,
    log_frame: Option<&Frame>,
    frame_index: i64,
    truth: &[EvalBox],
) -> Result<FrameScene, RenderError> {
    let row = frame_row(sequence, frame_index)?;
    let frame = scene_frame(row);
    let from_sensor = sequence.export_from_sensor(row, frame)?;
    let (points, intensity) = match frame_points(sequence, row, log_frame)? {
        Some(p) => {
            let waymo = sequence.is_waymo();
            let intensity = p.intensity.iter().map(|&i| intensity_01(waymo, i)).collect();
            (points_in(&p, &from_sensor), intensity)
        }
        None => (Vec::new(), Vec::new()),
    };
    let boxes = sequence
        .boxes
        .iter()
        .filter(|b| b.frame_index == frame_index)
        .map(|b| SceneBox::from_row(sequence, b, frame))
        .collect::<Result<Vec<_>, _>>()?;
    let truth = truth
        .iter()
        .filter(|t| t.frame.sequence == sequence.manifest.sequence && t.frame.frame as i64 == frame_index)
        .map(|t| SceneBox {
            bbox: t.bbox.transformed(&from_sensor),
            class: t.class.as_str().to_string(),
            track_id: None,
            flags: Vec::new(),
        })
        .collect();
    Ok(FrameScene {
        frame_index,
        frame,
        points,
        intensity,
        boxes,
        truth,
    })
}

/// Ground-truth boxes (sensor frame) from any input `boxlayer eval` reads: simulator truth, JSON
/// lines, a Waymo segment's labels, 3EED, shards.
pub fn load_truth(path: &Path) -> Result<Vec<EvalBox>, RenderError> {
    load(path, InputFormat::guess(path))
        .map(|d| d.boxes)
        .map_err(|source| RenderError::Truth {
            path: path.to_path_buf(),
            source,
        })
}
