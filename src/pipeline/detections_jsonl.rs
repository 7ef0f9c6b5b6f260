//! Detections a user brings, as JSON lines: one box per line, `{"sequence": "…", "frame": 3,
//! "box": [x, y, z, l, w, h, yaw(, pitch, roll)], "class": "vehicle", "score": 0.8, "detector":
//! "mine"}`, boxes in the sensor frame of the frame (`frame` is the frame index). `boxlayer run
//! --detections` takes them instead of running detectors; `boxlayer fuse` fuses them alone and
//! `boxlayer track` tracks per-frame boxes (fused or a single detector's) alone.

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

/// A log's frames as the tracker sees them: by frame index, the sweep's time and pose and the
/// position to read its points from.
struct LogFrames<'a> {
    source: &'a dyn crate::sources::Source,
    by_index: BTreeMap<i64, (usize, i64, nalgebra::Isometry3<f64>)>,
}

impl<'a> LogFrames<'a> {
    fn read(source: &'a dyn crate::sources::Source) -> Result<Self, PipelineError> {
        let mut by_index = BTreeMap::new();
        for position in 0..source.len() {
            match source.frame(position) {
                Ok(f) => {
                    by_index.insert(f.index as i64, (position, f.timestamp_micros, f.world_from_sensor));
                }
                Err(e) => tracing::warn!("{e}; its boxes are tracked without its pose"),
            }
        }
        Ok(Self { source, by_index })
    }
}

/// The points of the frames being tracked, read from the log when the tracker asks.
struct LogPoints<'a> {
    log: &'a LogFrames<'a>,
    /// Tracker frame → source position.
    positions: Vec<Option<usize>>,
}

impl crate::track::SweepPoints for LogPoints<'_> {
    fn points_in_sensor(&self, frame: usize) -> Option<std::sync::Arc<crate::cloud::PointCloud>> {
        let position = (*self.positions.get(frame)?)?;
        self.log
            .source
            .frame(position)
            .ok()
            .map(|f| std::sync::Arc::new(f.cloud))
    }
}

/// Sweep period assumed between frames when no log gives their times (10 Hz, Waymo's and the
/// Ouster's rate).
pub const DEFAULT_FRAME_PERIOD_MICROS: i64 = 100_000;

/// Most frames one sequence may span without a log (a guard against a stray frame number).
const MAX_TRACKED_FRAMES: i64 = 1_000_000;

/// Tracks every sequence of `path` (per-frame boxes as evaluator JSON lines, as `boxlayer fuse`
/// writes them) with `tracking` resolved for `platform`; returns the consolidated boxes as JSON
/// lines with their `track_id` and `origin`, sorted by sequence, frame and track. With `log` (for
/// the sequence of its name, or the file's only one), the frames tracked are the log's, each with
/// its time, pose and points (boxes on frames the log lacks are left out, with a warning);
/// without, every index between the first and last is a frame, 100 ms apart, the sensor still.
pub fn track_boxes_file(
    path: &Path,
    tracking: &crate::track::TrackingProfiles,
    platform: crate::frame::Platform,
    log: Option<&dyn crate::sources::Source>,
) -> Result<String, PipelineError> {
    use crate::track::{TrackFrame, TrackInputBox};
    let data = crate::eval::input::load_jsonl(path).map_err(|e| PipelineError::Config(e.to_string()))?;
    if !data.queries.is_empty() {
        return Err(PipelineError::Config(format!(
            "{}: grounding lines (`query`) are not boxes to track",
            path.display()
        )));
    }
    let log = log.map(LogFrames::read).transpose()?;
    let mut sequences: BTreeMap<String, BTreeMap<i64, Vec<TrackInputBox>>> = BTreeMap::new();
    for b in data.boxes {
        sequences
            .entry(b.frame.sequence)
            .or_default()
            .entry(b.frame.frame as i64)
            .or_default()
            .push(TrackInputBox {
                box3: b.bbox,
                class: b.class,
                score: b.score,
                votes: 1,
            });
    }
    let mut text = String::new();
    let single = sequences.len() == 1;
    for (sequence, frames) in sequences {
        // The log serves the sequence of its name (or the only one, with a word if they differ).
        let log = log.as_ref().filter(|l| {
            let name = &l.source.meta().name;
            if *name != sequence && single {
                tracing::warn!(
                    "{}: sequence `{sequence}` tracked with the log of `{name}`",
                    path.display()
                );
            } else if *name != sequence {
                tracing::warn!(
                    "{}: sequence `{sequence}` is not the log's `{name}`; tracked without it",
                    path.display()
                );
            }
            *name == sequence || single
        });
        let (first, last) = match (frames.keys().next(), frames.keys().next_back()) {
            (Some(a), Some(b)) => (*a, *b),
            _ => continue,
        };
        // The frames tracked: with a log, those it holds from the first to the last with boxes
        // (their times and poses); without, every index in between at 10 Hz, so gaps can be filled.
        let indices: Vec<i64> = match log {
            Some(l) => {
                for index in frames.keys().filter(|i| !l.by_index.contains_key(i)) {
                    tracing::warn!("{sequence}: frame {index} is not in the log; its boxes are left out");
                }
                l.by_index.range(first..=last).map(|(i, _)| *i).collect()
            }
            None if last - first >= MAX_TRACKED_FRAMES => {
                return Err(PipelineError::Config(format!(
                    "{}: sequence `{sequence}` spans frames {first}..={last}, over {MAX_TRACKED_FRAMES} frames",
                    path.display()
                )));
            }
            None => (first..=last).collect(),
        };
        let mut track_frames = Vec::with_capacity(indices.len());
        let mut positions = Vec::with_capacity(indices.len());
        for &index in &indices {
            let known = log.and_then(|l| l.by_index.get(&index));
            let (timestamp_micros, world_from_sensor) = match known {
                Some((_, t, pose)) => (*t, *pose),
                None => (index * DEFAULT_FRAME_PERIOD_MICROS, nalgebra::Isometry3::identity()),
            };
            positions.push(known.map(|k| k.0));
            track_frames.push(TrackFrame {
                timestamp_micros,
                world_from_sensor,
                boxes: frames.get(&index).cloned().unwrap_or_default(),
            });
        }
        let consolidation = match log {
            Some(log) => crate::track::consolidate(
                &track_frames,
                &LogPoints { log, positions },
                tracking.for_platform(platform),
            ),
            None => crate::track::consolidate(&track_frames, &crate::track::NoPoints, tracking.for_platform(platform)),
        }
        .map_err(|source| PipelineError::Track {
            sequence: sequence.clone(),
            source,
        })?;
        for b in &consolidation.boxes {
            let e = crate::eval::EvalBox {
                frame: crate::eval::FrameKey {
                    sequence: sequence.clone(),
                    frame: indices[b.frame].max(0) as u64,
                },
                bbox: b.box_in_sensor,
                class: b.class,
                score: b.score,
                track_id: Some(b.track_id.to_string()),
                num_points: None,
                platform: Some(platform),
            };
            let mut row = crate::eval::input::to_json_row(&e);
            row.insert("origin".into(), b.origin.as_str().into());
            text.push_str(&serde_json::Value::Object(row).to_string());
            text.push('\n');
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

    /// Without a log, frames are 100 ms apart and the sensor still: a box seen on frames 10, 11,
    /// 13 and 14 is one track, frame 12 interpolated between its neighbours.
    #[test]
    fn without_a_log_a_gap_is_interpolated_at_ten_hertz() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fused.jsonl");
        let mut text = String::new();
        for frame in [10, 11, 13, 14] {
            let x = 10.0 + 0.5 * f64::from(frame - 10);
            text.push_str(&format!(
                "{{\"sequence\":\"s\",\"frame\":{frame},\"box\":[{x},2,0,4,2,1.5,0],\"class\":\"vehicle\",\"score\":0.9}}\n"
            ));
        }
        std::fs::write(&path, text).unwrap();
        let out = track_boxes_file(
            &path,
            &crate::track::TrackingProfiles::default(),
            crate::frame::Platform::Vehicle,
            None,
        )
        .unwrap();
        let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let frames: Vec<u64> = rows.iter().map(|r| r["frame"].as_u64().unwrap()).collect();
        assert_eq!(frames, [10, 11, 12, 13, 14], "{out}");
        assert!(rows.iter().all(|r| r["track_id"] == rows[0]["track_id"]), "{out}");
        assert_eq!(rows[2]["origin"], "interpolated");
        // Halfway between 10.5 and 11.5 (a constant-velocity track).
        assert!((rows[2]["box"][0].as_f64().unwrap() - 11.0).abs() < 0.05, "{out}");
    }

    /// A stray frame number far from the rest is an error naming the span, not a billion frames.
    #[test]
    fn a_sequence_spanning_millions_of_frames_is_refused_without_a_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fused.jsonl");
        let line = |frame: u64| {
            format!("{{\"sequence\":\"s\",\"frame\":{frame},\"box\":[1,2,0,4,2,1.5,0],\"class\":\"vehicle\"}}\n")
        };
        std::fs::write(&path, line(0) + &line(2_000_000)).unwrap();
        let e = track_boxes_file(
            &path,
            &crate::track::TrackingProfiles::default(),
            crate::frame::Platform::Vehicle,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("spans frames 0..=2000000"), "{e}");
    }
}
