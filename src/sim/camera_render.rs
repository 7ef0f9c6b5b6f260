//! Camera images of a simulated scene: sky, terrain with its ground materials, clutter and
//! objects, Lambert-shaded from a sun direction, seen through a real camera model (Waymo or
//! OpenCV axes, radial-tangential or equidistant distortion).
//!
//! How an image is made (one thread, deterministic):
//! 1. **Inverse lens map.** Every output pixel needs the ray it sees. The exact inverse of the
//!    distortion model (Newton on the model of `crate::camera`) is solved on a grid of nodes
//!    every [`MAP_STEP_PX`] pixels and interpolated bilinearly in between; cells next to a node
//!    without a valid inverse are solved per pixel.
//! 2. **Pinhole raster.** Terrain (a nested grid mesh around the camera) and every object part
//!    (cuboids, cylinders and ellipsoids tessellated by their on-screen size) are clipped and
//!    rasterised with a z-buffer into an undistorted pinhole buffer that covers the rays of all
//!    output pixels, at least as finely as the output samples them.
//! 3. **Shading per output pixel.** Each output pixel looks up the buffer sample its ray falls in
//!    (nearest sample) and is shaded there: objects get their part colour with Lambert shading of
//!    the facet normal, ground pixels the colour of the road-grid surface under the world point
//!    (asphalt, paint, concrete, grass, with a small texture), everything fades to haze with
//!    distance, and rays that hit nothing show a sky gradient (or far ground below the horizon).
//!    Rays the pinhole buffer cannot hold (more than ~74° off axis, e.g. a fisheye's rim) are ray
//!    cast against the scene directly instead.
//!
//! Pixels whose distorted coordinates have no ray under the model (outside the radial range
//! `crate::camera` accepts, or behind an equidistant lens) are black, like a lens vignette.

use image::RgbImage;
use nalgebra::{Isometry3, Matrix3, Point3, Vector3};
use serde::{Deserialize, Serialize};

use super::object::{FineLabel, Surface};
use super::scene::Scene;
use super::shape::{Ray, Shape};
use super::simulator::{SimError, SimSweep, Simulator};
use crate::camera::RADTAN_VALID_RADIAL_FACTOR;
use crate::frame::{CameraAxes, CameraCalibration, Distortion};

/// Spacing of the inverse-lens-map nodes (px); pixels in between are interpolated.
pub const MAP_STEP_PX: usize = 8;
/// Largest tangent of the off-axis angle the pinhole buffer covers (tan 74°): wider rays are ray cast.
const MAX_PINHOLE_TAN: f64 = 3.5;
/// Near clipping distance along the optical axis (m).
const NEAR_M: f64 = 0.05;
/// Buffer margin beyond the rays in use, in buffer pixels (guard band for clipping and lookups).
const GUARD_PX: f64 = 4.0;
/// Most buffer pixels per output pixel (the buffer's density is lowered beyond that).
const MAX_BUFFER_RATIO: f64 = 4.0;
/// Largest image side accepted (px).
const MAX_IMAGE_SIDE: u32 = 16_384;
/// Terrain mesh: cells per side of each nested level (an even number).
const TERRAIN_CELLS: i64 = 64;
/// Terrain mesh: cell size of the finest level (m).
const TERRAIN_CELL_M: f64 = 1.0;
/// Terrain mesh: cells per side of a culling block.
const TERRAIN_BLOCK: i64 = 8;
/// No triangle in the z-buffer.
const EMPTY: u32 = u32::MAX;

/// Look and lighting of rendered camera images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CameraRenderConfig {
    /// Sun azimuth in the world frame, counter-clockwise from +x (degrees; default 215).
    pub sun_azimuth_deg: f64,
    /// Sun elevation above the horizon (degrees; default 50).
    pub sun_elevation_deg: f64,
    /// Share of full light a surface facing away from the sun still gets (0–1; default 0.45).
    pub ambient: f64,
    /// Farthest geometry drawn (m; default 600); beyond it rays show sky or far ground.
    pub max_distance_m: f64,
    /// Distance at which haze hides half of a surface's colour (m; default 1500).
    pub haze_distance_m: f64,
    /// Relative brightness amplitude of the ground texture (0–1; default 0.06).
    pub ground_texture: f64,
}

impl Default for CameraRenderConfig {
    fn default() -> Self {
        Self {
            sun_azimuth_deg: 215.0,
            sun_elevation_deg: 50.0,
            ambient: 0.45,
            max_distance_m: 600.0,
            haze_distance_m: 1500.0,
            ground_texture: 0.06,
        }
    }
}

impl CameraRenderConfig {
    /// Unit vector towards the sun in the world frame.
    pub fn sun_direction(&self) -> Vector3<f64> {
        let (az, el) = (self.sun_azimuth_deg.to_radians(), self.sun_elevation_deg.to_radians());
        Vector3::new(el.cos() * az.cos(), el.cos() * az.sin(), el.sin())
    }

    /// Light factor of a surface with world normal `normal`: ambient + (1 − ambient)·max(0, n·sun).
    pub fn lambert(&self, normal: &Vector3<f64>) -> f64 {
        self.ambient + (1.0 - self.ambient) * normal.dot(&self.sun_direction()).max(0.0)
    }

    fn validate(&self) -> Result<(), SimError> {
        let bad = |field: &'static str, reason: String| Err(SimError::InvalidConfig { field, reason });
        if !(0.0..=1.0).contains(&self.ambient) {
            return bad("camera_render.ambient", format!("{} is not in [0, 1]", self.ambient));
        }
        if !(0.0..=1.0).contains(&self.ground_texture) {
            return bad(
                "camera_render.ground_texture",
                format!("{} is not in [0, 1]", self.ground_texture),
            );
        }
        if !(self.max_distance_m.is_finite() && self.max_distance_m > 1.0) {
            return bad(
                "camera_render.max_distance_m",
                format!("{} must be finite and above 1 m", self.max_distance_m),
            );
        }
        if self.haze_distance_m.is_nan() || self.haze_distance_m <= 0.0 {
            return bad(
                "camera_render.haze_distance_m",
                format!("{} must be positive", self.haze_distance_m),
            );
        }
        if !(self.sun_azimuth_deg.is_finite() && self.sun_elevation_deg.is_finite()) {
            return bad("camera_render.sun_azimuth_deg", "sun angles must be finite".into());
        }
        Ok(())
    }
}

/// Renders what `calibration`'s camera sees at the sweep's reference time: the sensor at
/// `sweep.world_from_sensor`, objects at their poses at `sweep.reference_time_micros`, the
/// camera placed by `calibration.sensor_from_camera` in that sensor frame. The image has the
/// calibration's size.
pub fn render_camera(
    simulator: &Simulator,
    sweep: &SimSweep,
    calibration: &CameraCalibration,
) -> Result<RgbImage, SimError> {
    render_camera_posed(
        simulator,
        sweep.reference_time_micros,
        &sweep.world_from_sensor,
        calibration,
        &CameraRenderConfig::default(),
    )
}

/// Renders the camera at any time: the sensor at the simulator's pose at `time_micros`, objects
/// at their poses then (what the M3ED writer does at the 25 Hz camera times).
pub fn render_camera_at(
    simulator: &Simulator,
    time_micros: i64,
    calibration: &CameraCalibration,
    config: &CameraRenderConfig,
) -> Result<RgbImage, SimError> {
    let world_from_sensor = simulator.world_from_sensor_at(time_micros);
    render_camera_posed(simulator, time_micros, &world_from_sensor, calibration, config)
}

/// Renders the camera with the sensor at `world_from_sensor` and objects at their poses at
/// `time_micros`.
pub fn render_camera_posed(
    simulator: &Simulator,
    time_micros: i64,
    world_from_sensor: &Isometry3<f64>,
    calibration: &CameraCalibration,
    config: &CameraRenderConfig,
) -> Result<RgbImage, SimError> {
    validate_calibration(calibration)?;
    config.validate()?;
    let scene = simulator.scene();
    let t = simulator.seconds(time_micros);
    let camera = PinholeCamera::new(world_from_sensor, calibration);
    let map = LensMap::new(calibration);
    let mut frame = Frame::new(&map, calibration);
    let view = SceneView::new(scene, t, &camera, &frame.buffer, config);
    view.draw_terrain(&mut frame.buffer);
    view.draw_objects(&mut frame.buffer);
    Ok(frame.shade(&view, &map))
}

fn validate_calibration(c: &CameraCalibration) -> Result<(), SimError> {
    let bad = |field: &'static str, reason: String| Err(SimError::InvalidConfig { field, reason });
    if c.width == 0 || c.height == 0 || c.width > MAX_IMAGE_SIDE || c.height > MAX_IMAGE_SIDE {
        return bad(
            "camera.width",
            format!(
                "image {}×{} must be 1..={MAX_IMAGE_SIDE} px per side",
                c.width, c.height
            ),
        );
    }
    if !(c.fx.is_finite() && c.fy.is_finite() && c.fx > 0.0 && c.fy > 0.0) {
        return bad(
            "camera.fx",
            format!("focal lengths {}, {} must be positive", c.fx, c.fy),
        );
    }
    if !(c.cx.is_finite() && c.cy.is_finite()) {
        return bad(
            "camera.cx",
            format!("principal point {}, {} must be finite", c.cx, c.cy),
        );
    }
    let coefficients: Vec<f64> = match c.distortion {
        Distortion::None => Vec::new(),
        Distortion::RadTan { k1, k2, p1, p2, k3 } => vec![k1, k2, p1, p2, k3],
        Distortion::Equidistant { k1, k2, k3, k4 } => vec![k1, k2, k3, k4],
    };
    if coefficients.iter().any(|v| !v.is_finite()) {
        return bad("camera.distortion", "coefficients must be finite".into());
    }
    let pose = c.sensor_from_camera.to_homogeneous();
    if pose.iter().any(|v| !v.is_finite()) {
        return bad("camera.sensor_from_camera", "pose must be finite".into());
    }
    Ok(())
}

/// The camera as an ideal pinhole in the internal frame K (x right, y down, z forward, as
/// OpenCV): `world_from_k` and its inverse as matrices.
struct PinholeCamera {
    /// Camera centre in the world.
    origin: Vector3<f64>,
    /// Rotation K → world.
    world_from_k: Matrix3<f64>,
    /// Rotation world → K.
    k_from_world: Matrix3<f64>,
}

impl PinholeCamera {
    fn new(world_from_sensor: &Isometry3<f64>, calibration: &CameraCalibration) -> Self {
        // K → camera axes: Waymo's camera has x forward, y left, z up, so K's (right, down,
        // forward) are its (−y, −z, x).
        let camera_from_k = match calibration.axes {
            CameraAxes::OpenCv => Matrix3::identity(),
            CameraAxes::Waymo => Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0),
        };
        let world_from_camera = world_from_sensor * calibration.sensor_from_camera;
        let world_from_k = world_from_camera.rotation.to_rotation_matrix().into_inner() * camera_from_k;
        PinholeCamera {
            origin: world_from_camera.translation.vector,
            world_from_k,
            k_from_world: world_from_k.transpose(),
        }
    }

    fn to_k(&self, point_in_world: &Vector3<f64>) -> Vector3<f64> {
        self.k_from_world * (point_in_world - self.origin)
    }
}

/// The ray of a distorted normalized image point `(x_d, y_d)` (pixel minus principal point over
/// focal length) as a unit direction in K, or `None` where the model has no ray.
pub fn undistort_ray(distortion: &Distortion, x_d: f64, y_d: f64) -> Option<Vector3<f64>> {
    match *distortion {
        Distortion::None => Some(Vector3::new(x_d, y_d, 1.0).normalize()),
        Distortion::RadTan { k1, k2, p1, p2, k3 } => {
            // Newton on the forward model of `crate::camera`, starting from the distorted point.
            let (mut u, mut v) = (x_d, y_d);
            for _ in 0..40 {
                let r2 = u * u + v * v;
                let radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3));
                let d = k1 + r2 * (2.0 * k2 + 3.0 * k3 * r2);
                let fu = u * radial + 2.0 * p1 * u * v + p2 * (r2 + 2.0 * u * u) - x_d;
                let fv = v * radial + p1 * (r2 + 2.0 * v * v) + 2.0 * p2 * u * v - y_d;
                let j11 = radial + 2.0 * u * u * d + 2.0 * p1 * v + 6.0 * p2 * u;
                let j12 = 2.0 * u * v * d + 2.0 * p1 * u + 2.0 * p2 * v;
                let j22 = radial + 2.0 * v * v * d + 6.0 * p1 * v + 2.0 * p2 * u;
                let det = j11 * j22 - j12 * j12;
                if !det.is_finite() || det <= 1e-12 {
                    return None;
                }
                let du = (j22 * fu - j12 * fv) / det;
                let dv = (j11 * fv - j12 * fu) / det;
                u -= du;
                v -= dv;
                if !(u.is_finite() && v.is_finite()) || u.abs() > 1e3 || v.abs() > 1e3 {
                    return None;
                }
                if du.abs() + dv.abs() < 1e-14 {
                    break;
                }
            }
            let r2 = u * u + v * v;
            let radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3));
            let ru = u * radial + 2.0 * p1 * u * v + p2 * (r2 + 2.0 * u * u) - x_d;
            let rv = v * radial + p1 * (r2 + 2.0 * v * v) + 2.0 * p2 * u * v - y_d;
            let converged = ru.abs() + rv.abs() < 1e-9;
            (converged && RADTAN_VALID_RADIAL_FACTOR.contains(&radial)).then(|| Vector3::new(u, v, 1.0).normalize())
        }
        Distortion::Equidistant { k1, k2, k3, k4 } => {
            let theta_d = (x_d * x_d + y_d * y_d).sqrt();
            if theta_d < 1e-12 {
                return Some(Vector3::z());
            }
            let mut theta = theta_d.min(1.5);
            for _ in 0..40 {
                let t2 = theta * theta;
                let g = theta * (1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4)))) - theta_d;
                let dg = 1.0 + t2 * (3.0 * k1 + t2 * (5.0 * k2 + t2 * (7.0 * k3 + t2 * 9.0 * k4)));
                if !dg.is_finite() || dg <= 1e-9 {
                    return None;
                }
                let step = g / dg;
                theta = (theta - step).clamp(0.0, std::f64::consts::PI);
                if step.abs() < 1e-14 {
                    break;
                }
            }
            let t2 = theta * theta;
            let g = theta * (1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4)))) - theta_d;
            // The model only maps rays in front of the lens (θ < 90°).
            if g.abs() > 1e-9 || theta >= std::f64::consts::FRAC_PI_2 - 1e-6 {
                return None;
            }
            let s = theta.sin() / theta_d;
            Some(Vector3::new(x_d * s, y_d * s, theta.cos()))
        }
    }
}

/// Where a ray goes in the pinhole buffer: `(x/z, y/z)` when it is within [`MAX_PINHOLE_TAN`].
fn pinhole_coords(dir: &Vector3<f64>) -> Option<(f64, f64)> {
    if dir.z <= 0.0 {
        return None;
    }
    let (u, v) = (dir.x / dir.z, dir.y / dir.z);
    (u.abs() <= MAX_PINHOLE_TAN && v.abs() <= MAX_PINHOLE_TAN).then_some((u, v))
}

/// The ray of every output pixel, as grid nodes solved exactly plus bilinear interpolation.
struct LensMap {
    width: usize,
    height: usize,
    fx: f64,
    fy: f64,
    cx: f64,
    cy: f64,
    distortion: Distortion,
    /// Node pixel indices along x and y (the last one is the last pixel).
    node_x: Vec<usize>,
    node_y: Vec<usize>,
    /// Per node (row-major over `node_y × node_x`): the unit ray when it has pinhole coordinates.
    nodes: Vec<Option<Vector3<f64>>>,
}

impl LensMap {
    fn new(c: &CameraCalibration) -> Self {
        let axis = |n: usize| -> Vec<usize> {
            let mut v: Vec<usize> = (0..n).step_by(MAP_STEP_PX).collect();
            if v.last() != Some(&(n - 1)) {
                v.push(n - 1);
            }
            v
        };
        let (width, height) = (c.width as usize, c.height as usize);
        let node_x = axis(width);
        let node_y = axis(height);
        let mut map = LensMap {
            width,
            height,
            fx: c.fx,
            fy: c.fy,
            cx: c.cx,
            cy: c.cy,
            distortion: c.distortion,
            node_x,
            node_y,
            nodes: Vec::new(),
        };
        let mut nodes = Vec::with_capacity(map.node_x.len() * map.node_y.len());
        for &py in &map.node_y {
            for &px in &map.node_x {
                nodes.push(map.exact_ray(px, py).filter(|d| pinhole_coords(d).is_some()));
            }
        }
        map.nodes = nodes;
        map
    }

    /// The exact ray of pixel `(px, py)` (its centre), in K.
    fn exact_ray(&self, px: usize, py: usize) -> Option<Vector3<f64>> {
        let x_d = (px as f64 + 0.5 - self.cx) / self.fx;
        let y_d = (py as f64 + 0.5 - self.cy) / self.fy;
        undistort_ray(&self.distortion, x_d, y_d)
    }

    /// Calls `visit(px, py, ray)` for every pixel of row `py`, with the pinhole coordinates when
    /// the ray has them, else the exact ray (or `None` where the model has no ray).
    fn row(&self, py: usize, mut visit: impl FnMut(usize, PixelRay)) {
        let j = (py / MAP_STEP_PX).min(self.node_y.len().saturating_sub(2));
        let (y0, y1) = (self.node_y[j], self.node_y[(j + 1).min(self.node_y.len() - 1)]);
        let ty = if y1 > y0 {
            (py - y0) as f64 / (y1 - y0) as f64
        } else {
            0.0
        };
        let nx = self.node_x.len();
        for i in 0..nx.saturating_sub(1).max(1) {
            let i1 = (i + 1).min(nx - 1);
            let (x0, x1) = (self.node_x[i], self.node_x[i1]);
            let last = if i1 == nx - 1 { x1 } else { x1 - 1 };
            let corners = [
                self.nodes[j * nx + i],
                self.nodes[j * nx + i1],
                self.nodes[(j + 1).min(self.node_y.len() - 1) * nx + i],
                self.nodes[(j + 1).min(self.node_y.len() - 1) * nx + i1],
            ];
            match corners {
                [Some(a), Some(b), Some(c), Some(d)] => {
                    // Directions, unlike pinhole coordinates, bend gently even far off axis, so
                    // they are what is interpolated: along y once, then along x.
                    let left = a + (c - a) * ty;
                    let right = b + (d - b) * ty;
                    let span = (x1 - x0).max(1) as f64;
                    for px in x0..=last {
                        let tx = (px - x0) as f64 / span;
                        let dir = left + (right - left) * tx;
                        visit(
                            px,
                            match pinhole_coords(&dir) {
                                Some((u, v)) => PixelRay::Pinhole(u, v),
                                None => PixelRay::Wide(dir.normalize()),
                            },
                        );
                    }
                }
                _ => {
                    for px in x0..=last {
                        let ray = self.exact_ray(px, py);
                        visit(
                            px,
                            match ray.as_ref().and_then(pinhole_coords) {
                                Some((u, v)) => PixelRay::Pinhole(u, v),
                                None => ray.map_or(PixelRay::None, PixelRay::Wide),
                            },
                        );
                    }
                }
            }
        }
    }

    /// The extent of the pinhole coordinates of every node, and the density (buffer pixels per
    /// unit of pinhole coordinate) at which the buffer samples at least as finely as the output.
    fn pinhole_extent(&self) -> ([f64; 4], f64) {
        let nx = self.node_x.len();
        let mut ext = [f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY];
        let mut density: f64 = self.fx.max(self.fy) * 0.25;
        let coords = |node: &Option<Vector3<f64>>| node.as_ref().and_then(pinhole_coords);
        for (k, node) in self.nodes.iter().enumerate() {
            let Some((u, v)) = coords(node) else { continue };
            ext[0] = ext[0].min(u);
            ext[1] = ext[1].min(v);
            ext[2] = ext[2].max(u);
            ext[3] = ext[3].max(v);
            let (i, j) = (k % nx, k / nx);
            // Output pixels per unit of pinhole coordinate between neighbouring nodes.
            if i + 1 < nx
                && let Some((u1, v1)) = coords(&self.nodes[k + 1])
            {
                let d = ((u1 - u).powi(2) + (v1 - v).powi(2)).sqrt();
                if d > 0.0 {
                    density = density.max((self.node_x[i + 1] - self.node_x[i]) as f64 / d);
                }
            }
            if j + 1 < self.node_y.len()
                && let Some((u1, v1)) = coords(&self.nodes[k + nx])
            {
                let d = ((u1 - u).powi(2) + (v1 - v).powi(2)).sqrt();
                if d > 0.0 {
                    density = density.max((self.node_y[j + 1] - self.node_y[j]) as f64 / d);
                }
            }
        }
        if !ext[0].is_finite() {
            // No node in the pinhole range (a pure fisheye rim, a one-pixel image): a small buffer
            // around the axis keeps the code paths uniform; every pixel is ray cast.
            return ([-0.01, -0.01, 0.01, 0.01], 100.0);
        }
        // Pixels between nodes reach a little beyond the nodes' extent.
        let pad = MAP_STEP_PX as f64 / density;
        ([ext[0] - pad, ext[1] - pad, ext[2] + pad, ext[3] + pad], density)
    }
}

/// The ray of one output pixel.
#[derive(Debug, Clone, Copy)]
enum PixelRay {
    /// Pinhole coordinates `(x/z, y/z)` in K.
    Pinhole(f64, f64),
    /// A ray too far off axis for the buffer (unit, in K).
    Wide(Vector3<f64>),
    /// No ray under the lens model.
    None,
}

/// How a rasterised triangle is coloured.
#[derive(Debug, Clone, Copy)]
struct TriangleShade {
    /// Lit colour (0–255 scale) of an object facet, or the light factor (all three equal) of a
    /// ground facet.
    rgb: [f32; 3],
    /// Ground: the colour comes from the road-grid surface under each pixel.
    ground: bool,
}

/// The undistorted z-buffer: `1/z` and the triangle drawn, per sample.
struct PinholeBuffer {
    width: usize,
    height: usize,
    /// Pinhole coordinate of the buffer's left/top edge.
    u0: f64,
    v0: f64,
    /// Buffer pixels per unit of pinhole coordinate.
    scale: f64,
    inv_depth: Vec<f32>,
    triangle: Vec<u32>,
    shades: Vec<TriangleShade>,
}

impl PinholeBuffer {
    fn new(extent: [f64; 4], density: f64, output_pixels: usize) -> Self {
        let (du, dv) = (extent[2] - extent[0], extent[3] - extent[1]);
        let mut scale = density;
        let budget = MAX_BUFFER_RATIO * output_pixels.max(64) as f64;
        if du * dv * scale * scale > budget {
            scale = (budget / (du * dv)).sqrt();
        }
        let width = ((du * scale).ceil() as usize).max(1);
        let height = ((dv * scale).ceil() as usize).max(1);
        PinholeBuffer {
            width,
            height,
            u0: extent[0],
            v0: extent[1],
            scale,
            inv_depth: vec![0.0; width * height],
            triangle: vec![EMPTY; width * height],
            shades: Vec::new(),
        }
    }

    /// The four side planes (through the camera centre) bounding what the buffer shows plus its
    /// guard band, as inward normals in K.
    fn side_planes(&self) -> [Vector3<f64>; 4] {
        let g = GUARD_PX / self.scale;
        let (u_lo, v_lo) = (self.u0 - g, self.v0 - g);
        let u_hi = self.u0 + self.width as f64 / self.scale + g;
        let v_hi = self.v0 + self.height as f64 / self.scale + g;
        [
            Vector3::new(1.0, 0.0, -u_lo),
            Vector3::new(-1.0, 0.0, u_hi),
            Vector3::new(0.0, 1.0, -v_lo),
            Vector3::new(0.0, -1.0, v_hi),
        ]
    }

    /// Whether a sphere (centre in K, radius) can show in the buffer within `max_distance`.
    fn sphere_visible(
        &self,
        planes: &[Vector3<f64>; 4],
        centre: &Vector3<f64>,
        radius: f64,
        max_distance: f64,
    ) -> bool {
        if centre.z + radius < NEAR_M || centre.norm() - radius > max_distance {
            return false;
        }
        planes.iter().all(|n| n.dot(centre) >= -radius * n.norm())
    }

    /// Draws a triangle given in K with shade `shade`.
    fn draw(&mut self, planes: &[Vector3<f64>; 4], vertices: [Vector3<f64>; 3], shade: TriangleShade) {
        let id = self.shades.len() as u32;
        let inside = |p: &Vector3<f64>| p.z >= NEAR_M && planes.iter().all(|n| n.dot(p) >= 0.0);
        if vertices.iter().all(inside) {
            if self.raster(&vertices, id) {
                self.shades.push(shade);
            }
            return;
        }
        // Trivially outside one plane?
        if vertices.iter().all(|p| p.z < NEAR_M) || planes.iter().any(|n| vertices.iter().all(|p| n.dot(p) < 0.0)) {
            return;
        }
        // Sutherland–Hodgman against the near plane and the four sides.
        let mut polygon: Vec<Vector3<f64>> = vertices.to_vec();
        let near = Vector3::new(0.0, 0.0, 1.0);
        for (normal, offset) in std::iter::once((near, -NEAR_M)).chain(planes.iter().map(|n| (*n, 0.0))) {
            let mut next = Vec::with_capacity(polygon.len() + 2);
            for k in 0..polygon.len() {
                let a = polygon[k];
                let b = polygon[(k + 1) % polygon.len()];
                let (da, db) = (normal.dot(&a) + offset, normal.dot(&b) + offset);
                if da >= 0.0 {
                    next.push(a);
                }
                if (da >= 0.0) != (db >= 0.0) {
                    next.push(a + (b - a) * (da / (da - db)));
                }
            }
            polygon = next;
            if polygon.len() < 3 {
                return;
            }
        }
        let mut drawn = false;
        for k in 1..polygon.len() - 1 {
            drawn |= self.raster(&[polygon[0], polygon[k], polygon[k + 1]], id);
        }
        if drawn {
            self.shades.push(shade);
        }
    }

    /// Scan-converts a triangle (all vertices in front of the near plane and inside the guard
    /// band) with a `1/z` depth test; pixels whose centres lie inside or on an edge are covered.
    /// Returns whether any sample was written.
    fn raster(&mut self, p: &[Vector3<f64>; 3], id: u32) -> bool {
        let screen = |v: &Vector3<f64>| {
            (
                (v.x / v.z - self.u0) * self.scale,
                (v.y / v.z - self.v0) * self.scale,
                1.0 / v.z,
            )
        };
        let (x0, y0, w0) = screen(&p[0]);
        let (x1, y1, w1) = screen(&p[1]);
        let (x2, y2, w2) = screen(&p[2]);
        let det = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0);
        if !det.is_finite() || det.abs() < 1e-12 {
            return false;
        }
        // 1/z is affine in screen space.
        let a = ((w1 - w0) * (y2 - y0) - (w2 - w0) * (y1 - y0)) / det;
        let b = ((w2 - w0) * (x1 - x0) - (w1 - w0) * (x2 - x0)) / det;
        let c = w0 - a * x0 - b * y0;
        // Edge functions, positive inside.
        let sign = det.signum();
        let edge = |xa: f64, ya: f64, xb: f64, yb: f64| {
            let (ea, eb, ec) = (ya - yb, xb - xa, xa * yb - xb * ya);
            (ea * sign, eb * sign, ec * sign)
        };
        let edges = [edge(x0, y0, x1, y1), edge(x1, y1, x2, y2), edge(x2, y2, x0, y0)];
        let y_min = y0.min(y1).min(y2);
        let y_max = y0.max(y1).max(y2);
        let row_first = ((y_min - 0.5).ceil().max(0.0)) as usize;
        let row_last = (y_max - 0.5).floor();
        if row_last < 0.0 {
            return false;
        }
        let row_last = (row_last as usize).min(self.height - 1);
        let mut wrote = false;
        for row in row_first..=row_last {
            let y = row as f64 + 0.5;
            let (mut lo, mut hi) = (f64::NEG_INFINITY, f64::INFINITY);
            let mut empty = false;
            for &(ea, eb, ec) in &edges {
                let rest = eb * y + ec;
                if ea > 0.0 {
                    lo = lo.max(-rest / ea);
                } else if ea < 0.0 {
                    hi = hi.min(-rest / ea);
                } else if rest < 0.0 {
                    empty = true;
                }
            }
            if empty || lo > hi {
                continue;
            }
            // Pixel centres i + 0.5 within [lo, hi]; bounds clamped before the integer casts.
            let first = (-floor_i64((0.5 - lo).min(1.0))).max(0);
            let last = floor_i64((hi - 0.5).max(-1.0).min(self.width as f64)).min(self.width as i64 - 1);
            if last < first {
                continue;
            }
            let (first, last) = (first as usize, last as usize);
            let base = row * self.width;
            let mut w = a * (first as f64 + 0.5) + b * y + c;
            for k in base + first..=base + last {
                let wf = w as f32;
                if wf > self.inv_depth[k] {
                    self.inv_depth[k] = wf;
                    self.triangle[k] = id;
                    wrote = true;
                }
                w += a;
            }
        }
        wrote
    }
}

/// A scene object placed for this image: its index, pose and the part frames in K.
struct PlacedObject {
    index: usize,
    world_from_object: Isometry3<f64>,
    object_from_world: Isometry3<f64>,
    centre_in_world: Point3<f64>,
    radius: f64,
}

/// The scene at the image time as the camera sees it.
struct SceneView<'a> {
    scene: &'a Scene,
    camera: &'a PinholeCamera,
    config: &'a CameraRenderConfig,
    planes: [Vector3<f64>; 4],
    /// Objects within range and in front of the camera (for the wide-ray fallback and drawing).
    objects: Vec<PlacedObject>,
    sun: Vector3<f64>,
    sky_horizon: [f32; 3],
}

/// sRGB colours (0–255) of the fixed materials.
mod palette {
    pub const SKY_ZENITH: [f32; 3] = [92.0, 142.0, 212.0];
    pub const SKY_HORIZON: [f32; 3] = [208.0, 220.0, 233.0];
    pub const FAR_GROUND: [f32; 3] = [128.0, 126.0, 116.0];
    pub const ASPHALT: [f32; 3] = [72.0, 72.0, 76.0];
    pub const PAINT: [f32; 3] = [226.0, 224.0, 212.0];
    pub const CONCRETE: [f32; 3] = [170.0, 166.0, 158.0];
    pub const GRASS: [f32; 3] = [86.0, 124.0, 56.0];
    pub const GLASS: [f32; 3] = [38.0, 48.0, 58.0];
    pub const RUBBER: [f32; 3] = [24.0, 24.0, 26.0];
    pub const METAL: [f32; 3] = [118.0, 120.0, 126.0];
    pub const BARK: [f32; 3] = [85.0, 62.0, 42.0];
    pub const WALL: [f32; 3] = [165.0, 161.0, 152.0];
    pub const FOLIAGE: [[f32; 3]; 5] = [
        [58.0, 98.0, 38.0],
        [45.0, 85.0, 35.0],
        [75.0, 110.0, 45.0],
        [92.0, 116.0, 50.0],
        [40.0, 70.0, 35.0],
    ];
    pub const SKIN: [[f32; 3]; 5] = [
        [241.0, 194.0, 160.0],
        [224.0, 172.0, 130.0],
        [198.0, 134.0, 96.0],
        [160.0, 105.0, 70.0],
        [110.0, 70.0, 45.0],
    ];
    pub const CAR_PAINT: [[f32; 3]; 12] = [
        [235.0, 235.0, 232.0],
        [28.0, 28.0, 30.0],
        [170.0, 172.0, 176.0],
        [105.0, 107.0, 112.0],
        [30.0, 45.0, 90.0],
        [160.0, 25.0, 25.0],
        [100.0, 20.0, 25.0],
        [40.0, 80.0, 160.0],
        [35.0, 75.0, 45.0],
        [190.0, 175.0, 140.0],
        [220.0, 180.0, 30.0],
        [210.0, 100.0, 20.0],
    ];
    pub const CLOTHING: [[f32; 3]; 14] = [
        [30.0, 40.0, 80.0],
        [25.0, 25.0, 28.0],
        [120.0, 120.0, 125.0],
        [225.0, 225.0, 220.0],
        [180.0, 30.0, 35.0],
        [50.0, 90.0, 170.0],
        [40.0, 110.0, 60.0],
        [170.0, 150.0, 105.0],
        [95.0, 65.0, 40.0],
        [70.0, 95.0, 135.0],
        [110.0, 25.0, 40.0],
        [225.0, 190.0, 40.0],
        [220.0, 130.0, 160.0],
        [100.0, 60.0, 140.0],
    ];
    pub const FACADE: [[f32; 3]; 7] = [
        [200.0, 185.0, 160.0],
        [150.0, 75.0, 55.0],
        [140.0, 140.0, 138.0],
        [220.0, 218.0, 210.0],
        [180.0, 150.0, 110.0],
        [120.0, 135.0, 150.0],
        [80.0, 80.0, 85.0],
    ];
}

/// A 64-bit mix of two words (SplitMix64 finaliser).
fn hash2(a: u64, b: u64) -> u64 {
    let mut h = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0x632B_E59B_D9B4_E019);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

fn pick<const N: usize>(colours: &[[f32; 3]; N], h: u64) -> [f32; 3] {
    colours[(h % N as u64) as usize]
}

/// The unlit colour of a part of object `index` (label `label`, surface `surface`): fixed
/// materials (glass, rubber, metal, bark, concrete) by surface, and for foliage, skin, painted, clothed or facade surfaces a palette colour drawn from
/// the object index and the surface's reflectivity (so parts sharing a surface share a colour).
pub(crate) fn part_colour(index: usize, label: Option<FineLabel>, surface: &Surface) -> [f32; 3] {
    let h = hash2(index as u64, u64::from(surface.reflectivity.to_bits()));
    // Fixed materials keep their colour exactly.
    for (fixed, colour) in [
        (Surface::GLASS, palette::GLASS),
        (Surface::RUBBER, palette::RUBBER),
        (Surface::METAL, palette::METAL),
        (Surface::BARK, palette::BARK),
        (Surface::CONCRETE, palette::WALL),
    ] {
        if *surface == fixed {
            return colour;
        }
    }
    let base = if *surface == Surface::FOLIAGE {
        pick(&palette::FOLIAGE, h)
    } else if *surface == Surface::SKIN {
        pick(&palette::SKIN, h)
    } else {
        match label {
            Some(FineLabel::Car | FineLabel::Van | FineLabel::Bus | FineLabel::Truck) => pick(&palette::CAR_PAINT, h),
            Some(FineLabel::Pedestrian) => pick(&palette::CLOTHING, h),
            Some(FineLabel::Cyclist) => pick(&palette::CLOTHING, h >> 8),
            None => pick(&palette::FACADE, h),
        }
    };
    // ±8 % brightness per object and surface so equal palette entries still differ a little.
    let jitter = 0.92 + 0.16 * ((h >> 40) & 0xFF) as f32 / 255.0;
    [base[0] * jitter, base[1] * jitter, base[2] * jitter].map(|c| c.min(255.0))
}

/// The unlit colour of the ground surface `surface`.
fn ground_colour(surface: &Surface) -> [f32; 3] {
    if *surface == Surface::PAINT {
        palette::PAINT
    } else if *surface == Surface::CONCRETE {
        palette::CONCRETE
    } else if *surface == Surface::GRASS {
        palette::GRASS
    } else {
        palette::ASPHALT
    }
}

fn scale(c: [f32; 3], f: f32) -> [f32; 3] {
    [c[0] * f, c[1] * f, c[2] * f]
}

fn mix(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

/// Triangles of a primitive in its own frame, with roughly `segments` around round shapes.
fn tessellate(shape: &Shape, segments: usize, mut emit: impl FnMut([Vector3<f64>; 3])) {
    match *shape {
        Shape::Cuboid { half } => {
            let corner = |i: usize| {
                Vector3::new(
                    if i & 1 == 0 { -half.x } else { half.x },
                    if i & 2 == 0 { -half.y } else { half.y },
                    if i & 4 == 0 { -half.z } else { half.z },
                )
            };
            const FACES: [[usize; 4]; 6] = [
                [0, 2, 6, 4],
                [1, 3, 7, 5],
                [0, 1, 5, 4],
                [2, 3, 7, 6],
                [0, 1, 3, 2],
                [4, 5, 7, 6],
            ];
            for f in FACES {
                emit([corner(f[0]), corner(f[1]), corner(f[2])]);
                emit([corner(f[0]), corner(f[2]), corner(f[3])]);
            }
        }
        Shape::Cylinder { radius, half_height } => {
            let n = segments.max(6);
            // Same cross-section area as the circle.
            let step = std::f64::consts::TAU / n as f64;
            let r = radius * (step / step.sin()).sqrt();
            let ring = |k: usize, z: f64| {
                let a = k as f64 * step;
                Vector3::new(r * a.cos(), r * a.sin(), z)
            };
            for k in 0..n {
                let (a0, a1) = (ring(k, -half_height), ring(k + 1, -half_height));
                let (b0, b1) = (ring(k, half_height), ring(k + 1, half_height));
                emit([a0, a1, b1]);
                emit([a0, b1, b0]);
                if k > 0 && k + 1 < n {
                    emit([ring(0, -half_height), a0, a1]);
                    emit([ring(0, half_height), b0, b1]);
                }
            }
        }
        Shape::Ellipsoid { radii } => {
            let n_lon = segments.max(6);
            let n_lat = (segments / 2).max(4);
            let point = |i: usize, j: usize| {
                let lat = std::f64::consts::PI * (j as f64 / n_lat as f64 - 0.5);
                let lon = std::f64::consts::TAU * i as f64 / n_lon as f64;
                Vector3::new(
                    radii.x * lat.cos() * lon.cos(),
                    radii.y * lat.cos() * lon.sin(),
                    radii.z * lat.sin(),
                )
            };
            for j in 0..n_lat {
                for i in 0..n_lon {
                    let (a, b) = (point(i, j), point(i + 1, j));
                    let (c, d) = (point(i, j + 1), point(i + 1, j + 1));
                    if j > 0 {
                        emit([a, b, d]);
                    }
                    if j + 1 < n_lat {
                        emit([a, d, c]);
                    }
                }
            }
        }
    }
}

impl<'a> SceneView<'a> {
    fn new(
        scene: &'a Scene,
        t: f64,
        camera: &'a PinholeCamera,
        buffer: &PinholeBuffer,
        config: &'a CameraRenderConfig,
    ) -> Self {
        let max = config.max_distance_m;
        let objects = scene
            .objects
            .iter()
            .enumerate()
            .filter_map(|(index, object)| {
                let world_from_object = object.world_from_object(&scene.terrain, t);
                let centre_in_world = world_from_object * object.shape.local_box.center();
                let radius = object.shape.bounding_radius;
                let centre = camera.to_k(&centre_in_world.coords);
                (centre.norm() - radius <= max).then(|| PlacedObject {
                    index,
                    object_from_world: world_from_object.inverse(),
                    world_from_object,
                    centre_in_world,
                    radius,
                })
            })
            .collect();
        SceneView {
            scene,
            camera,
            config,
            planes: buffer.side_planes(),
            objects,
            sun: config.sun_direction(),
            sky_horizon: palette::SKY_HORIZON,
        }
    }

    fn light(&self, normal_in_world: &Vector3<f64>) -> f32 {
        (self.config.ambient + (1.0 - self.config.ambient) * normal_in_world.dot(&self.sun).max(0.0)) as f32
    }

    /// Tessellates and draws every object part that can show in the buffer.
    fn draw_objects(&self, buffer: &mut PinholeBuffer) {
        let max = self.config.max_distance_m;
        for placed in &self.objects {
            let centre = self.camera.to_k(&placed.centre_in_world.coords);
            if !buffer.sphere_visible(&self.planes, &centre, placed.radius, max) {
                continue;
            }
            let object = &self.scene.objects[placed.index];
            for part in &object.shape.parts {
                let world_from_part = placed.world_from_object * part.object_from_part;
                let part_centre = self.camera.to_k(&world_from_part.translation.vector);
                let part_radius = match part.shape {
                    Shape::Cuboid { half } => half.norm(),
                    Shape::Cylinder { radius, half_height } => (radius * radius + half_height * half_height).sqrt(),
                    Shape::Ellipsoid { radii } => radii.max(),
                };
                if !buffer.sphere_visible(&self.planes, &part_centre, part_radius, max) {
                    continue;
                }
                // Round shapes get more facets the larger they appear (about one per 4 px of
                // circumference, 6 to 32).
                let pixels = part_radius * buffer.scale / part_centre.z.max(part_radius).max(NEAR_M);
                let segments = ((std::f64::consts::TAU * pixels / 4.0).ceil() as usize).clamp(6, 32) & !1;
                let colour = part_colour(placed.index, object.label, &part.surface);
                let rotation = world_from_part.rotation.to_rotation_matrix().into_inner();
                let k_from_part = self.camera.k_from_world * rotation;
                tessellate(&part.shape, segments, |tri| {
                    let v = tri.map(|p| k_from_part * p + part_centre);
                    let mut normal = (v[1] - v[0]).cross(&(v[2] - v[0]));
                    let norm = normal.norm();
                    if norm < 1e-15 {
                        return;
                    }
                    normal /= norm;
                    // Primitives are convex: the outward normal points away from the part centre.
                    let centroid = (v[0] + v[1] + v[2]) / 3.0;
                    if normal.dot(&(centroid - part_centre)) < 0.0 {
                        normal = -normal;
                    }
                    // Back faces are hidden by the front ones.
                    if normal.dot(&centroid) >= 0.0 {
                        return;
                    }
                    let light = self.light(&(self.camera.world_from_k * normal));
                    buffer.draw(
                        &self.planes,
                        v,
                        TriangleShade {
                            rgb: scale(colour, light),
                            ground: false,
                        },
                    );
                });
            }
        }
    }

    /// Draws the terrain as nested square grids around the camera, each level twice as coarse as
    /// the one inside it and overlapping it by one of its cells, out to the drawing distance.
    fn draw_terrain(&self, buffer: &mut PinholeBuffer) {
        let terrain = &self.scene.terrain;
        let max = self.config.max_distance_m;
        let origin = self.camera.origin;
        let half = TERRAIN_CELLS / 2;
        let mut cell = TERRAIN_CELL_M;
        let mut level = 0;
        loop {
            let cx = (origin.x / cell).round() as i64;
            let cy = (origin.y / cell).round() as i64;
            // Heights of the level's vertex grid.
            let n = (TERRAIN_CELLS + 1) as usize;
            let vertex = |i: i64, j: i64| {
                let (x, y) = ((cx + i) as f64 * cell, (cy + j) as f64 * cell);
                Vector3::new(x, y, terrain.height(x, y))
            };
            let mut grid = Vec::with_capacity(n * n);
            for j in -half..=half {
                for i in -half..=half {
                    grid.push(vertex(i, j));
                }
            }
            let at = |i: i64, j: i64| grid[((j + half) as usize) * n + (i + half) as usize];
            // The inner level covers cells [−half/2, half/2) of this level; keep one cell of overlap.
            let hole = if level == 0 { 0 } else { half / 2 - 1 };
            for bj in (-half..half).step_by(TERRAIN_BLOCK as usize) {
                for bi in (-half..half).step_by(TERRAIN_BLOCK as usize) {
                    let (i1, j1) = (bi + TERRAIN_BLOCK, bj + TERRAIN_BLOCK);
                    if hole > 0 && bi >= -hole && i1 <= hole && bj >= -hole && j1 <= hole {
                        continue;
                    }
                    // Block culling by a sphere around its corners.
                    let corners = [at(bi, bj), at(i1, bj), at(bi, j1), at(i1, j1)];
                    let mid = corners.iter().sum::<Vector3<f64>>() / 4.0;
                    let mut radius = corners.iter().map(|c| (c - mid).norm()).fold(0.0, f64::max);
                    radius += terrain_relief(terrain);
                    if !buffer.sphere_visible(&self.planes, &self.camera.to_k(&mid), radius, max) {
                        continue;
                    }
                    for j in bj..j1 {
                        for i in bi..i1 {
                            if hole > 0 && i >= -hole && i < hole && j >= -hole && j < hole {
                                continue;
                            }
                            let (a, b, c, d) = (at(i, j), at(i + 1, j), at(i + 1, j + 1), at(i, j + 1));
                            for tri in [[a, b, c], [a, c, d]] {
                                let normal = (tri[1] - tri[0]).cross(&(tri[2] - tri[0])).normalize();
                                let light = self.light(&normal);
                                buffer.draw(
                                    &self.planes,
                                    tri.map(|p| self.camera.to_k(&p)),
                                    TriangleShade {
                                        rgb: [light; 3],
                                        ground: true,
                                    },
                                );
                            }
                        }
                    }
                }
            }
            if half as f64 * cell >= max || level >= 12 {
                break;
            }
            cell *= 2.0;
            level += 1;
        }
    }

    /// Sky gradient (or far ground below the horizon) for a ray that hits nothing.
    fn background(&self, dir_in_world: &Vector3<f64>) -> [f32; 3] {
        // The sine of the elevation shapes the gradient (no `asin` per pixel).
        let sin_elevation = (dir_in_world.z / dir_in_world.norm()) as f32;
        if sin_elevation >= 0.0 {
            mix(self.sky_horizon, palette::SKY_ZENITH, sin_elevation.min(1.0).sqrt())
        } else {
            mix(self.sky_horizon, palette::FAR_GROUND, (-sin_elevation * 25.0).min(1.0))
        }
    }

    /// The haze-blended colour of a surface `distance` metres away: the haze share is
    /// d / (d + haze distance), half the colour at the haze distance.
    fn haze(&self, colour: [f32; 3], distance: f64) -> [f32; 3] {
        let t = distance / (distance + self.config.haze_distance_m);
        mix(colour, self.sky_horizon, t as f32)
    }

    /// Colour of the ground at world point `p`, lit by `light`.
    fn ground_at(&self, p: &Vector3<f64>, light: f32) -> [f32; 3] {
        let surface = self.scene.roads.surface_at(p.x, p.y);
        let base = ground_colour(&surface);
        // Texture: value noise on a 25 cm lattice, stronger on grass.
        let amplitude = self.config.ground_texture as f32 * if surface == Surface::GRASS { 2.0 } else { 1.0 };
        let cell = hash2(floor_i64(p.x * 4.0) as u64, floor_i64(p.y * 4.0) as u64);
        let noise = ((cell >> 11) as f32 / (1u64 << 53) as f32) * 2.0 - 1.0;
        scale(base, light * (1.0 + amplitude * noise))
    }

    /// Colour seen along a world ray by casting it against the scene directly (the path for rays
    /// the pinhole buffer cannot hold).
    fn cast(&self, dir_in_world: &Vector3<f64>) -> [f32; 3] {
        let origin = Point3::from(self.camera.origin);
        let ray = Ray::new(origin, *dir_in_world);
        let mut limit = self.config.max_distance_m;
        let mut best: Option<[f32; 3]> = None;
        for placed in &self.objects {
            let oc = ray.origin - placed.centre_in_world;
            let b = oc.dot(&ray.dir);
            let cc = oc.norm_squared() - placed.radius * placed.radius;
            if b * b - cc < 0.0 || (cc > 0.0 && b > 0.0) {
                continue;
            }
            let local = ray.transformed(&placed.object_from_world);
            let object = &self.scene.objects[placed.index];
            if let Some((hit, surface)) = object.shape.intersect(&local, limit) {
                limit = hit.t;
                let normal = placed.world_from_object.rotation * hit.normal;
                let colour = part_colour(placed.index, object.label, &surface);
                best = Some(self.haze(scale(colour, self.light(&normal)), hit.t));
            }
        }
        if let Some(hit) = self.scene.terrain.intersect(&ray, limit) {
            let p = ray.at(hit.t).coords;
            return self.haze(self.ground_at(&p, self.light(&hit.normal)), hit.t);
        }
        best.unwrap_or_else(|| self.background(dir_in_world))
    }
}

/// `floor(x)` as an integer without a libm call (baseline x86-64 has no rounding instruction).
fn floor_i64(x: f64) -> i64 {
    let t = x as i64;
    t - i64::from(x < t as f64)
}

/// Upper bound of how far the terrain strays from a plane through a block's corners (m).
fn terrain_relief(terrain: &super::terrain::Terrain) -> f64 {
    match terrain {
        super::terrain::Terrain::Rolling { waves } => 2.0 * waves.iter().map(|w| w.amplitude_m.abs()).sum::<f64>(),
        _ => 0.0,
    }
}

/// The pinhole buffer sized for one output image.
struct Frame {
    buffer: PinholeBuffer,
    width: u32,
    height: u32,
}

impl Frame {
    fn new(map: &LensMap, calibration: &CameraCalibration) -> Self {
        let (extent, density) = map.pinhole_extent();
        let g = GUARD_PX / density;
        let extent = [extent[0] - g, extent[1] - g, extent[2] + g, extent[3] + g];
        Frame {
            buffer: PinholeBuffer::new(extent, density, map.width * map.height),
            width: calibration.width,
            height: calibration.height,
        }
    }

    /// Shades every output pixel from the buffer sample its ray falls in.
    fn shade(&self, view: &SceneView<'_>, map: &LensMap) -> RgbImage {
        let buffer = &self.buffer;
        let mut out = RgbImage::new(self.width, self.height);
        let stride = self.width as usize * 3;
        let raw: &mut [u8] = &mut out;
        let r = &view.camera.world_from_k;
        for py in 0..map.height {
            let row = &mut raw[py * stride..(py + 1) * stride];
            map.row(py, |px, ray| {
                let colour = match ray {
                    PixelRay::None => [0.0; 3],
                    PixelRay::Wide(dir) => view.cast(&(r * dir)),
                    PixelRay::Pinhole(u, v) => {
                        // Truncation is the floor here: negative positions are outside anyway.
                        let bx = (u - buffer.u0) * buffer.scale;
                        let by = (v - buffer.v0) * buffer.scale;
                        let k = if bx >= 0.0
                            && by >= 0.0
                            && (bx as usize) < buffer.width
                            && (by as usize) < buffer.height
                        {
                            by as usize * buffer.width + bx as usize
                        } else {
                            usize::MAX
                        };
                        let dir = r * Vector3::new(u, v, 1.0);
                        match buffer.triangle.get(k) {
                            Some(&id) if id != EMPTY => {
                                let z = 1.0 / f64::from(buffer.inv_depth[k]);
                                let shade = buffer.shades[id as usize];
                                let colour = if shade.ground {
                                    let p = view.camera.origin + dir * z;
                                    view.ground_at(&p, shade.rgb[0])
                                } else {
                                    shade.rgb
                                };
                                view.haze(colour, z * dir.norm())
                            }
                            _ => view.background(&dir),
                        }
                    }
                };
                let o = px * 3;
                // `as u8` saturates, and + 0.5 then truncation rounds non-negative values (no
                // libm `round` call per channel).
                row[o] = (colour[0] + 0.5) as u8;
                row[o + 1] = (colour[1] + 0.5) as u8;
                row[o + 2] = (colour[2] + 0.5) as u8;
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::{project_point, project_point_in_camera};
    use crate::frame::Platform;
    use crate::sim::SimConfig;
    use crate::sim::object::{ObjectShape, Part};
    use crate::sim::scene::{Motion, SceneObject};
    use crate::sim::terrain::TerrainKind;
    use nalgebra::{Point2, UnitQuaternion};

    /// Sweep 0's reference time with the default config.
    const TIME: i64 = 1_600_000_000_050_000;

    /// No haze and no ground texture, so colours are exactly material × light.
    fn plain() -> CameraRenderConfig {
        CameraRenderConfig {
            haze_distance_m: 1e12,
            ground_texture: 0.0,
            ..CameraRenderConfig::default()
        }
    }

    /// A standing quadruped on flat ground whose scene is only `objects`, each a shape placed by
    /// its pose in the sensor frame at `TIME` (object frames have their origin on the ground).
    fn staged(objects: Vec<(ObjectShape, Isometry3<f64>)>) -> Simulator {
        let mut config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        config.terrain.kind = TerrainKind::Flat;
        config.quadruped.speed_mps = 0.0;
        let mut sim = Simulator::new(config, Platform::Quadruped, 5).unwrap();
        let world_from_sensor = sim.world_from_sensor_at(TIME);
        sim.scene_mut().objects = objects
            .into_iter()
            .map(|(shape, sensor_from_object)| SceneObject {
                shape,
                motion: Motion::Static(world_from_sensor * sensor_from_object),
                label: None,
                track_id: 0,
            })
            .collect();
        sim
    }

    /// An object frame `(x, y)` ahead in the sensor frame, on the ground.
    fn on_ground(sim_height: f64, x: f64, y: f64) -> Isometry3<f64> {
        Isometry3::translation(x, y, -sim_height)
    }

    /// A 640×480 OpenCV camera at the sensor origin looking along the sensor's +x.
    fn forward_camera(distortion: Distortion) -> CameraCalibration {
        let rotation = Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0);
        CameraCalibration {
            width: 640,
            height: 480,
            fx: 400.0,
            fy: 400.0,
            cx: 320.0,
            cy: 240.0,
            distortion,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: Isometry3::from_parts(
                nalgebra::Translation3::identity(),
                UnitQuaternion::from_matrix(&rotation),
            ),
        }
    }

    /// The sensor's height above the flat ground at `TIME`.
    fn sensor_height() -> f64 {
        staged(Vec::new()).world_from_sensor_at(TIME).translation.vector.z
    }

    fn render(sim: &Simulator, calibration: &CameraCalibration) -> RgbImage {
        let pose = sim.world_from_sensor_at(TIME);
        render_camera_posed(sim, TIME, &pose, calibration, &plain()).unwrap()
    }

    /// `colour × light` as the renderer rounds it, with the light of a world normal computed by
    /// hand from the default sun (azimuth 215°, elevation 50°, ambient 0.45).
    fn lit(colour: [f32; 3], normal_in_world: Vector3<f64>) -> [u8; 3] {
        let (az, el) = (215f64.to_radians(), 50f64.to_radians());
        let sun = Vector3::new(el.cos() * az.cos(), el.cos() * az.sin(), el.sin());
        let light = 0.45 + 0.55 * normal_in_world.dot(&sun).max(0.0);
        colour.map(|c| (c * light as f32).round() as u8)
    }

    fn close(a: [u8; 3], b: [u8; 3]) -> bool {
        a.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 1)
    }

    fn is_sky(p: [u8; 3]) -> bool {
        i32::from(p[2]) > i32::from(p[0]) + 20
    }

    fn wall(size: Vector3<f64>, surface: Surface) -> ObjectShape {
        ObjectShape::new(vec![Part::cuboid(size, Vector3::new(0.0, 0.0, size.z / 2.0), surface)])
    }

    #[test]
    fn a_box_appears_where_its_corners_project_in_its_colour() {
        let h = sensor_height();
        let sim = staged(vec![(
            wall(Vector3::new(2.0, 3.0, 2.0), Surface::CONCRETE),
            on_ground(h, 10.0, 0.5),
        )]);
        let calibration = forward_camera(Distortion::None);
        let image = render(&sim, &calibration);
        // The camera is between the box's bottom and top, so it sees only the front face (x = 9).
        let corners: Vec<Point2<f64>> = [(-1.0, -h), (2.0, -h), (-1.0, 2.0 - h), (2.0, 2.0 - h)]
            .iter()
            .map(|&(y, z)| project_point(&calibration, &Point3::new(9.0, y, z)).unwrap())
            .collect();
        let (x_min, x_max) = (
            corners.iter().map(|p| p.x).fold(f64::INFINITY, f64::min),
            corners.iter().map(|p| p.x).fold(f64::NEG_INFINITY, f64::max),
        );
        let (y_min, y_max) = (
            corners.iter().map(|p| p.y).fold(f64::INFINITY, f64::min),
            corners.iter().map(|p| p.y).fold(f64::NEG_INFINITY, f64::max),
        );
        // Hand-computed: x = 320 + 400·(−1.5 … 1)/9 … i.e. y_sensor ∈ [−1, 2] → x ∈ [231.1, 364.4].
        assert!((x_min - (320.0 - 400.0 * 2.0 / 9.0)).abs() < 1e-9 && (x_max - (320.0 + 400.0 / 9.0)).abs() < 1e-9);
        let front_normal = sim.world_from_sensor_at(TIME).rotation * Vector3::new(-1.0, 0.0, 0.0);
        let expected = lit(palette::WALL, front_normal);
        let at = |x: f64, y: f64| image.get_pixel(x.floor() as u32, y.floor() as u32).0;
        for k in 0..=20 {
            let f = k as f64 / 20.0;
            let (x, y) = (
                x_min + 2.0 + f * (x_max - x_min - 4.0),
                y_min + 2.0 + f * (y_max - y_min - 4.0),
            );
            assert!(
                close(at(x, y), expected),
                "inside at ({x:.1}, {y:.1}): {:?} vs {expected:?}",
                at(x, y)
            );
            assert!(close(at(x_min + 2.0, y), expected) && close(at(x_max - 2.0, y), expected));
            assert!(!close(at(x_min - 2.0, y), expected), "left of the box at y {y:.1}");
            assert!(!close(at(x_max + 2.0, y), expected), "right of the box at y {y:.1}");
            assert!(!close(at(x, y_min - 2.0), expected), "above the box at x {x:.1}");
        }
        // Above the box is sky, below it ground.
        assert!(is_sky(at((x_min + x_max) / 2.0, y_min - 3.0)));
        assert!(!is_sky(at((x_min + x_max) / 2.0, y_max + 3.0)));
    }

    #[test]
    fn sky_above_the_horizon_and_ground_below() {
        let sim = staged(Vec::new());
        let image = render(&sim, &forward_camera(Distortion::None));
        // The camera looks level, so the horizon is the row through cy = 240 (the ground ends
        // ~1 km away, well under a pixel below it).
        for y in (0..237).step_by(7).chain(243..480) {
            for x in (0..640).step_by(9) {
                let p = image.get_pixel(x, y).0;
                assert_eq!(is_sky(p), y < 240, "pixel ({x}, {y}) = {p:?}");
            }
        }
        // Higher up, the sky is a deeper blue.
        let (top, low) = (image.get_pixel(320, 0).0, image.get_pixel(320, 230).0);
        assert!(top[0] < low[0] && top[2] <= low[2], "{top:?} vs {low:?}");
    }

    #[test]
    fn the_nearer_object_hides_the_farther_one() {
        let h = sensor_height();
        let near = (
            wall(Vector3::new(1.0, 1.0, 1.0), Surface::METAL),
            on_ground(h, 6.0, 0.0),
        );
        let far = (
            wall(Vector3::new(1.0, 6.0, 3.0), Surface::CONCRETE),
            on_ground(h, 15.0, 0.0),
        );
        let calibration = forward_camera(Distortion::None);
        let image = render(&staged(vec![near.clone(), far.clone()]), &calibration);
        let reversed = render(&staged(vec![far, near]), &calibration);
        assert_eq!(image.as_raw(), reversed.as_raw(), "drawing order must not matter");
        let normal = staged(Vec::new()).world_from_sensor_at(TIME).rotation * Vector3::new(-1.0, 0.0, 0.0);
        // The near cube's front face centre (x 5.5, z −h + 0.5) and a point of the far wall beside it.
        let pixel_of = |p: Point3<f64>| {
            let q = project_point(&calibration, &p).unwrap();
            image.get_pixel(q.x as u32, q.y as u32).0
        };
        assert!(close(
            pixel_of(Point3::new(5.5, 0.0, -h + 0.5)),
            lit(palette::METAL, normal)
        ));
        assert!(
            close(pixel_of(Point3::new(14.5, 0.0, -h + 0.5)), lit(palette::METAL, normal)),
            "far wall is hidden there"
        );
        assert!(close(
            pixel_of(Point3::new(14.5, 2.0, -h + 0.5)),
            lit(palette::WALL, normal)
        ));
    }

    /// The LiDAR occlusion estimate of `crate::camera` against the image's truth: a 2 × 3 × 2 m
    /// concrete block 11 m ahead (front face), half hidden behind a metal panel at 5.5 m whose
    /// inner edge is on the optical axis, 0.70 hidden by a wider one, and with no panel. The truth is the share
    /// of the block's footprint pixels that show the panel among those showing either.
    #[test]
    fn lidar_occlusion_agrees_with_the_rendered_image() {
        use crate::camera::{CameraReturns, box_views};
        use crate::cloud::PointCloud;
        use crate::geometry::Box3;
        let h = sensor_height();
        let block = (
            wall(Vector3::new(2.0, 3.0, 2.0), Surface::CONCRETE),
            on_ground(h, 12.0, 0.0),
        );
        let panel = (
            wall(Vector3::new(1.0, 1.5, 3.0), Surface::METAL),
            on_ground(h, 6.0, 0.75),
        );
        // A wider panel whose inner edge (y = −0.3 m at 5.5 m) falls inside a grid column: it hides
        // (1.5/11 + 0.3/5.5) / (3/11) = 0.70 of the block.
        let wide_panel = (
            wall(Vector3::new(1.0, 1.8, 3.0), Surface::METAL),
            on_ground(h, 6.0, 0.6),
        );
        let block_box = Box3::new(12.0, 0.0, 1.0 - h, 2.0, 3.0, 2.0, 0.0);
        let calibration = forward_camera(Distortion::None);
        let normal = staged(Vec::new()).world_from_sensor_at(TIME).rotation * Vector3::new(-1.0, 0.0, 0.0);
        let (concrete, metal) = (lit(palette::WALL, normal), lit(palette::METAL, normal));
        for (objects, expected) in [
            (vec![block.clone(), panel], 0.5),
            (vec![block.clone(), wide_panel], 0.7),
            (vec![block], 0.0),
        ] {
            let sim = staged(objects);
            let sweep = sim.sweep(0).unwrap();
            assert_eq!(sweep.reference_time_micros, TIME);
            let points = sim.sweep_points(&sweep);
            let column = |k: usize| points.iter().map(|p| p.position[k] as f32).collect::<Vec<_>>();
            let cloud = PointCloud::from_columns(column(0), column(1), column(2), vec![0.0; points.len()]).unwrap();
            let returns = CameraReturns::new(&calibration, &cloud);
            let views = box_views(&[(&calibration, &returns)], &block_box);
            let view = views[0];
            let image = render(&sim, &calibration);
            let f = view.footprint;
            let (mut shows_block, mut shows_panel) = (0usize, 0usize);
            for y in f.y_min.ceil() as u32..f.y_max.floor() as u32 {
                for x in f.x_min.ceil() as u32..f.x_max.floor() as u32 {
                    let p = image.get_pixel(x, y).0;
                    shows_block += usize::from(close(p, concrete));
                    shows_panel += usize::from(close(p, metal));
                }
            }
            let truth = shows_panel as f64 / (shows_block + shows_panel) as f64;
            let estimate = view.occlusion.unwrap();
            println!(
                "occlusion: image {truth:.3}, LiDAR {estimate:.3} ({} returns in view)",
                returns.len()
            );
            assert!((truth - expected).abs() < 0.03, "image truth {truth}");
            assert!(
                (estimate - truth).abs() <= 0.125,
                "LiDAR occlusion {estimate} against the image's {truth}"
            );
        }
    }

    #[test]
    fn a_straight_bar_renders_where_the_distorted_projection_puts_it() {
        let h = sensor_height();
        for distortion in [
            Distortion::RadTan {
                k1: -0.3,
                k2: 0.08,
                p1: 0.001,
                p2: -0.001,
                k3: 0.0,
            },
            Distortion::Equidistant {
                k1: 0.02,
                k2: -0.005,
                k3: 0.0,
                k4: 0.0,
            },
        ] {
            // A 10 m bar across the view, 8 m ahead, 1.6 m above the camera, with sky behind.
            let bar = ObjectShape::new(vec![Part::cuboid(
                Vector3::new(0.1, 10.0, 0.1),
                Vector3::new(0.0, 0.0, h + 1.6),
                Surface::METAL,
            )]);
            let sim = staged(vec![(bar, on_ground(h, 8.0, 0.0))]);
            let calibration = forward_camera(distortion);
            let image = render(&sim, &calibration);
            let normal = sim.world_from_sensor_at(TIME).rotation * Vector3::new(-1.0, 0.0, 0.0);
            let expected = lit(palette::METAL, normal);
            let pinhole = forward_camera(Distortion::None);
            let mut max_bend: f64 = 0.0;
            for k in -9..=9 {
                let p = Point3::new(7.95, f64::from(k) * 0.5, 1.6);
                let q = project_point(&calibration, &p).unwrap();
                let (x, y) = (q.x.floor() as u32, q.y.floor() as u32);
                assert!(close(image.get_pixel(x, y).0, expected), "{distortion:?}: bar at {q:?}");
                assert!(
                    is_sky(image.get_pixel(x, y - 5).0) && is_sky(image.get_pixel(x, y + 5).0),
                    "{distortion:?}: bar too thick at {q:?}"
                );
                max_bend = max_bend.max((project_point(&pinhole, &p).unwrap().y - q.y).abs());
            }
            // Without the lens model the bar would be elsewhere by several pixels.
            assert!(max_bend > 5.0, "{distortion:?}: {max_bend}");
        }
    }

    #[test]
    fn undistorted_rays_project_back_to_their_pixels() {
        // The real Waymo FRONT intrinsics (shared fixture) and a fisheye.
        let waymo = Distortion::RadTan {
            k1: 0.040358363932006036,
            k2: -0.33001662226602974,
            p1: 0.0010402702690110032,
            p2: -0.0015669020781401406,
            k3: 0.0,
        };
        let fisheye = Distortion::Equidistant {
            k1: -0.01,
            k2: 0.003,
            k3: 0.0,
            k4: 0.0,
        };
        for (distortion, fx, width, height) in [(waymo, 2044.5, 1920u32, 1280u32), (fisheye, 400.0, 800, 600)] {
            let c = CameraCalibration {
                width,
                height,
                fx,
                fy: fx,
                cx: f64::from(width) / 2.0 - 10.0,
                cy: f64::from(height) / 2.0 + 3.0,
                distortion,
                axes: CameraAxes::OpenCv,
                sensor_from_camera: Isometry3::identity(),
            };
            let map = LensMap::new(&c);
            let mut checked = 0;
            for py in (0..height as usize).step_by(37).chain([height as usize - 1]) {
                map.row(py, |px, ray| {
                    let PixelRay::Pinhole(u, v) = ray else {
                        panic!("{distortion:?}: pixel ({px}, {py}) has no pinhole ray");
                    };
                    let back = project_point_in_camera(&c, &Point3::new(u, v, 1.0)).unwrap();
                    let err = ((back.x - px as f64 - 0.5).powi(2) + (back.y - py as f64 - 0.5).powi(2)).sqrt();
                    assert!(err < 0.02, "{distortion:?}: pixel ({px}, {py}) maps back {err} px off");
                    checked += 1;
                });
            }
            assert!(checked > 10_000);
        }
    }

    #[test]
    fn rays_outside_the_lens_model_are_black_and_wide_rays_are_cast() {
        // A fisheye seeing 100° to each side at the corners: corners are beyond 90° (black),
        // the rim between 74° and 90° is ray cast, and the ground shows at the bottom edge.
        let c = CameraCalibration {
            width: 400,
            height: 400,
            fx: 110.0,
            fy: 110.0,
            cx: 200.0,
            cy: 200.0,
            distortion: Distortion::Equidistant {
                k1: 0.0,
                k2: 0.0,
                k3: 0.0,
                k4: 0.0,
            },
            ..forward_camera(Distortion::None)
        };
        let sim = staged(Vec::new());
        let image = render(&sim, &c);
        assert_eq!(image.get_pixel(0, 0).0, [0, 0, 0]);
        // 160 px off axis = 83°: a wide (cast) ray, ground below, sky above.
        let (down, up) = (image.get_pixel(200, 360).0, image.get_pixel(200, 40).0);
        assert!(!is_sky(down) && down != [0, 0, 0], "{down:?}");
        assert!(is_sky(up), "{up:?}");
    }

    #[test]
    fn raster_agrees_with_ray_casting_on_a_generated_scene() {
        let config = SimConfig {
            frames: 2,
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Platform::Vehicle, 11).unwrap();
        let pose = sim.world_from_sensor_at(TIME);
        let calibration = CameraCalibration {
            // Waymo FRONT-like, quarter size to keep the debug test quick.
            width: 480,
            height: 320,
            fx: 511.0,
            fy: 511.0,
            cx: 237.0,
            cy: 158.0,
            distortion: Distortion::RadTan {
                k1: 0.04,
                k2: -0.33,
                p1: 0.001,
                p2: -0.0015,
                k3: 0.0,
            },
            axes: CameraAxes::Waymo,
            sensor_from_camera: Isometry3::translation(1.5, 0.0, 2.1),
        };
        let render_config = plain();
        let image = render_camera_posed(&sim, TIME, &pose, &calibration, &render_config).unwrap();
        // Cast the exact shapes (not the tessellation) for a grid of pixels.
        let camera = PinholeCamera::new(&pose, &calibration);
        let map = LensMap::new(&calibration);
        let frame = Frame::new(&map, &calibration);
        let view = SceneView::new(sim.scene(), sim.seconds(TIME), &camera, &frame.buffer, &render_config);
        let (mut same, mut total, mut objects) = (0, 0, 0);
        for py in (0..320).step_by(4) {
            map.row(py, |px, ray| {
                if px % 4 != 0 {
                    return;
                }
                let PixelRay::Pinhole(u, v) = ray else { return };
                let cast = view.cast(&(camera.world_from_k * Vector3::new(u, v, 1.0)));
                let cast = cast.map(|c| c.round().clamp(0.0, 255.0) as u8);
                let got = image.get_pixel(px as u32, py as u32).0;
                total += 1;
                if got.iter().zip(&cast).all(|(a, b)| a.abs_diff(*b) <= 12) {
                    same += 1;
                }
                if !is_sky(cast) && !is_sky(got) {
                    objects += 1;
                }
            });
        }
        // Facets, shading normals and edges differ a little; the picture must not.
        assert!(same as f64 > 0.95 * total as f64, "{same} of {total} agree");
        assert!(
            objects > total / 4,
            "the view should not be all sky: {objects} of {total}"
        );
    }

    #[test]
    fn bad_calibrations_and_configs_are_errors() {
        let sim = staged(Vec::new());
        let pose = sim.world_from_sensor_at(TIME);
        let mut c = forward_camera(Distortion::None);
        c.width = 0;
        let e = render_camera_posed(&sim, TIME, &pose, &c, &plain()).unwrap_err();
        assert!(e.to_string().contains("camera.width"), "{e}");
        let mut c = forward_camera(Distortion::None);
        c.fx = f64::NAN;
        assert!(render_camera_posed(&sim, TIME, &pose, &c, &plain()).is_err());
        let bad = CameraRenderConfig {
            ambient: 1.5,
            ..plain()
        };
        let e = render_camera_posed(&sim, TIME, &pose, &forward_camera(Distortion::None), &bad).unwrap_err();
        assert!(e.to_string().contains("ambient"), "{e}");
    }
}
