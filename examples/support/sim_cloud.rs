//! The point cloud a source reader returns for a simulated sweep, built in memory: the Waymo
//! reader's TOP points (vehicle frame, raw range-image intensity) or the M3ED reader's OS1 points
//! (sensor frame, intensity = REFLECTIVITY as f32), without writing and re-reading the log.
//! Shared by the detector examples through `#[path]`.

use boxlayer::PointCloud;
use boxlayer::sim::{LidarSweep, SimSweep, Simulator};

/// The sweep's returns with the intensity its source reader gives them, in the reader's order
/// for TOP (range-image rows, then columns) and beam-major for the OS1.
pub fn sim_cloud(sim: &Simulator, sweep: &SimSweep) -> anyhow::Result<PointCloud> {
    let points = sim.sweep_points(sweep);
    // `sweep_points` walks the same grid in the same order and skips the same empty pixels.
    let intensity: Vec<f32> = match &sweep.lidar {
        LidarSweep::Top(image) => image
            .range_m
            .iter()
            .zip(&image.intensity)
            .filter(|(r, _)| **r > 0.0)
            .map(|(_, i)| *i)
            .collect(),
        LidarSweep::Ouster(scan) => scan
            .range_mm
            .iter()
            .zip(&scan.reflectivity)
            .filter(|(r, _)| **r != 0)
            .map(|(_, i)| f32::from(*i))
            .collect(),
    };
    anyhow::ensure!(
        intensity.len() == points.len(),
        "sweep {}: {} points but {} intensities",
        sweep.index,
        points.len(),
        intensity.len()
    );
    let x = points.iter().map(|p| p.position.x as f32).collect();
    let y = points.iter().map(|p| p.position.y as f32).collect();
    let z = points.iter().map(|p| p.position.z as f32).collect();
    Ok(PointCloud::from_columns(x, y, z, intensity)?)
}
