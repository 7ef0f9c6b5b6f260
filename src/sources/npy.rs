//! NumPy `.npy` point arrays: one file per sweep, either an N×K float32/float64 array (C or
//! Fortran order) whose columns are named by `npy.fields` or by K (3: `x y z`; 4: `+ intensity`;
//! 5: `+ ring`, as nuScenes), or an N-element structured array whose dtype names its fields
//! (`[('x', '<f4'), ('y', '<f4'), …]`). Either way the fields become a [`PointLayout`] and map by
//! name as every other point format does. The header (format versions 1 to 3) is parsed here;
//! the data must be exactly N × itemsize bytes. Sequences, times and limits are as for `.pcd`
//! files ([`super::pcd`]): a file or a folder in name order, stamped from the file names when
//! they all name a time, else every 100 ms; identity pose.

use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde::{Deserialize, Serialize};

use super::layout::{Field, NonFinite, PointLayout, Scalar};
use super::pcd::{file_frame, interleave, read_file, sequence_files, sequence_meta, stamps_from_names};
use super::{SequenceMeta, Source, SourceError};
use crate::cloud::{ChannelData, PointCloud};
use crate::frame::{Frame, Platform};

/// The `source_kind` of `.npy` sequences.
pub const KIND: &str = "npy";

/// The `.npy` magic string.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Longest header read (bytes).
const MAX_HEADER_BYTES: usize = 1 << 20;

/// Deepest nesting of the header's Python literal.
const MAX_DEPTH: usize = 8;

/// Options of the `.npy` reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NpyConfig {
    /// The platform that recorded the sweeps; default `vehicle`.
    pub platform: Platform,
    /// Largest file read, in bytes; default 512 MiB.
    pub max_file_bytes: u64,
    /// What to do with a point whose x, y or z is not finite; default drop and count it.
    pub non_finite: NonFinite,
    /// Names of an N×K array's K columns in order (`_` skips one); default empty: by K (3:
    /// `x y z`; 4: `x y z intensity`; 5: `x y z intensity ring`), other K refused.
    pub fields: Vec<String>,
}

impl Default for NpyConfig {
    fn default() -> Self {
        Self {
            platform: Platform::Vehicle,
            max_file_bytes: 512 << 20,
            non_finite: NonFinite::Drop,
            fields: Vec::new(),
        }
    }
}

/// An `.npy` file that cannot be read: where (byte offset in the file, when at one place) and what.
pub type NpyError = super::layout::LayoutError;

/// A Python literal of an `.npy` header.
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Str(String),
    Bool(bool),
    Int(u64),
    Seq(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

/// A recursive-descent reader of the literals `numpy.lib.format` writes.
struct Literal<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Literal<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.pos).is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.pos).copied()
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at header character {}", self.pos))
    }

    fn value(&mut self, depth: usize) -> Result<Py, String> {
        if depth > MAX_DEPTH {
            return self.fail("literal nested too deep");
        }
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => {
                let start = self.pos + 1;
                let Some(len) = self.text.get(start..).and_then(|t| t.iter().position(|&b| b == q)) else {
                    return self.fail("unterminated string");
                };
                let s = self.text.get(start..start + len).unwrap_or_default();
                if s.contains(&b'\\') {
                    return self.fail("escaped string");
                }
                self.pos = start + len + 1;
                Ok(Py::Str(String::from_utf8_lossy(s).into_owned()))
            }
            Some(b'0'..=b'9') => {
                let start = self.pos;
                while self.text.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(self.text.get(start..self.pos).unwrap_or_default()).unwrap_or("");
                let v = digits.parse().or_else(|_| self.fail("integer too large"))?;
                if self.text.get(self.pos) == Some(&b'L') {
                    self.pos += 1; // Python 2's long suffix
                }
                Ok(Py::Int(v))
            }
            Some(b'T' | b'F') => {
                for (word, v) in [("True", true), ("False", false)] {
                    if self
                        .text
                        .get(self.pos..)
                        .is_some_and(|t| t.starts_with(word.as_bytes()))
                    {
                        self.pos += word.len();
                        return Ok(Py::Bool(v));
                    }
                }
                self.fail("unknown word")
            }
            Some(open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        return Ok(Py::Seq(items));
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(c) if c == close => {}
                        _ => return self.fail("expected `,` or a closing bracket"),
                    }
                }
            }
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Py::Dict(items));
                    }
                    let key = self.value(depth + 1)?;
                    if self.peek() != Some(b':') {
                        return self.fail("expected `:`");
                    }
                    self.pos += 1;
                    items.push((key, self.value(depth + 1)?));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return self.fail("expected `,` or `}`"),
                    }
                }
            }
            _ => self.fail("expected a string, number, True/False, tuple, list or dict"),
        }
    }
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// The `descr`: a type string (`<f4`) or a structured dtype's `(name, type[, shape])` list.
    descr: Descr,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Byte offset of the data.
    pub data_offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Descr {
    Plain(String),
    /// (name, type string, values per element)
    Structured(Vec<(String, String, usize)>),
}

/// Parses an `.npy` header (format versions 1.0, 2.0 and 3.0).
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
    if bytes.get(..6) != Some(MAGIC.as_slice()) {
        return Err(NpyError::at(0, "not an .npy file (no \\x93NUMPY magic)"));
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[a, b]) => (a, b),
        _ => return Err(NpyError::at(bytes.len(), "file ends inside the version (truncated?)")),
    };
    let (len_bytes, start) = match major {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => {
            return Err(NpyError::at(
                6,
                format!("format version {major}.{minor} is not 1, 2 or 3"),
            ));
        }
    };
    let len = bytes
        .get(8..8 + len_bytes)
        .map(|b| b.iter().rev().fold(0usize, |acc, &x| (acc << 8) | x as usize))
        .ok_or_else(|| NpyError::at(bytes.len(), "file ends inside the header length (truncated?)"))?;
    if len > MAX_HEADER_BYTES {
        return Err(NpyError::at(
            8,
            format!("header of {len} bytes is over {MAX_HEADER_BYTES}"),
        ));
    }
    let text = bytes.get(start..start + len).ok_or_else(|| {
        NpyError::at(
            bytes.len(),
            format!("file ends inside the {len}-byte header (truncated?)"),
        )
    })?;
    let bad = |what: String| NpyError::at(start, format!("header: {what}"));
    let mut literal = Literal { text, pos: 0 };
    let Py::Dict(items) = literal.value(0).map_err(bad)? else {
        return Err(bad("not a dict".into()));
    };
    if literal.peek().is_some() {
        return Err(bad(format!("text after the dict at header character {}", literal.pos)));
    }
    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in items {
        match (key, value) {
            (Py::Str(k), v) if k == "descr" => descr = Some(parse_descr(&v).map_err(bad)?),
            (Py::Str(k), Py::Bool(b)) if k == "fortran_order" => fortran_order = Some(b),
            (Py::Str(k), Py::Seq(dims)) if k == "shape" => {
                shape = Some(
                    dims.iter()
                        .map(|d| match d {
                            Py::Int(n) => usize::try_from(*n).map_err(|_| bad("dimension too large".into())),
                            _ => Err(bad("shape is not a tuple of integers".into())),
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            (k, v) => return Err(bad(format!("unexpected entry {k:?}: {v:?}"))),
        }
    }
    let need = |what: &str| bad(format!("no `{what}` entry"));
    Ok(NpyHeader {
        descr: descr.ok_or_else(|| need("descr"))?,
        fortran_order: fortran_order.ok_or_else(|| need("fortran_order"))?,
        shape: shape.ok_or_else(|| need("shape"))?,
        data_offset: start + len,
    })
}

fn parse_descr(v: &Py) -> Result<Descr, String> {
    match v {
        Py::Str(s) => Ok(Descr::Plain(s.clone())),
        Py::Seq(fields) => fields
            .iter()
            .map(|f| match f.as_slice_of_seq() {
                Some([Py::Str(name), Py::Str(t)]) => Ok((name.clone(), t.clone(), 1)),
                Some([Py::Str(name), Py::Str(t), Py::Seq(dims)]) => {
                    let count = dims.iter().try_fold(1usize, |acc, d| match d {
                        Py::Int(n) => usize::try_from(*n).ok().and_then(|n| acc.checked_mul(n)),
                        _ => None,
                    });
                    let count = count.ok_or_else(|| format!("field `{name}`: shape {dims:?} is not integers"))?;
                    Ok((name.clone(), t.clone(), count))
                }
                _ => Err(format!("descr entry {f:?} is not (name, type) or (name, type, shape)")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Descr::Structured),
        other => Err(format!("descr {other:?} is not a type string or a list of fields")),
    }
}

impl Py {
    fn as_slice_of_seq(&self) -> Option<&[Py]> {
        match self {
            Py::Seq(v) => Some(v),
            _ => None,
        }
    }
}

/// The byte size of a NumPy type string (`<f4` 4, `|V12` 12, `<U3` 12, `<M8[ns]` 8).
fn type_size(t: &str) -> Option<usize> {
    let body = t.trim_start_matches(['<', '>', '|', '=']);
    let kind = body.chars().next()?;
    let digits: String = body.chars().skip(1).take_while(char::is_ascii_digit).collect();
    let n: usize = digits.parse().ok()?;
    Some(if kind == 'U' { n.checked_mul(4)? } else { n })
}

/// The default column names of an N×K array.
fn default_fields(k: usize) -> Option<Vec<String>> {
    let names: &[&str] = match k {
        3 => &["x", "y", "z"],
        4 => &["x", "y", "z", "intensity"],
        5 => &["x", "y", "z", "intensity", "ring"],
        _ => return None,
    };
    Some(names.iter().map(|s| s.to_string()).collect())
}

/// Decodes a whole `.npy` file held in memory; returns the points and the reader's notes.
pub fn decode_npy(bytes: &[u8], config: &NpyConfig) -> Result<(PointCloud, Vec<String>), NpyError> {
    let header = parse_header(bytes)?;
    let at = header.data_offset;
    let no_offset = |detail: String| NpyError { offset: None, detail };
    let mut notes = Vec::new();
    let (layout, points, columns) = match &header.descr {
        Descr::Plain(t) => {
            let (scalar, big_endian) = Scalar::from_npy_descr(t)
                .filter(|(s, _)| matches!(s, Scalar::F32 | Scalar::F64))
                .ok_or_else(|| no_offset(format!("dtype `{t}` is not float32 or float64")))?;
            let &[n, k] = header.shape.as_slice() else {
                return Err(no_offset(format!("shape {:?} is not N×K", header.shape)));
            };
            let names = if config.fields.is_empty() {
                default_fields(k).ok_or_else(|| {
                    no_offset(format!(
                        "{k} columns: set `npy.fields` to name them (defaults are for 3, 4 or 5)"
                    ))
                })?
            } else if config.fields.len() == k {
                config.fields.clone()
            } else {
                return Err(no_offset(format!(
                    "{k} columns but `npy.fields` names {} ({})",
                    config.fields.len(),
                    config.fields.join(", ")
                )));
            };
            let s = scalar.size();
            let fields = names
                .iter()
                .enumerate()
                .filter(|(_, name)| name.as_str() != "_")
                .map(|(j, name)| Field::new(name.as_str(), j * s, scalar))
                .collect();
            let layout = PointLayout::new(fields, k * s, big_endian).map_err(|e| no_offset(e.to_string()))?;
            let columns = header.fortran_order.then(|| vec![s; k]);
            (layout, n, columns)
        }
        Descr::Structured(entries) => {
            if !config.fields.is_empty() {
                return Err(no_offset(
                    "`npy.fields` is for N×K arrays; this file's structured dtype names its fields".into(),
                ));
            }
            let &[n] = header.shape.as_slice() else {
                return Err(no_offset(format!(
                    "structured array of shape {:?} is not one-dimensional",
                    header.shape
                )));
            };
            let mut fields = Vec::new();
            let mut offset = 0usize;
            let mut order = None;
            for (name, t, count) in entries {
                let size =
                    type_size(t).ok_or_else(|| no_offset(format!("field `{name}`: type `{t}` not understood")))?;
                let width = size
                    .checked_mul(*count)
                    .filter(|&w| w <= 1 << 20)
                    .ok_or_else(|| no_offset(format!("field `{name}` is too wide")))?;
                match Scalar::from_npy_descr(t) {
                    Some((scalar, big_endian)) if !name.is_empty() => {
                        if scalar.size() > 1 {
                            if order.is_some_and(|o| o != big_endian) {
                                return Err(no_offset("fields of both byte orders".into()));
                            }
                            order = Some(big_endian);
                        }
                        fields.push(Field {
                            name: name.clone(),
                            offset,
                            scalar,
                            count: *count,
                        });
                    }
                    _ if name.is_empty() || t.trim_start_matches(['<', '>', '|', '=']).starts_with('V') => {}
                    _ if ["x", "y", "z"].contains(&name.as_str()) => {
                        return Err(no_offset(format!(
                            "field `{name}` of type `{t}` is not a coordinate type"
                        )));
                    }
                    _ => notes.push(format!("field `{name}` ({t}) skipped: type not read")),
                }
                offset = offset
                    .checked_add(width)
                    .filter(|&o| o <= 1 << 20)
                    .ok_or_else(|| no_offset("record over 1 MiB".into()))?;
            }
            let layout =
                PointLayout::new(fields, offset, order.unwrap_or(false)).map_err(|e| no_offset(e.to_string()))?;
            // A one-dimensional array's records lie the same in C and Fortran order.
            (layout, n, None)
        }
    };
    let step = layout.point_step();
    let data = bytes.get(at..).unwrap_or_default();
    let expected = points.checked_mul(step).filter(|&b| b as u64 <= config.max_file_bytes);
    if expected != Some(data.len()) {
        let shape = format!("shape {:?} of {step}-byte elements", header.shape);
        return Err(match expected {
            None => no_offset(format!("{shape} is over the `max_file_bytes` limit")),
            Some(e) if data.len() < e => NpyError::at(
                at + data.len(),
                format!(
                    "file ends after {} bytes of data; {shape} needs {e} (truncated?)",
                    data.len()
                ),
            ),
            Some(e) => NpyError::at(at + e, format!("{} bytes after the {shape}", data.len() - e)),
        });
    }
    let records = match &columns {
        Some(widths) => std::borrow::Cow::Owned(interleave(data, widths, points)),
        None => std::borrow::Cow::Borrowed(data),
    };
    let decoded = layout
        .decode(&records, config.non_finite)
        .map_err(|e| match (e.offset, &columns) {
            (Some(o), None) => NpyError::at(at + o as usize, e.detail),
            _ => no_offset(e.detail),
        })?;
    notes.extend(decoded.note());
    Ok((decoded.cloud, notes))
}

/// Reads an `.npy` file with the default options.
pub fn read_npy(path: &Path) -> Result<PointCloud, SourceError> {
    let config = NpyConfig::default();
    let bytes = read_file(path, 0, config.max_file_bytes)?;
    decode_npy(&bytes, &config)
        .map(|(cloud, _)| cloud)
        .map_err(|e| e.into_source_error(path, 0))
}

/// Writes the named columns of `cloud` (`x`, `y`, `z`, `intensity` or a channel) as an N×K
/// little-endian float32 C-order `.npy` (format 1.0); a value float32 does not hold exactly
/// (an integer channel past 2²⁴) is refused.
pub fn write_npy(path: &Path, cloud: &PointCloud, fields: &[&str]) -> Result<(), SourceError> {
    let refuse = |what: String| {
        SourceError::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("cannot write as .npy: {what}"),
            ),
        )
    };
    let mut columns: Vec<Vec<f32>> = Vec::with_capacity(fields.len());
    for &name in fields {
        let column = match name {
            "x" => cloud.x().to_vec(),
            "y" => cloud.y().to_vec(),
            "z" => cloud.z().to_vec(),
            "intensity" => cloud.intensity().to_vec(),
            _ => {
                let exact = |v: f64| (v as f32) as f64 == v;
                let data = cloud
                    .channel(name)
                    .ok_or_else(|| refuse(format!("no channel `{name}`")))?;
                let column: Vec<f64> = match data {
                    ChannelData::F32(v) => v.iter().map(|&x| x as f64).collect(),
                    ChannelData::U8(v) => v.iter().map(|&x| x as f64).collect(),
                    ChannelData::U16(v) => v.iter().map(|&x| x as f64).collect(),
                    ChannelData::U32(v) => v.iter().map(|&x| x as f64).collect(),
                    ChannelData::I64(v) => v.iter().map(|&x| x as f64).collect(),
                };
                if !column.iter().all(|&v| v.is_nan() || exact(v)) {
                    return Err(refuse(format!("channel `{name}` has values float32 does not hold")));
                }
                column.into_iter().map(|v| v as f32).collect()
            }
        };
        columns.push(column);
    }
    let mut dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        cloud.len(),
        fields.len()
    );
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut bytes = Vec::with_capacity(10 + dict.len() + 4 * cloud.len() * fields.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[1, 0]);
    bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    for i in 0..cloud.len() {
        for column in &columns {
            bytes.extend_from_slice(&column.get(i).copied().unwrap_or_default().to_le_bytes());
        }
    }
    std::fs::write(path, bytes).map_err(|e| SourceError::io(path, e))
}

/// A sequence of `.npy` sweeps.
#[derive(Debug)]
pub struct NpySource {
    meta: SequenceMeta,
    files: Vec<PathBuf>,
    stamps: Option<Vec<i64>>,
    config: NpyConfig,
}

impl NpySource {
    /// Opens an `.npy` file or a folder of them; anything else is [`SourceError::Incompatible`].
    /// No file is read until its frame is.
    pub fn open(path: &Path, config: NpyConfig) -> Result<Self, SourceError> {
        let files = sequence_files(path, "npy", "NumPy .npy")?;
        let stamps = stamps_from_names(&files);
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

impl Source for NpySource {
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
        let (cloud, notes) = decode_npy(&bytes, &self.config).map_err(|e| e.into_source_error(path, index))?;
        Ok(file_frame(
            &self.meta,
            index,
            self.stamps.as_deref(),
            cloud,
            Isometry3::identity(),
            notes,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.npy` file of format `version` with header dict `dict` and `data`.
    fn npy(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend([version, 0]);
        if version == 1 {
            b.extend((dict.len() as u16).to_le_bytes());
        } else {
            b.extend((dict.len() as u32).to_le_bytes());
        }
        b.extend(dict.as_bytes());
        b.extend(data);
        b
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn headers_of_every_version_and_layout_read() {
        let c = npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
            &f32s(&[1., 2., 3., 4., 5., 6.]),
        );
        let (cloud, notes) = decode_npy(&c, &NpyConfig::default()).unwrap();
        assert_eq!(
            (cloud.x(), cloud.z(), notes.len()),
            (&[1.0, 4.0][..], &[3.0, 6.0][..], 0)
        );
        // Fortran order: columns one after another; version 2 and a Python 2 `L` suffix.
        let f = npy(
            2,
            "{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (2L, 3L)}",
            &f32s(&[1., 4., 2., 5., 3., 6.]),
        );
        assert_eq!(decode_npy(&f, &NpyConfig::default()).unwrap().0, cloud);
        let s = npy(
            3,
            "{'descr': [('y', '<f4'), ('', '|V4'), ('x', '<f4'), ('z', '<f4'), ('rgb', '|u1', (3,))], \
             'fortran_order': False, 'shape': (1,), }",
            &[f32s(&[2.0, 0.0, 1.0, 3.0]), vec![1, 2, 3]].concat(),
        );
        let (one, _) = decode_npy(&s, &NpyConfig::default()).unwrap();
        assert_eq!(
            (one.x(), one.y(), one.z(), one.channels().count()),
            (&[1.0][..], &[2.0][..], &[3.0][..], 0)
        );
    }

    #[test]
    fn malformed_headers_and_sizes_are_refused_saying_where() {
        let d = |body: &str| npy(1, body, &f32s(&[0.0; 3]));
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"\x93NUMPX".to_vec(), "byte 0: not an .npy file"),
            (npy(4, "{}", &[]), "byte 6: format version 4.0 is not 1, 2 or 3"),
            (
                MAGIC[..].iter().copied().chain([1, 0, 200, 0]).collect(),
                "file ends inside the 200-byte header",
            ),
            (
                d("{'descr': '<f4', 'shape': (1, 3)}"),
                "byte 10: header: no `fortran_order` entry",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3)"),
                "byte 10: header: expected `,` or `}` at header character 56",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), 'x': 1}"),
                "unexpected entry",
            ),
            (
                d("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 3)}"),
                "dtype `<i4` is not float32 or float64",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"),
                "shape [3] is not N×K",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)}"),
                "2 columns: set `npy.fields`",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
                "file ends after 12 bytes of data",
            ),
            (
                d("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}"),
                "12 bytes after the shape [0, 3]",
            ),
            (
                d(&format!("{}'a'{}", "[".repeat(20), "]".repeat(20))),
                "nested too deep",
            ),
        ];
        for (bytes, want) in cases {
            let e = decode_npy(&bytes, &NpyConfig::default()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}\n  lacks: {want}");
        }
        let e = decode_npy(
            &d("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}"),
            &NpyConfig::default(),
        )
        .unwrap_err();
        assert_eq!(e.offset, Some(10 + 57 + 12));
    }

    #[test]
    fn non_finite_points_are_dropped_into_notes_or_refused_at_their_offset() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let bytes = npy(1, dict, &f32s(&[1.0, 2.0, 3.0, f32::NAN, 0.0, 0.0]));
        let (cloud, notes) = decode_npy(&bytes, &NpyConfig::default()).unwrap();
        assert_eq!(
            (cloud.len(), notes),
            (1, vec!["1 point with a non-finite x, y or z dropped".to_string()])
        );
        let strict = NpyConfig {
            non_finite: NonFinite::Fail,
            ..NpyConfig::default()
        };
        let e = decode_npy(&bytes, &strict).unwrap_err();
        assert_eq!(e.offset, Some((10 + dict.len() + 12) as u64), "{e}");
    }
}
