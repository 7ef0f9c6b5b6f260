//! `detectors/<name>/detector.toml`: what a detector's ONNX model(s) expect and how their outputs
//! decode, deserialised into [`DetectorManifest`]. Every key is documented in `docs/detectors.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::DetectError;
use crate::frame::{DetectorFrame, ObjectClass};

/// The manifest's file name inside a detector folder.
pub const MANIFEST_FILE: &str = "detector.toml";

/// A detector's manifest: model files, pre-processing, decoding, post-processing and runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectorManifest {
    /// Detector name, reported with every detection (default: the folder name).
    pub name: String,
    /// How the model is split into ONNX graphs (default `split_pillar`).
    pub family: Family,
    /// Which decoder turns the head outputs into boxes (default `anchor`).
    pub decoder: DecoderKind,
    /// The frame of the points it was trained on (default `sensor`); `boxlayer run` gives a
    /// `normalized` detector gravity-aligned points and brings its boxes back.
    pub input_frame: DetectorFrame,
    /// Height of the ground in the frame the model was trained in (m): KITTI's Velodyne frame
    /// −1.73, Waymo's vehicle frame 0 (default none: points go in as the frame gives them). When
    /// set, the pipeline moves each sweep vertically so that the platform profile's ground lies
    /// there, and the boxes back (`Detector::detect_timed_on_ground`).
    pub ground_z_m: Option<f64>,
    /// The ONNX files and their tensor names.
    pub models: Models,
    /// Per-point input features and their normalisation.
    pub points: PointsConfig,
    /// Grid, limits and feature layout of the pillar encoder input.
    pub pillars: PillarsConfig,
    /// The BEV canvas the encoder output is scattered onto (split pillar models).
    pub scatter: ScatterConfig,
    /// Head output layout and decoder parameters.
    pub head: HeadConfig,
    /// The detector's own labels mapped onto boxlayer's classes (labels not listed map to `unknown`).
    pub classes: BTreeMap<String, ObjectClass>,
    /// Score threshold, NMS and top-k.
    pub postprocess: PostprocessConfig,
    /// Execution provider, threads and sessions.
    pub runtime: RuntimeConfig,
}

impl Default for DetectorManifest {
    fn default() -> Self {
        Self {
            name: String::new(),
            family: Family::SplitPillar,
            decoder: DecoderKind::Anchor,
            input_frame: DetectorFrame::Sensor,
            ground_z_m: None,
            models: Models::default(),
            points: PointsConfig::default(),
            pillars: PillarsConfig::default(),
            scatter: ScatterConfig::default(),
            head: HeadConfig::default(),
            classes: BTreeMap::new(),
            postprocess: PostprocessConfig::default(),
            runtime: RuntimeConfig::default(),
        }
    }
}

/// How a detector is split into ONNX graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Pillar encoder (PFN/VFE) graph → scatter to the BEV canvas in Rust → backbone/head graph.
    SplitPillar,
    /// One graph: pillars (features + coordinates) in, head maps out.
    SingleGraph,
}

/// Which decoder turns head outputs into boxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecoderKind {
    /// OpenPCDet-style anchor head: `cls`, `box`, `dir_cls` maps, residual box coder.
    Anchor,
    /// CenterPoint head: heatmap, reg, height, dim, rot (sin, cos) and optional velocity maps.
    CenterHeatmap,
}

/// The ONNX files of a detector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Models {
    /// Pillar encoder (split pillar family only).
    pub encoder: Option<EncoderModel>,
    /// Backbone + head taking the BEV canvas (split pillar family only).
    pub head: Option<HeadModel>,
    /// The whole detector in one graph (single graph family only).
    pub graph: Option<GraphModel>,
    /// Whether model files may resolve outside the detector folder (`../x.onnx`, an absolute
    /// path, a symlink leading out); default false: such a file is refused before it is opened
    /// or hashed, so a manifest cannot make boxlayer read `../../etc/passwd` or run an outside model.
    pub allow_outside_folder: bool,
}

/// One ONNX file and its expected sha256.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelFile {
    /// Path relative to the detector folder (default empty: required).
    pub file: PathBuf,
    /// Lower-case hex sha256 of the file, checked at load (default empty: required).
    pub sha256: String,
}

/// The pillar encoder graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncoderModel {
    /// The ONNX file.
    #[serde(flatten)]
    pub model: ModelFile,
    /// Name of the pillar feature input (default `input.1`, the PyTorch exporter's first input).
    pub input: String,
    /// Name of the per-pillar feature output (default empty: the model's only output).
    pub output: String,
}

impl Default for EncoderModel {
    fn default() -> Self {
        Self {
            model: ModelFile::default(),
            input: "input.1".into(),
            output: String::new(),
        }
    }
}

/// The backbone + head graph of a split model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeadModel {
    /// The ONNX file.
    #[serde(flatten)]
    pub model: ModelFile,
    /// Name of the BEV canvas input (default empty: the model's only input).
    pub input: String,
}

/// A single-graph detector: pillars in, head maps out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphModel {
    /// The ONNX file.
    #[serde(flatten)]
    pub model: ModelFile,
    /// Name of the pillar feature input (default empty: required).
    pub pillars: String,
    /// Name of the pillar coordinate input, `[P, 4]` = (batch, z, y, x), int32 or int64 (default empty: required).
    pub coords: String,
    /// Name of the points-per-pillar input `[P]`, int32 or int64, if the graph has one (default none).
    pub num_points: Option<String>,
}

/// One per-point input feature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointFeature {
    /// Where the value comes from: `x`, `y`, `z`, `intensity`, `zero`, or the name of an f32
    /// channel of the point cloud (e.g. `time_lag`) (default `zero`).
    pub source: String,
    /// Multiplier applied first (default 1).
    pub scale: f32,
    /// Added after scaling (default 0).
    pub offset: f32,
    /// Apply `tanh` last, as OpenPCDet's Waymo pipeline does to intensity (default false).
    pub tanh: bool,
}

impl Default for PointFeature {
    fn default() -> Self {
        Self {
            source: "zero".into(),
            scale: 1.0,
            offset: 0.0,
            tanh: false,
        }
    }
}

impl PointFeature {
    /// A feature taken unchanged from `source`.
    pub fn raw(source: &str) -> Self {
        Self {
            source: source.into(),
            ..Self::default()
        }
    }
}

/// Per-point input features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointsConfig {
    /// The point features in model order (default x, y, z, intensity unchanged).
    pub features: Vec<PointFeature>,
}

impl Default for PointsConfig {
    fn default() -> Self {
        Self {
            features: ["x", "y", "z", "intensity"]
                .iter()
                .map(|s| PointFeature::raw(s))
                .collect(),
        }
    }
}

/// Memory layout of the pillar encoder's input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncoderLayout {
    /// `[N, P, C]`: pillars, points per pillar, channels (OpenPCDet, CenterPoint `pfe.onnx`).
    PointMajor,
    /// `[1, C, N, P]`: channels first (Conv-based `pfe_sim.onnx` exports).
    ChannelMajor,
}

/// One channel of the pillar encoder input, computed per point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PillarChannel {
    /// The k-th entry of `points.features` (normalised).
    Feature(usize),
    /// x minus the mean x of the pillar's points.
    XCluster,
    /// y minus the mean y of the pillar's points.
    YCluster,
    /// z minus the mean z of the pillar's points.
    ZCluster,
    /// x minus the pillar's geometric centre x.
    XCenter,
    /// y minus the pillar's geometric centre y.
    YCenter,
    /// z minus the pillar's geometric centre z.
    ZCenter,
    /// Always 0 (a channel the model ignores).
    Zero,
}

/// The documented orders of the per-point pillar features (`F…` = the point features in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PillarFeatureOrder {
    /// `[F…, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c, z−z_c]`: OpenPCDet `PillarVFE`, CUDA-PointPillars,
    /// mmdet3d `PillarFeatureNet` with `legacy=False` (10 channels with x, y, z, i).
    Openpcdet,
    /// `[x−x_c, y−y_c, z−z_c, F3…, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c, z−z_c]`: mmdet3d
    /// `PillarFeatureNet` with `legacy=True`, whose in-place centre subtraction overwrites x, y, z.
    Mmdet3dLegacy,
    /// `[F…, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c]`: det3d / CenterPoint-pillar (10 channels with
    /// x, y, z, i, Δt; 9 with Autoware's x, y, z, Δt).
    Centerpoint,
    /// `[x−x_c, y−y_c, F2…, x−x̄, y−ȳ, z−z̄, x−x_c, y−y_c]`: zhulf0804 PointPillars and its pgf
    /// split export (9 channels with x, y, z, i): channels 0/1 are pillar-centre offsets.
    PointpillarsCenterOffset,
    /// `[F…]`: the point features only (end-to-end graphs that decorate points themselves).
    Raw,
    /// Any other order, channel by channel.
    Custom(Vec<PillarChannel>),
}

impl PillarFeatureOrder {
    /// The channels of this order for `feature_count` point features.
    pub fn channels(&self, feature_count: usize) -> Vec<PillarChannel> {
        use PillarChannel::*;
        let features = |from: usize| (from..feature_count).map(Feature);
        match self {
            Self::Openpcdet => features(0)
                .chain([XCluster, YCluster, ZCluster, XCenter, YCenter, ZCenter])
                .collect(),
            Self::Mmdet3dLegacy => [XCenter, YCenter, ZCenter]
                .into_iter()
                .take(feature_count)
                .chain(features(3))
                .chain([XCluster, YCluster, ZCluster, XCenter, YCenter, ZCenter])
                .collect(),
            Self::Centerpoint => features(0)
                .chain([XCluster, YCluster, ZCluster, XCenter, YCenter])
                .collect(),
            Self::PointpillarsCenterOffset => [XCenter, YCenter]
                .into_iter()
                .take(feature_count)
                .chain(features(2))
                .chain([XCluster, YCluster, ZCluster, XCenter, YCenter])
                .collect(),
            Self::Raw => features(0).collect(),
            Self::Custom(channels) => channels.clone(),
        }
    }
}

/// Pillar grid, limits and encoder input layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PillarsConfig {
    /// `[x_min, y_min, z_min, x_max, y_max, z_max]` in the sensor frame (m); points outside are
    /// dropped (default the OpenPCDet KITTI range `[0, -39.68, -3, 69.12, 39.68, 1]`).
    pub point_cloud_range: [f64; 6],
    /// Pillar size `[x, y, z]` (m); z must span the whole range (default `[0.16, 0.16, 4]`).
    pub pillar_size: [f64; 3],
    /// Points kept per pillar, first come first kept (default 32).
    pub max_points_per_pillar: usize,
    /// Pillars kept per sweep, first come first kept (default 12000).
    pub max_pillars: usize,
    /// Encoder input layout (default `point_major`).
    pub layout: EncoderLayout,
    /// Per-point channel order of the encoder input (default `openpcdet`).
    pub feature_order: PillarFeatureOrder,
    /// Pillars per encoder run when a point-major encoder's pillar axis is dynamic: a sweep's
    /// pillars go through in runs of exactly this many rows (the last zero-padded), so ONNX
    /// Runtime sees one shape and its memory stays flat; 0 runs them all at once (default 4096).
    pub encoder_batch: usize,
}

impl Default for PillarsConfig {
    fn default() -> Self {
        Self {
            point_cloud_range: [0.0, -39.68, -3.0, 69.12, 39.68, 1.0],
            pillar_size: [0.16, 0.16, 4.0],
            max_points_per_pillar: 32,
            max_pillars: 12000,
            layout: EncoderLayout::PointMajor,
            feature_order: PillarFeatureOrder::Openpcdet,
            encoder_batch: 4096,
        }
    }
}

/// Memory layout of a 4-D map (BEV canvas or head output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MapLayout {
    /// `[1, C, H, W]`.
    Nchw,
    /// `[1, H, W, C]`.
    Nhwc,
}

/// The BEV canvas the encoder output is scattered onto.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScatterConfig {
    /// Feature channels per pillar = encoder output width (default 64).
    pub channels: usize,
    /// Canvas layout expected by the head graph (default `nchw`).
    pub layout: MapLayout,
}

impl Default for ScatterConfig {
    fn default() -> Self {
        Self {
            channels: 64,
            layout: MapLayout::Nchw,
        }
    }
}

/// How the head's classification outputs become scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreActivation {
    /// The outputs are logits: score = sigmoid(value).
    Sigmoid,
    /// The outputs are already probabilities.
    None,
}

/// Head output layout and decoder parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeadConfig {
    /// Layout of every head output map (default `nchw`).
    pub layout: MapLayout,
    /// Activation applied to class maps (default `sigmoid`).
    pub score_activation: ScoreActivation,
    /// Anchor-head parameters (`decoder = "anchor"`).
    pub anchor: AnchorHeadConfig,
    /// CenterPoint-head parameters (`decoder = "center_heatmap"`).
    pub center: CenterHeadConfig,
}

impl Default for HeadConfig {
    fn default() -> Self {
        Self {
            layout: MapLayout::Nchw,
            score_activation: ScoreActivation::Sigmoid,
            anchor: AnchorHeadConfig::default(),
            center: CenterHeadConfig::default(),
        }
    }
}

/// The anchors of one class (OpenPCDet `ANCHOR_GENERATOR_CONFIG` entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnchorClass {
    /// The detector's label for this class (a key of `classes`) (default empty: required).
    pub label: String,
    /// Anchor sizes `[l, w, h]` (m) (default `[[3.9, 1.6, 1.56]]`, KITTI car).
    pub sizes: Vec<[f64; 3]>,
    /// Anchor yaw angles (rad) (default `[0, π/2]`).
    pub rotations: Vec<f64>,
    /// Anchor bottom height (m); the anchor centre is `bottom_height + h/2` (default −1.78).
    pub bottom_height: f64,
}

impl Default for AnchorClass {
    fn default() -> Self {
        Self {
            label: String::new(),
            sizes: vec![[3.9, 1.6, 1.56]],
            rotations: vec![0.0, std::f64::consts::FRAC_PI_2],
            bottom_height: -1.78,
        }
    }
}

/// OpenPCDet-style anchor head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnchorHeadConfig {
    /// Name of the class-score output (default `cls_preds`).
    pub cls: String,
    /// Name of the box-residual output (default `box_preds`).
    pub r#box: String,
    /// Name of the direction-classifier output; empty for heads without one (default `dir_cls_preds`).
    pub dir_cls: String,
    /// The head's class labels in output channel order (default empty: required).
    pub labels: Vec<String>,
    /// Anchors per class, in the same order as `labels` (default empty: required).
    pub anchors: Vec<AnchorClass>,
    /// Pillar-grid cells per head-map cell (default 2).
    pub feature_stride: usize,
    /// Anchors at cell centres (true) or spread from range min to range max (false, OpenPCDet's default).
    pub align_center: bool,
    /// Values per box in `box` (7, or more for heads with extra codes; the first 7 are decoded) (default 7).
    pub box_code_size: usize,
    /// Direction bins (default 2).
    pub num_dir_bins: usize,
    /// OpenPCDet `DIR_OFFSET` (rad) (default 0.78539).
    pub dir_offset: f64,
    /// OpenPCDet `DIR_LIMIT_OFFSET` (default 0).
    pub dir_limit_offset: f64,
    /// Direction bins counted the other way (zhulf0804: θ = limit_period(θ, 1, π) + (1 − bin)·π) (default false).
    pub dir_reversed: bool,
    /// Upper clamp of the size exponents `dl, dw, dh` before `exp` (pgf clamps at 5; default none).
    pub size_exp_clamp: Option<f64>,
}

impl Default for AnchorHeadConfig {
    // 0.78539 is OpenPCDet's configured `DIR_OFFSET`, kept verbatim rather than π/4.
    #[allow(clippy::approx_constant)]
    fn default() -> Self {
        Self {
            cls: "cls_preds".into(),
            r#box: "box_preds".into(),
            dir_cls: "dir_cls_preds".into(),
            labels: Vec::new(),
            anchors: Vec::new(),
            feature_stride: 2,
            align_center: false,
            box_code_size: 7,
            num_dir_bins: 2,
            dir_offset: 0.78539,
            dir_limit_offset: 0.0,
            dir_reversed: false,
            size_exp_clamp: None,
        }
    }
}

/// One task of a CenterPoint head: its classes and output tensor names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CenterTask {
    /// Class labels of this task's heatmap channels, in order (default empty: required).
    pub labels: Vec<String>,
    /// Heatmap output `[1, n_labels, H, W]` (default empty: required).
    pub heatmap: String,
    /// Sub-cell centre offset output, 2 channels (default empty: required).
    pub reg: String,
    /// Centre height output, 1 channel (default empty: required).
    pub height: String,
    /// Size output `l, w, h`, 3 channels (default empty: required).
    pub dim: String,
    /// Rotation output `sin, cos`, 2 channels (default empty: required).
    pub rot: String,
    /// Velocity output `vx, vy`, 2 channels, if the head has one (default none).
    pub vel: Option<String>,
}

/// CenterPoint head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CenterHeadConfig {
    /// Pillar-grid cells per head-map cell, CenterPoint `OUT_SIZE_FACTOR` (default 4).
    pub out_size_factor: usize,
    /// The `dim` output is log-size: size = exp(dim) (default true).
    pub dim_log: bool,
    /// Peak extraction window (cells, odd); 1 disables the max-pool peak test (default 3).
    pub peak_kernel: usize,
    /// The head's tasks (default empty: required).
    pub tasks: Vec<CenterTask>,
}

impl Default for CenterHeadConfig {
    fn default() -> Self {
        Self {
            out_size_factor: 4,
            dim_log: true,
            peak_kernel: 3,
            tasks: Vec::new(),
        }
    }
}

/// Non-maximum suppression kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NmsKind {
    /// Rotated BEV IoU NMS; `nms_threshold` is the IoU above which a lower-scored box is dropped.
    RotatedIou,
    /// Centre-distance NMS; `nms_threshold` is the radius (m).
    Circle,
    /// No suppression.
    None,
}

/// Score threshold, NMS and top-k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostprocessConfig {
    /// Boxes scoring below this are dropped before NMS (default 0.1).
    pub score_threshold: f32,
    /// NMS kind (default `rotated_iou`).
    pub nms: NmsKind,
    /// IoU threshold (`rotated_iou`) or radius in m (`circle`) (default 0.01, OpenPCDet KITTI).
    pub nms_threshold: f64,
    /// Run NMS separately per class instead of over all boxes (default false).
    pub nms_per_class: bool,
    /// Highest-scoring boxes kept before NMS (default 1000).
    pub pre_nms_top_k: usize,
    /// Highest-scoring boxes kept after NMS (default 100).
    pub post_nms_top_k: usize,
}

impl Default for PostprocessConfig {
    fn default() -> Self {
        Self {
            score_threshold: 0.1,
            nms: NmsKind::RotatedIou,
            nms_threshold: 0.01,
            nms_per_class: false,
            pre_nms_top_k: 1000,
            post_nms_top_k: 100,
        }
    }
}

/// Where ONNX Runtime runs the graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionProvider {
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// NVIDIA CUDA (needs a GPU build of `libonnxruntime.so`); loading fails if it cannot register.
    Cuda,
}

/// Most intra-op threads a session may ask for: far above any machine's cores, far below what
/// makes ONNX Runtime's pool creation hang.
pub const MAX_THREADS: usize = 1024;

/// Most sessions per graph (each holds its own copy of the model's working memory).
pub const MAX_SESSIONS: usize = 256;

/// Execution provider, threads and sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Execution provider (default `cpu`).
    pub execution_provider: ExecutionProvider,
    /// CUDA device index (default 0).
    pub device_id: i32,
    /// Intra-op threads per session; 0 = ONNX Runtime's default (default 0).
    pub threads: usize,
    /// Sessions per graph, i.e. frames that can run at once (default 1).
    pub sessions: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            execution_provider: ExecutionProvider::Cpu,
            device_id: 0,
            threads: 0,
            sessions: 1,
        }
    }
}

/// The name a model folder gives a manifest without one: the folder's own name (after resolving
/// `.` and links), or the path as given when it has none.
pub fn folder_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}

impl DetectorManifest {
    /// Reads `dir/detector.toml`; the name defaults to the folder name. Checks only the syntax
    /// and the manifest's own consistency ([`DetectorManifest::validate`]), not the models.
    pub fn load(dir: &Path) -> Result<Self, DetectError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| DetectError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let mut manifest: DetectorManifest = toml::from_str(&text).map_err(|e| DetectError::Manifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if manifest.name.is_empty() {
            manifest.name = folder_name(dir);
        }
        manifest.validate()?;
        Ok(manifest)
    }

    /// The pillar grid size `(nx, ny)` in cells.
    pub fn grid_size(&self) -> (usize, usize) {
        let r = &self.pillars.point_cloud_range;
        let s = &self.pillars.pillar_size;
        (
            ((r[3] - r[0]) / s[0]).round().max(0.0) as usize,
            ((r[4] - r[1]) / s[1]).round().max(0.0) as usize,
        )
    }

    /// The encoder input channels, in order.
    pub fn pillar_channels(&self) -> Vec<PillarChannel> {
        self.pillars.feature_order.channels(self.points.features.len())
    }

    /// The class a detector label maps to (`unknown` when the label is not in `classes`).
    pub fn class_of(&self, label: &str) -> ObjectClass {
        self.classes.get(label).copied().unwrap_or(ObjectClass::Unknown)
    }

    /// Checks the manifest's own consistency (grid divisible, required names present, …).
    pub fn validate(&self) -> Result<(), DetectError> {
        let invalid = |field: &str, reason: String| DetectError::Invalid {
            detector: self.name.clone(),
            field: field.to_string(),
            reason,
        };
        if let Some(g) = self.ground_z_m
            && !g.is_finite()
        {
            return Err(invalid("ground_z_m", format!("must be finite, got {g}")));
        }
        let p = &self.pillars;
        let r = &p.point_cloud_range;
        let s = &p.pillar_size;
        if s.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(invalid("pillars.pillar_size", format!("must be positive, got {s:?}")));
        }
        for axis in 0..3 {
            if !r[axis].is_finite() || !r[axis + 3].is_finite() || r[axis + 3] <= r[axis] {
                return Err(invalid(
                    "pillars.point_cloud_range",
                    format!("max must exceed min on every axis, got {r:?}"),
                ));
            }
            let cells = (r[axis + 3] - r[axis]) / s[axis];
            if (cells - cells.round()).abs() > 1e-3 {
                return Err(invalid(
                    "pillars.pillar_size",
                    format!("range {r:?} is not a whole number of pillars of {s:?}"),
                ));
            }
        }
        if ((r[5] - r[2]) / s[2] - 1.0).abs() > 1e-3 {
            return Err(invalid(
                "pillars.pillar_size",
                format!(
                    "a pillar must span the whole z range {} .. {}, got height {}",
                    r[2], r[5], s[2]
                ),
            ));
        }
        if p.max_points_per_pillar == 0 || p.max_pillars == 0 {
            return Err(invalid(
                "pillars",
                "max_points_per_pillar and max_pillars must be positive".into(),
            ));
        }
        let n_features = self.points.features.len();
        for ch in self.pillar_channels() {
            if let PillarChannel::Feature(k) = ch
                && k >= n_features
            {
                return Err(invalid(
                    "pillars.feature_order",
                    format!("channel `feature {k}` but points.features has {n_features} entries"),
                ));
            }
        }
        if self.pillar_channels().is_empty() {
            return Err(invalid("pillars.feature_order", "no channels".into()));
        }
        match self.family {
            Family::SplitPillar => {
                if self.models.encoder.is_none() || self.models.head.is_none() {
                    return Err(invalid(
                        "models",
                        "family `split_pillar` needs [models.encoder] and [models.head]".into(),
                    ));
                }
                if self.models.graph.is_some() {
                    return Err(invalid("models.graph", "only for family `single_graph`".into()));
                }
                if self.scatter.channels == 0 {
                    return Err(invalid("scatter.channels", "must be positive".into()));
                }
            }
            Family::SingleGraph => {
                let Some(graph) = &self.models.graph else {
                    return Err(invalid("models", "family `single_graph` needs [models.graph]".into()));
                };
                if self.models.encoder.is_some() || self.models.head.is_some() {
                    return Err(invalid(
                        "models",
                        "family `single_graph` takes only [models.graph]".into(),
                    ));
                }
                if graph.pillars.is_empty() || graph.coords.is_empty() {
                    return Err(invalid(
                        "models.graph",
                        "`pillars` and `coords` input names are required".into(),
                    ));
                }
            }
        }
        for (key, model) in self.model_files() {
            if model.file.as_os_str().is_empty() {
                return Err(invalid(&format!("models.{key}.file"), "missing".into()));
            }
            if model.sha256.len() != 64 || !model.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(invalid(
                    &format!("models.{key}.sha256"),
                    format!("expected 64 hex digits, got `{}`", model.sha256),
                ));
            }
        }
        let (nx, ny) = self.grid_size();
        let pp = &self.postprocess;
        if !(pp.nms_threshold.is_finite() && pp.nms_threshold >= 0.0) {
            return Err(invalid("postprocess.nms_threshold", "must be finite and ≥ 0".into()));
        }
        if pp.pre_nms_top_k == 0 || pp.post_nms_top_k == 0 {
            return Err(invalid("postprocess", "top-k values must be positive".into()));
        }
        if self.runtime.sessions == 0 || self.runtime.sessions > MAX_SESSIONS {
            return Err(invalid(
                "runtime.sessions",
                format!("must be between 1 and {MAX_SESSIONS}, got {}", self.runtime.sessions),
            ));
        }
        // Issue 18: `threads = 100000` hung inside ONNX Runtime while it spawned its pool.
        if self.runtime.threads > MAX_THREADS {
            return Err(invalid(
                "runtime.threads",
                format!(
                    "must be at most {MAX_THREADS} (0 = ONNX Runtime's default), got {}",
                    self.runtime.threads
                ),
            ));
        }
        match self.decoder {
            DecoderKind::Anchor => {
                let a = &self.head.anchor;
                if a.feature_stride == 0 || nx % a.feature_stride != 0 || ny % a.feature_stride != 0 {
                    return Err(invalid(
                        "head.anchor.feature_stride",
                        format!("grid {nx}×{ny} is not divisible by {}", a.feature_stride),
                    ));
                }
                if a.labels.is_empty() || a.anchors.len() != a.labels.len() {
                    return Err(invalid(
                        "head.anchor.anchors",
                        format!(
                            "one anchor entry per label: {} labels, {} entries",
                            a.labels.len(),
                            a.anchors.len()
                        ),
                    ));
                }
                for (label, anchors) in a.labels.iter().zip(&a.anchors) {
                    if &anchors.label != label {
                        return Err(invalid(
                            "head.anchor.anchors",
                            format!("entry for `{}` where label `{label}` was expected", anchors.label),
                        ));
                    }
                    if anchors.sizes.is_empty() || anchors.rotations.is_empty() {
                        return Err(invalid(
                            "head.anchor.anchors",
                            format!("`{label}` needs at least one size and one rotation"),
                        ));
                    }
                }
                if a.box_code_size < 7 {
                    return Err(invalid("head.anchor.box_code_size", "at least 7".into()));
                }
                if a.cls.is_empty() || a.r#box.is_empty() {
                    return Err(invalid(
                        "head.anchor",
                        "`cls` and `box` output names are required".into(),
                    ));
                }
                if !a.dir_cls.is_empty() && a.num_dir_bins == 0 {
                    return Err(invalid("head.anchor.num_dir_bins", "must be positive".into()));
                }
            }
            DecoderKind::CenterHeatmap => {
                let c = &self.head.center;
                if c.out_size_factor == 0 || nx % c.out_size_factor != 0 || ny % c.out_size_factor != 0 {
                    return Err(invalid(
                        "head.center.out_size_factor",
                        format!("grid {nx}×{ny} is not divisible by {}", c.out_size_factor),
                    ));
                }
                if c.peak_kernel == 0 || c.peak_kernel.is_multiple_of(2) {
                    return Err(invalid("head.center.peak_kernel", "must be odd".into()));
                }
                if c.tasks.is_empty() {
                    return Err(invalid("head.center.tasks", "at least one task".into()));
                }
                for (i, t) in c.tasks.iter().enumerate() {
                    if t.labels.is_empty()
                        || [&t.heatmap, &t.reg, &t.height, &t.dim, &t.rot]
                            .iter()
                            .any(|s| s.is_empty())
                    {
                        return Err(invalid(
                            &format!("head.center.tasks[{i}]"),
                            "labels, heatmap, reg, height, dim and rot are required".into(),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The model files with their manifest keys (`encoder`, `head`, `graph`).
    pub fn model_files(&self) -> Vec<(&'static str, &ModelFile)> {
        let mut files = Vec::new();
        if let Some(m) = &self.models.encoder {
            files.push(("encoder", &m.model));
        }
        if let Some(m) = &self.models.head {
            files.push(("head", &m.model));
        }
        if let Some(m) = &self.models.graph {
            files.push(("graph", &m.model));
        }
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PillarChannel::*;

    #[test]
    fn documented_orders_have_documented_channels() {
        assert_eq!(
            PillarFeatureOrder::Openpcdet.channels(4),
            vec![
                Feature(0),
                Feature(1),
                Feature(2),
                Feature(3),
                XCluster,
                YCluster,
                ZCluster,
                XCenter,
                YCenter,
                ZCenter
            ]
        );
        assert_eq!(PillarFeatureOrder::Centerpoint.channels(5).len(), 10);
        assert_eq!(PillarFeatureOrder::Centerpoint.channels(4).len(), 9);
        assert_eq!(
            PillarFeatureOrder::PointpillarsCenterOffset.channels(4),
            vec![
                XCenter,
                YCenter,
                Feature(2),
                Feature(3),
                XCluster,
                YCluster,
                ZCluster,
                XCenter,
                YCenter
            ]
        );
        assert_eq!(
            PillarFeatureOrder::Mmdet3dLegacy.channels(4)[..4],
            [XCenter, YCenter, ZCenter, Feature(3)]
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = toml::from_str::<DetectorManifest>("nmae = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err = toml::from_str::<DetectorManifest>("[postprocess]\nscore = 0.3").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn custom_order_parses_from_toml() {
        let m: DetectorManifest =
            toml::from_str("[pillars]\nfeature_order = { custom = [{ feature = 0 }, \"x_cluster\", \"zero\"] }\n")
                .unwrap();
        assert_eq!(m.pillar_channels(), vec![Feature(0), XCluster, Zero]);
    }

    #[test]
    fn grid_size_follows_range_and_pillar_size() {
        let m = DetectorManifest::default();
        assert_eq!(m.grid_size(), (432, 496));
    }
}
