//! KDE box fusion of one cluster (MS3D's `kbf`, reference §2.2, with its two bugs fixed):
//! centre and heading are *selected* — the member at the mode of a weighted KDE — because
//! averaging blurs centres and headings; sizes and score are *estimated* as the peak of a 1-D KDE.
//! Weights are score × detector weight. Options not in MS3D: the centre and the heading's axis as
//! density peaks (`centre_estimate`, `yaw_estimate`), which `docs/fusion.md` measures.

use super::FuseError;
use super::config::{CentreEstimate, ClassFusionConfig, YawEstimate};
use super::kde::{GaussianKde, fold_to_axis, yaw_axis_peak_in, yaw_mode_member_in, yaw_nearest_circular_mean};
use crate::geometry::Box3;

/// One box of a cluster as KBF sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KbfMember {
    /// The box.
    pub box3: Box3,
    /// Its detector score in [0, 1].
    pub score: f64,
    /// Its KDE weight, score × detector weight (> 0).
    pub weight: f64,
}

/// The fused box and score of one cluster.
///
/// - 1 member: that box and score.
/// - 2 members (the rule MS3D intended; its `boxes.shape == 2` test is always false, so its
///   pairs fall through to the KDE): centre, heading, pitch and roll from the member with the
///   larger weight (the first on a tie), l, w, h and score the weighted means.
/// - 3 or more: the centre of the member at the mode of a weighted KDE over centres (on the
///   centres' own span when they are degenerate, e.g. 3 members in 3D, which always are); the
///   heading, pitch and roll of the member at the mode of a weighted KDE on the yaw circle
///   (yaws all equal: the member nearest the circular mean, by absolute wrapped difference,
///   which MS3D's fallback lacks); l, w and h the peaks of 1-D KDEs (unweighted unless
///   `weighted_sizes`); the score the peak of a weighted 1-D KDE. A 1-D KDE whose samples are all
///   equal peaks at that value.
///
/// With `centre_estimate = peak` the centre is instead the density peak (mean-shift from the
/// mode member; the weighted mean for pairs). With `yaw_estimate = peak` the yaw is the peak of
/// the axis density (members folded onto the heading member's axis, mean-shift from its
/// heading; for pairs the weighted mean of the folded yaws); the direction stays the member's.
pub fn fuse_cluster(members: &[KbfMember], config: &ClassFusionConfig) -> Result<(Box3, f64), FuseError> {
    let n = members.len();
    match n {
        0 => Err(FuseError::KdeInput {
            reason: "empty cluster".into(),
        }),
        1 => Ok((members[0].box3, members[0].score)),
        2 => Ok(fuse_pair(&members[0], &members[1], config)),
        _ => fuse_many(members, config, &mut KbfScratch::default()),
    }
}

fn fuse_pair(a: &KbfMember, b: &KbfMember, config: &ClassFusionConfig) -> (Box3, f64) {
    let lead = if b.weight > a.weight { b } else { a };
    // Written as a + share·(b − a) so equal values average to themselves exactly.
    let share_b = b.weight / (a.weight + b.weight);
    let mean = |f: fn(&Box3) -> f64| f(&a.box3) + share_b * (f(&b.box3) - f(&a.box3));
    let mut fused = Box3 {
        l: mean(|x| x.l),
        w: mean(|x| x.w),
        h: mean(|x| x.h),
        ..lead.box3
    };
    if config.centre_estimate == CentreEstimate::Peak {
        fused.x = mean(|x| x.x);
        fused.y = mean(|x| x.y);
        fused.z = mean(|x| x.z);
    }
    if config.yaw_estimate == YawEstimate::Peak {
        let mut folded = Vec::with_capacity(2);
        fold_to_axis(&[a.box3.yaw, b.box3.yaw], lead.box3.yaw, &mut folded);
        let share_b = b.weight / (a.weight + b.weight);
        fused.yaw = crate::geometry::wrap_angle(folded[0][0] + share_b * (folded[1][0] - folded[0][0]));
    }
    let score = a.score + share_b * (b.score - a.score);
    (fused, score)
}

/// Buffers reused across clusters, so fusing a frame does not allocate per cluster.
#[derive(Debug, Default)]
pub(crate) struct KbfScratch {
    weights: Vec<f64>,
    centres: Vec<[f64; 3]>,
    column: Vec<[f64; 1]>,
    yaws: Vec<f64>,
    unwrapped: Vec<[f64; 1]>,
}

/// [`fuse_cluster`] with caller-owned buffers.
pub(crate) fn fuse_cluster_in(
    members: &[KbfMember],
    config: &ClassFusionConfig,
    scratch: &mut KbfScratch,
) -> Result<(Box3, f64), FuseError> {
    match members.len() {
        0..=2 => fuse_cluster(members, config),
        _ => fuse_many(members, config, scratch),
    }
}

fn fuse_many(
    members: &[KbfMember],
    config: &ClassFusionConfig,
    scratch: &mut KbfScratch,
) -> Result<(Box3, f64), FuseError> {
    let KbfScratch {
        weights,
        centres,
        column,
        yaws,
        unwrapped,
    } = scratch;
    weights.clear();
    weights.extend(members.iter().map(|m| m.weight));
    centres.clear();
    centres.extend(members.iter().map(|m| [m.box3.x, m.box3.y, m.box3.z]));
    let centre_kde = GaussianKde::on_span(
        centres,
        Some(weights),
        config.centre_bandwidth,
        config.centre_min_variance_m2,
    )?;
    let mode_member = &members[centre_kde.argmax_point()].box3;
    let [cx, cy, cz] = match config.centre_estimate {
        CentreEstimate::Member => [mode_member.x, mode_member.y, mode_member.z],
        CentreEstimate::Peak => centre_kde.mode_from([mode_member.x, mode_member.y, mode_member.z], 1e-6),
    };

    let size_weights = config.weighted_sizes.then_some(weights.as_slice());
    let mut peak = |f: fn(&KbfMember) -> f64, w: Option<&[f64]>, bandwidth| -> Result<f64, FuseError> {
        column.clear();
        column.extend(members.iter().map(|m| [f(m)]));
        Ok(GaussianKde::on_span(column, w, bandwidth, 0.0)?.peak())
    };
    let l = peak(|m| m.box3.l, size_weights, config.size_bandwidth)?;
    let w = peak(|m| m.box3.w, size_weights, config.size_bandwidth)?;
    let h = peak(|m| m.box3.h, size_weights, config.size_bandwidth)?;
    let score = peak(|m| m.score, Some(weights), config.score_bandwidth)?;

    yaws.clear();
    yaws.extend(members.iter().map(|m| m.box3.yaw));
    let heading_member = match yaw_mode_member_in(yaws, weights, config.yaw_bandwidth, 0.0, unwrapped)? {
        Some(i) => i,
        None => yaw_nearest_circular_mean(yaws, weights),
    };
    let heading = &members[heading_member].box3;
    let yaw = match config.yaw_estimate {
        YawEstimate::Member => heading.yaw,
        YawEstimate::Peak => yaw_axis_peak_in(yaws, weights, heading.yaw, config.yaw_bandwidth, unwrapped)?,
    };
    let fused = Box3 {
        x: cx,
        y: cy,
        z: cz,
        l,
        w,
        h,
        yaw,
        pitch: heading.pitch,
        roll: heading.roll,
    };
    Ok((fused, score))
}

#[cfg(test)]
mod tests {
    use approx::assert_relative_eq;

    use super::*;
    use crate::frame::ObjectClass;
    use crate::fuse::Bandwidth;

    fn member(x: f64, y: f64, l: f64, yaw: f64, score: f64) -> KbfMember {
        KbfMember {
            box3: Box3::new(x, y, 0.5, l, 1.9, 1.6, yaw),
            score,
            weight: score,
        }
    }

    fn vehicle() -> ClassFusionConfig {
        ClassFusionConfig::default_for(ObjectClass::Vehicle)
    }

    #[test]
    fn identical_boxes_fuse_to_themselves() {
        let m = member(12.3, -4.5, 4.6, 0.7, 0.8);
        for n in 1..=5 {
            let (b, s) = fuse_cluster(&vec![m; n], &vehicle()).unwrap();
            assert_eq!(b, m.box3, "{n} members");
            assert_relative_eq!(s, 0.8, max_relative = 1e-12);
        }
    }

    #[test]
    fn peak_centre_lies_between_members_and_keeps_identical_boxes() {
        let mut config = vehicle();
        config.centre_estimate = CentreEstimate::Peak;
        let m = member(1.0, 2.0, 4.5, 0.1, 0.7);
        let (b, _) = fuse_cluster(&[m; 3], &config).unwrap();
        assert_eq!(b, m.box3);
        // Four equal-weight members on a square: the peak is its centre, not a corner.
        let square = [
            member(0.0, 0.0, 4.5, 0.0, 0.5),
            member(0.4, 0.0, 4.5, 0.0, 0.5),
            member(0.0, 0.4, 4.5, 0.0, 0.5),
            member(0.4, 0.4, 4.5, 0.0, 0.5),
        ];
        let (b, _) = fuse_cluster(&square, &config).unwrap();
        assert!((b.x - 0.2).abs() < 1e-4 && (b.y - 0.2).abs() < 1e-4, "{b:?}");
        // Pairs: the weighted mean.
        let (b, _) = fuse_cluster(&square[..2], &config).unwrap();
        assert_relative_eq!(b.x, 0.2, max_relative = 1e-12);
    }

    #[test]
    fn two_member_rule() {
        let a = member(0.0, 0.0, 4.0, 0.1, 0.9);
        let b = member(0.6, 0.2, 5.0, 0.3, 0.3);
        let (fused, score) = fuse_cluster(&[b, a], &vehicle()).unwrap();
        // Centre and heading from the heavier member (a), sizes and score weighted means.
        assert_eq!((fused.x, fused.y, fused.yaw), (0.0, 0.0, 0.1));
        assert_relative_eq!(fused.l, (0.9 * 4.0 + 0.3 * 5.0) / 1.2, max_relative = 1e-12);
        assert_relative_eq!(score, (0.9 * 0.9 + 0.3 * 0.3) / 1.2, max_relative = 1e-12);
    }

    #[test]
    fn outlier_does_not_move_the_consensus() {
        // Four members agree within 10 cm; one is 1.2 m off with a wrong heading and length.
        let agree = [
            member(10.0, 5.0, 4.5, 0.50, 0.7),
            member(10.08, 5.03, 4.6, 0.52, 0.6),
            member(9.95, 4.96, 4.4, 0.49, 0.65),
            member(10.03, 5.07, 4.55, 0.51, 0.7),
        ];
        let outlier = member(11.0, 5.7, 6.5, 2.0, 0.95);
        let mut all = agree.to_vec();
        all.push(outlier);
        let (fused, _) = fuse_cluster(&all, &vehicle()).unwrap();
        assert!(
            agree.iter().any(|m| m.box3.x == fused.x && m.box3.y == fused.y),
            "centre {fused:?}"
        );
        assert!((fused.yaw - 0.5).abs() < 0.03, "yaw {}", fused.yaw);
        // The size peak leans towards the four, not halfway to the outlier.
        assert!(fused.l < 5.0, "l {}", fused.l);
    }

    #[test]
    fn yaw_near_pi_is_selected_not_averaged() {
        let pi = std::f64::consts::PI;
        let m = [
            member(0.0, 0.0, 4.5, pi - 0.01, 0.8),
            member(0.05, 0.0, 4.5, -pi + 0.02, 0.8),
            member(0.0, 0.05, 4.5, pi - 0.03, 0.8),
        ];
        let (fused, _) = fuse_cluster(&m, &vehicle()).unwrap();
        // A naive mean of the raw angles would be ≈ 1.04; the fused heading is a member's.
        assert!(m.iter().any(|x| x.box3.yaw == fused.yaw));
        assert!(crate::geometry::wrap_angle(fused.yaw - pi).abs() < 0.05);
    }

    #[test]
    fn yaw_peak_averages_the_axis_and_keeps_the_direction() {
        use std::f64::consts::PI;
        let mut config = vehicle();
        config.yaw_estimate = YawEstimate::Peak;
        config.yaw_bandwidth = Bandwidth::Absolute(10.0);
        // Weights are the scores 0.9, 0.8, 0.7: the weighted mean 0.044 / 2.4 (the kernel is
        // far wider than the spread), where `member` takes one member's yaw.
        let m = [
            member(0.0, 0.0, 4.5, 0.0, 0.9),
            member(0.1, 0.0, 4.5, 0.02, 0.8),
            member(0.0, 0.1, 4.5, 0.04, 0.7),
        ];
        let (b, _) = fuse_cluster(&m, &config).unwrap();
        assert_relative_eq!(b.yaw, 0.044 / 2.4, epsilon = 1e-6);
        let (selected, _) = fuse_cluster(&m, &vehicle()).unwrap();
        assert!(m.iter().any(|x| x.box3.yaw == selected.yaw));
        // A flipped member adds its axis; the majority's direction stays.
        let mut flipped = m;
        flipped[1].box3.yaw = 0.02 - PI;
        let (b, _) = fuse_cluster(&flipped, &config).unwrap();
        assert_relative_eq!(b.yaw, 0.044 / 2.4, epsilon = 1e-6);
        // Pairs: the weighted mean of the folded yaws, from the heavier member's heading:
        // 0.0 (weight 0.6) and π + 0.1 (weight 0.2, folded to 0.1) → 0.1 · 0.2 / 0.8.
        let pair = [member(0.0, 0.0, 4.5, 0.0, 0.6), member(0.1, 0.0, 4.5, PI + 0.1, 0.2)];
        let (b, _) = fuse_cluster(&pair, &config).unwrap();
        assert_relative_eq!(b.yaw, 0.025, epsilon = 1e-12);
        // Identical boxes still fuse to themselves.
        let (b, _) = fuse_cluster(&[m[0]; 3], &config).unwrap();
        assert_eq!(b, m[0].box3);
    }
}
