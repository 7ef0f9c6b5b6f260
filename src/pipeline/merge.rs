//! `boxlayer merge`: gathers what the workers of a run left in one output folder into
//! `dataset.json` — every sequence with its platform, counts, config hash, schema version and
//! per-frame errors — and says whether the dataset is complete: every sequence of the data
//! manifest present once, finished, and made by one config. What is missing, failed or made by
//! another config comes with the `boxlayer run` command that redoes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::resume::{FAILED_SUFFIX, OnDisk, on_disk, read_failure};
use super::{LoadedConfig, PipelineError, RunOptions, plan};
use crate::atomic_file::write_atomic;
use crate::shards::{FrameError, RunManifest, SequenceCounts, is_temporary_name};

/// The file `merge` writes in the output folder.
pub const DATASET_FILE: &str = "dataset.json";

/// One sequence as the merge found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSequence {
    /// The sequence.
    pub sequence: String,
    /// Its platform (the folder it lies in).
    pub platform: String,
    /// `complete`, `failed`, `incomplete` (a folder without `_SUCCESS`), `missing` or
    /// `other_config`.
    pub status: String,
    /// Its folder relative to the output folder; `None` when there is none.
    pub dir: Option<String>,
    /// The config sha256 that made it.
    pub config_sha256: Option<String>,
    /// Its shard schema version.
    pub schema_version: Option<String>,
    /// Its counts.
    pub counts: Option<SequenceCounts>,
    /// Frames and records it could not use.
    pub errors: Vec<FrameError>,
    /// Why the last attempt failed (its error chain), for `failed`.
    pub failure: Vec<String>,
}

/// The contents of `dataset.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetManifest {
    /// Whether every expected sequence is present once, finished, by one config.
    pub complete: bool,
    /// The config sha256 of the dataset (the given config's, else the one most sequences share).
    pub config_sha256: Option<String>,
    /// Shard schema versions found.
    pub schema_versions: Vec<String>,
    /// Sequence counts by status.
    pub status_counts: BTreeMap<String, u64>,
    /// Frames, skipped frames, boxes, tracks and flagged boxes over the complete sequences.
    pub totals: BTreeMap<String, u64>,
    /// Boxes per class over the complete sequences.
    pub boxes_by_class: BTreeMap<String, u64>,
    /// Every sequence, by platform then name.
    pub sequences: Vec<DatasetSequence>,
    /// Sequence folders found that the data manifest does not list.
    pub not_in_manifest: Vec<String>,
    /// Sequences found under more than one platform folder.
    pub duplicated: Vec<String>,
}

/// What `merge` found and wrote.
#[derive(Debug, Clone)]
pub struct MergeReport {
    /// `dataset.json`'s contents.
    pub dataset: DatasetManifest,
    /// Where it was written.
    pub path: PathBuf,
    /// Commands that finish the dataset (empty when complete).
    pub redo: Vec<String>,
}

/// Merges the sequence folders under `out`. With the run's config (and the `--data-root` it
/// ran with, for the commands printed) the data manifest says which sequences belong; without
/// it, the folders found are the dataset.
pub fn merge(out: &Path, config: Option<&LoadedConfig>, data_root: &Path) -> Result<MergeReport, PipelineError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PipelineError::Io { path, source }
    };
    if !out.is_dir() {
        return Err(PipelineError::Io {
            path: out.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such output folder"),
        });
    }
    // What lies on disk: (sequence → [(platform, folder)]), from every platform folder.
    let mut found: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    let mut platforms: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(io(out))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    platforms.sort();
    for pdir in &platforms {
        let platform = pdir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for entry in std::fs::read_dir(pdir).map_err(io(pdir))? {
            let path = entry.map_err(io(pdir))?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let sequence = if path.is_dir() && !is_temporary_name(&name) {
                name.clone()
            } else if let Some(stem) = name.strip_suffix(FAILED_SUFFIX)
                && path.is_file()
            {
                stem.to_string()
            } else {
                continue;
            };
            let at = found.entry(sequence).or_default();
            if !at.iter().any(|(p, _)| p == &platform) {
                at.push((platform.clone(), pdir.join(at_name(&path, &name))));
            }
        }
    }

    let expected: Option<Vec<(String, String)>> = match config {
        Some(loaded) => {
            let mut options = RunOptions::new(loaded.clone(), out.to_path_buf());
            options.data_root = data_root.to_path_buf();
            Some(
                plan(&options)?
                    .into_iter()
                    .map(|p| (p.name, p.platform.as_str().to_string()))
                    .collect(),
            )
        }
        None => None,
    };
    let ours = config.map(|c| super::sha256_hex(c.resolved_toml.as_bytes()));

    let mut sequences = Vec::new();
    let mut duplicated = Vec::new();
    let mut not_in_manifest = Vec::new();
    let mut names: Vec<(String, Option<String>)> = match &expected {
        Some(list) => list.iter().map(|(n, p)| (n.clone(), Some(p.clone()))).collect(),
        None => found.keys().map(|n| (n.clone(), None)).collect(),
    };
    if let Some(list) = &expected {
        for name in found.keys() {
            if !list.iter().any(|(n, _)| n == name) {
                not_in_manifest.push(name.clone());
            }
        }
    }
    names.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    for (name, platform) in names {
        let places = found.get(&name).cloned().unwrap_or_default();
        if places.len() > 1 {
            duplicated.push(name.clone());
        }
        let place = match &platform {
            Some(p) => places.iter().find(|(q, _)| q == p).cloned(),
            None => places.first().cloned(),
        };
        sequences.push(describe(out, &name, platform.as_deref(), place));
    }

    // The dataset's config: the given one, else the one most finished sequences share.
    let mut by_hash: BTreeMap<String, usize> = BTreeMap::new();
    for s in sequences.iter().filter(|s| s.status == "complete") {
        if let Some(h) = &s.config_sha256 {
            *by_hash.entry(h.clone()).or_default() += 1;
        }
    }
    let config_sha256 = ours.clone().or_else(|| {
        by_hash
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(h, _)| h.clone())
    });
    for s in &mut sequences {
        if s.status == "complete" && s.config_sha256 != config_sha256 {
            s.status = "other_config".to_string();
        }
    }
    let mut status_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut boxes_by_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut schema_versions: Vec<String> = Vec::new();
    for s in &sequences {
        *status_counts.entry(s.status.clone()).or_default() += 1;
        if let Some(v) = &s.schema_version
            && !schema_versions.contains(v)
        {
            schema_versions.push(v.clone());
        }
        if s.status != "complete" {
            continue;
        }
        if let Some(c) = &s.counts {
            for (key, value) in [
                ("frames", c.frames),
                ("frames_skipped", c.frames_skipped),
                ("boxes", c.boxes),
                ("tracks", c.tracks),
                ("flagged", c.flagged),
                ("detections", c.detections),
            ] {
                *totals.entry(key.to_string()).or_default() += value;
            }
            for (class, n) in &c.boxes_by_class {
                *boxes_by_class.entry(class.clone()).or_default() += n;
            }
        }
    }
    schema_versions.sort();
    let complete = !sequences.is_empty()
        && sequences.iter().all(|s| s.status == "complete")
        && duplicated.is_empty()
        && not_in_manifest.is_empty();
    let dataset = DatasetManifest {
        complete,
        config_sha256,
        schema_versions,
        status_counts,
        totals,
        boxes_by_class,
        sequences,
        not_in_manifest,
        duplicated,
    };
    let redo = redo_commands(&dataset, config, out, data_root);
    let path = out.join(DATASET_FILE);
    let text = serde_json::to_string_pretty(&dataset).map_err(|e| PipelineError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&path, (text + "\n").as_bytes()).map_err(io(&path))?;
    Ok(MergeReport { dataset, path, redo })
}

/// The folder a found entry stands for (`x.failed.json` stands for `x/`).
fn at_name(path: &Path, name: &str) -> String {
    match name.strip_suffix(FAILED_SUFFIX) {
        Some(stem) if path.is_file() => stem.to_string(),
        _ => name.to_string(),
    }
}

fn describe(out: &Path, name: &str, platform: Option<&str>, place: Option<(String, PathBuf)>) -> DatasetSequence {
    let mut s = DatasetSequence {
        sequence: name.to_string(),
        platform: platform.map(str::to_string).unwrap_or_default(),
        status: "missing".to_string(),
        dir: None,
        config_sha256: None,
        schema_version: None,
        counts: None,
        errors: Vec::new(),
        failure: Vec::new(),
    };
    let Some((platform, dir)) = place else {
        return s;
    };
    s.platform = platform;
    let state = on_disk(&dir);
    if state != OnDisk::Absent {
        s.dir = Some(dir.strip_prefix(out).unwrap_or(&dir).to_string_lossy().into_owned());
    }
    if let OnDisk::Finished(_) = state
        && let Some(m) = std::fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<RunManifest>(&t).ok())
    {
        s.status = "complete".to_string();
        s.config_sha256 = Some(m.config_sha256);
        s.schema_version = Some(m.schema_version);
        s.counts = Some(m.counts);
        s.errors = m.errors;
    } else if state == OnDisk::Incomplete {
        s.status = "incomplete".to_string();
    }
    // The latest attempt failed: say so, even where an older finished folder stands.
    if let Some(failure) = read_failure(&dir) {
        s.status = "failed".to_string();
        s.failure = failure.error;
    }
    s
}

fn redo_commands(
    dataset: &DatasetManifest,
    config: Option<&LoadedConfig>,
    out: &Path,
    data_root: &Path,
) -> Vec<String> {
    let names = |statuses: &[&str]| -> Vec<String> {
        dataset
            .sequences
            .iter()
            .filter(|s| statuses.contains(&s.status.as_str()))
            .map(|s| s.sequence.clone())
            .collect()
    };
    let config_path = config.map_or_else(|| "CONFIG.toml".to_string(), |c| c.path.display().to_string());
    let command = |names: &[String], force: bool| {
        format!(
            "boxlayer run {} --data-root {} --out {} --resume{} --sequences {}",
            config_path,
            data_root.display(),
            out.display(),
            if force { " --force" } else { "" },
            names.join(",")
        )
    };
    let mut out_commands = Vec::new();
    let redo = names(&["missing", "failed", "incomplete"]);
    if !redo.is_empty() {
        out_commands.push(command(&redo, false));
    }
    let other = names(&["other_config"]);
    if !other.is_empty() {
        out_commands.push(command(&other, true));
    }
    out_commands
}

impl std::fmt::Display for MergeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.dataset;
        let counts: Vec<String> = d.status_counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        writeln!(
            f,
            "{}: {} sequences ({}), {} frames, {} boxes, {} tracks",
            self.path.display(),
            d.sequences.len(),
            counts.join(", "),
            d.totals.get("frames").copied().unwrap_or(0),
            d.totals.get("boxes").copied().unwrap_or(0),
            d.totals.get("tracks").copied().unwrap_or(0),
        )?;
        for s in d.sequences.iter().filter(|s| s.status != "complete") {
            let why = match s.status.as_str() {
                "failed" => format!(": {}", s.failure.join(": ")),
                "other_config" => format!(": made by config {}", s.config_sha256.as_deref().unwrap_or("?")),
                _ => String::new(),
            };
            writeln!(f, "  {:<12} {}/{}{why}", s.status, s.platform, s.sequence)?;
        }
        for name in &d.duplicated {
            writeln!(f, "  duplicated   {name} (under more than one platform folder)")?;
        }
        for name in &d.not_in_manifest {
            writeln!(f, "  not listed   {name} (not in the data manifest)")?;
        }
        if d.complete {
            writeln!(
                f,
                "complete: every sequence finished once, by config {}",
                d.config_sha256.as_deref().unwrap_or("?")
            )?;
        } else {
            writeln!(f, "incomplete; to finish it:")?;
            for c in &self.redo {
                writeln!(f, "  {c}")?;
            }
        }
        Ok(())
    }
}
