//! Vertical placement of the consolidated boxes: each object set on the ground around it.
//!
//! Detectors place boxes loosely in height, and one trained at another ground level places them
//! all too low or too high, while the ground next to an object is usually well seen. So, in each
//! frame's gravity-aligned (normalized) frame, the lowest return of each small cell of a ring
//! around a box's footprint is taken, a plane is fitted to the cells that lie on the lower
//! envelope, and the box's bottom is put on that plane at its centre. Where a box's own frame
//! shows too little ground around it (far objects), the ring is read from the sequence's ground
//! map instead: every frame's returns near its sensor, binned in a gravity-aligned copy of the
//! world frame, so the ground a far object stands on is the ground seen when the sensor passed
//! near it. The shift is smoothed along the box's track (a median over nearby frames; a static
//! object's over its whole track); a box whose track never shows its ground moves by its class's
//! median shift over the sequence (the detectors' bias), or keeps its height when the class has
//! too few estimates. Method and figures: `docs/pipeline.md`, "Vertical placement".

use std::collections::HashMap;

use nalgebra::{Isometry3, Matrix3, Vector3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::frame::{ObjectClass, Platform};
use crate::geometry::Box3;
use crate::geometry::pose::AffineRows;
use crate::track::{Consolidation, MotionState, SweepPoints};

/// How boxes are set on the ground (`[ground_contact]` of a pipeline config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroundContactConfig {
    /// The platforms whose boxes are set on the ground (default vehicle and drone: on the
    /// simulated quadruped, whose sensor sees the ground around objects at a grazing angle, it
    /// made heights worse; `docs/pipeline.md`, "Vertical placement").
    pub platforms: Vec<Platform>,
    /// Width of the ring around the footprint whose returns show the ground (m).
    pub ring_m: f64,
    /// Gap between the footprint and the ring, which keeps the object's own returns out (m).
    pub gap_m: f64,
    /// Side of the ring's cells, each of which gives its lowest return (m).
    pub cell_m: f64,
    /// Fewest cells on the ground for an estimate.
    pub min_cells: usize,
    /// How far below or above the box's bottom a return may lie to count (m).
    pub search_m: f64,
    /// A box's shift is the median over its track's estimates within this many frames of it (a
    /// static object's: over its whole track).
    pub window_frames: usize,
    /// Reach of the sequence's ground map (m): every frame's returns within this distance of its
    /// sensor, across the level plane, give the lowest return of each `cell_m` cell (the median
    /// over the frames that saw the cell), and a box whose own frame shows too little ground
    /// around it takes its ground from that map; 0: no map.
    pub map_range_m: f64,
    /// Fewest estimates of a class in the sequence for its median shift to move the boxes of its
    /// tracks that have none; 0: such boxes stay.
    pub min_class_estimates: usize,
}

impl Default for GroundContactConfig {
    fn default() -> Self {
        Self {
            platforms: vec![Platform::Vehicle, Platform::Drone],
            ring_m: 2.0,
            gap_m: 0.3,
            cell_m: 0.5,
            min_cells: 24,
            search_m: 1.5,
            window_frames: 10,
            map_range_m: 20.0,
            min_class_estimates: 50,
        }
    }
}

impl GroundContactConfig {
    /// Whether boxes of `platform`'s sequences are set on the ground.
    pub fn runs_on(&self, platform: Platform) -> bool {
        self.platforms.contains(&platform)
    }

    /// Checks every value: `Err((key, reason))` names the first bad one.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, v, lo, hi) in [
            ("ground_contact.ring_m", self.ring_m, 0.2, 20.0),
            ("ground_contact.gap_m", self.gap_m, 0.0, 5.0),
            ("ground_contact.cell_m", self.cell_m, 0.05, 5.0),
            ("ground_contact.search_m", self.search_m, 0.1, 20.0),
            ("ground_contact.map_range_m", self.map_range_m, 0.0, 200.0),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err((key, format!("{v} is outside {lo} ..= {hi}")));
            }
        }
        if self.map_range_m / self.cell_m > MAX_MAP_CELLS_ACROSS {
            return Err((
                "ground_contact.map_range_m",
                format!(
                    "{} is more than {MAX_MAP_CELLS_ACROSS} cells of {} m (`cell_m`)",
                    self.map_range_m, self.cell_m
                ),
            ));
        }
        if !(3..=10_000).contains(&self.min_cells) {
            return Err((
                "ground_contact.min_cells",
                format!("{} is outside 3 ..= 10000", self.min_cells),
            ));
        }
        Ok(())
    }
}

/// Most cells from a sensor to the edge of its ground-map reach (bounds a frame's grid).
const MAX_MAP_CELLS_ACROSS: f64 = 400.0;

/// One frame as placement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactFrame {
    /// The frame's gravity-aligned frame; `None`: its boxes are left as they are.
    pub normalized_from_sensor: Option<Isometry3<f64>>,
    /// The frame's pose, to bring moved boxes into the world frame.
    pub world_from_sensor: Isometry3<f64>,
}

/// What placement did to one sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContactSummary {
    /// Boxes considered (every class but `unknown`, in frames with a normalized frame).
    pub boxes: usize,
    /// Boxes whose surroundings gave a ground estimate (their frame's returns or the ground map).
    pub estimated: usize,
    /// Boxes moved: by their track's estimates, or by their class's.
    pub moved: usize,
    /// Of which, boxes of tracks without an estimate moved by their class's median shift.
    pub by_class_bias: usize,
    /// Median vertical shift of the moved boxes (m, up positive).
    pub median_shift_m: Option<f64>,
}

/// Sets every box of `consolidation` on the ground its frame's points show around it (frame
/// positions index `frames` and `points`), and returns what it did. Deterministic.
pub fn set_on_ground(
    consolidation: &mut Consolidation,
    frames: &[ContactFrame],
    points: &dyn SweepPoints,
    config: &GroundContactConfig,
) -> ContactSummary {
    let in_scope = |b: &crate::track::TrackedBox| {
        b.class != ObjectClass::Unknown && frames.get(b.frame).is_some_and(|f| f.normalized_from_sensor.is_some())
    };
    // Each box's own estimate of its vertical shift in its normalized frame, from its frame's ring.
    let mut own: Vec<Option<f64>> = consolidation
        .boxes
        .par_iter()
        .map(|b| {
            if !in_scope(b) {
                return None;
            }
            let t = frames[b.frame].normalized_from_sensor?;
            let bn = b.box_in_sensor.transformed(&t);
            let reach = 0.5 * bn.l.hypot(bn.w) + config.gap_m + config.ring_m + 0.5 * bn.h + config.search_m;
            let sensor = [b.box_in_sensor.x, b.box_in_sensor.y];
            let near = points.points_near(b.frame, sensor, reach)?;
            Some(ground_under(&bn, &t, &near, config)? + 0.5 * bn.h - bn.z)
        })
        .collect();
    // The boxes their frame gave none read the sequence's ground map, built only when needed.
    let missing = consolidation
        .boxes
        .iter()
        .zip(&own)
        .any(|(b, s)| s.is_none() && in_scope(b));
    if missing
        && config.map_range_m > 0.0
        && let Some(map) = GroundMap::build(frames, points, config)
    {
        own.par_iter_mut()
            .zip(&consolidation.boxes)
            .filter(|(s, b)| s.is_none() && in_scope(b))
            .for_each(|(s, b)| *s = map.shift(&b.box_in_world, config));
    }
    let statics: std::collections::HashSet<u32> = consolidation
        .tracks
        .iter()
        .filter(|t| t.motion == Some(MotionState::Static))
        .map(|t| t.track_id)
        .collect();
    // Per track, and per class: a class's median shift over the sequence is the detectors' bias,
    // for tracks never seen on their ground.
    let mut by_track: HashMap<u32, Vec<(usize, f64)>> = HashMap::new();
    let mut by_class: HashMap<ObjectClass, Vec<f64>> = HashMap::new();
    for (b, s) in consolidation.boxes.iter().zip(&own) {
        if let Some(s) = s {
            by_track.entry(b.track_id).or_default().push((b.frame, *s));
            by_class.entry(b.class).or_default().push(*s);
        }
    }
    let mut summary = ContactSummary {
        boxes: consolidation.boxes.iter().filter(|b| in_scope(b)).count(),
        estimated: own.iter().flatten().count(),
        ..ContactSummary::default()
    };
    let class_shift: HashMap<ObjectClass, f64> = by_class
        .into_iter()
        .filter(|(_, v)| config.min_class_estimates > 0 && v.len() >= config.min_class_estimates)
        .filter_map(|(c, v)| Some((c, median(v)?)))
        .collect();
    let mut shifts = Vec::new();
    for b in consolidation.boxes.iter_mut().filter(|b| in_scope(b)) {
        let Some(estimates) = by_track.get(&b.track_id) else {
            if let Some(&shift) = class_shift.get(&b.class) {
                shift_box(b, &frames[b.frame], shift);
                shifts.push(shift);
                summary.moved += 1;
                summary.by_class_bias += 1;
            }
            continue;
        };
        let near: Vec<f64> = if statics.contains(&b.track_id) {
            estimates.iter().map(|e| e.1).collect()
        } else {
            let w = config.window_frames;
            let near: Vec<f64> = estimates
                .iter()
                .filter(|e| e.0.abs_diff(b.frame) <= w)
                .map(|e| e.1)
                .collect();
            if near.is_empty() {
                estimates.iter().map(|e| e.1).collect()
            } else {
                near
            }
        };
        let Some(shift) = median(near) else { continue };
        shift_box(b, &frames[b.frame], shift);
        shifts.push(shift);
        summary.moved += 1;
    }
    summary.median_shift_m = median(shifts);
    summary
}

/// The sequence's ground seen near the sensor, in a gravity-aligned copy of the world frame: per
/// cell, the median over the frames that saw it of each frame's lowest return there.
struct GroundMap {
    /// Map axes from world axes, a rotation (the map's z is the sequence's mean up).
    map_from_world: Isometry3<f64>,
    /// `(column, row)` → ground height (m).
    cells: HashMap<(i64, i64), f64>,
    /// Cell side (m).
    cell_m: f64,
}

impl GroundMap {
    /// The map of `frames` (those with a normalized frame), or `None` when none has one.
    fn build(frames: &[ContactFrame], points: &dyn SweepPoints, config: &GroundContactConfig) -> Option<Self> {
        // The sequence's up in the world frame: each frame's normalized z seen from the world.
        let up = frames
            .iter()
            .filter_map(|f| {
                let t = f.normalized_from_sensor?;
                Some(f.world_from_sensor.rotation * (t.rotation.inverse() * Vector3::z()))
            })
            .fold(Vector3::zeros(), |a, u| a + u);
        let up = nalgebra::Unit::try_new(up, 1e-9)?;
        let turn = nalgebra::UnitQuaternion::rotation_between(&up, &Vector3::z())
            .unwrap_or_else(|| nalgebra::UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::PI));
        let map_from_world = Isometry3::from_parts(nalgebra::Translation3::identity(), turn);
        let cell_m = config.cell_m;
        let reach2 = config.map_range_m * config.map_range_m;
        let per_frame: Vec<Vec<((i64, i64), f64)>> = (0..frames.len())
            .into_par_iter()
            .map(|k| {
                let f = &frames[k];
                let (Some(t), Some(cloud)) = (f.normalized_from_sensor, points.points_in_sensor(k)) else {
                    return Vec::new();
                };
                // The sensor's offset across the level plane is the rotation's alone.
                let level = AffineRows::from_isometry(&t);
                let map_from_sensor = map_from_world * f.world_from_sensor;
                let map = AffineRows::from_isometry(&map_from_sensor);
                // A dense grid of the cells within reach of the sensor (its cell ± `side / 2`).
                let sensor = map_from_sensor.translation.vector;
                let side = 2 * (config.map_range_m / cell_m).ceil() as i64 + 3;
                let corner = (
                    (sensor.x / cell_m).floor() as i64 - side / 2,
                    (sensor.y / cell_m).floor() as i64 - side / 2,
                );
                let mut lowest = vec![f64::INFINITY; (side * side) as usize];
                for ((&x, &y), &z) in cloud.x().iter().zip(cloud.y()).zip(cloud.z()) {
                    let p = [f64::from(x), f64::from(y), f64::from(z)];
                    let (dx, dy) = (level.rotated(0, p), level.rotated(1, p));
                    let d2 = dx * dx + dy * dy;
                    if d2.is_nan() || d2 > reach2 {
                        continue;
                    }
                    let (fx, fy) = (
                        (map.coordinate(0, p) / cell_m).floor() - corner.0 as f64,
                        (map.coordinate(1, p) / cell_m).floor() - corner.1 as f64,
                    );
                    let within = 0.0..side as f64;
                    if within.contains(&fx) && within.contains(&fy) {
                        let z = &mut lowest[(fy as i64 * side + fx as i64) as usize];
                        *z = z.min(map.coordinate(2, p));
                    }
                }
                lowest
                    .iter()
                    .enumerate()
                    .filter(|(_, z)| z.is_finite())
                    .map(|(k, z)| ((corner.0 + k as i64 % side, corner.1 + k as i64 / side), *z))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut all: Vec<((i64, i64), f64)> = per_frame.into_iter().flatten().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut cells = HashMap::new();
        for run in all.chunk_by(|a, b| a.0 == b.0) {
            cells.insert(run[0].0, run[run.len() / 2].1);
        }
        Some(Self {
            map_from_world,
            cells,
            cell_m,
        })
    }

    /// The vertical shift that sets `box_in_world` on the map's ground, like a frame's own ring.
    fn shift(&self, box_in_world: &Box3, config: &GroundContactConfig) -> Option<f64> {
        let pose = self.map_from_world * box_in_world.parent_from_box();
        let c = pose.translation.vector;
        let heading = pose.rotation * Vector3::x();
        let bm = Box3 {
            x: c.x,
            y: c.y,
            z: c.z,
            yaw: heading.y.atan2(heading.x),
            pitch: 0.0,
            roll: 0.0,
            ..*box_in_world
        };
        let reach = 0.5 * bm.l.hypot(bm.w) + config.gap_m + config.ring_m + self.cell_m;
        if !reach.is_finite() || reach > 100.0 {
            return None;
        }
        let span = |v: f64| ((v - reach) / self.cell_m).floor() as i64..=((v + reach) / self.cell_m).floor() as i64;
        let mut ring = Vec::new();
        for cy in span(c.y) {
            for cx in span(c.x) {
                if let Some(&z) = self.cells.get(&(cx, cy)) {
                    ring.push([(cx as f64 + 0.5) * self.cell_m, (cy as f64 + 0.5) * self.cell_m, z]);
                }
            }
        }
        let ground = ring_ground(&bm, ring.into_iter(), config)?;
        Some(ground + 0.5 * bm.h - bm.z)
    }
}

/// Moves `b` up by `shift` (m) along its frame's normalized z, in both of its frames.
fn shift_box(b: &mut crate::track::TrackedBox, frame: &ContactFrame, shift: f64) {
    let Some(t) = frame.normalized_from_sensor else { return };
    let mut bn = b.box_in_sensor.transformed(&t);
    bn.z += shift;
    b.box_in_sensor = bn.transformed(&t.inverse());
    b.box_in_world = b.box_in_sensor.transformed(&frame.world_from_sensor);
}

/// Median of `values` (the upper one of an even count); `None` when empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// Longest box side that is set on the ground (m): a larger box is not an object that stands.
const MAX_SIDE_M: f64 = 30.0;

/// Residual above or below the current plane within which a cell counts as ground (m).
const GROUND_BAND_M: f64 = 0.15;

/// Steepest ground plane accepted (tan of 15°); a steeper fit is taken as level.
const MAX_GRADE: f64 = 0.268;

/// Least spread of the ground cells across the level plane for a tilted plane, as the standard
/// deviation along their narrowest direction (m); narrower cells give a level plane.
const MIN_SPREAD_M: f64 = 0.4;

/// The ground's height under the centre of `bn` (a box in the normalized frame `t` of its sensor
/// frame) from `near` (sensor-frame points): a plane through the lowest return of each cell of
/// the ring around its footprint, fitted to the cells of the lower envelope. `None` with fewer
/// than `min_cells` cells on the ground.
pub fn ground_under(bn: &Box3, t: &Isometry3<f64>, near: &[[f32; 3]], config: &GroundContactConfig) -> Option<f64> {
    let t = AffineRows::from_isometry(t);
    let level = near
        .iter()
        .map(|p| t.apply([f64::from(p[0]), f64::from(p[1]), f64::from(p[2])]));
    ring_ground(bn, level, config)
}

/// [`ground_under`] on points already in a gravity-aligned frame, `bn`'s.
fn ring_ground(bn: &Box3, level: impl Iterator<Item = [f64; 3]>, config: &GroundContactConfig) -> Option<f64> {
    let sane = |v: f64, most: f64| v.is_finite() && v > 0.0 && v <= most;
    if !(sane(bn.l, MAX_SIDE_M) && sane(bn.w, MAX_SIDE_M) && sane(bn.h, MAX_SIDE_M) && bn.z.is_finite()) {
        return None;
    }
    let (sin, cos) = bn.yaw.sin_cos();
    let inner = [0.5 * bn.l + config.gap_m, 0.5 * bn.w + config.gap_m];
    let outer = [inner[0] + config.ring_m, inner[1] + config.ring_m];
    let bottom = bn.z - 0.5 * bn.h;
    let dims = [
        (2.0 * outer[0] / config.cell_m).ceil() as usize,
        (2.0 * outer[1] / config.cell_m).ceil() as usize,
    ];
    // The lowest return of each cell: (u, v, z) in the box's level axes, centred on it.
    let mut lowest: Vec<Option<[f64; 3]>> = vec![None; dims[0] * dims[1]];
    for q in level {
        let (dx, dy) = (q[0] - bn.x, q[1] - bn.y);
        let (u, v) = (cos * dx + sin * dy, -sin * dx + cos * dy);
        let dz = q[2] - bottom;
        if !(u.abs() <= outer[0] && v.abs() <= outer[1] && dz.abs() <= config.search_m)
            || (u.abs() < inner[0] && v.abs() < inner[1])
        {
            continue;
        }
        let cu = (((u + outer[0]) / config.cell_m) as usize).min(dims[0] - 1);
        let cv = (((v + outer[1]) / config.cell_m) as usize).min(dims[1] - 1);
        let cell = &mut lowest[cv * dims[0] + cu];
        if cell.is_none_or(|c| q[2] < c[2]) {
            *cell = Some([u, v, q[2]]);
        }
    }
    let cells: Vec<[f64; 3]> = lowest.into_iter().flatten().collect();
    if cells.len() < config.min_cells {
        return None;
    }
    // Start level at the lowest decile of the cells, then fit to the cells near the plane.
    let mut zs: Vec<f64> = cells.iter().map(|c| c[2]).collect();
    zs.sort_by(f64::total_cmp);
    let mut plane = [zs[zs.len() / 10], 0.0, 0.0];
    let mut on_ground = 0;
    for _ in 0..4 {
        let band: Vec<[f64; 3]> = cells
            .iter()
            .copied()
            .filter(|c| (c[2] - (plane[0] + plane[1] * c[0] + plane[2] * c[1])).abs() <= GROUND_BAND_M)
            .collect();
        if band.len() < config.min_cells {
            return None;
        }
        on_ground = band.len();
        plane = fit_plane(&band);
    }
    (on_ground >= config.min_cells && plane[0].is_finite()).then_some(plane[0])
}

/// Least-squares plane `z = a + b·u + c·v` through `cells`; level (the median height) when they
/// spread too little across the level plane for a tilt or the fit is steeper than 15°.
fn fit_plane(cells: &[[f64; 3]]) -> [f64; 3] {
    let level = || {
        let mut zs: Vec<f64> = cells.iter().map(|c| c[2]).collect();
        zs.sort_by(f64::total_cmp);
        [zs[zs.len() / 2], 0.0, 0.0]
    };
    let n = cells.len() as f64;
    let (mu, mv) = cells.iter().fold((0.0, 0.0), |(a, b), c| (a + c[0] / n, b + c[1] / n));
    let (mut suu, mut svv, mut suv) = (0.0, 0.0, 0.0);
    for c in cells {
        suu += (c[0] - mu) * (c[0] - mu) / n;
        svv += (c[1] - mv) * (c[1] - mv) / n;
        suv += (c[0] - mu) * (c[1] - mv) / n;
    }
    let narrowest = 0.5 * (suu + svv) - (0.25 * (suu - svv) * (suu - svv) + suv * suv).sqrt();
    if narrowest.is_nan() || narrowest < MIN_SPREAD_M * MIN_SPREAD_M {
        return level();
    }
    let mut ata = Matrix3::zeros();
    let mut atb = Vector3::zeros();
    for c in cells {
        let row = Vector3::new(1.0, c[0], c[1]);
        ata += row * row.transpose();
        atb += row * c[2];
    }
    match ata.try_inverse().map(|inv| inv * atb) {
        Some(x) if x.iter().all(|v| v.is_finite()) && x[1].hypot(x[2]) <= MAX_GRADE => [x[0], x[1], x[2]],
        _ => level(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cloud::PointCloud;
    use crate::geometry::pose::isometry_from_euler;
    use crate::track::{BoxOrigin, TrackSummary, TrackedBox};
    use nalgebra::Point3;

    /// Ground returns on `height(x, y)` every 0.2 m within ±`extent` of `(cx, cy)`, in the
    /// normalized frame, skipping the footprint `l × w` (the object hides its ground).
    fn ground(cx: f64, cy: f64, extent: f64, height: impl Fn(f64, f64) -> f64, l: f64, w: f64) -> Vec<[f64; 3]> {
        let mut out = Vec::new();
        let steps = (2.0 * extent / 0.2) as i32;
        for i in 0..=steps {
            for j in 0..=steps {
                let (x, y) = (cx - extent + 0.2 * f64::from(i), cy - extent + 0.2 * f64::from(j));
                if (x - cx).abs() < 0.5 * l && (y - cy).abs() < 0.5 * w {
                    continue;
                }
                out.push([x, y, height(x, y)]);
            }
        }
        out
    }

    /// The returns of a box's four sides, every 0.1 m (normalized frame, yaw 0).
    fn object(b: &Box3) -> Vec<[f64; 3]> {
        let mut out = Vec::new();
        let (nl, nw, nh) = ((b.l / 0.1) as i32, (b.w / 0.1) as i32, (b.h / 0.1) as i32);
        for k in 0..=nh {
            let z = b.z - 0.5 * b.h + 0.1 * f64::from(k);
            for i in 0..=nl {
                let x = b.x - 0.5 * b.l + 0.1 * f64::from(i);
                out.push([x, b.y - 0.5 * b.w, z]);
                out.push([x, b.y + 0.5 * b.w, z]);
            }
            for j in 0..=nw {
                let y = b.y - 0.5 * b.w + 0.1 * f64::from(j);
                out.push([b.x - 0.5 * b.l, y, z]);
                out.push([b.x + 0.5 * b.l, y, z]);
            }
        }
        out
    }

    /// `points` (normalized frame) moved into the sensor frame of `t`.
    fn to_sensor(points: &[[f64; 3]], t: &Isometry3<f64>) -> Vec<[f32; 3]> {
        let inv = t.inverse();
        points
            .iter()
            .map(|p| {
                let q = inv * Point3::new(p[0], p[1], p[2]);
                [q.x as f32, q.y as f32, q.z as f32]
            })
            .collect()
    }

    /// A drone-like normalized frame: the sensor 12 m up, pitched 40° down, turned 30°.
    fn tilted() -> Isometry3<f64> {
        isometry_from_euler(Vector3::new(0.0, 0.0, 12.0), 0.5, 40f64.to_radians(), 0.0)
    }

    #[test]
    fn a_box_sunk_into_level_ground_is_raised_onto_it() {
        let t = tilted();
        let truth = Box3::new(8.0, -3.0, 0.8, 4.5, 1.9, 1.6, 0.4);
        let mut pts = ground(8.0, -3.0, 6.0, |_, _| 0.0, 4.6, 2.0);
        pts.extend(object(&Box3 { yaw: 0.0, ..truth }));
        let sunk = Box3 {
            z: truth.z - 0.6,
            ..truth
        };
        let g = ground_under(&sunk, &t, &to_sensor(&pts, &t), &GroundContactConfig::default()).unwrap();
        assert!(g.abs() < 0.01, "ground at {g}");
    }

    #[test]
    fn sloped_ground_beside_a_trailer_is_found_under_the_centre() {
        // 5° slope along x and y together; beside the car, over a third of the ring, a trailer
        // whose side starts 0.4 m above the ground hides the ground behind it.
        let grade = 5f64.to_radians().tan() / 2f64.sqrt();
        let height = |x: f64, y: f64| grade * (x + y);
        let t = isometry_from_euler(Vector3::new(0.0, 0.0, 1.8), 0.0, 0.0, 0.0);
        let b = Box3::new(10.0, 4.0, height(10.0, 4.0) + 0.75 + 0.4, 4.2, 1.8, 1.5, 0.0);
        let mut pts = ground(10.0, 4.0, 5.0, height, 4.2, 1.8);
        pts.retain(|p| !(p[1] > 5.9 && (7.0..=13.0).contains(&p[0])));
        for i in 0..60 {
            for k in 0..30 {
                let x = 7.0 + 0.1 * f64::from(i);
                pts.push([x, 6.0, height(x, 6.0) + 0.4 + 0.1 * f64::from(k)]);
            }
        }
        let g = ground_under(&b, &t, &to_sensor(&pts, &t), &GroundContactConfig::default()).unwrap();
        assert!(
            (g - height(10.0, 4.0)).abs() < 0.02,
            "ground {g} against {}",
            height(10.0, 4.0)
        );
    }

    #[test]
    fn no_ground_in_the_ring_or_a_box_of_no_size_gives_no_estimate() {
        let t = tilted();
        let b = Box3::new(8.0, -3.0, 0.8, 4.5, 1.9, 1.6, 0.0);
        let pts = to_sensor(&object(&b), &t);
        let config = GroundContactConfig::default();
        assert_eq!(ground_under(&b, &t, &pts, &config), None);
        let ground = to_sensor(&ground(8.0, -3.0, 6.0, |_, _| 0.0, 4.6, 2.0), &t);
        assert!(ground_under(&b, &t, &ground, &config).is_some());
        for bad in [
            Box3 { l: f64::NAN, ..b },
            Box3 { w: 0.0, ..b },
            Box3 { h: -1.0, ..b },
            Box3 { l: 1e9, ..b },
            Box3 { z: f64::INFINITY, ..b },
        ] {
            assert_eq!(ground_under(&bad, &t, &ground, &config), None, "{bad:?}");
        }
    }

    fn tracked(frame: usize, track_id: u32, box_in_sensor: Box3, world: &Isometry3<f64>) -> TrackedBox {
        TrackedBox {
            frame,
            track_id,
            class: ObjectClass::Vehicle,
            score: 0.9,
            box_in_world: box_in_sensor.transformed(world),
            box_in_sensor,
            origin: BoxOrigin::Detected,
            input_index: Some(0),
            votes: 2,
        }
    }

    #[test]
    fn a_track_is_moved_by_its_estimates_and_a_frame_without_ground_follows_them() {
        // Three frames of a car standing on ground at z = 0 (normalized), detected 0.5 m low; the
        // middle frame's points are lost, so its box takes its neighbours' shift.
        let t = tilted();
        let sensor_from_normalized = t.inverse();
        let truth = Box3::new(8.0, -3.0, 0.8, 4.5, 1.9, 1.6, 0.0);
        let mut scene = ground(8.0, -3.0, 6.0, |_, _| 0.0, 4.6, 2.0);
        scene.extend(object(&truth));
        let cloud = |pts: &[[f32; 3]]| {
            let col = |k: usize| pts.iter().map(|p| p[k]).collect::<Vec<f32>>();
            Arc::new(PointCloud::from_columns(col(0), col(1), col(2), vec![0.0; pts.len()]).unwrap())
        };
        let points: Vec<Option<Arc<PointCloud>>> = vec![
            Some(cloud(&to_sensor(&scene, &t))),
            None,
            Some(cloud(&to_sensor(&scene, &t))),
        ];
        let world = isometry_from_euler(Vector3::new(100.0, 50.0, 3.0), 1.0, 0.0, 0.0);
        let low = Box3 {
            z: truth.z - 0.5,
            ..truth
        }
        .transformed(&sensor_from_normalized);
        let mut consolidation = Consolidation {
            boxes: (0..3).map(|f| tracked(f, 1, low, &world)).collect(),
            tracks: vec![TrackSummary {
                track_id: 1,
                class: ObjectClass::Vehicle,
                motion: Some(MotionState::Dynamic),
                first_frame: 0,
                last_frame: 2,
                num_detected: 3,
                score: 0.9,
                size: Some([4.5, 1.9, 1.6]),
            }],
        };
        let frames = vec![
            ContactFrame {
                normalized_from_sensor: Some(t),
                world_from_sensor: world,
            };
            3
        ];
        // Without the ground map, which would give the middle frame the others' ground.
        let config = GroundContactConfig {
            map_range_m: 0.0,
            ..GroundContactConfig::default()
        };
        let summary = set_on_ground(&mut consolidation, &frames, &points, &config);
        assert_eq!((summary.boxes, summary.estimated, summary.moved), (3, 2, 3));
        assert!((summary.median_shift_m.unwrap() - 0.5).abs() < 0.01);
        for b in &consolidation.boxes {
            let placed = b.box_in_sensor.transformed(&t);
            assert!((placed.z - truth.z).abs() < 0.01, "frame {}: z {}", b.frame, placed.z);
            assert!((placed.x - truth.x).abs() < 1e-9 && (placed.yaw - truth.yaw).abs() < 1e-9);
            let again = b.box_in_sensor.transformed(&world);
            assert!((again.z - b.box_in_world.z).abs() < 1e-9);
        }
    }

    #[test]
    fn a_box_far_from_its_sensor_takes_the_ground_another_frame_saw_near_its_own() {
        // Frame 0's sensor stood 10 m from where the car is and saw the ground there (z = −1.8);
        // frame 1's sensor is 60 m away and sees only the car, which it places 0.4 m too low.
        let level = Isometry3::identity();
        let cloud = |pts: &[[f64; 3]]| {
            let col = |k: usize| pts.iter().map(|p| p[k] as f32).collect::<Vec<f32>>();
            Arc::new(PointCloud::from_columns(col(0), col(1), col(2), vec![0.0; pts.len()]).unwrap())
        };
        let car = Box3::new(60.0, 0.0, -1.0, 4.5, 1.9, 1.6, 0.3);
        let points = vec![
            Some(cloud(&ground(10.0, 0.0, 6.0, |_, _| -1.8, 4.6, 2.0))),
            Some(cloud(&object(&Box3 { yaw: 0.0, ..car }))),
        ];
        let worlds = [
            Isometry3::identity(),
            isometry_from_euler(Vector3::new(-50.0, 0.0, 0.0), 0.0, 0.0, 0.0),
        ];
        let frames: Vec<ContactFrame> = worlds
            .iter()
            .map(|w| ContactFrame {
                normalized_from_sensor: Some(level),
                world_from_sensor: *w,
            })
            .collect();
        let low = Box3 { z: car.z - 0.4, ..car };
        let mut consolidation = Consolidation {
            boxes: vec![tracked(1, 7, low, &worlds[1])],
            tracks: Vec::new(),
        };
        let config = GroundContactConfig::default();
        let alone = GroundContactConfig {
            map_range_m: 0.0,
            ..config.clone()
        };
        let mut without_map = consolidation.clone();
        assert_eq!(set_on_ground(&mut without_map, &frames, &points, &alone).moved, 0);
        let summary = set_on_ground(&mut consolidation, &frames, &points, &config);
        assert_eq!((summary.estimated, summary.moved), (1, 1));
        let placed = consolidation.boxes[0];
        assert!(
            (placed.box_in_sensor.z - car.z).abs() < 0.01,
            "{:?}",
            placed.box_in_sensor
        );
        assert!((placed.box_in_world.z - car.z).abs() < 0.01 && (placed.box_in_world.x - 10.0).abs() < 1e-9);
    }

    #[test]
    fn an_unknown_box_or_a_frame_without_normalization_is_left_alone() {
        let t = tilted();
        let b = Box3::new(8.0, -3.0, 0.3, 4.5, 1.9, 1.6, 0.0).transformed(&t.inverse());
        let scene = ground(8.0, -3.0, 6.0, |_, _| 0.0, 4.6, 2.0);
        let pts = to_sensor(&scene, &t);
        let col = |k: usize| pts.iter().map(|p| p[k]).collect::<Vec<f32>>();
        let cloud = Arc::new(PointCloud::from_columns(col(0), col(1), col(2), vec![0.0; pts.len()]).unwrap());
        let points = vec![Some(cloud.clone()), Some(cloud)];
        let world = Isometry3::identity();
        let mut unknown = tracked(0, 1, b, &world);
        unknown.class = ObjectClass::Unknown;
        let mut consolidation = Consolidation {
            boxes: vec![unknown, tracked(1, 2, b, &world)],
            tracks: Vec::new(),
        };
        let frames = [
            ContactFrame {
                normalized_from_sensor: Some(t),
                world_from_sensor: world,
            },
            ContactFrame {
                normalized_from_sensor: None,
                world_from_sensor: world,
            },
        ];
        let before = consolidation.clone();
        let summary = set_on_ground(&mut consolidation, &frames, &points, &GroundContactConfig::default());
        assert_eq!(summary, ContactSummary::default());
        assert_eq!(consolidation, before);
    }

    #[test]
    fn config_errors_name_the_key() {
        let bad = GroundContactConfig {
            ring_m: -1.0,
            ..GroundContactConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            ("ground_contact.ring_m", "-1 is outside 0.2 ..= 20".to_string())
        );
        let too_fine = GroundContactConfig {
            cell_m: 0.1,
            map_range_m: 100.0,
            ..GroundContactConfig::default()
        };
        assert_eq!(too_fine.validate().unwrap_err().0, "ground_contact.map_range_m");
        assert!(GroundContactConfig::default().validate().is_ok());
    }
}
