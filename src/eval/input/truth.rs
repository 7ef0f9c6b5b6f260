//! The simulator's ground-truth Parquet (`<seq>_boxes_gt.parquet`, `docs/simulator.md`) as
//! evaluation input: one box per row, in the sensor frame, with its track id, class, LiDAR point
//! count and platform, as the JSON-lines truth written beside it holds them.

use std::fs::File;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, UInt32Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{EvalBox, EvalData, FrameKey};
use crate::eval::EvalError;
use crate::frame::{ObjectClass, Platform};
use crate::geometry::Box3;

/// Whether `path` is named as a simulator truth box file.
pub(crate) fn looks_like_truth(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("_boxes_gt.parquet"))
}

/// Loads every box row of a `<seq>_boxes_gt.parquet` file.
pub fn load_truth_parquet(path: &Path) -> Result<EvalData, EvalError> {
    let file = File::open(path).map_err(|e| EvalError::io(path, e))?;
    let parse = |location: &str, reason: String| EvalError::parse(path, location.to_string(), reason);
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| parse("footer", e.to_string()))?;
    let mut data = EvalData::default();
    let mut row0 = 0usize;
    for batch in reader {
        let batch = batch.map_err(|e| parse(&format!("row {row0}"), e.to_string()))?;
        push_rows(&batch, row0, &mut data).map_err(|(row, reason)| parse(&row, reason))?;
        row0 += batch.num_rows();
    }
    Ok(data)
}

/// Appends a batch's rows; errors name the row (or the column) and what was wrong.
fn push_rows(batch: &RecordBatch, row0: usize, data: &mut EvalData) -> Result<(), (String, String)> {
    let column = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| (format!("column `{name}`"), "missing".to_string()))
    };
    let wrong = |name: &str| (format!("column `{name}`"), "has the wrong type".to_string());
    let strings = |name: &str| column(name)?.as_string_opt::<i32>().ok_or_else(|| wrong(name));
    let u32s = |name: &str| {
        column(name)?
            .as_primitive_opt::<UInt32Type>()
            .ok_or_else(|| wrong(name))
    };
    let (sequence, platform, track, class) = (
        strings("sequence")?,
        strings("platform")?,
        strings("track_id")?,
        strings("class")?,
    );
    let (frame, points) = (u32s("frame_index")?, u32s("num_lidar_points")?);
    let boxes = column("box_in_sensor")?
        .as_fixed_size_list_opt()
        .filter(|l| l.value_length() == 9)
        .ok_or_else(|| wrong("box_in_sensor"))?;
    let values = boxes
        .values()
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| wrong("box_in_sensor"))?;
    for i in 0..batch.num_rows() {
        let at = || format!("row {}", row0 + i);
        if [
            sequence.is_null(i),
            track.is_null(i),
            class.is_null(i),
            frame.is_null(i),
            boxes.is_null(i),
        ]
        .into_iter()
        .any(|n| n)
        {
            return Err((at(), "a required value is null".into()));
        }
        let v: Vec<f64> = (0..9).map(|k| values.value(boxes.value_offset_at(i) + k)).collect();
        if v.iter().any(|x| !x.is_finite()) {
            tracing::warn!("{}: a non-finite box value; the box is skipped", at());
            continue;
        }
        let class: ObjectClass = class
            .value(i)
            .parse()
            .map_err(|e| (format!("{}: column `class`", at()), format!("{e}")))?;
        data.boxes.push(EvalBox {
            frame: FrameKey {
                sequence: sequence.value(i).to_string(),
                frame: u64::from(frame.value(i)),
            },
            bbox: Box3::from_array([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]]),
            class,
            score: 1.0,
            track_id: Some(track.value(i).to_string()),
            num_points: (!points.is_null(i)).then(|| u64::from(points.value(i))),
            platform: (!platform.is_null(i))
                .then(|| platform.value(i).parse::<Platform>().ok())
                .flatten(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::input::load_jsonl;
    use crate::sim::{SimConfig, simulate_m3ed};

    /// The Parquet truth and the JSON-lines truth the simulator writes beside it are two writers
    /// of the same boxes: read back, they agree row for row.
    #[test]
    fn the_parquet_truth_reads_as_the_json_lines_truth() {
        let dir = tempfile::tempdir().unwrap();
        let config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        let s = simulate_m3ed(config, Platform::Quadruped, 2, 3, dir.path()).unwrap();
        let jsonl = load_jsonl(&s.truth_path).unwrap();
        let parquet = load_truth_parquet(&dir.path().join("spot_sim_seed3_boxes_gt.parquet")).unwrap();
        assert!(!jsonl.boxes.is_empty());
        assert_eq!(parquet.boxes.len(), jsonl.boxes.len());
        let key = |b: &EvalBox| (b.frame.clone(), b.track_id.clone());
        let mut a = parquet.boxes.clone();
        let mut b = jsonl.boxes.clone();
        a.sort_by_key(key);
        b.sort_by_key(key);
        for (p, j) in a.iter().zip(&b) {
            assert_eq!(
                (&p.frame, &p.track_id, p.class, p.num_points, p.platform),
                (&j.frame, &j.track_id, j.class, j.num_points, j.platform)
            );
            for (x, y) in p.bbox.to_array().iter().zip(j.bbox.to_array()) {
                assert!((x - y).abs() < 1e-9, "{p:?} vs {j:?}");
            }
        }
        assert!(looks_like_truth(&dir.path().join("spot_sim_seed3_boxes_gt.parquet")));
    }

    #[test]
    fn a_file_without_the_columns_is_refused_naming_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let config = SimConfig {
            frames: 1,
            ..SimConfig::default()
        };
        simulate_m3ed(config, Platform::Drone, 1, 3, dir.path()).unwrap();
        // The frames file has `sequence` and `frame_index` but no box columns.
        let e = load_truth_parquet(&dir.path().join("falcon_sim_seed3_frames_gt.parquet"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("falcon_sim_seed3_frames_gt.parquet") && e.contains("column `track_id`: missing"),
            "{e}"
        );
    }
}
