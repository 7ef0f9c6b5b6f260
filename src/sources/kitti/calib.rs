//! KITTI calibration files: `KEY: v1 v2 …` lines. The odometry benchmark's `calib.txt` has the
//! rectified projections `P0`…`P3` (3×4) and `Tr` (LiDAR to camera 0, 3×4); the object
//! benchmark's has `P0`…`P3`, `R0_rect` (3×3) and `Tr_velo_to_cam`. A point in the LiDAR frame
//! reaches camera 2's image as `P2 · R0_rect · Tr · p` (`R0_rect` the identity where absent).

use std::collections::BTreeMap;
use std::path::Path;

use nalgebra::{Isometry3, Matrix3, Rotation3, Translation3, UnitQuaternion, Vector3};

use super::super::SourceError;
use super::super::poses::{isometry_from_3x4, nearest_rotation};
use crate::frame::{CameraAxes, CameraCalibration, Distortion};

/// Largest calibration file read (bytes).
const MAX_CALIB_BYTES: u64 = 1 << 20;

/// A KITTI calibration file's matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct KittiCalib {
    /// Camera 0 from LiDAR (`Tr` or `Tr_velo_to_cam`).
    pub cam0_from_velo: Isometry3<f64>,
    /// The rectifying rotation (`R0_rect`; identity in the odometry benchmark).
    pub rect: Rotation3<f64>,
    /// The rectified projections `P0`…`P3` that the file has, by camera number, row-major.
    pub projections: BTreeMap<u8, [f64; 12]>,
}

impl KittiCalib {
    /// Reads `path`; `Tr` (or `Tr_velo_to_cam`) is required.
    pub fn read(path: &Path) -> Result<Self, SourceError> {
        let meta = std::fs::metadata(path).map_err(|e| SourceError::io(path, e))?;
        if !meta.is_file() || meta.len() > MAX_CALIB_BYTES {
            return Err(SourceError::corrupt(
                path,
                "file",
                format!("not a regular file of at most {MAX_CALIB_BYTES} bytes"),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| SourceError::io(path, e))?;
        Self::parse(&text).map_err(|(line, detail)| SourceError::corrupt(path, format!("line {line}"), detail))
    }

    /// Parses a calibration file's text; errors carry the 1-based line number.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut tr = None;
        let mut rect = Rotation3::identity();
        let mut projections = BTreeMap::new();
        let mut last_line = 0;
        for (i, line) in text.lines().enumerate() {
            last_line = i + 1;
            let Some((key, values)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim();
            let values: Vec<f64> = values
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| (i + 1, format!("`{key}`: not a number: {e}")))?;
            if values.iter().any(|v| !v.is_finite()) {
                return Err((i + 1, format!("`{key}`: a value is not finite")));
            }
            let expect = |n: usize| {
                if values.len() == n {
                    Ok(())
                } else {
                    Err((i + 1, format!("`{key}`: expected {n} values, got {}", values.len())))
                }
            };
            match key {
                "Tr" | "Tr_velo_to_cam" | "Tr_velo_cam" => {
                    expect(12)?;
                    tr = Some(isometry_from_3x4(&values).map_err(|e| (i + 1, format!("`{key}`: {e}")))?);
                }
                "R0_rect" | "R_rect" => {
                    expect(9)?;
                    rect = nearest_rotation(&Matrix3::from_row_slice(&values))
                        .map_err(|e| (i + 1, format!("`{key}`: {e}")))?;
                }
                _ => {
                    if let Some(n) = key.strip_prefix('P').and_then(|n| n.parse::<u8>().ok()) {
                        expect(12)?;
                        let mut p = [0.0; 12];
                        p.copy_from_slice(&values);
                        if p[0] <= 0.0 || p[5] <= 0.0 || (p[10] - 1.0).abs() > 1e-9 {
                            return Err((
                                i + 1,
                                format!("`{key}` is not a rectified projection (fx, fy > 0, P[2][2] = 1)"),
                            ));
                        }
                        projections.insert(n, p);
                    }
                }
            }
        }
        let cam0_from_velo = tr.ok_or((last_line, "no `Tr` or `Tr_velo_to_cam`".to_string()))?;
        Ok(Self {
            cam0_from_velo,
            rect,
            projections,
        })
    }

    /// Camera `n`'s calibration for `width` × `height` images: the projection's intrinsics, no
    /// distortion (the images are rectified), OpenCV axes, mounted where `P_n · R0_rect · Tr` puts
    /// it. `None` when the file has no `P_n`.
    pub fn camera(&self, n: u8, width: u32, height: u32) -> Option<CameraCalibration> {
        let p = self.projections.get(&n)?;
        let (fx, fy, cx, cy) = (p[0], p[5], p[2], p[6]);
        // P = K [I | t]: the last column is K t, so t = K⁻¹ · P[:, 3] (K upper triangular, skew p[1]).
        let tz = p[11];
        let ty = (p[7] - cy * tz) / fy;
        let tx = (p[3] - p[1] * ty - cx * tz) / fx;
        let camn_from_rect =
            Isometry3::from_parts(Translation3::from(Vector3::new(tx, ty, tz)), UnitQuaternion::identity());
        let rect = Isometry3::from_parts(
            Translation3::identity(),
            UnitQuaternion::from_rotation_matrix(&self.rect),
        );
        let camera_from_sensor = camn_from_rect * rect * self.cam0_from_velo;
        Some(CameraCalibration {
            width,
            height,
            fx,
            fy,
            cx,
            cy,
            distortion: Distortion::None,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: camera_from_sensor.inverse(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::project_point;
    use approx::assert_relative_eq;
    use nalgebra::{Matrix3x4, Point3, Vector4};

    /// A calibration in the object benchmark's form (the widely reproduced values of training
    /// frame 000000).
    const OBJECT_CALIB: &str = "\
P0: 7.070493000000e+02 0.000000000000e+00 6.040814000000e+02 0.000000000000e+00 0.000000000000e+00 7.070493000000e+02 1.805066000000e+02 0.000000000000e+00 0.000000000000e+00 0.000000000000e+00 1.000000000000e+00 0.000000000000e+00
P2: 7.070493000000e+02 0.000000000000e+00 6.040814000000e+02 4.575831000000e+01 0.000000000000e+00 7.070493000000e+02 1.805066000000e+02 -3.454157000000e-01 0.000000000000e+00 0.000000000000e+00 1.000000000000e+00 4.981016000000e-03
R0_rect: 9.999128000000e-01 1.009263000000e-02 -8.511932000000e-03 -1.012729000000e-02 9.999406000000e-01 -4.037671000000e-03 8.470675000000e-03 4.123522000000e-03 9.999556000000e-01
Tr_velo_to_cam: 6.927964000000e-03 -9.999722000000e-01 -2.757829000000e-03 -2.457729000000e-02 -1.162982000000e-03 2.749836000000e-03 -9.999955000000e-01 -6.127237000000e-02 9.999753000000e-01 6.931141000000e-03 -1.143899000000e-03 -3.321029000000e-01
Tr_imu_to_velo: 9.999976000000e-01 7.553071000000e-04 -2.035826000000e-03 -8.086759000000e-01 -7.854027000000e-04 9.998898000000e-01 -1.482298000000e-02 3.195559000000e-01 2.024406000000e-03 1.482454000000e-02 9.998881000000e-01 -7.997231000000e-01
";

    /// The camera model (isometries, pinhole) puts a LiDAR point where the 3×4 matrix product
    /// `P2 · R0_rect · Tr · p` does, computed here with plain matrices.
    #[test]
    fn camera_2_projects_lidar_points_as_the_kitti_matrix_product() {
        let calib = KittiCalib::parse(OBJECT_CALIB).unwrap();
        let cam = calib.camera(2, 1242, 375).unwrap();
        let row = |key: &str| -> Vec<f64> {
            let line = OBJECT_CALIB.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_once(':')
                .unwrap()
                .1
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect()
        };
        let p2 = Matrix3x4::from_row_slice(&row("P2:"));
        let r0 = Matrix3::from_row_slice(&row("R0_rect:"));
        let tr = nalgebra::Matrix4::from_row_slice(&[row("Tr_velo_to_cam:"), vec![0.0, 0.0, 0.0, 1.0]].concat());
        let mut r0h = nalgebra::Matrix4::identity();
        r0h.fixed_view_mut::<3, 3>(0, 0).copy_from(&r0);
        for p in [
            Point3::new(10.0, 1.0, -1.0),
            Point3::new(25.0, -4.0, 0.5),
            Point3::new(6.0, 2.0, -1.6),
        ] {
            let h = p2 * r0h * tr * Vector4::new(p.x, p.y, p.z, 1.0);
            let want = (h.x / h.z, h.y / h.z);
            let got = project_point(&cam, &p).unwrap();
            assert_relative_eq!(got.x, want.0, epsilon = 1e-4);
            assert_relative_eq!(got.y, want.1, epsilon = 1e-4);
        }
        // Behind the car: not in the image.
        assert!(project_point(&cam, &Point3::new(-10.0, 0.0, 0.0)).is_none());
        assert!(calib.camera(3, 1242, 375).is_none());
    }

    #[test]
    fn odometry_calib_uses_tr_and_bad_lines_are_named() {
        let odometry = "P0: 718.856 0 607.1928 0 0 718.856 185.2157 0 0 0 1 0\n\
                        P2: 718.856 0 607.1928 45.38225 0 718.856 185.2157 -0.1130887 0 0 1 0.003779761\n\
                        Tr: 0 -1 0 0 0 0 -1 0 1 0 0 -0.27\n";
        let calib = KittiCalib::parse(odometry).unwrap();
        assert_eq!(calib.rect, Rotation3::identity());
        // LiDAR x forward is camera z forward.
        assert_relative_eq!(
            calib.cam0_from_velo * Point3::new(5.0, 0.0, 0.0),
            Point3::new(0.0, 0.0, 4.73),
            epsilon = 1e-12
        );
        assert_eq!(
            KittiCalib::parse("P2: 1 2 3\n").unwrap_err(),
            (1, "`P2`: expected 12 values, got 3".into())
        );
        assert_eq!(
            KittiCalib::parse("P0: 1 0 0 0 0 1 0 0 0 0 1 0\n").unwrap_err().1,
            "no `Tr` or `Tr_velo_to_cam`"
        );
        assert!(
            KittiCalib::parse("Tr: 1 0 0 0 0 1 0 x 0 0 1 0\n")
                .unwrap_err()
                .1
                .contains("not a number")
        );
    }
}
