//! The simulator's ground truth as Parquet (zstd), next to the sensor files both writers produce:
//! `<seq>_boxes_gt.parquet`, one row per labelled object per sweep (boxes in the sensor and world
//! frames, track id, class, LiDAR returns, velocity), and `<seq>_frames_gt.parquet`, one row per
//! sweep (times, sensor pose, the true gravity direction and ground height). Columns follow
//! boxlayer's box conventions (DESIGN.md): `[x, y, z, l, w, h, yaw, pitch, roll]`, metres,
//! radians, microseconds. Files are written under a temporary name and renamed when complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, FixedSizeListArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use thiserror::Error;

use super::SimSweep;
use crate::atomic_file::AtomicFile;
use crate::frame::Platform;
use crate::geometry::Box3;

/// Errors writing the ground-truth Parquet files.
#[derive(Debug, Error)]
pub enum TruthWriteError {
    /// Building or writing the Parquet data failed.
    #[error("{path}: {detail}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// Creating or renaming the file failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

/// One object's JSON-lines truth row (no newline), as `<seq>_boxes_gt.jsonl` holds them:
/// `sequence`, `frame`, `box` (9 values, sensor frame), `class`, `track_id` (decimal text),
/// `num_points` and `platform`, keys sorted; `eval` reads it as its JSON-lines format.
pub fn truth_json_line(object: &super::ObjectTruth, sequence: &str, frame: usize, platform: Platform) -> String {
    let mut row = serde_json::Map::new();
    row.insert("sequence".into(), sequence.into());
    row.insert("frame".into(), (frame as u64).into());
    row.insert("box".into(), box_values(&object.box_in_sensor).to_vec().into());
    row.insert("class".into(), object.class.as_str().into());
    row.insert("track_id".into(), object.track_id.to_string().into());
    row.insert("num_points".into(), u64::from(object.num_lidar_points).into());
    row.insert("platform".into(), platform.as_str().into());
    serde_json::Value::Object(row).to_string()
}

/// Ground-truth rows gathered sweep by sweep, written once at the end.
#[derive(Debug, Clone, Default)]
pub struct TruthTables {
    sequence: String,
    platform: String,
    // Box rows.
    box_frame: Vec<u32>,
    box_time: Vec<i64>,
    track_id: Vec<String>,
    class: Vec<String>,
    label: Vec<String>,
    box_in_sensor: Vec<f64>,
    box_in_world: Vec<f64>,
    num_lidar_points: Vec<u32>,
    velocity_in_world: Vec<f64>,
    // Frame rows.
    frame_index: Vec<u32>,
    timestamp: Vec<i64>,
    reference_time: Vec<i64>,
    world_from_sensor: Vec<f64>,
    gravity_in_sensor: Vec<f64>,
    ground_height: Vec<f64>,
    sensor_height: Vec<f64>,
}

/// The two files [`TruthTables::write`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthParquetPaths {
    /// `<seq>_boxes_gt.parquet`.
    pub boxes: PathBuf,
    /// `<seq>_frames_gt.parquet`.
    pub frames: PathBuf,
}

fn box_values(b: &Box3) -> [f64; 9] {
    [b.x, b.y, b.z, b.l, b.w, b.h, b.yaw, b.pitch, b.roll]
}

impl TruthTables {
    /// Empty tables for `sequence` recorded by `platform`.
    pub fn new(sequence: &str, platform: Platform) -> Self {
        Self {
            sequence: sequence.to_string(),
            platform: platform.as_str().to_string(),
            ..Self::default()
        }
    }

    /// Adds sweep `index`: one frame row and a box row per labelled object.
    pub fn push_sweep(&mut self, index: usize, sweep: &SimSweep) {
        let frame = index as u32;
        for object in &sweep.objects {
            self.box_frame.push(frame);
            self.box_time.push(sweep.reference_time_micros);
            self.track_id.push(object.track_id.to_string());
            self.class.push(object.class.as_str().to_string());
            self.label.push(object.label.as_str().to_string());
            self.box_in_sensor.extend(box_values(&object.box_in_sensor));
            self.box_in_world.extend(box_values(&object.box_in_world));
            self.num_lidar_points.push(object.num_lidar_points);
            self.velocity_in_world.extend(object.velocity_in_world.iter());
        }
        self.frame_index.push(frame);
        self.timestamp.push(sweep.timestamp_micros);
        self.reference_time.push(sweep.reference_time_micros);
        let m = sweep.world_from_sensor.to_homogeneous();
        self.world_from_sensor
            .extend((0..4).flat_map(|r| (0..4).map(move |c| (r, c))).map(|(r, c)| m[(r, c)]));
        self.gravity_in_sensor.extend(sweep.gravity_in_sensor.iter());
        self.ground_height.push(sweep.ground_height_m);
        self.sensor_height.push(sweep.sensor_height_above_ground_m);
    }

    /// Writes `<sequence>_boxes_gt.parquet` and `<sequence>_frames_gt.parquet` into `out_dir`.
    pub fn write(&self, out_dir: &Path) -> Result<TruthParquetPaths, TruthWriteError> {
        let boxes = out_dir.join(format!("{}_boxes_gt.parquet", self.sequence));
        let frames = out_dir.join(format!("{}_frames_gt.parquet", self.sequence));
        let n_boxes = self.box_frame.len();
        let n_frames = self.frame_index.len();
        let strings = |v: &[String]| Arc::new(StringArray::from_iter_values(v)) as ArrayRef;
        let repeated =
            |s: &str, n: usize| Arc::new(StringArray::from_iter_values(std::iter::repeat_n(s, n))) as ArrayRef;
        let parquet_error = |path: &Path| {
            let path = path.to_path_buf();
            move |e: arrow::error::ArrowError| TruthWriteError::Parquet {
                path: path.clone(),
                detail: e.to_string(),
            }
        };
        write_batch(
            &boxes,
            vec![
                ("sequence", repeated(&self.sequence, n_boxes)),
                ("platform", repeated(&self.platform, n_boxes)),
                ("frame_index", Arc::new(UInt32Array::from(self.box_frame.clone()))),
                ("timestamp_micros", Arc::new(Int64Array::from(self.box_time.clone()))),
                ("track_id", strings(&self.track_id)),
                ("class", strings(&self.class)),
                ("label", strings(&self.label)),
                (
                    "box_in_sensor",
                    fixed_list(&self.box_in_sensor, 9).map_err(parquet_error(&boxes))?,
                ),
                (
                    "box_in_world",
                    fixed_list(&self.box_in_world, 9).map_err(parquet_error(&boxes))?,
                ),
                (
                    "num_lidar_points",
                    Arc::new(UInt32Array::from(self.num_lidar_points.clone())),
                ),
                (
                    "velocity_in_world_mps",
                    fixed_list(&self.velocity_in_world, 3).map_err(parquet_error(&boxes))?,
                ),
            ],
        )?;
        write_batch(
            &frames,
            vec![
                ("sequence", repeated(&self.sequence, n_frames)),
                ("platform", repeated(&self.platform, n_frames)),
                ("frame_index", Arc::new(UInt32Array::from(self.frame_index.clone()))),
                ("timestamp_micros", Arc::new(Int64Array::from(self.timestamp.clone()))),
                (
                    "reference_time_micros",
                    Arc::new(Int64Array::from(self.reference_time.clone())),
                ),
                (
                    "world_from_sensor",
                    fixed_list(&self.world_from_sensor, 16).map_err(parquet_error(&frames))?,
                ),
                (
                    "gravity_in_sensor",
                    fixed_list(&self.gravity_in_sensor, 3).map_err(parquet_error(&frames))?,
                ),
                (
                    "ground_height_m",
                    Arc::new(Float64Array::from(self.ground_height.clone())),
                ),
                (
                    "sensor_height_above_ground_m",
                    Arc::new(Float64Array::from(self.sensor_height.clone())),
                ),
            ],
        )?;
        Ok(TruthParquetPaths { boxes, frames })
    }
}

/// `values` as a column of fixed-size lists of `width` float64s.
fn fixed_list(values: &[f64], width: i32) -> Result<ArrayRef, arrow::error::ArrowError> {
    let item = Arc::new(Field::new("item", DataType::Float64, false));
    let array = FixedSizeListArray::try_new(item, width, Arc::new(Float64Array::from(values.to_vec())), None)?;
    Ok(Arc::new(array))
}

/// Writes one record batch of `columns` (no nulls) to `path` via a temporary name.
fn write_batch(path: &Path, columns: Vec<(&str, ArrayRef)>) -> Result<(), TruthWriteError> {
    let fail = |detail: String| TruthWriteError::Parquet {
        path: path.to_path_buf(),
        detail,
    };
    let io = |source| TruthWriteError::Io {
        path: path.to_path_buf(),
        error: source,
    };
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), false))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|(_, a)| a).collect())
        .map_err(|e| fail(e.to_string()))?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let file = AtomicFile::create(path).map_err(io)?;
    let mut writer = ArrowWriter::try_new(file, schema, Some(properties)).map_err(|e| fail(e.to_string()))?;
    writer.write(&batch).map_err(|e| fail(e.to_string()))?;
    let file = writer.into_inner().map_err(|e| fail(e.to_string()))?;
    file.commit().map_err(io)
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, Int64Type, UInt32Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::sim::{SimConfig, Simulator};

    fn read(path: &Path) -> RecordBatch {
        let file = File::open(path).unwrap();
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
        let batch = reader.next().unwrap().unwrap();
        assert!(reader.next().is_none());
        batch
    }

    fn list_row(batch: &RecordBatch, column: &str, row: usize) -> Vec<f64> {
        let list = batch.column_by_name(column).unwrap().as_fixed_size_list();
        list.value(row).as_primitive::<Float64Type>().values().to_vec()
    }

    #[test]
    fn tables_read_back_to_the_sweeps_they_came_from() {
        let config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Platform::Drone, 3).unwrap();
        let sweeps = [sim.sweep(0).unwrap(), sim.sweep(1).unwrap()];
        let mut tables = TruthTables::new("falcon_sim_seed3", Platform::Drone);
        for (i, s) in sweeps.iter().enumerate() {
            tables.push_sweep(i, s);
        }
        let dir = tempfile::tempdir().unwrap();
        let paths = tables.write(dir.path()).unwrap();
        assert!(paths.boxes.ends_with("falcon_sim_seed3_boxes_gt.parquet"));
        assert!(!dir.path().join("falcon_sim_seed3_boxes_gt.parquet.partial").exists());

        let boxes = read(&paths.boxes);
        let objects: Vec<(usize, &crate::sim::ObjectTruth)> = sweeps
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.objects.iter().map(move |o| (i, o)))
            .collect();
        assert!(!objects.is_empty());
        assert_eq!(boxes.num_rows(), objects.len());
        let frame = boxes
            .column_by_name("frame_index")
            .unwrap()
            .as_primitive::<UInt32Type>();
        let points = boxes
            .column_by_name("num_lidar_points")
            .unwrap()
            .as_primitive::<UInt32Type>();
        let track = boxes.column_by_name("track_id").unwrap().as_string::<i32>();
        let class = boxes.column_by_name("class").unwrap().as_string::<i32>();
        for (row, (i, o)) in objects.iter().enumerate() {
            assert_eq!(frame.value(row) as usize, *i);
            assert_eq!(track.value(row), o.track_id.to_string());
            assert_eq!(class.value(row), o.class.as_str());
            assert_eq!(points.value(row), o.num_lidar_points);
            assert_eq!(list_row(&boxes, "box_in_sensor", row), box_values(&o.box_in_sensor));
            assert_eq!(list_row(&boxes, "box_in_world", row), box_values(&o.box_in_world));
        }

        let frames = read(&paths.frames);
        assert_eq!(frames.num_rows(), 2);
        let times = frames
            .column_by_name("timestamp_micros")
            .unwrap()
            .as_primitive::<Int64Type>();
        for (row, s) in sweeps.iter().enumerate() {
            assert_eq!(times.value(row), s.timestamp_micros);
            let gravity = list_row(&frames, "gravity_in_sensor", row);
            assert_eq!(gravity, s.gravity_in_sensor.iter().copied().collect::<Vec<_>>());
            assert!((gravity.iter().map(|g| g * g).sum::<f64>() - 1.0).abs() < 1e-9);
            // The pose column is the row-major 4×4: its translation is the sensor position.
            let pose = list_row(&frames, "world_from_sensor", row);
            let t = s.world_from_sensor.translation.vector;
            assert_eq!([pose[3], pose[7], pose[11], pose[15]], [t.x, t.y, t.z, 1.0]);
            let ground = frames
                .column_by_name("ground_height_m")
                .unwrap()
                .as_primitive::<Float64Type>();
            assert_eq!(ground.value(row), s.ground_height_m);
            assert!(ground.null_count() == 0);
        }
    }
}
