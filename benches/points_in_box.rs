//! Points-in-box throughput on one core (target ≥ 50 M points/s) on a 120 000-point cloud shaped
//! like a Waymo TOP lidar sweep (ranges 2–75 m, denser near the car, z from −2 to 4 m), for a
//! yaw-only and a 9-dof box, as indices, as a count and as a mask. Timed in thread CPU time
//! (`support/cpu_time.rs`).

use std::hint::black_box;

use boxlayer::PointCloud;
use boxlayer::geometry::{Box3, count_points_in_box, points_in_box, points_in_box_mask};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

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

fn bench_points_in_box(c: &mut Criterion<ThreadCpuTime>) {
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

// Thread CPU time, not wall time: the figures are one core's, whatever else the machine runs.
criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_points_in_box
}
criterion_main!(benches);
