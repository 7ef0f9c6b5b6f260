//! Core per-frame types: `Frame` (one sweep with its pose, IMU, cameras and ground truth),
//! `CameraView`, `Platform` and `ObjectClass`. Sources build them; stages read them.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use image::RgbImage;
use nalgebra::{Isometry3, Vector3};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cloud::PointCloud;
use crate::geometry::Box3;

/// Errors about frame contents.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FrameError {
    /// A camera image could not be decoded.
    #[error("camera `{camera}`: image decode failed: {reason}")]
    ImageDecode {
        /// Camera name.
        camera: String,
        /// The decoder's message.
        reason: String,
    },
    /// A name that is not one of the known platforms or classes.
    #[error("unknown {kind} `{value}` (expected one of: {expected})")]
    UnknownName {
        /// What was being parsed (`platform`, `class`).
        kind: &'static str,
        /// The text that was given.
        value: String,
        /// The accepted names.
        expected: &'static str,
    },
}

/// The frame of the points a detector is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectorFrame {
    /// The sensor frame, as recorded.
    #[default]
    Sensor,
    /// The normalized frame: gravity-aligned, altitude-offset (the frame's own estimate; boxes
    /// are brought back to the sensor frame).
    Normalized,
}

/// The kind of robot that carried the sensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// A car (Waymo Open Dataset).
    Vehicle,
    /// A drone (M3ED falcon).
    Drone,
    /// A quadruped robot (M3ED spot).
    Quadruped,
    /// Any other platform, normalized by its own profile.
    Other,
}

impl Platform {
    /// Every platform, in a fixed order.
    pub const ALL: [Platform; 4] = [Platform::Vehicle, Platform::Drone, Platform::Quadruped, Platform::Other];

    /// The lower-case name used in configs, paths and shards.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Vehicle => "vehicle",
            Platform::Drone => "drone",
            Platform::Quadruped => "quadruped",
            Platform::Other => "other",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Platform {
    type Err = FrameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Platform::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| FrameError::UnknownName {
                kind: "platform",
                value: s.to_string(),
                expected: "vehicle, drone, quadruped, other",
            })
    }
}

/// boxlayer's canonical object classes; every detector and source maps its labels onto these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectClass {
    /// Cars, vans, buses, trucks.
    Vehicle,
    /// People on foot.
    Pedestrian,
    /// People on bicycles (rider + bicycle in one box).
    Cyclist,
    /// Anything else a source or detector reports.
    Unknown,
}

impl ObjectClass {
    /// Every class, in a fixed order.
    pub const ALL: [ObjectClass; 4] = [
        ObjectClass::Vehicle,
        ObjectClass::Pedestrian,
        ObjectClass::Cyclist,
        ObjectClass::Unknown,
    ];

    /// The lower-case name used in configs and shards.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectClass::Vehicle => "vehicle",
            ObjectClass::Pedestrian => "pedestrian",
            ObjectClass::Cyclist => "cyclist",
            ObjectClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ObjectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ObjectClass {
    type Err = FrameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| FrameError::UnknownName {
                kind: "class",
                value: s.to_string(),
                expected: "vehicle, pedestrian, cyclist, unknown",
            })
    }
}

/// Lens distortion of a camera model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
pub enum Distortion {
    /// An ideal pinhole.
    None,
    /// Brown–Conrady radial-tangential (Waymo, M3ED `radtan`).
    RadTan {
        /// Radial k1.
        k1: f64,
        /// Radial k2.
        k2: f64,
        /// Tangential p1.
        p1: f64,
        /// Tangential p2.
        p2: f64,
        /// Radial k3.
        k3: f64,
    },
    /// Kannala–Brandt equidistant fisheye (M3ED `equidistant`).
    Equidistant {
        /// Coefficient of θ³.
        k1: f64,
        /// Coefficient of θ⁵.
        k2: f64,
        /// Coefficient of θ⁷.
        k3: f64,
        /// Coefficient of θ⁹.
        k4: f64,
    },
}

/// How a camera's own axes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CameraAxes {
    /// x forward (optical axis), y left, z up: Waymo's camera frame.
    Waymo,
    /// x right, y down, z forward (optical axis): OpenCV / Kalibr, M3ED.
    OpenCv,
}

/// A camera's intrinsics, distortion, image size and mounting.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraCalibration {
    /// Image width (px).
    pub width: u32,
    /// Image height (px).
    pub height: u32,
    /// Focal length x (px).
    pub fx: f64,
    /// Focal length y (px).
    pub fy: f64,
    /// Principal point x (px).
    pub cx: f64,
    /// Principal point y (px).
    pub cy: f64,
    /// Lens distortion.
    pub distortion: Distortion,
    /// The camera frame's axis layout.
    pub axes: CameraAxes,
    /// Camera pose in the LiDAR sensor frame of the frame it belongs to.
    pub sensor_from_camera: Isometry3<f64>,
}

/// Where a camera image's pixels come from.
#[derive(Debug, Clone)]
pub enum ImageData {
    /// Encoded bytes (JPEG, PNG) as stored in the log, decoded on first use.
    Encoded(Arc<[u8]>),
    /// Pixels already decoded (e.g. M3ED's raw BGR arrays, converted to RGB).
    Decoded(Arc<RgbImage>),
}

/// One camera's view of a frame: name, calibration, and an image decoded on first use.
#[derive(Debug)]
pub struct CameraView {
    /// The source's camera name (`FRONT`, `ovc_rgb`, …).
    pub name: String,
    /// Intrinsics, distortion and mounting.
    pub calibration: CameraCalibration,
    /// Capture time (µs).
    pub timestamp_micros: i64,
    data: ImageData,
    decoded: OnceLock<Result<Arc<RgbImage>, FrameError>>,
}

impl Clone for CameraView {
    fn clone(&self) -> Self {
        let decoded = OnceLock::new();
        if let Some(done) = self.decoded.get() {
            let _ = decoded.set(done.clone());
        }
        Self {
            name: self.name.clone(),
            calibration: self.calibration.clone(),
            timestamp_micros: self.timestamp_micros,
            data: self.data.clone(),
            decoded,
        }
    }
}

impl CameraView {
    /// A camera view over encoded or decoded pixels.
    pub fn new(
        name: impl Into<String>,
        calibration: CameraCalibration,
        timestamp_micros: i64,
        data: ImageData,
    ) -> Self {
        Self {
            name: name.into(),
            calibration,
            timestamp_micros,
            data,
            decoded: OnceLock::new(),
        }
    }

    /// The encoded bytes, when the image came encoded.
    pub fn encoded(&self) -> Option<&[u8]> {
        match &self.data {
            ImageData::Encoded(b) => Some(b),
            ImageData::Decoded(_) => None,
        }
    }

    /// The RGB image, decoded once on first call and cached.
    pub fn image(&self) -> Result<Arc<RgbImage>, FrameError> {
        self.decoded
            .get_or_init(|| match &self.data {
                ImageData::Decoded(img) => Ok(img.clone()),
                ImageData::Encoded(bytes) => image::load_from_memory(bytes)
                    .map(|img| Arc::new(img.to_rgb8()))
                    .map_err(|e| FrameError::ImageDecode {
                        camera: self.name.clone(),
                        reason: e.to_string(),
                    }),
            })
            .clone()
    }
}

/// One inertial sample, rotated into the sweep's sensor frame by the log's IMU extrinsic (M3ED:
/// `/ovc/imu/calib/T_to_prophesee_left` against the LiDAR's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImuSample {
    /// Sample time (µs).
    pub timestamp_micros: i64,
    /// Specific force (m/s²); at rest it points up, away from gravity.
    pub accel_mps2: Vector3<f64>,
    /// Angular rate (rad/s).
    pub gyro_radps: Vector3<f64>,
}

/// A ground-truth box a source carries (Waymo labels, simulator truth).
#[derive(Debug, Clone, PartialEq)]
pub struct GroundTruthBox {
    /// The box in the frame's sensor frame.
    pub box_in_sensor: Box3,
    /// Canonical class.
    pub class: ObjectClass,
    /// The source's own label name (`TYPE_VEHICLE`, `van`, …).
    pub source_label: String,
    /// Object id, stable across the sequence.
    pub track_id: String,
    /// LiDAR points inside the box, when the source records it.
    pub num_points: Option<u32>,
    /// Object velocity (m/s) in the sensor frame, when the source has one (Waymo: label metadata
    /// `speed_x`, `speed_y`, `speed_z` in the vehicle frame, z = 0 when absent).
    pub velocity_mps: Option<Vector3<f64>>,
}

/// One sweep with everything recorded around it.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The source's sequence name (Waymo context name, M3ED sequence name).
    pub sequence: String,
    /// 0-based position in the sequence.
    pub index: usize,
    /// Sweep time (µs).
    pub timestamp_micros: i64,
    /// The platform that carried the sensors.
    pub platform: Platform,
    /// Points in the sensor frame (x forward, y left, z up).
    pub cloud: PointCloud,
    /// Sensor pose in the world frame.
    pub world_from_sensor: Isometry3<f64>,
    /// IMU samples near the sweep time.
    pub imu: Vec<ImuSample>,
    /// Camera views.
    pub cameras: Vec<CameraView>,
    /// Ground-truth boxes, where the source has them.
    pub ground_truth: Vec<GroundTruthBox>,
    /// What the reader noticed about this frame and went on (`12 points with a non-finite x, y
    /// or z dropped`), one line each; empty for a clean frame.
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration() -> CameraCalibration {
        CameraCalibration {
            width: 4,
            height: 2,
            fx: 1.0,
            fy: 1.0,
            cx: 2.0,
            cy: 1.0,
            distortion: Distortion::None,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: Isometry3::identity(),
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for p in Platform::ALL {
            assert_eq!(p.as_str().parse::<Platform>().unwrap(), p);
        }
        for c in ObjectClass::ALL {
            assert_eq!(c.to_string().parse::<ObjectClass>().unwrap(), c);
        }
        let e = "boat".parse::<Platform>().unwrap_err();
        assert!(e.to_string().contains("unknown platform `boat`"), "{e}");
    }

    #[test]
    fn encoded_image_decodes_lazily_and_bad_bytes_name_the_camera() {
        let mut png = Vec::new();
        let img = RgbImage::from_fn(4, 2, |x, y| image::Rgb([x as u8 * 10, y as u8 * 50, 7]));
        img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let view = CameraView::new("FRONT", calibration(), 5, ImageData::Encoded(png.into()));
        let decoded = view.image().unwrap();
        assert_eq!(decoded.get_pixel(3, 1), &image::Rgb([30, 50, 7]));
        assert!(
            Arc::ptr_eq(&decoded, &view.clone().image().unwrap()),
            "cached image is shared"
        );

        let bad = CameraView::new(
            "SIDE_LEFT",
            calibration(),
            5,
            ImageData::Encoded(vec![1u8, 2, 3].into()),
        );
        let e = bad.image().unwrap_err();
        assert!(
            e.to_string().starts_with("camera `SIDE_LEFT`: image decode failed"),
            "{e}"
        );
    }
}
