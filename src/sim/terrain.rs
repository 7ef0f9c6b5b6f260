//! Ground surfaces: flat, sloped (both planes, intersected analytically) and a gently rolling
//! heightfield (a sum of sinusoids, intersected by safe marching then bisection).

use nalgebra::{Point3, Vector3};
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::shape::{Ray, SurfaceHit, ray_plane};

/// Which ground surface a scene stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerrainKind {
    /// A level plane at z = 0.
    Flat,
    /// A tilted plane through the origin.
    Sloped,
    /// A smooth heightfield of a few long-wavelength sinusoids.
    Rolling,
}

/// One sinusoid of a rolling heightfield: `amplitude · sin(kx·x + ky·y + phase)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wave {
    /// Amplitude (m).
    pub amplitude_m: f64,
    /// Wave number along x (rad/m).
    pub kx: f64,
    /// Wave number along y (rad/m).
    pub ky: f64,
    /// Phase (rad).
    pub phase: f64,
}

/// The ground of a scene, a height function `z = h(x, y)` over the world plane.
#[derive(Debug, Clone, PartialEq)]
pub enum Terrain {
    /// `z = 0`.
    Flat,
    /// `z = gx·x + gy·y` (gradient in m/m).
    Sloped {
        /// dz/dx.
        gx: f64,
        /// dz/dy.
        gy: f64,
    },
    /// `z = Σ waves`.
    Rolling {
        /// The sinusoids.
        waves: Vec<Wave>,
    },
}

/// `sin(x)` by a Taylor polynomial after reduction to [−π/2, π/2] (error below 1e-7): the
/// heightfield is defined with it, so heights, normals and ray hits all agree, at a fraction
/// of libm's cost in the marching loop.
pub fn smooth_sin(x: f64) -> f64 {
    use std::f64::consts::{FRAC_PI_2, PI, TAU};
    // Truncating cast instead of `round`, which is a library call on baseline x86-64.
    let mut r = x - (x * (1.0 / TAU)) as i64 as f64 * TAU;
    if r > PI {
        r -= TAU;
    } else if r < -PI {
        r += TAU;
    }
    if r > FRAC_PI_2 {
        r = PI - r;
    } else if r < -FRAC_PI_2 {
        r = -PI - r;
    }
    let r2 = r * r;
    r * (1.0
        + r2 * (-1.0 / 6.0
            + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362_880.0 + r2 * (-1.0 / 39_916_800.0))))))
}

/// Most march steps along one ray over the heightfield.
const MAX_MARCH_STEPS: usize = 256;

impl Terrain {
    /// A terrain of `kind`: slope magnitude `slope_deg` in a random direction, or waves of total
    /// amplitude `amplitude_m` with wavelengths around `wavelength_m`.
    pub fn generate(
        kind: TerrainKind,
        slope_deg: f64,
        amplitude_m: f64,
        wavelength_m: f64,
        rng: &mut impl rand::Rng,
    ) -> Terrain {
        match kind {
            TerrainKind::Flat => Terrain::Flat,
            TerrainKind::Sloped => {
                let dir = rng.random_range(0.0..std::f64::consts::TAU);
                let g = slope_deg.to_radians().tan();
                Terrain::Sloped {
                    gx: g * dir.cos(),
                    gy: g * dir.sin(),
                }
            }
            TerrainKind::Rolling => {
                let count = 3;
                let waves = (0..count)
                    .map(|_| {
                        let dir = rng.random_range(0.0..std::f64::consts::TAU);
                        let lambda = wavelength_m * rng.random_range(0.7..1.4);
                        let k = std::f64::consts::TAU / lambda;
                        Wave {
                            amplitude_m: amplitude_m / count as f64 * rng.random_range(0.7..1.3),
                            kx: k * dir.cos(),
                            ky: k * dir.sin(),
                            phase: rng.random_range(0.0..std::f64::consts::TAU),
                        }
                    })
                    .collect();
                Terrain::Rolling { waves }
            }
        }
    }

    /// Ground height at `(x, y)` (m).
    pub fn height(&self, x: f64, y: f64) -> f64 {
        match self {
            Terrain::Flat => 0.0,
            Terrain::Sloped { gx, gy } => gx * x + gy * y,
            Terrain::Rolling { waves } => waves
                .iter()
                .map(|w| w.amplitude_m * smooth_sin(w.kx * x + w.ky * y + w.phase))
                .sum(),
        }
    }

    /// Height gradient `(dz/dx, dz/dy)` at `(x, y)`.
    pub fn gradient(&self, x: f64, y: f64) -> (f64, f64) {
        match self {
            Terrain::Flat => (0.0, 0.0),
            Terrain::Sloped { gx, gy } => (*gx, *gy),
            Terrain::Rolling { waves } => waves.iter().fold((0.0, 0.0), |(gx, gy), w| {
                let c = w.amplitude_m * smooth_sin(w.kx * x + w.ky * y + w.phase + std::f64::consts::FRAC_PI_2);
                (gx + c * w.kx, gy + c * w.ky)
            }),
        }
    }

    /// Upward unit normal at `(x, y)`.
    pub fn normal(&self, x: f64, y: f64) -> Vector3<f64> {
        let (gx, gy) = self.gradient(x, y);
        Vector3::new(-gx, -gy, 1.0).normalize()
    }

    /// Highest point the terrain can reach anywhere, for ray culling (m).
    fn max_height_bound(&self) -> Option<f64> {
        match self {
            Terrain::Rolling { waves } => Some(waves.iter().map(|w| w.amplitude_m.abs()).sum()),
            _ => None,
        }
    }

    /// Upper bound of the slope |∇h| anywhere (m/m).
    fn slope_bound(&self) -> f64 {
        match self {
            Terrain::Flat => 0.0,
            Terrain::Sloped { gx, gy } => (gx * gx + gy * gy).sqrt(),
            Terrain::Rolling { waves } => waves
                .iter()
                .map(|w| w.amplitude_m.abs() * (w.kx * w.kx + w.ky * w.ky).sqrt())
                .sum(),
        }
    }

    /// Where `ray` (world frame) first meets the ground from above, with `t` in `(0, t_max)`.
    pub fn intersect(&self, ray: &Ray, t_max: f64) -> Option<SurfaceHit> {
        match self {
            Terrain::Flat => ray_plane(ray, &Point3::origin(), &Vector3::z(), t_max).filter(|h| h.normal.z > 0.0),
            Terrain::Sloped { gx, gy } => {
                let n = Vector3::new(-gx, -gy, 1.0).normalize();
                ray_plane(ray, &Point3::origin(), &n, t_max).filter(|h| h.normal.z > 0.0)
            }
            Terrain::Rolling { .. } => self.march(ray, t_max),
        }
    }

    /// Marches along the ray with steps that cannot skip the surface (the height above ground
    /// shrinks at most at rate |dz| + L·|dxy| for slope bound L), with a floor on the step so
    /// grazing rays finish, then bisects the first sign change.
    fn march(&self, ray: &Ray, t_max: f64) -> Option<SurfaceHit> {
        let top = self.max_height_bound().unwrap_or(f64::INFINITY);
        let d = ray.dir;
        let gap = |t: f64| {
            let p = ray.at(t);
            p.z - self.height(p.x, p.y)
        };
        let mut t = 0.0;
        if ray.origin.z > top {
            if d.z >= 0.0 {
                return None;
            }
            t = (ray.origin.z - top) / -d.z;
        }
        // Plain sqrt, not `hypot`: this runs once per ray.
        let rate = d.z.abs() + self.slope_bound() * (d.x * d.x + d.y * d.y).sqrt();
        if rate <= 0.0 {
            return None;
        }
        // A rising ray is done once it climbs above the highest crest.
        let t_end = if d.z > 0.0 && top.is_finite() {
            t_max.min(((top - ray.origin.z) / d.z).max(0.0))
        } else {
            t_max
        };
        let t_max = t_end;
        let mut f = gap(t);
        if f <= 0.0 {
            // Starting below ground: the ray is inside the terrain, no entry.
            return if t > 0.0 { Some(self.hit_at(ray, t)) } else { None };
        }
        let mut t_prev = t;
        for _ in 0..MAX_MARCH_STEPS {
            if t >= t_max {
                return None;
            }
            let step = (f / rate).max(0.05 + 0.04 * t);
            t_prev = t;
            t = (t + step).min(t_max);
            f = gap(t);
            if f <= 0.0 {
                break;
            }
            if t >= t_max {
                return None;
            }
        }
        if f > 0.0 {
            return None;
        }
        // Illinois false position on the bracket: converges in a handful of evaluations.
        let (mut lo, mut hi) = (t_prev, t);
        let (mut f_lo, mut f_hi) = (gap(lo), f);
        let mut t_hit = hi;
        let mut side = 0;
        for _ in 0..60 {
            if f_lo - f_hi <= 0.0 {
                break;
            }
            t_hit = lo + (hi - lo) * f_lo / (f_lo - f_hi);
            let f_mid = gap(t_hit);
            if f_mid.abs() < 1e-7 || hi - lo < 1e-6 {
                break;
            }
            if f_mid > 0.0 {
                lo = t_hit;
                f_lo = f_mid;
                if side == 1 {
                    f_hi *= 0.5;
                }
                side = 1;
            } else {
                hi = t_hit;
                f_hi = f_mid;
                if side == -1 {
                    f_lo *= 0.5;
                }
                side = -1;
            }
        }
        (t_hit > 0.0 && t_hit < t_max).then(|| self.hit_at(ray, t_hit))
    }

    fn hit_at(&self, ray: &Ray, t: f64) -> SurfaceHit {
        let p = ray.at(t);
        SurfaceHit {
            t,
            normal: self.normal(p.x, p.y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_sin_matches_libm() {
        for i in -20_000..20_000 {
            let x = i as f64 * 0.0031;
            assert!((smooth_sin(x) - x.sin()).abs() < 1e-7, "x = {x}");
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(3);
        let t = Terrain::generate(TerrainKind::Rolling, 0.0, 1.0, 60.0, &mut rng);
        for (x, y) in [(0.0, 0.0), (13.0, -40.0), (250.0, 77.0)] {
            let h = 1e-4;
            let gx = (t.height(x + h, y) - t.height(x - h, y)) / (2.0 * h);
            let gy = (t.height(x, y + h) - t.height(x, y - h)) / (2.0 * h);
            let (ax, ay) = t.gradient(x, y);
            assert!(
                (gx - ax).abs() < 1e-5 && (gy - ay).abs() < 1e-5,
                "({x},{y}): {gx},{gy} vs {ax},{ay}"
            );
        }
    }
}
