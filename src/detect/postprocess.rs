//! Post-processing of decoded boxes: pre-NMS top-k, rotated-IoU or circle NMS (over all boxes
//! or per class) and post-NMS top-k, as OpenPCDet and CenterPoint do after decoding.

use super::head_map::DecodedBox;
use super::manifest::{NmsKind, PostprocessConfig};
use crate::geometry::{Box3, nms_bev, nms_circle};

/// Sorts by score (highest first, ties by decode order), keeps the top `pre_nms_top_k`, runs the
/// manifest's NMS and keeps the top `post_nms_top_k`.
pub fn select_boxes(mut boxes: Vec<DecodedBox>, config: &PostprocessConfig) -> Vec<DecodedBox> {
    sort_by_score(&mut boxes);
    boxes.truncate(config.pre_nms_top_k);
    let mut kept = if config.nms_per_class {
        let mut labels: Vec<usize> = boxes.iter().map(|b| b.label).collect();
        labels.sort_unstable();
        labels.dedup();
        let mut kept = Vec::new();
        for label in labels {
            let class_boxes: Vec<DecodedBox> = boxes.iter().filter(|b| b.label == label).copied().collect();
            kept.extend(suppress(class_boxes, config));
        }
        sort_by_score(&mut kept);
        kept
    } else {
        suppress(boxes, config)
    };
    kept.truncate(config.post_nms_top_k);
    kept
}

fn sort_by_score(boxes: &mut [DecodedBox]) {
    boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
}

fn suppress(boxes: Vec<DecodedBox>, config: &PostprocessConfig) -> Vec<DecodedBox> {
    let shapes: Vec<Box3> = boxes.iter().map(|b| b.box3).collect();
    let scores: Vec<f32> = boxes.iter().map(|b| b.score).collect();
    let mut keep = match config.nms {
        NmsKind::None => return boxes,
        NmsKind::RotatedIou => nms_bev(&shapes, &scores, config.nms_threshold),
        NmsKind::Circle => nms_circle(&shapes, &scores, config.nms_threshold),
    };
    // Keep score order whatever order the NMS returns its indices in.
    keep.sort_unstable();
    keep.into_iter().filter_map(|i| boxes.get(i).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(x: f64, score: f32, label: usize) -> DecodedBox {
        DecodedBox {
            box3: Box3::new(x, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0),
            label,
            score,
            velocity: None,
        }
    }

    #[test]
    fn overlapping_boxes_keep_the_best_and_top_k_applies() {
        let boxes = vec![
            decoded(0.0, 0.5, 0),
            decoded(0.2, 0.9, 0),
            decoded(10.0, 0.7, 0),
            decoded(20.0, 0.3, 1),
        ];
        let config = PostprocessConfig {
            nms_threshold: 0.1,
            ..PostprocessConfig::default()
        };
        let kept = select_boxes(boxes.clone(), &config);
        let xs: Vec<f64> = kept.iter().map(|b| b.box3.x).collect();
        assert_eq!(xs, vec![0.2, 10.0, 20.0]);

        let circle = PostprocessConfig {
            nms: NmsKind::Circle,
            nms_threshold: 0.5,
            post_nms_top_k: 2,
            ..PostprocessConfig::default()
        };
        let kept = select_boxes(boxes.clone(), &circle);
        assert_eq!(kept.iter().map(|b| b.score).collect::<Vec<_>>(), vec![0.9, 0.7]);

        let none = PostprocessConfig {
            nms: NmsKind::None,
            pre_nms_top_k: 3,
            ..PostprocessConfig::default()
        };
        assert_eq!(select_boxes(boxes, &none).len(), 3);
    }

    #[test]
    fn per_class_nms_keeps_overlapping_boxes_of_different_classes() {
        let boxes = vec![decoded(0.0, 0.9, 0), decoded(0.1, 0.8, 1)];
        let config = PostprocessConfig {
            nms_per_class: true,
            ..PostprocessConfig::default()
        };
        assert_eq!(select_boxes(boxes, &config).len(), 2);
    }
}
