//! Camera rendering throughput on one core (target ≥ 4 Waymo-size images/s): a Waymo FRONT
//! camera (1920×1280, the real calibration of the shared fixture) on the simulated car, and the
//! M3ED OVC RGB camera (1280×800) on the drone and the quadruped, default scenes and rolling
//! terrain. Timed in thread CPU time (`support/cpu_time.rs`); the renderer is single-threaded.

use boxlayer::Platform;
use boxlayer::frame::{CameraAxes, CameraCalibration, Distortion};
use boxlayer::sim::{SimConfig, Simulator, ovc_rgb_calibration, render_camera};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion};

#[path = "support/cpu_time.rs"]
mod cpu_time;
use cpu_time::ThreadCpuTime;

/// The FRONT camera of `../shared/fixtures/waymo/frame_with_cameras.tfrecord`.
fn waymo_front() -> CameraCalibration {
    CameraCalibration {
        width: 1920,
        height: 1280,
        fx: 2044.5083584358413,
        fy: 2044.5083584358413,
        cx: 949.5746451352071,
        cy: 633.2422462156501,
        distortion: Distortion::RadTan {
            k1: 0.040358363932006036,
            k2: -0.33001662226602974,
            p1: 0.0010402702690110032,
            p2: -0.0015669020781401406,
            k3: 0.0,
        },
        axes: CameraAxes::Waymo,
        sensor_from_camera: Isometry3::from_parts(
            Translation3::new(1.5386347086190375, -0.024394341231793928, 2.1150940771840068),
            UnitQuaternion::from_quaternion(Quaternion::new(
                0.9999889328836675,
                -0.0043922744417912085,
                0.0009725413353810559,
                0.0013770253311849278,
            )),
        ),
    }
}

fn render_benches(c: &mut Criterion<ThreadCpuTime>) {
    let config = SimConfig {
        frames: 20,
        ..SimConfig::default()
    };
    let mut group = c.benchmark_group("camera_render");
    group.throughput(Throughput::Elements(1));
    let cases = [
        ("waymo_front_1920x1280_vehicle", Platform::Vehicle, waymo_front()),
        ("ovc_rgb_1280x800_drone", Platform::Drone, ovc_rgb_calibration()),
        ("ovc_rgb_1280x800_quadruped", Platform::Quadruped, ovc_rgb_calibration()),
    ];
    for (name, platform, calibration) in cases {
        let sim = Simulator::new(config.clone(), platform, 3).expect("simulator");
        let sweep = sim.sweep(5).expect("sweep");
        group.bench_function(name, |b| {
            b.iter(|| render_camera(&sim, &sweep, &calibration).expect("render"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime).sample_size(10);
    targets = render_benches
}
criterion_main!(benches);
