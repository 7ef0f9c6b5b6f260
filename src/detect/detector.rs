//! `Detector`: a loaded manifest with its ONNX sessions (opened once, checked against the
//! manifest) that runs pillarise → encoder → scatter → head → decode → NMS on one sweep.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ort::session::{Session, SessionInputValue};
use ort::value::{Tensor, TensorRef};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::anchor::AnchorDecoder;
use super::center_heatmap::{CenterHeatmapDecoder, CenterTaskMaps};
use super::error::DetectError;
use super::head_map::{DecodedBox, HeadMap, map_shape};
use super::manifest::{DecoderKind, DetectorManifest, EncoderLayout, ExecutionProvider, Family, MapLayout, ModelFile};
use super::pillarize::{PillarGrid, PillarRows, PillarSpec, Pillars, pillarize, pillarize_into};
use super::postprocess::select_boxes;
use super::runtime::{SessionOptions, TensorInfo, open_session_with, session_tensors};
use super::scatter::{Canvas, EncodedPillars, EncodedPillarsView, scatter_to_canvas, scatter_view_into};
use crate::boxes::Detection;
use crate::cloud::PointCloud;
use crate::frame::ObjectClass;

/// Wall time of each stage of one `detect` call (serialised as `<stage>_ms` floats).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimings {
    /// Building the encoder input.
    pub pillarize: Duration,
    /// The encoder graph (zero for single-graph models).
    pub encoder: Duration,
    /// Scattering encoder features onto the BEV canvas (zero for single-graph models).
    pub scatter: Duration,
    /// The head graph, or the whole single graph.
    pub head: Duration,
    /// Decoding and NMS.
    pub decode: Duration,
}

impl Serialize for StageTimings {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("StageTimings", 5)?;
        s.serialize_field("pillarize_ms", &(self.pillarize.as_secs_f64() * 1e3))?;
        s.serialize_field("encoder_ms", &(self.encoder.as_secs_f64() * 1e3))?;
        s.serialize_field("scatter_ms", &(self.scatter.as_secs_f64() * 1e3))?;
        s.serialize_field("head_ms", &(self.head.as_secs_f64() * 1e3))?;
        s.serialize_field("decode_ms", &(self.decode.as_secs_f64() * 1e3))?;
        s.end()
    }
}

impl StageTimings {
    /// Time spent outside ONNX Runtime (pillarise + scatter + decode).
    pub fn pre_post(&self) -> Duration {
        self.pillarize + self.scatter + self.decode
    }

    /// Time spent in ONNX Runtime.
    pub fn onnx(&self) -> Duration {
        self.encoder + self.head
    }
}

/// A few sessions of one graph; a caller takes whichever is free (ort's `run` needs `&mut`).
struct SessionPool {
    model: String,
    sessions: Vec<Mutex<Session>>,
    next: AtomicUsize,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
}

impl SessionPool {
    fn open(detector: &str, path: &Path, options: &SessionOptions, count: usize) -> Result<Self, DetectError> {
        let mut sessions = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            let session = open_session_with(path, options).map_err(|error| DetectError::Runtime {
                detector: detector.to_string(),
                error,
            })?;
            sessions.push(Mutex::new(session));
        }
        let (inputs, outputs) = sessions[0]
            .lock()
            .map(|s| session_tensors(&s))
            .unwrap_or_else(|p| session_tensors(&p.into_inner()));
        Ok(Self {
            model: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
            sessions,
            next: AtomicUsize::new(0),
            inputs,
            outputs,
        })
    }

    /// Runs the graph on whichever session is free and hands the named f32 outputs, still owned
    /// by ONNX Runtime, to `use_outputs` (no copy; the session stays locked until it returns).
    fn run<R>(
        &self,
        detector: &str,
        inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)>,
        outputs: &[&str],
        use_outputs: impl FnOnce(&[OutputView<'_>]) -> Result<R, DetectError>,
    ) -> Result<R, DetectError> {
        let fail = |reason: String| DetectError::Inference {
            detector: detector.to_string(),
            model: self.model.clone(),
            reason,
        };
        let mut guard = None;
        for session in &self.sessions {
            if let Ok(g) = session.try_lock() {
                guard = Some(g);
                break;
            }
        }
        let mut session = match guard {
            Some(g) => g,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.sessions.len();
                self.sessions[i].lock().unwrap_or_else(PoisonError::into_inner)
            }
        };
        let result = session.run(inputs).map_err(|e| fail(e.to_string()))?;
        let views = outputs
            .iter()
            .map(|name| {
                let value = result
                    .get(*name)
                    .ok_or_else(|| fail(format!("output `{name}` missing")))?;
                let (shape, data) = value
                    .try_extract_tensor::<f32>()
                    .map_err(|e| fail(format!("output `{name}`: {e}")))?;
                Ok(OutputView {
                    name,
                    shape: shape.iter().copied().collect(),
                    data,
                })
            })
            .collect::<Result<Vec<_>, DetectError>>()?;
        use_outputs(&views)
    }
}

/// One f32 output of a run, borrowed from ONNX Runtime.
struct OutputView<'a> {
    name: &'a str,
    shape: Vec<i64>,
    data: &'a [f32],
}

/// How the graphs of a detector are chained.
enum Plan {
    Split {
        encoder: SessionPool,
        encoder_input: String,
        encoder_output: String,
        head: SessionPool,
        head_input: String,
    },
    Single {
        graph: SessionPool,
        pillars_input: String,
        coords_input: String,
        coords_i64: bool,
        num_points_input: Option<(String, bool)>,
    },
}

enum Decoder {
    Anchor(AnchorDecoder),
    Center(CenterHeatmapDecoder),
}

/// A loaded detector: manifest, sessions (created once) and decoder. `Send + Sync`: sessions sit
/// behind mutexes, so several threads can call [`Detector::detect`] (up to `runtime.sessions` at once).
pub struct Detector {
    manifest: DetectorManifest,
    dir: PathBuf,
    plan: Plan,
    decoder: Decoder,
    labels: Vec<String>,
    spec: PillarSpec,
    rows: PillarRows,
    /// Head outputs and their expected shapes, in decoder order.
    head_outputs: Vec<(String, [usize; 4])>,
    /// Pillar and canvas buffers of finished calls, reused so steady-state calls allocate no
    /// large zeroed buffers (their page faults cost more than the pillarisation itself).
    scratch: Mutex<Vec<(Pillars, Canvas)>>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector")
            .field("name", &self.manifest.name)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Refuses a model file whose real path (symlinks and `..` resolved) lies outside the real path
/// of the detector folder `dir`; `key` names the manifest table (`encoder`, `head`, `graph`).
fn confine_to_folder(detector: &str, key: &str, dir: &Path, path: &Path) -> Result<(), DetectError> {
    let io = |p: &Path, e: std::io::Error| DetectError::Io {
        path: p.to_path_buf(),
        reason: e.to_string(),
    };
    let folder = dir.canonicalize().map_err(|e| io(dir, e))?;
    let real = path.canonicalize().map_err(|e| io(path, e))?;
    if real.starts_with(&folder) {
        return Ok(());
    }
    Err(DetectError::Invalid {
        detector: detector.to_string(),
        field: format!("models.{key}.file"),
        reason: format!(
            "{} resolves to {}, outside the detector folder {}; set `allow_outside_folder = true` in [models] to allow it",
            path.display(),
            real.display(),
            folder.display()
        ),
    })
}

/// Lower-case hex sha256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, DetectError> {
    let bytes = std::fs::read(path).map_err(|e| DetectError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

fn shape_text(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// Checks one model tensor against the shapes the manifest implies (−1 on either side matches
/// any size) and the allowed element types; returns the model's declared shape.
fn check_tensor(
    detector: &str,
    pool: &SessionPool,
    kind: &'static str,
    name: &str,
    expected: &[Vec<i64>],
    element_types: &[&str],
) -> Result<TensorInfo, DetectError> {
    let list = if kind == "input" { &pool.inputs } else { &pool.outputs };
    let Some(info) = list.iter().find(|t| t.name == name) else {
        return Err(DetectError::MissingTensor {
            detector: detector.to_string(),
            model: pool.model.clone(),
            kind,
            tensor: name.to_string(),
            available: list
                .iter()
                .map(|t| format!("`{}` {}", t.name, shape_text(&t.shape)))
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let mismatch = |expected: String, actual: String| DetectError::TensorMismatch {
        detector: detector.to_string(),
        model: pool.model.clone(),
        tensor: name.to_string(),
        expected,
        actual,
    };
    if !element_types.contains(&info.element_type.as_str()) {
        return Err(mismatch(
            format!("element type {}", element_types.join(" or ")),
            format!("element type {}", info.element_type),
        ));
    }
    let fits = |want: &Vec<i64>| {
        want.len() == info.shape.len() && want.iter().zip(&info.shape).all(|(w, a)| *w < 0 || *a < 0 || w == a)
    };
    if !expected.iter().any(fits) {
        let want: Vec<String> = expected.iter().map(|s| shape_text(s)).collect();
        return Err(mismatch(
            format!("shape {}", want.join(" or ")),
            format!("shape {}", shape_text(&info.shape)),
        ));
    }
    Ok(info.clone())
}

/// The model's only input or output when the manifest leaves the name empty.
fn default_name(detector: &str, pool: &SessionPool, kind: &'static str, name: &str) -> Result<String, DetectError> {
    if !name.is_empty() {
        return Ok(name.to_string());
    }
    let list = if kind == "input" { &pool.inputs } else { &pool.outputs };
    match list.as_slice() {
        [only] => Ok(only.name.clone()),
        _ => Err(DetectError::Invalid {
            detector: detector.to_string(),
            field: format!("models: {} name", kind),
            reason: format!("{} has {} {kind}s; name the one to use", pool.model, list.len()),
        }),
    }
}

impl Detector {
    /// Loads `dir/detector.toml`, verifies every model file's sha256, opens the sessions and
    /// checks each tensor the manifest names (name, rank, shape, element type) against the models.
    pub fn load(dir: &Path) -> Result<Self, DetectError> {
        let manifest = DetectorManifest::load(dir)?;
        Self::from_manifest(manifest, dir)
    }

    /// As [`Detector::load`], for a manifest already in memory whose model paths are relative to `dir`.
    pub fn from_manifest(manifest: DetectorManifest, dir: &Path) -> Result<Self, DetectError> {
        manifest.validate()?;
        let name = manifest.name.clone();
        let model_path = |key: &str, m: &ModelFile| -> Result<PathBuf, DetectError> {
            let path = dir.join(&m.file);
            if !path.is_file() {
                return Err(DetectError::MissingModel {
                    detector: name.clone(),
                    path,
                });
            }
            if !manifest.models.allow_outside_folder {
                confine_to_folder(&name, key, dir, &path)?;
            }
            let actual = sha256_file(&path)?;
            if !actual.eq_ignore_ascii_case(&m.sha256) {
                return Err(DetectError::Sha256Mismatch {
                    detector: name.clone(),
                    path,
                    expected: m.sha256.to_ascii_lowercase(),
                    actual,
                });
            }
            Ok(path)
        };
        // Check every file before opening any session, so a bad file fails fast.
        let paths: Vec<PathBuf> = manifest
            .model_files()
            .into_iter()
            .map(|(key, m)| model_path(key, m))
            .collect::<Result<_, _>>()?;
        let options = SessionOptions {
            threads: manifest.runtime.threads,
            cuda_device: (manifest.runtime.execution_provider == ExecutionProvider::Cuda)
                .then_some(manifest.runtime.device_id),
        };
        let sessions = manifest.runtime.sessions;
        let open = |path: &Path| SessionPool::open(&name, path, &options, sessions);

        let (nx, ny) = manifest.grid_size();
        let p = &manifest.pillars;
        let channels = manifest.pillar_channels();
        let (maxp, m, c) = (
            p.max_pillars as i64,
            p.max_points_per_pillar as i64,
            channels.len() as i64,
        );
        let pillar_shape = match p.layout {
            EncoderLayout::PointMajor => vec![maxp, m, c],
            EncoderLayout::ChannelMajor => vec![1, c, maxp, m],
        };
        let pillar_axis = match p.layout {
            EncoderLayout::PointMajor => 0,
            EncoderLayout::ChannelMajor => 2,
        };
        let rows_of = |info: &TensorInfo| match info.shape.get(pillar_axis) {
            Some(&n) if n > 0 => PillarRows::Fixed(n as usize),
            _ => PillarRows::Trim,
        };

        let (plan, rows, head_pool) = match manifest.family {
            Family::SplitPillar => {
                let (Some(enc), Some(head)) = (&manifest.models.encoder, &manifest.models.head) else {
                    unreachable_models(&name)?
                };
                let encoder = open(&paths[0])?;
                let head_pool = open(&paths[1])?;
                let encoder_input = default_name(&name, &encoder, "input", &enc.input)?;
                let encoder_output = default_name(&name, &encoder, "output", &enc.output)?;
                let info = check_tensor(&name, &encoder, "input", &encoder_input, &[pillar_shape], &["f32"])?;
                let rows = rows_of(&info);
                let f = manifest.scatter.channels as i64;
                let out_shapes = match p.layout {
                    EncoderLayout::PointMajor => vec![vec![maxp, f], vec![maxp, 1, f]],
                    EncoderLayout::ChannelMajor => vec![vec![1, f, maxp, 1], vec![1, f, maxp]],
                };
                check_tensor(&name, &encoder, "output", &encoder_output, &out_shapes, &["f32"])?;
                let head_input = default_name(&name, &head_pool, "input", &head.input)?;
                let canvas = match manifest.scatter.layout {
                    MapLayout::Nchw => vec![1, f, ny as i64, nx as i64],
                    MapLayout::Nhwc => vec![1, ny as i64, nx as i64, f],
                };
                check_tensor(&name, &head_pool, "input", &head_input, &[canvas], &["f32"])?;
                (
                    PlanParts::Split {
                        encoder,
                        encoder_input,
                        encoder_output,
                        head_input,
                    },
                    rows,
                    head_pool,
                )
            }
            Family::SingleGraph => {
                let Some(g) = &manifest.models.graph else {
                    unreachable_models(&name)?
                };
                let graph = open(&paths[0])?;
                let info = check_tensor(&name, &graph, "input", &g.pillars, &[pillar_shape], &["f32"])?;
                let rows = rows_of(&info);
                let ints = ["i32", "i64"];
                let coords = check_tensor(&name, &graph, "input", &g.coords, &[vec![maxp, 4]], &ints)?;
                let num_points = match &g.num_points {
                    Some(n) => {
                        let info = check_tensor(&name, &graph, "input", n, &[vec![maxp]], &ints)?;
                        Some((n.clone(), info.element_type == "i64"))
                    }
                    None => None,
                };
                (
                    PlanParts::Single {
                        pillars_input: g.pillars.clone(),
                        coords_input: g.coords.clone(),
                        coords_i64: coords.element_type == "i64",
                        num_points_input: num_points,
                    },
                    rows,
                    graph,
                )
            }
        };

        let layout = manifest.head.layout;
        let (decoder, labels, head_outputs) = match manifest.decoder {
            DecoderKind::Anchor => {
                let a = &manifest.head.anchor;
                let (w, h) = (nx / a.feature_stride, ny / a.feature_stride);
                let decoder = AnchorDecoder::new(a, p.point_cloud_range, w, h);
                let (cc, bc, dc) = decoder.channels();
                let mut outputs = vec![
                    (a.cls.clone(), map_shape(cc, h, w, layout)),
                    (a.r#box.clone(), map_shape(bc, h, w, layout)),
                ];
                if !a.dir_cls.is_empty() {
                    outputs.push((a.dir_cls.clone(), map_shape(dc, h, w, layout)));
                }
                (Decoder::Anchor(decoder), a.labels.clone(), outputs)
            }
            DecoderKind::CenterHeatmap => {
                let cfg = &manifest.head.center;
                let r = &p.point_cloud_range;
                let decoder =
                    CenterHeatmapDecoder::new(cfg, [r[0], r[1]], [p.pillar_size[0], p.pillar_size[1]], (nx, ny));
                let (w, h) = decoder.map_size();
                let mut outputs = Vec::new();
                for t in &cfg.tasks {
                    outputs.push((t.heatmap.clone(), map_shape(t.labels.len(), h, w, layout)));
                    outputs.push((t.reg.clone(), map_shape(2, h, w, layout)));
                    outputs.push((t.height.clone(), map_shape(1, h, w, layout)));
                    outputs.push((t.dim.clone(), map_shape(3, h, w, layout)));
                    outputs.push((t.rot.clone(), map_shape(2, h, w, layout)));
                    if let Some(v) = &t.vel {
                        outputs.push((v.clone(), map_shape(2, h, w, layout)));
                    }
                }
                let labels = decoder.labels().into_iter().map(String::from).collect();
                (Decoder::Center(decoder), labels, outputs)
            }
        };
        for (output, shape) in &head_outputs {
            check_tensor(&name, &head_pool, "output", output, &[dims(shape)], &["f32"])?;
        }

        let plan = match plan {
            PlanParts::Split {
                encoder,
                encoder_input,
                encoder_output,
                head_input,
            } => Plan::Split {
                encoder,
                encoder_input,
                encoder_output,
                head: head_pool,
                head_input,
            },
            PlanParts::Single {
                pillars_input,
                coords_input,
                coords_i64,
                num_points_input,
            } => Plan::Single {
                graph: head_pool,
                pillars_input,
                coords_input,
                coords_i64,
                num_points_input,
            },
        };
        let spec = PillarSpec {
            grid: PillarGrid::new(p.point_cloud_range, p.pillar_size),
            max_points_per_pillar: p.max_points_per_pillar,
            max_pillars: p.max_pillars,
            features: manifest.points.features.clone(),
            channels,
            layout: p.layout,
        };
        Ok(Self {
            manifest,
            dir: dir.to_path_buf(),
            plan,
            decoder,
            labels,
            spec,
            rows,
            head_outputs,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// The detector's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The manifest it was loaded from.
    pub fn manifest(&self) -> &DetectorManifest {
        &self.manifest
    }

    /// The pillariser settings derived from the manifest.
    pub fn pillar_spec(&self) -> &PillarSpec {
        &self.spec
    }

    /// Whether the encoder input is padded to a static pillar count or trimmed to the pillars present.
    pub fn pillar_rows(&self) -> PillarRows {
        self.rows
    }

    /// Builds the encoder input for a sweep.
    pub fn pillarize(&self, cloud: &PointCloud) -> Result<Pillars, DetectError> {
        let finite = self.drop_non_finite_features(cloud)?;
        let cloud = finite.as_ref().unwrap_or(cloud);
        pillarize(cloud, &self.spec, self.rows).map_err(|e| DetectError::Cloud {
            detector: self.manifest.name.clone(),
            reason: e.to_string(),
        })
    }

    /// The cloud without the points whose feature inputs (intensity, float channels) are not
    /// finite, or `None` when every point is finite. Such points are dropped, counted and logged:
    /// a NaN feature poisons its whole pillar (issue 18: NaN intensity on 20 % of the points cut
    /// detections from 125 to 11 with no word). Non-finite x, y, z fall outside every pillar anyway.
    fn drop_non_finite_features(&self, cloud: &PointCloud) -> Result<Option<PointCloud>, DetectError> {
        let mut columns: Vec<(&str, &[f32])> = Vec::new();
        for feature in &self.manifest.points.features {
            let name = feature.source.as_str();
            let column = match name {
                "intensity" => cloud.intensity(),
                _ => match cloud.channel(name) {
                    Some(crate::cloud::ChannelData::F32(v)) => v.as_slice(),
                    _ => continue,
                },
            };
            if column.iter().any(|v| !v.is_finite()) && !columns.iter().any(|(n, _)| *n == name) {
                columns.push((name, column));
            }
        }
        if columns.is_empty() {
            return Ok(None);
        }
        let keep: Vec<bool> = (0..cloud.len())
            .map(|i| columns.iter().all(|(_, c)| c.get(i).is_some_and(|v| v.is_finite())))
            .collect();
        let dropped = keep.iter().filter(|k| !**k).count();
        let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
        tracing::warn!(
            "detector `{}`: dropped {dropped} of {} points with a non-finite {}",
            self.manifest.name,
            cloud.len(),
            names.join(" or ")
        );
        cloud.select(&keep).map(Some).map_err(|e| DetectError::Cloud {
            detector: self.manifest.name.clone(),
            reason: e.to_string(),
        })
    }

    /// Runs the encoder graph (split pillar models only; `None` for single-graph models).
    pub fn encode(&self, pillars: &Pillars) -> Result<Option<EncodedPillars>, DetectError> {
        self.with_encoded(pillars, |view| EncodedPillars {
            data: view.data.to_vec(),
            rows: view.rows,
            channels: view.channels,
            channel_major: view.channel_major,
        })
    }

    /// Runs the encoder graph and hands its output, borrowed from ONNX Runtime, to `use_encoded`
    /// (split pillar models only; `None` for single-graph models).
    fn with_encoded<R>(
        &self,
        pillars: &Pillars,
        use_encoded: impl FnOnce(EncodedPillarsView<'_>) -> R,
    ) -> Result<Option<R>, DetectError> {
        let Plan::Split {
            encoder,
            encoder_input,
            encoder_output,
            ..
        } = &self.plan
        else {
            return Ok(None);
        };
        let name = &self.manifest.name;
        let f = self.manifest.scatter.channels;
        let channel_major = self.spec.layout == EncoderLayout::ChannelMajor;
        let batch = self.manifest.pillars.encoder_batch;
        if self.rows == PillarRows::Trim && batch > 0 && !channel_major {
            let data = self.encode_in_batches(encoder, encoder_input, encoder_output, pillars, batch)?;
            return Ok(Some(use_encoded(EncodedPillarsView {
                data: &data,
                rows: pillars.rows,
                channels: f,
                channel_major,
            })));
        }
        let input = self.tensor_view(encoder, &pillars.shape, &pillars.features)?;
        let inputs = vec![(encoder_input.as_str().into(), input)];
        encoder.run(name, inputs, &[encoder_output], |outputs| {
            let out = self.encoder_output(encoder, encoder_output, outputs, pillars.rows)?;
            Ok(Some(use_encoded(EncodedPillarsView {
                data: out,
                rows: pillars.rows,
                channels: f,
                channel_major,
            })))
        })
    }

    /// The encoder's output values for `rows` pillars, or an error naming the shape it gave.
    fn encoder_output<'o>(
        &self,
        encoder: &SessionPool,
        tensor: &str,
        outputs: &[OutputView<'o>],
        rows: usize,
    ) -> Result<&'o [f32], DetectError> {
        let f = self.manifest.scatter.channels;
        match outputs.first() {
            Some(out) if out.data.len() == rows * f => Ok(out.data),
            other => Err(DetectError::TensorMismatch {
                detector: self.manifest.name.clone(),
                model: encoder.model.clone(),
                tensor: tensor.to_string(),
                expected: format!("{} values ({rows} pillars × {f} features)", rows * f),
                actual: other.map_or_else(|| "no output".into(), |out| format!("shape {}", shape_text(&out.shape))),
            }),
        }
    }

    /// Runs a point-major encoder on a sweep's pillars `batch` rows at a time (the last run
    /// zero-padded, so every run has one shape) and gathers the features of the real rows.
    /// Pillars are independent in a pillar encoder, so this equals one run over all of them.
    fn encode_in_batches(
        &self,
        encoder: &SessionPool,
        encoder_input: &str,
        encoder_output: &str,
        pillars: &Pillars,
        batch: usize,
    ) -> Result<Vec<f32>, DetectError> {
        let name = &self.manifest.name;
        let f = self.manifest.scatter.channels;
        let rows = pillars.rows;
        // `[rows, points, channels]`: a run's rows are one contiguous slice.
        let row_len: usize = pillars.shape.iter().skip(1).product();
        let mut shape = pillars.shape.clone();
        shape[0] = batch;
        // Full runs are views of the sweep's own rows; only the last, short one is copied and padded.
        let mut padded = Vec::new();
        // Filled run by run in order, so never zeroed first.
        let mut features = Vec::with_capacity(rows * f);
        let mut start = 0;
        while start < rows {
            let n = batch.min(rows - start);
            let run = &pillars.features[start * row_len..(start + n) * row_len];
            let input = if n == batch {
                run
            } else {
                padded.resize(batch * row_len, 0.0);
                padded[..n * row_len].copy_from_slice(run);
                &padded[..]
            };
            let view = self.tensor_view(encoder, &shape, input)?;
            encoder.run(name, vec![(encoder_input.into(), view)], &[encoder_output], |outputs| {
                let out = self.encoder_output(encoder, encoder_output, outputs, batch)?;
                features.extend_from_slice(&out[..n * f]);
                Ok(())
            })?;
            start += n;
        }
        Ok(features)
    }

    /// Scatters encoder features onto the BEV canvas the head takes.
    pub fn scatter(&self, pillars: &Pillars, encoded: &EncodedPillars) -> Canvas {
        let (nx, ny) = self.manifest.grid_size();
        scatter_to_canvas(encoded, &pillars.cells, nx, ny, self.manifest.scatter.layout)
    }

    fn tensor_view<'a>(
        &self,
        pool: &SessionPool,
        shape: &[usize],
        data: &'a [f32],
    ) -> Result<SessionInputValue<'a>, DetectError> {
        TensorRef::from_array_view((shape.to_vec(), data))
            .map(SessionInputValue::from)
            .map_err(|e| DetectError::Inference {
                detector: self.manifest.name.clone(),
                model: pool.model.clone(),
                reason: e.to_string(),
            })
    }

    /// Runs the head graph on a canvas (split) or the single graph on pillars and hands the head
    /// maps, borrowed from ONNX Runtime, to `use_maps`.
    fn run_head<R>(
        &self,
        pillars: &Pillars,
        canvas: Option<&Canvas>,
        use_maps: impl FnOnce(&[OutputView<'_>]) -> Result<R, DetectError>,
    ) -> Result<R, DetectError> {
        let name = &self.manifest.name;
        let wanted: Vec<&str> = self.head_outputs.iter().map(|(n, _)| n.as_str()).collect();
        match &self.plan {
            Plan::Split { head, head_input, .. } => {
                let Some(canvas) = canvas else {
                    return Err(DetectError::Inference {
                        detector: name.clone(),
                        model: head.model.clone(),
                        reason: "no canvas".into(),
                    });
                };
                let input = self.tensor_view(head, &canvas.shape, &canvas.data)?;
                head.run(name, vec![(head_input.as_str().into(), input)], &wanted, use_maps)
            }
            Plan::Single {
                graph,
                pillars_input,
                coords_input,
                coords_i64,
                num_points_input,
            } => {
                let fail = |e: ort::Error| DetectError::Inference {
                    detector: name.clone(),
                    model: graph.model.clone(),
                    reason: e.to_string(),
                };
                let rows = pillars.rows;
                // Coordinates (batch, z, y, x); padding rows stay at cell (0, 0) with no points.
                let mut coords = vec![0i64; rows * 4];
                for (p, &(ix, iy)) in pillars.cells.iter().enumerate() {
                    coords[p * 4 + 2] = iy as i64;
                    coords[p * 4 + 3] = ix as i64;
                }
                let int_tensor = |values: Vec<i64>,
                                  shape: Vec<usize>,
                                  as_i64: bool|
                 -> Result<SessionInputValue<'static>, DetectError> {
                    if as_i64 {
                        Tensor::from_array((shape, values)).map(Into::into).map_err(fail)
                    } else {
                        let values: Vec<i32> = values.into_iter().map(|v| v as i32).collect();
                        Tensor::from_array((shape, values)).map(Into::into).map_err(fail)
                    }
                };
                let mut inputs = vec![
                    (
                        Cow::from(pillars_input.as_str()),
                        self.tensor_view(graph, &pillars.shape, &pillars.features)?,
                    ),
                    (
                        Cow::from(coords_input.as_str()),
                        int_tensor(coords, vec![rows, 4], *coords_i64)?,
                    ),
                ];
                if let Some((n, as_i64)) = num_points_input {
                    let mut counts = vec![0i64; rows];
                    for (c, &n) in counts.iter_mut().zip(&pillars.num_points) {
                        *c = n as i64;
                    }
                    inputs.push((Cow::from(n.as_str()), int_tensor(counts, vec![rows], *as_i64)?));
                }
                graph.run(name, inputs, &wanted, use_maps)
            }
        }
    }

    /// Decodes head maps into boxes, then score threshold, top-k and NMS.
    fn decode(&self, outputs: &[OutputView<'_>]) -> Result<Vec<DecodedBox>, DetectError> {
        let layout = self.manifest.head.layout;
        let mut maps = Vec::with_capacity(outputs.len());
        for (out, (_, shape)) in outputs.iter().zip(&self.head_outputs) {
            let (c, h, w) = match layout {
                MapLayout::Nchw => (shape[1], shape[2], shape[3]),
                MapLayout::Nhwc => (shape[3], shape[1], shape[2]),
            };
            let map = HeadMap::new(out.data, c, h, w, layout).filter(|_| out.shape == dims(shape));
            let Some(map) = map else {
                let model = match &self.plan {
                    Plan::Split { head, .. } => head.model.clone(),
                    Plan::Single { graph, .. } => graph.model.clone(),
                };
                return Err(DetectError::TensorMismatch {
                    detector: self.manifest.name.clone(),
                    model,
                    tensor: out.name.to_string(),
                    expected: format!("shape {}", shape_text(&dims(shape))),
                    actual: format!("shape {}", shape_text(&out.shape)),
                });
            };
            maps.push(map);
        }
        let pp = &self.manifest.postprocess;
        let activation = self.manifest.head.score_activation;
        let boxes = match &self.decoder {
            Decoder::Anchor(d) => d.decode(&maps[0], &maps[1], maps.get(2), activation, pp.score_threshold),
            Decoder::Center(d) => {
                let mut tasks = Vec::new();
                let mut i = 0;
                for t in &self.manifest.head.center.tasks {
                    let vel = t.vel.as_ref().map(|_| maps[i + 5]);
                    tasks.push(CenterTaskMaps {
                        heatmap: maps[i],
                        reg: maps[i + 1],
                        height: maps[i + 2],
                        dim: maps[i + 3],
                        rot: maps[i + 4],
                        vel,
                    });
                    i += if vel.is_some() { 6 } else { 5 };
                }
                d.decode(&tasks, activation, pp.score_threshold)
            }
        };
        Ok(select_boxes(boxes, pp))
    }

    /// Detects objects in one sweep (points in the sensor frame the detector was trained for).
    pub fn detect(&self, cloud: &PointCloud) -> Result<Vec<Detection>, DetectError> {
        self.detect_timed(cloud).map(|(d, _)| d)
    }

    /// As [`Detector::detect_timed`] for points whose ground lies at `input_ground_z_m` (m, in
    /// their frame): a manifest with `ground_z_m` gets the sweep moved vertically so that the
    /// ground lies where the model was trained to see it, and its boxes moved back. Without
    /// `ground_z_m` the points go in unchanged.
    pub fn detect_timed_on_ground(
        &self,
        cloud: &PointCloud,
        input_ground_z_m: Option<f64>,
    ) -> Result<(Vec<Detection>, StageTimings), DetectError> {
        let shift = self.ground_shift(input_ground_z_m)?;
        if shift == 0.0 {
            return self.detect_timed(cloud);
        }
        let mut moved = cloud.clone();
        moved.transform(&nalgebra::Isometry3::translation(0.0, 0.0, shift));
        let (mut detections, timings) = self.detect_timed(&moved)?;
        for d in &mut detections {
            d.box3.z -= shift;
        }
        Ok((detections, timings))
    }

    /// How far up a sweep whose ground lies at `input_ground_z_m` (m) is moved before this
    /// detector sees it: 0 without the manifest's `ground_z_m`; an error when the manifest sets
    /// it and the sweep's ground level is unknown.
    pub fn ground_shift(&self, input_ground_z_m: Option<f64>) -> Result<f64, DetectError> {
        match (self.manifest.ground_z_m, input_ground_z_m) {
            (None, _) => Ok(0.0),
            (Some(model), Some(input)) => Ok(model - input),
            (Some(model), None) => Err(DetectError::Invalid {
                detector: self.manifest.name.clone(),
                field: "ground_z_m".into(),
                reason: format!(
                    "the model expects the ground at z = {model} m, and where the ground lies in these points is \
                     unknown: give the platform profile (its mounting height or altitude rule places the ground)"
                ),
            }),
        }
    }

    /// As [`Detector::detect`], also returning the time of each stage.
    pub fn detect_timed(&self, cloud: &PointCloud) -> Result<(Vec<Detection>, StageTimings), DetectError> {
        let (mut pillars, mut canvas) = self
            .scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        let result = self.detect_with(cloud, &mut pillars, &mut canvas);
        self.scratch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((pillars, canvas));
        result
    }

    fn detect_with(
        &self,
        cloud: &PointCloud,
        pillars: &mut Pillars,
        canvas: &mut Canvas,
    ) -> Result<(Vec<Detection>, StageTimings), DetectError> {
        let mut t = StageTimings::default();
        let start = Instant::now();
        let finite = self.drop_non_finite_features(cloud)?;
        let cloud = finite.as_ref().unwrap_or(cloud);
        pillarize_into(cloud, &self.spec, self.rows, pillars).map_err(|e| DetectError::Cloud {
            detector: self.manifest.name.clone(),
            reason: e.to_string(),
        })?;
        t.pillarize = start.elapsed();

        // The encoder's output is scattered and the head's maps decoded while ONNX Runtime still
        // owns them (no copy); the stage times are taken inside.
        let start = Instant::now();
        let (nx, ny) = self.manifest.grid_size();
        let scattered = self.with_encoded(pillars, |encoded| {
            t.encoder = start.elapsed();
            let start = Instant::now();
            scatter_view_into(encoded, &pillars.cells, nx, ny, self.manifest.scatter.layout, canvas);
            t.scatter = start.elapsed();
        })?;
        let canvas = scattered.map(|()| &*canvas);

        let start = Instant::now();
        let boxes = self.run_head(pillars, canvas, |maps| {
            t.head = start.elapsed();
            let start = Instant::now();
            let boxes = self.decode(maps);
            t.decode = start.elapsed();
            boxes
        })?;
        let start = Instant::now();
        let detections = boxes
            .into_iter()
            .map(|b| Detection {
                box3: b.box3,
                class: self
                    .labels
                    .get(b.label)
                    .map(|l| self.manifest.class_of(l))
                    .unwrap_or(ObjectClass::Unknown),
                score: b.score,
                detector: self.manifest.name.clone(),
            })
            .collect();
        t.decode += start.elapsed();
        Ok((detections, t))
    }

    /// The sha256 of each model file, keyed by manifest key (`encoder`, `head`, `graph`).
    pub fn model_sha256s(&self) -> Vec<(&'static str, String)> {
        self.manifest
            .model_files()
            .into_iter()
            .map(|(key, m)| (key, m.sha256.to_ascii_lowercase()))
            .collect()
    }
}

/// Plan pieces gathered before the head pool is known to be the encoder's partner or the graph.
enum PlanParts {
    Split {
        encoder: SessionPool,
        encoder_input: String,
        encoder_output: String,
        head_input: String,
    },
    Single {
        pillars_input: String,
        coords_input: String,
        coords_i64: bool,
        num_points_input: Option<(String, bool)>,
    },
}

/// `validate` already rejects a family without its models; this keeps that path panic-free.
fn unreachable_models<T>(detector: &str) -> Result<T, DetectError> {
    Err(DetectError::Invalid {
        detector: detector.to_string(),
        field: "models".into(),
        reason: "the family's model entries are missing".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detector_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Detector>();
    }
}
