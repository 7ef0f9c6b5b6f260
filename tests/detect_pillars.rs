//! Pillar features against hand-computed values, one test per documented feature order
//! (docs/detectors.md "Pillar feature orders").

use boxlayer::PointCloud;
use boxlayer::cloud::ChannelData;
use boxlayer::detect::manifest::{EncoderLayout, PillarFeatureOrder, PointFeature};
use boxlayer::detect::{PillarGrid, PillarRows, PillarSpec, pillarize};

/// Grid [0, 2) × [0, 2) m of 1 m pillars, z in [−3, 1). Three points fall in cell (ix 1, iy 0),
/// whose centre is (1.5, 0.5, −1); one point in cell (0, 1); one point outside the z range.
///
/// Pillar (1, 0): mean = (4.6/3, 0.4, −0.5).
///   p0 (1.2, 0.3, −0.5): cluster (−0.333333, −0.1, 0.0), centre (−0.3, −0.2, 0.5)
///   p1 (1.6, 0.7,  0.1): cluster ( 0.066667,  0.3, 0.6), centre ( 0.1,  0.2, 1.1)
///   p2 (1.8, 0.2, −1.1): cluster ( 0.266667, −0.2, −0.6), centre ( 0.3, −0.3, −0.1)
fn cloud() -> PointCloud {
    let mut cloud = PointCloud::from_columns(
        vec![0.4, 1.2, 1.6, 1.8, 1.0],
        vec![1.5, 0.3, 0.7, 0.2, 1.0],
        vec![-2.0, -0.5, 0.1, -1.1, 1.5],
        vec![0.9, 0.1, 0.4, 0.7, 0.3],
    )
    .unwrap();
    cloud
        .add_channel("time_lag", ChannelData::F32(vec![0.0, 0.05, 0.0, 0.1, 0.0]))
        .unwrap();
    cloud
}

const P0_CLUSTER: [f32; 3] = [-0.333_333, -0.1, 0.0];
const P1_CLUSTER: [f32; 3] = [0.066_667, 0.3, 0.6];
const P2_CLUSTER: [f32; 3] = [0.266_667, -0.2, -0.6];

fn spec(order: PillarFeatureOrder, sources: &[&str], layout: EncoderLayout) -> PillarSpec {
    let features: Vec<PointFeature> = sources.iter().map(|s| PointFeature::raw(s)).collect();
    PillarSpec {
        grid: PillarGrid::new([0.0, 0.0, -3.0, 2.0, 2.0, 1.0], [1.0, 1.0, 4.0]),
        max_points_per_pillar: 4,
        max_pillars: 8,
        channels: order.channels(features.len()),
        features,
        layout,
    }
}

/// Checks the second pillar (cell (1, 0)): its three points, then a zero padding slot.
fn assert_second_pillar(order: PillarFeatureOrder, sources: &[&str], expected: [Vec<f32>; 3]) {
    let s = spec(order.clone(), sources, EncoderLayout::PointMajor);
    let pillars = pillarize(&cloud(), &s, PillarRows::Fixed(3)).unwrap();
    assert_eq!(pillars.cells, vec![(0, 1), (1, 0)], "{order:?}");
    assert_eq!(pillars.num_points, vec![1, 3]);
    let c = expected[0].len();
    assert_eq!(pillars.shape, vec![3, 4, c]);
    let row = &pillars.features[4 * c..8 * c];
    for (slot, want) in expected.iter().enumerate() {
        let got = &row[slot * c..(slot + 1) * c];
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() < 1e-5,
                "{order:?}: point {slot} channel {k}: got {g}, expected {w}"
            );
        }
    }
    assert!(row[3 * c..].iter().all(|v| *v == 0.0), "padding slot must be zero");
    assert!(
        pillars.features[8 * c..].iter().all(|v| *v == 0.0),
        "padding row must be zero"
    );

    // The channel-major layout holds the same numbers at [0, channel, pillar, slot].
    let s = spec(order, sources, EncoderLayout::ChannelMajor);
    let cm = pillarize(&cloud(), &s, PillarRows::Fixed(3)).unwrap();
    assert_eq!(cm.shape, vec![1, c, 3, 4]);
    for (slot, want) in expected.iter().enumerate() {
        for (k, w) in want.iter().enumerate() {
            let g = cm.features[(k * 3 + 1) * 4 + slot];
            assert!(
                (g - w).abs() < 1e-5,
                "channel-major: point {slot} channel {k}: got {g}, expected {w}"
            );
        }
    }
}

fn cat(parts: &[&[f32]]) -> Vec<f32> {
    parts.concat()
}

#[test]
fn openpcdet_order_x_y_z_i_cluster_xyz_center_xyz() {
    assert_second_pillar(
        PillarFeatureOrder::Openpcdet,
        &["x", "y", "z", "intensity"],
        [
            cat(&[&[1.2, 0.3, -0.5, 0.1], &P0_CLUSTER, &[-0.3, -0.2, 0.5]]),
            cat(&[&[1.6, 0.7, 0.1, 0.4], &P1_CLUSTER, &[0.1, 0.2, 1.1]]),
            cat(&[&[1.8, 0.2, -1.1, 0.7], &P2_CLUSTER, &[0.3, -0.3, -0.1]]),
        ],
    );
}

#[test]
fn mmdet3d_legacy_order_overwrites_xyz_with_center_offsets() {
    assert_second_pillar(
        PillarFeatureOrder::Mmdet3dLegacy,
        &["x", "y", "z", "intensity"],
        [
            cat(&[&[-0.3, -0.2, 0.5, 0.1], &P0_CLUSTER, &[-0.3, -0.2, 0.5]]),
            cat(&[&[0.1, 0.2, 1.1, 0.4], &P1_CLUSTER, &[0.1, 0.2, 1.1]]),
            cat(&[&[0.3, -0.3, -0.1, 0.7], &P2_CLUSTER, &[0.3, -0.3, -0.1]]),
        ],
    );
}

#[test]
fn centerpoint_order_x_y_z_i_t_cluster_xyz_center_xy() {
    assert_second_pillar(
        PillarFeatureOrder::Centerpoint,
        &["x", "y", "z", "intensity", "time_lag"],
        [
            cat(&[&[1.2, 0.3, -0.5, 0.1, 0.05], &P0_CLUSTER, &[-0.3, -0.2]]),
            cat(&[&[1.6, 0.7, 0.1, 0.4, 0.0], &P1_CLUSTER, &[0.1, 0.2]]),
            cat(&[&[1.8, 0.2, -1.1, 0.7, 0.1], &P2_CLUSTER, &[0.3, -0.3]]),
        ],
    );
}

#[test]
fn pointpillars_center_offset_order_replaces_x_y_with_center_offsets() {
    assert_second_pillar(
        PillarFeatureOrder::PointpillarsCenterOffset,
        &["x", "y", "z", "intensity"],
        [
            cat(&[&[-0.3, -0.2, -0.5, 0.1], &P0_CLUSTER, &[-0.3, -0.2]]),
            cat(&[&[0.1, 0.2, 0.1, 0.4], &P1_CLUSTER, &[0.1, 0.2]]),
            cat(&[&[0.3, -0.3, -1.1, 0.7], &P2_CLUSTER, &[0.3, -0.3]]),
        ],
    );
}

#[test]
fn normalisation_scales_offsets_and_tanh() {
    let mut s = spec(PillarFeatureOrder::Raw, &["intensity"], EncoderLayout::PointMajor);
    s.features[0] = PointFeature {
        source: "intensity".into(),
        scale: 2.0,
        offset: -0.5,
        tanh: true,
    };
    let pillars = pillarize(&cloud(), &s, PillarRows::Trim).unwrap();
    assert_eq!(pillars.shape, vec![2, 4, 1]);
    // Pillar 0 holds point 0 (intensity 0.9): tanh(2 · 0.9 − 0.5); pillar 1 point 0: tanh(2 · 0.1 − 0.5).
    assert!((pillars.features[0] - 1.3f32.tanh()).abs() < 1e-6);
    assert!((pillars.features[4] - (-0.3f32).tanh()).abs() < 1e-6);
}
