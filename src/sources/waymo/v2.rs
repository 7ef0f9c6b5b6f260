//! Waymo v2: one Parquet file per segment per component,
//! `<split folder>/<component tag>/<context name>.parquet`, columns `key.*` and
//! `[<Component>].<dotted.path>` (reference `waymo-format.md` §3). Range images are stored
//! decompressed. Column types vary between releases (float or double transforms, int8 or string
//! enums, list or fixed-size list), so every read casts to the type boxlayer needs.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float32Type, Float64Type, Int64Type};
use nalgebra::Isometry3;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};

use super::convert::{self, DecodedReturn};
use super::proto::{self, CameraName, LaserName, label_type_from_name};
use super::range_image::RangeImageData;
use super::{LidarReturn, WaymoConfig};
use crate::frame::{Frame, GroundTruthBox, Platform};
use crate::sources::{SequenceMeta, Source, SourceError};

/// The `source_kind` of v2 sequences.
pub const V2_KIND: &str = "waymo-v2";

/// Component folders the v2 reader uses.
pub const COMPONENTS: [&str; 7] = [
    "vehicle_pose",
    "lidar_calibration",
    "lidar",
    "lidar_pose",
    "lidar_box",
    "camera_calibration",
    "camera_image",
];

const KEY_TS: &str = "key.frame_timestamp_micros";
const KEY_LASER: &str = "key.laser_name";
const KEY_CAMERA: &str = "key.camera_name";

/// One component table read from Parquet: its batches, concatenated in file order.
#[derive(Debug, Clone)]
pub struct ComponentTable {
    path: PathBuf,
    batches: Vec<RecordBatch>,
}

impl ComponentTable {
    /// Reads the named columns (all when `columns` is empty) of the rows `rows` (all when
    /// `None`, else sorted row numbers) of the Parquet file at `path`. Absent columns are
    /// skipped here and reported when asked for.
    pub fn read(path: &Path, columns: &[&str], rows: Option<&[usize]>) -> Result<Self, SourceError> {
        let file = File::open(path).map_err(|e| SourceError::io(path, e))?;
        let parquet_err = |e: parquet::errors::ParquetError| SourceError::corrupt(path, "parquet", e.to_string());
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
        if !columns.is_empty() {
            let roots: Vec<usize> = builder
                .schema()
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| columns.contains(&f.name().as_str()))
                .map(|(i, _)| i)
                .collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder = builder.with_projection(mask);
        }
        if let Some(rows) = rows {
            let total = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
            let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
            for &r in rows {
                match ranges.last_mut() {
                    Some(last) if last.end == r => last.end = r + 1,
                    _ => ranges.push(r..r + 1),
                }
            }
            builder = builder.with_row_selection(RowSelection::from_consecutive_ranges(ranges.into_iter(), total));
        }
        let reader = builder.build().map_err(parquet_err)?;
        let batches = reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SourceError::corrupt(path, "parquet", e.to_string()))?;
        Ok(Self {
            path: path.to_path_buf(),
            batches,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of rows read.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Whether the table has a column of this name.
    pub fn has_column(&self, name: &str) -> bool {
        self.batches.first().is_some_and(|b| b.column_by_name(name).is_some())
    }

    fn err(&self, detail: String) -> SourceError {
        SourceError::corrupt(&self.path, "parquet", detail)
    }

    /// Each batch's column `name` cast to `to`.
    fn cast_column(&self, name: &str, to: &DataType) -> Result<Vec<ArrayRef>, SourceError> {
        self.batches
            .iter()
            .map(|b| {
                let col = b
                    .column_by_name(name)
                    .ok_or_else(|| self.err(format!("column `{name}` missing")))?;
                cast(col, to).map_err(|e| self.err(format!("column `{name}`: {e}")))
            })
            .collect()
    }

    /// Column `name` as f64 (float, double or integer), nulls as `None`.
    pub fn f64_column(&self, name: &str) -> Result<Vec<Option<f64>>, SourceError> {
        Ok(self
            .cast_column(name, &DataType::Float64)?
            .iter()
            .flat_map(|a| a.as_primitive::<Float64Type>().iter().collect::<Vec<_>>())
            .collect())
    }

    /// Column `name` as i64 (any integer type), nulls as `None`.
    pub fn i64_column(&self, name: &str) -> Result<Vec<Option<i64>>, SourceError> {
        Ok(self
            .cast_column(name, &DataType::Int64)?
            .iter()
            .flat_map(|a| a.as_primitive::<Int64Type>().iter().collect::<Vec<_>>())
            .collect())
    }

    /// Column `name` as strings (utf8, large utf8 or dictionary), nulls as `None`.
    pub fn string_column(&self, name: &str) -> Result<Vec<Option<String>>, SourceError> {
        Ok(self
            .cast_column(name, &DataType::Utf8)?
            .iter()
            .flat_map(|a| {
                a.as_string::<i32>()
                    .iter()
                    .map(|s| s.map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .collect())
    }

    /// An enum column stored as integers or as names; `from_name` maps names to values.
    pub fn enum_column(
        &self,
        name: &str,
        from_name: impl Fn(&str) -> Option<i32>,
    ) -> Result<Vec<Option<i32>>, SourceError> {
        let first = self.batches.first().and_then(|b| b.column_by_name(name));
        let is_text = first.is_some_and(|c| {
            matches!(
                c.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _)
            )
        });
        if is_text {
            self.string_column(name)?
                .into_iter()
                .map(|s| match s {
                    None => Ok(None),
                    Some(s) => from_name(&s)
                        .map(Some)
                        .ok_or_else(|| self.err(format!("column `{name}`: unknown enum name `{s}`"))),
                })
                .collect()
        } else {
            self.i64_column(name)?
                .into_iter()
                .map(|v| match v {
                    None => Ok(None),
                    Some(v) => i32::try_from(v)
                        .map(Some)
                        .map_err(|_| self.err(format!("column `{name}`: enum value {v} out of range"))),
                })
                .collect()
        }
    }

    /// A list column (list, large list or fixed-size list of any numeric type) as f64 lists.
    pub fn f64_list_column(&self, name: &str) -> Result<Vec<Option<Vec<f64>>>, SourceError> {
        self.list_column(name, |values| {
            let v = cast(values, &DataType::Float64).map_err(|e| e.to_string())?;
            Ok(v.as_primitive::<Float64Type>()
                .iter()
                .map(|x| x.unwrap_or(f64::NAN))
                .collect())
        })
    }

    /// A list column as f32 lists (range images are float; double is narrowed).
    pub fn f32_list_column(&self, name: &str) -> Result<Vec<Option<Vec<f32>>>, SourceError> {
        self.list_column(name, |values| {
            let v = cast(values, &DataType::Float32).map_err(|e| e.to_string())?;
            Ok(v.as_primitive::<Float32Type>()
                .iter()
                .map(|x| x.unwrap_or(f32::NAN))
                .collect())
        })
    }

    /// A list column as i64 lists (shapes).
    pub fn i64_list_column(&self, name: &str) -> Result<Vec<Option<Vec<i64>>>, SourceError> {
        self.list_column(name, |values| {
            let v = cast(values, &DataType::Int64).map_err(|e| e.to_string())?;
            Ok(v.as_primitive::<Int64Type>().iter().map(|x| x.unwrap_or(-1)).collect())
        })
    }

    fn list_column<T>(
        &self,
        name: &str,
        convert: impl Fn(&ArrayRef) -> Result<Vec<T>, String>,
    ) -> Result<Vec<Option<Vec<T>>>, SourceError> {
        let mut out = Vec::new();
        for b in &self.batches {
            let col = b
                .column_by_name(name)
                .ok_or_else(|| self.err(format!("column `{name}` missing")))?;
            for row in 0..col.len() {
                if col.is_null(row) {
                    out.push(None);
                    continue;
                }
                let values: ArrayRef = match col.data_type() {
                    DataType::List(_) => col.as_list::<i32>().value(row),
                    DataType::LargeList(_) => col.as_list::<i64>().value(row),
                    DataType::FixedSizeList(_, _) => col.as_fixed_size_list().value(row),
                    other => return Err(self.err(format!("column `{name}`: expected a list, found {other}"))),
                };
                out.push(Some(
                    convert(&values).map_err(|e| self.err(format!("column `{name}`: {e}")))?,
                ));
            }
        }
        Ok(out)
    }

    /// A binary column (binary or large binary), nulls as `None`.
    pub fn binary_column(&self, name: &str) -> Result<Vec<Option<Vec<u8>>>, SourceError> {
        Ok(self
            .cast_column(name, &DataType::Binary)?
            .iter()
            .flat_map(|a| {
                a.as_binary::<i32>()
                    .iter()
                    .map(|s| s.map(<[u8]>::to_vec))
                    .collect::<Vec<_>>()
            })
            .collect())
    }
}

/// Laser names as v2 may store them (`TOP`), for [`ComponentTable::enum_column`].
pub fn laser_from_name(s: &str) -> Option<i32> {
    LaserName::ALL.into_iter().find(|l| l.as_str() == s).map(|l| l as i32)
}

/// Camera names as v2 may store them (`FRONT`), for [`ComponentTable::enum_column`].
pub fn camera_from_name(s: &str) -> Option<i32> {
    CameraName::from_name(s).map(|c| c as i32)
}

/// Context names present in a v2 split folder (from `vehicle_pose/*.parquet`), sorted.
pub fn contexts(folder: &Path) -> Result<Vec<String>, SourceError> {
    let dir = folder.join("vehicle_pose");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| SourceError::io(&dir, e))? {
        let path = entry.map_err(|e| SourceError::io(&dir, e))?.path();
        if path.extension().is_some_and(|e| e == "parquet")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Whether `folder` looks like a v2 split folder (has a `vehicle_pose` component folder).
pub fn is_v2_folder(folder: &Path) -> bool {
    folder.join("vehicle_pose").is_dir()
}

/// A v2 segment: frames are the `vehicle_pose` timestamps, sorted; calibrations, poses and boxes
/// are read at open, range images and camera images per frame by row selection.
#[derive(Debug)]
pub struct WaymoV2Source {
    folder: PathBuf,
    meta: SequenceMeta,
    config: WaymoConfig,
    timestamps_micros: Vec<i64>,
    world_from_vehicle: Vec<Isometry3<f64>>,
    laser_calibrations: Vec<proto::LaserCalibration>,
    camera_calibrations: Vec<proto::CameraCalibration>,
    boxes: HashMap<i64, Vec<GroundTruthBox>>,
    lidar_rows: HashMap<i64, Vec<usize>>,
    lidar_pose_rows: HashMap<i64, Vec<usize>>,
    camera_rows: HashMap<i64, Vec<usize>>,
}

impl WaymoV2Source {
    /// Opens the only segment of a v2 split folder; more than one is [`SourceError::Missing`]
    /// (name one with [`open_segment`](Self::open_segment)).
    pub fn open(folder: &Path, config: WaymoConfig) -> Result<Self, SourceError> {
        if !is_v2_folder(folder) {
            return Err(incompatible(folder));
        }
        let names = contexts(folder)?;
        match &names[..] {
            [one] => Self::open_segment(folder, one, config),
            _ => Err(SourceError::Missing {
                path: folder.to_path_buf(),
                what: format!("a single segment: the folder holds {} (name one)", names.len()),
            }),
        }
    }

    /// Opens segment `context` of a v2 split folder. A folder without `vehicle_pose/` is
    /// [`SourceError::Incompatible`]; `vehicle_pose` is required, `lidar_calibration` when
    /// `lidar` is present, every other component is optional.
    pub fn open_segment(folder: &Path, context: &str, config: WaymoConfig) -> Result<Self, SourceError> {
        if !is_v2_folder(folder) {
            return Err(incompatible(folder));
        }
        let file = |tag: &str| folder.join(tag).join(format!("{context}.parquet"));
        let present = |tag: &str| file(tag).is_file();

        let poses = ComponentTable::read(&file("vehicle_pose"), &[], None)?;
        let pose_ts = poses.i64_column(KEY_TS)?;
        let pose_values = poses.f64_list_column("[VehiclePoseComponent].world_from_vehicle.transform")?;
        let mut by_ts = BTreeMap::new();
        for (row, (ts, values)) in pose_ts.into_iter().zip(pose_values).enumerate() {
            let (Some(ts), Some(values)) = (ts, values) else {
                return Err(SourceError::corrupt(
                    poses.path(),
                    format!("row {row}"),
                    "null pose or timestamp",
                ));
            };
            let pose = convert::isometry_from_values(&values, "world_from_vehicle.transform")
                .map_err(|e| SourceError::corrupt(poses.path(), format!("row {row}"), e))?;
            by_ts.insert(ts, pose);
        }
        let (timestamps_micros, world_from_vehicle): (Vec<i64>, Vec<Isometry3<f64>>) = by_ts.into_iter().unzip();

        let laser_calibrations = if present("lidar_calibration") {
            read_laser_calibrations(&file("lidar_calibration"))?
        } else if present("lidar") {
            return Err(SourceError::Missing {
                path: file("lidar_calibration"),
                what: "component lidar_calibration (needed for lidar)".to_string(),
            });
        } else {
            Vec::new()
        };
        let camera_calibrations = if present("camera_calibration") {
            read_camera_calibrations(&file("camera_calibration"))?
        } else {
            Vec::new()
        };
        let boxes = if present("lidar_box") {
            read_boxes(&file("lidar_box"))?
        } else {
            HashMap::new()
        };
        let rows_of = |tag: &str| -> Result<HashMap<i64, Vec<usize>>, SourceError> {
            if !present(tag) {
                return Ok(HashMap::new());
            }
            let t = ComponentTable::read(&file(tag), &[KEY_TS], None)?;
            let mut rows: HashMap<i64, Vec<usize>> = HashMap::new();
            for (row, ts) in t.i64_column(KEY_TS)?.into_iter().enumerate() {
                if let Some(ts) = ts {
                    rows.entry(ts).or_default().push(row);
                }
            }
            Ok(rows)
        };
        let meta = SequenceMeta {
            name: context.to_string(),
            platform: Platform::Vehicle,
            source_kind: V2_KIND,
            path: folder.to_path_buf(),
            skipped: Vec::new(),
        };
        Ok(Self {
            folder: folder.to_path_buf(),
            meta,
            timestamps_micros,
            world_from_vehicle,
            laser_calibrations,
            camera_calibrations,
            boxes,
            lidar_rows: rows_of("lidar")?,
            lidar_pose_rows: rows_of("lidar_pose")?,
            camera_rows: if config.cameras {
                rows_of("camera_image")?
            } else {
                HashMap::new()
            },
            config,
        })
    }

    /// Every frame's timestamp (µs), sorted.
    pub fn timestamps_micros(&self) -> &[i64] {
        &self.timestamps_micros
    }

    /// Lidar calibrations read from `lidar_calibration`, as protos.
    pub fn laser_calibrations(&self) -> &[proto::LaserCalibration] {
        &self.laser_calibrations
    }

    /// Camera calibrations read from `camera_calibration`, as protos.
    pub fn camera_calibrations(&self) -> &[proto::CameraCalibration] {
        &self.camera_calibrations
    }

    fn component(&self, tag: &str) -> PathBuf {
        self.folder.join(tag).join(format!("{}.parquet", self.meta.name))
    }

    fn read_returns(&self, ts: i64) -> Result<(Vec<DecodedReturn>, Option<RangeImageData>), SourceError> {
        let Some(rows) = self.lidar_rows.get(&ts) else {
            return Ok((Vec::new(), None));
        };
        let path = self.component("lidar");
        let mut columns = vec![KEY_LASER];
        let names: Vec<(LidarReturn, String, String)> = self
            .config
            .returns
            .iter()
            .map(|r| {
                let base = format!("[LiDARComponent].range_image_return{}", r.index());
                (*r, format!("{base}.values"), format!("{base}.shape"))
            })
            .collect();
        for (_, v, s) in &names {
            columns.push(v);
            columns.push(s);
        }
        let t = ComponentTable::read(&path, &columns, Some(rows))?;
        let lasers = t.enum_column(KEY_LASER, laser_from_name)?;
        let mut returns = Vec::new();
        for (which, values_col, shape_col) in &names {
            if !t.has_column(values_col) {
                continue;
            }
            let values = t.f32_list_column(values_col)?;
            let shapes = t.i64_list_column(shape_col)?;
            for ((laser, values), shape) in lasers.iter().zip(values).zip(shapes) {
                let Some(laser) = laser.and_then(LaserName::from_i32) else {
                    continue;
                };
                if !self.config.lidars.contains(&laser) {
                    continue;
                }
                let (Some(values), Some(shape)) = (values, shape) else {
                    continue;
                };
                if values.is_empty() {
                    continue;
                }
                let image = image_from_values(values, &shape, 4).map_err(|e| {
                    SourceError::corrupt(
                        &path,
                        format!("frame {ts} lidar {}", laser.as_str()),
                        format!("return {}: {e}", which.index()),
                    )
                })?;
                returns.push(DecodedReturn {
                    laser,
                    return_index: which.index(),
                    image,
                });
            }
        }
        returns.sort_by_key(|r| (r.laser, r.return_index));
        let top_pose = match self.lidar_pose_rows.get(&ts) {
            Some(rows) if self.config.lidars.contains(&LaserName::Top) => {
                let path = self.component("lidar_pose");
                let values_col = "[LiDARPoseComponent].range_image_return1.values";
                let shape_col = "[LiDARPoseComponent].range_image_return1.shape";
                let t = ComponentTable::read(&path, &[KEY_LASER, values_col, shape_col], Some(rows))?;
                let lasers = t.enum_column(KEY_LASER, laser_from_name)?;
                let values = t.f32_list_column(values_col)?;
                let shapes = t.i64_list_column(shape_col)?;
                let mut pose = None;
                for ((laser, values), shape) in lasers.into_iter().zip(values).zip(shapes) {
                    if laser == Some(LaserName::Top as i32)
                        && let (Some(values), Some(shape)) = (values, shape)
                    {
                        pose = Some(
                            image_from_values(values, &shape, 6)
                                .map_err(|e| SourceError::corrupt(&path, format!("frame {ts} lidar TOP pose"), e))?,
                        );
                    }
                }
                pose
            }
            _ => None,
        };
        Ok((returns, top_pose))
    }

    fn read_cameras(&self, ts: i64) -> Result<Vec<proto::CameraImage>, SourceError> {
        let Some(rows) = self.camera_rows.get(&ts) else {
            return Ok(Vec::new());
        };
        let path = self.component("camera_image");
        let image_col = "[CameraImageComponent].image";
        let pose_ts_col = "[CameraImageComponent].pose_timestamp";
        let t = ComponentTable::read(&path, &[KEY_CAMERA, image_col, pose_ts_col], Some(rows))?;
        let names = t.enum_column(KEY_CAMERA, camera_from_name)?;
        let images = t.binary_column(image_col)?;
        let pose_ts = if t.has_column(pose_ts_col) {
            t.f64_column(pose_ts_col)?
        } else {
            vec![None; names.len()]
        };
        let mut out: Vec<proto::CameraImage> = names
            .into_iter()
            .zip(images)
            .zip(pose_ts)
            .map(|((name, image), pose_timestamp)| proto::CameraImage {
                name,
                image,
                pose_timestamp,
                ..Default::default()
            })
            .collect();
        out.sort_by_key(|c| c.name);
        Ok(out)
    }
}

fn incompatible(folder: &Path) -> SourceError {
    SourceError::Incompatible {
        path: folder.to_path_buf(),
        kind: "Waymo v2 Parquet folder",
    }
}

/// A decompressed v2 range image from its flat values and `[H, W, C]` shape.
fn image_from_values(values: Vec<f32>, shape: &[i64], channels: usize) -> Result<RangeImageData, String> {
    let dims: Vec<i32> = shape.iter().map(|d| i32::try_from(*d).unwrap_or(-1)).collect();
    RangeImageData::from_matrix(
        proto::MatrixFloat {
            data: values,
            shape: Some(proto::MatrixShape { dims }),
        },
        channels,
    )
}

fn read_laser_calibrations(path: &Path) -> Result<Vec<proto::LaserCalibration>, SourceError> {
    let t = ComponentTable::read(path, &[], None)?;
    let names = t.enum_column(KEY_LASER, laser_from_name)?;
    let extrinsic = t.f64_list_column("[LiDARCalibrationComponent].extrinsic.transform")?;
    let min = t.f64_column("[LiDARCalibrationComponent].beam_inclination.min")?;
    let max = t.f64_column("[LiDARCalibrationComponent].beam_inclination.max")?;
    let values_col = "[LiDARCalibrationComponent].beam_inclination.values";
    let values = if t.has_column(values_col) {
        t.f64_list_column(values_col)?
    } else {
        vec![None; names.len()]
    };
    Ok((0..names.len())
        .map(|i| proto::LaserCalibration {
            name: names[i],
            beam_inclinations: values[i].clone().unwrap_or_default(),
            beam_inclination_min: min[i],
            beam_inclination_max: max[i],
            extrinsic: extrinsic[i].clone().map(|transform| proto::Transform { transform }),
        })
        .collect())
}

fn read_camera_calibrations(path: &Path) -> Result<Vec<proto::CameraCalibration>, SourceError> {
    let t = ComponentTable::read(path, &[], None)?;
    let names = t.enum_column(KEY_CAMERA, camera_from_name)?;
    let p = "[CameraCalibrationComponent]";
    let intrinsic_cols: Vec<Vec<Option<f64>>> = ["f_u", "f_v", "c_u", "c_v", "k1", "k2", "p1", "p2", "k3"]
        .iter()
        .map(|k| t.f64_column(&format!("{p}.intrinsic.{k}")))
        .collect::<Result<_, _>>()?;
    let extrinsic = t.f64_list_column(&format!("{p}.extrinsic.transform"))?;
    let width = t.i64_column(&format!("{p}.width"))?;
    let height = t.i64_column(&format!("{p}.height"))?;
    let shutter_col = format!("{p}.rolling_shutter_direction");
    let shutter = if t.has_column(&shutter_col) {
        t.enum_column(&shutter_col, |_| None)?
    } else {
        vec![None; names.len()]
    };
    Ok((0..names.len())
        .map(|i| proto::CameraCalibration {
            name: names[i],
            intrinsic: intrinsic_cols.iter().map(|c| c[i].unwrap_or(0.0)).collect(),
            extrinsic: extrinsic[i].clone().map(|transform| proto::Transform { transform }),
            width: width[i].and_then(|v| i32::try_from(v).ok()),
            height: height[i].and_then(|v| i32::try_from(v).ok()),
            rolling_shutter_direction: shutter[i],
        })
        .collect())
}

fn read_boxes(path: &Path) -> Result<HashMap<i64, Vec<GroundTruthBox>>, SourceError> {
    let t = ComponentTable::read(path, &[], None)?;
    let p = "[LiDARBoxComponent]";
    let col = |k: &str| t.f64_column(&format!("{p}.{k}"));
    let optional = |k: &str| -> Result<Vec<Option<f64>>, SourceError> {
        let name = format!("{p}.{k}");
        if t.has_column(&name) {
            t.f64_column(&name)
        } else {
            Ok(vec![None; t.num_rows()])
        }
    };
    let ts = t.i64_column(KEY_TS)?;
    let ids = t.string_column("key.laser_object_id")?;
    let (cx, cy, cz) = (col("box.center.x")?, col("box.center.y")?, col("box.center.z")?);
    let (sx, sy, sz) = (col("box.size.x")?, col("box.size.y")?, col("box.size.z")?);
    let heading = col("box.heading")?;
    let types = t.enum_column(&format!("{p}.type"), label_type_from_name)?;
    let (vx, vy, vz) = (optional("speed.x")?, optional("speed.y")?, optional("speed.z")?);
    let points_col = format!("{p}.num_lidar_points_in_box");
    let points = if t.has_column(&points_col) {
        t.i64_column(&points_col)?
    } else {
        vec![None; t.num_rows()]
    };
    let mut out: HashMap<i64, Vec<GroundTruthBox>> = HashMap::new();
    for row in 0..t.num_rows() {
        let Some(frame_ts) = ts[row] else { continue };
        // v2 sizes are (x = length, y = width, z = height); rebuild the v1 label and share its mapping.
        let label = proto::Label {
            bbox: Some(proto::LabelBox {
                center_x: cx[row],
                center_y: cy[row],
                center_z: cz[row],
                width: sy[row],
                length: sx[row],
                height: sz[row],
                heading: heading[row],
            }),
            metadata: Some(proto::LabelMetadata {
                speed_x: vx[row],
                speed_y: vy[row],
                speed_z: vz[row],
                ..Default::default()
            }),
            r#type: types[row],
            id: ids[row].clone(),
            num_lidar_points_in_box: points[row].and_then(|n| i32::try_from(n).ok()),
            ..Default::default()
        };
        let gt = convert::ground_truth_box(&label).map_err(|e| SourceError::corrupt(path, format!("row {row}"), e))?;
        out.entry(frame_ts).or_default().push(gt);
    }
    for boxes in out.values_mut() {
        boxes.sort_by(|a, b| a.track_id.cmp(&b.track_id));
    }
    Ok(out)
}

impl Source for WaymoV2Source {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.timestamps_micros.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let (Some(&ts), Some(pose)) = (self.timestamps_micros.get(index), self.world_from_vehicle.get(index)) else {
            return Err(SourceError::FrameOutOfRange {
                path: self.folder.clone(),
                index,
                len: self.len(),
            });
        };
        let location = format!("frame {index} (timestamp {ts})");
        let (returns, top_pose) = self.read_returns(ts)?;
        let cloud = convert::point_cloud(&returns, top_pose.as_ref(), &self.laser_calibrations, pose)
            .map_err(|e| SourceError::corrupt(&self.folder, &location, e))?;
        let cameras = if self.config.cameras {
            convert::camera_views(self.read_cameras(ts)?, &self.camera_calibrations, ts)
                .map_err(|e| SourceError::corrupt(&self.folder, &location, e))?
        } else {
            Vec::new()
        };
        Ok(Frame {
            sequence: self.meta.name.clone(),
            index,
            timestamp_micros: ts,
            platform: Platform::Vehicle,
            cloud,
            world_from_sensor: *pose,
            imu: Vec::new(),
            cameras,
            ground_truth: self.boxes.get(&ts).cloned().unwrap_or_default(),
            notes: Vec::new(),
        })
    }
}
