//! boxlayer turns raw outdoor LiDAR + RGB logs (Waymo vehicle sweeps, M3ED drone and quadruped
//! sweeps) into the 3D box layer of a grounding dataset: detections from several ONNX detectors,
//! fused, tracked, class-checked against the RGB image, gravity-aligned and written as Parquet.
//!
//! Each stage is a module of plain functions over plain data; see `DESIGN.md` in the
//! repository's shared documents for the conventions (frames, box format, classes).
#![warn(missing_docs)]

pub mod atomic_file;
pub mod boxes;
pub mod camera;
pub mod classify;
pub mod cloud;
pub mod config_overlay;
pub mod demo;
pub mod detect;
pub mod eval;
pub mod export;
pub mod frame;
pub mod fuse;
pub mod geometry;
pub mod ground_contact;
pub mod inspect;
pub mod normalize;
pub mod pipeline;
pub mod render;
pub mod report;
pub mod shards;
pub mod sim;
pub mod sources;
pub mod stats;
pub mod track;

pub use cloud::PointCloud;
pub use frame::{CameraCalibration, CameraView, DetectorFrame, Frame, ObjectClass, Platform};
pub use geometry::Box3;
