//! Points-in-box counts on a sequence's sweeps for the refinement's evidence tests (filled
//! frames, extension, static propagation). A provider with an index of its own (the pipeline's
//! scratch file, stored sorted by cell) counts each query itself. For the others, each frame's
//! points are binned once, on first use, into a bird's-eye-view grid (`geometry::BevCells`) and
//! stored sorted by cell, so a query tests only the points of the cells its box can touch instead
//! of the whole sweep; the gridded frames live in one cache shared by the classes tracked in
//! parallel, bounded in bytes. Either way the count equals `geometry::count_points_in_box`
//! exactly for boxes within ±1 km of the sensor.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::input::{IndexedCount, SweepPoints, TrackFrame};
use crate::cloud::PointCloud;
use crate::geometry::{BevCells, Box3, count_points_in_box_xyz};

/// One frame's points (x, y, z only) sorted by BEV grid cell.
#[derive(Debug)]
struct FrameGrid {
    cells: BevCells,
    /// Point coordinates, grouped by cell.
    x: Vec<f32>,
    y: Vec<f32>,
    z: Vec<f32>,
}

impl FrameGrid {
    fn new(cloud: &PointCloud) -> Self {
        let (cells, order) = BevCells::bin(cloud.x(), cloud.y());
        let sorted = |v: &[f32]| order.iter().map(|&k| v[k as usize]).collect::<Vec<f32>>();
        Self {
            x: sorted(cloud.x()),
            y: sorted(cloud.y()),
            z: sorted(cloud.z()),
            cells,
        }
    }

    /// Heap bytes held.
    fn bytes(&self) -> usize {
        4 * (self.cells.starts().len() + self.x.len() + self.y.len() + self.z.len())
    }

    /// Points inside `b` (sensor frame, boundary included).
    fn count(&self, b: &Box3) -> usize {
        self.cells
            .point_runs(b)
            .map(|r| count_points_in_box_xyz(&self.x[r.clone()], &self.y[r.clone()], &self.z[r], b))
            .sum()
    }
}

/// Bytes of gridded frames kept between queries, for all classes together. The refinement asks
/// about the frames around each track's ends, track after track, so the queries jump about the
/// sequence and a frame's grid is worth keeping: on a 200-frame simulated Waymo sequence
/// (246 tracks) 8 cached frames per class cost 6.4 s of rebuilt grids, 64 cost 3.3 s, the whole
/// sequence 0.8 s. 32 MiB hold about 20 sweeps of 130 k points (12 bytes a point), shared by the
/// classes: a 200-sweep drone sequence fills it as a 2,000-sweep one does, so a worker's peak
/// memory does not grow with the sequence (a 2,000-sweep drone run's tracking took 8.5 s with it,
/// 5.2 s with 96 MiB; docs/cluster.md).
const CACHE_BYTES: usize = 32 << 20;

/// A cached frame: index, grid (`None`: the frame has no points) and its bytes.
type CachedFrame = (usize, Option<Arc<FrameGrid>>, usize);

/// The evidence counts of one sequence; a frame's grid is built when first asked for and kept,
/// least recently used first out, while the cache holds at most [`CACHE_BYTES`] (or the one
/// frame just asked for, if larger). One `Evidence` serves every class of the sequence, from any
/// thread.
pub(crate) struct Evidence<'a> {
    /// The sequence's frames (poses).
    frames: &'a [TrackFrame],
    /// Where the points come from.
    points: &'a dyn SweepPoints,
    /// Recently used frames, most recent last.
    cache: Mutex<VecDeque<CachedFrame>>,
    /// Bytes the cache may hold.
    budget: usize,
}

impl<'a> Evidence<'a> {
    /// Counts on the points `points` gives for `frames`.
    pub(crate) fn new(frames: &'a [TrackFrame], points: &'a dyn SweepPoints) -> Self {
        Self::with_budget(frames, points, CACHE_BYTES)
    }

    /// As `new`, with a cache of at most `budget` bytes.
    fn with_budget(frames: &'a [TrackFrame], points: &'a dyn SweepPoints, budget: usize) -> Self {
        Self {
            frames,
            points,
            cache: Mutex::new(VecDeque::new()),
            budget,
        }
    }

    /// Bytes of the cached grids.
    #[cfg(test)]
    fn cached_bytes(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|e| e.2)
            .sum()
    }

    /// Frame `frame`'s grid from the cache, or built (outside the lock) and cached.
    fn grid(&self, frame: usize) -> Option<Arc<FrameGrid>> {
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(p) = cache.iter().position(|e| e.0 == frame) {
                let entry = cache.remove(p)?;
                let grid = entry.1.clone();
                cache.push_back(entry);
                return grid;
            }
        }
        let grid = self
            .points
            .points_in_sensor(frame)
            .map(|cloud| Arc::new(FrameGrid::new(&cloud)));
        let bytes = grid.as_ref().map_or(0, |g| g.bytes());
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        // Another class may have built it meanwhile; keep one copy.
        if !cache.iter().any(|e| e.0 == frame) {
            let mut held: usize = cache.iter().map(|e| e.2).sum::<usize>() + bytes;
            while held > self.budget {
                match cache.pop_front() {
                    Some(old) => held -= old.2,
                    None => break,
                }
            }
            cache.push_back((frame, grid.clone(), bytes));
        }
        grid
    }

    /// Points of frame `frame` inside `box_in_world`; `None` when the frame has no points.
    pub(crate) fn count(&self, frame: usize, box_in_world: &Box3) -> Option<usize> {
        let f = self.frames.get(frame)?;
        let in_sensor = box_in_world.transformed(&f.world_from_sensor.inverse());
        match self.points.count_in_box(frame, &in_sensor) {
            IndexedCount::Inside(n) => Some(n),
            IndexedCount::NoPoints => None,
            IndexedCount::NotIndexed => Some(self.grid(frame)?.count(&in_sensor)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::count_points_in_box;
    use nalgebra::Isometry3;

    /// Counts through the grid equal the brute-force counts for boxes of every size, heading,
    /// pitch and roll, inside, across and outside the cloud (SplitMix-style seeded points).
    #[test]
    fn grid_counts_equal_brute_force() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let n = 20_000;
        let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            x.push((next() * 80.0 - 40.0) as f32);
            y.push((next() * 80.0 - 40.0) as f32);
            z.push((next() * 4.0 - 1.0) as f32);
        }
        let cloud = PointCloud::from_columns(x, y, z, vec![0.0; n]).unwrap();
        let frames = vec![TrackFrame {
            timestamp_micros: 0,
            world_from_sensor: Isometry3::identity(),
            boxes: Vec::new(),
        }];
        let points = vec![Some(Arc::new(cloud.clone()))];
        let evidence = Evidence::new(&frames, &points);
        for _ in 0..300 {
            let b = Box3::from_array([
                next() * 100.0 - 50.0,
                next() * 100.0 - 50.0,
                next() * 2.0,
                0.3 + next() * 8.0,
                0.3 + next() * 3.0,
                0.3 + next() * 3.0,
                next() * 6.3 - 3.15,
                next() * 0.4 - 0.2,
                next() * 0.4 - 0.2,
            ]);
            assert_eq!(evidence.count(0, &b), Some(count_points_in_box(&cloud, &b)), "{b:?}");
        }
        assert_eq!(
            Evidence::new(&frames, &crate::track::NoPoints).count(0, &Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0)),
            None
        );
    }

    /// With room for two of five frames, queries jumping between frames (from two threads at
    /// once) still count exactly, frames are rebuilt after eviction, and the cache stays within
    /// its budget; a frame without points counts `None`.
    #[test]
    fn a_cache_smaller_than_the_sequence_still_counts_exactly() {
        let clouds: Vec<PointCloud> = (0..5)
            .map(|f| {
                let n = 2_000 + 500 * f;
                let v = |k: usize, m: usize| ((k * m + f * 7) % 997) as f32 / 997.0;
                PointCloud::from_columns(
                    (0..n).map(|k| v(k, 31) * 40.0 - 20.0).collect(),
                    (0..n).map(|k| v(k, 17) * 40.0 - 20.0).collect(),
                    (0..n).map(|k| v(k, 7) * 3.0).collect(),
                    vec![0.0; n],
                )
                .unwrap()
            })
            .collect();
        let mut points: Vec<Option<Arc<PointCloud>>> = clouds.iter().cloned().map(Arc::new).map(Some).collect();
        points.push(None);
        let frames: Vec<TrackFrame> = (0..points.len())
            .map(|f| TrackFrame {
                timestamp_micros: f as i64 * 100_000,
                world_from_sensor: Isometry3::translation(f as f64, -2.0 * f as f64, 0.1),
                boxes: Vec::new(),
            })
            .collect();
        let two_frames = 2 * FrameGrid::new(&clouds[4]).bytes();
        let evidence = Evidence::with_budget(&frames, &points, two_frames);
        let boxes: Vec<Box3> = (0..12)
            .map(|k| {
                Box3::new(
                    -8.0 + 1.5 * k as f64,
                    5.0 - k as f64,
                    1.0,
                    4.5,
                    2.0,
                    1.6,
                    0.3 * k as f64,
                )
            })
            .collect();
        std::thread::scope(|scope| {
            for thread in 0..2 {
                let (evidence, frames, clouds, boxes) = (&evidence, &frames, &clouds, &boxes);
                scope.spawn(move || {
                    for round in 0..3 {
                        for f in [0, 3, 1, 4, 2, 0, 4].map(|f| (f + thread + round) % 5) {
                            for b in boxes {
                                let in_sensor = b.transformed(&frames[f].world_from_sensor.inverse());
                                assert_eq!(evidence.count(f, b), Some(count_points_in_box(&clouds[f], &in_sensor)));
                            }
                        }
                    }
                });
            }
        });
        assert!(
            evidence.cached_bytes() <= two_frames,
            "{} > {two_frames}",
            evidence.cached_bytes()
        );
        assert_eq!(evidence.count(5, &boxes[0]), None);
    }
}
