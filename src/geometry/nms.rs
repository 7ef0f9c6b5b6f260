//! Greedy non-maximum suppression over boxes: by rotated BEV IoU and by BEV centre distance.
//!
//! Both visit boxes in descending score order (ties by lower index; NaN scores rank after every
//! number, among themselves by index) and keep a box unless a kept box suppresses it. Only the
//! first `min(boxes.len(), scores.len())` boxes take part.

use std::cmp::Ordering;

use super::Box3;
use super::iou::Footprint;

/// Indices `0..n` in descending score order, NaN last, ties by lower index.
fn score_order(scores: &[f32], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        let (si, sj) = (scores[i], scores[j]);
        let by_score = match (si.is_nan(), sj.is_nan()) {
            (false, false) => sj.partial_cmp(&si).unwrap_or(Ordering::Equal),
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (true, true) => Ordering::Equal,
        };
        by_score.then(i.cmp(&j))
    });
    order
}

/// Rotated-BEV NMS: the indices kept, in descending score order; a box is suppressed when its
/// BEV IoU with a kept box is strictly greater than `iou_threshold`.
pub fn nms_bev(boxes: &[Box3], scores: &[f32], iou_threshold: f64) -> Vec<usize> {
    let n = boxes.len().min(scores.len());
    let footprints: Vec<Footprint> = boxes[..n].iter().map(Footprint::of).collect();
    let mut kept: Vec<usize> = Vec::new();
    for i in score_order(scores, n) {
        if kept.iter().all(|&k| footprints[k].iou(&footprints[i]) <= iou_threshold) {
            kept.push(i);
        }
    }
    kept
}

/// Circle NMS: the indices kept, in descending score order; a box is suppressed when its BEV
/// centre lies strictly closer than `radius_m` to a kept box's centre (a NaN centre suppresses
/// nothing and is never suppressed).
pub fn nms_circle(boxes: &[Box3], scores: &[f32], radius_m: f64) -> Vec<usize> {
    let n = boxes.len().min(scores.len());
    let radius_squared = radius_m * radius_m;
    let mut kept: Vec<usize> = Vec::new();
    for i in score_order(scores, n) {
        let b = &boxes[i];
        let near = kept.iter().any(|&k| {
            let (dx, dy) = (boxes[k].x - b.x, boxes[k].y - b.y);
            dx * dx + dy * dy < radius_squared
        });
        if !near {
            kept.push(i);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn car(x: f64, y: f64, yaw: f64) -> Box3 {
        Box3::new(x, y, 0.0, 4.0, 2.0, 1.5, yaw)
    }

    #[test]
    fn overlapping_pair_keeps_the_higher_score() {
        // Offset by 1 m along the length: IoU = 6/10 = 0.6.
        let boxes = [car(0.0, 0.0, 0.0), car(1.0, 0.0, 0.0)];
        assert_eq!(nms_bev(&boxes, &[0.3, 0.9], 0.5), vec![1]);
        assert_eq!(nms_bev(&boxes, &[0.9, 0.3], 0.5), vec![0]);
        // Suppression needs IoU strictly above the threshold.
        assert_eq!(nms_bev(&boxes, &[0.9, 0.3], 0.6 + 1e-9), vec![0, 1]);
    }

    #[test]
    fn disjoint_boxes_are_all_kept_in_score_order() {
        let boxes = [car(0.0, 0.0, 0.0), car(10.0, 0.0, 1.0), car(0.0, 10.0, 2.0)];
        assert_eq!(nms_bev(&boxes, &[0.2, 0.9, 0.5], 0.1), vec![1, 2, 0]);
    }

    #[test]
    fn chain_is_resolved_greedily() {
        // 0 suppresses 1; 1 would have suppressed 2, but 1 is gone, and 0 and 2 barely overlap.
        let boxes = [car(0.0, 0.0, 0.0), car(1.5, 0.0, 0.0), car(3.0, 0.0, 0.0)];
        assert_eq!(nms_bev(&boxes, &[0.9, 0.8, 0.7], 0.3), vec![0, 2]);
    }

    #[test]
    fn ties_and_nan_scores() {
        let boxes = [
            car(0.0, 0.0, 0.0),
            car(0.0, 0.0, 0.0),
            car(20.0, 0.0, 0.0),
            car(0.0, 0.0, 0.0),
        ];
        // Equal scores: the lower index wins.
        assert_eq!(nms_bev(&boxes[..2], &[0.5, 0.5], 0.5), vec![0]);
        // NaN ranks last, so the finite-scored duplicate suppresses it.
        assert_eq!(nms_bev(&boxes, &[f32::NAN, 0.1, 0.2, f32::NAN], 0.5), vec![2, 1]);
        assert_eq!(nms_circle(&boxes, &[f32::NAN, 0.1, 0.2, f32::NAN], 1.0), vec![2, 1]);
        assert_eq!(nms_bev(&boxes, &[f32::NAN; 4], 0.5), vec![0, 2]);
        // Mismatched lengths use the common prefix.
        assert_eq!(nms_bev(&boxes, &[0.1, 0.2], 0.5), vec![1]);
        assert!(nms_bev(&[], &[], 0.5).is_empty());
    }

    #[test]
    fn circle_nms_radius() {
        let boxes = [
            car(0.0, 0.0, 0.0),
            car(0.0, 0.9, 2.0),
            car(1.0, 0.0, 0.0),
            car(3.0, 0.0, 0.0),
        ];
        let scores = [0.9, 0.5, 0.8, 0.7];
        // Radius 1: box 1 (0.9 m) is suppressed; box 2 at exactly 1 m is kept (strict).
        assert_eq!(nms_circle(&boxes, &scores, 1.0), vec![0, 2, 3]);
        // Radius 2.5: 0 suppresses 1 and 2; 3 is 3 m from 0.
        assert_eq!(nms_circle(&boxes, &scores, 2.5), vec![0, 3]);
        // Radius 0 suppresses nothing, even exact duplicates.
        assert_eq!(nms_circle(&[car(0.0, 0.0, 0.0); 2], &[0.1, 0.2], 0.0), vec![1, 0]);
        let nan_box = Box3 {
            x: f64::NAN,
            ..car(0.0, 0.0, 0.0)
        };
        assert_eq!(nms_circle(&[car(0.0, 0.0, 0.0), nan_box], &[0.9, 0.8], 5.0), vec![0, 1]);
    }
}
