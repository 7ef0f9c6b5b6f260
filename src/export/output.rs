//! An export's output folder, written under `OUT.partial/` and renamed into place when complete,
//! so an interrupted export never passes for a finished one.

use std::path::{Path, PathBuf};

use super::ExportError;
use crate::atomic_file::partial_path;

/// An output folder being written.
#[derive(Debug)]
pub struct OutputDir {
    target: PathBuf,
    staging: PathBuf,
    finished: bool,
}

impl OutputDir {
    /// Starts `target` (a leftover staging folder is removed).
    pub fn create(target: &Path) -> Result<Self, ExportError> {
        let staging = partial_path(target);
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| ExportError::io(&staging, e))?;
        }
        std::fs::create_dir_all(&staging).map_err(|e| ExportError::io(&staging, e))?;
        Ok(Self {
            target: target.to_path_buf(),
            staging,
            finished: false,
        })
    }

    /// The folder to write into.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Writes `bytes` to `rel` inside the folder, creating its parents.
    pub fn write(&self, rel: impl AsRef<Path>, bytes: &[u8]) -> Result<(), ExportError> {
        let path = self.staging.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ExportError::io(parent, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| ExportError::io(&path, e))
    }

    /// Renames the folder into place, replacing an older export of the same name.
    pub fn finish(mut self) -> Result<PathBuf, ExportError> {
        if self.target.exists() {
            let old = self.target.with_extension("old-export");
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| ExportError::io(&old, e))?;
            }
            std::fs::rename(&self.target, &old).map_err(|e| ExportError::io(&self.target, e))?;
            std::fs::rename(&self.staging, &self.target).map_err(|e| ExportError::io(&self.target, e))?;
            std::fs::remove_dir_all(&old).map_err(|e| ExportError::io(&old, e))?;
        } else {
            std::fs::rename(&self.staging, &self.target).map_err(|e| ExportError::io(&self.target, e))?;
        }
        self.finished = true;
        Ok(self.target.clone())
    }
}

impl Drop for OutputDir {
    /// An unfinished export leaves nothing behind.
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}
