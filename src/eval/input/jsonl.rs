//! The JSON-lines box list: one JSON object per line, one box per object (format in `docs/eval.md`).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::{
    EvalBox, EvalData, FrameKey, GroundingQuery, box_from_values, class_from_3eed_name, replace_non_finite_tokens,
};
use crate::eval::EvalError;
use crate::frame::Platform;

/// An id written as a string or as a non-negative integer.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum IdValue {
    Text(String),
    Number(u64),
}

impl IdValue {
    fn into_string(self) -> String {
        match self {
            IdValue::Text(s) => s,
            IdValue::Number(n) => n.to_string(),
        }
    }
}

/// One line as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoxLine {
    sequence: String,
    frame: u64,
    #[serde(rename = "box")]
    values: Vec<f64>,
    class: Option<String>,
    score: Option<f64>,
    track_id: Option<IdValue>,
    num_points: Option<u64>,
    platform: Option<Platform>,
    query: Option<IdValue>,
    /// The detector of a `boxlayer detect` line; not used in scoring.
    #[allow(dead_code)]
    detector: Option<String>,
    /// Where a `boxlayer track` box came from (`detected`, `interpolated`, …); not used in scoring.
    #[allow(dead_code)]
    origin: Option<String>,
}

/// One detection/tracking box as a JSON-lines row (no trailing newline), the inverse of
/// [`load_jsonl`]: 9 box values, the class, the score (omitted when 1), and the optional fields
/// that are set.
pub fn to_json_line(b: &EvalBox) -> String {
    serde_json::Value::Object(to_json_row(b)).to_string()
}

/// [`to_json_line`] as a JSON object, for writers that add fields of their own (`origin`).
pub fn to_json_row(b: &EvalBox) -> serde_json::Map<String, serde_json::Value> {
    let mut row = serde_json::Map::new();
    row.insert("sequence".into(), b.frame.sequence.clone().into());
    row.insert("frame".into(), b.frame.frame.into());
    row.insert("box".into(), b.bbox.to_array().to_vec().into());
    row.insert("class".into(), b.class.as_str().into());
    if b.score != 1.0 {
        row.insert("score".into(), b.score.into());
    }
    if let Some(id) = &b.track_id {
        row.insert("track_id".into(), id.clone().into());
    }
    if let Some(n) = b.num_points {
        row.insert("num_points".into(), n.into());
    }
    if let Some(p) = b.platform {
        row.insert("platform".into(), p.as_str().into());
    }
    row
}

/// Reads a JSON-lines box list. Lines with a `query` field are grounding boxes (grouped into
/// queries by that id, in order of first appearance); the others are detection/tracking boxes.
/// Blank lines are skipped. A file whose last line has no newline is refused as truncated (a
/// writer cut short); a line holding `NaN` or `Infinity` (as Python's `json` writes them) is
/// skipped with a warning naming the file and line, so one bad label does not sink the rest.
pub fn load_jsonl(path: &Path) -> Result<EvalData, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    let mut data = EvalData::default();
    let mut query_index: HashMap<String, usize> = HashMap::new();
    let mut lines = 0usize;
    let line_count = text.lines().count();
    let complete = text.is_empty() || text.ends_with('\n');
    for (i, line) in text.lines().enumerate() {
        let at = || format!("line {}", i + 1);
        if i + 1 == line_count && !complete {
            return Err(EvalError::parse(
                path,
                at(),
                "truncated: the last line has no newline (a file cut short or still being written)",
            ));
        }
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        let raw: BoxLine = match serde_json::from_str(line) {
            Ok(raw) => raw,
            Err(_) if has_non_finite_number(line) => {
                tracing::warn!(
                    "{}: {}: a non-finite value (NaN or Infinity); the box is skipped",
                    path.display(),
                    at()
                );
                continue;
            }
            Err(e) => return Err(EvalError::parse(path, at(), e.to_string())),
        };
        let bbox =
            box_from_values(&raw.values).map_err(|r| EvalError::parse(path, format!("{}: field `box`", at()), r))?;
        let frame = FrameKey {
            sequence: raw.sequence,
            frame: raw.frame,
        };
        if let Some(query) = raw.query {
            let id = query.into_string();
            match query_index.get(&id) {
                Some(&q) => {
                    let existing = &mut data.queries[q];
                    if existing.frame != frame {
                        return Err(EvalError::parse(
                            path,
                            format!("{}: field `query`", at()),
                            format!(
                                "query `{id}` was first given on {:?}, here on {:?}",
                                existing.frame, frame
                            ),
                        ));
                    }
                    existing.boxes.push(bbox);
                }
                None => {
                    query_index.insert(id.clone(), data.queries.len());
                    data.queries.push(GroundingQuery {
                        id,
                        frame,
                        platform: raw.platform,
                        boxes: vec![bbox],
                    });
                }
            }
            continue;
        }
        let class_name = raw
            .class
            .ok_or_else(|| EvalError::parse(path, at(), "missing field `class` on a detection box"))?;
        let class = class_from_3eed_name(&class_name).ok_or_else(|| {
            EvalError::parse(
                path,
                format!("{}: field `class`", at()),
                format!("unknown class `{class_name}`"),
            )
        })?;
        let score = raw.score.unwrap_or(1.0);
        if !score.is_finite() {
            return Err(EvalError::parse(
                path,
                format!("{}: field `score`", at()),
                "score must be finite",
            ));
        }
        data.boxes.push(EvalBox {
            frame,
            bbox,
            class,
            score,
            track_id: raw.track_id.map(IdValue::into_string),
            num_points: raw.num_points,
            platform: raw.platform,
        });
    }
    if lines == 0 {
        return Err(EvalError::Empty {
            path: path.to_path_buf(),
            expected: "JSON lines with one box each",
        });
    }
    Ok(data)
}

/// Whether `line` is a box line once its bare `NaN`, `Infinity` and `-Infinity` tokens are read
/// as numbers: a label with a non-finite value rather than a damaged line.
fn has_non_finite_number(line: &str) -> bool {
    replace_non_finite_tokens(line, "0").is_some_and(|text| serde_json::from_str::<BoxLine>(&text).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ObjectClass;
    use std::io::Write;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn written_lines_read_back_identically() {
        let boxes = [
            EvalBox {
                frame: FrameKey {
                    sequence: "s".into(),
                    frame: 4,
                },
                bbox: crate::geometry::Box3::from_array([1.5, -2.0, 0.25, 4.0, 2.0, 1.5, 0.3, 0.01, -0.02]),
                class: ObjectClass::Cyclist,
                score: 0.625,
                track_id: Some("17".into()),
                num_points: Some(42),
                platform: Some(Platform::Drone),
            },
            EvalBox {
                frame: FrameKey {
                    sequence: "s".into(),
                    frame: 5,
                },
                bbox: crate::geometry::Box3::new(0.1, 0.2, 0.3, 1.0, 1.0, 1.0, -3.0),
                class: ObjectClass::Vehicle,
                score: 1.0,
                track_id: None,
                num_points: None,
                platform: None,
            },
        ];
        let text: String = boxes.iter().map(|b| to_json_line(b) + "\n").collect();
        let f = write(&text);
        let data = load_jsonl(f.path()).unwrap();
        assert_eq!(data.boxes, boxes);
    }

    #[test]
    fn reads_boxes_and_queries() {
        let f = write(concat!(
            r#"{"sequence":"s","frame":3,"box":[1,2,3,4,2,1.5,0.1],"class":"car","score":0.8,"track_id":7,"num_points":12,"platform":"drone"}"#,
            "\n\n",
            r#"{"sequence":"s","frame":3,"box":[0,0,0,1,1,1],"query":"q1"}"#,
            "\n",
            r#"{"sequence":"s","frame":3,"box":[5,0,0,1,1,1,0,0,0],"query":"q1"}"#,
            "\n",
        ));
        let d = load_jsonl(f.path()).unwrap();
        assert_eq!(d.boxes.len(), 1);
        let b = &d.boxes[0];
        assert_eq!((b.class, b.score, b.num_points), (ObjectClass::Vehicle, 0.8, Some(12)));
        assert_eq!(b.track_id.as_deref(), Some("7"));
        assert_eq!(b.platform, Some(Platform::Drone));
        assert_eq!(b.bbox.yaw, 0.1);
        assert_eq!(d.queries.len(), 1);
        assert_eq!(d.queries[0].boxes.len(), 2);
    }

    #[test]
    fn errors_name_line_and_field() {
        let f = write("{\"sequence\":\"s\",\"frame\":0,\"box\":[1,2,3],\"class\":\"car\"}\n");
        let e = load_jsonl(f.path()).unwrap_err().to_string();
        assert!(e.contains("line 1: field `box`: expected 6, 7 or 9"), "{e}");
        let f = write("{\"sequence\":\"s\",\"frame\":0,\"box\":[0,0,0,1,1,1],\"class\":\"boat\"}\n");
        assert!(
            load_jsonl(f.path())
                .unwrap_err()
                .to_string()
                .contains("unknown class `boat`")
        );
        let f = write("{\"sequence\":\"s\",\"frame\":0,\"box\":[0,0,0,1,1,1],\"clas\":\"car\"}\n");
        assert!(load_jsonl(f.path()).unwrap_err().to_string().contains("line 1"));
        let f = write("\n");
        assert!(matches!(load_jsonl(f.path()), Err(EvalError::Empty { .. })));
    }

    const GOOD: &str = r#"{"sequence":"s","frame":0,"box":[0,0,0,1,1,1],"class":"car"}"#;

    /// Issue 18: a truncated file (killed writer) was accepted with its last box cut off.
    #[test]
    fn a_truncated_file_is_refused_naming_file_and_line() {
        let cut = &GOOD[..GOOD.len() - 9];
        for text in [format!("{GOOD}\n{GOOD}"), format!("{GOOD}\n{cut}")] {
            let f = write(&text);
            let e = load_jsonl(f.path()).unwrap_err();
            assert!(matches!(e, EvalError::Parse { .. }), "{e}");
            let e = e.to_string();
            assert!(e.starts_with(&f.path().display().to_string()), "{e}");
            assert!(e.contains("line 2: truncated"), "{e}");
        }
        let f = write(&format!("{GOOD}\n{cut}\n"));
        assert!(load_jsonl(f.path()).unwrap_err().to_string().contains("line 2"));
    }

    /// Issue 18: one NaN label (as Python's json writes it) aborted the whole evaluation.
    #[test]
    fn a_nan_label_is_skipped_and_the_rest_kept() {
        let nan = r#"{"sequence":"s","frame":1,"box":[NaN,0,0,1,1,1],"class":"car"}"#;
        let inf = r#"{"sequence":"s","frame":2,"box":[0,0,0,1,1,1],"class":"car","score":-Infinity}"#;
        let f = write(&format!("{GOOD}\n{nan}\n{inf}\n{GOOD}\n"));
        let d = load_jsonl(f.path()).unwrap();
        assert_eq!(d.boxes.len(), 2);
        assert!(d.boxes.iter().all(|b| b.frame.frame == 0));
        // `NaN` inside a string is not a number: that line is a real error.
        let f = write(concat!(
            r#"{"sequence":"NaN","frame":0,"box":[0,0,0,1,1,1],"clas":"car"}"#,
            "\n"
        ));
        assert!(load_jsonl(f.path()).is_err());
    }
}
