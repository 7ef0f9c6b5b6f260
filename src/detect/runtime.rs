//! Finding and loading ONNX Runtime (`libonnxruntime.so`, loaded dynamically) and opening sessions.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::value::ValueType;
use thiserror::Error;

/// The shared-library file name ONNX Runtime ships under on this platform.
#[cfg(target_os = "macos")]
const LIBRARY_NAME: &str = "libonnxruntime.dylib";
#[cfg(target_os = "windows")]
const LIBRARY_NAME: &str = "onnxruntime.dll";
#[cfg(not(any(target_os = "macos", target_os = "windows")))]
const LIBRARY_NAME: &str = "libonnxruntime.so";

/// Errors finding ONNX Runtime or opening a model with it.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// No ONNX Runtime library was found in any of the places searched.
    #[error(
        "ONNX Runtime not found (looked at: {searched}); run `make setup` (or tools/setup.sh), \
         or set ORT_DYLIB_PATH to a libonnxruntime.so 1.31, e.g. from `pip install onnxruntime==1.31.1` \
         (onnxruntime/capi/)"
    )]
    NotFound {
        /// The places searched, in order.
        searched: String,
    },
    /// The library was found but could not be loaded or initialised.
    #[error("{path}: loading ONNX Runtime failed: {reason}")]
    Load {
        /// The library path.
        path: PathBuf,
        /// What ort reported.
        reason: String,
    },
    /// A model could not be opened.
    #[error("{path}: opening ONNX model failed: {reason}")]
    Model {
        /// The model path.
        path: PathBuf,
        /// What ONNX Runtime reported.
        reason: String,
    },
}

/// Where ONNX Runtime is looked for: `ORT_DYLIB_PATH` when set (and only there: a path that is not
/// a file is an error); otherwise `.ort/` in the repository this binary was built from, then `.ort/`
/// beside the executable or in any folder above it.
pub fn find_onnxruntime() -> Result<PathBuf, RuntimeError> {
    let mut searched = Vec::new();
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        // An explicit choice that points nowhere is a mistake to report, not a cue to quietly
        // load some other copy of the library.
        return Err(RuntimeError::NotFound {
            searched: format!("ORT_DYLIB_PATH={} (not a file)", p.display()),
        });
    }
    let mut candidates = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(".ort")];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|dir| dir.join(".ort")));
    }
    for dir in candidates {
        let lib = dir.join(LIBRARY_NAME);
        if lib.is_file() {
            return Ok(lib);
        }
        let shown = lib.display().to_string();
        if !searched.contains(&shown) {
            searched.push(shown);
        }
    }
    Err(RuntimeError::NotFound {
        searched: searched.join(", "),
    })
}

/// The process-wide ONNX Runtime environment, loaded on first use from [`find_onnxruntime`].
pub fn onnx_environment() -> Result<&'static Environment, RuntimeError> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let path = PATH.get_or_init(|| find_onnxruntime().map_err(|e| e.to_string()));
    let path = match path {
        Ok(p) => p,
        Err(searched) => {
            return Err(RuntimeError::NotFound {
                searched: searched.clone(),
            });
        }
    };
    ENV.get_or_init(|| {
        ort::init_from(path)
            .map_err(|e| e.to_string())?
            .with_name("boxlayer")
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|reason| RuntimeError::Load {
        path: path.clone(),
        reason: reason.clone(),
    })
}

/// Opens an ONNX model on the CPU with `threads` intra-op threads (0 = ONNX Runtime's default).
pub fn open_session(model: &Path, threads: usize) -> Result<Session, RuntimeError> {
    open_session_with(
        model,
        &SessionOptions {
            threads,
            ..SessionOptions::default()
        },
    )
}

/// Where and how a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionOptions {
    /// Intra-op threads; 0 = ONNX Runtime's default.
    pub threads: usize,
    /// Run on CUDA device `Some(id)` (the session fails to open if CUDA cannot register), or the CPU.
    pub cuda_device: Option<i32>,
}

/// Opens an ONNX model with `options`.
pub fn open_session_with(model: &Path, options: &SessionOptions) -> Result<Session, RuntimeError> {
    let env = onnx_environment()?;
    let fail = |e: &dyn std::fmt::Display| RuntimeError::Model {
        path: model.to_path_buf(),
        reason: e.to_string(),
    };
    // Memory patterns are planned per input shape and kept: a detector whose pillar axis is
    // dynamic meets a new shape nearly every sweep, and a 200-sweep drone run peaked 140 MB
    // higher with them (docs/benchmarks.md). Off, at no measurable cost in speed.
    let mut builder = Session::builder(env)
        .map_err(|e| fail(&e))?
        .with_memory_pattern(false)
        .map_err(|e| fail(&e))?;
    if options.threads > 0 {
        builder = builder.with_intra_threads(options.threads).map_err(|e| fail(&e))?;
    }
    if let Some(device) = options.cuda_device {
        // Without `error_on_failure` ort silently falls back to the CPU, hiding a wrong set-up.
        let cuda = ort::ep::CUDA::default()
            .with_device_id(device)
            .build()
            .error_on_failure();
        builder = builder.with_execution_providers([cuda]).map_err(|e| fail(&e))?;
    }
    builder.commit_from_file(model).map_err(|e| fail(&e))
}

/// The inputs and outputs of an open session, in graph order.
pub fn session_tensors(session: &Session) -> (Vec<TensorInfo>, Vec<TensorInfo>) {
    let inputs = session
        .inputs()
        .iter()
        .map(|o| tensor_info(o.name(), o.dtype()))
        .collect();
    let outputs = session
        .outputs()
        .iter()
        .map(|o| tensor_info(o.name(), o.dtype()))
        .collect();
    (inputs, outputs)
}

/// One input or output of a model: name, element type and shape (−1 for a dynamic axis).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Element type and shape, as ONNX Runtime prints it (e.g. `Tensor<f32>(5268, 20, 10)`).
    pub element_type: String,
    /// Dimensions; −1 where the axis is dynamic; empty for non-tensors.
    pub shape: Vec<i64>,
}

/// What a model takes and gives.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxModelInfo {
    /// Inputs in graph order.
    pub inputs: Vec<TensorInfo>,
    /// Outputs in graph order.
    pub outputs: Vec<TensorInfo>,
    /// Producer name from the model metadata (`pytorch`, …), if any.
    pub producer: Option<String>,
}

fn tensor_info(name: &str, ty: &ValueType) -> TensorInfo {
    let shape = match ty {
        ValueType::Tensor { shape, .. } => shape.iter().copied().collect(),
        _ => Vec::new(),
    };
    let element_type = match ty {
        ValueType::Tensor { ty, .. } => format!("{ty}"),
        other => format!("{other}"),
    };
    TensorInfo {
        name: name.to_string(),
        element_type,
        shape,
    }
}

/// Opens a model and lists its inputs, outputs and producer.
pub fn describe_model(model: &Path) -> Result<OnnxModelInfo, RuntimeError> {
    let session = open_session(model, 1)?;
    let (inputs, outputs) = session_tensors(&session);
    let producer = session
        .metadata()
        .ok()
        .and_then(|m| m.producer())
        .filter(|p| !p.is_empty());
    Ok(OnnxModelInfo {
        inputs,
        outputs,
        producer,
    })
}
