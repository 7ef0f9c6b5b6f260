//! Normalization cost on one core (issue 19: ground-plane fit ≤ 2 ms for a 130k-point sweep;
//! normalization ≤ 5 % of a sweep's detector time): the ground fit, every per-frame input (IMU
//! specific force and ground fit) and the per-frame share of the sequence step, on simulated
//! sweeps of the three platforms. Timed in thread CPU time (`support/cpu_time.rs`).

use std::hint::black_box;

use boxlayer::frame::Frame;
use boxlayer::normalize::{FrameInputs, Profile, fit_ground, normalize_sequence, up_from_pose};
use boxlayer::sim::{SWEEP_PERIOD_MICROS, SimConfig, Simulator};
use boxlayer::{Platform, PointCloud};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

/// Sweeps simulated per platform for the sequence step.
const SEQUENCE_FRAMES: usize = 150;

/// Frame `index` of a simulated sequence, as a source would give it.
fn frame(sim: &Simulator, index: usize) -> Frame {
    let sweep = sim.sweep(index).unwrap();
    let points = sim.sweep_points(&sweep);
    let column = |k: usize| points.iter().map(|p| p.position[k] as f32).collect::<Vec<f32>>();
    let cloud = PointCloud::from_columns(column(0), column(1), column(2), vec![0.0; points.len()]).unwrap();
    Frame {
        sequence: "bench".into(),
        index,
        timestamp_micros: sweep.timestamp_micros,
        platform: sim.platform(),
        cloud,
        world_from_sensor: sweep.world_from_sensor,
        imu: sweep.imu.clone(),
        cameras: Vec::new(),
        ground_truth: Vec::new(),
        notes: Vec::new(),
    }
}

fn bench_normalize(c: &mut Criterion<ThreadCpuTime>) {
    let mut group = c.benchmark_group("normalize");
    for (platform, profile) in [
        (Platform::Vehicle, "waymo_vehicle"),
        (Platform::Drone, "m3ed_drone"),
        (Platform::Quadruped, "m3ed_quadruped"),
    ] {
        let profile = Profile::load(profile).unwrap().profile;
        let sim = Simulator::new(
            SimConfig {
                frames: SEQUENCE_FRAMES,
                ..SimConfig::default()
            },
            platform,
            7,
        )
        .unwrap();
        let f = frame(&sim, 3);
        let n = f.cloud.len();
        eprintln!("{platform}: {n} points in the benchmarked sweep");
        group.throughput(Throughput::Elements(n as u64));
        let prior = up_from_pose(&sim.world_from_sensor_at(f.timestamp_micros + SWEEP_PERIOD_MICROS / 2));
        let params = profile.gravity.ground_params();
        group.bench_function(format!("ground_fit/{platform}"), |b| {
            b.iter(|| black_box(fit_ground(f.cloud.x(), f.cloud.y(), f.cloud.z(), &prior, &params)))
        });
        group.bench_function(format!("frame_inputs/{platform}"), |b| {
            b.iter(|| black_box(FrameInputs::from_frame(&f, &profile)))
        });
        let inputs: Vec<FrameInputs> = (0..SEQUENCE_FRAMES)
            .map(|i| FrameInputs::from_frame(&frame(&sim, i), &profile))
            .collect();
        group.throughput(Throughput::Elements(SEQUENCE_FRAMES as u64));
        group.bench_function(format!("sequence_{SEQUENCE_FRAMES}_frames/{platform}"), |b| {
            b.iter(|| black_box(normalize_sequence(&inputs, &profile)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_normalize
}
criterion_main!(benches);
