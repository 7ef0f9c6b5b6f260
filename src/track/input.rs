//! The tracker's input (one `TrackFrame` per sweep: pose, time, boxes in the sensor frame,
//! points on demand through [`SweepPoints`]) and its checked, world-frame form used by every pass.

use std::sync::Arc;

use nalgebra::Isometry3;

use super::TrackError;
use crate::cloud::PointCloud;
use crate::frame::ObjectClass;
use crate::geometry::Box3;

/// One box to track, in the sensor frame of its sweep (a fused box, a detection, a label).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackInputBox {
    /// The box in the sensor frame (9 values; pitch and roll are carried through the pose).
    pub box3: Box3,
    /// Canonical class; each class is tracked on its own.
    pub class: ObjectClass,
    /// Confidence (unitless, 0…1).
    pub score: f64,
    /// Detectors that voted for it (1 for a single detector's box).
    pub votes: u32,
}

/// One sweep's input.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackFrame {
    /// Time of the sweep's boxes and pose (µs); strictly increasing along the sequence.
    pub timestamp_micros: i64,
    /// The sensor's pose in the world frame at that time.
    pub world_from_sensor: Isometry3<f64>,
    /// The boxes, in the sensor frame.
    pub boxes: Vec<TrackInputBox>,
}

/// The sweeps' points on demand, each in its sweep's sensor frame: evidence for filling gaps,
/// extending tracks and propagating static objects. The tracker asks for a few frames at a time
/// and keeps only a handful, so a provider backed by the source keeps memory bounded.
pub trait SweepPoints: Sync {
    /// Frame `frame`'s points, or `None` when that frame has none to give.
    fn points_in_sensor(&self, frame: usize) -> Option<Arc<PointCloud>>;

    /// Frame `frame`'s points inside `box_in_sensor`, for a provider that counts them from an
    /// index of its own without handing the sweep over; the default has none
    /// ([`IndexedCount::NotIndexed`]: the tracker counts on [`points_in_sensor`](Self::points_in_sensor)).
    fn count_in_box(&self, _frame: usize, _box_in_sensor: &Box3) -> IndexedCount {
        IndexedCount::NotIndexed
    }

    /// Frame `frame`'s points (sensor frame) that lie within `radius_m` of `centre` across x and
    /// y, and maybe others near them; `None` when the frame has no points to give. The default
    /// filters [`points_in_sensor`](Self::points_in_sensor); an indexed provider reads less.
    fn points_near(&self, frame: usize, centre: [f64; 2], radius_m: f64) -> Option<Vec<[f32; 3]>> {
        let cloud = self.points_in_sensor(frame)?;
        let r2 = radius_m * radius_m;
        let near = (0..cloud.len())
            .filter(|&i| {
                let (dx, dy) = (f64::from(cloud.x()[i]) - centre[0], f64::from(cloud.y()[i]) - centre[1]);
                dx * dx + dy * dy <= r2
            })
            .map(|i| [cloud.x()[i], cloud.y()[i], cloud.z()[i]])
            .collect();
        Some(near)
    }
}

/// What [`SweepPoints::count_in_box`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexedCount {
    /// The provider keeps no index: count on its points.
    NotIndexed,
    /// The frame has no points to give.
    NoPoints,
    /// This many points are inside (boundary included).
    Inside(usize),
}

/// No points: the tracker decides without points evidence.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPoints;

impl SweepPoints for NoPoints {
    fn points_in_sensor(&self, _frame: usize) -> Option<Arc<PointCloud>> {
        None
    }
}

/// Every frame's points held in memory (studies and tests on short sequences).
impl SweepPoints for [Option<Arc<PointCloud>>] {
    fn points_in_sensor(&self, frame: usize) -> Option<Arc<PointCloud>> {
        self.get(frame).cloned().flatten()
    }
}

impl SweepPoints for Vec<Option<Arc<PointCloud>>> {
    fn points_in_sensor(&self, frame: usize) -> Option<Arc<PointCloud>> {
        self.as_slice().points_in_sensor(frame)
    }
}

/// One input box in the world frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WorldDetection {
    /// The box in the world frame.
    pub box_in_world: Box3,
    /// Its score.
    pub score: f64,
    /// Its index in the frame's `boxes`.
    pub index: usize,
}

/// The checked input, boxes grouped by class and moved to the world frame.
pub(crate) struct PreparedSequence {
    /// Frame times (µs).
    pub times_micros: Vec<i64>,
    /// `[frame][class index]` → that class's boxes in the world frame.
    pub detections: Vec<[Vec<WorldDetection>; 4]>,
}

/// Index of a class in `ObjectClass::ALL`.
pub(crate) fn class_index(class: ObjectClass) -> usize {
    match class {
        ObjectClass::Vehicle => 0,
        ObjectClass::Pedestrian => 1,
        ObjectClass::Cyclist => 2,
        ObjectClass::Unknown => 3,
    }
}

/// Checks the input (finite boxes and scores, non-negative sizes, strictly increasing times)
/// and moves every box to the world frame.
pub(crate) fn prepare(frames: &[TrackFrame]) -> Result<PreparedSequence, TrackError> {
    let mut times_micros = Vec::with_capacity(frames.len());
    let mut detections = Vec::with_capacity(frames.len());
    for (f, frame) in frames.iter().enumerate() {
        if let Some(&previous) = times_micros.last()
            && frame.timestamp_micros <= previous
        {
            return Err(TrackError::Input {
                frame: f,
                field: "timestamp_micros",
                reason: format!(
                    "{} is not after the previous frame's {previous}",
                    frame.timestamp_micros
                ),
            });
        }
        let pose_ok = frame.world_from_sensor.translation.vector.iter().all(|v| v.is_finite())
            && frame.world_from_sensor.rotation.coords.iter().all(|v| v.is_finite());
        if !pose_ok {
            return Err(TrackError::Input {
                frame: f,
                field: "world_from_sensor",
                reason: "not finite".into(),
            });
        }
        times_micros.push(frame.timestamp_micros);
        let mut by_class: [Vec<WorldDetection>; 4] = Default::default();
        for (index, b) in frame.boxes.iter().enumerate() {
            if !b.box3.is_valid() || !b.score.is_finite() {
                return Err(TrackError::Input {
                    frame: f,
                    field: "boxes",
                    reason: format!("box {index}: non-finite value or negative size"),
                });
            }
            by_class[class_index(b.class)].push(WorldDetection {
                box_in_world: b.box3.transformed(&frame.world_from_sensor),
                score: b.score,
                index,
            });
        }
        detections.push(by_class);
    }
    Ok(PreparedSequence {
        times_micros,
        detections,
    })
}
