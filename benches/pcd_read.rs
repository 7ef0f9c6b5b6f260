//! Sweeps per second through the PCD and `.npy` readers on one core (thread CPU time): a
//! 131 072-point Ouster-like sweep (`x y z intensity` f32, `ring` u16, `t` u32 since the sweep
//! start) read from a file and decoded into a `PointCloud`, from `DATA binary`,
//! `DATA binary_compressed` and an N×6 float32 `.npy`.

use std::hint::black_box;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::sources::Source;
use boxlayer::sources::npy::{NpyConfig, NpySource, write_npy};
use boxlayer::sources::pcd::{PcdConfig, PcdEncoding, PcdSource, write_pcd};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

const BEAMS: usize = 64;
const COLUMNS: usize = 2048;

/// An OS1-64 × 2048 sweep: every pixel on a 20 m cylinder with a wavy floor.
fn sweep() -> PointCloud {
    let n = BEAMS * COLUMNS;
    let (mut x, mut y, mut z, mut intensity) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut ring, mut t) = (vec![0u16; n], vec![0u32; n]);
    for b in 0..BEAMS {
        let elevation = (b as f32 / BEAMS as f32 - 0.5) * 0.78;
        for c in 0..COLUMNS {
            let k = b * COLUMNS + c;
            let azimuth = c as f32 / COLUMNS as f32 * std::f32::consts::TAU;
            let r = 20.0 + (azimuth * 7.0).sin();
            x[k] = r * elevation.cos() * azimuth.cos();
            y[k] = r * elevation.cos() * azimuth.sin();
            z[k] = r * elevation.sin();
            intensity[k] = ((k * 37) % 4096) as f32;
            ring[k] = b as u16;
            t[k] = (c as u32) * 4_883; // µs-scale steps: exact in float32 for the .npy
        }
    }
    let mut cloud = PointCloud::from_columns(x, y, z, intensity).expect("columns");
    cloud.add_channel("ring", ChannelData::U16(ring)).expect("ring");
    cloud.add_channel("t", ChannelData::U32(t)).expect("t");
    cloud
}

fn bench_read(c: &mut Criterion<ThreadCpuTime>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cloud = sweep();
    let mut group = c.benchmark_group("pcd_read");
    group.throughput(Throughput::Elements(1));
    for (name, encoding) in [
        ("pcd_binary_131k", PcdEncoding::Binary),
        ("pcd_binary_compressed_131k", PcdEncoding::BinaryCompressed),
    ] {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).expect("folder");
        write_pcd(&sub.join("000000.pcd"), &cloud, encoding).expect("write pcd");
        let source = PcdSource::open(&sub, PcdConfig::default()).expect("open");
        assert_eq!(source.frame(0).expect("frame").cloud.len(), cloud.len());
        group.bench_function(name, |b| {
            b.iter(|| black_box(source.frame(0).expect("frame").cloud.len()))
        });
    }
    let fields = ["x", "y", "z", "intensity", "ring", "t"];
    let npy = dir.path().join("000000.npy");
    write_npy(&npy, &cloud, &fields).expect("write npy");
    let config = NpyConfig {
        fields: fields.map(String::from).to_vec(),
        ..NpyConfig::default()
    };
    let source = NpySource::open(&npy, config).expect("open");
    assert_eq!(source.frame(0).expect("frame").cloud.len(), cloud.len());
    group.bench_function("npy_f32_131k_x6", |b| {
        b.iter(|| black_box(source.frame(0).expect("frame").cloud.len()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench_read
}
criterion_main!(benches);
