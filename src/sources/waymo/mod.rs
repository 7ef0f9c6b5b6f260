//! Reads Waymo Open Dataset perception logs into `Frame`s: v1 segments (TFRecord files of
//! serialized `Frame` protos, [`WaymoV1Source`]) and v2 segments (one Parquet file per component,
//! [`WaymoV2Source`]). Points come out in the vehicle frame of `Frame.pose`, which is boxlayer's
//! sensor frame for Waymo, with range, elongation, laser id, return index and the no-label-zone
//! bit as channels; camera images stay JPEG until a stage asks for pixels. It knows no detector,
//! tracker or shard schema, and writes nothing except through [`tfrecord::TfRecordWriter`],
//! which the simulator uses to produce segments.

pub mod convert;
pub mod proto;
pub mod range_image;
pub mod tfrecord;
pub mod v2;
mod writer;

use std::path::Path;

use prost::Message;
use serde::{Deserialize, Serialize};

use crate::frame::{CameraView, Frame, Platform};
use crate::sources::{OnCorrupt, SequenceMeta, Source, SourceError};

pub use proto::{CameraName, LaserName};
pub use tfrecord::{TfRecordReader, TfRecordWriter};
pub use v2::WaymoV2Source;
pub use writer::SegmentWriter;

/// Which return of a lidar pulse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LidarReturn {
    /// The strongest return (`ri_return1`).
    First,
    /// The second-strongest return (`ri_return2`).
    Second,
}

impl LidarReturn {
    /// 1 or 2, the `return_index` channel value.
    pub fn index(self) -> u8 {
        match self {
            LidarReturn::First => 1,
            LidarReturn::Second => 2,
        }
    }
}

/// What the Waymo readers load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WaymoConfig {
    /// Lidars whose points are read, by `LaserName` (`"TOP"`, `"FRONT"`, `"SIDE_LEFT"`,
    /// `"SIDE_RIGHT"`, `"REAR"`). Default: all five.
    pub lidars: Vec<LaserName>,
    /// Returns read (`"first"`, `"second"`). Default: both, as Waymo's converters do.
    pub returns: Vec<LidarReturn>,
    /// Whether camera views (calibration + JPEG) are attached to frames. Default: true.
    pub cameras: bool,
    /// A damaged record: skip it and report it in `SequenceMeta::skipped`, or fail. Default: skip.
    pub on_corrupt: OnCorrupt,
}

impl Default for WaymoConfig {
    fn default() -> Self {
        Self {
            lidars: LaserName::ALL.to_vec(),
            returns: vec![LidarReturn::First, LidarReturn::Second],
            cameras: true,
            on_corrupt: OnCorrupt::Skip,
        }
    }
}

/// The `source_kind` of v1 sequences.
pub const V1_KIND: &str = "waymo-v1";

/// A v1 segment: one TFRecord file, one `Frame` per record, random access by readable-frame
/// ordinal; each frame's `Frame.index` is its record's position in the file.
#[derive(Debug)]
pub struct WaymoV1Source {
    reader: TfRecordReader,
    meta: SequenceMeta,
    config: WaymoConfig,
    timestamps_micros: Vec<i64>,
}

impl WaymoV1Source {
    /// Opens a segment. Refuses a directory or a file that neither starts with a sound TFRecord
    /// header nor is named `*.tfrecord` with [`SourceError::Incompatible`] before reading on;
    /// then indexes every record (CRCs and the top-level `Frame` fields) in one pass, applying
    /// `config.on_corrupt`. A file without a readable record is [`SourceError::Missing`].
    pub fn open(path: &Path, config: WaymoConfig) -> Result<Self, SourceError> {
        let incompatible = || SourceError::Incompatible {
            path: path.to_path_buf(),
            kind: "Waymo v1 TFRecord",
        };
        if path.is_dir() {
            return Err(incompatible());
        }
        let named_tfrecord = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("tfrecord") || e.eq_ignore_ascii_case("tfrecords"));
        if !named_tfrecord && !tfrecord::looks_like_tfrecord(path)? {
            return Err(incompatible());
        }
        let (reader, summaries) = TfRecordReader::open_with(path, config.on_corrupt, |data| {
            let s = proto::FrameSummary::decode(data).map_err(|e| format!("not a Waymo Frame: {e}"))?;
            let name = s.context.as_ref().and_then(|c| c.name.clone());
            match (name, s.timestamp_micros) {
                (Some(name), Some(ts)) => Ok((name, ts)),
                (None, _) => Err("not a Waymo Frame: field `context.name` missing".to_string()),
                (_, None) => Err("not a Waymo Frame: field `timestamp_micros` missing".to_string()),
            }
        })?;
        let Some((name, _)) = summaries.first().cloned() else {
            return Err(SourceError::Missing {
                path: path.to_path_buf(),
                what: format!(
                    "frames: no readable record ({} damaged records skipped)",
                    reader.skipped().len()
                ),
            });
        };
        // Records from another segment spliced into this file would be merged under the first
        // name and shift every frame after them; refuse them, naming both segments.
        let spans = reader.spans();
        if let Some((k, (other, _))) = summaries.iter().enumerate().find(|(_, (n, _))| *n != name) {
            return Err(SourceError::corrupt(
                path,
                spans[k].location(),
                format!(
                    "field `context.name`: `{other}` differs from the segment's `{name}` (a record from another segment spliced in)"
                ),
            ));
        }
        // A repeated timestamp is a duplicated record: report it, keep both (each has its place).
        let mut by_time: Vec<(i64, usize)> = summaries.iter().enumerate().map(|(k, (_, ts))| (*ts, k)).collect();
        by_time.sort_unstable();
        for pair in by_time.windows(2) {
            if pair[0].0 == pair[1].0 {
                tracing::warn!(
                    "{}: {}: duplicate record: timestamp_micros {} already in {}",
                    path.display(),
                    spans[pair[1].1].location(),
                    pair[0].0,
                    spans[pair[0].1].location()
                );
            }
        }
        if !reader.skipped().is_empty() {
            tracing::warn!(
                "{}: {} damaged records skipped; frames keep their record positions, so these are gaps",
                path.display(),
                reader.skipped().len()
            );
        }
        let meta = SequenceMeta {
            name,
            platform: Platform::Vehicle,
            source_kind: V1_KIND,
            path: path.to_path_buf(),
            skipped: reader.skipped().to_vec(),
        };
        Ok(Self {
            timestamps_micros: summaries.into_iter().map(|(_, ts)| ts).collect(),
            reader,
            meta,
            config,
        })
    }

    /// Every frame's `timestamp_micros`, read while indexing.
    pub fn timestamps_micros(&self) -> &[i64] {
        &self.timestamps_micros
    }

    /// Readable frame `index`'s position in the file (its record ordinal, damaged records
    /// counted), which is the `Frame.index` it gets: a skipped record leaves a gap, never a shift.
    pub fn record_index(&self, index: usize) -> Option<usize> {
        self.reader.spans().get(index).map(|s| s.record)
    }

    /// The record reader underneath (record spans, raw bytes).
    pub fn records(&self) -> &TfRecordReader {
        &self.reader
    }

    /// Frame `index` as the raw decoded proto, for tools that need fields boxlayer does not map.
    pub fn frame_proto(&self, index: usize) -> Result<proto::Frame, SourceError> {
        self.reader
            .with_record(index, |data| proto::Frame::decode(data))?
            .map_err(|e| self.corrupt(index, format!("frame decode failed: {e}")))
    }

    fn corrupt(&self, index: usize, detail: String) -> SourceError {
        let location = self
            .reader
            .spans()
            .get(index)
            .map_or_else(|| format!("frame {index}"), |s| s.location());
        SourceError::corrupt(&self.meta.path, location, detail)
    }
}

/// A boxlayer `Frame` from a decoded Waymo `Frame` proto; `Err` holds the damage detail.
pub fn frame_from_proto(p: proto::Frame, sequence: &str, index: usize, config: &WaymoConfig) -> Result<Frame, String> {
    let context = p.context.unwrap_or_default();
    let timestamp_micros = p.timestamp_micros.ok_or("field `timestamp_micros` missing")?;
    let world_from_vehicle = convert::isometry_from_transform(p.pose.as_ref(), "pose")?;
    let (returns, top_pose) = convert::decode_lasers(&p.lasers, config)?;
    let mut cloud = convert::point_cloud(
        &returns,
        top_pose.as_ref(),
        &context.laser_calibrations,
        &world_from_vehicle,
    )?;
    // A non-finite intensity poisons a detector's pillar: such points are dropped and counted
    // here, where the frame is known (issue 18: NaN on 20 % of points passed silently).
    let finite: Vec<bool> = cloud.intensity().iter().map(|v| v.is_finite()).collect();
    let dropped = finite.iter().filter(|f| !**f).count();
    let mut notes = Vec::new();
    if dropped > 0 {
        notes.push(format!("{dropped} points with a non-finite intensity dropped"));
        tracing::warn!(
            "{sequence}: frame {index}: dropped {dropped} of {} points with a non-finite intensity",
            cloud.len()
        );
        cloud = cloud.select(&finite).map_err(|e| e.to_string())?;
    }
    let cameras = if config.cameras {
        convert::camera_views(p.images, &context.camera_calibrations, timestamp_micros)?
    } else {
        Vec::new()
    };
    // One bad label (a NaN box) costs that label under `skip`, not the frame (issue 18).
    let mut ground_truth = Vec::with_capacity(p.laser_labels.len());
    for label in &p.laser_labels {
        match convert::ground_truth_box(label) {
            Ok(gt) => ground_truth.push(gt),
            Err(detail) => match config.on_corrupt {
                OnCorrupt::Fail => return Err(detail),
                OnCorrupt::Skip => {
                    tracing::warn!("{sequence}: frame {index}: {detail}; label skipped");
                    notes.push(format!("label skipped: {detail}"));
                }
            },
        }
    }
    Ok(Frame {
        sequence: sequence.to_string(),
        index,
        timestamp_micros,
        platform: Platform::Vehicle,
        cloud,
        world_from_sensor: world_from_vehicle,
        imu: Vec::new(),
        cameras,
        ground_truth,
        notes,
    })
}

impl Source for WaymoV1Source {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.reader.len()
    }

    /// Readable frame `index`; its `Frame.index` is the record's position in the file.
    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let p = self.frame_proto(index)?;
        let record = self.record_index(index).unwrap_or(index);
        frame_from_proto(p, &self.meta.name, record, &self.config).map_err(|detail| self.corrupt(index, detail))
    }

    fn cameras(&self, index: usize) -> Result<Vec<CameraView>, SourceError> {
        if !self.config.cameras {
            return Ok(Vec::new());
        }
        let p = self.frame_proto(index)?;
        let timestamp_micros = p
            .timestamp_micros
            .ok_or_else(|| self.corrupt(index, "field `timestamp_micros` missing".into()))?;
        let context = p.context.unwrap_or_default();
        convert::camera_views(p.images, &context.camera_calibrations, timestamp_micros)
            .map_err(|detail| self.corrupt(index, detail))
    }
}
