//! Runs ONNX 3D detectors with `ort` and turns their outputs into boxes. This module owns the
//! ONNX Runtime environment (one per process); it knows no file format, fusion or tracking.

mod runtime;

pub use runtime::{
    OnnxModelInfo, RuntimeError, TensorInfo, describe_model, find_onnxruntime, onnx_environment, open_session,
};
