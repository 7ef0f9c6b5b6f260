//! Scene layout: a grid of roads with lanes, curb parking and sidewalks; blocks of buildings,
//! parking lots or parks; static clutter (walls, lamp posts, trees, parked cars); and actors
//! (vehicles, pedestrians, cyclists) on routes with turns and stops. Everything is drawn from
//! one seeded generator in a fixed order, so a seed and a config give the same scene.

use std::collections::BTreeMap;

use nalgebra::{Isometry3, Vector2, Vector3};
use rand::RngExt;

use super::config::SimConfig;
use super::object::{
    FineLabel, ObjectShape, Surface, building_shape, bush_shape, cyclist_shape, facade_shape, fence_shape, hedge_shape,
    pedestrian_shape, pole_shape, sign_pole_shape, trailer_shape, tree_shape, vehicle_shape, wall_shape,
};
use super::path::{Path, SpeedProfile};
use super::platform::{pose, terrain_tilt};
use super::terrain::Terrain;

/// Lane centre of the platform car, from the road centreline to the right (m).
pub(crate) const EGO_LANE_OFFSET_M: f64 = 1.75;
/// Lane centre of other vehicles (m).
const ACTOR_LANE_OFFSET_M: f64 = 5.25;
/// Where cyclists ride, at the edge of the outer lane (m).
const CYCLE_OFFSET_M: f64 = 7.0;
/// Edge of the driving lanes (m).
const LANES_EDGE_M: f64 = 7.0;
/// Centre of the curb parking strip (m).
const CURB_PARKING_OFFSET_M: f64 = 8.5;
/// Edge of the road surface (lanes + parking strip) (m).
const ROAD_EDGE_M: f64 = 9.5;
/// Trees and lamp posts stand here, on the curb side of the sidewalk (m).
const CURB_FURNITURE_OFFSET_M: f64 = 9.7;
/// Walking lines of pedestrians on a sidewalk (m).
const SIDEWALK_OFFSETS_M: [f64; 2] = [10.5, 12.1];
/// Walking line of the quadruped (m).
pub(crate) const QUADRUPED_OFFSET_M: f64 = 11.3;
/// Outer edge of the sidewalk: blocks start here (m).
const SIDEWALK_EDGE_M: f64 = 12.5;

/// What fills a city block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Buildings,
    ParkingLot,
    Park,
}

/// How a scene object moves.
#[derive(Debug, Clone)]
pub(crate) enum Motion {
    /// Never moves.
    Static(Isometry3<f64>),
    /// Follows a path; `tilt` makes it follow the terrain's slope (vehicles), else it stays upright.
    Route {
        path: Path,
        profile: SpeedProfile,
        tilt: bool,
    },
}

/// One rigid thing in the scene.
#[derive(Debug, Clone)]
pub(crate) struct SceneObject {
    pub shape: ObjectShape,
    pub motion: Motion,
    /// Ground-truth label; `None` for clutter (buildings, walls, poles, trees).
    pub label: Option<FineLabel>,
    /// Track id, from 1; 0 for clutter.
    pub track_id: u32,
}

impl SceneObject {
    /// World pose of the object frame at time `t` (s).
    pub fn world_from_object(&self, terrain: &Terrain, t: f64) -> Isometry3<f64> {
        match &self.motion {
            Motion::Static(p) => *p,
            Motion::Route { path, profile, tilt } => {
                let p = path.pose_at(profile.distance(t));
                let z = terrain.height(p.xy.x, p.xy.y);
                let (pitch, roll) = if *tilt {
                    terrain_tilt(terrain, &p.xy, p.heading)
                } else {
                    (0.0, 0.0)
                };
                pose(Vector3::new(p.xy.x, p.xy.y, z), p.heading, pitch, roll)
            }
        }
    }

    /// Largest speed the object ever reaches (m/s).
    pub fn max_speed(&self) -> f64 {
        match &self.motion {
            Motion::Static(_) => 0.0,
            Motion::Route { profile, .. } => profile.max_speed(),
        }
    }
}

/// The road grid and what each block holds.
#[derive(Debug, Clone)]
pub(crate) struct RoadGrid {
    pub pitch: f64,
    blocks: BTreeMap<(i64, i64), BlockKind>,
}

impl RoadGrid {
    /// Signed distance from `v` to the nearest grid line along one axis, and that line's index.
    fn nearest_line(&self, v: f64) -> (f64, i64) {
        let i = (v / self.pitch).round();
        (v - i * self.pitch, i as i64)
    }

    /// The surface of the ground at `(x, y)`: lanes with markings, sidewalks, lots, grass.
    pub fn surface_at(&self, x: f64, y: f64) -> Surface {
        let (dx, _) = self.nearest_line(x);
        let (dy, _) = self.nearest_line(y);
        let (ax, ay) = (dx.abs(), dy.abs());
        // Distance across the nearer road and position along it.
        let (across, along, in_junction) = if ax < ay {
            (ax, y, ay < ROAD_EDGE_M)
        } else {
            (ay, x, ax < ROAD_EDGE_M)
        };
        if across < ROAD_EDGE_M {
            if in_junction {
                return Surface::ASPHALT;
            }
            let dashed = along.rem_euclid(9.0) < 3.0;
            let paint =
                across < 0.12 || ((across - 3.5).abs() < 0.075 && dashed) || (across - LANES_EDGE_M).abs() < 0.075;
            return if paint { Surface::PAINT } else { Surface::ASPHALT };
        }
        if across < SIDEWALK_EDGE_M {
            return Surface::CONCRETE;
        }
        let key = ((x / self.pitch).floor() as i64, (y / self.pitch).floor() as i64);
        match self.blocks.get(&key) {
            Some(BlockKind::ParkingLot) => {
                let stall_line = (y.rem_euclid(self.pitch) - 20.0).rem_euclid(2.6) < 0.1;
                if stall_line { Surface::PAINT } else { Surface::ASPHALT }
            }
            Some(BlockKind::Park) | None => Surface::GRASS,
            Some(BlockKind::Buildings) => Surface::CONCRETE,
        }
    }
}

/// A generated scene.
#[derive(Debug, Clone)]
pub(crate) struct Scene {
    pub terrain: Terrain,
    pub roads: RoadGrid,
    pub objects: Vec<SceneObject>,
}

impl Scene {
    /// Drops the static objects that could reach within `radius_m` of `xy` (a take-off pad).
    pub(crate) fn clear_around(&mut self, xy: Vector2<f64>, radius_m: f64) {
        self.objects.retain(|o| match &o.motion {
            Motion::Static(p) => {
                let b = &o.shape.local_box;
                let centre = p * nalgebra::Point3::new(b.x, b.y, b.z);
                (centre.coords.xy() - xy).norm() > radius_m + o.shape.bounding_radius
            }
            Motion::Route { .. } => true,
        });
    }
}

/// Turn choice at an intersection: −1 right, 0 straight, +1 left.
fn choose_turn(rng: &mut impl rand::Rng) -> i32 {
    let u: f64 = rng.random();
    if u < 0.55 {
        0
    } else if u < 0.78 {
        1
    } else {
        -1
    }
}

fn rotate_left(d: Vector2<f64>) -> Vector2<f64> {
    Vector2::new(-d.y, d.x)
}

/// A route on the grid: nodes visited and the path offset `offset` to the right of travel.
pub(crate) struct GridRoute {
    pub path: Path,
    /// Arc length near each intersection passed, in order (m).
    pub junction_s: Vec<f64>,
}

/// A random walk of `legs` grid legs from `start_node` heading `dir` (a unit grid direction),
/// drawn as a lane `offset` metres right of the road centreline (negative = left).
pub(crate) fn grid_route(
    pitch: f64,
    start_node: Vector2<f64>,
    dir: Vector2<f64>,
    legs: usize,
    offset: f64,
    turn_radius: f64,
    rng: &mut impl rand::Rng,
) -> Option<GridRoute> {
    let mut nodes = vec![start_node];
    let mut dirs = vec![dir];
    let mut d = dir;
    let mut n = start_node;
    for _ in 0..legs {
        n += d * pitch;
        nodes.push(n);
        d = match choose_turn(rng) {
            1 => rotate_left(d),
            -1 => -rotate_left(d),
            _ => d,
        };
        dirs.push(d);
    }
    // Offset corners: a node between legs d1 and d2 moves by offset·(right(d1) + right(d2))
    // on a turn, offset·right(d1) when going straight.
    let right = |d: Vector2<f64>| -rotate_left(d) * offset;
    let mut corners = vec![nodes[0] + right(dirs[0])];
    for i in 1..nodes.len() - 1 {
        let (d1, d2) = (dirs[i - 1], dirs[i]);
        if (d1 - d2).norm() < 1e-9 {
            continue;
        }
        corners.push(nodes[i] + right(d1) + right(d2));
    }
    let last = nodes.len() - 1;
    corners.push(nodes[last] + right(dirs[last - 1]));
    let path = Path::from_corners(&corners, turn_radius)?;
    let junction_s = nodes[1..last].iter().map(|n| path.arc_length_near(n)).collect();
    Some(GridRoute { path, junction_s })
}

/// Axis-aligned region of the world plane the scene must fill.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub min: Vector2<f64>,
    pub max: Vector2<f64>,
}

impl Region {
    fn contains(&self, p: &Vector2<f64>) -> bool {
        p.x >= self.min.x && p.x <= self.max.x && p.y >= self.min.y && p.y <= self.max.y
    }
}

struct Builder<'a, R: rand::Rng> {
    config: &'a SimConfig,
    terrain: &'a Terrain,
    rng: &'a mut R,
    objects: Vec<SceneObject>,
    next_track: u32,
}

impl<R: rand::Rng> Builder<'_, R> {
    fn add_static(&mut self, shape: ObjectShape, xy: Vector2<f64>, yaw: f64, sink: f64, label: Option<FineLabel>) {
        let z = self.terrain.height(xy.x, xy.y) - sink;
        let (pitch, roll) = if label.is_some() {
            terrain_tilt(self.terrain, &xy, yaw)
        } else {
            (0.0, 0.0)
        };
        let track_id = self.track_for(label);
        self.objects.push(SceneObject {
            shape,
            motion: Motion::Static(pose(Vector3::new(xy.x, xy.y, z), yaw, pitch, roll)),
            label,
            track_id,
        });
    }

    /// A uniform point of the square block `[x0, x0 + side] × [y0, y0 + side]`, `margin` in from
    /// its edges (x drawn first).
    fn point_in_block(&mut self, x0: f64, y0: f64, side: f64, margin: f64) -> Vector2<f64> {
        let x = x0 + self.rng.random_range(margin..side - margin);
        Vector2::new(x, y0 + self.rng.random_range(margin..side - margin))
    }

    fn track_for(&mut self, label: Option<FineLabel>) -> u32 {
        if label.is_some() {
            self.next_track += 1;
            self.next_track
        } else {
            0
        }
    }

    fn parked_car(&mut self, xy: Vector2<f64>, yaw: f64) {
        let u: f64 = self.rng.random();
        let label = if u < 0.82 { FineLabel::Car } else { FineLabel::Van };
        let shape = vehicle_shape(label, self.rng);
        self.add_static(shape, xy, yaw, 0.0, Some(label));
    }

    fn vehicle_label(&mut self) -> FineLabel {
        let [van, bus, truck] = self.config.scene.van_bus_truck_share;
        let u: f64 = self.rng.random();
        if u < van {
            FineLabel::Van
        } else if u < van + bus {
            FineLabel::Bus
        } else if u < van + bus + truck {
            FineLabel::Truck
        } else {
            FineLabel::Car
        }
    }
}

/// Lays out the scene over `region` (which must hold the platform's whole route) for a
/// sequence of `duration_s` seconds; the block holding `parking_at` (if any) is a parking lot.
pub(crate) fn build_scene(
    config: &SimConfig,
    terrain: Terrain,
    region: Region,
    duration_s: f64,
    parking_at: Option<Vector2<f64>>,
    rng: &mut impl rand::Rng,
) -> Scene {
    let pitch = config.scene.block_pitch_m;
    let bx0 = (region.min.x / pitch).floor() as i64;
    let bx1 = (region.max.x / pitch).floor() as i64;
    let by0 = (region.min.y / pitch).floor() as i64;
    let by1 = (region.max.y / pitch).floor() as i64;
    let mut blocks = BTreeMap::new();
    for i in bx0..=bx1 {
        for j in by0..=by1 {
            let u: f64 = rng.random();
            let kind = if u < config.scene.parking_lot_fraction {
                BlockKind::ParkingLot
            } else if u < config.scene.parking_lot_fraction + config.scene.park_fraction {
                BlockKind::Park
            } else {
                BlockKind::Buildings
            };
            blocks.insert((i, j), kind);
        }
    }
    if let Some(p) = parking_at {
        blocks.insert(
            ((p.x / pitch).floor() as i64, (p.y / pitch).floor() as i64),
            BlockKind::ParkingLot,
        );
    }
    let roads = RoadGrid { pitch, blocks };
    let mut b = Builder {
        config,
        terrain: &terrain,
        rng,
        objects: Vec::new(),
        next_track: 0,
    };
    let occupancy = config.scene.parking_occupancy;

    // Block contents.
    for (&(i, j), &kind) in &roads.blocks {
        let x0 = i as f64 * pitch + SIDEWALK_EDGE_M;
        let y0 = j as f64 * pitch + SIDEWALK_EDGE_M;
        let side = pitch - 2.0 * SIDEWALK_EDGE_M;
        match kind {
            BlockKind::Buildings => {
                for (qx, qy) in [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5)] {
                    if !b.rng.random_bool(0.8) {
                        continue;
                    }
                    let cell = side * 0.5;
                    let l = b.rng.random_range(0.4..0.8) * cell;
                    let w = b.rng.random_range(0.4..0.8) * cell;
                    let h = b.rng.random_range(6.0..24.0);
                    let cx = x0 + qx * side + cell / 2.0 + b.rng.random_range(-1.0..1.0) * (cell - l) * 0.3;
                    let cy = y0 + qy * side + cell / 2.0 + b.rng.random_range(-1.0..1.0) * (cell - w) * 0.3;
                    let shape = building_shape(l, w, h + 1.0, b.rng);
                    b.add_static(shape, Vector2::new(cx, cy), 0.0, 1.0, None);
                }
                // A boundary wall on one side of the block.
                if b.rng.random_bool(0.5) {
                    let len = side * b.rng.random_range(0.3..0.7);
                    let shape = wall_shape(len, b.rng.random_range(1.2..2.6) + 0.3);
                    let at = Vector2::new(x0 + side / 2.0, y0 + 1.0);
                    b.add_static(shape, at, 0.0, 0.3, None);
                }
            }
            BlockKind::ParkingLot => {
                // Rows of stalls along x; cars nose-in along ±y, aisles between row pairs.
                let stall_w = 2.6;
                let stall_d = 5.2;
                let mut row_y = y0 + 3.0 + stall_d / 2.0;
                let mut facing = 1.0;
                while row_y + stall_d / 2.0 < y0 + side - 3.0 {
                    let mut x = x0 + 4.0 + stall_w / 2.0;
                    while x + stall_w / 2.0 < x0 + side - 4.0 {
                        if b.rng.random_bool(occupancy) {
                            let yaw = facing * std::f64::consts::FRAC_PI_2 + b.rng.random_range(-0.06..0.06);
                            let jitter = Vector2::new(b.rng.random_range(-0.2..0.2), b.rng.random_range(-0.3..0.3));
                            b.parked_car(Vector2::new(x, row_y) + jitter, yaw);
                        }
                        x += stall_w;
                    }
                    let pole_at = Vector2::new(x0 + 1.5, row_y);
                    let h = b.rng.random_range(6.0..9.0);
                    b.add_static(pole_shape(h), pole_at, 0.0, 0.0, None);
                    // Back-to-back rows share a line; then a 7 m aisle.
                    row_y += if facing > 0.0 { stall_d } else { stall_d + 7.0 };
                    facing = -facing;
                }
                for _ in 0..b.rng.random_range(1..4) {
                    let at = Vector2::new(x0 + b.rng.random_range(0.0..side), y0 + side - 1.5);
                    let shape = tree_shape(b.rng);
                    b.add_static(shape, at, 0.0, 0.0, None);
                }
            }
            BlockKind::Park => {
                for _ in 0..b.rng.random_range(8..22) {
                    let at = b.point_in_block(x0, y0, side, 3.0);
                    let shape = tree_shape(b.rng);
                    b.add_static(shape, at, 0.0, 0.0, None);
                }
                for _ in 0..b.rng.random_range(0..3) {
                    let at = b.point_in_block(x0, y0, side, 3.0);
                    let yaw = b.rng.random_range(0.0..std::f64::consts::PI);
                    let shape = wall_shape(b.rng.random_range(3.0..10.0), b.rng.random_range(0.5..1.2));
                    b.add_static(shape, at, yaw, 0.0, None);
                }
            }
        }
    }

    // Along every road segment: curb parking, trees and lamp posts on both sides.
    let segment_margin = SIDEWALK_EDGE_M + 3.0;
    for i in bx0..=bx1 + 1 {
        for j in by0..=by1 + 1 {
            let node = Vector2::new(i as f64 * pitch, j as f64 * pitch);
            for dir in [Vector2::new(1.0, 0.0), Vector2::new(0.0, 1.0)] {
                let normal = rotate_left(dir);
                for side in [-1.0, 1.0] {
                    let mut a = segment_margin;
                    while a < pitch - segment_margin {
                        let at = node + dir * a + normal * side * CURB_PARKING_OFFSET_M;
                        if region.contains(&at) && b.rng.random_bool(occupancy * 0.5) {
                            // Cars park facing the traffic on their side.
                            let yaw = if side < 0.0 {
                                dir.y.atan2(dir.x)
                            } else {
                                (-dir.y).atan2(-dir.x)
                            };
                            b.parked_car(at, yaw);
                        }
                        a += 6.2;
                    }
                    let mut a = segment_margin + b.rng.random_range(0.0..8.0);
                    while a < pitch - segment_margin {
                        let at = node + dir * a + normal * side * CURB_FURNITURE_OFFSET_M;
                        if region.contains(&at) {
                            if b.rng.random_bool(0.6) {
                                let shape = tree_shape(b.rng);
                                b.add_static(shape, at, 0.0, 0.0, None);
                            } else {
                                let h = b.rng.random_range(5.0..8.0);
                                let yaw = (-normal.y * side).atan2(-normal.x * side);
                                b.add_static(pole_shape(h), at, yaw, 0.0, None);
                            }
                        }
                        a += b.rng.random_range(12.0..22.0);
                    }
                }
            }
        }
    }

    // The clutter detectors mistake for objects, when asked for (after the rest, so that
    // without it the random stream, and the scene, are as before).
    if config.scene.hard_clutter {
        for (&(i, j), &kind) in &roads.blocks {
            let x0 = i as f64 * pitch + SIDEWALK_EDGE_M;
            let y0 = j as f64 * pitch + SIDEWALK_EDGE_M;
            let side = pitch - 2.0 * SIDEWALK_EDGE_M;
            match kind {
                BlockKind::Buildings => {
                    if b.rng.random_bool(0.7) {
                        let fraction = b.rng.random_range(0.3..0.8);
                        let cx = x0 + side * (0.5 + b.rng.random_range(-0.5..0.5) * (1.0 - fraction));
                        let shape = facade_shape(side * fraction, b.rng);
                        b.add_static(shape, Vector2::new(cx, y0 + 0.3), 0.0, 0.0, None);
                    }
                    if b.rng.random_bool(0.5) {
                        let len = b.rng.random_range(5.0..20.0);
                        let at = Vector2::new(x0 + 0.8, y0 + b.rng.random_range(len / 2.0..side - len / 2.0));
                        let shape = hedge_shape(len, b.rng);
                        b.add_static(shape, at, std::f64::consts::FRAC_PI_2, 0.0, None);
                    }
                }
                BlockKind::ParkingLot => {
                    for _ in 0..b.rng.random_range(1..4) {
                        let at = Vector2::new(x0 + b.rng.random_range(4.0..side - 4.0), y0 + side - 4.5);
                        let yaw = b.rng.random_range(-0.3..0.3)
                            + if b.rng.random_bool(0.5) {
                                0.0
                            } else {
                                std::f64::consts::PI
                            };
                        let shape = trailer_shape(b.rng);
                        b.add_static(shape, at, yaw, 0.0, None);
                    }
                    if b.rng.random_bool(0.6) {
                        let fraction = b.rng.random_range(0.4..0.9);
                        let cx = x0 + side * (0.5 + b.rng.random_range(-0.5..0.5) * (1.0 - fraction));
                        let shape = fence_shape(side * fraction, b.rng);
                        b.add_static(shape, Vector2::new(cx, y0 + 0.5), 0.0, 0.0, None);
                    }
                    for _ in 0..b.rng.random_range(0..4) {
                        let corner = Vector2::new(
                            x0 + if b.rng.random_bool(0.5) { 1.5 } else { side - 1.5 },
                            y0 + b.rng.random_range(1.5..side - 1.5),
                        );
                        let shape = bush_shape(b.rng);
                        let yaw = b.rng.random_range(0.0..std::f64::consts::PI);
                        b.add_static(shape, corner, yaw, 0.0, None);
                    }
                }
                BlockKind::Park => {
                    for _ in 0..b.rng.random_range(4..13) {
                        let at = b.point_in_block(x0, y0, side, 3.0);
                        let shape = bush_shape(b.rng);
                        let yaw = b.rng.random_range(0.0..std::f64::consts::PI);
                        b.add_static(shape, at, yaw, 0.0, None);
                    }
                    let fraction = b.rng.random_range(0.3..0.9);
                    let cx = x0 + side * (0.5 + b.rng.random_range(-0.5..0.5) * (1.0 - fraction));
                    let shape = if b.rng.random_bool(0.5) {
                        hedge_shape(side * fraction, b.rng)
                    } else {
                        fence_shape(side * fraction, b.rng)
                    };
                    b.add_static(shape, Vector2::new(cx, y0 + 0.8), 0.0, 0.0, None);
                }
            }
        }
        // Along the roads: sign posts on the curb, now and then a trailer parked at it.
        for i in bx0..=bx1 + 1 {
            for j in by0..=by1 + 1 {
                let node = Vector2::new(i as f64 * pitch, j as f64 * pitch);
                for dir in [Vector2::new(1.0, 0.0), Vector2::new(0.0, 1.0)] {
                    let normal = rotate_left(dir);
                    for side in [-1.0, 1.0] {
                        let mut a = segment_margin + b.rng.random_range(0.0..20.0);
                        while a < pitch - segment_margin {
                            let at = node + dir * a + normal * side * (CURB_FURNITURE_OFFSET_M + 0.3);
                            if region.contains(&at) {
                                let yaw = (-normal.y * side).atan2(-normal.x * side);
                                let shape = sign_pole_shape(b.rng);
                                b.add_static(shape, at, yaw, 0.0, None);
                            }
                            a += b.rng.random_range(25.0..60.0);
                        }
                        if b.rng.random_bool(0.15) {
                            let at = node
                                + dir * b.rng.random_range(segment_margin..pitch - segment_margin)
                                + normal * side * CURB_PARKING_OFFSET_M;
                            if region.contains(&at) {
                                let shape = trailer_shape(b.rng);
                                b.add_static(shape, at, dir.y.atan2(dir.x), 0.0, None);
                            }
                        }
                    }
                }
            }
        }
    }

    // Actors on routes through the region.
    let width = region.max.x - region.min.x;
    let height = region.max.y - region.min.y;
    let road_km = ((bx1 - bx0 + 2) as f64 * height + (by1 - by0 + 2) as f64 * width) / 1000.0;
    let count = |per_km: f64, km: f64, rng: &mut dyn FnMut() -> f64| -> usize {
        let mean = per_km * km;
        // Round randomly so small densities still give their expected count.
        (mean.floor() + if rng() < mean.fract() { 1.0 } else { 0.0 }) as usize
    };
    let grid_dirs = [
        Vector2::new(1.0, 0.0),
        Vector2::new(0.0, 1.0),
        Vector2::new(-1.0, 0.0),
        Vector2::new(0.0, -1.0),
    ];
    let random_node = |rng: &mut dyn FnMut(i64, i64) -> i64| {
        Vector2::new(rng(bx0, bx1 + 1) as f64 * pitch, rng(by0, by1 + 1) as f64 * pitch)
    };
    let n_vehicles = count(config.scene.vehicles_per_km, road_km, &mut || b.rng.random());
    let n_pedestrians = count(config.scene.pedestrians_per_km, 2.0 * road_km, &mut || b.rng.random());
    let n_cyclists = count(config.scene.cyclists_per_km, road_km, &mut || b.rng.random());
    let kinds = std::iter::repeat_n(0, n_vehicles)
        .chain(std::iter::repeat_n(1, n_pedestrians))
        .chain(std::iter::repeat_n(2, n_cyclists));
    for kind in kinds {
        let node = random_node(&mut |lo, hi| b.rng.random_range(lo..=hi));
        let dir = grid_dirs[b.rng.random_range(0..4)];
        let (label, speed, offset, stop_p, wait) = match kind {
            0 => (
                b.vehicle_label(),
                b.rng.random_range(6.0..11.0),
                ACTOR_LANE_OFFSET_M,
                config.scene.stop_probability,
                (2.0, 7.0),
            ),
            1 => {
                let o = SIDEWALK_OFFSETS_M[b.rng.random_range(0..2)] * if b.rng.random_bool(0.5) { 1.0 } else { -1.0 };
                (FineLabel::Pedestrian, b.rng.random_range(1.0..1.6), o, 0.3, (2.0, 10.0))
            }
            _ => (
                FineLabel::Cyclist,
                b.rng.random_range(3.5..6.0),
                CYCLE_OFFSET_M,
                0.2,
                (2.0, 5.0),
            ),
        };
        let legs = ((speed * duration_s + pitch) / pitch).ceil() as usize + 1;
        let radius = if kind == 1 { 1.0 } else { 6.0 };
        let Some(route) = grid_route(pitch, node, dir, legs, offset, radius, b.rng) else {
            continue;
        };
        let s_start = b.rng.random_range(0.0..pitch);
        let stop_gap = if kind == 1 { SIDEWALK_EDGE_M } else { ROAD_EDGE_M + 5.0 };
        let stops: Vec<(f64, f64)> = route
            .junction_s
            .iter()
            .filter_map(|&s| {
                let stop = b.rng.random_bool(stop_p);
                let w = b.rng.random_range(wait.0..wait.1);
                (stop && s - stop_gap > s_start + 1.0).then_some((s - stop_gap, w))
            })
            .collect();
        let shape = match label {
            FineLabel::Pedestrian => pedestrian_shape(b.rng),
            FineLabel::Cyclist => cyclist_shape(b.rng),
            _ => vehicle_shape(label, b.rng),
        };
        let profile = SpeedProfile::with_stops(s_start, speed, if kind == 1 { 0.8 } else { 2.0 }, &stops);
        let track_id = b.track_for(Some(label));
        b.objects.push(SceneObject {
            shape,
            motion: Motion::Route {
                path: route.path,
                profile,
                tilt: label.class() == crate::frame::ObjectClass::Vehicle,
            },
            label: Some(label),
            track_id,
        });
    }

    // People standing about on sidewalks and in parks and lots.
    let standing = count(config.scene.pedestrians_per_km * 0.4, 2.0 * road_km, &mut || {
        b.rng.random()
    });
    for _ in 0..standing {
        let node = random_node(&mut |lo, hi| b.rng.random_range(lo..=hi));
        let dir = grid_dirs[b.rng.random_range(0..4)];
        let along = b.rng.random_range(SIDEWALK_EDGE_M + 2.0..pitch - SIDEWALK_EDGE_M - 2.0);
        let across = SIDEWALK_OFFSETS_M[b.rng.random_range(0..2)] + b.rng.random_range(-0.3..0.3);
        let at = node + dir * along - rotate_left(dir) * across;
        let yaw = b.rng.random_range(-std::f64::consts::PI..std::f64::consts::PI);
        let shape = pedestrian_shape(b.rng);
        b.add_static(shape, at, yaw, 0.0, Some(FineLabel::Pedestrian));
    }
    let objects = b.objects;
    Scene {
        terrain,
        roads,
        objects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use rand::SeedableRng;

    #[test]
    fn straight_route_keeps_its_lane_offset() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        // Whatever turns are drawn, the first leg runs along +x offset to the right (−y).
        let route = grid_route(100.0, Vector2::zeros(), Vector2::new(1.0, 0.0), 3, 5.0, 6.0, &mut rng).unwrap();
        let p = route.path.pose_at(40.0);
        assert_abs_diff_eq!(p.xy.y, -5.0, epsilon = 1e-9);
        assert_abs_diff_eq!(p.heading, 0.0, epsilon = 1e-9);
        assert_eq!(route.junction_s.len(), 2);
    }

    /// The hard clutter comes on top of the default scene and leaves it untouched: the same
    /// objects first, in the same places, then only unlabelled ones.
    #[test]
    fn hard_clutter_adds_unlabelled_objects_and_keeps_the_default_scene() {
        let region = Region {
            min: Vector2::new(-150.0, -150.0),
            max: Vector2::new(150.0, 150.0),
        };
        let build = |hard_clutter: bool| {
            let mut config = SimConfig::default();
            config.scene.hard_clutter = hard_clutter;
            config.scene.vehicles_per_km = 0.0;
            config.scene.pedestrians_per_km = 0.0;
            config.scene.cyclists_per_km = 0.0;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            build_scene(&config, Terrain::Flat, region, 10.0, None, &mut rng)
        };
        let (plain, cluttered) = (build(false), build(true));
        assert!(
            cluttered.objects.len() > plain.objects.len() + 20,
            "{} vs {}",
            cluttered.objects.len(),
            plain.objects.len()
        );
        for (a, b) in plain.objects.iter().zip(&cluttered.objects) {
            assert_eq!((a.label, a.track_id), (b.label, b.track_id));
            assert_eq!(a.shape, b.shape);
        }
        for extra in &cluttered.objects[plain.objects.len()..] {
            assert_eq!((extra.label, extra.track_id), (None, 0));
            let b = extra.shape.local_box;
            assert!(b.l > 0.0 && b.w > 0.0 && b.h > 0.0 && b.l < 110.0, "{b:?}");
        }
    }

    #[test]
    fn road_surface_has_asphalt_paint_and_sidewalk() {
        let grid = RoadGrid {
            pitch: 100.0,
            blocks: BTreeMap::new(),
        };
        assert_eq!(grid.surface_at(50.0, 2.0), Surface::ASPHALT);
        assert_eq!(grid.surface_at(50.0, 0.05), Surface::PAINT);
        assert_eq!(grid.surface_at(50.0, -11.0), Surface::CONCRETE);
        assert_eq!(grid.surface_at(50.0, 40.0), Surface::GRASS);
    }
}
