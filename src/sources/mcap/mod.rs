//! Reads ROS 2 bags in MCAP (`sensor_msgs/PointCloud2` sweeps with IMU, odometry or `/tf` poses,
//! cameras with their `CameraInfo`) into [`Frame`]s with random access, and writes such bags
//! ([`write_bag`]). Opening indexes the sweeps once (through the summary's chunk and message
//! indexes when the file has them, else by scanning it) and keeps where each sweep's message lies,
//! so [`Source::frame`] decompresses that message's chunk only. It knows the file format only.

pub mod cdr;
pub mod msgs;
mod tf;
pub mod write;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use mcap::records::op;
use mcap::sans_io::{LinearReadEvent, LinearReader, LinearReaderOptions, SummaryReadEvent, SummaryReader};
use nalgebra::{Isometry3, UnitQuaternion};
use serde::{Deserialize, Serialize};

use self::msgs::{CameraInfo, CompressedImage, Header, Image, Imu, Odometry, PointCloud2, RosMessage, TfMessage};
use self::tf::{DynamicEdges, TfTree, Track};
use crate::frame::{CameraAxes, CameraCalibration, CameraView, Frame, ImageData, ImuSample, Platform};
use crate::sources::layout::{Decoded, NonFinite};
use crate::sources::{OnCorrupt, SequenceMeta, SkippedRecord, Source, SourceError};

pub use write::{BagWriteError, BagWriteOptions, BagWriteSummary, ChunkCompression, ROS2_ZSTD_LEVEL, write_bag};

/// The kind name used in errors.
const KIND: &str = "MCAP";

/// The `source_kind` of MCAP sequences.
pub const SOURCE_KIND: &str = "mcap";

/// Topics of the transform tree.
const TF_TOPIC: &str = "/tf";
/// Topic of the fixed transforms.
const TF_STATIC_TOPIC: &str = "/tf_static";

/// How the MCAP reader picks topics, matches streams to sweeps and treats damage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McapConfig {
    /// The `PointCloud2` topic of the sweeps; default the bag's only one (an error when it has several).
    pub pointcloud_topic: Option<String>,
    /// The `Imu` topic; default the bag's only one (none, with a warning, when it has several).
    pub imu_topic: Option<String>,
    /// The `Odometry` topic for poses; default the bag's only one. Without one, poses come from `/tf`.
    pub odometry_topic: Option<String>,
    /// Whether `/tf` and `/tf_static` are read (sensor mountings, and poses without odometry); default true.
    pub tf: bool,
    /// The world frame of `/tf` poses; default the root of the LiDAR frame's tree.
    pub world_frame: Option<String>,
    /// `Image` / `CompressedImage` topics; default every one in the bag.
    pub image_topics: Option<Vec<String>>,
    /// `CameraInfo` topic of an image topic; default `<ns>/camera_info` beside `<ns>/image_raw`
    /// (or `<ns>/image_raw/compressed`).
    pub camera_info_topics: BTreeMap<String, String>,
    /// The platform that recorded the bag; default `vehicle`.
    pub platform: Platform,
    /// What to do with a point whose x, y or z is not finite; default drop and count it.
    pub non_finite: NonFinite,
    /// What to do with a damaged chunk or message; default skip (and report) it.
    pub on_corrupt: OnCorrupt,
    /// Largest gap between a sweep's pairing time (`stamp + image_offset_micros`) and the nearest
    /// image (µs); default 50,000.
    pub image_tolerance_micros: i64,
    /// Images are paired with the sweep's stamp plus this (µs): when the LiDAR scans the cameras'
    /// view, relative to the stamp; default 0. A spinning LiDAR stamped at the start of its 100 ms
    /// scan with a forward camera wants about 50,000 (the M3ED reader computes it from its beam
    /// table; a bag does not say).
    pub image_offset_micros: i64,
    /// Largest gap between a sweep's stamp and a pose sample used for it (µs); default 100,000.
    pub pose_tolerance_micros: i64,
    /// IMU samples with `stamp + lo ≤ t < stamp + hi` go with a sweep (µs); default ± half the
    /// median sweep period.
    pub imu_window_micros: Option<[i64; 2]>,
    /// Largest message read (bytes); default 256 MiB.
    pub max_message_bytes: u64,
    /// Largest chunk decompressed (bytes); default 1 GiB.
    pub max_chunk_bytes: u64,
}

impl Default for McapConfig {
    fn default() -> Self {
        Self {
            pointcloud_topic: None,
            imu_topic: None,
            odometry_topic: None,
            tf: true,
            world_frame: None,
            image_topics: None,
            camera_info_topics: BTreeMap::new(),
            platform: Platform::Vehicle,
            non_finite: NonFinite::Drop,
            on_corrupt: OnCorrupt::Skip,
            image_tolerance_micros: 50_000,
            image_offset_micros: 0,
            pose_tolerance_micros: 100_000,
            imu_window_micros: None,
            max_message_bytes: 256 << 20,
            max_chunk_bytes: 1 << 30,
        }
    }
}

/// The message types the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    PointCloud,
    Imu,
    Odometry,
    Tf,
    CompressedImage,
    Image,
    CameraInfo,
}

impl Kind {
    fn of_schema(name: &str) -> Option<Kind> {
        let short = name.replace("/msg/", "/");
        Some(match short.as_str() {
            "sensor_msgs/PointCloud2" => Kind::PointCloud,
            "sensor_msgs/Imu" => Kind::Imu,
            "nav_msgs/Odometry" => Kind::Odometry,
            "tf2_msgs/TFMessage" => Kind::Tf,
            "sensor_msgs/CompressedImage" => Kind::CompressedImage,
            "sensor_msgs/Image" => Kind::Image,
            "sensor_msgs/CameraInfo" => Kind::CameraInfo,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::PointCloud => PointCloud2::NAME,
            Kind::Imu => Imu::NAME,
            Kind::Odometry => Odometry::NAME,
            Kind::Tf => TfMessage::NAME,
            Kind::CompressedImage => CompressedImage::NAME,
            Kind::Image => Image::NAME,
            Kind::CameraInfo => CameraInfo::NAME,
        }
    }

    /// Whether only the header is read at open (the message is read again by `frame`).
    fn is_large(self) -> bool {
        matches!(self, Kind::PointCloud | Kind::CompressedImage | Kind::Image)
    }
}

#[derive(Debug, Clone)]
struct ChannelInfo {
    topic: String,
    kind: Kind,
    encoding: String,
}

/// Where a message lies: in the `chunk`-th chunk at an offset of its records, or as a record of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Chunk { chunk: usize, offset: u64 },
    Record { offset: u64 },
}

/// A chunk record's place in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ChunkLoc {
    offset: u64,
    /// Record bytes (opcode and length included), when an index gave it.
    length: Option<u64>,
}

impl Loc {
    fn describe(&self, chunks: &[ChunkLoc]) -> String {
        match self {
            Loc::Chunk { chunk, .. } => match chunks.get(*chunk) {
                Some(c) => format!("chunk at offset {}", c.offset),
                None => format!("chunk {chunk}"),
            },
            Loc::Record { offset } => format!("message at offset {offset}"),
        }
    }
}

/// A large message found at open: where it is and its header.
#[derive(Debug, Clone)]
struct Located {
    channel: u16,
    log_time: u64,
    /// Discovery order, to keep log order stable for equal log times.
    order: usize,
    loc: Loc,
    header: Result<Header, String>,
}

/// A small message decoded at open.
#[derive(Debug, Clone)]
enum Small {
    Imu(Box<Imu>),
    Odometry(Box<Odometry>),
    Tf(TfMessage),
    CameraInfo(Box<CameraInfo>),
}

/// What [`chunk_records`] calls with each record: offset in the chunk, opcode, body.
type RecordFn<'f> = dyn FnMut(u64, u8, &[u8]) -> Result<(), String> + 'f;

/// A chunk that could not be read, and the messages its index says it held.
#[derive(Debug, Clone)]
struct DamagedChunk {
    offset: u64,
    detail: String,
    /// `(channel, log time)` of its messages from the message indexes; `None` when unknown.
    messages: Option<Vec<(u16, u64)>>,
}

/// Everything an index pass finds.
#[derive(Default)]
struct Scan {
    schemas: HashMap<u16, String>,
    channels: HashMap<u16, ChannelInfo>,
    chunks: Vec<ChunkLoc>,
    large: Vec<Located>,
    small: Vec<(u16, u64, Small)>,
    bad_small: Vec<(u16, Loc, String)>,
    damaged: Vec<DamagedChunk>,
    /// A record that ended the scan early (a truncated file): location and detail.
    cut: Option<(String, String)>,
    order: usize,
    from_summary: bool,
}

/// The topics the reader uses, as resolved from the config and the bag.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct McapTopics {
    /// The sweeps' `PointCloud2` topic.
    pub pointcloud: String,
    /// The IMU topic, when one is used.
    pub imu: Option<String>,
    /// The odometry topic, when one is used.
    pub odometry: Option<String>,
    /// Whether `/tf` or `/tf_static` messages were read.
    pub tf: bool,
    /// The cameras used: `(image topic, CameraInfo topic)`.
    pub cameras: Vec<(String, String)>,
}

/// One readable sweep.
#[derive(Debug, Clone)]
struct SweepEntry {
    /// Position among all the topic's messages in log order (the frame's identity).
    ordinal: usize,
    loc: Loc,
    stamp_micros: i64,
    frame_id: String,
}

/// One camera: its images by stamp, its calibrations and its mounting.
struct CameraStream {
    name: String,
    topic: String,
    images: Vec<(i64, Loc, Kind)>,
    infos: Vec<(i64, CameraInfo)>,
    sensor_from_camera: Isometry3<f64>,
}

struct ImuStream {
    samples: Vec<ImuSample>,
    lidar_from_imu: UnitQuaternion<f64>,
}

enum Poses {
    None,
    Track { track: Track },
    Tf { world: String },
}

/// Random access to the sweeps of one ROS 2 MCAP bag.
pub struct McapSource {
    meta: SequenceMeta,
    config: McapConfig,
    topics: McapTopics,
    chunks: Vec<ChunkLoc>,
    sweeps: Vec<SweepEntry>,
    lidar_frame: String,
    tree: TfTree,
    poses: Poses,
    imu: Option<ImuStream>,
    imu_window: [i64; 2],
    cameras: Vec<CameraStream>,
    from_summary: bool,
}

fn mcap_error(e: mcap::McapError) -> String {
    e.to_string()
}

fn read_exact_at(file: &mut File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_le_bytes(b))
}

/// Reads the record at `offset` whose opcode must be `opcode`: its body, at most `limit` bytes.
fn read_record(file: &mut File, offset: u64, opcode: u8, limit: u64) -> Result<Vec<u8>, String> {
    let mut head = [0u8; 9];
    read_exact_at(file, offset, &mut head).map_err(|e| format!("reading the record header: {e}"))?;
    if head[0] != opcode {
        return Err(format!("opcode {:#04x} where {opcode:#04x} was indexed", head[0]));
    }
    let len = le_u64(&head, 1).unwrap_or(u64::MAX);
    if len > limit {
        return Err(format!("record of {len} bytes is over the {limit}-byte limit"));
    }
    // `read_to_end` into exact capacity fills the buffer without zeroing it first.
    let mut body = Vec::with_capacity(len as usize);
    let read = file
        .take(len)
        .read_to_end(&mut body)
        .map_err(|e| format!("record of {len} bytes: {e}"))?;
    if read as u64 != len {
        return Err(format!("record of {len} bytes: the file ends after {read}"));
    }
    Ok(body)
}

/// The decompressed records of a chunk record's body when its codec is read here directly (none,
/// zstd: one decompression into one buffer); `None` for another (lz4), read through
/// [`chunk_records`].
fn chunk_payload(body: &[u8], limit: u64) -> Result<Option<std::borrow::Cow<'_, [u8]>>, String> {
    // Chunk body: start, end (u64), uncompressed size (u64), crc (u32), compression (string),
    // records length (u64), records.
    let truncated = || "chunk header is truncated".to_string();
    let uncompressed = le_u64(body, 16).ok_or_else(truncated)?;
    if uncompressed > limit {
        return Err(format!(
            "chunk of {uncompressed} uncompressed bytes is over the {limit}-byte limit (`max_chunk_bytes`)"
        ));
    }
    let name_len = body
        .get(28..32)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(truncated)?;
    let name = body.get(32..32 + name_len).ok_or_else(truncated)?;
    let at = 32 + name_len;
    let records_len = le_u64(body, at).ok_or_else(truncated)?;
    let records = usize::try_from(records_len)
        .ok()
        .and_then(|n| body.get(at + 8..(at + 8).checked_add(n)?))
        .ok_or_else(|| format!("chunk records of {records_len} bytes run past the record"))?;
    match name {
        b"" => Ok(Some(std::borrow::Cow::Borrowed(records))),
        b"zstd" => {
            let out = decompress_zstd(records, uncompressed as usize)?;
            if out.len() as u64 != uncompressed {
                return Err(format!(
                    "chunk decompressed to {} bytes, its header says {uncompressed}",
                    out.len()
                ));
            }
            Ok(Some(std::borrow::Cow::Owned(out)))
        }
        _ => Ok(None),
    }
}

/// Decompresses one zstd chunk into `capacity` bytes, with this thread's decompression context
/// (made once per thread, not once per chunk).
fn decompress_zstd(records: &[u8], capacity: usize) -> Result<Vec<u8>, String> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|context| {
        let mut context = context.borrow_mut();
        let decompressor = match context.as_mut() {
            Some(d) => d,
            None => context.insert(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?),
        };
        decompressor
            .decompress(records, capacity)
            .map_err(|e| format!("zstd: {e}"))
    })
}

/// A message record's body: channel, log time and data.
fn message_parts(body: &[u8]) -> Option<(u16, u64, &[u8])> {
    Some((le_u16(body, 0)?, le_u64(body, 6)?, body.get(22..)?))
}

/// Calls `f(offset, opcode, body)` for each record of a chunk's body, decompressing it; with
/// `check_crc` the chunk's CRC is checked at the end, so a caller keeps what `f` saw only when this
/// returns `Ok`. The index checks every chunk's CRC once at open; a frame read does not again.
fn chunk_records(body: &[u8], limit: u64, check_crc: bool, f: &mut RecordFn<'_>) -> Result<(), String> {
    // Chunk body: start, end (u64), uncompressed size (u64), crc (u32), compression, …
    let uncompressed = le_u64(body, 16).ok_or("chunk header is truncated")?;
    if uncompressed > limit {
        return Err(format!(
            "chunk of {uncompressed} uncompressed bytes is over the {limit}-byte limit (`max_chunk_bytes`)"
        ));
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_skip_start_magic(true)
            .with_skip_end_magic(true)
            .with_validate_chunk_crcs(check_crc)
            .with_record_length_limit(limit),
    );
    let mut head = [0u8; 9];
    head[0] = op::CHUNK;
    head[1..].copy_from_slice(&(body.len() as u64).to_le_bytes());
    let mut parts = [&head[..], body];
    let mut offset = 0u64;
    while let Some(event) = reader.next_event() {
        match event.map_err(mcap_error)? {
            LinearReadEvent::ReadRequest(need) => {
                let src = parts.iter_mut().find(|p| !p.is_empty());
                match src {
                    Some(src) => {
                        let n = need.min(src.len());
                        let (now, rest) = src.split_at(n);
                        reader.insert(n).copy_from_slice(now);
                        reader.notify_read(n);
                        *src = rest;
                    }
                    None => reader.notify_read(0),
                }
            }
            LinearReadEvent::Record { data, opcode } => {
                f(offset, opcode, data)?;
                offset += 9 + data.len() as u64;
            }
        }
    }
    Ok(())
}

/// A message index record's body as `(log time, offset)` entries.
fn message_index_entries(body: &[u8]) -> Option<(u16, Vec<(u64, u64)>)> {
    let channel = le_u16(body, 0)?;
    let len = u32::from_le_bytes(body.get(2..6)?.try_into().ok()?) as usize;
    let entries = body.get(6..6usize.checked_add(len)?)?;
    Some((
        channel,
        entries
            .chunks_exact(16)
            .filter_map(|e| Some((le_u64(e, 0)?, le_u64(e, 8)?)))
            .collect(),
    ))
}

impl Scan {
    fn record(&mut self, opcode: u8, body: &[u8], loc: Loc, max_message: u64) -> Result<(), String> {
        match opcode {
            op::SCHEMA | op::CHANNEL => match mcap::parse_record(opcode, body).map_err(mcap_error)? {
                mcap::records::Record::Schema { header, .. } => {
                    self.schemas.insert(header.id, header.name);
                }
                mcap::records::Record::Channel(c) => {
                    if let Some(kind) = self.schemas.get(&c.schema_id).and_then(|s| Kind::of_schema(s)) {
                        self.channels.insert(
                            c.id,
                            ChannelInfo {
                                topic: c.topic,
                                kind,
                                encoding: c.message_encoding,
                            },
                        );
                    }
                }
                _ => {}
            },
            op::MESSAGE => {
                let (channel, log_time, data) = message_parts(body).ok_or("message record is truncated")?;
                let Some(info) = self.channels.get(&channel) else {
                    return Ok(());
                };
                let kind = info.kind;
                if data.len() as u64 > max_message {
                    let detail = format!(
                        "message of {} bytes is over the {max_message}-byte limit (`max_message_bytes`)",
                        data.len()
                    );
                    return self.bad(channel, log_time, loc, kind, detail);
                }
                if info.encoding != "cdr" {
                    return Ok(());
                }
                if kind.is_large() {
                    let header = Header::decode_prefix(data).map_err(|e| format!("{}: {e}", kind.name()));
                    self.large.push(Located {
                        channel,
                        log_time,
                        order: self.order,
                        loc,
                        header,
                    });
                    self.order += 1;
                    return Ok(());
                }
                let decoded = match kind {
                    Kind::Imu => Imu::decode(data).map(|m| Small::Imu(Box::new(m))),
                    Kind::Odometry => Odometry::decode(data).map(|m| Small::Odometry(Box::new(m))),
                    Kind::Tf => TfMessage::decode(data).map(Small::Tf),
                    _ => CameraInfo::decode(data).map(|m| Small::CameraInfo(Box::new(m))),
                };
                match decoded {
                    Ok(m) => self.small.push((channel, log_time, m)),
                    Err(e) => self.bad_small.push((channel, loc, format!("{}: {e}", kind.name()))),
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn bad(&mut self, channel: u16, log_time: u64, loc: Loc, kind: Kind, detail: String) -> Result<(), String> {
        if kind.is_large() {
            self.large.push(Located {
                channel,
                log_time,
                order: self.order,
                loc,
                header: Err(detail),
            });
            self.order += 1;
        } else {
            self.bad_small.push((channel, loc, detail));
        }
        Ok(())
    }

    /// Reads one chunk's records; on damage nothing of it is kept and it is listed as damaged.
    fn chunk(&mut self, chunk: usize, body: Result<Vec<u8>, String>, config: &McapConfig) {
        let Some(loc) = self.chunks.get(chunk).copied() else {
            return;
        };
        let mut part = Scan {
            schemas: std::mem::take(&mut self.schemas),
            channels: std::mem::take(&mut self.channels),
            order: self.order,
            ..Scan::default()
        };
        let result = body.and_then(|body| {
            chunk_records(&body, config.max_chunk_bytes, true, &mut |offset, opcode, data| {
                part.record(opcode, data, Loc::Chunk { chunk, offset }, config.max_message_bytes)
            })
        });
        self.schemas = std::mem::take(&mut part.schemas);
        self.channels = std::mem::take(&mut part.channels);
        match result {
            Ok(()) => {
                self.order = part.order;
                self.large.append(&mut part.large);
                self.small.append(&mut part.small);
                self.bad_small.append(&mut part.bad_small);
            }
            Err(detail) => self.damaged.push(DamagedChunk {
                offset: loc.offset,
                detail,
                messages: None,
            }),
        }
    }
}

impl McapSource {
    /// Opens `path`, refusing anything that does not start with the MCAP magic before reading data.
    pub fn open(path: &Path, config: McapConfig) -> Result<Self, SourceError> {
        let mut file = File::open(path).map_err(|e| SourceError::io(path, e))?;
        let mut magic = [0u8; 8];
        let is_mcap = match file.read_exact(&mut magic) {
            Ok(()) => magic == mcap::MAGIC,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
            Err(e) => return Err(SourceError::io(path, e)),
        };
        if !is_mcap || path.is_dir() {
            return Err(SourceError::Incompatible {
                path: path.to_path_buf(),
                kind: KIND,
            });
        }
        let size = file.metadata().map_err(|e| SourceError::io(path, e))?.len();
        let mut scan = Scan::default();
        match read_summary(&mut file, size) {
            Ok(Some(summary)) if !summary.chunk_indexes.is_empty() => {
                scan_indexed(&mut file, &summary, &mut scan, &config);
            }
            Ok(_) => scan_linear(path, &mut scan, &config)?,
            Err(e) => {
                tracing::warn!("{}: summary unreadable ({e}); scanning the file", path.display());
                scan_linear(path, &mut scan, &config)?;
            }
        }
        Self::build(path, config, scan)
    }

    fn build(path: &Path, config: McapConfig, scan: Scan) -> Result<Self, SourceError> {
        let Scan {
            channels,
            chunks,
            large,
            small,
            bad_small,
            damaged,
            cut,
            from_summary,
            ..
        } = scan;
        let fail = config.on_corrupt == OnCorrupt::Fail;
        if let (true, Some(d)) = (fail, damaged.first()) {
            return Err(SourceError::corrupt(
                path,
                format!("chunk at offset {}", d.offset),
                d.detail.clone(),
            ));
        }
        if let (true, Some((location, detail))) = (fail, &cut) {
            return Err(SourceError::corrupt(path, location.clone(), detail.clone()));
        }
        let topics_of = |kind: Kind| -> Vec<String> {
            let mut t: Vec<String> = channels
                .values()
                .filter(|c| c.kind == kind)
                .map(|c| c.topic.clone())
                .collect();
            t.sort();
            t.dedup();
            t
        };
        let list = |t: &[String]| t.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
        let check_topic = |topic: &str, kinds: &[Kind], key: &str| -> Result<(), SourceError> {
            let found: Vec<&ChannelInfo> = channels.values().filter(|c| c.topic == topic).collect();
            if found.is_empty() {
                let known = kinds.iter().flat_map(|&k| topics_of(k)).collect::<Vec<_>>();
                return Err(SourceError::Missing {
                    path: path.to_path_buf(),
                    what: format!(
                        "topic `{topic}` (`{key}`; the bag's {} topics: {})",
                        kinds[0].name(),
                        list(&known)
                    ),
                });
            }
            if let Some(c) = found.iter().find(|c| !kinds.contains(&c.kind)) {
                return Err(SourceError::corrupt(
                    path,
                    format!("topic `{topic}`"),
                    format!("is {}, not {} (`{key}`)", c.kind.name(), kinds[0].name()),
                ));
            }
            if let Some(c) = found.iter().find(|c| c.encoding != "cdr") {
                return Err(SourceError::corrupt(
                    path,
                    format!("topic `{topic}`"),
                    format!("message encoding `{}` is not read (only ROS 2 `cdr`)", c.encoding),
                ));
            }
            Ok(())
        };
        let pick = |configured: &Option<String>, kind: Kind, key: &str| -> Result<Option<String>, SourceError> {
            if let Some(t) = configured {
                check_topic(t, &[kind], key)?;
                return Ok(Some(t.clone()));
            }
            let all = topics_of(kind);
            match all.as_slice() {
                [] => Ok(None),
                [one] => {
                    check_topic(one, &[kind], key)?;
                    Ok(Some(one.clone()))
                }
                many => {
                    tracing::warn!(
                        "{}: {} {} topics ({}); none used, set `mcap.{key}`",
                        path.display(),
                        many.len(),
                        kind.name(),
                        list(many)
                    );
                    Ok(None)
                }
            }
        };
        let pointcloud = match &config.pointcloud_topic {
            Some(t) => {
                check_topic(t, &[Kind::PointCloud], "pointcloud_topic")?;
                t.clone()
            }
            None => {
                let all = topics_of(Kind::PointCloud);
                match all.as_slice() {
                    [one] => {
                        check_topic(one, &[Kind::PointCloud], "pointcloud_topic")?;
                        one.clone()
                    }
                    [] => {
                        return Err(SourceError::Missing {
                            path: path.to_path_buf(),
                            what: "a sensor_msgs/PointCloud2 topic".into(),
                        });
                    }
                    many => {
                        return Err(SourceError::Missing {
                            path: path.to_path_buf(),
                            what: format!(
                                "`mcap.pointcloud_topic`: the bag has {} PointCloud2 topics ({}), name one",
                                many.len(),
                                list(many)
                            ),
                        });
                    }
                }
            }
        };
        let imu_topic = pick(&config.imu_topic, Kind::Imu, "imu_topic")?;
        let odometry_topic = pick(&config.odometry_topic, Kind::Odometry, "odometry_topic")?;
        let channels_of = |topic: &str| -> HashSet<u16> {
            channels
                .iter()
                .filter(|(_, c)| c.topic == topic)
                .map(|(&id, _)| id)
                .collect()
        };
        let pc_channels = channels_of(&pointcloud);

        // Sweeps in log order: readable ones, bad ones, and those of damaged chunks.
        let mut skipped = Vec::new();
        enum Slot {
            Good(Loc, Header),
            Bad(String, String),
        }
        let mut slots: Vec<(u64, usize, Slot)> = Vec::new();
        let mut images: HashMap<u16, Vec<(i64, Loc)>> = HashMap::new();
        for m in large {
            if pc_channels.contains(&m.channel) {
                let slot = match m.header {
                    Ok(h) => Slot::Good(m.loc, h),
                    Err(e) => Slot::Bad(m.loc.describe(&chunks), e),
                };
                slots.push((m.log_time, m.order, slot));
            } else if let Ok(h) = m.header {
                images.entry(m.channel).or_default().push((h.stamp.micros(), m.loc));
            }
        }
        for d in &damaged {
            let location = format!("chunk at offset {}", d.offset);
            match &d.messages {
                Some(messages) => {
                    let mut sweeps = 0;
                    for &(channel, log_time) in messages {
                        if pc_channels.contains(&channel) {
                            sweeps += 1;
                            slots.push((log_time, usize::MAX, Slot::Bad(location.clone(), d.detail.clone())));
                        }
                    }
                    if sweeps == 0 {
                        tracing::warn!("{}: {location}: {}; skipped (no sweep in it)", path.display(), d.detail);
                        skipped.push(SkippedRecord {
                            location: location.clone(),
                            detail: format!("{} (no sweep of `{pointcloud}` in it)", d.detail),
                        });
                    }
                }
                None => {
                    tracing::warn!("{}: {location}: {}; skipped", path.display(), d.detail);
                    skipped.push(SkippedRecord {
                        location,
                        detail: format!(
                            "{} (its messages are not indexed; later sweeps may be renumbered)",
                            d.detail
                        ),
                    });
                }
            }
        }
        if let Some((location, detail)) = &cut {
            tracing::warn!(
                "{}: {location}: {detail}; the rest of the file is not read",
                path.display()
            );
            skipped.push(SkippedRecord {
                location: location.clone(),
                detail: format!("{detail}; the rest of the file is not read"),
            });
        }
        slots.sort_by_key(|s| (s.0, s.1));
        let mut sweeps = Vec::new();
        for (ordinal, (log_time, _, slot)) in slots.into_iter().enumerate() {
            match slot {
                Slot::Good(loc, header) => sweeps.push(SweepEntry {
                    ordinal,
                    loc,
                    stamp_micros: header.stamp.micros(),
                    frame_id: header.frame_id,
                }),
                Slot::Bad(location, detail) => {
                    let detail = format!("sweep {ordinal} (log time {log_time} ns): {detail}");
                    if fail {
                        return Err(SourceError::corrupt(path, location, detail));
                    }
                    tracing::warn!("{}: {location}: {detail}; skipped", path.display());
                    skipped.push(SkippedRecord { location, detail });
                }
            }
        }

        // Small messages of the topics used.
        let imu_channels = imu_topic.as_deref().map(channels_of).unwrap_or_default();
        let odom_channels = odometry_topic.as_deref().map(channels_of).unwrap_or_default();
        let tf_channels = if config.tf {
            channels_of(TF_TOPIC)
        } else {
            HashSet::new()
        };
        let tf_static_channels = if config.tf {
            channels_of(TF_STATIC_TOPIC)
        } else {
            HashSet::new()
        };
        let image_topics: Vec<String> = match &config.image_topics {
            Some(t) => {
                for topic in t {
                    check_topic(topic, &[Kind::Image, Kind::CompressedImage], "image_topics")?;
                }
                t.clone()
            }
            None => {
                let mut t = topics_of(Kind::Image);
                t.extend(topics_of(Kind::CompressedImage));
                t.sort();
                t
            }
        };
        let mut camera_topics = Vec::new();
        for image_topic in &image_topics {
            let info_topic = match config.camera_info_topics.get(image_topic) {
                Some(t) => {
                    check_topic(t, &[Kind::CameraInfo], "camera_info_topics")?;
                    t.clone()
                }
                None => camera_info_beside(image_topic),
            };
            camera_topics.push((image_topic.clone(), info_topic));
        }
        let info_channels: HashMap<u16, usize> = camera_topics
            .iter()
            .enumerate()
            .flat_map(|(k, (_, info))| channels_of(info).into_iter().map(move |c| (c, k)))
            .collect();
        for (channel, loc, detail) in &bad_small {
            let used = imu_channels.contains(channel)
                || odom_channels.contains(channel)
                || tf_channels.contains(channel)
                || tf_static_channels.contains(channel)
                || info_channels.contains_key(channel);
            if !used {
                continue;
            }
            let location = loc.describe(&chunks);
            let topic = channels.get(channel).map_or("?", |c| c.topic.as_str());
            let detail = format!("topic `{topic}`: {detail}");
            if fail {
                return Err(SourceError::corrupt(path, location, detail));
            }
            tracing::warn!("{}: {location}: {detail}; skipped", path.display());
            skipped.push(SkippedRecord { location, detail });
        }

        let mut imu_msgs = Vec::new();
        let mut odom_msgs = Vec::new();
        let mut tree = TfTree::default();
        let mut dynamic: DynamicEdges = HashMap::new();
        let mut infos: Vec<Vec<(i64, CameraInfo)>> = vec![Vec::new(); camera_topics.len()];
        let mut bad_transforms = 0usize;
        for (channel, _, m) in small {
            match m {
                Small::Imu(m) if imu_channels.contains(&channel) => imu_msgs.push(*m),
                Small::Odometry(m) if odom_channels.contains(&channel) => odom_msgs.push(*m),
                Small::Tf(m) if tf_static_channels.contains(&channel) => {
                    for t in m.transforms {
                        match t.transform.isometry() {
                            Some(iso) => tree.add_static(&t.header.frame_id, &t.child_frame_id, iso),
                            None => bad_transforms += 1,
                        }
                    }
                }
                Small::Tf(m) if tf_channels.contains(&channel) => {
                    for t in m.transforms {
                        match t.transform.isometry() {
                            Some(iso) => dynamic
                                .entry(t.child_frame_id.clone())
                                .or_insert_with(|| (t.header.frame_id.clone(), Vec::new()))
                                .1
                                .push((t.header.stamp.micros(), iso)),
                            None => bad_transforms += 1,
                        }
                    }
                }
                Small::CameraInfo(m) => {
                    if let Some(list) = info_channels.get(&channel).and_then(|&k| infos.get_mut(k)) {
                        list.push((m.header.stamp.micros(), *m));
                    }
                }
                _ => {}
            }
        }
        if bad_transforms > 0 {
            tracing::warn!(
                "{}: {bad_transforms} transforms with a non-finite value or a non-unit quaternion ignored",
                path.display()
            );
        }
        tree.add_dynamic(dynamic);
        let has_tf = !tree.is_empty();

        let lidar_frame = sweeps.first().map(|s| s.frame_id.clone()).unwrap_or_default();
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "mcap".to_string());
        let say = |what: String| tracing::info!("{}: {what}", path.display());

        // IMU, rotated into the LiDAR frame.
        let imu = if imu_msgs.is_empty() {
            say("no IMU samples: frames get none".into());
            None
        } else {
            let imu_frame = imu_msgs.first().map(|m| m.header.frame_id.clone()).unwrap_or_default();
            let rotation = if imu_frame.is_empty() || imu_frame == lidar_frame {
                Some(UnitQuaternion::identity())
            } else {
                tree.lookup(&lidar_frame, &imu_frame, None).map(|iso| iso.rotation)
            };
            match rotation {
                None => {
                    say(format!(
                        "no /tf_static chain from IMU frame `{imu_frame}` to LiDAR frame `{lidar_frame}`: frames get no IMU samples"
                    ));
                    None
                }
                Some(lidar_from_imu) => {
                    let mut samples: Vec<ImuSample> = imu_msgs
                        .iter()
                        .filter(|m| {
                            m.angular_velocity
                                .iter()
                                .chain(&m.linear_acceleration)
                                .all(|v| v.is_finite())
                        })
                        .map(|m| ImuSample {
                            timestamp_micros: m.header.stamp.micros(),
                            accel_mps2: lidar_from_imu * msgs::vector(m.linear_acceleration),
                            gyro_radps: lidar_from_imu * msgs::vector(m.angular_velocity),
                        })
                        .collect();
                    samples.sort_by_key(|s| s.timestamp_micros);
                    Some(ImuStream {
                        samples,
                        lidar_from_imu,
                    })
                }
            }
        };

        // Poses: odometry (composed with the fixed child → LiDAR mounting), else /tf.
        let poses = if let Some(first) = odom_msgs.first() {
            let child = first.child_frame_id.clone();
            let child_from_lidar = if child.is_empty() || child == lidar_frame {
                Some(Isometry3::identity())
            } else {
                tree.lookup(&child, &lidar_frame, None)
            };
            match child_from_lidar {
                None => {
                    say(format!(
                        "no /tf_static chain from odometry frame `{child}` to LiDAR frame `{lidar_frame}`: poses are identity"
                    ));
                    Poses::None
                }
                Some(child_from_lidar) => {
                    let samples = odom_msgs
                        .iter()
                        .filter_map(|m| Some((m.header.stamp.micros(), m.pose.isometry()? * child_from_lidar)))
                        .collect::<Vec<_>>();
                    Poses::Track {
                        track: Track::new(samples),
                    }
                }
            }
        } else if has_tf && tree.has_dynamic_above(&lidar_frame) {
            let world = config.world_frame.clone().unwrap_or_else(|| tree.root_of(&lidar_frame));
            Poses::Tf { world }
        } else {
            say("no odometry and no /tf chain above the LiDAR frame: poses are identity".into());
            Poses::None
        };

        // Cameras: images by stamp, their CameraInfo and mounting.
        let mut cameras = Vec::new();
        let mut used_cameras = Vec::new();
        for (k, (image_topic, info_topic)) in camera_topics.iter().enumerate() {
            let mut list = Vec::new();
            for (channel, entries) in &images {
                if let Some(c) = channels.get(channel).filter(|c| &c.topic == image_topic) {
                    list.extend(entries.iter().map(|&(t, loc)| (t, loc, c.kind)));
                }
            }
            list.sort_by_key(|e| e.0);
            let mut camera_infos = infos.get_mut(k).map(std::mem::take).unwrap_or_default();
            camera_infos.sort_by_key(|e| e.0);
            let Some((_, first_info)) = camera_infos.first() else {
                say(format!(
                    "camera `{image_topic}`: no CameraInfo on `{info_topic}`; not used"
                ));
                continue;
            };
            let camera_frame = first_info.header.frame_id.clone();
            let Some(sensor_from_camera) = tree.lookup(&lidar_frame, &camera_frame, None) else {
                say(format!(
                    "camera `{image_topic}`: no /tf_static chain from `{camera_frame}` to LiDAR frame `{lidar_frame}`; not used"
                ));
                continue;
            };
            if let Err(e) = first_info.distortion() {
                say(format!("camera `{image_topic}`: {e}; not used"));
                continue;
            }
            used_cameras.push((image_topic.clone(), info_topic.clone()));
            cameras.push(CameraStream {
                name: camera_name(image_topic),
                topic: image_topic.clone(),
                images: list,
                infos: camera_infos,
                sensor_from_camera,
            });
        }

        let mut stamps: Vec<i64> = sweeps.iter().map(|s| s.stamp_micros).collect();
        stamps.sort_unstable();
        let mut gaps: Vec<i64> = stamps.windows(2).map(|w| w[1] - w[0]).filter(|&g| g > 0).collect();
        gaps.sort_unstable();
        let period = gaps.get(gaps.len() / 2).copied().unwrap_or(100_000);
        let imu_window = config.imu_window_micros.unwrap_or([-period / 2, period - period / 2]);
        let topics = McapTopics {
            pointcloud,
            imu: imu.as_ref().and(imu_topic),
            odometry: matches!(poses, Poses::Track { .. }).then_some(odometry_topic).flatten(),
            tf: has_tf,
            cameras: used_cameras,
        };
        Ok(McapSource {
            meta: SequenceMeta {
                name,
                platform: config.platform,
                source_kind: SOURCE_KIND,
                path: path.to_path_buf(),
                skipped,
            },
            config,
            topics,
            chunks,
            sweeps,
            lidar_frame,
            tree,
            poses,
            imu,
            imu_window,
            cameras,
            from_summary,
        })
    }

    /// The topics in use.
    pub fn topics(&self) -> &McapTopics {
        &self.topics
    }

    /// The configuration the source was opened with.
    pub fn config(&self) -> &McapConfig {
        &self.config
    }

    /// Whether the sweeps were indexed through the file's summary (else by a scan).
    pub fn indexed_from_summary(&self) -> bool {
        self.from_summary
    }

    /// The LiDAR frame (the first sweep's `header.frame_id`).
    pub fn lidar_frame(&self) -> &str {
        &self.lidar_frame
    }

    /// The IMU window around a sweep's stamp (µs, `[lo, hi)`).
    pub fn imu_window_micros(&self) -> [i64; 2] {
        self.imu_window
    }

    /// `lidar_from_imu` rotation applied to the IMU samples, when IMU samples are used.
    pub fn lidar_from_imu(&self) -> Option<UnitQuaternion<f64>> {
        self.imu.as_ref().map(|s| s.lidar_from_imu)
    }

    /// Calls `f` on the data of the message at `loc`, reading (and decompressing) its chunk only.
    fn with_message<R>(&self, loc: Loc, f: impl FnOnce(&[u8]) -> Result<R, String>) -> Result<R, String> {
        let path = &self.meta.path;
        let mut file = File::open(path).map_err(|e| e.to_string())?;
        let limit = self.config.max_message_bytes;
        match loc {
            Loc::Record { offset } => {
                let body = read_record(&mut file, offset, op::MESSAGE, limit.saturating_add(22))?;
                let (_, _, data) = message_parts(&body).ok_or("message record is truncated")?;
                f(data)
            }
            Loc::Chunk { chunk, offset } => {
                let c = self.chunks.get(chunk).ok_or("chunk not indexed")?;
                let body = read_record(&mut file, c.offset, op::CHUNK, self.config.max_chunk_bytes)?;
                if let Some(records) = chunk_payload(&body, self.config.max_chunk_bytes)? {
                    let at = usize::try_from(offset).map_err(|e| e.to_string())?;
                    let len = match records.get(at) {
                        Some(&op::MESSAGE) => le_u64(&records, at + 1),
                        _ => None,
                    };
                    let record = len
                        .and_then(|n| usize::try_from(n).ok())
                        .and_then(|n| records.get(at + 9..(at + 9).checked_add(n)?));
                    let (_, _, data) = record
                        .and_then(message_parts)
                        .ok_or_else(|| format!("no message at offset {offset} of the chunk"))?;
                    if data.len() as u64 > limit {
                        return Err(format!(
                            "message of {} bytes is over the {limit}-byte limit (`max_message_bytes`)",
                            data.len()
                        ));
                    }
                    return f(data);
                }
                let mut f = Some(f);
                let mut out = None;
                chunk_records(&body, self.config.max_chunk_bytes, false, &mut |at, opcode, data| {
                    if at == offset && opcode == op::MESSAGE {
                        let (_, _, data) = message_parts(data).ok_or("message record is truncated")?;
                        if data.len() as u64 > limit {
                            return Err(format!(
                                "message of {} bytes is over the {limit}-byte limit (`max_message_bytes`)",
                                data.len()
                            ));
                        }
                        if let Some(f) = f.take() {
                            out = Some(f(data));
                        }
                    }
                    Ok(())
                })?;
                out.ok_or_else(|| format!("no message at offset {offset} of the chunk"))?
            }
        }
    }

    fn pose(&self, stamp: i64) -> Option<Isometry3<f64>> {
        let tol = self.config.pose_tolerance_micros;
        match &self.poses {
            Poses::None => Some(Isometry3::identity()),
            Poses::Track { track } => track.at(stamp, tol),
            Poses::Tf { world } => self.tree.lookup(world, &self.lidar_frame, Some((stamp, tol))),
        }
    }

    fn camera_view(&self, camera: &CameraStream, stamp: i64) -> Result<Option<CameraView>, String> {
        let stamp = stamp.saturating_add(self.config.image_offset_micros);
        let Some(k) = nearest(&camera.images, stamp, |e| e.0) else {
            return Ok(None);
        };
        let Some(&(t, loc, kind)) = camera.images.get(k) else {
            return Ok(None);
        };
        if (t - stamp).abs() > self.config.image_tolerance_micros {
            return Ok(None);
        }
        let Some((_, info)) = nearest(&camera.infos, t, |e| e.0).and_then(|i| camera.infos.get(i)) else {
            return Ok(None);
        };
        let (data, width, height) = self.with_message(loc, |bytes| match kind {
            Kind::Image => {
                let m = Image::decode(bytes).map_err(|e| format!("{}: {e}", Image::NAME))?;
                let rgb = m.to_rgb()?;
                let (w, h) = rgb.dimensions();
                Ok((ImageData::Decoded(Arc::new(rgb)), w, h))
            }
            _ => {
                let m = CompressedImage::decode(bytes).map_err(|e| format!("{}: {e}", CompressedImage::NAME))?;
                Ok((ImageData::Encoded(Arc::from(m.data.as_ref())), info.width, info.height))
            }
        })?;
        let (fx, fy, cx, cy) = info.intrinsics();
        let calibration = CameraCalibration {
            width,
            height,
            fx,
            fy,
            cx,
            cy,
            distortion: info.distortion()?,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: camera.sensor_from_camera,
        };
        Ok(Some(CameraView::new(camera.name.clone(), calibration, t, data)))
    }
}

/// `<ns>/camera_info` for `<ns>/<image>` or `<ns>/<image>/compressed`.
fn camera_info_beside(image_topic: &str) -> String {
    let base = image_topic.strip_suffix("/compressed").unwrap_or(image_topic);
    match base.rsplit_once('/') {
        Some((ns, _)) => format!("{ns}/camera_info"),
        None => "camera_info".to_string(),
    }
}

/// The camera name of an image topic: its namespace without the leading `/` (`/front/image_raw` → `front`).
fn camera_name(image_topic: &str) -> String {
    let base = image_topic.strip_suffix("/compressed").unwrap_or(image_topic);
    let ns = base.rsplit_once('/').map_or(base, |(ns, _)| ns);
    let name = ns.trim_start_matches('/');
    if name.is_empty() {
        image_topic.trim_start_matches('/').to_string()
    } else {
        name.to_string()
    }
}

/// Index of the item whose time (`key`) is closest to `t` in `items` sorted by it.
fn nearest<T>(items: &[T], t: i64, key: impl Fn(&T) -> i64) -> Option<usize> {
    let i = items.partition_point(|x| key(x) < t);
    let after = items.get(i).map(&key);
    let before = i.checked_sub(1).and_then(|b| items.get(b)).map(&key);
    match (before, after) {
        (Some(b), Some(a)) => Some(if a - t < t - b { i } else { i - 1 }),
        (None, Some(_)) => Some(i),
        (Some(_), None) => Some(i - 1),
        (None, None) => None,
    }
}

/// Reads the summary section with a seeking reader; `None` when the file has none.
fn read_summary(file: &mut File, size: u64) -> Result<Option<mcap::Summary>, String> {
    let mut reader = SummaryReader::new_with_options(
        mcap::sans_io::SummaryReaderOptions::default()
            .with_file_size(size)
            .with_record_length_limit(256 << 20),
    );
    while let Some(event) = reader.next_event() {
        match event.map_err(mcap_error)? {
            SummaryReadEvent::ReadRequest(n) => {
                let read = file.read(reader.insert(n)).map_err(|e| e.to_string())?;
                reader.notify_read(read);
            }
            SummaryReadEvent::SeekRequest(to) => {
                let pos = file.seek(to).map_err(|e| e.to_string())?;
                reader.notify_seeked(pos);
            }
        }
    }
    Ok(reader.finish())
}

/// Indexes through the summary: its channels, then each chunk that may hold a message of ours.
fn scan_indexed(file: &mut File, summary: &mcap::Summary, scan: &mut Scan, config: &McapConfig) {
    scan.from_summary = true;
    for (id, schema) in &summary.schemas {
        scan.schemas.insert(*id, schema.name.clone());
    }
    for (id, c) in &summary.channels {
        if let Some(kind) = c.schema.as_ref().and_then(|s| Kind::of_schema(&s.name)) {
            scan.channels.insert(
                *id,
                ChannelInfo {
                    topic: c.topic.clone(),
                    kind,
                    encoding: c.message_encoding.clone(),
                },
            );
        }
    }
    let mut indexes: Vec<&mcap::records::ChunkIndex> = summary.chunk_indexes.iter().collect();
    indexes.sort_by_key(|c| c.chunk_start_offset);
    for index in indexes {
        let ours = index.message_index_offsets.is_empty()
            || index
                .message_index_offsets
                .keys()
                .any(|c| scan.channels.contains_key(c));
        if !ours {
            continue;
        }
        let chunk = scan.chunks.len();
        scan.chunks.push(ChunkLoc {
            offset: index.chunk_start_offset,
            length: Some(index.chunk_length),
        });
        let body = if index.chunk_length < 9 {
            Err(format!("indexed chunk length {} is too short", index.chunk_length))
        } else if index.chunk_length - 9 > config.max_chunk_bytes {
            Err(format!(
                "chunk of {} bytes is over the {}-byte limit (`max_chunk_bytes`)",
                index.chunk_length, config.max_chunk_bytes
            ))
        } else {
            read_record(file, index.chunk_start_offset, op::CHUNK, index.chunk_length - 9)
        };
        let damaged_before = scan.damaged.len();
        scan.chunk(chunk, body, config);
        if scan.damaged.len() > damaged_before {
            // The message indexes lie outside the chunk: they still say what it held.
            let mut messages = Vec::new();
            let mut known = !index.message_index_offsets.is_empty();
            for (&channel, &offset) in &index.message_index_offsets {
                if !scan.channels.contains_key(&channel) {
                    continue;
                }
                match read_record(file, offset, op::MESSAGE_INDEX, index.message_index_length.max(6))
                    .ok()
                    .and_then(|b| message_index_entries(&b))
                {
                    Some((_, entries)) => messages.extend(entries.into_iter().map(|(t, _)| (channel, t))),
                    None => known = false,
                }
            }
            if let Some(d) = scan.damaged.last_mut() {
                d.messages = known.then_some(messages);
            }
        }
    }
}

/// Indexes by reading the file front to back (no summary: a bag cut short, or written without one).
fn scan_linear(path: &Path, scan: &mut Scan, config: &McapConfig) -> Result<(), SourceError> {
    let file = File::open(path).map_err(|e| SourceError::io(path, e))?;
    let mut input = BufReader::with_capacity(1 << 20, file);
    let mut reader = LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_emit_chunks(true)
            .with_skip_end_magic(true)
            .with_record_length_limit(usize::try_from(config.max_chunk_bytes).unwrap_or(usize::MAX)),
    );
    let mut pos = mcap::MAGIC.len() as u64;
    let mut after_damaged = false;
    let mut summary_reached = false;
    while let Some(event) = reader.next_event() {
        match event {
            Ok(LinearReadEvent::ReadRequest(n)) => {
                let read = input.read(reader.insert(n)).map_err(|e| SourceError::io(path, e))?;
                reader.notify_read(read);
            }
            Ok(LinearReadEvent::Record { data, opcode }) => {
                let at = pos;
                pos += 9 + data.len() as u64;
                if summary_reached {
                    continue;
                }
                match opcode {
                    op::CHUNK => {
                        let chunk = scan.chunks.len();
                        scan.chunks.push(ChunkLoc {
                            offset: at,
                            length: Some(9 + data.len() as u64),
                        });
                        let damaged_before = scan.damaged.len();
                        scan.chunk(chunk, Ok(data.to_vec()), config);
                        after_damaged = scan.damaged.len() > damaged_before;
                        if let Some(d) = scan.damaged.last_mut().filter(|_| after_damaged) {
                            d.messages = Some(Vec::new());
                        }
                        continue;
                    }
                    op::MESSAGE_INDEX if after_damaged => {
                        let entries = message_index_entries(data);
                        if let Some(d) = scan.damaged.last_mut() {
                            match (entries, d.messages.as_mut()) {
                                (Some((channel, entries)), Some(list)) => {
                                    list.extend(entries.into_iter().map(|(t, _)| (channel, t)))
                                }
                                _ => d.messages = None,
                            }
                        }
                        continue;
                    }
                    op::DATA_END => summary_reached = true,
                    _ => {}
                }
                after_damaged = false;
                if let Err(detail) = scan.record(opcode, data, Loc::Record { offset: at }, config.max_message_bytes) {
                    scan.bad_small.push((u16::MAX, Loc::Record { offset: at }, detail));
                }
            }
            Err(e) => {
                // The file ends inside a record (a bag cut short) or a record cannot be parsed.
                let mut file = File::open(path).map_err(|e| SourceError::io(path, e))?;
                let mut opcode = [0u8; 1];
                let what = match read_exact_at(&mut file, pos, &mut opcode) {
                    Ok(()) if opcode[0] == op::CHUNK => "chunk",
                    _ => "record",
                };
                scan.cut = Some((format!("{what} at offset {pos}"), e.to_string()));
                break;
            }
        }
    }
    // Messages of a damaged chunk named by no message index are unknown.
    for d in &mut scan.damaged {
        if d.messages.as_ref().is_some_and(|m| m.is_empty()) {
            d.messages = None;
        }
    }
    Ok(())
}

impl Source for McapSource {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.sweeps.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let path = &self.meta.path;
        let entry = self.sweeps.get(index).ok_or_else(|| SourceError::FrameOutOfRange {
            path: path.clone(),
            index,
            len: self.sweeps.len(),
        })?;
        let location = format!("sweep {} ({})", entry.ordinal, entry.loc.describe(&self.chunks));
        let non_finite = self.config.non_finite;
        let decoded: Decoded = self
            .with_message(entry.loc, |data| {
                let msg = PointCloud2::decode(data).map_err(|e| format!("{}: {e}", PointCloud2::NAME))?;
                let layout = msg.point_layout()?;
                layout
                    .decode_rows(
                        &msg.data,
                        msg.width as usize,
                        msg.height as usize,
                        msg.row_step as usize,
                        non_finite,
                    )
                    .map_err(|e| format!("point data: {e}"))
            })
            .map_err(|detail| SourceError::corrupt(path, location.clone(), detail))?;
        let mut notes: Vec<String> = decoded.note().into_iter().collect();
        let stamp = entry.stamp_micros;
        if entry.frame_id != self.lidar_frame {
            notes.push(format!(
                "frame_id `{}` differs from the LiDAR frame `{}` the transforms were resolved for",
                entry.frame_id, self.lidar_frame
            ));
        }
        let world_from_sensor = self.pose(stamp).unwrap_or_else(|| {
            notes.push(format!(
                "no pose within {} µs of the stamp: world_from_sensor is identity",
                self.config.pose_tolerance_micros
            ));
            Isometry3::identity()
        });
        let imu = match &self.imu {
            None => Vec::new(),
            Some(stream) => {
                let [lo, hi] = self.imu_window;
                let (from, to) = (stamp.saturating_add(lo), stamp.saturating_add(hi));
                let a = stream.samples.partition_point(|s| s.timestamp_micros < from);
                let b = stream.samples.partition_point(|s| s.timestamp_micros < to);
                stream.samples.get(a..b.max(a)).unwrap_or_default().to_vec()
            }
        };
        let mut cameras = Vec::new();
        for camera in &self.cameras {
            match self.camera_view(camera, stamp) {
                Ok(Some(view)) => cameras.push(view),
                Ok(None) => {}
                Err(detail) => {
                    let detail = format!("camera `{}`: {detail}", camera.topic);
                    if self.config.on_corrupt == OnCorrupt::Fail {
                        return Err(SourceError::corrupt(path, location, detail));
                    }
                    tracing::warn!("{}: {location}: {detail}; camera left out", path.display());
                    notes.push(format!("{detail}; camera left out"));
                }
            }
        }
        Ok(Frame {
            sequence: self.meta.name.clone(),
            index: entry.ordinal,
            timestamp_micros: stamp,
            platform: self.meta.platform,
            cloud: decoded.cloud,
            world_from_sensor,
            imu,
            cameras,
            ground_truth: Vec::new(),
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camera_topics_follow_the_ros_naming_convention() {
        assert_eq!(camera_info_beside("/cam/front/image_raw"), "/cam/front/camera_info");
        assert_eq!(
            camera_info_beside("/cam/front/image_raw/compressed"),
            "/cam/front/camera_info"
        );
        assert_eq!(camera_name("/ovc_rgb/image_raw/compressed"), "ovc_rgb");
        assert_eq!(camera_name("/image_raw"), "image_raw");
    }

    #[test]
    fn config_reads_from_toml_with_defaults_and_rejects_unknown_keys() {
        let c: McapConfig =
            toml::from_str("pointcloud_topic = \"/os/points\"\non_corrupt = \"fail\"\nimu_window_micros = [0, 100000]")
                .unwrap();
        assert_eq!(c.pointcloud_topic.as_deref(), Some("/os/points"));
        assert_eq!(c.on_corrupt, OnCorrupt::Fail);
        assert_eq!(c.imu_window_micros, Some([0, 100_000]));
        assert!(c.tf);
        assert!(toml::from_str::<McapConfig>("pointcloud = \"/x\"").is_err());
    }

    #[test]
    fn nearest_picks_the_closest_time() {
        let t = [0i64, 100, 200];
        let n = |x| nearest(&t, x, |v| *v);
        assert_eq!(
            (n(-5), n(49), n(51), n(151), n(999)),
            (Some(0), Some(0), Some(1), Some(2), Some(2))
        );
        assert_eq!(nearest(&[] as &[i64], 1, |v| *v), None);
    }

    #[test]
    fn non_mcap_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.mcap");
        std::fs::write(&p, b"not an mcap").unwrap();
        let e = McapSource::open(&p, McapConfig::default()).err().unwrap();
        assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
        std::fs::write(&p, b"").unwrap();
        let e = McapSource::open(&p, McapConfig::default()).err().unwrap();
        assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
    }
}
