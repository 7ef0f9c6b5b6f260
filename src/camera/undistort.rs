//! A camera's image resampled onto an ideal pinhole with the camera's own `fx, fy, cx, cy` and
//! size, in OpenCV axes: what tools that project with a bare `K` (KITTI, 3EED's loader, Xtreme1)
//! need to draw boxes where they are.

use image::{Rgb, RgbImage};
use nalgebra::{Isometry3, Matrix3, Point3, Rotation3, UnitQuaternion};

use super::projection::project_point_in_camera;
use crate::frame::{CameraAxes, CameraCalibration, Distortion};

/// The pinhole twin of `calibration`: same size and `fx, fy, cx, cy`, no distortion, OpenCV axes
/// (x right, y down, z forward), same optical centre and optical axis.
pub fn pinhole(calibration: &CameraCalibration) -> CameraCalibration {
    CameraCalibration {
        distortion: Distortion::None,
        axes: CameraAxes::OpenCv,
        sensor_from_camera: calibration.sensor_from_camera * camera_from_opencv(calibration.axes),
        ..calibration.clone()
    }
}

/// The rigid map from OpenCV camera axes into the camera's own axes.
fn camera_from_opencv(axes: CameraAxes) -> Isometry3<f64> {
    match axes {
        CameraAxes::OpenCv => Isometry3::identity(),
        // Waymo x forward = OpenCV z, y left = −OpenCV x, z up = −OpenCV y.
        CameraAxes::Waymo => {
            let m = Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0);
            Isometry3::from_parts(
                nalgebra::Translation3::identity(),
                UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(m)),
            )
        }
    }
}

/// Where one output pixel takes its colour from.
#[derive(Debug, Clone, Copy)]
enum Tap {
    /// Nowhere: the lens model gives no source pixel (black).
    None,
    /// Between four source pixels inside the image: the top-left one's index and the weights
    /// (0…256) of the right and lower neighbours.
    Inner { index: u32, wx: u16, wy: u16 },
    /// Near the border: a source position in pixel-centre coordinates, sampled with bounds checks.
    Edge { x: f32, y: f32 },
}

/// Resamples images of one camera onto its [`pinhole`] twin; the pixel map is built once per
/// source image size.
#[derive(Debug, Clone)]
pub struct Undistorter {
    calibration: CameraCalibration,
    identity: bool,
    /// The source image size the taps were built for, and the taps (one per output pixel).
    taps: Option<((u32, u32), Vec<Tap>)>,
}

impl Undistorter {
    /// The resampler for `calibration`'s camera.
    pub fn new(calibration: &CameraCalibration) -> Self {
        Self {
            calibration: calibration.clone(),
            identity: calibration.distortion == Distortion::None,
            taps: None,
        }
    }

    /// Whether the camera has no distortion, so its images are already pinhole images.
    pub fn is_identity(&self) -> bool {
        self.identity
    }

    /// The taps for a source image of `size` (one that is not the calibration's size is
    /// resampled as if scaled to it).
    fn build(&self, (sw, sh): (u32, u32)) -> Vec<Tap> {
        let c = &self.calibration;
        let to_camera = camera_from_opencv(c.axes);
        let (scale_x, scale_y) = (
            f64::from(sw) / f64::from(c.width.max(1)),
            f64::from(sh) / f64::from(c.height.max(1)),
        );
        let mut taps = Vec::with_capacity(c.width as usize * c.height as usize);
        for row in 0..c.height {
            for col in 0..c.width {
                // Pixel (col, row) covers [col, col + 1): its centre is at +0.5.
                let (u, v) = (f64::from(col) + 0.5, f64::from(row) + 0.5);
                let source = if self.identity {
                    Some((u, v))
                } else {
                    let ray = Point3::new((u - c.cx) / c.fx, (v - c.cy) / c.fy, 1.0);
                    project_point_in_camera(c, &(to_camera * ray)).map(|p| (p.x, p.y))
                };
                taps.push(match source {
                    None => Tap::None,
                    Some((x, y)) => {
                        // Into the source's pixel-centre coordinates.
                        let (x, y) = (x * scale_x - 0.5, y * scale_y - 0.5);
                        let (x0, y0) = (x.floor(), y.floor());
                        if x0 >= 0.0 && y0 >= 0.0 && x0 + 1.0 < f64::from(sw) && y0 + 1.0 < f64::from(sh) {
                            Tap::Inner {
                                index: (y0 as u32) * sw + x0 as u32,
                                wx: ((x - x0) * 256.0).round() as u16,
                                wy: ((y - y0) * 256.0).round() as u16,
                            }
                        } else {
                            Tap::Edge {
                                x: x as f32,
                                y: y as f32,
                            }
                        }
                    }
                });
            }
        }
        taps
    }

    /// The pinhole image of `image` (bilinear; black where the lens model gives no source pixel).
    pub fn apply(&mut self, image: &RgbImage) -> RgbImage {
        let size = image.dimensions();
        if self.identity && size == (self.calibration.width, self.calibration.height) {
            return image.clone();
        }
        if self.taps.as_ref().is_none_or(|(built, _)| *built != size) {
            self.taps = Some((size, self.build(size)));
        }
        let taps = &self.taps.as_ref().expect("built above").1;
        let src = image.as_raw();
        let stride = size.0 as usize * 3;
        let mut out = RgbImage::new(self.calibration.width, self.calibration.height);
        for (pixel, tap) in out.pixels_mut().zip(taps) {
            match *tap {
                Tap::None => {}
                Tap::Inner { index, wx, wy } => {
                    let i = index as usize * 3;
                    let (wx, wy) = (u32::from(wx), u32::from(wy));
                    for k in 0..3 {
                        let top = u32::from(src[i + k]) * (256 - wx) + u32::from(src[i + 3 + k]) * wx;
                        let bottom =
                            u32::from(src[i + stride + k]) * (256 - wx) + u32::from(src[i + stride + 3 + k]) * wx;
                        pixel.0[k] = ((top * (256 - wy) + bottom * wy + (1 << 15)) >> 16) as u8;
                    }
                }
                Tap::Edge { x, y } => *pixel = bilinear(image, x, y),
            }
        }
        out
    }
}

/// Bilinear sample at `(x, y)` in pixel-centre coordinates; black outside the image.
fn bilinear(image: &RgbImage, x: f32, y: f32) -> Rgb<u8> {
    let (w, h) = (image.width() as f32, image.height() as f32);
    if !(x > -1.0 && y > -1.0 && x < w && y < h) {
        return Rgb([0, 0, 0]);
    }
    let (x0, y0) = (x.floor(), y.floor());
    let (fx, fy) = (x - x0, y - y0);
    let sample = |xi: f32, yi: f32| -> [f32; 3] {
        if xi < 0.0 || yi < 0.0 || xi >= w || yi >= h {
            return [0.0; 3];
        }
        let p = image.get_pixel(xi as u32, yi as u32).0;
        [f32::from(p[0]), f32::from(p[1]), f32::from(p[2])]
    };
    let (a, b, c, d) = (
        sample(x0, y0),
        sample(x0 + 1.0, y0),
        sample(x0, y0 + 1.0),
        sample(x0 + 1.0, y0 + 1.0),
    );
    let mut out = [0u8; 3];
    for k in 0..3 {
        let top = a[k] + (b[k] - a[k]) * fx;
        let bottom = c[k] + (d[k] - c[k]) * fx;
        out[k] = (top + (bottom - top) * fy).round().clamp(0.0, 255.0) as u8;
    }
    Rgb(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::project_point;
    use approx::assert_abs_diff_eq;
    use nalgebra::{Translation3, Vector3};

    fn camera(axes: CameraAxes, distortion: Distortion) -> CameraCalibration {
        let rotation = match axes {
            CameraAxes::OpenCv => {
                UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, -std::f64::consts::FRAC_PI_2)
            }
            CameraAxes::Waymo => UnitQuaternion::from_euler_angles(0.0, 0.05, 0.3),
        };
        CameraCalibration {
            width: 160,
            height: 100,
            fx: 90.0,
            fy: 95.0,
            cx: 81.0,
            cy: 49.0,
            distortion,
            axes,
            sensor_from_camera: Isometry3::from_parts(Translation3::new(1.0, 0.2, 1.5), rotation),
        }
    }

    #[test]
    fn the_pinhole_twin_projects_like_the_camera_without_distortion() {
        for axes in [CameraAxes::OpenCv, CameraAxes::Waymo] {
            let original = camera(axes, Distortion::None);
            let twin = pinhole(&original);
            assert_eq!(twin.axes, CameraAxes::OpenCv);
            let mut checked = 0;
            for p in [
                Vector3::new(10.0, 1.0, 0.5),
                Vector3::new(20.0, -3.0, 2.0),
                Vector3::new(8.0, 2.0, -1.0),
            ] {
                let p = Point3::from(p + Vector3::new(1.0, 0.2, 1.5));
                if let (Some(a), Some(b)) = (project_point(&original, &p), project_point(&twin, &p)) {
                    assert_abs_diff_eq!(a.x, b.x, epsilon = 1e-9);
                    assert_abs_diff_eq!(a.y, b.y, epsilon = 1e-9);
                    checked += 1;
                }
            }
            assert!(checked >= 2, "{axes:?}: only {checked} points projected");
        }
    }

    /// A point's pixel in the undistorted image is where the pinhole twin puts it: paint the
    /// distorted image where the real camera sees a point, undistort, find the paint.
    #[test]
    fn undistorted_images_put_points_where_the_pinhole_projects_them() {
        let distortion = Distortion::RadTan {
            k1: -0.3,
            k2: 0.05,
            p1: 0.001,
            p2: -0.002,
            k3: 0.0,
        };
        for axes in [CameraAxes::OpenCv, CameraAxes::Waymo] {
            let real = camera(axes, distortion);
            let twin = pinhole(&real);
            let mut undistorter = Undistorter::new(&real);
            assert!(!undistorter.is_identity());
            // A point seen off-centre, where distortion moves pixels by several px.
            let camera_point = match axes {
                CameraAxes::OpenCv => Point3::new(3.5, -2.0, 6.0),
                CameraAxes::Waymo => Point3::new(6.0, -3.5, 2.0),
            };
            let sensor_point = real.sensor_from_camera * camera_point;
            let seen = project_point(&real, &sensor_point).unwrap();
            let expected = project_point(&twin, &sensor_point).unwrap();
            assert!((seen - expected).norm() > 3.0, "distortion should move the point");
            let mut image = RgbImage::new(real.width, real.height);
            let (sx, sy) = (seen.x.floor() as i64, seen.y.floor() as i64);
            for dy in -1..=1 {
                for dx in -1..=1 {
                    image.put_pixel((sx + dx) as u32, (sy + dy) as u32, Rgb([255, 255, 255]));
                }
            }
            let out = undistorter.apply(&image);
            let (mut sum, mut weight) = (Vector3::zeros(), 0.0);
            for (x, y, p) in out.enumerate_pixels() {
                let v = f64::from(p.0[0]);
                sum += Vector3::new(f64::from(x) + 0.5, f64::from(y) + 0.5, 0.0) * v;
                weight += v;
            }
            let found = sum / weight;
            // The painted 3×3 block's centre is within a pixel of the point.
            let painted_offset = Vector3::new(sx as f64 + 0.5 - seen.x, sy as f64 + 0.5 - seen.y, 0.0).norm();
            assert!(
                ((found.x - expected.x).powi(2) + (found.y - expected.y).powi(2)).sqrt() < 1.0 + painted_offset,
                "{axes:?}: paint at ({:.2}, {:.2}), pinhole says ({:.2}, {:.2})",
                found.x,
                found.y,
                expected.x,
                expected.y
            );
        }
    }

    /// The fixed-point taps inside the image give the float bilinear sample within one level.
    #[test]
    fn fixed_point_taps_agree_with_the_float_bilinear() {
        let real = camera(
            CameraAxes::OpenCv,
            Distortion::Equidistant {
                k1: 0.05,
                k2: -0.01,
                k3: 0.0,
                k4: 0.0,
            },
        );
        let image = RgbImage::from_fn(real.width, real.height, |x, y| {
            Rgb([(x * 7 % 251) as u8, (y * 13 % 253) as u8, ((x * y) % 255) as u8])
        });
        let mut undistorter = Undistorter::new(&real);
        let out = undistorter.apply(&image);
        let taps = &undistorter.taps.as_ref().unwrap().1;
        let to_camera = camera_from_opencv(real.axes);
        let mut inner = 0;
        for (k, tap) in taps.iter().enumerate() {
            if !matches!(tap, Tap::Inner { .. }) {
                continue;
            }
            inner += 1;
            let (col, row) = (k as u32 % real.width, k as u32 / real.width);
            let ray = Point3::new(
                (f64::from(col) + 0.5 - real.cx) / real.fx,
                (f64::from(row) + 0.5 - real.cy) / real.fy,
                1.0,
            );
            let p = project_point_in_camera(&real, &(to_camera * ray)).unwrap();
            let expected = bilinear(&image, (p.x - 0.5) as f32, (p.y - 0.5) as f32);
            let got = out.get_pixel(col, row);
            for c in 0..3 {
                assert!(
                    (i32::from(got.0[c]) - i32::from(expected.0[c])).abs() <= 1,
                    "pixel ({col}, {row})"
                );
            }
        }
        assert!(inner > taps.len() / 2, "{inner} of {} taps inside", taps.len());
    }

    #[test]
    fn a_camera_without_distortion_keeps_its_pixels() {
        let real = camera(CameraAxes::OpenCv, Distortion::None);
        let image = RgbImage::from_fn(real.width, real.height, |x, y| Rgb([x as u8, y as u8, 9]));
        let mut undistorter = Undistorter::new(&real);
        assert!(undistorter.is_identity());
        assert_eq!(undistorter.apply(&image), image);
    }
}
