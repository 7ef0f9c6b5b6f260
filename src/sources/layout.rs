//! Point layouts: which typed fields sit at which byte offsets of a fixed-size point record, as a
//! PCD header, a `sensor_msgs/PointCloud2`, a `.npy` header or a raw `.bin`'s declared fields say,
//! and the one decoder that turns such records into a [`PointCloud`]. A layout is checked before
//! any point is read (x, y and z present, every field inside the record, no two overlapping), so a
//! file is read with the layout it declares or refused, never reinterpreted.
//!
//! Fields map by name: `x`, `y`, `z` are the coordinates (any numeric type, read as f32);
//! `intensity` (or `i`) is the intensity column (0 when absent); every other single-valued field
//! is kept as a channel under its own name (f32/f64 as f32, u8/u16/u32 as they are, signed
//! integers as i64). Unnamed or `_` padding fields and multi-valued fields are skipped.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cloud::{ChannelData, PointCloud};

/// A layout that cannot be read, a record that does not fit its layout, or a point file that
/// cannot be read: where (a byte offset, when at one place) and what.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{}{detail}", offset.map(|o| format!("byte {o}: ")).unwrap_or_default())]
pub struct LayoutError {
    /// Byte offset (in the point data, or in the file for a file's error) where the problem is.
    pub offset: Option<u64>,
    /// What was wrong.
    pub detail: String,
}

impl LayoutError {
    /// An error at no one place.
    pub(crate) fn new(detail: impl Into<String>) -> Self {
        Self {
            offset: None,
            detail: detail.into(),
        }
    }

    /// An error at byte `offset`.
    pub(crate) fn at(offset: usize, detail: impl Into<String>) -> Self {
        Self {
            offset: Some(offset as u64),
            detail: detail.into(),
        }
    }

    /// This error as a [`SourceError`] of `path`, frame `index`.
    pub fn into_source_error(self, path: &std::path::Path, index: usize) -> super::SourceError {
        let location = match self.offset {
            Some(o) => format!("frame {index} at byte {o}"),
            None => format!("frame {index}"),
        };
        super::SourceError::corrupt(path, location, self.detail)
    }
}

/// A field's scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl Scalar {
    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::F64 => 8,
        }
    }

    /// The type of a `sensor_msgs/PointField` datatype code (1 = INT8 … 8 = FLOAT64).
    pub fn from_ros_datatype(code: u8) -> Option<Scalar> {
        Some(match code {
            1 => Scalar::I8,
            2 => Scalar::U8,
            3 => Scalar::I16,
            4 => Scalar::U16,
            5 => Scalar::I32,
            6 => Scalar::U32,
            7 => Scalar::F32,
            8 => Scalar::F64,
            _ => return None,
        })
    }

    /// The `sensor_msgs/PointField` datatype code of this type.
    pub fn ros_datatype(self) -> u8 {
        match self {
            Scalar::I8 => 1,
            Scalar::U8 => 2,
            Scalar::I16 => 3,
            Scalar::U16 => 4,
            Scalar::I32 => 5,
            Scalar::U32 => 6,
            Scalar::F32 => 7,
            Scalar::F64 => 8,
        }
    }

    /// The type of a PCD header's `TYPE` letter (`I`, `U`, `F`) and `SIZE` (bytes).
    pub fn from_pcd(kind: char, size: usize) -> Option<Scalar> {
        Some(match (kind, size) {
            ('I', 1) => Scalar::I8,
            ('U', 1) => Scalar::U8,
            ('I', 2) => Scalar::I16,
            ('U', 2) => Scalar::U16,
            ('I', 4) => Scalar::I32,
            ('U', 4) => Scalar::U32,
            ('F', 4) => Scalar::F32,
            ('F', 8) => Scalar::F64,
            _ => return None,
        })
    }

    /// The type and byte order of a NumPy `descr` (`<f4`, `>f8`, `|u1`, …); `true` means big-endian.
    pub fn from_npy_descr(descr: &str) -> Option<(Scalar, bool)> {
        let (order, code) = descr.split_at_checked(1)?;
        let big_endian = match order {
            "<" | "|" | "=" => false,
            ">" => true,
            _ => return None,
        };
        let scalar = match code {
            "i1" => Scalar::I8,
            "u1" => Scalar::U8,
            "i2" => Scalar::I16,
            "u2" => Scalar::U16,
            "i4" => Scalar::I32,
            "u4" => Scalar::U32,
            "f4" => Scalar::F32,
            "f8" => Scalar::F64,
            _ => return None,
        };
        Some((scalar, big_endian))
    }

    /// The short name (`f32`, `u16`, …) for messages.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::I8 => "i8",
            Scalar::U8 => "u8",
            Scalar::I16 => "i16",
            Scalar::U16 => "u16",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }
}

/// One field of a point record.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field's name (`x`, `intensity`, `ring`, …).
    pub name: String,
    /// Byte offset in the record.
    pub offset: usize,
    /// Scalar type of each value.
    pub scalar: Scalar,
    /// Values in the field (PCD `COUNT`, PointField `count`); only single-valued fields are read.
    pub count: usize,
}

impl Field {
    /// A single-valued field.
    pub fn new(name: impl Into<String>, offset: usize, scalar: Scalar) -> Self {
        Self {
            name: name.into(),
            offset,
            scalar,
            count: 1,
        }
    }

    fn end(&self) -> usize {
        self.offset + self.scalar.size() * self.count
    }
}

/// What a reader does with a point whose x, y or z is NaN or infinite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NonFinite {
    /// Drop the point and count it in the frame's notes (organized ROS clouds mark no-return
    /// pixels with NaN).
    #[default]
    Drop,
    /// Refuse the frame, naming the byte offset of the first such point.
    Fail,
}

/// A checked point-record layout.
#[derive(Debug, Clone, PartialEq)]
pub struct PointLayout {
    fields: Vec<Field>,
    point_step: usize,
    big_endian: bool,
    xyz: [usize; 3],
    intensity: Option<usize>,
}

/// Points decoded from records, with the points dropped on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The points kept.
    pub cloud: PointCloud,
    /// Points dropped because x, y or z was not finite.
    pub dropped_non_finite: usize,
}

impl Decoded {
    /// The frame note for the dropped points, when any were.
    pub fn note(&self) -> Option<String> {
        (self.dropped_non_finite > 0).then(|| {
            let n = self.dropped_non_finite;
            format!(
                "{n} point{} with a non-finite x, y or z dropped",
                if n == 1 { "" } else { "s" }
            )
        })
    }
}

/// Most fields a point record may have.
pub const MAX_FIELDS: usize = 256;

impl PointLayout {
    /// Checks `fields` against a record of `point_step` bytes: x, y and z present once and
    /// single-valued, every field inside the record, none overlapping another, no name twice.
    pub fn new(fields: Vec<Field>, point_step: usize, big_endian: bool) -> Result<Self, LayoutError> {
        if fields.len() > MAX_FIELDS {
            return Err(LayoutError::new(format!(
                "{} fields is over the limit of {MAX_FIELDS}",
                fields.len()
            )));
        }
        if point_step == 0 {
            return Err(LayoutError::new("point step is 0 bytes"));
        }
        let names = || fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
        for (i, f) in fields.iter().enumerate() {
            if f.count == 0 {
                return Err(LayoutError::new(format!("field `{}` has count 0", f.name)));
            }
            let end = f
                .scalar
                .size()
                .checked_mul(f.count)
                .and_then(|n| n.checked_add(f.offset));
            if end.is_none_or(|end| end > point_step) {
                return Err(LayoutError::new(format!(
                    "field `{}` ({} × {} at offset {}) does not fit a {point_step}-byte point (fields: {})",
                    f.name,
                    f.count,
                    f.scalar.name(),
                    f.offset,
                    names()
                )));
            }
            if let Some(g) = fields[..i].iter().find(|g| f.offset < g.end() && g.offset < f.end()) {
                return Err(LayoutError::new(format!(
                    "fields `{}` and `{}` overlap at offsets {} and {}",
                    g.name, f.name, g.offset, f.offset
                )));
            }
            if !is_padding(&f.name) && fields[..i].iter().any(|g| g.name == f.name) {
                return Err(LayoutError::new(format!("field `{}` appears twice", f.name)));
            }
        }
        let find = |name: &str| fields.iter().position(|f| f.name == name);
        let mut xyz = [0; 3];
        for (slot, axis) in xyz.iter_mut().zip(["x", "y", "z"]) {
            let Some(k) = find(axis) else {
                return Err(LayoutError::new(format!("no field `{axis}` (fields: {})", names())));
            };
            if fields[k].count != 1 {
                return Err(LayoutError::new(format!(
                    "field `{axis}` has {} values, not 1",
                    fields[k].count
                )));
            }
            *slot = k;
        }
        let intensity = find("intensity")
            .or_else(|| find("i"))
            .filter(|&k| fields[k].count == 1);
        Ok(Self {
            fields,
            point_step,
            big_endian,
            xyz,
            intensity,
        })
    }

    /// Contiguous little-endian float32 fields, in order (a raw `.bin`).
    pub fn packed_f32<S: AsRef<str>>(names: &[S]) -> Result<Self, LayoutError> {
        let fields = names
            .iter()
            .enumerate()
            .map(|(k, n)| Field::new(n.as_ref(), 4 * k, Scalar::F32))
            .collect::<Vec<_>>();
        Self::new(fields, 4 * names.len().max(1), false)
    }

    /// Bytes per point.
    pub fn point_step(&self) -> usize {
        self.point_step
    }

    /// The fields, in declaration order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Field names joined for messages (`x, y, z, intensity`).
    pub fn describe(&self) -> String {
        self.fields
            .iter()
            .map(|f| format!("{} {}", f.name, f.scalar.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Decodes `bytes`, which must be a whole number of records.
    pub fn decode(&self, bytes: &[u8], non_finite: NonFinite) -> Result<Decoded, LayoutError> {
        if !bytes.len().is_multiple_of(self.point_step) {
            let whole = bytes.len() / self.point_step * self.point_step;
            return Err(LayoutError::at(
                whole,
                format!(
                    "{} bytes is not a whole number of {}-byte points ({}); {} bytes left over",
                    bytes.len(),
                    self.point_step,
                    self.describe(),
                    bytes.len() - whole
                ),
            ));
        }
        let n = bytes.len() / self.point_step;
        self.decode_rows(bytes, n, 1, bytes.len(), non_finite)
    }

    /// Decodes `height` rows of `width` records each, rows `row_step` bytes apart (a
    /// `PointCloud2`'s `data`); `bytes` must hold exactly `height × row_step` bytes.
    pub fn decode_rows(
        &self,
        bytes: &[u8],
        width: usize,
        height: usize,
        row_step: usize,
        non_finite: NonFinite,
    ) -> Result<Decoded, LayoutError> {
        let row_bytes = width
            .checked_mul(self.point_step)
            .ok_or_else(|| LayoutError::new(format!("width {width} overflows")))?;
        if height > 0 && row_step < row_bytes {
            return Err(LayoutError::new(format!(
                "row step {row_step} is shorter than {width} points of {} bytes",
                self.point_step
            )));
        }
        let expected = row_step.checked_mul(height);
        if expected != Some(bytes.len()) {
            return Err(LayoutError::at(
                bytes.len().min(expected.unwrap_or(usize::MAX)),
                format!(
                    "{} bytes of point data, expected {height} rows × {row_step} bytes",
                    bytes.len()
                ),
            ));
        }
        let n = width * height;
        let record = |p: usize| (p / width.max(1)) * row_step + (p % width.max(1)) * self.point_step;
        // Every column is filled block by block (a row, or 1024 records of one row: ~30 KB, in L1), so each
        // block's records are read from cache once for all fields.
        let mut columns: Vec<(usize, Out)> = Vec::new();
        for k in self.xyz.into_iter().chain(self.intensity) {
            columns.push((k, Out::F32(Vec::with_capacity(n))));
        }
        for (k, f) in self.fields.iter().enumerate() {
            if self.xyz.contains(&k) || Some(k) == self.intensity || f.count != 1 || is_padding(&f.name) {
                continue;
            }
            let out = match f.scalar {
                Scalar::F32 | Scalar::F64 => Out::F32(Vec::with_capacity(n)),
                Scalar::U8 => Out::U8(Vec::with_capacity(n)),
                Scalar::U16 => Out::U16(Vec::with_capacity(n)),
                Scalar::U32 => Out::U32(Vec::with_capacity(n)),
                Scalar::I8 | Scalar::I16 | Scalar::I32 => Out::I64(Vec::with_capacity(n)),
            };
            columns.push((k, out));
        }
        const BLOCK: usize = 1024;
        // No records: no row to visit (0 × 4 billion rows of no bytes would loop for nothing).
        let rows = if width == 0 { 0 } else { height };
        for r in 0..rows {
            let mut p0 = 0;
            while p0 < width {
                let p1 = (p0 + BLOCK).min(width);
                let start = r * row_step + p0 * self.point_step;
                let Some(block) = bytes.get(start..start + (p1 - p0) * self.point_step) else {
                    break;
                };
                let block = Records {
                    bytes: block,
                    point_step: self.point_step,
                    big_endian: self.big_endian,
                };
                for (k, out) in &mut columns {
                    block.fill(&self.fields[*k], out);
                }
                p0 = p1;
            }
        }
        let mut columns = columns.into_iter();
        let mut next_f32 = || match columns.next() {
            Some((_, Out::F32(v))) => v,
            _ => Vec::new(),
        };
        let (x, y, z) = (next_f32(), next_f32(), next_f32());
        let intensity = if self.intensity.is_some() {
            next_f32()
        } else {
            vec![0.0; n]
        };
        let channels: Vec<(String, ChannelData)> = columns
            .map(|(k, out)| (self.fields[k].name.clone(), out.into_channel()))
            .collect();
        let all_finite = [&x, &y, &z].iter().all(|c| c.iter().all(|v| v.is_finite()));
        if all_finite {
            let mut cloud =
                PointCloud::from_columns(x, y, z, intensity).map_err(|e| LayoutError::new(e.to_string()))?;
            for (name, data) in channels {
                cloud
                    .add_channel(name, data)
                    .map_err(|e| LayoutError::new(e.to_string()))?;
            }
            return Ok(Decoded {
                cloud,
                dropped_non_finite: 0,
            });
        }
        let keep: Vec<bool> = (0..n)
            .map(|p| x[p].is_finite() && y[p].is_finite() && z[p].is_finite())
            .collect();
        let dropped = keep.iter().filter(|k| !**k).count();
        if dropped > 0 && non_finite == NonFinite::Fail {
            let p = keep.iter().position(|k| !*k).unwrap_or(0);
            return Err(LayoutError::at(
                record(p),
                format!(
                    "point {p} has a non-finite coordinate ({}, {}, {}); {dropped} such points \
                     (set `non_finite = \"drop\"` to drop them)",
                    x[p], y[p], z[p]
                ),
            ));
        }
        let mut cloud = PointCloud::from_columns(x, y, z, intensity).map_err(|e| LayoutError::new(e.to_string()))?;
        for (name, data) in channels {
            cloud
                .add_channel(name, data)
                .map_err(|e| LayoutError::new(e.to_string()))?;
        }
        if dropped > 0 {
            cloud = cloud.select(&keep).map_err(|e| LayoutError::new(e.to_string()))?;
        }
        Ok(Decoded {
            cloud,
            dropped_non_finite: dropped,
        })
    }
}

fn is_padding(name: &str) -> bool {
    name.is_empty() || name == "_"
}

/// A column being decoded.
enum Out {
    F32(Vec<f32>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    I64(Vec<i64>),
}

impl Out {
    fn into_channel(self) -> ChannelData {
        match self {
            Out::F32(v) => ChannelData::F32(v),
            Out::U8(v) => ChannelData::U8(v),
            Out::U16(v) => ChannelData::U16(v),
            Out::U32(v) => ChannelData::U32(v),
            Out::I64(v) => ChannelData::I64(v),
        }
    }
}

/// Consecutive records of one row; the layout check guarantees every field of every record is
/// in bounds.
struct Records<'a> {
    bytes: &'a [u8],
    point_step: usize,
    big_endian: bool,
}

impl Records<'_> {
    /// Appends every record's `N` bytes at `offset` (in little-endian order), converted.
    #[inline(always)]
    fn gather<T, const N: usize>(&self, offset: usize, convert: impl Fn([u8; N]) -> T, out: &mut Vec<T>) {
        // The layout check keeps `offset + N` inside a record; a field that is not reads as zeros.
        #[inline(always)]
        fn take<const N: usize>(record: &[u8], offset: usize) -> [u8; N] {
            let mut b = [0u8; N];
            if let Some(src) = record.get(offset..offset + N) {
                b.copy_from_slice(src);
            }
            b
        }
        // One loop per byte order, each an exact-size `extend`: no per-record branch or capacity check.
        let records = self.bytes.chunks_exact(self.point_step);
        if self.big_endian {
            out.extend(records.map(|r| {
                let mut b = take::<N>(r, offset);
                b.reverse();
                convert(b)
            }));
        } else {
            out.extend(records.map(|r| convert(take::<N>(r, offset))));
        }
    }

    /// Appends every record's value of `field`, converted from f64.
    fn map<T>(&self, field: &Field, convert: impl Fn(f64) -> T, out: &mut Vec<T>) {
        // `gather` has put the bytes in little-endian order already.
        let scalar = field.scalar;
        match scalar.size() {
            1 => self.gather(
                field.offset,
                |b: [u8; 1]| convert(read_scalar(&b, 0, scalar, false)),
                out,
            ),
            2 => self.gather(
                field.offset,
                |b: [u8; 2]| convert(read_scalar(&b, 0, scalar, false)),
                out,
            ),
            4 => self.gather(
                field.offset,
                |b: [u8; 4]| convert(read_scalar(&b, 0, scalar, false)),
                out,
            ),
            _ => self.gather(
                field.offset,
                |b: [u8; 8]| convert(read_scalar(&b, 0, scalar, false)),
                out,
            ),
        }
    }

    /// Appends every record's value of `field` to its column (same-type values copied as they are).
    fn fill(&self, field: &Field, out: &mut Out) {
        match (field.scalar, out) {
            (Scalar::F32, Out::F32(v)) => self.gather(field.offset, f32::from_le_bytes, v),
            (_, Out::F32(v)) => self.map(field, |x| x as f32, v),
            (Scalar::U8, Out::U8(v)) => self.gather(field.offset, |[b]: [u8; 1]| b, v),
            (Scalar::U16, Out::U16(v)) => self.gather(field.offset, u16::from_le_bytes, v),
            (Scalar::U32, Out::U32(v)) => self.gather(field.offset, u32::from_le_bytes, v),
            (_, Out::I64(v)) => self.map(field, |x| x as i64, v),
            (_, Out::U8(v)) => self.map(field, |x| x as u8, v),
            (_, Out::U16(v)) => self.map(field, |x| x as u16, v),
            (_, Out::U32(v)) => self.map(field, |x| x as u32, v),
        }
    }
}

/// Reads one scalar at `at`; the layout check guarantees it is in bounds.
#[inline(always)]
fn read_scalar(bytes: &[u8], at: usize, scalar: Scalar, big_endian: bool) -> f64 {
    fn take<const N: usize>(bytes: &[u8], at: usize, big_endian: bool) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&bytes[at..at + N]);
        if big_endian {
            b.reverse();
        }
        b
    }
    match scalar {
        Scalar::I8 => f64::from(bytes[at] as i8),
        Scalar::U8 => f64::from(bytes[at]),
        Scalar::I16 => f64::from(i16::from_le_bytes(take(bytes, at, big_endian))),
        Scalar::U16 => f64::from(u16::from_le_bytes(take(bytes, at, big_endian))),
        Scalar::I32 => f64::from(i32::from_le_bytes(take(bytes, at, big_endian))),
        Scalar::U32 => f64::from(u32::from_le_bytes(take(bytes, at, big_endian))),
        Scalar::F32 => f64::from(f32::from_le_bytes(take(bytes, at, big_endian))),
        Scalar::F64 => f64::from_le_bytes(take(bytes, at, big_endian)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PointCloud2-like record: x y z f32, 4 padding bytes, intensity f32, ring u16, t u32.
    fn ouster_like() -> (PointLayout, usize) {
        let fields = vec![
            Field::new("x", 0, Scalar::F32),
            Field::new("y", 4, Scalar::F32),
            Field::new("z", 8, Scalar::F32),
            Field::new("intensity", 16, Scalar::F32),
            Field::new("t", 20, Scalar::U32),
            Field::new("ring", 24, Scalar::U16),
        ];
        (PointLayout::new(fields, 32, false).unwrap(), 32)
    }

    fn record(x: f32, y: f32, z: f32, i: f32, t: u32, ring: u16) -> Vec<u8> {
        let mut r = vec![0u8; 32];
        r[0..4].copy_from_slice(&x.to_le_bytes());
        r[4..8].copy_from_slice(&y.to_le_bytes());
        r[8..12].copy_from_slice(&z.to_le_bytes());
        r[16..20].copy_from_slice(&i.to_le_bytes());
        r[20..24].copy_from_slice(&t.to_le_bytes());
        r[24..26].copy_from_slice(&ring.to_le_bytes());
        r
    }

    #[test]
    fn fields_are_read_at_their_offsets_and_kept_by_name() {
        let (layout, _) = ouster_like();
        let bytes = [record(1.0, 2.0, 3.0, 9.0, 70, 5), record(-1.0, 0.5, 0.25, 1.0, 71, 6)].concat();
        let d = layout.decode(&bytes, NonFinite::Fail).unwrap();
        assert_eq!(d.dropped_non_finite, 0);
        assert_eq!(d.cloud.x(), &[1.0, -1.0]);
        assert_eq!(d.cloud.z(), &[3.0, 0.25]);
        assert_eq!(d.cloud.intensity(), &[9.0, 1.0]);
        assert_eq!(d.cloud.channel("ring"), Some(&ChannelData::U16(vec![5, 6])));
        assert_eq!(d.cloud.channel("t"), Some(&ChannelData::U32(vec![70, 71])));
        assert_eq!(d.cloud.channels().count(), 2);
    }

    /// A cloud of 0 × 4 billion records is empty at once, not a walk over empty rows.
    #[test]
    fn zero_wide_rows_are_an_empty_cloud() {
        let layout = PointLayout::packed_f32(&["x", "y", "z"]).unwrap();
        let d = layout
            .decode_rows(&[], 0, u32::MAX as usize, 0, NonFinite::Fail)
            .unwrap();
        assert!(d.cloud.is_empty());
    }

    #[test]
    fn rows_with_padding_and_big_endian_records_read_the_same_points() {
        let fields = vec![
            Field::new("x", 0, Scalar::F64),
            Field::new("y", 8, Scalar::F64),
            Field::new("z", 16, Scalar::I16),
        ];
        let be = PointLayout::new(fields, 18, true).unwrap();
        // 2 rows × 1 point, each row padded to 20 bytes.
        let mut bytes = Vec::new();
        for (x, y, z) in [(1.5f64, -2.0f64, 7i16), (0.25, 4.0, -3)] {
            bytes.extend(x.to_be_bytes());
            bytes.extend(y.to_be_bytes());
            bytes.extend(z.to_be_bytes());
            bytes.extend([0xAA, 0xBB]);
        }
        let d = be.decode_rows(&bytes, 1, 2, 20, NonFinite::Fail).unwrap();
        assert_eq!(
            (d.cloud.x(), d.cloud.y(), d.cloud.z()),
            (&[1.5, 0.25][..], &[-2.0, 4.0][..], &[7.0, -3.0][..])
        );
        assert_eq!(d.cloud.intensity(), &[0.0, 0.0]);
        let e = be.decode_rows(&bytes[..39], 1, 2, 20, NonFinite::Fail).unwrap_err();
        assert!(
            e.to_string()
                .contains("39 bytes of point data, expected 2 rows × 20 bytes"),
            "{e}"
        );
        let e = be.decode_rows(&bytes, 2, 1, 20, NonFinite::Fail).unwrap_err();
        assert!(
            e.to_string()
                .contains("row step 20 is shorter than 2 points of 18 bytes"),
            "{e}"
        );
    }

    #[test]
    fn a_layout_that_cannot_be_read_is_refused_before_any_point() {
        let f = |n: &str, o, s| Field::new(n, o, s);
        let cases: [(Vec<Field>, usize, &str); 5] = [
            (vec![f("x", 0, Scalar::F32), f("y", 4, Scalar::F32)], 12, "no field `z`"),
            (
                vec![f("x", 0, Scalar::F32), f("y", 4, Scalar::F32), f("z", 8, Scalar::F32)],
                10,
                "field `z` (1 × f32 at offset 8) does not fit a 10-byte point",
            ),
            (
                vec![f("x", 0, Scalar::F32), f("y", 2, Scalar::F32), f("z", 8, Scalar::F32)],
                12,
                "fields `x` and `y` overlap",
            ),
            (
                vec![
                    f("x", 0, Scalar::F32),
                    f("y", 4, Scalar::F32),
                    f("z", 8, Scalar::F32),
                    f("y", 12, Scalar::F32),
                ],
                16,
                "field `y` appears twice",
            ),
            (
                vec![f("x", 0, Scalar::F32), f("y", 4, Scalar::F32), f("z", 8, Scalar::F32)],
                0,
                "point step is 0",
            ),
        ];
        for (fields, step, want) in cases {
            let e = PointLayout::new(fields, step, false).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
        let mut wide = Field::new("z", 8, Scalar::F32);
        wide.count = 3;
        let e = PointLayout::new(vec![f("x", 0, Scalar::F32), f("y", 4, Scalar::F32), wide], 20, false).unwrap_err();
        assert!(e.to_string().contains("field `z` has 3 values"), "{e}");
    }

    #[test]
    fn a_ragged_buffer_names_the_offset_of_the_left_over_bytes() {
        let layout = PointLayout::packed_f32(&["x", "y", "z", "intensity"]).unwrap();
        let e = layout.decode(&[0u8; 36], NonFinite::Fail).unwrap_err();
        assert_eq!(e.offset, Some(32));
        assert!(
            e.to_string()
                .starts_with("byte 32: 36 bytes is not a whole number of 16-byte points"),
            "{e}"
        );
    }

    #[test]
    fn non_finite_points_are_dropped_and_counted_or_refused_by_policy() {
        let (layout, step) = ouster_like();
        let bytes = [
            record(1.0, 2.0, 3.0, 9.0, 1, 0),
            record(f32::NAN, 0.0, 0.0, 1.0, 2, 1),
            record(4.0, f32::INFINITY, 0.0, 1.0, 3, 2),
            record(5.0, 6.0, 7.0, 2.0, 4, 3),
        ]
        .concat();
        let d = layout.decode(&bytes, NonFinite::Drop).unwrap();
        assert_eq!(d.dropped_non_finite, 2);
        assert_eq!(d.cloud.x(), &[1.0, 5.0]);
        assert_eq!(d.cloud.channel("ring"), Some(&ChannelData::U16(vec![0, 3])));
        assert_eq!(d.note().unwrap(), "2 points with a non-finite x, y or z dropped");
        let e = layout.decode(&bytes, NonFinite::Fail).unwrap_err();
        assert_eq!(e.offset, Some(step as u64));
        assert!(
            e.detail.contains("point 1 has a non-finite coordinate") && e.detail.contains("2 such points"),
            "{e}"
        );
    }

    #[test]
    fn scalar_codes_of_every_format_agree() {
        for code in 1..=8u8 {
            let s = Scalar::from_ros_datatype(code).unwrap();
            assert_eq!(s.ros_datatype(), code);
            let letter = match s {
                Scalar::F32 | Scalar::F64 => 'F',
                Scalar::U8 | Scalar::U16 | Scalar::U32 => 'U',
                _ => 'I',
            };
            assert_eq!(Scalar::from_pcd(letter, s.size()), Some(s));
        }
        assert_eq!(Scalar::from_ros_datatype(9), None);
        assert_eq!(Scalar::from_npy_descr("<f4"), Some((Scalar::F32, false)));
        assert_eq!(Scalar::from_npy_descr(">f8"), Some((Scalar::F64, true)));
        assert_eq!(Scalar::from_npy_descr("<c8"), None);
        assert_eq!(Scalar::from_pcd('F', 2), None);
    }
}
