//! Box fusion throughput on one core: frames of 3 detectors × 60 boxes (target ≥ 5,000 frames/s
//! for KBF, with MS3D's defaults and with `pipelines/base.toml`'s `[fusion]`), plus WBF and union + NMS for
//! information. Each frame has 55 objects (35 vehicles,
//! 14 pedestrians, 6 cyclists); each detector sees ~90 % of them with centre noise of ~0.2 m
//! (vehicles) or ~0.08 m (others) and fills up to 60 boxes with false boxes. Fixed seed. Timed in
//! thread CPU time (`support/cpu_time.rs`).

use std::hint::black_box;

use boxlayer::detect::Detection;
use boxlayer::fuse::{Fuser, FusionConfig, FusionMethod};
use boxlayer::geometry::Box3;
use boxlayer::{ObjectClass, Platform};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

#[path = "support/split_mix.rs"]
mod split_mix;
use split_mix::Rng;

const FRAMES: usize = 64;
const BOXES_PER_DETECTOR: usize = 60;

fn frame(rng: &mut Rng) -> Vec<Detection> {
    // (class, true box, centre noise half-width in metres)
    let objects: Vec<(ObjectClass, Box3, f64)> = (0..55)
        .map(|k| {
            let (class, size, noise) = match k {
                0..35 => (ObjectClass::Vehicle, [4.6, 1.9, 1.6], 0.2),
                35..49 => (ObjectClass::Pedestrian, [0.8, 0.7, 1.75], 0.08),
                _ => (ObjectClass::Cyclist, [1.8, 0.7, 1.7], 0.08),
            };
            let b = Box3::new(
                rng.uniform(-70.0, 70.0),
                rng.uniform(-70.0, 70.0),
                size[2] / 2.0,
                size[0],
                size[1],
                size[2],
                rng.uniform(-std::f64::consts::PI, std::f64::consts::PI),
            );
            (class, b, noise)
        })
        .collect();
    let mut out = Vec::new();
    for name in ["pointpillars", "centerpoint", "second"] {
        let mut n = 0;
        for &(class, truth, s) in &objects {
            if rng.uniform(0.0, 1.0) < 0.1 {
                continue;
            }
            let b = Box3::new(
                truth.x + rng.uniform(-s, s),
                truth.y + rng.uniform(-s, s),
                truth.z + rng.uniform(-s, s) * 0.5,
                truth.l * rng.uniform(0.9, 1.1),
                truth.w * rng.uniform(0.9, 1.1),
                truth.h * rng.uniform(0.9, 1.1),
                truth.yaw + rng.uniform(-0.05, 0.05),
            );
            out.push(Detection {
                box3: b,
                class,
                score: rng.uniform(0.3, 0.95) as f32,
                detector: name.to_string(),
            });
            n += 1;
        }
        while n < BOXES_PER_DETECTOR {
            let b = Box3::new(
                rng.uniform(-70.0, 70.0),
                rng.uniform(-70.0, 70.0),
                0.8,
                4.5,
                1.9,
                1.6,
                0.0,
            );
            out.push(Detection {
                box3: b,
                class: ObjectClass::Vehicle,
                score: rng.uniform(0.21, 0.5) as f32,
                detector: name.to_string(),
            });
            n += 1;
        }
    }
    out
}

fn bench_fuse(c: &mut Criterion<ThreadCpuTime>) {
    let mut rng = Rng(8);
    let frames: Vec<Vec<Detection>> = (0..FRAMES).map(|_| frame(&mut rng)).collect();
    let mut group = c.benchmark_group("fuse");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for (label, method, min_votes) in [
        ("kbf_3x60", FusionMethod::Kbf, 2),
        ("wbf_3x60", FusionMethod::Wbf, 2),
        ("union_nms_3x60", FusionMethod::UnionNms, 2),
    ] {
        let mut config = FusionConfig {
            method,
            ..FusionConfig::default()
        };
        for class in ObjectClass::ALL {
            config.class_mut(class).min_votes = min_votes;
        }
        bench_one(
            &mut group,
            label,
            &Fuser::new(&config, Platform::Vehicle).unwrap(),
            &frames,
        );
    }
    // The pipeline's recommended setting (density-peak centre and heading, min_votes 1).
    let pipeline: FusionConfig = boxlayer::pipeline::PipelineConfig::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pipelines/demo.toml"
    )))
    .unwrap()
    .config
    .fusion;
    bench_one(
        &mut group,
        "kbf_pipeline_3x60",
        &Fuser::new(&pipeline, Platform::Vehicle).unwrap(),
        &frames,
    );
    group.finish();
}

fn bench_one(
    group: &mut criterion::BenchmarkGroup<'_, ThreadCpuTime>,
    label: &str,
    fuser: &Fuser,
    frames: &[Vec<Detection>],
) {
    group.bench_function(label, |bench| {
        bench.iter(|| {
            frames
                .iter()
                .map(|f| fuser.fuse(black_box(f)).unwrap().len())
                .sum::<usize>()
        })
    });
}

// Thread CPU time, not wall time: the figures are one core's, whatever else the machine runs.
criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_fuse
}
criterion_main!(benches);
