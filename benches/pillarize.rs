//! Detector pre/post-processing hot paths: pillarisation of a 120k / 150k-point sweep (one core
//! and the default rayon pool), scatter, anchor and CenterPoint decoding of full-size head maps,
//! and the real PFN encoders (ONNX Runtime, CPU) for the split per stage. One-core pillarisation
//! and `tanh` of a 150k-value column (batched and per point) are timed in thread CPU time
//! (`support/cpu_time.rs`), pillarisation on a pool made of the benchmark thread; the rest in wall
//! time. `PILLARIZE_PROBE_CALLS=N` instead runs four pillarisation cases N times
//! each for instruction counts under callgrind (`probe`).

use std::hint::black_box;
use std::path::Path;

use boxlayer::PointCloud;
use boxlayer::detect::manifest::{
    AnchorClass, AnchorHeadConfig, CenterHeadConfig, CenterTask, EncoderLayout, MapLayout, PillarFeatureOrder,
    PointFeature, ScoreActivation,
};
use boxlayer::detect::{
    AnchorDecoder, Canvas, CenterHeatmapDecoder, CenterTaskMaps, Detector, HeadMap, PillarGrid, PillarRows, PillarSpec,
    Pillars, pillarize, pillarize_into, scatter_into, tanh_column,
};
use criterion::{Criterion, criterion_group};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

/// A Waymo-like sweep: `n` points out to 75 m, mostly near the ground, in scan order (azimuth
/// rising, as spinning sensors deliver them) or shuffled (`scan_order = false`, the worst case
/// for memory locality).
fn sweep_ordered(n: usize, scan_order: bool) -> PointCloud {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut x, mut y, mut z, mut i) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..n {
        let r = 2.0 + 73.0 * next() * next();
        let a = std::f32::consts::TAU * if scan_order { x.len() as f32 / n as f32 } else { next() };
        x.push(r * a.cos());
        y.push(r * a.sin());
        z.push(-1.8 + 2.5 * next() * next());
        i.push(next());
    }
    PointCloud::from_columns(x, y, z, i).unwrap()
}

fn sweep(n: usize) -> PointCloud {
    sweep_ordered(n, true)
}

fn waymo_centerpoint_spec(layout: EncoderLayout) -> PillarSpec {
    let features: Vec<PointFeature> = ["x", "y", "z", "intensity", "zero"]
        .iter()
        .map(|s| PointFeature::raw(s))
        .collect();
    PillarSpec {
        grid: PillarGrid::new([-74.88, -74.88, -2.0, 74.88, 74.88, 4.0], [0.32, 0.32, 6.0]),
        max_points_per_pillar: 20,
        max_pillars: 32000,
        channels: PillarFeatureOrder::Centerpoint.channels(features.len()),
        features,
        layout,
    }
}

/// [`waymo_centerpoint_spec`] with OpenPCDet's Waymo intensity convention: `tanh(intensity)`.
fn waymo_centerpoint_tanh_spec() -> PillarSpec {
    let mut spec = waymo_centerpoint_spec(EncoderLayout::PointMajor);
    spec.features[3].tanh = true;
    spec
}

fn kitti_pointpillars_spec() -> PillarSpec {
    let features: Vec<PointFeature> = ["x", "y", "z", "intensity"]
        .iter()
        .map(|s| PointFeature::raw(s))
        .collect();
    PillarSpec {
        grid: PillarGrid::new([0.0, -39.68, -3.0, 69.12, 39.68, 1.0], [0.16, 0.16, 4.0]),
        max_points_per_pillar: 32,
        max_pillars: 40000,
        channels: PillarFeatureOrder::Openpcdet.channels(features.len()),
        features,
        layout: EncoderLayout::PointMajor,
    }
}

/// Steady state: the same `Pillars` buffers reused call after call, as `Detector` does.
fn reused(cloud: &PointCloud, spec: &PillarSpec, rows: PillarRows, out: &mut Pillars) {
    pillarize_into(cloud, spec, rows, out).unwrap();
    black_box(&out.features);
}

/// A one-thread rayon pool made of the calling (benchmark) thread, so its CPU time is the work's.
fn bench_thread_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .unwrap()
}

/// One core, timed in the benchmark thread's CPU time (the machine is shared).
fn bench_pillarize_one_core(c: &mut Criterion<ThreadCpuTime>) {
    let one_core = bench_thread_pool();
    let mut out = Pillars::default();
    for n in [120_000, 150_000] {
        let cloud = sweep(n);
        let spec = waymo_centerpoint_spec(EncoderLayout::PointMajor);
        let k = n / 1000;
        c.bench_function(&format!("pillarize/{k}k/waymo_centerpoint_static32000/1_core"), |b| {
            b.iter(|| one_core.install(|| reused(&cloud, &spec, PillarRows::Fixed(32000), &mut out)))
        });
        c.bench_function(&format!("pillarize/{k}k/waymo_centerpoint_trimmed/1_core"), |b| {
            b.iter(|| one_core.install(|| reused(&cloud, &spec, PillarRows::Trim, &mut out)))
        });
    }
    let cloud = sweep(150_000);
    let spec = waymo_centerpoint_spec(EncoderLayout::PointMajor);
    c.bench_function(
        "pillarize/150k/waymo_centerpoint_static32000/1_core_fresh_buffers",
        |b| b.iter(|| one_core.install(|| black_box(pillarize(&cloud, &spec, PillarRows::Fixed(32000)).unwrap()))),
    );
    let shuffled = sweep_ordered(150_000, false);
    c.bench_function("pillarize/150k_shuffled/waymo_centerpoint_static32000/1_core", |b| {
        b.iter(|| one_core.install(|| reused(&shuffled, &spec, PillarRows::Fixed(32000), &mut out)))
    });
    let spec = waymo_centerpoint_tanh_spec();
    let mut tanh = Pillars::default();
    c.bench_function("pillarize/150k/waymo_centerpoint_tanh_intensity/1_core", |b| {
        b.iter(|| one_core.install(|| reused(&cloud, &spec, PillarRows::Fixed(32000), &mut tanh)))
    });
    let spec = waymo_centerpoint_spec(EncoderLayout::ChannelMajor);
    let mut cm = Pillars::default();
    c.bench_function("pillarize/150k/waymo_centerpoint_channel_major/1_core", |b| {
        b.iter(|| one_core.install(|| reused(&cloud, &spec, PillarRows::Fixed(32000), &mut cm)))
    });
    let spec = kitti_pointpillars_spec();
    let mut kitti = Pillars::default();
    c.bench_function("pillarize/150k/kitti_pointpillars_trimmed/1_core", |b| {
        b.iter(|| one_core.install(|| reused(&cloud, &spec, PillarRows::Trim, &mut kitti)))
    });
    // As a detector runs: every sweep differs, so a trimmed tensor's pillar count changes from
    // call to call (here 150k- and 120k-point sweeps alternate; the time is per call).
    let other = sweep(120_000);
    let mut first = false;
    c.bench_function(
        "pillarize/150k_120k_alternating/kitti_pointpillars_trimmed/1_core",
        |b| {
            b.iter(|| {
                first = !first;
                let next = if first { &cloud } else { &other };
                one_core.install(|| reused(next, &spec, PillarRows::Trim, &mut kitti))
            })
        },
    );
    let spec = waymo_centerpoint_spec(EncoderLayout::PointMajor);
    c.bench_function(
        "pillarize/150k_120k_alternating/waymo_centerpoint_trimmed/1_core",
        |b| {
            b.iter(|| {
                first = !first;
                let next = if first { &cloud } else { &other };
                one_core.install(|| reused(next, &spec, PillarRows::Trim, &mut out))
            })
        },
    );
}

/// The pre-batch per-point `tanh` of `pillarize` (one libm f64 `exp` per value), the baseline
/// of the batched column.
fn tanh_per_point(x: f32) -> f32 {
    if x.abs() < 1.0 / 4096.0 {
        return x;
    }
    let x = f64::from(x).clamp(-10.0, 10.0);
    let e = (2.0 * x).exp();
    ((e - 1.0) / (e + 1.0)) as f32
}

/// `tanh(raw · scale + offset)` of a 150k-value intensity column, one core (CPU time).
fn bench_tanh(c: &mut Criterion<ThreadCpuTime>) {
    let cloud = sweep(150_000);
    let (raw, scale, offset) = (cloud.intensity(), 3.0f32, -1.5f32);
    let mut out = vec![0.0f32; raw.len()];
    c.bench_function("tanh/150k/per_point", |b| {
        b.iter(|| {
            for (o, &r) in out.iter_mut().zip(black_box(raw)) {
                *o = tanh_per_point(r * scale + offset);
            }
            black_box(&out);
        })
    });
    c.bench_function("tanh/150k/batch", |b| {
        b.iter(|| {
            tanh_column(black_box(raw), scale, offset, &mut out);
            black_box(&out);
        })
    });
}

/// The default rayon pool, in wall time.
fn bench_pillarize_pool(c: &mut Criterion) {
    let mut out = Pillars::default();
    for n in [120_000, 150_000] {
        let cloud = sweep(n);
        let spec = waymo_centerpoint_spec(EncoderLayout::PointMajor);
        let k = n / 1000;
        c.bench_function(&format!("pillarize/{k}k/waymo_centerpoint_static32000/rayon"), |b| {
            b.iter(|| reused(&cloud, &spec, PillarRows::Fixed(32000), &mut out))
        });
    }
}

fn bench_decode(c: &mut Criterion) {
    // KITTI PointPillars head: 248 × 216 cells, 6 anchors, 3 classes; background logits −5.
    let config = AnchorHeadConfig {
        labels: vec!["Car".into(), "Pedestrian".into(), "Cyclist".into()],
        anchors: ["Car", "Pedestrian", "Cyclist"]
            .iter()
            .map(|l| AnchorClass {
                label: l.to_string(),
                ..AnchorClass::default()
            })
            .collect(),
        ..AnchorHeadConfig::default()
    };
    let decoder = AnchorDecoder::new(&config, [0.0, -39.68, -3.0, 69.12, 39.68, 1.0], 216, 248);
    let (cc, bc, dc) = decoder.channels();
    let cells = 248 * 216;
    let mut cls = vec![-5.0f32; cc * cells];
    for k in (0..cls.len()).step_by(997) {
        cls[k] = 1.0;
    }
    let boxes = vec![0.01f32; bc * cells];
    let dirs = vec![0.0f32; dc * cells];
    let cls_map = HeadMap::new(&cls, cc, 248, 216, MapLayout::Nhwc).unwrap();
    let box_map = HeadMap::new(&boxes, bc, 248, 216, MapLayout::Nhwc).unwrap();
    let dir_map = HeadMap::new(&dirs, dc, 248, 216, MapLayout::Nhwc).unwrap();
    c.bench_function("decode/anchor_kitti_248x216x6", |b| {
        b.iter(|| black_box(decoder.decode(&cls_map, &box_map, Some(&dir_map), ScoreActivation::Sigmoid, 0.1)))
    });

    // CenterPoint nuScenes head: 128 × 128, 6 tasks (1, 2, 2, 1, 2, 2 classes) with velocity.
    let counts = [1, 2, 2, 1, 2, 2];
    let config = CenterHeadConfig {
        out_size_factor: 4,
        tasks: counts
            .iter()
            .map(|&n| CenterTask {
                labels: (0..n).map(|k| format!("c{k}")).collect(),
                vel: Some("vel".into()),
                ..CenterTask::default()
            })
            .collect(),
        ..CenterHeadConfig::default()
    };
    let decoder = CenterHeatmapDecoder::new(&config, [-51.2, -51.2], [0.2, 0.2], (512, 512));
    let cells = 128 * 128;
    let heat: Vec<Vec<f32>> = counts
        .iter()
        .map(|&n| (0..n * cells).map(|k| if k % 613 == 0 { 1.0 } else { -5.0 }).collect())
        .collect();
    let two = vec![0.1f32; 2 * cells];
    let one = vec![0.1f32; cells];
    let three = vec![0.1f32; 3 * cells];
    let tasks: Vec<CenterTaskMaps> = heat
        .iter()
        .zip(counts)
        .map(|(h, n)| CenterTaskMaps {
            heatmap: HeadMap::new(h, n, 128, 128, MapLayout::Nchw).unwrap(),
            reg: HeadMap::new(&two, 2, 128, 128, MapLayout::Nchw).unwrap(),
            height: HeadMap::new(&one, 1, 128, 128, MapLayout::Nchw).unwrap(),
            dim: HeadMap::new(&three, 3, 128, 128, MapLayout::Nchw).unwrap(),
            rot: HeadMap::new(&two, 2, 128, 128, MapLayout::Nchw).unwrap(),
            vel: Some(HeadMap::new(&two, 2, 128, 128, MapLayout::Nchw).unwrap()),
        })
        .collect();
    c.bench_function("decode/center_nuscenes_128x128x6tasks", |b| {
        b.iter(|| black_box(decoder.decode(&tasks, ScoreActivation::Sigmoid, 0.1)))
    });
}

fn bench_encoders(c: &mut Criterion) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/detect");
    let cloud = sweep(150_000);
    for name in ["carkusl_pfe", "carkusl_pfe_sim", "haohaonju_pfe"] {
        let detector = match Detector::load(&fixtures.join(name)) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipping {name}: {e}");
                continue;
            }
        };
        let pillars = detector.pillarize(&cloud).unwrap();
        c.bench_function(&format!("pfn_encoder/{name}/1_thread"), |b| {
            b.iter(|| black_box(detector.encode(&pillars).unwrap()))
        });
        let encoded = detector.encode(&pillars).unwrap().unwrap();
        let (nx, ny) = detector.manifest().grid_size();
        let layout = detector.manifest().scatter.layout;
        let mut canvas = Canvas::default();
        c.bench_function(&format!("scatter/{name}/reused_canvas"), |b| {
            b.iter(|| {
                scatter_into(&encoded, &pillars.cells, nx, ny, layout, &mut canvas);
                black_box(&canvas.data);
            })
        });
        for _ in 0..2 {
            let (_, t) = detector.detect_timed(&cloud).unwrap();
            eprintln!("{name}: detect_timed (warm buffers on the 2nd call): {t:?}");
        }
    }
}

criterion_group! {
    name = one_core;
    config = Criterion::default().sample_size(20).with_measurement(ThreadCpuTime);
    targets = bench_pillarize_one_core, bench_tanh
}
criterion_group! {
    name = wall_time;
    config = Criterion::default().sample_size(20);
    targets = bench_pillarize_pool, bench_decode, bench_encoders
}
/// Instruction-count probe for `valgrind --tool=callgrind` (stable where wall and CPU times are
/// not): with `PILLARIZE_PROBE_CALLS=N` set, each 150k-point one-core case runs once to warm its
/// buffers and then `N` times inside its own `probe_*` function, whose inclusive cost / N is the
/// steady-state cost of one call; criterion does not run.
fn probe(calls: usize) {
    #[inline(never)]
    fn probe_waymo_point_major(cloud: &PointCloud, spec: &PillarSpec, out: &mut Pillars, calls: usize) {
        black_box("waymo_point_major"); // distinct bodies, so the linker does not fold the probes together
        for _ in 0..calls {
            reused(cloud, spec, PillarRows::Fixed(32000), out);
        }
    }
    #[inline(never)]
    fn probe_waymo_channel_major(cloud: &PointCloud, spec: &PillarSpec, out: &mut Pillars, calls: usize) {
        black_box("waymo_channel_major"); // distinct bodies, so the linker does not fold the probes together
        for _ in 0..calls {
            reused(cloud, spec, PillarRows::Fixed(32000), out);
        }
    }
    #[inline(never)]
    fn probe_waymo_tanh_intensity(cloud: &PointCloud, spec: &PillarSpec, out: &mut Pillars, calls: usize) {
        black_box("waymo_tanh_intensity"); // distinct bodies, so the linker does not fold the probes together
        for _ in 0..calls {
            reused(cloud, spec, PillarRows::Fixed(32000), out);
        }
    }
    #[inline(never)]
    fn probe_kitti_trimmed(cloud: &PointCloud, spec: &PillarSpec, out: &mut Pillars, calls: usize) {
        black_box("kitti_trimmed"); // distinct bodies, so the linker does not fold the probes together
        for _ in 0..calls {
            reused(cloud, spec, PillarRows::Trim, out);
        }
    }
    let one_core = bench_thread_pool();
    let cloud = sweep(150_000);
    one_core.install(|| {
        let (pm, cm, kitti) = (
            waymo_centerpoint_spec(EncoderLayout::PointMajor),
            waymo_centerpoint_spec(EncoderLayout::ChannelMajor),
            kitti_pointpillars_spec(),
        );
        let mut out = Pillars::default();
        reused(&cloud, &pm, PillarRows::Fixed(32000), &mut out);
        probe_waymo_point_major(&cloud, &pm, &mut out, calls);
        eprintln!("waymo point-major: {} pillars", out.count());
        let mut out = Pillars::default();
        reused(&cloud, &cm, PillarRows::Fixed(32000), &mut out);
        probe_waymo_channel_major(&cloud, &cm, &mut out, calls);
        let tanh = waymo_centerpoint_tanh_spec();
        let mut out = Pillars::default();
        reused(&cloud, &tanh, PillarRows::Fixed(32000), &mut out);
        probe_waymo_tanh_intensity(&cloud, &tanh, &mut out, calls);
        let mut out = Pillars::default();
        reused(&cloud, &kitti, PillarRows::Trim, &mut out);
        probe_kitti_trimmed(&cloud, &kitti, &mut out, calls);
        eprintln!("kitti trimmed: {} pillars", out.count());
    });
}

fn main() {
    if let Some(calls) = std::env::var("PILLARIZE_PROBE_CALLS").ok().and_then(|v| v.parse().ok()) {
        probe(calls);
        return;
    }
    one_core();
    wall_time();
    Criterion::default().configure_from_args().final_summary();
}
