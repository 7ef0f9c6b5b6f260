//! Waymo v1 decode speed: frames/s turning all five lidars' first returns into points (record
//! read, proto decode, zlib inflate, conversion), on one thread and on two, against zlib inflate
//! of the same compressed images alone, the floor (issue 5 target: decode ≤ 1.5× inflate).
//!
//! Frames are synthetic but full-size (TOP 64×2650 with per-pixel pose, four 200×600 lidars),
//! built on the real calibration of `frame_with_cameras.tfrecord`: a ground plane, walls and
//! millimetre noise, so the images compress like structured scenes rather than like noise.

use std::f64::consts::PI;
use std::io::Read;
use std::path::Path;

use boxlayer::geometry::pose::{euler_from_isometry, isometry_from_euler, row_major_from_isometry};
use boxlayer::sources::Source;
use boxlayer::sources::waymo::range_image::RangeImageData;
use boxlayer::sources::waymo::{LidarReturn, TfRecordWriter, WaymoConfig, WaymoV1Source, proto};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nalgebra::Vector3;
use prost::Message;

const FRAMES: usize = 4;

fn noise(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*seed >> 11) as f64 / (1u64 << 53) as f64
}

/// A full-size range image of a plausible scene for a lidar with these row inclinations.
fn scene_image(
    height: usize,
    width: usize,
    mount_z: f64,
    max_range: f64,
    row_incl: &[f64],
    seed: &mut u64,
) -> RangeImageData {
    let mut data = Vec::with_capacity(height * width * 4);
    for incl in row_incl.iter().take(height) {
        for w in 0..width {
            let az = PI * (1.0 - (2.0 * w as f64 + 1.0) / width as f64);
            let ground = if *incl < -0.01 {
                mount_z / (-incl).sin()
            } else {
                f64::INFINITY
            };
            let wall = 25.0 + 8.0 * (3.0 * az).sin() + 3.0 * (11.0 * az).cos();
            let r = ground.min(wall / incl.cos().max(1e-3)) + 0.003 * noise(seed);
            let hit = r < max_range && noise(seed) > 0.08;
            data.extend([
                if hit { r as f32 } else { -1.0 },
                if hit { (0.05 + 0.2 * noise(seed)) as f32 } else { 0.0 },
                if hit { (0.02 * noise(seed)) as f32 } else { 0.0 },
                0.0,
            ]);
        }
    }
    RangeImageData {
        height,
        width,
        channels: 4,
        data,
    }
}

fn build_segment(path: &Path) -> Vec<Vec<u8>> {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/waymo/frame_with_cameras.tfrecord");
    let real = WaymoV1Source::open(&fixture, WaymoConfig::default()).expect("fixture");
    let context = real.frame_proto(0).expect("fixture frame").context.expect("context");
    let mut writer = TfRecordWriter::create(path).expect("create");
    let mut compressed = Vec::new();
    let mut seed = 7u64;
    for i in 0..FRAMES {
        let world_from_vehicle = isometry_from_euler(Vector3::new(100.0 + 1.5 * i as f64, 20.0, 2.0), 0.3, 0.01, 0.0);
        let mut lasers = Vec::new();
        for c in &context.laser_calibrations {
            let name = c.name.unwrap_or(0);
            let (height, width, max_range) = if name == 1 { (64, 2650, 75.0) } else { (200, 600, 20.0) };
            let ascending: Vec<f64> = if c.beam_inclinations.is_empty() {
                let (lo, hi) = (
                    c.beam_inclination_min.unwrap_or(0.0),
                    c.beam_inclination_max.unwrap_or(0.0),
                );
                (0..height)
                    .map(|k| lo + (k as f64 + 0.5) / height as f64 * (hi - lo))
                    .collect()
            } else {
                c.beam_inclinations.clone()
            };
            let rows: Vec<f64> = ascending.into_iter().rev().collect();
            let mount_z = if name == 1 { 2.2 } else { 0.8 };
            let image = scene_image(height, width, mount_z, max_range, &rows, &mut seed);
            let image_bytes = image.compress();
            let pose_bytes = (name == 1).then(|| {
                let mut data = Vec::with_capacity(height * width * 6);
                for _ in 0..height {
                    for w in 0..width {
                        let s = (w as f64 - width as f64 / 2.0) / width as f64;
                        let p = world_from_vehicle
                            * isometry_from_euler(Vector3::new(1.5 * s, 0.0, 0.0), 0.01 * s, 0.0, 0.0);
                        let (yaw, pitch, roll) = euler_from_isometry(&p);
                        let t = p.translation.vector;
                        data.extend([roll, pitch, yaw, t.x, t.y, t.z].map(|v| v as f32));
                    }
                }
                RangeImageData {
                    height,
                    width,
                    channels: 6,
                    data,
                }
                .compress()
            });
            compressed.push(image_bytes.clone());
            if let Some(p) = &pose_bytes {
                compressed.push(p.clone());
            }
            lasers.push(proto::Laser {
                name: Some(name),
                ri_return1: Some(proto::RangeImage {
                    range_image_compressed: Some(image_bytes),
                    range_image_pose_compressed: pose_bytes,
                    ..Default::default()
                }),
                ri_return2: None,
            });
        }
        let frame = proto::Frame {
            context: Some(context.clone()),
            timestamp_micros: Some(1_000_000 + 100_000 * i as i64),
            pose: Some(proto::Transform {
                transform: row_major_from_isometry(&world_from_vehicle).to_vec(),
            }),
            lasers,
            ..Default::default()
        };
        writer.write_record(&frame.encode_to_vec()).expect("write");
    }
    writer.finish().expect("flush");
    compressed
}

fn inflate(buffers: &[Vec<u8>]) -> usize {
    let mut total = 0;
    let mut out = Vec::new();
    for b in buffers {
        out.clear();
        flate2::read::ZlibDecoder::new(&b[..])
            .read_to_end(&mut out)
            .expect("inflate");
        total += out.len();
    }
    total
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("boxlayer-bench-waymo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bench.tfrecord");
    let compressed = build_segment(&path);
    let config = WaymoConfig {
        returns: vec![LidarReturn::First],
        cameras: false,
        ..WaymoConfig::default()
    };
    let source = WaymoV1Source::open(&path, config).expect("open");
    let points: usize = (0..FRAMES).map(|i| source.frame(i).expect("frame").cloud.len()).sum();
    eprintln!("{FRAMES} frames, {} points per frame", points / FRAMES);
    let per_frame = compressed.len() / FRAMES;

    let mut group = c.benchmark_group("waymo_decode");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for threads in [1usize, 2] {
        group.bench_function(format!("first_returns_{threads}_thread"), |b| {
            b.iter(|| {
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..threads)
                        .map(|t| {
                            let source = &source;
                            s.spawn(move || {
                                (t..FRAMES)
                                    .step_by(threads)
                                    .map(|i| source.frame(i).expect("frame").cloud.len())
                                    .sum::<usize>()
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().expect("thread")).sum::<usize>()
                })
            })
        });
        group.bench_function(format!("inflate_only_{threads}_thread"), |b| {
            b.iter(|| {
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..threads)
                        .map(|t| {
                            let compressed = &compressed;
                            s.spawn(move || {
                                (t..FRAMES)
                                    .step_by(threads)
                                    .map(|i| inflate(&compressed[i * per_frame..(i + 1) * per_frame]))
                                    .sum::<usize>()
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().expect("thread")).sum::<usize>()
                })
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
