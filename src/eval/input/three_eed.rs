//! 3EED-layout folders: `[<platform>/]<sequence>/<NNNN_k>/meta_info.json`, GT and predictions alike.
//! Each `ground_info[i]` entry is one grounding query (its `bbox_3d` the referred object, or a list
//! of boxes for a multi-object query); the detection boxes of a frame are the distinct boxes among
//! the `ground_info` targets and their `others[].bbox_3d_other`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{EvalBox, EvalData, FrameKey, GroundingQuery, box_from_values, replace_non_finite_tokens};
use crate::eval::EvalError;
use crate::frame::{ObjectClass, Platform};
use crate::geometry::Box3;

/// Maps a 3EED class name (`car`, `bus`, `othervehicle`, `truck`, `pedestrian`, `cyclist`) or a
/// canonical boxlayer name onto the canonical classes; `None` for anything else.
pub fn class_from_3eed_name(name: &str) -> Option<ObjectClass> {
    match name.to_ascii_lowercase().as_str() {
        "car" | "bus" | "othervehicle" | "truck" | "vehicle" => Some(ObjectClass::Vehicle),
        "pedestrian" => Some(ObjectClass::Pedestrian),
        "cyclist" => Some(ObjectClass::Cyclist),
        "unknown" => Some(ObjectClass::Unknown),
        _ => None,
    }
}

/// The platform of a 3EED top-level folder name.
fn platform_from_folder(name: &str) -> Option<Platform> {
    match name {
        "waymo" => Some(Platform::Vehicle),
        "drone" => Some(Platform::Drone),
        "quad" => Some(Platform::Quadruped),
        _ => None,
    }
}

/// Reads every `meta_info.json` under `root` (searched recursively, in sorted path order).
pub fn load_3eed(root: &Path) -> Result<EvalData, EvalError> {
    let mut files = Vec::new();
    if root.is_file() {
        files.push(root.to_path_buf());
    } else {
        find_meta_files(root, &mut files)?;
    }
    if files.is_empty() {
        return Err(EvalError::Empty {
            path: root.to_path_buf(),
            expected: "meta_info.json files in <sequence>/<NNNN_k>/ folders",
        });
    }
    let mut data = EvalData::default();
    for file in &files {
        read_meta_file(file, &mut data)?;
    }
    Ok(data)
}

fn find_meta_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), EvalError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| EvalError::io(dir, e))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| EvalError::io(dir, e))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            find_meta_files(&path, out)?;
        } else if path.file_name().is_some_and(|n| n == "meta_info.json") {
            out.push(path);
        }
    }
    Ok(())
}

/// `NNNN_k` → (frame NNNN, view k); a bare `NNNN` is view 0.
fn parse_frame_folder(name: &str) -> Option<(u64, u64)> {
    match name.split_once('_') {
        Some((frame, view)) => Some((frame.parse().ok()?, view.parse().ok()?)),
        None => Some((name.parse().ok()?, 0)),
    }
}

fn read_meta_file(path: &Path, data: &mut EvalData) -> Result<(), EvalError> {
    let folder_name = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .map(str::to_string)
    };
    let frame_dir = path.parent();
    let frame_name =
        folder_name(frame_dir).ok_or_else(|| EvalError::parse(path, "path", "no frame folder above meta_info.json"))?;
    let (frame, view) = parse_frame_folder(&frame_name)
        .ok_or_else(|| EvalError::parse(path, "path", format!("frame folder `{frame_name}` is not NNNN_k")))?;
    let sequence_dir = frame_dir.and_then(Path::parent);
    let sequence_name = folder_name(sequence_dir)
        .ok_or_else(|| EvalError::parse(path, "path", "no sequence folder above the frame folder"))?;
    let platform = folder_name(sequence_dir.and_then(Path::parent)).and_then(|n| platform_from_folder(&n));
    // Each Waymo camera view is its own rotated copy of the frame, so views are separate sequences.
    let sequence = if view == 0 {
        sequence_name.clone()
    } else {
        format!("{sequence_name}:view{view}")
    };
    let key = FrameKey { sequence, frame };

    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    // Python's json writes NaN and Infinity, which are not JSON: read them as null, and skip the
    // queries holding one (issue 18: one NaN label aborted a whole evaluation).
    let (meta, non_finite): (Value, bool) = match serde_json::from_str(&text) {
        Ok(meta) => (meta, false),
        Err(e) => match replace_non_finite_tokens(&text, "null").and_then(|t| serde_json::from_str(&t).ok()) {
            Some(meta) => (meta, true),
            None => return Err(EvalError::parse(path, "json", e.to_string())),
        },
    };
    let ground_info = meta
        .get("ground_info")
        .and_then(Value::as_array)
        .ok_or_else(|| EvalError::parse(path, "ground_info", "missing or not a list"))?;

    let mut frame_boxes: Vec<EvalBox> = Vec::new();
    let mut add_box = |b: EvalBox| {
        // The same object appears once per query that refers to it and in other queries' `others`.
        if !frame_boxes
            .iter()
            .any(|e| e.bbox.to_array().map(f64::to_bits) == b.bbox.to_array().map(f64::to_bits))
        {
            frame_boxes.push(b);
        }
    };
    for (i, entry) in ground_info.iter().enumerate() {
        let at = |field: &str| format!("ground_info[{i}].{field}");
        if non_finite && has_null_number(entry) {
            tracing::warn!(
                "{}: ground_info[{i}]: a non-finite value (NaN or Infinity); the query and its boxes are skipped",
                path.display()
            );
            continue;
        }
        let class = match entry.get("class") {
            None | Some(Value::Null) => ObjectClass::Unknown,
            Some(v) => {
                let name = v
                    .as_str()
                    .ok_or_else(|| EvalError::parse(path, at("class"), "not a string"))?;
                class_from_3eed_name(name)
                    .ok_or_else(|| EvalError::parse(path, at("class"), format!("unknown class `{name}`")))?
            }
        };
        let score = match entry.get("score") {
            None | Some(Value::Null) => 1.0,
            Some(v) => v
                .as_f64()
                .filter(|s| s.is_finite())
                .ok_or_else(|| EvalError::parse(path, at("score"), "not a finite number"))?,
        };
        let num_points = match entry.get("num_points") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| EvalError::parse(path, at("num_points"), "not a non-negative integer"))?,
            ),
        };
        let track_id = entry.get("track_id").and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
        let targets = boxes_of(entry.get("bbox_3d"))
            .map_err(|r| EvalError::parse(path, at("bbox_3d"), r))?
            .ok_or_else(|| EvalError::parse(path, at("bbox_3d"), "missing"))?;
        for (t, bbox) in targets.iter().enumerate() {
            add_box(EvalBox {
                frame: key.clone(),
                bbox: *bbox,
                class,
                score,
                // A per-entry track id only names the single target of a single-object query.
                track_id: if targets.len() == 1 { track_id.clone() } else { None },
                num_points: if t == 0 && targets.len() == 1 { num_points } else { None },
                platform,
            });
        }
        data.queries.push(GroundingQuery {
            id: format!("{sequence_name}/{frame_name}/{i}"),
            frame: key.clone(),
            platform,
            boxes: targets,
        });
        if let Some(others) = entry.get("others").and_then(Value::as_array) {
            for (j, other) in others.iter().enumerate() {
                let at_other = |field: &str| format!("ground_info[{i}].others[{j}].{field}");
                let Some(boxes) = boxes_of(other.get("bbox_3d_other"))
                    .map_err(|r| EvalError::parse(path, at_other("bbox_3d_other"), r))?
                else {
                    continue;
                };
                let other_class = other
                    .get("class")
                    .and_then(Value::as_str)
                    .map(|name| {
                        class_from_3eed_name(name)
                            .ok_or_else(|| EvalError::parse(path, at_other("class"), format!("unknown class `{name}`")))
                    })
                    .transpose()?
                    .unwrap_or(ObjectClass::Unknown);
                for bbox in boxes {
                    add_box(EvalBox {
                        frame: key.clone(),
                        bbox,
                        class: other_class,
                        score,
                        track_id: None,
                        num_points: None,
                        platform,
                    });
                }
            }
        }
    }
    data.boxes.extend(frame_boxes);
    Ok(())
}

/// Whether `entry` holds a null inside a list or as its `score`: where a non-finite number was.
fn has_null_number(entry: &Value) -> bool {
    fn in_lists(v: &Value, inside_list: bool) -> bool {
        match v {
            Value::Null => inside_list,
            Value::Array(items) => items.iter().any(|x| in_lists(x, true)),
            Value::Object(map) => map.values().any(|x| in_lists(x, false)),
            _ => false,
        }
    }
    entry.get("score").is_some_and(Value::is_null) || in_lists(entry, false)
}

/// One box (a flat list of numbers) or several (a list of such lists); `None` when absent.
fn boxes_of(value: Option<&Value>) -> Result<Option<Vec<Box3>>, String> {
    let Some(value) = value else { return Ok(None) };
    if value.is_null() {
        return Ok(None);
    }
    let list = value.as_array().ok_or("not a list")?;
    let numbers = |v: &[Value]| -> Result<Vec<f64>, String> {
        v.iter()
            .map(|x| x.as_f64().ok_or_else(|| format!("`{x}` is not a number")))
            .collect()
    };
    if list.iter().all(Value::is_array) && !list.is_empty() {
        list.iter()
            .map(|inner| box_from_values(&numbers(inner.as_array().map(Vec::as_slice).unwrap_or(&[]))?))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    } else {
        Ok(Some(vec![box_from_values(&numbers(list)?)?]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_meta(root: &Path, rel: &str, json: &str) {
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("meta_info.json"), json).unwrap();
    }

    #[test]
    fn reads_queries_boxes_platform_and_views() {
        let tmp = tempfile::tempdir().unwrap();
        let car = "[10, 0, 0, 4, 2, 1.5, 0.3]";
        let ped = "[5, 5, 0, 0.8, 0.8, 1.8, 0, 0.01, 0.02]";
        write_meta(
            tmp.path(),
            "waymo/segA/0002_1",
            &format!(
                r#"{{"ground_info": [
                    {{"class": "truck", "bbox_3d": {car}, "others": [{{"bbox_3d_other": {ped}, "class": "pedestrian"}}]}},
                    {{"class": "pedestrian", "bbox_3d": {ped}, "others": [{{"bbox_3d_other": {car}}}]}}
                ]}}"#
            ),
        );
        write_meta(
            tmp.path(),
            "quad/seqB/0000_0",
            r#"{"ground_info": [{"class": "car", "bbox_3d": [[0,0,0,4,2,1.5,0],[9,0,0,4,2,1.5,0]], "score": 0.5}]}"#,
        );
        let d = load_3eed(tmp.path()).unwrap();
        // Sorted paths: quad/… before waymo/….
        assert_eq!(d.queries.len(), 3);
        assert_eq!(d.queries[0].id, "seqB/0000_0/0");
        assert_eq!(d.queries[0].boxes.len(), 2);
        assert_eq!(d.queries[0].platform, Some(Platform::Quadruped));
        assert_eq!(d.queries[1].frame.sequence, "segA:view1");
        assert_eq!(d.queries[1].frame.frame, 2);
        // Two quad boxes + the waymo car and pedestrian, each once.
        assert_eq!(d.boxes.len(), 4);
        let waymo: Vec<_> = d
            .boxes
            .iter()
            .filter(|b| b.platform == Some(Platform::Vehicle))
            .collect();
        assert_eq!(waymo.len(), 2);
        assert_eq!(waymo[0].class, ObjectClass::Vehicle);
        assert_eq!(waymo[1].class, ObjectClass::Pedestrian);
        assert_eq!(waymo[1].bbox.roll, 0.02);
        assert_eq!(d.boxes[0].score, 0.5);
    }

    /// Issue 18: one NaN label (Python's json writes `NaN`) aborted the whole evaluation; now that
    /// query is skipped with a warning and the rest of the file and folder are read.
    #[test]
    fn a_nan_label_skips_its_query_only() {
        let tmp = tempfile::tempdir().unwrap();
        write_meta(
            tmp.path(),
            "drone/s/0000_0",
            r#"{"ground_info": [
                {"class": "car", "bbox_3d": [NaN, 0, 0, 4, 2, 1.5, 0], "caption": "NaN in text"},
                {"class": "car", "bbox_3d": [9, 0, 0, 4, 2, 1.5, 0], "others": [{"bbox_3d_other": null}]},
                {"class": "car", "bbox_3d": [1, 0, 0, 4, 2, 1.5, 0], "score": Infinity}
            ]}"#,
        );
        write_meta(
            tmp.path(),
            "drone/s/0001_0",
            r#"{"ground_info": [{"class": "car", "bbox_3d": [2, 0, 0, 4, 2, 1.5, 0]}]}"#,
        );
        let d = load_3eed(tmp.path()).unwrap();
        assert_eq!(d.queries.len(), 2);
        let xs: Vec<f64> = d.boxes.iter().map(|b| b.bbox.x).collect();
        assert_eq!(xs, [9.0, 2.0]);
        // Garbage is still an error naming the file.
        write_meta(tmp.path(), "drone/s/0002_0", r#"{"ground_info": [NaN"#);
        assert!(load_3eed(tmp.path()).unwrap_err().to_string().contains("0002_0"));
    }

    #[test]
    fn malformed_entries_name_file_and_field() {
        let tmp = tempfile::tempdir().unwrap();
        write_meta(
            tmp.path(),
            "s/0000_0",
            r#"{"ground_info": [{"class": "car", "bbox_3d": [1, 2]}]}"#,
        );
        let e = load_3eed(tmp.path()).unwrap_err().to_string();
        assert!(
            e.contains("meta_info.json: ground_info[0].bbox_3d: expected 6, 7 or 9"),
            "{e}"
        );
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(load_3eed(empty.path()), Err(EvalError::Empty { .. })));
        let bad_name = tempfile::tempdir().unwrap();
        write_meta(bad_name.path(), "s/abc", r#"{"ground_info": []}"#);
        assert!(
            load_3eed(bad_name.path())
                .unwrap_err()
                .to_string()
                .contains("`abc` is not NNNN_k")
        );
    }
}
