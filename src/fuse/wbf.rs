//! Weighted Boxes Fusion (ZFTurbo's `ensemble_boxes_wbf_3d`, reference §2.3) adapted to rotated
//! 3D boxes. Boxes are visited by descending score; each joins the cluster whose running fused
//! box it overlaps most in 3D IoU, if above the threshold, else starts a new cluster. A cluster's
//! fused box is the score × weight weighted mean of centres and sizes; its yaw is the weighted
//! circular mean after turning members that point the opposite way (more than π/2 from the
//! heaviest member) by π — the same footprint, so the average of the geometry is not torn apart
//! by heading flips — which is this module's adaptation, since the original boxes have no yaw.

use crate::geometry::{Box3, iou_3d, wrap_angle};

/// One WBF cluster: its fused box, the mean of its members' score × weight, and its members.
#[derive(Debug, Clone, PartialEq)]
pub struct WbfCluster {
    /// The weighted-mean box.
    pub box3: Box3,
    /// Mean of score × detector weight over the members (ZFTurbo's `avg` confidence).
    pub mean_weighted_score: f64,
    /// Member indices into the input, in the order they joined (descending score).
    pub members: Vec<usize>,
}

/// Greedy rotated-3D WBF over `boxes` with `scores` and detector `weights` (same lengths): the
/// clusters in the order they were started (descending score of their first member; ties by
/// index). A box joins when its 3D IoU with a running fused box is strictly above `iou_threshold`.
pub fn weighted_boxes_fusion(boxes: &[Box3], scores: &[f64], weights: &[f64], iou_threshold: f64) -> Vec<WbfCluster> {
    let n = boxes.len().min(scores.len()).min(weights.len());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut clusters: Vec<WbfCluster> = Vec::new();
    for i in order {
        let mut best: Option<(usize, f64)> = None;
        for (k, c) in clusters.iter().enumerate() {
            let iou = iou_3d(&c.box3, &boxes[i]);
            if iou > iou_threshold && best.is_none_or(|(_, b)| iou > b) {
                best = Some((k, iou));
            }
        }
        match best {
            Some((k, _)) => {
                clusters[k].members.push(i);
                let (box3, mean) = weighted_box(&clusters[k].members, boxes, scores, weights);
                clusters[k].box3 = box3;
                clusters[k].mean_weighted_score = mean;
            }
            None => clusters.push(WbfCluster {
                box3: boxes[i],
                mean_weighted_score: scores[i] * weights[i],
                members: vec![i],
            }),
        }
    }
    clusters
}

/// The fused box of `members` and the mean of their score × weight.
fn weighted_box(members: &[usize], boxes: &[Box3], scores: &[f64], weights: &[f64]) -> (Box3, f64) {
    let c: Vec<f64> = members.iter().map(|&i| scores[i] * weights[i]).collect();
    let total: f64 = c.iter().sum();
    let mean_weighted_score = total / members.len() as f64;
    if total <= 0.0 {
        return (boxes[members[0]], mean_weighted_score);
    }
    let heaviest = (0..members.len())
        .max_by(|&a, &b| c[a].total_cmp(&c[b]).then(b.cmp(&a)))
        .unwrap_or(0);
    let reference = boxes[members[heaviest]].yaw;
    let mut fused = Box3::new(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut sin, mut cos) = (0.0, 0.0);
    for (k, &i) in members.iter().enumerate() {
        let b = &boxes[i];
        let share = c[k] / total;
        fused.x += share * b.x;
        fused.y += share * b.y;
        fused.z += share * b.z;
        fused.l += share * b.l;
        fused.w += share * b.w;
        fused.h += share * b.h;
        let flipped = wrap_angle(b.yaw - reference).abs() > std::f64::consts::FRAC_PI_2;
        let yaw = if flipped { b.yaw + std::f64::consts::PI } else { b.yaw };
        sin += share * yaw.sin();
        cos += share * yaw.cos();
    }
    fused.yaw = if sin == 0.0 && cos == 0.0 {
        reference
    } else {
        sin.atan2(cos)
    };
    fused.pitch = boxes[members[heaviest]].pitch;
    fused.roll = boxes[members[heaviest]].roll;
    (fused, mean_weighted_score)
}

#[cfg(test)]
mod tests {
    use approx::assert_relative_eq;

    use super::*;

    #[test]
    fn overlapping_boxes_average_and_far_ones_stay_apart() {
        let pi = std::f64::consts::PI;
        let boxes = [
            Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0),
            Box3::new(0.2, 0.0, 0.0, 4.4, 2.0, 1.5, pi - 0.02), // flipped heading, same footprint
            Box3::new(30.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0),
        ];
        let scores = [0.9, 0.3, 0.5];
        let weights = [1.0, 1.0, 2.0];
        let clusters = weighted_boxes_fusion(&boxes, &scores, &weights, 0.55);
        assert_eq!(clusters.len(), 2);
        let a = &clusters[0];
        assert_eq!(a.members, vec![0, 1]);
        assert_relative_eq!(a.box3.x, 0.2 * 0.3 / 1.2, max_relative = 1e-12);
        assert_relative_eq!(a.box3.l, (0.9 * 4.0 + 0.3 * 4.4) / 1.2, max_relative = 1e-12);
        // The flipped member counts as yaw −0.02 → weighted circular mean ≈ −0.005, not ≈ π/4.
        assert!(a.box3.yaw.abs() < 0.01, "yaw {}", a.box3.yaw);
        assert_relative_eq!(a.mean_weighted_score, 0.6, max_relative = 1e-12);
        assert_eq!(clusters[1].members, vec![2]);
        assert_relative_eq!(clusters[1].mean_weighted_score, 1.0, max_relative = 1e-12);
    }
}
