//! Tracking throughput on one core: the forward pass (AB3DMOT-style forward-only mode; target
//! ≥ 5,000 frames/s with 50 objects per frame) and the full offline consolidation of a
//! 2,000-frame sequence (both passes, merge, stitching, smoothing, extension on points; target
//! < 2 s). Inputs: 50 cars and pedestrians in view on straight paths, seen from a moving platform
//! with centre noise, 10 % misses and 5 % clutter, from a fixed seed. Timed in thread CPU time
//! (`support/cpu_time.rs`).

use std::hint::black_box;

use boxlayer::PointCloud;
use boxlayer::frame::ObjectClass;
use boxlayer::geometry::Box3;
use boxlayer::geometry::pose::isometry_from_euler;
use boxlayer::track::{TrackConfig, TrackFrame, TrackInputBox, consolidate};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nalgebra::Vector3;

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

/// Objects in view at any time.
const OBJECTS: usize = 50;

/// One simulated object: start, velocity, size, class, frame it appears.
struct Mover {
    start: [f64; 2],
    velocity: [f64; 2],
    size: [f64; 3],
    class: ObjectClass,
    born: usize,
}

fn mover(rng: &mut Rng, born: usize, centre: [f64; 2]) -> Mover {
    let pedestrian = rng.uniform(0.0, 1.0) < 0.3;
    let heading = rng.uniform(-std::f64::consts::PI, std::f64::consts::PI);
    let speed = if pedestrian {
        rng.uniform(0.0, 1.5)
    } else if rng.uniform(0.0, 1.0) < 0.4 {
        0.0
    } else {
        rng.uniform(3.0, 15.0)
    };
    Mover {
        start: [
            centre[0] + rng.uniform(-60.0, 60.0),
            centre[1] + rng.uniform(-60.0, 60.0),
        ],
        velocity: [speed * heading.cos(), speed * heading.sin()],
        size: if pedestrian { [0.7, 0.7, 1.8] } else { [4.6, 1.9, 1.6] },
        class: if pedestrian {
            ObjectClass::Pedestrian
        } else {
            ObjectClass::Vehicle
        },
        born,
    }
}

/// `frames` frames at 10 Hz from a platform driving at 5 m/s; objects that leave the 60 m
/// square around it are replaced by new ones. `points` adds 20 returns per object and 500
/// ground returns per frame.
fn sequence(frames: usize, points: bool, seed: u64) -> (Vec<TrackFrame>, Vec<Option<std::sync::Arc<PointCloud>>>) {
    let mut rng = Rng(seed);
    let mut movers: Vec<Mover> = (0..OBJECTS).map(|_| mover(&mut rng, 0, [0.0, 0.0])).collect();
    let mut out = Vec::with_capacity(frames);
    let mut clouds = Vec::with_capacity(frames);
    for i in 0..frames {
        let t = i as f64 * 0.1;
        let ego = [5.0 * t, 0.0];
        let world_from_sensor = isometry_from_euler(Vector3::new(ego[0], ego[1], 0.0), 0.0, 0.0, 0.0);
        let sensor_from_world = world_from_sensor.inverse();
        let mut boxes = Vec::new();
        let (mut px, mut py, mut pz) = (Vec::new(), Vec::new(), Vec::new());
        for m in &mut movers {
            let age = (i - m.born) as f64 * 0.1;
            let (x, y) = (m.start[0] + m.velocity[0] * age, m.start[1] + m.velocity[1] * age);
            if (x - ego[0]).abs() > 60.0 || (y - ego[1]).abs() > 60.0 {
                *m = mover(&mut rng, i, ego);
                continue;
            }
            let yaw = m.velocity[1].atan2(m.velocity[0]);
            let truth = Box3::new(x, y, 0.5 * m.size[2], m.size[0], m.size[1], m.size[2], yaw);
            if points {
                for _ in 0..20 {
                    px.push((x - ego[0] + rng.uniform(-0.3, 0.3) * m.size[0]) as f32);
                    py.push((y - ego[1] + rng.uniform(-0.3, 0.3) * m.size[1]) as f32);
                    pz.push(rng.uniform(0.3, 0.9) as f32 * m.size[2] as f32);
                }
            }
            if rng.uniform(0.0, 1.0) < 0.1 {
                continue;
            }
            let mut b = truth;
            b.x += rng.uniform(-0.2, 0.2);
            b.y += rng.uniform(-0.2, 0.2);
            boxes.push(TrackInputBox {
                box3: b.transformed(&sensor_from_world),
                class: m.class,
                score: rng.uniform(0.3, 1.0),
                votes: 2,
            });
        }
        for _ in 0..OBJECTS / 20 {
            boxes.push(TrackInputBox {
                box3: Box3::new(
                    rng.uniform(-60.0, 60.0),
                    rng.uniform(-60.0, 60.0),
                    0.8,
                    4.0,
                    1.8,
                    1.6,
                    0.0,
                ),
                class: ObjectClass::Vehicle,
                score: rng.uniform(0.1, 0.6),
                votes: 1,
            });
        }
        let cloud = points.then(|| {
            for _ in 0..500 {
                px.push(rng.uniform(-60.0, 60.0) as f32);
                py.push(rng.uniform(-60.0, 60.0) as f32);
                pz.push(0.0);
            }
            let n = px.len();
            std::sync::Arc::new(PointCloud::from_columns(px, py, pz, vec![0.0; n]).expect("columns of equal length"))
        });
        out.push(TrackFrame {
            timestamp_micros: i as i64 * 100_000,
            world_from_sensor,
            boxes,
        });
        clouds.push(cloud);
    }
    (out, clouds)
}

fn bench_track(c: &mut Criterion<ThreadCpuTime>) {
    let (short, short_points) = sequence(200, false, 1);
    let mut group = c.benchmark_group("track");
    group.throughput(Throughput::Elements(short.len() as u64));
    let baseline = TrackConfig::forward_only_baseline();
    group.bench_function("forward_pass_200_frames_50_objects", |bench| {
        bench.iter(|| consolidate(black_box(&short), &short_points, &baseline).map(|c| c.boxes.len()))
    });
    group.finish();

    let (long, long_points) = sequence(2000, true, 2);
    let mut group = c.benchmark_group("track");
    group.sample_size(10);
    group.throughput(Throughput::Elements(long.len() as u64));
    let offline = TrackConfig::default();
    group.bench_function("offline_consolidation_2000_frames_50_objects", |bench| {
        bench.iter(|| consolidate(black_box(&long), &long_points, &offline).map(|c| c.boxes.len()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_track
}
criterion_main!(benches);
