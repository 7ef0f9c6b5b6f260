//! Writes a simulated car sequence as a Waymo Open Dataset v1 segment,
//! `segment-<name>_with_camera_labels.tfrecord`, through the TFRecord writer and the prost
//! messages of `sources::waymo`, plus the simulator's ground truth as `<name>_boxes_gt.jsonl`.
//!
//! Mapping (the v1 reader must get back exactly what the simulator cast; reference
//! `waymo-format.md`):
//! - `Frame.context`: the segment name, `Stats` (time of day, location, weather and the number of
//!   unique labelled objects per type in the segment, as the proto documents it), the TOP
//!   `LaserCalibration` (the simulator's ascending beam inclinations, min, max, extrinsic) and five
//!   `CameraCalibration`s modelled on the real ones in `frame_with_cameras.tfrecord`. The context is
//!   byte-identical in every frame, so the frames are encoded first and prefixed with it at the end.
//! - `timestamp_micros` = the sweep start; `pose` = the mid-sweep vehicle pose (the frame of the
//!   labels); TOP `ri_return1` = range, intensity, elongation and −1 (not in a no-label zone) per
//!   return, −1 in all four channels where there is none; `ri_return2` the same grid all −1 (the
//!   simulator casts one return per pulse); `range_image_pose_compressed` (return 1 only) = each
//!   column's vehicle pose as (roll, pitch, yaw, x, y, z).
//! - `laser_labels`: one per labelled object, the 7-dof box in the vehicle frame (width = field 4
//!   across the heading, length = field 5 along it, heading wrapped to [−π, π); the simulator's
//!   pitch and roll are dropped since Waymo labels are upright), id = track id, type, points hit,
//!   speed and acceleration in the vehicle frame. `projected_lidar_labels` project each label into
//!   each camera as Waymo does (axis-aligned hull, clamped to the image).
//! - `images`: each chosen camera rendered by a [`CameraRenderer`], JPEG-encoded at a fixed quality.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use image::RgbImage;
use nalgebra::{Isometry3, Translation3, UnitQuaternion, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::camera_render::render_camera;
use super::lidar::{TOP_COLUMNS, TOP_ROWS, TopCalibration};
use super::simulator::{LidarCalibration, LidarSweep, ObjectTruth, SimError, SimSweep, Simulator, TopRangeImage};
use super::write_m3ed::stats;
use super::write_truth::{TruthParquetPaths, TruthTables, TruthWriteError};
use crate::atomic_file::AtomicFile;
use crate::camera::project_box;
use crate::frame::{CameraCalibration, Platform};
use crate::geometry::pose::rotation_from_euler;
use crate::geometry::{Box3, wrap_angle};
use crate::sources::waymo::SegmentWriter;
use crate::sources::waymo::convert::{camera_calibration, label_type, transform_from_isometry};
use crate::sources::waymo::proto::{self, CameraName, LaserName};
use crate::sources::waymo::range_image::RangeImageData;

/// JPEG quality of the camera images unless the options say otherwise.
pub const DEFAULT_JPEG_QUALITY: u8 = 90;
/// Nominal exposure written as `CameraImage.shutter` (s); real frames show 2.5–3.9 ms.
pub const CAMERA_SHUTTER_S: f64 = 0.003;
/// What renders the camera images of [`write_waymo_segment`], for summaries.
pub const DEFAULT_CAMERA_IMAGES: &str = "rendered by sim::render_camera";

/// Errors writing a simulated sequence as a Waymo v1 segment.
#[derive(Debug, Error)]
pub enum WaymoWriteError {
    /// The simulator (or the camera renderer) refused a sweep.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The ground-truth Parquet files could not be written.
    #[error(transparent)]
    Truth(#[from] TruthWriteError),
    /// The platform carries no TOP LiDAR.
    #[error("platform `{0}`: a Waymo segment holds the car's TOP LiDAR; drones and quadrupeds are written as M3ED")]
    NotVehicle(Platform),
    /// The segment name cannot name a file.
    #[error("segment name `{0}`: must be non-empty and hold no path separator")]
    BadName(String),
    /// An option is out of range.
    #[error("waymo write options: field `{field}`: {reason}")]
    BadOption {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The TFRecord writer refused the file.
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
    /// A frame could not be built.
    #[error("{path}: frame {frame}: {detail}")]
    Frame {
        /// The segment file.
        path: PathBuf,
        /// 0-based frame index.
        frame: usize,
        /// What went wrong, naming the camera or field.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> WaymoWriteError + '_ {
    move |source| WaymoWriteError::Io {
        path: path.to_path_buf(),
        error: source,
    }
}

/// Renders one camera's view of a sweep as an image of the calibration's size; the
/// calibration's `sensor_from_camera` is the camera → vehicle extrinsic in its `axes`.
pub type CameraRenderer = dyn Fn(&Simulator, &SimSweep, &CameraCalibration) -> Result<RgbImage, SimError> + Sync;

/// What the Waymo writer puts in a segment besides the LiDAR and labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WaymoWriteOptions {
    /// Cameras whose images are written, by `CameraName` (`"FRONT"`, `"FRONT_LEFT"`,
    /// `"FRONT_RIGHT"`, `"SIDE_LEFT"`, `"SIDE_RIGHT"`). All five calibrations are written either
    /// way. Default: all five.
    pub cameras: Vec<CameraName>,
    /// JPEG quality of the camera images (1–100; default 90).
    pub jpeg_quality: u8,
}

impl Default for WaymoWriteOptions {
    fn default() -> Self {
        Self {
            cameras: CameraName::ALL.to_vec(),
            jpeg_quality: DEFAULT_JPEG_QUALITY,
        }
    }
}

/// What [`write_waymo_segment`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WaymoWriteSummary {
    /// `Frame.context.name`, the sequence name readers report.
    pub context_name: String,
    /// `segment-<name>_with_camera_labels.tfrecord`.
    pub segment_path: PathBuf,
    /// `<name>_boxes_gt.jsonl`.
    pub truth_path: PathBuf,
    /// `<name>_boxes_gt.parquet` and `<name>_frames_gt.parquet` (set when the segment is complete).
    pub truth_parquet: Option<TruthParquetPaths>,
    /// LiDAR returns per sweep.
    pub points_per_sweep: Vec<usize>,
    /// Labelled objects (laser labels written) per sweep.
    pub objects_per_sweep: Vec<usize>,
    /// Labelled objects with at least one return, per sweep.
    pub objects_hit_per_sweep: Vec<usize>,
    /// Size of each serialized `Frame` (bytes, without the 16 bytes of TFRecord framing).
    pub frame_bytes: Vec<u64>,
    /// Cameras with an image in every frame.
    pub cameras: Vec<CameraName>,
    /// JPEG quality used.
    pub jpeg_quality: u8,
    /// What rendered the camera images.
    pub camera_images: String,
    /// Size of the files written, together (bytes).
    pub bytes_written: u64,
}

impl WaymoWriteSummary {
    /// A one-screen text summary (what `boxlayer simulate` prints), `elapsed` the run time.
    pub fn display(&self, elapsed: std::time::Duration) -> String {
        let frame_kib: Vec<usize> = self
            .frame_bytes
            .iter()
            .map(|b| usize::try_from(b / 1024).unwrap_or(usize::MAX))
            .collect();
        let names: Vec<&str> = self.cameras.iter().map(|c| c.as_str()).collect();
        let mut out = String::new();
        out.push_str(&format!("segment        {}\n", self.context_name));
        out.push_str(&format!("frames         {}\n", self.points_per_sweep.len()));
        out.push_str(&format!(
            "points/sweep   {} (TOP, return 1)\n",
            stats(&self.points_per_sweep)
        ));
        out.push_str(&format!(
            "objects/sweep  {} (laser labels)\n",
            stats(&self.objects_per_sweep)
        ));
        out.push_str(&format!("  with points  {}\n", stats(&self.objects_hit_per_sweep)));
        out.push_str(&format!(
            "cameras        {} JPEG q{} per frame: {} ({})\n",
            self.cameras.len(),
            self.jpeg_quality,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
            self.camera_images
        ));
        out.push_str(&format!("KiB/frame      {}\n", stats(&frame_kib)));
        for path in [&self.segment_path, &self.truth_path] {
            out.push_str(&format!("wrote          {}\n", path.display()));
        }
        if let Some(parquet) = &self.truth_parquet {
            for path in [&parquet.boxes, &parquet.frames] {
                out.push_str(&format!("wrote          {}\n", path.display()));
            }
        }
        out.push_str(&format!(
            "bytes written  {} ({:.1} MiB)\n",
            self.bytes_written,
            self.bytes_written as f64 / (1024.0 * 1024.0)
        ));
        out.push_str(&format!("time           {:.2} s\n", elapsed.as_secs_f64()));
        out
    }
}

/// The default segment name: `sim_seed<seed>`.
pub fn default_segment_name(seed: u64) -> String {
    format!("sim_seed{seed}")
}

/// The file name Waymo gives a v1 segment: `segment-<name>_with_camera_labels.tfrecord`.
pub fn segment_file_name(name: &str) -> String {
    format!("segment-{name}_with_camera_labels.tfrecord")
}

/// One real camera of `frame_with_cameras.tfrecord`, rounded: the template of a simulated one.
struct CameraTemplate {
    name: CameraName,
    width: u32,
    height: u32,
    focal_px: f64,
    principal_px: (f64, f64),
    /// k1, k2, p1, p2 (k3 is 0 in real data).
    distortion: [f64; 4],
    /// Position in the vehicle frame (m); z is given relative to the TOP LiDAR.
    x: f64,
    y: f64,
    below_top_m: f64,
    /// Mounting angles (degrees, Waymo's `Rz(yaw)·Ry(pitch)·Rx(roll)`; pitch > 0 looks down).
    yaw_deg: f64,
    pitch_deg: f64,
    roll_deg: f64,
}

/// The five cameras of the real segment `1024360143612057520_3580_000_3600_000`: sizes,
/// intrinsics, positions and mounting angles rounded from its calibration.
const CAMERA_TEMPLATES: [CameraTemplate; 5] = [
    CameraTemplate {
        name: CameraName::Front,
        width: 1920,
        height: 1280,
        focal_px: 2044.5,
        principal_px: (949.6, 633.2),
        distortion: [0.0404, -0.3300, 0.00104, -0.00157],
        x: 1.539,
        y: -0.024,
        below_top_m: 0.069,
        yaw_deg: 0.16,
        pitch_deg: 0.11,
        roll_deg: -0.50,
    },
    CameraTemplate {
        name: CameraName::FrontLeft,
        width: 1920,
        height: 1280,
        focal_px: 2056.4,
        principal_px: (954.4, 646.0),
        distortion: [0.0331, -0.3301, 0.00324, 0.00132],
        x: 1.493,
        y: 0.091,
        below_top_m: 0.069,
        yaw_deg: 44.24,
        pitch_deg: 1.11,
        roll_deg: -0.17,
    },
    CameraTemplate {
        name: CameraName::FrontRight,
        width: 1920,
        height: 1280,
        focal_px: 2045.7,
        principal_px: (960.1, 646.2),
        distortion: [0.0333, -0.2960, 0.00168, -0.00159],
        x: 1.490,
        y: -0.094,
        below_top_m: 0.068,
        yaw_deg: -44.6,
        pitch_deg: 0.45,
        roll_deg: -0.54,
    },
    CameraTemplate {
        name: CameraName::SideLeft,
        width: 1920,
        height: 886,
        focal_px: 2053.5,
        principal_px: (967.9, 246.7),
        distortion: [0.0396, -0.3275, 0.00096, -0.00023],
        x: 1.432,
        y: 0.111,
        below_top_m: 0.069,
        yaw_deg: 89.24,
        pitch_deg: 1.43,
        roll_deg: -0.01,
    },
    CameraTemplate {
        name: CameraName::SideRight,
        width: 1920,
        height: 886,
        focal_px: 2064.4,
        principal_px: (961.9, 240.9),
        distortion: [0.0375, -0.3462, 0.00035, -0.00042],
        x: 1.428,
        y: -0.112,
        below_top_m: 0.068,
        yaw_deg: -90.09,
        pitch_deg: 0.04,
        roll_deg: 0.01,
    },
];

/// Seed stream of the camera calibration offsets (apart from the simulator's own streams).
const STREAM_CAMERA_CALIBRATION: u64 = 0x5741_594d_4f43_414d;

/// The five `CameraCalibration`s of a simulated car: the real templates with small per-seed
/// offsets (yaw ±0.3°, pitch ±0.5°, roll ±0.3°, focal length ±0.5 %, principal point ±5 px; the
/// two real cars in the fixtures differ by up to 1° in yaw, 1.7° in pitch, 0.5° in roll), the
/// cameras 7 cm below the TOP LiDAR as on the real car; rolling shutter GLOBAL_SHUTTER (5),
/// because each image is rendered at one instant.
pub fn camera_calibrations(sim: &Simulator) -> Vec<proto::CameraCalibration> {
    let top_z = match sim.calibration() {
        LidarCalibration::Top(c) => c.vehicle_from_lidar.translation.vector.z,
        LidarCalibration::Ouster(_) => sim.config().vehicle.lidar_height_m,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(sim.seed() ^ STREAM_CAMERA_CALIBRATION);
    CAMERA_TEMPLATES
        .iter()
        .map(|t| {
            let mut offset = |max: f64| max * rng.random_range(-1.0..1.0);
            let yaw = (t.yaw_deg + offset(0.3)).to_radians();
            let pitch = (t.pitch_deg + offset(0.5)).to_radians();
            let roll = (t.roll_deg + offset(0.3)).to_radians();
            let focal = t.focal_px * (1.0 + offset(0.005));
            let (cu, cv) = (t.principal_px.0 + offset(5.0), t.principal_px.1 + offset(5.0));
            let [k1, k2, p1, p2] = t.distortion;
            let vehicle_from_camera = Isometry3::from_parts(
                Translation3::new(t.x, t.y, top_z - t.below_top_m),
                UnitQuaternion::from_rotation_matrix(&rotation_from_euler(yaw, pitch, roll)),
            );
            proto::CameraCalibration {
                name: Some(t.name as i32),
                intrinsic: vec![focal, focal, cu, cv, k1, k2, p1, p2, 0.0],
                extrinsic: Some(transform_from_isometry(&vehicle_from_camera)),
                width: Some(t.width as i32),
                height: Some(t.height as i32),
                rolling_shutter_direction: Some(5),
            }
        })
        .collect()
}

/// The TOP `LaserCalibration` of the simulator's LiDAR.
pub fn laser_calibration(calib: &TopCalibration) -> proto::LaserCalibration {
    proto::LaserCalibration {
        name: Some(LaserName::Top as i32),
        beam_inclinations: calib.beam_inclinations_rad.clone(),
        beam_inclination_min: Some(calib.inclination_min_rad),
        beam_inclination_max: Some(calib.inclination_max_rad),
        extrinsic: Some(transform_from_isometry(&calib.vehicle_from_lidar)),
    }
}

/// The TOP range images of a sweep: return 1 `[64, 2650, 4]` (range, intensity, elongation, −1
/// = not in a no-label zone; −1 in all channels without a return), return 2 all −1, and the
/// per-pixel pose `[64, 2650, 6]` (roll, pitch, yaw, x, y, z) of each pixel's column.
pub fn top_range_images(image: &TopRangeImage) -> Result<[RangeImageData; 3], String> {
    let n = TOP_ROWS * TOP_COLUMNS;
    if [image.range_m.len(), image.intensity.len(), image.elongation.len()] != [n; 3]
        || image.column_world_from_vehicle.len() != TOP_COLUMNS
    {
        return Err(format!(
            "TOP sweep has {} pixels and {} column poses, expected {n} and {TOP_COLUMNS}",
            image.range_m.len(),
            image.column_world_from_vehicle.len()
        ));
    }
    let mut first = Vec::with_capacity(n * 4);
    for k in 0..n {
        let r = image.range_m[k];
        if r > 0.0 {
            first.extend_from_slice(&[r, image.intensity[k], image.elongation[k], -1.0]);
        } else {
            first.extend_from_slice(&[-1.0; 4]);
        }
    }
    let column_poses: Vec<[f32; 6]> = (0..TOP_COLUMNS)
        .map(|w| image.pixel_pose(w).map(|v| v as f32))
        .collect();
    let mut pose = Vec::with_capacity(n * 6);
    for _ in 0..TOP_ROWS {
        for p in &column_poses {
            pose.extend_from_slice(p);
        }
    }
    let grid = |channels: usize, data: Vec<f32>| RangeImageData {
        height: TOP_ROWS,
        width: TOP_COLUMNS,
        channels,
        data,
    };
    Ok([grid(4, first), grid(4, vec![-1.0; n * 4]), grid(6, pose)])
}

/// An object's laser label: the upright 7-dof box in the vehicle frame, id = track id, points
/// hit, speed (and `accel_in_vehicle` when known) in the vehicle frame.
pub fn laser_label(object: &ObjectTruth, accel_in_vehicle: Option<Vector3<f64>>) -> proto::Label {
    let b = upright_box(&object.box_in_sensor);
    let speed = object.to_ground_truth_box().velocity_mps;
    let points = i32::try_from(object.num_lidar_points).unwrap_or(i32::MAX);
    proto::Label {
        bbox: Some(proto::LabelBox {
            center_x: Some(b.x),
            center_y: Some(b.y),
            center_z: Some(b.z),
            width: Some(b.w),
            length: Some(b.l),
            height: Some(b.h),
            heading: Some(b.yaw),
        }),
        metadata: Some(proto::LabelMetadata {
            speed_x: speed.map(|v| v.x),
            speed_y: speed.map(|v| v.y),
            accel_x: accel_in_vehicle.map(|a| a.x),
            accel_y: accel_in_vehicle.map(|a| a.y),
            speed_z: speed.map(|v| v.z),
            accel_z: accel_in_vehicle.map(|a| a.z),
        }),
        r#type: Some(label_type(object.class)),
        id: Some(object.track_id.to_string()),
        num_lidar_points_in_box: Some(points),
        num_top_lidar_points_in_box: Some(points),
        ..Default::default()
    }
}

/// The box a Waymo label stores: centre, sizes and the heading wrapped to [−π, π), without
/// pitch and roll (Waymo's 3D labels are upright in the vehicle frame).
pub fn upright_box(b: &Box3) -> Box3 {
    Box3::new(b.x, b.y, b.z, b.l, b.w, b.h, wrap_angle(b.yaw))
}

/// The labels projected into one camera as Waymo's `projected_lidar_labels` hold them: the
/// axis-aligned hull of the box clamped to the image, `length` along image x, `width` along
/// image y, id `<label id>_<CAMERA>`.
pub fn projected_labels(
    camera: CameraName,
    calibration: &CameraCalibration,
    labels: &[proto::Label],
) -> proto::CameraLabels {
    let labels = labels
        .iter()
        .filter_map(|label| {
            let b = label.bbox.as_ref()?;
            let box3 = Box3::new(
                b.center_x?,
                b.center_y?,
                b.center_z?,
                b.length?,
                b.width?,
                b.height?,
                b.heading?,
            );
            let p = project_box(calibration, &box3)?;
            let center = p.center();
            Some(proto::Label {
                bbox: Some(proto::LabelBox {
                    center_x: Some(center.x),
                    center_y: Some(center.y),
                    length: Some(p.x_max - p.x_min),
                    width: Some(p.y_max - p.y_min),
                    ..Default::default()
                }),
                r#type: label.r#type,
                id: label.id.as_ref().map(|id| format!("{id}_{}", camera.as_str())),
                ..Default::default()
            })
        })
        .collect();
    proto::CameraLabels {
        name: Some(camera as i32),
        labels,
    }
}

/// The vehicle's global-frame velocity at `time_micros`, from its poses 50 ms either side.
fn vehicle_velocity(sim: &Simulator, time_micros: i64) -> proto::Velocity {
    let before = sim.world_from_sensor_at(time_micros - 50_000);
    let after = sim.world_from_sensor_at(time_micros + 50_000);
    let v = (after.translation.vector - before.translation.vector) / 0.1;
    let w = (after.rotation * before.rotation.inverse()).scaled_axis() / 0.1;
    proto::Velocity {
        v_x: Some(v.x as f32),
        v_y: Some(v.y as f32),
        v_z: Some(v.z as f32),
        w_x: Some(w.x),
        w_y: Some(w.y),
        w_z: Some(w.z),
    }
}

/// Encodes an image as JPEG at `quality`.
fn encode_jpeg(image: &RgbImage, quality: u8) -> Result<Vec<u8>, image::ImageError> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality).encode_image(image)?;
    Ok(out)
}

/// Ground-truth velocity of each labelled object of a sweep (world frame), by track id.
fn world_velocities(sweep: &SimSweep) -> BTreeMap<u32, Vector3<f64>> {
    sweep
        .objects
        .iter()
        .map(|o| (o.track_id, o.velocity_in_world))
        .collect()
}

/// Writes sweeps `0..frames` of a car simulator into `out_dir` as
/// `segment-<name>_with_camera_labels.tfrecord` and `<name>_boxes_gt.jsonl`, with every camera
/// rendered by [`render_camera`]. Same simulator, frames and name give identical bytes.
pub fn write_waymo_segment(
    sim: &Simulator,
    frames: usize,
    out_dir: &Path,
    name: &str,
) -> Result<WaymoWriteSummary, WaymoWriteError> {
    write_waymo_segment_with(
        sim,
        frames,
        out_dir,
        name,
        &WaymoWriteOptions::default(),
        &render_camera,
        DEFAULT_CAMERA_IMAGES,
    )
}

/// [`write_waymo_segment`] with the cameras and JPEG quality of `options` and images from
/// `render` (`render_name` says what it is in the summary).
pub fn write_waymo_segment_with(
    sim: &Simulator,
    frames: usize,
    out_dir: &Path,
    name: &str,
    options: &WaymoWriteOptions,
    render: &CameraRenderer,
    render_name: &str,
) -> Result<WaymoWriteSummary, WaymoWriteError> {
    let platform = sim.platform();
    let LidarCalibration::Top(top) = sim.calibration() else {
        return Err(WaymoWriteError::NotVehicle(platform));
    };
    if name.is_empty() || name.contains(['/', '\\']) {
        return Err(WaymoWriteError::BadName(name.to_string()));
    }
    if frames == 0 || frames > sim.len() {
        return Err(SimError::InvalidConfig {
            field: "frames",
            reason: format!("{frames} sweeps asked for, the simulator has 1..={}", sim.len()),
        }
        .into());
    }
    if !(1..=100).contains(&options.jpeg_quality) {
        return Err(WaymoWriteError::BadOption {
            field: "jpeg_quality",
            reason: format!("{} is not in 1..=100", options.jpeg_quality),
        });
    }
    let mut cameras = options.cameras.clone();
    cameras.sort();
    cameras.dedup();

    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let file_name = segment_file_name(name);
    let segment_path = out_dir.join(&file_name);
    let truth_path = out_dir.join(format!("{name}_boxes_gt.jsonl"));
    let frame_error = |frame: usize, detail: String| WaymoWriteError::Frame {
        path: segment_path.clone(),
        frame,
        detail,
    };

    let camera_protos = camera_calibrations(sim);
    let calibrations: Vec<(CameraName, CameraCalibration)> = camera_protos
        .iter()
        .zip(CAMERA_TEMPLATES.iter())
        .map(|(p, t)| camera_calibration(p).map(|c| (t.name, c)))
        .collect::<Result<_, _>>()
        .map_err(|detail| WaymoWriteError::BadOption {
            field: "cameras",
            reason: format!("calibration does not parse back: {detail}"),
        })?;
    let rendered: Vec<&(CameraName, CameraCalibration)> =
        calibrations.iter().filter(|(n, _)| cameras.contains(n)).collect();

    // Every frame goes in without its context, which needs the whole segment's object counts;
    // the segment writer prefixes each with it at the end (`sources::waymo::SegmentWriter`).
    let mut segment = SegmentWriter::create(&segment_path).map_err(io(&segment_path))?;
    // Under a temporary name until the segment is in place (issue 18: partial output).
    let mut truth = AtomicFile::create(&truth_path).map_err(io(&truth_path))?;
    let mut unique_objects: BTreeMap<i32, BTreeSet<u32>> = BTreeMap::new();
    let mut truth_tables = TruthTables::new(name, platform);
    let mut summary = WaymoWriteSummary {
        context_name: name.to_string(),
        segment_path: segment_path.clone(),
        truth_path: truth_path.clone(),
        truth_parquet: None,
        points_per_sweep: Vec::with_capacity(frames),
        objects_per_sweep: Vec::with_capacity(frames),
        objects_hit_per_sweep: Vec::with_capacity(frames),
        frame_bytes: Vec::with_capacity(frames),
        cameras: cameras.clone(),
        jpeg_quality: options.jpeg_quality,
        camera_images: render_name.to_string(),
        bytes_written: 0,
    };
    // Accelerations come from the neighbouring sweeps' velocities, so one sweep is cast ahead.
    let mut previous: Option<(i64, BTreeMap<u32, Vector3<f64>>)> = None;
    let mut next = Some(sim.sweep(0)?);
    for index in 0..frames {
        let sweep = match next.take() {
            Some(s) => s,
            None => sim.sweep(index)?,
        };
        let LidarSweep::Top(image) = &sweep.lidar else {
            return Err(WaymoWriteError::NotVehicle(platform));
        };

        // The next sweep is cast while this one's images are rendered and compressed.
        let (cast, (ri, images)) = rayon::join(
            || (index + 1 < frames).then(|| sim.sweep(index + 1)).transpose(),
            || {
                rayon::join(
                    || {
                        top_range_images(image).map(|[first, second, pose]| {
                            let ((first, second), pose) = rayon::join(
                                || rayon::join(|| first.compress(), || second.compress()),
                                || pose.compress(),
                            );
                            (first, second, pose)
                        })
                    },
                    || {
                        rendered
                            .par_iter()
                            .map(|(camera, calibration)| {
                                let pixels = render(sim, &sweep, calibration)?;
                                if pixels.dimensions() != (calibration.width, calibration.height) {
                                    return Err(frame_error(
                                        index,
                                        format!(
                                            "camera {}: rendered {}x{}, calibrated {}x{}",
                                            camera.as_str(),
                                            pixels.width(),
                                            pixels.height(),
                                            calibration.width,
                                            calibration.height
                                        ),
                                    ));
                                }
                                let jpeg = encode_jpeg(&pixels, options.jpeg_quality).map_err(|e| {
                                    frame_error(index, format!("camera {}: JPEG: {e}", camera.as_str()))
                                })?;
                                let pose_timestamp = sweep.reference_time_micros as f64 * 1e-6;
                                let trigger = pose_timestamp - 0.5 * CAMERA_SHUTTER_S;
                                Ok(proto::CameraImage {
                                    name: Some(*camera as i32),
                                    image: Some(jpeg),
                                    pose: Some(transform_from_isometry(&sweep.world_from_sensor)),
                                    velocity: Some(vehicle_velocity(sim, sweep.reference_time_micros)),
                                    pose_timestamp: Some(pose_timestamp),
                                    shutter: Some(CAMERA_SHUTTER_S),
                                    camera_trigger_time: Some(trigger),
                                    camera_readout_done_time: Some(trigger + CAMERA_SHUTTER_S),
                                })
                            })
                            .collect::<Vec<Result<proto::CameraImage, WaymoWriteError>>>()
                    },
                )
            },
        );
        next = cast?;
        let (first, second, pose) = ri.map_err(|detail| frame_error(index, detail))?;
        let images = images.into_iter().collect::<Result<Vec<_>, _>>()?;

        let velocities = world_velocities(&sweep);
        let following = next.as_ref().map(|s| (s.reference_time_micros, world_velocities(s)));
        let vehicle_from_world = sweep.world_from_sensor.rotation.inverse();
        let labels: Vec<proto::Label> = sweep
            .objects
            .iter()
            .map(|object| {
                let now = (sweep.reference_time_micros, &object.velocity_in_world);
                let before = previous
                    .as_ref()
                    .and_then(|(t, v)| v.get(&object.track_id).map(|v| (*t, v)));
                let after = following
                    .as_ref()
                    .and_then(|(t, v)| v.get(&object.track_id).map(|v| (*t, v)));
                let span = match (before, after) {
                    (Some(a), Some(b)) => Some((a, b)),
                    (Some(a), None) => Some((a, now)),
                    (None, Some(b)) => Some((now, b)),
                    (None, None) => None,
                };
                let accel =
                    span.map(|((t0, v0), (t1, v1))| vehicle_from_world * ((v1 - v0) / ((t1 - t0) as f64 * 1e-6)));
                laser_label(object, accel)
            })
            .collect();
        let projected = calibrations
            .iter()
            .map(|(camera, calibration)| projected_labels(*camera, calibration, &labels))
            .collect();
        for object in &sweep.objects {
            unique_objects
                .entry(label_type(object.class))
                .or_default()
                .insert(object.track_id);
            let text = super::truth_json_line(object, name, index, platform);
            writeln!(truth, "{text}").map_err(io(&truth_path))?;
        }
        truth_tables.push_sweep(index, &sweep);

        let frame = proto::Frame {
            context: None,
            timestamp_micros: Some(sweep.timestamp_micros),
            pose: Some(transform_from_isometry(&sweep.world_from_sensor)),
            images,
            lasers: vec![proto::Laser {
                name: Some(LaserName::Top as i32),
                ri_return1: Some(proto::RangeImage {
                    range_image_compressed: Some(first),
                    range_image_pose_compressed: Some(pose),
                    ..Default::default()
                }),
                ri_return2: Some(proto::RangeImage {
                    range_image_compressed: Some(second),
                    ..Default::default()
                }),
            }],
            laser_labels: labels,
            projected_lidar_labels: projected,
            ..Default::default()
        };
        segment.push_frame(&frame).map_err(io(&segment_path))?;

        summary
            .points_per_sweep
            .push(image.range_m.iter().filter(|&&r| r > 0.0).count());
        summary.objects_per_sweep.push(sweep.objects.len());
        summary
            .objects_hit_per_sweep
            .push(sweep.objects.iter().filter(|o| o.num_lidar_points > 0).count());
        previous = Some((sweep.reference_time_micros, velocities));
    }

    // The context, then every frame with it, one record each.
    let context = proto::Context {
        name: Some(name.to_string()),
        camera_calibrations: camera_protos,
        laser_calibrations: vec![laser_calibration(top)],
        stats: Some(proto::Stats {
            laser_object_counts: unique_objects
                .iter()
                .map(|(t, ids)| proto::ObjectCount {
                    r#type: Some(*t),
                    count: Some(i32::try_from(ids.len()).unwrap_or(i32::MAX)),
                })
                .collect(),
            time_of_day: Some("Day".into()),
            location: Some("location_sim".into()),
            weather: Some("sunny".into()),
            camera_object_counts: Vec::new(),
        }),
    };
    summary.frame_bytes = segment.finish(context).map_err(io(&segment_path))?;
    let parquet = truth_tables.write(out_dir)?;
    truth.commit().map_err(io(&truth_path))?;
    for path in [&segment_path, &truth_path, &parquet.boxes, &parquet.frames] {
        summary.bytes_written += std::fs::metadata(path).map_err(io(path))?.len();
    }
    summary.truth_parquet = Some(parquet);
    Ok(summary)
}

/// Simulates `frames` car sweeps from `seed` with `config` and writes them with
/// [`write_waymo_segment`] as segment `sim_seed<seed>` into `out_dir` (what `boxlayer simulate
/// --platform vehicle` runs).
pub fn simulate_waymo(
    config: super::SimConfig,
    frames: usize,
    seed: u64,
    out_dir: &Path,
) -> Result<WaymoWriteSummary, WaymoWriteError> {
    simulate_waymo_with(config, &WaymoWriteOptions::default(), frames, seed, out_dir)
}

/// [`simulate_waymo`] with the cameras and JPEG quality of `options`.
pub fn simulate_waymo_with(
    mut config: super::SimConfig,
    options: &WaymoWriteOptions,
    frames: usize,
    seed: u64,
    out_dir: &Path,
) -> Result<WaymoWriteSummary, WaymoWriteError> {
    config.frames = frames;
    let sim = Simulator::new(config, Platform::Vehicle, seed)?;
    write_waymo_segment_with(
        &sim,
        frames,
        out_dir,
        &default_segment_name(seed),
        options,
        &render_camera,
        DEFAULT_CAMERA_IMAGES,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::waymo::range_image::decompress_matrix;
    use prost::Message;

    #[test]
    fn context_prefix_plus_body_equals_the_whole_frame() {
        let context = proto::Context {
            name: Some("seg".into()),
            ..Default::default()
        };
        let body = proto::Frame {
            timestamp_micros: Some(42),
            laser_labels: vec![proto::Label {
                id: Some("7".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let whole = proto::Frame {
            context: Some(context.clone()),
            ..body.clone()
        };
        let mut joined = proto::Frame {
            context: Some(context),
            ..Default::default()
        }
        .encode_to_vec();
        joined.extend_from_slice(&body.encode_to_vec());
        assert_eq!(joined, whole.encode_to_vec());
    }

    #[test]
    fn range_images_mark_missing_returns_with_minus_one() {
        let n = TOP_ROWS * TOP_COLUMNS;
        let mut image = TopRangeImage {
            range_m: vec![0.0; n],
            intensity: vec![0.0; n],
            elongation: vec![0.0; n],
            track_id: vec![0; n],
            column_world_from_vehicle: vec![Isometry3::translation(1.0, 2.0, 3.0); TOP_COLUMNS],
        };
        // Row 1, column 5 holds a return.
        let k = TOP_COLUMNS + 5;
        image.range_m[k] = 12.5;
        image.intensity[k] = 0.25;
        image.elongation[k] = 0.125;
        image.column_world_from_vehicle[5] = Isometry3::new(Vector3::new(4.0, 5.0, 6.0), Vector3::z() * 0.5);
        let [first, second, pose] = top_range_images(&image).unwrap();
        let first = decompress_matrix(&first.compress(), 4).unwrap();
        assert_eq!((first.height, first.width), (64, 2650));
        assert_eq!(
            (0..4).map(|c| first.get(1, 5, c).unwrap()).collect::<Vec<_>>(),
            [12.5, 0.25, 0.125, -1.0]
        );
        assert_eq!(
            (0..4).map(|c| first.get(1, 6, c).unwrap()).collect::<Vec<_>>(),
            [-1.0; 4]
        );
        assert!(second.data.iter().all(|&v| v == -1.0));
        // Every row of column 5 carries its pose: roll 0, pitch 0, yaw 0.5, x 4, y 5, z 6.
        for row in [0, 63] {
            let p: Vec<f32> = (0..6).map(|c| pose.get(row, 5, c).unwrap()).collect();
            assert_eq!(p, [0.0, 0.0, 0.5, 4.0, 5.0, 6.0]);
        }
        assert_eq!(pose.get(0, 0, 3), Some(1.0));
        image.range_m.pop();
        assert!(top_range_images(&image).is_err());
    }

    #[test]
    fn labels_store_width_in_field_4_and_an_upright_wrapped_heading() {
        let object = ObjectTruth {
            track_id: 17,
            class: crate::frame::ObjectClass::Cyclist,
            label: super::super::FineLabel::Cyclist,
            box_in_sensor: Box3 {
                pitch: 0.02,
                roll: -0.01,
                ..Box3::new(10.0, -2.0, 0.9, 1.8, 0.6, 1.7, std::f64::consts::PI)
            },
            box_in_world: Box3::new(0.0, 0.0, 0.0, 1.8, 0.6, 1.7, 0.0),
            num_lidar_points: 250,
            velocity_in_world: Vector3::new(3.0, 0.0, 0.0),
        };
        let label = laser_label(&object, Some(Vector3::new(0.5, 0.0, 0.0)));
        let b = label.bbox.unwrap();
        assert_eq!((b.length, b.width, b.height), (Some(1.8), Some(0.6), Some(1.7)));
        assert_eq!(b.heading, Some(-std::f64::consts::PI));
        assert_eq!((label.r#type, label.id.as_deref()), (Some(4), Some("17")));
        assert_eq!(label.num_lidar_points_in_box, Some(250));
        let m = label.metadata.unwrap();
        assert_eq!((m.accel_x, m.accel_y, m.accel_z), (Some(0.5), Some(0.0), Some(0.0)));
        // Box heading π vs world heading 0: the vehicle frame is turned by π, so +x world is −x.
        let v = object.to_ground_truth_box().velocity_mps.unwrap();
        assert_eq!((m.speed_x, m.speed_y, m.speed_z), (Some(v.x), Some(v.y), Some(v.z)));
        assert!((v.x + 3.0).abs() < 1e-2, "{v:?}");
    }

    #[test]
    fn camera_templates_follow_the_real_layout() {
        let sim = Simulator::new(
            crate::sim::SimConfig {
                frames: 1,
                ..Default::default()
            },
            Platform::Vehicle,
            3,
        )
        .unwrap();
        let protos = camera_calibrations(&sim);
        assert_eq!(protos, camera_calibrations(&sim), "deterministic per seed");
        let names: Vec<i32> = protos.iter().map(|c| c.name.unwrap()).collect();
        assert_eq!(names, [1, 2, 3, 4, 5]);
        for (p, t) in protos.iter().zip(&CAMERA_TEMPLATES) {
            let c = camera_calibration(p).unwrap();
            assert_eq!((c.width, c.height), (t.width, t.height));
            assert!((c.fx / t.focal_px - 1.0).abs() <= 0.005 && c.fx == c.fy);
            // The optical axis (camera +x) points along the template yaw and pitch.
            let axis = c.sensor_from_camera.rotation * Vector3::x();
            let yaw = axis.y.atan2(axis.x).to_degrees();
            let pitch = (-axis.z).asin().to_degrees();
            assert!((yaw - t.yaw_deg).abs() <= 0.31, "{:?}: yaw {yaw}", t.name);
            assert!((pitch - t.pitch_deg).abs() <= 0.51, "{:?}: pitch {pitch}", t.name);
        }
    }
}
