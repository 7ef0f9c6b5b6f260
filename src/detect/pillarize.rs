//! Pillarisation: groups a sweep's points into vertical pillars on a dense BEV grid (one pass,
//! first come first kept, as OpenPCDet/spconv do) and builds the encoder's per-point channels in
//! the manifest's order and layout.

use rayon::prelude::*;
use thiserror::Error;

use super::manifest::{EncoderLayout, PillarChannel, PointFeature};
use crate::cloud::{ChannelData, PointCloud};

/// Errors building pillars from a point cloud.
#[derive(Debug, Error, PartialEq)]
pub enum PillarError {
    /// A point feature names a channel the cloud lacks.
    #[error("point feature `{0}`: no such channel")]
    MissingChannel(String),
    /// A point feature names a channel that is not f32.
    #[error("point feature `{name}`: channel is {actual}, expected f32")]
    ChannelType {
        /// The channel name.
        name: String,
        /// Its element type.
        actual: &'static str,
    },
}

/// The BEV pillar grid: origin, cell size and cell counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PillarGrid {
    /// Range minimum `[x, y, z]` (m).
    pub min: [f32; 3],
    /// Range maximum `[x, y, z]` (m).
    pub max: [f32; 3],
    /// Pillar size `[x, y, z]` (m); z spans the range.
    pub size: [f32; 3],
    /// Cells along x.
    pub nx: usize,
    /// Cells along y.
    pub ny: usize,
}

impl PillarGrid {
    /// The grid of `point_cloud_range` `[x_min, y_min, z_min, x_max, y_max, z_max]` and `pillar_size`.
    pub fn new(point_cloud_range: [f64; 6], pillar_size: [f64; 3]) -> Self {
        let r = point_cloud_range;
        Self {
            min: [r[0] as f32, r[1] as f32, r[2] as f32],
            max: [r[3] as f32, r[4] as f32, r[5] as f32],
            size: [pillar_size[0] as f32, pillar_size[1] as f32, pillar_size[2] as f32],
            nx: ((r[3] - r[0]) / pillar_size[0]).round().max(0.0) as usize,
            ny: ((r[4] - r[1]) / pillar_size[1]).round().max(0.0) as usize,
        }
    }

    /// The cell `(ix, iy)` holding a point, or `None` outside the range (spconv's floor rule).
    #[inline]
    pub fn cell_of(&self, x: f32, y: f32, z: f32) -> Option<(usize, usize)> {
        let fx = ((x - self.min[0]) / self.size[0]).floor();
        let fy = ((y - self.min[1]) / self.size[1]).floor();
        let fz = ((z - self.min[2]) / self.size[2]).floor();
        // Negated comparisons also reject NaN coordinates.
        if !(fx >= 0.0 && fy >= 0.0 && fz == 0.0) {
            return None;
        }
        let (ix, iy) = (fx as usize, fy as usize);
        (ix < self.nx && iy < self.ny).then_some((ix, iy))
    }

    /// The geometric centre `[x, y, z]` of cell `(ix, iy)`, computed as OpenPCDet does
    /// (`index · size + size/2 + min`, in f32).
    #[inline]
    pub fn center_of(&self, ix: usize, iy: usize) -> [f32; 3] {
        [
            ix as f32 * self.size[0] + (self.size[0] / 2.0 + self.min[0]),
            iy as f32 * self.size[1] + (self.size[1] / 2.0 + self.min[1]),
            self.size[2] / 2.0 + self.min[2],
        ]
    }
}

/// Everything the pillariser needs: grid, limits, channels and layout.
#[derive(Debug, Clone, PartialEq)]
pub struct PillarSpec {
    /// The grid.
    pub grid: PillarGrid,
    /// Points kept per pillar.
    pub max_points_per_pillar: usize,
    /// Pillars kept per sweep.
    pub max_pillars: usize,
    /// Point features, in order, referenced by `PillarChannel::Feature`.
    pub features: Vec<PointFeature>,
    /// Encoder input channels, in order.
    pub channels: Vec<PillarChannel>,
    /// Output layout.
    pub layout: EncoderLayout,
}

/// How many pillar rows the output tensor has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PillarRows {
    /// A static model axis: exactly this many rows, zero-padded; pillars beyond it are dropped.
    Fixed(usize),
    /// A dynamic axis: as many rows as pillars (at least one, so the tensor is never empty).
    Trim,
}

/// A sweep's pillars, ready to feed to an encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Pillars {
    /// Encoder input values in `shape`'s layout; padded slots and rows are zero.
    pub features: Vec<f32>,
    /// `[rows, points, channels]` (point-major) or `[1, channels, rows, points]` (channel-major).
    pub shape: Vec<usize>,
    /// Cell `(ix, iy)` of each real pillar, in creation order.
    pub cells: Vec<(u32, u32)>,
    /// Points kept in each real pillar.
    pub num_points: Vec<u32>,
    /// Rows of the tensor (≥ the pillar count).
    pub rows: usize,
}

impl Pillars {
    /// Number of real (non-padding) pillars.
    pub fn count(&self) -> usize {
        self.cells.len()
    }
}

/// One point feature resolved against a cloud: its column (or constant zero) and normalisation.
struct FeatureColumn<'a> {
    values: Option<&'a [f32]>,
    scale: f32,
    offset: f32,
    tanh: bool,
}

impl FeatureColumn<'_> {
    #[inline]
    fn value(&self, i: usize) -> f32 {
        let Some(values) = self.values else { return 0.0 };
        let v = values[i] * self.scale + self.offset;
        if self.tanh { v.tanh() } else { v }
    }
}

fn resolve_columns<'a>(
    cloud: &'a PointCloud,
    features: &[PointFeature],
) -> Result<Vec<FeatureColumn<'a>>, PillarError> {
    features
        .iter()
        .map(|f| {
            let values = match f.source.as_str() {
                "x" => Some(cloud.x()),
                "y" => Some(cloud.y()),
                "z" => Some(cloud.z()),
                "intensity" => Some(cloud.intensity()),
                "zero" => None,
                name => match cloud.channel(name) {
                    Some(ChannelData::F32(v)) => Some(v.as_slice()),
                    Some(other) => {
                        return Err(PillarError::ChannelType {
                            name: name.to_string(),
                            actual: other.type_name(),
                        });
                    }
                    None => return Err(PillarError::MissingChannel(name.to_string())),
                },
            };
            Ok(FeatureColumn {
                values,
                scale: f.scale,
                offset: f.offset,
                tanh: f.tanh,
            })
        })
        .collect()
}

/// Builds the encoder input for `cloud`: assigns points to pillars in point order (a pillar is
/// created by its first point; pillars beyond the limit and points beyond a pillar's limit are
/// dropped), then fills each kept point's channels. Rows are built in parallel.
pub fn pillarize(cloud: &PointCloud, spec: &PillarSpec, rows: PillarRows) -> Result<Pillars, PillarError> {
    let columns = resolve_columns(cloud, &spec.features)?;
    let grid = &spec.grid;
    let m = spec.max_points_per_pillar;
    let pillar_limit = match rows {
        PillarRows::Fixed(n) => spec.max_pillars.min(n),
        PillarRows::Trim => spec.max_pillars,
    };
    let (xs, ys, zs) = (cloud.x(), cloud.y(), cloud.z());

    // Pass 1, sequential because "first come first kept" depends on point order: a dense grid
    // maps each cell to its pillar; each pillar records the indices of its kept points.
    let mut pillar_of_cell = vec![u32::MAX; grid.nx * grid.ny];
    let mut cells: Vec<(u32, u32)> = Vec::new();
    let mut num_points: Vec<u32> = Vec::new();
    let mut point_index: Vec<u32> = Vec::new();
    for i in 0..xs.len() {
        let Some((ix, iy)) = grid.cell_of(xs[i], ys[i], zs[i]) else {
            continue;
        };
        let slot = &mut pillar_of_cell[iy * grid.nx + ix];
        let p = if *slot == u32::MAX {
            if cells.len() >= pillar_limit {
                continue;
            }
            *slot = cells.len() as u32;
            cells.push((ix as u32, iy as u32));
            num_points.push(0);
            point_index.resize(point_index.len() + m, 0);
            cells.len() - 1
        } else {
            *slot as usize
        };
        let n = num_points[p] as usize;
        if n < m {
            point_index[p * m + n] = i as u32;
            num_points[p] += 1;
        }
    }

    let count = cells.len();
    let n_rows = match rows {
        PillarRows::Fixed(n) => n,
        PillarRows::Trim => count.max(1),
    };
    let c = spec.channels.len();
    let row_len = m * c;

    // Pass 2, parallel over pillars: per-point channels in point-major order.
    let mut point_major = vec![0.0f32; n_rows * row_len];
    point_major[..count * row_len]
        .par_chunks_mut(row_len)
        .with_min_len(256)
        .enumerate()
        .for_each(|(p, row)| {
            let indices = &point_index[p * m..p * m + num_points[p] as usize];
            fill_pillar(row, indices, cells[p], xs, ys, zs, &columns, &spec.channels, grid);
        });

    let (features, shape) = match spec.layout {
        EncoderLayout::PointMajor => (point_major, vec![n_rows, m, c]),
        EncoderLayout::ChannelMajor => {
            let plane = n_rows * m;
            let mut channel_major = vec![0.0f32; c * plane];
            channel_major.par_chunks_mut(plane).enumerate().for_each(|(ch, out)| {
                for (slot, value) in out[..count * m].iter_mut().enumerate() {
                    *value = point_major[slot * c + ch];
                }
            });
            (channel_major, vec![1, c, n_rows, m])
        }
    };
    Ok(Pillars {
        features,
        shape,
        cells,
        num_points,
        rows: n_rows,
    })
}

/// Writes one pillar's `[points, channels]` block; slots past the kept points stay zero.
#[allow(clippy::too_many_arguments)]
fn fill_pillar(
    row: &mut [f32],
    indices: &[u32],
    (ix, iy): (u32, u32),
    xs: &[f32],
    ys: &[f32],
    zs: &[f32],
    columns: &[FeatureColumn],
    channels: &[PillarChannel],
    grid: &PillarGrid,
) {
    if indices.is_empty() {
        return;
    }
    let (mut sx, mut sy, mut sz) = (0.0f32, 0.0f32, 0.0f32);
    for &i in indices {
        let i = i as usize;
        sx += xs[i];
        sy += ys[i];
        sz += zs[i];
    }
    let n = indices.len() as f32;
    let mean = [sx / n, sy / n, sz / n];
    let center = grid.center_of(ix as usize, iy as usize);
    let c = channels.len();
    for (slot, &i) in indices.iter().enumerate() {
        let i = i as usize;
        let (x, y, z) = (xs[i], ys[i], zs[i]);
        let out = &mut row[slot * c..(slot + 1) * c];
        for (value, channel) in out.iter_mut().zip(channels) {
            *value = match *channel {
                PillarChannel::Feature(k) => columns[k].value(i),
                PillarChannel::XCluster => x - mean[0],
                PillarChannel::YCluster => y - mean[1],
                PillarChannel::ZCluster => z - mean[2],
                PillarChannel::XCenter => x - center[0],
                PillarChannel::YCenter => y - center[1],
                PillarChannel::ZCenter => z - center[2],
                PillarChannel::Zero => 0.0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::manifest::PillarFeatureOrder;

    fn spec(order: PillarFeatureOrder, layout: EncoderLayout, max_points: usize, max_pillars: usize) -> PillarSpec {
        let features: Vec<PointFeature> = ["x", "y", "z", "intensity"]
            .iter()
            .map(|s| PointFeature::raw(s))
            .collect();
        PillarSpec {
            grid: PillarGrid::new([0.0, -2.0, -3.0, 4.0, 2.0, 1.0], [1.0, 1.0, 4.0]),
            max_points_per_pillar: max_points,
            max_pillars,
            channels: order.channels(features.len()),
            features,
            layout,
        }
    }

    #[test]
    fn grid_cells_follow_the_floor_rule_and_reject_out_of_range() {
        let g = PillarGrid::new([0.0, -2.0, -3.0, 4.0, 2.0, 1.0], [1.0, 1.0, 4.0]);
        assert_eq!((g.nx, g.ny), (4, 4));
        assert_eq!(g.cell_of(0.0, -2.0, -3.0), Some((0, 0)));
        assert_eq!(g.cell_of(3.99, 1.99, 0.99), Some((3, 3)));
        assert_eq!(g.cell_of(4.0, 0.0, 0.0), None);
        assert_eq!(g.cell_of(1.0, 0.0, 1.0), None);
        assert_eq!(g.cell_of(-0.01, 0.0, 0.0), None);
        assert_eq!(g.cell_of(f32::NAN, 0.0, 0.0), None);
        assert_eq!(g.center_of(1, 2), [1.5, 0.5, -1.0]);
    }

    #[test]
    fn limits_keep_the_first_points_and_pillars() {
        // Three points in cell (0, 2), one in (3, 0), one in (1, 1); limit 2 points, 2 pillars.
        let cloud = PointCloud::from_columns(
            vec![0.1, 0.2, 3.5, 0.3, 1.5],
            vec![0.1, 0.2, -1.5, 0.3, -0.5],
            vec![0.0; 5],
            vec![1.0, 2.0, 3.0, 4.0, 5.0],
        )
        .unwrap();
        let s = spec(PillarFeatureOrder::Raw, EncoderLayout::PointMajor, 2, 2);
        let p = pillarize(&cloud, &s, PillarRows::Fixed(3)).unwrap();
        assert_eq!(p.cells, vec![(0, 2), (3, 0)]);
        assert_eq!(p.num_points, vec![2, 1]);
        assert_eq!(p.shape, vec![3, 2, 4]);
        // Pillar 0 holds points 0 and 1 (intensities 1 and 2), point 3 was dropped.
        assert_eq!(p.features[3], 1.0);
        assert_eq!(p.features[7], 2.0);
        assert_eq!(p.features[8 + 3], 3.0);
        assert!(p.features[8 + 4..].iter().all(|v| *v == 0.0));

        let trimmed = pillarize(&cloud, &s, PillarRows::Trim).unwrap();
        assert_eq!(trimmed.shape, vec![2, 2, 4]);
        let empty = pillarize(&PointCloud::new(), &s, PillarRows::Trim).unwrap();
        assert_eq!((empty.count(), empty.shape.clone()), (0, vec![1, 2, 4]));
    }

    #[test]
    fn channel_major_is_the_transpose_of_point_major() {
        let cloud = PointCloud::from_columns(
            vec![0.1, 0.7, 2.5, 2.6],
            vec![0.1, 0.4, 1.5, 1.1],
            vec![-1.0, 0.5, 0.0, -2.0],
            vec![9.0, 8.0, 7.0, 6.0],
        )
        .unwrap();
        let pm = pillarize(
            &cloud,
            &spec(PillarFeatureOrder::Openpcdet, EncoderLayout::PointMajor, 3, 8),
            PillarRows::Fixed(4),
        )
        .unwrap();
        let cm = pillarize(
            &cloud,
            &spec(PillarFeatureOrder::Openpcdet, EncoderLayout::ChannelMajor, 3, 8),
            PillarRows::Fixed(4),
        )
        .unwrap();
        assert_eq!(cm.shape, vec![1, 10, 4, 3]);
        for p in 0..4 {
            for s in 0..3 {
                for c in 0..10 {
                    assert_eq!(pm.features[(p * 3 + s) * 10 + c], cm.features[(c * 4 + p) * 3 + s]);
                }
            }
        }
    }

    #[test]
    fn missing_channels_are_reported() {
        let mut s = spec(PillarFeatureOrder::Raw, EncoderLayout::PointMajor, 2, 2);
        s.features[3] = PointFeature::raw("time_lag");
        let err = pillarize(&PointCloud::new(), &s, PillarRows::Trim).unwrap_err();
        assert_eq!(err, PillarError::MissingChannel("time_lag".into()));
    }
}
