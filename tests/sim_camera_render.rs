//! Camera images of simulated scenes (issue 4, "Camera images"): deterministic renders of
//! generated scenes through the real Waymo FRONT calibration, sky above the horizon and ground
//! below, errors for unusable calibrations, and the M3ED RGB round trip: a simulated drone
//! sequence written with `/ovc/rgb` reads back through `M3edSource` with a camera view of the
//! right size, calibration and pixels (BGR on disk, RGB in the frame). Known-geometry checks
//! (box position and colour, occlusion, distorted straight lines, raster vs ray casting) are the
//! unit tests in `src/sim/camera_render.rs`.

use boxlayer::frame::{CameraAxes, CameraCalibration, Distortion, Platform};
use boxlayer::sim::{
    CameraRenderConfig, SimConfig, Simulator, default_sequence_name, ovc_rgb_calibration, render_camera,
    render_camera_at, write_m3ed_sequence,
};
use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{M3edConfig, M3edSource, RGB_CAMERA};
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion};

/// The FRONT camera of `../shared/fixtures/waymo/frame_with_cameras.tfrecord`, at half size
/// (intrinsics halved) so debug test runs stay quick.
fn waymo_front_half() -> CameraCalibration {
    CameraCalibration {
        width: 960,
        height: 640,
        fx: 2044.5083584358413 / 2.0,
        fy: 2044.5083584358413 / 2.0,
        cx: 949.5746451352071 / 2.0,
        cy: 633.2422462156501 / 2.0,
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

fn simulator(platform: Platform, seed: u64, frames: usize) -> Simulator {
    let config = SimConfig {
        frames,
        ..SimConfig::default()
    };
    Simulator::new(config, platform, seed).unwrap()
}

/// The renderer's sky is blue-dominant; ground materials and objects are not (except a rare
/// blue car or jacket).
fn is_sky(p: [u8; 3]) -> bool {
    i32::from(p[2]) > i32::from(p[0]) + 20 && p[2] > 150
}

#[test]
fn renders_are_deterministic_and_the_calibration_size() {
    let sim = simulator(Platform::Vehicle, 4, 3);
    let sweep = sim.sweep(1).unwrap();
    let calibration = waymo_front_half();
    let a = render_camera(&sim, &sweep, &calibration).unwrap();
    assert_eq!((a.width(), a.height()), (960, 640));
    let again = render_camera(&sim, &sweep, &calibration).unwrap();
    assert!(a.as_raw() == again.as_raw(), "two renders differ");
    // A fresh simulator from the same seed, asked for another sweep first, gives the same image.
    let fresh = simulator(Platform::Vehicle, 4, 3);
    fresh.sweep(2).unwrap();
    let b = render_camera(&fresh, &fresh.sweep(1).unwrap(), &calibration).unwrap();
    assert!(a.as_raw() == b.as_raw(), "a fresh simulator renders differently");
    // Another seed is another scene.
    let other = simulator(Platform::Vehicle, 5, 3);
    let c = render_camera(&other, &other.sweep(1).unwrap(), &calibration).unwrap();
    assert!(a.as_raw() != c.as_raw());
}

#[test]
fn vehicle_front_camera_sees_sky_above_the_horizon_and_road_below() {
    let sim = simulator(Platform::Vehicle, 2, 3);
    let sweep = sim.sweep(0).unwrap();
    let image = render_camera(&sim, &sweep, &waymo_front_half()).unwrap();
    // The camera looks level from 2.1 m: the horizon runs near row cy ≈ 317. The road right in
    // front of the car fills the bottom rows; above the horizon sky dominates (buildings and
    // trees hide some of it).
    let sky_share = |rows: std::ops::Range<u32>| {
        let (mut sky, mut all) = (0, 0);
        for y in rows {
            for x in (0..960).step_by(3) {
                all += 1;
                sky += usize::from(is_sky(image.get_pixel(x, y).0));
            }
        }
        sky as f64 / all as f64
    };
    let (top, bottom) = (sky_share(0..200), sky_share(400..640));
    assert!(top > 0.3, "sky above the horizon: {top}");
    assert_eq!(bottom, 0.0, "sky below the horizon");
    // Many distinct colours: materials, palettes, shading and texture.
    let colours: std::collections::BTreeSet<[u8; 3]> = image.pixels().map(|p| p.0).collect();
    assert!(colours.len() > 1000, "{} colours", colours.len());
}

#[test]
fn unusable_calibrations_are_errors_naming_the_field() {
    let sim = simulator(Platform::Quadruped, 1, 1);
    let sweep = sim.sweep(0).unwrap();
    let mut c = ovc_rgb_calibration();
    c.height = 0;
    let e = render_camera(&sim, &sweep, &c).unwrap_err();
    assert!(e.to_string().contains("camera.width"), "{e}");
    let mut c = ovc_rgb_calibration();
    c.fy = -1.0;
    let e = render_camera(&sim, &sweep, &c).unwrap_err();
    assert!(e.to_string().contains("camera.fx"), "{e}");
}

#[test]
fn m3ed_rgb_reads_back_through_the_source() {
    const SWEEPS: usize = 2;
    let sim = simulator(Platform::Drone, 8, SWEEPS);
    let dir = tempfile::tempdir().unwrap();
    let name = default_sequence_name(Platform::Drone, 8).unwrap();
    let summary = write_m3ed_sequence(&sim, SWEEPS, dir.path(), &name).unwrap();
    // 25 Hz over two 100 ms sweeps: images at 0, 40, 80, 120 and 160 ms.
    assert_eq!(summary.images, 5);

    let source = M3edSource::open(&summary.data_path, M3edConfig::default()).unwrap();
    let expected = ovc_rgb_calibration();
    let info = source.summary().unwrap();
    let (count, first, last) = info.images.unwrap();
    assert_eq!(
        info.rgb_calibration.as_ref().map(|c| (c.width, c.height)),
        Some((1280, 800))
    );
    let start = sim.config().start_time_micros;
    assert_eq!((count, first, last), (5, start, start + 160_000));
    for index in 0..SWEEPS {
        let frame = source.frame(index).unwrap();
        assert_eq!(frame.cameras.len(), 1, "frame {index}");
        let view = &frame.cameras[0];
        assert_eq!(view.name, RGB_CAMERA);
        // The OVC looks along the sensor's x axis, which the OS1 scans halfway through its
        // sweep: the image nearest 50 ms (→ 40 ms) and 150 ms (→ 160 ms), not the sweep start.
        assert_eq!(view.timestamp_micros, start + [40_000, 160_000][index], "frame {index}");
        assert_eq!((view.calibration.width, view.calibration.height), (1280, 800));
        assert_eq!(view.calibration.axes, CameraAxes::OpenCv);
        assert_eq!(view.calibration.distortion, expected.distortion);
        assert_eq!(
            (
                view.calibration.fx,
                view.calibration.fy,
                view.calibration.cx,
                view.calibration.cy
            ),
            (expected.fx, expected.fy, expected.cx, expected.cy)
        );
        let pose_gap = view.calibration.sensor_from_camera.inverse() * expected.sensor_from_camera;
        assert!(
            pose_gap.translation.vector.norm() < 1e-9 && pose_gap.rotation.angle() < 1e-9,
            "{pose_gap:?}"
        );
        // The pixels are the render at the image's time, byte for byte, in RGB order.
        let image = view.image().unwrap();
        let rendered =
            render_camera_at(&sim, view.timestamp_micros, &expected, &CameraRenderConfig::default()).unwrap();
        assert_eq!((image.width(), image.height()), (1280, 800));
        assert!(image.as_raw() == rendered.as_raw(), "frame {index}: pixels differ");
        // Channel order: the drone looks down over a parking lot, so the image holds grey
        // asphalt and green grass or foliage, which only stay green if BGR was swapped back.
        let green = image
            .pixels()
            .filter(|p| p.0[1] > p.0[0] + 20 && p.0[1] > p.0[2] + 20)
            .count();
        let blue = image
            .pixels()
            .filter(|p| p.0[2] > p.0[1] + 20 && p.0[2] > p.0[0] + 40)
            .count();
        assert!(green > 0 || blue > 0, "frame {index}: no coloured pixels at all");
    }
}
