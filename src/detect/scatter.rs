//! Scatter: places each pillar's encoded feature vector on the BEV canvas at its grid cell, the
//! step split pillar models leave outside their graphs (PointPillars' `PointPillarScatter`).

use rayon::prelude::*;

use super::manifest::MapLayout;

/// The encoder's per-pillar features.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPillars {
    /// Feature values.
    pub data: Vec<f32>,
    /// Rows (pillars, including padding) in `data`.
    pub rows: usize,
    /// Features per pillar.
    pub channels: usize,
    /// `data` is channel-major (`[1, C, N(, 1)]`) rather than pillar-major (`[N(, 1), C]`).
    pub channel_major: bool,
}

impl EncodedPillars {
    /// Feature `channel` of pillar `row`.
    #[inline]
    pub fn get(&self, row: usize, channel: usize) -> f32 {
        self.view().get(row, channel)
    }

    /// A borrowed view of the same features.
    pub fn view(&self) -> EncodedPillarsView<'_> {
        EncodedPillarsView {
            data: &self.data,
            rows: self.rows,
            channels: self.channels,
            channel_major: self.channel_major,
        }
    }
}

/// The encoder's per-pillar features, borrowed (e.g. straight from an ONNX Runtime output).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncodedPillarsView<'a> {
    /// Feature values.
    pub data: &'a [f32],
    /// Rows (pillars, including padding) in `data`.
    pub rows: usize,
    /// Features per pillar.
    pub channels: usize,
    /// `data` is channel-major (`[1, C, N(, 1)]`) rather than pillar-major (`[N(, 1), C]`).
    pub channel_major: bool,
}

impl EncodedPillarsView<'_> {
    /// Feature `channel` of pillar `row`.
    #[inline]
    pub fn get(&self, row: usize, channel: usize) -> f32 {
        if self.channel_major {
            self.data[channel * self.rows + row]
        } else {
            self.data[row * self.channels + channel]
        }
    }
}

/// Channels scattered together by one task.
const CHANNEL_GROUP: usize = 16;

/// A BEV canvas `[1, C, ny, nx]` (NCHW) or `[1, ny, nx, C]` (NHWC). Reusing one across sweeps
/// ([`scatter_into`]) clears only the cells the last sweep wrote. Two canvases are equal when
/// their shape and values are (the reuse buffers are not compared).
#[derive(Debug, Clone, Default)]
pub struct Canvas {
    /// Values in `shape`'s layout; cells without a pillar are zero.
    pub data: Vec<f32>,
    /// The tensor shape.
    pub shape: [usize; 4],
    /// Cells written by the last scatter, in row order.
    written: Vec<(u32, u32)>,
    /// The pillars of the current scatter in row order (reused buffer).
    order: Vec<u32>,
    /// Start of each canvas row's pillars in `order` (reused buffer).
    row_starts: Vec<u32>,
    /// One bit per cell: written by the current scatter (reused buffer).
    current: Vec<u64>,
}

impl PartialEq for Canvas {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.data == other.data
    }
}

/// Fills `order` with the indices of the `cells` inside the `nx × ny` grid, sorted by row (a
/// stable counting sort), so that the scatter walks every plane of the canvas from top to bottom
/// instead of jumping between distant cache lines in the pillars' creation order. Cells outside
/// the grid (which the pillariser never makes) are left out rather than written elsewhere.
fn sort_by_row(cells: &[(u32, u32)], nx: usize, ny: usize, order: &mut Vec<u32>, row_starts: &mut Vec<u32>) {
    let inside = |&(ix, iy): &(u32, u32)| (ix as usize) < nx && (iy as usize) < ny;
    row_starts.clear();
    row_starts.resize(ny + 1, 0);
    for cell in cells.iter().filter(|c| inside(c)) {
        row_starts[cell.1 as usize + 1] += 1;
    }
    for row in 0..ny {
        row_starts[row + 1] += row_starts[row];
    }
    order.clear();
    order.resize(row_starts[ny] as usize, 0);
    for (p, cell) in cells.iter().enumerate().filter(|(_, c)| inside(c)) {
        let slot = &mut row_starts[cell.1 as usize];
        order[*slot as usize] = p as u32;
        *slot += 1;
    }
}

/// `len` zeros on pages of their own. A zeroed allocation is mapped to the kernel's shared zero
/// page until written; the head reads the whole canvas before the scatters of later sweeps write
/// its cells, and each first write to such a page would then cost a copy-on-write fault and a
/// TLB shootdown that interrupts the other threads. One store per page makes it resident now.
fn resident_zeros(len: usize) -> Vec<f32> {
    const PER_PAGE: usize = 4096 / std::mem::size_of::<f32>();
    let mut data = vec![0.0f32; len];
    for value in data.iter_mut().step_by(PER_PAGE) {
        // An opaque zero, so the store is not dropped as one that changes nothing.
        *value = std::hint::black_box(0.0);
    }
    data
}

/// Scatters the first `cells.len()` rows of `encoded` onto an `nx × ny` canvas; padding rows are ignored.
pub fn scatter_to_canvas(
    encoded: &EncodedPillars,
    cells: &[(u32, u32)],
    nx: usize,
    ny: usize,
    layout: MapLayout,
) -> Canvas {
    let mut canvas = Canvas::default();
    scatter_into(encoded, cells, nx, ny, layout, &mut canvas);
    canvas
}

/// As [`scatter_to_canvas`], reusing `canvas`'s buffer.
pub fn scatter_into(
    encoded: &EncodedPillars,
    cells: &[(u32, u32)],
    nx: usize,
    ny: usize,
    layout: MapLayout,
    canvas: &mut Canvas,
) {
    scatter_view_into(encoded.view(), cells, nx, ny, layout, canvas);
}

/// As [`scatter_into`], from borrowed features (no copy of an ONNX Runtime output needed).
/// Rows beyond what `data` holds are treated as absent.
pub fn scatter_view_into(
    encoded: EncodedPillarsView<'_>,
    cells: &[(u32, u32)],
    nx: usize,
    ny: usize,
    layout: MapLayout,
    canvas: &mut Canvas,
) {
    let c = encoded.channels;
    let rows = if encoded.data.len() >= encoded.rows * c {
        encoded.rows
    } else {
        0
    };
    let count = cells.len().min(rows);
    let shape = match layout {
        MapLayout::Nchw => [1, c, ny, nx],
        MapLayout::Nhwc => [1, ny, nx, c],
    };
    if canvas.shape != shape || canvas.data.len() != c * nx * ny {
        canvas.data = resident_zeros(c * nx * ny);
        canvas.written.clear();
    }
    canvas.shape = shape;
    let mut stale = std::mem::take(&mut canvas.written);
    let cells = &cells[..count];
    let mut order = std::mem::take(&mut canvas.order);
    sort_by_row(cells, nx, ny, &mut order, &mut canvas.row_starts);
    // Last sweep's cells that this sweep writes again need no clearing (consecutive sweeps
    // share most of their occupied cells).
    let current = &mut canvas.current;
    current.clear();
    current.resize((nx * ny).div_ceil(64), 0);
    for &p in &order {
        let (ix, iy) = cells[p as usize];
        let cell = iy as usize * nx + ix as usize;
        current[cell / 64] |= 1 << (cell % 64);
    }
    stale.retain(|&(ix, iy)| {
        let cell = iy as usize * nx + ix as usize;
        current.get(cell / 64).is_none_or(|w| w & (1 << (cell % 64)) == 0)
    });
    match layout {
        MapLayout::Nchw => {
            // Channels in groups of 16 (one cache line of a pillar-major feature row), so each
            // pillar's features are read once per group rather than once per channel; pillars
            // in row order, so each plane is written front to back.
            let plane = nx * ny;
            canvas
                .data
                .par_chunks_mut(CHANNEL_GROUP * plane)
                .enumerate()
                .for_each(|(g, planes)| {
                    let first = g * CHANNEL_GROUP;
                    let group = planes.len() / plane;
                    for &(ix, iy) in &stale {
                        let cell = iy as usize * nx + ix as usize;
                        for k in 0..group {
                            planes[k * plane + cell] = 0.0;
                        }
                    }
                    if encoded.channel_major {
                        for &p in &order {
                            let p = p as usize;
                            let (ix, iy) = cells[p];
                            let cell = iy as usize * nx + ix as usize;
                            for k in 0..group {
                                planes[k * plane + cell] = encoded.data[(first + k) * encoded.rows + p];
                            }
                        }
                    } else {
                        for &p in &order {
                            let p = p as usize;
                            let (ix, iy) = cells[p];
                            let cell = iy as usize * nx + ix as usize;
                            let row = &encoded.data[p * c + first..p * c + first + group];
                            for (k, &v) in row.iter().enumerate() {
                                planes[k * plane + cell] = v;
                            }
                        }
                    }
                });
        }
        MapLayout::Nhwc => {
            // A cell's channels are one contiguous run: only occupied cells' memory is touched.
            for &(ix, iy) in &stale {
                let at = (iy as usize * nx + ix as usize) * c;
                canvas.data[at..at + c].fill(0.0);
            }
            for &p in &order {
                let p = p as usize;
                let (ix, iy) = cells[p];
                let at = (iy as usize * nx + ix as usize) * c;
                let target = &mut canvas.data[at..at + c];
                if encoded.channel_major {
                    for (ch, v) in target.iter_mut().enumerate() {
                        *v = encoded.data[ch * encoded.rows + p];
                    }
                } else {
                    target.copy_from_slice(&encoded.data[p * c..p * c + c]);
                }
            }
        }
    }
    canvas.written = stale;
    canvas.written.clear();
    canvas.written.extend(order.iter().map(|&p| cells[p as usize]));
    canvas.order = order;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pillars_land_on_their_cells_in_both_layouts() {
        // Two pillars (+1 padding row) with 2 features each, on a 3 × 2 canvas.
        let encoded = EncodedPillars {
            data: vec![1.0, 2.0, 3.0, 4.0, 99.0, 99.0],
            rows: 3,
            channels: 2,
            channel_major: false,
        };
        let cells = [(2, 0), (0, 1)];
        let nchw = scatter_to_canvas(&encoded, &cells, 3, 2, MapLayout::Nchw);
        assert_eq!(nchw.shape, [1, 2, 2, 3]);
        assert_eq!(
            nchw.data,
            vec![0.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0, 0.0, 2.0, 4.0, 0.0, 0.0]
        );
        let nhwc = scatter_to_canvas(&encoded, &cells, 3, 2, MapLayout::Nhwc);
        assert_eq!(nhwc.shape, [1, 2, 3, 2]);
        assert_eq!(
            nhwc.data,
            vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0]
        );

        let channel_major = EncodedPillars {
            data: vec![1.0, 3.0, 99.0, 2.0, 4.0, 99.0],
            rows: 3,
            channels: 2,
            channel_major: true,
        };
        assert_eq!(scatter_to_canvas(&channel_major, &cells, 3, 2, MapLayout::Nchw), nchw);

        // Reuse: a second sweep with one pillar elsewhere leaves no trace of the first.
        let mut reused = nchw.clone();
        let one = EncodedPillars {
            data: vec![5.0, 6.0],
            rows: 1,
            channels: 2,
            channel_major: false,
        };
        scatter_into(&one, &[(1, 1)], 3, 2, MapLayout::Nchw, &mut reused);
        assert_eq!(reused, scatter_to_canvas(&one, &[(1, 1)], 3, 2, MapLayout::Nchw));
        let mut reused = nhwc.clone();
        scatter_into(&one, &[(1, 1)], 3, 2, MapLayout::Nhwc, &mut reused);
        assert_eq!(
            reused.data,
            scatter_to_canvas(&one, &[(1, 1)], 3, 2, MapLayout::Nhwc).data
        );
    }

    /// The canvas as one pillar-at-a-time write in input order gives it.
    fn naive(encoded: &EncodedPillars, cells: &[(u32, u32)], nx: usize, ny: usize, layout: MapLayout) -> Vec<f32> {
        let c = encoded.channels;
        let mut data = vec![0.0f32; c * nx * ny];
        for (p, &(ix, iy)) in cells.iter().enumerate().take(encoded.rows) {
            let (ix, iy) = (ix as usize, iy as usize);
            if ix >= nx || iy >= ny {
                continue;
            }
            for ch in 0..c {
                let at = match layout {
                    MapLayout::Nchw => (ch * ny + iy) * nx + ix,
                    MapLayout::Nhwc => (iy * nx + ix) * c + ch,
                };
                data[at] = encoded.get(p, ch);
            }
        }
        data
    }

    #[test]
    fn scrambled_pillars_match_a_pillar_at_a_time_write_and_reuse_leaves_no_trace() {
        // 37 channels (two full groups of 16 and a partial one) on a 23 × 19 canvas; pillars in a
        // scrambled cell order, one cell outside the grid, two padding rows.
        let (nx, ny, c) = (23usize, 19usize, 37usize);
        let mut cells: Vec<(u32, u32)> = (0..200u32).map(|k| ((k * 7) % 23, (k * 11 + k / 23) % 19)).collect();
        cells.sort_unstable();
        cells.dedup();
        cells.reverse();
        cells.swap(3, 40);
        cells.push((23, 0));
        let rows = cells.len() + 2;
        for channel_major in [false, true] {
            let data: Vec<f32> = (0..rows * c).map(|k| k as f32 * 0.5 + 1.0).collect();
            let encoded = EncodedPillars {
                data,
                rows,
                channels: c,
                channel_major,
            };
            for layout in [MapLayout::Nchw, MapLayout::Nhwc] {
                let canvas = scatter_to_canvas(&encoded, &cells, nx, ny, layout);
                assert_eq!(
                    canvas.data,
                    naive(&encoded, &cells, nx, ny, layout),
                    "{layout:?} {channel_major}"
                );
                let mut reused = canvas.clone();
                let few = &cells[100..110];
                scatter_into(&encoded, few, nx, ny, layout, &mut reused);
                assert_eq!(reused.data, naive(&encoded, few, nx, ny, layout), "reuse {layout:?}");
            }
        }
    }

    #[test]
    fn canvases_compare_by_shape_and_values_only() {
        let encoded = EncodedPillars {
            data: vec![1.0, 2.0, 3.0, 4.0],
            rows: 2,
            channels: 2,
            channel_major: false,
        };
        // The same canvas reached by two histories: its reuse buffers (cells written, row order)
        // differ, its data and shape do not.
        let direct = scatter_to_canvas(&encoded, &[(0, 0), (2, 1)], 3, 2, MapLayout::Nchw);
        let mut reused = scatter_to_canvas(&encoded, &[(1, 1)], 3, 2, MapLayout::Nchw);
        scatter_into(&encoded, &[(0, 0), (2, 1)], 3, 2, MapLayout::Nchw, &mut reused);
        let mut empty_history = Canvas {
            data: direct.data.clone(),
            shape: direct.shape,
            ..Canvas::default()
        };
        assert_eq!(reused, direct);
        assert_eq!(empty_history, direct);
        // A different value, or the same values under another shape, is a different canvas.
        empty_history.data[2] = 9.0;
        assert_ne!(empty_history, direct);
        let transposed = Canvas {
            data: direct.data.clone(),
            shape: [1, 2, 3, 2],
            ..Canvas::default()
        };
        assert_ne!(transposed, direct);
    }

    #[test]
    fn a_borrowed_view_scatters_like_the_owned_features_and_short_data_scatters_nothing() {
        let data: Vec<f32> = (0..3 * 5).map(|k| k as f32 + 0.5).collect();
        let encoded = EncodedPillars {
            data: data.clone(),
            rows: 5,
            channels: 3,
            channel_major: true,
        };
        let cells = [(3, 0), (0, 2), (1, 1)];
        let owned = scatter_to_canvas(&encoded, &cells, 4, 3, MapLayout::Nhwc);
        let mut viewed = Canvas::default();
        scatter_view_into(encoded.view(), &cells, 4, 3, MapLayout::Nhwc, &mut viewed);
        assert_eq!(viewed, owned);
        assert_eq!(viewed.data[(2 * 4) * 3 + 1], encoded.get(1, 1));
        let short = EncodedPillarsView {
            data: &data[..10],
            ..encoded.view()
        };
        scatter_view_into(short, &cells, 4, 3, MapLayout::Nhwc, &mut viewed);
        assert!(viewed.data.iter().all(|v| *v == 0.0));
    }
}
