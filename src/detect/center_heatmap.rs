//! `CenterHeatmapDecoder`: turns CenterPoint head maps (heatmap, reg, height, dim, rot sin/cos,
//! optional velocity; one set per task) into boxes at the heatmap's local maxima. No NMS here.

use super::head_map::{DecodedBox, HeadMap, activate, candidate_floor};
use super::manifest::{CenterHeadConfig, ScoreActivation};
use crate::geometry::{Box3, wrap_angle};

/// One task's output maps.
#[derive(Debug, Clone, Copy)]
pub struct CenterTaskMaps<'a> {
    /// Heatmap, one channel per task label.
    pub heatmap: HeadMap<'a>,
    /// Sub-cell centre offset (x, y) in cells.
    pub reg: HeadMap<'a>,
    /// Centre z (m).
    pub height: HeadMap<'a>,
    /// Size l, w, h (log-size when the manifest says `dim_log`).
    pub dim: HeadMap<'a>,
    /// sin(yaw), cos(yaw).
    pub rot: HeadMap<'a>,
    /// Velocity (vx, vy) in m/s, if the head has it.
    pub vel: Option<HeadMap<'a>>,
}

/// Decodes CenterPoint head outputs; built once per detector.
#[derive(Debug, Clone, PartialEq)]
pub struct CenterHeatmapDecoder {
    config: CenterHeadConfig,
    /// Index of each task's first label in the flat label list.
    label_offsets: Vec<usize>,
    range_min: [f64; 2],
    pillar_size: [f64; 2],
    width: usize,
    height: usize,
}

impl CenterHeatmapDecoder {
    /// A decoder for a pillar grid of `grid_nx × grid_ny` cells of `pillar_size` from `range_min`.
    pub fn new(config: &CenterHeadConfig, range_min: [f64; 2], pillar_size: [f64; 2], grid: (usize, usize)) -> Self {
        let mut label_offsets = Vec::with_capacity(config.tasks.len());
        let mut next = 0;
        for task in &config.tasks {
            label_offsets.push(next);
            next += task.labels.len();
        }
        let f = config.out_size_factor.max(1);
        Self {
            config: config.clone(),
            label_offsets,
            range_min,
            pillar_size,
            width: grid.0 / f,
            height: grid.1 / f,
        }
    }

    /// Head-map size `(width, height)`.
    pub fn map_size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// All task labels in order; `DecodedBox::label` indexes this list.
    pub fn labels(&self) -> Vec<&str> {
        self.config
            .tasks
            .iter()
            .flat_map(|t| t.labels.iter().map(String::as_str))
            .collect()
    }

    /// Whether `v` at `(c, y, x)` is the maximum of its `peak_kernel` window (max-pool equality, ties kept).
    fn is_peak(&self, map: &HeadMap, c: usize, y: usize, x: usize, v: f32) -> bool {
        let r = self.config.peak_kernel / 2;
        for ny in y.saturating_sub(r)..(y + r + 1).min(map.height()) {
            for nx in x.saturating_sub(r)..(x + r + 1).min(map.width()) {
                if map.at(c, ny, nx) > v {
                    return false;
                }
            }
        }
        true
    }

    /// Decodes every heatmap peak scoring at least `score_threshold`; `tasks` in manifest order.
    pub fn decode(
        &self,
        tasks: &[CenterTaskMaps],
        activation: ScoreActivation,
        score_threshold: f32,
    ) -> Vec<DecodedBox> {
        let f = self.config.out_size_factor as f64;
        // Raw values below the floor cannot score high enough: skip them before the activation.
        let floor = candidate_floor(activation, score_threshold).unwrap_or(f32::NEG_INFINITY);
        let mut out = Vec::new();
        for (task, &label_offset) in tasks.iter().zip(&self.label_offsets) {
            let hm = &task.heatmap;
            for c in 0..hm.channels() {
                for y in 0..hm.height() {
                    for x in 0..hm.width() {
                        let v = hm.at(c, y, x);
                        if floor > f32::NEG_INFINITY && (v < floor || v.is_nan()) {
                            continue;
                        }
                        let score = activate(v, activation);
                        if score.is_nan() || score < score_threshold || !self.is_peak(hm, c, y, x, v) {
                            continue;
                        }
                        let cx = (x as f64 + task.reg.at(0, y, x) as f64) * f * self.pillar_size[0] + self.range_min[0];
                        let cy = (y as f64 + task.reg.at(1, y, x) as f64) * f * self.pillar_size[1] + self.range_min[1];
                        let size: [f64; 3] = std::array::from_fn(|k| {
                            let d = task.dim.at(k, y, x) as f64;
                            if self.config.dim_log { d.exp() } else { d }
                        });
                        let yaw = (task.rot.at(0, y, x) as f64).atan2(task.rot.at(1, y, x) as f64);
                        out.push(DecodedBox {
                            box3: Box3::new(
                                cx,
                                cy,
                                task.height.at(0, y, x) as f64,
                                size[0],
                                size[1],
                                size[2],
                                wrap_angle(yaw),
                            ),
                            label: label_offset + c,
                            score,
                            velocity: task.vel.map(|v| [v.at(0, y, x) as f64, v.at(1, y, x) as f64]),
                        });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::manifest::{CenterTask, MapLayout};
    use approx::assert_abs_diff_eq;

    #[test]
    fn a_peak_decodes_to_its_box_and_neighbours_are_suppressed() {
        let config = CenterHeadConfig {
            out_size_factor: 2,
            tasks: vec![CenterTask {
                labels: vec!["car".into()],
                ..CenterTask::default()
            }],
            ..CenterHeadConfig::default()
        };
        // Grid 8 × 8 pillars of 0.5 m from (−2, −2); head map 4 × 4.
        let d = CenterHeatmapDecoder::new(&config, [-2.0, -2.0], [0.5, 0.5], (8, 8));
        assert_eq!(d.map_size(), (4, 4));
        let (w, h) = (4, 4);
        let mut heat = vec![-5.0f32; w * h];
        heat[2 * w + 1] = 3.0; // the peak at (x 1, y 2)
        heat[2 * w + 2] = 1.0; // a weaker neighbour: not a peak
        let mut reg = vec![0.0f32; 2 * w * h];
        reg[2 * w + 1] = 0.25;
        reg[w * h + 2 * w + 1] = 0.75;
        let height = vec![-0.5f32; w * h];
        let mut dim = vec![0.0f32; 3 * w * h];
        dim[2 * w + 1] = 4f32.ln();
        let mut rot = vec![0.0f32; 2 * w * h];
        rot[2 * w + 1] = 1.0; // sin = 1, cos = 0: yaw π/2
        fn map(data: &[f32], c: usize) -> HeadMap<'_> {
            HeadMap::new(data, c, 4, 4, MapLayout::Nchw).unwrap()
        }
        let maps = CenterTaskMaps {
            heatmap: map(&heat, 1),
            reg: map(&reg, 2),
            height: map(&height, 1),
            dim: map(&dim, 3),
            rot: map(&rot, 2),
            vel: None,
        };
        let out = d.decode(&[maps], ScoreActivation::Sigmoid, 0.5);
        assert_eq!(out.len(), 1);
        let b = out[0].box3;
        assert_abs_diff_eq!(b.x, (1.0 + 0.25) * 2.0 * 0.5 - 2.0, epsilon = 1e-6);
        assert_abs_diff_eq!(b.y, (2.0 + 0.75) * 2.0 * 0.5 - 2.0, epsilon = 1e-6);
        assert_abs_diff_eq!(b.z, -0.5);
        assert_abs_diff_eq!(b.l, 4.0, epsilon = 1e-5);
        assert_abs_diff_eq!(b.w, 1.0);
        assert_abs_diff_eq!(b.yaw, std::f64::consts::FRAC_PI_2, epsilon = 1e-9);
    }

    #[test]
    fn the_threshold_pre_pass_keeps_exactly_the_peaks_of_a_full_decode() {
        // Two tasks of random 9 × 7 maps with logits around the threshold's logit (and on it, one
        // ulp either side, NaN): the same boxes, bit for bit and in order, as decoding every cell
        // (threshold −∞ disables the pre-pass) and keeping those that score at least the threshold.
        let tasks_config: Vec<CenterTask> = [vec!["car".to_string(), "truck".to_string()], vec!["ped".to_string()]]
            .into_iter()
            .map(|labels| CenterTask {
                labels,
                ..CenterTask::default()
            })
            .collect();
        let config = CenterHeadConfig {
            out_size_factor: 1,
            tasks: tasks_config,
            ..CenterHeadConfig::default()
        };
        let (w, h) = (9, 7);
        let d = CenterHeatmapDecoder::new(&config, [-2.0, -2.0], [0.5, 0.5], (w, h));
        let mut unit = crate::detect::test_rng::unit_floats(0x9e37_79b9_7f4a_7c15u64);
        for threshold in [0.1f32, 0.5] {
            let logit = (threshold / (1.0 - threshold)).ln();
            for layout in [MapLayout::Nchw, MapLayout::Nhwc] {
                let data: Vec<[Vec<f32>; 5]> = [2usize, 1]
                    .into_iter()
                    .map(|labels| {
                        let mut heat: Vec<f32> = (0..labels * w * h).map(|_| logit + 4.0 * (unit() - 0.7)).collect();
                        for (k, special) in [logit, logit.next_up(), logit.next_down(), f32::NAN]
                            .into_iter()
                            .enumerate()
                        {
                            heat[11 * k + 5] = special;
                        }
                        let mut other = |c: usize| (0..c * w * h).map(|_| unit() - 0.5).collect::<Vec<f32>>();
                        [heat, other(2), other(1), other(3), other(2)]
                    })
                    .collect();
                let maps: Vec<CenterTaskMaps> = data
                    .iter()
                    .zip([2usize, 1])
                    .map(|(m, labels)| CenterTaskMaps {
                        heatmap: HeadMap::new(&m[0], labels, h, w, layout).unwrap(),
                        reg: HeadMap::new(&m[1], 2, h, w, layout).unwrap(),
                        height: HeadMap::new(&m[2], 1, h, w, layout).unwrap(),
                        dim: HeadMap::new(&m[3], 3, h, w, layout).unwrap(),
                        rot: HeadMap::new(&m[4], 2, h, w, layout).unwrap(),
                        vel: None,
                    })
                    .collect();
                for activation in [ScoreActivation::Sigmoid, ScoreActivation::None] {
                    let t = match activation {
                        ScoreActivation::Sigmoid => threshold,
                        ScoreActivation::None => logit,
                    };
                    let fast = d.decode(&maps, activation, t);
                    let full: Vec<DecodedBox> = d
                        .decode(&maps, activation, f32::NEG_INFINITY)
                        .into_iter()
                        .filter(|b| b.score >= t)
                        .collect();
                    assert!(!fast.is_empty(), "{threshold} {layout:?}");
                    assert_eq!(fast, full, "{threshold} {layout:?} {activation:?}");
                }
            }
        }
    }
}
