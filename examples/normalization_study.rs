//! The normalization study of `docs/normalization.md`: simulated drone and quadruped sequences
//! (drones taking off from the ground or logged from mid-flight, level and tilted starts, flat,
//! rolling and sloped terrain) written as M3ED files, read back
//! through `M3edSource`, and normalized with each gravity estimator; prints the residual tilt
//! against the simulator's gravity (median, p95, max per estimator and scenario) and the ground
//! rule's sensor-height error, as Markdown.
//!
//! ```sh
//! cargo run --release --example normalization_study -- --frames 250 --seeds 1,2,3
//! ```

use anyhow::{Context, Result};
use boxlayer::frame::Platform;
use boxlayer::normalize::{
    EXTRAPOLATED_HEIGHT, FrameInputs, GravityMethod, Profile, angle_between, normalize_sequence,
};
use boxlayer::sim::{SWEEP_PERIOD_MICROS, SimConfig, Simulator, TerrainKind, write_m3ed_sequence};
use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use clap::Parser;
use nalgebra::Vector3;

#[derive(Debug, Parser)]
#[command(about = "Residual tilt of each gravity estimator on simulated M3ED sequences")]
struct Args {
    /// Sweeps per sequence.
    #[arg(long, default_value_t = 100)]
    frames: usize,
    /// Simulator seeds, comma-separated (one sequence per scenario and seed).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// Only the scenarios whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Sweeps taken in an instant (`rolling_shutter = false`): no motion blur within a sweep.
    #[arg(long)]
    global_shutter: bool,
}

/// How a drone's log starts.
#[derive(Clone, Copy)]
struct Start {
    /// Nose-up tilt at the first sweep beyond the terrain's (degrees).
    tilt_deg: f64,
    /// The climb from the ground (s; 0: the log starts in flight).
    takeoff_s: f64,
}

/// The drones' climb from the ground in the take-off scenarios (s), after resting 2 s.
const CLIMB_S: f64 = 6.0;
const TAKES_OFF: Start = Start {
    tilt_deg: 0.0,
    takeoff_s: CLIMB_S,
};
const TAKES_OFF_TILTED: Start = Start {
    tilt_deg: 5.0,
    takeoff_s: CLIMB_S,
};
const IN_FLIGHT: Start = Start {
    tilt_deg: 0.0,
    takeoff_s: 0.0,
};
const IN_FLIGHT_TILTED: Start = Start {
    tilt_deg: 5.0,
    takeoff_s: 0.0,
};
/// A quadruped's (the drone's options do not apply).
const WALKING: Start = IN_FLIGHT;

/// One simulated situation.
struct Scenario {
    name: &'static str,
    platform: Platform,
    terrain: TerrainKind,
    slope_deg: f64,
    start: Start,
    /// The drone's LiDAR mount, pitched down (degrees; the simulator's default is 40).
    mount_pitch_deg: f64,
    /// The profile's ground reach, where it differs from the shipped profile's (m).
    ground_reach_m: Option<f64>,
}

const fn scenario(
    name: &'static str,
    platform: Platform,
    terrain: TerrainKind,
    slope_deg: f64,
    start: Start,
    mount_pitch_deg: f64,
    ground_reach_m: Option<f64>,
) -> Scenario {
    Scenario {
        name,
        platform,
        terrain,
        slope_deg,
        start,
        mount_pitch_deg,
        ground_reach_m,
    }
}

#[rustfmt::skip]
const SCENARIOS: [Scenario; 12] = [
    scenario("drone, rolling, takes off level", Platform::Drone, TerrainKind::Rolling, 0.0, TAKES_OFF, 40.0, None),
    scenario("drone, rolling, takes off from a pad 5° nose up", Platform::Drone, TerrainKind::Rolling, 0.0, TAKES_OFF_TILTED, 40.0, None),
    scenario("drone, 5° slope, takes off from it", Platform::Drone, TerrainKind::Sloped, 5.0, TAKES_OFF, 40.0, None),
    scenario("drone, flat, takes off level", Platform::Drone, TerrainKind::Flat, 0.0, TAKES_OFF, 40.0, None),
    scenario("drone, level LiDAR mount, takes off from a pad 5° nose up", Platform::Drone, TerrainKind::Rolling, 0.0, TAKES_OFF_TILTED, 0.0, None),
    scenario(
        "drone, level LiDAR mount, takes off from a pad 5° nose up, own profile (mount 0°, ground reach 150 m)",
        Platform::Drone, TerrainKind::Rolling, 0.0, TAKES_OFF_TILTED, 0.0, Some(150.0),
    ),
    scenario("drone, rolling, log starts in flight", Platform::Drone, TerrainKind::Rolling, 0.0, IN_FLIGHT, 40.0, None),
    scenario("drone, rolling, log starts in flight 5° nose up", Platform::Drone, TerrainKind::Rolling, 0.0, IN_FLIGHT_TILTED, 40.0, None),
    scenario("drone, flat, log starts in flight", Platform::Drone, TerrainKind::Flat, 0.0, IN_FLIGHT, 40.0, None),
    scenario("quadruped, rolling", Platform::Quadruped, TerrainKind::Rolling, 0.0, WALKING, 0.0, None),
    scenario("quadruped, 5° slope (starts on it)", Platform::Quadruped, TerrainKind::Sloped, 5.0, WALKING, 0.0, None),
    scenario("quadruped, flat", Platform::Quadruped, TerrainKind::Flat, 0.0, WALKING, 0.0, None),
];

const METHODS: [GravityMethod; 4] = [
    GravityMethod::Pose3eed,
    GravityMethod::Imu,
    GravityMethod::Ground,
    GravityMethod::Fused,
];

/// Where a frame's sensor height came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Height {
    /// Ground samples seen under the sensor, by the frames within the smoothing window.
    Seen,
    /// Ground samples seen under the sensor by frames outside the window.
    SeenEarlier,
    /// The sweep's own plane, extrapolated.
    Extrapolated,
    /// No fit: carried from another frame, or the mounting height.
    Fallback,
}

/// What one sequence gives: per frame the truth up, its inputs, and the true sensor height.
struct Run {
    truth_up: Vec<Vector3<f64>>,
    truth_height: Vec<f64>,
    inputs: Vec<FrameInputs>,
}

fn simulate(s: &Scenario, args: &Args, seed: u64, profile: &Profile, dir: &std::path::Path) -> Result<Run> {
    let mut config = SimConfig {
        frames: args.frames,
        rolling_shutter: !args.global_shutter,
        ..SimConfig::default()
    };
    config.terrain.kind = s.terrain;
    config.terrain.slope_deg = s.slope_deg;
    config.drone.start_tilt_deg = s.start.tilt_deg;
    config.drone.takeoff_s = s.start.takeoff_s;
    config.drone.sensor_pitch_down_deg = s.mount_pitch_deg;
    let sim = Simulator::new(config, s.platform, seed)?;
    let prefix = if s.platform == Platform::Drone {
        "falcon"
    } else {
        "spot"
    };
    let name = format!("{prefix}_study_{seed}");
    write_m3ed_sequence(&sim, args.frames, dir, &name)?;
    let source = M3edSource::open(&dir.join(format!("{name}_data.h5")), M3edConfig::default())?;
    let mut run = Run {
        truth_up: Vec::new(),
        truth_height: Vec::new(),
        inputs: Vec::new(),
    };
    for i in 0..source.len() {
        let frame = source.frame(i)?;
        // The simulator's truth at mid-sweep, the time of the sweep's pose.
        let start = sim.config().start_time_micros + frame.index as i64 * SWEEP_PERIOD_MICROS;
        let pose = sim.world_from_sensor_at(start + SWEEP_PERIOD_MICROS / 2);
        run.truth_up.push(pose.rotation.inverse() * Vector3::z());
        let t = pose.translation.vector;
        run.truth_height.push(t.z - sim.ground_height(t.x, t.y));
        run.inputs.push(FrameInputs::from_frame(&frame, profile));
    }
    Ok(run)
}

fn quantiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95), *v.last().unwrap_or(&f64::NAN))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    println!("| scenario | estimator | median tilt ° | p95 ° | max ° | mean confidence |");
    println!("|---|---|---|---|---|---|");
    let mut heights: Vec<(String, Vec<(Height, f64)>)> = Vec::new();
    let chosen = SCENARIOS
        .iter()
        .filter(|s| args.only.as_ref().is_none_or(|o| s.name.contains(o.as_str())));
    for s in chosen {
        let name = if s.platform == Platform::Drone {
            "m3ed_drone"
        } else {
            "m3ed_quadruped"
        };
        let mut base = Profile::load(name)?.profile;
        if let Some(reach) = s.ground_reach_m {
            // A new airframe is a new profile: its mount, and a ground reach that finds the
            // ground a level LiDAR sees only 2.4 × the altitude away.
            base.mounting.pitch_down_deg = s.mount_pitch_deg;
            base.gravity.ground.max_range_m = reach;
        }
        let runs: Vec<Run> = args
            .seeds
            .iter()
            .map(|&seed| simulate(s, &args, seed, &base, dir.path()).with_context(|| format!("{} seed {seed}", s.name)))
            .collect::<Result<_>>()?;
        for method in METHODS {
            let mut profile = base.clone();
            profile.gravity.method = method;
            let (mut tilt, mut confidence) = (Vec::new(), Vec::new());
            for run in &runs {
                for (n, truth) in normalize_sequence(&run.inputs, &profile).iter().zip(&run.truth_up) {
                    tilt.push(angle_between(&n.up.up, truth).to_degrees());
                    confidence.push(n.confidence);
                    if method == GravityMethod::Fused && !n.up.up.iter().all(|v| v.is_finite()) {
                        anyhow::bail!("{}: non-finite up", s.name);
                    }
                }
                if method == GravityMethod::Fused {
                    let errors = normalize_sequence(&run.inputs, &profile)
                        .iter()
                        .zip(&run.truth_height)
                        .filter_map(|(n, h)| {
                            let how = if n.notes.iter().any(|m| m == EXTRAPOLATED_HEIGHT) {
                                Height::Extrapolated
                            } else if n
                                .notes
                                .iter()
                                .any(|m| m.starts_with("ground under the sensor last seen"))
                            {
                                Height::SeenEarlier
                            } else if n.notes.iter().any(|m| m.starts_with("no ground fit")) {
                                Height::Fallback
                            } else {
                                Height::Seen
                            };
                            n.sensor_height_m.map(|e| (how, (e - h).abs()))
                        })
                        .collect::<Vec<_>>();
                    match heights.iter_mut().find(|(k, _)| k == s.name) {
                        Some((_, v)) => v.extend(errors),
                        None => heights.push((s.name.to_string(), errors)),
                    }
                }
            }
            let (median, p95, max) = quantiles(tilt);
            let mean_conf = confidence.iter().sum::<f64>() / confidence.len().max(1) as f64;
            println!(
                "| {} | {method} | {median:.3} | {p95:.3} | {max:.3} | {mean_conf:.2} |",
                s.name
            );
        }
    }
    println!();
    println!("| scenario | ground | sensor-height error, median m | p95 m | max m | frames |");
    println!("|---|---|---|---|---|---|");
    for (name, errors) in heights {
        for (label, pick) in [
            ("all frames", None),
            ("seen under the sensor", Some(Height::Seen)),
            ("seen under the sensor, outside the window", Some(Height::SeenEarlier)),
            ("extrapolated plane", Some(Height::Extrapolated)),
            ("no ground fit (carried or mounting)", Some(Height::Fallback)),
        ] {
            let e: Vec<f64> = errors
                .iter()
                .filter(|(s, _)| pick.is_none_or(|p| p == *s))
                .map(|(_, e)| *e)
                .collect();
            if e.is_empty() {
                continue;
            }
            let n = e.len();
            let (median, p95, max) = quantiles(e);
            println!("| {name} | {label} | {median:.3} | {p95:.3} | {max:.3} | {n} |");
        }
    }
    Ok(())
}
