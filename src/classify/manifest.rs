//! `classifiers/<name>/classifier.toml`: what an image model expects and how its output reads,
//! deserialised into [`ClassifierManifest`]. Every key is documented in `docs/classifiers.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::ClassifyError;
use crate::detect::folder_name;
use crate::frame::ObjectClass;

/// The manifest's file name inside a classifier folder.
pub const MANIFEST_FILE: &str = "classifier.toml";

/// An image model's manifest: kind, model file, input tensor layout, crop, output and label map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifierManifest {
    /// Classifier name (default: the folder name).
    pub name: String,
    /// What the model does with an image (default `crop`).
    pub kind: ClassifierKind,
    /// The ONNX file and its tensor names.
    pub model: ClassifierModel,
    /// Size, layout and normalisation of the input tensor.
    pub input: InputConfig,
    /// How a box's crop is cut from the image (`crop` classifiers).
    pub crop: CropConfig,
    /// How the output reads.
    pub output: OutputConfig,
    /// Decoding of a 2D detector's output (`yolo` classifiers).
    pub yolo: YoloConfig,
    /// The model's labels mapped onto boxlayer's classes or `background` (labels not listed are
    /// ignored by a `yolo` model and read as `unknown` from a `crop` model).
    pub classes: BTreeMap<String, RgbClass>,
    /// Intra-op threads for the session (default 1; 0 = ONNX Runtime's default).
    pub threads: usize,
}

impl Default for ClassifierManifest {
    fn default() -> Self {
        Self {
            name: String::new(),
            kind: ClassifierKind::Crop,
            model: ClassifierModel::default(),
            input: InputConfig::default(),
            crop: CropConfig::default(),
            output: OutputConfig::default(),
            yolo: YoloConfig::default(),
            classes: BTreeMap::new(),
            threads: 1,
        }
    }
}

/// What an image model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassifierKind {
    /// Classifies one crop around a projected box: scores per label.
    Crop,
    /// Detects 2D boxes in the whole image (YOLO export layouts); boxes match by 2D IoU.
    Yolo,
}

/// What the RGB check says a box is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RgbClass {
    /// A car, van, bus or truck.
    Vehicle,
    /// A person on foot.
    Pedestrian,
    /// A person on a bicycle.
    Cyclist,
    /// An object of no boxlayer class.
    Unknown,
    /// No object: the crop shows road, terrain, sky or clutter.
    Background,
}

impl RgbClass {
    /// The lower-case name written to the shards.
    pub fn as_str(self) -> &'static str {
        match self {
            RgbClass::Vehicle => "vehicle",
            RgbClass::Pedestrian => "pedestrian",
            RgbClass::Cyclist => "cyclist",
            RgbClass::Unknown => "unknown",
            RgbClass::Background => "background",
        }
    }

    /// The boxlayer class, `None` for background.
    pub fn object_class(self) -> Option<ObjectClass> {
        match self {
            RgbClass::Vehicle => Some(ObjectClass::Vehicle),
            RgbClass::Pedestrian => Some(ObjectClass::Pedestrian),
            RgbClass::Cyclist => Some(ObjectClass::Cyclist),
            RgbClass::Unknown => Some(ObjectClass::Unknown),
            RgbClass::Background => None,
        }
    }
}

impl From<ObjectClass> for RgbClass {
    fn from(c: ObjectClass) -> Self {
        match c {
            ObjectClass::Vehicle => RgbClass::Vehicle,
            ObjectClass::Pedestrian => RgbClass::Pedestrian,
            ObjectClass::Cyclist => RgbClass::Cyclist,
            ObjectClass::Unknown => RgbClass::Unknown,
        }
    }
}

/// The ONNX file and its tensors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifierModel {
    /// Path relative to the classifier folder (required).
    pub file: PathBuf,
    /// Lower-case hex sha256 of the file, checked at load (required).
    pub sha256: String,
    /// Name of the image input (default empty: the model's only input).
    pub input: String,
    /// Name of the output (default empty: the model's first output).
    pub output: String,
}

/// Memory layout of the input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorLayout {
    /// `[1, 3, H, W]` (PyTorch, YOLO exports).
    Nchw,
    /// `[1, H, W, 3]` (TensorFlow).
    Nhwc,
}

/// Order of the colour channels in the input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelOrder {
    /// Red, green, blue.
    Rgb,
    /// Blue, green, red (OpenCV-trained models).
    Bgr,
}

/// How an image region becomes the input size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResizeMode {
    /// Scale each axis to fill the input (aspect ratio not kept).
    Stretch,
    /// Scale both axes by the same factor to fit, centre, and pad the rest with `pad_value`.
    Letterbox,
}

/// The input tensor: size, layout, channel order, normalisation and resizing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputConfig {
    /// Input width (px; default 64).
    pub width: u32,
    /// Input height (px; default 64).
    pub height: u32,
    /// Tensor layout (default `nchw`).
    pub layout: TensorLayout,
    /// Channel order (default `rgb`).
    pub channel_order: ChannelOrder,
    /// Each 0–255 value is multiplied by this first (default 1/255).
    pub scale: f32,
    /// Then this is subtracted, per channel in tensor order (default 0).
    pub mean: [f32; 3],
    /// Then the result is divided by this, per channel in tensor order (default 1).
    pub std: [f32; 3],
    /// How a region is brought to the input size (default `stretch` for crops; YOLO models use
    /// `letterbox`).
    pub resize: ResizeMode,
    /// Fill value (0–255) of pixels outside the image or the letterbox (default 114, as YOLO).
    pub pad_value: u8,
}

impl Default for InputConfig {
    fn default() -> Self {
        Self {
            width: 64,
            height: 64,
            layout: TensorLayout::Nchw,
            channel_order: ChannelOrder::Rgb,
            scale: 1.0 / 255.0,
            mean: [0.0; 3],
            std: [1.0; 3],
            resize: ResizeMode::Stretch,
            pad_value: 114,
        }
    }
}

/// How a box's crop is cut from the image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CropConfig {
    /// Context added on each side of the projected box, as a share of its width and height
    /// (default 0.15).
    pub context: f64,
    /// Grow the region's shorter side to its longer one, about the centre (default true).
    pub square: bool,
    /// A box whose clipped projection is smaller than this on either side is not checked (px;
    /// default 12).
    pub min_side_px: f64,
}

impl Default for CropConfig {
    fn default() -> Self {
        Self {
            context: 0.15,
            square: true,
            min_side_px: 12.0,
        }
    }
}

/// Activation applied to a crop model's output scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// Softmax over the labels (logits out).
    Softmax,
    /// Logistic per label.
    Sigmoid,
    /// Scores used as they are.
    None,
}

/// How the output reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// The model's labels by output index (required).
    pub labels: Vec<String>,
    /// Activation of a crop model's scores (default `softmax`).
    pub activation: Activation,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            labels: Vec::new(),
            activation: Activation::Softmax,
        }
    }
}

/// The two YOLO export layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum YoloLayout {
    /// YOLOv5: `[1, N, 5 + C]` rows of `cx, cy, w, h, objectness, class scores…`; score =
    /// objectness × class score.
    V5,
    /// YOLOv8: `[1, 4 + C, N]` columns of `cx, cy, w, h, class scores…`; no objectness.
    V8,
}

/// Decoding and matching of a YOLO-style 2D detector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct YoloConfig {
    /// Output layout (default `v8`).
    pub layout: YoloLayout,
    /// Detections scoring below this are dropped before NMS (default 0.25).
    pub score_threshold: f32,
    /// Per-label NMS IoU threshold (default 0.45).
    pub nms_iou: f64,
    /// Most detections kept per image after NMS (default 300).
    pub max_detections: usize,
    /// A projected box takes the class of the detection it overlaps most if their 2D IoU is at
    /// least this (default 0.3).
    pub match_iou: f64,
}

impl Default for YoloConfig {
    fn default() -> Self {
        Self {
            layout: YoloLayout::V8,
            score_threshold: 0.25,
            nms_iou: 0.45,
            max_detections: 300,
            match_iou: 0.3,
        }
    }
}

impl ClassifierManifest {
    /// Reads `dir/classifier.toml`; the name defaults to the folder name. Checks the manifest's
    /// own consistency ([`ClassifierManifest::validate`]), not the model.
    pub fn load(dir: &Path) -> Result<Self, ClassifyError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ClassifyError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let mut manifest: ClassifierManifest = toml::from_str(&text).map_err(|e| ClassifyError::Manifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if manifest.name.is_empty() {
            manifest.name = folder_name(dir);
        }
        manifest.validate()?;
        Ok(manifest)
    }

    /// What label `index` means: its mapped class, `None` when the label is not mapped.
    pub fn class_of_index(&self, index: usize) -> Option<RgbClass> {
        self.output.labels.get(index).and_then(|l| self.classes.get(l)).copied()
    }

    /// Checks the manifest's own consistency (sizes, normalisation, labels, thresholds).
    pub fn validate(&self) -> Result<(), ClassifyError> {
        let invalid = |field: &str, reason: String| ClassifyError::Invalid {
            classifier: self.name.clone(),
            field: field.to_string(),
            reason,
        };
        if self.model.file.as_os_str().is_empty() {
            return Err(invalid("model.file", "required".into()));
        }
        if self.model.sha256.is_empty() {
            return Err(invalid("model.sha256", "required".into()));
        }
        let i = &self.input;
        if !(1..=8192).contains(&i.width) || !(1..=8192).contains(&i.height) {
            return Err(invalid(
                "input.width/height",
                format!("must be 1–8192 px, got {}×{}", i.width, i.height),
            ));
        }
        if !(i.scale.is_finite() && i.scale > 0.0) {
            return Err(invalid("input.scale", format!("must be positive, got {}", i.scale)));
        }
        if i.mean.iter().any(|m| !m.is_finite()) {
            return Err(invalid("input.mean", format!("must be finite, got {:?}", i.mean)));
        }
        if i.std.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(invalid("input.std", format!("must be positive, got {:?}", i.std)));
        }
        let c = &self.crop;
        if !(c.context.is_finite() && (0.0..=4.0).contains(&c.context)) {
            return Err(invalid("crop.context", format!("must be 0–4, got {}", c.context)));
        }
        if !(c.min_side_px.is_finite() && c.min_side_px >= 0.0) {
            return Err(invalid(
                "crop.min_side_px",
                format!("must be non-negative, got {}", c.min_side_px),
            ));
        }
        if self.output.labels.is_empty() {
            return Err(invalid("output.labels", "at least one label is required".into()));
        }
        for label in self.classes.keys() {
            if !self.output.labels.contains(label) {
                return Err(invalid("classes", format!("`{label}` is not one of output.labels")));
            }
        }
        if self.kind == ClassifierKind::Yolo {
            let y = &self.yolo;
            if !(y.score_threshold.is_finite() && (0.0..=1.0).contains(&y.score_threshold)) {
                return Err(invalid(
                    "yolo.score_threshold",
                    format!("must be 0–1, got {}", y.score_threshold),
                ));
            }
            for (field, v) in [("yolo.nms_iou", y.nms_iou), ("yolo.match_iou", y.match_iou)] {
                if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                    return Err(invalid(field, format!("must be 0–1, got {v}")));
                }
            }
            if y.max_detections == 0 {
                return Err(invalid("yolo.max_detections", "must be at least 1".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> &'static str {
        r#"
kind = "yolo"
[model]
file = "m.onnx"
sha256 = "00"
[output]
labels = ["person", "car", "dog"]
[classes]
person = "pedestrian"
car = "vehicle"
"#
    }

    #[test]
    fn unmapped_labels_read_as_none_and_defaults_apply() {
        let m: ClassifierManifest = toml::from_str(minimal()).unwrap();
        m.validate().unwrap();
        assert_eq!(m.class_of_index(0), Some(RgbClass::Pedestrian));
        assert_eq!(m.class_of_index(1), Some(RgbClass::Vehicle));
        assert_eq!(m.class_of_index(2), None);
        assert_eq!(m.class_of_index(9), None);
        assert_eq!(
            (m.input.width, m.yolo.layout, m.yolo.match_iou),
            (64, YoloLayout::V8, 0.3)
        );
    }

    #[test]
    fn inconsistent_values_name_the_key() {
        let mut m: ClassifierManifest = toml::from_str(minimal()).unwrap();
        m.classes.insert("bus".into(), RgbClass::Vehicle);
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("classes") && e.contains("`bus`"), "{e}");
        let mut m: ClassifierManifest = toml::from_str(minimal()).unwrap();
        m.input.std = [1.0, 0.0, 1.0];
        assert!(m.validate().unwrap_err().to_string().contains("input.std"));
        let mut m: ClassifierManifest = toml::from_str(minimal()).unwrap();
        m.yolo.nms_iou = 1.5;
        assert!(m.validate().unwrap_err().to_string().contains("yolo.nms_iou"));
        assert!(
            toml::from_str::<ClassifierManifest>("colour = 1").is_err(),
            "unknown keys are refused"
        );
    }
}
