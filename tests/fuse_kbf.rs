//! KDE box fusion through the public API (`fuse_boxes`), issue 8's unit acceptance: identical
//! boxes fuse to themselves, one outlier does not move the consensus, headings near ±π fuse,
//! a 2-member cluster follows the documented rule, min-votes drops singletons, detector weights
//! act as documented; plus order independence and translation equivariance on random frames.

use boxlayer::detect::Detection;
use boxlayer::fuse::{Bandwidth, CentreEstimate, FusedBox, FusionConfig, FusionMethod, YawEstimate, fuse_boxes};
use boxlayer::geometry::{Box3, wrap_angle};
use boxlayer::{ObjectClass, Platform};

fn det(b: [f64; 7], score: f32, detector: &str) -> Detection {
    Detection {
        box3: Box3::new(b[0], b[1], b[2], b[3], b[4], b[5], b[6]),
        class: ObjectClass::Vehicle,
        score,
        detector: detector.into(),
    }
}

fn kbf(min_votes: u32) -> FusionConfig {
    let mut c = FusionConfig::default();
    c.vehicle.min_votes = min_votes;
    c
}

/// KBF with the density-peak centre and heading (`pipelines/base.toml`'s `[fusion]`'s estimators).
fn kbf_peak(min_votes: u32, yaw_sigma: f64) -> FusionConfig {
    let mut c = kbf(min_votes);
    c.vehicle.centre_estimate = CentreEstimate::Peak;
    c.vehicle.yaw_estimate = YawEstimate::Peak;
    c.vehicle.yaw_bandwidth = Bandwidth::Absolute(yaw_sigma);
    c
}

fn fuse(dets: &[Detection], config: &FusionConfig) -> Vec<FusedBox> {
    fuse_boxes(dets, config, Platform::Vehicle).unwrap()
}

#[test]
fn identical_boxes_fuse_to_themselves() {
    let b = [20.0, -3.0, 0.9, 4.7, 1.95, 1.6, -2.1];
    for n in 1..=4 {
        let dets: Vec<Detection> = ["a", "b", "c", "d"][..n].iter().map(|d| det(b, 0.75, d)).collect();
        let fused = fuse(&dets, &kbf(1));
        assert_eq!(fused.len(), 1, "{n} copies");
        assert_eq!(fused[0].box3, dets[0].box3, "{n} copies");
        assert!((fused[0].score - 0.75).abs() < 1e-6);
        assert_eq!(fused[0].votes, n as u32);
    }
}

#[test]
fn one_outlier_keeps_the_consensus() {
    // Four detectors agree within ~10 cm; a fifth is 1.1 m off (still in the 1.5 m radius) with a
    // much longer box, a wrong heading and the highest score.
    let dets = vec![
        det([30.0, 10.0, 0.8, 4.5, 1.9, 1.6, 0.30], 0.70, "a"),
        det([30.08, 10.04, 0.82, 4.6, 1.9, 1.6, 0.32], 0.65, "b"),
        det([29.95, 9.97, 0.79, 4.4, 1.9, 1.6, 0.29], 0.60, "c"),
        det([30.03, 10.06, 0.81, 4.55, 1.9, 1.6, 0.31], 0.70, "d"),
        det([30.9, 10.6, 1.0, 6.8, 2.4, 2.0, 1.40], 0.95, "e"),
    ];
    let fused = fuse(&dets, &kbf(3));
    assert_eq!(fused.len(), 1);
    let f = &fused[0];
    assert_eq!(f.votes, 5);
    assert!(
        dets[..4].iter().any(|d| d.box3.x == f.box3.x && d.box3.y == f.box3.y),
        "centre {:?} is not one of the four agreeing members",
        f.box3
    );
    assert!((f.box3.yaw - 0.30).abs() < 0.03, "yaw {}", f.box3.yaw);
    // Sizes are the KDE peak: pulled a little towards the outlier but far from it.
    assert!(f.box3.l > 4.4 && f.box3.l < 5.4, "l {}", f.box3.l);
}

#[test]
fn heading_near_plus_minus_pi_fuses() {
    let pi = std::f64::consts::PI;
    let dets = vec![
        det([5.0, 5.0, 0.8, 4.5, 1.9, 1.6, pi - 0.02], 0.8, "a"),
        det([5.1, 5.0, 0.8, 4.5, 1.9, 1.6, -pi + 0.01], 0.7, "b"),
        det([5.0, 5.1, 0.8, 4.5, 1.9, 1.6, pi - 0.04], 0.75, "c"),
    ];
    for method in [FusionMethod::Kbf, FusionMethod::Wbf] {
        let config = FusionConfig { method, ..kbf(3) };
        let fused = fuse(&dets, &config);
        assert_eq!(fused.len(), 1, "{method:?}");
        // An arithmetic mean of the raw yaws would be ≈ 1.04 rad.
        let off = wrap_angle(fused[0].box3.yaw - pi).abs();
        assert!(off < 0.05, "{method:?}: yaw {}", fused[0].box3.yaw);
    }
    // The axis peak with a kernel far wider than the spread is the weighted mean of the yaws
    // unwrapped around π: π + (0.8·(−0.02) + 0.7·0.01 + 0.75·(−0.04)) / 2.25 = π − 0.039 / 2.25,
    // the same when one member's heading is flipped (its axis is the same).
    let mut flipped = dets.clone();
    flipped[1].box3.yaw = 0.01;
    for dets in [&dets, &flipped] {
        let fused = fuse(dets, &kbf_peak(3, 10.0));
        assert_eq!(fused.len(), 1);
        let off = wrap_angle(fused[0].box3.yaw - (pi - 0.039 / 2.25)).abs();
        assert!(off < 1e-6, "yaw {}", fused[0].box3.yaw);
    }
}

#[test]
fn two_member_cluster_follows_the_documented_rule() {
    // Weights are score × detector weight: 0.9 × 1 vs 0.5 × 1.
    let a = det([0.0, 10.0, 0.8, 4.0, 1.8, 1.5, 0.2], 0.9, "a");
    let b = det([0.5, 10.3, 0.9, 5.0, 2.0, 1.7, 0.4], 0.5, "b");
    let fused = fuse(&[b.clone(), a.clone()], &kbf(2));
    assert_eq!(fused.len(), 1);
    let f = &fused[0];
    // Centre and heading of the heavier member, sizes and score weighted means.
    assert_eq!((f.box3.x, f.box3.y, f.box3.z, f.box3.yaw), (0.0, 10.0, 0.8, 0.2));
    let mean = |x: f64, y: f64| (0.9 * x + 0.5 * y) / 1.4;
    // Scores are f32, so the weights carry f32 rounding.
    assert!((f.box3.l - mean(4.0, 5.0)).abs() < 1e-6);
    assert!((f.box3.w - mean(1.8, 2.0)).abs() < 1e-6);
    assert!((f.box3.h - mean(1.5, 1.7)).abs() < 1e-6);
    assert!((f64::from(f.score) - mean(0.9, 0.5)).abs() < 1e-6);
    assert_eq!(f.detectors, vec!["a", "b"]);
}

#[test]
fn min_votes_drops_singletons() {
    let dets = vec![
        det([0.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.9, "a"),
        det([0.2, 0.1, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "b"),
        det([50.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.99, "a"),
    ];
    assert_eq!(fuse(&dets, &kbf(2)).len(), 1);
    assert_eq!(fuse(&dets, &kbf(1)).len(), 2);
    assert!(fuse(&dets, &kbf(3)).is_empty());
}

#[test]
fn detector_weights_pick_the_centre_and_can_silence_a_detector() {
    // Three members in 3D are always degenerate: the centre KDE runs on their plane, where (with
    // the covariance-scaled bandwidth) their whitened positions are nearly symmetric, so the
    // member with the largest score × detector weight has the highest density.
    let dets = vec![
        det([10.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.80, "a"),
        det([10.4, 0.3, 0.9, 4.6, 1.9, 1.6, 0.05], 0.70, "b"),
        det([10.1, -0.4, 0.7, 4.4, 1.9, 1.6, -0.05], 0.60, "c"),
    ];
    let plain = fuse(&dets, &kbf(3));
    assert_eq!(plain[0].box3.x, 10.0);
    let mut weighted = kbf(3);
    weighted.vehicle.detector_weights.insert("b".into(), 3.0);
    let fused = fuse(&dets, &weighted);
    assert_eq!((fused[0].box3.x, fused[0].box3.yaw), (10.4, 0.05));
    // Weight 0 removes a detector's boxes: only two votes remain, below min_votes 3.
    let mut silenced = kbf(3);
    silenced.vehicle.detector_weights.insert("c".into(), 0.0);
    assert!(fuse(&dets, &silenced).is_empty());
    silenced.vehicle.min_votes = 2;
    let fused = fuse(&dets, &silenced);
    assert_eq!(
        (fused[0].votes, fused[0].detectors.clone()),
        (2, vec!["a".to_string(), "b".to_string()])
    );
}

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

/// 20 objects seen by 3 detectors with ~0.2 m noise and 10 % misses, plus a few false boxes.
fn random_frame(seed: u64) -> Vec<Detection> {
    let mut rng = Rng(seed);
    let mut dets = Vec::new();
    for _ in 0..20 {
        let (x, y, yaw) = (
            rng.uniform(-50.0, 50.0),
            rng.uniform(-50.0, 50.0),
            rng.uniform(-3.1, 3.1),
        );
        for name in ["a", "b", "c"] {
            if rng.uniform(0.0, 1.0) < 0.1 {
                continue;
            }
            let b = [
                x + rng.uniform(-0.2, 0.2),
                y + rng.uniform(-0.2, 0.2),
                0.8 + rng.uniform(-0.1, 0.1),
                4.5 + rng.uniform(-0.3, 0.3),
                1.9 + rng.uniform(-0.1, 0.1),
                1.6 + rng.uniform(-0.1, 0.1),
                yaw + rng.uniform(-0.05, 0.05),
            ];
            dets.push(det(b, rng.uniform(0.3, 1.0) as f32, name));
        }
    }
    for name in ["a", "b", "c"] {
        let b = [
            rng.uniform(-50.0, 50.0),
            rng.uniform(-50.0, 50.0),
            0.8,
            4.5,
            1.9,
            1.6,
            0.0,
        ];
        dets.push(det(b, rng.uniform(0.2, 0.6) as f32, name));
    }
    dets
}

#[test]
fn fusion_ignores_input_order_and_follows_translation() {
    for (seed, config) in (0..20).flat_map(|s| [(s, kbf(2)), (s, kbf_peak(2, 0.1))]) {
        let dets = random_frame(seed);
        let fused = fuse(&dets, &config);
        assert!(fused.len() >= 15, "seed {seed}: only {} fused boxes", fused.len());
        // Reversed input: the same boxes (member indices map through the reversal).
        let reversed: Vec<Detection> = dets.iter().rev().cloned().collect();
        let mut again = fuse(&reversed, &config);
        let n = dets.len();
        for b in &mut again {
            b.members = b.members.iter().map(|&i| n - 1 - i).rev().collect();
        }
        let key = |b: &FusedBox| (b.box3.x.to_bits(), b.box3.y.to_bits());
        let (mut x, mut y) = (fused.clone(), again);
        x.sort_by_key(key);
        y.sort_by_key(key);
        assert_eq!(x.len(), y.len(), "seed {seed}");
        for (a, b) in x.iter().zip(&y) {
            assert_eq!((a.votes, &a.members), (b.votes, &b.members), "seed {seed}");
            let (p, q) = (a.box3.to_array(), b.box3.to_array());
            assert!(
                p.iter().zip(&q).all(|(u, v)| (u - v).abs() < 1e-9),
                "seed {seed}: {p:?} vs {q:?}"
            );
            assert!((a.score - b.score).abs() < 1e-6, "seed {seed}");
        }
        // Shifted by (100, −40, 2) m: every fused box shifts by the same amount.
        let shifted: Vec<Detection> = dets
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.box3.x += 100.0;
                d.box3.y -= 40.0;
                d.box3.z += 2.0;
                d
            })
            .collect();
        let moved = fuse(&shifted, &config);
        assert_eq!(moved.len(), fused.len(), "seed {seed}");
        for (a, b) in fused.iter().zip(&moved) {
            assert_eq!(a.members, b.members, "seed {seed}");
            assert!((b.box3.x - a.box3.x - 100.0).abs() < 1e-9 && (b.box3.y - a.box3.y + 40.0).abs() < 1e-9);
            assert!((b.box3.l - a.box3.l).abs() < 1e-9 && b.box3.yaw == a.box3.yaw);
        }
    }
}

#[test]
fn agreement_score_lowers_boxes_whose_detectors_disagree() {
    // Three detectors agree exactly on one car; two detectors place another car 0.6 m apart.
    let dets = vec![
        det([10.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "a"),
        det([10.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "b"),
        det([10.0, 0.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "c"),
        det([30.0, 10.0, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "a"),
        det([30.0, 10.6, 0.8, 4.5, 1.9, 1.6, 0.0], 0.8, "b"),
    ];
    let score_at = |fused: &[FusedBox], x: f64| {
        fused
            .iter()
            .find(|b| (b.box3.x - x).abs() < 1.0)
            .map(|b| f64::from(b.score))
            .unwrap()
    };
    let mut config = kbf_peak(1, 0.1);
    let off = fuse(&dets, &config);
    assert!((score_at(&off, 10.0) - 0.8).abs() < 1e-6);
    assert!((score_at(&off, 30.0) - 0.8).abs() < 1e-6);
    config.vehicle.agreement_sigma_m = 0.3;
    let on = fuse(&dets, &config);
    // Full agreement keeps the score; the pair's peak centre is their mean, 0.3 m from each, so
    // the score is multiplied by exp(−0.3² / (2 · 0.3²)) = exp(−1/2).
    assert!((score_at(&on, 10.0) - 0.8).abs() < 1e-6);
    assert!((score_at(&on, 30.0) - 0.8 * (-0.5f64).exp()).abs() < 1e-6);
    let fused_pair = on.iter().find(|b| b.box3.x > 20.0).unwrap();
    assert!((fused_pair.box3.y - 10.3).abs() < 1e-9);
    // A negative scale is a configuration error that names the field.
    config.vehicle.agreement_sigma_m = -1.0;
    let err = fuse_boxes(&dets, &config, Platform::Vehicle).unwrap_err().to_string();
    assert!(err.contains("agreement_sigma_m"), "{err}");
}
