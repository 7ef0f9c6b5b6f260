//! Mergeable sums and bin counts of one sequence, one platform or all, and the bin rules.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::read::{BoxInfo, FrameInfo, TrackInfo};
use super::{
    ELEVATION_BINS, Histogram, OBJECTS_PER_FRAME_BINS, ObjectsPerFrame, POINTS_PER_BOX_BINS, PlatformStats,
    PointElevation, PointsPerBox, RHO_BINS, Rate, THETA_BINS, TRACK_LENGTH_BINS, TargetPolar, TrackLengths,
};

/// Integer sums and counts: merging is exact, so the means of `all` are those of the rows.
#[derive(Debug, Clone)]
pub(super) struct Accumulator {
    pub sequences: u64,
    pub frames: u64,
    pub boxes: u64,
    pub tracks: u64,
    /// Box rows of frames in `frames.parquet`, summed over those frames.
    pub objects_sum: u64,
    pub objects: [u64; 6],
    pub points_sum: i128,
    pub points: [u64; 6],
    pub polar: [[u64; THETA_BINS]; RHO_BINS],
    pub polar_non_finite: u64,
    pub elevation_frames_with_points: u64,
    pub elevation_frames_used: u64,
    pub elevation_points_used: u64,
    pub elevation_points_skipped: u64,
    pub elevation: [u64; ELEVATION_BINS],
    pub boxes_by_class: BTreeMap<String, u64>,
    pub tracks_by_class: BTreeMap<String, u64>,
    pub track_sum: i128,
    pub track_lengths: [u64; 6],
    pub flags: BTreeMap<String, u64>,
    pub review_status: BTreeMap<String, u64>,
    pub origin: BTreeMap<String, u64>,
}

impl Default for Accumulator {
    fn default() -> Self {
        Self {
            sequences: 0,
            frames: 0,
            boxes: 0,
            tracks: 0,
            objects_sum: 0,
            objects: [0; 6],
            points_sum: 0,
            points: [0; 6],
            polar: [[0; THETA_BINS]; RHO_BINS],
            polar_non_finite: 0,
            elevation_frames_with_points: 0,
            elevation_frames_used: 0,
            elevation_points_used: 0,
            elevation_points_skipped: 0,
            elevation: [0; ELEVATION_BINS],
            boxes_by_class: BTreeMap::new(),
            tracks_by_class: BTreeMap::new(),
            track_sum: 0,
            track_lengths: [0; 6],
            flags: BTreeMap::new(),
            review_status: BTreeMap::new(),
            origin: BTreeMap::new(),
        }
    }
}

/// The objects-per-frame bin of a frame with `n` boxes.
pub(super) fn objects_bin(n: u64) -> usize {
    match n {
        0 => 0,
        13.. => 5,
        _ => ((n - 1) / 3 + 1) as usize,
    }
}

/// The points-per-box bin of `p` points (a negative count falls in the first).
pub(super) fn points_bin(p: i64) -> usize {
    match p {
        ..100 => 0,
        900.. => 5,
        _ => ((p - 100) / 200 + 1) as usize,
    }
}

/// The track-length bin of a track of `n` boxes (0 or 1 falls in the first).
pub(super) fn track_bin(n: i64) -> usize {
    match n {
        ..=1 => 0,
        2..=4 => 1,
        5..=9 => 2,
        10..=19 => 3,
        20..=49 => 4,
        _ => 5,
    }
}

/// Degrees of an angle in radians, as `rad * 180 / π` (the Python check computes the same).
fn degrees(rad: f64) -> f64 {
    rad * 180.0 / std::f64::consts::PI
}

/// `floor(v / width)` clamped to `0..bins`.
fn clamped_bin(v: f64, width: f64, bins: usize) -> usize {
    let b = (v / width).floor();
    if b <= 0.0 {
        0
    } else if b >= (bins - 1) as f64 {
        bins - 1
    } else {
        b as usize
    }
}

/// The (ρ, θ) bin of a box, `None` when either is not finite.
pub(super) fn polar_bin(rho_m: f64, pitch_rad: f64) -> Option<(usize, usize)> {
    if !rho_m.is_finite() || !pitch_rad.is_finite() {
        return None;
    }
    Some((
        clamped_bin(rho_m, 10.0, RHO_BINS),
        clamped_bin(degrees(pitch_rad) + 90.0, 10.0, THETA_BINS),
    ))
}

/// The elevation bin of a sensor-frame point seen in the gravity-aligned frame (`rotation`:
/// row-major 3×3, identity when `None`); `None` for a point at the origin or not finite.
pub(super) fn elevation_bin(x: f32, y: f32, z: f32, rotation: Option<&[f64; 9]>) -> Option<usize> {
    if !(x.is_finite() && y.is_finite() && z.is_finite()) || (x == 0.0 && y == 0.0 && z == 0.0) {
        return None;
    }
    let (x, y, z) = (f64::from(x), f64::from(y), f64::from(z));
    let (gx, gy, gz) = match rotation {
        Some(r) => (
            r[0] * x + r[1] * y + r[2] * z,
            r[3] * x + r[4] * y + r[5] * z,
            r[6] * x + r[7] * y + r[8] * z,
        ),
        None => (x, y, z),
    };
    let elevation = degrees(gz.atan2(gx.hypot(gy)));
    if !elevation.is_finite() {
        return None;
    }
    Some(clamped_bin(elevation + 90.0, 5.0, ELEVATION_BINS))
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn fraction(count: u64, total: u64) -> Option<f64> {
    (total > 0).then(|| count as f64 / total as f64)
}

fn mean(sum: i128, n: u64) -> Option<f64> {
    (n > 0).then(|| sum as f64 / n as f64)
}

impl Accumulator {
    /// Adds one sequence's frames and boxes.
    pub fn add_frames_and_boxes(&mut self, frames: &[FrameInfo], boxes: &[BoxInfo]) {
        self.frames += frames.len() as u64;
        self.boxes += boxes.len() as u64;
        let mut per_frame: HashMap<i64, u64> = HashMap::new();
        for b in boxes {
            *per_frame.entry(b.frame_index).or_default() += 1;
            self.points_sum += i128::from(b.num_points_inside);
            self.points[points_bin(b.num_points_inside)] += 1;
            match polar_bin(b.bev_range_m, b.relative_pitch_rad) {
                Some((r, t)) => self.polar[r][t] += 1,
                None => self.polar_non_finite += 1,
            }
            *self.boxes_by_class.entry(b.class.clone()).or_default() += 1;
            let flags: BTreeSet<&String> = b.flags.iter().collect();
            for flag in flags {
                *self.flags.entry(flag.clone()).or_default() += 1;
            }
            *self.review_status.entry(b.review_status.clone()).or_default() += 1;
            *self.origin.entry(b.origin.clone()).or_default() += 1;
        }
        // A frame index listed twice (it should not be) counts its boxes twice, as each row would.
        for f in frames {
            let n = per_frame.get(&f.frame_index).copied().unwrap_or(0);
            self.objects_sum += n;
            self.objects[objects_bin(n)] += 1;
        }
    }

    /// Adds one sequence's tracks.
    pub fn add_tracks(&mut self, tracks: &[TrackInfo]) {
        self.tracks += tracks.len() as u64;
        for t in tracks {
            self.track_sum += i128::from(t.num_boxes);
            self.track_lengths[track_bin(t.num_boxes)] += 1;
            *self.tracks_by_class.entry(t.class.clone()).or_default() += 1;
        }
    }

    /// Adds another accumulator's sums and counts.
    pub fn merge(&mut self, o: &Accumulator) {
        self.sequences += o.sequences;
        self.frames += o.frames;
        self.boxes += o.boxes;
        self.tracks += o.tracks;
        self.objects_sum += o.objects_sum;
        self.points_sum += o.points_sum;
        self.track_sum += o.track_sum;
        for (a, b) in self.objects.iter_mut().zip(o.objects) {
            *a += b;
        }
        for (a, b) in self.points.iter_mut().zip(o.points) {
            *a += b;
        }
        for (a, b) in self.track_lengths.iter_mut().zip(o.track_lengths) {
            *a += b;
        }
        for (ra, rb) in self.polar.iter_mut().zip(o.polar.iter()) {
            for (a, b) in ra.iter_mut().zip(rb) {
                *a += b;
            }
        }
        self.polar_non_finite += o.polar_non_finite;
        self.elevation_frames_with_points += o.elevation_frames_with_points;
        self.elevation_frames_used += o.elevation_frames_used;
        self.elevation_points_used += o.elevation_points_used;
        self.elevation_points_skipped += o.elevation_points_skipped;
        for (a, b) in self.elevation.iter_mut().zip(o.elevation) {
            *a += b;
        }
        add_counts(&mut self.boxes_by_class, &o.boxes_by_class);
        add_counts(&mut self.tracks_by_class, &o.tracks_by_class);
        add_counts(&mut self.flags, &o.flags);
        add_counts(&mut self.review_status, &o.review_status);
        add_counts(&mut self.origin, &o.origin);
    }

    /// The statistics these sums give.
    pub fn finish(&self) -> PlatformStats {
        let labels = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let rho_labels = (0..RHO_BINS)
            .map(|i| {
                if i + 1 == RHO_BINS {
                    format!("{}+", i * 10)
                } else {
                    format!("{}-{}", i * 10, i * 10 + 10)
                }
            })
            .collect();
        let theta_labels = (0..THETA_BINS)
            .map(|i| format!("{}..{}", -90 + 10 * i as i64, -80 + 10 * i as i64))
            .collect();
        let elevation_labels = (0..ELEVATION_BINS).map(|i| format!("{}..{}", -90 + 5 * i as i64, -85 + 5 * i as i64));
        PlatformStats {
            sequences: self.sequences,
            frames: self.frames,
            boxes: self.boxes,
            tracks: self.tracks,
            objects_per_frame: ObjectsPerFrame {
                mean: mean(i128::from(self.objects_sum), self.frames),
                histogram: Histogram::new(labels(&OBJECTS_PER_FRAME_BINS), &self.objects),
            },
            points_per_box: PointsPerBox {
                mean: mean(self.points_sum, self.boxes),
                histogram: Histogram::new(labels(&POINTS_PER_BOX_BINS), &self.points),
                below_100: self.points[0],
                below_100_fraction: fraction(self.points[0], self.boxes),
                at_least_900: self.points[5],
                at_least_900_fraction: fraction(self.points[5], self.boxes),
            },
            target_polar: TargetPolar {
                rho_labels,
                theta_labels,
                counts: self.polar.iter().map(|r| r.to_vec()).collect(),
                non_finite: self.polar_non_finite,
            },
            point_elevation: PointElevation {
                frames_with_points: self.elevation_frames_with_points,
                frames_used: self.elevation_frames_used,
                points_used: self.elevation_points_used,
                points_skipped: self.elevation_points_skipped,
                histogram: Histogram::new(elevation_labels, &self.elevation),
            },
            boxes_by_class: self.boxes_by_class.clone(),
            tracks_by_class: self.tracks_by_class.clone(),
            track_lengths: TrackLengths {
                mean: mean(self.track_sum, self.tracks),
                histogram: Histogram::new(labels(&TRACK_LENGTH_BINS), &self.track_lengths),
            },
            flags: self
                .flags
                .iter()
                .map(|(k, &count)| {
                    (
                        k.clone(),
                        Rate {
                            count,
                            fraction: fraction(count, self.boxes),
                        },
                    )
                })
                .collect(),
            review_status: self.review_status.clone(),
            origin: self.origin.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_follow_their_labels() {
        let objects: Vec<usize> = [0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 100].map(objects_bin).to_vec();
        assert_eq!(objects, [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
        let points: Vec<usize> = [-1, 0, 99, 100, 299, 300, 699, 700, 899, 900, 5000]
            .map(points_bin)
            .to_vec();
        assert_eq!(points, [0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 5]);
        let tracks: Vec<usize> = [0, 1, 2, 4, 5, 9, 10, 19, 20, 49, 50].map(track_bin).to_vec();
        assert_eq!(tracks, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]);
    }

    #[test]
    fn polar_and_elevation_bins_clamp_at_the_ends() {
        let half_pi = std::f64::consts::FRAC_PI_2;
        assert_eq!(polar_bin(0.0, -half_pi), Some((0, 0)));
        assert_eq!(polar_bin(9.99, half_pi), Some((0, 17)));
        assert_eq!(polar_bin(80.0, 0.0), Some((8, 9)));
        assert_eq!(polar_bin(500.0, -0.01), Some((8, 8)));
        assert_eq!(polar_bin(f64::NAN, 0.0), None);
        assert_eq!(elevation_bin(0.0, 0.0, 0.0, None), None);
        assert_eq!(elevation_bin(0.0, 0.0, 1.0, None), Some(35));
        assert_eq!(elevation_bin(0.0, 0.0, -1.0, None), Some(0));
        assert_eq!(elevation_bin(1.0, 0.0, 0.01, None), Some(18));
        // A sensor pitched 90° down: its forward axis points to the ground.
        let down = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0];
        assert_eq!(elevation_bin(1.0, 0.0, 0.0, Some(&down)), Some(0));
    }
}
