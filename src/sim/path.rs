//! Motion along ground paths: a polyline with rounded corners, sampled densely and
//! parameterised by arc length, and a speed profile (cruise, brake to a stop, wait, accelerate)
//! that gives the distance travelled as a closed-form function of time, so any instant can be
//! evaluated directly (random access by sweep index).

use nalgebra::Vector2;

/// Spacing of the dense samples along a path (m).
const SAMPLE_SPACING_M: f64 = 0.25;

/// A planar path through corner points with circular fillets of a given radius.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    points: Vec<Vector2<f64>>,
    /// Cumulative arc length at each point (m).
    s: Vec<f64>,
}

/// A position and heading on a path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathPose {
    /// Position in the world plane (m).
    pub xy: Vector2<f64>,
    /// Heading, counter-clockwise from +x (rad).
    pub heading: f64,
}

impl Path {
    /// A path through `corners`, each interior corner rounded by an arc of `radius` (clamped
    /// so the arcs of neighbouring corners do not overlap). Needs at least two distinct corners.
    pub fn from_corners(corners: &[Vector2<f64>], radius: f64) -> Option<Path> {
        let corners: Vec<Vector2<f64>> = corners.iter().fold(Vec::new(), |mut acc, c| {
            if acc.last().is_none_or(|l: &Vector2<f64>| (l - c).norm() > 1e-6) {
                acc.push(*c);
            }
            acc
        });
        if corners.len() < 2 {
            return None;
        }
        let mut points = vec![corners[0]];
        for i in 1..corners.len() - 1 {
            let (a, b, c) = (corners[i - 1], corners[i], corners[i + 1]);
            let u = (b - a).normalize();
            let v = (c - b).normalize();
            let cos_turn = u.dot(&v).clamp(-1.0, 1.0);
            let turn = cos_turn.acos();
            if turn < 1e-6 {
                continue;
            }
            // Tangent length from the corner to where the arc starts and ends.
            let max_tangent = 0.5 * (b - a).norm().min((c - b).norm());
            let tangent = (radius * (turn / 2.0).tan()).min(max_tangent);
            let r = tangent / (turn / 2.0).tan();
            let start = b - u * tangent;
            let cross = u.x * v.y - u.y * v.x;
            let left = Vector2::new(-u.y, u.x) * cross.signum();
            let centre = start + left * r;
            let n = ((r * turn) / SAMPLE_SPACING_M).ceil().max(2.0) as usize;
            let a0 = (start - centre).y.atan2((start - centre).x);
            for k in 0..=n {
                let ang = a0 + cross.signum() * turn * k as f64 / n as f64;
                points.push(centre + Vector2::new(ang.cos(), ang.sin()) * r);
            }
        }
        points.push(*corners.last()?);
        // Resample the straight stretches densely so lookups interpolate short chords.
        let mut dense = vec![points[0]];
        for w in points.windows(2) {
            let len = (w[1] - w[0]).norm();
            let n = (len / SAMPLE_SPACING_M).ceil().max(1.0) as usize;
            for k in 1..=n {
                dense.push(w[0] + (w[1] - w[0]) * (k as f64 / n as f64));
            }
        }
        dense.dedup_by(|b, a| (*b - *a).norm() < 1e-9);
        let mut s = Vec::with_capacity(dense.len());
        let mut acc = 0.0;
        s.push(0.0);
        for w in dense.windows(2) {
            acc += (w[1] - w[0]).norm();
            s.push(acc);
        }
        (dense.len() >= 2).then_some(Path { points: dense, s })
    }

    /// Total arc length (m).
    pub fn length(&self) -> f64 {
        self.s.last().copied().unwrap_or(0.0)
    }

    /// Position and heading at arc length `s`, clamped to the path's ends.
    pub fn pose_at(&self, s: f64) -> PathPose {
        let s = s.clamp(0.0, self.length());
        let i = match self.s.binary_search_by(|v| v.total_cmp(&s)) {
            Ok(i) => i.min(self.points.len() - 2),
            Err(i) => i.saturating_sub(1).min(self.points.len() - 2),
        };
        let (a, b) = (self.points[i], self.points[i + 1]);
        let seg = self.s[i + 1] - self.s[i];
        let f = if seg > 0.0 { (s - self.s[i]) / seg } else { 0.0 };
        let d = b - a;
        PathPose {
            xy: a + d * f,
            heading: d.y.atan2(d.x),
        }
    }

    /// Arc length of the sample closest to `point` (m).
    pub fn arc_length_near(&self, point: &Vector2<f64>) -> f64 {
        let mut best = (f64::INFINITY, 0.0);
        for (p, s) in self.points.iter().zip(&self.s) {
            let d = (p - point).norm_squared();
            if d < best.0 {
                best = (d, *s);
            }
        }
        best.1
    }
}

/// One phase of constant acceleration.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Phase {
    t0: f64,
    s0: f64,
    v0: f64,
    accel: f64,
}

/// Distance along a path as a function of time: cruise, brake for each stop, wait, accelerate.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedProfile {
    phases: Vec<Phase>,
}

impl SpeedProfile {
    /// Starts at `s_start` at cruise speed `cruise_mps` at t = 0 and stops at each `(s, wait_s)`
    /// in `stops` (ascending `s`), braking and accelerating at `accel_mps2`.
    pub fn with_stops(s_start: f64, cruise_mps: f64, accel_mps2: f64, stops: &[(f64, f64)]) -> SpeedProfile {
        let mut phases = Vec::new();
        let (mut t, mut s) = (0.0, s_start);
        let v = cruise_mps.max(0.0);
        let a = accel_mps2.max(0.1);
        if v == 0.0 {
            return SpeedProfile {
                phases: vec![Phase {
                    t0: 0.0,
                    s0: s_start,
                    v0: 0.0,
                    accel: 0.0,
                }],
            };
        }
        let brake = v * v / (2.0 * a);
        let ramp_t = v / a;
        for &(s_stop, wait) in stops {
            let cruise_len = s_stop - brake - s;
            if cruise_len < 0.0 {
                continue;
            }
            phases.push(Phase {
                t0: t,
                s0: s,
                v0: v,
                accel: 0.0,
            });
            t += cruise_len / v;
            s += cruise_len;
            phases.push(Phase {
                t0: t,
                s0: s,
                v0: v,
                accel: -a,
            });
            t += ramp_t;
            s = s_stop;
            phases.push(Phase {
                t0: t,
                s0: s,
                v0: 0.0,
                accel: 0.0,
            });
            t += wait.max(0.0);
            phases.push(Phase {
                t0: t,
                s0: s,
                v0: 0.0,
                accel: a,
            });
            t += ramp_t;
            s += brake;
        }
        phases.push(Phase {
            t0: t,
            s0: s,
            v0: v,
            accel: 0.0,
        });
        SpeedProfile { phases }
    }

    fn phase(&self, t: f64) -> &Phase {
        let i = self.phases.partition_point(|p| p.t0 <= t).saturating_sub(1);
        &self.phases[i]
    }

    /// Distance along the path at time `t` (s).
    pub fn distance(&self, t: f64) -> f64 {
        let p = self.phase(t);
        let tau = (t - p.t0).max(0.0);
        p.s0 + p.v0 * tau + 0.5 * p.accel * tau * tau
    }

    /// Largest speed reached (m/s).
    pub fn max_speed(&self) -> f64 {
        self.phases.iter().map(|p| p.v0).fold(0.0, f64::max)
    }
}
