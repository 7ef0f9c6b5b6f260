//! `export 3eed`: 3EED's release layout, `<platform>/<sequence>/<NNNN>_<k>/{lidar.bin, image.jpg,
//! meta_info.json}` per (frame, camera view) with targets, and split files (`docs/export.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde_json::{Value, json};

use super::output::OutputDir;
use super::sequence::{
    PinholeCamera, SequenceLog, ShardSequence, frame_points, intensity_01, load_sequences, pinhole_cameras,
    pinhole_jpeg, points_in,
};
use super::{ExportError, ExportFrame, ExportSummary, ImageMode, LogLocation};
use crate::cloud::PointCloud;
use crate::frame::Platform;
use crate::geometry::Box3;
use crate::shards::BoxRow;

/// How `export 3eed` chooses and writes views.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreeEedOptions {
    /// Only frame indices divisible by this (1: every frame).
    pub every: usize,
    /// Keep views without a target (3EED drops them).
    pub all_frames: bool,
    /// Crop `lidar.bin` to the camera's field of view.
    pub crop_to_camera: bool,
    /// The frame points and boxes are written in.
    pub frame: ExportFrame,
    /// Sequences of the `val` split (the rest are `train`).
    pub val_sequences: Vec<String>,
    /// Only these sequences (all when empty).
    pub sequences: Vec<String>,
    /// Where the logs are.
    pub log: LogLocation,
    /// What the camera images are: pinhole resamplings (default) or the log's own.
    pub images: ImageMode,
}

impl Default for ThreeEedOptions {
    fn default() -> Self {
        Self {
            every: 1,
            all_frames: false,
            crop_to_camera: true,
            frame: ExportFrame::Sensor,
            val_sequences: Vec::new(),
            sequences: Vec::new(),
            log: LogLocation::DataRoot(PathBuf::from(".")),
            images: ImageMode::Pinhole,
        }
    }
}

/// 3EED's folder name for a platform.
fn platform_folder(platform: Platform) -> &'static str {
    match platform {
        Platform::Vehicle => "waymo",
        Platform::Drone => "drone",
        Platform::Quadruped => "quad",
        Platform::Other => "other",
    }
}

/// 3EED's class name for a canonical class; `None` for `unknown` (not a grounding target).
fn class_name(class: &str) -> Option<&'static str> {
    match class {
        "vehicle" => Some("car"),
        "pedestrian" => Some("pedestrian"),
        "cyclist" => Some("cyclist"),
        _ => None,
    }
}

/// Writes the sequences under `shards` in 3EED's layout into `out`.
pub fn export_3eed(shards: &Path, out: &Path, options: &ThreeEedOptions) -> Result<ExportSummary, ExportError> {
    if options.log == LogLocation::Without {
        return Err(ExportError::invalid(
            shards,
            "3EED samples are camera views: the export needs the logs' images (give --data-root or --log)",
        ));
    }
    let sequences = load_sequences(shards, &options.sequences)?;
    let output = OutputDir::create(out)?;
    let mut summary = ExportSummary {
        sequences: sequences.len(),
        ..ExportSummary::default()
    };
    let mut splits: BTreeMap<(String, &'static str), Vec<String>> = BTreeMap::new();
    for sequence in &sequences {
        let platform = platform_folder(sequence.platform()).to_string();
        let split = if options.val_sequences.contains(&sequence.manifest.sequence) {
            "val"
        } else {
            "train"
        };
        // Both split files exist for every platform exported, `val` empty unless named.
        splits.entry((platform.clone(), "val")).or_default();
        splits
            .entry((platform, split))
            .or_default()
            .push(sequence.manifest.sequence.clone());
        export_sequence(sequence, &output, options, &mut summary)?;
    }
    for ((platform, split), names) in splits {
        let text: String = names.iter().map(|n| format!("{n}\n")).collect();
        output.write(format!("splits/{platform}_{split}.txt"), text.as_bytes())?;
    }
    summary.out = output.finish()?;
    Ok(summary)
}

fn export_sequence(
    sequence: &ShardSequence,
    output: &OutputDir,
    options: &ThreeEedOptions,
    summary: &mut ExportSummary,
) -> Result<(), ExportError> {
    let Some(mut log) = SequenceLog::open(sequence, &options.log)?.map(|mut l| {
        l.images = options.images;
        l
    }) else {
        return Ok(());
    };
    let waymo = sequence.is_waymo();
    let platform = sequence.platform();
    let boxes_by_frame = sequence.boxes_by_frame();
    let Some(first) = sequence.frames.first() else {
        return Ok(());
    };
    let world_from_export = |row| -> Result<Isometry3<f64>, ExportError> {
        Ok(sequence.world_from_sensor(row)? * sequence.export_from_sensor(row, options.frame)?.inverse())
    };
    let first_from_world = world_from_export(first)?.inverse();
    let every = options.every.max(1) as i64;
    for row in sequence.frames.iter().filter(|r| r.frame_index % every == 0) {
        let boxes: Vec<&BoxRow> = boxes_by_frame
            .get(&row.frame_index)
            .map(|v| v.iter().copied().filter(|b| b.review_status != "rejected").collect())
            .unwrap_or_default();
        if boxes.is_empty() && !options.all_frames {
            continue;
        }
        let frame = log.frame(row.frame_index)?;
        let export_from_sensor = sequence.export_from_sensor(row, options.frame)?;
        let pose = first_from_world * world_from_export(row)?;
        let cameras = pinhole_cameras(&frame, &export_from_sensor, waymo);
        let mut points: Option<(Vec<[f32; 3]>, Vec<f32>)> = None;
        for (camera, view) in cameras.iter().zip(&frame.cameras) {
            let mut targets = Vec::new();
            for b in &boxes {
                let exported = exported_box(sequence, b, options.frame, waymo)?;
                let Some(class) = class_name(&b.class) else { continue };
                if !camera.sees(&exported.center()) {
                    continue;
                }
                if let Some(hull) = camera.corner_hull(&exported) {
                    targets.push((*b, class, hull));
                }
            }
            if targets.is_empty() && !options.all_frames {
                continue;
            }
            if points.is_none() {
                let sensor = frame_points(sequence, row, Some(&frame))?.unwrap_or_default();
                let xyz = points_in(&sensor, &export_from_sensor);
                let intensity = sensor.intensity.iter().map(|&i| intensity_01(waymo, i)).collect();
                points = Some((xyz, intensity));
            }
            let (xyz, intensity) = points.as_ref().expect("set above");
            let folder = format!(
                "{}/{}/{:04}_{}",
                platform_folder(platform),
                sequence.manifest.sequence,
                row.frame_index,
                camera.position
            );
            let cloud = crop(xyz, intensity, options.crop_to_camera.then_some(camera));
            output.write(format!("{folder}/lidar.bin"), &cloud_bytes(&cloud))?;
            if waymo {
                let path = output.path().join(&folder).join("lidar.npy");
                crate::sources::npy::write_npy(&path, &cloud, &["x", "y", "z", "intensity"])?;
            }
            output.write(
                format!("{folder}/image.jpg"),
                &pinhole_jpeg(&mut log, view, row.frame_index)?,
            )?;
            summary.images += 1;
            let meta = meta_info(
                sequence,
                options,
                &folder,
                row.frame_index,
                row.timestamp_us,
                camera,
                &pose,
                &boxes,
                &targets,
                waymo,
            )?;
            let text =
                serde_json::to_string_pretty(&meta).map_err(|e| ExportError::invalid(output.path(), e.to_string()))?;
            output.write(format!("{folder}/meta_info.json"), text.as_bytes())?;
            summary.samples += 1;
            summary.boxes += targets.len();
        }
    }
    Ok(())
}

/// The box as 3EED holds it: 7 values for Waymo (pitch and roll dropped), 9 for M3ED platforms.
fn exported_box(sequence: &ShardSequence, b: &BoxRow, frame: ExportFrame, waymo: bool) -> Result<Box3, ExportError> {
    let boxed = sequence.box_in(b, frame)?;
    Ok(if waymo {
        Box3::new(boxed.x, boxed.y, boxed.z, boxed.l, boxed.w, boxed.h, boxed.yaw)
    } else {
        boxed
    })
}

/// The points as a cloud, cropped to `camera`'s view when given.
fn crop(xyz: &[[f32; 3]], intensity: &[f32], camera: Option<&PinholeCamera>) -> PointCloud {
    let sees = camera.map(|c| c.view_test());
    let (mut x, mut y, mut z, mut i) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (p, &v) in xyz.iter().zip(intensity) {
        if sees.as_ref().is_none_or(|sees| sees(p)) {
            x.push(p[0]);
            y.push(p[1]);
            z.push(p[2]);
            i.push(v);
        }
    }
    PointCloud::from_columns(x, y, z, i).expect("four columns of one length")
}

/// `lidar.bin`: float32 x, y, z, intensity rows, little-endian.
fn cloud_bytes(cloud: &PointCloud) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(cloud.len() * 16);
    for k in 0..cloud.len() {
        for v in [cloud.x()[k], cloud.y()[k], cloud.z()[k], cloud.intensity()[k]] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    bytes
}

#[allow(clippy::too_many_arguments)]
fn meta_info(
    sequence: &ShardSequence,
    options: &ThreeEedOptions,
    folder: &str,
    frame_index: i64,
    timestamp_us: i64,
    camera: &PinholeCamera,
    pose: &Isometry3<f64>,
    boxes: &[&BoxRow],
    targets: &[(&BoxRow, &'static str, [f64; 4])],
    waymo: bool,
) -> Result<Value, ExportError> {
    let dof = if waymo { 7 } else { 9 };
    let values = |b: &BoxRow| -> Result<Vec<f64>, ExportError> {
        Ok(exported_box(sequence, b, options.frame, waymo)?.to_array()[..dof].to_vec())
    };
    let mut ground_info = Vec::new();
    for (target, class, hull) in targets {
        let mut others = Vec::new();
        for other in boxes.iter().filter(|b| b.box_id != target.box_id) {
            others.push(json!({
                "class": class_name(&other.class).unwrap_or("unknown"),
                "bbox_3d_other": values(other)?,
                "track_id": other.track_id,
            }));
        }
        ground_info.push(json!({
            "class": class,
            "bbox_3d": values(target)?,
            "bbox_2d_proj": hull,
            "caption": "",
            "caption_zh": "",
            "attri": "",
            "attri_zh": "",
            "others_num": others.len(),
            "others": others,
            "track_id": target.track_id,
            "box_id": target.box_id,
            "score": target.score,
            "review_status": target.review_status,
            "flags": target.flags,
        }));
    }
    let pose_m = pose.to_homogeneous();
    let pose: Vec<Vec<f64>> = (0..4).map(|r| (0..4).map(|c| pose_m[(r, c)]).collect()).collect();
    Ok(json!({
        "sequence_name": sequence.manifest.sequence,
        "frame_index": frame_index,
        "camera": camera.name,
        "coordinate_frame": options.frame.as_str(),
        "image_path": format!("{folder}/image.jpg"),
        "lidar_path_proj": format!("{folder}/lidar.bin"),
        "image_extrinsic": camera.extrinsic(),
        "image_intrinsic": camera.intrinsic(),
        "camera_distortion": camera.distortion_coefficients(options.images),
        "image_size": [camera.calibration.width, camera.calibration.height],
        "pose": pose,
        "timestamp": timestamp_us,
        "ground_info": ground_info,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lidar_bin_is_float32_rows_of_four() {
        let cloud = PointCloud::from_columns(vec![1.0, 5.0], vec![2.0, 6.0], vec![3.0, 7.0], vec![0.5, 0.25]).unwrap();
        let bytes = cloud_bytes(&cloud);
        let values: Vec<f32> = bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(values, [1.0, 2.0, 3.0, 0.5, 5.0, 6.0, 7.0, 0.25]);
    }

    #[test]
    fn platforms_and_classes_take_3eed_names() {
        assert_eq!(platform_folder(Platform::Vehicle), "waymo");
        assert_eq!(platform_folder(Platform::Quadruped), "quad");
        assert_eq!(class_name("vehicle"), Some("car"));
        assert_eq!(class_name("unknown"), None);
    }
}
