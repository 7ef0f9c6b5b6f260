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

/// A small deterministic generator (xorshift) for the randomised comparison below.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// 4,000 points over and around a 3 × 3 m grid of 0.25 m pillars (some outside in x, y or z,
/// one NaN), with −0 values in x, y and intensity, and a `time_lag` channel.
fn random_cloud(seed: u64) -> PointCloud {
    let mut rng = Rng(seed);
    let n = 4000;
    let (mut x, mut y, mut z, mut i, mut t) = (vec![], vec![], vec![], vec![], vec![]);
    for k in 0..n {
        // Clustered near the origin so that pillars fill up and some points are dropped.
        let r = 1.8 * rng.unit() * rng.unit();
        let a = std::f32::consts::TAU * rng.unit();
        x.push(if k % 97 == 0 { -0.0 } else { r * a.cos() });
        y.push(if k % 89 == 0 { -0.0 } else { r * a.sin() });
        z.push(-3.3 + 4.6 * rng.unit());
        i.push(if k % 7 == 0 { -0.0 } else { rng.unit() - 0.3 });
        t.push(0.1 * rng.unit());
    }
    x[17] = f32::NAN;
    let mut cloud = PointCloud::from_columns(x, y, z, i).unwrap();
    cloud.add_channel("time_lag", ChannelData::F32(t)).unwrap();
    cloud
}

/// The pillar tensor computed straight from the documented rules, point by point, with no
/// shortcut: cell = floor((p − min) / size) inside the grid; pillars and points first come first
/// kept; mean from f32 sums in point order; centre `index · size + (size / 2 + min)`; feature =
/// tanh?(raw · scale + offset), tanh being the exact value rounded to f32 (f64 `tanh`, not
/// libm's `tanhf`, which may be 1–2 ulp off); each channel its definition.
fn reference_pillars(cloud: &PointCloud, spec: &PillarSpec, rows: PillarRows) -> (Vec<f32>, Vec<(u32, u32)>, Vec<u32>) {
    use boxlayer::detect::manifest::PillarChannel;
    let g = &spec.grid;
    let m = spec.max_points_per_pillar;
    let limit = match rows {
        PillarRows::Fixed(n) => spec.max_pillars.min(n),
        PillarRows::Trim => spec.max_pillars,
    };
    let mut index_of_cell = std::collections::HashMap::new();
    let mut pillars: Vec<((u32, u32), Vec<usize>)> = Vec::new();
    for i in 0..cloud.len() {
        let (x, y, z) = (cloud.x()[i], cloud.y()[i], cloud.z()[i]);
        let f = [
            (x - g.min[0]) / g.size[0],
            (y - g.min[1]) / g.size[1],
            (z - g.min[2]) / g.size[2],
        ];
        if !(f[0] >= 0.0 && f[1] >= 0.0 && f[2] >= 0.0 && f[2] < 1.0) {
            continue;
        }
        let (ix, iy) = (f[0].floor() as usize, f[1].floor() as usize);
        if ix >= g.nx || iy >= g.ny {
            continue;
        }
        let p = match index_of_cell.get(&(ix, iy)) {
            Some(&p) => p,
            None if pillars.len() < limit => {
                index_of_cell.insert((ix, iy), pillars.len());
                pillars.push(((ix as u32, iy as u32), vec![]));
                pillars.len() - 1
            }
            None => continue,
        };
        if pillars[p].1.len() < m {
            pillars[p].1.push(i);
        }
    }
    let n_rows = match rows {
        PillarRows::Fixed(n) => n,
        PillarRows::Trim => pillars.len().max(1),
    };
    let c = spec.channels.len();
    let feature = |k: usize, i: usize| -> f32 {
        let f = &spec.features[k];
        let raw = match f.source.as_str() {
            "x" => cloud.x()[i],
            "y" => cloud.y()[i],
            "z" => cloud.z()[i],
            "intensity" => cloud.intensity()[i],
            "zero" => return 0.0,
            name => match cloud.channel(name) {
                Some(ChannelData::F32(v)) => v[i],
                _ => panic!("no f32 channel {name}"),
            },
        };
        let v = raw * f.scale + f.offset;
        if f.tanh { f64::from(v).tanh() as f32 } else { v }
    };
    let mut out = vec![0.0f32; n_rows * m * c];
    for (p, ((ix, iy), points)) in pillars.iter().enumerate() {
        let mut sum = [0.0f32; 3];
        for &i in points {
            sum[0] += cloud.x()[i];
            sum[1] += cloud.y()[i];
            sum[2] += cloud.z()[i];
        }
        let n = points.len() as f32;
        let mean = [sum[0] / n, sum[1] / n, sum[2] / n];
        let center = [
            *ix as f32 * g.size[0] + (g.size[0] / 2.0 + g.min[0]),
            *iy as f32 * g.size[1] + (g.size[1] / 2.0 + g.min[1]),
            g.size[2] / 2.0 + g.min[2],
        ];
        for (s, &i) in points.iter().enumerate() {
            let xyz = [cloud.x()[i], cloud.y()[i], cloud.z()[i]];
            for (k, channel) in spec.channels.iter().enumerate() {
                let v = match *channel {
                    PillarChannel::Feature(f) => feature(f, i),
                    PillarChannel::XCluster => xyz[0] - mean[0],
                    PillarChannel::YCluster => xyz[1] - mean[1],
                    PillarChannel::ZCluster => xyz[2] - mean[2],
                    PillarChannel::XCenter => xyz[0] - center[0],
                    PillarChannel::YCenter => xyz[1] - center[1],
                    PillarChannel::ZCenter => xyz[2] - center[2],
                    PillarChannel::Zero => 0.0,
                };
                let at = match spec.layout {
                    EncoderLayout::PointMajor => (p * m + s) * c + k,
                    EncoderLayout::ChannelMajor => (k * n_rows + p) * m + s,
                };
                out[at] = v;
            }
        }
    }
    let cells = pillars.iter().map(|(cell, _)| *cell).collect();
    let counts = pillars.iter().map(|(_, points)| points.len() as u32).collect();
    (out, cells, counts)
}

/// Point feature lists for the randomised comparison: plain x, y, z, i (+ Δt), normalised ones
/// (scale, offset, tanh), and a `zero` source.
fn feature_lists() -> Vec<Vec<PointFeature>> {
    let plain = |names: &[&str]| names.iter().map(|s| PointFeature::raw(s)).collect::<Vec<_>>();
    let mut normalised = plain(&["x", "y", "z", "intensity"]);
    normalised[0].offset = 0.5;
    normalised[2].scale = 0.25;
    normalised[3] = PointFeature {
        source: "intensity".into(),
        scale: 2.0,
        offset: -0.1,
        tanh: true,
    };
    vec![
        plain(&["x", "y", "z", "intensity"]),
        plain(&["x", "y", "z", "intensity", "time_lag"]),
        plain(&["x", "y", "z", "zero"]),
        plain(&["x", "y", "z", "intensity", "zero"]),
        normalised,
    ]
}

#[test]
fn every_order_and_layout_matches_a_point_by_point_reference_bit_for_bit() {
    use boxlayer::detect::Pillars;
    use boxlayer::detect::manifest::PillarChannel;
    use boxlayer::detect::pillarize_into;
    let orders = [
        PillarFeatureOrder::Openpcdet,
        PillarFeatureOrder::Mmdet3dLegacy,
        PillarFeatureOrder::Centerpoint,
        PillarFeatureOrder::PointpillarsCenterOffset,
        PillarFeatureOrder::Raw,
        PillarFeatureOrder::Custom(vec![
            PillarChannel::XCenter,
            PillarChannel::YCenter,
            PillarChannel::Feature(2),
            PillarChannel::Feature(3),
            PillarChannel::XCluster,
            PillarChannel::YCluster,
            PillarChannel::ZCluster,
            PillarChannel::XCenter,
            PillarChannel::YCenter,
            PillarChannel::Zero,
        ]),
    ];
    // Two sweeps into the same buffers, the second smaller, so stale rows and slots are reset too.
    let clouds = [random_cloud(7), random_cloud(11)];
    let mut small = PointCloud::from_columns(
        clouds[1].x()[..600].to_vec(),
        clouds[1].y()[..600].to_vec(),
        clouds[1].z()[..600].to_vec(),
        clouds[1].intensity()[..600].to_vec(),
    )
    .unwrap();
    small
        .add_channel("time_lag", ChannelData::F32(vec![0.01; 600]))
        .unwrap();
    let mut checked = 0;
    for features in feature_lists() {
        for order in &orders {
            let channels = order.channels(features.len());
            if channels
                .iter()
                .any(|ch| matches!(ch, PillarChannel::Feature(k) if *k >= features.len()))
            {
                continue;
            }
            for layout in [EncoderLayout::PointMajor, EncoderLayout::ChannelMajor] {
                let spec = PillarSpec {
                    grid: PillarGrid::new([-1.5, -1.5, -3.0, 1.5, 1.5, 1.0], [0.25, 0.25, 4.0]),
                    max_points_per_pillar: 7,
                    max_pillars: 120,
                    channels: channels.clone(),
                    features: features.clone(),
                    layout,
                };
                for rows in [PillarRows::Fixed(100), PillarRows::Fixed(150), PillarRows::Trim] {
                    let mut reused = Pillars::default();
                    for cloud in [&clouds[0], &small, &clouds[1]] {
                        pillarize_into(cloud, &spec, rows, &mut reused).unwrap();
                        let (want, cells, counts) = reference_pillars(cloud, &spec, rows);
                        let what = format!("{order:?} {layout:?} {rows:?} {} features", features.len());
                        assert_eq!(reused.cells, cells, "{what}");
                        assert_eq!(reused.num_points, counts, "{what}");
                        assert_eq!(reused.features.len(), want.len(), "{what}");
                        for (k, (g, w)) in reused.features.iter().zip(&want).enumerate() {
                            assert_eq!(g.to_bits(), w.to_bits(), "{what}: value {k}: got {g}, expected {w}");
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 100, "{checked}");
    // The clouds do exercise both drop rules.
    let spec = spec(
        PillarFeatureOrder::Raw,
        &["x", "y", "z", "intensity"],
        EncoderLayout::PointMajor,
    );
    let spec = PillarSpec {
        grid: PillarGrid::new([-1.5, -1.5, -3.0, 1.5, 1.5, 1.0], [0.25, 0.25, 4.0]),
        max_points_per_pillar: 7,
        max_pillars: 120,
        ..spec
    };
    let (_, cells, counts) = reference_pillars(&clouds[0], &spec, PillarRows::Fixed(100));
    assert_eq!(cells.len(), 100, "the pillar limit is reached");
    assert!(counts.contains(&7), "some pillar is full");
}
