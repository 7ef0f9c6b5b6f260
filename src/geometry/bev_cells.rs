//! A bird's-eye-view grid of 2 m cells over one sweep's points, for points-in-box counts that
//! test only the points of the cells a box can touch. [`BevCells::bin`] sorts the points by cell
//! (row-major over y, x) and [`BevLayout::cell_runs`] names, per grid row, the run of cells a
//! box's bounding circle covers; since a row's cells are one contiguous run of sorted points, a
//! count reads one slice per row. Exact: every point inside a box lies within the box's
//! half-diagonal of its centre, for boxes within ±1 km of the sensor (points beyond share the
//! border cells).

use std::ops::Range;

use super::Box3;

/// Side of a grid cell (m).
const CELL_M: f32 = 2.0;
/// The grid covers at most ±this from the sensor (m); farther points share the border cells.
const GRID_LIMIT_M: f32 = 1024.0;

/// Where a sweep's grid lies: its corner and its cells along x and y.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BevLayout {
    /// Smallest x and y of the points (m, sensor frame).
    origin: [f32; 2],
    /// Cells along x and y (0 × 0 for a sweep without finite points).
    dims: [usize; 2],
}

impl BevLayout {
    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// Per grid row that `b` (sensor frame) can touch, its cells `c0..c1` (indices into the
    /// row-major cells; the points of cells `c0..c1` are `starts[c0]..starts[c1]`).
    pub fn cell_runs(&self, b: &Box3) -> impl Iterator<Item = Range<usize>> + use<> {
        // Every point of the box lies within its half-diagonal of the centre.
        let r = 0.5 * (b.l * b.l + b.w * b.w + b.h * b.h).sqrt();
        self.disc_runs([b.x, b.y], r)
    }

    /// Per grid row, the cells `c0..c1` that the disc of radius `r` (m) around `centre` (x, y,
    /// sensor frame) can touch: every point within `r` of `centre` across x and y lies in them.
    pub fn disc_runs(&self, centre: [f64; 2], r: f64) -> impl Iterator<Item = Range<usize>> + use<> {
        let dims = self.dims;
        let empty = dims[0] == 0 || dims[1] == 0;
        let r = r as f32;
        let cell = |v: f32, axis: usize| ((v - self.origin[axis]) / CELL_M).floor();
        let range = |centre: f64, axis: usize| {
            let lo = cell(centre as f32 - r, axis).max(0.0);
            let hi = cell(centre as f32 + r, axis).min(dims[axis].saturating_sub(1) as f32);
            (lo as usize, hi as usize, lo <= hi)
        };
        let ((x0, x1, ok_x), (y0, y1, ok_y)) = (range(centre[0], 0), range(centre[1], 1));
        let rows = if !empty && ok_x && ok_y { y0..y1 + 1 } else { 0..0 };
        rows.map(move |cy| {
            let row = cy * dims[0];
            row + x0..row + x1 + 1
        })
    }
}

/// A sweep's grid: its layout and where each cell's points start in the cell-sorted order.
#[derive(Debug, Clone, PartialEq)]
pub struct BevCells {
    layout: BevLayout,
    /// `starts[c]..starts[c + 1]` are cell `c`'s points.
    starts: Vec<u32>,
}

impl BevCells {
    /// Bins the points `(x[i], y[i])`: the grid, and the point order that sorts them by cell
    /// (stable: points of one cell keep their order).
    pub fn bin(x: &[f32], y: &[f32]) -> (Self, Vec<u32>) {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &y[..n]);
        // Bounds of the finite points (`f32::min`/`max` skip NaN), kept within ±GRID_LIMIT_M so
        // that a stray huge coordinate cannot blow up the grid.
        let bound = |v: &[f32]| {
            let (lo, hi) = v.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &a| {
                (lo.min(a), hi.max(a))
            });
            (lo.max(-GRID_LIMIT_M), hi.min(GRID_LIMIT_M))
        };
        let ((x_lo, x_hi), (y_lo, y_hi)) = (bound(x), bound(y));
        if !(x_lo <= x_hi && y_lo <= y_hi) {
            // No finite point: one empty run holds them all (none can be inside a box).
            let layout = BevLayout {
                origin: [0.0; 2],
                dims: [0, 0],
            };
            return (
                Self {
                    layout,
                    starts: vec![0],
                },
                Vec::new(),
            );
        }
        let lo = [x_lo, y_lo];
        let dims = [
            ((x_hi - x_lo) / CELL_M) as usize + 1,
            ((y_hi - y_lo) / CELL_M) as usize + 1,
        ];
        // One pass computes every point's cell (float-to-int casts saturate: NaN → 0, which the
        // exact box test rejects anyway) and counts the cells; a second places the points.
        let (max_x, max_y) = ((dims[0] - 1) as u32, (dims[1] - 1) as u32);
        let mut starts = vec![0u32; dims[0] * dims[1] + 1];
        let cells: Vec<u32> = x
            .iter()
            .zip(y)
            .map(|(&px, &py)| {
                let cx = (((px - lo[0]) / CELL_M) as u32).min(max_x);
                let cy = (((py - lo[1]) / CELL_M) as u32).min(max_y);
                cy * dims[0] as u32 + cx
            })
            .collect();
        for &c in &cells {
            starts[c as usize + 1] += 1;
        }
        for c in 1..starts.len() {
            starts[c] += starts[c - 1];
        }
        let mut fill = starts.clone();
        let mut order = vec![0u32; n];
        for (k, &c) in cells.iter().enumerate() {
            let slot = &mut fill[c as usize];
            order[*slot as usize] = k as u32;
            *slot += 1;
        }
        (
            Self {
                layout: BevLayout { origin: lo, dims },
                starts,
            },
            order,
        )
    }

    /// The grid's layout.
    pub fn layout(&self) -> BevLayout {
        self.layout
    }

    /// Cell starts: `starts()[c]..starts()[c + 1]` are cell `c`'s points (one more than cells).
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// The runs of cell-sorted points that `b` (sensor frame) can contain, one per grid row.
    pub fn point_runs(&self, b: &Box3) -> impl Iterator<Item = Range<usize>> + '_ {
        self.layout
            .cell_runs(b)
            .map(|c| self.starts[c.start] as usize..self.starts[c.end] as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::count_points_in_box_xyz;

    /// Counting only the runs a box can touch equals counting every point, for boxes inside,
    /// across and outside the cloud, with a NaN and a point beyond the grid's limit among them.
    #[test]
    fn runs_hold_every_point_a_box_contains() {
        let mut x: Vec<f32> = (0..4_000).map(|k| ((k * 37) % 401) as f32 * 0.1 - 20.0).collect();
        let mut y: Vec<f32> = (0..4_000).map(|k| ((k * 91) % 353) as f32 * 0.1 - 17.0).collect();
        let mut z: Vec<f32> = (0..4_000).map(|k| ((k * 13) % 29) as f32 * 0.1).collect();
        x.extend([f32::NAN, 5000.0]);
        y.extend([1.0, 5000.0]);
        z.extend([1.0, 1.0]);
        let (cells, order) = BevCells::bin(&x, &y);
        assert_eq!(order.len(), x.len());
        let sorted = |v: &[f32]| order.iter().map(|&k| v[k as usize]).collect::<Vec<_>>();
        let (sx, sy, sz) = (sorted(&x), sorted(&y), sorted(&z));
        for k in 0..60 {
            let b = Box3::new(
                -25.0 + k as f64,
                -20.0 + 0.7 * k as f64,
                1.0,
                0.5 + 0.1 * k as f64,
                0.4 + 0.05 * k as f64,
                2.0,
                0.37 * k as f64,
            );
            let all = count_points_in_box_xyz(&x, &y, &z, &b);
            let runs: usize = cells
                .point_runs(&b)
                .map(|r| count_points_in_box_xyz(&sx[r.clone()], &sy[r.clone()], &sz[r], &b))
                .sum();
            assert_eq!(runs, all, "{b:?}");
        }
        let (empty, none) = BevCells::bin(&[], &[]);
        let b = Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0);
        assert!(none.is_empty() && empty.point_runs(&b).count() == 0);
    }
}
