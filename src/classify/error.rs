//! `ClassifyError`: everything that can go wrong loading or running an image classifier.

use std::path::PathBuf;

use thiserror::Error;

use crate::detect::RuntimeError;

/// Errors loading a classifier (manifest, model file, tensor checks) or running it on an image.
#[derive(Debug, Error)]
pub enum ClassifyError {
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
    #[error("classifier `{classifier}`: {field}: {reason}")]
    Invalid {
        /// Classifier name.
        classifier: String,
        /// The manifest key.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The model file is missing or its sha256 differs from the manifest's.
    #[error("classifier `{classifier}`: {path}: {reason}")]
    ModelFile {
        /// Classifier name.
        classifier: String,
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// ONNX Runtime could not be loaded or could not open the model.
    #[error("classifier `{classifier}`: {error}")]
    Runtime {
        /// Classifier name.
        classifier: String,
        /// The runtime error (in the message, not a `#[source]`, so a chain prints it once).
        error: RuntimeError,
    },
    /// The model's tensors disagree with the manifest.
    #[error("classifier `{classifier}`: {model}: {reason}")]
    Tensor {
        /// Classifier name.
        classifier: String,
        /// Model file name.
        model: String,
        /// What disagrees (tensor name, expected and actual shape).
        reason: String,
    },
    /// ONNX Runtime failed while running the model, or its output has the wrong size.
    #[error("classifier `{classifier}`: inference failed: {reason}")]
    Inference {
        /// Classifier name.
        classifier: String,
        /// What went wrong.
        reason: String,
    },
}
