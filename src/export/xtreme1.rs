//! `export xtreme1`: a "LiDAR Fusion" upload zip for Xtreme1 (≥ v0.8) with pre-labels, one
//! `scene_<sequence>/` per sequence, and the class list the pre-labels' `classId`s refer to
//! (`docs/export.md`; facts in the annotation-formats reference).

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use nalgebra::Rotation3;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use super::output::OutputDir;
use super::pcd::binary_xyzi;
use super::sequence::{
    SequenceLog, ShardSequence, frame_points, intensity_01, load_sequences, pinhole_cameras, pinhole_jpeg, points_in,
};
use super::{ExportError, ExportFrame, ExportSummary, ImageMode, LogLocation};
use crate::eval::input::class_from_3eed_name;
use crate::frame::ObjectClass;
use crate::geometry::Box3;
use crate::geometry::pose::{euler_from_rotation, rotation_from_euler};

/// The upload's file name inside the output folder.
pub const XTREME1_ZIP: &str = "xtreme1_upload.zip";

/// One class of an Xtreme1 dataset: its id and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Xtreme1Class {
    /// The dataset's class id (`classId`).
    pub id: i64,
    /// The class name.
    pub name: String,
}

impl Xtreme1Class {
    /// boxlayer's class list: `vehicle` 1, `pedestrian` 2, `cyclist` 3, `unknown` 4.
    pub fn defaults() -> Vec<Xtreme1Class> {
        ObjectClass::ALL
            .iter()
            .enumerate()
            .map(|(k, c)| Xtreme1Class {
                id: k as i64 + 1,
                name: c.to_string(),
            })
            .collect()
    }

    /// Reads a class list (`[{"id": …, "name": …}, …]`, as `classes.json` or Xtreme1's
    /// `datasetClass/findAll` gives it; extra keys are ignored).
    pub fn load(path: &Path) -> Result<Vec<Xtreme1Class>, ExportError> {
        let text = std::fs::read_to_string(path).map_err(|e| ExportError::io(path, e))?;
        let classes: Vec<Xtreme1Class> = serde_json::from_str(&text)
            .map_err(|e| ExportError::invalid(path, format!("not a class list [{{\"id\", \"name\"}}]: {e}")))?;
        if classes.is_empty() {
            return Err(ExportError::invalid(path, "the class list is empty"));
        }
        Ok(classes)
    }

    /// The canonical class a class name means (`Car`, `vehicle`, `pedestrian`, …).
    pub fn canonical(name: &str) -> Option<ObjectClass> {
        class_from_3eed_name(name.trim())
    }
}

/// How `export xtreme1` chooses and writes frames.
#[derive(Debug, Clone, PartialEq)]
pub struct Xtreme1Options {
    /// Only frames holding a flagged box (with all their boxes).
    pub flagged_only: bool,
    /// Only frame indices in this range.
    pub frames: Option<Range<i64>>,
    /// The dataset's classes (default [`Xtreme1Class::defaults`]).
    pub classes: Vec<Xtreme1Class>,
    /// The frame points and boxes are written in.
    pub frame: ExportFrame,
    /// Only these sequences (all when empty).
    pub sequences: Vec<String>,
    /// Where the logs are.
    pub log: LogLocation,
    /// What the camera images are: pinhole resamplings (default) or the log's own.
    pub images: ImageMode,
}

impl Default for Xtreme1Options {
    fn default() -> Self {
        Self {
            flagged_only: false,
            frames: None,
            classes: Xtreme1Class::defaults(),
            frame: ExportFrame::Sensor,
            sequences: Vec::new(),
            log: LogLocation::DataRoot(PathBuf::from(".")),
            images: ImageMode::Pinhole,
        }
    }
}

/// three.js `XYZ` Euler angles `(rx, ry, rz)` of a rotation, `R = Rx(rx)·Ry(ry)·Rz(rz)`
/// (three.js `Euler.setFromRotationMatrix`).
pub fn euler_xyz_from_rotation(r: &Rotation3<f64>) -> [f64; 3] {
    let m = r.matrix();
    let ry = m[(0, 2)].clamp(-1.0, 1.0).asin();
    if m[(0, 2)].abs() < 0.999_999_9 {
        [(-m[(1, 2)]).atan2(m[(2, 2)]), ry, (-m[(0, 1)]).atan2(m[(0, 0)])]
    } else {
        [m[(2, 1)].atan2(m[(1, 1)]), ry, 0.0]
    }
}

/// The rotation of three.js `XYZ` Euler angles, `Rx(rx)·Ry(ry)·Rz(rz)`.
pub fn rotation_from_euler_xyz(e: [f64; 3]) -> Rotation3<f64> {
    Rotation3::from_axis_angle(&nalgebra::Vector3::x_axis(), e[0])
        * Rotation3::from_axis_angle(&nalgebra::Vector3::y_axis(), e[1])
        * Rotation3::from_axis_angle(&nalgebra::Vector3::z_axis(), e[2])
}

/// An Xtreme1 `3D_BOX` contour of a box.
pub(super) fn contour(b: &Box3) -> Value {
    let e = euler_xyz_from_rotation(&rotation_from_euler(b.yaw, b.pitch, b.roll));
    json!({
        "center3D": {"x": b.x, "y": b.y, "z": b.z},
        "size3D": {"x": b.l, "y": b.w, "z": b.h},
        "rotation3D": {"x": e[0], "y": e[1], "z": e[2]},
        "pointN": 0,
        "points": [],
        "viewIndex": 0,
    })
}

/// The box of a contour's centre, size and three.js `XYZ` rotation.
pub(super) fn box_from_contour(center: [f64; 3], size: [f64; 3], euler_xyz: [f64; 3]) -> Box3 {
    let (yaw, pitch, roll) = euler_from_rotation(&rotation_from_euler_xyz(euler_xyz));
    Box3::from_array([
        center[0], center[1], center[2], size[0], size[1], size[2], yaw, pitch, roll,
    ])
}

/// The class of `classes` that means canonical class `class`.
fn class_entry<'a>(classes: &'a [Xtreme1Class], class: &str) -> Option<&'a Xtreme1Class> {
    let wanted = Xtreme1Class::canonical(class)?;
    classes
        .iter()
        .find(|c| Xtreme1Class::canonical(&c.name) == Some(wanted))
}

/// Writes the sequences under `shards` as an Xtreme1 upload (`OUT/xtreme1_upload.zip`) and its
/// class list (`OUT/classes.json`).
pub fn export_xtreme1(shards: &Path, out: &Path, options: &Xtreme1Options) -> Result<ExportSummary, ExportError> {
    let sequences = load_sequences(shards, &options.sequences)?;
    let output = OutputDir::create(out)?;
    let zip_path = output.path().join(XTREME1_ZIP);
    let file = std::fs::File::create(&zip_path).map_err(|e| ExportError::io(&zip_path, e))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let mut summary = ExportSummary {
        sequences: sequences.len(),
        ..ExportSummary::default()
    };
    for sequence in &sequences {
        export_sequence(sequence, &mut zip, &zip_path, options, &mut summary)?;
    }
    zip.finish()
        .and_then(|w| w.into_inner().map_err(|e| zip::result::ZipError::Io(e.into_error())))
        .map_err(|e| ExportError::invalid(&zip_path, e.to_string()))?;
    let classes =
        serde_json::to_string_pretty(&options.classes).map_err(|e| ExportError::invalid(out, e.to_string()))?;
    output.write("classes.json", classes.as_bytes())?;
    summary.out = output.finish()?.join(XTREME1_ZIP);
    Ok(summary)
}

fn export_sequence<W: Write + std::io::Seek>(
    sequence: &ShardSequence,
    zip: &mut zip::ZipWriter<W>,
    zip_path: &Path,
    options: &Xtreme1Options,
    summary: &mut ExportSummary,
) -> Result<(), ExportError> {
    let mut log = SequenceLog::open(sequence, &options.log)?.map(|mut l| {
        l.images = options.images;
        l
    });
    let waymo = sequence.is_waymo();
    let boxes_by_frame = sequence.boxes_by_frame();
    let scene = format!("scene_{}", sequence.manifest.sequence);
    let stored = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let deflated = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let add = |zip: &mut zip::ZipWriter<W>, name: String, bytes: &[u8], options: SimpleFileOptions| {
        zip.start_file(name.as_str(), options)
            .and_then(|()| zip.write_all(bytes).map_err(Into::into))
            .map_err(|e| ExportError::invalid(zip_path, format!("{name}: {e}")))
    };
    for row in &sequence.frames {
        if options.frames.as_ref().is_some_and(|r| !r.contains(&row.frame_index)) {
            continue;
        }
        let boxes: Vec<_> = boxes_by_frame
            .get(&row.frame_index)
            .map(|v| v.iter().copied().filter(|b| b.review_status != "rejected").collect())
            .unwrap_or_default();
        if options.flagged_only && !boxes.iter().any(|b| b.review_status == "flagged") {
            continue;
        }
        let name = format!("{:06}", row.frame_index);
        let frame = log.as_ref().map(|l| l.frame(row.frame_index)).transpose()?;
        let export_from_sensor = sequence.export_from_sensor(row, options.frame)?;
        let points = frame_points(sequence, row, frame.as_ref())?.ok_or_else(|| {
            ExportError::invalid(
                &sequence.dir,
                format!(
                    "frame {}: no points (the run kept none and no log was given)",
                    row.frame_index
                ),
            )
        })?;
        let xyz = points_in(&points, &export_from_sensor);
        let intensity: Vec<f32> = points
            .intensity
            .iter()
            .map(|&i| 255.0 * intensity_01(waymo, i))
            .collect();
        add(
            zip,
            format!("{scene}/lidar_point_cloud_0/{name}.pcd"),
            &binary_xyzi(&xyz, &intensity),
            stored,
        )?;
        if let (Some(frame), Some(log)) = (frame.as_ref(), log.as_mut()) {
            let cameras = pinhole_cameras(frame, &export_from_sensor, waymo);
            let mut config = Vec::new();
            for (k, (camera, view)) in cameras.iter().zip(&frame.cameras).enumerate() {
                let jpeg = pinhole_jpeg(log, view, row.frame_index)?;
                add(zip, format!("{scene}/camera_image_{k}/{name}.jpg"), &jpeg, stored)?;
                summary.images += 1;
                let c = &camera.calibration;
                let e = camera.extrinsic();
                config.push(json!({
                    "cameraInternal": {"fx": c.fx, "fy": c.fy, "cx": c.cx, "cy": c.cy},
                    "width": c.width,
                    "height": c.height,
                    "rowMajor": true,
                    "cameraExternal": e.iter().flatten().copied().collect::<Vec<f64>>(),
                }));
            }
            if !config.is_empty() {
                let text = serde_json::to_string(&config).map_err(|e| ExportError::invalid(zip_path, e.to_string()))?;
                add(
                    zip,
                    format!("{scene}/camera_config/{name}.json"),
                    text.as_bytes(),
                    deflated,
                )?;
            }
        }
        let mut objects = Vec::new();
        for b in &boxes {
            let class = class_entry(&options.classes, &b.class).ok_or_else(|| {
                ExportError::invalid(
                    &sequence.dir,
                    format!(
                        "class `{}` is not in the class list (give --classes a list that has it)",
                        b.class
                    ),
                )
            })?;
            objects.push(json!({
                "type": "3D_BOX",
                "classId": class.id,
                "className": class.name,
                "trackId": b.track_id.to_string(),
                "trackName": b.track_id.to_string(),
                "modelConfidence": b.score,
                "classValues": [],
                "contour": contour(&sequence.box_in(b, options.frame)?),
            }));
        }
        // Xtreme1 refuses a result file with no objects.
        if !objects.is_empty() {
            let text = serde_json::to_string(&json!({ "objects": objects }))
                .map_err(|e| ExportError::invalid(zip_path, e.to_string()))?;
            add(zip, format!("{scene}/result/{name}.json"), text.as_bytes(), deflated)?;
        }
        summary.samples += 1;
        summary.boxes += boxes.len();
    }
    Ok(())
}

/// The largest element difference of two matrices.
#[cfg(test)]
fn max_abs_diff(a: &nalgebra::Matrix3<f64>, b: &nalgebra::Matrix3<f64>) -> f64 {
    (a - b).abs().max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    /// The reference's conversion: yaw-only boxes are `{0, 0, yaw}`; any rotation survives the
    /// round trip through three.js `XYZ` angles.
    #[test]
    fn euler_xyz_round_trips_boxlayer_rotations() {
        let e = euler_xyz_from_rotation(&rotation_from_euler(1.2, 0.0, 0.0));
        assert_abs_diff_eq!(e[0], 0.0, epsilon = 1e-15);
        assert_abs_diff_eq!(e[1], 0.0, epsilon = 1e-15);
        assert_abs_diff_eq!(e[2], 1.2, epsilon = 1e-15);
        for (yaw, pitch, roll) in [(0.3, 0.1, -0.2), (-2.9, 0.05, 0.4), (3.0, -0.6, 0.0), (0.0, 1.3, 0.2)] {
            let r = rotation_from_euler(yaw, pitch, roll);
            let back = rotation_from_euler_xyz(euler_xyz_from_rotation(&r));
            assert!(max_abs_diff(r.matrix(), back.matrix()) < 1e-9, "{yaw} {pitch} {roll}");
            let b = Box3::from_array([1.0, 2.0, 3.0, 4.0, 2.0, 1.5, yaw, pitch, roll]);
            let c = contour(&b);
            let f = |k: &str, a: &str| c[k][a].as_f64().unwrap();
            let again = box_from_contour(
                [f("center3D", "x"), f("center3D", "y"), f("center3D", "z")],
                [f("size3D", "x"), f("size3D", "y"), f("size3D", "z")],
                [f("rotation3D", "x"), f("rotation3D", "y"), f("rotation3D", "z")],
            );
            assert!(max_abs_diff(again.rotation().matrix(), r.matrix()) < 1e-9);
            assert_eq!(&again.to_array()[..6], &b.to_array()[..6]);
        }
    }

    #[test]
    fn class_lists_map_names_to_canonical_classes() {
        let defaults = Xtreme1Class::defaults();
        assert_eq!(class_entry(&defaults, "vehicle").unwrap().id, 1);
        let theirs = vec![
            Xtreme1Class {
                id: 17,
                name: "Car".into(),
            },
            Xtreme1Class {
                id: 18,
                name: "Pedestrian".into(),
            },
        ];
        assert_eq!(class_entry(&theirs, "vehicle").unwrap().id, 17);
        assert!(class_entry(&theirs, "cyclist").is_none());
    }
}
