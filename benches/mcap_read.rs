//! Sweeps per second through the ROS 2 MCAP reader on one core: `frame(i)` reads one chunk,
//! decompresses it (zstd at two levels, LZ4, or none), decodes the CDR `PointCloud2` and its Ouster-like 131,072-point records
//! (x, y, z, intensity f32, t u32, reflectivity u16, ring u16, ambient u16, range u32) through the
//! point layout (no IMU, pose or image in the bag).

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;
use std::hint::black_box;
use std::time::Duration;

use boxlayer::cloud::{ChannelData, PointCloud};
use boxlayer::frame::{Frame, Platform};
use boxlayer::sources::Source;
use boxlayer::sources::mcap::{BagWriteOptions, ChunkCompression, McapConfig, McapSource, write_bag};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nalgebra::Isometry3;

const SWEEPS: usize = 8;
const RINGS: usize = 128;
const COLUMNS: usize = 1024;

/// An OS-128-like sweep: ranges on a rolling surface with a little noise, as a sensor sees it.
fn sweep(k: usize) -> Frame {
    let n = RINGS * COLUMNS;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ k as u64;
    let mut noise = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64) - 0.5
    };
    let (mut x, mut y, mut z, mut intensity) = (vec![], vec![], vec![], vec![]);
    let (mut t, mut refl, mut ring, mut ambient, mut range) = (vec![], vec![], vec![], vec![], vec![]);
    for r in 0..RINGS {
        let elevation = (-22.5 + 45.0 * r as f64 / (RINGS - 1) as f64).to_radians();
        for c in 0..COLUMNS {
            let azimuth = std::f64::consts::TAU * c as f64 / COLUMNS as f64;
            let d = 8.0 + 4.0 * (azimuth * 3.0).sin() + 0.02 * noise();
            x.push((d * elevation.cos() * azimuth.cos()) as f32);
            y.push((d * elevation.cos() * azimuth.sin()) as f32);
            z.push((d * elevation.sin()) as f32);
            intensity.push((100.0 + 50.0 * noise()) as f32);
            t.push((c * 97_656) as u32);
            refl.push((1000.0 + 300.0 * noise()) as u16);
            ring.push(r as u16);
            ambient.push((200.0 + 40.0 * noise()) as u16);
            range.push((d * 1000.0) as u32);
        }
    }
    let mut cloud = PointCloud::from_columns(x, y, z, intensity).expect("cloud");
    for (name, data) in [
        ("t", ChannelData::U32(t)),
        ("reflectivity", ChannelData::U16(refl)),
        ("ring", ChannelData::U16(ring)),
        ("ambient", ChannelData::U16(ambient)),
        ("range", ChannelData::U32(range)),
    ] {
        cloud.add_channel(name, data).expect("channel");
    }
    assert_eq!(cloud.len(), n);
    Frame {
        sequence: "bench".into(),
        index: k,
        timestamp_micros: 1_700_000_000_000_000 + k as i64 * 100_000,
        platform: Platform::Vehicle,
        cloud,
        world_from_sensor: Isometry3::identity(),
        imu: Vec::new(),
        cameras: Vec::new(),
        ground_truth: Vec::new(),
        notes: Vec::new(),
    }
}

/// The chunk codecs a ROS 2 bag comes with: zstd at level 1 (the MCAP C++ writer's `Default`,
/// which rosbag2 records with unless a preset says otherwise, and what boxlayer writes) and at the
/// `zstd` library's default level 3, LZ4, and none (rosbag2's `fastwrite` preset).
const CODECS: [(&str, ChunkCompression, u32); 4] = [
    ("zstd3", ChunkCompression::Zstd, 3),
    ("zstd1", ChunkCompression::Zstd, 1),
    ("lz4", ChunkCompression::Lz4, 0),
    ("none", ChunkCompression::None, 0),
];

fn bench_read(c: &mut Criterion<ThreadCpuTime>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let frames: Vec<Frame> = (0..SWEEPS).map(sweep).collect();
    let mut group = c.benchmark_group("mcap_read");
    group.throughput(Throughput::Elements(1));
    for (name, compression, compression_level) in CODECS {
        let path = dir.path().join(format!("bench_{name}.mcap"));
        let options = BagWriteOptions {
            compression,
            compression_level,
            ..BagWriteOptions::default()
        };
        let summary = write_bag(&path, &frames, &options).expect("write bag");
        let source = McapSource::open(&path, McapConfig::default()).expect("open");
        assert_eq!(source.len(), SWEEPS);
        eprintln!(
            "mcap_read/{name}: {} sweeps of {} points, {:.1} MB bag ({:.1} MB of point records)",
            SWEEPS,
            RINGS * COLUMNS,
            summary.bytes as f64 / 1e6,
            (SWEEPS * RINGS * COLUMNS * 30) as f64 / 1e6
        );
        let mut i = 0usize;
        group.bench_function(format!("sweep_{name}_cdr_pointcloud2_130k"), |b| {
            b.iter(|| {
                let frame = source.frame(i % SWEEPS).expect("frame");
                i += 1;
                black_box(frame.cloud.len())
            })
        });
        if compression == ChunkCompression::Zstd && compression_level == 3 {
            group.bench_function("open_index", |b| {
                b.iter(|| black_box(McapSource::open(&path, McapConfig::default()).expect("open").len()))
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    targets = bench_read
}
criterion_main!(benches);
