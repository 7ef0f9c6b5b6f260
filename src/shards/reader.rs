//! Reads shard files back into rows: `run --from fuse` reads `detections.parquet`, `eval --format
//! shards` reads `boxes.parquet`, tests read everything. Columns are found by name and their types
//! checked, so a file from another writer with the same schema reads too.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Float64Type, Int32Type, Int64Type};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection, RowSelector};

use super::{BoxRow, CameraFootprint, DetectionRow, EditRow, FrameRow, PointsFrame, ShardError, TrackRow};

/// A Parquet reader builder over `path`, errors naming it.
fn open_builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ShardError> {
    let file = File::open(path).map_err(|source| ShardError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| ShardError::Parquet {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

fn read_batches(path: &Path) -> Result<Vec<RecordBatch>, ShardError> {
    let fail = |e: String| ShardError::Parquet {
        path: path.to_path_buf(),
        detail: e,
    };
    let reader = open_builder(path)?
        .with_batch_size(1 << 16)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    reader.map(|b| b.map_err(|e| fail(e.to_string()))).collect()
}

/// The batches of `path` holding only `columns` (top-level columns by name; each must exist):
/// readers that need a few columns of a wide file skip decoding the rest.
pub(crate) fn read_projected(path: &Path, columns: &[&str]) -> Result<Vec<RecordBatch>, ShardError> {
    let fail = |e: String| ShardError::Parquet {
        path: path.to_path_buf(),
        detail: e,
    };
    let builder = open_builder(path)?;
    let schema = builder.parquet_schema();
    let fields = schema.root_schema().get_fields();
    let mut roots = Vec::with_capacity(columns.len());
    for name in columns {
        let root = fields
            .iter()
            .position(|f| f.name() == *name)
            .ok_or_else(|| ShardError::Schema {
                path: path.to_path_buf(),
                column: name.to_string(),
                detail: "missing".to_string(),
            })?;
        roots.push(root);
    }
    let mask = ProjectionMask::roots(schema, roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(1 << 16)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    reader.map(|b| b.map_err(|e| fail(e.to_string()))).collect()
}

/// Typed column access on one batch, errors naming file and column.
pub(crate) struct Columns<'a> {
    /// The file the batch came from.
    pub(crate) path: &'a Path,
    /// The batch.
    pub(crate) batch: &'a RecordBatch,
}

impl<'a> Columns<'a> {
    pub(crate) fn column(&self, name: &str) -> Result<&'a dyn Array, ShardError> {
        self.batch
            .column_by_name(name)
            .map(|c| c.as_ref())
            .ok_or_else(|| self.error(name, "missing"))
    }

    /// Whether the batch has `name` (columns added in a later minor version may be absent).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(name).is_some()
    }

    pub(crate) fn error(&self, name: &str, detail: &str) -> ShardError {
        ShardError::Schema {
            path: self.path.to_path_buf(),
            column: name.to_string(),
            detail: detail.to_string(),
        }
    }

    pub(crate) fn i64s(&self, name: &str) -> Result<Vec<Option<i64>>, ShardError> {
        let c = self.column(name)?;
        let a = c
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| self.error(name, "not int64"))?;
        Ok(a.iter().collect())
    }

    pub(crate) fn i64s_required(&self, name: &str) -> Result<Vec<i64>, ShardError> {
        self.i64s(name)?
            .into_iter()
            .map(|v| v.ok_or_else(|| self.error(name, "null in a required column")))
            .collect()
    }

    pub(crate) fn f64s(&self, name: &str) -> Result<Vec<Option<f64>>, ShardError> {
        let c = self.column(name)?;
        let a = c
            .as_primitive_opt::<Float64Type>()
            .ok_or_else(|| self.error(name, "not float64"))?;
        Ok(a.iter().collect())
    }

    pub(crate) fn f64s_required(&self, name: &str) -> Result<Vec<f64>, ShardError> {
        self.f64s(name)?
            .into_iter()
            .map(|v| v.ok_or_else(|| self.error(name, "null in a required column")))
            .collect()
    }

    pub(crate) fn f32s(&self, name: &str) -> Result<Vec<f32>, ShardError> {
        let c = self.column(name)?;
        let a = c
            .as_primitive_opt::<Float32Type>()
            .ok_or_else(|| self.error(name, "not float32"))?;
        if a.null_count() > 0 {
            return Err(self.error(name, "null in a required column"));
        }
        Ok(a.values().to_vec())
    }

    pub(crate) fn strings(&self, name: &str) -> Result<Vec<Option<String>>, ShardError> {
        let c = self.column(name)?;
        let a = c.as_string_opt::<i32>().ok_or_else(|| self.error(name, "not utf8"))?;
        Ok(a.iter().map(|s| s.map(str::to_string)).collect())
    }

    pub(crate) fn strings_required(&self, name: &str) -> Result<Vec<String>, ShardError> {
        self.strings(name)?
            .into_iter()
            .map(|v| v.ok_or_else(|| self.error(name, "null in a required column")))
            .collect()
    }

    pub(crate) fn bools(&self, name: &str) -> Result<Vec<Option<bool>>, ShardError> {
        let c = self.column(name)?;
        let a = c.as_boolean_opt().ok_or_else(|| self.error(name, "not boolean"))?;
        Ok(a.iter().collect())
    }

    pub(crate) fn fixed<const N: usize>(&self, name: &str) -> Result<Vec<Option<[f64; N]>>, ShardError> {
        fixed_rows::<N>(self.column(name)?)
            .ok_or_else(|| self.error(name, &format!("not fixed_size_list<float64>[{N}]")))
    }

    pub(crate) fn fixed_required<const N: usize>(&self, name: &str) -> Result<Vec<[f64; N]>, ShardError> {
        self.fixed::<N>(name)?
            .into_iter()
            .map(|v| v.ok_or_else(|| self.error(name, "null in a required column")))
            .collect()
    }

    pub(crate) fn string_lists(&self, name: &str) -> Result<Vec<Vec<String>>, ShardError> {
        let c = self.column(name)?;
        let list = c
            .as_list_opt::<i32>()
            .ok_or_else(|| self.error(name, "not list<utf8>"))?;
        let mut out = Vec::with_capacity(list.len());
        for i in 0..list.len() {
            let values = list.value(i);
            let strings = values
                .as_string_opt::<i32>()
                .ok_or_else(|| self.error(name, "not list<utf8>"))?;
            out.push(strings.iter().map(|s| s.unwrap_or_default().to_string()).collect());
        }
        Ok(out)
    }
}

fn fixed_rows<const N: usize>(column: &dyn Array) -> Option<Vec<Option<[f64; N]>>> {
    let list = column.as_fixed_size_list_opt()?;
    if list.value_length() != N as i32 {
        return None;
    }
    let values = list.values().as_primitive_opt::<Float64Type>()?;
    let mut out = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        if list.is_null(i) {
            out.push(None);
            continue;
        }
        let start = (list.offset() + i) * N;
        let mut row = [0.0; N];
        row.copy_from_slice(&values.values()[start..start + N]);
        out.push(Some(row));
    }
    Some(out)
}

/// Reads `frames.parquet`.
pub fn read_frame_rows(path: &Path) -> Result<Vec<FrameRow>, ShardError> {
    let mut rows = Vec::new();
    for batch in read_batches(path)? {
        let c = Columns { path, batch: &batch };
        let frame_index = c.i64s_required("frame_index")?;
        let timestamp = c.i64s_required("timestamp_us")?;
        let world = c.fixed_required::<16>("world_from_sensor")?;
        let normalized = c.fixed::<16>("normalized_from_sensor")?;
        // Added in schema 1.1: absent in 1.0 files.
        let n = batch.num_rows();
        let (gravity_method, gravity_inputs, gravity_confidence, sensor_height, notes) = if c.has("gravity_method") {
            (
                c.strings("gravity_method")?,
                c.string_lists("gravity_inputs")?,
                c.f64s("gravity_confidence")?,
                c.f64s("sensor_height_m")?,
                c.string_lists("normalization_notes")?,
            )
        } else {
            (
                vec![None; n],
                vec![Vec::new(); n],
                vec![None; n],
                vec![None; n],
                vec![Vec::new(); n],
            )
        };
        // Added in schema 1.2.
        let source_notes = if c.has("source_notes") {
            c.string_lists("source_notes")?
        } else {
            vec![Vec::new(); n]
        };
        let num_points = c.i64s_required("num_points")?;
        let kept = c.i64s_required("num_points_kept")?;
        let points_file = c.strings("points_file")?;
        let detections = c.i64s_required("num_detections")?;
        let fused = c.i64s_required("num_fused")?;
        let boxes = c.i64s_required("num_boxes")?;
        let cameras = c.string_lists("cameras")?;
        for i in 0..batch.num_rows() {
            rows.push(FrameRow {
                frame_index: frame_index[i],
                timestamp_us: timestamp[i],
                world_from_sensor: world[i],
                normalized_from_sensor: normalized[i],
                gravity_method: gravity_method[i].clone(),
                gravity_inputs: gravity_inputs[i].clone(),
                gravity_confidence: gravity_confidence[i],
                sensor_height_m: sensor_height[i],
                normalization_notes: notes[i].clone(),
                source_notes: source_notes[i].clone(),
                num_points: num_points[i],
                num_points_kept: kept[i],
                points_file: points_file[i].clone(),
                num_detections: detections[i],
                num_fused: fused[i],
                num_boxes: boxes[i],
                cameras: cameras[i].clone(),
            });
        }
    }
    Ok(rows)
}

/// Reads `detections.parquet`.
pub fn read_detection_rows(path: &Path) -> Result<Vec<DetectionRow>, ShardError> {
    let mut rows = Vec::new();
    for batch in read_batches(path)? {
        let c = Columns { path, batch: &batch };
        let frame_index = c.i64s_required("frame_index")?;
        let timestamp = c.i64s_required("timestamp_us")?;
        let detector = c.strings_required("detector")?;
        let index = c.i64s_required("detection_index")?;
        let class = c.strings_required("class")?;
        let score = c.f32s("score")?;
        let boxes = c.fixed_required::<9>("box_sensor")?;
        for i in 0..batch.num_rows() {
            rows.push(DetectionRow {
                frame_index: frame_index[i],
                timestamp_us: timestamp[i],
                detector: detector[i].clone(),
                detection_index: index[i],
                class: class[i].clone(),
                score: score[i],
                box_sensor: boxes[i],
            });
        }
    }
    Ok(rows)
}

fn camera_footprints(c: &Columns, name: &str) -> Result<Vec<Vec<CameraFootprint>>, ShardError> {
    let bad = || {
        c.error(
            name,
            "not list<struct<camera, in_fov, box_2d_px, in_image_fraction, occlusion>>",
        )
    };
    let list = c.column(name)?.as_list_opt::<i32>().ok_or_else(bad)?;
    let mut out = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        let values = list.value(i);
        let s = values.as_struct_opt().ok_or_else(bad)?;
        let camera = s
            .column_by_name("camera")
            .and_then(|a| a.as_string_opt::<i32>())
            .ok_or_else(bad)?;
        let in_fov = s
            .column_by_name("in_fov")
            .and_then(|a| a.as_boolean_opt())
            .ok_or_else(bad)?;
        let box_2d = s
            .column_by_name("box_2d_px")
            .and_then(|a| fixed_rows::<4>(a.as_ref()))
            .ok_or_else(bad)?;
        let fraction = s
            .column_by_name("in_image_fraction")
            .and_then(|a| a.as_primitive_opt::<Float64Type>())
            .ok_or_else(bad)?;
        // Added in schema 1.3: absent in earlier files.
        let occlusion = match s.column_by_name("occlusion") {
            Some(a) => Some(a.as_primitive_opt::<Float64Type>().ok_or_else(bad)?),
            None => None,
        };
        out.push(
            (0..s.len())
                .map(|k| CameraFootprint {
                    camera: camera.value(k).to_string(),
                    in_fov: in_fov.value(k),
                    box_2d_px: box_2d[k],
                    in_image_fraction: fraction.value(k),
                    occlusion: occlusion.and_then(|o| o.is_valid(k).then(|| o.value(k))),
                })
                .collect(),
        );
    }
    Ok(out)
}

/// Reads `boxes.parquet` (or `review.parquet`).
pub fn read_box_rows(path: &Path) -> Result<Vec<BoxRow>, ShardError> {
    let mut rows = Vec::new();
    for batch in read_batches(path)? {
        let c = Columns { path, batch: &batch };
        let frame_index = c.i64s_required("frame_index")?;
        let timestamp = c.i64s_required("timestamp_us")?;
        let box_id = c.i64s_required("box_id")?;
        let track_id = c.i64s_required("track_id")?;
        let source_track_id = c.strings("source_track_id")?;
        let class = c.strings_required("class")?;
        let score = c.f64s_required("score")?;
        let sensor = c.fixed_required::<9>("box_sensor")?;
        let world = c.fixed_required::<9>("box_world")?;
        let normalized = c.fixed::<9>("box_normalized")?;
        let aabb = c.fixed::<6>("aabb_normalized")?;
        let votes = {
            let col = c.column("num_votes")?;
            let a = col
                .as_primitive_opt::<Int32Type>()
                .ok_or_else(|| c.error("num_votes", "not int32"))?;
            a.values().to_vec()
        };
        let detectors = c.string_lists("detectors")?;
        let origin = c.strings_required("origin")?;
        let inside = c.i64s_required("num_points_inside")?;
        let source_points = c.i64s("source_num_points")?;
        let range = c.f64s_required("bev_range_m")?;
        let pitch = c.f64s_required("relative_pitch_rad")?;
        let velocity = c.fixed::<3>("velocity_world_mps")?;
        let moving = c.bools("moving")?;
        let cameras = camera_footprints(&c, "cameras")?;
        let best_camera = c.strings("best_camera")?;
        let rgb_class = c.strings("rgb_class")?;
        let rgb_score = c.f64s("rgb_score")?;
        // Added in schema 1.3.
        let (rgb_agrees, rgb_note) = if c.has("rgb_note") {
            (c.bools("rgb_agrees")?, c.strings("rgb_note")?)
        } else {
            (vec![None; batch.num_rows()], vec![None; batch.num_rows()])
        };
        let flags = c.string_lists("flags")?;
        let status = c.strings_required("review_status")?;
        for i in 0..batch.num_rows() {
            rows.push(BoxRow {
                frame_index: frame_index[i],
                timestamp_us: timestamp[i],
                box_id: box_id[i],
                track_id: track_id[i],
                source_track_id: source_track_id[i].clone(),
                class: class[i].clone(),
                score: score[i],
                box_sensor: sensor[i],
                box_world: world[i],
                box_normalized: normalized[i],
                aabb_normalized: aabb[i],
                num_votes: votes[i],
                detectors: detectors[i].clone(),
                origin: origin[i].clone(),
                num_points_inside: inside[i],
                source_num_points: source_points[i],
                bev_range_m: range[i],
                relative_pitch_rad: pitch[i],
                velocity_world_mps: velocity[i],
                moving: moving[i],
                cameras: cameras[i].clone(),
                best_camera: best_camera[i].clone(),
                rgb_class: rgb_class[i].clone(),
                rgb_score: rgb_score[i],
                rgb_agrees: rgb_agrees[i],
                rgb_note: rgb_note[i].clone(),
                flags: flags[i].clone(),
                review_status: status[i].clone(),
            });
        }
    }
    Ok(rows)
}

/// Reads `tracks.parquet`.
pub fn read_track_rows(path: &Path) -> Result<Vec<TrackRow>, ShardError> {
    let mut rows = Vec::new();
    for batch in read_batches(path)? {
        let c = Columns { path, batch: &batch };
        let track_id = c.i64s_required("track_id")?;
        let source = c.strings("source_track_id")?;
        let class = c.strings_required("class")?;
        let motion = c.strings("motion")?;
        let first = c.i64s_required("first_frame")?;
        let last = c.i64s_required("last_frame")?;
        let boxes = c.i64s_required("num_boxes")?;
        let detected = c.i64s_required("num_detected")?;
        let score = c.f64s_required("score")?;
        let size = c.fixed::<3>("size_lwh_m")?;
        for i in 0..batch.num_rows() {
            rows.push(TrackRow {
                track_id: track_id[i],
                source_track_id: source[i].clone(),
                class: class[i].clone(),
                motion: motion[i].clone(),
                first_frame: first[i],
                last_frame: last[i],
                num_boxes: boxes[i],
                num_detected: detected[i],
                score: score[i],
                size_lwh_m: size[i],
            });
        }
    }
    Ok(rows)
}

/// Reads `edits.parquet`.
pub fn read_edit_rows(path: &Path) -> Result<Vec<EditRow>, ShardError> {
    let mut rows = Vec::new();
    for batch in read_batches(path)? {
        let c = Columns { path, batch: &batch };
        let frame = c.i64s_required("frame_index")?;
        let box_id = c.i64s_required("box_id")?;
        let track_id = c.i64s_required("track_id")?;
        let field = c.strings_required("field")?;
        let before = c.strings("before")?;
        let after = c.strings("after")?;
        let source = c.strings_required("source")?;
        let sha = c.strings_required("import_sha256")?;
        let time = c.i64s_required("time_unix_s")?;
        for i in 0..batch.num_rows() {
            rows.push(EditRow {
                frame_index: frame[i],
                box_id: box_id[i],
                track_id: track_id[i],
                field: field[i].clone(),
                before: before[i].clone(),
                after: after[i].clone(),
                source: source[i].clone(),
                import_sha256: sha[i].clone(),
                time_unix_s: time[i],
            });
        }
    }
    Ok(rows)
}

/// Reads one frame's points from a points file: the row group whose `frame_index` is `frame_index`
/// (one row group per frame), decoding only that row group.
pub fn read_points_frame(path: &Path, frame_index: i64) -> Result<Option<PointsFrame>, ShardError> {
    let fail = |e: String| ShardError::Parquet {
        path: path.to_path_buf(),
        detail: e,
    };
    let builder = open_builder(path)?;
    let metadata = builder.metadata().clone();
    // The row group of the frame: its `frame_index` column statistics hold min = max = the frame.
    let mut group = None;
    for (g, rg) in metadata.row_groups().iter().enumerate() {
        let stats = rg.column(0).statistics();
        let hit = match stats {
            Some(parquet::file::statistics::Statistics::Int64(s)) => {
                s.min_opt() == Some(&frame_index) && s.max_opt() == Some(&frame_index)
            }
            _ => false,
        };
        if hit {
            group = Some(g);
            break;
        }
    }
    let Some(group) = group else {
        return Ok(None);
    };
    let reader = builder
        .with_row_groups(vec![group])
        .with_row_selection(RowSelection::from(vec![RowSelector::select(
            metadata.row_group(group).num_rows() as usize,
        )]))
        .with_batch_size(1 << 20)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut frame = PointsFrame {
        frame_index,
        ..PointsFrame::default()
    };
    for batch in reader {
        let batch = batch.map_err(|e| fail(e.to_string()))?;
        let c = Columns { path, batch: &batch };
        frame.x.extend(c.f32s("x_sensor_m")?);
        frame.y.extend(c.f32s("y_sensor_m")?);
        frame.z.extend(c.f32s("z_sensor_m")?);
        frame.intensity.extend(c.f32s("intensity")?);
    }
    Ok(Some(frame))
}

/// The complete sequence folders at or under `path` (`<out>/<platform>/<sequence>/`), sorted.
pub fn sequence_dirs(path: &Path) -> Vec<PathBuf> {
    // A `.partial` or `.old` folder may hold `_SUCCESS` (the moment before its rename, or the
    // folder a finished one replaced); its name says it is not the sequence.
    let is_sequence = |p: &Path| {
        p.join("boxes.parquet").is_file()
            && p.join(super::SUCCESS_FILE).is_file()
            && !p
                .file_name()
                .is_some_and(|n| super::is_temporary_name(&n.to_string_lossy()))
    };
    if is_sequence(path) {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    let children = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|r| {
                r.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for a in children(path) {
        if is_sequence(&a) {
            out.push(a);
            continue;
        }
        out.extend(children(&a).into_iter().filter(|b| is_sequence(b)));
    }
    out
}
