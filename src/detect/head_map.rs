//! `HeadMap`, a read-only view of one head output map in NCHW or NHWC layout, and `DecodedBox`,
//! what every decoder returns.

use super::manifest::{MapLayout, ScoreActivation};
use crate::geometry::Box3;

/// One `[1, C, H, W]` or `[1, H, W, C]` head output.
#[derive(Debug, Clone, Copy)]
pub struct HeadMap<'a> {
    data: &'a [f32],
    channels: usize,
    height: usize,
    width: usize,
    layout: MapLayout,
}

impl<'a> HeadMap<'a> {
    /// A view of `data`, or `None` when its length is not `channels · height · width`.
    pub fn new(data: &'a [f32], channels: usize, height: usize, width: usize, layout: MapLayout) -> Option<Self> {
        (data.len() == channels * height * width).then_some(Self {
            data,
            channels,
            height,
            width,
            layout,
        })
    }

    /// The value of channel `c` at row `y`, column `x`.
    #[inline]
    pub fn at(&self, c: usize, y: usize, x: usize) -> f32 {
        match self.layout {
            MapLayout::Nchw => self.data[(c * self.height + y) * self.width + x],
            MapLayout::Nhwc => self.data[(y * self.width + x) * self.channels + c],
        }
    }

    /// Calls `found(c, y · width + x)` for every value ≥ `floor`, in memory order (NaN never is).
    pub fn for_each_at_least(&self, floor: f32, mut found: impl FnMut(usize, usize)) {
        let cells = self.height * self.width;
        match self.layout {
            MapLayout::Nchw => {
                for (c, plane) in self.data.chunks_exact(cells.max(1)).enumerate() {
                    for (cell, &v) in plane.iter().enumerate() {
                        if v >= floor {
                            found(c, cell);
                        }
                    }
                }
            }
            MapLayout::Nhwc => {
                for (cell, values) in self.data.chunks_exact(self.channels.max(1)).enumerate() {
                    for (c, &v) in values.iter().enumerate() {
                        if v >= floor {
                            found(c, cell);
                        }
                    }
                }
            }
        }
    }

    /// Channels.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Rows (H).
    pub fn height(&self) -> usize {
        self.height
    }

    /// Columns (W).
    pub fn width(&self) -> usize {
        self.width
    }
}

/// The expected shape of a `[1, C, H, W]` map in `layout`.
pub fn map_shape(channels: usize, height: usize, width: usize, layout: MapLayout) -> [usize; 4] {
    match layout {
        MapLayout::Nchw => [1, channels, height, width],
        MapLayout::Nhwc => [1, height, width, channels],
    }
}

/// A box straight out of a decoder, before NMS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodedBox {
    /// The box in the detector's (sensor) frame.
    pub box3: Box3,
    /// Index into the decoder's label list.
    pub label: usize,
    /// Score in [0, 1].
    pub score: f32,
    /// Velocity `(vx, vy)` in m/s where the head predicts one.
    pub velocity: Option<[f64; 2]>,
}

/// A raw head value below which [`activate`] cannot reach `threshold`, so decoders can skip such
/// cells before computing the activation (and then apply the exact test to the rest); `None` when
/// no such bound is safe (a threshold outside [10⁻⁴, 0.999] with the sigmoid, or not finite).
pub fn candidate_floor(activation: ScoreActivation, threshold: f32) -> Option<f32> {
    match activation {
        ScoreActivation::None => threshold.is_finite().then_some(threshold),
        ScoreActivation::Sigmoid if (1e-4..=0.999).contains(&threshold) => {
            let t = threshold as f64;
            // The logit, lowered well past the f32 sigmoid's rounding error at these thresholds.
            Some(((t / (1.0 - t)).ln() - 0.01) as f32)
        }
        ScoreActivation::Sigmoid => None,
    }
}

/// Applies the manifest's score activation.
#[inline]
pub fn activate(value: f32, activation: ScoreActivation) -> f32 {
    match activation {
        ScoreActivation::Sigmoid => 1.0 / (1.0 + (-value).exp()),
        ScoreActivation::None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_index_the_same_value() {
        // Channel c, row y, column x holds 100c + 10y + x.
        let (c, h, w) = (3, 2, 4);
        let mut nchw = vec![0.0; c * h * w];
        let mut nhwc = vec![0.0; c * h * w];
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    let v = (100 * ch + 10 * y + x) as f32;
                    nchw[(ch * h + y) * w + x] = v;
                    nhwc[(y * w + x) * c + ch] = v;
                }
            }
        }
        let a = HeadMap::new(&nchw, c, h, w, MapLayout::Nchw).unwrap();
        let b = HeadMap::new(&nhwc, c, h, w, MapLayout::Nhwc).unwrap();
        assert_eq!(a.at(2, 1, 3), 213.0);
        assert_eq!(b.at(2, 1, 3), 213.0);
        assert!(HeadMap::new(&nchw[1..], c, h, w, MapLayout::Nchw).is_none());
        assert_eq!(activate(0.0, ScoreActivation::Sigmoid), 0.5);
    }
}
