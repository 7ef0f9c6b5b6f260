//! Platform motion as closed-form functions of time (so any sweep is computed directly): the
//! car on its lane, the drone at a varying height above ground with attitude wobble and slow
//! yaw, the quadruped with its gait; and the IMU readings (specific force, angular rate) that
//! follow from that motion.

use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector2, Vector3};

use super::config::{DroneConfig, QuadrupedConfig};
use super::path::{Path, SpeedProfile};
use super::terrain::Terrain;
use crate::geometry::pose::rotation_from_euler;

/// Standard gravity (m/s²).
pub const GRAVITY_MPS2: f64 = 9.80665;

/// Pitch and roll that tilt a body standing on the terrain at `xy` with `heading`, in the
/// `Rz·Ry·Rx` convention (nose up is negative pitch, left side up is positive roll).
pub(crate) fn terrain_tilt(terrain: &Terrain, xy: &Vector2<f64>, heading: f64) -> (f64, f64) {
    let (gx, gy) = terrain.gradient(xy.x, xy.y);
    let forward = gx * heading.cos() + gy * heading.sin();
    let left = -gx * heading.sin() + gy * heading.cos();
    (-forward.atan(), left.atan())
}

/// Sum of two sinusoids normalised so its peak magnitude is at most 1.
fn wobble(t: f64, f1: f64, f2: f64, phase: f64) -> f64 {
    0.6 * (std::f64::consts::TAU * f1 * t + phase).sin() + 0.4 * (std::f64::consts::TAU * f2 * t + 2.0 * phase).sin()
}

/// 3u² − 2u³ on [0, 1], 0 before and 1 after.
fn smoothstep(u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    u * u * (3.0 - 2.0 * u)
}

/// A take-off's progress at time `t` (s) after resting `wait_s` and climbing for `climb_s`: the
/// lift (0 on the ground, 1 in flight, a smoothstep between) and the flight's own clock, the
/// integral of the lift (so the route's speed ramps up with it; `t − wait_s − climb_s / 2` once
/// airborne).
fn takeoff_clock(wait_s: f64, climb_s: f64, t: f64) -> (f64, f64) {
    let u = ((t - wait_s) / climb_s).clamp(0.0, 1.0);
    let flight = climb_s * (u * u * u - 0.5 * u * u * u * u) + (t - wait_s - climb_s).max(0.0);
    (smoothstep(u), flight)
}

/// How the platform body moves through the world.
#[derive(Debug, Clone)]
pub(crate) enum PlatformMotion {
    /// A car following a lane.
    Vehicle { path: Path, profile: SpeedProfile },
    /// A multirotor flying a smooth route.
    Drone {
        path: Path,
        profile: SpeedProfile,
        config: DroneConfig,
        yaw0: f64,
        phase: f64,
        altitude_period_s: f64,
    },
    /// A legged robot walking a sidewalk.
    Quadruped {
        path: Path,
        profile: SpeedProfile,
        config: QuadrupedConfig,
        phase: f64,
    },
}

impl PlatformMotion {
    /// The drone's height above ground at time `t` (m): a slow swing through the band that
    /// dwells in its lower part (the square of a sinusoid), plus a small bob, always inside it.
    pub(crate) fn drone_altitude(config: &DroneConfig, t: f64, phase: f64, period_s: f64) -> f64 {
        let lo = config.min_altitude_m.min(config.max_altitude_m);
        let hi = config.max_altitude_m.max(config.min_altitude_m);
        let span = hi - lo;
        let bob = (0.03 * span).min(0.3);
        let margin = 0.02 * span + bob;
        let swing = 0.5 + 0.5 * (std::f64::consts::TAU * t / period_s + phase).sin();
        lo + margin + (span - 2.0 * margin) * swing * swing + bob * (std::f64::consts::TAU * 0.7 * t).sin()
    }

    /// Body pose in the world at time `t` (s since the sequence start).
    pub(crate) fn world_from_body(&self, terrain: &Terrain, t: f64) -> Isometry3<f64> {
        match self {
            PlatformMotion::Vehicle { path, profile } => {
                let p = path.pose_at(profile.distance(t));
                let (pitch, roll) = terrain_tilt(terrain, &p.xy, p.heading);
                let z = terrain.height(p.xy.x, p.xy.y);
                pose(Vector3::new(p.xy.x, p.xy.y, z), p.heading, pitch, roll)
            }
            PlatformMotion::Drone {
                path,
                profile,
                config,
                yaw0,
                phase,
                altitude_period_s,
            } => {
                let w = config.wobble_deg.to_radians();
                let start_tilt = config.start_tilt_deg.to_radians();
                if config.takeoff_s <= 0.0 {
                    let p = path.pose_at(profile.distance(t));
                    let ground = terrain.height(p.xy.x, p.xy.y);
                    let alt = Self::drone_altitude(config, t, *phase, *altitude_period_s);
                    let roll = w * wobble(t, 0.23, 0.71, *phase);
                    // Nose up is negative pitch; the start tilt fades out by a smoothstep.
                    let fade = 1.0 - smoothstep(t / config.start_tilt_s);
                    let pitch = w * wobble(t, 0.19, 0.57, *phase + 1.3) - start_tilt * fade;
                    let yaw = yaw0 + config.yaw_rate_dps.to_radians() * t + 0.05 * (0.3 * t + phase).sin();
                    return pose(Vector3::new(p.xy.x, p.xy.y, ground + alt), yaw, pitch, roll);
                }
                // A take-off: `lift` rises from 0 (resting) to 1 (flying); the route and the
                // flight's own clock run at `lift` times real time, so the drone leaves its pad
                // vertically and reaches cruise speed with the flight height.
                let (lift, flight_t) = takeoff_clock(config.ground_wait_s, config.takeoff_s, t);
                let p = path.pose_at(profile.distance(flight_t));
                let ground = terrain.height(p.xy.x, p.xy.y);
                let flying = Self::drone_altitude(config, flight_t, *phase, *altitude_period_s);
                let rest = config.rest_sensor_height_m;
                let yaw = yaw0 + config.yaw_rate_dps.to_radians() * flight_t + 0.05 * (0.3 * flight_t + phase).sin();
                // On the ground the body lies on the terrain (and the pad's extra nose-up tilt).
                let (ground_pitch, ground_roll) = terrain_tilt(terrain, &p.xy, yaw);
                let roll = lift * w * wobble(t, 0.23, 0.71, *phase) + (1.0 - lift) * ground_roll;
                let pitch = lift * w * wobble(t, 0.19, 0.57, *phase + 1.3) + (1.0 - lift) * (ground_pitch - start_tilt);
                pose(
                    Vector3::new(p.xy.x, p.xy.y, ground + rest + (flying - rest) * lift),
                    yaw,
                    pitch,
                    roll,
                )
            }
            PlatformMotion::Quadruped {
                path,
                profile,
                config,
                phase,
            } => {
                let p = path.pose_at(profile.distance(t));
                let ground = terrain.height(p.xy.x, p.xy.y);
                let (tilt_pitch, tilt_roll) = terrain_tilt(terrain, &p.xy, p.heading);
                let (roll, pitch, bounce) = if profile.max_speed() > 0.0 {
                    let w = std::f64::consts::TAU * config.gait_frequency_hz * t + phase;
                    (
                        config.roll_amplitude_deg.to_radians() * w.sin(),
                        config.pitch_amplitude_deg.to_radians() * (2.0 * w + 0.5).sin(),
                        config.bounce_m * (2.0 * w).sin(),
                    )
                } else {
                    (0.0, 0.0, 0.0)
                };
                pose(
                    Vector3::new(p.xy.x, p.xy.y, ground + config.sensor_height_m + bounce),
                    p.heading,
                    tilt_pitch + pitch,
                    tilt_roll + roll,
                )
            }
        }
    }
}

/// A pose from a translation and Euler angles.
pub(crate) fn pose(t: Vector3<f64>, yaw: f64, pitch: f64, roll: f64) -> Isometry3<f64> {
    Isometry3::from_parts(
        Translation3::from(t),
        UnitQuaternion::from_rotation_matrix(&rotation_from_euler(yaw, pitch, roll)),
    )
}

/// Time step of the finite difference that turns orientations into angular rates (s).
const GYRO_DIFF_STEP_S: f64 = 0.002;

/// Time step of the second difference that turns positions into accelerations (s). Routes are
/// polylines of 0.25 m chords, so a short step would read each chord joint as a spike; ±0.1 s
/// is the smooth acceleration a real platform's would be, and still resolves a quadruped's
/// bounce (4 Hz, 58 % of its amplitude, vertical) and a drone's bob.
const ACCEL_DIFF_STEP_S: f64 = 0.1;

/// Noise-free specific force and angular rate, both in the frame of `world_from_frame(t)`:
/// f = Rᵀ(a + g·ẑ), ω from the relative rotation over a short interval.
pub(crate) fn ideal_imu(world_from_frame: impl Fn(f64) -> Isometry3<f64>, t: f64) -> (Vector3<f64>, Vector3<f64>) {
    let h = GYRO_DIFF_STEP_S;
    let before = world_from_frame(t - h);
    let now = world_from_frame(t);
    let after = world_from_frame(t + h);
    // Before the sequence start the route is clamped to its first point (a velocity step), so
    // the first instants take the forward difference.
    let k = ACCEL_DIFF_STEP_S;
    let position = |t: f64| world_from_frame(t).translation.vector;
    let accel_world = if t < k {
        (position(t + 2.0 * k) - 2.0 * position(t + k) + now.translation.vector) / (k * k)
    } else {
        (position(t + k) - 2.0 * now.translation.vector + position(t - k)) / (k * k)
    };
    let specific_world = accel_world + Vector3::new(0.0, 0.0, GRAVITY_MPS2);
    let specific = now.rotation.inverse() * specific_world;
    let delta = before.rotation.inverse() * after.rotation;
    let gyro = delta.scaled_axis() / (2.0 * h);
    (specific, gyro)
}

#[cfg(test)]
mod tests {
    use super::takeoff_clock;

    #[test]
    fn the_flight_clock_runs_at_the_lift_and_lags_half_the_climb() {
        let (wait, climb) = (2.0, 6.0);
        assert_eq!(takeoff_clock(wait, climb, 0.0), (0.0, 0.0));
        assert_eq!(takeoff_clock(wait, climb, 2.0), (0.0, 0.0));
        // Half-way: lift 0.5; the clock is ∫ of 3u² − 2u³ over [0, ½] times 6 s = 6·(1/8 − 1/32).
        let (lift, clock) = takeoff_clock(wait, climb, 5.0);
        assert!((lift - 0.5).abs() < 1e-12 && (clock - 6.0 * (0.125 - 0.03125)).abs() < 1e-12);
        let (lift, clock) = takeoff_clock(wait, climb, 20.0);
        assert!((lift - 1.0).abs() < 1e-12 && (clock - (20.0 - 2.0 - 3.0)).abs() < 1e-12);
        for k in 1..120 {
            let t = k as f64 * 0.1;
            let h = 1e-5;
            let rate = (takeoff_clock(wait, climb, t + h).1 - takeoff_clock(wait, climb, t - h).1) / (2.0 * h);
            assert!((rate - takeoff_clock(wait, climb, t).0).abs() < 1e-6, "t {t}: {rate}");
        }
    }
}
