//! Writes frames as a KITTI odometry-style sequence folder that [`super::KittiBinSource`] reads
//! back: `velodyne/NNNNNN.bin` (x, y, z, intensity float32), `times.txt` (seconds),
//! `poses.txt` (camera 0's 3×4 poses, in the log's world: not rebased on the first frame),
//! `calib.txt` (`P0`, `P2`, `Tr`) and `image_2/NNNNNN.png`. Camera 0 and camera 2 are the
//! frames' first undistorted camera (KITTI images are rectified); without one, camera 0 is
//! KITTI's axis convention (x right, y down, z forward) at the LiDAR.

use std::fmt::Write as _;
use std::path::Path;

use nalgebra::{Isometry3, Matrix3, UnitQuaternion};

use super::super::SourceError;
use crate::cloud::PointCloud;
use crate::frame::{CameraCalibration, Distortion, Frame};

/// What [`write_kitti_sequence`] wrote.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KittiWriteSummary {
    /// Sweeps written.
    pub sweeps: usize,
    /// Images written to `image_2/`.
    pub images: usize,
    /// Cameras not written, with why (`FRONT: distorted (radtan); KITTI images are rectified`).
    pub cameras_skipped: Vec<String>,
}

/// Writes `cloud` as a KITTI `.bin`: x, y, z, intensity as little-endian float32 per point.
pub fn write_kitti_bin(path: &Path, cloud: &PointCloud) -> Result<(), SourceError> {
    let mut bytes = Vec::with_capacity(cloud.len() * 16);
    for i in 0..cloud.len() {
        for v in [cloud.x()[i], cloud.y()[i], cloud.z()[i], cloud.intensity()[i]] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).map_err(|e| SourceError::io(path, e))
}

/// A 3×4 row-major `[R | t]`, printed so it reads back to the same f64.
fn row_major_3x4(t: &Isometry3<f64>) -> String {
    let m = t.to_homogeneous();
    let mut out = String::new();
    for r in 0..3 {
        for c in 0..4 {
            let _ = write!(out, "{}{:e}", if out.is_empty() { "" } else { " " }, m[(r, c)]);
        }
    }
    out
}

/// KITTI's camera axes at the LiDAR: camera x = −LiDAR y, camera y = −LiDAR z, camera z = LiDAR x.
fn kitti_axes() -> Isometry3<f64> {
    let r = Matrix3::new(0.0, -1.0, 0.0, 0.0, 0.0, -1.0, 1.0, 0.0, 0.0);
    Isometry3::from_parts(
        nalgebra::Translation3::identity(),
        UnitQuaternion::from_rotation_matrix(&nalgebra::Rotation3::from_matrix_unchecked(r)),
    )
}

/// Writes `frames` into `dir` (created if missing) as a KITTI sequence folder.
pub fn write_kitti_sequence(dir: &Path, frames: &[Frame]) -> Result<KittiWriteSummary, SourceError> {
    let mut summary = KittiWriteSummary::default();
    let velodyne = dir.join("velodyne");
    std::fs::create_dir_all(&velodyne).map_err(|e| SourceError::io(&velodyne, e))?;
    // The camera: the first undistorted one of the first frame that has cameras.
    let mut camera: Option<(String, CameraCalibration)> = None;
    if let Some(first) = frames.iter().find(|f| !f.cameras.is_empty()) {
        for c in &first.cameras {
            match c.calibration.distortion {
                Distortion::None if camera.is_none() => camera = Some((c.name.clone(), c.calibration.clone())),
                Distortion::None => summary
                    .cameras_skipped
                    .push(format!("{}: KITTI's image_2 holds one camera", c.name)),
                _ => summary
                    .cameras_skipped
                    .push(format!("{}: distorted; KITTI images are rectified", c.name)),
            }
        }
    }
    let cam0_from_velo = camera
        .as_ref()
        .map_or_else(kitti_axes, |(_, c)| c.sensor_from_camera.inverse());
    let mut calib = String::new();
    let (fx, fy, cx, cy) = camera
        .as_ref()
        .map_or((721.5377, 721.5377, 609.5593, 172.854), |(_, c)| {
            (c.fx, c.fy, c.cx, c.cy)
        });
    let projection = format!("{fx:e} 0 {cx:e} 0 0 {fy:e} {cy:e} 0 0 0 1 0");
    let _ = writeln!(calib, "P0: {projection}");
    let _ = writeln!(calib, "P2: {projection}");
    let _ = writeln!(calib, "Tr: {}", row_major_3x4(&cam0_from_velo));
    let calib_path = dir.join("calib.txt");
    std::fs::write(&calib_path, calib).map_err(|e| SourceError::io(&calib_path, e))?;

    let (mut times, mut poses) = (String::new(), String::new());
    let image_dir = dir.join("image_2");
    for (i, frame) in frames.iter().enumerate() {
        write_kitti_bin(&velodyne.join(format!("{i:06}.bin")), &frame.cloud)?;
        let _ = writeln!(times, "{:e}", frame.timestamp_micros as f64 * 1e-6);
        let cam_pose = cam0_from_velo * frame.world_from_sensor * cam0_from_velo.inverse();
        let _ = writeln!(poses, "{}", row_major_3x4(&cam_pose));
        let view = camera
            .as_ref()
            .and_then(|(name, _)| frame.cameras.iter().find(|c| &c.name == name));
        if let Some(view) = view {
            std::fs::create_dir_all(&image_dir).map_err(|e| SourceError::io(&image_dir, e))?;
            let png = image_dir.join(format!("{i:06}.png"));
            let pixels = view
                .image()
                .map_err(|e| SourceError::corrupt(&png, format!("frame {}", frame.index), e.to_string()))?;
            pixels
                .save(&png)
                .map_err(|e| SourceError::corrupt(&png, "write", e.to_string()))?;
            summary.images += 1;
        }
        summary.sweeps += 1;
    }
    for (name, text) in [("times.txt", times), ("poses.txt", poses)] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| SourceError::io(&p, e))?;
    }
    Ok(summary)
}
