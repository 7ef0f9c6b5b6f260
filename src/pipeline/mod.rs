//! Runs whole sequences through the stages in order and writes their shards: `boxlayer run`.
//! This is the only module that knows the stage order (`sequence.rs`); it reads pipeline configs
//! and data manifests to know what to run, opens each log through the source registry, loads the
//! detectors once for all sequences, and hands each sequence's layer to `shards`.

mod bench;
mod camera_pass;
mod config;
mod data_manifest;
mod detections_jsonl;
mod merge;
mod renormalize;
mod resume;
mod score;
mod scratch;
mod sequence;
mod shared_runs;
mod stop;
mod workers;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};
use thiserror::Error;

pub use bench::{BenchOptions, BenchReport, bench};
pub use config::{
    CameraConfig, ConfigError, DetectorEntry, LayerOrigin, LoadedConfig, MAX_EXTENDS_DEPTH, OutputConfig,
    PipelineConfig, PointsKept, ReviewConfig, RuntimeConfig, SourceConfig, StagesConfig,
};
pub use data_manifest::{DataManifest, ManifestError, SequenceEntry, Split};
pub use detections_jsonl::{
    DEFAULT_FRAME_PERIOD_MICROS, fuse_detections_file, read_detections_jsonl, track_boxes_file,
};
pub use merge::{DATASET_FILE, DatasetManifest, DatasetSequence, MergeReport, merge};
pub use renormalize::{RenormalizeSummary, renormalize, shard_options};
pub use resume::{
    FAILED_SUFFIX, FailureRecord, LOCKS_DIR, OnDisk, RunIdentity, SequenceLock, error_chain, on_disk, read_failure,
};
pub use score::{
    ClassAp, HeadingShares, LayerScores, class_ap, label_truth, score_layer, vehicle_heading, visible_truth,
};
pub use sequence::{
    DetectionsFrom, DetectorView, FrameWriters, SequenceDetector, SequenceJob, SequenceLayer, run_sequence, track_input,
};
pub use stop::StopSignal;
pub use workers::WorkerShare;

use crate::boxes::Detection;
use crate::classify::{Classifier, ClassifyError};
use crate::detect::{DetectError, Detector};
use crate::frame::{DetectorFrame, ObjectClass, Platform};
use crate::fuse::FuseError;
use crate::geometry::Box3;
use crate::shards::{
    ClassifierRecord, DetectorRecord, NormalizationRecord, RunManifest, SCHEMA_VERSION, SUCCESS_FILE, SequenceCounts,
    SequenceWriter, ShardError, ShardOptions, read_detection_rows,
};
use crate::sources::{SourceError, SourceKind};
use crate::track::TrackError;

/// Errors of a pipeline run; each names the sequence (and frame) or the file.
#[derive(Debug, Error)]
pub enum PipelineError {
    /// The configuration is invalid.
    #[error(transparent)]
    ConfigFile(#[from] ConfigError),
    /// A configuration value cannot be used (found while setting up a stage).
    #[error("config: {0}")]
    Config(String),
    /// The data manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A log could not be opened or a frame read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A detector could not be loaded.
    #[error("detector {path}")]
    DetectorLoad {
        /// The detector folder.
        path: PathBuf,
        /// Why.
        source: Box<DetectError>,
    },
    /// The RGB check's classifier could not be loaded.
    #[error("classifier {path}")]
    ClassifierLoad {
        /// The classifier folder.
        path: PathBuf,
        /// Why.
        source: ClassifyError,
    },
    /// A detector failed on a frame.
    #[error("{sequence}: frame {frame}")]
    Detect {
        /// The sequence.
        sequence: String,
        /// The frame index.
        frame: i64,
        /// Why.
        source: Box<DetectError>,
    },
    /// Fusion failed on a frame.
    #[error("{sequence}: frame {frame}")]
    Fuse {
        /// The sequence.
        sequence: String,
        /// The frame index.
        frame: i64,
        /// Why.
        source: FuseError,
    },
    /// Tracking failed on a sequence.
    #[error("{sequence}")]
    Track {
        /// The sequence.
        sequence: String,
        /// Why.
        source: TrackError,
    },
    /// A shard could not be written or read.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// The ground truth to score against could not be read.
    #[error("ground truth")]
    Truth(#[from] crate::eval::EvalError),
    /// A scratch or output file could not be written.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `--from` needs a complete earlier run of the sequence.
    #[error("{path}: no complete earlier run to start from (`--from` needs its detections.parquet and _SUCCESS)")]
    NoEarlierRun {
        /// The sequence folder.
        path: PathBuf,
    },
    /// A sequence of a run failed (`RunSummary::into_complete`).
    #[error("{sequence}")]
    SequenceFailed {
        /// The sequence.
        sequence: String,
        /// Why.
        source: std::sync::Arc<PipelineError>,
    },
    /// The run was asked to stop (SIGINT, SIGTERM) before the sequence finished.
    #[error("interrupted by signal {signal}")]
    Interrupted {
        /// The signal's number.
        signal: i32,
    },
    /// `--resume` found the sequence finished by another config or frame selection.
    #[error(
        "{path}: finished by another config or frame selection (config sha256 {found}, this run's {ours}); pass --force to redo it, or choose another --out"
    )]
    OtherRun {
        /// The sequence folder.
        path: PathBuf,
        /// The config sha256 (and frames) that made it.
        found: String,
        /// This run's.
        ours: String,
    },
    /// The run was asked for sequences the manifest does not list.
    #[error("--sequences: {names} not in the data manifest")]
    UnknownSequences {
        /// The names, comma-separated.
        names: String,
    },
}

/// Where a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum StartFrom {
    /// Read the logs and run the detectors (a full run).
    #[default]
    Read,
    /// Take the raw detections of an earlier run's `detections.parquet` and recompute fusion,
    /// tracking and the box rows (logs are read again for poses, points and cameras).
    Fuse,
    /// As `fuse`: fusion is cheap next to detection, so tracking reruns on freshly fused boxes.
    Track,
    /// As `fuse`: the camera stage reruns on freshly fused and tracked boxes.
    Camera,
}

impl StartFrom {
    fn as_str(self) -> &'static str {
        match self {
            StartFrom::Read => "read",
            StartFrom::Fuse => "fuse",
            StartFrom::Track => "track",
            StartFrom::Camera => "camera",
        }
    }
}

/// What `boxlayer run` is asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The loaded configuration.
    pub config: LoadedConfig,
    /// Folder the data manifest's paths start from.
    pub data_root: PathBuf,
    /// One log to run instead of the data manifest's sequences (needs `--platform`).
    pub input: Option<PathBuf>,
    /// The platform of `input`.
    pub platform: Option<Platform>,
    /// Ground truth of `input` (JSON lines, sensor-frame boxes, the sequence named as the log
    /// names it): the run scores itself against it. Without it, a log's own labels are used.
    pub truth: Option<PathBuf>,
    /// Output folder (`<out>/<platform>/<sequence>/`).
    pub out: PathBuf,
    /// Only these sequences (by name); empty: all.
    pub sequences: Vec<String>,
    /// Only these positions of each sequence's readable frames.
    pub frames: Option<std::ops::Range<usize>>,
    /// Where to start.
    pub from: StartFrom,
    /// Detections to use instead of running detectors (JSON lines, `read_detections_jsonl`).
    pub detections: Option<PathBuf>,
    /// Show progress bars (only on a terminal).
    pub progress: bool,
    /// This worker's share of the manifest's sequences; `None`: all of them.
    pub share: Option<WorkerShare>,
    /// Skip sequences already finished by the same config and frame selection.
    pub resume: bool,
    /// With `resume`: redo sequences finished by another config instead of refusing.
    pub force: bool,
    /// Frames processed at once, and ONNX sessions per graph (one intra-op thread each); `None`:
    /// the config's `runtime.threads`.
    pub threads: Option<usize>,
    /// Raised to stop the run early (the binary's SIGINT/SIGTERM handler).
    pub stop: StopSignal,
}

impl RunOptions {
    /// A full run of `config`'s data manifest into `out`: every sequence, every frame, one
    /// worker, no resume; fields are public to change.
    pub fn new(config: LoadedConfig, out: PathBuf) -> Self {
        Self {
            config,
            data_root: PathBuf::from("."),
            input: None,
            platform: None,
            truth: None,
            out,
            sequences: Vec::new(),
            frames: None,
            from: StartFrom::Read,
            detections: None,
            progress: false,
            share: None,
            resume: false,
            force: false,
            threads: None,
            stop: StopSignal::new(),
        }
    }

    /// What makes this run's sequence folders: the config's sha256 and the frame selection.
    pub fn identity(&self) -> RunIdentity {
        RunIdentity {
            config_sha256: sha256_hex(self.config.resolved_toml.as_bytes()),
            frames: self.frames.as_ref().map(|r| [r.start as u64, r.end as u64]),
        }
    }
}

/// A sequence of the run's share that was not run, and why.
#[derive(Debug, Clone)]
pub struct SkippedSequence {
    /// The sequence.
    pub sequence: String,
    /// Its platform.
    pub platform: Platform,
    /// Why (`finished by the same config`, `locked by pid 12 on node3`).
    pub reason: String,
}

/// A sequence that failed; the run went on with the others.
#[derive(Debug, Clone)]
pub struct SequenceFailure {
    /// The sequence.
    pub sequence: String,
    /// Its platform.
    pub platform: Platform,
    /// Its folder (absent; the failure record lies beside it).
    pub dir: PathBuf,
    /// What went wrong.
    pub error: std::sync::Arc<PipelineError>,
}

/// One sequence's result.
#[derive(Debug, Clone)]
pub struct SequenceSummary {
    /// The sequence.
    pub sequence: String,
    /// Its platform.
    pub platform: Platform,
    /// Its shard folder.
    pub dir: PathBuf,
    /// Counts.
    pub counts: SequenceCounts,
    /// Wall time (s).
    pub seconds: f64,
    /// Self-scores against the source's labels, when it has them.
    pub scores: Option<LayerScores>,
}

/// A run's result.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Each sequence.
    pub sequences: Vec<SequenceSummary>,
    /// Stage time totals (s).
    pub read_cpu_s: f64,
    /// Detector time, summed over frames (s).
    pub detect_cpu_s: f64,
    /// Of which the ONNX sessions alone (s).
    pub onnx_cpu_s: f64,
    /// Threads the per-frame passes ran on.
    pub threads: usize,
    /// Tracking (s).
    pub track_s: f64,
    /// Setting the tracked boxes on the ground (s).
    pub ground_contact_s: f64,
    /// Box rows (s).
    pub describe_s: f64,
    /// The RGB class check (s).
    pub camera_s: f64,
    /// Writing (s).
    pub write_s: f64,
    /// Wall time (s).
    pub seconds: f64,
    /// The worker share the run took, when it took one.
    pub share: Option<WorkerShare>,
    /// Sequences of the share not run (finished, or locked by another worker).
    pub skipped: Vec<SkippedSequence>,
    /// Sequences that failed (each left a `<sequence>.failed.json`).
    pub failed: Vec<SequenceFailure>,
    /// The signal that stopped the run early, if one did; sequences after `sequences` did not run.
    pub interrupted: Option<i32>,
    /// Sequences of the share not reached because the run was stopped.
    pub not_reached: Vec<String>,
}

impl RunSummary {
    /// `Ok` when every sequence of the run finished (or was skipped as finished); otherwise the
    /// first failure's error, or `Interrupted`.
    pub fn into_complete(self) -> Result<Self, PipelineError> {
        if let Some(signal) = self.interrupted {
            return Err(PipelineError::Interrupted { signal });
        }
        match self.failed.first() {
            Some(f) => Err(PipelineError::SequenceFailed {
                sequence: f.sequence.clone(),
                source: std::sync::Arc::clone(&f.error),
            }),
            None => Ok(self),
        }
    }
}

/// One sequence to run.
struct Planned {
    name: String,
    path: PathBuf,
    shown_path: String,
    kind: Option<SourceKind>,
    platform: Platform,
    /// The log, when planning already opened it (`--input`: its name is the sequence's).
    opened: Option<Box<dyn crate::sources::Source>>,
}

/// Loads the RGB check's classifier (`None` while `stages.camera_check` is off).
pub fn load_classifier(config: &LoadedConfig) -> Result<Option<Classifier>, PipelineError> {
    let c = &config.config;
    if !c.stages.camera_check {
        return Ok(None);
    }
    let dir = config
        .path
        .parent()
        .unwrap_or(Path::new("."))
        .join(&c.camera.classifier);
    Classifier::load(&dir)
        .map(Some)
        .map_err(|source| PipelineError::ClassifierLoad { path: dir, source })
}

/// Loads every detector of the config once, for a pipeline running `threads` frames at once:
/// each graph gets `threads` sessions of one intra-op thread (a detector manifest's
/// `[runtime] threads` and `sessions` are for `boxlayer detect`; its execution provider stands).
/// The detectors load in parallel (rayon); the error reported is the first in config order.
pub fn load_detectors(config: &LoadedConfig, threads: usize) -> Result<Vec<Detector>, PipelineError> {
    use rayon::prelude::*;
    let loaded: Vec<Result<Detector, PipelineError>> = config
        .config
        .detector_dirs(&config.path)
        .into_par_iter()
        .map(|dir| {
            crate::detect::DetectorManifest::load(&dir)
                .and_then(|mut manifest| {
                    manifest.runtime.sessions = threads.clamp(1, crate::detect::MAX_SESSIONS);
                    manifest.runtime.threads = 1;
                    Detector::from_manifest(manifest, &dir)
                })
                .map_err(|source| PipelineError::DetectorLoad {
                    path: dir,
                    source: Box::new(source),
                })
        })
        .collect();
    loaded.into_iter().collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs every sequence of the options (this worker's share of them) and writes their shards.
/// A sequence that fails is recorded (`<sequence>.failed.json`, `RunSummary::failed`) and the
/// run goes on; errors that concern every sequence (config, manifest, detectors) end it before
/// any output.
pub fn run(options: &RunOptions) -> Result<RunSummary, PipelineError> {
    let started = Instant::now();
    let loaded = &options.config;
    let config = &loaded.config;
    let threads = match options.threads {
        Some(0) | None if config.runtime.threads == 0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        Some(0) | None => config.runtime.threads,
        Some(n) => n,
    };
    let pool = sequence::thread_pool(threads)?;
    let runs_detectors = matches!(
        (config.origin, options.from, &options.detections),
        (LayerOrigin::Detect, StartFrom::Read, None)
    );
    // The logs are indexed and the detectors loaded (their model hashes checked) side by side on
    // the run's threads, both before any output is written.
    let (planned, detectors) = pool.install(|| {
        rayon::join(
            || plan(options),
            || {
                if runs_detectors {
                    load_detectors(loaded, threads)
                } else {
                    Ok(Vec::new())
                }
            },
        )
    });
    let mut planned = planned?;
    if let Some(share) = options.share {
        planned = planned
            .into_iter()
            .enumerate()
            .filter(|(k, _)| share.owns(*k))
            .map(|(_, p)| p)
            .collect();
        tracing::info!("{share}: {} sequences", planned.len());
    }
    let identity = options.identity();
    let refuses_other_runs = options.resume && !options.force && options.from == StartFrom::Read;
    if refuses_other_runs {
        // Checked before any work; checked again under each sequence's lock.
        for p in &planned {
            other_run(&sequence_dir(options, p), &identity)?;
        }
    }
    if runs_detectors
        && let Some(p) = planned
            .iter()
            .find(|p| !config.detectors.iter().any(|d| d.runs_on(p.platform)))
    {
        return Err(PipelineError::Config(format!(
            "{}: detectors: none runs on platform `{}` (sequence {}); their `platforms` lists leave it out",
            loaded.path.display(),
            p.platform,
            p.name
        )));
    }
    let detectors = detectors?;
    let classifier = load_classifier(loaded)?;
    let given = match &options.detections {
        Some(path) => Some(read_detections_jsonl(path)?),
        None => None,
    };
    let mut summary = RunSummary {
        threads,
        share: options.share,
        ..RunSummary::default()
    };
    let bar = progress_bar(options.progress, planned.len() as u64, "sequences");
    for (k, p) in planned.iter().enumerate() {
        if let Some(signal) = options.stop.raised() {
            summary.interrupted = Some(signal);
            summary.not_reached = planned[k..].iter().map(|p| p.name.clone()).collect();
            break;
        }
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        let dir = sequence_dir(options, p);
        let skip = |summary: &mut RunSummary, reason: String| {
            tracing::info!("{}: skipped: {reason}", p.name);
            summary.skipped.push(SkippedSequence {
                sequence: p.name.clone(),
                platform: p.platform,
                reason,
            });
        };
        let lock = match SequenceLock::try_acquire(&options.out, p.platform.as_str(), &p.name)? {
            Ok(lock) => lock,
            Err(holder) => {
                skip(&mut summary, format!("locked by {holder}"));
                continue;
            }
        };
        let outcome = match on_disk(&dir) {
            OnDisk::Finished(found) if options.resume && found == identity => {
                skip(&mut summary, "finished by the same config".to_string());
                continue;
            }
            OnDisk::Incomplete if options.resume => {
                tracing::info!("{}: clearing an incomplete folder {}", p.name, dir.display());
                std::fs::remove_dir_all(&dir)
                    .map_err(|source| PipelineError::Io {
                        path: dir.clone(),
                        source,
                    })
                    .and_then(|()| run_one_in(options, p, &detectors, classifier.as_ref(), given.as_ref(), &pool))
            }
            _ if refuses_other_runs => other_run(&dir, &identity)
                .and_then(|()| run_one_in(options, p, &detectors, classifier.as_ref(), given.as_ref(), &pool)),
            _ => run_one_in(options, p, &detectors, classifier.as_ref(), given.as_ref(), &pool),
        };
        match outcome {
            Ok((s, times)) => {
                resume::clear_failure(&dir)?;
                summary.read_cpu_s += times.read_cpu_s;
                summary.detect_cpu_s += times.detect_cpu_s;
                summary.onnx_cpu_s += times.onnx_cpu_s;
                summary.track_s += times.track_s;
                summary.ground_contact_s += times.ground_contact_s;
                summary.describe_s += times.describe_s;
                summary.camera_s += times.camera_s;
                summary.write_s += times.write_s;
                summary.sequences.push(s);
            }
            Err(PipelineError::Interrupted { signal }) => {
                tracing::warn!("{}: stopped by signal {signal}; its partial output is removed", p.name);
                summary.interrupted = Some(signal);
                summary.not_reached = planned[k..].iter().map(|p| p.name.clone()).collect();
                break;
            }
            Err(e) => {
                let chain = error_chain(&e);
                tracing::error!("{}: failed: {}", p.name, chain.join(": "));
                resume::record_failure(
                    &dir,
                    &FailureRecord {
                        sequence: p.name.clone(),
                        platform: p.platform.as_str().to_string(),
                        error: chain,
                        config_sha256: identity.config_sha256.clone(),
                        failed_unix_s: unix_now(),
                    },
                )?;
                summary.failed.push(SequenceFailure {
                    sequence: p.name.clone(),
                    platform: p.platform,
                    dir: dir.clone(),
                    error: std::sync::Arc::new(e),
                });
            }
        }
        drop(lock);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn sequence_dir(options: &RunOptions, p: &Planned) -> PathBuf {
    options.out.join(p.platform.as_str()).join(&p.name)
}

/// `Err(OtherRun)` when `dir` is finished by another identity than `ours`.
fn other_run(dir: &Path, ours: &RunIdentity) -> Result<(), PipelineError> {
    match on_disk(dir) {
        OnDisk::Finished(found) if &found != ours => {
            let show = |id: &RunIdentity| match id.frames {
                Some([a, b]) => format!("{}, frames {a}..{b}", id.config_sha256),
                None => id.config_sha256.clone(),
            };
            Err(PipelineError::OtherRun {
                path: dir.to_path_buf(),
                found: show(&found),
                ours: show(ours),
            })
        }
        _ => Ok(()),
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

type SequenceOutcome = Result<(SequenceSummary, crate::shards::StageTimes), PipelineError>;

fn run_one_in(
    options: &RunOptions,
    p: &Planned,
    detectors: &[Detector],
    classifier: Option<&Classifier>,
    given: Option<&BTreeMap<String, BTreeMap<i64, Vec<Detection>>>>,
    pool: &rayon::ThreadPool,
) -> SequenceOutcome {
    let empty = BTreeMap::new();
    let given = given.map(|g| g.get(&p.name).unwrap_or(&empty));
    pool.install(|| run_one(options, p, detectors, classifier, given))
}

pub(crate) fn progress_bar(wanted: bool, len: u64, what: &str) -> Option<indicatif::ProgressBar> {
    if !wanted || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what} {{msg}}")) {
        bar.set_style(style);
    }
    Some(bar)
}

fn plan(options: &RunOptions) -> Result<Vec<Planned>, PipelineError> {
    let config = &options.config.config;
    if let Some(input) = &options.input {
        let platform = options.platform.unwrap_or(Platform::Vehicle);
        let reader_options = config
            .reader_options(&options.config.path)
            .map_err(|e| PipelineError::Config(e.to_string()))?;
        let source = crate::sources::open(input, config.source.kind, &reader_options)?;
        return Ok(vec![Planned {
            name: source.meta().name.clone(),
            path: input.clone(),
            // Relative to the data root when the log lies under it, so `--data-root` finds it
            // again (export, render, report); else its file name.
            shown_path: match input.strip_prefix(&options.data_root).or_else(|e| {
                if options.data_root == std::path::Path::new(".") && input.is_relative() {
                    Ok(input.as_path())
                } else {
                    Err(e)
                }
            }) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
                _ => input
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            },
            kind: source.meta().source_kind.parse().ok(),
            platform,
            opened: Some(source),
        }]);
    }
    let Some(manifest_path) = &config.source.data_manifest else {
        return Err(PipelineError::Config(format!(
            "{}: key `source.data_manifest`: no data manifest, and no --input log given",
            options.config.path.display()
        )));
    };
    let manifest_path = options
        .config
        .path
        .parent()
        .unwrap_or(Path::new("."))
        .join(manifest_path);
    let manifest = DataManifest::load(&manifest_path)?;
    let unknown: Vec<&str> = options
        .sequences
        .iter()
        .filter(|n| !manifest.sequences.iter().any(|e| &e.name == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(PipelineError::UnknownSequences {
            names: unknown.join(", "),
        });
    }
    Ok(manifest
        .sequences
        .iter()
        .filter(|e| config.source.platform.is_none_or(|p| p == e.platform))
        .filter(|e| options.sequences.is_empty() || options.sequences.contains(&e.name))
        .map(|e| Planned {
            name: e.name.clone(),
            path: options.data_root.join(&e.path),
            shown_path: e.path.to_string_lossy().into_owned(),
            kind: Some(e.source_kind),
            platform: e.platform,
            opened: None,
        })
        .collect())
}

/// The raw detections of an earlier run, by frame index.
fn stored_detections(dir: &Path) -> Result<BTreeMap<i64, Vec<Detection>>, PipelineError> {
    if !dir.join(SUCCESS_FILE).is_file() {
        return Err(PipelineError::NoEarlierRun {
            path: dir.to_path_buf(),
        });
    }
    let mut out: BTreeMap<i64, Vec<Detection>> = BTreeMap::new();
    for row in read_detection_rows(&dir.join("detections.parquet"))? {
        out.entry(row.frame_index).or_default().push(Detection {
            box3: Box3::from_array(row.box_sensor),
            class: row.class.parse().unwrap_or(ObjectClass::Unknown),
            score: row.score,
            detector: row.detector,
        });
    }
    Ok(out)
}

fn detector_records(
    options: &RunOptions,
    detectors: &[Detector],
    platform: Platform,
    dir: &Path,
) -> Vec<DetectorRecord> {
    if detectors.is_empty() {
        // `--from`: the earlier run's record stands (its detections are the ones used).
        let earlier = std::fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<RunManifest>(&t).ok());
        return earlier.map(|m| m.detectors).unwrap_or_default();
    }
    options
        .config
        .config
        .detectors
        .iter()
        .zip(detectors)
        .filter(|(entry, _)| entry.runs_on(platform))
        .map(|(entry, d)| DetectorRecord {
            name: d.name().to_string(),
            path: entry.path.to_string_lossy().into_owned(),
            weight: entry.weight,
            models: d
                .model_sha256s()
                .into_iter()
                .map(|(role, sha)| (role.to_string(), sha))
                .collect(),
        })
        .collect()
}

/// The config's detectors that run on `platform`, each with the frame of its points (`frames`,
/// from [`detector_views`]) and where the profile puts the ground there.
fn sequence_detectors<'a>(
    config: &PipelineConfig,
    detectors: &'a [Detector],
    frames: &[DetectorFrame],
    platform: Platform,
    profile: Option<&crate::normalize::Profile>,
) -> Vec<SequenceDetector<'a>> {
    config
        .detectors
        .iter()
        .zip(detectors)
        .filter(|(entry, _)| entry.runs_on(platform))
        .zip(frames)
        .map(|((_, detector), &frame)| SequenceDetector {
            detector,
            frame,
            ground_z_m: profile.and_then(|p| p.ground_z_m(frame)),
        })
        .collect()
}

/// Each of the config's detectors for `platform`: its name, the frame it is given points in (the
/// profile's `detector.input_frame = "normalized"` moves them all, otherwise each manifest's own
/// `input_frame` stands) and its grid's range. Read from the manifests, so that a `--from` run
/// fuses as the full run did.
fn detector_views(
    options: &RunOptions,
    platform: Platform,
    profile: Option<&crate::normalize::Profile>,
) -> Result<Vec<DetectorView>, PipelineError> {
    let forced = profile.is_some_and(|p| p.detector.input_frame == DetectorFrame::Normalized);
    options
        .config
        .config
        .platform_detector_dirs(&options.config.path, platform)
        .into_iter()
        .map(|dir| {
            let manifest =
                crate::detect::DetectorManifest::load(&dir).map_err(|source| PipelineError::DetectorLoad {
                    path: dir.clone(),
                    source: Box::new(source),
                })?;
            let frame = if forced {
                DetectorFrame::Normalized
            } else {
                manifest.input_frame
            };
            if frame == DetectorFrame::Normalized && profile.is_none() {
                return Err(PipelineError::Config(format!(
                    "{}: `{}` takes points in the normalized frame, and this sequence has no normalization profile",
                    dir.display(),
                    manifest.name
                )));
            }
            if let Some(model) = manifest.ground_z_m
                && profile.and_then(|p| p.ground_z_m(frame)).is_none()
            {
                return Err(PipelineError::Config(format!(
                    "{}: `{}` expects the ground at z = {model} m (`ground_z_m`), and {} places no ground in its {} frame",
                    dir.display(),
                    manifest.name,
                    profile.map_or("no platform profile".to_string(), |p| format!("platform profile `{}`", p.name)),
                    match frame {
                        DetectorFrame::Sensor => "sensor",
                        DetectorFrame::Normalized => "normalized",
                    }
                )));
            }
            Ok(DetectorView {
                name: manifest.name,
                frame,
                range: manifest.pillars.point_cloud_range,
            })
        })
        .collect()
}

fn run_one(
    options: &RunOptions,
    p: &Planned,
    detectors: &[Detector],
    classifier: Option<&Classifier>,
    given: Option<&BTreeMap<i64, Vec<Detection>>>,
) -> Result<(SequenceSummary, crate::shards::StageTimes), PipelineError> {
    let started = Instant::now();
    let config = &options.config.config;
    let dir = sequence_dir(options, p);
    tracing::info!("{}: {} ({})", p.name, p.shown_path, p.platform);
    let stored = match (options.from, given) {
        (StartFrom::Read, Some(given)) => Some(given.clone()),
        (StartFrom::Read, None) => None,
        _ => Some(stored_detections(&dir)?),
    };
    // Given detections come from the user's own detectors: no record of ours describes them.
    let records = if given.is_some() {
        Vec::new()
    } else {
        detector_records(options, detectors, p.platform, &dir)
    };
    let reopened;
    let source: &dyn crate::sources::Source = match &p.opened {
        Some(source) => source.as_ref(),
        None => {
            let reader_options = config
                .reader_options(&options.config.path)
                .map_err(|e| PipelineError::Config(e.to_string()))?;
            reopened = crate::sources::open(&p.path, p.kind, &reader_options)?;
            reopened.as_ref()
        }
    };
    // The detectors' frames and ground levels are checked against the profile before anything
    // is written.
    let profile = config
        .normalization_profile(&options.config.path, p.platform, source.meta().source_kind)
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let views = detector_views(options, p.platform, profile.as_ref().map(|l| &l.profile))?;
    let mut writer = SequenceWriter::create(
        &dir,
        &p.name,
        ShardOptions {
            compression_level: config.outputs.compression_level,
            row_group_rows: config.outputs.row_group_rows,
            frames_per_part: config.outputs.frames_per_part,
        },
    )?;
    let staging = crate::shards::staging_dir(&dir);
    let frames: Vec<DetectorFrame> = views.iter().map(|v| v.frame).collect();
    // A user's own detections name their own detectors: only the config's detectors among them
    // have a known view (the others count everywhere), and the config's others did not run.
    let views: Vec<DetectorView> = match given {
        Some(given) => {
            let named: std::collections::BTreeSet<&str> =
                given.values().flatten().map(|d| d.detector.as_str()).collect();
            views.into_iter().filter(|v| named.contains(v.name.as_str())).collect()
        }
        None => views,
    };
    let platform_detectors = sequence_detectors(
        config,
        detectors,
        &frames,
        p.platform,
        profile.as_ref().map(|l| &l.profile),
    );
    let detections = match &stored {
        Some(stored) => DetectionsFrom::Given(stored),
        None => DetectionsFrom::Detectors(&platform_detectors),
    };
    // Given detections are fused in the frame the config's detectors would have been.
    let fusion_frame = if frames.contains(&DetectorFrame::Normalized) {
        DetectorFrame::Normalized
    } else {
        DetectorFrame::Sensor
    };
    let job = SequenceJob {
        config,
        source,
        platform: p.platform,
        detections,
        frames: options.frames.clone(),
        scratch_dir: Some(&staging),
        progress: options.progress,
        normalize: profile.as_ref().map(|p| &p.profile),
        fusion_frame,
        views: &views,
        classifier,
        stop: Some(&options.stop),
    };
    let (points, detections) = writer.frame_writers();
    let mut layer = run_sequence(&job, Some(FrameWriters { points, detections }))?;
    let write_started = Instant::now();
    writer.write_frames(&layer.frames)?;
    writer.write_detections(&layer.detections)?;
    let detections_written = writer.detections_written();
    let mut times = layer.times.clone();
    let truth = match &options.truth {
        Some(path) => Some(crate::eval::input::load_jsonl(path)?.boxes),
        None if layer.labels.iter().any(|l| !l.is_empty()) => Some(label_truth(&layer, &p.name, p.platform)),
        None => None,
    };
    // Scored against what the detectors could see: objects with returns inside their range
    // (from the config's detector manifests, so a `--from` run scores the same way).
    let reach = config
        .platform_detector_dirs(&options.config.path, p.platform)
        .iter()
        .filter_map(|dir| crate::detect::DetectorManifest::load(dir).ok())
        .map(|m| {
            let r = m.pillars.point_cloud_range;
            [r[0], r[1], r[3], r[4]].into_iter().fold(0.0f64, |a, b| a.max(b.abs()))
        })
        .reduce(f64::max);
    let truth = truth
        .map(|t| visible_truth(&t, reach))
        .filter(|_| config.origin == LayerOrigin::Detect);
    if truth.is_some() {
        // Pass 1 wrote the raw detections as it went; scoring reads them back.
        layer.detections = crate::shards::reader::read_detection_rows(&staging.join("detections.parquet"))?;
    }
    // The self-scores (fusion and tracking rerun on the truth) are computed while the box and
    // track files are written.
    let (boxes_writer, layer_ref) = (&mut writer, &layer);
    let (written, scores) = rayon::join(
        move || {
            boxes_writer
                .write_boxes(&layer_ref.boxes)
                .and_then(|()| boxes_writer.write_tracks(&layer_ref.tracks))
        },
        || {
            truth
                .map(|truth| {
                    score_layer(
                        &truth,
                        &layer,
                        &p.name,
                        p.platform,
                        &config.fusion,
                        fusion_frame,
                        &views,
                    )
                    .map_err(|e| PipelineError::Config(e.to_string()))
                })
                .transpose()
        },
    );
    written?;
    let scores = scores?;
    let counts = counts_of(&layer, detections_written);
    times.write_s = write_started.elapsed().as_secs_f64();
    times.total_s = started.elapsed().as_secs_f64();
    let manifest = RunManifest {
        schema_version: SCHEMA_VERSION.to_string(),
        boxlayer_version: env!("CARGO_PKG_VERSION").to_string(),
        sequence: p.name.clone(),
        platform: p.platform.as_str().to_string(),
        source_kind: source.meta().source_kind.to_string(),
        source: p.shown_path.clone(),
        origin: match config.origin {
            LayerOrigin::Detect => "detect",
            LayerOrigin::Labels => "labels",
        }
        .to_string(),
        started_from: if given.is_some() {
            "given detections".to_string()
        } else {
            options.from.as_str().to_string()
        },
        config_toml: options.config.resolved_toml.clone(),
        config_sha256: sha256_hex(options.config.resolved_toml.as_bytes()),
        detectors: records,
        counts: counts.clone(),
        stage_times: times.clone(),
        errors: layer.errors.clone(),
        scores: scores.as_ref().and_then(|s| serde_json::to_value(s).ok()),
        finished_unix_s: unix_now(),
        frames: options.identity().frames,
        normalization: profile.as_ref().map(|p| NormalizationRecord {
            profile: p.profile.name.clone(),
            origin: p.origin.clone(),
            sha256: p.sha256.clone(),
            profile_toml: toml::to_string(&p.profile).unwrap_or_default(),
        }),
        classifier: classifier.map(|c| ClassifierRecord {
            name: c.name().to_string(),
            path: config.camera.classifier.clone(),
            sha256: c.manifest().model.sha256.to_ascii_lowercase(),
        }),
    };
    let dir = writer.finish(&manifest)?;
    Ok((
        SequenceSummary {
            sequence: p.name.clone(),
            platform: p.platform,
            dir,
            counts,
            seconds: started.elapsed().as_secs_f64(),
            scores,
        },
        times,
    ))
}

fn counts_of(layer: &SequenceLayer, detections: u64) -> SequenceCounts {
    let mut by_class = BTreeMap::new();
    let mut by_origin = BTreeMap::new();
    for b in &layer.boxes {
        *by_class.entry(b.class.clone()).or_insert(0) += 1;
        *by_origin.entry(b.origin.clone()).or_insert(0) += 1;
    }
    SequenceCounts {
        frames: layer.frames.len() as u64,
        frames_skipped: layer.errors.len() as u64,
        points: layer.points_read,
        points_kept: layer.frames.iter().map(|f| f.num_points_kept as u64).sum(),
        detections,
        fused: layer.fused.iter().map(|f| f.len() as u64).sum(),
        boxes: layer.boxes.len() as u64,
        boxes_by_class: by_class,
        boxes_by_origin: by_origin,
        tracks: layer.tracks.len() as u64,
        flagged: layer.boxes.iter().filter(|b| b.review_status == "flagged").count() as u64,
    }
}

impl std::fmt::Display for RunSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let frames: u64 = self.sequences.iter().map(|s| s.counts.frames).sum();
        if let Some(share) = self.share {
            write!(f, "{share}: ")?;
        }
        writeln!(
            f,
            "{} sequences finished, {} skipped, {} failed; {} frames in {:.1} s ({:.2} sweeps/s)",
            self.sequences.len(),
            self.skipped.len(),
            self.failed.len(),
            frames,
            self.seconds,
            frames as f64 / self.seconds.max(1e-9)
        )?;
        writeln!(
            f,
            "{:<10} {:<36} {:>6} {:>7} {:>8} {:>7} {:>8}  boxes per class",
            "platform", "sequence", "frames", "skipped", "boxes", "tracks", "flagged"
        )?;
        for s in &self.sequences {
            let classes: Vec<String> = s
                .counts
                .boxes_by_class
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            writeln!(
                f,
                "{:<10} {:<36} {:>6} {:>7} {:>8} {:>7} {:>8}  {}",
                s.platform.as_str(),
                s.sequence,
                s.counts.frames,
                s.counts.frames_skipped,
                s.counts.boxes,
                s.counts.tracks,
                s.counts.flagged,
                classes.join(", ")
            )?;
            if let Some(sc) = &s.scores {
                let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{:.1}", 100.0 * v));
                writeln!(
                    f,
                    "  vs the truth: vehicle AP@0.7 {} (fused {}), pedestrian AP@0.5 {}, vehicle MOTA {}, \
                     vehicle headings right {} % (turned round {} %)",
                    pct(sc.consolidated.vehicle),
                    pct(sc.fused.vehicle),
                    pct(sc.consolidated.pedestrian),
                    sc.vehicle_mota.map_or_else(|| "-".to_string(), |m| format!("{m:.3}")),
                    pct(sc.vehicle_heading.map(|h| h.correct)),
                    pct(sc.vehicle_heading.map(|h| h.flipped)),
                )?;
            }
        }
        for s in &self.skipped {
            writeln!(f, "skipped {}/{}: {}", s.platform.as_str(), s.sequence, s.reason)?;
        }
        for s in &self.failed {
            writeln!(
                f,
                "FAILED  {}/{}: {}",
                s.platform.as_str(),
                s.sequence,
                error_chain(s.error.as_ref()).join(": ")
            )?;
        }
        if let Some(signal) = self.interrupted {
            writeln!(
                f,
                "STOPPED by signal {signal}: the sequences above finished; not finished: {}",
                if self.not_reached.is_empty() {
                    "none".to_string()
                } else {
                    self.not_reached.join(", ")
                }
            )?;
        }
        writeln!(
            f,
            "stage time: read {:.1} s, detect {:.1} s (ONNX {:.1} s; CPU, summed over frames), track {:.2} s, ground contact {:.2} s, box rows {:.2} s, RGB check {:.2} s, write {:.2} s",
            self.read_cpu_s,
            self.detect_cpu_s,
            self.onnx_cpu_s,
            self.track_s,
            self.ground_contact_s,
            self.describe_s,
            self.camera_s,
            self.write_s
        )?;
        if self.onnx_cpu_s > 0.0 {
            // The ONNX-bound limit: the sessions' own time spread over the pass's threads.
            let bound = self.onnx_cpu_s / self.threads.max(1) as f64;
            writeln!(
                f,
                "wall time / ONNX-bound limit ({:.1} s ONNX over {} threads): {:.2}",
                self.onnx_cpu_s,
                self.threads,
                self.seconds / bound
            )?;
        }
        Ok(())
    }
}
