//! Waymo range images → points (reference `waymo-format.md` §2): zlib inflate, reversed
//! inclinations per row, the column → azimuth formula with the extrinsic yaw correction, the
//! extrinsic, and for TOP the per-pixel pose followed by the inverse frame pose.
//! Also the inverse mapping the simulator uses to build range images from points.

use std::f64::consts::PI;

use nalgebra::{Isometry3, Matrix3, Point3, Vector3};
use prost::Message;

use super::proto;
use crate::geometry::pose::rotation_from_euler;

/// A decoded `MatrixFloat` with dims `[height, width, channels]`, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeImageData {
    /// Rows (beams).
    pub height: usize,
    /// Columns (azimuth bins).
    pub width: usize,
    /// Values per pixel (4 for range images, 6 for poses).
    pub channels: usize,
    /// `height × width × channels` values; pixel (h, w) channel c is at `(h·W + w)·C + c`.
    pub data: Vec<f32>,
}

impl RangeImageData {
    /// The value at row `h`, column `w`, channel `c`, or `None` outside the image.
    pub fn get(&self, h: usize, w: usize, c: usize) -> Option<f32> {
        if h >= self.height || w >= self.width || c >= self.channels {
            return None;
        }
        self.data.get((h * self.width + w) * self.channels + c).copied()
    }

    /// Checks a `MatrixFloat`'s shape against its data and its channel count against `channels`.
    pub fn from_matrix(m: proto::MatrixFloat, channels: usize) -> Result<Self, String> {
        let dims = m.shape.map(|s| s.dims).unwrap_or_default();
        let [h, w, c] = dims[..] else {
            return Err(format!("expected 3 matrix dims, got {dims:?}"));
        };
        if h < 0 || w < 0 || c as usize != channels {
            return Err(format!("matrix dims {dims:?}: expected [H, W, {channels}]"));
        }
        let (h, w) = (h as usize, w as usize);
        if h.checked_mul(w).and_then(|n| n.checked_mul(channels)) != Some(m.data.len()) {
            return Err(format!("matrix dims {dims:?} but {} values", m.data.len()));
        }
        Ok(Self {
            height: h,
            width: w,
            channels,
            data: m.data,
        })
    }

    /// The `MatrixFloat` holding this image.
    pub fn to_matrix(&self) -> proto::MatrixFloat {
        proto::MatrixFloat {
            data: self.data.clone(),
            shape: Some(proto::MatrixShape {
                dims: vec![self.height as i32, self.width as i32, self.channels as i32],
            }),
        }
    }

    /// zlib-compresses this image as `RangeImage.*_compressed` stores it.
    pub fn compress(&self) -> Vec<u8> {
        compress_matrix(&self.to_matrix())
    }
}

/// The most bytes a compressed matrix may inflate to (256 MiB): a TOP pose image is ~4 MB, so
/// more means a damaged or hostile stream, refused before it exhausts memory.
pub const MAX_INFLATED_BYTES: u64 = 1 << 28;

/// The most inflate buffer a thread keeps between range images (the TOP pixel pose, the largest
/// of them, inflates to about 4 MB).
const KEPT_INFLATE_BUFFER_BYTES: usize = 32 << 20;

/// zlib-inflates `bytes` and decodes the `MatrixFloat` inside, checking it has `channels`.
///
/// The stream is inflated whole by libdeflate (1.8 × zlib-rs's streaming inflate on range
/// images) into a buffer each thread keeps, grown by doubling up to [`MAX_INFLATED_BYTES`].
pub fn decompress_matrix(bytes: &[u8], channels: usize) -> Result<RangeImageData, String> {
    thread_local! {
        static INFLATER: std::cell::RefCell<(libdeflater::Decompressor, Vec<u8>)> =
            std::cell::RefCell::new((libdeflater::Decompressor::new(), Vec::new()));
    }
    let m = INFLATER.with_borrow_mut(|(inflater, buffer)| {
        let decoded = inflate_whole(inflater, buffer, bytes).and_then(decode_inflated);
        // A stream far larger than a range image's does not leave its buffer behind.
        if buffer.len() > KEPT_INFLATE_BUFFER_BYTES {
            *buffer = Vec::new();
        }
        decoded
    })?;
    RangeImageData::from_matrix(m, channels)
}

/// Decodes an inflated `MatrixFloat`, naming a packed `data` field that is cut short.
fn decode_inflated(raw: &[u8]) -> Result<proto::MatrixFloat, String> {
    match packed_data_len(raw) {
        Some((len, _)) if len > MAX_INFLATED_BYTES => {
            return Err(format!("zlib stream inflates past {MAX_INFLATED_BYTES} bytes"));
        }
        Some((len, header)) if header as u64 + len > raw.len() as u64 => {
            return Err(format!(
                "MatrixFloat decode failed: packed data of {len} bytes is cut short"
            ));
        }
        _ => {}
    }
    decode_matrix_float(raw).map_err(|e| format!("MatrixFloat decode failed: {e}"))
}

/// Inflates a whole zlib stream into `buffer`, which grows (doubling) until the stream fits;
/// the inflated bytes.
fn inflate_whole<'b>(
    inflater: &mut libdeflater::Decompressor,
    buffer: &'b mut Vec<u8>,
    bytes: &[u8],
) -> Result<&'b [u8], String> {
    const LIMIT: usize = MAX_INFLATED_BYTES as usize;
    if buffer.is_empty() {
        buffer.resize(bytes.len().saturating_mul(4).clamp(1 << 16, LIMIT), 0);
    }
    loop {
        match inflater.zlib_decompress(bytes, buffer) {
            Ok(n) => return Ok(&buffer[..n]),
            Err(libdeflater::DecompressionError::InsufficientSpace) if buffer.len() < LIMIT => {
                let grown = buffer.len().saturating_mul(2).min(LIMIT);
                buffer.resize(grown, 0);
            }
            Err(libdeflater::DecompressionError::InsufficientSpace) => {
                return Err(format!("zlib stream inflates past {MAX_INFLATED_BYTES} bytes"));
            }
            Err(e) => return Err(format!("zlib inflate failed: {e}")),
        }
    }
}

/// The length of a leading packed `data` field (tag 1, wire type 2) and the bytes of its key and
/// length, if `raw` starts with one.
fn packed_data_len(raw: &[u8]) -> Option<(u64, usize)> {
    use prost::encoding::decode_varint;
    let mut buf = raw;
    if decode_varint(&mut buf).ok()? != (1 << 3) | 2 {
        return None;
    }
    let len = decode_varint(&mut buf).ok()?;
    Some((len, raw.len() - buf.len()))
}

/// Decodes a `MatrixFloat`, converting packed `data` in bulk: range images hold millions of
/// floats, and a per-value decode costs as much as the inflate. Anything but packed data and a
/// shape (unpacked floats, unknown fields) goes through the general prost decoder.
pub fn decode_matrix_float(raw: &[u8]) -> Result<proto::MatrixFloat, prost::DecodeError> {
    use prost::encoding::decode_varint;
    let mut data: Vec<f32> = Vec::new();
    let mut shape = None;
    let mut buf = raw;
    while !buf.is_empty() {
        let key = decode_varint(&mut buf)?;
        let (tag, wire_type) = (key >> 3, key & 7);
        if wire_type != 2 || !(tag == 1 || tag == 2) {
            return proto::MatrixFloat::decode(raw);
        }
        let len = usize::try_from(decode_varint(&mut buf)?).unwrap_or(usize::MAX);
        if len > buf.len() || (tag == 1 && len % 4 != 0) {
            return proto::MatrixFloat::decode(raw);
        }
        let (payload, rest) = buf.split_at(len);
        if tag == 1 {
            data.reserve(len / 4);
            data.extend(
                payload
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        } else {
            shape = Some(proto::MatrixShape::decode(payload)?);
        }
        buf = rest;
    }
    Ok(proto::MatrixFloat { data, shape })
}

/// zlib-compresses a serialized `MatrixFloat` (default compression level).
pub fn compress_matrix(m: &proto::MatrixFloat) -> Vec<u8> {
    use flate2::write::ZlibEncoder;
    use std::io::Write;
    let mut enc = ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(&m.encode_to_vec());
    enc.finish().unwrap_or_default()
}

/// A lidar's geometry: what turns a pixel into a point in the vehicle frame.
#[derive(Debug, Clone, PartialEq)]
pub struct LidarGeometry {
    /// Lidar → vehicle.
    pub vehicle_from_lidar: Isometry3<f64>,
    /// Inclination of each row (rad), row 0 the highest beam (already reversed).
    pub row_inclinations: Vec<f64>,
}

impl LidarGeometry {
    /// Geometry for a `height`-row image: `beam_inclinations` (ascending, as stored) when given,
    /// else uniform bin centres between `min` and `max`; then reversed so row 0 is the highest.
    pub fn new(
        vehicle_from_lidar: Isometry3<f64>,
        beam_inclinations: &[f64],
        min: f64,
        max: f64,
        height: usize,
    ) -> Result<Self, String> {
        let ascending: Vec<f64> = if beam_inclinations.is_empty() {
            (0..height)
                .map(|i| min + (i as f64 + 0.5) / height as f64 * (max - min))
                .collect()
        } else if beam_inclinations.len() == height {
            beam_inclinations.to_vec()
        } else {
            return Err(format!(
                "{} beam inclinations for a {height}-row range image",
                beam_inclinations.len()
            ));
        };
        Ok(Self {
            vehicle_from_lidar,
            row_inclinations: ascending.into_iter().rev().collect(),
        })
    }

    /// The extrinsic's yaw, `atan2(E[1][0], E[0][0])`, subtracted from column azimuths.
    pub fn azimuth_correction(&self) -> f64 {
        let r = self.vehicle_from_lidar.rotation.to_rotation_matrix();
        r[(1, 0)].atan2(r[(0, 0)])
    }

    /// Sensor-frame azimuth of column `w` of a `width`-column image (rad).
    pub fn column_azimuth(&self, w: usize, width: usize) -> f64 {
        let ratio = (width as f64 - w as f64 - 0.5) / width as f64;
        (2.0 * ratio - 1.0) * PI - self.azimuth_correction()
    }

    /// The pixel (row, column) a vehicle-frame point falls in, the inverse of the conversion
    /// (Waymo's `build_range_image_from_point_cloud`), with its range; `None` at the origin.
    pub fn pixel_of_point(&self, point_in_vehicle: &Point3<f64>, width: usize) -> Option<(usize, usize, f64)> {
        let p = self.vehicle_from_lidar.inverse_transform_point(point_in_vehicle);
        let range = p.coords.norm();
        if range <= 0.0 || self.row_inclinations.is_empty() || width == 0 {
            return None;
        }
        let incl = (p.z / range).clamp(-1.0, 1.0).asin();
        let row = self
            .row_inclinations
            .iter()
            .enumerate()
            .min_by(|a, b| (a.1 - incl).abs().total_cmp(&(b.1 - incl).abs()))
            .map(|(i, _)| i)?;
        let az = crate::geometry::wrap_angle(p.y.atan2(p.x) + self.azimuth_correction());
        let col = (width as f64 - 1.0 + 0.5 - (az + PI) / (2.0 * PI) * width as f64).round();
        // Waymo issue #917: az = -π rounds to column W; it belongs to the last column.
        let col = (col.max(0.0) as usize).min(width - 1);
        Some((row, col, range))
    }
}

/// Points of one range image, appended column by column to an [`ExtractedPoints`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtractedPoints {
    /// Vehicle-frame x (m).
    pub x: Vec<f32>,
    /// Vehicle-frame y (m).
    pub y: Vec<f32>,
    /// Vehicle-frame z (m).
    pub z: Vec<f32>,
    /// Range (m), channel 0.
    pub range: Vec<f32>,
    /// Raw intensity, channel 1.
    pub intensity: Vec<f32>,
    /// Elongation, channel 2.
    pub elongation: Vec<f32>,
    /// 1 when the point is in a no-label zone (channel 3 = 1.0), else 0.
    pub in_no_label_zone: Vec<u8>,
    /// `LaserName` value.
    pub laser_id: Vec<u8>,
    /// 1 for the first return, 2 for the second.
    pub return_index: Vec<u8>,
}

impl ExtractedPoints {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }
}

/// The per-pixel pose of TOP plus the frame pose it is undone with.
#[derive(Debug, Clone, Copy)]
pub struct PixelPoses<'a> {
    /// `[H, W, 6]` (roll, pitch, yaw, x, y, z), vehicle → global at each pixel's time.
    pub world_from_vehicle_at_pixel: &'a RangeImageData,
    /// Inverse of `Frame.pose`: global → vehicle frame of the labels.
    pub vehicle_from_world: &'a Isometry3<f64>,
}

/// A column's stored pixel pose and the transform it gives, `vehicle_from_world · pixel_pose`.
type ColumnPose = ([f32; 6], Matrix3<f64>, Vector3<f64>);

/// Converts one range image to vehicle-frame points (pixels with range > 0, row-major order)
/// and appends them to `out` tagged with `laser_id` and `return_index`.
pub fn extract_points(
    image: &RangeImageData,
    geometry: &LidarGeometry,
    poses: Option<PixelPoses<'_>>,
    laser_id: u8,
    return_index: u8,
    out: &mut ExtractedPoints,
) -> Result<(), String> {
    let (h_count, w_count) = (image.height, image.width);
    if image.channels < 4 {
        return Err(format!("range image has {} channels, expected 4", image.channels));
    }
    if h_count.checked_mul(w_count).and_then(|n| n.checked_mul(image.channels)) != Some(image.data.len()) {
        return Err(format!(
            "range image is [{h_count}, {w_count}, {}] but holds {} values",
            image.channels,
            image.data.len()
        ));
    }
    if geometry.row_inclinations.len() != h_count {
        return Err(format!(
            "{} inclinations for a {h_count}-row range image",
            geometry.row_inclinations.len()
        ));
    }
    if let Some(p) = &poses {
        let pi = p.world_from_vehicle_at_pixel;
        if (pi.height, pi.width) != (h_count, w_count) || pi.channels != 6 || pi.data.len() != h_count * w_count * 6 {
            return Err(format!(
                "pixel pose is [{}, {}, {}], range image is [{h_count}, {w_count}, 4]",
                pi.height, pi.width, pi.channels
            ));
        }
    }
    let sin_cos_az: Vec<(f64, f64)> = (0..w_count)
        .map(|w| geometry.column_azimuth(w, w_count).sin_cos())
        .collect();
    let sin_cos_incl: Vec<(f64, f64)> = geometry.row_inclinations.iter().map(|i| i.sin_cos()).collect();
    let rot: Matrix3<f64> = geometry.vehicle_from_lidar.rotation.to_rotation_matrix().into_inner();
    let trans: Vector3<f64> = geometry.vehicle_from_lidar.translation.vector;
    let c = image.channels;
    let mut column_poses: Vec<Option<ColumnPose>> = if poses.is_some() {
        vec![None; w_count]
    } else {
        Vec::new()
    };
    for (h, &(sin_i, cos_i)) in sin_cos_incl.iter().enumerate() {
        let row = &image.data[h * w_count * c..(h + 1) * w_count * c];
        for (w, px) in row.chunks_exact(c).enumerate() {
            let r = px[0];
            if r <= 0.0 || r.is_nan() {
                continue;
            }
            let r64 = f64::from(r);
            let (sin_a, cos_a) = sin_cos_az[w];
            let p_lidar = Vector3::new(cos_a * cos_i * r64, sin_a * cos_i * r64, sin_i * r64);
            let mut p = rot * p_lidar + trans;
            if let Some(poses) = &poses {
                let at = (h * w_count + w) * 6;
                let mut pose = [0f32; 6];
                pose.copy_from_slice(&poses.world_from_vehicle_at_pixel.data[at..at + 6]);
                // A column's pixels usually share one pose (one firing time), so the combined
                // transform is cached per column and rebuilt only when the pose changes.
                let cached = match &column_poses[w] {
                    Some((key, m, t)) if *key == pose => (*m, *t),
                    _ => {
                        let f = |i: usize| f64::from(pose[i]);
                        let r_pix = rotation_from_euler(f(2), f(1), f(0)).into_inner();
                        let vehicle_from_world = poses.vehicle_from_world;
                        let r_vw = vehicle_from_world.rotation.to_rotation_matrix().into_inner();
                        let m = r_vw * r_pix;
                        let t = r_vw * Vector3::new(f(3), f(4), f(5)) + vehicle_from_world.translation.vector;
                        column_poses[w] = Some((pose, m, t));
                        (m, t)
                    }
                };
                p = cached.0 * p + cached.1;
            }
            out.x.push(p.x as f32);
            out.y.push(p.y as f32);
            out.z.push(p.z as f32);
            out.range.push(r);
            out.intensity.push(px[1]);
            out.elongation.push(px[2]);
            out.in_no_label_zone.push(u8::from(px[3] == 1.0));
            out.laser_id.push(laser_id);
            out.return_index.push(return_index);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;
    use std::f64::consts::FRAC_PI_2;

    /// Waymo's own unit test (`v2/perception/utils/lidar_utils_test.py`, reference §2): range
    /// image −12..11 as [3,2,4], identity extrinsic, inclinations [−π/2, 0, π/2], every pixel
    /// pose (π/2, π/2, π/2, 1, 2, 3), identity frame pose → [[−3,2,3], [−7,2,3]].
    #[test]
    fn golden_vector_from_waymo_unit_test() {
        let image = RangeImageData {
            height: 3,
            width: 2,
            channels: 4,
            data: (-12..12).map(|v| v as f32).collect(),
        };
        let pose_px = RangeImageData {
            height: 3,
            width: 2,
            channels: 6,
            data: (0..6)
                .flat_map(|_| [FRAC_PI_2 as f32, FRAC_PI_2 as f32, FRAC_PI_2 as f32, 1.0, 2.0, 3.0])
                .collect(),
        };
        let geometry = LidarGeometry::new(Isometry3::identity(), &[-FRAC_PI_2, 0.0, FRAC_PI_2], 0.0, 0.0, 3).unwrap();
        let identity = Isometry3::identity();
        let mut out = ExtractedPoints::default();
        extract_points(
            &image,
            &geometry,
            Some(PixelPoses {
                world_from_vehicle_at_pixel: &pose_px,
                vehicle_from_world: &identity,
            }),
            1,
            1,
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        let expected = [[-3.0, 2.0, 3.0], [-7.0, 2.0, 3.0]];
        for (i, e) in expected.iter().enumerate() {
            assert_abs_diff_eq!(out.x[i], e[0], epsilon = 1e-4);
            assert_abs_diff_eq!(out.y[i], e[1], epsilon = 1e-4);
            assert_abs_diff_eq!(out.z[i], e[2], epsilon = 1e-4);
        }
        assert_eq!(out.range, vec![4.0, 8.0]);
        assert_eq!(out.intensity, vec![5.0, 9.0]);
        assert_eq!(out.elongation, vec![6.0, 10.0]);
        // Channel 3 holds 7.0 and 11.0: not exactly 1.0, so not in a no-label zone.
        assert_eq!(out.in_no_label_zone, vec![0, 0]);
    }

    #[test]
    fn uniform_inclinations_are_bin_centres_reversed() {
        let g = LidarGeometry::new(Isometry3::identity(), &[], -1.0, 1.0, 4).unwrap();
        assert_eq!(g.row_inclinations, vec![0.75, 0.25, -0.25, -0.75]);
        assert!(LidarGeometry::new(Isometry3::identity(), &[0.0, 1.0], 0.0, 0.0, 3).is_err());
    }

    #[test]
    fn columns_sweep_from_behind_through_left_ahead_right() {
        let g = LidarGeometry::new(Isometry3::identity(), &[], 0.0, 0.0, 1).unwrap();
        let w = 400;
        assert_abs_diff_eq!(g.column_azimuth(0, w), PI - PI / w as f64, epsilon = 1e-12);
        assert_abs_diff_eq!(g.column_azimuth(w / 2, w), -PI / w as f64, epsilon = 1e-12);
        assert_abs_diff_eq!(g.column_azimuth(w / 4, w), FRAC_PI_2 - PI / w as f64, epsilon = 1e-12);
    }

    #[test]
    fn extrinsic_yaw_is_corrected_so_columns_stay_in_vehicle_azimuth() {
        // A lidar yawed by 148°: column W/2 must still look straight ahead in the vehicle frame.
        let e = Isometry3::new(Vector3::new(1.0, 0.0, 2.0), Vector3::z() * 148f64.to_radians());
        let g = LidarGeometry::new(e, &[], 0.0, 0.0, 1).unwrap();
        let (w_count, col) = (2000, 1000);
        let mut image = RangeImageData {
            height: 1,
            width: w_count,
            channels: 4,
            data: vec![-1.0; w_count * 4],
        };
        image.data[col * 4] = 10.0;
        let mut out = ExtractedPoints::default();
        extract_points(&image, &g, None, 2, 1, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        // Azimuth of column 1000 of 2000 in the vehicle frame is −π/2000 about the lidar origin.
        let az = -PI / w_count as f64;
        assert_abs_diff_eq!(f64::from(out.x[0]), 1.0 + 10.0 * az.cos(), epsilon = 1e-4);
        assert_abs_diff_eq!(f64::from(out.y[0]), 10.0 * az.sin(), epsilon = 1e-4);
        assert_abs_diff_eq!(f64::from(out.z[0]), 2.0, epsilon = 1e-4);
        let back = g
            .pixel_of_point(&Point3::new(out.x[0].into(), out.y[0].into(), out.z[0].into()), w_count)
            .unwrap();
        assert_eq!((back.0, back.1), (0, col));
        assert_abs_diff_eq!(back.2, 10.0, epsilon = 1e-4);
    }

    #[test]
    fn compressed_matrix_round_trips_and_bad_shapes_are_named() {
        let image = RangeImageData {
            height: 2,
            width: 3,
            channels: 4,
            data: (0..24).map(|v| v as f32 * 0.5).collect(),
        };
        assert_eq!(decompress_matrix(&image.compress(), 4).unwrap(), image);
        // Pixel (1, 2) channel 3 is value (1·3 + 2)·4 + 3 = 23, stored as 11.5.
        assert_eq!(image.get(1, 2, 3), Some(11.5));
        assert_eq!(image.get(2, 0, 0), None);
        let e = decompress_matrix(&image.compress(), 6).unwrap_err();
        assert!(e.contains("expected [H, W, 6]"), "{e}");
        let e = decompress_matrix(b"not zlib", 4).unwrap_err();
        assert!(e.starts_with("zlib inflate failed"), "{e}");
    }

    #[test]
    fn streamed_decompression_agrees_with_whole_buffer_decoding() {
        let zlib = |raw: &[u8]| {
            use flate2::write::ZlibEncoder;
            use std::io::Write;
            let mut e = ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        };
        let m = proto::MatrixFloat {
            data: (0..24).map(|v| v as f32 - 3.5).collect(),
            shape: Some(proto::MatrixShape { dims: vec![2, 3, 4] }),
        };
        let expected = RangeImageData::from_matrix(m.clone(), 4).unwrap();
        // Data first (the fast path), shape first (the fallback), and data split in two packed
        // chunks around the shape (protobuf concatenates repeated fields).
        let data_first = m.encode_to_vec();
        let shape = proto::MatrixFloat {
            data: Vec::new(),
            shape: m.shape.clone(),
        }
        .encode_to_vec();
        let chunk = |d: &[f32]| {
            proto::MatrixFloat {
                data: d.to_vec(),
                shape: None,
            }
            .encode_to_vec()
        };
        let shape_first = [shape.clone(), chunk(&m.data)].concat();
        let split = [chunk(&m.data[..10]), shape, chunk(&m.data[10..])].concat();
        for raw in [data_first.clone(), shape_first, split] {
            assert_eq!(decompress_matrix(&zlib(&raw), 4).unwrap(), expected);
        }
        // A packed length that is cut short, or that claims more than the limit, is an error.
        let e = decompress_matrix(&zlib(&data_first[..40]), 4).unwrap_err();
        assert!(e.contains("cut short"), "{e}");
        let mut huge = vec![0x0a];
        prost::encoding::encode_varint(MAX_INFLATED_BYTES + 4, &mut huge);
        let e = decompress_matrix(&zlib(&huge), 4).unwrap_err();
        assert!(e.contains("inflates past"), "{e}");
    }

    #[test]
    fn bulk_matrix_decode_matches_prost_packed_and_unpacked() {
        let m = proto::MatrixFloat {
            data: vec![1.5, -2.0, 3.25, f32::MAX],
            shape: Some(proto::MatrixShape { dims: vec![1, 1, 4] }),
        };
        let packed = m.encode_to_vec();
        assert_eq!(decode_matrix_float(&packed).unwrap(), m);
        // Unpacked floats (tag 1, wire type 5 each) take the general decoder.
        let mut unpacked = Vec::new();
        for v in &m.data {
            unpacked.push(0x0d);
            unpacked.extend_from_slice(&v.to_le_bytes());
        }
        unpacked.extend_from_slice(
            &proto::MatrixFloat {
                data: Vec::new(),
                shape: m.shape.clone(),
            }
            .encode_to_vec(),
        );
        assert_eq!(decode_matrix_float(&unpacked).unwrap(), m);
        // A packed payload cut short is an error, not a panic.
        assert!(decode_matrix_float(&packed[..packed.len() - 9]).is_err());
    }
}
