//! `AnchorDecoder`: turns an OpenPCDet-style anchor head's `cls`, `box` and `dir_cls` maps into
//! boxes with the residual box coder and direction bins. It knows nothing about NMS.

use std::f64::consts::TAU;

use super::head_map::{DecodedBox, HeadMap, activate, candidate_floor};
use super::manifest::{AnchorHeadConfig, ScoreActivation};
use crate::geometry::{Box3, wrap_angle};

/// One anchor of a head-map cell: size, yaw, centre height and the class it was made for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Anchor {
    /// `[l, w, h]` (m).
    pub size: [f64; 3],
    /// Yaw (rad).
    pub yaw: f64,
    /// Centre height (m) = bottom height + h/2.
    pub z: f64,
}

/// Decodes anchor-head outputs; built once per detector.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorDecoder {
    config: AnchorHeadConfig,
    /// Anchors of one cell in output-channel order: class-major, then size, then rotation.
    anchors: Vec<Anchor>,
    /// Anchor centre x per head-map column.
    xs: Vec<f64>,
    /// Anchor centre y per head-map row.
    ys: Vec<f64>,
}

/// OpenPCDet's `limit_period`: `value − floor(value / period + offset) · period`.
pub fn limit_period(value: f64, offset: f64, period: f64) -> f64 {
    value - (value / period + offset).floor() * period
}

fn anchor_centers(min: f64, max: f64, cells: usize, align_center: bool) -> Vec<f64> {
    if align_center {
        let step = (max - min) / cells as f64;
        (0..cells).map(|i| min + (i as f64 + 0.5) * step).collect()
    } else {
        // OpenPCDet's default spreads the anchors from min to max inclusive.
        let step = if cells > 1 {
            (max - min) / (cells - 1) as f64
        } else {
            0.0
        };
        (0..cells).map(|i| min + i as f64 * step).collect()
    }
}

impl AnchorDecoder {
    /// A decoder for a head map of `width × height` cells covering `point_cloud_range`.
    pub fn new(config: &AnchorHeadConfig, point_cloud_range: [f64; 6], width: usize, height: usize) -> Self {
        let mut anchors = Vec::new();
        for class in &config.anchors {
            for size in &class.sizes {
                for &yaw in &class.rotations {
                    anchors.push(Anchor {
                        size: *size,
                        yaw,
                        z: class.bottom_height + size[2] / 2.0,
                    });
                }
            }
        }
        let r = point_cloud_range;
        Self {
            config: config.clone(),
            anchors,
            xs: anchor_centers(r[0], r[3], width, config.align_center),
            ys: anchor_centers(r[1], r[4], height, config.align_center),
        }
    }

    /// Anchors per head-map cell (`A`).
    pub fn anchors_per_cell(&self) -> usize {
        self.anchors.len()
    }

    /// Head-map size `(width, height)`.
    pub fn map_size(&self) -> (usize, usize) {
        (self.xs.len(), self.ys.len())
    }

    /// Channels of the `cls`, `box` and `dir_cls` maps: `A·classes`, `A·box_code_size`, `A·bins`.
    pub fn channels(&self) -> (usize, usize, usize) {
        let a = self.anchors.len();
        (
            a * self.config.labels.len(),
            a * self.config.box_code_size,
            a * self.config.num_dir_bins,
        )
    }

    /// The anchor box of cell `(x, y)`, anchor `a`.
    pub fn anchor_box(&self, x: usize, y: usize, a: usize) -> Box3 {
        let an = &self.anchors[a];
        Box3::new(self.xs[x], self.ys[y], an.z, an.size[0], an.size[1], an.size[2], an.yaw)
    }

    /// Decodes every anchor whose best class scores at least `score_threshold`.
    /// The maps must have the sizes [`AnchorDecoder::channels`] and [`AnchorDecoder::map_size`] give.
    pub fn decode(
        &self,
        cls: &HeadMap,
        boxes: &HeadMap,
        dir_cls: Option<&HeadMap>,
        activation: ScoreActivation,
        score_threshold: f32,
    ) -> Vec<DecodedBox> {
        let n_classes = self.config.labels.len();
        let code = self.config.box_code_size;
        let bins = self.config.num_dir_bins;
        let (width, n_anchors) = (self.xs.len(), self.anchors.len());
        let cells = width * self.ys.len();
        // Anchors in decode order (row, column, anchor): those with some class logit at or above
        // the activation's floor (most anchors of a sparse scene have none), or all of them.
        let candidates: Vec<usize> = match candidate_floor(activation, score_threshold) {
            Some(floor) if n_classes > 0 => {
                let mut found = Vec::new();
                cls.for_each_at_least(floor, |c, cell| found.push(cell * n_anchors + c / n_classes));
                found.sort_unstable();
                found.dedup();
                found
            }
            _ => (0..cells * n_anchors).collect(),
        };
        let mut out = Vec::new();
        for index in candidates {
            let (cell, a) = (index / n_anchors, index % n_anchors);
            let (y, x) = (cell / width, cell % width);
            if a >= n_anchors || y >= self.ys.len() {
                continue;
            }
            let (mut best, mut label) = (f32::NEG_INFINITY, 0);
            for k in 0..n_classes {
                let v = cls.at(a * n_classes + k, y, x);
                if v > best {
                    best = v;
                    label = k;
                }
            }
            let score = activate(best, activation);
            if score.is_nan() || score < score_threshold {
                continue;
            }
            let residual: [f64; 7] = std::array::from_fn(|j| boxes.at(a * code + j, y, x) as f64);
            let mut box3 = self.decode_residual(&self.anchor_box(x, y, a), &residual);
            if let Some(dir) = dir_cls {
                let mut bin = 0;
                for b in 1..bins {
                    if dir.at(a * bins + b, y, x) > dir.at(a * bins + bin, y, x) {
                        bin = b;
                    }
                }
                box3.yaw = self.apply_direction(box3.yaw, bin);
            }
            box3.yaw = wrap_angle(box3.yaw);
            out.push(DecodedBox {
                box3,
                label,
                score,
                velocity: None,
            });
        }
        out
    }

    /// OpenPCDet `ResidualCoder.decode`: with d = √(l_a² + w_a²), x = dx·d + x_a, y = dy·d + y_a,
    /// z = dz·h_a + z_a, l = l_a·e^{dl}, w = w_a·e^{dw}, h = h_a·e^{dh}, yaw = yaw_a + dθ.
    pub fn decode_residual(&self, anchor: &Box3, r: &[f64; 7]) -> Box3 {
        let diagonal = (anchor.l * anchor.l + anchor.w * anchor.w).sqrt();
        let grow = |d: f64| match self.config.size_exp_clamp {
            Some(limit) => d.min(limit).exp(),
            None => d.exp(),
        };
        Box3::new(
            r[0] * diagonal + anchor.x,
            r[1] * diagonal + anchor.y,
            r[2] * anchor.h + anchor.z,
            anchor.l * grow(r[3]),
            anchor.w * grow(r[4]),
            anchor.h * grow(r[5]),
            anchor.yaw + r[6],
        )
    }

    /// Direction classification: yaw folded into one period of `2π / bins` past `dir_offset`,
    /// then moved to the predicted bin (counted backwards when `dir_reversed`).
    pub fn apply_direction(&self, yaw: f64, bin: usize) -> f64 {
        let c = &self.config;
        let period = TAU / c.num_dir_bins as f64;
        let bin = if c.dir_reversed { c.num_dir_bins - 1 - bin } else { bin };
        limit_period(yaw - c.dir_offset, c.dir_limit_offset, period) + c.dir_offset + period * bin as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::manifest::{AnchorClass, MapLayout};
    use approx::assert_abs_diff_eq;
    use std::f64::consts::{FRAC_PI_2, PI};

    fn config() -> AnchorHeadConfig {
        AnchorHeadConfig {
            labels: vec!["Car".into(), "Pedestrian".into()],
            anchors: vec![
                AnchorClass {
                    label: "Car".into(),
                    sizes: vec![[3.9, 1.6, 1.56]],
                    rotations: vec![0.0, FRAC_PI_2],
                    bottom_height: -1.78,
                },
                AnchorClass {
                    label: "Pedestrian".into(),
                    sizes: vec![[0.8, 0.6, 1.73]],
                    rotations: vec![0.0, FRAC_PI_2],
                    bottom_height: -0.6,
                },
            ],
            ..AnchorHeadConfig::default()
        }
    }

    #[test]
    fn anchors_follow_openpcdet_placement() {
        let d = AnchorDecoder::new(&config(), [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 5, 3);
        assert_eq!(d.anchors_per_cell(), 4);
        // Unaligned: 5 columns from 0 to 8 inclusive, 3 rows from −4 to 4.
        let b = d.anchor_box(4, 1, 3);
        assert_abs_diff_eq!(b.x, 8.0);
        assert_abs_diff_eq!(b.y, 0.0);
        assert_abs_diff_eq!(b.z, -0.6 + 1.73 / 2.0);
        assert_abs_diff_eq!(b.yaw, FRAC_PI_2);
        assert_eq!(d.channels(), (8, 28, 8));
        let mut aligned = config();
        aligned.align_center = true;
        let d = AnchorDecoder::new(&aligned, [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 4, 4);
        assert_abs_diff_eq!(d.anchor_box(0, 0, 0).x, 1.0);
        assert_abs_diff_eq!(d.anchor_box(0, 3, 0).y, 3.0);
    }

    #[test]
    fn residual_decoding_matches_the_formulas() {
        let d = AnchorDecoder::new(&config(), [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 5, 3);
        let anchor = Box3::new(1.0, 2.0, -1.0, 3.0, 4.0, 2.0, 0.5);
        let b = d.decode_residual(&anchor, &[0.2, -0.1, 0.5, 0.0, 2f64.ln(), 0.5f64.ln(), 0.25]);
        assert_abs_diff_eq!(b.x, 2.0, epsilon = 1e-12); // 0.2 · 5 + 1
        assert_abs_diff_eq!(b.y, 1.5, epsilon = 1e-12);
        assert_abs_diff_eq!(b.z, 0.0, epsilon = 1e-12);
        assert_abs_diff_eq!(b.w, 8.0, epsilon = 1e-12);
        assert_abs_diff_eq!(b.h, 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(b.yaw, 0.75, epsilon = 1e-12);
    }

    #[test]
    fn direction_bins_resolve_the_heading() {
        let d = AnchorDecoder::new(&config(), [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 5, 3);
        // OpenPCDet: offset 0.78539, two bins of π; bin 0 covers [0.78539, 0.78539 + π).
        assert_abs_diff_eq!(d.apply_direction(1.0, 0), 1.0, epsilon = 1e-9);
        assert_abs_diff_eq!(d.apply_direction(1.0, 1), 1.0 + PI, epsilon = 1e-9);
        assert_abs_diff_eq!(d.apply_direction(1.0 + PI, 0), 1.0, epsilon = 1e-9);
        assert_abs_diff_eq!(d.apply_direction(0.3, 0), 0.3 + PI, epsilon = 1e-9);
        let mut zhulf = config();
        (zhulf.dir_offset, zhulf.dir_limit_offset, zhulf.dir_reversed) = (0.0, 1.0, true);
        let d = AnchorDecoder::new(&zhulf, [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 5, 3);
        // θ = limit_period(θ, 1, π) + (1 − bin)·π: limit_period(0.3, 1, π) = 0.3 − π.
        assert_abs_diff_eq!(d.apply_direction(0.3, 1), 0.3 - PI, epsilon = 1e-9);
        assert_abs_diff_eq!(d.apply_direction(0.3, 0), 0.3, epsilon = 1e-9);
    }

    #[test]
    fn decode_keeps_anchors_above_threshold_with_their_best_class() {
        let d = AnchorDecoder::new(&config(), [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], 2, 1);
        let (nc, nb, nd) = d.channels();
        let mut cls = vec![-10.0f32; nc * 2];
        // Cell x = 1 (NCHW index c·2 + x), anchor 2 (pedestrian, yaw 0), class 1 (pedestrian).
        cls[(2 * 2 + 1) * 2 + 1] = 2.0;
        let boxes = vec![0.0f32; nb * 2];
        let dir = vec![0.0f32; nd * 2];
        let cls = HeadMap::new(&cls, nc, 1, 2, MapLayout::Nchw).unwrap();
        let bx = HeadMap::new(&boxes, nb, 1, 2, MapLayout::Nchw).unwrap();
        let dr = HeadMap::new(&dir, nd, 1, 2, MapLayout::Nchw).unwrap();
        let out = d.decode(&cls, &bx, Some(&dr), ScoreActivation::Sigmoid, 0.5);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].label, 1);
        assert_abs_diff_eq!(out[0].score, 1.0 / (1.0 + (-2.0f32).exp()));
        assert_abs_diff_eq!(out[0].box3.x, 8.0);
        assert_abs_diff_eq!(out[0].box3.l, 0.8);
    }

    #[test]
    fn the_threshold_pre_pass_keeps_exactly_the_boxes_of_a_full_decode() {
        // Random maps of 6 × 5 cells, 4 anchors × 2 classes, with logits scattered around the
        // thresholds' logits (and exactly on them, one ulp either side, NaN): the decode with the
        // pre-pass must give bit for bit the boxes, in order, of decoding every anchor (threshold
        // 0 disables the pre-pass) and keeping those that score at least the threshold.
        let (w, h) = (6, 5);
        let d = AnchorDecoder::new(&config(), [0.0, -4.0, -3.0, 8.0, 4.0, 1.0], w, h);
        let (nc, nb, nd) = d.channels();
        let mut unit = crate::detect::test_rng::unit_floats(0x2545_f491_4f6c_dd1du64);
        for threshold in [0.1f32, 0.3, 0.5, 0.9] {
            let logit = (threshold / (1.0 - threshold)).ln();
            for layout in [MapLayout::Nchw, MapLayout::Nhwc] {
                let mut cls: Vec<f32> = (0..nc * w * h).map(|_| logit + 6.0 * (unit() - 0.8)).collect();
                for (k, special) in [logit, logit.next_up(), logit.next_down(), f32::NAN]
                    .into_iter()
                    .enumerate()
                {
                    cls[7 * k + 3] = special;
                }
                let boxes: Vec<f32> = (0..nb * w * h).map(|_| unit() - 0.5).collect();
                let dir: Vec<f32> = (0..nd * w * h).map(|_| unit()).collect();
                let cls = HeadMap::new(&cls, nc, h, w, layout).unwrap();
                let bx = HeadMap::new(&boxes, nb, h, w, layout).unwrap();
                let dr = HeadMap::new(&dir, nd, h, w, layout).unwrap();
                for activation in [ScoreActivation::Sigmoid, ScoreActivation::None] {
                    let t = match activation {
                        ScoreActivation::Sigmoid => threshold,
                        ScoreActivation::None => logit,
                    };
                    let fast = d.decode(&cls, &bx, Some(&dr), activation, t);
                    let full: Vec<DecodedBox> = d
                        .decode(&cls, &bx, Some(&dr), activation, f32::NEG_INFINITY)
                        .into_iter()
                        .filter(|b| b.score >= t)
                        .collect();
                    assert!(!fast.is_empty() && fast.len() < w * h * 4, "{threshold} {layout:?}");
                    assert_eq!(fast, full, "{threshold} {layout:?} {activation:?}");
                }
            }
        }
    }
}
