//! Weighted Gaussian kernel density estimate with scipy's `gaussian_kde` semantics (scipy 1.17),
//! plus the two extras box fusion needs: a density restricted to the members' own affine span
//! when their covariance is singular, and the exact peak of a 1-D estimate.
//!
//! scipy semantics: weights are normalised to sum 1, the effective sample size is
//! `neff = 1 / Σ wᵢ²`, the data covariance is numpy's `cov(data, bias=False, aweights=w)`, i.e.
//! `Σ wᵢ (xᵢ − x̄)(xᵢ − x̄)ᵀ / (1 − Σ wᵢ²)` around the weighted mean, the kernel covariance is that
//! times `factor²`, where the factor is Scott's `neff^(−1/(d+4))`, Silverman's
//! `(neff·(d+2)/4)^(−1/(d+4))` or a given scalar, and the density at `x` is
//! `Σ wᵢ N(x; xᵢ, kernel covariance)`. scipy fails (Cholesky error) when the data covariance is
//! singular; so does [`GaussianKde::new`].

// Small dense matrices: index loops read like the formulas they implement.
#![allow(clippy::needless_range_loop)]

use serde::{Deserialize, Serialize};

use super::FuseError;

/// Relative tolerance of the singularity test: a Cholesky pivot (a conditional variance) is
/// treated as zero when it is at most this fraction of the largest variance. Far above f64
/// rounding of a covariance (≈1e-16 relative), far below any real spread.
pub const KDE_SINGULAR_RELATIVE_TOL: f64 = 1e-12;

/// How the kernel bandwidth is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BandwidthRepr", into = "BandwidthRepr")]
pub enum Bandwidth {
    /// Scott's rule, `neff^(−1/(d+4))` (scipy's default); written `"scott"`.
    Scott,
    /// Silverman's rule, `(neff·(d+2)/4)^(−1/(d+4))`; written `"silverman"`.
    Silverman,
    /// A scalar factor on the data covariance (scipy's scalar `bw_method`); written as a number.
    Factor(f64),
    /// An isotropic kernel of this standard deviation in the data's units, whatever the data's
    /// spread (not a scipy mode: it never fails on singular data); written `{ sigma = 0.3 }`.
    Absolute(f64),
}

/// The TOML/JSON form of [`Bandwidth`]: a rule name, a number or `{ sigma = … }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum BandwidthRepr {
    Factor(f64),
    Rule(String),
    Absolute { sigma: f64 },
}

impl TryFrom<BandwidthRepr> for Bandwidth {
    type Error = String;
    fn try_from(repr: BandwidthRepr) -> Result<Self, String> {
        match repr {
            BandwidthRepr::Factor(f) => Ok(Bandwidth::Factor(f)),
            BandwidthRepr::Absolute { sigma } => Ok(Bandwidth::Absolute(sigma)),
            BandwidthRepr::Rule(name) => match name.as_str() {
                "scott" => Ok(Bandwidth::Scott),
                "silverman" => Ok(Bandwidth::Silverman),
                other => Err(format!(
                    "unknown bandwidth rule `{other}` (expected \"scott\", \"silverman\", a number or {{ sigma = … }})"
                )),
            },
        }
    }
}

impl From<Bandwidth> for BandwidthRepr {
    fn from(b: Bandwidth) -> Self {
        match b {
            Bandwidth::Scott => BandwidthRepr::Rule("scott".into()),
            Bandwidth::Silverman => BandwidthRepr::Rule("silverman".into()),
            Bandwidth::Factor(f) => BandwidthRepr::Factor(f),
            Bandwidth::Absolute(sigma) => BandwidthRepr::Absolute { sigma },
        }
    }
}

impl Bandwidth {
    /// Whether the parameter is usable (a finite, positive factor or sigma).
    pub fn is_valid(&self) -> bool {
        match *self {
            Bandwidth::Scott | Bandwidth::Silverman => true,
            Bandwidth::Factor(v) | Bandwidth::Absolute(v) => v.is_finite() && v > 0.0,
        }
    }

    /// The covariance factor for `dims` dimensions and effective sample size `neff`; `None` for
    /// [`Bandwidth::Absolute`], which does not scale the data covariance.
    pub fn factor(&self, dims: usize, neff: f64) -> Option<f64> {
        let d = dims as f64;
        match *self {
            Bandwidth::Scott => Some(neff.powf(-1.0 / (d + 4.0))),
            Bandwidth::Silverman => Some((neff * (d + 2.0) / 4.0).powf(-1.0 / (d + 4.0))),
            Bandwidth::Factor(f) => Some(f),
            Bandwidth::Absolute(_) => None,
        }
    }
}

/// A weighted Gaussian KDE over `D`-dimensional points, borrowing its data.
///
/// The kernel's inverse is kept as a (pivoted) Cholesky factor of rank `rank ≤ D`: full rank for
/// [`GaussianKde::new`] (scipy), possibly lower for [`GaussianKde::on_span`].
#[derive(Debug, Clone)]
pub struct GaussianKde<'a, const D: usize> {
    points: &'a [[f64; D]],
    weights: Option<&'a [f64]>,
    weight_sum: f64,
    neff: f64,
    factor: Option<f64>,
    data_covariance: [[f64; D]; D],
    /// Coordinate order chosen by the pivoting; the first `rank` are the kept axes.
    pivots: [usize; D],
    /// Lower-triangular factor of the kernel covariance in pivoted order (first `rank` columns).
    cholesky: [[f64; D]; D],
    rank: usize,
    /// `(2π)^(−rank/2) / det(L_rank)`: the Gaussian normaliser on the kept axes.
    norm: f64,
}

impl<'a, const D: usize> GaussianKde<'a, D> {
    /// A KDE with scipy's semantics; fails with [`FuseError::KdeSingular`] where scipy's Cholesky
    /// would (a singular data covariance, e.g. members identical along some direction, or a single
    /// point), and with [`FuseError::KdeInput`] on bad weights or fewer points than dimensions.
    pub fn new(points: &'a [[f64; D]], weights: Option<&'a [f64]>, bandwidth: Bandwidth) -> Result<Self, FuseError> {
        let kde = Self::build(points, weights, bandwidth, 0.0, true)?;
        if kde.rank < D {
            return Err(FuseError::KdeSingular {
                dims: D,
                rank: kde.rank,
            });
        }
        Ok(kde)
    }

    /// A KDE on the members' own affine span: axes whose remaining (conditional) variance is at
    /// most `min_variance` (absolute, data units squared) or at most [`KDE_SINGULAR_RELATIVE_TOL`]
    /// of the largest variance are dropped, and the estimate is scipy's on the remaining `rank`
    /// axes (Scott/Silverman use `rank` as the dimension). Differences along dropped axes are
    /// ignored, so this is the limit of the full estimate as the degenerate spread goes to zero.
    /// Rank 0 (all points coincide) gives a constant density. Never fails on singular data; fails
    /// only on bad weights or an empty point set.
    pub fn on_span(
        points: &'a [[f64; D]],
        weights: Option<&'a [f64]>,
        bandwidth: Bandwidth,
        min_variance: f64,
    ) -> Result<Self, FuseError> {
        Self::build(points, weights, bandwidth, min_variance.max(0.0), false)
    }

    fn build(
        points: &'a [[f64; D]],
        weights: Option<&'a [f64]>,
        bandwidth: Bandwidth,
        min_variance: f64,
        strict: bool,
    ) -> Result<Self, FuseError> {
        let n = points.len();
        if n == 0 {
            return Err(FuseError::KdeInput {
                reason: "no data points".into(),
            });
        }
        if strict && D > n && bandwidth_needs_covariance(bandwidth) {
            return Err(FuseError::KdeInput {
                reason: format!("{D} dimensions but only {n} points"),
            });
        }
        if !bandwidth.is_valid() {
            return Err(FuseError::KdeInput {
                reason: format!("bandwidth {bandwidth:?} is not finite and positive"),
            });
        }
        if points.iter().flatten().any(|v| !v.is_finite()) {
            return Err(FuseError::KdeInput {
                reason: "a data point is not finite".into(),
            });
        }
        let (weight_sum, sum_sq) = match weights {
            Some(w) => {
                if w.len() != n {
                    return Err(FuseError::KdeInput {
                        reason: format!("{} weights for {n} points", w.len()),
                    });
                }
                if w.iter().any(|v| !v.is_finite() || *v < 0.0) {
                    return Err(FuseError::KdeInput {
                        reason: "weights must be finite and non-negative".into(),
                    });
                }
                let s: f64 = w.iter().sum();
                if s <= 0.0 {
                    return Err(FuseError::KdeInput {
                        reason: "weights sum to zero".into(),
                    });
                }
                (s, w.iter().map(|v| (v / s) * (v / s)).sum::<f64>())
            }
            None => (n as f64, 1.0 / n as f64),
        };
        let neff = 1.0 / sum_sq;

        // numpy cov(bias=False, aweights=w) with w normalised: divide by 1 − Σw².
        let mut mean = [0.0; D];
        for (i, p) in points.iter().enumerate() {
            let wi = weight_of(weights, weight_sum, i);
            for k in 0..D {
                mean[k] += wi * p[k];
            }
        }
        let mut cov = [[0.0; D]; D];
        for (i, p) in points.iter().enumerate() {
            let wi = weight_of(weights, weight_sum, i);
            for r in 0..D {
                let dr = p[r] - mean[r];
                for c in 0..=r {
                    cov[r][c] += wi * dr * (p[c] - mean[c]);
                }
            }
        }
        let dof = 1.0 - sum_sq;
        for r in 0..D {
            for c in 0..=r {
                // dof = 0 (one point, or all weight on one point): the covariance is undefined in
                // numpy (inf/NaN); here it is zero, which the rank test turns into rank 0.
                cov[r][c] = if dof > 0.0 { cov[r][c] / dof } else { 0.0 };
                cov[c][r] = cov[r][c];
            }
        }

        let (factor, rank, pivots, chol) = match bandwidth {
            Bandwidth::Absolute(sigma) => {
                let mut chol = [[0.0; D]; D];
                for (k, row) in chol.iter_mut().enumerate() {
                    row[k] = sigma;
                }
                let pivots = std::array::from_fn(|k| k);
                (None, D, pivots, chol)
            }
            _ => {
                let (rank, pivots, chol) = pivoted_cholesky(&cov, min_variance);
                let factor = bandwidth.factor(rank, neff).unwrap_or(1.0);
                let mut scaled = chol;
                for row in scaled.iter_mut() {
                    for v in row.iter_mut() {
                        *v *= factor;
                    }
                }
                (Some(factor), rank, pivots, scaled)
            }
        };
        let det: f64 = (0..rank).map(|k| chol[k][k]).product();
        // (2π)^(−rank/2) for rank 0..=3 without a pow per estimate.
        const INV_SQRT_TAU: f64 = 0.398_942_280_401_432_7;
        let norm = INV_SQRT_TAU.powi(rank as i32) / det;
        Ok(Self {
            points,
            weights,
            weight_sum,
            neff,
            factor,
            data_covariance: cov,
            pivots,
            cholesky: chol,
            rank,
            norm,
        })
    }

    /// Number of data points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether there are no data points (never true for a constructed estimate).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Effective sample size `1 / Σ wᵢ²` (weights normalised).
    pub fn neff(&self) -> f64 {
        self.neff
    }

    /// The covariance factor (scipy's `factor`); `None` for an absolute bandwidth.
    pub fn factor(&self) -> Option<f64> {
        self.factor
    }

    /// Number of axes the density lives on (`D` unless built with [`GaussianKde::on_span`]).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The weighted data covariance (numpy `cov(bias=False, aweights=w)`).
    pub fn data_covariance(&self) -> [[f64; D]; D] {
        self.data_covariance
    }

    /// The kernel covariance (scipy's `covariance`): data covariance × factor², or σ²·I.
    pub fn kernel_covariance(&self) -> [[f64; D]; D] {
        match self.factor {
            Some(f) => self.data_covariance.map(|row| row.map(|v| v * f * f)),
            None => {
                let sigma = self.cholesky[0][0];
                std::array::from_fn(|r| std::array::from_fn(|c| if r == c { sigma * sigma } else { 0.0 }))
            }
        }
    }

    /// Normalised weight of point `i`.
    pub fn weight(&self, i: usize) -> f64 {
        weight_of(self.weights, self.weight_sum, i)
    }

    /// The density at `x` (scipy's `evaluate`); on a reduced span, the density on that span.
    pub fn evaluate(&self, x: &[f64; D]) -> f64 {
        let mut sum = 0.0;
        for (i, p) in self.points.iter().enumerate() {
            let mut diff = [0.0; D];
            for k in 0..D {
                diff[k] = x[k] - p[k];
            }
            sum += self.weight(i) * (-0.5 * self.mahalanobis_squared(&diff)).exp();
        }
        sum * self.norm
    }

    /// The density at data point `i` (what "the member at the density mode" compares).
    pub fn evaluate_at_point(&self, i: usize) -> f64 {
        self.evaluate(&self.points[i])
    }

    /// `diffᵀ K⁻¹ diff` on the kept axes, by forward substitution through the pivoted factor.
    fn mahalanobis_squared(&self, diff: &[f64; D]) -> f64 {
        let mut y = [0.0; D];
        let mut total = 0.0;
        for r in 0..self.rank {
            let mut v = diff[self.pivots[r]];
            for c in 0..r {
                v -= self.cholesky[r][c] * y[c];
            }
            y[r] = v / self.cholesky[r][r];
            total += y[r] * y[r];
        }
        total
    }

    /// One mean-shift step from `x`: the points' mean weighted by `wᵢ·K(x − xᵢ)`, which never
    /// lowers the density (on a reduced span, `x` must lie on the span).
    pub fn mean_shift_step(&self, x: &[f64; D]) -> [f64; D] {
        let mut total = 0.0;
        let mut mean = [0.0; D];
        for (i, p) in self.points.iter().enumerate() {
            let mut diff = [0.0; D];
            for k in 0..D {
                diff[k] = x[k] - p[k];
            }
            let k_i = self.weight(i) * (-0.5 * self.mahalanobis_squared(&diff)).exp();
            total += k_i;
            for k in 0..D {
                mean[k] += k_i * p[k];
            }
        }
        if total <= 0.0 {
            return *x;
        }
        mean.map(|v| v / total)
    }

    /// The local density maximum reached by mean-shift from `x`: steps until one moves less than
    /// `tol` (data units), at most 200.
    pub fn mode_from(&self, mut x: [f64; D], tol: f64) -> [f64; D] {
        for _ in 0..200 {
            let next = self.mean_shift_step(&x);
            let step: f64 = (0..D).map(|k| (next[k] - x[k]).powi(2)).sum::<f64>().sqrt();
            x = next;
            if step <= tol {
                break;
            }
        }
        x
    }

    /// Index of the data point with the highest density; ties go to the higher weight, then the
    /// lower index, so the choice is deterministic.
    pub fn argmax_point(&self) -> usize {
        let mut best = 0;
        let mut best_density = f64::NEG_INFINITY;
        for i in 0..self.points.len() {
            let density = self.evaluate_at_point(i);
            if density > best_density || (density == best_density && self.weight(i) > self.weight(best)) {
                best = i;
                best_density = density;
            }
        }
        best
    }
}

impl GaussianKde<'_, 1> {
    /// The kernel standard deviation (1-D only).
    pub fn kernel_sigma(&self) -> f64 {
        if self.rank == 0 { 0.0 } else { self.cholesky[0][0] }
    }

    /// The location of the global maximum of a 1-D density — exact, where MS3D reads the argmax
    /// of a 100-point grid between the smallest and largest sample (the exact peak is the grid's
    /// limit; it always lies in that interval). When the samples span at most two kernel
    /// standard deviations the log-density is concave (its second derivative is
    /// `(Var_post − h²)/h⁴` and a posterior variance on an interval of length `R` is at most
    /// `R²/4`), so Newton's method from the weighted mean finds the only mode; otherwise a
    /// 100-point grid picks the best basin and the same ascent refines it. A rank-0 estimate (all
    /// samples equal) peaks at that common value.
    pub fn peak(&self) -> f64 {
        let (lo, hi) = self
            .points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p[0]), hi.max(p[0]))
            });
        let h = self.kernel_sigma();
        if hi - lo <= 0.0 {
            return lo;
        }
        if self.rank == 0 || h <= 0.0 {
            return self.weighted_mean();
        }
        if hi - lo <= 2.0 * h {
            // Log-concave: Newton from the weighted mean converges to the only mode.
            if let Some(x) = self.newton_log_concave(self.weighted_mean(), h, lo, hi) {
                return x;
            }
        }
        const GRID: usize = 100;
        let mut best = (lo, f64::NEG_INFINITY);
        for k in 0..GRID {
            let x = lo + (hi - lo) * k as f64 / (GRID - 1) as f64;
            let f = self.evaluate(&[x]);
            if f > best.1 {
                best = (x, f);
            }
        }
        self.ascend(best.0, h, lo, hi)
    }

    /// Posterior weight sum, mean and variance of the sample location given `x` (unnormalised
    /// kernel weights): the mean-shift target and the curvature of log f.
    fn posterior(&self, x: f64, h: f64) -> (f64, f64, f64) {
        let (mut s0, mut s1, mut s2) = (0.0, 0.0, 0.0);
        for (i, p) in self.points.iter().enumerate() {
            let d = (x - p[0]) / h;
            let k = self.weight(i) * (-0.5 * d * d).exp();
            s0 += k;
            s1 += k * p[0];
            s2 += k * p[0] * p[0];
        }
        if s0 <= 0.0 {
            return (0.0, x, 0.0);
        }
        let mean = s1 / s0;
        (s0, mean, (s2 / s0 - mean * mean).max(0.0))
    }

    /// Newton's method on a log-concave density (`(log f)'' = (Var_post − h²)/h⁴ < 0`); `None` if
    /// it leaves `[lo, hi]` or has not converged in 50 steps (then the caller uses the grid).
    fn newton_log_concave(&self, mut x: f64, h: f64, lo: f64, hi: f64) -> Option<f64> {
        let h2 = h * h;
        let tol = 1e-10 * (hi - lo).max(h);
        for _ in 0..50 {
            let (s0, mean, variance) = self.posterior(x, h);
            if s0 <= 0.0 || variance >= h2 {
                return None;
            }
            let next = x + (mean - x) * h2 / (h2 - variance);
            if !(lo..=hi).contains(&next) {
                return None;
            }
            let step = (next - x).abs();
            x = next;
            if step <= tol {
                return Some(x);
            }
        }
        None
    }

    fn weighted_mean(&self) -> f64 {
        (0..self.points.len()).map(|i| self.weight(i) * self.points[i][0]).sum()
    }

    /// Safeguarded Newton ascent on log f: the Newton step where the log-density is locally
    /// concave, the mean-shift step (which never decreases a Gaussian mixture) otherwise or
    /// whenever Newton would lower the density.
    fn ascend(&self, mut x: f64, h: f64, lo: f64, hi: f64) -> f64 {
        let h2 = h * h;
        let tol = 1e-10 * (hi - lo).max(h);
        for _ in 0..200 {
            let (s0, mean_shift, variance) = self.posterior(x, h);
            if s0 <= 0.0 {
                return x;
            }
            let mut next = mean_shift;
            if variance < h2 {
                let newton = x + (mean_shift - x) * h2 / (h2 - variance);
                if (lo..=hi).contains(&newton) && self.evaluate(&[newton]) >= self.evaluate(&[mean_shift]) {
                    next = newton;
                }
            }
            let step = (next - x).abs();
            x = next;
            if step <= tol {
                break;
            }
        }
        x
    }
}

fn bandwidth_needs_covariance(b: Bandwidth) -> bool {
    !matches!(b, Bandwidth::Absolute(_))
}

#[inline]
fn weight_of(weights: Option<&[f64]>, weight_sum: f64, i: usize) -> f64 {
    match weights {
        Some(w) => w[i] / weight_sum,
        None => 1.0 / weight_sum,
    }
}

/// Rank-revealing Cholesky with diagonal pivoting: `(rank, pivots, L)` with `P Σ Pᵀ ≈ L Lᵀ` on
/// the first `rank` pivoted axes. A pivot (remaining conditional variance) at most `min_variance`
/// or at most [`KDE_SINGULAR_RELATIVE_TOL`] × the largest variance ends the factorisation.
fn pivoted_cholesky<const D: usize>(cov: &[[f64; D]; D], min_variance: f64) -> (usize, [usize; D], [[f64; D]; D]) {
    let mut a = *cov;
    let mut pivots: [usize; D] = std::array::from_fn(|k| k);
    let mut l = [[0.0; D]; D];
    let largest = (0..D).map(|k| cov[k][k]).fold(0.0_f64, f64::max);
    let floor = min_variance.max(KDE_SINGULAR_RELATIVE_TOL * largest);
    for k in 0..D {
        // Pick the remaining axis with the largest conditional variance.
        let mut best = k;
        for j in k + 1..D {
            if a[pivots[j]][pivots[j]] > a[pivots[best]][pivots[best]] {
                best = j;
            }
        }
        pivots.swap(k, best);
        // Swap the already computed rows of L to follow the pivot order.
        l.swap(k, best);
        let p = pivots[k];
        let pivot = a[p][p];
        if pivot.is_nan() || pivot <= floor || largest <= 0.0 {
            return (k, pivots, l);
        }
        let root = pivot.sqrt();
        l[k][k] = root;
        for j in k + 1..D {
            let q = pivots[j];
            l[j][k] = a[q][p] / root;
        }
        // Schur complement on the remaining axes.
        for j in k + 1..D {
            let qj = pivots[j];
            for i in k + 1..D {
                let qi = pivots[i];
                a[qi][qj] -= l[i][k] * l[j][k];
            }
        }
    }
    (D, pivots, l)
}

/// Index of the member with the highest yaw density: a 1-D KDE on the circle. Yaws are unwrapped
/// around their weighted circular mean (around the heaviest member's yaw when the mean direction
/// is undefined) to get scipy's bandwidth from the unwrapped spread; the kernel is then evaluated
/// on the wrapped difference, so yaws on either side of ±π are neighbours. `None` when the yaws
/// are all equal (the spread is at most `min_variance` rad²): any member will do.
pub fn yaw_mode_member(
    yaws: &[f64],
    weights: &[f64],
    bandwidth: Bandwidth,
    min_variance: f64,
) -> Result<Option<usize>, FuseError> {
    yaw_mode_member_in(yaws, weights, bandwidth, min_variance, &mut Vec::new())
}

/// [`yaw_mode_member`] with a caller-owned buffer for the unwrapped yaws.
pub(crate) fn yaw_mode_member_in(
    yaws: &[f64],
    weights: &[f64],
    bandwidth: Bandwidth,
    min_variance: f64,
    unwrapped: &mut Vec<[f64; 1]>,
) -> Result<Option<usize>, FuseError> {
    let n = yaws.len();
    if n == 0 || weights.len() != n {
        return Err(FuseError::KdeInput {
            reason: format!("{n} yaws and {} weights", weights.len()),
        });
    }
    let reference = circular_reference(yaws, weights);
    unwrapped.clear();
    unwrapped.extend(
        yaws.iter()
            .map(|&y| [reference + crate::geometry::wrap_angle(y - reference)]),
    );
    let kde = GaussianKde::on_span(unwrapped, Some(weights), bandwidth, min_variance)?;
    if kde.rank() == 0 {
        return Ok(None);
    }
    let h = kde.kernel_sigma();
    let mut best = 0;
    let mut best_density = f64::NEG_INFINITY;
    for i in 0..n {
        let density: f64 = (0..n)
            .map(|j| {
                let d = crate::geometry::wrap_angle(yaws[i] - yaws[j]) / h;
                kde.weight(j) * (-0.5 * d * d).exp()
            })
            .sum();
        if density > best_density || (density == best_density && kde.weight(i) > kde.weight(best)) {
            best = i;
            best_density = density;
        }
    }
    Ok(Some(best))
}

/// `yaws` as axis directions near `heading`: each turned by π when it points more than π/2 away
/// (the same footprint), then unwrapped to within π/2 of `heading`.
pub(crate) fn fold_to_axis(yaws: &[f64], heading: f64, folded: &mut Vec<[f64; 1]>) {
    folded.clear();
    folded.extend(yaws.iter().map(|&y| {
        let mut d = crate::geometry::wrap_angle(y - heading);
        if d > std::f64::consts::FRAC_PI_2 {
            d -= std::f64::consts::PI;
        } else if d < -std::f64::consts::FRAC_PI_2 {
            d += std::f64::consts::PI;
        }
        [heading + d]
    }));
}

/// The peak of the weighted density of the box axis nearest `heading`: the yaws folded onto the
/// axis through `heading` (a member pointing the other way counts turned by π), then mean-shift
/// from `heading` under `bandwidth`; wrapped to (−π, π]. Yaws that all fold to one value give it.
pub fn yaw_axis_peak(yaws: &[f64], weights: &[f64], heading: f64, bandwidth: Bandwidth) -> Result<f64, FuseError> {
    yaw_axis_peak_in(yaws, weights, heading, bandwidth, &mut Vec::new())
}

/// [`yaw_axis_peak`] with a caller-owned buffer for the folded yaws.
pub(crate) fn yaw_axis_peak_in(
    yaws: &[f64],
    weights: &[f64],
    heading: f64,
    bandwidth: Bandwidth,
    folded: &mut Vec<[f64; 1]>,
) -> Result<f64, FuseError> {
    if yaws.is_empty() || weights.len() != yaws.len() {
        return Err(FuseError::KdeInput {
            reason: format!("{} yaws and {} weights", yaws.len(), weights.len()),
        });
    }
    fold_to_axis(yaws, heading, folded);
    let kde = GaussianKde::on_span(folded, Some(weights), bandwidth, 0.0)?;
    if kde.rank() == 0 {
        return Ok(crate::geometry::wrap_angle(folded[0][0]));
    }
    let [peak] = kde.mode_from([heading], 1e-9);
    Ok(crate::geometry::wrap_angle(peak))
}

/// The weighted circular mean direction of `yaws`, or the heaviest member's yaw when the
/// resultant is (numerically) zero.
pub fn circular_reference(yaws: &[f64], weights: &[f64]) -> f64 {
    let (mut c, mut s, mut total) = (0.0, 0.0, 0.0);
    for (&y, &w) in yaws.iter().zip(weights) {
        c += w * y.cos();
        s += w * y.sin();
        total += w;
    }
    if total > 0.0 && (c * c + s * s).sqrt() > 1e-9 * total {
        s.atan2(c)
    } else {
        let heaviest = (0..yaws.len())
            .max_by(|&a, &b| weights[a].total_cmp(&weights[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        yaws.get(heaviest).copied().unwrap_or(0.0)
    }
}

/// The member whose yaw is nearest the weighted circular mean by absolute wrapped difference
/// (MS3D's `get_rotation_near_weighted_mean` without its missing `abs`); ties to the lower index.
pub fn yaw_nearest_circular_mean(yaws: &[f64], weights: &[f64]) -> usize {
    let mean = circular_reference(yaws, weights);
    let mut best = 0;
    let mut best_gap = f64::INFINITY;
    for (i, &y) in yaws.iter().enumerate() {
        let gap = crate::geometry::wrap_angle(y - mean).abs();
        if gap < best_gap {
            best = i;
            best_gap = gap;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use approx::assert_relative_eq;

    use super::*;
    use crate::geometry::wrap_angle;

    #[test]
    fn one_dimensional_density_by_hand() {
        // Points 0, 1, 3 unweighted: mean 4/3, cov (ddof 1) = ((16+1+25)/9)/2 = 7/3.
        let pts = [[0.0], [1.0], [3.0]];
        let kde = GaussianKde::new(&pts, None, Bandwidth::Factor(0.5)).unwrap();
        assert_relative_eq!(kde.data_covariance()[0][0], 7.0 / 3.0, max_relative = 1e-14);
        assert_relative_eq!(kde.neff(), 3.0, max_relative = 1e-14);
        let var = 7.0 / 3.0 * 0.25;
        let expected: f64 = [0.0f64, 1.0, 3.0]
            .iter()
            .map(|p| (-(2.0 - p) * (2.0 - p) / (2.0 * var)).exp() / (2.0 * std::f64::consts::PI * var).sqrt() / 3.0)
            .sum();
        assert_relative_eq!(kde.evaluate(&[2.0]), expected, max_relative = 1e-13);
    }

    #[test]
    fn weighted_covariance_uses_effective_sample_size() {
        // Weights 1, 1, 2 → w = (¼, ¼, ½), Σw² = 3/8, neff = 8/3; mean = 0·¼ + 1·¼ + 3·½ = 7/4.
        let pts = [[0.0], [1.0], [3.0]];
        let w = [1.0, 1.0, 2.0];
        let kde = GaussianKde::new(&pts, Some(&w), Bandwidth::Scott).unwrap();
        let m = 1.75;
        let biased = 0.25 * m * m + 0.25 * (1.0 - m) * (1.0 - m) + 0.5 * (3.0 - m) * (3.0 - m);
        assert_relative_eq!(
            kde.data_covariance()[0][0],
            biased / (1.0 - 0.375),
            max_relative = 1e-14
        );
        assert_relative_eq!(kde.neff(), 8.0 / 3.0, max_relative = 1e-14);
        assert_relative_eq!(kde.factor().unwrap(), (8.0f64 / 3.0).powf(-0.2), max_relative = 1e-14);
        let silverman = GaussianKde::new(&pts, Some(&w), Bandwidth::Silverman).unwrap();
        assert_relative_eq!(
            silverman.factor().unwrap(),
            (8.0f64 / 3.0 * 3.0 / 4.0).powf(-0.2),
            max_relative = 1e-14
        );
    }

    #[test]
    fn singular_data_fails_like_scipy_and_reduces_on_span() {
        // Collinear 2-D points: rank 1.
        let pts = [[0.0, 0.0], [1.0, 2.0], [3.0, 6.0]];
        assert!(matches!(
            GaussianKde::new(&pts, None, Bandwidth::Factor(1.0)),
            Err(FuseError::KdeSingular { dims: 2, rank: 1 })
        ));
        let span = GaussianKde::on_span(&pts, None, Bandwidth::Factor(1.0), 0.0).unwrap();
        assert_eq!(span.rank(), 1);
        // On the span the density equals the 1-D KDE of the coordinate along the line
        // (t = x·√5 here, since (1, 2) has length √5), up to the Jacobian: compare ratios.
        let along: Vec<[f64; 1]> = pts.iter().map(|p| [p[0] * 5f64.sqrt()]).collect();
        let line = GaussianKde::new(&along, None, Bandwidth::Factor(1.0)).unwrap();
        let r_span = span.evaluate_at_point(0) / span.evaluate_at_point(2);
        let r_line = line.evaluate_at_point(0) / line.evaluate_at_point(2);
        assert_relative_eq!(r_span, r_line, max_relative = 1e-12);
        // All equal: rank 0, constant density, the peak is the common value.
        let same = [[2.5], [2.5], [2.5]];
        assert!(GaussianKde::new(&same, None, Bandwidth::Scott).is_err());
        let flat = GaussianKde::on_span(&same, None, Bandwidth::Scott, 0.0).unwrap();
        assert_eq!(flat.rank(), 0);
        assert_eq!(flat.peak(), 2.5);
    }

    #[test]
    fn peak_of_two_separated_bumps_is_the_heavier_one() {
        // Two tight groups; narrow kernel → bimodal, the heavier group wins.
        let pts = [[0.0], [0.1], [5.0], [5.1], [5.2]];
        let kde = GaussianKde::new(&pts, None, Bandwidth::Factor(0.1)).unwrap();
        let peak = kde.peak();
        assert!((peak - 5.1).abs() < 0.05, "peak {peak}");
        // Gradient zero at the peak: check against neighbours.
        let f = |x: f64| kde.evaluate(&[x]);
        assert!(f(peak) >= f(peak + 1e-4) && f(peak) >= f(peak - 1e-4));
        // Symmetric pair with a wide kernel: the peak is the midpoint.
        let pair = [[1.0], [3.0]];
        let wide = GaussianKde::new(&pair, None, Bandwidth::Factor(2.0)).unwrap();
        assert_relative_eq!(wide.peak(), 2.0, epsilon = 1e-10);
    }

    #[test]
    fn yaw_density_wraps_across_pi() {
        let pi = std::f64::consts::PI;
        // Three near +π/−π and one outlier at 0: the mode is one of the three, not the outlier.
        let yaws = [pi - 0.02, -pi + 0.01, pi - 0.01, 0.0];
        let w = [1.0, 1.0, 1.0, 1.0];
        let i = yaw_mode_member(&yaws, &w, Bandwidth::Factor(0.1), 0.0)
            .unwrap()
            .unwrap();
        assert!(i != 3);
        assert_eq!(yaw_nearest_circular_mean(&yaws[..3], &w[..3]), 2);
        // Identical yaws: no mode member needed.
        assert_eq!(
            yaw_mode_member(&[0.3, 0.3], &[1.0, 2.0], Bandwidth::Factor(0.1), 0.0).unwrap(),
            None
        );
    }

    #[test]
    fn bandwidth_parses_from_toml() {
        #[derive(Deserialize)]
        struct T {
            a: Bandwidth,
            b: Bandwidth,
            c: Bandwidth,
            d: Bandwidth,
        }
        let t: T = toml::from_str("a = \"scott\"\nb = \"silverman\"\nc = 0.5\nd = { sigma = 0.3 }\n").unwrap();
        assert_eq!(
            [t.a, t.b, t.c, t.d],
            [
                Bandwidth::Scott,
                Bandwidth::Silverman,
                Bandwidth::Factor(0.5),
                Bandwidth::Absolute(0.3)
            ]
        );
        assert!(toml::from_str::<T>("a = \"bogus\"\nb = 1.0\nc = 1.0\nd = 1.0\n").is_err());
    }

    #[test]
    fn yaw_axis_peak_by_hand() {
        use std::f64::consts::PI;
        // A kernel far wider than the spread: mean-shift converges to the weighted mean
        // (0.9·0 + 0.8·0.02 + 0.7·0.04) / 2.4 = 0.044 / 2.4.
        let peak = yaw_axis_peak(&[0.0, 0.02, 0.04], &[0.9, 0.8, 0.7], 0.0, Bandwidth::Absolute(10.0)).unwrap();
        assert_relative_eq!(peak, 0.044 / 2.4, epsilon = 1e-6);
        // A member pointing the other way counts as its axis (0.02 + π → 0.02); the heading
        // stays that of `heading`, not its opposite.
        let peak = yaw_axis_peak(
            &[0.0, 0.02 + PI, 0.04],
            &[0.9, 0.8, 0.7],
            0.0,
            Bandwidth::Absolute(10.0),
        )
        .unwrap();
        assert_relative_eq!(peak, 0.044 / 2.4, epsilon = 1e-6);
        // Across ±π: π − 0.05 and −π + 0.05, equal weights, meet at π.
        let peak = yaw_axis_peak(
            &[PI - 0.05, -PI + 0.05],
            &[1.0, 1.0],
            PI - 0.05,
            Bandwidth::Absolute(10.0),
        )
        .unwrap();
        assert!(wrap_angle(peak - PI).abs() < 1e-6, "{peak}");
        // A narrow kernel: the mode of 0, 0 and 1 (σ 1) is the fixed point
        // x = k(x − 1) / (2 k(x) + k(x − 1)), k(d) = exp(−d²/2), a local maximum near 0.
        let x = yaw_axis_peak(&[0.0, 0.0, 1.0], &[1.0, 1.0, 1.0], 0.0, Bandwidth::Absolute(1.0)).unwrap();
        let k = |d: f64| (-0.5 * d * d).exp();
        assert_relative_eq!(x, k(x - 1.0) / (2.0 * k(x) + k(x - 1.0)), epsilon = 1e-8);
        assert!(x > 0.0 && x < 1.0 / 3.0, "{x}");
        // All yaws on one axis: that axis, in the heading's direction.
        let peak = yaw_axis_peak(&[0.3, 0.3 - PI, 0.3], &[1.0, 2.0, 1.0], 0.3, Bandwidth::Factor(0.1)).unwrap();
        assert_relative_eq!(peak, 0.3, epsilon = 1e-12);
        assert!(yaw_axis_peak(&[0.1], &[], 0.1, Bandwidth::Scott).is_err());
    }
}
