//! Writing a sweep's points to the box layer's points files (`shards::PointsWriter`, one row
//! group per frame, 50 frames a file, zstd level 3 as `pipelines/base.toml`): the pipeline's
//! writer thread does this for every frame when `outputs.points = "all"`. One simulated Waymo
//! sweep (both returns of all five lidars), one core, thread CPU time.

use boxlayer::shards::{PointsFrame, SequenceWriter, ShardOptions};
use boxlayer::sim::{SimConfig, simulate_waymo};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::{WaymoConfig, WaymoV1Source};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

fn points_write_benches(c: &mut Criterion<ThreadCpuTime>) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let written = simulate_waymo(SimConfig::default(), 1, 5000, dir.path()).expect("simulated segment");
    let source = WaymoV1Source::open(&written.segment_path, WaymoConfig::default()).expect("segment opens");
    let cloud = source.frame(0).expect("sweep").cloud;
    let frame = PointsFrame {
        frame_index: 0,
        x: cloud.x().to_vec(),
        y: cloud.y().to_vec(),
        z: cloud.z().to_vec(),
        intensity: cloud.intensity().to_vec(),
    };
    let mut writer =
        SequenceWriter::create(&dir.path().join("shards"), "bench", ShardOptions::default()).expect("sequence writer");
    let mut group = c.benchmark_group("points_write");
    group.throughput(Throughput::Elements(frame.x.len() as u64));
    let name = format!("sim_vehicle_{}_points", frame.x.len());
    let mut next = 0;
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                next += 1;
                PointsFrame {
                    frame_index: next,
                    ..frame.clone()
                }
            },
            |frame| writer.points().write(frame).expect("points written"),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime).sample_size(20);
    targets = points_write_benches
}
criterion_main!(benches);
