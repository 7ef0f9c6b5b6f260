//! Projecting a sweep's returns into its cameras, the box rows' occlusion input
//! (`camera::CameraReturns::new`), on one core in thread CPU time: one simulated Waymo sweep read
//! back from its segment (both returns of all five lidars, five cameras), as the pipeline's box
//! rows see it.

use boxlayer::camera::CameraReturns;
use boxlayer::sim::{SimConfig, simulate_waymo};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

fn camera_returns_benches(c: &mut Criterion<ThreadCpuTime>) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let written = simulate_waymo(SimConfig::default(), 1, 5000, dir.path()).expect("simulated segment");
    let source = WaymoV1Source::open(&written.segment_path, WaymoConfig::default()).expect("segment opens");
    let frame = source.frame(0).expect("sweep");
    let mut group = c.benchmark_group("camera_returns");
    group.throughput(Throughput::Elements(frame.cloud.len() as u64));
    let name = format!(
        "sim_vehicle_{}_points_{}_cameras",
        frame.cloud.len(),
        frame.cameras.len()
    );
    group.bench_function(name, |b| {
        b.iter(|| {
            frame
                .cameras
                .iter()
                .map(|c| CameraReturns::new(&c.calibration, &frame.cloud).len())
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime).sample_size(20);
    targets = camera_returns_benches
}
criterion_main!(benches);
