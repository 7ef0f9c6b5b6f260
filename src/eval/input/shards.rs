//! A run's shard output as evaluation input: every complete sequence folder (`_SUCCESS`) under a
//! path, its `boxes.parquet` rows as boxes in the sensor frame with their track ids, platform
//! from `manifest.json`.

use std::path::Path;

use super::{EvalBox, EvalData, FrameKey};
use crate::eval::EvalError;
use crate::frame::{ObjectClass, Platform};
use crate::geometry::Box3;
use crate::shards::{RunManifest, read_box_rows, sequence_dirs};

/// Whether `path` is a sequence folder or holds sequence folders (two levels down at most).
pub(crate) fn looks_like_shards(path: &Path) -> bool {
    !sequence_dirs(path).is_empty()
}

/// Loads every complete sequence folder at or under `path`.
pub fn load_shards(path: &Path) -> Result<EvalData, EvalError> {
    let dirs = sequence_dirs(path);
    if dirs.is_empty() {
        return Err(EvalError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no complete shard folder (boxes.parquet and _SUCCESS) here or two levels below",
            ),
        ));
    }
    let mut data = EvalData::default();
    for dir in dirs {
        let manifest_path = dir.join("manifest.json");
        let manifest: Option<RunManifest> = std::fs::read_to_string(&manifest_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let platform = manifest.as_ref().and_then(|m| m.platform.parse::<Platform>().ok());
        let sequence = manifest.map(|m| m.sequence).unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let boxes_path = dir.join("boxes.parquet");
        let rows =
            read_box_rows(&boxes_path).map_err(|e| EvalError::io(&boxes_path, std::io::Error::other(e.to_string())))?;
        for r in rows {
            data.boxes.push(EvalBox {
                frame: FrameKey {
                    sequence: sequence.clone(),
                    frame: r.frame_index.max(0) as u64,
                },
                bbox: Box3::from_array(r.box_sensor),
                class: r.class.parse().unwrap_or(ObjectClass::Unknown),
                score: r.score,
                track_id: Some(r.track_id.to_string()),
                num_points: Some(r.num_points_inside.max(0) as u64),
                platform,
            });
        }
    }
    Ok(data)
}
