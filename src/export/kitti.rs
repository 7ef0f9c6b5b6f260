//! `export kitti`: the KITTI object layout (`training/{velodyne,label_2,calib,image_2}`), with a
//! rectified camera frame that is the sensor frame relabelled, so the devkit's and OpenPCDet's
//! LiDAR ↔ camera box conversions are exact for any camera (`docs/export.md`).

use std::f64::consts::FRAC_PI_2;
use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Matrix3, Matrix3x4, Rotation3, Translation3, UnitQuaternion, Vector3};

use super::output::OutputDir;
use super::sequence::{PinholeCamera, SequenceLog, frame_points, intensity_01, load_sequences, pinhole_cameras};
use super::{ExportError, ExportSummary, ImageMode, LogLocation};
use crate::camera::project_box;
use crate::frame::{CameraAxes, CameraCalibration, Distortion};
use crate::geometry::{Box3, wrap_angle};
use crate::shards::BoxRow;

/// How `export kitti` chooses and writes samples.
#[derive(Debug, Clone, PartialEq)]
pub struct KittiOptions {
    /// The camera of `image_2` (default: each frame's first).
    pub camera: Option<String>,
    /// Write every non-rejected box, not only those the camera sees.
    pub all_boxes: bool,
    /// Only frame indices divisible by this (1: every frame).
    pub every: usize,
    /// Sequences whose samples go to `ImageSets/val.txt` (the rest to `train.txt`).
    pub val_sequences: Vec<String>,
    /// Only these sequences (all when empty).
    pub sequences: Vec<String>,
    /// Where the logs are.
    pub log: LogLocation,
    /// What the camera images are: pinhole resamplings (default) or the log's own.
    pub images: ImageMode,
}

impl Default for KittiOptions {
    fn default() -> Self {
        Self {
            camera: None,
            all_boxes: false,
            every: 1,
            val_sequences: Vec::new(),
            sequences: Vec::new(),
            log: LogLocation::DataRoot(PathBuf::from(".")),
            images: ImageMode::Pinhole,
        }
    }
}

/// KITTI's rectified frame from the sensor frame: x → −y, y → −z, z → x.
fn rect_from_sensor() -> Matrix3<f64> {
    Matrix3::new(0.0, -1.0, 0.0, 0.0, 0.0, -1.0, 1.0, 0.0, 0.0)
}

/// The camera used when a frame has none: KITTI's own P2 pinhole on the rectified frame.
fn nominal_camera() -> PinholeCamera {
    let calibration = CameraCalibration {
        width: 1242,
        height: 375,
        fx: 721.5377,
        fy: 721.5377,
        cx: 609.5593,
        cy: 172.854,
        distortion: Distortion::None,
        axes: CameraAxes::OpenCv,
        sensor_from_camera: Isometry3::from_parts(
            Translation3::identity(),
            UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(rect_from_sensor().transpose())),
        ),
    };
    PinholeCamera {
        name: "nominal".to_string(),
        position: 0,
        camera_from_export: calibration.sensor_from_camera.inverse(),
        distortion: Distortion::None,
        calibration,
    }
}

/// KITTI's type name of a canonical class.
fn kitti_type(class: &str) -> &'static str {
    match class {
        "vehicle" => "Car",
        "pedestrian" => "Pedestrian",
        "cyclist" => "Cyclist",
        _ => "Misc",
    }
}

/// KITTI's occlusion level of a visible share hidden: 0 fully visible … 2 largely occluded, 3 unknown.
fn occlusion_level(occlusion: Option<f64>) -> u8 {
    match occlusion {
        None => 3,
        Some(o) if o < 0.25 => 0,
        Some(o) if o < 0.6 => 1,
        Some(_) => 2,
    }
}

/// Writes the sequences under `shards` in KITTI's object layout into `out`.
pub fn export_kitti(shards: &Path, out: &Path, options: &KittiOptions) -> Result<ExportSummary, ExportError> {
    let sequences = load_sequences(shards, &options.sequences)?;
    let output = OutputDir::create(out)?;
    let mut summary = ExportSummary {
        sequences: sequences.len(),
        ..ExportSummary::default()
    };
    let (mut train, mut val, mut map) = (String::new(), String::new(), String::new());
    for sequence in &sequences {
        let mut log = SequenceLog::open(sequence, &options.log)?.map(|mut l| {
            l.images = options.images;
            l
        });
        let waymo = sequence.is_waymo();
        let boxes_by_frame = sequence.boxes_by_frame();
        let every = options.every.max(1) as i64;
        for row in sequence.frames.iter().filter(|r| r.frame_index % every == 0) {
            let id = format!("{:06}", summary.samples);
            let frame = log.as_ref().map(|l| l.frame(row.frame_index)).transpose()?;
            let cameras = frame
                .as_ref()
                .map(|f| pinhole_cameras(f, &Isometry3::identity(), waymo))
                .unwrap_or_default();
            let chosen = match &options.camera {
                Some(name) => Some(cameras.iter().position(|c| &c.name == name).ok_or_else(|| {
                    ExportError::invalid(
                        &sequence.dir,
                        format!(
                            "frame {}: no camera `{name}` (the frame has {:?})",
                            row.frame_index,
                            names(&cameras)
                        ),
                    )
                })?),
                None => (!cameras.is_empty()).then_some(0),
            };
            let camera = chosen.map_or_else(nominal_camera, |k| cameras[k].clone());
            let points = frame_points(sequence, row, frame.as_ref())?.unwrap_or_default();
            let mut bin = Vec::with_capacity(points.xyz.len() * 16);
            for (p, &i) in points.xyz.iter().zip(&points.intensity) {
                for v in [p[0], p[1], p[2], intensity_01(waymo, i)] {
                    bin.extend_from_slice(&v.to_le_bytes());
                }
            }
            output.write(format!("training/velodyne/{id}.bin"), &bin)?;
            output.write(format!("training/calib/{id}.txt"), calib_text(&camera).as_bytes())?;
            let mut labels = String::new();
            let see_all = options.all_boxes || chosen.is_none();
            for b in boxes_by_frame.get(&row.frame_index).into_iter().flatten() {
                if b.review_status == "rejected" {
                    continue;
                }
                let boxed = yaw_only(b);
                if !see_all && !camera.sees(&boxed.center()) {
                    continue;
                }
                labels.push_str(&label_line(b, &boxed, &camera));
                summary.boxes += 1;
            }
            output.write(format!("training/label_2/{id}.txt"), labels.as_bytes())?;
            if let (Some(k), Some(frame), Some(log)) = (chosen, frame.as_ref(), log.as_mut()) {
                let png = png_bytes(log, &frame.cameras[k], row.frame_index)?;
                output.write(format!("training/image_2/{id}.png"), &png)?;
                summary.images += 1;
            }
            let list = if options.val_sequences.contains(&sequence.manifest.sequence) {
                &mut val
            } else {
                &mut train
            };
            list.push_str(&format!("{id}\n"));
            map.push_str(&format!(
                "{id} {} {} {} {}\n",
                sequence.manifest.platform, sequence.manifest.sequence, row.frame_index, camera.name
            ));
            summary.samples += 1;
        }
    }
    output.write("ImageSets/train.txt", train.as_bytes())?;
    output.write("ImageSets/val.txt", val.as_bytes())?;
    output.write("sample_map.txt", map.as_bytes())?;
    summary.out = output.finish()?;
    Ok(summary)
}

fn names(cameras: &[PinholeCamera]) -> Vec<&str> {
    cameras.iter().map(|c| c.name.as_str()).collect()
}

/// The box without pitch and roll (KITTI has only `ry`).
fn yaw_only(b: &BoxRow) -> Box3 {
    let [x, y, z, l, w, h, yaw, _, _] = b.box_sensor;
    Box3::new(x, y, z, l, w, h, yaw)
}

/// One `label_2` line.
fn label_line(b: &BoxRow, boxed: &Box3, camera: &PinholeCamera) -> String {
    let bottom = rect_from_sensor() * Vector3::new(boxed.x, boxed.y, boxed.z - boxed.h / 2.0);
    let ry = wrap_angle(-boxed.yaw - FRAC_PI_2);
    let alpha = wrap_angle(ry - bottom.x.atan2(bottom.z));
    let (bbox, truncated) = match project_box(&camera.calibration, boxed) {
        Some(p) => ([p.x_min, p.y_min, p.x_max, p.y_max], 1.0 - p.in_image_fraction),
        None => ([0.0; 4], 1.0),
    };
    let occlusion = b
        .cameras
        .iter()
        .find(|c| c.camera == camera.name)
        .and_then(|c| c.occlusion);
    format!(
        "{} {:.4} {} {} {:.4} {:.4} {:.4} {:.4} {} {} {} {} {} {} {}\n",
        kitti_type(&b.class),
        truncated,
        occlusion_level(occlusion),
        alpha,
        bbox[0],
        bbox[1],
        bbox[2],
        bbox[3],
        boxed.h,
        boxed.w,
        boxed.l,
        bottom.x,
        bottom.y,
        bottom.z,
        ry
    )
}

/// `calib/*.txt`: `P2 = K · [R | t]` from the rectified frame into the camera; `R0_rect`
/// identity; `Tr_velo_to_cam` the axis relabelling.
fn calib_text(camera: &PinholeCamera) -> String {
    let sensor_from_rect = Isometry3::from_parts(
        Translation3::identity(),
        UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(rect_from_sensor().transpose())),
    );
    let camera_from_rect = camera.camera_from_export * sensor_from_rect;
    let k = Matrix3::from_fn(|r, c| camera.intrinsic()[r][c]);
    let rt = camera_from_rect.to_homogeneous();
    let p2: Matrix3x4<f64> = k * rt.fixed_view::<3, 4>(0, 0);
    let mut tr = Matrix3x4::zeros();
    tr.fixed_view_mut::<3, 3>(0, 0).copy_from(&rect_from_sensor());
    let row = |m: &[f64]| m.iter().map(|v| format!("{v:.12e}")).collect::<Vec<_>>().join(" ");
    let flat34 = |m: &Matrix3x4<f64>| {
        (0..3)
            .flat_map(|r| (0..4).map(move |c| m[(r, c)]))
            .collect::<Vec<f64>>()
    };
    let p = row(&flat34(&p2));
    let identity3 = row(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    let identity34 = row(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    format!(
        "P0: {p}\nP1: {p}\nP2: {p}\nP3: {p}\nR0_rect: {identity3}\nTr_velo_to_cam: {}\nTr_imu_to_velo: {identity34}\n",
        row(&flat34(&tr))
    )
}

/// The camera's pinhole image as PNG (fast deflate: a 1920 × 1280 image encodes several times
/// quicker than at the default level, for a somewhat larger file).
fn png_bytes(log: &mut SequenceLog, view: &crate::frame::CameraView, frame_index: i64) -> Result<Vec<u8>, ExportError> {
    use image::ImageEncoder as _;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let image = log.pinhole_image(view, frame_index)?;
    let mut bytes = Vec::new();
    PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Sub)
        .write_image(
            image.as_raw(),
            image.width(),
            image.height(),
            image::ExtendedColorType::Rgb8,
        )
        .map_err(|e| ExportError::Image {
            path: PathBuf::from(format!("frame {frame_index} camera {}", view.name)),
            detail: e.to_string(),
        })?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    /// KITTI's own conversion back (devkit / OpenPCDet `boxes3d_kitti_camera_to_lidar`):
    /// the rectified bottom centre through `Tr⁻¹`, `z += h/2`, `heading = −(π/2 + ry)`.
    #[test]
    fn labels_read_back_with_kittis_conventions() {
        let b = Box3::new(12.5, -3.25, -0.4, 4.5, 1.9, 1.6, 2.9);
        let row = BoxRow {
            frame_index: 0,
            timestamp_us: 0,
            box_id: 0,
            track_id: 1,
            source_track_id: None,
            class: "vehicle".into(),
            score: 1.0,
            box_sensor: b.to_array(),
            box_world: b.to_array(),
            box_normalized: None,
            aabb_normalized: None,
            num_votes: 0,
            detectors: vec![],
            origin: "detected".into(),
            num_points_inside: 0,
            source_num_points: None,
            bev_range_m: 0.0,
            relative_pitch_rad: 0.0,
            velocity_world_mps: None,
            moving: None,
            cameras: vec![],
            best_camera: None,
            rgb_class: None,
            rgb_score: None,
            rgb_agrees: None,
            rgb_note: None,
            flags: vec![],
            review_status: "auto".into(),
        };
        let line = label_line(&row, &b, &nominal_camera());
        let f: Vec<f64> = line.split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect();
        let (h, w, l, loc, ry) = (f[7], f[8], f[9], Vector3::new(f[10], f[11], f[12]), f[13]);
        let velo = rect_from_sensor().transpose() * loc;
        assert_abs_diff_eq!(velo.x, b.x, epsilon = 1e-12);
        assert_abs_diff_eq!(velo.y, b.y, epsilon = 1e-12);
        assert_abs_diff_eq!(velo.z + h / 2.0, b.z, epsilon = 1e-12);
        assert_eq!((l, w, h), (b.l, b.w, b.h));
        assert_abs_diff_eq!(wrap_angle(-(FRAC_PI_2 + ry) - b.yaw), 0.0, epsilon = 1e-12);
        assert!(line.starts_with("Car "), "{line}");
    }

    #[test]
    fn the_nominal_p2_is_kittis_pinhole_on_the_rectified_frame() {
        let text = calib_text(&nominal_camera());
        let p2: Vec<f64> = text
            .lines()
            .find_map(|l| l.strip_prefix("P2: "))
            .unwrap()
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect();
        let expected = [
            721.5377, 0.0, 609.5593, 0.0, 0.0, 721.5377, 172.854, 0.0, 0.0, 0.0, 1.0, 0.0,
        ];
        for (a, b) in p2.iter().zip(expected) {
            assert_abs_diff_eq!(*a, b, epsilon = 1e-9);
        }
        assert!(
            text.contains("Tr_velo_to_cam: 0.000000000000e0 -1.000000000000e0 0.000000000000e0 0.000000000000e0"),
            "{text}"
        );
        assert_eq!(occlusion_level(Some(0.1)), 0);
        assert_eq!(occlusion_level(None), 3);
    }
}
