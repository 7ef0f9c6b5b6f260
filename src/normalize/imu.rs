//! Up from the accelerometer: the sweep's samples rotated to one instant by the integrated gyro,
//! averaged (the low-pass), and the platform's own acceleration, from the second derivative of
//! the pose positions, removed: `f − Rᵀa = g·up`.

use nalgebra::{Isometry3, Unit, UnitQuaternion, Vector3};

use super::gravity::{GravityMethod, UpEstimate};
use crate::frame::ImuSample;

/// Standard gravity (m/s²).
const GRAVITY_MPS2: f64 = 9.80665;

/// Samples further than this from the sweep's median are shocks, not averaged (m/s²): 2 g.
const SHOCK_MPS2: f64 = 2.0 * GRAVITY_MPS2;

/// How much further from g a pose acceleration may leave the force and still be removed (m/s²).
const ACCEL_TOLERANCE_MPS2: f64 = 0.5;

/// Samples further apart than this are not integrated across (µs): a gap.
const MAX_GYRO_STEP_MICROS: i64 = 50_000;

/// What the IMU estimate assumes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImuParams {
    /// Accelerometer white noise per sample (m/s²).
    pub accel_noise_mps2: f64,
    /// Error floor of the estimate (rad): misalignment, unmodelled vibration.
    pub floor_rad: f64,
}

impl Default for ImuParams {
    fn default() -> Self {
        ImuParams {
            accel_noise_mps2: 0.05,
            floor_rad: 0.1_f64.to_radians(),
        }
    }
}

/// A sweep's mean specific force at one instant, in the sensor frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecificForce {
    /// Mean specific force (m/s²), in the sensor frame at `time_micros`.
    pub mean_mps2: Vector3<f64>,
    /// The instant (µs): the mean time of the samples used.
    pub time_micros: i64,
    /// Samples averaged.
    pub samples: usize,
    /// Samples given but not usable (non-finite, or across a gap).
    pub dropped: usize,
    /// RMS deviation of the aligned samples from the mean across its direction (m/s²): the
    /// vibration and noise that tilt the estimate.
    pub spread_across_mps2: f64,
}

/// The mean specific force of `samples` (in the sensor frame, as sources give them), each
/// rotated to the samples' mean time by the integrated gyro. Non-finite rows, samples outside
/// the longest run without a gap over 50 ms, and shocks (over 2 g from the median) are dropped.
/// `None` when no sample is usable.
pub fn sweep_specific_force(samples: &[ImuSample]) -> Option<SpecificForce> {
    let mut valid: Vec<&ImuSample> = samples
        .iter()
        .filter(|s| s.accel_mps2.iter().chain(s.gyro_radps.iter()).all(|v| v.is_finite()))
        .collect();
    valid.sort_by_key(|s| s.timestamp_micros);
    if valid.is_empty() {
        return None;
    }
    // The longest run without a gap.
    let mut best = (0, 1);
    let mut start = 0;
    for i in 1..=valid.len() {
        let gap = i == valid.len() || valid[i].timestamp_micros - valid[i - 1].timestamp_micros > MAX_GYRO_STEP_MICROS;
        if gap {
            if i - start > best.1 - best.0 {
                best = (start, i);
            }
            start = i;
        }
    }
    let run = &valid[best.0..best.1];
    // Orientation of each sample relative to the first: q_{k+1} = q_k · exp(ω̄ dt).
    let mut orientation = Vec::with_capacity(run.len());
    let mut q = UnitQuaternion::identity();
    orientation.push(q);
    for w in run.windows(2) {
        let dt = (w[1].timestamp_micros - w[0].timestamp_micros) as f64 * 1e-6;
        let omega = 0.5 * (w[0].gyro_radps + w[1].gyro_radps);
        q *= UnitQuaternion::from_scaled_axis(omega * dt);
        orientation.push(q);
    }
    let t0 = run[0].timestamp_micros;
    let mean_offset = run.iter().map(|s| (s.timestamp_micros - t0) as f64).sum::<f64>() / run.len() as f64;
    let time_micros = t0 + mean_offset.round() as i64;
    // Orientation at the mean time, between its neighbours.
    let k = run
        .partition_point(|s| s.timestamp_micros <= time_micros)
        .clamp(1, run.len())
        - 1;
    let q_ref = if k + 1 < run.len() {
        let span = (run[k + 1].timestamp_micros - run[k].timestamp_micros) as f64;
        let f = if span > 0.0 {
            (time_micros - run[k].timestamp_micros) as f64 / span
        } else {
            0.0
        };
        orientation[k].slerp(&orientation[k + 1], f.clamp(0.0, 1.0))
    } else {
        orientation[k]
    };
    let aligned: Vec<Vector3<f64>> = run
        .iter()
        .zip(&orientation)
        .map(|(s, q)| q_ref.inverse() * q * s.accel_mps2)
        .collect();
    // Shocks (a bump, a glitch) are dropped: samples more than 2 g from the component-wise median.
    let median = Vector3::from_fn(|r, _| {
        let mut v: Vec<f64> = aligned.iter().map(|a| a[r]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    let kept: Vec<&Vector3<f64>> = aligned.iter().filter(|a| (*a - median).norm() <= SHOCK_MPS2).collect();
    if kept.is_empty() {
        return None;
    }
    let mean = kept.iter().copied().sum::<Vector3<f64>>() / kept.len() as f64;
    let dir = mean.try_normalize(1e-9).unwrap_or_else(Vector3::z);
    let across = (kept
        .iter()
        .map(|a| {
            let d = *a - mean;
            (d - dir * d.dot(&dir)).norm_squared()
        })
        .sum::<f64>()
        / kept.len() as f64)
        .sqrt();
    Some(SpecificForce {
        mean_mps2: mean,
        time_micros,
        samples: kept.len(),
        dropped: samples.len() - kept.len(),
        spread_across_mps2: across,
    })
}

/// The platform's acceleration at the middle pose (world frame, m/s²) from three consecutive
/// poses and their times (µs): the second divided difference of the positions. `None` when the
/// times are not increasing.
pub fn platform_acceleration(poses: [(&Isometry3<f64>, i64); 3]) -> Option<Vector3<f64>> {
    let [(p0, t0), (p1, t1), (p2, t2)] = poses;
    let (h0, h1) = ((t1 - t0) as f64 * 1e-6, (t2 - t1) as f64 * 1e-6);
    if !(h0 > 0.0 && h1 > 0.0) {
        return None;
    }
    let v0 = (p1.translation.vector - p0.translation.vector) / h0;
    let v1 = (p2.translation.vector - p1.translation.vector) / h1;
    Some(2.0 * (v1 - v0) / (h0 + h1))
}

/// Up from a sweep's specific force with the platform acceleration `accel_in_sensor` (m/s²,
/// sensor frame) removed where known and plausible (it must not leave the force more than
/// 0.5 m/s² further from g than it was). The sigma combines the noise across the mean over the
/// samples, the floor, and (without the acceleration) an unknown manoeuvre of the size of the
/// magnitude mismatch, at least 0.3 m/s². `None` when less than 0.1 g is left to point with.
pub fn up_from_specific_force(
    force: &SpecificForce,
    accel_in_sensor: Option<Vector3<f64>>,
    params: &ImuParams,
) -> Option<UpEstimate> {
    // A pose acceleration that leaves the force further from g than it was is wrong (motion
    // faster than the poses resolve, a one-sided difference at a segment's end): not removed.
    let plain = (force.mean_mps2.norm() - GRAVITY_MPS2).abs();
    let accel_in_sensor =
        accel_in_sensor.filter(|a| ((force.mean_mps2 - a).norm() - GRAVITY_MPS2).abs() <= plain + ACCEL_TOLERANCE_MPS2);
    let gravity = force.mean_mps2 - accel_in_sensor.unwrap_or_else(Vector3::zeros);
    let norm = gravity.norm();
    if !(norm.is_finite() && norm > 0.1 * GRAVITY_MPS2) {
        return None;
    }
    let noise = params.accel_noise_mps2.max(force.spread_across_mps2) / (force.samples.max(1) as f64).sqrt();
    let unknown = if accel_in_sensor.is_some() {
        0.0
    } else {
        (norm - GRAVITY_MPS2).abs().max(0.3)
    };
    let sigma = ((noise / norm).powi(2) + (unknown / norm).powi(2) + params.floor_rad.powi(2)).sqrt();
    Some(UpEstimate::new(Unit::new_normalize(gravity), sigma, GravityMethod::Imu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::angle_between;

    fn sample(t: i64, accel: Vector3<f64>, gyro: Vector3<f64>) -> ImuSample {
        ImuSample {
            timestamp_micros: t,
            accel_mps2: accel,
            gyro_radps: gyro,
        }
    }

    #[test]
    fn a_sensor_at_rest_points_at_gravity_and_nan_rows_are_dropped() {
        let up = Vector3::new(0.1, -0.2, 1.0).normalize();
        let mut samples: Vec<ImuSample> = (0..40)
            .map(|k| sample(k * 2500, up * GRAVITY_MPS2, Vector3::zeros()))
            .collect();
        for k in (0..40).step_by(10) {
            samples[k].accel_mps2.x = f64::NAN;
        }
        let f = sweep_specific_force(&samples).unwrap();
        assert_eq!((f.samples, f.dropped), (36, 4));
        let est = up_from_specific_force(&f, Some(Vector3::zeros()), &ImuParams::default()).unwrap();
        assert!(angle_between(&est.up, &up) < 1e-12);
        assert!(est.sigma_rad.to_degrees() < 0.2, "{}", est.sigma_rad.to_degrees());
        assert!(sweep_specific_force(&[sample(0, Vector3::repeat(f64::NAN), Vector3::zeros())]).is_none());
    }

    #[test]
    fn a_rolling_sensor_is_aligned_to_the_mean_time_by_the_gyro() {
        // Rolling at 0.5 rad/s about x: gravity seen by the body turns; the gyro-aligned mean at
        // the mean time is the gravity direction at that time, which a plain mean is not.
        let rate = 0.5;
        let samples: Vec<ImuSample> = (0..41)
            .map(|k| {
                let t = k as f64 * 0.0025;
                let body_from_world = UnitQuaternion::from_scaled_axis(Vector3::x() * (rate * t)).inverse();
                sample(
                    k * 2500,
                    body_from_world * Vector3::z() * GRAVITY_MPS2,
                    Vector3::x() * rate,
                )
            })
            .collect();
        let f = sweep_specific_force(&samples).unwrap();
        assert_eq!(f.time_micros, 50_000);
        let truth = UnitQuaternion::from_scaled_axis(Vector3::x() * (rate * 0.05)).inverse() * Vector3::z();
        let est = up_from_specific_force(&f, Some(Vector3::zeros()), &ImuParams::default()).unwrap();
        assert!(
            angle_between(&est.up, &truth) < 1e-6,
            "{}",
            angle_between(&est.up, &truth)
        );
        assert!(f.spread_across_mps2 < 1e-6);
    }

    #[test]
    fn acceleration_is_removed_and_its_absence_widens_sigma() {
        // Braking at 2 m/s² while level: the specific force is a + g·ẑ.
        let a = Vector3::new(-2.0, 0.0, 0.0);
        let samples: Vec<ImuSample> = (0..40)
            .map(|k| sample(k * 2500, a + Vector3::z() * GRAVITY_MPS2, Vector3::zeros()))
            .collect();
        let f = sweep_specific_force(&samples).unwrap();
        let p = ImuParams::default();
        let with = up_from_specific_force(&f, Some(a), &p).unwrap();
        assert!(angle_between(&with.up, &Vector3::z()) < 1e-12);
        let without = up_from_specific_force(&f, None, &p).unwrap();
        let err = angle_between(&without.up, &Vector3::z());
        assert!((err - (2.0 / GRAVITY_MPS2).atan()).abs() < 1e-12);
        assert!(without.sigma_rad > with.sigma_rad * 5.0);
    }

    #[test]
    fn second_difference_of_positions_is_the_acceleration() {
        // x = t², uneven spacing: a = 2 exactly.
        let p = |t: f64| Isometry3::translation(t * t, 0.0, 0.0);
        let (a, b, c) = (p(0.0), p(0.1), p(0.25));
        let acc = platform_acceleration([(&a, 0), (&b, 100_000), (&c, 250_000)]).unwrap();
        assert!((acc - Vector3::new(2.0, 0.0, 0.0)).norm() < 1e-9);
        assert!(platform_acceleration([(&a, 0), (&b, 0), (&c, 1)]).is_none());
    }

    #[test]
    fn a_shock_sample_is_dropped() {
        let mut samples: Vec<ImuSample> = (0..40)
            .map(|k| sample(k * 2500, Vector3::z() * 9.8, Vector3::zeros()))
            .collect();
        samples[7].accel_mps2 = Vector3::new(900.0, -400.0, 30.0);
        let f = sweep_specific_force(&samples).unwrap();
        assert_eq!((f.samples, f.dropped), (39, 1));
        assert!((f.mean_mps2 - Vector3::z() * 9.8).norm() < 1e-12);
    }

    #[test]
    fn only_the_longest_run_without_a_gap_is_used() {
        let mut samples: Vec<ImuSample> = (0..10)
            .map(|k| sample(k * 2500, Vector3::z() * 9.8, Vector3::zeros()))
            .collect();
        samples.extend((0..4).map(|k| sample(1_000_000 + k * 2500, Vector3::x() * 9.8, Vector3::zeros())));
        let f = sweep_specific_force(&samples).unwrap();
        assert_eq!((f.samples, f.dropped), (10, 4));
        assert!((f.mean_mps2 - Vector3::z() * 9.8).norm() < 1e-12);
    }
}
