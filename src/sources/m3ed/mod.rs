//! Reads M3ED drone (falcon), quadruped (spot) and car sequences: `<seq>_data.h5` with raw Ouster
//! LEGACY packets, OVC RGB images and IMU, plus `<seq>_pose_gt.h5`, into [`Frame`](crate::Frame)s,
//! one sweep row at a time so memory stays flat; and writes files in the same format for the
//! simulator and the tests. It knows the file format only: no detector, tracker or shard schema.

pub mod metadata;
pub mod source;
pub mod sweep;
pub mod writer;
pub mod xyz;

mod h5;

pub use metadata::{DataFormat, MetadataFlavour, OusterMetadata};
pub use source::{M3edConfig, M3edSource, M3edSummary, RGB_CAMERA, SweepEntry, sequence_from_file_name};
pub use sweep::{DecodedSweep, SweepReport};
pub use writer::{M3edWriter, M3edWriterSetup, PoseTimeType, SweepPixels, WriteError, write_pose_gt};
pub use xyz::{PixelHit, XyzLut};
