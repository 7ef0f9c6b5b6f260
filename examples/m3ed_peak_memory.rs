//! Writes (once) a long M3ED-format sequence and reads every sweep back, so peak memory of the
//! reader can be measured with `/usr/bin/time -v`:
//!
//! `cargo run --release --example m3ed_peak_memory -- /tmp/m3ed-peak 2000 [lidar-only]`
//!
//! The file holds full OS1-64 2048×10 sweeps (a ground plane and a wall: smooth ranges that LZF
//! compresses well), one 1280×800 RGB image per sweep (unless `lidar-only`) and 400 Hz IMU. A
//! second run finds the file and only reads, so `/usr/bin/time -v` on it gives the reader's peak
//! memory and its CPU time per sweep.

use std::path::PathBuf;
use std::time::Instant;

use boxlayer::frame::{CameraAxes, CameraCalibration, Distortion};
use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{
    M3edConfig, M3edSource, M3edWriter, M3edWriterSetup, MetadataFlavour, OusterMetadata, PoseTimeType, XyzLut,
    write_pose_gt,
};
use image::RgbImage;
use nalgebra::{Isometry3, Vector3};

#[path = "../benches/support/plane_wall.rs"]
mod plane_wall;
use plane_wall::plane_wall_pixels;

fn generate(dir: &std::path::Path, sweeps: usize, with_images: bool) -> anyhow::Result<PathBuf> {
    let data = dir.join("falcon_peak_memory_data.h5");
    let metadata = OusterMetadata::os1_64_2048x10();
    let lut = XyzLut::new(&metadata);
    let calibration = CameraCalibration {
        width: 1280,
        height: 800,
        fx: 1100.0,
        fy: 1100.0,
        cx: 640.0,
        cy: 400.0,
        distortion: Distortion::RadTan {
            k1: -0.1,
            k2: 0.02,
            p1: 0.0,
            p2: 0.0,
            k3: 0.0,
        },
        axes: CameraAxes::OpenCv,
        sensor_from_camera: Isometry3::identity(),
    };
    let setup = M3edWriterSetup {
        metadata,
        metadata_flavour: MetadataFlavour::LegacyFlat,
        lidar_to_prophesee_left: Isometry3::identity(),
        rgb: with_images.then_some(calibration),
        imu_to_prophesee_left: Isometry3::identity(),
        first_frame_id: 0,
        version: "peak-memory".into(),
        raw_bag_name: "peak.bag".into(),
    };
    let mut writer = M3edWriter::create(&data, setup)?;
    let mut pose_times = Vec::with_capacity(sweeps);
    let mut poses = Vec::with_capacity(sweeps);
    for k in 0..sweeps {
        let start = 1_000_000 + k as i64 * 100_000;
        writer.write_sweep(
            start,
            start + 99_951,
            &plane_wall_pixels(&lut, -10.0, 20.0 + (k % 50) as f64 * 0.3),
        )?;
        if with_images {
            let shade = (k % 256) as u8;
            let image = RgbImage::from_fn(1280, 800, |x, y| image::Rgb([(x / 5) as u8, (y / 4) as u8, shade]));
            writer.write_image(start + 3_000, &image)?;
        }
        for j in 0..40 {
            let t = start + j * 2_500;
            writer.write_imu(t, [0.0, 0.0, 9.81], [0.0, 0.0, 0.01 * j as f64]);
        }
        pose_times.push(start + 99_951);
        poses.push(Isometry3::new(
            Vector3::new(k as f64 * 0.1, 0.0, 10.0),
            Vector3::zeros(),
        ));
        if k % 200 == 0 {
            eprintln!("wrote {k} sweeps");
        }
    }
    writer.finish()?;
    write_pose_gt(
        &dir.join("falcon_peak_memory_pose_gt.h5"),
        &pose_times,
        &poses,
        &Isometry3::identity(),
        PoseTimeType::Int64,
    )?;
    Ok(data)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "/tmp/m3ed-peak".into()));
    let sweeps: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let with_images = args.next().as_deref() != Some("lidar-only");
    std::fs::create_dir_all(&dir)?;
    let data = dir.join("falcon_peak_memory_data.h5");
    if !data.exists() {
        let started = Instant::now();
        generate(&dir, sweeps, with_images)?;
        eprintln!("generated {sweeps} sweeps in {:.1} s", started.elapsed().as_secs_f64());
        return Ok(());
    }
    let started = Instant::now();
    let source = M3edSource::open(&data, M3edConfig::default())?;
    let mut points = 0usize;
    let mut image_bytes = 0usize;
    for i in 0..source.len() {
        let frame = source.frame(i)?;
        points += frame.cloud.len();
        for view in &frame.cameras {
            image_bytes += view.image().map_err(anyhow::Error::msg)?.len();
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "read {} sweeps ({} points, {} image bytes) in {:.1} s: {:.1} sweeps/s",
        source.len(),
        points,
        image_bytes,
        secs,
        source.len() as f64 / secs
    );
    Ok(())
}
