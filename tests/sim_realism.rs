//! Realism of simulated sweeps against the 3EED statistics (Table 6): points per sweep,
//! points per object by range, objects per frame. `docs/simulator.md` reports the table this
//! prints in a release build (`cargo test --release --test sim_realism -- --nocapture`, 10
//! sweeps per platform); a debug build measures 3 sweeps per platform to stay quick.

use boxlayer::Platform;
use boxlayer::sim::{SimConfig, Simulator};

struct Stats {
    sweeps: usize,
    points: usize,
    objects_hit: usize,
    objects_front: usize,
    objects_front_50m: usize,
    front_points: Vec<u32>,
    object_points: Vec<(f64, u32)>,
}

fn measure(platform: Platform, seed: u64, sweeps: usize, stride: usize) -> Stats {
    let config = SimConfig {
        frames: sweeps * stride,
        ..SimConfig::default()
    };
    let sim = Simulator::new(config, platform, seed).unwrap();
    let mut s = Stats {
        sweeps,
        points: 0,
        objects_hit: 0,
        objects_front: 0,
        objects_front_50m: 0,
        front_points: Vec::new(),
        object_points: Vec::new(),
    };
    for i in (0..sweeps).map(|k| k * stride) {
        let sweep = sim.sweep(i).unwrap();
        s.points += sim.sweep_points(&sweep).len();
        for o in sweep.objects.iter().filter(|o| o.num_lidar_points > 0) {
            s.objects_hit += 1;
            let b = &o.box_in_sensor;
            if b.x > 0.0 && b.y.abs() < b.x {
                s.objects_front += 1;
                if b.x.hypot(b.y) < 50.0 {
                    s.objects_front_50m += 1;
                    s.front_points.push(o.num_lidar_points);
                }
            }
            s.object_points.push((b.x.hypot(b.y), o.num_lidar_points));
        }
    }
    s
}

#[test]
fn sweeps_resemble_3eed_statistics() {
    let sweeps = if cfg!(debug_assertions) { 3 } else { 10 };
    println!(
        "| platform | points/sweep | objects hit/sweep | front 90° | front 90° < 50 m | pts/object | median | < 100 pts | > 900 pts | pts/object front < 50 m | 3EED pts/obj | 3EED obj/scene |"
    );
    for (platform, pts_3eed, obj_3eed) in [
        (Platform::Vehicle, 463.0, 4.8),
        (Platform::Drone, 102.0, 8.1),
        (Platform::Quadruped, 112.0, 5.8),
    ] {
        let s = measure(platform, 7, sweeps, 20);
        let n = s.object_points.len().max(1) as f64;
        let mean_pts = s.object_points.iter().map(|(_, p)| *p as f64).sum::<f64>() / n;
        let mut sorted: Vec<u32> = s.object_points.iter().map(|(_, p)| *p).collect();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let few = sorted.iter().filter(|&&p| p < 100).count() as f64 / n;
        println!(
            "| {platform} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {median} | {:.0} % | {:.0} % | {:.0} | {pts_3eed} | {obj_3eed} |",
            s.points as f64 / s.sweeps as f64,
            s.objects_hit as f64 / s.sweeps as f64,
            s.objects_front as f64 / s.sweeps as f64,
            s.objects_front_50m as f64 / s.sweeps as f64,
            mean_pts,
            100.0 * few,
            100.0 * sorted.iter().filter(|&&p| p > 900).count() as f64 / n,
            s.front_points.iter().map(|&p| p as f64).sum::<f64>() / s.front_points.len().max(1) as f64
        );
        let bins = [0.0, 10.0, 20.0, 30.0, 45.0, 60.0, 80.0, 1e9];
        for w in bins.windows(2) {
            let inside: Vec<f64> = s
                .object_points
                .iter()
                .filter(|(d, _)| *d >= w[0] && *d < w[1])
                .map(|(_, p)| *p as f64)
                .collect();
            if !inside.is_empty() {
                println!(
                    "|   {platform} range {}–{} m | {} objects | mean {:.0} points |",
                    w[0],
                    w[1],
                    inside.len(),
                    inside.iter().sum::<f64>() / inside.len() as f64
                );
            }
        }
        assert!(
            s.points > 10_000,
            "{platform}: {} points per sweep",
            s.points / s.sweeps
        );
        assert!(s.objects_hit >= s.sweeps, "{platform}: too few objects hit");
        assert!(
            (10.0..5000.0).contains(&mean_pts),
            "{platform}: {mean_pts} points per object"
        );
    }
}
