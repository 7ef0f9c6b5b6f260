//! Writes finished sequence folders in the layouts other tools read (3EED's release layout, KITTI,
//! an Xtreme1 upload, an MCAP recording for Foxglove) and takes an annotation tool's corrections
//! back into the shards (`docs/export.md`). Images and calibrations come from the sequence's log,
//! since the shards keep neither; points from the shards where the run kept them.

mod kitti;
mod mcap;
mod output;
mod pcd;
mod sequence;
mod three_eed;
mod xtreme1;
mod xtreme1_import;

use std::path::PathBuf;

use thiserror::Error;

pub use self::mcap::{
    McapOptions, McapSummary, NORMALIZED_FRAME, SENSOR_FRAME, TOPIC_BOXES, TOPIC_POINTS, TOPIC_POSE, TOPIC_TF,
    WORLD_FRAME, camera_frame_id, camera_topic_name, export_mcap, track_color,
};
pub use kitti::{KittiOptions, export_kitti};
pub use sequence::{
    ExportFrame, ImageMode, LogLocation, SensorPoints, SequenceLog, ShardSequence, frame_points, intensity_01,
    load_sequences, points_in,
};
pub use three_eed::{ThreeEedOptions, export_3eed};
pub use xtreme1::{
    XTREME1_ZIP, Xtreme1Class, Xtreme1Options, euler_xyz_from_rotation, export_xtreme1, rotation_from_euler_xyz,
};
pub use xtreme1_import::{ImportOptions, ImportSummary, import_xtreme1};

/// Errors exporting or importing; each names the file and, where there is one, the frame.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The operating system refused a read or write.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A shard file could not be read or written.
    #[error(transparent)]
    Shard(#[from] crate::shards::ShardError),
    /// The log could not be opened or a frame of it read.
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
    /// An image could not be decoded or encoded.
    #[error("{path}: {detail}")]
    Image {
        /// The file or frame.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The input is not what the command needs (no such sequence, a frame the log lacks).
    #[error("{path}: {detail}")]
    Invalid {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// An MCAP file could not be written.
    #[error("{path}: {source}")]
    Mcap {
        /// The file.
        path: PathBuf,
        /// The MCAP writer's error.
        source: ::mcap::McapError,
    },
    /// An annotation tool's export that cannot be applied: names the file inside the export and
    /// the object.
    #[error("{path}: {entry}: {detail}")]
    BadExport {
        /// The export (zip) file.
        path: PathBuf,
        /// The file inside it, and the object where there is one.
        entry: String,
        /// What is wrong.
        detail: String,
    },
}

impl ExportError {
    /// An I/O error on `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        ExportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An MCAP writer error on `path`.
    pub fn mcap(path: &std::path::Path, source: ::mcap::McapError) -> Self {
        ExportError::Mcap {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Input that is not what the command needs.
    pub fn invalid(path: &std::path::Path, detail: impl Into<String>) -> Self {
        ExportError::Invalid {
            path: path.to_path_buf(),
            detail: detail.into(),
        }
    }
}

/// What one export wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportSummary {
    /// The output (folder or file).
    pub out: PathBuf,
    /// Sequences exported.
    pub sequences: usize,
    /// Samples written (3EED: (frame, camera) views; KITTI: samples; Xtreme1: frames).
    pub samples: usize,
    /// Boxes written (3EED: targets).
    pub boxes: usize,
    /// Images written.
    pub images: usize,
}
