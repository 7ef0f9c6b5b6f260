//! Writes [`Frame`]s as a ROS 2 bag in MCAP (profile `ros2`, `ros2msg` schemas, `cdr` messages):
//! `PointCloud2` sweeps (x, y, z, intensity float32 and the cloud's channels), `Imu`, `Odometry`,
//! `CompressedImage` (or `Image`) with `CameraInfo`, and `/tf_static` mountings, in zstd chunks with
//! a summary and message indexes. For the tests and for exporting sequences.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Translation3, UnitQuaternion};
use thiserror::Error;

use super::msgs::{
    CameraInfo, CompressedImage, Header, Image, Imu, Odometry, PointCloud2, PointField, RosMessage, RosTransform,
    TfMessage, Time, TransformStamped,
};
use crate::cloud::ChannelData;
use crate::frame::{CameraView, Distortion, Frame};
use crate::sources::layout::Scalar;

/// Errors writing a bag.
#[derive(Debug, Error)]
pub enum BagWriteError {
    /// The file could not be created or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The MCAP writer refused a record.
    #[error("{path}: {error}")]
    Mcap {
        /// The file.
        path: PathBuf,
        /// The writer's error.
        error: mcap::McapError,
    },
    /// A frame cannot be written as ROS 2 messages.
    #[error("{path}: frame {index}: {detail}")]
    Frame {
        /// The file.
        path: PathBuf,
        /// The frame's `Frame.index`.
        index: usize,
        /// What cannot be written.
        detail: String,
    },
}

/// Topics, frame names, mountings and chunking of a written bag.
#[derive(Debug, Clone, PartialEq)]
pub struct BagWriteOptions {
    /// The sweeps' topic; default `/points`.
    pub pointcloud_topic: String,
    /// The IMU topic; default `/imu`.
    pub imu_topic: String,
    /// The odometry topic; default `/odom`.
    pub odometry_topic: String,
    /// The world frame of the odometry; default `odom`.
    pub world_frame: String,
    /// The odometry's child frame; default `base_link`.
    pub base_frame: String,
    /// The sweeps' frame; default `lidar`.
    pub lidar_frame: String,
    /// The IMU's frame; default `imu`.
    pub imu_frame: String,
    /// The LiDAR's mounting on the base (written to `/tf_static`); default identity.
    pub base_from_lidar: Isometry3<f64>,
    /// The IMU's orientation in the LiDAR frame (written to `/tf_static`; samples are rotated
    /// into the IMU frame); default identity.
    pub lidar_from_imu: UnitQuaternion<f64>,
    /// Write cameras as raw `sensor_msgs/Image` `rgb8` instead of `CompressedImage`; default false.
    pub raw_images: bool,
    /// Target uncompressed chunk size (bytes); default 1 MiB.
    pub chunk_size: u64,
    /// How chunks are compressed; default zstd.
    pub compression: ChunkCompression,
    /// zstd level (0 = the `zstd` library's default, 3); default [`ROS2_ZSTD_LEVEL`]; ignored for
    /// the other codecs.
    pub compression_level: u32,
}

/// The zstd level ROS 2 bags are recorded with: the MCAP C++ writer's `Default`, which rosbag2
/// uses unless a preset says otherwise (on LiDAR records it reads about 30 % faster than level 3 for
/// about 12 % more bytes: `benches/mcap_read.rs`).
pub const ROS2_ZSTD_LEVEL: u32 = 1;

/// The codec of a bag's chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChunkCompression {
    /// Uncompressed chunks (rosbag2's `fastwrite` preset).
    None,
    /// zstd chunks (rosbag2's `zstd_fast` and `zstd_small` presets, and the MCAP writers' default).
    #[default]
    Zstd,
    /// LZ4 frames.
    Lz4,
}

impl Default for BagWriteOptions {
    fn default() -> Self {
        Self {
            pointcloud_topic: "/points".into(),
            imu_topic: "/imu".into(),
            odometry_topic: "/odom".into(),
            world_frame: "odom".into(),
            base_frame: "base_link".into(),
            lidar_frame: "lidar".into(),
            imu_frame: "imu".into(),
            base_from_lidar: Isometry3::identity(),
            lidar_from_imu: UnitQuaternion::identity(),
            raw_images: false,
            chunk_size: mcap::WriteOptions::DEFAULT_CHUNK_SIZE,
            compression: ChunkCompression::Zstd,
            compression_level: ROS2_ZSTD_LEVEL,
        }
    }
}

/// What a written bag holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BagWriteSummary {
    /// Messages per topic.
    pub messages: BTreeMap<String, u64>,
    /// Bytes written.
    pub bytes: u64,
    /// What could not be written as it was (an int64 channel written as float64), once each.
    pub notes: Vec<String>,
}

/// The camera topics of camera `name`: image (raw or compressed) and `CameraInfo`.
pub fn camera_topics(name: &str, raw: bool) -> (String, String) {
    let image = if raw {
        format!("/{name}/image_raw")
    } else {
        format!("/{name}/image_raw/compressed")
    };
    (image, format!("/{name}/camera_info"))
}

/// The optical frame of camera `name`.
pub fn camera_frame(name: &str) -> String {
    format!("{name}_optical")
}

struct BagWriter<'p> {
    path: &'p Path,
    writer: mcap::Writer<BufWriter<File>>,
    schemas: HashMap<&'static str, u16>,
    channels: HashMap<String, u16>,
    summary: BagWriteSummary,
    sequence: u32,
}

impl BagWriter<'_> {
    fn mcap(&self, error: mcap::McapError) -> BagWriteError {
        BagWriteError::Mcap {
            path: self.path.to_path_buf(),
            error,
        }
    }

    fn channel<'m, M: RosMessage<'m>>(&mut self, topic: &str) -> Result<u16, BagWriteError> {
        if let Some(&id) = self.channels.get(topic) {
            return Ok(id);
        }
        let schema = match self.schemas.get(M::NAME) {
            Some(&id) => id,
            None => {
                let id = self
                    .writer
                    .add_schema(M::NAME, "ros2msg", M::definition().as_bytes())
                    .map_err(|e| self.mcap(e))?;
                self.schemas.insert(M::NAME, id);
                id
            }
        };
        let id = self
            .writer
            .add_channel(schema, topic, "cdr", &BTreeMap::new())
            .map_err(|e| self.mcap(e))?;
        self.channels.insert(topic.to_string(), id);
        Ok(id)
    }

    fn write<'m, M: RosMessage<'m>>(&mut self, topic: &str, micros: i64, message: &M) -> Result<(), BagWriteError> {
        let channel_id = self.channel::<M>(topic)?;
        let log_time = u64::try_from(micros).unwrap_or(0) * 1000;
        self.sequence = self.sequence.wrapping_add(1);
        let header = mcap::records::MessageHeader {
            channel_id,
            sequence: self.sequence,
            log_time,
            publish_time: log_time,
        };
        self.writer
            .write_to_known_channel(&header, &message.encode())
            .map_err(|e| self.mcap(e))?;
        *self.summary.messages.entry(topic.to_string()).or_default() += 1;
        Ok(())
    }
}

fn header(micros: i64, frame_id: &str) -> Result<Header, String> {
    Ok(Header {
        stamp: Time::from_micros(micros).ok_or_else(|| format!("time {micros} µs does not fit ROS 2 int32 seconds"))?,
        frame_id: frame_id.to_string(),
    })
}

fn transform(
    parent: &str,
    child: &str,
    micros: i64,
    parent_from_child: &Isometry3<f64>,
) -> Result<TransformStamped, String> {
    Ok(TransformStamped {
        header: header(micros, parent)?,
        child_frame_id: child.to_string(),
        transform: RosTransform::from_isometry(parent_from_child),
    })
}

/// The frame's cloud as `PointCloud2` records: x, y, z, intensity, then each channel (float32,
/// uint8/16/32 as they are, int64 as int32, or as float64 when a value is outside int32 —
/// PointField has no int64 —, said in `notes`).
fn point_cloud(frame: &Frame, lidar_frame: &str, notes: &mut Vec<String>) -> Result<PointCloud2<'static>, String> {
    let cloud = &frame.cloud;
    let n = cloud.len();
    let mut fields: Vec<PointField> = Vec::new();
    let mut offset = 0u32;
    let mut add = |name: &str, scalar: Scalar| {
        fields.push(PointField {
            name: name.to_string(),
            offset,
            datatype: scalar.ros_datatype(),
            count: 1,
        });
        offset += scalar.size() as u32;
    };
    for name in ["x", "y", "z", "intensity"] {
        add(name, Scalar::F32);
    }
    let mut columns: Vec<(&ChannelData, Scalar)> = Vec::new();
    for (name, data) in cloud.channels() {
        if ["x", "y", "z", "intensity"].contains(&name) {
            return Err(format!("channel `{name}` clashes with a point field"));
        }
        let scalar = match data {
            ChannelData::F32(_) => Scalar::F32,
            ChannelData::U8(_) => Scalar::U8,
            ChannelData::U16(_) => Scalar::U16,
            ChannelData::U32(_) => Scalar::U32,
            ChannelData::I64(v) => {
                if v.iter().any(|&x| i32::try_from(x).is_err()) {
                    let note = format!("channel `{name}`: int64 values outside int32 written as float64");
                    if !notes.contains(&note) {
                        tracing::info!("{note}");
                        notes.push(note);
                    }
                    Scalar::F64
                } else {
                    Scalar::I32
                }
            }
        };
        add(name, scalar);
        columns.push((data, scalar));
    }
    let point_step = offset;
    let row_step = point_step
        .checked_mul(u32::try_from(n).map_err(|_| "too many points")?)
        .ok_or("cloud too large for one PointCloud2")?;
    let mut data = Vec::with_capacity(row_step as usize);
    let (x, y, z, intensity) = (cloud.x(), cloud.y(), cloud.z(), cloud.intensity());
    for i in 0..n {
        for column in [x, y, z, intensity] {
            data.extend_from_slice(&column.get(i).copied().unwrap_or(0.0).to_le_bytes());
        }
        for (column, scalar) in &columns {
            match column {
                ChannelData::F32(v) => data.extend_from_slice(&v.get(i).copied().unwrap_or(0.0).to_le_bytes()),
                ChannelData::U8(v) => data.push(v.get(i).copied().unwrap_or(0)),
                ChannelData::U16(v) => data.extend_from_slice(&v.get(i).copied().unwrap_or(0).to_le_bytes()),
                ChannelData::U32(v) => data.extend_from_slice(&v.get(i).copied().unwrap_or(0).to_le_bytes()),
                ChannelData::I64(v) => {
                    let x = v.get(i).copied().unwrap_or(0);
                    if *scalar == Scalar::F64 {
                        data.extend_from_slice(&(x as f64).to_le_bytes())
                    } else {
                        data.extend_from_slice(&i32::try_from(x).unwrap_or(0).to_le_bytes())
                    }
                }
            }
        }
    }
    let dense = x.iter().chain(y).chain(z).all(|v| v.is_finite());
    Ok(PointCloud2 {
        header: header(frame.timestamp_micros, lidar_frame)?,
        height: 1,
        width: n as u32,
        fields,
        is_bigendian: false,
        point_step,
        row_step,
        data: Cow::Owned(data),
        is_dense: dense,
    })
}

fn camera_info(view: &CameraView, frame_id: &str) -> Result<CameraInfo, String> {
    let c = &view.calibration;
    let (model, d) = match c.distortion {
        Distortion::None => ("plumb_bob", vec![0.0; 5]),
        Distortion::RadTan { k1, k2, p1, p2, k3 } => ("plumb_bob", vec![k1, k2, p1, p2, k3]),
        Distortion::Equidistant { k1, k2, k3, k4 } => ("equidistant", vec![k1, k2, k3, k4]),
    };
    Ok(CameraInfo {
        header: header(view.timestamp_micros, frame_id)?,
        height: c.height,
        width: c.width,
        distortion_model: model.to_string(),
        d,
        k: [c.fx, 0.0, c.cx, 0.0, c.fy, c.cy, 0.0, 0.0, 1.0],
        r: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p: [c.fx, 0.0, c.cx, 0.0, 0.0, c.fy, c.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
        ..CameraInfo::default()
    })
}

/// The view's image as stored: its encoded bytes, or PNG of its pixels.
fn encoded_image(view: &CameraView) -> Result<(String, Vec<u8>), String> {
    if let Some(bytes) = view.encoded() {
        let format = if bytes.starts_with(b"\x89PNG") { "png" } else { "jpeg" };
        return Ok((format.to_string(), bytes.to_vec()));
    }
    let image = view.image().map_err(|e| e.to_string())?;
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| format!("camera `{}`: PNG encoding failed: {e}", view.name))?;
    Ok(("png".to_string(), png))
}

/// Writes `frames` to `path` as a ROS 2 MCAP bag and says what it holds. IMU samples and images
/// shared by several frames are written once; the mountings (base → LiDAR, LiDAR → IMU, LiDAR →
/// each camera, from the first frame that has it) go to `/tf_static`.
pub fn write_bag(path: &Path, frames: &[Frame], options: &BagWriteOptions) -> Result<BagWriteSummary, BagWriteError> {
    let io = |error| BagWriteError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::create(path).map_err(io)?;
    let writer = mcap::WriteOptions::new()
        .profile("ros2")
        .library(concat!("boxlayer/", env!("CARGO_PKG_VERSION")))
        .compression(match options.compression {
            ChunkCompression::None => None,
            ChunkCompression::Zstd => Some(mcap::Compression::Zstd),
            ChunkCompression::Lz4 => Some(mcap::Compression::Lz4),
        })
        .compression_level(options.compression_level)
        .compression_threads(1)
        .chunk_size(Some(options.chunk_size))
        .create(BufWriter::new(file))
        .map_err(|error| BagWriteError::Mcap {
            path: path.to_path_buf(),
            error,
        })?;
    let mut bag = BagWriter {
        path,
        writer,
        schemas: HashMap::new(),
        channels: HashMap::new(),
        summary: BagWriteSummary::default(),
        sequence: 0,
    };
    let frame_error = |index: usize, detail: String| BagWriteError::Frame {
        path: path.to_path_buf(),
        index,
        detail,
    };
    let o = options;

    // Mountings first (latched in ROS 2: one message before the data).
    if let Some(first) = frames.first() {
        let t = first.timestamp_micros;
        let at = |e| frame_error(first.index, e);
        let mut transforms = vec![
            transform(&o.base_frame, &o.lidar_frame, t, &o.base_from_lidar).map_err(at)?,
            transform(
                &o.lidar_frame,
                &o.imu_frame,
                t,
                &Isometry3::from_parts(Translation3::identity(), o.lidar_from_imu),
            )
            .map_err(at)?,
        ];
        let mut seen = BTreeSet::new();
        for frame in frames {
            for view in &frame.cameras {
                if seen.insert(view.name.clone()) {
                    transforms.push(
                        transform(
                            &o.lidar_frame,
                            &camera_frame(&view.name),
                            t,
                            &view.calibration.sensor_from_camera,
                        )
                        .map_err(|e| frame_error(frame.index, e))?,
                    );
                }
            }
        }
        bag.write("/tf_static", t, &TfMessage { transforms })?;
    }

    let imu_from_lidar = o.lidar_from_imu.inverse();
    let mut imu_written = BTreeSet::new();
    let mut images_written = BTreeSet::new();
    for frame in frames {
        let at = |e| frame_error(frame.index, e);
        let mut samples: Vec<_> = frame
            .imu
            .iter()
            .filter(|s| imu_written.insert(s.timestamp_micros))
            .collect();
        samples.sort_by_key(|s| s.timestamp_micros);
        for s in samples {
            let a = imu_from_lidar * s.accel_mps2;
            let g = imu_from_lidar * s.gyro_radps;
            let mut orientation_covariance = [0.0; 9];
            orientation_covariance[0] = -1.0;
            let imu = Imu {
                header: header(s.timestamp_micros, &o.imu_frame).map_err(at)?,
                orientation: [0.0, 0.0, 0.0, 1.0],
                orientation_covariance,
                angular_velocity: [g.x, g.y, g.z],
                linear_acceleration: [a.x, a.y, a.z],
                ..Imu::default()
            };
            bag.write(&o.imu_topic, s.timestamp_micros, &imu)?;
        }
        let world_from_base = frame.world_from_sensor * o.base_from_lidar.inverse();
        let odom = Odometry {
            header: header(frame.timestamp_micros, &o.world_frame).map_err(at)?,
            child_frame_id: o.base_frame.clone(),
            pose: RosTransform::from_isometry(&world_from_base),
            pose_covariance: [0.0; 36],
            linear_velocity: [0.0; 3],
            angular_velocity: [0.0; 3],
            twist_covariance: [0.0; 36],
        };
        bag.write(&o.odometry_topic, frame.timestamp_micros, &odom)?;
        for view in &frame.cameras {
            if !images_written.insert((view.name.clone(), view.timestamp_micros)) {
                continue;
            }
            let optical = camera_frame(&view.name);
            let (image_topic, info_topic) = camera_topics(&view.name, o.raw_images);
            let t = view.timestamp_micros;
            if o.raw_images {
                let rgb = view.image().map_err(|e| at(e.to_string()))?;
                let (w, h) = rgb.dimensions();
                let image = Image {
                    header: header(t, &optical).map_err(at)?,
                    height: h,
                    width: w,
                    encoding: "rgb8".into(),
                    is_bigendian: 0,
                    step: w * 3,
                    data: Cow::Borrowed(rgb.as_raw()),
                };
                bag.write(&image_topic, t, &image)?;
            } else {
                let (format, data) = encoded_image(view).map_err(at)?;
                let image = CompressedImage {
                    header: header(t, &optical).map_err(at)?,
                    format,
                    data: Cow::Owned(data),
                };
                bag.write(&image_topic, t, &image)?;
            }
            bag.write(&info_topic, t, &camera_info(view, &optical).map_err(at)?)?;
        }
        let cloud = point_cloud(frame, &o.lidar_frame, &mut bag.summary.notes).map_err(at)?;
        bag.write(&o.pointcloud_topic, frame.timestamp_micros, &cloud)?;
    }
    bag.writer.finish().map_err(|e| bag.mcap(e))?;
    let mut summary = std::mem::take(&mut bag.summary);
    bag.writer
        .into_inner()
        .into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)?;
    summary.bytes = std::fs::metadata(path).map_err(io)?.len();
    Ok(summary)
}
