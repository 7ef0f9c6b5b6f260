//! Up and sensor height from the ground: the lowest return per grid cell around the sensor (low
//! along a prior up), a RANSAC plane whose normal must stay near that prior (walls and ramps fail
//! it) scored by its inliers less twice the candidates well below it (the ground is the lowest
//! surface, so roofs lose the vote), then a least-squares refinement on the inliers.

use nalgebra::{Matrix3, SymmetricEigen, Unit, Vector3};

use super::gravity::{GravityMethod, UpEstimate, angle_between};

/// How the ground is looked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundParams {
    /// Grid cell size of the lowest-return selection (m).
    pub cell_m: f64,
    /// Horizontal distance from the sensor considered (m).
    pub max_range_m: f64,
    /// Returns closer than this below the sensor are not ground candidates (m).
    pub min_depth_m: f64,
    /// Plane distance of an inlier (m).
    pub inlier_m: f64,
    /// Largest angle between a plane's normal and the prior up (rad).
    pub max_tilt_from_prior_rad: f64,
    /// RANSAC hypotheses.
    pub iterations: usize,
    /// Fewest inliers for a fit.
    pub min_inliers: usize,
    /// Angular sigma floor (rad): how far the local ground may lean from level.
    pub slope_sigma_rad: f64,
}

impl Default for GroundParams {
    fn default() -> Self {
        GroundParams {
            cell_m: 1.0,
            max_range_m: 60.0,
            min_depth_m: 0.2,
            inlier_m: 0.12,
            max_tilt_from_prior_rad: 12f64.to_radians(),
            iterations: 64,
            min_inliers: 40,
            slope_sigma_rad: 1.5f64.to_radians(),
        }
    }
}

/// A ground plane under the sensor.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundFit {
    /// The plane's normal as an up estimate.
    pub up: UpEstimate,
    /// Height of the sensor origin above the plane, along its normal (m).
    pub height_m: f64,
    /// Candidates (lowest return per cell) within the plane's inlier distance.
    pub inliers: usize,
    /// Candidates considered.
    pub candidates: usize,
    /// RMS plane distance of the inliers (m).
    pub rms_m: f64,
    /// A spatially even sample of the inliers (one per 4 m cell), sensor frame: ground heights
    /// a later sweep can look up where it is now.
    pub samples: Vec<[f32; 3]>,
}

/// A candidate more than this many inlier distances below a plane counts against it.
const BELOW_FACTOR: f64 = 3.0;

/// How many inliers each candidate below a plane costs it.
const BELOW_WEIGHT: usize = 2;

/// Cell size of [`GroundFit::samples`] (m).
const SAMPLE_CELL_M: f64 = 4.0;

/// A small deterministic generator (SplitMix64) for the RANSAC samples.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n.max(1)
    }
}

/// The ground plane under a sweep (`x`, `y`, `z`: points in the sensor frame), looked for low
/// along `prior` (up in the sensor frame). `None` when fewer than `min_inliers` candidates agree
/// on a plane within the prior's cone.
pub fn fit_ground(
    x: &[f32],
    y: &[f32],
    z: &[f32],
    prior: &Unit<Vector3<f64>>,
    params: &GroundParams,
) -> Option<GroundFit> {
    let p = prior.into_inner();
    // A basis (e1, e2) of the plane across the prior up.
    let helper = if p.x.abs() < 0.9 { Vector3::x() } else { Vector3::y() };
    let e1 = p.cross(&helper).normalize();
    let e2 = p.cross(&e1);
    let cells_per_side = ((2.0 * params.max_range_m / params.cell_m).ceil() as usize).clamp(1, 4096);
    let mut lowest: Vec<(f64, u32)> = vec![(f64::INFINITY, u32::MAX); cells_per_side * cells_per_side];
    let (r2, inv_cell, half) = (
        params.max_range_m * params.max_range_m,
        1.0 / params.cell_m,
        params.max_range_m,
    );
    let n = x.len().min(y.len()).min(z.len()).min(u32::MAX as usize);
    for i in 0..n {
        let v = Vector3::new(f64::from(x[i]), f64::from(y[i]), f64::from(z[i]));
        let h = p.dot(&v);
        if h.is_nan() || h >= -params.min_depth_m {
            continue;
        }
        let (a, b) = (e1.dot(&v), e2.dot(&v));
        if a * a + b * b > r2 {
            continue;
        }
        let ca = (((a + half) * inv_cell) as usize).min(cells_per_side - 1);
        let cb = (((b + half) * inv_cell) as usize).min(cells_per_side - 1);
        let cell = &mut lowest[ca * cells_per_side + cb];
        if h < cell.0 {
            *cell = (h, i as u32);
        }
    }
    let candidates: Vec<Vector3<f64>> = lowest
        .iter()
        .filter(|c| c.1 != u32::MAX)
        .map(|&(_, i)| {
            let i = i as usize;
            Vector3::new(f64::from(x[i]), f64::from(y[i]), f64::from(z[i]))
        })
        .collect();
    if candidates.len() < params.min_inliers.max(3) {
        return None;
    }
    // RANSAC over plane hypotheses from three candidates.
    let mut rng = SplitMix(candidates.len() as u64 ^ 0x5EED);
    let mut best: Option<(usize, f64, Vector3<f64>, f64)> = None; // (score, offset, normal, offset)
    for _ in 0..params.iterations {
        let (a, b, c) = (
            candidates[rng.below(candidates.len())],
            candidates[rng.below(candidates.len())],
            candidates[rng.below(candidates.len())],
        );
        let cross = (b - a).cross(&(c - a));
        let area = cross.norm();
        if area < 1e-3 * (b - a).norm().max((c - a).norm()).powi(2).max(1e-9) {
            continue;
        }
        let mut normal = cross / area;
        if normal.dot(&p) < 0.0 {
            normal = -normal;
        }
        if angle_between(&normal, &p) > params.max_tilt_from_prior_rad {
            continue;
        }
        let offset = -normal.dot(&a);
        // The ground is the lowest surface: a roof or a deck has candidates well below it.
        let (mut inliers, mut below) = (0usize, 0usize);
        for q in &candidates {
            let d = normal.dot(q) + offset;
            if d.abs() < params.inlier_m {
                inliers += 1;
            } else if d < -BELOW_FACTOR * params.inlier_m {
                below += 1;
            }
        }
        let score = inliers.saturating_sub(BELOW_WEIGHT * below);
        // The best score wins; among equals the lower plane (the larger offset).
        if best.is_none_or(|(k, o, _, _)| score > k || (score == k && offset > o)) {
            best = Some((score, offset, normal, offset));
        }
    }
    let (_, _, mut normal, mut offset) = best?;
    // Least squares on the inliers: the normal is the covariance's smallest eigenvector.
    let mut inliers: Vec<Vector3<f64>> = Vec::new();
    for _ in 0..3 {
        inliers = candidates
            .iter()
            .filter(|q| (normal.dot(q) + offset).abs() < params.inlier_m)
            .copied()
            .collect();
        if inliers.len() < 3 {
            return None;
        }
        let mean = inliers.iter().sum::<Vector3<f64>>() / inliers.len() as f64;
        let cov = inliers
            .iter()
            .fold(Matrix3::zeros(), |acc, q| acc + (q - mean) * (q - mean).transpose());
        let eig = SymmetricEigen::new(cov);
        let k = eig.eigenvalues.imin();
        let mut nn: Vector3<f64> = eig.eigenvectors.column(k).into_owned();
        if nn.dot(&p) < 0.0 {
            nn = -nn;
        }
        if !nn.iter().all(|v| v.is_finite()) || angle_between(&nn, &p) > params.max_tilt_from_prior_rad {
            break;
        }
        normal = nn.normalize();
        offset = -normal.dot(&mean);
    }
    if inliers.len() < params.min_inliers {
        return None;
    }
    let rms = (inliers.iter().map(|q| (normal.dot(q) + offset).powi(2)).sum::<f64>() / inliers.len() as f64).sqrt();
    // Statistical tilt error of the fit: residual over the spread of the inliers across the
    // plane, shrinking with their number; plus how far the ground may lean from level.
    let mean = inliers.iter().sum::<Vector3<f64>>() / inliers.len() as f64;
    let spread = (inliers.iter().map(|q| (q - mean).norm_squared()).sum::<f64>() / inliers.len() as f64)
        .sqrt()
        .max(params.cell_m);
    let fit_sigma = rms.max(0.01) / (spread * (inliers.len() as f64).sqrt());
    let sigma = (fit_sigma.powi(2) + params.slope_sigma_rad.powi(2)).sqrt();
    let mut seen = std::collections::HashSet::new();
    let samples = inliers
        .iter()
        .filter(|q| {
            seen.insert((
                (e1.dot(q) / SAMPLE_CELL_M).floor() as i64,
                (e2.dot(q) / SAMPLE_CELL_M).floor() as i64,
            ))
        })
        .map(|q| [q.x as f32, q.y as f32, q.z as f32])
        .collect();
    Some(GroundFit {
        up: UpEstimate::new(Unit::new_unchecked(normal), sigma, GravityMethod::Ground),
        height_m: offset,
        samples,
        inliers: inliers.len(),
        candidates: candidates.len(),
        rms_m: rms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Rotation3;

    /// A level grid of ground points `height` below a sensor tilted by `sensor_from_level`, plus
    /// a wall and a car roof.
    fn scene(sensor_from_level: &Rotation3<f64>, height: f64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut pts = Vec::new();
        for i in -30..=30 {
            for j in -30..=30 {
                pts.push(Vector3::new(i as f64 * 0.7, j as f64 * 0.7, -height));
            }
        }
        for k in 0..400 {
            // A wall 8 m ahead, and a 1.5 m high roof over 4 × 2 m at (−6, 4).
            pts.push(Vector3::new(
                8.0,
                -5.0 + (k % 20) as f64 * 0.5,
                -height + (k / 20) as f64 * 0.2,
            ));
            pts.push(Vector3::new(
                -8.0 + (k % 20) as f64 * 0.2,
                3.0 + (k / 20) as f64 * 0.1,
                -height + 1.5,
            ));
        }
        let mut out = (Vec::new(), Vec::new(), Vec::new());
        for p in pts {
            let q = sensor_from_level * p;
            out.0.push(q.x as f32);
            out.1.push(q.y as f32);
            out.2.push(q.z as f32);
        }
        out
    }

    #[test]
    fn a_tilted_sensor_finds_level_ground_and_its_height_despite_a_wall_and_a_roof() {
        let tilt = Rotation3::from_euler_angles(3f64.to_radians(), -7f64.to_radians(), 0.4);
        let (x, y, z) = scene(&tilt, 1.8);
        let truth = tilt * Vector3::z();
        // A prior 6° off still finds it.
        let prior = Unit::new_normalize(Rotation3::from_euler_angles(0.1, 0.0, 0.0) * truth);
        let fit = fit_ground(&x, &y, &z, &prior, &GroundParams::default()).unwrap();
        assert!(
            angle_between(&fit.up.up, &truth).to_degrees() < 0.01,
            "{}",
            angle_between(&fit.up.up, &truth).to_degrees()
        );
        assert!((fit.height_m - 1.8).abs() < 1e-3, "{}", fit.height_m);
        assert!(fit.rms_m < 1e-3);
    }

    #[test]
    fn a_wall_alone_gives_no_fit_and_neither_does_nothing() {
        let (x, y, z) = scene(&Rotation3::identity(), 1.8);
        // The wall's points only (every other point after the ground grid).
        let wall: Vec<usize> = (61 * 61..x.len()).step_by(2).collect();
        let pick = |v: &[f32]| wall.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        assert!(
            fit_ground(
                &pick(&x),
                &pick(&y),
                &pick(&z),
                &Vector3::z_axis(),
                &GroundParams::default()
            )
            .is_none()
        );
        assert!(fit_ground(&[], &[], &[], &Vector3::z_axis(), &GroundParams::default()).is_none());
        let nan = vec![f32::NAN; 100];
        assert!(fit_ground(&nan, &nan, &nan, &Vector3::z_axis(), &GroundParams::default()).is_none());
    }
}
