//! Detections a user brings, as JSON lines: one box per line, `{"sequence": "…", "frame": 3,
//! "box": [x, y, z, l, w, h, yaw(, pitch, roll)], "class": "vehicle", "score": 0.8, "detector":
//! "mine"}`, boxes in the sensor frame of the frame (`frame` is the frame index). `boxlayer run
//! --detections` takes them instead of running detectors; `boxlayer fuse` fuses them alone.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::boxes::Detection;
use crate::frame::ObjectClass;
use crate::geometry::Box3;

use super::PipelineError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DetectionLine {
    sequence: String,
    frame: i64,
    #[serde(rename = "box")]
    values: Vec<f64>,
    class: String,
    score: f32,
    detector: String,
}

/// Every sequence's detections in `path`: sequence → frame index → boxes, in file order.
pub fn read_detections_jsonl(path: &Path) -> Result<BTreeMap<String, BTreeMap<i64, Vec<Detection>>>, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|source| PipelineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |line: usize, detail: String| PipelineError::Config(format!("{}: line {line}: {detail}", path.display()));
    let mut out: BTreeMap<String, BTreeMap<i64, Vec<Detection>>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let d: DetectionLine = serde_json::from_str(line).map_err(|e| bad(i + 1, e.to_string()))?;
        let v = &d.values;
        let box3 = match v.len() {
            7 => Box3::new(v[0], v[1], v[2], v[3], v[4], v[5], v[6]),
            9 => Box3::from_array([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]]),
            n => return Err(bad(i + 1, format!("field `box`: expected 7 or 9 values, got {n}"))),
        };
        let class: ObjectClass = d.class.parse().map_err(|e| bad(i + 1, format!("field `class`: {e}")))?;
        out.entry(d.sequence)
            .or_default()
            .entry(d.frame)
            .or_default()
            .push(Detection {
                box3,
                class,
                score: d.score,
                detector: d.detector,
            });
    }
    Ok(out)
}

/// Fuses every frame of `path` (JSON-lines detections) with `fusion` resolved for `platform`;
/// returns the fused boxes as evaluator JSON lines (sequence, frame, box, class, score), sorted
/// by sequence and frame.
pub fn fuse_detections_file(
    path: &Path,
    fusion: &crate::fuse::FusionConfig,
    platform: crate::frame::Platform,
) -> Result<String, PipelineError> {
    let fuser = crate::fuse::Fuser::new(fusion, platform).map_err(|e| PipelineError::Config(e.to_string()))?;
    let mut text = String::new();
    for (sequence, frames) in read_detections_jsonl(path)? {
        for (frame, detections) in frames {
            let fused = fuser.fuse(&detections).map_err(|source| PipelineError::Fuse {
                sequence: sequence.clone(),
                frame,
                source,
            })?;
            for b in fused {
                let e = crate::eval::EvalBox {
                    frame: crate::eval::FrameKey {
                        sequence: sequence.clone(),
                        frame: frame.max(0) as u64,
                    },
                    bbox: b.box3,
                    class: b.class,
                    score: f64::from(b.score),
                    track_id: None,
                    num_points: None,
                    platform: Some(platform),
                };
                text.push_str(&crate::eval::input::to_json_line(&e));
                text.push('\n');
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_group_by_sequence_and_frame_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"sequence":"s","frame":2,"box":[1,2,0,4,2,1.5,0.1],"class":"vehicle","score":0.9,"detector":"a"}"#,
                "\n\n",
                r#"{"sequence":"s","frame":2,"box":[1,2,0,4,2,1.5,0.1,0,0],"class":"vehicle","score":0.5,"detector":"b"}"#,
                "\n"
            ),
        )
        .unwrap();
        let d = read_detections_jsonl(&path).unwrap();
        assert_eq!(d["s"][&2].len(), 2);
        assert_eq!(d["s"][&2][1].detector, "b");
        std::fs::write(
            &path,
            r#"{"sequence":"s","frame":2,"box":[1,2],"class":"vehicle","score":0.9,"detector":"a"}"#,
        )
        .unwrap();
        let e = read_detections_jsonl(&path).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("`box`"), "{e}");
    }
}
