//! Runs whole sequences through the stages in order, and shards the work across workers. This is
//! the only module that knows the stage order; it reads data manifests to know what to run.

mod data_manifest;

pub use data_manifest::{DataManifest, ManifestError, SequenceEntry, Split};
