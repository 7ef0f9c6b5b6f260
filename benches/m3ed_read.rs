//! Sweeps per second through the M3ED reader on one core: LZF decompression of one
//! `/ouster/data` row, LEGACY packet decode and XYZ through the lookup table (no image, no IMU).

use std::hint::black_box;

use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{
    M3edConfig, M3edSource, M3edWriter, M3edWriterSetup, MetadataFlavour, OusterMetadata, XyzLut,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nalgebra::Isometry3;

const SWEEPS: usize = 20;

#[path = "support/plane_wall.rs"]
mod plane_wall;
use plane_wall::plane_wall_pixels;

fn bench_read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("falcon_bench_data.h5");
    let metadata = OusterMetadata::os1_64_2048x10();
    let lut = XyzLut::new(&metadata);
    let setup = M3edWriterSetup {
        metadata,
        metadata_flavour: MetadataFlavour::LegacyFlat,
        lidar_to_prophesee_left: Isometry3::identity(),
        rgb: None,
        imu_to_prophesee_left: Isometry3::identity(),
        first_frame_id: 0,
        version: "bench".into(),
        raw_bag_name: "bench.bag".into(),
    };
    let mut writer = M3edWriter::create(&path, setup).expect("create");
    for k in 0..SWEEPS {
        let start = 1_000_000 + k as i64 * 100_000;
        writer
            .write_sweep(
                start,
                start + 99_951,
                &plane_wall_pixels(&lut, -1.5, 20.0 + k as f64 * 0.3),
            )
            .expect("write sweep");
    }
    writer.finish().expect("finish");
    let source = M3edSource::open(&path, M3edConfig::default()).expect("open");

    let mut group = c.benchmark_group("m3ed_read");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    group.bench_function("sweep_lzf_decode_xyz", |b| {
        b.iter(|| {
            let frame = source.frame(i % SWEEPS).expect("frame");
            i += 1;
            black_box(frame.cloud.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_read);
criterion_main!(benches);
