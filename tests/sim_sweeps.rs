//! Simulated sweeps: determinism, ground truth against the returns, sensor geometry against
//! the Waymo and Ouster reader formulas, platform motion and IMU.

use approx::assert_abs_diff_eq;
use boxlayer::Platform;
use boxlayer::geometry::pose::euler_from_isometry;
use boxlayer::sim::{
    GRAVITY_MPS2, LidarCalibration, LidarSweep, SimConfig, SimError, SimSweep, Simulator, TOP_COLUMNS, TOP_ROWS,
    TerrainKind,
};
use nalgebra::{Matrix4, Point3, Vector4};

fn config(frames: usize) -> SimConfig {
    SimConfig {
        frames,
        ..SimConfig::default()
    }
}

fn same_imu(a: &SimSweep, b: &SimSweep) -> bool {
    a.imu.len() == b.imu.len()
        && a.imu.iter().zip(&b.imu).all(|(x, y)| {
            x.timestamp_micros == y.timestamp_micros
                && x.accel_mps2
                    .iter()
                    .zip(y.accel_mps2.iter())
                    .all(|(p, q)| p.to_bits() == q.to_bits())
                && x.gyro_radps
                    .iter()
                    .zip(y.gyro_radps.iter())
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}

#[test]
fn same_seed_gives_identical_sweeps_and_another_seed_differs() {
    for platform in [Platform::Drone, Platform::Vehicle] {
        let a = Simulator::new(config(10), platform, 11).unwrap();
        let b = Simulator::new(config(10), platform, 11).unwrap();
        // Random access: b computes another sweep first.
        let _ = b.sweep(7).unwrap();
        let (sa, sb) = (a.sweep(3).unwrap(), b.sweep(3).unwrap());
        assert_eq!(sa.lidar, sb.lidar, "{platform}");
        assert_eq!(sa.objects, sb.objects, "{platform}");
        assert_eq!(sa.world_from_sensor, sb.world_from_sensor, "{platform}");
        assert!(same_imu(&sa, &sb), "{platform}");
        let c = Simulator::new(config(10), platform, 12).unwrap();
        let sc = c.sweep(3).unwrap();
        assert_ne!(sa.lidar, sc.lidar, "{platform}: another seed must change the sweep");
    }
}

#[test]
fn sweep_index_past_the_end_is_an_error() {
    let sim = Simulator::new(config(3), Platform::Quadruped, 1).unwrap();
    let e = sim.sweep(3).unwrap_err();
    assert_eq!(e, SimError::SweepOutOfRange { index: 3, len: 3 });
    assert!(e.to_string().contains("sweep 3 out of range"), "{e}");
    let e = Simulator::new(config(3), Platform::Other, 1).unwrap_err();
    assert!(e.to_string().contains("platform `other`"), "{e}");
}

#[test]
fn config_reads_from_toml_and_rejects_bad_values() {
    let c: SimConfig =
        toml::from_str("frames = 7\n[drone]\nmin_altitude_m = 8.0\n[terrain]\nkind = \"sloped\"").unwrap();
    assert_eq!(c.frames, 7);
    assert_eq!(c.drone.min_altitude_m, 8.0);
    assert_eq!(c.drone.max_altitude_m, SimConfig::default().drone.max_altitude_m);
    assert_eq!(c.terrain.kind, TerrainKind::Sloped);
    assert!(toml::from_str::<SimConfig>("frames = 1\nspeed = 3").is_err());
    let mut bad = config(2);
    bad.drone.min_altitude_m = 50.0;
    let e = Simulator::new(bad, Platform::Drone, 1).unwrap_err();
    assert!(e.to_string().contains("drone.min_altitude_m"), "{e}");
}

/// Noise-free, no rolling shutter: every return must lie on its object's surface, inside the box.
fn exact_config(frames: usize) -> SimConfig {
    let mut c = config(frames);
    c.rolling_shutter = false;
    c.lidar.range_noise_m = 0.0;
    c
}

fn inside(b: &boxlayer::Box3, p: &Point3<f64>, eps: f64) -> bool {
    let local = b.parent_from_box().inverse() * p;
    let h = b.half_extents();
    local.x.abs() <= h.x + eps && local.y.abs() <= h.y + eps && local.z.abs() <= h.z + eps
}

#[test]
fn ground_truth_boxes_hold_their_hits_and_count_them() {
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        let sim = Simulator::new(exact_config(30), platform, 21).unwrap();
        let mut checked = 0;
        for i in [0, 29] {
            let sweep = sim.sweep(i).unwrap();
            let points = sim.sweep_points(&sweep);
            for object in &sweep.objects {
                let mine: Vec<_> = points.iter().filter(|p| p.track_id == object.track_id).collect();
                assert_eq!(
                    mine.len() as u32,
                    object.num_lidar_points,
                    "{platform} track {}",
                    object.track_id
                );
                for p in &mine {
                    // Ouster ranges are whole millimetres: allow 1 cm.
                    assert!(
                        inside(&object.box_in_sensor, &p.position, 0.01),
                        "{platform} sweep {i}: point {:?} outside box {:?} of track {}",
                        p.position,
                        object.box_in_sensor,
                        object.track_id
                    );
                }
                checked += mine.len();
                // The world box is the sensor box moved by the sensor pose.
                let moved = object.box_in_sensor.transformed(&sweep.world_from_sensor);
                assert_abs_diff_eq!(moved.center(), object.box_in_world.center(), epsilon = 1e-6);
            }
            let tagged = points.iter().filter(|p| p.track_id != 0).count();
            let counted: u32 = sweep.objects.iter().map(|o| o.num_lidar_points).sum();
            assert_eq!(
                tagged as u32, counted,
                "{platform}: every tagged return belongs to a listed object"
            );
        }
        assert!(checked > 100, "{platform}: only {checked} object points checked");
    }
}

#[test]
fn object_boxes_have_the_sizes_of_their_labels() {
    // The labelled box of each shape falls in its label's size range, and class and label agree:
    // the tight box, except a person's, which is drawn as the datasets' annotators draw it
    // (0.7–1.1 m long, 0.7–1.0 m wide: Waymo's real pedestrians are 0.82–1.35 × 0.72–1.03 m on
    // the fixture frame, 0.91 × 0.86 m on average).
    let sim = Simulator::new(config(5), Platform::Vehicle, 4).unwrap();
    let sweep = sim.sweep(2).unwrap();
    for o in &sweep.objects {
        assert_eq!(o.label.class(), o.class);
        let b = &o.box_in_sensor;
        let (lo, hi) = match o.label.as_str() {
            // Vehicles with their side mirrors, as the datasets label them.
            "car" => ((4.0, 1.95, 1.3), (5.0, 2.2, 1.7)),
            "van" => ((4.8, 2.15, 1.9), (5.7, 2.45, 2.5)),
            "bus" => ((10.0, 2.9, 2.9), (13.0, 3.1, 3.4)),
            "truck" => ((6.4, 2.7, 2.9), (9.2, 3.0, 3.7)),
            "pedestrian" => ((0.7, 0.7, 1.5), (1.1, 1.0, 2.0)),
            _ => ((1.3, 0.4, 1.5), (1.9, 0.8, 1.9)),
        };
        assert!(
            (lo.0..=hi.0).contains(&b.l) && (lo.1..=hi.1).contains(&b.w) && (lo.2..=hi.2).contains(&b.h),
            "{} box {:?}",
            o.label.as_str(),
            b
        );
    }
}

#[test]
fn top_pixels_follow_the_waymo_range_image_conversion() {
    let sim = Simulator::new(config(2), Platform::Vehicle, 2).unwrap();
    let LidarCalibration::Top(calib) = sim.calibration() else {
        panic!("vehicle has a TOP lidar")
    };
    // Inclinations ascending inside [min, max]; row 0 is the highest.
    assert_eq!(calib.beam_inclinations_rad.len(), TOP_ROWS);
    assert!(calib.beam_inclinations_rad.windows(2).all(|w| w[0] < w[1]));
    assert!(calib.beam_inclinations_rad[0] >= calib.inclination_min_rad);
    assert!(calib.beam_inclinations_rad[TOP_ROWS - 1] <= calib.inclination_max_rad);
    assert_eq!(calib.row_inclination(0), calib.beam_inclinations_rad[TOP_ROWS - 1]);
    // Non-uniform: the top rows are closer together than the bottom rows.
    let top_gap = calib.row_inclination(0) - calib.row_inclination(1);
    let bottom_gap = calib.row_inclination(TOP_ROWS - 2) - calib.row_inclination(TOP_ROWS - 1);
    assert!(top_gap < bottom_gap, "top {top_gap} bottom {bottom_gap}");
    assert_abs_diff_eq!(calib.vehicle_from_lidar.translation.vector.z, 2.0, epsilon = 1e-12);
    // waymo-format.md §2 steps 3–5, written out independently.
    let e = calib.vehicle_from_lidar.to_homogeneous();
    let az_correction = e[(1, 0)].atan2(e[(0, 0)]);
    for (row, col, r) in [
        (0usize, 0usize, 10.0),
        (63, 1325, 30.0),
        (20, 2649, 5.5),
        (40, 662, 70.0),
    ] {
        let ratio = (TOP_COLUMNS as f64 - col as f64 - 0.5) / TOP_COLUMNS as f64;
        let az = (2.0 * ratio - 1.0) * std::f64::consts::PI - az_correction;
        let incl = calib.beam_inclinations_rad[TOP_ROWS - 1 - row];
        let p = Vector4::new(
            az.cos() * incl.cos() * r,
            az.sin() * incl.cos() * r,
            incl.sin() * r,
            1.0,
        );
        let v = e * p;
        assert_abs_diff_eq!(
            calib.point_in_vehicle(row, col, r),
            Point3::new(v.x, v.y, v.z),
            epsilon = 1e-9
        );
    }
    // Column W/2 looks straight ahead in the vehicle frame.
    let ahead = calib.vehicle_from_lidar.rotation * calib.direction_in_lidar(32, TOP_COLUMNS / 2);
    assert!(ahead.x > 0.99 * ahead.xy().norm() && ahead.y.abs() < 0.01);
    // Each column's per-pixel pose is the vehicle pose at that column's time.
    let sweep = sim.sweep(1).unwrap();
    let LidarSweep::Top(image) = &sweep.lidar else {
        panic!("TOP sweep")
    };
    let pose = image.pixel_pose(TOP_COLUMNS - 1);
    let t = image.column_world_from_vehicle[TOP_COLUMNS - 1].translation.vector;
    assert_eq!([pose[3], pose[4], pose[5]], [t.x, t.y, t.z]);
    // Rolling shutter: the car (9 m/s) moves ~0.9 m between the first and the last column.
    let first = image.column_world_from_vehicle[0].translation.vector;
    let moved = (t - first).norm();
    assert!((0.8..1.0).contains(&moved), "moved {moved} m during the sweep");
}

#[test]
fn ouster_pixels_follow_the_xyz_lookup_table() {
    let sim = Simulator::new(config(2), Platform::Drone, 2).unwrap();
    let LidarCalibration::Ouster(calib) = sim.calibration() else {
        panic!("drone has an OS1")
    };
    // m3ed-format.md A2 "XYZ per pixel", written out independently.
    let t = Matrix4::from_row_slice(&calib.lidar_to_sensor_transform);
    let n = calib.lidar_origin_to_beam_origin_mm;
    for (beam, col, range_mm) in [
        (0usize, 0usize, 5000u32),
        (63, 1024, 40_123),
        (17, 2047, 812),
        (32, 700, 99_999),
    ] {
        let theta_enc = 2.0 * std::f64::consts::PI - col as f64 * 2.0 * std::f64::consts::PI / 2048.0;
        let theta_az = -2.0 * std::f64::consts::PI * calib.beam_azimuth_angles_deg[beam] / 360.0;
        let phi = 2.0 * std::f64::consts::PI * calib.beam_altitude_angles_deg[beam] / 360.0;
        let r = range_mm as f64;
        let x = (r - n) * (theta_enc + theta_az).cos() * phi.cos() + n * theta_enc.cos();
        let y = (r - n) * (theta_enc + theta_az).sin() * phi.cos() + n * theta_enc.sin();
        let z = (r - n) * phi.sin();
        let s = t * Vector4::new(x, y, z, 1.0) * 0.001;
        let expected = Point3::new(s.x, s.y, s.z);
        assert_abs_diff_eq!(calib.point_in_sensor(beam, col, range_mm), expected, epsilon = 1e-9);
        // The ray the simulator casts passes through that point at distance r − n.
        let (origin, dir) = calib.beam_in_lidar(beam, col);
        let cast = sim.sensor_from_lidar() * (origin + dir * ((r - n) * 0.001));
        assert_abs_diff_eq!(cast, expected, epsilon = 1e-9);
    }
    // Per-column timestamps span the 100 ms sweep.
    let sweep = sim.sweep(1).unwrap();
    let LidarSweep::Ouster(scan) = &sweep.lidar else {
        panic!("OS1 sweep")
    };
    assert_eq!(scan.column_timestamp_ns[0], sweep.timestamp_micros * 1000);
    let last = scan.column_timestamp_ns[2047] - scan.column_timestamp_ns[0];
    assert!((99_900_000..100_000_000).contains(&last), "{last}");
    assert!(scan.range_mm.iter().all(|&r| r < 1 << 20));
}

#[test]
fn objects_get_sparser_with_range() {
    let sim = Simulator::new(config(40), Platform::Vehicle, 8).unwrap();
    let mut near = Vec::new();
    let mut mid = Vec::new();
    let mut far = Vec::new();
    for i in (0..40).step_by(10) {
        for o in sim.sweep(i).unwrap().objects.iter().filter(|o| o.num_lidar_points > 0) {
            let d = o.box_in_sensor.x.hypot(o.box_in_sensor.y);
            let bucket = if d < 20.0 {
                &mut near
            } else if d < 40.0 {
                &mut mid
            } else {
                &mut far
            };
            bucket.push(o.num_lidar_points as f64);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    assert!(!near.is_empty() && !mid.is_empty() && !far.is_empty());
    let (a, b, c) = (mean(&near), mean(&mid), mean(&far));
    assert!(a > b && b > c, "points per object near {a}, mid {b}, far {c}");
}

#[test]
fn drone_altitude_stays_inside_the_band() {
    let mut c = config(300);
    c.drone.min_altitude_m = 8.0;
    c.drone.max_altitude_m = 20.0;
    c.terrain.kind = TerrainKind::Rolling;
    let sim = Simulator::new(c.clone(), Platform::Drone, 5).unwrap();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for k in 0..3000 {
        let t = c.start_time_micros + k * 10_000;
        let p = sim.world_from_sensor_at(t).translation.vector;
        let agl = p.z - sim.ground_height(p.x, p.y);
        lo = lo.min(agl);
        hi = hi.max(agl);
    }
    assert!(lo >= 8.0 && hi <= 20.0, "altitude range {lo}..{hi}");
    assert!(hi - lo > 3.0, "the drone should change height: {lo}..{hi}");
    let sweep = sim.sweep(100).unwrap();
    assert!((8.0..=20.0).contains(&sweep.sensor_height_above_ground_m));
    // The mount pitches the sensor down: gravity has a forward (+x) component in the sensor frame.
    assert!(sweep.gravity_in_sensor.x > 0.3, "{:?}", sweep.gravity_in_sensor);
}

#[test]
fn quadruped_gait_rolls_and_pitches_by_the_configured_amplitude() {
    let mut c = config(100);
    c.terrain.kind = TerrainKind::Flat;
    c.quadruped.roll_amplitude_deg = 3.0;
    c.quadruped.pitch_amplitude_deg = 2.0;
    c.quadruped.gait_frequency_hz = 2.0;
    let sim = Simulator::new(c.clone(), Platform::Quadruped, 6).unwrap();
    let (mut max_roll, mut max_pitch) = (0.0f64, 0.0f64);
    let mut sign_changes = 0;
    let mut last_roll = 0.0f64;
    // Four seconds at 1 ms on a straight stretch of the first leg.
    for k in 0..4000 {
        let pose = sim.world_from_sensor_at(c.start_time_micros + k * 1000);
        let (_, pitch, roll) = euler_from_isometry(&pose);
        max_roll = max_roll.max(roll.abs());
        max_pitch = max_pitch.max(pitch.abs());
        if k > 0 && roll.signum() != last_roll.signum() {
            sign_changes += 1;
        }
        last_roll = roll;
        let h = pose.translation.vector.z;
        assert!((h - 0.6).abs() <= c.quadruped.bounce_m + 1e-9, "sensor height {h}");
    }
    assert_abs_diff_eq!(max_roll.to_degrees(), 3.0, epsilon = 0.05);
    assert_abs_diff_eq!(max_pitch.to_degrees(), 2.0, epsilon = 0.05);
    // 2 Hz over 4 s: 16 zero crossings of the roll.
    assert!((15..=17).contains(&sign_changes), "{sign_changes} roll sign changes");
}

#[test]
fn imu_at_rest_measures_gravity_upwards_with_gaps() {
    let mut c = config(20);
    c.terrain.kind = TerrainKind::Flat;
    c.quadruped.speed_mps = 0.0;
    c.imu.gap_probability = 0.1;
    let sim = Simulator::new(c.clone(), Platform::Quadruped, 3).unwrap();
    let samples = sim.imu_samples(c.start_time_micros, c.start_time_micros + 1_000_000);
    assert_eq!(samples.len(), 400, "400 Hz");
    assert!(
        samples
            .windows(2)
            .all(|w| w[1].timestamp_micros - w[0].timestamp_micros == 2500)
    );
    let finite: Vec<_> = samples.iter().filter(|s| s.accel_mps2.x.is_finite()).collect();
    let gaps = samples.len() - finite.len();
    assert!(gaps > 0 && gaps < 100, "{gaps} missing samples");
    let n = finite.len() as f64;
    let accel = finite.iter().map(|s| s.accel_mps2).sum::<nalgebra::Vector3<f64>>() / n;
    let gyro = finite.iter().map(|s| s.gyro_radps).sum::<nalgebra::Vector3<f64>>() / n;
    assert_abs_diff_eq!(accel, nalgebra::Vector3::new(0.0, 0.0, GRAVITY_MPS2), epsilon = 0.01);
    assert_abs_diff_eq!(gyro, nalgebra::Vector3::zeros(), epsilon = 0.001);
    // The sweep carries the samples of its own 100 ms.
    let sweep = sim.sweep(4).unwrap();
    assert_eq!(sweep.imu.len(), 40);
    assert!(
        sweep
            .imu
            .iter()
            .all(|s| (sweep.timestamp_micros..sweep.timestamp_micros + 100_000).contains(&s.timestamp_micros))
    );
}

#[test]
fn ground_truth_velocity_is_the_world_velocity_seen_from_the_sensor() {
    let sim = Simulator::new(config(3), Platform::Vehicle, 4).unwrap();
    let sweep = sim.sweep(2).unwrap();
    let sensor_from_world = sweep.world_from_sensor.rotation.inverse();
    let mut moving = 0;
    for object in &sweep.objects {
        let v = object.to_ground_truth_box().velocity_mps.unwrap();
        let expected = sensor_from_world * object.velocity_in_world;
        assert_abs_diff_eq!(v, expected, epsilon = 1e-9);
        if object.velocity_in_world.norm() > 0.5 {
            moving += 1;
        }
    }
    assert!(moving > 0, "the scene has moving actors");
}

#[test]
fn a_drone_that_takes_off_rests_on_a_clear_pad_tilted_with_the_slope_then_climbs_into_its_band() {
    let mut c = config(120);
    c.terrain.kind = TerrainKind::Sloped;
    c.terrain.slope_deg = 5.0;
    c.drone.min_altitude_m = 8.0;
    c.drone.max_altitude_m = 20.0;
    c.drone.takeoff_s = 6.0;
    c.drone.ground_wait_s = 2.0;
    c.drone.rest_sensor_height_m = 0.35;
    let sim = Simulator::new(c.clone(), Platform::Drone, 5).unwrap();
    let mount = nalgebra::UnitQuaternion::from_axis_angle(&nalgebra::Vector3::y_axis(), 40f64.to_radians());
    let at = |s: f64| sim.world_from_sensor_at(c.start_time_micros + (s * 1e6).round() as i64);
    let start = at(0.0).translation.vector;
    // Resting for 2 s: the sensor 0.35 m above the slope, not moving, the body's up 5° from
    // gravity (the terrain's normal).
    for k in 0..=20 {
        let pose = at(k as f64 * 0.1);
        let p = pose.translation.vector;
        assert_abs_diff_eq!(p.z - sim.ground_height(p.x, p.y), 0.35, epsilon = 1e-9);
        assert_abs_diff_eq!((p - start).norm(), 0.0, epsilon = 1e-9);
        let body_up = pose.rotation * mount.inverse() * nalgebra::Vector3::z();
        assert_abs_diff_eq!(body_up.angle(&nalgebra::Vector3::z()).to_degrees(), 5.0, epsilon = 0.05);
    }
    // At rest the accelerometer reads gravity alone, along the sensor's up.
    let samples = sim.imu_samples(c.start_time_micros + 200_000, c.start_time_micros + 1_800_000);
    let finite: Vec<_> = samples.iter().filter(|s| s.accel_mps2.x.is_finite()).collect();
    let mean = finite.iter().map(|s| s.accel_mps2).sum::<nalgebra::Vector3<f64>>() / finite.len() as f64;
    let up_in_sensor = at(1.0).rotation.inverse() * nalgebra::Vector3::z();
    assert_abs_diff_eq!(mean, up_in_sensor * GRAVITY_MPS2, epsilon = 0.01);
    // The pad is clear: the first sweep's returns within 3 m of the point under the sensor are
    // the ground's.
    let sweep = sim.sweep(0).unwrap();
    let mut near = 0;
    for q in sim.sweep_points(&sweep) {
        let w = sweep.world_from_sensor * q.position;
        if (w.coords.xy() - start.xy()).norm() < 3.0 {
            near += 1;
            assert!(
                (w.z - sim.ground_height(w.x, w.y)).abs() < 0.1,
                "a return above the pad: {w:?}"
            );
        }
    }
    assert!(near > 100, "the resting sensor sees the pad: {near} returns");
    // Climbing, then flying: height rises monotonically through the climb and stays in the band.
    let height = |s: f64| {
        let p = at(s).translation.vector;
        p.z - sim.ground_height(p.x, p.y)
    };
    assert!(
        height(3.0) > 0.35 && height(5.0) > height(3.0),
        "{} {}",
        height(3.0),
        height(5.0)
    );
    for k in 80..120 {
        let h = height(k as f64 * 0.1);
        assert!((8.0..=20.0).contains(&h), "flight height {h} at {k}");
    }
    // It leaves the pad along its route once airborne.
    assert!((at(11.0).translation.vector - start).xy().norm() > 5.0);
}
