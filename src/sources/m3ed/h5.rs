//! Small typed reads over `hdf5` that turn library errors into [`SourceError`]s naming the file
//! and the dataset, and accept the type variations real M3ED files show (int or float, any
//! string flavour).

use std::path::Path;

use hdf5::types::{TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Dataset, Group};

use crate::sources::SourceError;

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

/// The text of a scalar (or one-element) string dataset, whatever string type it uses.
pub(crate) fn read_string(path: &Path, ds: &Dataset) -> Result<String, SourceError> {
    let bad = |e: hdf5::Error| SourceError::corrupt(path, where_(ds), e.to_string());
    let descriptor = ds.dtype().and_then(|t| t.to_descriptor()).map_err(bad)?;
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

/// Every value of a numeric dataset as f64 (ints and floats of any width).
pub(crate) fn read_f64s(path: &Path, ds: &Dataset) -> Result<Vec<f64>, SourceError> {
    ds.read_raw::<f64>()
        .map_err(|e| SourceError::corrupt(path, where_(ds), e.to_string()))
}

/// Every value of a timestamp dataset as i64 µs; float datasets (older pose files) are rounded.
pub(crate) fn read_times(path: &Path, ds: &Dataset) -> Result<Vec<i64>, SourceError> {
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
