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
/// ([`scatter_into`]) clears only the cells the last sweep wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Canvas {
    /// Values in `shape`'s layout; cells without a pillar are zero.
    pub data: Vec<f32>,
    /// The tensor shape.
    pub shape: [usize; 4],
    /// Cells written by the last scatter.
    written: Vec<(u32, u32)>,
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
    let c = encoded.channels;
    let count = cells.len().min(encoded.rows);
    let shape = match layout {
        MapLayout::Nchw => [1, c, ny, nx],
        MapLayout::Nhwc => [1, ny, nx, c],
    };
    if canvas.shape != shape || canvas.data.len() != c * nx * ny {
        canvas.data = vec![0.0f32; c * nx * ny];
        canvas.written.clear();
    }
    canvas.shape = shape;
    let stale = std::mem::take(&mut canvas.written);
    let cells = &cells[..count];
    match layout {
        MapLayout::Nchw => {
            // Channels in groups of 16 (one cache line of a pillar-major feature row), so each
            // pillar's features are read once per group rather than once per channel.
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
                    for (p, &(ix, iy)) in cells.iter().enumerate() {
                        let cell = iy as usize * nx + ix as usize;
                        for k in 0..group {
                            planes[k * plane + cell] = encoded.get(p, first + k);
                        }
                    }
                });
        }
        MapLayout::Nhwc => {
            for &(ix, iy) in &stale {
                let at = (iy as usize * nx + ix as usize) * c;
                canvas.data[at..at + c].fill(0.0);
            }
            for (p, &(ix, iy)) in cells.iter().enumerate() {
                let at = (iy as usize * nx + ix as usize) * c;
                for (ch, v) in canvas.data[at..at + c].iter_mut().enumerate() {
                    *v = encoded.get(p, ch);
                }
            }
        }
    }
    canvas.written = stale;
    canvas.written.clear();
    canvas.written.extend_from_slice(cells);
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
}
