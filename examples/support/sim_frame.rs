//! The normalized frame a platform profile gives a simulated sweep, from the simulator's true
//! gravity and sensor height: what a detector sees when its profile says
//! `detector.input_frame = "normalized"` (up to the estimator's error). Shared by the detector
//! examples through `#[path]`.

use anyhow::Context;
use boxlayer::normalize::{Profile, altitude_offset, normalized_from_sensor};
use boxlayer::sim::SimSweep;
use boxlayer::{Platform, PointCloud};
use nalgebra::{Isometry3, Point3, Unit};

/// The shipped profile whose normalized frame a platform's detectors see.
pub fn default_profile(platform: Platform) -> anyhow::Result<&'static str> {
    Ok(match platform {
        Platform::Vehicle => "waymo_vehicle",
        Platform::Drone => "m3ed_drone",
        Platform::Quadruped => "m3ed_quadruped",
        Platform::Other => anyhow::bail!("--platform other: the simulator has no such platform"),
    })
}

/// The normalized frame from the sensor frame of one sweep, from the simulator's truth.
pub fn true_normalization(sweep: &SimSweep, profile: &Profile) -> anyhow::Result<Isometry3<f64>> {
    let up = Unit::new_normalize(-sweep.gravity_in_sensor);
    let pose_z = sweep.world_from_sensor.translation.vector.z;
    let offset = altitude_offset(
        &profile.altitude,
        Some(pose_z),
        Some(sweep.sensor_height_above_ground_m),
    )
    .context("the altitude rule gave no offset")?;
    Ok(normalized_from_sensor(&up, offset))
}

/// The cloud moved by `to_frame` (intensity kept).
pub fn transformed(cloud: &PointCloud, to_frame: &Isometry3<f64>) -> anyhow::Result<PointCloud> {
    let n = cloud.len();
    let (mut x, mut y, mut z) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let p = to_frame
            * Point3::new(
                f64::from(cloud.x()[i]),
                f64::from(cloud.y()[i]),
                f64::from(cloud.z()[i]),
            );
        x.push(p.x as f32);
        y.push(p.y as f32);
        z.push(p.z as f32);
    }
    Ok(PointCloud::from_columns(x, y, z, cloud.intensity().to_vec())?)
}
