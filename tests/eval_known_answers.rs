//! Hand-built evaluation cases with answers worked out by hand (issue 3 acceptance): perfect
//! predictions, a uniform shift with IoU exactly 0.6, one ID switch, a crafted precision/recall
//! curve, and grounding's strict threshold rule and multi-object joint correctness.

use approx::assert_abs_diff_eq;
use boxlayer::eval::{
    self, EvalBox, EvalConfig, EvalData, FrameKey, GroundingIou, GroundingQuery, IouKind, ThresholdRule, TrackingConfig,
};
use boxlayer::{Box3, ObjectClass, Platform};

fn eval_box(sequence: &str, frame: u64, bbox: Box3, class: ObjectClass, score: f64, track: Option<&str>) -> EvalBox {
    EvalBox {
        frame: FrameKey {
            sequence: sequence.to_string(),
            frame,
        },
        bbox,
        class,
        score,
        track_id: track.map(str::to_string),
        num_points: None,
        platform: None,
    }
}

/// Three sequences × 5 frames: two vehicles (4 × 2 × 1.5 m) and one pedestrian per frame, moving.
fn scene() -> Vec<EvalBox> {
    let mut boxes = Vec::new();
    for s in 0..3 {
        let seq = format!("seq{s}");
        for f in 0..5u64 {
            let t = f as f64;
            boxes.push(eval_box(
                &seq,
                f,
                Box3::new(10.0 + t, 3.0, 0.0, 4.0, 2.0, 1.5, 0.3),
                ObjectClass::Vehicle,
                1.0,
                Some("car-a"),
            ));
            boxes.push(eval_box(
                &seq,
                f,
                Box3::new(-20.0, -5.0 + t, 0.5, 4.5, 1.9, 1.6, 1.2),
                ObjectClass::Vehicle,
                1.0,
                Some("car-b"),
            ));
            boxes.push(eval_box(
                &seq,
                f,
                Box3::new(6.0, 6.0 - 0.5 * t, 0.0, 0.8, 0.6, 1.8, -0.4),
                ObjectClass::Pedestrian,
                1.0,
                Some("ped"),
            ));
        }
    }
    boxes
}

fn data(boxes: Vec<EvalBox>) -> EvalData {
    EvalData {
        boxes,
        queries: Vec::new(),
    }
}

#[test]
fn perfect_predictions_give_ap_one_and_mota_one() {
    let gt = scene();
    // Predictions: the same boxes with varied scores and their own track ids.
    let pred: Vec<EvalBox> = gt
        .iter()
        .enumerate()
        .map(|(i, b)| EvalBox {
            score: 0.5 + 0.4 * ((i * 7) % 11) as f64 / 11.0,
            track_id: b.track_id.as_ref().map(|t| format!("pred-{t}")),
            ..b.clone()
        })
        .collect();
    let report = eval::evaluate(&data(gt), &data(pred), &EvalConfig::default()).unwrap();
    // Vehicle and pedestrian × (BEV, 3D) × 2 thresholds; cyclist has no GT and no predictions.
    let with_gt: Vec<_> = report.detection.iter().filter(|d| d.num_gt > 0).collect();
    assert_eq!(with_gt.len(), 8);
    for d in with_gt {
        assert_abs_diff_eq!(d.ap_r40.unwrap(), 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(d.ap_all_points.unwrap(), 1.0, epsilon = 1e-12);
        assert_eq!(d.num_tp, d.num_gt);
        assert_abs_diff_eq!(d.errors.mean_center_error_m.unwrap(), 0.0, epsilon = 1e-12);
        assert_abs_diff_eq!(d.errors.mean_yaw_error_rad.unwrap(), 0.0, epsilon = 1e-12);
    }
    let cyclist = report
        .detection
        .iter()
        .find(|d| d.class == ObjectClass::Cyclist)
        .unwrap();
    assert_eq!(cyclist.ap_r40, None, "AP is undefined without GT");
    assert_eq!(report.tracking.len(), 2);
    for t in &report.tracking {
        let c = &t.clear_mot;
        assert_eq!(c.mota, Some(1.0));
        assert_eq!(
            (c.false_positives, c.false_negatives, c.id_switches, c.fragmentations),
            (0, 0, 0, 0)
        );
        assert_eq!(c.mostly_tracked, c.num_gt_tracks);
        assert_abs_diff_eq!(t.amota.unwrap(), 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(t.samota.unwrap(), 1.0, epsilon = 1e-12);
    }
    // The same with IoU association.
    let mut config = EvalConfig::default();
    config.tracking.matching = IouKind::ThreeD;
    config.tracking.iou_threshold = 0.5;
    let gt = scene();
    let pred = gt.clone();
    let report = eval::evaluate(&data(gt), &data(pred), &config).unwrap();
    for t in &report.tracking {
        assert_eq!(t.clear_mot.mota, Some(1.0));
        assert_abs_diff_eq!(t.clear_mot.motp_iou.unwrap(), 1.0, epsilon = 1e-9);
    }
}

/// Every vehicle moved by l/4 along its heading: overlap (l − l/4)·w·h, union (l + l/4)·w·h, so
/// BEV and 3D IoU = (3/4)/(5/4) = 0.6 exactly → AP 0 at 0.7 and AP 1 at 0.5 (vehicle defaults).
#[test]
fn shift_to_iou_point_six_gives_ap_zero_at_point_seven_and_one_at_point_five() {
    let gt: Vec<EvalBox> = scene()
        .into_iter()
        .filter(|b| b.class == ObjectClass::Vehicle)
        .collect();
    let pred: Vec<EvalBox> = gt
        .iter()
        .map(|b| {
            let d = b.bbox.l / 4.0;
            let mut moved = b.bbox;
            moved.x += d * b.bbox.yaw.cos();
            moved.y += d * b.bbox.yaw.sin();
            EvalBox {
                bbox: moved,
                score: 0.8,
                ..b.clone()
            }
        })
        .collect();
    assert_abs_diff_eq!(
        boxlayer::geometry::iou_3d(&gt[0].bbox, &pred[0].bbox),
        0.6,
        epsilon = 1e-9
    );
    let report = eval::evaluate(&data(gt), &data(pred), &EvalConfig::default()).unwrap();
    let vehicle: Vec<_> = report
        .detection
        .iter()
        .filter(|d| d.class == ObjectClass::Vehicle)
        .collect();
    assert_eq!(vehicle.len(), 4);
    for d in vehicle {
        let expected = if d.threshold == 0.7 { 0.0 } else { 1.0 };
        assert_eq!(d.num_gt, 30);
        assert_abs_diff_eq!(d.ap_r40.unwrap(), expected, epsilon = 1e-12);
        assert_abs_diff_eq!(d.ap_all_points.unwrap(), expected, epsilon = 1e-12);
        if expected == 1.0 {
            assert_abs_diff_eq!(d.errors.mean_center_error_m.unwrap(), 1.0 + 0.5 * 0.125, epsilon = 1e-9);
        }
    }
}

/// One GT object over 6 frames; predicted track "1" covers frames 0–2 and track "2" frames 3–5,
/// on the object. One switch at frame 3 (counted once: frames 4–5 keep track 2), no FP/FN:
/// MOTA = 1 − 1/6. A second object missed in frame 2 and resumed with the same predicted id gives
/// one fragmentation and one FN but no switch.
#[test]
fn single_id_switch_is_counted_once() {
    let mut gt = Vec::new();
    let mut pred = Vec::new();
    for f in 0..6u64 {
        let b = Box3::new(f as f64, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
        gt.push(eval_box("s", f, b, ObjectClass::Vehicle, 1.0, Some("obj")));
        let id = if f < 3 { "1" } else { "2" };
        pred.push(eval_box("s", f, b, ObjectClass::Vehicle, 0.9, Some(id)));
    }
    let config = TrackingConfig::default();
    let m = eval::clear_mot(&gt, &pred, ObjectClass::Vehicle, &config, ThresholdRule::Strict);
    assert_eq!(m.id_switches, 1);
    assert_eq!((m.false_positives, m.false_negatives, m.fragmentations), (0, 0, 0));
    assert_abs_diff_eq!(m.mota.unwrap(), 1.0 - 1.0 / 6.0, epsilon = 1e-12);

    for f in 0..6u64 {
        let b = Box3::new(f as f64, 20.0, 0.0, 4.0, 2.0, 1.5, 0.0);
        gt.push(eval_box("s", f, b, ObjectClass::Vehicle, 1.0, Some("other")));
        if f != 2 {
            pred.push(eval_box("s", f, b, ObjectClass::Vehicle, 0.9, Some("9")));
        }
    }
    let m = eval::clear_mot(&gt, &pred, ObjectClass::Vehicle, &config, ThresholdRule::Strict);
    assert_eq!(m.id_switches, 1);
    assert_eq!((m.false_positives, m.false_negatives, m.fragmentations), (0, 1, 1));
    assert_eq!((m.num_gt, m.num_gt_tracks, m.mostly_tracked), (12, 2, 2));
    assert_abs_diff_eq!(m.mota.unwrap(), 1.0 - 2.0 / 12.0, epsilon = 1e-12);
}

/// Crafted curve through the full pipeline: 3 GT vehicles in 3 frames; predictions by falling
/// score 0.9 TP, 0.8 FP, 0.7 TP, 0.6 FP, 0.5 TP (FPs far from any GT).
/// Curve (recall, precision): (1/3, 1), (1/3, 1/2), (2/3, 2/3), (2/3, 1/2), (1, 3/5).
/// Interpolated precision: 1, 2/3, 2/3, 3/5, 3/5.
/// All-point AP = 1/3·1 + 1/3·2/3 + 1/3·3/5 = 34/45.
/// R40 AP: i = 1..13 (i/40 ≤ 1/3) → 1; i = 14..26 (≤ 2/3) → 2/3; i = 27..40 → 3/5;
/// (13 + 26/3 + 42/5)/40 = 451/600.
#[test]
fn crafted_precision_recall_curve_gives_hand_computed_ap() {
    let car = |x: f64| Box3::new(x, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let gt: Vec<EvalBox> = (0..3)
        .map(|f| eval_box("s", f, car(10.0), ObjectClass::Vehicle, 1.0, None))
        .collect();
    let pred = vec![
        eval_box("s", 0, car(10.0), ObjectClass::Vehicle, 0.9, None),
        eval_box("s", 0, car(40.0), ObjectClass::Vehicle, 0.8, None),
        eval_box("s", 1, car(10.0), ObjectClass::Vehicle, 0.7, None),
        eval_box("s", 1, car(60.0), ObjectClass::Vehicle, 0.6, None),
        eval_box("s", 2, car(10.0), ObjectClass::Vehicle, 0.5, None),
    ];
    let report = eval::evaluate(&data(gt), &data(pred), &EvalConfig::default()).unwrap();
    for d in report.detection.iter().filter(|d| d.class == ObjectClass::Vehicle) {
        assert_abs_diff_eq!(d.ap_all_points.unwrap(), 34.0 / 45.0, epsilon = 1e-12);
        assert_abs_diff_eq!(d.ap_r40.unwrap(), 451.0 / 600.0, epsilon = 1e-12);
        // At score ≥ 0.5 (every prediction): recall 1, precision 3/5.
        assert_abs_diff_eq!(d.recall_at_score.unwrap(), 1.0, epsilon = 1e-12);
        assert_abs_diff_eq!(d.precision_at_score.unwrap(), 0.6, epsilon = 1e-12);
    }
}

fn query(id: &str, platform: Platform, boxes: Vec<Box3>) -> GroundingQuery {
    GroundingQuery {
        id: id.to_string(),
        frame: FrameKey {
            sequence: "s".into(),
            frame: 0,
        },
        platform: Some(platform),
        boxes,
    }
}

/// q1: GT yawed 90°, prediction the same footprint written axis-aligned → IoU 1 with 3EED's
/// rotated-vs-axis-aligned IoU. q2: prediction half the GT's length, same centre → IoU 2/4 = 0.5
/// exactly: correct at 0.25, not at 0.5 under the strict rule, correct under `>=`. q3 (two objects):
/// one exact, one far off → IoUs (1, 0), query IoU 0.5, incorrect at every δ. q4: no prediction.
#[test]
fn grounding_threshold_rule_and_joint_correctness() {
    let gt_data = EvalData {
        boxes: Vec::new(),
        queries: vec![
            query(
                "q1",
                Platform::Drone,
                vec![Box3::new(1.0, 2.0, 0.0, 4.0, 2.0, 1.5, std::f64::consts::FRAC_PI_2)],
            ),
            query(
                "q2",
                Platform::Drone,
                vec![Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0)],
            ),
            query(
                "q3",
                Platform::Quadruped,
                vec![
                    Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.8, 0.0),
                    Box3::new(5.0, 0.0, 0.0, 1.0, 1.0, 1.8, 0.0),
                ],
            ),
            query(
                "q4",
                Platform::Quadruped,
                vec![Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0)],
            ),
        ],
    };
    let pred_data = EvalData {
        boxes: Vec::new(),
        queries: vec![
            query(
                "q1",
                Platform::Drone,
                vec![Box3::new(1.0, 2.0, 0.0, 2.0, 4.0, 1.5, 0.0)],
            ),
            query(
                "q2",
                Platform::Drone,
                vec![Box3::new(0.0, 0.0, 0.0, 2.0, 2.0, 1.5, 0.0)],
            ),
            query(
                "q3",
                Platform::Quadruped,
                vec![
                    Box3::new(30.0, 0.0, 0.0, 1.0, 1.0, 1.8, 0.0),
                    Box3::new(0.0, 0.0, 0.0, 1.0, 1.0, 1.8, 0.0),
                ],
            ),
        ],
    };
    let mut config = EvalConfig::default();
    assert_eq!(config.grounding.iou, GroundingIou::RotatedVsAxisAligned3d);
    let report = eval::evaluate(&gt_data, &pred_data, &config).unwrap();
    let g = report.grounding.unwrap();
    let ious: Vec<f64> = g.queries.iter().map(|q| q.iou).collect();
    assert_abs_diff_eq!(ious[0], 1.0, epsilon = 1e-9);
    assert_abs_diff_eq!(ious[1], 0.5, epsilon = 1e-12);
    assert_abs_diff_eq!(ious[2], 0.5, epsilon = 1e-12);
    assert_eq!(g.queries[2].target_ious, vec![1.0, 0.0]);
    assert_eq!(ious[3], 0.0);
    assert_eq!(g.num_missing_predictions, 1);
    let correct: Vec<Vec<bool>> = g.queries.iter().map(|q| q.correct.clone()).collect();
    assert_eq!(
        correct,
        vec![
            vec![true, true],
            vec![true, false],
            vec![false, false],
            vec![false, false]
        ]
    );
    let all = &g.summaries[0];
    assert_eq!(all.subset, "all");
    assert_abs_diff_eq!(all.accuracy[0].accuracy, 0.5, epsilon = 1e-12);
    assert_abs_diff_eq!(all.accuracy[1].accuracy, 0.25, epsilon = 1e-12);
    assert_abs_diff_eq!(all.miou, 0.5, epsilon = 1e-9);
    let subsets: Vec<&str> = g.summaries.iter().map(|s| s.subset.as_str()).collect();
    assert_eq!(
        subsets,
        vec!["all", "single_object", "multi_object", "drone", "quadruped"]
    );
    // Fully rotated IoU disagrees on q1: the 90° GT against a 0° prediction of swapped size is the same
    // footprint, so it is also 1 there; a prediction keeping the GT's l/w but yaw 0 is not.
    config.grounding.iou = GroundingIou::Rotated3d;
    let turned = EvalData {
        boxes: Vec::new(),
        queries: vec![query(
            "q1",
            Platform::Drone,
            vec![Box3::new(1.0, 2.0, 0.0, 4.0, 2.0, 1.5, 0.0)],
        )],
    };
    let g = eval::evaluate(&gt_data, &turned, &config).unwrap().grounding.unwrap();
    assert_abs_diff_eq!(g.queries[0].iou, 1.0 / 3.0, epsilon = 1e-9);
    // The inclusive rule accepts q2 at 0.5.
    config.threshold_rule = ThresholdRule::Inclusive;
    let g = eval::evaluate(&gt_data, &pred_data, &config)
        .unwrap()
        .grounding
        .unwrap();
    assert_eq!(g.queries[1].correct, vec![true, true]);
}

/// One frame, GT A and B, predictions pA (0.9, on A), pF (0.8, far from both), pB (0.7, on B);
/// P = 2, 4 recall steps. The full run's matched scores are [0.9, 0.7].
/// r = 1/4 and 1/2: ⌈r·2⌉ = 1 → score ≥ 0.9 → FN 1: MOTAR = 1 − (1 − (1 − r)·2)/(2r) = 2 → 1 and 1.
/// r = 3/4: ⌈1.5⌉ = 2 → score ≥ 0.7 → FP 1: 1 − (1 − 0.5)/1.5 = 2/3. r = 1: 1 − 1/2 = 1/2.
/// sAMOTA = (1 + 1 + 2/3 + 1/2)/4 = 19/24; AMOTA with recalls ≥ 0.5 = (1 + 2/3 + 1/2)/3 = 13/18.
#[test]
fn amota_and_samota_match_hand_computation() {
    let a = Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let b = Box3::new(10.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let far = Box3::new(50.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let gt = vec![
        eval_box("s", 0, a, ObjectClass::Vehicle, 1.0, Some("A")),
        eval_box("s", 0, b, ObjectClass::Vehicle, 1.0, Some("B")),
    ];
    let pred = vec![
        eval_box("s", 0, a, ObjectClass::Vehicle, 0.9, Some("1")),
        eval_box("s", 0, far, ObjectClass::Vehicle, 0.8, Some("2")),
        eval_box("s", 0, b, ObjectClass::Vehicle, 0.7, Some("3")),
    ];
    let config = TrackingConfig {
        recall_steps: 4,
        amota_min_recall: 0.5,
        ..TrackingConfig::default()
    };
    let results = eval::evaluate_tracking(&gt, &pred, &config, ThresholdRule::Strict);
    assert_eq!(results.len(), 1);
    let t = &results[0];
    assert_eq!(t.clear_mot.false_positives, 1);
    assert_abs_diff_eq!(t.clear_mot.mota.unwrap(), 0.5, epsilon = 1e-12);
    assert_abs_diff_eq!(t.samota.unwrap(), 19.0 / 24.0, epsilon = 1e-12);
    assert_abs_diff_eq!(t.amota.unwrap(), 13.0 / 18.0, epsilon = 1e-12);
    assert_abs_diff_eq!(t.amotp_m.unwrap(), 0.0, epsilon = 1e-12);
}

/// GT vehicles at BEV range 10 m (50 points), 40 m (0 points) and 60 m (500 points); predictions on
/// the 10 m one (0.9), on the 40 m one (0.85) and a false one at 45 m (0.8, point count unknown).
/// All boxes: curve (1/3, 1), (2/3, 1), (2/3, 2/3) → all-point 2/3, R40 26/40 (i ≤ 26 reach 2/3).
/// Range 30–50: GT {40 m}, TP 0.85 then FP 0.8 → AP 1; 0–30: the 40 m prediction matches an
/// out-of-bin GT and is dropped → AP 1; 50+: AP 0. Ignoring zero-point GT: the 40 m prediction is
/// neither TP nor FP, P = 2, curve (1/2, 1), (1/2, 1/2) → all-point 1/2, R40 20/40.
#[test]
fn breakdowns_and_zero_point_ignoring() {
    let car = |x: f64, points: u64| EvalBox {
        num_points: Some(points),
        platform: Some(Platform::Vehicle),
        ..eval_box(
            "s",
            0,
            Box3::new(x, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0),
            ObjectClass::Vehicle,
            1.0,
            None,
        )
    };
    let gt = vec![car(10.0, 50), car(40.0, 0), car(60.0, 500)];
    let guess = |x: f64, score: f64| {
        eval_box(
            "s",
            0,
            Box3::new(x, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0),
            ObjectClass::Vehicle,
            score,
            None,
        )
    };
    let pred = vec![guess(10.0, 0.9), guess(40.0, 0.85), guess(45.0, 0.8)];
    let mut config = EvalConfig::default();
    let report = eval::evaluate(&data(gt.clone()), &data(pred.clone()), &config).unwrap();
    let d = &report.detection[0];
    assert_eq!(
        (d.class, d.iou_kind, d.threshold),
        (ObjectClass::Vehicle, IouKind::Bev, 0.7)
    );
    assert_abs_diff_eq!(d.ap_all_points.unwrap(), 2.0 / 3.0, epsilon = 1e-12);
    assert_abs_diff_eq!(d.ap_r40.unwrap(), 26.0 / 40.0, epsilon = 1e-12);
    let bin = |by: &str, bin: &str| {
        d.breakdowns
            .iter()
            .find(|b| b.by == by && b.bin == bin)
            .unwrap()
            .clone()
    };
    assert_eq!(bin("range_m", "0-30").ap_all_points, Some(1.0));
    assert_eq!(bin("range_m", "30-50").ap_all_points, Some(1.0));
    assert_eq!(bin("range_m", "30-50").num_pred, 2);
    assert_eq!(bin("range_m", "50+").ap_all_points, Some(0.0));
    assert_eq!(bin("points", "0").num_gt, 1);
    assert_eq!(bin("points", "1-99").ap_all_points, Some(1.0));
    assert_eq!(bin("points", "900+").ap_all_points, None);
    assert_eq!(bin("platform", "vehicle").num_gt, 3);

    config.detection.ignore_zero_point_gt = true;
    let report = eval::evaluate(&data(gt), &data(pred), &config).unwrap();
    let d = &report.detection[0];
    assert_eq!((d.num_gt, d.num_pred), (2, 2));
    assert_abs_diff_eq!(d.ap_all_points.unwrap(), 0.5, epsilon = 1e-12);
    assert_abs_diff_eq!(d.ap_r40.unwrap(), 0.5, epsilon = 1e-12);
}

/// CLEAR-MOT continuity: the object is matched to track "1" in frame 0. In frame 1 track "2" sits
/// exactly on it and track "1" is 1.5 m off — still inside the 2 m gate — so the correspondence is
/// kept: no switch, track "2" is a false positive. A second object matched only in 1 of its
/// 5 frames is mostly lost (1/5 ≤ 0.2); the first, matched in 2 of 2, is mostly tracked.
#[test]
fn existing_correspondence_is_kept_within_the_gate() {
    let at = |x: f64| Box3::new(x, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let far = |x: f64| Box3::new(x, 30.0, 0.0, 4.0, 2.0, 1.5, 0.0);
    let mut gt = vec![
        eval_box("s", 0, at(0.0), ObjectClass::Vehicle, 1.0, Some("obj")),
        eval_box("s", 1, at(1.0), ObjectClass::Vehicle, 1.0, Some("obj")),
    ];
    let mut pred = vec![
        eval_box("s", 0, at(0.0), ObjectClass::Vehicle, 0.9, Some("1")),
        eval_box("s", 1, at(2.5), ObjectClass::Vehicle, 0.9, Some("1")),
        eval_box("s", 1, at(1.0), ObjectClass::Vehicle, 0.9, Some("2")),
    ];
    for f in 0..5u64 {
        gt.push(eval_box("s", f, far(0.0), ObjectClass::Vehicle, 1.0, Some("lost")));
    }
    pred.push(eval_box("s", 4, far(0.0), ObjectClass::Vehicle, 0.9, Some("3")));
    let m = eval::clear_mot(
        &gt,
        &pred,
        ObjectClass::Vehicle,
        &TrackingConfig::default(),
        ThresholdRule::Strict,
    );
    assert_eq!(m.id_switches, 0);
    assert_eq!((m.num_matches, m.false_positives, m.false_negatives), (3, 1, 4));
    assert_eq!(
        (m.num_gt_tracks, m.mostly_tracked, m.mostly_lost, m.partially_tracked),
        (2, 1, 1, 0)
    );
    // MOTP over the matches: distances 0, 1.5, 0 → 0.5 m.
    assert_abs_diff_eq!(m.motp_center_m.unwrap(), 0.5, epsilon = 1e-12);
}
