//! Constant-velocity Kalman filtering of one scalar coordinate (position and rate) with a
//! white-noise acceleration model, and its Rauch–Tung–Striebel smoother.
//!
//! A box state is four of these (x, y, z, yaw): with per-axis independent noise the 8-state
//! constant-velocity filter splits exactly into 2-state blocks, which keeps the forward pass
//! cheap. Yaw uses the same filter on an unwrapped angle; the caller unwraps each measurement
//! next to the prediction (`unwrap_near`) and applies the π-flip correction (`flip_near`).

use std::f64::consts::{FRAC_PI_2, PI};

use crate::geometry::wrap_angle;

/// A scalar constant-velocity state: value, rate and their 2×2 covariance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CvFilter {
    /// The value (m or rad).
    pub value: f64,
    /// Its rate (m/s or rad/s).
    pub rate: f64,
    /// Covariance `[[p00, p01], [p01, p11]]`, stored as `[p00, p01, p11]`.
    pub covariance: [f64; 3],
}

impl CvFilter {
    /// A filter at `value` with rate 0, value variance `value_std²` and rate variance `rate_std²`.
    pub fn new(value: f64, value_std: f64, rate_std: f64) -> Self {
        Self {
            value,
            rate: 0.0,
            covariance: [value_std * value_std, 0.0, rate_std * rate_std],
        }
    }

    /// The state `dt_s` seconds later (`dt_s` may be negative for a backward pass) under
    /// discrete white-noise acceleration of standard deviation `acceleration_std`:
    /// `Q = σ²·[[dt⁴/4, dt³/2], [dt³/2, dt²]]`.
    pub fn predicted(&self, dt_s: f64, acceleration_std: f64) -> Self {
        let [p00, p01, p11] = self.covariance;
        let q = acceleration_std * acceleration_std;
        let dt2 = dt_s * dt_s;
        Self {
            value: self.value + self.rate * dt_s,
            rate: self.rate,
            covariance: [
                p00 + 2.0 * dt_s * p01 + dt2 * p11 + q * dt2 * dt2 / 4.0,
                p01 + dt_s * p11 + q * dt2 * dt_s / 2.0,
                p11 + q * dt2,
            ],
        }
    }

    /// The state after measuring the value `z` with standard deviation `measurement_std`.
    pub fn updated(&self, z: f64, measurement_std: f64) -> Self {
        let [p00, p01, p11] = self.covariance;
        let s = p00 + measurement_std * measurement_std;
        if s.is_nan() || s <= 0.0 {
            return *self;
        }
        let (k0, k1) = (p00 / s, p01 / s);
        let innovation = z - self.value;
        Self {
            value: self.value + k0 * innovation,
            rate: self.rate + k1 * innovation,
            covariance: [(1.0 - k0) * p00, (1.0 - k0) * p01, p11 - k1 * p01],
        }
    }
}

/// One step of a filter run kept for smoothing: the prediction into this step and the
/// filtered state after it, and the time step that led here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterStep {
    /// Prior at this step (equals `filtered` at the first step).
    pub predicted: CvFilter,
    /// Posterior at this step (equals `predicted` when nothing was measured).
    pub filtered: CvFilter,
    /// Seconds from the previous step (0 at the first).
    pub dt_s: f64,
}

/// Rauch–Tung–Striebel smoothing of a filter run: `(value, rate)` per step, using every
/// measurement of the run. Steps without a measurement get the motion model's interpolation
/// between their neighbours.
pub fn rts_smooth(steps: &[FilterStep]) -> Vec<(f64, f64)> {
    let n = steps.len();
    let mut out = vec![(0.0, 0.0); n];
    let Some(last) = steps.last() else { return out };
    out[n - 1] = (last.filtered.value, last.filtered.rate);
    for k in (0..n.saturating_sub(1)).rev() {
        let f = &steps[k].filtered;
        let next = &steps[k + 1];
        let dt = next.dt_s;
        let [a00, a01, a11] = f.covariance;
        // C = P_k|k · Fᵀ · P_{k+1|k}⁻¹ with F = [[1, dt], [0, 1]].
        let (pf00, pf01, pf10, pf11) = (a00 + dt * a01, a01, a01 + dt * a11, a11);
        let [b00, b01, b11] = next.predicted.covariance;
        let det = b00 * b11 - b01 * b01;
        let (s0, s1) = (out[k + 1].0 - next.predicted.value, out[k + 1].1 - next.predicted.rate);
        if det.is_nan() || det.abs() <= 1e-300 {
            out[k] = (f.value, f.rate);
            continue;
        }
        let (i00, i01, i11) = (b11 / det, -b01 / det, b00 / det);
        let c00 = pf00 * i00 + pf01 * i01;
        let c01 = pf00 * i01 + pf01 * i11;
        let c10 = pf10 * i00 + pf11 * i01;
        let c11 = pf10 * i01 + pf11 * i11;
        out[k] = (f.value + c00 * s0 + c01 * s1, f.rate + c10 * s0 + c11 * s1);
    }
    out
}

/// `angle` shifted by a multiple of 2π to lie within π of `reference`.
pub fn unwrap_near(angle: f64, reference: f64) -> f64 {
    reference + wrap_angle(angle - reference)
}

/// `angle` or `angle + π`, whichever lies within π/2 of `reference` on the circle, unwrapped
/// next to `reference` (AB3DMOT's orientation correction), and whether it was flipped.
pub fn flip_near(angle: f64, reference: f64) -> (f64, bool) {
    let d = wrap_angle(angle - reference);
    if d.abs() > FRAC_PI_2 {
        (reference + wrap_angle(d + PI), true)
    } else {
        (reference + d, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    /// With no process noise and exact measurements of a line, the filter converges to the
    /// line's value and rate, and the smoother recovers the skipped step exactly.
    #[test]
    fn constant_velocity_is_recovered_and_gaps_interpolate() {
        let truth = |t: f64| 2.0 + 3.0 * t;
        let mut f = CvFilter::new(truth(0.0), 1e-3, 100.0);
        let mut steps = vec![FilterStep {
            predicted: f,
            filtered: f,
            dt_s: 0.0,
        }];
        for k in 1..20 {
            let t = k as f64 * 0.1;
            let p = f.predicted(0.1, 1e-6);
            f = if k == 7 { p } else { p.updated(truth(t), 1e-3) };
            steps.push(FilterStep {
                predicted: p,
                filtered: f,
                dt_s: 0.1,
            });
        }
        assert_abs_diff_eq!(f.rate, 3.0, epsilon = 1e-3);
        let smooth = rts_smooth(&steps);
        assert_abs_diff_eq!(smooth[7].0, truth(0.7), epsilon = 1e-3);
        assert_abs_diff_eq!(smooth[0].1, 3.0, epsilon = 1e-2);
    }

    /// Hand-computed update: prior variance 1, measurement variance 1 → gain 1/2.
    #[test]
    fn update_gain_matches_hand_computation() {
        let f = CvFilter::new(0.0, 1.0, 1.0);
        let u = f.updated(2.0, 1.0);
        assert_abs_diff_eq!(u.value, 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(u.covariance[0], 0.5, epsilon = 1e-12);
        // Prediction over 1 s with q = 0: p00 = 1 + 1 = 2, p01 = 1, p11 = 1.
        let p = f.predicted(1.0, 0.0);
        assert_eq!(p.covariance, [2.0, 1.0, 1.0]);
    }

    #[test]
    fn angles_unwrap_and_flip_on_the_circle() {
        assert_abs_diff_eq!(unwrap_near(-3.1, 3.1), 2.0 * PI - 3.1, epsilon = 1e-12);
        let (a, flipped) = flip_near(0.1 + PI, 0.0);
        assert!(flipped);
        assert_abs_diff_eq!(a, 0.1, epsilon = 1e-12);
        let (b, flipped) = flip_near(-3.0, 3.0);
        assert!(!flipped);
        assert_abs_diff_eq!(b, 2.0 * PI - 3.0, epsilon = 1e-12);
    }
}
