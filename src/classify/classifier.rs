//! `Classifier`: a loaded manifest with its ONNX session (opened once, its input checked against
//! the manifest) that says, for projected boxes in one camera image, what the image shows there.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use image::RgbImage;
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;

use super::crop::{PixelRect, crop_region, cut_region, fit_image, push_tensor};
use super::error::ClassifyError;
use super::manifest::{Activation, ClassifierKind, ClassifierManifest, RgbClass, TensorLayout};
use super::yolo::{Detection2d, decode, match_boxes, nms};
use crate::detect::{open_session, session_tensors, sha256_file};

/// Crops classified per ONNX run by a crop model with a dynamic batch axis.
const CROP_BATCH: usize = 32;

/// What the image shows at one projected box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RgbVerdict {
    /// The class the image model sees.
    pub class: RgbClass,
    /// Its score (softmax probability, sigmoid, or the detection's score).
    pub score: f32,
}

/// Why a box got no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVerdict {
    /// The projected box is smaller than `crop.min_side_px` (or misses the image).
    TooSmall,
    /// A 2D detector found nothing overlapping the box by `yolo.match_iou`.
    Unmatched,
}

impl NoVerdict {
    /// The note written to the shards.
    pub fn as_str(self) -> &'static str {
        match self {
            NoVerdict::TooSmall => "too_small",
            NoVerdict::Unmatched => "unmatched",
        }
    }
}

/// A loaded image classifier. `Send + Sync`: the session sits behind a mutex.
pub struct Classifier {
    manifest: ClassifierManifest,
    session: Mutex<Session>,
    input: String,
    output: String,
    /// The model's batch axis is dynamic (several crops per run).
    batched: bool,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("name", &self.manifest.name)
            .finish_non_exhaustive()
    }
}

impl Classifier {
    /// Loads `dir/classifier.toml`, verifies the model's sha256, opens the session and checks its
    /// input (name, element type, shape) against the manifest.
    pub fn load(dir: &Path) -> Result<Self, ClassifyError> {
        let manifest = ClassifierManifest::load(dir)?;
        Self::from_manifest(manifest, dir)
    }

    /// As [`Classifier::load`], for a manifest in memory whose model path is relative to `dir`.
    pub fn from_manifest(manifest: ClassifierManifest, dir: &Path) -> Result<Self, ClassifyError> {
        manifest.validate()?;
        let name = manifest.name.clone();
        let path = dir.join(&manifest.model.file);
        let file_error = |path: &PathBuf, reason: String| ClassifyError::ModelFile {
            classifier: name.clone(),
            path: path.clone(),
            reason,
        };
        if !path.is_file() {
            return Err(file_error(&path, "model file not found".into()));
        }
        let actual = sha256_file(&path).map_err(|e| file_error(&path, e.to_string()))?;
        if !actual.eq_ignore_ascii_case(&manifest.model.sha256) {
            return Err(file_error(
                &path,
                format!(
                    "sha256 mismatch: manifest says {}, file has {actual}",
                    manifest.model.sha256.to_ascii_lowercase()
                ),
            ));
        }
        let session = open_session(&path, manifest.threads).map_err(|error| ClassifyError::Runtime {
            classifier: name.clone(),
            error,
        })?;
        let model = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let tensor_error = |reason: String| ClassifyError::Tensor {
            classifier: name.clone(),
            model: model.clone(),
            reason,
        };
        let (inputs, outputs) = session_tensors(&session);
        let pick = |kind: &str,
                    list: &[crate::detect::TensorInfo],
                    wanted: &str|
         -> Result<crate::detect::TensorInfo, ClassifyError> {
            let names = || {
                list.iter()
                    .map(|t| format!("`{}`", t.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if wanted.is_empty() {
                return match list {
                    [only] => Ok(only.clone()),
                    [first, ..] if kind == "output" => Ok(first.clone()),
                    _ => Err(tensor_error(format!(
                        "the model has {kind}s {}; name one in [model] {kind}",
                        names()
                    ))),
                };
            }
            list.iter()
                .find(|t| t.name == wanted)
                .cloned()
                .ok_or_else(|| tensor_error(format!("no {kind} `{wanted}` (the model has: {})", names())))
        };
        let input = pick("input", &inputs, &manifest.model.input)?;
        let output = pick("output", &outputs, &manifest.model.output)?;
        let (h, w) = (i64::from(manifest.input.height), i64::from(manifest.input.width));
        let want = match manifest.input.layout {
            TensorLayout::Nchw => [-1, 3, h, w],
            TensorLayout::Nhwc => [-1, h, w, 3],
        };
        let fits = input.shape.len() == 4
            && want
                .iter()
                .zip(&input.shape)
                .enumerate()
                .all(|(i, (w, a))| *a < 0 || (i == 0 && *a == 1) || (i > 0 && w == a));
        if !fits || input.element_type != "f32" {
            return Err(tensor_error(format!(
                "input `{}`: the manifest's [input] ({:?}, {}×{} px) needs an f32 tensor {}, the model has {} {:?}",
                input.name,
                manifest.input.layout,
                manifest.input.width,
                manifest.input.height,
                match manifest.input.layout {
                    TensorLayout::Nchw => format!("[N, 3, {h}, {w}]"),
                    TensorLayout::Nhwc => format!("[N, {h}, {w}, 3]"),
                },
                input.element_type,
                input.shape
            )));
        }
        let batched = input.shape[0] < 0;
        Ok(Self {
            input: input.name,
            output: output.name,
            batched,
            manifest,
            session: Mutex::new(session),
        })
    }

    /// The manifest.
    pub fn manifest(&self) -> &ClassifierManifest {
        &self.manifest
    }

    /// The classifier's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// What `image` shows at each of `boxes` (projected boxes in this image's pixels, clipped to
    /// it): a crop model classifies each box's crop, a 2D detector runs once on the whole image
    /// and each box takes the best-overlapping detection's class.
    pub fn check(
        &self,
        image: &RgbImage,
        boxes: &[PixelRect],
    ) -> Result<Vec<Result<RgbVerdict, NoVerdict>>, ClassifyError> {
        match self.manifest.kind {
            ClassifierKind::Crop => self.classify_crops(image, boxes),
            ClassifierKind::Yolo => {
                let min = self.manifest.crop.min_side_px;
                let detections = self.detect(image)?;
                let matched = match_boxes(boxes, &detections, self.manifest.yolo.match_iou);
                Ok(boxes
                    .iter()
                    .zip(matched)
                    .map(|(b, m)| {
                        if b[2] - b[0] < min || b[3] - b[1] < min {
                            return Err(NoVerdict::TooSmall);
                        }
                        let (d, _) = m.ok_or(NoVerdict::Unmatched)?;
                        let class = self.manifest.class_of_index(d.label).ok_or(NoVerdict::Unmatched)?;
                        Ok(RgbVerdict { class, score: d.score })
                    })
                    .collect())
            }
        }
    }

    /// A 2D detector's detections in `image` (its pixels), after NMS; only mapped labels count.
    pub fn detect(&self, image: &RgbImage) -> Result<Vec<Detection2d>, ClassifyError> {
        let Some((fitted, placement)) = fit_image(image, &self.manifest.input) else {
            return Ok(Vec::new());
        };
        let mut tensor = Vec::with_capacity(fitted.len());
        push_tensor(&fitted, &self.manifest.input, &mut tensor);
        let labels = self.manifest.output.labels.len();
        let y = &self.manifest.yolo;
        let detections = self.run(tensor, 1, |shape, data| {
            decode(data, shape, labels, y, |l| self.manifest.class_of_index(l).is_some())
        })?;
        let mut kept = nms(detections, y.nms_iou, y.max_detections);
        for d in &mut kept {
            d.rect = placement.to_image(d.rect);
        }
        Ok(kept)
    }

    fn classify_crops(
        &self,
        image: &RgbImage,
        boxes: &[PixelRect],
    ) -> Result<Vec<Result<RgbVerdict, NoVerdict>>, ClassifyError> {
        let m = &self.manifest;
        let crops: Vec<Option<RgbImage>> = boxes
            .iter()
            .map(|b| {
                crop_region(*b, &m.crop)
                    .and_then(|r| cut_region(image, r, &m.input))
                    .map(|(c, _)| c)
            })
            .collect();
        let wanted: Vec<usize> = (0..boxes.len()).filter(|&i| crops[i].is_some()).collect();
        let mut verdicts: Vec<Result<RgbVerdict, NoVerdict>> = vec![Err(NoVerdict::TooSmall); boxes.len()];
        let batch = if self.batched { CROP_BATCH } else { 1 };
        let labels = m.output.labels.len();
        for chunk in wanted.chunks(batch) {
            let mut tensor = Vec::new();
            for &i in chunk {
                if let Some(c) = &crops[i] {
                    push_tensor(c, &m.input, &mut tensor);
                }
            }
            let scores = self.run(tensor, chunk.len(), |shape, data| {
                let expected = chunk.len() * labels;
                if data.len() != expected {
                    return Err(format!(
                        "output has shape {shape:?}: {} values for {} crops of {labels} labels (output.labels)",
                        data.len(),
                        chunk.len()
                    ));
                }
                Ok(data.to_vec())
            })?;
            for (k, &i) in chunk.iter().enumerate() {
                let row = activate(&scores[k * labels..(k + 1) * labels], m.output.activation);
                let (label, score) = row
                    .iter()
                    .copied()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or((0, 0.0));
                let class = m.class_of_index(label).unwrap_or(RgbClass::Unknown);
                verdicts[i] = Ok(RgbVerdict { class, score });
            }
        }
        Ok(verdicts)
    }

    /// Runs the model on a `batch`-item input tensor and reads its output through `read`.
    fn run<R>(
        &self,
        tensor: Vec<f32>,
        batch: usize,
        read: impl FnOnce(&[i64], &[f32]) -> Result<R, String>,
    ) -> Result<R, ClassifyError> {
        let fail = |reason: String| ClassifyError::Inference {
            classifier: self.manifest.name.clone(),
            reason,
        };
        let (h, w) = (self.manifest.input.height as usize, self.manifest.input.width as usize);
        let shape = match self.manifest.input.layout {
            TensorLayout::Nchw => vec![batch, 3, h, w],
            TensorLayout::Nhwc => vec![batch, h, w, 3],
        };
        let value = Tensor::from_array((shape, tensor)).map_err(|e| fail(e.to_string()))?;
        let inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![(Cow::from(self.input.as_str()), value.into())];
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let outputs = session.run(inputs).map_err(|e| fail(e.to_string()))?;
        let out = outputs
            .get(self.output.as_str())
            .ok_or_else(|| fail(format!("output `{}` missing", self.output)))?;
        let (shape, data) = out
            .try_extract_tensor::<f32>()
            .map_err(|e| fail(format!("output `{}`: {e}", self.output)))?;
        let shape: Vec<i64> = shape.iter().copied().collect();
        read(&shape, data).map_err(fail)
    }
}

/// Scores after the manifest's activation.
fn activate(scores: &[f32], activation: Activation) -> Vec<f32> {
    match activation {
        Activation::None => scores.to_vec(),
        Activation::Sigmoid => scores.iter().map(|s| 1.0 / (1.0 + (-s).exp())).collect(),
        Activation::Softmax => {
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exp: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            exp.iter().map(|e| e / sum).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_and_sigmoid_match_hand_values() {
        let s = activate(&[0.0, (3.0f32).ln()], Activation::Softmax);
        approx::assert_abs_diff_eq!(s[0], 0.25, epsilon = 1e-6);
        approx::assert_abs_diff_eq!(s[1], 0.75, epsilon = 1e-6);
        let s = activate(&[0.0, 2.0], Activation::Sigmoid);
        approx::assert_abs_diff_eq!(s[0], 0.5, epsilon = 1e-6);
        approx::assert_abs_diff_eq!(s[1], 0.880_797, epsilon = 1e-6);
        assert_eq!(activate(&[3.0], Activation::None), vec![3.0]);
    }
}
