//! Small typed reads over `hdf5` that turn library errors into [`SourceError`]s naming the file
//! and the dataset, and accept the type variations real M3ED files show (int or float, any
//! string flavour). Every read is sized first: libhdf5 allocates whatever a (damaged) dataspace
//! declares and crashes or loops on a damaged global heap (issue 18), so a dataset larger than its
//! file could hold or than [`MAX_READ_BYTES`] is refused, and variable-length strings are read
//! from the file by this module, bounds-checked, instead of through the library's heap code.

use std::os::unix::fs::FileExt;
use std::path::Path;

use hdf5::types::{TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Dataset, Group};

use crate::sources::SourceError;

/// The most one whole-dataset read may allocate (1 GiB); M3ED's largest fully-read arrays (IMU
/// rows of an hour-long log) are a few hundred MB at most.
pub(crate) const MAX_READ_BYTES: u64 = 1 << 30;
/// How many times its file's size a dataset's logical size may be: LZF packs at most ≈ 100:1
/// and deflate ≈ 1000:1, so a larger claim is a damaged dataspace, not compression.
pub(crate) const MAX_EXPANSION: u64 = 1100;
/// The longest variable-length string read (16 MiB; `/ouster/metadata` is ≈ 30 kB).
pub(crate) const MAX_STRING_BYTES: u64 = 16 << 20;

/// A dataset that must exist.
pub(crate) fn dataset(path: &Path, group: &Group, name: &str) -> Result<Dataset, SourceError> {
    if !group.link_exists(name) {
        return Err(SourceError::Missing {
            path: path.to_path_buf(),
            what: format!("dataset {}/{}", group.name().trim_end_matches('/'), name),
        });
    }
    group
        .dataset(name)
        .map_err(|e| SourceError::corrupt(path, name.to_string(), e.to_string()))
}

/// A dataset that may be absent.
pub(crate) fn optional_dataset(path: &Path, group: &Group, name: &str) -> Result<Option<Dataset>, SourceError> {
    if link_exists(group, name) {
        dataset(path, group, name).map(Some)
    } else {
        Ok(None)
    }
}

/// Whether `name` (possibly nested, `a/b/c`) exists under `group`, checking each level.
pub(crate) fn link_exists(group: &Group, name: &str) -> bool {
    let mut prefix = String::new();
    for part in name.split('/').filter(|p| !p.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if !group.link_exists(&prefix) {
            return false;
        }
    }
    !prefix.is_empty()
}

fn where_(ds: &Dataset) -> String {
    format!("dataset {}", ds.name())
}

/// `ds`'s shape and logical size in bytes, refused when the size overflows or exceeds what the
/// file at `path` can hold ([`MAX_EXPANSION`] times its size, at least 1 MiB).
pub(crate) fn checked_size(path: &Path, ds: &Dataset) -> Result<(Vec<usize>, u64), SourceError> {
    let shape = ds.shape();
    let element = ds
        .dtype()
        .map_err(|e| SourceError::corrupt(path, where_(ds), e.to_string()))?
        .size() as u64;
    let bytes = shape
        .iter()
        .try_fold(element, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| SourceError::corrupt(path, where_(ds), format!("shape {shape:?} overflows")))?;
    let file_bytes = std::fs::metadata(path).map_err(|e| SourceError::io(path, e))?.len();
    let limit = file_bytes.saturating_mul(MAX_EXPANSION).max(1 << 20);
    if bytes > limit {
        return Err(SourceError::corrupt(
            path,
            where_(ds),
            format!(
                "shape {shape:?} of {element}-byte values declares {bytes} bytes, more than a {file_bytes}-byte file holds"
            ),
        ));
    }
    Ok((shape, bytes))
}

/// Checks that `ds` may be read whole: [`checked_size`] and at most [`MAX_READ_BYTES`].
pub(crate) fn check_full_read(path: &Path, ds: &Dataset) -> Result<(), SourceError> {
    let (shape, bytes) = checked_size(path, ds)?;
    // Read as f64 / i64 whatever the stored width, so the buffer is 8 bytes per element.
    let elements: u64 = shape.iter().map(|&d| d as u64).product();
    let buffer = bytes.max(elements.saturating_mul(8));
    if buffer > MAX_READ_BYTES {
        return Err(SourceError::corrupt(
            path,
            where_(ds),
            format!("shape {shape:?} needs {buffer} bytes, over the {MAX_READ_BYTES}-byte read limit"),
        ));
    }
    Ok(())
}

/// Whether `ds` stores unsigned 8-bit values (packet bytes, pixels).
pub(crate) fn check_u8(path: &Path, ds: &Dataset) -> Result<(), SourceError> {
    let descriptor = ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .map_err(|e| SourceError::corrupt(path, where_(ds), e.to_string()))?;
    match descriptor {
        TypeDescriptor::Unsigned(hdf5::types::IntSize::U1) => Ok(()),
        other => Err(SourceError::corrupt(
            path,
            where_(ds),
            format!("expected uint8 bytes, found {other:?}"),
        )),
    }
}

/// The text of a scalar (or one-element) string dataset, whatever string type it uses.
pub(crate) fn read_string(path: &Path, ds: &Dataset) -> Result<String, SourceError> {
    let bad = |e: hdf5::Error| SourceError::corrupt(path, where_(ds), e.to_string());
    let descriptor = ds.dtype().and_then(|t| t.to_descriptor()).map_err(bad)?;
    let (shape, _) = checked_size(path, ds)?;
    if shape.iter().product::<usize>() != 1 {
        return Err(SourceError::corrupt(
            path,
            where_(ds),
            format!("expected one string, found shape {shape:?}"),
        ));
    }
    if matches!(descriptor, TypeDescriptor::VarLenUnicode | TypeDescriptor::VarLenAscii)
        && let Some(text) = read_vlen_string_direct(path, ds)?
    {
        return Ok(text);
    }
    let first = |v: Vec<String>| {
        v.into_iter()
            .next()
            .ok_or_else(|| SourceError::corrupt(path, where_(ds), "empty string dataset"))
    };
    match descriptor {
        TypeDescriptor::VarLenUnicode => first(
            ds.read_raw::<VarLenUnicode>()
                .map_err(bad)?
                .into_iter()
                .map(|s| s.as_str().to_string())
                .collect(),
        ),
        TypeDescriptor::VarLenAscii => first(
            ds.read_raw::<VarLenAscii>()
                .map_err(bad)?
                .into_iter()
                .map(|s| s.as_str().to_string())
                .collect(),
        ),
        other => Err(SourceError::corrupt(
            path,
            where_(ds),
            format!("expected a variable-length string (as h5py writes), found {other:?}"),
        )),
    }
}

/// Every value of a numeric dataset as f64 (ints and floats of any width), sized first.
pub(crate) fn read_f64s(path: &Path, ds: &Dataset) -> Result<Vec<f64>, SourceError> {
    check_full_read(path, ds)?;
    ds.read_raw::<f64>()
        .map_err(|e| SourceError::corrupt(path, where_(ds), e.to_string()))
}

/// Every value of a timestamp dataset as i64 µs; float datasets (older pose files) are rounded.
pub(crate) fn read_times(path: &Path, ds: &Dataset) -> Result<Vec<i64>, SourceError> {
    check_full_read(path, ds)?;
    let bad = |e: hdf5::Error| SourceError::corrupt(path, where_(ds), e.to_string());
    let descriptor = ds.dtype().and_then(|t| t.to_descriptor()).map_err(bad)?;
    match descriptor {
        TypeDescriptor::Float(_) => {
            let v = ds.read_raw::<f64>().map_err(bad)?;
            v.into_iter()
                .enumerate()
                .map(|(i, t)| {
                    if t.is_finite() {
                        Ok(t.round() as i64)
                    } else {
                        Err(SourceError::corrupt(
                            path,
                            format!("{} row {i}", where_(ds)),
                            "time is not finite",
                        ))
                    }
                })
                .collect()
        }
        TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => ds.read_raw::<i64>().map_err(bad),
        other => Err(SourceError::corrupt(
            path,
            where_(ds),
            format!("expected integer or float times, found {other:?}"),
        )),
    }
}

/// Reads the one variable-length string of a contiguous dataset straight from the file: the
/// 16-byte element (length, global heap collection address, object index) at the dataset's
/// offset, then the object in that collection, every size checked against the file. `None` when
/// the layout is not one this reads (compact or chunked storage, offsets other than 8 bytes), for
/// the library to read instead. Issue 18: libhdf5 1.10 crashes (SIGSEGV) or loops forever in
/// `H5HG_read` on a damaged heap.
fn read_vlen_string_direct(path: &Path, ds: &Dataset) -> Result<Option<String>, SourceError> {
    let Some(offset) = ds.offset() else {
        return Ok(None);
    };
    let bad = |detail: String| SourceError::corrupt(path, where_(ds), detail);
    let io = |e: std::io::Error| SourceError::io(path, e);
    let file = std::fs::File::open(path).map_err(io)?;
    let file_bytes = file.metadata().map_err(io)?.len();
    let read = |at: u64, len: u64| -> Result<Vec<u8>, SourceError> {
        let end = at.checked_add(len).filter(|&e| e <= file_bytes).ok_or_else(|| {
            bad(format!(
                "string storage at {at} (+{len} bytes) lies outside the {file_bytes}-byte file"
            ))
        })?;
        let mut buf = vec![0u8; (end - at) as usize];
        file.read_exact_at(&mut buf, at).map_err(io)?;
        Ok(buf)
    };
    let base = ds.file().map_err(|e| bad(e.to_string()))?.userblock();
    // Size of offsets and lengths from the superblock: byte 13/14 (v0, v1) or 9/10 (v2, v3).
    let superblock = read(base, 16)?;
    let (offsets, lengths) = match superblock[8] {
        0 | 1 => (superblock[13], superblock[14]),
        2 | 3 => (superblock[9], superblock[10]),
        _ => return Ok(None),
    };
    if (offsets, lengths) != (8, 8) {
        return Ok(None);
    }
    let element = read(offset, 16)?;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64_at = |b: &[u8], i: usize| {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(v)
    };
    let len = u64::from(u32_at(&element, 0));
    let collection = u64_at(&element, 4);
    let index = u32_at(&element, 12);
    if len > MAX_STRING_BYTES {
        return Err(bad(format!(
            "string length {len} over the {MAX_STRING_BYTES}-byte limit"
        )));
    }
    if len == 0 {
        return Ok(Some(String::new()));
    }
    let at = base
        .checked_add(collection)
        .ok_or_else(|| bad(format!("heap address {collection} overflows")))?;
    let header = read(at, 16)?;
    if &header[0..4] != b"GCOL" || header[4] != 1 {
        return Err(bad(format!("no global heap collection at {at}")));
    }
    let size = u64_at(&header, 8);
    if !(16..=MAX_STRING_BYTES + 4096).contains(&size) {
        return Err(bad(format!("global heap collection at {at} declares {size} bytes")));
    }
    let heap = read(at, size)?;
    // Objects: index (2), reference count (2), reserved (4), size (8), data padded to 8 bytes.
    let mut pos = 16usize;
    while pos + 16 <= heap.len() {
        let object = u16::from_le_bytes([heap[pos], heap[pos + 1]]);
        let object_size = u64_at(&heap, pos + 8);
        if object == 0 {
            break; // free space: the rest of the collection
        }
        let data = pos + 16;
        let fits = usize::try_from(object_size)
            .ok()
            .and_then(|n| data.checked_add(n))
            .filter(|&end| end <= heap.len());
        let Some(end) = fits else {
            return Err(bad(format!(
                "heap object {object} declares {object_size} bytes, past its collection"
            )));
        };
        if u32::from(object) == index {
            if object_size < len {
                return Err(bad(format!(
                    "heap object {object} holds {object_size} bytes, string needs {len}"
                )));
            }
            let text = &heap[data..data + len as usize];
            let text = std::str::from_utf8(text).map_err(|e| bad(format!("string is not UTF-8: {e}")))?;
            return Ok(Some(text.trim_end_matches('\0').to_string()));
        }
        // Strictly forward, so the walk ends.
        pos = end.next_multiple_of(8);
    }
    Err(bad(format!("heap object {index} not found in the collection at {at}")))
}
