//! `boxlayer inspect`: a one-screen summary of any input boxlayer can read. It recognises a file
//! by its extension and contents and refuses what it cannot read, naming the file.

use std::fmt::Write as _;
use std::path::Path;

use thiserror::Error;

use crate::detect;

/// Errors from `inspect`.
#[derive(Debug, Error)]
pub enum InspectError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No reader recognises the file.
    #[error("{path}: not a format boxlayer reads yet (known: {known})")]
    Unsupported {
        /// The file.
        path: String,
        /// The kinds `inspect` understands now.
        known: &'static str,
    },
    /// An ONNX model failed to open.
    #[error(transparent)]
    Model(#[from] detect::RuntimeError),
}

/// The input kinds `inspect` understands, for messages and `--help`.
pub const KNOWN_KINDS: &str = "ONNX models (.onnx)";

/// Returns a short human-readable summary of the file at `path`.
pub fn inspect(path: &Path) -> Result<String, InspectError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| InspectError::Io {
        path: shown.clone(),
        source,
    })?;
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("onnx") => inspect_onnx(path, meta.len()),
        _ => Err(InspectError::Unsupported {
            path: shown,
            known: KNOWN_KINDS,
        }),
    }
}

fn inspect_onnx(path: &Path, bytes: u64) -> Result<String, InspectError> {
    let info = detect::describe_model(path)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: ONNX model, {} bytes, producer {}",
        path.display(),
        bytes,
        info.producer.as_deref().unwrap_or("unknown")
    );
    for (title, tensors) in [("inputs", &info.inputs), ("outputs", &info.outputs)] {
        let _ = writeln!(out, "{title}:");
        for t in tensors {
            let dims: Vec<String> = t
                .shape
                .iter()
                .map(|d| if *d < 0 { "?".to_string() } else { d.to_string() })
                .collect();
            let _ = writeln!(out, "  {:<24} {} [{}]", t.name, t.element_type, dims.join(", "));
        }
    }
    Ok(out)
}
