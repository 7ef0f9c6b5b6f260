//! Which cameras see a box, how much of it lies in the image and how much of it nearer LiDAR
//! returns hide: the per-box, per-camera view that the class check and the review flags start from.
//!
//! Occlusion is measured on the LiDAR, not the image: the box's clipped 2D footprint is cut into an
//! [`OCCLUSION_GRID`]² grid, and of the cells that hold at least one projected return, the share
//! holding a return more than [`OCCLUSION_MARGIN_M`] nearer than the box's nearest corner is the
//! box's occlusion. Cells that no return reaches (sky, beyond range, between beams) count neither
//! way, so a sparse sweep does not read as an unoccluded one; no return in the footprint at all
//! gives no estimate (`None`).

use super::projection::{
    MIN_DEPTH_M, ProjectedBox, RADTAN_VALID_RADIAL_FACTOR, depth_in_camera, project_box, project_normalized,
};
use crate::cloud::PointCloud;
use crate::frame::{CameraAxes, CameraCalibration, Distortion};
use crate::geometry::pose::AffineRows;
use crate::geometry::{Box3, box_corners};

/// Cells per side of the grid laid over a box's 2D footprint to measure its occlusion.
pub const OCCLUSION_GRID: usize = 8;

/// How much nearer than a box's nearest corner a return must be to hide it (m): the box's own
/// returns and their ranging noise stay out.
pub const OCCLUSION_MARGIN_M: f64 = 0.5;

/// Side of the square pixel tiles the projected returns are binned into (px).
const TILE_PX: f64 = 16.0;

/// One sweep's returns as one camera sees them: the pixel and depth of each return in front of the
/// camera and inside its image, binned in pixel tiles so a box reads only the returns near it.
#[derive(Debug, Clone)]
pub struct CameraReturns {
    tiles_x: usize,
    tiles_y: usize,
    /// Where each tile's returns start in `returns` (row-major tiles), then the end of the last.
    offsets: Vec<usize>,
    /// `[x px, y px, depth m]` of each return, tile by tile, in cloud order within a tile.
    returns: Vec<[f32; 3]>,
}

impl CameraReturns {
    /// Projects every point of `cloud` (sensor frame) into the camera of `calibration`.
    pub fn new(calibration: &CameraCalibration, cloud: &PointCloud) -> Self {
        Self::project(calibration, cloud, FieldOfViewCull::new(calibration))
    }

    /// [`Self::new`], skipping the points that `cull` rules out before projecting them.
    fn project(calibration: &CameraCalibration, cloud: &PointCloud, cull: Option<FieldOfViewCull>) -> Self {
        let (w, h) = (f64::from(calibration.width), f64::from(calibration.height));
        let tiles_x = ((w / TILE_PX).ceil() as usize).max(1);
        let tiles_y = ((h / TILE_PX).ceil() as usize).max(1);
        // One 3 × 4 matrix for every point (a quaternion rotation per point costs more), and the
        // depth row first: about half the sweep lies behind any one camera.
        let rows = AffineRows::from_isometry(&calibration.sensor_from_camera.inverse()).0;
        // The rows giving depth and the image's right and down axes, and the latter's signs.
        let (depth_row, u_row, v_row, sign) = match calibration.axes {
            CameraAxes::Waymo => (rows[0], rows[1], rows[2], -1.0),
            CameraAxes::OpenCv => (rows[2], rows[0], rows[1], 1.0),
        };
        let apply = |m: &[f64; 4], p: [f64; 3]| m[0] * p[0] + m[1] * p[1] + m[2] * p[2] + m[3];
        // The returns in the image with their tile, in cloud order; then a counting sort by tile.
        let mut hits: Vec<(usize, [f32; 3])> = Vec::new();
        for ((&x, &y), &z) in cloud.x().iter().zip(cloud.y()).zip(cloud.z()) {
            let q = [f64::from(x), f64::from(y), f64::from(z)];
            // As `project_point_in_camera`: behind the camera (or NaN) does not project.
            let depth = apply(&depth_row, q);
            if depth.is_nan() || depth <= MIN_DEPTH_M {
                continue;
            }
            let (u, v) = (sign * apply(&u_row, q) / depth, sign * apply(&v_row, q) / depth);
            if cull.as_ref().is_some_and(|c| c.rules_out(u, v)) {
                continue;
            }
            let Some(px) = project_normalized(calibration, u, v) else {
                continue;
            };
            if !(0.0..w).contains(&px.x) || !(0.0..h).contains(&px.y) {
                continue;
            }
            let tile =
                ((px.y / TILE_PX) as usize).min(tiles_y - 1) * tiles_x + ((px.x / TILE_PX) as usize).min(tiles_x - 1);
            hits.push((tile, [px.x as f32, px.y as f32, depth as f32]));
        }
        let mut offsets = vec![0usize; tiles_x * tiles_y + 1];
        for &(tile, _) in &hits {
            offsets[tile + 1] += 1;
        }
        for t in 1..offsets.len() {
            offsets[t] += offsets[t - 1];
        }
        let mut next = offsets.clone();
        let mut returns = vec![[0f32; 3]; hits.len()];
        for (tile, r) in hits {
            returns[next[tile]] = r;
            next[tile] += 1;
        }
        Self {
            tiles_x,
            tiles_y,
            offsets,
            returns,
        }
    }

    /// How many returns project inside the image.
    pub fn len(&self) -> usize {
        self.returns.len()
    }

    /// Whether no return projects inside the image.
    pub fn is_empty(&self) -> bool {
        self.returns.is_empty()
    }

    /// Share of the footprint's grid cells reached by a return that are hidden by one nearer than
    /// `near_depth_m − OCCLUSION_MARGIN_M`; `None` when no return falls in the footprint.
    pub fn occlusion(&self, footprint: &ProjectedBox, near_depth_m: f64) -> Option<f64> {
        const CELLS: usize = OCCLUSION_GRID * OCCLUSION_GRID;
        let (w, h) = (footprint.x_max - footprint.x_min, footprint.y_max - footprint.y_min);
        if !(w > 0.0 && h > 0.0) {
            return None;
        }
        let hide_below = near_depth_m - OCCLUSION_MARGIN_M;
        let tile = |v: f64, n: usize| ((v.max(0.0) / TILE_PX) as usize).min(n - 1);
        let (tx0, tx1) = (tile(footprint.x_min, self.tiles_x), tile(footprint.x_max, self.tiles_x));
        let (ty0, ty1) = (tile(footprint.y_min, self.tiles_y), tile(footprint.y_max, self.tiles_y));
        let (mut seen, mut hidden) = ([false; CELLS], [false; CELLS]);
        let cell = |v: f64, lo: f64, extent: f64| {
            (((v - lo) / extent * OCCLUSION_GRID as f64) as usize).min(OCCLUSION_GRID - 1)
        };
        for ty in ty0..=ty1 {
            // The tiles `tx0..=tx1` of one row are one run of returns.
            let run = self.offsets[ty * self.tiles_x + tx0]..self.offsets[ty * self.tiles_x + tx1 + 1];
            for &[x, y, depth] in &self.returns[run] {
                let (x, y) = (f64::from(x), f64::from(y));
                if x < footprint.x_min || x >= footprint.x_max || y < footprint.y_min || y >= footprint.y_max {
                    continue;
                }
                let c = cell(y, footprint.y_min, h) * OCCLUSION_GRID + cell(x, footprint.x_min, w);
                seen[c] = true;
                hidden[c] |= f64::from(depth) < hide_below;
            }
        }
        let seen = seen.iter().filter(|s| **s).count();
        let hidden = hidden.iter().filter(|s| **s).count();
        (seen > 0).then(|| hidden as f64 / seen as f64)
    }
}

/// A conservative test on a point's undistorted normalized coordinates `(u, v)` (camera axes
/// divided by depth) that rules out its landing in the image, cheaper than projecting it: the
/// distorted coordinate `u·radial + tangential` lies in the image only if `|u|·radial_min ≤
/// u_max + t_u·r²`, with `radial_min` the least radial factor the model accepts and `t_u·r²` a
/// bound on the tangential term (likewise for `v`). `None` for models without such a bound
/// (equidistant, whose polynomial in the angle is not checked), where every point is projected.
#[derive(Debug, Clone, Copy)]
struct FieldOfViewCull {
    u_max: f64,
    v_max: f64,
    radial_min: f64,
    tangential_u: f64,
    tangential_v: f64,
}

impl FieldOfViewCull {
    fn new(calibration: &CameraCalibration) -> Option<Self> {
        let (w, h) = (f64::from(calibration.width), f64::from(calibration.height));
        let (fx, fy) = (calibration.fx.abs(), calibration.fy.abs());
        if !(fx > 0.0 && fy > 0.0) {
            return None;
        }
        let u_max = calibration.cx.abs().max((w - calibration.cx).abs()) / fx;
        let v_max = calibration.cy.abs().max((h - calibration.cy).abs()) / fy;
        let (radial_min, tangential_u, tangential_v) = match calibration.distortion {
            Distortion::None => (1.0, 0.0, 0.0),
            // |2·p1·u·v + p2·(r² + 2u²)| ≤ (|p1| + 3|p2|)·r², and likewise for v.
            Distortion::RadTan { p1, p2, .. } => (
                *RADTAN_VALID_RADIAL_FACTOR.start(),
                p1.abs() + 3.0 * p2.abs(),
                3.0 * p1.abs() + p2.abs(),
            ),
            Distortion::Equidistant { .. } => return None,
        };
        // A hair of slack so rounding never culls a point the projection would keep.
        let slack = 1.0 + 1e-9;
        Some(Self {
            u_max: u_max * slack,
            v_max: v_max * slack,
            radial_min: radial_min / slack,
            tangential_u: tangential_u * slack,
            tangential_v: tangential_v * slack,
        })
    }

    /// Whether the point at `(u, v)` surely projects outside the image (false for NaN).
    fn rules_out(&self, u: f64, v: f64) -> bool {
        let r2 = u * u + v * v;
        u.abs() * self.radial_min > self.u_max + self.tangential_u * r2
            || v.abs() * self.radial_min > self.v_max + self.tangential_v * r2
    }
}

/// How one camera sees one box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxView {
    /// Index of the camera in the list given to [`box_views`].
    pub camera: usize,
    /// The box's 2D footprint, clipped to the image, with its in-image fraction.
    pub footprint: ProjectedBox,
    /// Depth of the box's nearest corner in front of the camera (m), at least [`MIN_DEPTH_M`].
    pub near_depth_m: f64,
    /// Share of the footprint hidden by nearer returns; `None` where no return falls in it.
    pub occlusion: Option<f64>,
}

impl BoxView {
    /// Visible area (px²): the clipped footprint's area times its unhidden share.
    pub fn visible_area(&self) -> f64 {
        let f = &self.footprint;
        (f.x_max - f.x_min) * (f.y_max - f.y_min) * (1.0 - self.occlusion.unwrap_or(0.0))
    }
}

/// Every camera's view of a box given in the sensor frame, each camera given by its calibration
/// and the sweep's returns in it; a camera that does not see the box is left out.
pub fn box_views(cameras: &[(&CameraCalibration, &CameraReturns)], box_in_sensor: &Box3) -> Vec<BoxView> {
    let corners = box_corners(box_in_sensor);
    cameras
        .iter()
        .enumerate()
        .filter_map(|(camera, (calibration, returns))| {
            let footprint = project_box(calibration, box_in_sensor)?;
            let near_depth_m = corners
                .iter()
                .map(|p| depth_in_camera(calibration, &calibration.sensor_from_camera.inverse_transform_point(p)))
                .fold(f64::INFINITY, f64::min)
                .max(MIN_DEPTH_M);
            Some(BoxView {
                camera,
                footprint,
                near_depth_m,
                occlusion: returns.occlusion(&footprint, near_depth_m),
            })
        })
        .collect()
}

/// The view with the largest visible area (the first of equals); `None` when no camera sees the box.
pub fn best_view(views: &[BoxView]) -> Option<&BoxView> {
    views.iter().fold(None, |best: Option<&BoxView>, v| match best {
        Some(b) if b.visible_area() >= v.visible_area() => Some(b),
        _ => Some(v),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::projection::project_point_in_camera;
    use crate::frame::{CameraAxes, Distortion};
    use approx::assert_abs_diff_eq;
    use nalgebra::{Isometry3, Point3, Translation3, UnitQuaternion, Vector3};

    /// A 200 × 100 Waymo-axes camera at the sensor origin looking along +x, f = 100 px.
    fn camera() -> CameraCalibration {
        crate::camera::projection::tests::calibration(CameraAxes::Waymo, Distortion::None)
    }

    /// A 2 m cube centred 10 m ahead: its front face (x = 9 m) spans pixels 88.9…111.1 ×
    /// 38.9…61.1, which is also its footprint (the back face projects inside it).
    fn cube() -> Box3 {
        Box3::new(10.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0)
    }

    /// A dense `n × n` patch of points at depth `x` over `y ∈ ys`, `z ∈ zs`.
    fn patch(x: f32, ys: (f32, f32), zs: (f32, f32), n: usize, into: &mut [Vec<f32>; 3]) {
        for i in 0..n {
            for j in 0..n {
                into[0].push(x);
                into[1].push(ys.0 + (ys.1 - ys.0) * (i as f32 + 0.5) / n as f32);
                into[2].push(zs.0 + (zs.1 - zs.0) * (j as f32 + 0.5) / n as f32);
            }
        }
    }

    fn cloud(columns: [Vec<f32>; 3]) -> PointCloud {
        let n = columns[0].len();
        let [x, y, z] = columns;
        PointCloud::from_columns(x, y, z, vec![0.0; n]).unwrap()
    }

    #[test]
    fn a_wall_over_the_left_half_of_a_box_hides_half_of_it() {
        let mut points = [vec![], vec![], vec![]];
        // The cube's own front face: seen, not hidden.
        patch(9.0, (-1.0, 1.0), (-1.0, 1.0), 60, &mut points);
        // A wall at 5 m over image x 89…100 (y > 0 is image left: pixel 100 − 100·y/5) and the
        // footprint's whole height: its left four cell columns of eight.
        patch(5.0, (0.001, 0.55), (-0.6, 0.6), 60, &mut points);
        let calibration = camera();
        let returns = CameraReturns::new(&calibration, &cloud(points));
        let views = box_views(&[(&calibration, &returns)], &cube());
        assert_eq!(views.len(), 1);
        let v = views[0];
        assert_abs_diff_eq!(v.footprint.x_min, 100.0 - 100.0 / 9.0, epsilon = 1e-9);
        assert_abs_diff_eq!(v.near_depth_m, 9.0, epsilon = 1e-12);
        assert_eq!(v.occlusion, Some(0.5));
        let area = (200.0 / 9.0) * (200.0 / 9.0);
        assert_abs_diff_eq!(v.visible_area(), 0.5 * area, epsilon = 1e-9);
    }

    #[test]
    fn returns_behind_the_box_or_within_the_margin_hide_nothing_and_none_gives_no_estimate() {
        let calibration = camera();
        let mut points = [vec![], vec![], vec![]];
        // A wall 20 m away behind the cube, and returns 0.3 m before its nearest corner (inside
        // the margin: ranging noise on its own surface).
        patch(20.0, (-3.0, 3.0), (-2.0, 2.0), 80, &mut points);
        patch(8.7, (-0.9, 0.9), (-0.9, 0.9), 30, &mut points);
        let returns = CameraReturns::new(&calibration, &cloud(points));
        assert_eq!(box_views(&[(&calibration, &returns)], &cube())[0].occlusion, Some(0.0));
        let empty = CameraReturns::new(&calibration, &cloud([vec![], vec![], vec![]]));
        assert!(empty.is_empty());
        assert_eq!(box_views(&[(&calibration, &empty)], &cube())[0].occlusion, None);
    }

    /// Every distortion model and both axis conventions, mounted off-axis: the bench's Waymo
    /// FRONT calibration, a strongly distorted OpenCV lens, a pinhole and a fisheye.
    fn lenses() -> Vec<CameraCalibration> {
        let mount = Isometry3::from_parts(
            Translation3::new(1.5, -0.2, 2.1),
            UnitQuaternion::from_euler_angles(0.03, -0.1, 0.6),
        );
        let waymo = CameraCalibration {
            width: 1920,
            height: 1280,
            fx: 2044.5,
            fy: 2044.5,
            cx: 949.6,
            cy: 633.2,
            distortion: Distortion::RadTan {
                k1: 0.0404,
                k2: -0.330,
                p1: 0.00104,
                p2: -0.00157,
                k3: 0.0,
            },
            axes: CameraAxes::Waymo,
            sensor_from_camera: mount,
        };
        // OpenCV axes: z along the sensor's x, x along −y, y along −z.
        let opencv_mount =
            mount * UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, -std::f64::consts::FRAC_PI_2);
        let opencv = |distortion| CameraCalibration {
            width: 1280,
            height: 800,
            fx: 600.0,
            fy: 610.0,
            cx: 600.0,
            cy: 420.0,
            distortion,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: opencv_mount,
        };
        vec![
            waymo,
            opencv(Distortion::RadTan {
                k1: -0.28,
                k2: 0.09,
                p1: 0.004,
                p2: -0.006,
                k3: -0.01,
            }),
            opencv(Distortion::None),
            opencv(Distortion::Equidistant {
                k1: 0.02,
                k2: -0.01,
                k3: 0.003,
                k4: -0.001,
            }),
        ]
    }

    #[test]
    fn the_field_of_view_cull_drops_only_returns_that_project_outside_the_image() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        // Directions all around at 0.3–90 m, half of them aimed near the lenses' image borders.
        let mut points = [vec![], vec![], vec![]];
        for i in 0..200_000 {
            let (azimuth, elevation) = if i % 2 == 0 {
                (rng.random_range(-3.2..3.2), rng.random_range(-1.5..1.5))
            } else {
                (0.6 + rng.random_range(-1.2..1.2), rng.random_range(-0.7..0.7))
            };
            let range: f64 = rng.random_range(0.3..90.0);
            let (x, y, z) = (
                range * f64::cos(elevation) * f64::cos(azimuth),
                range * f64::cos(elevation) * f64::sin(azimuth),
                range * f64::sin(elevation),
            );
            points[0].push(x as f32);
            points[1].push(y as f32);
            points[2].push(z as f32);
        }
        let cloud = cloud(points);
        for calibration in lenses() {
            let culled = CameraReturns::new(&calibration, &cloud);
            let all = CameraReturns::project(&calibration, &cloud, None);
            assert!(
                culled.len() > 1000,
                "{:?}: {} returns in the image",
                calibration.distortion,
                culled.len()
            );
            assert_eq!(culled.offsets, all.offsets, "{:?}", calibration.distortion);
            let bits = |r: &CameraReturns| r.returns.iter().map(|p| p.map(f32::to_bits)).collect::<Vec<_>>();
            assert_eq!(bits(&culled), bits(&all), "{:?}", calibration.distortion);
            // Against an independent projection of every point (the isometry applied as a
            // quaternion, so a point on the image border may fall either way): the same count.
            // And the cull does work where the model allows it: of the points in front of the
            // lens that project outside the image (half of them aimed near its border), at least
            // two thirds are ruled out before their projection.
            let camera_from_sensor = calibration.sensor_from_camera.inverse();
            let (w, h) = (f64::from(calibration.width), f64::from(calibration.height));
            let cull = FieldOfViewCull::new(&calibration);
            let (mut inside_count, mut outside, mut ruled_out) = (0usize, 0usize, 0usize);
            for i in 0..cloud.len() {
                let q = Point3::new(
                    f64::from(cloud.x()[i]),
                    f64::from(cloud.y()[i]),
                    f64::from(cloud.z()[i]),
                );
                let p = camera_from_sensor * q;
                let depth = depth_in_camera(&calibration, &p);
                let inside = project_point_in_camera(&calibration, &p)
                    .is_some_and(|px| (0.0..w).contains(&px.x) && (0.0..h).contains(&px.y));
                inside_count += usize::from(inside);
                if let Some(cull) = &cull
                    && depth > MIN_DEPTH_M
                    && !inside
                {
                    outside += 1;
                    let (u, v) = match calibration.axes {
                        CameraAxes::Waymo => (-p.y / depth, -p.z / depth),
                        CameraAxes::OpenCv => (p.x / depth, p.y / depth),
                    };
                    ruled_out += usize::from(cull.rules_out(u, v));
                }
            }
            assert!(
                culled.len().abs_diff(inside_count) <= 2,
                "{:?}: {} returns kept, {inside_count} project inside",
                calibration.distortion,
                culled.len()
            );
            if cull.is_some() {
                assert!(
                    ruled_out * 3 > outside * 2,
                    "{:?}: {ruled_out} of the {outside} outside the image ruled out",
                    calibration.distortion
                );
            }
        }
    }

    #[test]
    fn returns_behind_the_camera_or_outside_the_image_are_not_kept() {
        let calibration = camera();
        // Behind the camera; ahead but far outside the field of view; one inside.
        let returns = CameraReturns::new(
            &calibration,
            &cloud([vec![-5.0, 1.0, 10.0], vec![0.0, 50.0, 0.0], vec![0.0, 0.0, 0.0]]),
        );
        assert_eq!(returns.len(), 1);
    }

    #[test]
    fn the_best_view_is_the_camera_that_sees_most_of_the_box_unhidden() {
        let front = camera();
        // A second camera 6 m to the left, turned 31° right onto the cube: it sees it whole,
        // from farther away (11.7 m), so smaller.
        let mut side = camera();
        side.sensor_from_camera = Isometry3::from_parts(
            Translation3::new(0.0, 6.0, 0.0),
            UnitQuaternion::from_axis_angle(&Vector3::z_axis(), -(6f64 / 10.0).atan()),
        );
        let none = cloud([vec![], vec![], vec![]]);
        let (r_front, r_side) = (CameraReturns::new(&front, &none), CameraReturns::new(&side, &none));
        let views = box_views(&[(&front, &r_front), (&side, &r_side)], &cube());
        assert_eq!(views.len(), 2);
        assert_eq!(views[1].footprint.in_image_fraction, 1.0);
        assert!(views[1].visible_area() < views[0].visible_area());
        assert_eq!(best_view(&views).unwrap().camera, 0);

        // A wall 3 m in front of the first camera hides the cube from it, and lies far off the
        // second one's line of sight (which passes x = 3 m at y = 4.2 m): the second wins.
        let mut points = [vec![], vec![], vec![]];
        patch(3.0, (-0.5, 0.5), (-0.5, 0.5), 60, &mut points);
        let wall = cloud(points);
        let (r_front, r_side) = (CameraReturns::new(&front, &wall), CameraReturns::new(&side, &wall));
        let views = box_views(&[(&front, &r_front), (&side, &r_side)], &cube());
        assert_eq!(views[0].occlusion, Some(1.0));
        assert_eq!(views[1].occlusion, None);
        assert_eq!(best_view(&views).unwrap().camera, 1);
        assert!(best_view(&[]).is_none());
    }
}
