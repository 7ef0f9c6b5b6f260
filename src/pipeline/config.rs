//! The pipeline configuration (`pipelines/*.toml`): where the sequences are, what the box layer
//! comes from, the detectors, each stage's own config (`fuse::FusionConfig`,
//! `track::TrackingProfiles`), the review flags and the outputs. A file may name a base with
//! `extends = "base.toml"`: its tables are laid over the base's, key by key, the one overlay
//! mechanism of boxlayer's configs. Everything is validated at load, before any work, and errors
//! name the file and the key.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::detect::MANIFEST_FILE;
use crate::frame::Platform;
use crate::fuse::{Fuser, FusionConfig};
use crate::normalize::{LoadedProfile, Profile, ProfileError};
use crate::sources::{OnCorrupt, SourceKind, SourceOptions};
use crate::track::TrackingProfiles;

/// Errors loading a pipeline configuration; each names the file and the key.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}")]
    Io {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML does not parse or does not fit the schema (unknown key, wrong type).
    #[error("{path}: {reason}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's message (it names the key and line).
        reason: String,
    },
    /// A value is out of range or names something that does not exist.
    #[error("{path}: key `{key}`: {reason}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// The dotted key (`detectors[1].path`, `outputs.compression_level`).
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// `extends` chains loop or go deeper than [`MAX_EXTENDS_DEPTH`].
    #[error("{path}: `extends` chain too deep or circular (more than {MAX_EXTENDS_DEPTH} files)")]
    ExtendsDepth {
        /// The config file.
        path: PathBuf,
    },
}

/// Longest `extends` chain followed.
pub const MAX_EXTENDS_DEPTH: usize = 8;

/// Where a sequence's box layer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerOrigin {
    /// Detectors → fusion → tracking (3EED's drone and quadruped layers).
    #[default]
    Detect,
    /// The source's own labels with their ids (3EED takes Waymo's official labels as the vehicle
    /// layer); they go through the remaining stages, not through detection or tracking.
    Labels,
}

/// Which frames' points go into `points/part-*.parquet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointsKept {
    /// Every frame's points.
    #[default]
    All,
    /// Every `points_every`-th frame's points (frame index divisible by it).
    EveryKth,
    /// No points.
    None,
    /// Every frame's points that fall in at least one camera's image (all points when a frame
    /// has no camera).
    CameraFov,
}

/// The source table: how logs are opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// Sequence list (`data-manifests/*.csv`), relative to the config file; sequences' paths in it
    /// are relative to `--data-root`. Default: none (`boxlayer run --input PATH` names one log).
    pub data_manifest: Option<PathBuf>,
    /// Only the data manifest's rows of this platform; default none (every row).
    pub platform: Option<crate::frame::Platform>,
    /// Reader for logs given without a manifest row; default none (each reader tried in turn).
    pub kind: Option<SourceKind>,
    /// A damaged record or sweep: `skip` it (reported in the manifest's per-frame errors) or
    /// `fail` the sequence (no `_SUCCESS`); default `skip`. Applies to every reader.
    pub on_corrupt: OnCorrupt,
    /// Reader options (`[source.options.waymo]`, `.m3ed`, `.kitti`, `.pcd`, `.npy`, `.mcap`).
    pub options: SourceOptions,
}

impl Default for SourceConfig {
    fn default() -> Self {
        Self {
            data_manifest: None,
            platform: None,
            kind: None,
            on_corrupt: OnCorrupt::Skip,
            options: SourceOptions::default(),
        }
    }
}

impl SourceConfig {
    /// The reader options with `on_corrupt` applied to every reader.
    pub fn reader_options(&self) -> SourceOptions {
        let mut options = self.options.clone();
        options.waymo.on_corrupt = self.on_corrupt;
        options.m3ed.on_corrupt = self.on_corrupt;
        options.mcap.on_corrupt = self.on_corrupt;
        options
    }
}

/// One detector of the ensemble.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorEntry {
    /// The detector folder (holding `detector.toml`), relative to the config file.
    pub path: PathBuf,
    /// Fusion weight of its boxes (unitless, > 0); default 1. Sets the fusion config's
    /// `detector_weights` entry of every class that does not name this detector itself.
    #[serde(default = "one")]
    pub weight: f64,
    /// The platforms whose sequences it runs on; default empty: every platform.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<crate::frame::Platform>,
}

impl DetectorEntry {
    /// Whether it runs on `platform`'s sequences.
    pub fn runs_on(&self, platform: crate::frame::Platform) -> bool {
        self.platforms.is_empty() || self.platforms.contains(&platform)
    }
}

fn one() -> f64 {
    1.0
}

/// Which stages run (a stage that is off leaves its columns null).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StagesConfig {
    /// Offline tracking of the fused boxes (detect origin only); default true. Off: each fused
    /// box is a one-frame track.
    pub track: bool,
    /// Gravity alignment and altitude offset (`normalize`, with `[normalize]`'s profile);
    /// default true. Off: the normalized columns stay null.
    pub normalize: bool,
    /// RGB class check with `[camera]`'s classifier; default false. The projection of every box
    /// into every camera and its occlusion are computed regardless.
    pub camera_check: bool,
    /// Every consolidated box set on the ground around it (`[ground_contact]`, detect origin,
    /// frames with a normalized frame); default true.
    pub ground_contact: bool,
}

impl Default for StagesConfig {
    fn default() -> Self {
        Self {
            track: true,
            normalize: true,
            camera_check: false,
            ground_contact: true,
        }
    }
}

/// Which platform profile normalizes a sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizeConfig {
    /// `auto` (by the log: Waymo → `waymo_vehicle`, KITTI → `kitti_vehicle`, PCD → `pcd_vehicle`,
    /// `.npy` → `npy_vehicle`, MCAP → `ros2_mcap_robot`, M3ED drone →
    /// `m3ed_drone`, quadruped → `m3ed_quadruped`), a shipped profile's name, or a profile TOML
    /// (relative to the config file).
    pub profile: String,
}

impl Default for NormalizeConfig {
    fn default() -> Self {
        Self { profile: "auto".into() }
    }
}

/// When a box is flagged for a human look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewConfig {
    /// `few_points`: fewer LiDAR points inside than this; default 5.
    pub min_points: u32,
    /// `short_track`: the box's track has fewer boxes than this; default 5.
    pub min_track_boxes: u32,
    /// `low_score`: score below this; default 0.3.
    pub min_score: f64,
    /// `size_outlier`: a size more than this factor off the class's typical size (either way); default 2.
    pub size_factor: f64,
    /// `occluded`: the best view's occlusion is at least this (0–1); default 0.7.
    pub max_occlusion: f64,
    /// The flags that put a box in the review queue (`review_status` `flagged`, `review.parquet`);
    /// default all of [`REVIEW_FLAGS`]. A box keeps every flag it has in `flags` either way.
    pub queue: Vec<String>,
}

/// Every review flag, in the order a box row lists them.
pub const REVIEW_FLAGS: [&str; 7] = [
    "few_points",
    "short_track",
    "low_score",
    "size_outlier",
    "out_of_view",
    "occluded",
    "class_conflict",
];

impl ReviewConfig {
    /// Whether a box with `flags` goes to the review queue.
    pub fn queues(&self, flags: &[String]) -> bool {
        flags.iter().any(|f| self.queue.contains(f))
    }
}

impl Default for ReviewConfig {
    fn default() -> Self {
        Self {
            min_points: 5,
            min_track_boxes: 5,
            min_score: 0.3,
            size_factor: 2.0,
            max_occlusion: 0.7,
            queue: REVIEW_FLAGS.iter().map(|f| f.to_string()).collect(),
        }
    }
}

/// The RGB class check (`stages.camera_check`): which image model, and which views it looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CameraConfig {
    /// The classifier folder (`classifiers/<name>/`, holding `classifier.toml`), relative to the
    /// config file; required when the check is on.
    pub classifier: String,
    /// Views of each track the classifier looks at: its boxes' best views with the largest visible
    /// area, in different frames; default 3.
    pub views_per_track: usize,
    /// Views more occluded than this are not looked at (0–1); default 0.5.
    pub max_view_occlusion: f64,
    /// Views with less of the box's projection inside the image are not looked at (0–1); default
    /// 0.8: a box cut by the image border shows the classifier only part of its object.
    pub min_view_in_image: f64,
    /// Views of boxes with fewer LiDAR points inside in their frame (or in a label's own count)
    /// are not looked at; default 1: a box the sweep has no return in may be out of range or
    /// hidden, its crop of something else.
    pub min_view_points: u32,
    /// `class_conflict` needs the track's RGB vote to score at least this (0–1); default 0.5.
    pub conflict_score: f64,
}

impl Default for CameraConfig {
    fn default() -> Self {
        Self {
            classifier: String::new(),
            views_per_track: 3,
            max_view_occlusion: 0.5,
            min_view_in_image: 0.8,
            min_view_points: 1,
            conflict_score: 0.5,
        }
    }
}

/// What is written and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// zstd level of every Parquet file (1–22); default 3.
    pub compression_level: i32,
    /// Rows per row group in the box, track, detection and frame files; default 65 536.
    /// (Points files have one row group per frame.)
    pub row_group_rows: usize,
    /// Which frames' points are kept; default `all`.
    pub points: PointsKept,
    /// `every_kth`'s k; default 10.
    pub points_every: usize,
    /// Frames per `points/part-NNNNN.parquet` file; default 50.
    pub frames_per_part: usize,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            compression_level: 3,
            row_group_rows: 65_536,
            points: PointsKept::All,
            points_every: 10,
            frames_per_part: 50,
        }
    }
}

/// Run-time resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Frames processed at once (rayon threads); 0 = one per core; default 0.
    pub threads: usize,
    /// Frames read and detected per batch before their rows are written (bounds memory); default 16.
    pub window_frames: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            threads: 0,
            window_frames: 16,
        }
    }
}

/// A whole pipeline configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// What the box layer comes from; default `detect`.
    pub origin: LayerOrigin,
    /// How logs are opened.
    pub source: SourceConfig,
    /// The detector ensemble (`detect` origin; at least one).
    pub detectors: Vec<DetectorEntry>,
    /// Which stages run.
    pub stages: StagesConfig,
    /// Box fusion (`fuse::FusionConfig`; the studied setting is `pipelines/base.toml`'s `[fusion]`).
    pub fusion: FusionConfig,
    /// Tracking per platform (`track::TrackingProfiles`).
    pub tracking: TrackingProfiles,
    /// Review flags.
    pub review: ReviewConfig,
    /// The RGB class check.
    pub camera: CameraConfig,
    /// Platform normalization (`stages.normalize`).
    pub normalize: NormalizeConfig,
    /// Boxes set on the ground (`stages.ground_contact`).
    pub ground_contact: crate::ground_contact::GroundContactConfig,
    /// Outputs.
    pub outputs: OutputConfig,
    /// Run-time resources.
    pub runtime: RuntimeConfig,
}

/// A configuration loaded from a file: the values, the folder its relative paths start from and
/// the fully resolved TOML text (after `extends`), which the shards' manifest records and hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The configuration, validated.
    pub config: PipelineConfig,
    /// The file it was loaded from.
    pub path: PathBuf,
    /// The resolved configuration as TOML (every default written out).
    pub resolved_toml: String,
}

fn read_table(path: &Path, depth: usize) -> Result<toml::Value, ConfigError> {
    if depth > MAX_EXTENDS_DEPTH {
        return Err(ConfigError::ExtendsDepth { path: path.into() });
    }
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.into(),
        source,
    })?;
    let mut value: toml::Value = toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let Some(table) = value.as_table_mut() else {
        return Ok(value);
    };
    let Some(extends) = table.remove("extends") else {
        return Ok(value);
    };
    let Some(base_name) = extends.as_str() else {
        return Err(ConfigError::Invalid {
            path: path.into(),
            key: "extends".into(),
            reason: "must be a file name (string)".into(),
        });
    };
    let base_path = path.parent().unwrap_or(Path::new(".")).join(base_name);
    let mut base = read_table(&base_path, depth + 1)?;
    // Paths in the base are relative to the base; rewrite them relative to this file's folder
    // when both live in different folders (they rarely do; pipelines/ holds them all).
    rebase_paths(
        &mut base,
        base_path.parent().unwrap_or(Path::new(".")),
        path.parent().unwrap_or(Path::new(".")),
    );
    crate::config_overlay::overlay(&mut base, value);
    Ok(base)
}

fn rebase_paths(base: &mut toml::Value, base_dir: &Path, dir: &Path) {
    if base_dir == dir {
        return;
    }
    let rebase = |v: &mut toml::Value| {
        if let Some(s) = v.as_str() {
            let p = Path::new(s);
            if p.is_relative() {
                *v = toml::Value::String(base_dir.join(p).to_string_lossy().into_owned());
            }
        }
    };
    if let Some(dets) = base.get_mut("detectors").and_then(|d| d.as_array_mut()) {
        for d in dets {
            if let Some(p) = d.get_mut("path") {
                rebase(p);
            }
        }
    }
    if let Some(m) = base.get_mut("source").and_then(|s| s.get_mut("data_manifest")) {
        rebase(m);
    }
    if let Some(c) = base.get_mut("camera").and_then(|s| s.get_mut("classifier")) {
        rebase(c);
    }
}

impl PipelineConfig {
    /// Loads `path` (following `extends`), deserialises and validates it.
    pub fn load(path: &Path) -> Result<LoadedConfig, ConfigError> {
        let value = read_table(path, 0)?;
        let mut config: PipelineConfig = value.try_into().map_err(|e: toml::de::Error| ConfigError::Parse {
            path: path.into(),
            reason: e.to_string(),
        })?;
        config.validate(path)?;
        config.apply_detector_weights(path);
        let resolved_toml = toml::to_string(&config).map_err(|e| ConfigError::Parse {
            path: path.into(),
            reason: format!("cannot write the resolved config back as TOML: {e}"),
        })?;
        Ok(LoadedConfig {
            config,
            path: path.into(),
            resolved_toml,
        })
    }

    /// Puts each detector's `weight` other than 1 into the fusion config's `detector_weights`, by
    /// the name its manifest gives, for every class that does not name that detector itself.
    fn apply_detector_weights(&mut self, path: &Path) {
        let dir = path.parent().unwrap_or(Path::new("."));
        for d in self.detectors.iter().filter(|d| d.weight != 1.0) {
            // An unreadable manifest is reported when the detectors load.
            let Ok(manifest) = crate::detect::DetectorManifest::load(&dir.join(&d.path)) else {
                continue;
            };
            let f = &mut self.fusion;
            for class in [&mut f.vehicle, &mut f.pedestrian, &mut f.cyclist, &mut f.unknown] {
                class.detector_weights.entry(manifest.name.clone()).or_insert(d.weight);
            }
        }
    }

    /// Loads `path` (following `extends`) for its stage settings alone (`[fusion]`, `[tracking]`,
    /// `[source]` options): unknown keys are still refused, but a config without detectors or
    /// data (`pipelines/base.toml`) is fine. `boxlayer fuse` and `boxlayer track` use it; the
    /// stages check their own tables when they start.
    pub fn load_settings(path: &Path) -> Result<PipelineConfig, ConfigError> {
        read_table(path, 0)?
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Parse {
                path: path.into(),
                reason: e.to_string(),
            })
    }

    /// The reader options for opening logs: `[source.options]` with `on_corrupt` applied, and the
    /// `[source]` table of the normalization profile laid over them when the run names one (not
    /// `auto`, which is chosen by the opened log).
    pub fn reader_options(&self, config_path: &Path) -> Result<SourceOptions, ConfigError> {
        let base = self.source.reader_options();
        if !self.stages.normalize || self.normalize.profile == "auto" {
            return Ok(base);
        }
        let loaded = self
            .resolve_profile(config_path, &self.normalize.profile)
            .map_err(|e| ConfigError::Invalid {
                path: config_path.into(),
                key: "normalize.profile".into(),
                reason: e.to_string(),
            })?;
        loaded
            .profile
            .reader_options(&base)
            .map_err(|reason| ConfigError::Invalid {
                path: PathBuf::from(&loaded.origin),
                key: "source".into(),
                reason,
            })
    }

    /// The profile a sequence is normalized with (`None` while `stages.normalize` is off): the
    /// configured one, or under `auto` the one for the log's reader and platform.
    pub fn normalization_profile(
        &self,
        config_path: &Path,
        platform: Platform,
        source_kind: &str,
    ) -> Result<Option<LoadedProfile>, ConfigError> {
        if !self.stages.normalize {
            return Ok(None);
        }
        let name = match self.normalize.profile.as_str() {
            "auto" if source_kind.starts_with("waymo") => "waymo_vehicle",
            "auto" if source_kind.starts_with("kitti") => "kitti_vehicle",
            "auto" if source_kind == "pcd" => "pcd_vehicle",
            "auto" if source_kind == "npy" => "npy_vehicle",
            // A ROS 2 bag: IMU and ground, odometry only relatively gravity-aligned.
            "auto" if source_kind == "mcap" => "ros2_mcap_robot",
            "auto" => match platform {
                Platform::Vehicle => "waymo_vehicle",
                Platform::Drone => "m3ed_drone",
                Platform::Quadruped => "m3ed_quadruped",
                Platform::Other => {
                    return Err(ConfigError::Invalid {
                        path: config_path.into(),
                        key: "normalize.profile".into(),
                        reason: "`auto` has no profile for platform `other`: name one".into(),
                    });
                }
            },
            named => named,
        };
        self.resolve_profile(config_path, name)
            .map(Some)
            .map_err(|e| ConfigError::Invalid {
                path: config_path.into(),
                key: "normalize.profile".into(),
                reason: e.to_string(),
            })
    }

    fn resolve_profile(&self, config_path: &Path, name: &str) -> Result<LoadedProfile, ProfileError> {
        let relative = config_path.parent().unwrap_or(Path::new(".")).join(name);
        if relative.is_file() {
            Profile::load(&relative.to_string_lossy())
        } else {
            Profile::load(name)
        }
    }

    /// Checks every value and every path the config names; `path` is the config file.
    pub fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |key: String, reason: String| ConfigError::Invalid {
            path: path.into(),
            key,
            reason,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        if self.origin == LayerOrigin::Detect && self.detectors.is_empty() {
            return Err(invalid(
                "detectors".into(),
                "origin `detect` needs at least one detector".into(),
            ));
        }
        for (i, d) in self.detectors.iter().enumerate() {
            let manifest = dir.join(&d.path).join(MANIFEST_FILE);
            if !manifest.is_file() {
                return Err(invalid(
                    format!("detectors[{i}].path"),
                    format!("{} does not exist", manifest.display()),
                ));
            }
            if !(d.weight.is_finite() && d.weight > 0.0) {
                return Err(invalid(
                    format!("detectors[{i}].weight"),
                    format!("{} is not > 0", d.weight),
                ));
            }
            let wants_normalized = crate::detect::DetectorManifest::load(&dir.join(&d.path))
                .is_ok_and(|m| m.input_frame == crate::frame::DetectorFrame::Normalized);
            if wants_normalized && !self.stages.normalize {
                return Err(invalid(
                    format!("detectors[{i}].path"),
                    format!(
                        "{} takes points in the normalized frame (its `input_frame`), and `stages.normalize` is off",
                        manifest.display()
                    ),
                ));
            }
        }
        if self.origin == LayerOrigin::Detect
            && let Some(platform) = self.source.platform
            && !self.detectors.iter().any(|d| d.runs_on(platform))
        {
            return Err(invalid(
                "detectors".into(),
                format!("no detector runs on platform `{platform}` (their `platforms` lists leave it out)"),
            ));
        }
        if let Some(m) = &self.source.data_manifest {
            let m = dir.join(m);
            if !m.is_file() {
                return Err(invalid(
                    "source.data_manifest".into(),
                    format!("{} does not exist", m.display()),
                ));
            }
        }
        if self.stages.normalize && self.normalize.profile != "auto" {
            self.resolve_profile(path, &self.normalize.profile)
                .map_err(|e| invalid("normalize.profile".into(), e.to_string()))?;
        }
        if self.stages.camera_check {
            let c = &self.camera;
            if c.classifier.is_empty() {
                return Err(invalid(
                    "camera.classifier".into(),
                    "stages.camera_check needs a classifier folder".into(),
                ));
            }
            let manifest = dir.join(&c.classifier).join(crate::classify::MANIFEST_FILE);
            if !manifest.is_file() {
                return Err(invalid(
                    "camera.classifier".into(),
                    format!("{} does not exist", manifest.display()),
                ));
            }
            if c.views_per_track == 0 {
                return Err(invalid("camera.views_per_track".into(), "must be at least 1".into()));
            }
            for (key, v) in [
                ("camera.max_view_occlusion", c.max_view_occlusion),
                ("camera.min_view_in_image", c.min_view_in_image),
                ("camera.conflict_score", c.conflict_score),
            ] {
                if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                    return Err(invalid(key.into(), format!("{v} is not in 0–1")));
                }
            }
        }
        self.ground_contact
            .validate()
            .map_err(|(key, reason)| invalid(key.into(), reason))?;
        if !(self.review.max_occlusion.is_finite() && (0.0..=1.0).contains(&self.review.max_occlusion)) {
            return Err(invalid(
                "review.max_occlusion".into(),
                format!("{} is not in 0–1", self.review.max_occlusion),
            ));
        }
        for platform in crate::frame::Platform::ALL {
            Fuser::new(&self.fusion, platform).map_err(|e| invalid("fusion".into(), e.to_string()))?;
            self.tracking
                .for_platform(platform)
                .validate()
                .map_err(|e| invalid(format!("tracking.{platform}"), e.to_string()))?;
        }
        let o = &self.outputs;
        if !(1..=22).contains(&o.compression_level) {
            return Err(invalid(
                "outputs.compression_level".into(),
                format!("{} is not a zstd level 1–22", o.compression_level),
            ));
        }
        if !(1..=(1 << 24)).contains(&o.row_group_rows) {
            return Err(invalid(
                "outputs.row_group_rows".into(),
                format!("{} is not in 1..=16777216", o.row_group_rows),
            ));
        }
        if !(1..=100_000).contains(&o.points_every) {
            return Err(invalid(
                "outputs.points_every".into(),
                format!("{} is not in 1..=100000", o.points_every),
            ));
        }
        if !(1..=100_000).contains(&o.frames_per_part) {
            return Err(invalid(
                "outputs.frames_per_part".into(),
                format!("{} is not in 1..=100000", o.frames_per_part),
            ));
        }
        let r = &self.review;
        if !(r.min_score.is_finite() && (0.0..=1.0).contains(&r.min_score)) {
            return Err(invalid(
                "review.min_score".into(),
                format!("{} is not in [0, 1]", r.min_score),
            ));
        }
        if !(r.size_factor.is_finite() && r.size_factor >= 1.0) {
            return Err(invalid(
                "review.size_factor".into(),
                format!("{} is not ≥ 1", r.size_factor),
            ));
        }
        if let Some(f) = r.queue.iter().find(|f| !REVIEW_FLAGS.contains(&f.as_str())) {
            return Err(invalid(
                "review.queue".into(),
                format!("`{f}` is not a review flag ({})", REVIEW_FLAGS.join(", ")),
            ));
        }
        if self.runtime.threads > 1024 {
            return Err(invalid(
                "runtime.threads".into(),
                format!("{} is over 1024", self.runtime.threads),
            ));
        }
        if !(1..=4096).contains(&self.runtime.window_frames) {
            return Err(invalid(
                "runtime.window_frames".into(),
                format!("{} is not in 1..=4096", self.runtime.window_frames),
            ));
        }
        Ok(())
    }

    /// The detector folders, resolved against the config file's folder.
    pub fn detector_dirs(&self, config_path: &Path) -> Vec<PathBuf> {
        let dir = config_path.parent().unwrap_or(Path::new("."));
        self.detectors.iter().map(|d| dir.join(&d.path)).collect()
    }

    /// The folders of the detectors that run on `platform`'s sequences, resolved as
    /// [`detector_dirs`](Self::detector_dirs).
    pub fn platform_detector_dirs(&self, config_path: &Path, platform: crate::frame::Platform) -> Vec<PathBuf> {
        self.detector_dirs(config_path)
            .into_iter()
            .zip(&self.detectors)
            .filter(|(_, d)| d.runs_on(platform))
            .map(|(dir, _)| dir)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "origin = \"labels\"\n[outputs]\ncompression_level = 40\n").unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("p.toml") && e.contains("outputs.compression_level"), "{e}");
        std::fs::write(
            &path,
            "origin = \"labels\"\n[review]\nqueue = [\"low_score\", \"lowscore\"]\n",
        )
        .unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("p.toml") && e.contains("review.queue") && e.contains("`lowscore`"),
            "{e}"
        );
        std::fs::write(&path, "origin = \"labels\"\n[ground_contact]\ncell_m = 0\n").unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("p.toml") && e.contains("ground_contact.cell_m") && e.contains("0 is outside"),
            "{e}"
        );
        std::fs::write(&path, "origin = \"labels\"\n[outputs]\ncompresion_level = 4\n").unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("p.toml") && e.contains("compresion_level"), "{e}");
        std::fs::write(&path, "[[detectors]]\npath = \"nowhere\"\n").unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("detectors[0].path") && e.contains("nowhere"), "{e}");
        std::fs::write(&path, "origin = \"detect\"\n").unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("key `detectors`"), "{e}");
        // The check's share limits are checked once it is on (the classifier folder exists).
        std::fs::create_dir(dir.path().join("model")).unwrap();
        std::fs::write(dir.path().join("model/classifier.toml"), "").unwrap();
        std::fs::write(
            &path,
            "origin = \"labels\"\n[stages]\ncamera_check = true\n[camera]\nclassifier = \"model\"\nmin_view_in_image = 1.5\n",
        )
        .unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("camera.min_view_in_image") && e.contains("1.5"), "{e}");
    }

    #[test]
    fn extends_lays_the_file_over_its_base() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("base.toml"),
            "origin = \"labels\"\n[outputs]\ncompression_level = 5\npoints = \"none\"\n",
        )
        .unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "extends = \"base.toml\"\n[outputs]\npoints = \"every_kth\"\n").unwrap();
        let loaded = PipelineConfig::load(&path).unwrap();
        assert_eq!(loaded.config.origin, LayerOrigin::Labels);
        assert_eq!(loaded.config.outputs.compression_level, 5);
        assert_eq!(loaded.config.outputs.points, PointsKept::EveryKth);
        std::fs::write(dir.path().join("base.toml"), "extends = \"p.toml\"\n").unwrap();
        assert!(matches!(
            PipelineConfig::load(&path),
            Err(ConfigError::ExtendsDepth { .. })
        ));
    }

    #[test]
    fn an_unknown_normalization_profile_is_refused_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "origin = \"labels\"\n[stages]\nnormalize = true\n[normalize]\nprofile = \"boat\"\n",
        )
        .unwrap();
        let e = PipelineConfig::load(&path).unwrap_err().to_string();
        assert!(e.contains("`normalize.profile`") && e.contains("boat"), "{e}");
        // `auto` resolves by the log; `other` has no default.
        std::fs::write(&path, "origin = \"labels\"\n").unwrap();
        let c = PipelineConfig::load(&path).unwrap().config;
        let p = |platform, kind| {
            c.normalization_profile(&path, platform, kind)
                .map(|p| p.map(|p| p.profile.name))
        };
        assert_eq!(
            p(Platform::Vehicle, "waymo-v1").unwrap().as_deref(),
            Some("waymo_vehicle")
        );
        assert_eq!(
            p(Platform::Vehicle, "kitti-bin").unwrap().as_deref(),
            Some("kitti_vehicle")
        );
        assert_eq!(p(Platform::Drone, "m3ed").unwrap().as_deref(), Some("m3ed_drone"));
        assert_eq!(p(Platform::Vehicle, "pcd").unwrap().as_deref(), Some("pcd_vehicle"));
        assert_eq!(p(Platform::Vehicle, "npy").unwrap().as_deref(), Some("npy_vehicle"));
        assert_eq!(p(Platform::Other, "mcap").unwrap().as_deref(), Some("ros2_mcap_robot"));
        assert!(p(Platform::Other, "kitti-bin").is_ok());
        assert!(p(Platform::Other, "m3ed").unwrap_err().to_string().contains("`other`"));
    }

    /// A named profile's `[source]` table sets the reader options the run opens logs with; a key
    /// no reader has is refused naming the profile and `source`.
    #[test]
    fn a_named_profile_carries_its_reader_options() {
        let dir = tempfile::tempdir().unwrap();
        let builtin = include_str!("../../pipelines/platforms/kitti_vehicle.toml")
            .replace("name = \"kitti_vehicle\"", "name = \"mine\"");
        let profile = dir.path().join("mine.toml");
        std::fs::write(
            &profile,
            format!("{builtin}\n[source.kitti]\nfields = [\"x\", \"y\", \"z\", \"intensity\", \"ring\"]\n"),
        )
        .unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "origin = \"labels\"\n[normalize]\nprofile = \"mine.toml\"\n").unwrap();
        let c = PipelineConfig::load(&path).unwrap().config;
        let options = c.reader_options(&path).unwrap();
        assert_eq!(options.kitti.fields, ["x", "y", "z", "intensity", "ring"]);
        // Under `auto` the profile follows the log, so no profile's table applies.
        std::fs::write(&path, "origin = \"labels\"\n").unwrap();
        let c = PipelineConfig::load(&path).unwrap().config;
        assert!(c.reader_options(&path).unwrap().kitti.fields.is_empty());
        std::fs::write(&profile, format!("{builtin}\n[source.kitti]\nfeilds = [\"x\"]\n")).unwrap();
        let e = crate::normalize::Profile::load(profile.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("mine.toml: `source`") && e.contains("feilds"), "{e}");
    }

    /// A detector's `weight` reaches fusion by the detector's name, unless a class names it.
    #[test]
    fn a_detector_weight_becomes_its_fusion_weight() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let config = dir.path().join("p.toml");
        std::fs::write(
            &config,
            format!(
                "[[detectors]]\npath = \"{}\"\nweight = 0.4\n\n[[detectors]]\npath = \"{}\"\n\n\
                 [fusion.pedestrian.detector_weights]\ncenterpoint_pillar_sim = 2.0\n",
                repo.join("detectors/centerpoint_pillar_sim").display(),
                repo.join("detectors/pointpillars_anchor_sim").display()
            ),
        )
        .unwrap();
        let loaded = PipelineConfig::load(&config).unwrap();
        let fusion = &loaded.config.fusion;
        assert_eq!(fusion.vehicle.detector_weight("centerpoint_pillar_sim"), 0.4);
        assert_eq!(fusion.cyclist.detector_weight("centerpoint_pillar_sim"), 0.4);
        assert_eq!(fusion.pedestrian.detector_weight("centerpoint_pillar_sim"), 2.0);
        // Weight 1 (the default) adds no entry.
        assert!(!fusion.vehicle.detector_weights.contains_key("pointpillars_anchor_sim"));
        assert!(loaded.resolved_toml.contains("centerpoint_pillar_sim = 0.4"));
    }

    /// Every shipped pipeline config loads and validates (`pipelines/*.toml`).
    #[test]
    fn every_file_under_pipelines_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                if path.file_name().is_some_and(|n| n == "base.toml") {
                    // The shared base has no detectors of its own: it parses, and its stage
                    // configs validate, but it is no pipeline by itself.
                    let text = std::fs::read_to_string(&path).unwrap();
                    let base: PipelineConfig = toml::from_str(&text).unwrap();
                    for platform in crate::frame::Platform::ALL {
                        Fuser::new(&base.fusion, platform).unwrap();
                    }
                } else {
                    PipelineConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
                }
                loaded += 1;
            }
        }
        assert!(loaded >= 5, "only {loaded} configs under pipelines/");
    }
}
