//! Data manifests (`data-manifests/*.csv`): the list of sequences a run covers (which worker takes
//! which is `workers.rs`'s rule).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::frame::Platform;
use crate::sources::SourceKind;

/// Errors loading a data manifest.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{path}: {error}")]
    Io {
        /// The manifest file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A row could not be parsed.
    #[error("{path}: line {line}: {detail}")]
    Row {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number (the header is line 1).
        line: u64,
        /// What was wrong.
        detail: String,
    },
    /// Two rows name the same sequence.
    #[error("{path}: sequence `{name}` listed twice")]
    Duplicate {
        /// The manifest file.
        path: PathBuf,
        /// The repeated name.
        name: String,
    },
}

/// Which part of a dataset a sequence belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Training split.
    Train,
    /// Validation split.
    Val,
    /// Test split.
    Test,
}

/// One sequence a run covers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SequenceEntry {
    /// The source's own sequence name (Waymo context name, M3ED sequence name).
    pub name: String,
    /// The dataset's name for it (3EED's `Outdoor_Day_penno_parking_1`); may equal `name`.
    pub dataset_name: String,
    /// The reader to open it with (`waymo-v1`, `waymo-v2`, `m3ed`, `kitti-bin`, `pcd`, `npy`, `mcap`).
    pub source_kind: SourceKind,
    /// Path relative to the data root.
    pub path: PathBuf,
    /// The platform that recorded it.
    pub platform: Platform,
    /// Its split.
    pub split: Split,
}

/// A loaded, validated data manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct DataManifest {
    /// Sequences in file order.
    pub sequences: Vec<SequenceEntry>,
}

impl DataManifest {
    /// Loads a CSV manifest with the header `name,dataset_name,source_kind,path,platform,split`.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.into(),
            error: source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses manifest text; `path` is used in error messages only.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut sequences = Vec::new();
        let mut seen = HashSet::new();
        for row in reader.deserialize::<SequenceEntry>() {
            let entry = row.map_err(|e| ManifestError::Row {
                path: path.into(),
                line: e.position().map_or(0, |p| p.line()),
                detail: match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => err.to_string(),
                    _ => e.to_string(),
                },
            })?;
            if !seen.insert(entry.name.clone()) {
                return Err(ManifestError::Duplicate {
                    path: path.into(),
                    name: entry.name,
                });
            }
            sequences.push(entry);
        }
        Ok(Self { sequences })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "name,dataset_name,source_kind,path,platform,split\n";

    #[test]
    fn parses_rows_and_names_bad_lines() {
        let text = format!("{HEADER}a,A,m3ed,m3ed/a.h5,drone,train\nb,B,waymo-v1,w/b.tfrecord,vehicle,val\n");
        let m = DataManifest::parse(&text, Path::new("m.csv")).unwrap();
        assert_eq!(m.sequences.len(), 2);
        assert_eq!(m.sequences[0].platform, Platform::Drone);
        assert_eq!(m.sequences[1].split, Split::Val);

        let bad = format!("{HEADER}a,A,m3ed,m3ed/a.h5,drone,train\nb,B,m3ed,b.h5,boat,train\n");
        let e = DataManifest::parse(&bad, Path::new("m.csv")).unwrap_err().to_string();
        assert!(e.starts_with("m.csv: line 3: ") && e.contains("boat"), "{e}");

        let dup = format!("{HEADER}a,A,m3ed,a.h5,drone,train\na,A,m3ed,a.h5,drone,val\n");
        let e = DataManifest::parse(&dup, Path::new("m.csv")).unwrap_err().to_string();
        assert_eq!(e, "m.csv: sequence `a` listed twice");
    }
}
