//! YOLO-style 2D detector outputs: decoding the YOLOv5 and YOLOv8 export layouts, per-label NMS,
//! and matching projected 3D boxes to the detections by 2D IoU.

use super::crop::PixelRect;
use super::manifest::{YoloConfig, YoloLayout};

/// One decoded 2D detection, in the model input's pixels until mapped back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection2d {
    /// `[x_min, y_min, x_max, y_max]` (px).
    pub rect: PixelRect,
    /// Output label index.
    pub label: usize,
    /// Score (objectness × class score for YOLOv5, the class score for YOLOv8).
    pub score: f32,
}

/// Decodes one image's output of `shape` (`[1, N, 5 + C]` for v5, `[1, 4 + C, N]` for v8, the
/// leading 1 optional) into detections scoring at least `config.score_threshold`, each with its
/// best label. `keep_label` says which labels count (unmapped labels are dropped before the best
/// one is chosen). Errors name the expected layout.
pub fn decode(
    data: &[f32],
    shape: &[i64],
    num_labels: usize,
    config: &YoloConfig,
    keep_label: impl Fn(usize) -> bool,
) -> Result<Vec<Detection2d>, String> {
    let dims: Vec<usize> = match shape {
        [1, a, b] | [a, b] if *a >= 0 && *b >= 0 => vec![*a as usize, *b as usize],
        _ => return Err(format!("expected a [1, rows, cols] output, got {shape:?}")),
    };
    let (attrs, n, rows_major) = match config.layout {
        YoloLayout::V5 => (dims[1], dims[0], true),
        YoloLayout::V8 => (dims[0], dims[1], false),
    };
    let head = match config.layout {
        YoloLayout::V5 => 5,
        YoloLayout::V8 => 4,
    };
    if attrs != head + num_labels {
        let want = match config.layout {
            YoloLayout::V5 => format!(
                "[1, N, {}] (v5: cx, cy, w, h, objectness, {num_labels} labels)",
                head + num_labels
            ),
            YoloLayout::V8 => format!("[1, {}, N] (v8: cx, cy, w, h, {num_labels} labels)", head + num_labels),
        };
        return Err(format!("expected {want}, got {shape:?}"));
    }
    if data.len() != attrs * n {
        return Err(format!(
            "output holds {} values, shape {shape:?} needs {}",
            data.len(),
            attrs * n
        ));
    }
    let at = |i: usize, a: usize| {
        if rows_major {
            data[i * attrs + a]
        } else {
            data[a * n + i]
        }
    };
    let mut out = Vec::new();
    for i in 0..n {
        let objectness = if config.layout == YoloLayout::V5 { at(i, 4) } else { 1.0 };
        let best = (0..num_labels)
            .filter(|&l| keep_label(l))
            .map(|l| (l, at(i, head + l) * objectness))
            .filter(|(_, s)| s.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((label, score)) = best else { continue };
        if score < config.score_threshold {
            continue;
        }
        let (cx, cy, w, h) = (at(i, 0), at(i, 1), at(i, 2), at(i, 3));
        if ![cx, cy, w, h].iter().all(|v| v.is_finite()) || w <= 0.0 || h <= 0.0 {
            continue;
        }
        let (cx, cy, hw, hh) = (f64::from(cx), f64::from(cy), f64::from(w) / 2.0, f64::from(h) / 2.0);
        out.push(Detection2d {
            rect: [cx - hw, cy - hh, cx + hw, cy + hh],
            label,
            score,
        });
    }
    Ok(out)
}

/// Intersection over union of two rectangles (0 when either is empty).
pub fn iou(a: &PixelRect, b: &PixelRect) -> f64 {
    let area = |r: &PixelRect| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    let union = area(a) + area(b) - inter;
    if union > 0.0 { inter / union } else { 0.0 }
}

/// Greedy per-label NMS: highest score first, dropping any detection of the same label that
/// overlaps a kept one by more than `iou_threshold`; at most `max` kept, best first.
pub fn nms(mut detections: Vec<Detection2d>, iou_threshold: f64, max: usize) -> Vec<Detection2d> {
    detections.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection2d> = Vec::new();
    for d in detections {
        if kept.len() == max {
            break;
        }
        if kept
            .iter()
            .all(|k| k.label != d.label || iou(&k.rect, &d.rect) <= iou_threshold)
        {
            kept.push(d);
        }
    }
    kept
}

/// The detection each projected box overlaps most (the higher score on a tie), if that IoU is at
/// least `min_iou`.
pub fn match_boxes(boxes: &[PixelRect], detections: &[Detection2d], min_iou: f64) -> Vec<Option<(Detection2d, f64)>> {
    boxes
        .iter()
        .map(|b| {
            detections
                .iter()
                .map(|d| (*d, iou(b, &d.rect)))
                .filter(|(_, o)| *o >= min_iou && *o > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1).then(a.0.score.total_cmp(&b.0.score)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(layout: YoloLayout) -> YoloConfig {
        YoloConfig {
            layout,
            score_threshold: 0.3,
            ..YoloConfig::default()
        }
    }

    #[test]
    fn v5_rows_multiply_objectness_and_v8_columns_do_not() {
        // Two candidates, two labels. v5 rows: cx, cy, w, h, obj, s0, s1.
        let v5 = [
            10.0, 20.0, 4.0, 8.0, 0.9, 0.2, 0.8, //
            50.0, 50.0, 10.0, 10.0, 0.5, 0.5, 0.1,
        ];
        let d = decode(&v5, &[1, 2, 7], 2, &config(YoloLayout::V5), |_| true).unwrap();
        assert_eq!(d.len(), 1, "0.5 × 0.5 = 0.25 is under the threshold");
        assert_eq!(d[0].label, 1);
        approx::assert_abs_diff_eq!(d[0].score, 0.72, epsilon = 1e-6);
        assert_eq!(d[0].rect, [8.0, 16.0, 12.0, 24.0]);
        // The same candidates as v8 columns (attribute-major), no objectness.
        let v8 = [10.0, 50.0, 20.0, 50.0, 4.0, 10.0, 8.0, 10.0, 0.2, 0.5, 0.8, 0.1];
        let d = decode(&v8, &[1, 6, 2], 2, &config(YoloLayout::V8), |_| true).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].label, d[0].score), (1, 0.8));
        assert_eq!((d[1].label, d[1].score, d[1].rect), (0, 0.5, [45.0, 45.0, 55.0, 55.0]));
        // Dropping label 1 leaves the first candidate at 0.2: gone.
        let d = decode(&v8, &[1, 6, 2], 2, &config(YoloLayout::V8), |l| l == 0).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].rect, [45.0, 45.0, 55.0, 55.0]);
    }

    #[test]
    fn wrong_shapes_say_what_was_expected() {
        let e = decode(&[0.0; 12], &[1, 2, 6], 2, &config(YoloLayout::V5), |_| true).unwrap_err();
        assert!(e.contains("[1, N, 7]") && e.contains("v5"), "{e}");
        let e = decode(&[0.0; 12], &[1, 2, 2, 3], 2, &config(YoloLayout::V8), |_| true).unwrap_err();
        assert!(e.contains("[1, rows, cols]"), "{e}");
        let e = decode(&[0.0; 5], &[1, 6, 2], 2, &config(YoloLayout::V8), |_| true).unwrap_err();
        assert!(e.contains("5 values"), "{e}");
    }

    #[test]
    fn nms_keeps_the_best_per_label_and_matching_takes_the_largest_overlap() {
        let d = |x: f64, label: usize, score: f32| Detection2d {
            rect: [x, 0.0, x + 10.0, 10.0],
            label,
            score,
        };
        // IoU of boxes shifted by 2 px: 80 / 120 = 0.667 > 0.45.
        let kept = nms(
            vec![d(0.0, 0, 0.5), d(2.0, 0, 0.9), d(2.0, 1, 0.4), d(30.0, 0, 0.6)],
            0.45,
            10,
        );
        assert_eq!(kept, vec![d(2.0, 0, 0.9), d(30.0, 0, 0.6), d(2.0, 1, 0.4)]);
        assert_eq!(nms(kept.clone(), 0.45, 1), vec![d(2.0, 0, 0.9)]);
        let m = match_boxes(&[[1.0, 0.0, 11.0, 10.0], [100.0, 0.0, 110.0, 10.0]], &kept, 0.3);
        let (hit, overlap) = m[0].unwrap();
        assert_eq!(
            hit,
            d(2.0, 0, 0.9),
            "equal IoU with the label-1 box: the higher score wins"
        );
        approx::assert_abs_diff_eq!(overlap, 90.0 / 110.0, epsilon = 1e-12);
        assert!(m[1].is_none());
    }
}
