//! Reads Waymo, M3ED, KITTI-style, PCD, NumPy `.npy` and ROS 2 MCAP logs into `Frame`s with random
//! access. A source knows its file format and nothing else: it knows no detector, tracker or shard schema. Every reader sits behind [`Source`].

mod kind;
pub mod kitti;
pub mod layout;
pub mod m3ed;
pub mod mcap;
pub mod npy;
pub mod pcd;
pub mod poses;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::frame::{Frame, Platform};

pub mod waymo;

pub use kind::{SourceKind, SourceOptions, open};

/// Errors reading a log. Messages name the file, then where in it, then what was wrong.
#[derive(Debug, Error)]
pub enum SourceError {
    /// The file is not of this source's kind; raised before any data is read.
    #[error("{path}: not a {kind} file")]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// The kind this reader handles (`Waymo v1 TFRecord`, `M3ED HDF5`).
        kind: &'static str,
    },
    /// The operating system refused a read.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The data is damaged or does not follow the format.
    #[error("{path}: {location}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where: `record 41 at offset 1234`, `frame 7`, `sweep 12 column 300`.
        location: String,
        /// What was wrong: `bad data crc`, `field \`pose\`: expected 16 values, got 12`.
        detail: String,
    },
    /// Something the format requires is absent.
    #[error("{path}: missing {what}")]
    Missing {
        /// The file.
        path: PathBuf,
        /// What is missing (`dataset /ouster/data`, `laser calibration TOP`).
        what: String,
    },
    /// A frame index past the end.
    #[error("{path}: frame {index} out of range (sequence has {len} frames)")]
    FrameOutOfRange {
        /// The file.
        path: PathBuf,
        /// The requested index.
        index: usize,
        /// The number of frames.
        len: usize,
    },
}

/// What a reader does with a damaged record or sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnCorrupt {
    /// Report it (log and keep in [`SequenceMeta::skipped`]) and go on with the good frames.
    #[default]
    Skip,
    /// Fail the whole sequence.
    Fail,
}

/// A damaged record or sweep that a reader skipped, kept so that it is reported, never lost.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedRecord {
    /// Where in the file (`record 41 at offset 1234`).
    pub location: String,
    /// What was wrong.
    pub detail: String,
}

/// What a source knows about its whole sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceMeta {
    /// The source's own sequence name (Waymo context name, M3ED sequence name).
    pub name: String,
    /// The platform that recorded it.
    pub platform: Platform,
    /// The reader that opened it (`waymo-v1`, `waymo-v2`, `m3ed`).
    pub source_kind: &'static str,
    /// The file or folder it was opened from.
    pub path: PathBuf,
    /// Records or sweeps skipped as damaged when the index was built.
    pub skipped: Vec<SkippedRecord>,
}

/// Random access to one sequence's frames.
pub trait Source: Send + Sync {
    /// The sequence's metadata.
    fn meta(&self) -> &SequenceMeta;
    /// Number of readable frames.
    fn len(&self) -> usize;
    /// Whether the sequence has no readable frames.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `index`-th readable frame (0-based, `0..len()`), decoded. Its `Frame.index` is the
    /// frame's position in the file (Waymo record ordinal, M3ED `/ouster/data` row), counting
    /// damaged or skipped records, so it can differ from `index` after a skip: a frame keeps its
    /// identity and a skipped one leaves a gap, never renumbering those after it.
    fn frame(&self, index: usize) -> Result<Frame, SourceError>;
    /// The camera views of the `index`-th readable frame, as [`Source::frame`] gives them. Readers
    /// whose images can be read apart from the LiDAR (Waymo v1, M3ED) skip decoding the points.
    fn cameras(&self, index: usize) -> Result<Vec<crate::frame::CameraView>, SourceError> {
        Ok(self.frame(index)?.cameras)
    }
}

impl SourceError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        SourceError::Io {
            path: path.to_path_buf(),
            error: source,
        }
    }

    /// A damaged-data error on `path` at `location`.
    pub fn corrupt(path: &Path, location: impl Into<String>, detail: impl Into<String>) -> Self {
        SourceError::Corrupt {
            path: path.to_path_buf(),
            location: location.into(),
            detail: detail.into(),
        }
    }
}
