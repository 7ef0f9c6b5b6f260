//! Files that appear whole or not at all: every writer in boxlayer writes to a temporary name in
//! the destination folder and renames it into place once the bytes are on disk, so a reader
//! (or a rerun after a crash) never mistakes a partial file for a complete one. It knows no
//! file format.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Suffix of a file being written; a folder holding one was interrupted.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// A file being written under a temporary name beside its final path; [`AtomicFile::commit`]
/// renames it into place, dropping it uncommitted removes it.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    partial: PathBuf,
    writer: Option<BufWriter<File>>,
}

/// The temporary name used while `path` is written (`dir/name.ext.partial`).
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(PARTIAL_SUFFIX);
    path.with_file_name(name)
}

impl AtomicFile {
    /// Creates `path`'s folder if needed and opens the temporary file for writing.
    pub fn create(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let partial = partial_path(path);
        let file = File::create(&partial)?;
        Ok(Self {
            path: path.to_path_buf(),
            partial,
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes, syncs and renames the file into place.
    pub fn commit(mut self) -> io::Result<()> {
        let writer = self
            .writer
            .take()
            .ok_or_else(|| io::Error::other("atomic file already closed"))?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.partial, &self.path)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.writer.as_mut() {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("atomic file already closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            // Never committed: the bytes are incomplete, so the temporary file goes.
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Writes `bytes` to `path` atomically (temporary name, sync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_file_appears_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.json");
        write_atomic(&path, b"{\"a\":1}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}");
        assert!(!partial_path(&path).exists());
    }

    #[test]
    fn an_uncommitted_file_never_appears_under_its_final_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.parquet");
        {
            let mut f = AtomicFile::create(&path).unwrap();
            f.write_all(b"half").unwrap();
            assert!(partial_path(&path).exists());
        }
        assert!(!path.exists());
        assert!(!partial_path(&path).exists());
    }

    #[test]
    fn commit_replaces_an_older_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.txt");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(partial_path(&path).file_name().unwrap(), "c.txt.partial");
    }
}
