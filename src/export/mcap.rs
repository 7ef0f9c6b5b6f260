//! `export mcap`: one sequence as an MCAP file that plays in Foxglove (or any MCAP viewer) —
//! points, boxes as `SceneUpdate` cubes coloured by track, the sensor pose and frame transforms,
//! and the log's camera images with their calibrations (`docs/export.md`). Messages are JSON
//! (`json` encoding) with `jsonschema` schemas named after Foxglove's published schemas
//! (`foxglove.PointCloud`, `foxglove.SceneUpdate`, …), in zstd chunks; log time is the frame's
//! timestamp in nanoseconds.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use nalgebra::{Isometry3, Translation3, UnitQuaternion};
use rayon::prelude::*;
use serde_json::{Value, json};

use super::output::OutputDir;
use super::sequence::{SequenceLog, ShardSequence, encode_jpeg, frame_points, load_sequences, points_in};
use super::{ExportError, ExportFrame, ExportSummary, LogLocation};
use crate::atomic_file::partial_path;
use crate::camera::pinhole;
use crate::frame::{CameraView, Distortion, Frame};
use crate::geometry::Box3;
use crate::shards::{BoxRow, FrameRow};

/// The point cloud topic (`foxglove.PointCloud`).
pub const TOPIC_POINTS: &str = "/lidar/points";
/// The box topic (`foxglove.SceneUpdate`).
pub const TOPIC_BOXES: &str = "/boxes";
/// The frame transform topic (`foxglove.FrameTransform`).
pub const TOPIC_TF: &str = "/tf";
/// The sensor pose topic (`foxglove.PoseInFrame`).
pub const TOPIC_POSE: &str = "/pose";
/// The world frame's name.
pub const WORLD_FRAME: &str = "world";
/// The LiDAR sensor frame's name.
pub const SENSOR_FRAME: &str = "sensor";
/// The normalized frame's name.
pub const NORMALIZED_FRAME: &str = "normalized";
/// Foxglove `NumericType` FLOAT32.
const FLOAT32: u8 = 7;
/// The name of the MCAP metadata record describing the export.
pub const METADATA_NAME: &str = "boxlayer";

/// How `export mcap` chooses and writes sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct McapOptions {
    /// The frame points and boxes are written in.
    pub frame: ExportFrame,
    /// Only these sequences (all when empty).
    pub sequences: Vec<String>,
    /// Where the logs are.
    pub log: LogLocation,
    /// zstd level of the chunks (0 = the `zstd` library's default, 3); default ROS 2's, 1.
    pub compression_level: u32,
}

impl Default for McapOptions {
    fn default() -> Self {
        Self {
            frame: ExportFrame::Sensor,
            sequences: Vec::new(),
            log: LogLocation::DataRoot(PathBuf::from(".")),
            compression_level: crate::sources::mcap::ROS2_ZSTD_LEVEL,
        }
    }
}

/// What `export mcap` wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McapSummary {
    /// Sequences, frames (`samples`), boxes and images written; `out` is the file (one
    /// sequence) or the folder (several).
    pub export: ExportSummary,
    /// The MCAP files written.
    pub files: Vec<PathBuf>,
    /// Messages per topic, over every file.
    pub messages: BTreeMap<String, u64>,
}

/// Writes the sequences under `shards` as MCAP: with one sequence selected, `out` is that file;
/// with several, `out` is a folder holding `<platform>/<sequence>.mcap` each. Either appears
/// whole (written under `OUT.partial` and renamed) or not at all.
pub fn export_mcap(shards: &Path, out: &Path, options: &McapOptions) -> Result<McapSummary, ExportError> {
    let sequences = load_sequences(shards, &options.sequences)?;
    let mut summary = McapSummary {
        export: ExportSummary {
            sequences: sequences.len(),
            ..ExportSummary::default()
        },
        ..McapSummary::default()
    };
    match sequences.as_slice() {
        [] => Err(ExportError::invalid(shards, "no sequence selected")),
        [sequence] => {
            write_file(sequence, out, options, &mut summary)?;
            summary.export.out = out.to_path_buf();
            summary.files.push(out.to_path_buf());
            Ok(summary)
        }
        _ => {
            let output = OutputDir::create(out)?;
            let mut rels = Vec::new();
            for sequence in &sequences {
                let rel = Path::new(&sequence.manifest.platform).join(format!("{}.mcap", sequence.manifest.sequence));
                let path = output.path().join(&rel);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| ExportError::io(parent, e))?;
                }
                write_file(sequence, &path, options, &mut summary)?;
                rels.push(rel);
            }
            let dir = output.finish()?;
            summary.files = rels.iter().map(|r| dir.join(r)).collect();
            summary.export.out = dir;
            Ok(summary)
        }
    }
}

/// The file being written under its `.partial` name, removed unless renamed into place.
struct PartialFile {
    partial: PathBuf,
    done: bool,
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Writes one sequence to `path` (via `path.partial`).
fn write_file(
    sequence: &ShardSequence,
    path: &Path,
    options: &McapOptions,
    summary: &mut McapSummary,
) -> Result<(), ExportError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| ExportError::io(parent, e))?;
    }
    let mut guard = PartialFile {
        partial: partial_path(path),
        done: false,
    };
    let file = File::create(&guard.partial).map_err(|e| ExportError::io(&guard.partial, e))?;
    let writer = mcap::WriteOptions::new()
        .profile("")
        .library(concat!("boxlayer/", env!("CARGO_PKG_VERSION")))
        .compression(Some(mcap::Compression::Zstd))
        .compression_level(options.compression_level)
        .compression_threads(0)
        .chunk_size(Some(4 << 20))
        .create(BufWriter::with_capacity(1 << 20, file))
        .map_err(|e| ExportError::mcap(path, e))?;
    let mut out = McapOut {
        path: path.to_path_buf(),
        writer,
        schemas: HashMap::new(),
        channels: HashMap::new(),
        messages: BTreeMap::new(),
        sequence: 0,
    };
    let log = SequenceLog::open(sequence, &options.log)?;
    write_sequence(sequence, log.as_ref(), options, &mut out, &mut summary.export)?;
    let McapOut {
        mut writer, messages, ..
    } = out;
    writer.finish().map_err(|e| ExportError::mcap(path, e))?;
    let file = writer
        .into_inner()
        .into_inner()
        .map_err(|e| ExportError::io(&guard.partial, e.into_error()))?;
    file.sync_all().map_err(|e| ExportError::io(&guard.partial, e))?;
    drop(file);
    std::fs::rename(&guard.partial, path).map_err(|e| ExportError::io(path, e))?;
    guard.done = true;
    for (topic, n) in messages {
        *summary.messages.entry(topic).or_default() += n;
    }
    Ok(())
}

/// An MCAP file being written: its schemas and channels by name, and messages per topic.
struct McapOut {
    path: PathBuf,
    writer: mcap::Writer<BufWriter<File>>,
    schemas: HashMap<&'static str, u16>,
    channels: HashMap<String, u16>,
    messages: BTreeMap<String, u64>,
    sequence: u32,
}

impl McapOut {
    /// The channel of `topic` with Foxglove schema `schema`, added on first use.
    fn channel(&mut self, topic: &str, schema: &'static str) -> Result<u16, ExportError> {
        if let Some(&id) = self.channels.get(topic) {
            return Ok(id);
        }
        let schema_id = match self.schemas.get(schema) {
            Some(&id) => id,
            None => {
                let data = serde_json::to_vec(&json_schema(schema))
                    .map_err(|e| ExportError::invalid(&self.path, format!("schema {schema}: {e}")))?;
                let id = self
                    .writer
                    .add_schema(schema, "jsonschema", &data)
                    .map_err(|e| ExportError::mcap(&self.path, e))?;
                self.schemas.insert(schema, id);
                id
            }
        };
        let id = self
            .writer
            .add_channel(schema_id, topic, "json", &BTreeMap::new())
            .map_err(|e| ExportError::mcap(&self.path, e))?;
        self.channels.insert(topic.to_string(), id);
        Ok(id)
    }

    fn write(&mut self, message: &Message, log_time: u64) -> Result<(), ExportError> {
        let channel_id = self.channel(&message.topic, message.schema)?;
        self.sequence = self.sequence.wrapping_add(1);
        let header = mcap::records::MessageHeader {
            channel_id,
            sequence: self.sequence,
            log_time,
            publish_time: log_time,
        };
        self.writer
            .write_to_known_channel(&header, &message.data)
            .map_err(|e| ExportError::mcap(&self.path, e))?;
        *self.messages.entry(message.topic.clone()).or_default() += 1;
        Ok(())
    }
}

/// One encoded message.
struct Message {
    topic: String,
    schema: &'static str,
    data: Vec<u8>,
}

/// The messages of one frame, and what they hold.
struct FrameMessages {
    log_time: u64,
    messages: Vec<Message>,
    boxes: usize,
    images: usize,
}

/// What every frame's messages need.
struct Context<'a> {
    sequence: &'a ShardSequence,
    log: Option<&'a SequenceLog>,
    frame: ExportFrame,
    boxes: HashMap<i64, Vec<&'a BoxRow>>,
}

fn write_sequence(
    sequence: &ShardSequence,
    log: Option<&SequenceLog>,
    options: &McapOptions,
    out: &mut McapOut,
    summary: &mut ExportSummary,
) -> Result<(), ExportError> {
    let m = &sequence.manifest;
    let metadata = mcap::records::Metadata {
        name: METADATA_NAME.to_string(),
        metadata: BTreeMap::from([
            ("sequence".to_string(), m.sequence.clone()),
            ("platform".to_string(), m.platform.clone()),
            ("source".to_string(), m.source.clone()),
            ("frame".to_string(), options.frame.as_str().to_string()),
            (
                "points".to_string(),
                if log.is_some() { "log" } else { "stored" }.to_string(),
            ),
            ("images".to_string(), log.is_some().to_string()),
        ]),
    };
    out.writer
        .write_metadata(&metadata)
        .map_err(|e| ExportError::mcap(&out.path, e))?;
    // Fixed channels first, so the channel list does not depend on the data.
    for (topic, schema) in [
        (TOPIC_POINTS, "foxglove.PointCloud"),
        (TOPIC_BOXES, "foxglove.SceneUpdate"),
        (TOPIC_TF, "foxglove.FrameTransform"),
        (TOPIC_POSE, "foxglove.PoseInFrame"),
    ] {
        out.channel(topic, schema)?;
    }
    let context = Context {
        sequence,
        log,
        frame: options.frame,
        boxes: sequence.boxes_by_frame(),
    };
    let lifetimes = lifetimes_us(&sequence.frames);
    let batch = rayon::current_num_threads().max(1) * 2;
    let rows: Vec<(&FrameRow, i64)> = sequence.frames.iter().zip(lifetimes).collect();
    for chunk in rows.chunks(batch) {
        let frames: Vec<FrameMessages> = chunk
            .par_iter()
            .map(|(row, lifetime)| frame_messages(&context, row, *lifetime))
            .collect::<Result<_, _>>()?;
        for f in frames {
            for message in &f.messages {
                out.write(message, f.log_time)?;
            }
            summary.samples += 1;
            summary.boxes += f.boxes;
            summary.images += f.images;
        }
    }
    Ok(())
}

/// Each frame's entity lifetime (µs): the gap to the next frame, the median gap for the last
/// (100 ms for a one-frame sequence).
fn lifetimes_us(frames: &[FrameRow]) -> Vec<i64> {
    let mut gaps: Vec<i64> = frames
        .windows(2)
        .map(|w| (w[1].timestamp_us - w[0].timestamp_us).max(1))
        .collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(100_000);
    if !frames.is_empty() {
        gaps.push(median);
    }
    gaps
}

/// Foxglove `Time` of a timestamp in µs (non-negative).
fn time(us: i64) -> Value {
    json!({"sec": us.div_euclid(1_000_000), "nsec": us.rem_euclid(1_000_000) * 1000})
}

fn vector3(x: f64, y: f64, z: f64) -> Value {
    json!({"x": x, "y": y, "z": z})
}

fn quaternion(q: &UnitQuaternion<f64>) -> Value {
    json!({"x": q.i, "y": q.j, "z": q.k, "w": q.w})
}

fn pose(iso: &Isometry3<f64>) -> Value {
    let t = iso.translation.vector;
    json!({"position": vector3(t.x, t.y, t.z), "orientation": quaternion(&iso.rotation)})
}

fn transform(us: i64, parent: &str, child: &str, parent_from_child: &Isometry3<f64>) -> Value {
    let t = parent_from_child.translation.vector;
    json!({
        "timestamp": time(us),
        "parent_frame_id": parent,
        "child_frame_id": child,
        "translation": vector3(t.x, t.y, t.z),
        "rotation": quaternion(&parent_from_child.rotation),
    })
}

/// A track's colour (r, g, b in 0…1): the colour the pictures give it
/// ([`crate::render::track_color`]).
pub fn track_color(track_id: i64) -> [f64; 3] {
    let c = crate::render::track_color(track_id);
    c.0.map(|v| f64::from(v) / 255.0)
}

/// A topic-safe form of a camera name (anything but ASCII letters, digits, `_` and `-` → `_`).
pub fn camera_topic_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The optical frame (OpenCV axes) of camera `name`.
pub fn camera_frame_id(name: &str) -> String {
    format!("{}_optical", camera_topic_name(name))
}

fn encode(value: &Value, topic: &str, schema: &'static str) -> Message {
    Message {
        topic: topic.to_string(),
        schema,
        // Serialising a `Value` to memory cannot fail (string keys only).
        data: serde_json::to_vec(value).unwrap_or_default(),
    }
}

fn frame_messages(context: &Context, row: &FrameRow, lifetime_us: i64) -> Result<FrameMessages, ExportError> {
    let sequence = context.sequence;
    let us = row.timestamp_us;
    let log_time = u64::try_from(us)
        .ok()
        .and_then(|t| t.checked_mul(1000))
        .ok_or_else(|| {
            ExportError::invalid(
                &sequence.dir.join("frames.parquet"),
                format!(
                    "frame {}: timestamp {us} µs is negative or too large for MCAP",
                    row.frame_index
                ),
            )
        })?;
    let frame_name = match context.frame {
        ExportFrame::Sensor => SENSOR_FRAME,
        ExportFrame::Normalized => NORMALIZED_FRAME,
    };
    let export_from_sensor = sequence.export_from_sensor(row, context.frame)?;
    let world_from_sensor = sequence.world_from_sensor(row)?;
    let log_frame: Option<Frame> = context.log.map(|log| log.frame(row.frame_index)).transpose()?;
    let mut messages = Vec::new();

    // Points.
    let points = frame_points(sequence, row, log_frame.as_ref())?.unwrap_or_default();
    let xyz = points_in(&points, &export_from_sensor);
    let mut data = Vec::with_capacity(xyz.len() * 16);
    for (p, i) in xyz.iter().zip(points.intensity.iter().chain(std::iter::repeat(&0.0))) {
        for v in [p[0], p[1], p[2], *i] {
            data.extend_from_slice(&v.to_le_bytes());
        }
    }
    let fields: Vec<Value> = ["x", "y", "z", "intensity"]
        .iter()
        .enumerate()
        .map(|(k, name)| json!({"name": name, "offset": 4 * k, "type": FLOAT32}))
        .collect();
    let cloud = json!({
        "timestamp": time(us),
        "frame_id": frame_name,
        "pose": pose(&Isometry3::identity()),
        "point_stride": 16,
        "fields": fields,
        "data": BASE64.encode(&data),
    });
    messages.push(encode(&cloud, TOPIC_POINTS, "foxglove.PointCloud"));

    // Boxes.
    let rows: &[&BoxRow] = context.boxes.get(&row.frame_index).map(Vec::as_slice).unwrap_or(&[]);
    let mut entities = Vec::with_capacity(rows.len());
    for b in rows {
        let bx = sequence.box_in(b, context.frame)?;
        entities.push(entity(b, &bx, us, lifetime_us, frame_name));
    }
    let update = json!({"deletions": [], "entities": entities});
    messages.push(encode(&update, TOPIC_BOXES, "foxglove.SceneUpdate"));

    // Transforms and pose.
    let mut tf = vec![transform(us, WORLD_FRAME, SENSOR_FRAME, &world_from_sensor)];
    if row.normalized_from_sensor.is_some() {
        let normalized_from_sensor = sequence.export_from_sensor(row, ExportFrame::Normalized)?;
        tf.push(transform(
            us,
            SENSOR_FRAME,
            NORMALIZED_FRAME,
            &normalized_from_sensor.inverse(),
        ));
    }
    if let Some(frame) = &log_frame {
        for view in &frame.cameras {
            let optical = pinhole(&view.calibration).sensor_from_camera;
            tf.push(transform(us, SENSOR_FRAME, &camera_frame_id(&view.name), &optical));
        }
    }
    for t in &tf {
        messages.push(encode(t, TOPIC_TF, "foxglove.FrameTransform"));
    }
    let pose_msg = json!({"timestamp": time(us), "frame_id": WORLD_FRAME, "pose": pose(&world_from_sensor)});
    messages.push(encode(&pose_msg, TOPIC_POSE, "foxglove.PoseInFrame"));

    // Cameras.
    let mut images = 0;
    if let Some(frame) = &log_frame {
        for view in &frame.cameras {
            let name = camera_topic_name(&view.name);
            let (format, bytes) = image_bytes(view, context, row.frame_index)?;
            let stamp = time(view.timestamp_micros.max(0));
            let image = json!({
                "timestamp": stamp,
                "frame_id": camera_frame_id(&view.name),
                "data": BASE64.encode(&bytes),
                "format": format,
            });
            messages.push(encode(
                &image,
                &format!("/camera/{name}/image"),
                "foxglove.CompressedImage",
            ));
            messages.push(encode(
                &calibration(view, &stamp),
                &format!("/camera/{name}/calibration"),
                "foxglove.CameraCalibration",
            ));
            images += 1;
        }
    }
    Ok(FrameMessages {
        log_time,
        messages,
        boxes: rows.len(),
        images,
    })
}

/// The log's own image bytes (JPEG or PNG, not re-encoded); decoded-only views as JPEG.
fn image_bytes(view: &CameraView, context: &Context, frame_index: i64) -> Result<(&'static str, Vec<u8>), ExportError> {
    if let Some(bytes) = view.encoded() {
        let format = if bytes.starts_with(b"\x89PNG") { "png" } else { "jpeg" };
        return Ok((format, bytes.to_vec()));
    }
    let what = context
        .sequence
        .dir
        .join(format!("frame {frame_index} camera {}", view.name));
    let image = view.image().map_err(|e| ExportError::Image {
        path: what.clone(),
        detail: e.to_string(),
    })?;
    Ok(("jpeg", encode_jpeg(&image, &what)?))
}

/// A `foxglove.CameraCalibration` of a view: its own K and distortion (the image is the log's,
/// not undistorted), in its optical frame.
fn calibration(view: &CameraView, stamp: &Value) -> Value {
    let c = &view.calibration;
    let (model, d) = match c.distortion {
        Distortion::None => ("plumb_bob", vec![0.0; 5]),
        Distortion::RadTan { k1, k2, p1, p2, k3 } => ("plumb_bob", vec![k1, k2, p1, p2, k3]),
        Distortion::Equidistant { k1, k2, k3, k4 } => ("kannala_brandt", vec![k1, k2, k3, k4]),
    };
    json!({
        "timestamp": stamp,
        "frame_id": camera_frame_id(&view.name),
        "width": c.width,
        "height": c.height,
        "distortion_model": model,
        "D": d,
        "K": [c.fx, 0.0, c.cx, 0.0, c.fy, c.cy, 0.0, 0.0, 1.0],
        "R": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        "P": [c.fx, 0.0, c.cx, 0.0, 0.0, c.fy, c.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
    })
}

/// One box as a `foxglove.SceneEntity`: a cube and a label, id = track id.
fn entity(b: &BoxRow, bx: &Box3, us: i64, lifetime_us: i64, frame_id: &str) -> Value {
    let q = UnitQuaternion::from_euler_angles(bx.roll, bx.pitch, bx.yaw);
    let iso = Isometry3::from_parts(Translation3::new(bx.x, bx.y, bx.z), q);
    let [r, g, bl] = track_color(b.track_id);
    let label = format!("{} #{}", b.class, b.track_id);
    let meta = [
        ("class", b.class.clone()),
        ("score", format!("{:.3}", b.score)),
        ("origin", b.origin.clone()),
        ("flags", b.flags.join(",")),
        ("review_status", b.review_status.clone()),
        ("box_id", b.box_id.to_string()),
    ];
    json!({
        "timestamp": time(us),
        "frame_id": frame_id,
        "id": b.track_id.to_string(),
        "lifetime": time(lifetime_us),
        "frame_locked": true,
        "metadata": meta.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "arrows": [],
        "cubes": [{
            "pose": pose(&iso),
            "size": vector3(bx.l, bx.w, bx.h),
            "color": {"r": r, "g": g, "b": bl, "a": 0.45},
        }],
        "spheres": [],
        "cylinders": [],
        "lines": [],
        "triangles": [],
        "texts": [{
            "pose": pose(&Isometry3::translation(bx.x, bx.y, bx.z + bx.h / 2.0 + 0.3)),
            "billboard": true,
            "font_size": 14.0,
            "scale_invariant": true,
            "color": {"r": r, "g": g, "b": bl, "a": 1.0},
            "text": label,
        }],
        "models": [],
    })
}

// ---- JSON Schemas of the Foxglove messages written (the fields boxlayer fills). ----

fn time_schema() -> Value {
    json!({"type": "object", "title": "time", "properties": {
        "sec": {"type": "integer", "minimum": 0},
        "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999}}})
}

fn duration_schema() -> Value {
    json!({"type": "object", "title": "duration", "properties": {
        "sec": {"type": "integer"},
        "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999}}})
}

fn vector3_schema(title: &str) -> Value {
    json!({"type": "object", "title": title, "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}}})
}

fn quaternion_schema() -> Value {
    json!({"type": "object", "title": "foxglove.Quaternion", "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}, "w": {"type": "number"}}})
}

fn pose_schema() -> Value {
    json!({"type": "object", "title": "foxglove.Pose", "properties": {
        "position": vector3_schema("foxglove.Vector3"), "orientation": quaternion_schema()}})
}

fn color_schema() -> Value {
    json!({"type": "object", "title": "foxglove.Color", "properties": {
        "r": {"type": "number"}, "g": {"type": "number"}, "b": {"type": "number"}, "a": {"type": "number"}}})
}

fn array_of(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

fn object(title: &str, properties: Value) -> Value {
    json!({"title": title, "type": "object", "properties": properties})
}

/// The JSON Schema of Foxglove schema `name`, covering the fields boxlayer writes (names and
/// types as Foxglove publishes them).
fn json_schema(name: &str) -> Value {
    let numbers = || array_of(json!({"type": "number"}));
    match name {
        "foxglove.PointCloud" => object(
            name,
            json!({
                "timestamp": time_schema(),
                "frame_id": {"type": "string"},
                "pose": pose_schema(),
                "point_stride": {"type": "integer", "minimum": 0},
                "fields": array_of(object("foxglove.PackedElementField", json!({
                    "name": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "type": {"title": "foxglove.NumericType", "oneOf": [
                        {"title": "UNKNOWN", "const": 0}, {"title": "UINT8", "const": 1},
                        {"title": "INT8", "const": 2}, {"title": "UINT16", "const": 3},
                        {"title": "INT16", "const": 4}, {"title": "UINT32", "const": 5},
                        {"title": "INT32", "const": 6}, {"title": "FLOAT32", "const": 7},
                        {"title": "FLOAT64", "const": 8}]}}))),
                "data": {"type": "string", "contentEncoding": "base64"},
            }),
        ),
        "foxglove.SceneUpdate" => {
            let cube = object(
                "foxglove.CubePrimitive",
                json!({"pose": pose_schema(), "size": vector3_schema("foxglove.Vector3"), "color": color_schema()}),
            );
            let text = object(
                "foxglove.TextPrimitive",
                json!({"pose": pose_schema(), "billboard": {"type": "boolean"},
                    "font_size": {"type": "number"}, "scale_invariant": {"type": "boolean"},
                    "color": color_schema(), "text": {"type": "string"}}),
            );
            let entity = object(
                "foxglove.SceneEntity",
                json!({
                    "timestamp": time_schema(),
                    "frame_id": {"type": "string"},
                    "id": {"type": "string"},
                    "lifetime": duration_schema(),
                    "frame_locked": {"type": "boolean"},
                    "metadata": array_of(object("foxglove.KeyValuePair",
                        json!({"key": {"type": "string"}, "value": {"type": "string"}}))),
                    "arrows": array_of(json!({"type": "object"})),
                    "cubes": array_of(cube),
                    "spheres": array_of(json!({"type": "object"})),
                    "cylinders": array_of(json!({"type": "object"})),
                    "lines": array_of(json!({"type": "object"})),
                    "triangles": array_of(json!({"type": "object"})),
                    "texts": array_of(text),
                    "models": array_of(json!({"type": "object"})),
                }),
            );
            let deletion = object(
                "foxglove.SceneEntityDeletion",
                json!({"timestamp": time_schema(),
                    "type": {"title": "foxglove.SceneEntityDeletion.Type", "oneOf": [
                        {"title": "MATCHING_ID", "const": 0}, {"title": "ALL", "const": 1}]},
                    "id": {"type": "string"}}),
            );
            object(
                name,
                json!({"deletions": array_of(deletion), "entities": array_of(entity)}),
            )
        }
        "foxglove.FrameTransform" => object(
            name,
            json!({
                "timestamp": time_schema(),
                "parent_frame_id": {"type": "string"},
                "child_frame_id": {"type": "string"},
                "translation": vector3_schema("foxglove.Vector3"),
                "rotation": quaternion_schema(),
            }),
        ),
        "foxglove.PoseInFrame" => object(
            name,
            json!({"timestamp": time_schema(), "frame_id": {"type": "string"}, "pose": pose_schema()}),
        ),
        "foxglove.CompressedImage" => object(
            name,
            json!({
                "timestamp": time_schema(),
                "frame_id": {"type": "string"},
                "data": {"type": "string", "contentEncoding": "base64"},
                "format": {"type": "string"},
            }),
        ),
        "foxglove.CameraCalibration" => object(
            name,
            json!({
                "timestamp": time_schema(),
                "frame_id": {"type": "string"},
                "width": {"type": "integer", "minimum": 0},
                "height": {"type": "integer", "minimum": 0},
                "distortion_model": {"type": "string"},
                "D": numbers(),
                "K": {"type": "array", "items": {"type": "number"}, "minItems": 9, "maxItems": 9},
                "R": {"type": "array", "items": {"type": "number"}, "minItems": 9, "maxItems": 9},
                "P": {"type": "array", "items": {"type": "number"}, "minItems": 12, "maxItems": 12},
            }),
        ),
        _ => object(name, json!({})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn track_colours_stay_in_range_and_differ_between_neighbours() {
        for id in 0..50 {
            let c = track_color(id);
            assert!(c.iter().all(|v| (0.0..=1.0).contains(v)), "{c:?}");
            assert_ne!(c, track_color(id + 1));
        }
    }

    #[test]
    fn camera_names_become_topic_safe() {
        assert_eq!(camera_topic_name("FRONT"), "FRONT");
        assert_eq!(camera_topic_name("ovc rgb/left"), "ovc_rgb_left");
    }
}
