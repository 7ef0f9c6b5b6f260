//! PCL `.pcd` point clouds: one file per sweep, `DATA ascii`, `binary` or `binary_compressed`.
//! The header's `FIELDS`/`SIZE`/`TYPE`/`COUNT` become a [`PointLayout`] (fields mapped by name:
//! `x`, `y`, `z` required, `intensity`/`i` the intensity, other single-valued fields kept as
//! channels; `_` padding, multi-valued and 8-byte integer fields skipped), so every encoding is
//! read through the one decoder. A single file is a one-frame sequence; a folder of `.pcd` files
//! is a sequence in file name order, stamped from the file names when they all name a time (see
//! [`stamps_from_names`]) and every 100 ms otherwise. A non-identity `VIEWPOINT` is the sensor's
//! pose in the file's frame: it becomes `world_from_sensor` and the points are moved into the
//! sensor frame. `docs/sources.md` (PCD and `.npy` sources) describes the reader exactly.

use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion};
use serde::{Deserialize, Serialize};

use super::layout::{Field, NonFinite, PointLayout, Scalar};
use super::{SequenceMeta, Source, SourceError};
use crate::cloud::{ChannelData, PointCloud};
use crate::frame::{Frame, Platform};

/// The `source_kind` of PCD sequences.
pub const KIND: &str = "pcd";

/// Time between frames when the file names name no time (µs): a 10 Hz LiDAR.
pub const FRAME_PERIOD_MICROS: i64 = 100_000;

/// Longest header read before its `DATA` line (bytes).
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// Largest LZF expansion: a 3-byte back reference yields at most 264 bytes.
const MAX_LZF_RATIO: usize = 88;

/// What the reader does with a non-identity `VIEWPOINT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ViewpointRule {
    /// The sensor's pose in the file's frame: `world_from_sensor`, points moved into the sensor frame.
    #[default]
    Pose,
    /// Ignored: points as stored, identity pose.
    Ignore,
}

/// Options of the PCD reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PcdConfig {
    /// The platform that recorded the sweeps; default `vehicle`.
    pub platform: Platform,
    /// Largest file read, and largest decompressed point data, in bytes; default 512 MiB.
    pub max_file_bytes: u64,
    /// What to do with a point whose x, y or z is not finite; default drop and count it.
    pub non_finite: NonFinite,
    /// What a non-identity `VIEWPOINT` means; default the sensor pose.
    pub viewpoint: ViewpointRule,
}

impl Default for PcdConfig {
    fn default() -> Self {
        Self {
            platform: Platform::Vehicle,
            max_file_bytes: 512 << 20,
            non_finite: NonFinite::Drop,
            viewpoint: ViewpointRule::Pose,
        }
    }
}

/// A PCD `DATA` encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PcdEncoding {
    /// One text line per point.
    Ascii,
    /// Row-major little-endian records.
    Binary,
    /// Column-major records, LZF-compressed.
    BinaryCompressed,
}

impl PcdEncoding {
    /// The header's name (`ascii`, `binary`, `binary_compressed`).
    pub fn as_str(self) -> &'static str {
        match self {
            PcdEncoding::Ascii => "ascii",
            PcdEncoding::Binary => "binary",
            PcdEncoding::BinaryCompressed => "binary_compressed",
        }
    }
}

/// A PCD file that cannot be read: where (byte offset in the file, when at one place) and what.
pub type PcdError = super::layout::LayoutError;

/// One `FIELDS` entry of a PCD header.
#[derive(Debug, Clone, PartialEq)]
pub struct PcdField {
    /// The field's name (`_` for padding).
    pub name: String,
    /// Bytes per value (`SIZE`).
    pub size: usize,
    /// `I`, `U` or `F` (`TYPE`).
    pub kind: char,
    /// Values per point (`COUNT`).
    pub count: usize,
    /// The value type, `None` for 8-byte integers (not read).
    pub scalar: Option<Scalar>,
}

/// A parsed PCD header.
#[derive(Debug, Clone, PartialEq)]
pub struct PcdHeader {
    /// The fields, in record order.
    pub fields: Vec<PcdField>,
    /// Points in the file (`POINTS`, else `WIDTH × HEIGHT`).
    pub points: usize,
    /// `VIEWPOINT`: `tx ty tz qw qx qy qz`.
    pub viewpoint: [f64; 7],
    /// The `DATA` encoding.
    pub encoding: PcdEncoding,
    /// Byte offset of the point data (just after the `DATA` line).
    pub data_offset: usize,
}

impl PcdHeader {
    /// Bytes per point record.
    pub fn record_size(&self) -> usize {
        self.fields.iter().map(|f| f.size * f.count).sum()
    }
}

/// A decoded PCD file.
#[derive(Debug, Clone, PartialEq)]
pub struct PcdCloud {
    /// The points, in the sensor frame under [`ViewpointRule::Pose`].
    pub cloud: PointCloud,
    /// The sensor pose from `VIEWPOINT` (identity when absent or ignored).
    pub world_from_sensor: Isometry3<f64>,
    /// The file's encoding.
    pub encoding: PcdEncoding,
    /// What the reader noticed and went on (dropped points, skipped fields).
    pub notes: Vec<String>,
}

/// The identity `VIEWPOINT`.
const IDENTITY_VIEWPOINT: [f64; 7] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];

/// Parses a PCD header (format 0.5 to 0.7) up to and including its `DATA` line.
pub fn parse_header(bytes: &[u8]) -> Result<PcdHeader, PcdError> {
    struct Entry<'a> {
        line: usize,
        offset: usize,
        values: Vec<&'a str>,
    }
    let mut entries: Vec<(&'static str, Entry)> = Vec::new();
    let mut pos = 0usize;
    let mut line_no = 0usize;
    let data_offset = loop {
        let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) else {
            return Err(PcdError::at(pos, "header ends before its DATA line"));
        };
        if pos > MAX_HEADER_BYTES {
            return Err(PcdError::at(
                pos,
                format!("no DATA line in the first {MAX_HEADER_BYTES} bytes"),
            ));
        }
        let end = rest.iter().position(|&b| b == b'\n').map_or(bytes.len(), |k| pos + k);
        let start = pos;
        pos = end + 1;
        line_no += 1;
        let raw = bytes.get(start..end).unwrap_or_default();
        let text =
            std::str::from_utf8(raw).map_err(|_| PcdError::at(start, format!("header line {line_no} is not text")))?;
        let text = text.split('#').next().unwrap_or_default();
        let mut tokens = text.split_ascii_whitespace();
        let Some(key) = tokens.next() else { continue };
        let key = match key.to_ascii_uppercase().as_str() {
            "VERSION" => "VERSION",
            "FIELDS" | "COLUMNS" => "FIELDS",
            "SIZE" => "SIZE",
            "TYPE" => "TYPE",
            "COUNT" => "COUNT",
            "WIDTH" => "WIDTH",
            "HEIGHT" => "HEIGHT",
            "VIEWPOINT" => "VIEWPOINT",
            "POINTS" => "POINTS",
            "DATA" => "DATA",
            // PCL ignores entries it does not know; so does this reader.
            _ => continue,
        };
        if entries.iter().any(|(k, _)| *k == key) {
            return Err(PcdError::at(
                start,
                format!("header line {line_no}: a second {key} line"),
            ));
        }
        entries.push((
            key,
            Entry {
                line: line_no,
                offset: start,
                values: tokens.collect(),
            },
        ));
        if key == "DATA" {
            break pos.min(bytes.len());
        }
    };
    let get = |key: &str| entries.iter().find(|(k, _)| *k == key).map(|(_, e)| e);
    let missing = |key: &str| PcdError::new(format!("header has no {key} line"));
    let bad = |e: &Entry, what: String| PcdError::at(e.offset, format!("header line {}: {what}", e.line));

    let names = get("FIELDS").ok_or_else(|| missing("FIELDS"))?;
    if names.values.is_empty() || names.values.len() > super::layout::MAX_FIELDS {
        return Err(bad(
            names,
            format!(
                "FIELDS names {} fields (1 to {} allowed)",
                names.values.len(),
                super::layout::MAX_FIELDS
            ),
        ));
    }
    let n = names.values.len();
    let list = |key: &str, default: Option<&str>| -> Result<Vec<String>, PcdError> {
        match (get(key), default) {
            (Some(e), _) if e.values.len() != n => Err(bad(
                e,
                format!(
                    "{key} has {} values for {n} FIELDS ({})",
                    e.values.len(),
                    names.values.join(" ")
                ),
            )),
            (Some(e), _) => Ok(e.values.iter().map(|s| s.to_string()).collect()),
            (None, Some(d)) => Ok(vec![d.to_string(); n]),
            (None, None) => Err(missing(key)),
        }
    };
    let (sizes, types, counts) = (list("SIZE", None)?, list("TYPE", None)?, list("COUNT", Some("1"))?);
    let mut fields = Vec::with_capacity(n);
    for (k, name) in names.values.iter().enumerate() {
        let (size, kind, count) = (&sizes[k], &types[k], &counts[k]);
        let line = |key: &str| get(key).map_or(names, |e| e);
        let size: usize = size
            .parse()
            .map_err(|_| bad(line("SIZE"), format!("field `{name}`: SIZE `{size}` is not a number")))?;
        let count: usize = count.parse().ok().filter(|&c| c > 0 && c <= 1 << 16).ok_or_else(|| {
            bad(
                line("COUNT"),
                format!("field `{name}`: COUNT `{count}` is not 1 to 65536"),
            )
        })?;
        let letter = match kind.as_str() {
            "I" | "i" => 'I',
            "U" | "u" => 'U',
            "F" | "f" => 'F',
            _ => {
                return Err(bad(
                    line("TYPE"),
                    format!("field `{name}`: TYPE `{kind}` is not I, U or F"),
                ));
            }
        };
        let scalar = Scalar::from_pcd(letter, size);
        if scalar.is_none() && !(letter != 'F' && size == 8) {
            return Err(bad(
                line("TYPE"),
                format!("field `{name}`: TYPE {letter} with SIZE {size} is not a PCD type"),
            ));
        }
        fields.push(PcdField {
            name: name.to_string(),
            size,
            kind: letter,
            count,
            scalar,
        });
    }
    let number = |key: &str| -> Result<Option<usize>, PcdError> {
        let Some(e) = get(key) else { return Ok(None) };
        match e.values.as_slice() {
            [v] => v
                .parse()
                .map(Some)
                .map_err(|_| bad(e, format!("{key} `{v}` is not a number"))),
            _ => Err(bad(e, format!("{key} takes one number"))),
        }
    };
    let points = match (number("POINTS")?, number("WIDTH")?) {
        (Some(p), _) => p,
        (None, Some(w)) => w.saturating_mul(number("HEIGHT")?.unwrap_or(1)),
        (None, None) => return Err(missing("POINTS")),
    };
    let viewpoint = match get("VIEWPOINT") {
        None => IDENTITY_VIEWPOINT,
        Some(e) => {
            let values: Vec<f64> = e.values.iter().filter_map(|v| v.parse().ok()).collect();
            <[f64; 7]>::try_from(values.as_slice())
                .ok()
                .filter(|v| v.iter().all(|x| x.is_finite()))
                .ok_or_else(|| bad(e, "VIEWPOINT is not 7 finite numbers (tx ty tz qw qx qy qz)".into()))?
        }
    };
    let data = get("DATA").ok_or_else(|| missing("DATA"))?;
    let encoding = match data.values.as_slice() {
        [v] if v.eq_ignore_ascii_case("ascii") => PcdEncoding::Ascii,
        [v] if v.eq_ignore_ascii_case("binary") => PcdEncoding::Binary,
        [v] if v.eq_ignore_ascii_case("binary_compressed") => PcdEncoding::BinaryCompressed,
        v => {
            return Err(bad(
                data,
                format!("DATA `{}` is not ascii, binary or binary_compressed", v.join(" ")),
            ));
        }
    };
    let header = PcdHeader {
        fields,
        points,
        viewpoint,
        encoding,
        data_offset,
    };
    if header
        .fields
        .iter()
        .try_fold(0usize, |acc, f| {
            f.size.checked_mul(f.count).and_then(|b| acc.checked_add(b))
        })
        .is_none_or(|step| step > 1 << 20)
    {
        return Err(PcdError::new("a point record of over 1 MiB"));
    }
    Ok(header)
}

/// The layout of `header`'s records, and a note for each field it skips.
fn layout_of(header: &PcdHeader) -> Result<(PointLayout, Vec<String>), PcdError> {
    let mut fields = Vec::new();
    let mut notes = Vec::new();
    let mut offset = 0;
    for f in &header.fields {
        match f.scalar {
            _ if f.name == "_" => {}
            Some(scalar) => fields.push(Field {
                name: f.name.clone(),
                offset,
                scalar,
                count: f.count,
            }),
            None if ["x", "y", "z"].contains(&f.name.as_str()) => {
                return Err(PcdError::new(format!(
                    "field `{}` is a {}-byte integer ({}{}), not a coordinate type",
                    f.name, f.size, f.kind, f.size
                )));
            }
            None => notes.push(format!(
                "field `{}` ({} {}) skipped: 8-byte integers are not read",
                f.name, f.kind, f.size
            )),
        }
        offset += f.size * f.count;
    }
    let layout = PointLayout::new(fields, offset, false).map_err(|e| PcdError::new(format!("header: {e}")))?;
    Ok((layout, notes))
}

/// Decodes a whole PCD file held in memory.
pub fn decode_pcd(bytes: &[u8], config: &PcdConfig) -> Result<PcdCloud, PcdError> {
    let header = parse_header(bytes)?;
    let (layout, mut notes) = layout_of(&header)?;
    let step = layout.point_step();
    let data = bytes.get(header.data_offset..).unwrap_or_default();
    let at = header.data_offset;
    let expected = header
        .points
        .checked_mul(step)
        .filter(|&b| b as u64 <= config.max_file_bytes)
        .ok_or_else(|| {
            PcdError::new(format!(
                "POINTS {} × {step}-byte records is over the {}-byte limit (`max_file_bytes`)",
                header.points, config.max_file_bytes
            ))
        })?;
    let mut line_starts = Vec::new();
    let records = match header.encoding {
        PcdEncoding::Binary => {
            if data.len() != expected {
                return Err(size_mismatch(at, data.len(), expected, header.points, step));
            }
            std::borrow::Cow::Borrowed(data)
        }
        PcdEncoding::BinaryCompressed => std::borrow::Cow::Owned(decompress(&header, data, expected, step)?),
        PcdEncoding::Ascii => {
            let (records, starts) = parse_ascii(&header, data, step)?;
            line_starts = starts;
            std::borrow::Cow::Owned(records)
        }
    };
    let decoded = layout.decode(&records, config.non_finite).map_err(|e| {
        // A record offset is a file offset in binary data, a line in ascii, and only an offset
        // in the decompressed records in binary_compressed.
        match (header.encoding, e.offset) {
            (PcdEncoding::Binary, Some(o)) => PcdError::at(at + o as usize, e.detail),
            (PcdEncoding::Ascii, Some(o)) => match line_starts.get(o as usize / step) {
                Some(&line) => PcdError::at(line, e.detail),
                None => PcdError::new(e.detail),
            },
            (_, Some(o)) => PcdError::new(format!("byte {o} of the decompressed records: {}", e.detail)),
            (_, None) => PcdError::new(e.detail),
        }
    })?;
    notes.extend(decoded.note());
    let mut cloud = decoded.cloud;
    let mut world_from_sensor = Isometry3::identity();
    if config.viewpoint == ViewpointRule::Pose && header.viewpoint != IDENTITY_VIEWPOINT {
        let [tx, ty, tz, qw, qx, qy, qz] = header.viewpoint;
        let q = Quaternion::new(qw, qx, qy, qz);
        if q.norm().is_nan() || q.norm() <= 1e-9 {
            return Err(PcdError::new("VIEWPOINT quaternion has zero length"));
        }
        world_from_sensor = Isometry3::from_parts(Translation3::new(tx, ty, tz), UnitQuaternion::from_quaternion(q));
        cloud.transform(&world_from_sensor.inverse());
    }
    Ok(PcdCloud {
        cloud,
        world_from_sensor,
        encoding: header.encoding,
        notes,
    })
}

fn size_mismatch(at: usize, len: usize, expected: usize, points: usize, step: usize) -> PcdError {
    if len < expected {
        PcdError::at(
            at + len,
            format!(
                "file ends after {len} bytes of point data; POINTS {points} × {step}-byte records need {expected} \
                 (truncated?)"
            ),
        )
    } else {
        PcdError::at(
            at + expected,
            format!(
                "{} bytes after the last of POINTS {points} × {step}-byte records",
                len - expected
            ),
        )
    }
}

/// The row-major records of a `binary_compressed` body: LZF-decompressed columns, one per
/// header field in order, each `points × size × count` bytes, interleaved back into records.
fn decompress(header: &PcdHeader, data: &[u8], expected: usize, step: usize) -> Result<Vec<u8>, PcdError> {
    let at = header.data_offset;
    let word = |k: usize| {
        data.get(4 * k..4 * k + 4)
            .and_then(|b| b.try_into().ok())
            .map(|b| u32::from_le_bytes(b) as usize)
            .ok_or_else(|| {
                PcdError::at(
                    at + data.len(),
                    "file ends inside the compressed block's sizes (truncated?)",
                )
            })
    };
    let (packed, unpacked) = (word(0)?, word(1)?);
    if unpacked != expected {
        return Err(PcdError::at(
            at + 4,
            format!(
                "uncompressed size {unpacked} bytes disagrees with POINTS {} × {step}-byte records = {expected}",
                header.points
            ),
        ));
    }
    let body = data.get(8..).unwrap_or_default();
    if body.len() < packed {
        return Err(PcdError::at(
            at + data.len(),
            format!(
                "file ends {} bytes into a {packed}-byte compressed block (truncated?)",
                body.len()
            ),
        ));
    }
    if body.len() > packed {
        return Err(PcdError::at(
            at + 8 + packed,
            format!("{} bytes after the {packed}-byte compressed block", body.len() - packed),
        ));
    }
    if expected > packed.saturating_mul(MAX_LZF_RATIO) {
        return Err(PcdError::at(
            at,
            format!("{packed} compressed bytes cannot expand to {expected}"),
        ));
    }
    let columns = lzf_decompress(body, expected).map_err(|(o, detail)| PcdError::at(at + 8 + o, detail))?;
    if columns.len() != expected {
        return Err(PcdError::at(
            at + 8 + packed,
            format!(
                "compressed block expands to {} bytes, not the {expected} its header says",
                columns.len()
            ),
        ));
    }
    let widths: Vec<usize> = header.fields.iter().map(|f| f.size * f.count).collect();
    Ok(interleave(&columns, &widths, header.points))
}

/// Records from column-major data: column `k` holds `points` values of `widths[k]` bytes each,
/// one after another; `columns` must hold exactly `points × Σ widths` bytes.
pub(super) fn interleave(columns: &[u8], widths: &[usize], points: usize) -> Vec<u8> {
    let step: usize = widths.iter().sum();
    let mut records = vec![0u8; points * step];
    let (mut column_start, mut field_offset) = (0usize, 0usize);
    for &w in widths {
        if w == 0 {
            continue;
        }
        let column = columns.get(column_start..column_start + w * points).unwrap_or_default();
        for (record, value) in records.chunks_exact_mut(step).zip(column.chunks_exact(w)) {
            if let Some(dst) = record.get_mut(field_offset..field_offset + w) {
                dst.copy_from_slice(value);
            }
        }
        column_start += w * points;
        field_offset += w;
    }
    records
}

/// Decompresses LZF `input` to at most `limit` bytes; an error gives the input offset.
pub fn lzf_decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, (usize, String)> {
    let mut out: Vec<u8> = Vec::with_capacity(limit);
    let mut i = 0usize;
    let short = |i: usize| (i, "compressed block ends inside an LZF instruction".to_string());
    while let Some(&ctrl) = input.get(i) {
        let start = i;
        i += 1;
        let ctrl = ctrl as usize;
        if ctrl < 32 {
            let literal = input.get(i..i + ctrl + 1).ok_or_else(|| short(start))?;
            if out.len() + literal.len() > limit {
                return Err((start, format!("LZF data expands past {limit} bytes")));
            }
            out.extend_from_slice(literal);
            i += literal.len();
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or_else(|| short(start))? as usize;
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(i).ok_or_else(|| short(start))? as usize + 1;
            i += 1;
            if back > out.len() {
                return Err((
                    start,
                    format!("LZF back reference {back} bytes before the start of the output"),
                ));
            }
            if out.len() + len > limit {
                return Err((start, format!("LZF data expands past {limit} bytes")));
            }
            let from = out.len() - back;
            if back >= len {
                out.extend_from_within(from..from + len);
            } else {
                for k in from..from + len {
                    let b = out.get(k).copied().unwrap_or_default();
                    out.push(b);
                }
            }
        }
    }
    Ok(out)
}

/// The records of a `DATA ascii` body: one line per point, `Σ COUNT` values each (PCL also
/// writes lines without the `_` padding fields' values; both are read), blank lines skipped.
/// Returns the records and each point's line offset in the file.
fn parse_ascii(header: &PcdHeader, data: &[u8], step: usize) -> Result<(Vec<u8>, Vec<usize>), PcdError> {
    let total: usize = header.fields.iter().map(|f| f.count).sum();
    let padding: usize = header.fields.iter().filter(|f| f.name == "_").map(|f| f.count).sum();
    let capacity = header.points.min(data.len() / (2 * total).max(1) + 1);
    let mut records = Vec::with_capacity(capacity * step);
    let mut starts = Vec::with_capacity(capacity);
    let mut points = 0usize;
    let mut pos = 0usize;
    while pos < data.len() {
        let rest = data.get(pos..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == b'\n').map_or(data.len(), |k| pos + k);
        let start = header.data_offset + pos;
        let line = std::str::from_utf8(data.get(pos..end).unwrap_or_default())
            .map_err(|_| PcdError::at(start, format!("point {points}: line is not text")))?;
        pos = end + 1;
        let tokens: Vec<&str> = line.split_ascii_whitespace().collect();
        if tokens.is_empty() {
            continue;
        }
        if points == header.points {
            return Err(PcdError::at(
                start,
                format!("more than POINTS {} lines of points", header.points),
            ));
        }
        let with_padding = match tokens.len() {
            n if n == total => true,
            n if padding > 0 && n == total - padding => false,
            n => {
                return Err(PcdError::at(
                    start,
                    format!("point {points}: {n} values, expected {total}"),
                ));
            }
        };
        let mut tokens = tokens.into_iter();
        for f in &header.fields {
            if f.name == "_" {
                records.resize(records.len() + f.size * f.count, 0);
                if with_padding {
                    tokens.by_ref().take(f.count).for_each(drop);
                }
                continue;
            }
            for _ in 0..f.count {
                let token = tokens.next().unwrap_or_default();
                push_value(&mut records, token, f)
                    .map_err(|detail| PcdError::at(start, format!("point {points}: field `{}`: {detail}", f.name)))?;
            }
        }
        starts.push(start);
        points += 1;
    }
    if points < header.points {
        return Err(PcdError::at(
            header.data_offset + data.len(),
            format!(
                "file ends after {points} of POINTS {} lines of points (truncated?)",
                header.points
            ),
        ));
    }
    Ok((records, starts))
}

/// Appends one ascii value of field `f` to `records` as little-endian bytes.
fn push_value(records: &mut Vec<u8>, token: &str, f: &PcdField) -> Result<(), String> {
    let bad = || format!("`{token}` is not a {}{} value", f.kind, f.size);
    macro_rules! int {
        ($t:ty) => {
            records.extend(token.parse::<$t>().map_err(|_| bad())?.to_le_bytes())
        };
    }
    match (f.kind, f.size) {
        ('F', 4) => records.extend(token.parse::<f32>().map_err(|_| bad())?.to_le_bytes()),
        ('F', 8) => records.extend(token.parse::<f64>().map_err(|_| bad())?.to_le_bytes()),
        ('I', 1) => int!(i8),
        ('U', 1) => int!(u8),
        ('I', 2) => int!(i16),
        ('U', 2) => int!(u16),
        ('I', 4) => int!(i32),
        ('U', 4) => int!(u32),
        ('I', 8) => int!(i64),
        ('U', 8) => int!(u64),
        _ => return Err(bad()),
    }
    Ok(())
}

/// Reads `path` whole: a regular file of at most `max_file_bytes`; errors name frame `index`.
pub(super) fn read_file(path: &Path, index: usize, max_file_bytes: u64) -> Result<Vec<u8>, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| SourceError::io(path, e))?;
    if !meta.is_file() {
        return Err(SourceError::corrupt(
            path,
            format!("frame {index}"),
            "not a regular file",
        ));
    }
    if meta.len() > max_file_bytes {
        return Err(SourceError::corrupt(
            path,
            format!("frame {index}"),
            format!(
                "{} bytes is over the {max_file_bytes}-byte limit (`max_file_bytes`)",
                meta.len()
            ),
        ));
    }
    std::fs::read(path).map_err(|e| SourceError::io(path, e))
}

/// Reads a `.pcd` file with the default options.
pub fn read_pcd(path: &Path) -> Result<PcdCloud, SourceError> {
    let config = PcdConfig::default();
    let bytes = read_file(path, 0, config.max_file_bytes)?;
    decode_pcd(&bytes, &config).map_err(|e| e.into_source_error(path, 0))
}

/// Writes `cloud` as a PCD 0.7 file: `x y z intensity` as `F 4`, then each channel (f32 as
/// `F 4`, u8/u16/u32 as `U 1/2/4`, i64 as `I 4` when every value fits, else refused); ascii
/// floats in Rust's shortest round-trip form. The encoding is pcd-rs's, an independent writer.
pub fn write_pcd(path: &Path, cloud: &PointCloud, encoding: PcdEncoding) -> Result<(), SourceError> {
    use pcd_rs::{DataKind, DynRecord, DynWriter, Field as Value, Schema, ValueKind, WriterInit};
    let refuse = |what: String| {
        SourceError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("cannot write as PCD: {what}")),
        )
    };
    let n = cloud.len();
    let mut kinds = vec![ValueKind::F32; 4];
    let mut names: Vec<String> = ["x", "y", "z", "intensity"].map(String::from).to_vec();
    for (name, data) in cloud.channels() {
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '#') || names.iter().any(|n| n == name) {
            return Err(refuse(format!("channel name `{name}` is not a PCD field name")));
        }
        kinds.push(match data {
            ChannelData::F32(_) => ValueKind::F32,
            ChannelData::U8(_) => ValueKind::U8,
            ChannelData::U16(_) => ValueKind::U16,
            ChannelData::U32(_) => ValueKind::U32,
            ChannelData::I64(v) if v.iter().all(|&x| i32::try_from(x).is_ok()) => ValueKind::I32,
            ChannelData::I64(_) => return Err(refuse(format!("channel `{name}` has values beyond i32"))),
        });
        names.push(name.to_string());
    }
    let schema: Schema = names.iter().zip(&kinds).map(|(n, k)| (n.as_str(), *k, 1u64)).collect();
    let data_kind = match encoding {
        PcdEncoding::Ascii => DataKind::Ascii,
        PcdEncoding::Binary => DataKind::Binary,
        PcdEncoding::BinaryCompressed => DataKind::BinaryCompressed,
    };
    let pcd_error = |e: pcd_rs::Error| match e {
        pcd_rs::Error::IoError(e) => SourceError::io(path, e),
        other => refuse(other.to_string()),
    };
    let mut writer: DynWriter<_> = WriterInit {
        width: n as u64,
        height: 1,
        viewpoint: Default::default(),
        data_kind,
        schema: Some(schema),
        version: None,
    }
    .create(path)
    .map_err(pcd_error)?;
    let channels: Vec<&ChannelData> = cloud.channels().map(|(_, d)| d).collect();
    for i in 0..n {
        let mut values = vec![
            Value::F32(vec![cloud.x()[i]]),
            Value::F32(vec![cloud.y()[i]]),
            Value::F32(vec![cloud.z()[i]]),
            Value::F32(vec![cloud.intensity()[i]]),
        ];
        for data in &channels {
            values.push(match data {
                ChannelData::F32(v) => Value::F32(vec![v[i]]),
                ChannelData::U8(v) => Value::U8(vec![v[i]]),
                ChannelData::U16(v) => Value::U16(vec![v[i]]),
                ChannelData::U32(v) => Value::U32(vec![v[i]]),
                ChannelData::I64(v) => Value::I32(vec![v[i] as i32]),
            });
        }
        writer.push(&DynRecord(values)).map_err(pcd_error)?;
    }
    writer.finish().map_err(pcd_error)
}

/// The `.pcd` or `.npy` files of a sequence: `path` itself when it has extension `ext`, else
/// the folder's files with it, in name order; anything else is [`SourceError::Incompatible`].
pub(super) fn sequence_files(path: &Path, ext: &str, kind: &'static str) -> Result<Vec<PathBuf>, SourceError> {
    let has_ext = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case(ext))
    };
    let incompatible = || SourceError::Incompatible {
        path: path.to_path_buf(),
        kind,
    };
    if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| SourceError::io(path, e))? {
            let entry = entry.map_err(|e| SourceError::io(path, e))?;
            if has_ext(&entry.path()) {
                files.push(entry.path());
            }
        }
        if files.is_empty() {
            return Err(incompatible());
        }
        files.sort();
        Ok(files)
    } else if has_ext(path) {
        Ok(vec![path.to_path_buf()])
    } else {
        Err(incompatible())
    }
}

/// How a file stem names a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StampUnit {
    DecimalSeconds,
    Seconds,
    Millis,
    Micros,
    Nanos,
}

/// 2000-01-01 and 2100-01-01 in Unix seconds: the range an integer stem must fall in, in
/// exactly one unit, to be read as a time.
const EPOCH_RANGE_S: (u64, u64) = (946_684_800, 4_102_444_800);

/// The time (µs) a file stem names: `<sec>.<fraction>` is decimal seconds (fraction digits past
/// the sixth truncated; pcl_ros `bag_to_pcd`'s `<sec>.<nsec>` with its 9-digit nanoseconds reads
/// the same); digits alone are Unix seconds, ms, µs or ns, whichever puts them between 2000 and
/// 2100 (ns truncated to µs); anything else names no time.
fn stem_stamp(stem: &str) -> Option<(i64, StampUnit)> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((sec, frac)) = stem.split_once('.') {
        if !digits(sec) || !digits(frac) || sec.len() > 12 {
            return None;
        }
        let sec: i64 = sec.parse().ok()?;
        let micros: i64 = format!("{:0<6}", frac.get(..frac.len().min(6))?).parse().ok()?;
        return Some((sec * 1_000_000 + micros, StampUnit::DecimalSeconds));
    }
    if !digits(stem) || stem.len() > 19 {
        return None;
    }
    let v: u64 = stem.parse().ok()?;
    let (lo, hi) = EPOCH_RANGE_S;
    [
        (1u64, StampUnit::Seconds),
        (1_000, StampUnit::Millis),
        (1_000_000, StampUnit::Micros),
        (1_000_000_000, StampUnit::Nanos),
    ]
    .into_iter()
    .find(|(per_s, _)| v >= lo * per_s && v < hi * per_s)
    .and_then(|(per_s, unit)| {
        let micros = match unit {
            StampUnit::Nanos => v / 1_000,
            _ => v * (1_000_000 / per_s),
        };
        Some((i64::try_from(micros).ok()?, unit))
    })
}

/// Frame times (µs) from the files' stems, when every stem names a time in one unit (see
/// `stem_stamp`: `1618888888.123456`, `1618888888123456789`) and they strictly increase in
/// name order; `None` otherwise (the reader then stamps frame `i` at `i × 100 ms`).
pub fn stamps_from_names(files: &[PathBuf]) -> Option<Vec<i64>> {
    let mut stamps = Vec::with_capacity(files.len());
    let mut unit = None;
    for f in files {
        let stem = f.file_stem()?.to_str()?;
        let (t, u) = stem_stamp(stem)?;
        if unit.is_some_and(|v| v != u) || stamps.last().is_some_and(|&last| t <= last) {
            return None;
        }
        unit = Some(u);
        stamps.push(t);
    }
    Some(stamps)
}

/// A sequence of `.pcd` sweeps.
#[derive(Debug)]
pub struct PcdSource {
    meta: SequenceMeta,
    files: Vec<PathBuf>,
    stamps: Option<Vec<i64>>,
    config: PcdConfig,
}

impl PcdSource {
    /// Opens a `.pcd` file or a folder of them; anything else is [`SourceError::Incompatible`].
    /// No file is read until its frame is.
    pub fn open(path: &Path, config: PcdConfig) -> Result<Self, SourceError> {
        let files = sequence_files(path, "pcd", "PCD")?;
        let stamps = stamps_from_names(&files);
        if stamps.is_none() && files.len() > 1 {
            tracing::debug!(
                "{}: file names name no times; frames stamped every 100 ms",
                path.display()
            );
        }
        Ok(Self {
            meta: sequence_meta(path, KIND, config.platform),
            files,
            stamps,
            config,
        })
    }

    /// Whether frame times come from the file names (else `index × 100 ms`).
    pub fn stamped_by_names(&self) -> bool {
        self.stamps.is_some()
    }
}

/// The metadata of a sequence opened from `path`, named by its stem.
pub(super) fn sequence_meta(path: &Path, kind: &'static str, platform: Platform) -> SequenceMeta {
    SequenceMeta {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| kind.to_string()),
        platform,
        source_kind: kind,
        path: path.to_path_buf(),
        skipped: Vec::new(),
    }
}

/// The frame at `index` of a file sequence: its stamp from `stamps` or `index × 100 ms`.
pub(super) fn file_frame(
    meta: &SequenceMeta,
    index: usize,
    stamps: Option<&[i64]>,
    cloud: PointCloud,
    world_from_sensor: Isometry3<f64>,
    notes: Vec<String>,
) -> Frame {
    Frame {
        sequence: meta.name.clone(),
        index,
        timestamp_micros: stamps
            .and_then(|s| s.get(index).copied())
            .unwrap_or(index as i64 * FRAME_PERIOD_MICROS),
        platform: meta.platform,
        cloud,
        world_from_sensor,
        imu: Vec::new(),
        cameras: Vec::new(),
        ground_truth: Vec::new(),
        notes,
    }
}

impl Source for PcdSource {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.files.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let path = self.files.get(index).ok_or_else(|| SourceError::FrameOutOfRange {
            path: self.meta.path.clone(),
            index,
            len: self.files.len(),
        })?;
        let bytes = read_file(path, index, self.config.max_file_bytes)?;
        let pcd = decode_pcd(&bytes, &self.config).map_err(|e| e.into_source_error(path, index))?;
        Ok(file_frame(
            &self.meta,
            index,
            self.stamps.as_deref(),
            pcd.cloud,
            pcd.world_from_sensor,
            pcd.notes,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &[u8]) -> Result<PcdCloud, PcdError> {
        decode_pcd(text, &PcdConfig::default())
    }

    /// The PCD spec's own example header, `FIELDS x y z intensity`, in ascii.
    #[test]
    fn an_ascii_file_from_the_spec_reads_by_field_name() {
        let file = b"# .PCD v.7 - Point Cloud Data file format\nVERSION .7\nFIELDS x y z intensity\n\
            SIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nWIDTH 3\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n\
            POINTS 3\nDATA ascii\n0.93773 0.33763 0 4.2108e+06\n0.90805 0.35641 0 4.2108e+06\n\r\n\
            -0.1 1e-7 3.5 7\n";
        let pcd = decode(file).unwrap();
        assert_eq!(pcd.encoding, PcdEncoding::Ascii);
        assert_eq!(pcd.cloud.x(), &[0.93773, 0.90805, -0.1]);
        assert_eq!(pcd.cloud.y(), &[0.33763, 0.35641, 1e-7]);
        assert_eq!(pcd.cloud.intensity(), &[4.2108e6, 4.2108e6, 7.0]);
        assert_eq!(
            (pcd.cloud.channels().count(), pcd.world_from_sensor),
            (0, Isometry3::identity())
        );
    }

    /// A PCL `PointXYZRGB`-style record: x y z, 4 bytes of `_` padding, `rgb` U4, a 3-valued
    /// `normal` (skipped) and `i` as the intensity; binary, and ascii with and without the padding
    /// values.
    #[test]
    fn padding_rgb_and_multi_valued_fields_map_by_name() {
        let head = "FIELDS x y z _ rgb normal i\nSIZE 4 4 4 1 4 4 2\nTYPE F F F U U F U\nCOUNT 1 1 1 4 1 3 1\n\
            WIDTH 2\nHEIGHT 1\nPOINTS 2\n";
        let mut binary = format!("VERSION 0.7\n{head}DATA binary\n").into_bytes();
        for (p, rgb, i) in [
            ([1.0f32, 2.0, 3.0], 0x00ff_8000u32, 7u16),
            ([-1.0, 0.5, 0.25], 0x0000_00ff, 9),
        ] {
            p.iter().for_each(|v| binary.extend(v.to_le_bytes()));
            binary.extend([0xAA; 4]);
            binary.extend(rgb.to_le_bytes());
            [0.0f32, 0.0, 1.0].iter().for_each(|v| binary.extend(v.to_le_bytes()));
            binary.extend(i.to_le_bytes());
        }
        let with_padding =
            format!("{head}DATA ascii\n1 2 3 0 0 0 0 16744448 0 0 1 7\n-1 0.5 0.25 0 0 0 0 255 0 0 1 9\n");
        let without = format!("{head}DATA ascii\n1 2 3 16744448 0 0 1 7\n-1 0.5 0.25 255 0 0 1 9\n");
        for bytes in [binary, with_padding.into_bytes(), without.into_bytes()] {
            let pcd = decode(&bytes).unwrap();
            assert_eq!(pcd.cloud.x(), &[1.0, -1.0]);
            assert_eq!(pcd.cloud.z(), &[3.0, 0.25]);
            assert_eq!(pcd.cloud.intensity(), &[7.0, 9.0]);
            assert_eq!(
                pcd.cloud.channel("rgb"),
                Some(&ChannelData::U32(vec![0x00ff_8000, 0xff]))
            );
            assert_eq!(pcd.cloud.channels().count(), 1, "{:?}", pcd.encoding);
        }
    }

    #[test]
    fn a_viewpoint_is_the_sensor_pose_and_points_move_into_the_sensor_frame() {
        // Sensor at (10, 0, 0) turned 90° about z: the file point (10, 1, 0) is 1 m ahead of it.
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let file = format!(
            "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 1\nVIEWPOINT 10 0 0 {h} 0 0 {h}\nPOINTS 1\nDATA ascii\n10 1 0\n"
        );
        let pcd = decode(file.as_bytes()).unwrap();
        let p = pcd.cloud.point(0);
        assert!((p - nalgebra::Point3::new(1.0, 0.0, 0.0)).norm() < 1e-6, "{p}");
        assert!((pcd.world_from_sensor * p - nalgebra::Point3::new(10.0, 1.0, 0.0)).norm() < 1e-6);
        let ignore = PcdConfig {
            viewpoint: ViewpointRule::Ignore,
            ..PcdConfig::default()
        };
        let pcd = decode_pcd(file.as_bytes(), &ignore).unwrap();
        assert_eq!(
            (pcd.cloud.x(), pcd.world_from_sensor),
            (&[10.0f32][..], Isometry3::identity())
        );
    }

    #[test]
    fn bad_headers_and_bodies_are_refused_saying_where_and_what() {
        let ok = "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nWIDTH 2\nPOINTS 2\n";
        let cases: Vec<(String, &str)> = vec![
            (
                "SIZE 4 4 4\nTYPE F F F\nPOINTS 1\nDATA ascii\n".into(),
                "header has no FIELDS line",
            ),
            (
                "FIELDS x y z\nSIZE 4 4\nTYPE F F F\nPOINTS 1\nDATA ascii\n".into(),
                "byte 13: header line 2: SIZE has 2 values for 3 FIELDS (x y z)",
            ),
            (
                "FIELDS x y z\nSIZE 4 4 2\nTYPE F F F\nPOINTS 1\nDATA ascii\n".into(),
                "header line 3: field `z`: TYPE F with SIZE 2 is not a PCD type",
            ),
            (
                "FIELDS x y z\nSIZE 4 4 4\nTYPE F F Q\nPOINTS 1\nDATA ascii\n".into(),
                "field `z`: TYPE `Q` is not I, U or F",
            ),
            (
                format!("{ok}DATA xml\n"),
                "DATA `xml` is not ascii, binary or binary_compressed",
            ),
            (ok.to_string(), "header ends before its DATA line"),
            (
                format!("{ok}DATA binary\n{}", "\0".repeat(23)),
                "byte 87: file ends after 23 bytes of point data; POINTS 2 × 12-byte records need 24 (truncated?)",
            ),
            (
                format!("{ok}DATA binary\n{}", "\0".repeat(25)),
                "byte 88: 1 bytes after the last of POINTS 2",
            ),
            (
                format!("{ok}DATA ascii\n1 2 3\n"),
                "byte 69: file ends after 1 of POINTS 2 lines of points (truncated?)",
            ),
            (
                format!("{ok}DATA ascii\n1 2 3\n1 2\n"),
                "byte 69: point 1: 2 values, expected 3",
            ),
            (
                format!("{ok}DATA ascii\n1 2 3\n1 2 x\n"),
                "point 1: field `z`: `x` is not a F4 value",
            ),
            (
                format!("{ok}DATA ascii\n1 2 3\n1 2 3\n4 5 6\n"),
                "more than POINTS 2 lines",
            ),
            (
                format!("{ok}DATA binary_compressed\n\x04\0\0\0\x18\0\0\0\x01ab"),
                "file ends 3 bytes into a 4-byte compressed block (truncated?)",
            ),
            (
                format!("{ok}DATA binary_compressed\n\x04\0\0\0\x10\0\0\0"),
                "uncompressed size 16 bytes disagrees with POINTS 2 × 12-byte records = 24",
            ),
            (
                "FIELDS x y\nSIZE 4 4\nTYPE F F\nPOINTS 1\nDATA ascii\n1 2\n".into(),
                "header: no field `z` (fields: x, y)",
            ),
            (
                "FIELDS x y z\nSIZE 8 4 4\nTYPE I F F\nPOINTS 1\nDATA ascii\n1 2 3\n".into(),
                "field `x` is a 8-byte integer",
            ),
        ];
        for (file, want) in cases {
            let e = decode(file.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}\n  lacks: {want}\n  file: {file:?}");
        }
        let e = decode(format!("{ok}DATA ascii\n1 2 3\n1 2 3\n4 5 6\n").as_bytes())
            .unwrap_err()
            .into_source_error(Path::new("a.pcd"), 4)
            .to_string();
        assert!(e.starts_with("a.pcd: frame 4 at byte 75: more than POINTS 2"), "{e}");
    }

    #[test]
    fn non_finite_points_are_dropped_into_notes_or_refused_at_their_line() {
        let file = b"FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nPOINTS 3\nDATA ascii\n1 2 3\nnan 0 0\n4 5 inf\n";
        let pcd = decode(file).unwrap();
        assert_eq!(pcd.cloud.x(), &[1.0]);
        assert_eq!(pcd.notes, ["2 points with a non-finite x, y or z dropped"]);
        let strict = PcdConfig {
            non_finite: NonFinite::Fail,
            ..PcdConfig::default()
        };
        let e = decode_pcd(file, &strict).unwrap_err().to_string();
        assert!(e.starts_with("byte 61: point 1 has a non-finite coordinate"), "{e}");
    }

    #[test]
    fn lzf_literals_and_overlapping_back_references_expand() {
        // "abc", then a back reference of length 7 at distance 3: "abcabcabca".
        let stream = [2, b'a', b'b', b'c', (5 << 5), 2];
        assert_eq!(lzf_decompress(&stream, 64).unwrap(), b"abcabcabca");
        assert!(lzf_decompress(&stream, 9).unwrap_err().1.contains("expands past 9"));
        assert!(
            lzf_decompress(&[0x20, 5], 64)
                .unwrap_err()
                .1
                .contains("before the start")
        );
        assert!(lzf_decompress(&[3, b'a'], 64).unwrap_err().1.contains("ends inside"));
    }

    #[test]
    fn numeric_file_names_are_times_when_all_agree() {
        let paths = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            stamps_from_names(&paths(&["1618888888.123456.pcd", "1618888888.2234567.pcd"])),
            Some(vec![1_618_888_888_123_456, 1_618_888_888_223_456])
        );
        // pcl_ros `<sec>.<nsec>` and integer ns / µs / ms / s since the epoch.
        assert_eq!(
            stamps_from_names(&paths(&["1618888888.000000500.pcd"])),
            Some(vec![1_618_888_888_000_000])
        );
        for (names, t0) in [
            (
                ["1618888888123456789.pcd", "1618888888223456789.pcd"],
                1_618_888_888_123_456,
            ),
            (["1618888888123456.pcd", "1618888888223456.pcd"], 1_618_888_888_123_456),
            (["1618888888123.pcd", "1618888888223.pcd"], 1_618_888_888_123_000),
            (["1618888888.pcd", "1618888889.pcd"], 1_618_888_888_000_000),
        ] {
            assert_eq!(stamps_from_names(&paths(&names)).unwrap()[0], t0, "{names:?}");
        }
        // Frame numbers, mixed units, repeats, non-numbers: no times.
        for names in [
            &["000000.pcd", "000001.pcd"][..],
            &["1618888888.pcd", "1618888888123.pcd"],
            &["1618888888.5.pcd", "1618888888.5.pcd"],
            &["scan_1618888888.pcd"],
            &["1618888889.0.pcd", "1618888888.0.pcd"],
        ] {
            assert_eq!(stamps_from_names(&paths(names)), None, "{names:?}");
        }
    }

    #[test]
    fn an_empty_cloud_round_trips_and_a_foreign_path_is_incompatible() {
        let dir = tempfile::tempdir().unwrap();
        for encoding in [PcdEncoding::Ascii, PcdEncoding::Binary, PcdEncoding::BinaryCompressed] {
            let path = dir.path().join(format!("{}.pcd", encoding.as_str()));
            write_pcd(&path, &PointCloud::new(), encoding).unwrap();
            assert!(read_pcd(&path).unwrap().cloud.is_empty(), "{encoding:?}");
        }
        assert!(matches!(
            PcdSource::open(&dir.path().join("x.bin"), PcdConfig::default()),
            Err(SourceError::Incompatible { .. })
        ));
        let device = dir.path().join("zero.pcd");
        std::os::unix::fs::symlink("/dev/zero", &device).unwrap();
        let e = read_pcd(&device).unwrap_err().to_string();
        assert!(e.contains("zero.pcd: frame 0: not a regular file"), "{e}");
    }
}
