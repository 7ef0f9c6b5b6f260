//! Runs ONNX 3D detectors with `ort` and turns their outputs into boxes: a detector folder's
//! manifest (`detector.toml`) says how to pillarise a sweep, which graphs to run and how to decode
//! their outputs. This module owns the ONNX Runtime environment (one per process); it knows no
//! file format, fusion or tracking, and never changes the frame of the points it is given.

mod anchor;
mod center_heatmap;
mod command;
mod detector;
mod error;
mod head_map;
pub mod manifest;
mod pillarize;
mod postprocess;
mod runtime;
mod scatter;
#[cfg(test)]
mod test_rng;

pub use crate::boxes::Detection;
pub use anchor::{Anchor, AnchorDecoder, limit_period};
pub use center_heatmap::{CenterHeatmapDecoder, CenterTaskMaps};
pub use command::{DetectInput, DetectReport, detect_file, detect_frames};
pub use detector::{Detector, StageTimings, sha256_file};
pub use error::DetectError;
pub use head_map::{DecodedBox, HeadMap, activate, map_shape};
pub use manifest::{DetectorManifest, MANIFEST_FILE, MAX_SESSIONS, folder_name};
pub use pillarize::{PillarError, PillarGrid, PillarRows, PillarSpec, Pillars, pillarize, pillarize_into, tanh_column};
pub use postprocess::select_boxes;
pub use runtime::{
    OnnxModelInfo, RuntimeError, SessionOptions, TensorInfo, describe_model, find_onnxruntime, onnx_environment,
    open_session, open_session_with, session_tensors,
};
pub use scatter::{Canvas, EncodedPillars, EncodedPillarsView, scatter_into, scatter_to_canvas, scatter_view_into};
