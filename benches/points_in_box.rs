//! Points-in-box throughput on one core (target ≥ 50 M points/s) on a 120 000-point cloud shaped
//! like a Waymo TOP lidar sweep (ranges 2–75 m, denser near the car, z from −2 to 4 m), for a
//! yaw-only and a 9-dof box, as indices, as a count and as a mask.

use std::hint::black_box;

use boxlayer::PointCloud;
use boxlayer::geometry::{Box3, count_points_in_box, points_in_box, points_in_box_mask};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// SplitMix64, so the cloud is the same on every run.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
    }
}

const POINTS: usize = 120_000;

fn sweep() -> PointCloud {
    let mut rng = Rng(11);
    let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..POINTS {
        let azimuth = rng.uniform(-std::f64::consts::PI, std::f64::consts::PI);
        // Squaring a uniform variable puts more returns near the sensor.
        let range = 2.0 + 73.0 * rng.uniform(0.0, 1.0).powi(2);
        x.push((range * azimuth.cos()) as f32);
        y.push((range * azimuth.sin()) as f32);
        z.push(rng.uniform(-2.0, 4.0) as f32);
    }
    PointCloud::from_columns(x, y, z, vec![0.0; POINTS]).expect("columns have equal lengths")
}

fn bench_points_in_box(c: &mut Criterion) {
    let cloud = sweep();
    let car = Box3::new(8.0, 3.0, 0.0, 4.6, 1.9, 1.6, 0.4);
    let tilted = Box3 {
        pitch: 0.08,
        roll: -0.05,
        ..car
    };
    let mut mask = Vec::with_capacity(POINTS);
    let mut group = c.benchmark_group("points_in_box");
    group.throughput(Throughput::Elements(POINTS as u64));
    for (name, b) in [("yaw_only", car), ("9dof", tilted)] {
        group.bench_function(format!("indices_{name}"), |bench| {
            bench.iter(|| points_in_box(black_box(&cloud), black_box(&b)).len())
        });
        group.bench_function(format!("count_{name}"), |bench| {
            bench.iter(|| count_points_in_box(black_box(&cloud), black_box(&b)))
        });
        group.bench_function(format!("mask_{name}"), |bench| {
            bench.iter(|| {
                points_in_box_mask(cloud.x(), cloud.y(), cloud.z(), black_box(&b), &mut mask);
                mask.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_points_in_box);
criterion_main!(benches);
