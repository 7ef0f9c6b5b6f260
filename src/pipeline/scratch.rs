//! A sequence's points spilled to a scratch file during the per-frame pass, so the tracker's
//! evidence tests and the box rows' point counts read a frame again without holding every sweep
//! in memory or decoding the log a second time (a Waymo frame costs more to decode than to read
//! back raw). The file lives in the sequence's staging folder and goes with it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::cloud::PointCloud;
use crate::track::SweepPoints;

/// Bytes per point: x, y, z as little-endian float32.
const POINT_BYTES: u64 = 12;

/// Points of the frames of one sequence, by position in the pass (not by frame index).
pub(crate) struct ScratchPoints {
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    reader: Option<File>,
    /// `(byte offset, points)` per frame position.
    extents: Vec<(u64, u64)>,
    end: u64,
    /// Frames read most recently, so the tracker's and the rows' repeated reads hit memory.
    recent: Mutex<Vec<(usize, Arc<PointCloud>)>>,
}

/// Frames kept decoded in [`ScratchPoints`].
const RECENT_FRAMES: usize = 4;

impl ScratchPoints {
    /// Creates the scratch file at `path`.
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        let file = File::create(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            reader: None,
            extents: Vec::new(),
            end: 0,
            recent: Mutex::new(Vec::new()),
        })
    }

    /// Appends the next frame's points.
    pub(crate) fn push(&mut self, cloud: &PointCloud) -> std::io::Result<()> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("scratch points already sealed"))?;
        let mut bytes = Vec::with_capacity(cloud.len() * POINT_BYTES as usize);
        for ((x, y), z) in cloud.x().iter().zip(cloud.y()).zip(cloud.z()) {
            bytes.extend_from_slice(&x.to_le_bytes());
            bytes.extend_from_slice(&y.to_le_bytes());
            bytes.extend_from_slice(&z.to_le_bytes());
        }
        writer.write_all(&bytes)?;
        self.extents.push((self.end, cloud.len() as u64));
        self.end += bytes.len() as u64;
        Ok(())
    }

    /// Ends writing; reads may start.
    pub(crate) fn seal(&mut self) -> std::io::Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.into_inner().map_err(|e| e.into_error())?.flush()?;
        }
        self.reader = Some(File::open(&self.path)?);
        Ok(())
    }

    /// Frame at position `position` of the pass (x, y, z; intensity 0).
    pub(crate) fn read(&self, position: usize) -> Option<Arc<PointCloud>> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, cloud)) = recent.iter().find(|(p, _)| *p == position) {
            return Some(cloud.clone());
        }
        drop(recent);
        let (offset, n) = *self.extents.get(position)?;
        let mut bytes = vec![0u8; (n * POINT_BYTES) as usize];
        self.reader.as_ref()?.read_exact_at(&mut bytes, offset).ok()?;
        let n = n as usize;
        let (mut x, mut y, mut z) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for p in bytes.chunks_exact(POINT_BYTES as usize) {
            x.push(f32::from_le_bytes([p[0], p[1], p[2], p[3]]));
            y.push(f32::from_le_bytes([p[4], p[5], p[6], p[7]]));
            z.push(f32::from_le_bytes([p[8], p[9], p[10], p[11]]));
        }
        let cloud = Arc::new(PointCloud::from_columns(x, y, z, vec![0.0; n]).ok()?);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() >= RECENT_FRAMES {
            recent.remove(0);
        }
        recent.push((position, cloud.clone()));
        Some(cloud)
    }
}

impl SweepPoints for ScratchPoints {
    fn points_in_sensor(&self, frame: usize) -> Option<Arc<PointCloud>> {
        self.read(frame)
    }
}

impl Drop for ScratchPoints {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ScratchPoints::create(&dir.path().join("p.bin")).unwrap();
        let a = PointCloud::from_columns(vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, -6.5], vec![9.0, 9.0]).unwrap();
        let b = PointCloud::from_columns(vec![], vec![], vec![], vec![]).unwrap();
        let c = PointCloud::from_columns(vec![7.25], vec![8.0], vec![f32::MAX], vec![0.0]).unwrap();
        for cloud in [&a, &b, &c] {
            s.push(cloud).unwrap();
        }
        s.seal().unwrap();
        for (i, cloud) in [&a, &b, &c].into_iter().enumerate() {
            let back = s.read(i).unwrap();
            assert_eq!((back.x(), back.y(), back.z()), (cloud.x(), cloud.y(), cloud.z()));
        }
        assert!(s.read(3).is_none());
        let path = dir.path().join("p.bin");
        drop(s);
        assert!(!path.exists());
    }
}
