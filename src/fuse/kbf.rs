//! KDE box fusion of one cluster (MS3D's `kbf`, reference §2.2, with its two bugs fixed):
//! centre and heading are *selected* — the member at the mode of a weighted KDE — because
//! averaging blurs centres and headings; sizes and score are *estimated* as the peak of a 1-D KDE.
//! Weights are score × detector weight.

use super::FuseError;
use super::config::ClassFusionConfig;
use super::kde::{GaussianKde, yaw_mode_member, yaw_nearest_circular_mean};
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
pub fn fuse_cluster(members: &[KbfMember], config: &ClassFusionConfig) -> Result<(Box3, f64), FuseError> {
    let n = members.len();
    match n {
        0 => Err(FuseError::KdeInput {
            reason: "empty cluster".into(),
        }),
        1 => Ok((members[0].box3, members[0].score)),
        2 => Ok(fuse_pair(&members[0], &members[1])),
        _ => fuse_many(members, config),
    }
}

fn fuse_pair(a: &KbfMember, b: &KbfMember) -> (Box3, f64) {
    let lead = if b.weight > a.weight { b } else { a };
    // Written as a + share·(b − a) so equal values average to themselves exactly.
    let share_b = b.weight / (a.weight + b.weight);
    let mean = |f: fn(&Box3) -> f64| f(&a.box3) + share_b * (f(&b.box3) - f(&a.box3));
    let fused = Box3 {
        l: mean(|x| x.l),
        w: mean(|x| x.w),
        h: mean(|x| x.h),
        ..lead.box3
    };
    let score = a.score + share_b * (b.score - a.score);
    (fused, score)
}

fn fuse_many(members: &[KbfMember], config: &ClassFusionConfig) -> Result<(Box3, f64), FuseError> {
    let weights: Vec<f64> = members.iter().map(|m| m.weight).collect();
    let centres: Vec<[f64; 3]> = members.iter().map(|m| [m.box3.x, m.box3.y, m.box3.z]).collect();
    let centre_kde = GaussianKde::on_span(
        &centres,
        Some(&weights),
        config.centre_bandwidth,
        config.centre_min_variance_m2,
    )?;
    let centre = &members[centre_kde.argmax_point()].box3;

    let size_weights = config.weighted_sizes.then_some(weights.as_slice());
    let peak = |values: &[[f64; 1]], w: Option<&[f64]>, bandwidth| -> Result<f64, FuseError> {
        Ok(GaussianKde::on_span(values, w, bandwidth, 0.0)?.peak())
    };
    let column = |f: fn(&KbfMember) -> f64| -> Vec<[f64; 1]> { members.iter().map(|m| [f(m)]).collect() };
    let l = peak(&column(|m| m.box3.l), size_weights, config.size_bandwidth)?;
    let w = peak(&column(|m| m.box3.w), size_weights, config.size_bandwidth)?;
    let h = peak(&column(|m| m.box3.h), size_weights, config.size_bandwidth)?;
    let score = peak(&column(|m| m.score), Some(&weights), config.score_bandwidth)?;

    let yaws: Vec<f64> = members.iter().map(|m| m.box3.yaw).collect();
    let heading_member = match yaw_mode_member(&yaws, &weights, config.yaw_bandwidth, 0.0)? {
        Some(i) => i,
        None => yaw_nearest_circular_mean(&yaws, &weights),
    };
    let heading = &members[heading_member].box3;
    let fused = Box3 {
        x: centre.x,
        y: centre.y,
        z: centre.z,
        l,
        w,
        h,
        yaw: heading.yaw,
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
}
