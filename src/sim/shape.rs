//! Solid primitives (cuboid, capped cylinder, ellipsoid, plane) and their ray intersections, each
//! in the primitive's own frame: the first surface a ray enters, never an exit from inside.

use nalgebra::{Isometry3, Point3, Vector3};

/// A ray with a unit direction; hits are reported as distances `t` along it (m).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ray {
    /// Start point.
    pub origin: Point3<f64>,
    /// Unit direction.
    pub dir: Vector3<f64>,
}

impl Ray {
    /// A ray from `origin` along `dir` (normalised here).
    pub fn new(origin: Point3<f64>, dir: Vector3<f64>) -> Self {
        Self {
            origin,
            dir: dir.normalize(),
        }
    }

    /// The point at distance `t` along the ray.
    pub fn at(&self, t: f64) -> Point3<f64> {
        self.origin + self.dir * t
    }

    /// The same ray expressed in another frame: `target_from_source` maps this ray's frame into it.
    pub fn transformed(&self, target_from_source: &Isometry3<f64>) -> Ray {
        Ray {
            origin: target_from_source * self.origin,
            dir: target_from_source.rotation * self.dir,
        }
    }
}

/// Where a ray enters a surface: distance along the ray and the outward unit normal there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurfaceHit {
    /// Distance along the ray (m).
    pub t: f64,
    /// Outward unit surface normal, in the frame the ray was given in.
    pub normal: Vector3<f64>,
}

/// A solid centred on its own frame's origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// An axis-aligned box with these half extents (m).
    Cuboid {
        /// Half extents along x, y, z (m).
        half: Vector3<f64>,
    },
    /// A capped cylinder along the local z axis.
    Cylinder {
        /// Radius (m).
        radius: f64,
        /// Half of the length along z (m).
        half_height: f64,
    },
    /// An axis-aligned ellipsoid (a sphere when the radii are equal).
    Ellipsoid {
        /// Semi-axes along x, y, z (m).
        radii: Vector3<f64>,
    },
}

impl Shape {
    /// The first entry of `ray` (in the shape's frame) with `t` in `(0, t_max)`.
    pub fn intersect(&self, ray: &Ray, t_max: f64) -> Option<SurfaceHit> {
        match *self {
            Shape::Cuboid { half } => ray_cuboid(ray, &half, t_max),
            Shape::Cylinder { radius, half_height } => ray_cylinder(ray, radius, half_height, t_max),
            Shape::Ellipsoid { radii } => ray_ellipsoid(ray, &radii, t_max),
        }
    }

    /// Half extents of the axis-aligned box around this shape after rotating it by `rotation`.
    pub fn rotated_half_extents(&self, rotation: &nalgebra::UnitQuaternion<f64>) -> Vector3<f64> {
        let r = rotation.to_rotation_matrix();
        let m = r.matrix();
        match *self {
            Shape::Cuboid { half } => Vector3::from_fn(|i, _| (0..3).map(|j| m[(i, j)].abs() * half[j]).sum::<f64>()),
            Shape::Cylinder { radius, half_height } => Vector3::from_fn(|i, _| {
                let a = m[(i, 2)];
                a.abs() * half_height + radius * (1.0 - a * a).max(0.0).sqrt()
            }),
            Shape::Ellipsoid { radii } => {
                Vector3::from_fn(|i, _| (0..3).map(|j| (m[(i, j)] * radii[j]).powi(2)).sum::<f64>().sqrt())
            }
        }
    }
}

/// Slab test: the first entry of `ray` into the box `[-half, half]`, with `t` in `(0, t_max)`.
pub fn ray_cuboid(ray: &Ray, half: &Vector3<f64>, t_max: f64) -> Option<SurfaceHit> {
    let mut t_enter = f64::NEG_INFINITY;
    let mut t_exit = f64::INFINITY;
    let mut enter_axis = 0;
    let mut enter_sign = 0.0;
    for axis in 0..3 {
        let o = ray.origin[axis];
        let d = ray.dir[axis];
        if d.abs() < 1e-15 {
            if o.abs() > half[axis] {
                return None;
            }
            continue;
        }
        let inv = 1.0 / d;
        let (near, far) = {
            let a = (-half[axis] - o) * inv;
            let b = (half[axis] - o) * inv;
            if a < b { (a, b) } else { (b, a) }
        };
        if near > t_enter {
            t_enter = near;
            enter_axis = axis;
            // The entry face faces against the ray.
            enter_sign = -d.signum();
        }
        t_exit = t_exit.min(far);
        if t_enter > t_exit {
            return None;
        }
    }
    if t_enter <= 0.0 || t_enter >= t_max {
        return None;
    }
    let mut normal = Vector3::zeros();
    normal[enter_axis] = enter_sign;
    Some(SurfaceHit { t: t_enter, normal })
}

/// The first entry of `ray` into the capped cylinder of `radius` around the z axis spanning
/// `z ∈ [-half_height, half_height]`, with `t` in `(0, t_max)`.
pub fn ray_cylinder(ray: &Ray, radius: f64, half_height: f64, t_max: f64) -> Option<SurfaceHit> {
    let (ox, oy, oz) = (ray.origin.x, ray.origin.y, ray.origin.z);
    let (dx, dy, dz) = (ray.dir.x, ray.dir.y, ray.dir.z);
    // Interval inside the infinite cylinder.
    let a = dx * dx + dy * dy;
    let (side_in, side_out) = if a < 1e-15 {
        if ox * ox + oy * oy > radius * radius {
            return None;
        }
        (f64::NEG_INFINITY, f64::INFINITY)
    } else {
        let b = ox * dx + oy * dy;
        let c = ox * ox + oy * oy - radius * radius;
        let disc = b * b - a * c;
        if disc < 0.0 {
            return None;
        }
        let s = disc.sqrt();
        ((-b - s) / a, (-b + s) / a)
    };
    // Interval between the caps.
    let (cap_in, cap_out) = if dz.abs() < 1e-15 {
        if oz.abs() > half_height {
            return None;
        }
        (f64::NEG_INFINITY, f64::INFINITY)
    } else {
        let p = (-half_height - oz) / dz;
        let q = (half_height - oz) / dz;
        if p < q { (p, q) } else { (q, p) }
    };
    let t_enter = side_in.max(cap_in);
    let t_exit = side_out.min(cap_out);
    if t_enter > t_exit || t_enter <= 0.0 || t_enter >= t_max {
        return None;
    }
    let normal = if side_in >= cap_in {
        let p = ray.at(t_enter);
        Vector3::new(p.x, p.y, 0.0).normalize()
    } else {
        Vector3::new(0.0, 0.0, -dz.signum())
    };
    Some(SurfaceHit { t: t_enter, normal })
}

/// The first entry of `ray` into the ellipsoid with semi-axes `radii`, with `t` in `(0, t_max)`.
pub fn ray_ellipsoid(ray: &Ray, radii: &Vector3<f64>, t_max: f64) -> Option<SurfaceHit> {
    // Scaling space by 1/radii maps the ellipsoid onto the unit sphere and keeps `t`.
    let o = ray.origin.coords.component_div(radii);
    let d = ray.dir.component_div(radii);
    let a = d.dot(&d);
    let b = o.dot(&d);
    let c = o.dot(&o) - 1.0;
    let disc = b * b - a * c;
    if disc < 0.0 {
        return None;
    }
    let t = (-b - disc.sqrt()) / a;
    if t <= 0.0 || t >= t_max {
        return None;
    }
    let p = ray.at(t);
    let normal = Vector3::new(
        p.x / (radii.x * radii.x),
        p.y / (radii.y * radii.y),
        p.z / (radii.z * radii.z),
    )
    .normalize();
    Some(SurfaceHit { t, normal })
}

/// Where `ray` crosses the plane through `point` with unit `normal`, from either side, with `t`
/// in `(0, t_max)`; the reported normal faces the ray.
pub fn ray_plane(ray: &Ray, point: &Point3<f64>, normal: &Vector3<f64>, t_max: f64) -> Option<SurfaceHit> {
    let denom = ray.dir.dot(normal);
    if denom.abs() < 1e-15 {
        return None;
    }
    let t = (point - ray.origin).dot(normal) / denom;
    if t <= 0.0 || t >= t_max {
        return None;
    }
    let facing = if denom < 0.0 { *normal } else { -*normal };
    Some(SurfaceHit { t, normal: facing })
}
