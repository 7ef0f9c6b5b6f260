//! Hand-written `prost` messages for the parts of Waymo's `dataset.proto` and `label.proto`
//! (package `waymo.open_dataset`, proto2) that boxlayer reads and the simulator writes.
//!
//! Field numbers follow the reference (`waymo-format.md` §1.2). Enums are kept as plain `i32`
//! so that unknown values decode instead of failing; [`LaserName`] and [`CameraName`] name the
//! known ones. prost accepts packed and unpacked repeated scalars on decode whatever the
//! attribute says, and skips unknown fields (maps, keypoints, segmentation). On encode, the
//! attributes reproduce the real files: `repeated double` unpacked, matrix data packed.

#![allow(missing_docs)] // Field meanings are the proto's; each struct says which message it is.

/// `waymo.open_dataset.Frame`: one 0.1 s slice of a segment.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    /// Segment-level context (identical in every frame).
    #[prost(message, optional, tag = "1")]
    pub context: Option<Context>,
    /// Start time of the first TOP scan (µs).
    #[prost(int64, optional, tag = "2")]
    pub timestamp_micros: Option<i64>,
    /// Vehicle → global pose; laser labels live in this vehicle frame.
    #[prost(message, optional, tag = "3")]
    pub pose: Option<Transform>,
    /// Camera images.
    #[prost(message, repeated, tag = "4")]
    pub images: Vec<CameraImage>,
    /// Range images, one per lidar.
    #[prost(message, repeated, tag = "5")]
    pub lasers: Vec<Laser>,
    /// 3D boxes in the vehicle frame of `pose`.
    #[prost(message, repeated, tag = "6")]
    pub laser_labels: Vec<Label>,
    /// No-label zones in the global frame.
    #[prost(message, repeated, tag = "7")]
    pub no_label_zones: Vec<Polygon2dProto>,
    /// Native 2D camera labels.
    #[prost(message, repeated, tag = "8")]
    pub camera_labels: Vec<CameraLabels>,
    /// 3D labels projected into each camera (axis-aligned, clamped to the image).
    #[prost(message, repeated, tag = "9")]
    pub projected_lidar_labels: Vec<CameraLabels>,
    /// Offset to add to points to align them with the map.
    #[prost(message, optional, tag = "11")]
    pub map_pose_offset: Option<Vector3d>,
}

/// Only the cheap top-level fields of a `Frame`: what the record index reads from every record.
/// Decoding it skips images and range images without copying them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FrameSummary {
    /// The context's name only.
    #[prost(message, optional, tag = "1")]
    pub context: Option<ContextName>,
    /// Start time of the first TOP scan (µs).
    #[prost(int64, optional, tag = "2")]
    pub timestamp_micros: Option<i64>,
}

/// `Context` with only its name decoded.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContextName {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
}

/// `waymo.open_dataset.Context`: segment name, calibrations and statistics.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub camera_calibrations: Vec<CameraCalibration>,
    #[prost(message, repeated, tag = "3")]
    pub laser_calibrations: Vec<LaserCalibration>,
    #[prost(message, optional, tag = "4")]
    pub stats: Option<Stats>,
}

/// `Context.Stats`: object counts, time of day, location and weather.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Stats {
    #[prost(message, repeated, tag = "1")]
    pub laser_object_counts: Vec<ObjectCount>,
    #[prost(string, optional, tag = "2")]
    pub time_of_day: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub location: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub weather: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub camera_object_counts: Vec<ObjectCount>,
}

/// `Context.Stats.ObjectCount`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectCount {
    /// `Label.Type`.
    #[prost(int32, optional, tag = "1")]
    pub r#type: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub count: Option<i32>,
}

/// `waymo.open_dataset.CameraCalibration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CameraCalibration {
    /// `CameraName`.
    #[prost(int32, optional, tag = "1")]
    pub name: Option<i32>,
    /// `[f_u, f_v, c_u, c_v, k1, k2, p1, p2, k3]`.
    #[prost(double, repeated, packed = "false", tag = "2")]
    pub intrinsic: Vec<f64>,
    /// Camera → vehicle.
    #[prost(message, optional, tag = "3")]
    pub extrinsic: Option<Transform>,
    #[prost(int32, optional, tag = "4")]
    pub width: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub height: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub rolling_shutter_direction: Option<i32>,
}

/// `waymo.open_dataset.LaserCalibration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LaserCalibration {
    /// `LaserName`.
    #[prost(int32, optional, tag = "1")]
    pub name: Option<i32>,
    /// Beam inclinations (rad), ascending; empty means uniform between min and max.
    #[prost(double, repeated, packed = "false", tag = "2")]
    pub beam_inclinations: Vec<f64>,
    #[prost(double, optional, tag = "3")]
    pub beam_inclination_min: Option<f64>,
    #[prost(double, optional, tag = "4")]
    pub beam_inclination_max: Option<f64>,
    /// Lidar → vehicle.
    #[prost(message, optional, tag = "5")]
    pub extrinsic: Option<Transform>,
}

/// `waymo.open_dataset.Transform`: a row-major 4×4 matrix.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Transform {
    #[prost(double, repeated, packed = "false", tag = "1")]
    pub transform: Vec<f64>,
}

/// `waymo.open_dataset.Vector3d`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Vector3d {
    #[prost(double, optional, tag = "1")]
    pub x: Option<f64>,
    #[prost(double, optional, tag = "2")]
    pub y: Option<f64>,
    #[prost(double, optional, tag = "3")]
    pub z: Option<f64>,
}

/// `waymo.open_dataset.Velocity` (global frame).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Velocity {
    #[prost(float, optional, tag = "1")]
    pub v_x: Option<f32>,
    #[prost(float, optional, tag = "2")]
    pub v_y: Option<f32>,
    #[prost(float, optional, tag = "3")]
    pub v_z: Option<f32>,
    #[prost(double, optional, tag = "4")]
    pub w_x: Option<f64>,
    #[prost(double, optional, tag = "5")]
    pub w_y: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub w_z: Option<f64>,
}

/// `waymo.open_dataset.MatrixShape`: dimensions, outermost first.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MatrixShape {
    #[prost(int32, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i32>,
}

/// `waymo.open_dataset.MatrixFloat`: a row-major float tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MatrixFloat {
    #[prost(float, repeated, packed = "true", tag = "1")]
    pub data: Vec<f32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<MatrixShape>,
}

/// `waymo.open_dataset.MatrixInt32`: a row-major int32 tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MatrixInt32 {
    #[prost(int32, repeated, packed = "true", tag = "1")]
    pub data: Vec<i32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<MatrixShape>,
}

/// `waymo.open_dataset.RangeImage`: zlib-compressed serialized matrices.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeImage {
    /// Deprecated uncompressed range image; read only when the compressed one is absent.
    #[prost(message, optional, tag = "1")]
    pub range_image: Option<MatrixFloat>,
    /// zlib(MatrixFloat [H,W,4]): range, intensity, elongation, is-in-no-label-zone.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub range_image_compressed: Option<Vec<u8>>,
    /// zlib(MatrixInt32 [H,W,6]): two (camera, x, y) triples.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub camera_projection_compressed: Option<Vec<u8>>,
    /// zlib(MatrixFloat [H,W,6]): per-pixel vehicle → global (roll, pitch, yaw, x, y, z).
    #[prost(bytes = "vec", optional, tag = "4")]
    pub range_image_pose_compressed: Option<Vec<u8>>,
    /// zlib(MatrixFloat [H,W,4]): scene flow.
    #[prost(bytes = "vec", optional, tag = "5")]
    pub range_image_flow_compressed: Option<Vec<u8>>,
    /// zlib(MatrixInt32 [H,W,2]): instance id, semantic class.
    #[prost(bytes = "vec", optional, tag = "6")]
    pub segmentation_label_compressed: Option<Vec<u8>>,
}

/// `waymo.open_dataset.Laser`: one lidar's two returns.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Laser {
    /// `LaserName`.
    #[prost(int32, optional, tag = "1")]
    pub name: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub ri_return1: Option<RangeImage>,
    #[prost(message, optional, tag = "3")]
    pub ri_return2: Option<RangeImage>,
}

/// `waymo.open_dataset.CameraImage`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CameraImage {
    /// `CameraName`.
    #[prost(int32, optional, tag = "1")]
    pub name: Option<i32>,
    /// JPEG bytes.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub image: Option<Vec<u8>>,
    /// Vehicle → global at `pose_timestamp`.
    #[prost(message, optional, tag = "3")]
    pub pose: Option<Transform>,
    #[prost(message, optional, tag = "4")]
    pub velocity: Option<Velocity>,
    /// Seconds since the Unix epoch.
    #[prost(double, optional, tag = "5")]
    pub pose_timestamp: Option<f64>,
    /// Seconds.
    #[prost(double, optional, tag = "6")]
    pub shutter: Option<f64>,
    /// Seconds since the Unix epoch.
    #[prost(double, optional, tag = "7")]
    pub camera_trigger_time: Option<f64>,
    /// Seconds since the Unix epoch.
    #[prost(double, optional, tag = "8")]
    pub camera_readout_done_time: Option<f64>,
}

/// `waymo.open_dataset.CameraLabels`: one camera's 2D labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CameraLabels {
    /// `CameraName`.
    #[prost(int32, optional, tag = "1")]
    pub name: Option<i32>,
    #[prost(message, repeated, tag = "2")]
    pub labels: Vec<Label>,
}

/// `waymo.open_dataset.Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// The box (`box` in the proto).
    #[prost(message, optional, tag = "1")]
    pub bbox: Option<LabelBox>,
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<LabelMetadata>,
    /// `Label.Type`: 0 unknown, 1 vehicle, 2 pedestrian, 3 sign, 4 cyclist.
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
    /// Track id, unique in the dataset.
    #[prost(string, optional, tag = "4")]
    pub id: Option<String>,
    #[prost(int32, optional, tag = "5")]
    pub detection_difficulty_level: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub tracking_difficulty_level: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub num_lidar_points_in_box: Option<i32>,
    #[prost(string, optional, tag = "11")]
    pub most_visible_camera_name: Option<String>,
    #[prost(message, optional, tag = "12")]
    pub camera_synced_box: Option<LabelBox>,
    #[prost(int32, optional, tag = "13")]
    pub num_top_lidar_points_in_box: Option<i32>,
}

/// `Label.Box`. Mind the order: width is field 4, length field 5.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelBox {
    #[prost(double, optional, tag = "1")]
    pub center_x: Option<f64>,
    #[prost(double, optional, tag = "2")]
    pub center_y: Option<f64>,
    #[prost(double, optional, tag = "3")]
    pub center_z: Option<f64>,
    /// Extent along the box's y (3D) or the image y (2D).
    #[prost(double, optional, tag = "4")]
    pub width: Option<f64>,
    /// Extent along the box's x, the heading (3D), or the image x (2D).
    #[prost(double, optional, tag = "5")]
    pub length: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub height: Option<f64>,
    /// Rad, counter-clockwise from +x.
    #[prost(double, optional, tag = "7")]
    pub heading: Option<f64>,
}

/// `Label.Metadata`. Mind the order: speed_z is field 5, accel_z field 6.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelMetadata {
    #[prost(double, optional, tag = "1")]
    pub speed_x: Option<f64>,
    #[prost(double, optional, tag = "2")]
    pub speed_y: Option<f64>,
    #[prost(double, optional, tag = "3")]
    pub accel_x: Option<f64>,
    #[prost(double, optional, tag = "4")]
    pub accel_y: Option<f64>,
    #[prost(double, optional, tag = "5")]
    pub speed_z: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub accel_z: Option<f64>,
}

/// `waymo.open_dataset.Polygon2dProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Polygon2dProto {
    #[prost(double, repeated, packed = "false", tag = "1")]
    pub x: Vec<f64>,
    #[prost(double, repeated, packed = "false", tag = "2")]
    pub y: Vec<f64>,
    #[prost(string, optional, tag = "3")]
    pub id: Option<String>,
}

/// `waymo.open_dataset.LaserName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LaserName {
    /// The 64-beam roof lidar (64 × 2650).
    Top = 1,
    /// Front short-range lidar (200 × 600).
    Front = 2,
    /// Left short-range lidar.
    SideLeft = 3,
    /// Right short-range lidar.
    SideRight = 4,
    /// Rear short-range lidar.
    Rear = 5,
}

impl LaserName {
    /// The five lidars in LaserName order.
    pub const ALL: [LaserName; 5] = [
        LaserName::Top,
        LaserName::Front,
        LaserName::SideLeft,
        LaserName::SideRight,
        LaserName::Rear,
    ];

    /// The lidar with proto value `v`.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as i32 == v)
    }

    /// The proto enum name without prefix (`TOP`).
    pub fn as_str(self) -> &'static str {
        match self {
            LaserName::Top => "TOP",
            LaserName::Front => "FRONT",
            LaserName::SideLeft => "SIDE_LEFT",
            LaserName::SideRight => "SIDE_RIGHT",
            LaserName::Rear => "REAR",
        }
    }
}

/// `waymo.open_dataset.CameraName`, the values perception data uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CameraName {
    /// Front camera.
    Front = 1,
    /// Front-left camera.
    FrontLeft = 2,
    /// Front-right camera.
    FrontRight = 3,
    /// Side-left camera.
    SideLeft = 4,
    /// Side-right camera.
    SideRight = 5,
}

impl CameraName {
    /// The five cameras in CameraName order.
    pub const ALL: [CameraName; 5] = [
        CameraName::Front,
        CameraName::FrontLeft,
        CameraName::FrontRight,
        CameraName::SideLeft,
        CameraName::SideRight,
    ];

    /// The camera with proto value `v`.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| *c as i32 == v)
    }

    /// The camera with proto enum name `s` (`FRONT`), as v2 files sometimes store it.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The proto enum name (`FRONT`).
    pub fn as_str(self) -> &'static str {
        match self {
            CameraName::Front => "FRONT",
            CameraName::FrontLeft => "FRONT_LEFT",
            CameraName::FrontRight => "FRONT_RIGHT",
            CameraName::SideLeft => "SIDE_LEFT",
            CameraName::SideRight => "SIDE_RIGHT",
        }
    }
}

/// The name of camera enum value `v`, or `CAMERA_<v>` for values outside perception's 1–5.
pub fn camera_name_str(v: i32) -> String {
    CameraName::from_i32(v).map_or_else(|| format!("CAMERA_{v}"), |c| c.as_str().to_string())
}

/// `Label.Type` names: the proto enum name of label type `v`.
pub fn label_type_str(v: i32) -> &'static str {
    match v {
        1 => "TYPE_VEHICLE",
        2 => "TYPE_PEDESTRIAN",
        3 => "TYPE_SIGN",
        4 => "TYPE_CYCLIST",
        _ => "TYPE_UNKNOWN",
    }
}

/// The label type value of a proto enum name (`TYPE_VEHICLE` → 1), for v2 string enums.
pub fn label_type_from_name(s: &str) -> Option<i32> {
    (0..=4).find(|v| label_type_str(*v) == s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn repeated_doubles_decode_packed_and_unpacked() {
        // Unpacked: tag 1, wire type 1 (64-bit) per value.
        let mut unpacked = Vec::new();
        for v in [1.0f64, -2.5] {
            unpacked.push(0x09);
            unpacked.extend_from_slice(&v.to_le_bytes());
        }
        // Packed: tag 1, wire type 2, length 16.
        let mut packed = vec![0x0a, 16];
        for v in [1.0f64, -2.5] {
            packed.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(Transform::decode(&unpacked[..]).unwrap().transform, vec![1.0, -2.5]);
        assert_eq!(Transform::decode(&packed[..]).unwrap().transform, vec![1.0, -2.5]);
        // Encoding follows the real files: unpacked.
        let t = Transform {
            transform: vec![1.0, -2.5],
        };
        assert_eq!(t.encode_to_vec(), unpacked);
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut bytes = ContextName {
            name: Some("seg".into()),
        }
        .encode_to_vec();
        // Field 99, varint 7; field 98, length-delimited "xyz".
        bytes.extend_from_slice(&[0x98, 0x06, 7, 0x92, 0x06, 3, b'x', b'y', b'z']);
        assert_eq!(ContextName::decode(&bytes[..]).unwrap().name.as_deref(), Some("seg"));
    }

    #[test]
    fn box_width_is_field_4_and_length_field_5() {
        // Field 4 (width) = 2.0, field 5 (length) = 4.0, both 64-bit.
        let mut bytes = vec![0x21];
        bytes.extend_from_slice(&2.0f64.to_le_bytes());
        bytes.push(0x29);
        bytes.extend_from_slice(&4.0f64.to_le_bytes());
        let b = LabelBox::decode(&bytes[..]).unwrap();
        assert_eq!((b.width, b.length), (Some(2.0), Some(4.0)));
    }
}
