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
    /// A channel takes a point feature the spec does not have.
    #[error("channel `feature {index}` but the spec has {count} point features")]
    FeatureIndex {
        /// The channel's feature index.
        index: usize,
        /// Point features in the spec.
        count: usize,
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
        let fx = (x - self.min[0]) / self.size[0];
        let fy = (y - self.min[1]) / self.size[1];
        let fz = (z - self.min[2]) / self.size[2];
        // floor(f) == 0 ⇔ 0 ≤ f < 1, and for f ≥ 0 the truncating cast is the floor (and
        // saturates, so huge values fail the bound check). Negated comparisons reject NaN.
        if !(fx >= 0.0 && fy >= 0.0 && (0.0..1.0).contains(&fz)) {
            return None;
        }
        // u32, not usize: f32 → u64 casts cost about four times the instructions on x86-64.
        let (ix, iy) = (fx as u32 as usize, fy as u32 as usize);
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

/// A sweep's pillars, ready to feed to an encoder. Reusing one `Pillars` across sweeps
/// ([`pillarize_into`]) keeps its buffers: only the rows and cells the last sweep touched are reset.
/// Two `Pillars` are equal when their tensor, shape, cells and counts are (scratch is not compared).
#[derive(Debug, Clone, Default)]
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
    /// Scratch: pillar index per grid cell, reset cell by cell.
    pillar_of_cell: CellTable,
    /// Scratch: the cloud index of each kept point, `max_points_per_pillar` slots per pillar (a
    /// counting sort of the points by pillar; slots past a pillar's count are never read).
    point_of_slot: Vec<u32>,
    /// Scratch: sum of `[x, y, z]` over each pillar's kept points, and their count.
    sums: Vec<PillarSum>,
    /// Points per row written by the previous sweep (the slots that may hold stale values).
    previous_num_points: Vec<u32>,
    /// Scratch: the `tanh` point features some channel reads, computed column by column before
    /// pass 2 (one buffer per feature, resized to the cloud).
    tanh_columns: Vec<Vec<f32>>,
}

impl PartialEq for Pillars {
    fn eq(&self, other: &Self) -> bool {
        self.features == other.features
            && self.shape == other.shape
            && self.cells == other.cells
            && self.num_points == other.num_points
            && self.rows == other.rows
    }
}

/// The running sum of a pillar's kept points and their count (one cache line holds four).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct PillarSum {
    xyz: [f32; 3],
    count: u32,
}

/// The grid's cell → pillar table: u16 entries when every pillar index fits (half the cache
/// footprint of the random lookups in pass 1), u32 otherwise; the type's maximum means "no pillar".
#[derive(Debug, Clone, PartialEq)]
enum CellTable {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Default for CellTable {
    fn default() -> Self {
        Self::Wide(Vec::new())
    }
}

/// A pillar index as stored in the cell table.
trait PillarIndex: Copy + Eq {
    /// "No pillar in this cell".
    const NONE: Self;
    /// `p`, which the caller keeps below `NONE`.
    fn from_index(p: usize) -> Self;
    fn index(self) -> usize;
}

impl PillarIndex for u16 {
    const NONE: Self = u16::MAX;
    #[inline]
    fn from_index(p: usize) -> Self {
        p as u16
    }
    #[inline]
    fn index(self) -> usize {
        self as usize
    }
}

impl PillarIndex for u32 {
    const NONE: Self = u32::MAX;
    #[inline]
    fn from_index(p: usize) -> Self {
        p as u32
    }
    #[inline]
    fn index(self) -> usize {
        self as usize
    }
}

impl CellTable {
    /// Readies the table for a grid of `cell_count` cells and `pillar_limit` pillars: clears the
    /// `touched` cells of the previous sweep, or allocates when the size or entry width changed.
    fn prepare(&mut self, cell_count: usize, pillar_limit: usize, touched: &[(u32, u32)], nx: usize) {
        fn clear<T: PillarIndex>(table: &mut [T], touched: &[(u32, u32)], nx: usize) {
            for &(ix, iy) in touched {
                if let Some(entry) = table.get_mut(iy as usize * nx + ix as usize) {
                    *entry = T::NONE;
                }
            }
        }
        let narrow = pillar_limit <= u16::MAX as usize;
        match self {
            Self::Narrow(table) if narrow && table.len() == cell_count => clear(table, touched, nx),
            Self::Wide(table) if !narrow && table.len() == cell_count => clear(table, touched, nx),
            _ if narrow => *self = Self::Narrow(vec![u16::NONE; cell_count]),
            _ => *self = Self::Wide(vec![u32::NONE; cell_count]),
        }
    }
}

impl Pillars {
    /// Number of real (non-padding) pillars.
    pub fn count(&self) -> usize {
        self.cells.len()
    }
}

/// One point feature resolved against a cloud: its column (or constant zero) and normalisation.
#[derive(Clone, Copy)]
struct FeatureColumn<'a> {
    values: Option<&'a [f32]>,
    /// 0, 1, 2 when the source is x, y, z.
    axis: Option<usize>,
    scale: f32,
    offset: f32,
    tanh: bool,
}

impl FeatureColumn<'_> {
    /// `raw · scale + offset` of point `i` (`tanh` features are computed beforehand, [`tanh_column`]).
    #[inline]
    fn value(&self, i: usize) -> f32 {
        let Some(raw) = self.values.and_then(|values| values.get(i)) else {
            return 0.0;
        };
        raw * self.scale + self.offset
    }

    /// `raw · 1 + 0` without tanh: the raw value, except that −0 becomes +0 (as `raw − (−0)` does).
    fn is_identity(&self) -> bool {
        self.scale == 1.0 && self.offset.to_bits() == 0 && !self.tanh
    }
}

/// `tanh(raw · scale + offset)` of each value of `raw` into `out` (as far as the shorter goes):
/// f64 `tanh` of the f32 `raw · scale + offset`, rounded to f32.
///
/// Branch-free and without libm calls, so the loop vectorises (two f64 lanes on baseline x86-64):
/// `±tanh(|v|)` ([`tanh_to_10`]); `v` itself when `|v| < 2⁻¹²` (`tanh(v) = v − v³/3 + …` is within
/// half an ulp of `v`; also ±0 and NaN); `|v|` clamped to 10, where `tanh` rounds to 1 in f32
/// (also ±∞).
pub fn tanh_column(raw: &[f32], scale: f32, offset: f32, out: &mut [f32]) {
    for (o, &r) in out.iter_mut().zip(raw) {
        let v = r * scale + offset;
        let a = f64::from(v.abs());
        let t = (tanh_to_10(if a < 10.0 { a } else { 10.0 }) as f32).copysign(v);
        *o = if v.abs() >= 1.0 / 4096.0 { t } else { v };
    }
}

/// `ln 2` split for Cody–Waite reduction: the high part has 21 significant bits, so `n · LN2_HI`
/// is exact for `|n| < 2³²`; the low part is the rest, `ln 2 − LN2_HI`, rounded to f64.
const LN2_HI: f64 = f64::from_bits(std::f64::consts::LN_2.to_bits() & !0xffff_ffff);
const LN2_LO: f64 = 4.749_325_039_031_672_6e-7;
/// `1.5 · 2⁵²`: adding it to a value below 2⁵¹ in magnitude rounds the value to an integer held in
/// the low mantissa bits of the sum.
const ROUND_SHIFT: f64 = 6_755_399_441_055_744.0;

/// `tanh(a)` for `0 ≤ a ≤ 10` (not checked), within about 4 ulp; branch-free, one division.
///
/// `tanh(a) = (eʸ − 1) / (eʸ + 1)`, `y = 2a = n ln 2 + r` with `n = round(y / ln 2)` (0 ≤ n ≤ 29)
/// and `|r| ≤ ln 2 / 2` (Cody–Waite: `y − n · LN2_HI` is exact), so `eʸ = 2ⁿ eʳ` with `2ⁿ` built
/// from its exponent bits. `eʳ` is the diagonal Padé approximant of degree 6, `(E + O) / (E − O)`
/// with `E`, `O` its even and odd parts (integer coefficients `(12 − k)! / (k! (6 − k)!)`, exact in
/// f64; relative error below 2 · 10⁻¹⁹ for `|r| ≤ ln 2 / 2`). Multiplied through by `E − O`:
/// `tanh(a) = ((2ⁿ − 1) E + (2ⁿ + 1) O) / ((2ⁿ + 1) E + (2ⁿ − 1) O)`, where `2ⁿ ± 1` are exact and
/// `n = 0` (small `a`) leaves `O / E` — no cancellation, as with `expm1`.
#[inline(always)]
fn tanh_to_10(a: f64) -> f64 {
    let y = 2.0 * a;
    let shifted = y * std::f64::consts::LOG2_E + ROUND_SHIFT;
    let n = shifted - ROUND_SHIFT;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    // The low 12 bits of `shifted`'s representation are n; n + 1023 is 2ⁿ's biased exponent.
    let two_n = f64::from_bits(shifted.to_bits().wrapping_add(1023) << 52);
    let s = r * r;
    let even = ((s + 840.0) * s + 75_600.0) * s + 665_280.0;
    let odd = r * ((42.0 * s + 10_080.0) * s + 332_640.0);
    let (minus, plus) = (two_n - 1.0, two_n + 1.0);
    (minus * even + plus * odd) / (plus * even + minus * odd)
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
                axis: ["x", "y", "z"].iter().position(|axis| f.source == *axis),
                scale: f.scale,
                offset: f.offset,
                tanh: f.tanh,
            })
        })
        .collect()
}

/// Per-point values a channel can start from: `[x, y, z, 0, features…]`; features begin here.
const POINT_XYZ0: usize = 4;
/// Per-pillar values a channel can subtract: `[0, x̄, ȳ, z̄, x_c, y_c, z_c, −0]` (a power of two,
/// so a masked index needs no bounds check).
const PILLAR_VALUES: usize = 8;
/// The pillar value −0: `raw − (−0)` is `raw · 1 + 0` bit for bit (−0 becomes +0, all else is
/// kept), so identity-normalised features skip the multiply-add, and x, y, z ones the load too.
const PILLAR_NEGATIVE_ZERO: usize = 7;
/// Point values the fixed-width writers hold: x, y, z, 0 and up to 12 point features.
const FIXED_POINT_VALUES: usize = 16;

/// One encoder channel as `point value[point] − pillar value[pillar]`.
#[derive(Debug, Clone, Copy)]
struct ChannelRecipe {
    point: usize,
    pillar: usize,
}

impl ChannelRecipe {
    /// The recipe of `channel`; features from a `zero` source read the constant 0 point value,
    /// identity-normalised ones their raw value (x, y, z: the point's own) minus −0.
    fn of(channel: PillarChannel, columns: &[FeatureColumn]) -> Self {
        let (point, pillar) = match channel {
            PillarChannel::Feature(k) => match columns.get(k) {
                Some(column) if column.values.is_some() && column.is_identity() => {
                    (column.axis.unwrap_or(POINT_XYZ0 + k), PILLAR_NEGATIVE_ZERO)
                }
                Some(column) if column.values.is_some() => (POINT_XYZ0 + k, 0),
                _ => (3, 0),
            },
            PillarChannel::Zero => (3, 0),
            PillarChannel::XCluster => (0, 1),
            PillarChannel::YCluster => (1, 2),
            PillarChannel::ZCluster => (2, 3),
            PillarChannel::XCenter => (0, 4),
            PillarChannel::YCenter => (1, 5),
            PillarChannel::ZCenter => (2, 6),
        };
        Self { point, pillar }
    }
}

/// Turns a point's values and its pillar's values into the point's encoder channels.
trait ChannelWriter: Clone + Sync {
    /// What the writer keeps per pillar.
    type PillarPart;
    /// Channels per point (a constant for the fixed-width writers).
    fn width(&self) -> usize;
    /// The per-pillar part, from `[0, x̄, ȳ, z̄, x_c, y_c, z_c, −0]`.
    fn pillar_part(&self, values: &[f32; PILLAR_VALUES]) -> Self::PillarPart;
    /// Writes one point's channels into `out` (one row of the channel count).
    fn write(&self, point: &[f32], pillar: &Self::PillarPart, out: &mut [f32]);
    /// Writes one point's channels at `at` of each plane (one plane per channel).
    fn write_planes(&self, point: &[f32], pillar: &Self::PillarPart, planes: &mut [&mut [f32]], at: usize);
}

/// Any channel list: each channel picks its two operands through its recipe.
#[derive(Clone)]
struct AnyChannels {
    recipes: Vec<ChannelRecipe>,
}

impl ChannelWriter for AnyChannels {
    type PillarPart = [f32; PILLAR_VALUES];

    fn width(&self) -> usize {
        self.recipes.len()
    }

    fn pillar_part(&self, values: &[f32; PILLAR_VALUES]) -> Self::PillarPart {
        *values
    }

    #[inline]
    fn write(&self, point: &[f32], pillar: &Self::PillarPart, out: &mut [f32]) {
        for (v, recipe) in out.iter_mut().zip(&self.recipes) {
            *v = point.get(recipe.point).copied().unwrap_or(0.0) - pillar[recipe.pillar & (PILLAR_VALUES - 1)];
        }
    }

    #[inline]
    fn write_planes(&self, point: &[f32], pillar: &Self::PillarPart, planes: &mut [&mut [f32]], at: usize) {
        for (rows, recipe) in planes.iter_mut().zip(&self.recipes) {
            if let Some(v) = rows.get_mut(at) {
                *v = point.get(recipe.point).copied().unwrap_or(0.0) - pillar[recipe.pillar & (PILLAR_VALUES - 1)];
            }
        }
    }
}

/// Exactly `C` channels whose operands lie in the first [`FIXED_POINT_VALUES`] point values: the
/// per-pillar operands are gathered once per pillar and the per-point loop unrolls into `C`
/// straight-line load–subtract–store steps. Same arithmetic as [`AnyChannels`], bit for bit.
#[derive(Clone, Copy)]
struct FixedChannels<const C: usize> {
    point: [usize; C],
    pillar: [usize; C],
}

impl<const C: usize> FixedChannels<C> {
    fn new(recipes: &[ChannelRecipe], point_values: usize) -> Option<Self> {
        let recipes: &[ChannelRecipe; C] = recipes.try_into().ok()?;
        (point_values <= FIXED_POINT_VALUES).then(|| Self {
            point: recipes.map(|r| r.point),
            pillar: recipes.map(|r| r.pillar),
        })
    }
}

impl<const C: usize> ChannelWriter for FixedChannels<C> {
    type PillarPart = [f32; C];

    #[inline]
    fn width(&self) -> usize {
        C
    }

    fn pillar_part(&self, values: &[f32; PILLAR_VALUES]) -> Self::PillarPart {
        self.pillar.map(|k| values[k & (PILLAR_VALUES - 1)])
    }

    #[inline]
    fn write(&self, point: &[f32], pillar: &Self::PillarPart, out: &mut [f32]) {
        let (Some(point), Some(out)) = (point.first_chunk::<FIXED_POINT_VALUES>(), out.first_chunk_mut::<C>()) else {
            return;
        };
        for k in 0..C {
            out[k] = point[self.point[k] & (FIXED_POINT_VALUES - 1)] - pillar[k];
        }
    }

    #[inline]
    fn write_planes(&self, point: &[f32], pillar: &Self::PillarPart, planes: &mut [&mut [f32]], at: usize) {
        let (Some(point), Some(planes)) = (point.first_chunk::<FIXED_POINT_VALUES>(), planes.first_chunk_mut::<C>())
        else {
            return;
        };
        for k in 0..C {
            if let Some(v) = planes[k].get_mut(at) {
                *v = point[self.point[k] & (FIXED_POINT_VALUES - 1)] - pillar[k];
            }
        }
    }
}

/// What pass 2 reads: the cloud's columns, pass 1's assignment and the previous sweep's counts.
/// `Copy`, so each parallel task takes a local copy whose fields the compiler keeps out of loops.
#[derive(Clone, Copy)]
struct PassTwo<'a> {
    grid: PillarGrid,
    xyz: [&'a [f32]; 3],
    /// The point features some channel reads as stored: identity-normalised ones and the
    /// precomputed `tanh` ones (point value slot, column).
    raw_features: &'a [(usize, &'a [f32])],
    /// The scaled or offset point features some channel reads: (point value slot, column).
    features: &'a [(usize, FeatureColumn<'a>)],
    /// Length of a point's value array (≥ [`FIXED_POINT_VALUES`]).
    point_values: usize,
    /// Points per pillar slot count.
    m: usize,
    cells: &'a [(u32, u32)],
    sums: &'a [PillarSum],
    num_points: &'a [u32],
    previous_num_points: &'a [u32],
    point_of_slot: &'a [u32],
}

impl PassTwo<'_> {
    /// Pillar `p`'s kept points, and the slots that may hold stale values from the last sweep.
    #[inline]
    fn row_points(&self, p: usize) -> (usize, usize) {
        let n = self.num_points.get(p).map_or(0, |&n| n as usize);
        let stale = self.previous_num_points.get(p).map_or(0, |&v| v as usize).max(n);
        (n, stale)
    }

    /// `[0, x̄, ȳ, z̄, x_c, y_c, z_c, −0]` of pillar `p`, the mean from f32 sums as OpenPCDet has it.
    fn pillar_values(&self, p: usize) -> [f32; PILLAR_VALUES] {
        let n = self.num_points.get(p).map_or(1, |&n| n.max(1)) as f32;
        let sum = self.sums.get(p).map_or([0.0; 3], |s| s.xyz);
        let (ix, iy) = self.cells.get(p).copied().unwrap_or_default();
        let center = self.grid.center_of(ix as usize, iy as usize);
        [
            0.0,
            sum[0] / n,
            sum[1] / n,
            sum[2] / n,
            center[0],
            center[1],
            center[2],
            -0.0,
        ]
    }

    /// Point `i`'s values `[x, y, z, 0, features…]` (slot 3 and unread features stay 0).
    #[inline]
    fn load_point(&self, i: usize, point: &mut [f32]) {
        let [xs, ys, zs] = self.xyz;
        if let (Some(&x), Some(&y), Some(&z), Some(head)) = (xs.get(i), ys.get(i), zs.get(i), point.first_chunk_mut()) {
            *head = [x, y, z];
        }
        for &(slot, values) in self.raw_features {
            if let (Some(v), Some(&raw)) = (point.get_mut(slot), values.get(i)) {
                *v = raw;
            }
        }
        for (slot, column) in self.features {
            if let Some(v) = point.get_mut(*slot) {
                *v = column.value(i);
            }
        }
    }

    /// Writes pillar `p`'s `n` kept points as rows of `c` channels at the start of `rows`.
    #[inline]
    fn write_pillar<W: ChannelWriter>(&self, writer: &W, p: usize, n: usize, point: &mut [f32], rows: &mut [f32]) {
        let pillar = writer.pillar_part(&self.pillar_values(p));
        let slots = self.point_of_slot.get(p * self.m..p * self.m + n).unwrap_or_default();
        for (row, &i) in rows.chunks_exact_mut(writer.width()).zip(slots) {
            self.load_point(i as usize, point);
            writer.write(point, &pillar, row);
        }
    }

    /// Fills the first `count` pillars' rows of `features` (`n_rows` rows in `layout`), zeroing
    /// slots that held points last time; parallel over pillars (point-major) or blocks of pillars.
    fn fill<W: ChannelWriter>(
        &self,
        writer: &W,
        c: usize,
        layout: EncoderLayout,
        features: &mut [f32],
        n_rows: usize,
        count: usize,
    ) {
        let m = self.m;
        if c == 0 || m == 0 || n_rows == 0 {
            return;
        }
        match layout {
            EncoderLayout::PointMajor => {
                // Blocks of pillars in parallel, so the writer's per-task setup is paid per block.
                const PILLARS_PER_BLOCK: usize = 256;
                features[..count * m * c]
                    .par_chunks_mut(PILLARS_PER_BLOCK * m * c)
                    .enumerate()
                    .for_each_init(
                        || vec![0.0f32; self.point_values],
                        |point, (b, block)| {
                            // Local copies, so the compiler keeps their fields out of the loops.
                            let (this, writer) = (*self, &writer.clone());
                            for (k, rows) in block.chunks_exact_mut(m * c).enumerate() {
                                let p = b * PILLARS_PER_BLOCK + k;
                                let (n, stale) = this.row_points(p);
                                this.write_pillar(writer, p, n, point, rows);
                                if stale > n
                                    && let Some(stale_rows) = rows.get_mut(n * c..stale * c)
                                {
                                    stale_rows.fill(0.0);
                                }
                            }
                        },
                    );
            }
            EncoderLayout::ChannelMajor => {
                // Blocks of pillars in parallel; a block holds its rows of every channel plane, so each
                // point is loaded once and written to all planes.
                const PILLARS_PER_BLOCK: usize = 512;
                let mut blocks: Vec<Vec<&mut [f32]>> = Vec::new();
                for plane in features.chunks_exact_mut(n_rows * m) {
                    for (b, rows) in plane[..count * m].chunks_mut(PILLARS_PER_BLOCK * m).enumerate() {
                        if b == blocks.len() {
                            blocks.push(Vec::with_capacity(c));
                        }
                        blocks[b].push(rows);
                    }
                }
                blocks.into_par_iter().enumerate().for_each_init(
                    || vec![0.0f32; self.point_values],
                    |point, (b, mut planes)| {
                        // Local copies, so the compiler keeps their fields out of the loops.
                        let (this, writer) = (*self, &writer.clone());
                        let first = b * PILLARS_PER_BLOCK;
                        let pillars_in_block = planes.first().map_or(0, |rows| rows.len() / m);
                        for p in first..first + pillars_in_block {
                            let (n, stale) = this.row_points(p);
                            let pillar = writer.pillar_part(&this.pillar_values(p));
                            let at = (p - first) * m;
                            let slots = this.point_of_slot.get(p * m..p * m + n).unwrap_or_default();
                            for (slot, &i) in slots.iter().enumerate() {
                                this.load_point(i as usize, point);
                                writer.write_planes(point, &pillar, &mut planes, at + slot);
                            }
                            if stale > n {
                                for rows in planes.iter_mut() {
                                    if let Some(stale_slots) = rows.get_mut(at + n..at + stale) {
                                        stale_slots.fill(0.0);
                                    }
                                }
                            }
                        }
                    },
                );
            }
        }
    }
}

/// Runs pass 2 with a [`FixedChannels`] writer when the channel count is one of the documented
/// orders' (4 raw, 9 and 10 decorated) and the point values fit, else with [`AnyChannels`].
fn fill_pillars(
    pass: &PassTwo<'_>,
    recipes: Vec<ChannelRecipe>,
    layout: EncoderLayout,
    features: &mut [f32],
    n_rows: usize,
    count: usize,
    specialise: bool,
) {
    let (c, v) = (recipes.len(), pass.point_values);
    if specialise {
        match c {
            4 => {
                if let Some(w) = FixedChannels::<4>::new(&recipes, v) {
                    return pass.fill(&w, c, layout, features, n_rows, count);
                }
            }
            9 => {
                if let Some(w) = FixedChannels::<9>::new(&recipes, v) {
                    return pass.fill(&w, c, layout, features, n_rows, count);
                }
            }
            10 => {
                if let Some(w) = FixedChannels::<10>::new(&recipes, v) {
                    return pass.fill(&w, c, layout, features, n_rows, count);
                }
            }
            _ => {}
        }
    }
    pass.fill(&AnyChannels { recipes }, c, layout, features, n_rows, count);
}

/// Pass 1's outputs: each pillar's cell and running sum, and the cloud index of each kept point.
struct Assignment<'a> {
    cells: &'a mut Vec<(u32, u32)>,
    sums: &'a mut Vec<PillarSum>,
    point_of_slot: &'a mut [u32],
    /// Points kept per pillar.
    m: usize,
    /// Pillars kept.
    pillar_limit: usize,
}

impl Assignment<'_> {
    /// Adds point `i` at `xyz`, which lies in grid cell `(ix, iy)`, unless its pillar is full or
    /// would be one too many.
    #[inline]
    fn add<T: PillarIndex>(&mut self, table: &mut [T], nx: usize, (ix, iy): (u32, u32), i: usize, xyz: [f32; 3]) {
        let Some(entry) = table.get_mut(iy as usize * nx + ix as usize) else {
            return;
        };
        let p = if *entry == T::NONE {
            if self.cells.len() >= self.pillar_limit {
                return;
            }
            *entry = T::from_index(self.cells.len());
            self.cells.push((ix, iy));
            self.sums.push(PillarSum::default());
            self.cells.len() - 1
        } else {
            entry.index()
        };
        let Some(sum) = self.sums.get_mut(p) else {
            return;
        };
        let n = sum.count as usize;
        if n < self.m {
            if let Some(slot) = self.point_of_slot.get_mut(p * self.m + n) {
                *slot = i as u32;
            }
            sum.xyz[0] += xyz[0];
            sum.xyz[1] += xyz[1];
            sum.xyz[2] += xyz[2];
            sum.count += 1;
        }
    }
}

/// Points per batch of pass 1's branch-free (vectorised) cell computation.
const CELL_BATCH: usize = 64;

/// Pass 1, sequential because "first come first kept" depends on point order: the dense cell table
/// maps each cell to its pillar, and each kept point's index goes to its pillar's next slot (a
/// counting sort), so pass 2 reads pillars in order without staging point values. The cells of a
/// batch of points are computed first without branches, which the compiler vectorises.
fn assign_points<T: PillarIndex>(
    grid: &PillarGrid,
    [xs, ys, zs]: [&[f32]; 3],
    table: &mut [T],
    mut out: Assignment<'_>,
) {
    let nx = grid.nx;
    // Below 2^22 cells a side, `0 ≤ f < n` ⇔ `0 ≤ floor(f) < n` (n is exact in f32), which is
    // `cell_of`'s rule, and the floor below is exact.
    if grid.nx >= 1 << 22 || grid.ny >= 1 << 22 {
        for (i, ((&x, &y), &z)) in xs.iter().zip(ys).zip(zs).enumerate() {
            if let Some((ix, iy)) = grid.cell_of(x, y, z) {
                out.add(table, nx, (ix as u32, iy as u32), i, [x, y, z]);
            }
        }
        return;
    }
    let ([x_min, y_min, z_min], [x_size, y_size, z_size]) = (grid.min, grid.size);
    let (nx_f, ny_f) = (grid.nx as f32, grid.ny as f32);
    let (mut ixs, mut iys) = ([0u32; CELL_BATCH], [u32::MAX; CELL_BATCH]);
    let batches = xs
        .chunks(CELL_BATCH)
        .zip(ys.chunks(CELL_BATCH))
        .zip(zs.chunks(CELL_BATCH));
    for (b, ((xb, yb), zb)) in batches.enumerate() {
        for ((((ix, iy), &x), &y), &z) in ixs.iter_mut().zip(iys.iter_mut()).zip(xb).zip(yb).zip(zb) {
            let fx = (x - x_min) / x_size;
            let fy = (y - y_min) / y_size;
            let fz = (z - z_min) / z_size;
            // Non-short-circuit `&`: no branches. NaN is in no range.
            let inside = (0.0..nx_f).contains(&fx) & (0.0..ny_f).contains(&fy) & (0.0..1.0).contains(&fz);
            *ix = floor_below_2_pow_22(fx);
            *iy = if inside { floor_below_2_pow_22(fy) } else { u32::MAX };
        }
        for (j, ((((&ix, &iy), &x), &y), &z)) in ixs.iter().zip(&iys).zip(xb).zip(yb).zip(zb).enumerate() {
            if iy != u32::MAX {
                out.add(table, nx, (ix, iy), b * CELL_BATCH + j, [x, y, z]);
            }
        }
    }
}

/// ⌊f⌋ for 0 ≤ f < 2^22, exactly, in vectorisable float and integer steps (a saturating
/// float → int cast is not, on baseline x86-64); any value for other f.
#[inline]
fn floor_below_2_pow_22(f: f32) -> u32 {
    // Adding 2^23 rounds f to the nearest integer r (ties to even) in the low mantissa bits.
    const TWO_POW_23: f32 = 8_388_608.0;
    let r = (f + TWO_POW_23).to_bits() & 0x007f_ffff;
    // r − 1 when rounding went up; r < 2^23 converts to f32 exactly.
    r.wrapping_sub(u32::from(r as i32 as f32 > f))
}

/// Readies `out.features` for `shape` (`n_rows` rows of `m` slots of `c` channels in `layout`),
/// keeping the invariant that every value is zero except the first `previous_num_points[p]` slots
/// of row `p`. A trimmed tensor changes its row count every sweep; reallocating it each time (a
/// fresh zeroed buffer of tens of MB) costs more in page faults than pillarising, so a change of
/// the row count alone reuses the buffer: point-major rows keep their offsets (the buffer is
/// truncated, or grown with zero rows); channel-major planes move, so last sweep's values are
/// cleared at their old places first. Other shape changes allocate afresh.
fn resize_features(out: &mut Pillars, shape: &[usize], layout: EncoderLayout, n_rows: usize, m: usize, c: usize) {
    let len = n_rows * m * c;
    if out.shape == shape && out.features.len() == len {
        return;
    }
    let (old_rows, same_width) = match (layout, out.shape.as_slice()) {
        (EncoderLayout::PointMajor, &[rows, om, oc]) => (rows, om == m && oc == c),
        (EncoderLayout::ChannelMajor, &[1, oc, rows, om]) => (rows, om == m && oc == c),
        _ => (0, false),
    };
    if !same_width || out.features.len() != old_rows * m * c {
        out.features = vec![0.0; len];
        out.previous_num_points.clear();
        return;
    }
    if layout == EncoderLayout::ChannelMajor {
        for plane in out.features.chunks_exact_mut(old_rows * m) {
            for (p, &n) in out.previous_num_points.iter().enumerate().take(old_rows) {
                if let Some(slots) = plane.get_mut(p * m..p * m + n as usize) {
                    slots.fill(0.0);
                }
            }
        }
        out.previous_num_points.clear();
    }
    if len > out.features.capacity() {
        // Room for a few larger sweeps before the next reallocation.
        out.features.reserve_exact(len + len / 4 - out.features.len());
    }
    out.features.resize(len, 0.0);
}

/// Builds the encoder input for `cloud`: assigns points to pillars in point order (a pillar is
/// created by its first point; pillars beyond the limit and points beyond a pillar's limit are
/// dropped), then fills each kept point's channels. Rows (or channel planes) are built in parallel.
pub fn pillarize(cloud: &PointCloud, spec: &PillarSpec, rows: PillarRows) -> Result<Pillars, PillarError> {
    let mut pillars = Pillars::default();
    pillarize_into(cloud, spec, rows, &mut pillars)?;
    Ok(pillars)
}

/// As [`pillarize`], reusing `out`'s buffers (no large allocation or page faults in steady state).
pub fn pillarize_into(
    cloud: &PointCloud,
    spec: &PillarSpec,
    rows: PillarRows,
    out: &mut Pillars,
) -> Result<(), PillarError> {
    pillarize_with(cloud, spec, rows, out, true)
}

/// [`pillarize_into`], with pass 2's fixed-width writers (`specialise`) or always the generic one.
fn pillarize_with(
    cloud: &PointCloud,
    spec: &PillarSpec,
    rows: PillarRows,
    out: &mut Pillars,
    specialise: bool,
) -> Result<(), PillarError> {
    let columns = resolve_columns(cloud, &spec.features)?;
    if let Some(index) = spec.channels.iter().find_map(|ch| match ch {
        PillarChannel::Feature(k) if *k >= columns.len() => Some(*k),
        _ => None,
    }) {
        return Err(PillarError::FeatureIndex {
            index,
            count: columns.len(),
        });
    }
    let grid = &spec.grid;
    let m = spec.max_points_per_pillar;
    let pillar_limit = match rows {
        PillarRows::Fixed(n) => spec.max_pillars.min(n),
        PillarRows::Trim => spec.max_pillars,
    };
    let (xs, ys, zs) = (cloud.x(), cloud.y(), cloud.z());
    let previous_count = out.cells.len();

    // Reset only what the previous sweep touched.
    out.pillar_of_cell
        .prepare(grid.nx * grid.ny, pillar_limit, &out.cells, grid.nx);
    std::mem::swap(&mut out.num_points, &mut out.previous_num_points);
    out.cells.clear();
    out.num_points.clear();
    out.sums.clear();
    // Grown, never cleared: pass 2 reads only the slots pass 1 filled.
    let slots_needed = pillar_limit.min(xs.len()).saturating_mul(m);
    if out.point_of_slot.len() < slots_needed {
        out.point_of_slot.resize(slots_needed, 0);
    }
    let assigned = Assignment {
        cells: &mut out.cells,
        sums: &mut out.sums,
        point_of_slot: &mut out.point_of_slot,
        m,
        pillar_limit,
    };
    match &mut out.pillar_of_cell {
        CellTable::Narrow(table) => assign_points(grid, [xs, ys, zs], table, assigned),
        CellTable::Wide(table) => assign_points(grid, [xs, ys, zs], table, assigned),
    }
    out.num_points.extend(out.sums.iter().map(|sum| sum.count));

    let count = out.cells.len();
    let n_rows = match rows {
        PillarRows::Fixed(n) => n,
        PillarRows::Trim => count.max(1),
    };
    let c = spec.channels.len();
    let shape = match spec.layout {
        EncoderLayout::PointMajor => vec![n_rows, m, c],
        EncoderLayout::ChannelMajor => vec![1, c, n_rows, m],
    };
    resize_features(out, &shape, spec.layout, n_rows, m, c);
    if previous_count > count {
        // Rows filled last time and padding now must be zero again.
        let stale = count..previous_count.min(n_rows);
        if !stale.is_empty() {
            match spec.layout {
                EncoderLayout::PointMajor => out.features[stale.start * m * c..stale.end * m * c].fill(0.0),
                EncoderLayout::ChannelMajor => out.features.par_chunks_mut(n_rows * m).for_each(|plane| {
                    plane[stale.start * m..stale.end * m].fill(0.0);
                }),
            }
        }
    }
    out.shape = shape;
    out.rows = n_rows;

    // Pass 2, parallel over pillars: every kept point's channels; slots that held points last
    // time are zeroed. Each channel is `point value − pillar value` picked from two small
    // per-point and per-pillar arrays, so the inner loop has no branch on the channel kind.
    let recipes: Vec<ChannelRecipe> = spec
        .channels
        .iter()
        .map(|&ch| ChannelRecipe::of(ch, &columns))
        .collect();
    let mut read = vec![false; columns.len()];
    for recipe in &recipes {
        if let Some(r) = recipe.point.checked_sub(POINT_XYZ0).and_then(|k| read.get_mut(k)) {
            *r = true;
        }
    }
    // `tanh` features: one vectorised pass over each column into a reused buffer (parallel over
    // chunks), which pass 2 then reads as it reads a raw column.
    let tanh_features: Vec<(usize, FeatureColumn)> = columns
        .iter()
        .enumerate()
        .filter(|(k, column)| read[*k] && column.values.is_some() && column.tanh)
        .map(|(k, column)| (POINT_XYZ0 + k, *column))
        .collect();
    out.tanh_columns.resize_with(tanh_features.len(), Vec::new);
    for (buffer, (_, column)) in out.tanh_columns.iter_mut().zip(&tanh_features) {
        const CHUNK: usize = 8192;
        let raw = column.values.unwrap_or_default();
        buffer.resize(raw.len(), 0.0);
        buffer
            .par_chunks_mut(CHUNK)
            .zip(raw.par_chunks(CHUNK))
            .for_each(|(values, raw)| tanh_column(raw, column.scale, column.offset, values));
    }
    let raw_features: Vec<(usize, &[f32])> = columns
        .iter()
        .enumerate()
        .filter(|(k, column)| read[*k] && column.is_identity())
        .filter_map(|(k, column)| Some((POINT_XYZ0 + k, column.values?)))
        .chain(
            tanh_features
                .iter()
                .zip(&out.tanh_columns)
                .map(|(&(slot, _), values)| (slot, values.as_slice())),
        )
        .collect();
    let features: Vec<(usize, FeatureColumn)> = columns
        .into_iter()
        .enumerate()
        .filter(|(k, column)| read[*k] && column.values.is_some() && !column.is_identity() && !column.tanh)
        .map(|(k, column)| (POINT_XYZ0 + k, column))
        .collect();
    let pass = PassTwo {
        grid: *grid,
        xyz: [xs, ys, zs],
        raw_features: &raw_features,
        features: &features,
        point_values: (POINT_XYZ0 + spec.features.len()).max(FIXED_POINT_VALUES),
        m,
        cells: &out.cells,
        sums: &out.sums,
        num_points: &out.num_points,
        previous_num_points: &out.previous_num_points,
        point_of_slot: &out.point_of_slot,
    };
    fill_pillars(
        &pass,
        recipes,
        spec.layout,
        &mut out.features,
        n_rows,
        count,
        specialise,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tanh_column` equals f64 `tanh` rounded to f32 on a dense grid over [−20, 20], around the
    /// 2⁻¹² and clamp thresholds and the steps of the range reduction, at tiny, signed-zero, huge and infinite inputs, with a scale and
    /// offset, and passes NaN through (each value also alone, so no lane or tail path is missed).
    #[test]
    fn tanh_column_is_the_rounded_f64_tanh() {
        let rounded = |x: f32| f64::from(x).tanh() as f32;
        let mut samples: Vec<f32> = (-400_000..=400_000).map(|k| k as f32 * 5e-5).collect();
        let grid = samples.len();
        samples.extend([1e-30, -1e-30, 1e-10, 2.4e-4, 2.45e-4, -3e-4, 0.0, -0.0, 1e6, -1e6]);
        samples.extend([f32::MIN_POSITIVE, -f32::MIN_POSITIVE, 1e-45, -1e-45, f32::MAX, f32::MIN]);
        samples.extend([f32::INFINITY, f32::NEG_INFINITY, 9.0, 10.0, 11.0]);
        // Where the reduction's n = round(2x / ln 2) steps.
        for k in 0..30 {
            let x = (k as f32 + 0.5) * std::f32::consts::LN_2 / 2.0;
            samples.extend([x.next_down(), x, x.next_up(), -x]);
        }
        for edge in [1.0f32 / 4096.0, 10.0] {
            let (mut below, mut above) = (edge, edge);
            for _ in 0..4 {
                (below, above) = (below.next_down(), above.next_up());
                samples.extend([below, above, -below, -above]);
            }
        }
        // `x · 1 + (−0)` is `x` bit for bit (`+ 0` would turn −0 into +0).
        let mut out = vec![f32::NAN; samples.len()];
        tanh_column(&samples, 1.0, -0.0, &mut out);
        for (&x, &t) in samples.iter().zip(&out) {
            assert_eq!(t.to_bits(), rounded(x).to_bits(), "tanh({x:e})");
        }
        for &x in &samples[grid..] {
            let mut one = [f32::NAN];
            tanh_column(&[x], 1.0, -0.0, &mut one);
            assert_eq!(one[0].to_bits(), rounded(x).to_bits(), "tanh({x:e}) alone");
        }
        let (scale, offset) = (3.0f32, -0.2f32);
        tanh_column(&samples, scale, offset, &mut out);
        for (&x, &t) in samples.iter().zip(&out) {
            assert_eq!(
                t.to_bits(),
                rounded(x * scale + offset).to_bits(),
                "tanh({x:e} · 3 − 0.2)"
            );
        }
        let nans = [f32::NAN, -f32::NAN, 0.5, f32::NAN];
        let mut out = [0.0f32; 4];
        tanh_column(&nans, 1.0, 0.0, &mut out);
        assert!(out[0].is_nan() && out[1].is_nan() && out[3].is_nan());
        assert_eq!(out[2], rounded(0.5));
        // The shorter of the two slices bounds the pass.
        let mut short = [7.0f32; 2];
        tanh_column(&[0.5, 0.5, 0.5], 1.0, 0.0, &mut short);
        assert_eq!(short, [rounded(0.5); 2]);
    }

    /// `tanh_column` equals f64 `tanh` rounded to f32 for every f32 of magnitude in [2⁻¹³, 11]
    /// (2 × 137 M values; below, both are `x`, above both are ±1). About 3 s in release:
    /// `cargo test --release --lib tanh_column_is_exact -- --ignored`.
    #[test]
    #[ignore = "exhaustive, seconds in release"]
    fn tanh_column_is_exact_on_every_f32_from_2_pow_minus_13_to_11() {
        let positive: Vec<f32> = ((1.0f32 / 8192.0).to_bits()..=11.0f32.to_bits())
            .map(f32::from_bits)
            .collect();
        let mut out = vec![0.0f32; positive.len()];
        for sign in [1.0f32, -1.0] {
            let xs: Vec<f32> = positive.iter().map(|x| sign * x).collect();
            tanh_column(&xs, 1.0, -0.0, &mut out);
            let wrong = xs
                .iter()
                .zip(&out)
                .filter(|&(&x, t)| t.to_bits() != (f64::from(x).tanh() as f32).to_bits())
                .count();
            assert_eq!(wrong, 0, "sign {sign}");
        }
    }

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
    fn reused_buffers_give_the_same_pillars_as_fresh_ones() {
        let big = PointCloud::from_columns(
            vec![0.1, 0.7, 2.5, 2.6, 3.5, 1.2],
            vec![0.1, 0.4, 1.5, 1.1, -1.5, -0.2],
            vec![-1.0, 0.5, 0.0, -2.0, 0.3, 0.1],
            vec![9.0, 8.0, 7.0, 6.0, 5.0, 4.0],
        )
        .unwrap();
        let small = PointCloud::from_columns(vec![3.1], vec![-1.9], vec![0.2], vec![1.0]).unwrap();
        for layout in [EncoderLayout::PointMajor, EncoderLayout::ChannelMajor] {
            let s = spec(PillarFeatureOrder::Openpcdet, layout, 3, 8);
            let mut reused = Pillars::default();
            for cloud in [&big, &small, &big] {
                pillarize_into(cloud, &s, PillarRows::Fixed(6), &mut reused).unwrap();
                let fresh = pillarize(cloud, &s, PillarRows::Fixed(6)).unwrap();
                assert_eq!(reused.features, fresh.features, "{layout:?}");
                assert_eq!(reused.cells, fresh.cells);
                assert_eq!(reused.num_points, fresh.num_points);
            }
        }
    }

    #[test]
    fn a_trimmed_point_major_tensor_keeps_its_buffer_when_only_the_pillar_count_changes() {
        // 1, 12, 2, 10 pillars: the row count shrinks and grows; the values stay those of a fresh
        // call and the buffer is not reallocated (a fresh one costs page faults every sweep).
        let cloud_of = |cells: &[(f32, f32)]| {
            let n = cells.len();
            PointCloud::from_columns(
                cells.iter().map(|c| c.0).collect(),
                cells.iter().map(|c| c.1).collect(),
                vec![0.25; n],
                (0..n).map(|k| k as f32).collect(),
            )
            .unwrap()
        };
        let six: Vec<(f32, f32)> = (0..12).map(|k| (0.5 + (k % 4) as f32, -1.5 + (k / 4) as f32)).collect();
        let clouds = [
            cloud_of(&six[..1]),
            cloud_of(&six),
            cloud_of(&six[4..6]),
            cloud_of(&six[2..]),
        ];
        for layout in [EncoderLayout::PointMajor, EncoderLayout::ChannelMajor] {
            let s = spec(PillarFeatureOrder::Openpcdet, layout, 3, 16);
            let mut reused = Pillars::default();
            let mut buffers = Vec::new();
            for cloud in &clouds {
                pillarize_into(cloud, &s, PillarRows::Trim, &mut reused).unwrap();
                let fresh = pillarize(cloud, &s, PillarRows::Trim).unwrap();
                assert_eq!(reused.shape, fresh.shape, "{layout:?}");
                let bits = |p: &Pillars| p.features.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&reused), bits(&fresh), "{layout:?}");
                buffers.push(reused.features.as_ptr());
            }
            assert_eq!(reused.count(), 10, "{layout:?}");
            // Equal to a fresh result although its scratch (cell table, slots, counts of the
            // previous sweep) differs; a changed value is not.
            let mut fresh = pillarize(&clouds[3], &s, PillarRows::Trim).unwrap();
            assert_eq!(reused, fresh, "{layout:?}");
            fresh.features[1] += 1.0;
            assert_ne!(reused, fresh, "{layout:?}");
            // The first sweep allocates, the second grows past it; the last two reuse it.
            assert_eq!(buffers[1], buffers[2], "{layout:?}");
            assert_eq!(buffers[2], buffers[3], "{layout:?}");
        }
    }

    #[test]
    fn batched_floor_is_exact_below_2_pow_22() {
        let mut values = vec![0.0f32, 0.49999997, 0.5, 0.50000006, 1.5, 2.5, 1e-30];
        for k in [1u32, 2, 3, 7, 100, 467, 468, 4095, 1 << 20, (1 << 22) - 1] {
            let f = k as f32;
            values.extend([f, f.next_down(), f.next_up(), f + 0.25, f + 0.5, f + 0.75, f - 0.5]);
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            values.push(unit * 500.0);
            values.push(unit * (1 << 22) as f32);
        }
        for f in values.into_iter().filter(|f| (0.0..(1 << 22) as f32).contains(f)) {
            assert_eq!(floor_below_2_pow_22(f), f.floor() as u32, "{f}");
        }
    }

    #[test]
    fn fixed_width_writers_match_the_generic_writer_bit_for_bit() {
        // 2,000 points, many per 1 m cell (points dropped), 20 cells for 12 pillars (pillars dropped).
        let mut unit = crate::detect::test_rng::unit_floats(0x9e37_79b9_7f4a_7c15u64);
        let mut columns: [Vec<f32>; 5] = Default::default();
        for _ in 0..2000 {
            columns[0].push(-0.5 + 5.0 * unit());
            columns[1].push(-2.5 + 5.0 * unit());
            columns[2].push(-3.2 + 4.4 * unit());
            columns[3].push(unit() - 0.2);
            columns[4].push(0.1 * unit());
        }
        let [x, y, z, i, t] = columns;
        let mut cloud = PointCloud::from_columns(x, y, z, i).unwrap();
        cloud.add_channel("time_lag", ChannelData::F32(t)).unwrap();
        let mut scaled = PointFeature::raw("intensity");
        (scaled.scale, scaled.offset, scaled.tanh) = (3.0, -0.2, true);
        let feature_lists = [
            vec!["x", "y", "z", "intensity"],
            vec!["x", "y", "z", "intensity", "time_lag"],
            vec!["x", "y", "z", "zero"],
            vec!["x", "y", "z", "scaled"],
        ];
        let orders = [
            PillarFeatureOrder::Openpcdet,
            PillarFeatureOrder::Mmdet3dLegacy,
            PillarFeatureOrder::Centerpoint,
            PillarFeatureOrder::PointpillarsCenterOffset,
            PillarFeatureOrder::Raw,
        ];
        let mut fixed_widths = 0;
        for names in feature_lists {
            for order in &orders {
                for layout in [EncoderLayout::PointMajor, EncoderLayout::ChannelMajor] {
                    let mut s = spec(order.clone(), layout, 6, 12);
                    s.features = names
                        .iter()
                        .map(|&n| {
                            if n == "scaled" {
                                scaled.clone()
                            } else {
                                PointFeature::raw(n)
                            }
                        })
                        .collect();
                    s.channels = order.channels(s.features.len());
                    fixed_widths += usize::from(matches!(s.channels.len(), 4 | 9 | 10));
                    for rows in [PillarRows::Fixed(12), PillarRows::Fixed(15), PillarRows::Trim] {
                        let (mut fast, mut generic) = (Pillars::default(), Pillars::default());
                        pillarize_with(&cloud, &s, rows, &mut fast, true).unwrap();
                        pillarize_with(&cloud, &s, rows, &mut generic, false).unwrap();
                        assert_eq!(fast.count(), 12);
                        assert!(fast.num_points.contains(&6));
                        assert_eq!(fast.cells, generic.cells);
                        assert_eq!(fast.num_points, generic.num_points);
                        let bits = |p: &Pillars| p.features.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&fast), bits(&generic), "{order:?} {layout:?} {rows:?} {names:?}");
                    }
                }
            }
        }
        assert!(fixed_widths >= 20, "{fixed_widths}");
    }

    #[test]
    fn missing_channels_are_reported() {
        let mut s = spec(PillarFeatureOrder::Raw, EncoderLayout::PointMajor, 2, 2);
        s.features[3] = PointFeature::raw("time_lag");
        let err = pillarize(&PointCloud::new(), &s, PillarRows::Trim).unwrap_err();
        assert_eq!(err, PillarError::MissingChannel("time_lag".into()));
        let mut s = spec(PillarFeatureOrder::Raw, EncoderLayout::PointMajor, 2, 2);
        s.channels.push(PillarChannel::Feature(4));
        let err = pillarize(&PointCloud::new(), &s, PillarRows::Trim).unwrap_err();
        assert_eq!(err, PillarError::FeatureIndex { index: 4, count: 4 });
    }
}
