//! Speed of one simulated sweep with the default config and rolling terrain: OS1-64 sweeps
//! (131,072 rays) on the quadruped (148 labelled objects within the 120 m range, plus trees,
//! poles, walls and buildings) and the drone, and a Waymo-TOP vehicle sweep
//! (169,600 rays).

use boxlayer::Platform;
use boxlayer::sim::{SimConfig, Simulator};
use criterion::{Criterion, criterion_group, criterion_main};

fn sweep_benches(c: &mut Criterion) {
    let config = SimConfig {
        frames: 20,
        ..SimConfig::default()
    };
    let quadruped = Simulator::new(config.clone(), Platform::Quadruped, 3).expect("quadruped simulator");
    let probe = quadruped.sweep(5).expect("sweep");
    eprintln!(
        "quadruped sweep 5: {} labelled objects in range, {} hit",
        probe.objects.len(),
        probe.objects.iter().filter(|o| o.num_lidar_points > 0).count()
    );
    c.bench_function("os1_64_quadruped_sweep", |b| {
        b.iter(|| quadruped.sweep(5).expect("sweep"))
    });
    let drone = Simulator::new(config.clone(), Platform::Drone, 3).expect("drone simulator");
    c.bench_function("os1_64_drone_sweep", |b| b.iter(|| drone.sweep(5).expect("sweep")));
    let vehicle = Simulator::new(config, Platform::Vehicle, 3).expect("vehicle simulator");
    c.bench_function("waymo_top_vehicle_sweep", |b| {
        b.iter(|| vehicle.sweep(5).expect("sweep"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = sweep_benches
}
criterion_main!(benches);
