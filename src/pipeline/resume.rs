//! What a run finds of a sequence on disk, and the lock that keeps two workers off one sequence.
//! A sequence folder is finished only with `_SUCCESS`; its `manifest.json` says which config
//! (sha256) and frame selection made it, which is what `--resume` compares. A failed attempt
//! leaves `<sequence>.failed.json` beside the folder until a later attempt succeeds. Locks are
//! `flock`s on `OUT/.locks/<platform>/<sequence>.lock`: the kernel drops them when the process
//! dies, so a killed worker never leaves a sequence locked.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PipelineError;
use crate::atomic_file::write_atomic;
use crate::shards::{RunManifest, SUCCESS_FILE};

/// Folder of the per-sequence lock files under a run's output folder.
pub const LOCKS_DIR: &str = ".locks";

/// Suffix of the record a failed sequence leaves beside its folder.
pub const FAILED_SUFFIX: &str = ".failed.json";

/// What made a finished sequence folder: the config's sha256 and the frame selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdentity {
    /// sha256 of the resolved config TOML.
    pub config_sha256: String,
    /// `--frames A..B`, when the run took only those positions.
    pub frames: Option<[u64; 2]>,
}

/// A sequence folder as a run finds it.
#[derive(Debug, Clone, PartialEq)]
pub enum OnDisk {
    /// Nothing under the final name.
    Absent,
    /// A folder without `_SUCCESS` (or whose manifest cannot be read): not usable.
    Incomplete,
    /// A finished folder made by this identity.
    Finished(RunIdentity),
}

/// Looks at `dir` (a sequence folder).
pub fn on_disk(dir: &Path) -> OnDisk {
    if !dir.exists() {
        return OnDisk::Absent;
    }
    if !dir.join(SUCCESS_FILE).is_file() {
        return OnDisk::Incomplete;
    }
    match std::fs::read_to_string(dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<RunManifest>(&t).ok())
    {
        Some(m) => OnDisk::Finished(RunIdentity {
            config_sha256: m.config_sha256,
            frames: m.frames,
        }),
        None => OnDisk::Incomplete,
    }
}

/// The record a failed sequence leaves: `<platform folder>/<sequence>.failed.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// The sequence.
    pub sequence: String,
    /// Its platform.
    pub platform: String,
    /// The error and its causes, outermost first.
    pub error: Vec<String>,
    /// sha256 of the config the attempt ran with.
    pub config_sha256: String,
    /// When it failed (seconds since the Unix epoch).
    pub failed_unix_s: u64,
}

/// Where `dir`'s failure record lives.
pub fn failure_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(FAILED_SUFFIX);
    dir.with_file_name(name)
}

/// Writes `dir`'s failure record (atomically).
pub fn record_failure(dir: &Path, record: &FailureRecord) -> Result<(), PipelineError> {
    let path = failure_path(dir);
    let text = serde_json::to_string_pretty(record).map_err(|e| PipelineError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&path, (text + "\n").as_bytes()).map_err(|source| PipelineError::Io { path, source })
}

/// Removes `dir`'s failure record, if any.
pub fn clear_failure(dir: &Path) -> Result<(), PipelineError> {
    let path = failure_path(dir);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(PipelineError::Io { path, source: e }),
        _ => Ok(()),
    }
}

/// Reads `dir`'s failure record, if any.
pub fn read_failure(dir: &Path) -> Option<FailureRecord> {
    let text = std::fs::read_to_string(failure_path(dir)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The causes of an error, outermost first, each once.
pub fn error_chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if out.last() != Some(&text) {
            out.push(text);
        }
        next = cause.source();
    }
    out
}

/// A held lock on one sequence of an output folder; released when dropped (or when the process
/// dies).
#[derive(Debug)]
pub struct SequenceLock {
    _file: File,
    path: PathBuf,
}

impl SequenceLock {
    /// Where the lock of `<out>/<platform>/<sequence>` lives.
    pub fn path(out: &Path, platform: &str, sequence: &str) -> PathBuf {
        out.join(LOCKS_DIR).join(platform).join(format!("{sequence}.lock"))
    }

    /// Takes the lock if no one holds it; `Ok(Err(holder))` names who does (their pid and host,
    /// as they wrote it).
    pub fn try_acquire(out: &Path, platform: &str, sequence: &str) -> Result<Result<Self, String>, PipelineError> {
        let path = Self::path(out, platform, sequence);
        let io = |source| PipelineError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                return Ok(Err(if holder.is_empty() {
                    "another worker".to_string()
                } else {
                    holder.to_string()
                }));
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let who = format!("pid {} on {}", std::process::id(), host.trim());
        file.set_len(0).map_err(io)?;
        file.write_all(who.as_bytes()).map_err(io)?;
        Ok(Ok(Self { _file: file, path }))
    }

    /// The lock file.
    pub fn file(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_refuses_a_second_taker_until_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = SequenceLock::try_acquire(tmp.path(), "drone", "seq_a")
            .unwrap()
            .unwrap();
        let holder = SequenceLock::try_acquire(tmp.path(), "drone", "seq_a")
            .unwrap()
            .unwrap_err();
        assert!(holder.contains(&format!("pid {}", std::process::id())), "{holder}");
        // Another sequence is free.
        let other = SequenceLock::try_acquire(tmp.path(), "drone", "seq_b").unwrap();
        assert!(other.is_ok());
        drop(first);
        assert!(SequenceLock::try_acquire(tmp.path(), "drone", "seq_a").unwrap().is_ok());
    }

    #[test]
    fn on_disk_tells_absent_incomplete_and_finished_folders_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("seq");
        assert_eq!(on_disk(&dir), OnDisk::Absent);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("boxes.parquet"), b"x").unwrap();
        assert_eq!(on_disk(&dir), OnDisk::Incomplete);
        // `_SUCCESS` beside an unreadable manifest is not trusted either.
        std::fs::write(dir.join(SUCCESS_FILE), b"").unwrap();
        assert_eq!(on_disk(&dir), OnDisk::Incomplete);
    }

    #[test]
    fn a_failure_record_round_trips_and_clears() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vehicle").join("seq");
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        let record = FailureRecord {
            sequence: "seq".into(),
            platform: "vehicle".into(),
            error: vec!["seq: frame 3".into(), "bad CRC".into()],
            config_sha256: "ab".into(),
            failed_unix_s: 1,
        };
        record_failure(&dir, &record).unwrap();
        assert_eq!(failure_path(&dir), tmp.path().join("vehicle").join("seq.failed.json"));
        assert_eq!(read_failure(&dir), Some(record));
        clear_failure(&dir).unwrap();
        assert_eq!(read_failure(&dir), None);
        clear_failure(&dir).unwrap();
    }
}
