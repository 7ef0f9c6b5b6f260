//! `import xtreme1`: an Xtreme1 export's human-corrected boxes back into the shards. Objects
//! match boxes by (frame, `trackId`), then by BEV IoU; moves, resizes, class changes, deletions
//! and additions are applied, boxes marked `verified` or `rejected`, every change appended to
//! `edits.parquet`, and each changed folder replaced as a whole only after the whole export was
//! read and checked (`docs/export.md`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::sequence::{ShardSequence, load_sequences};
use super::xtreme1::{Xtreme1Class, box_from_contour};
use super::{ExportError, ExportFrame};
use crate::cloud::PointCloud;
use crate::geometry::{Box3, aabb, count_points_in_box, iou_bev};
use crate::shards::{BoxRow, EditRow, Replacement, TrackRow, read_edit_rows, read_points_frame, replace_sequence};

/// Centre, size (m) and rotation (rad) differences at or under this are no change.
const SAME_GEOMETRY: f64 = 1e-6;

/// BEV IoU at which an object without a known `trackId` is the same box.
const MATCH_IOU: f64 = 0.5;

/// How `import xtreme1` reads an export.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportOptions {
    /// The frame the export's points and boxes were written in.
    pub frame: ExportFrame,
    /// The dataset's classes, to read `classId`s (default [`Xtreme1Class::defaults`]).
    pub classes: Vec<Xtreme1Class>,
    /// The time recorded in the history (seconds since the Unix epoch).
    pub time_unix_s: i64,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            frame: ExportFrame::Sensor,
            classes: Xtreme1Class::defaults(),
            time_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        }
    }
}

/// What one import changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportSummary {
    /// Scenes (sequences) in the export.
    pub sequences: usize,
    /// Sequence folders rewritten.
    pub sequences_changed: usize,
    /// Frames in the export.
    pub frames: usize,
    /// Boxes whose geometry changed.
    pub moved: usize,
    /// Boxes whose class changed.
    pub reclassed: usize,
    /// Boxes newly marked `verified` (changed or not).
    pub verified: usize,
    /// Boxes marked `rejected` (deleted in the tool).
    pub rejected: usize,
    /// Boxes added.
    pub added: usize,
    /// History rows appended.
    pub edits: usize,
}

/// One object of a result file.
#[derive(Debug, Clone, PartialEq)]
struct Object {
    /// Where it was read: `<file>: object <k>`.
    at: String,
    track_id: Option<String>,
    class: String,
    /// The box in the export frame.
    boxed: Box3,
}

/// One scene of the export: frame name → its objects (empty when the frame has no result file).
type Scene = BTreeMap<String, Vec<Object>>;

/// Applies the corrections of the Xtreme1 export `zip_path` to the sequence folders under `shards`.
pub fn import_xtreme1(zip_path: &Path, shards: &Path, options: &ImportOptions) -> Result<ImportSummary, ExportError> {
    let bytes = std::fs::read(zip_path).map_err(|e| ExportError::io(zip_path, e))?;
    let sha256: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let scenes = read_export(zip_path, &bytes, options)?;
    let sequences = load_sequences(shards, &[])?;
    let source = format!(
        "xtreme1:{}",
        zip_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut summary = ImportSummary {
        sequences: scenes.len(),
        ..ImportSummary::default()
    };
    // Plan every sequence before writing any, so a bad scene leaves every folder untouched.
    let mut plans = Vec::new();
    for (scene, frames) in &scenes {
        let name = scene_sequence(scene);
        let sequence =
            sequences
                .iter()
                .find(|s| s.manifest.sequence == name)
                .ok_or_else(|| ExportError::BadExport {
                    path: zip_path.to_path_buf(),
                    entry: scene.clone(),
                    detail: format!("no finished sequence `{name}` under {}", shards.display()),
                })?;
        summary.frames += frames.len();
        let stamp = EditStamp {
            source: &source,
            sha256: &sha256,
            time_unix_s: options.time_unix_s,
        };
        let plan = plan_sequence(zip_path, scene, sequence, frames, options.frame, &stamp, &mut summary)?;
        plans.push((sequence, plan));
    }
    for (sequence, plan) in plans {
        if plan.edits.is_empty() {
            continue;
        }
        write_plan(sequence, plan)?;
        summary.sequences_changed += 1;
    }
    Ok(summary)
}

/// `scene_<sequence>` → `<sequence>`.
fn scene_sequence(scene: &str) -> &str {
    if scene.len() >= 6 && scene[..6].eq_ignore_ascii_case("scene_") {
        &scene[6..]
    } else {
        scene
    }
}

// ---- reading the export -------------------------------------------------------------------

/// Reads every scene of the export: `[<dataset>/]scene_*/{data,result}/NAME.json` (v0.7+) or
/// `NAME-<dataId>.json` (v0.5.5–v0.6).
fn read_export(zip_path: &Path, bytes: &[u8], options: &ImportOptions) -> Result<BTreeMap<String, Scene>, ExportError> {
    let bad = |entry: &str, detail: String| ExportError::BadExport {
        path: zip_path.to_path_buf(),
        entry: entry.to_string(),
        detail,
    };
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| bad("(archive)", format!("not a readable zip: {e}")))?;
    let mut scenes: BTreeMap<String, Scene> = BTreeMap::new();
    let mut results: Vec<(String, String, String, Vec<u8>)> = Vec::new();
    for k in 0..archive.len() {
        let mut file = archive
            .by_index(k)
            .map_err(|e| bad(&format!("entry {k}"), e.to_string()))?;
        if file.is_dir() {
            continue;
        }
        let name = file
            .name()
            .map_err(|e| bad(&format!("entry {k}"), e.to_string()))?
            .into_owned();
        let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty()).collect();
        let Some(n) = parts.len().checked_sub(1) else { continue };
        let Some(stem) = parts[n].strip_suffix(".json") else {
            continue;
        };
        if n < 2 || !(parts[n - 1] == "data" || parts[n - 1] == "result") {
            continue;
        }
        let scene = parts[n - 2];
        if !(scene.len() >= 6 && scene[..6].eq_ignore_ascii_case("scene_")) {
            return Err(bad(
                &name,
                "a frame outside a scene_<sequence> folder: boxlayer exports sequences as scenes".to_string(),
            ));
        }
        // v0.5.5–v0.6 name files `NAME-<dataId>.json`.
        let frame = match stem.rsplit_once('-') {
            Some((frame, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => frame,
            _ => stem,
        };
        let mut content = Vec::new();
        file.read_to_end(&mut content)
            .map_err(|e| bad(&name, format!("cannot read (damaged or truncated zip): {e}")))?;
        let frames = scenes.entry(scene.to_string()).or_default();
        frames.entry(frame.to_string()).or_default();
        if parts[n - 1] == "result" {
            results.push((scene.to_string(), frame.to_string(), name, content));
        }
    }
    if scenes.is_empty() {
        return Err(bad(
            "(archive)",
            "no scene_*/data/*.json or result/*.json: not an Xtreme1 export".to_string(),
        ));
    }
    for (scene, frame, name, content) in results {
        let objects = parse_result(&name, &content, options).map_err(|detail| bad(&name, detail))?;
        scenes.entry(scene).or_default().insert(frame, objects);
    }
    Ok(scenes)
}

/// The `3D_BOX` objects of a result file (the `Ground Truth` source, else the first).
fn parse_result(name: &str, content: &[u8], options: &ImportOptions) -> Result<Vec<Object>, String> {
    let value: Value = serde_json::from_slice(content).map_err(|e| format!("not JSON: {e}"))?;
    let source = match &value {
        Value::Array(sources) => sources
            .iter()
            .find(|s| s.get("sourceName").and_then(Value::as_str) == Some("Ground Truth"))
            .or_else(|| sources.first())
            .cloned()
            .unwrap_or(Value::Null),
        other => other.clone(),
    };
    let objects = match source.get("objects") {
        Some(Value::Array(objects)) => objects.clone(),
        Some(Value::Null) | None => Vec::new(),
        Some(_) => return Err("`objects` is not an array".to_string()),
    };
    let mut out = Vec::new();
    for (k, object) in objects.iter().enumerate() {
        if object.get("type").and_then(Value::as_str) != Some("3D_BOX") {
            continue;
        }
        let at = format!("{name}: object {k}");
        out.push(parse_object(object, options).map_err(|e| format!("object {k}: {e}"))?);
        out.last_mut().expect("pushed").at = at;
    }
    Ok(out)
}

fn parse_object(object: &Value, options: &ImportOptions) -> Result<Object, String> {
    let number = |path: [&str; 3]| -> Result<f64, String> {
        let v = object
            .get(path[0])
            .and_then(|c| c.get(path[1]))
            .and_then(|c| c.get(path[2]))
            .ok_or_else(|| format!("no {}.{}.{}", path[0], path[1], path[2]))?;
        v.as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("{}.{}.{} is not a finite number ({v})", path[0], path[1], path[2]))
    };
    let triple = |what: &'static str| -> Result<[f64; 3], String> {
        Ok([
            number(["contour", what, "x"])?,
            number(["contour", what, "y"])?,
            number(["contour", what, "z"])?,
        ])
    };
    let (center, size, rotation) = (triple("center3D")?, triple("size3D")?, triple("rotation3D")?);
    if size.iter().any(|&s| s <= 0.0) {
        return Err(format!("size3D {size:?} is not positive"));
    }
    let text = |key: &str| object.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    let class = match (
        text("className").or_else(|| text("modelClass")),
        object.get("classId").and_then(Value::as_i64),
    ) {
        (Some(name), _) => name.to_string(),
        (None, Some(id)) => options
            .classes
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.clone())
            .ok_or_else(|| format!("classId {id} is not in the class list and the object has no className"))?,
        (None, None) => return Err("no className, modelClass or classId".to_string()),
    };
    let canonical = Xtreme1Class::canonical(&class).ok_or_else(|| {
        format!("unknown class `{class}` (known: vehicle/car/bus/truck, pedestrian, cyclist, unknown)")
    })?;
    let track_id = match object.get("trackId") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Object {
        at: String::new(),
        track_id,
        class: canonical.to_string(),
        boxed: box_from_contour(center, size, rotation),
    })
}

// ---- planning the changes -----------------------------------------------------------------

struct EditStamp<'a> {
    source: &'a str,
    sha256: &'a str,
    time_unix_s: i64,
}

/// A sequence's rows after the import, and the history rows it adds.
struct Plan {
    boxes: Vec<BoxRow>,
    tracks: Vec<TrackRow>,
    frames: Vec<crate::shards::FrameRow>,
    edits: Vec<EditRow>,
}

fn plan_sequence(
    zip_path: &Path,
    scene: &str,
    sequence: &ShardSequence,
    frames: &Scene,
    frame: ExportFrame,
    stamp: &EditStamp<'_>,
    summary: &mut ImportSummary,
) -> Result<Plan, ExportError> {
    let bad = |entry: String, detail: String| ExportError::BadExport {
        path: zip_path.to_path_buf(),
        entry,
        detail,
    };
    let rows_by_index: HashMap<i64, &crate::shards::FrameRow> =
        sequence.frames.iter().map(|r| (r.frame_index, r)).collect();
    let mut boxes = sequence.boxes.clone();
    let mut edits = Vec::new();
    let mut next_box_id = boxes.iter().map(|b| b.box_id).max().map_or(0, |m| m + 1);
    let mut next_track_id = boxes
        .iter()
        .map(|b| b.track_id)
        .chain(sequence.tracks.iter().map(|t| t.track_id))
        .max()
        .map_or(1, |m| m + 1);
    let known_tracks: BTreeSet<i64> = sequence.tracks.iter().map(|t| t.track_id).collect();
    let mut new_tracks: BTreeMap<String, i64> = BTreeMap::new();
    let mut touched_tracks = BTreeSet::new();
    for (name, objects) in frames {
        let entry = format!("{scene}/{name}");
        let frame_index: i64 = name
            .parse()
            .ok()
            .filter(|i| rows_by_index.contains_key(i))
            .ok_or_else(|| {
                bad(
                    entry.clone(),
                    format!(
                        "frame name `{name}` is no frame of sequence `{}`",
                        sequence.manifest.sequence
                    ),
                )
            })?;
        let row = rows_by_index[&frame_index];
        let sensor_from_export = sequence.export_from_sensor(row, frame)?.inverse();
        let world_from_sensor = sequence.world_from_sensor(row)?;
        let normalized_from_sensor = sequence.export_from_sensor(row, ExportFrame::Normalized).ok();
        let mut stored_points: Option<Option<PointCloud>> = None;
        let mut points = |sequence: &ShardSequence| -> Result<Option<PointCloud>, ExportError> {
            if stored_points.is_none() {
                stored_points = Some(stored_cloud(sequence, row)?);
            }
            Ok(stored_points.clone().flatten())
        };
        let candidates: Vec<usize> = (0..boxes.len())
            .filter(|&k| boxes[k].frame_index == frame_index && boxes[k].review_status != "rejected")
            .collect();
        let pairs = match_objects(objects, &candidates, &boxes, &sensor_from_export);
        let matched_boxes: BTreeSet<usize> = pairs.iter().filter_map(|p| p.1).collect();
        for (object_k, box_k) in pairs {
            let object = &objects[object_k];
            let new_sensor = object.boxed.transformed(&sensor_from_export);
            match box_k {
                Some(k) => {
                    let b = &mut boxes[k];
                    let old_export = sequence.box_in(b, frame)?;
                    let stamp_edit = |field: &str, before: String, after: String, b: &BoxRow| EditRow {
                        frame_index,
                        box_id: b.box_id,
                        track_id: b.track_id,
                        field: field.to_string(),
                        before: Some(before),
                        after: Some(after),
                        source: stamp.source.to_string(),
                        import_sha256: stamp.sha256.to_string(),
                        time_unix_s: stamp.time_unix_s,
                    };
                    if !same_geometry(&old_export, &object.boxed) {
                        let before = json_box(&b.box_sensor);
                        let cloud = points(sequence)?;
                        set_geometry(
                            b,
                            &new_sensor,
                            &world_from_sensor,
                            normalized_from_sensor.as_ref(),
                            cloud.as_ref(),
                        );
                        edits.push(stamp_edit("box", before, json_box(&b.box_sensor), b));
                        summary.moved += 1;
                    }
                    if b.class != object.class {
                        edits.push(stamp_edit("class", json_str(&b.class), json_str(&object.class), b));
                        b.class = object.class.clone();
                        touched_tracks.insert(b.track_id);
                        summary.reclassed += 1;
                    }
                    if b.review_status != "verified" {
                        edits.push(stamp_edit(
                            "review_status",
                            json_str(&b.review_status),
                            json_str("verified"),
                            b,
                        ));
                        b.review_status = "verified".to_string();
                        summary.verified += 1;
                    }
                }
                None => {
                    let track_id = match object.track_id.as_deref() {
                        Some(t) if t.parse::<i64>().is_ok_and(|id| known_tracks.contains(&id)) => {
                            t.parse::<i64>().expect("checked")
                        }
                        Some(t) => *new_tracks.entry(t.to_string()).or_insert_with(|| {
                            next_track_id += 1;
                            next_track_id - 1
                        }),
                        None => {
                            next_track_id += 1;
                            next_track_id - 1
                        }
                    };
                    let source_track_id = object
                        .track_id
                        .as_ref()
                        .filter(|t| !t.parse::<i64>().is_ok_and(|id| known_tracks.contains(&id)))
                        .map(|t| format!("xtreme1:{t}"));
                    let mut b = new_box(row, next_box_id, track_id, source_track_id, &object.class);
                    let cloud = points(sequence)?;
                    set_geometry(
                        &mut b,
                        &new_sensor,
                        &world_from_sensor,
                        normalized_from_sensor.as_ref(),
                        cloud.as_ref(),
                    );
                    next_box_id += 1;
                    edits.push(EditRow {
                        frame_index,
                        box_id: b.box_id,
                        track_id,
                        field: "created".to_string(),
                        before: None,
                        after: Some(format!(
                            "{{\"class\":{},\"box_sensor\":{}}}",
                            json_str(&b.class),
                            json_box(&b.box_sensor)
                        )),
                        source: stamp.source.to_string(),
                        import_sha256: stamp.sha256.to_string(),
                        time_unix_s: stamp.time_unix_s,
                    });
                    touched_tracks.insert(track_id);
                    boxes.push(b);
                    summary.added += 1;
                }
            }
        }
        for k in candidates.into_iter().filter(|k| !matched_boxes.contains(k)) {
            let b = &mut boxes[k];
            edits.push(EditRow {
                frame_index,
                box_id: b.box_id,
                track_id: b.track_id,
                field: "review_status".to_string(),
                before: Some(json_str(&b.review_status)),
                after: Some(json_str("rejected")),
                source: stamp.source.to_string(),
                import_sha256: stamp.sha256.to_string(),
                time_unix_s: stamp.time_unix_s,
            });
            b.review_status = "rejected".to_string();
            touched_tracks.insert(b.track_id);
            summary.rejected += 1;
        }
    }
    boxes.sort_by_key(|b| (b.frame_index, b.track_id, b.box_id));
    let tracks = updated_tracks(&sequence.tracks, &boxes, &touched_tracks, &new_tracks);
    let mut frame_rows = sequence.frames.clone();
    let mut per_frame: HashMap<i64, i64> = HashMap::new();
    for b in &boxes {
        *per_frame.entry(b.frame_index).or_default() += 1;
    }
    for r in &mut frame_rows {
        r.num_boxes = per_frame.get(&r.frame_index).copied().unwrap_or(0);
    }
    summary.edits += edits.len();
    Ok(Plan {
        boxes,
        tracks,
        frames: frame_rows,
        edits,
    })
}

/// Pairs each object with a box of `candidates` (indices into `boxes`), or `None` for an added
/// object: first by track (boxlayer's id or an earlier import's `xtreme1:<trackId>`), then by
/// BEV IoU ≥ [`MATCH_IOU`], highest first.
fn match_objects(
    objects: &[Object],
    candidates: &[usize],
    boxes: &[BoxRow],
    sensor_from_export: &Isometry3<f64>,
) -> Vec<(usize, Option<usize>)> {
    let mut pair: Vec<Option<usize>> = vec![None; objects.len()];
    let mut taken = BTreeSet::new();
    for (i, object) in objects.iter().enumerate() {
        let Some(t) = object.track_id.as_deref() else { continue };
        let xtreme1_id = format!("xtreme1:{t}");
        let found = candidates.iter().copied().find(|&k| {
            !taken.contains(&k)
                && (t.parse::<i64>() == Ok(boxes[k].track_id)
                    || boxes[k].source_track_id.as_deref() == Some(xtreme1_id.as_str()))
        });
        if let Some(k) = found {
            pair[i] = Some(k);
            taken.insert(k);
        }
    }
    let mut scored = Vec::new();
    for (i, object) in objects.iter().enumerate().filter(|(i, _)| pair[*i].is_none()) {
        let sensor = object.boxed.transformed(sensor_from_export);
        for &k in candidates.iter().filter(|k| !taken.contains(k)) {
            let iou = iou_bev(&sensor, &Box3::from_array(boxes[k].box_sensor));
            if iou >= MATCH_IOU {
                scored.push((iou, i, k));
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, i, k) in scored {
        if pair[i].is_none() && !taken.contains(&k) {
            pair[i] = Some(k);
            taken.insert(k);
        }
    }
    pair.into_iter().enumerate().collect()
}

/// Whether two boxes agree in centre and size (m) and rotation matrix (within [`SAME_GEOMETRY`]).
fn same_geometry(a: &Box3, b: &Box3) -> bool {
    let (a9, b9) = (a.to_array(), b.to_array());
    a9[..6]
        .iter()
        .zip(&b9[..6])
        .all(|(x, y)| (x - y).abs() <= SAME_GEOMETRY)
        && (a.rotation().matrix() - b.rotation().matrix()).abs().max() <= SAME_GEOMETRY
}

/// Sets a row's box and everything derived from it.
fn set_geometry(
    b: &mut BoxRow,
    sensor: &Box3,
    world_from_sensor: &Isometry3<f64>,
    normalized_from_sensor: Option<&Isometry3<f64>>,
    points: Option<&PointCloud>,
) {
    b.box_sensor = sensor.to_array();
    b.box_world = sensor.transformed(world_from_sensor).to_array();
    if let Some(n) = normalized_from_sensor {
        let normalized = sensor.transformed(n);
        let (lo, hi) = aabb(&normalized);
        b.box_normalized = Some(normalized.to_array());
        b.aabb_normalized = Some([lo.x, lo.y, lo.z, hi.x, hi.y, hi.z]);
    }
    b.bev_range_m = sensor.x.hypot(sensor.y);
    b.relative_pitch_rad = sensor.z.atan2(b.bev_range_m);
    if let Some(cloud) = points {
        b.num_points_inside = count_points_in_box(cloud, sensor) as i64;
    }
}

/// The frame's points as the run kept them, when it kept all of them.
fn stored_cloud(sequence: &ShardSequence, row: &crate::shards::FrameRow) -> Result<Option<PointCloud>, ExportError> {
    let Some(file) = &row.points_file else { return Ok(None) };
    if row.num_points_kept != row.num_points {
        return Ok(None);
    }
    let Some(p) = read_points_frame(&sequence.dir.join(file), row.frame_index)? else {
        return Ok(None);
    };
    Ok(PointCloud::from_columns(p.x, p.y, p.z, p.intensity).ok())
}

/// A box a human added.
fn new_box(
    row: &crate::shards::FrameRow,
    box_id: i64,
    track_id: i64,
    source_track_id: Option<String>,
    class: &str,
) -> BoxRow {
    BoxRow {
        frame_index: row.frame_index,
        timestamp_us: row.timestamp_us,
        box_id,
        track_id,
        source_track_id,
        class: class.to_string(),
        score: 1.0,
        box_sensor: [0.0; 9],
        box_world: [0.0; 9],
        box_normalized: None,
        aabb_normalized: None,
        num_votes: 0,
        detectors: Vec::new(),
        origin: "manual".to_string(),
        num_points_inside: 0,
        source_num_points: None,
        bev_range_m: 0.0,
        relative_pitch_rad: 0.0,
        velocity_world_mps: None,
        moving: None,
        cameras: Vec::new(),
        best_camera: None,
        rgb_class: None,
        rgb_score: None,
        rgb_agrees: None,
        rgb_note: None,
        flags: Vec::new(),
        review_status: "verified".to_string(),
    }
}

/// Track rows after the import: touched tracks recounted from their rows (class: the most
/// common among their non-rejected boxes), new tracks added; others as they were.
fn updated_tracks(
    tracks: &[TrackRow],
    boxes: &[BoxRow],
    touched: &BTreeSet<i64>,
    new_tracks: &BTreeMap<String, i64>,
) -> Vec<TrackRow> {
    let source_of: HashMap<i64, String> = new_tracks.iter().map(|(t, id)| (*id, format!("xtreme1:{t}"))).collect();
    let mut out: Vec<TrackRow> = tracks.to_vec();
    for &id in touched {
        let rows: Vec<&BoxRow> = boxes.iter().filter(|b| b.track_id == id).collect();
        if rows.is_empty() {
            continue;
        }
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for b in rows.iter().filter(|b| b.review_status != "rejected") {
            *votes.entry(b.class.as_str()).or_default() += 1;
        }
        let position = out.iter().position(|t| t.track_id == id);
        let current = position.map(|p| out[p].class.clone());
        let best = votes.values().copied().max().unwrap_or(0);
        let class = match &current {
            Some(c) if votes.get(c.as_str()) == Some(&best) || best == 0 => c.clone(),
            _ => votes
                .iter()
                .find(|(_, n)| **n == best)
                .map_or_else(|| rows[0].class.clone(), |(c, _)| c.to_string()),
        };
        let first = rows.iter().map(|b| b.frame_index).min().unwrap_or(0);
        let last = rows.iter().map(|b| b.frame_index).max().unwrap_or(0);
        match position {
            Some(p) => {
                let t = &mut out[p];
                t.class = class;
                t.first_frame = first;
                t.last_frame = last;
                t.num_boxes = rows.len() as i64;
            }
            None => out.push(TrackRow {
                track_id: id,
                source_track_id: source_of.get(&id).cloned(),
                class,
                motion: None,
                first_frame: first,
                last_frame: last,
                num_boxes: rows.len() as i64,
                num_detected: 0,
                score: 1.0,
                size_lwh_m: None,
            }),
        }
    }
    out.sort_by_key(|t| t.track_id);
    out
}

fn json_box(v: &[f64; 9]) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

// ---- writing ------------------------------------------------------------------------------

fn write_plan(sequence: &ShardSequence, plan: Plan) -> Result<PathBuf, ExportError> {
    let edits_path = sequence.dir.join("edits.parquet");
    let mut history = if edits_path.is_file() {
        read_edit_rows(&edits_path)?
    } else {
        Vec::new()
    };
    history.extend(plan.edits);
    let mut manifest = sequence.manifest.clone();
    let counts = &mut manifest.counts;
    counts.boxes = plan.boxes.len() as u64;
    counts.tracks = plan.tracks.len() as u64;
    counts.flagged = plan.boxes.iter().filter(|b| b.review_status == "flagged").count() as u64;
    counts.boxes_by_class.clear();
    counts.boxes_by_origin.clear();
    for b in &plan.boxes {
        *counts.boxes_by_class.entry(b.class.clone()).or_default() += 1;
        *counts.boxes_by_origin.entry(b.origin.clone()).or_default() += 1;
    }
    let replacement = Replacement {
        frames: Some(&plan.frames),
        boxes: Some(&plan.boxes),
        tracks: Some(&plan.tracks),
        edits: Some(&history),
    };
    let options = crate::pipeline::shard_options(&sequence.manifest);
    Ok(replace_sequence(&sequence.dir, &manifest, options, replacement)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(json: &str) -> Result<Object, String> {
        parse_object(&serde_json::from_str(json).unwrap(), &ImportOptions::default())
    }

    #[test]
    fn objects_need_finite_numbers_and_a_known_class() {
        let ok = r#"{"type":"3D_BOX","className":"Car","trackId":"7","contour":{"center3D":{"x":1,"y":2,"z":0.5},
            "size3D":{"x":4,"y":2,"z":1.5},"rotation3D":{"x":0,"y":0,"z":0.3}}}"#;
        let o = object(ok).unwrap();
        assert_eq!((o.class.as_str(), o.track_id.as_deref()), ("vehicle", Some("7")));
        assert!((o.boxed.yaw - 0.3).abs() < 1e-12);
        let e = object(&ok.replace("\"x\":1,", "\"x\":null,")).unwrap_err();
        assert!(e.contains("center3D.x is not a finite number"), "{e}");
        let e = object(&ok.replace("Car", "Boat")).unwrap_err();
        assert!(e.contains("unknown class `Boat`"), "{e}");
        let by_id = ok.replace("\"className\":\"Car\"", "\"className\":null,\"classId\":2");
        assert_eq!(object(&by_id).unwrap().class, "pedestrian");
        let e = object(&ok.replace("\"z\":1.5", "\"z\":0")).unwrap_err();
        assert!(e.contains("not positive"), "{e}");
    }

    #[test]
    fn result_files_take_the_ground_truth_source() {
        let text = r#"[{"sourceName":"Model A","objects":[]},
            {"sourceName":"Ground Truth","objects":[{"type":"3D_BOX","className":"pedestrian","trackId":"3",
              "contour":{"center3D":{"x":1,"y":2,"z":0.5},"size3D":{"x":0.6,"y":0.6,"z":1.7},"rotation3D":{"x":0,"y":0,"z":0}}},
              {"type":"2D_RECT","contour":{"points":[]}}]}]"#;
        let objects = parse_result("r.json", text.as_bytes(), &ImportOptions::default()).unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].class, "pedestrian");
        assert!(parse_result("r.json", b"[{\"objects\": 5}]", &ImportOptions::default()).is_err());
        let e = parse_result(
            "r.json",
            b"{\"objects\": [{\"type\": \"3D_BOX\", \"contour\": NaN}]}",
            &ImportOptions::default(),
        )
        .unwrap_err();
        assert!(e.starts_with("not JSON"), "{e}");
    }
}
