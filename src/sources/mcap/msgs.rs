//! The ROS 2 messages the MCAP reader reads and the bag writer writes, with their CDR decode and
//! encode and their `ros2msg` definition text (the nested types appended in the
//! `===…\nMSG: pkg/Type\n` form that ROS 2 tools and `mcap-ros2-support` parse). Large byte
//! fields (`data`) borrow from the message they were decoded from.

use std::borrow::Cow;

use image::RgbImage;
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};

use super::cdr::{CdrError, CdrReader, CdrWriter};
use crate::frame::Distortion;
use crate::sources::layout::{Field, PointLayout, Scalar};

/// A ROS 2 message type boxlayer decodes and encodes.
pub trait RosMessage<'a>: Sized {
    /// The schema name (`sensor_msgs/msg/PointCloud2`).
    const NAME: &'static str;
    /// Reads one CDR message.
    fn decode(message: &'a [u8]) -> Result<Self, CdrError>;
    /// Writes one little-endian CDR message.
    fn encode(&self) -> Vec<u8>;
    /// The `ros2msg` schema text, nested definitions appended.
    fn definition() -> String;
}

/// `builtin_interfaces/Time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Time {
    /// Seconds.
    pub sec: i32,
    /// Nanoseconds within the second.
    pub nanosec: u32,
}

impl Time {
    /// The time in nanoseconds.
    pub fn nanos(self) -> i64 {
        i64::from(self.sec) * 1_000_000_000 + i64::from(self.nanosec)
    }

    /// The time in microseconds, rounded down.
    pub fn micros(self) -> i64 {
        self.nanos().div_euclid(1000)
    }

    /// The time of `micros` µs, or `None` past the `int32` seconds ROS 2 has.
    pub fn from_micros(micros: i64) -> Option<Time> {
        let sec = i32::try_from(micros.div_euclid(1_000_000)).ok()?;
        let nanosec = (micros.rem_euclid(1_000_000) * 1000) as u32;
        Some(Time { sec, nanosec })
    }
}

/// `std_msgs/Header`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    /// Acquisition time.
    pub stamp: Time,
    /// Coordinate frame of the data.
    pub frame_id: String,
}

impl Header {
    fn read(r: &mut CdrReader<'_>) -> Result<Self, CdrError> {
        let sec = r.i32()?;
        let nanosec = r.u32()?;
        Ok(Header {
            stamp: Time { sec, nanosec },
            frame_id: r.string("header.frame_id")?,
        })
    }

    fn write(&self, w: &mut CdrWriter) {
        w.i32(self.stamp.sec);
        w.u32(self.stamp.nanosec);
        w.string(&self.frame_id);
    }

    /// The header that starts `message` (every stamped message begins with one), read without the rest.
    pub fn decode_prefix(message: &[u8]) -> Result<Header, CdrError> {
        Header::read(&mut CdrReader::new(message)?)
    }
}

const SEPARATOR: &str = "================================================================================";

fn with_deps(main: &str, deps: &[(&str, &str)]) -> String {
    let mut text = main.to_string();
    for (name, def) in deps {
        text.push_str(SEPARATOR);
        text.push_str("\nMSG: ");
        text.push_str(name);
        text.push('\n');
        text.push_str(def);
    }
    text
}

const TIME_DEF: &str = "int32 sec\nuint32 nanosec\n";
const HEADER_DEF: &str = "builtin_interfaces/Time stamp\nstring frame_id\n";
const VECTOR3_DEF: &str = "float64 x\nfloat64 y\nfloat64 z\n";
const POINT_DEF: &str = "float64 x\nfloat64 y\nfloat64 z\n";
const QUATERNION_DEF: &str = "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n";
const POSE_DEF: &str = "geometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n";
const TWIST_DEF: &str = "geometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular\n";
const TRANSFORM_DEF: &str = "geometry_msgs/Vector3 translation\ngeometry_msgs/Quaternion rotation\n";
const HEADER_DEPS: [(&str, &str); 2] = [("std_msgs/Header", HEADER_DEF), ("builtin_interfaces/Time", TIME_DEF)];

fn read_vec3(r: &mut CdrReader<'_>) -> Result<[f64; 3], CdrError> {
    r.f64_array::<3>()
}

fn read_quat(r: &mut CdrReader<'_>) -> Result<[f64; 4], CdrError> {
    r.f64_array::<4>()
}

/// `sensor_msgs/PointField`.
#[derive(Debug, Clone, PartialEq)]
pub struct PointField {
    /// Field name.
    pub name: String,
    /// Byte offset in the point record.
    pub offset: u32,
    /// Datatype code (1 = INT8 … 8 = FLOAT64).
    pub datatype: u8,
    /// Values in the field.
    pub count: u32,
}

/// `sensor_msgs/PointCloud2`.
#[derive(Debug, Clone, PartialEq)]
pub struct PointCloud2<'a> {
    /// Stamp and frame.
    pub header: Header,
    /// Rows (1 for an unorganized cloud).
    pub height: u32,
    /// Points per row.
    pub width: u32,
    /// The point record's fields.
    pub fields: Vec<PointField>,
    /// Byte order of the point data.
    pub is_bigendian: bool,
    /// Bytes per point.
    pub point_step: u32,
    /// Bytes per row.
    pub row_step: u32,
    /// The point records.
    pub data: Cow<'a, [u8]>,
    /// Whether every point is finite.
    pub is_dense: bool,
}

impl PointCloud2<'_> {
    /// The checked point layout the fields, `point_step` and `is_bigendian` declare.
    pub fn point_layout(&self) -> Result<PointLayout, String> {
        let mut fields = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let scalar = Scalar::from_ros_datatype(f.datatype)
                .ok_or_else(|| format!("field `{}` has unknown datatype {} (known: 1 to 8)", f.name, f.datatype))?;
            fields.push(Field {
                name: f.name.clone(),
                offset: f.offset as usize,
                scalar,
                count: f.count as usize,
            });
        }
        PointLayout::new(fields, self.point_step as usize, self.is_bigendian).map_err(|e| e.to_string())
    }
}

const POINT_FIELD_DEF: &str = "uint8 INT8 = 1\nuint8 UINT8 = 2\nuint8 INT16 = 3\nuint8 UINT16 = 4\nuint8 INT32 = 5\n\
uint8 UINT32 = 6\nuint8 FLOAT32 = 7\nuint8 FLOAT64 = 8\nstring name\nuint32 offset\nuint8 datatype\nuint32 count\n";

impl<'a> RosMessage<'a> for PointCloud2<'a> {
    const NAME: &'static str = "sensor_msgs/msg/PointCloud2";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        let header = Header::read(&mut r)?;
        let height = r.u32()?;
        let width = r.u32()?;
        // A field is at least a 4-byte name length, offset, datatype and count.
        let n = r.sequence_len(13, "fields")?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.string("fields.name")?;
            let offset = r.u32()?;
            let datatype = r.u8()?;
            let count = r.u32()?;
            fields.push(PointField {
                name,
                offset,
                datatype,
                count,
            });
        }
        let is_bigendian = r.bool()?;
        let point_step = r.u32()?;
        let row_step = r.u32()?;
        let data = Cow::Borrowed(r.byte_sequence("data")?);
        let is_dense = r.bool()?;
        Ok(PointCloud2 {
            header,
            height,
            width,
            fields,
            is_bigendian,
            point_step,
            row_step,
            data,
            is_dense,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 64 + 24 * self.fields.len());
        self.header.write(&mut w);
        w.u32(self.height);
        w.u32(self.width);
        w.sequence_len(self.fields.len());
        for f in &self.fields {
            w.string(&f.name);
            w.u32(f.offset);
            w.u8(f.datatype);
            w.u32(f.count);
        }
        w.bool(self.is_bigendian);
        w.u32(self.point_step);
        w.u32(self.row_step);
        w.byte_sequence(&self.data);
        w.bool(self.is_dense);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nsensor_msgs/PointField[] fields\nbool is_bigendian\n\
uint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense\n",
            &[
                HEADER_DEPS[0],
                HEADER_DEPS[1],
                ("sensor_msgs/PointField", POINT_FIELD_DEF),
            ],
        )
    }
}

/// `sensor_msgs/Imu`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Imu {
    /// Stamp and IMU frame.
    pub header: Header,
    /// Orientation quaternion (x, y, z, w).
    pub orientation: [f64; 4],
    /// Row-major covariance; element 0 = −1 means no orientation estimate.
    pub orientation_covariance: [f64; 9],
    /// Angular rate (rad/s).
    pub angular_velocity: [f64; 3],
    /// Row-major covariance.
    pub angular_velocity_covariance: [f64; 9],
    /// Specific force (m/s²).
    pub linear_acceleration: [f64; 3],
    /// Row-major covariance.
    pub linear_acceleration_covariance: [f64; 9],
}

impl<'a> RosMessage<'a> for Imu {
    const NAME: &'static str = "sensor_msgs/msg/Imu";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        Ok(Imu {
            header: Header::read(&mut r)?,
            orientation: read_quat(&mut r)?,
            orientation_covariance: r.f64_array()?,
            angular_velocity: read_vec3(&mut r)?,
            angular_velocity_covariance: r.f64_array()?,
            linear_acceleration: read_vec3(&mut r)?,
            linear_acceleration_covariance: r.f64_array()?,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(400);
        self.header.write(&mut w);
        w.f64s(&self.orientation);
        w.f64s(&self.orientation_covariance);
        w.f64s(&self.angular_velocity);
        w.f64s(&self.angular_velocity_covariance);
        w.f64s(&self.linear_acceleration);
        w.f64s(&self.linear_acceleration_covariance);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "std_msgs/Header header\ngeometry_msgs/Quaternion orientation\nfloat64[9] orientation_covariance\n\
geometry_msgs/Vector3 angular_velocity\nfloat64[9] angular_velocity_covariance\n\
geometry_msgs/Vector3 linear_acceleration\nfloat64[9] linear_acceleration_covariance\n",
            &[
                HEADER_DEPS[0],
                HEADER_DEPS[1],
                ("geometry_msgs/Quaternion", QUATERNION_DEF),
                ("geometry_msgs/Vector3", VECTOR3_DEF),
            ],
        )
    }
}

/// `sensor_msgs/CompressedImage`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompressedImage<'a> {
    /// Stamp and camera frame.
    pub header: Header,
    /// `jpeg`, `png` (image_transport may prefix the pixel format: `rgb8; jpeg compressed bgr8`).
    pub format: String,
    /// The encoded image.
    pub data: Cow<'a, [u8]>,
}

impl<'a> RosMessage<'a> for CompressedImage<'a> {
    const NAME: &'static str = "sensor_msgs/msg/CompressedImage";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        Ok(CompressedImage {
            header: Header::read(&mut r)?,
            format: r.string("format")?,
            data: Cow::Borrowed(r.byte_sequence("data")?),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 64);
        self.header.write(&mut w);
        w.string(&self.format);
        w.byte_sequence(&self.data);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps("std_msgs/Header header\nstring format\nuint8[] data\n", &HEADER_DEPS)
    }
}

/// `sensor_msgs/Image`.
#[derive(Debug, Clone, PartialEq)]
pub struct Image<'a> {
    /// Stamp and camera frame.
    pub header: Header,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Pixel encoding (`rgb8`, `bgr8`, `mono8`, …).
    pub encoding: String,
    /// Byte order of multi-byte pixels.
    pub is_bigendian: u8,
    /// Bytes per row.
    pub step: u32,
    /// Pixels, row after row.
    pub data: Cow<'a, [u8]>,
}

impl Image<'_> {
    /// The pixels as RGB: `rgb8`, `bgr8`, `rgba8`, `bgra8`, `mono8` and `mono16` (high byte) are read.
    pub fn to_rgb(&self) -> Result<RgbImage, String> {
        let (w, h) = (self.width as usize, self.height as usize);
        // A 0-wide image of 10 M empty rows is no image (found by fuzz/cdr_decode: it looped).
        if w == 0 || h == 0 {
            return Err(format!("a {w}×{h} image has no pixels"));
        }
        let channels = match self.encoding.as_str() {
            "rgb8" | "bgr8" => 3,
            "rgba8" | "bgra8" => 4,
            "mono8" | "8UC1" => 1,
            "mono16" | "16UC1" => 2,
            other => return Err(format!("image encoding `{other}` is not read (rgb8, bgr8, mono8, …)")),
        };
        let row = w
            .checked_mul(channels)
            .filter(|&row| row <= self.step as usize)
            .ok_or_else(|| format!("step {} is shorter than {w} pixels of {channels} bytes", self.step))?;
        let need = (self.step as usize)
            .checked_mul(h.saturating_sub(1))
            .and_then(|n| n.checked_add(row));
        if h > 0 && need.is_none_or(|need| need > self.data.len()) {
            return Err(format!(
                "{} bytes of pixels, a {w}×{h} image with step {} needs {}",
                self.data.len(),
                self.step,
                need.map_or_else(|| "more".to_string(), |n| n.to_string())
            ));
        }
        let mut rgb = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            let start = y * self.step as usize;
            let line = self.data.get(start..start + row).ok_or("image row out of range")?;
            for px in line.chunks_exact(channels) {
                let p = match (self.encoding.as_str(), px) {
                    ("rgb8" | "rgba8", [r, g, b, ..]) => [*r, *g, *b],
                    ("bgr8" | "bgra8", [b, g, r, ..]) => [*r, *g, *b],
                    (_, [v]) => [*v; 3],
                    (_, [a, b]) => {
                        let hi = if self.is_bigendian != 0 { *a } else { *b };
                        [hi; 3]
                    }
                    _ => return Err("pixel size mismatch".to_string()),
                };
                rgb.extend_from_slice(&p);
            }
        }
        RgbImage::from_raw(self.width, self.height, rgb)
            .ok_or_else(|| "pixel count does not match its size".to_string())
    }
}

impl<'a> RosMessage<'a> for Image<'a> {
    const NAME: &'static str = "sensor_msgs/msg/Image";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        Ok(Image {
            header: Header::read(&mut r)?,
            height: r.u32()?,
            width: r.u32()?,
            encoding: r.string("encoding")?,
            is_bigendian: r.u8()?,
            step: r.u32()?,
            data: Cow::Borrowed(r.byte_sequence("data")?),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(self.data.len() + 64);
        self.header.write(&mut w);
        w.u32(self.height);
        w.u32(self.width);
        w.string(&self.encoding);
        w.u8(self.is_bigendian);
        w.u32(self.step);
        w.byte_sequence(&self.data);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\nuint32 step\nuint8[] data\n",
            &HEADER_DEPS,
        )
    }
}

/// `sensor_msgs/RegionOfInterest`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RegionOfInterest {
    /// Left column.
    pub x_offset: u32,
    /// Top row.
    pub y_offset: u32,
    /// Rows (0: full image).
    pub height: u32,
    /// Columns (0: full image).
    pub width: u32,
    /// Whether the region is to be rectified.
    pub do_rectify: bool,
}

/// `sensor_msgs/CameraInfo`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CameraInfo {
    /// Stamp and camera (optical) frame.
    pub header: Header,
    /// Calibrated image rows.
    pub height: u32,
    /// Calibrated image columns.
    pub width: u32,
    /// `plumb_bob`, `rational_polynomial`, `equidistant`.
    pub distortion_model: String,
    /// Distortion coefficients.
    pub d: Vec<f64>,
    /// Intrinsics, row-major 3×3.
    pub k: [f64; 9],
    /// Rectification rotation, row-major 3×3.
    pub r: [f64; 9],
    /// Projection, row-major 3×4.
    pub p: [f64; 12],
    /// Horizontal binning.
    pub binning_x: u32,
    /// Vertical binning.
    pub binning_y: u32,
    /// Region of interest.
    pub roi: RegionOfInterest,
}

impl CameraInfo {
    /// `(fx, fy, cx, cy)` of the delivered image: `k` corrected for binning and region of interest.
    pub fn intrinsics(&self) -> (f64, f64, f64, f64) {
        let bx = f64::from(self.binning_x.max(1));
        let by = f64::from(self.binning_y.max(1));
        (
            self.k[0] / bx,
            self.k[4] / by,
            (self.k[2] - f64::from(self.roi.x_offset)) / bx,
            (self.k[5] - f64::from(self.roi.y_offset)) / by,
        )
    }

    /// The lens model of `distortion_model` and `d`: `plumb_bob` and `rational_polynomial` (its
    /// first five, k1 k2 p1 p2 k3) as radial-tangential, `equidistant` as Kannala–Brandt; an
    /// all-zero or empty `d` is an ideal pinhole.
    pub fn distortion(&self) -> Result<Distortion, String> {
        let d = &self.d;
        if d.iter().all(|&v| v == 0.0) {
            return Ok(Distortion::None);
        }
        let at = |i: usize| d.get(i).copied().unwrap_or(0.0);
        match self.distortion_model.as_str() {
            "plumb_bob" | "rational_polynomial" => Ok(Distortion::RadTan {
                k1: at(0),
                k2: at(1),
                p1: at(2),
                p2: at(3),
                k3: at(4),
            }),
            "equidistant" | "fisheye" => Ok(Distortion::Equidistant {
                k1: at(0),
                k2: at(1),
                k3: at(2),
                k4: at(3),
            }),
            other => Err(format!(
                "distortion model `{other}` is not read (plumb_bob, rational_polynomial, equidistant)"
            )),
        }
    }
}

impl<'a> RosMessage<'a> for CameraInfo {
    const NAME: &'static str = "sensor_msgs/msg/CameraInfo";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        Ok(CameraInfo {
            header: Header::read(&mut r)?,
            height: r.u32()?,
            width: r.u32()?,
            distortion_model: r.string("distortion_model")?,
            d: r.f64_sequence("d")?,
            k: r.f64_array()?,
            r: r.f64_array()?,
            p: r.f64_array()?,
            binning_x: r.u32()?,
            binning_y: r.u32()?,
            roi: RegionOfInterest {
                x_offset: r.u32()?,
                y_offset: r.u32()?,
                height: r.u32()?,
                width: r.u32()?,
                do_rectify: r.bool()?,
            },
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(400);
        self.header.write(&mut w);
        w.u32(self.height);
        w.u32(self.width);
        w.string(&self.distortion_model);
        w.f64_sequence(&self.d);
        w.f64s(&self.k);
        w.f64s(&self.r);
        w.f64s(&self.p);
        w.u32(self.binning_x);
        w.u32(self.binning_y);
        w.u32(self.roi.x_offset);
        w.u32(self.roi.y_offset);
        w.u32(self.roi.height);
        w.u32(self.roi.width);
        w.bool(self.roi.do_rectify);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "std_msgs/Header header\nuint32 height\nuint32 width\nstring distortion_model\nfloat64[] d\nfloat64[9] k\n\
float64[9] r\nfloat64[12] p\nuint32 binning_x\nuint32 binning_y\nsensor_msgs/RegionOfInterest roi\n",
            &[
                HEADER_DEPS[0],
                HEADER_DEPS[1],
                (
                    "sensor_msgs/RegionOfInterest",
                    "uint32 x_offset\nuint32 y_offset\nuint32 height\nuint32 width\nbool do_rectify\n",
                ),
            ],
        )
    }
}

/// A rigid transform as ROS 2 messages carry it: translation and quaternion (x, y, z, w).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RosTransform {
    /// Translation (m).
    pub translation: [f64; 3],
    /// Rotation quaternion (x, y, z, w).
    pub rotation: [f64; 4],
}

impl RosTransform {
    /// The isometry, or `None` when a value is not finite or the quaternion is far from unit length.
    pub fn isometry(&self) -> Option<Isometry3<f64>> {
        let [x, y, z, w] = self.rotation;
        let [tx, ty, tz] = self.translation;
        let q = Quaternion::new(w, x, y, z);
        let norm = q.norm();
        if !(norm.is_finite() && [tx, ty, tz].iter().all(|v| v.is_finite()) && (norm - 1.0).abs() < 1e-3) {
            return None;
        }
        Some(Isometry3::from_parts(
            Translation3::new(tx, ty, tz),
            UnitQuaternion::from_quaternion(q),
        ))
    }

    /// The transform of an isometry.
    pub fn from_isometry(pose: &Isometry3<f64>) -> Self {
        let t = pose.translation.vector;
        let q = pose.rotation.quaternion();
        RosTransform {
            translation: [t.x, t.y, t.z],
            rotation: [q.i, q.j, q.k, q.w],
        }
    }

    fn read(r: &mut CdrReader<'_>) -> Result<Self, CdrError> {
        Ok(RosTransform {
            translation: read_vec3(r)?,
            rotation: read_quat(r)?,
        })
    }

    fn write(&self, w: &mut CdrWriter) {
        w.f64s(&self.translation);
        w.f64s(&self.rotation);
    }
}

/// `nav_msgs/Odometry`.
#[derive(Debug, Clone, PartialEq)]
pub struct Odometry {
    /// Stamp and the frame of the pose (the world: `odom`, `map`).
    pub header: Header,
    /// The frame whose pose this is (`base_link`).
    pub child_frame_id: String,
    /// Pose of the child frame in the header frame.
    pub pose: RosTransform,
    /// Row-major 6×6 pose covariance.
    pub pose_covariance: [f64; 36],
    /// Linear velocity in the child frame (m/s).
    pub linear_velocity: [f64; 3],
    /// Angular velocity in the child frame (rad/s).
    pub angular_velocity: [f64; 3],
    /// Row-major 6×6 twist covariance.
    pub twist_covariance: [f64; 36],
}

impl<'a> RosMessage<'a> for Odometry {
    const NAME: &'static str = "nav_msgs/msg/Odometry";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        Ok(Odometry {
            header: Header::read(&mut r)?,
            child_frame_id: r.string("child_frame_id")?,
            pose: RosTransform::read(&mut r)?,
            pose_covariance: r.f64_array()?,
            linear_velocity: read_vec3(&mut r)?,
            angular_velocity: read_vec3(&mut r)?,
            twist_covariance: r.f64_array()?,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(700);
        self.header.write(&mut w);
        w.string(&self.child_frame_id);
        self.pose.write(&mut w);
        w.f64s(&self.pose_covariance);
        w.f64s(&self.linear_velocity);
        w.f64s(&self.angular_velocity);
        w.f64s(&self.twist_covariance);
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/PoseWithCovariance pose\n\
geometry_msgs/TwistWithCovariance twist\n",
            &[
                HEADER_DEPS[0],
                HEADER_DEPS[1],
                (
                    "geometry_msgs/PoseWithCovariance",
                    "geometry_msgs/Pose pose\nfloat64[36] covariance\n",
                ),
                ("geometry_msgs/Pose", POSE_DEF),
                ("geometry_msgs/Point", POINT_DEF),
                ("geometry_msgs/Quaternion", QUATERNION_DEF),
                (
                    "geometry_msgs/TwistWithCovariance",
                    "geometry_msgs/Twist twist\nfloat64[36] covariance\n",
                ),
                ("geometry_msgs/Twist", TWIST_DEF),
                ("geometry_msgs/Vector3", VECTOR3_DEF),
            ],
        )
    }
}

/// `geometry_msgs/TransformStamped`.
#[derive(Debug, Clone, PartialEq)]
pub struct TransformStamped {
    /// Stamp and parent frame.
    pub header: Header,
    /// Child frame.
    pub child_frame_id: String,
    /// Pose of the child frame in the parent frame (parent_from_child).
    pub transform: RosTransform,
}

/// `tf2_msgs/TFMessage`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TfMessage {
    /// The transforms.
    pub transforms: Vec<TransformStamped>,
}

impl<'a> RosMessage<'a> for TfMessage {
    const NAME: &'static str = "tf2_msgs/msg/TFMessage";

    fn decode(message: &'a [u8]) -> Result<Self, CdrError> {
        let mut r = CdrReader::new(message)?;
        // A transform is at least 8 + 4 + 4 + 56 bytes.
        let n = r.sequence_len(72, "transforms")?;
        let mut transforms = Vec::with_capacity(n);
        for _ in 0..n {
            transforms.push(TransformStamped {
                header: Header::read(&mut r)?,
                child_frame_id: r.string("child_frame_id")?,
                transform: RosTransform::read(&mut r)?,
            });
        }
        Ok(TfMessage { transforms })
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = CdrWriter::with_capacity(128 * self.transforms.len() + 8);
        w.sequence_len(self.transforms.len());
        for t in &self.transforms {
            t.header.write(&mut w);
            w.string(&t.child_frame_id);
            t.transform.write(&mut w);
        }
        w.into_bytes()
    }

    fn definition() -> String {
        with_deps(
            "geometry_msgs/TransformStamped[] transforms\n",
            &[
                (
                    "geometry_msgs/TransformStamped",
                    "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/Transform transform\n",
                ),
                HEADER_DEPS[0],
                HEADER_DEPS[1],
                ("geometry_msgs/Transform", TRANSFORM_DEF),
                ("geometry_msgs/Vector3", VECTOR3_DEF),
                ("geometry_msgs/Quaternion", QUATERNION_DEF),
            ],
        )
    }
}

/// A vector of a message's `[x, y, z]`.
pub fn vector(v: [f64; 3]) -> Vector3<f64> {
    Vector3::new(v[0], v[1], v[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            stamp: Time {
                sec: 1_600_000_000,
                nanosec: 123_456_000,
            },
            frame_id: "os_sensor".into(),
        }
    }

    /// `std_msgs/Header` { stamp 1 s 2 ns, frame_id "ab" } + the PointCloud2 fields after it,
    /// hand-computed: the string ends at payload offset 15, so `height` pads 1 byte to 16.
    #[test]
    fn point_cloud_golden_bytes() {
        let cloud = PointCloud2 {
            header: Header {
                stamp: Time { sec: 1, nanosec: 2 },
                frame_id: "ab".into(),
            },
            height: 1,
            width: 2,
            fields: vec![PointField {
                name: "x".into(),
                offset: 0,
                datatype: 7,
                count: 1,
            }],
            is_bigendian: false,
            point_step: 4,
            row_step: 8,
            data: Cow::Owned(vec![0, 0, 0x80, 0x3F, 0, 0, 0, 0x40]),
            is_dense: true,
        };
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            0, 1, 0, 0,
            1, 0, 0, 0, 2, 0, 0, 0, // stamp
            3, 0, 0, 0, b'a', b'b', 0, 0, // frame_id "ab" + 1 pad
            1, 0, 0, 0, 2, 0, 0, 0, // height, width
            1, 0, 0, 0, // 1 field
            2, 0, 0, 0, b'x', 0, 0, 0, // name "x" + 2 pad
            0, 0, 0, 0, 7, 0, 0, 0, // offset 0, datatype 7 + 3 pad
            1, 0, 0, 0, // count
            0, 0, 0, 0, // is_bigendian + 3 pad
            4, 0, 0, 0, 8, 0, 0, 0, // point_step, row_step
            8, 0, 0, 0, 0, 0, 0x80, 0x3F, 0, 0, 0, 0x40, // data
            1, // is_dense
        ];
        assert_eq!(cloud.encode(), golden);
        let back = PointCloud2::decode(&golden).unwrap();
        assert_eq!(back, cloud);
        let layout = back.point_layout().unwrap_err();
        assert!(layout.contains("no field `y`"), "{layout}");
        assert_eq!(Header::decode_prefix(&golden).unwrap().stamp.nanos(), 1_000_000_002);
    }

    #[test]
    fn every_message_round_trips_and_refuses_every_truncation() {
        let imu = Imu {
            header: header(),
            orientation: [0.0, 0.0, 0.0, 1.0],
            orientation_covariance: [-1.0; 9],
            angular_velocity: [0.1, -0.2, 0.3],
            linear_acceleration: [0.0, 0.5, 9.81],
            ..Imu::default()
        };
        let info = CameraInfo {
            header: header(),
            height: 800,
            width: 1280,
            distortion_model: "plumb_bob".into(),
            d: vec![-0.1, 0.01, 0.001, -0.002, 0.0],
            k: [600.0, 0.0, 640.0, 0.0, 601.0, 400.0, 0.0, 0.0, 1.0],
            binning_x: 2,
            roi: RegionOfInterest {
                x_offset: 10,
                ..Default::default()
            },
            ..CameraInfo::default()
        };
        let odom = Odometry {
            header: header(),
            child_frame_id: "base_link".into(),
            pose: RosTransform {
                translation: [1.0, 2.0, 3.0],
                rotation: [0.0, 0.0, 0.6, 0.8],
            },
            pose_covariance: [0.5; 36],
            linear_velocity: [1.0, 0.0, 0.0],
            angular_velocity: [0.0, 0.0, 0.1],
            twist_covariance: [0.25; 36],
        };
        let tf = TfMessage {
            transforms: vec![
                TransformStamped {
                    header: header(),
                    child_frame_id: "lidar".into(),
                    transform: odom.pose,
                };
                2
            ],
        };
        let jpeg = CompressedImage {
            header: header(),
            format: "jpeg".into(),
            data: Cow::Owned(vec![0xFF, 0xD8, 1, 2, 3]),
        };
        let raw = Image {
            header: header(),
            height: 1,
            width: 2,
            encoding: "bgr8".into(),
            is_bigendian: 0,
            step: 6,
            data: Cow::Owned(vec![1, 2, 3, 4, 5, 6]),
        };
        fn check<'a, M: RosMessage<'a> + PartialEq + std::fmt::Debug>(m: &M, bytes: &'a [u8]) {
            assert_eq!(&M::decode(bytes).unwrap(), m);
            for cut in 0..bytes.len() {
                assert!(M::decode(&bytes[..cut]).is_err(), "{} cut at {cut} decoded", M::NAME);
            }
        }
        let b = imu.encode();
        check(&imu, &b);
        let b = info.encode();
        check(&info, &b);
        let b = odom.encode();
        check(&odom, &b);
        let b = tf.encode();
        check(&tf, &b);
        let b = jpeg.encode();
        check(&jpeg, &b);
        let b = raw.encode();
        check(&raw, &b);

        assert_eq!(info.intrinsics(), (300.0, 601.0, 315.0, 400.0));
        assert!(matches!(info.distortion().unwrap(), Distortion::RadTan { k1, .. } if k1 == -0.1));
        let rgb = raw.to_rgb().unwrap();
        assert_eq!(rgb.as_raw(), &[3, 2, 1, 6, 5, 4]);
        let short = Image {
            data: Cow::Owned(vec![1, 2, 3]),
            ..raw.clone()
        };
        assert!(short.to_rgb().unwrap_err().contains("3 bytes of pixels"));
        let pose = odom.pose.isometry().unwrap();
        assert_eq!(RosTransform::from_isometry(&pose).translation, [1.0, 2.0, 3.0]);
        let bad = RosTransform {
            rotation: [0.0, 0.0, 0.0, 2.0],
            ..odom.pose
        };
        assert!(bad.isometry().is_none());
    }

    /// Found by `fuzz/cdr_decode`: a 0-wide image of millions of rows looped over empty rows.
    #[test]
    fn an_image_without_pixels_is_refused_at_once() {
        let image = Image {
            header: header(),
            height: 10_000_000,
            width: 0,
            encoding: "8UC1".into(),
            is_bigendian: 0,
            step: 0,
            data: Cow::Borrowed(&[]),
        };
        assert_eq!(image.to_rgb().unwrap_err(), "a 0×10000000 image has no pixels");
    }

    #[test]
    fn definitions_name_every_nested_type_once() {
        for (def, nested) in [
            (
                PointCloud2::definition(),
                vec!["std_msgs/Header", "sensor_msgs/PointField"],
            ),
            (
                Odometry::definition(),
                vec!["geometry_msgs/PoseWithCovariance", "geometry_msgs/Twist"],
            ),
            (
                TfMessage::definition(),
                vec!["geometry_msgs/TransformStamped", "builtin_interfaces/Time"],
            ),
        ] {
            for n in nested {
                assert_eq!(def.matches(&format!("MSG: {n}\n")).count(), 1, "{n} in\n{def}");
            }
        }
    }
}
