//! Box IoU throughput on one core: rotated BEV IoU (target ≥ 2 M pairs/s), plus 3D yaw-only and
//! 9-dof IoU and BEV NMS for information. Pairs are realistic overlapping car-sized boxes
//! (centre offsets of about a metre, any relative yaw), from a fixed seed.

use std::hint::black_box;

use boxlayer::geometry::{Box3, giou_3d, iou_3d, iou_3d_9dof, iou_bev, nms_bev};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// SplitMix64, so the pairs are the same on every run.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
    }
}

const PAIRS: usize = 1024;

/// Car-sized box pairs whose centres are within ~1.5 m, so nearly all overlap in BEV.
fn pairs(seed: u64, tilt: f64) -> Vec<(Box3, Box3)> {
    let mut rng = Rng(seed);
    (0..PAIRS)
        .map(|_| {
            let car = |x: f64, y: f64, rng: &mut Rng| {
                Box3::from_array([
                    x,
                    y,
                    rng.uniform(-0.3, 0.3),
                    rng.uniform(3.8, 5.0),
                    rng.uniform(1.7, 2.1),
                    rng.uniform(1.4, 1.8),
                    rng.uniform(-3.1, 3.1),
                    rng.uniform(-tilt, tilt),
                    rng.uniform(-tilt, tilt),
                ])
            };
            let (x, y) = (rng.uniform(-40.0, 40.0), rng.uniform(-40.0, 40.0));
            let a = car(x, y, &mut rng);
            let b = car(x + rng.uniform(-1.5, 1.5), y + rng.uniform(-1.5, 1.5), &mut rng);
            (a, b)
        })
        .collect()
}

fn bench_iou(c: &mut Criterion) {
    let flat = pairs(1, 0.0);
    let tilted = pairs(2, 0.2);
    let mut group = c.benchmark_group("iou");
    group.throughput(Throughput::Elements(PAIRS as u64));
    group.bench_function("iou_bev", |bench| {
        bench.iter(|| {
            flat.iter()
                .map(|(a, b)| iou_bev(black_box(a), black_box(b)))
                .sum::<f64>()
        })
    });
    group.bench_function("iou_3d_yaw_only", |bench| {
        bench.iter(|| {
            flat.iter()
                .map(|(a, b)| iou_3d(black_box(a), black_box(b)))
                .sum::<f64>()
        })
    });
    group.bench_function("iou_3d_9dof", |bench| {
        bench.iter(|| {
            tilted
                .iter()
                .map(|(a, b)| iou_3d_9dof(black_box(a), black_box(b)))
                .sum::<f64>()
        })
    });
    group.bench_function("giou_3d_9dof", |bench| {
        bench.iter(|| {
            tilted
                .iter()
                .map(|(a, b)| giou_3d(black_box(a), black_box(b)))
                .sum::<f64>()
        })
    });
    group.finish();

    // NMS over 500 boxes in 100 clusters of 5, as a detector's pre-NMS output looks.
    let mut rng = Rng(3);
    let boxes: Vec<Box3> = flat.iter().take(250).flat_map(|(a, b)| [*a, *b]).collect();
    let scores: Vec<f32> = boxes.iter().map(|_| rng.uniform(0.0, 1.0) as f32).collect();
    let mut group = c.benchmark_group("nms");
    group.throughput(Throughput::Elements(boxes.len() as u64));
    group.bench_function("nms_bev_500", |bench| {
        bench.iter(|| nms_bev(black_box(&boxes), black_box(&scores), 0.1).len())
    });
    group.finish();
}

criterion_group!(benches, bench_iou);
criterion_main!(benches);
