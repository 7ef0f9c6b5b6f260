//! `DetectError`: everything that can go wrong loading or running a detector.

use std::path::PathBuf;

use thiserror::Error;

use super::runtime::RuntimeError;

/// Errors loading a detector (manifest, model files, tensor checks) or running it on a sweep.
#[derive(Debug, Error)]
pub enum DetectError {
    /// A file could not be read.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        reason: String,
    },
    /// The manifest is not valid TOML or has unknown or mistyped keys.
    #[error("{path}: {reason}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What the parser reported.
        reason: String,
    },
    /// A manifest value is inconsistent.
    #[error("detector `{detector}`: {field}: {reason}")]
    Invalid {
        /// Detector name.
        detector: String,
        /// The manifest key.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// A model file named by the manifest does not exist.
    #[error("detector `{detector}`: model file {path} not found")]
    MissingModel {
        /// Detector name.
        detector: String,
        /// The missing file.
        path: PathBuf,
    },
    /// A model file's sha256 differs from the manifest's.
    #[error("detector `{detector}`: {path}: sha256 mismatch: manifest says {expected}, file has {actual}")]
    Sha256Mismatch {
        /// Detector name.
        detector: String,
        /// The model file.
        path: PathBuf,
        /// sha256 in the manifest.
        expected: String,
        /// sha256 of the file.
        actual: String,
    },
    /// ONNX Runtime could not be loaded or could not open a model.
    #[error("detector `{detector}`: {error}")]
    Runtime {
        /// Detector name.
        detector: String,
        /// The runtime error (in the message, not a `#[source]`, so a chain prints it once).
        error: RuntimeError,
    },
    /// A tensor the manifest names is not an input/output of the model.
    #[error("detector `{detector}`: model {model}: no {kind} tensor `{tensor}` (the model has: {available})")]
    MissingTensor {
        /// Detector name.
        detector: String,
        /// Model file name.
        model: String,
        /// `input` or `output`.
        kind: &'static str,
        /// The tensor name the manifest expects.
        tensor: String,
        /// The model's tensor names of that kind.
        available: String,
    },
    /// A tensor's shape (or element type) disagrees with the manifest.
    #[error("detector `{detector}`: model {model}: tensor `{tensor}`: expected {expected}, got {actual}")]
    TensorMismatch {
        /// Detector name.
        detector: String,
        /// Model file name.
        model: String,
        /// Tensor name.
        tensor: String,
        /// What the manifest implies (shape `[…]`, −1 = any, or element type).
        expected: String,
        /// What the model declares or returned.
        actual: String,
    },
    /// ONNX Runtime failed while running a model.
    #[error("detector `{detector}`: model {model}: inference failed: {reason}")]
    Inference {
        /// Detector name.
        detector: String,
        /// Model file name.
        model: String,
        /// What ONNX Runtime reported.
        reason: String,
    },
    /// The point cloud lacks something the manifest asks for.
    #[error("detector `{detector}`: point cloud: {reason}")]
    Cloud {
        /// Detector name.
        detector: String,
        /// What is missing.
        reason: String,
    },
    /// An input point file is malformed or the requested frame is absent.
    #[error("{path}: {reason}")]
    Input {
        /// The point file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The input log could not be opened or read.
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
}
