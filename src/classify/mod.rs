//! The RGB class check: an ONNX image model described by `classifiers/<name>/classifier.toml`
//! says what a camera image shows at each projected box. Two kinds of model drop in by manifest:
//! a crop classifier (one crop per box, scores per label) and a YOLO-style 2D detector (YOLOv5 or
//! YOLOv8 export layout, NMS, boxes matched by 2D IoU). Labels map onto boxlayer's classes or
//! `background`. See `docs/classifiers.md`.

mod classifier;
mod crop;
mod error;
mod manifest;
mod yolo;

pub use classifier::{Classifier, NoVerdict, RgbVerdict};
pub use crop::{InputPlacement, PixelRect, crop_region, cut_crop, cut_region, fit_image, push_tensor};
pub use error::ClassifyError;
pub use manifest::{
    Activation, ChannelOrder, ClassifierKind, ClassifierManifest, ClassifierModel, CropConfig, InputConfig,
    MANIFEST_FILE, OutputConfig, ResizeMode, RgbClass, TensorLayout, YoloConfig, YoloLayout,
};
pub use yolo::{Detection2d, decode, iou, match_boxes, nms};
