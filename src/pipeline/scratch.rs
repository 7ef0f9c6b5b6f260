//! A sequence's points spilled to a scratch file during the per-frame pass, so the tracker's
//! evidence tests and the box rows' point counts read a frame again without holding every sweep
//! in memory or decoding the log a second time (a Waymo frame costs more to decode than to read
//! back raw). Each frame is stored sorted by bird's-eye-view cell (`geometry::BevCells`) after
//! its cell starts, so a points-in-box count reads only the few rows of cells the box can touch:
//! the tracker's queries, which jump about the sequence, need no cache of whole sweeps. The file
//! lives in the sequence's staging folder and goes with it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::cloud::PointCloud;
use crate::geometry::{BevCells, BevLayout, Box3, count_points_in_box_xyz};
use crate::track::{IndexedCount, SweepPoints};

/// Bytes per point: x, y, z as little-endian float32.
const POINT_BYTES: u64 = 12;

/// Where one frame lies in the file.
#[derive(Debug, Clone, Copy)]
struct Extent {
    /// Offset of its `cells + 1` cell starts (u32), followed by its points.
    offset: u64,
    /// Points.
    points: u64,
    /// Its grid.
    layout: BevLayout,
}

impl Extent {
    fn points_offset(&self) -> u64 {
        self.offset + 4 * (self.layout.cells() as u64 + 1)
    }
}

/// Points of the frames of one sequence, by position in the pass (not by frame index).
pub(crate) struct ScratchPoints {
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    reader: Option<File>,
    extents: Vec<Extent>,
    end: u64,
    /// Frames read most recently, so the rows' repeated reads hit memory.
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

    /// Appends the next frame's points (x, y, z), sorted by cell after the cell starts.
    pub(crate) fn push(&mut self, cloud: &PointCloud) -> std::io::Result<()> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("scratch points already sealed"))?;
        let (cells, order) = BevCells::bin(cloud.x(), cloud.y());
        let mut bytes = Vec::with_capacity(4 * cells.starts().len() + order.len() * POINT_BYTES as usize);
        for s in cells.starts() {
            bytes.extend_from_slice(&s.to_le_bytes());
        }
        let (x, y, z) = (cloud.x(), cloud.y(), cloud.z());
        for &k in &order {
            let k = k as usize;
            bytes.extend_from_slice(&x[k].to_le_bytes());
            bytes.extend_from_slice(&y[k].to_le_bytes());
            bytes.extend_from_slice(&z[k].to_le_bytes());
        }
        writer.write_all(&bytes)?;
        self.extents.push(Extent {
            offset: self.end,
            points: order.len() as u64,
            layout: cells.layout(),
        });
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

    /// Frame at position `position` of the pass (x, y, z in cell order; intensity 0).
    pub(crate) fn read(&self, position: usize) -> Option<Arc<PointCloud>> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, cloud)) = recent.iter().find(|(p, _)| *p == position) {
            return Some(cloud.clone());
        }
        drop(recent);
        let extent = self.extents.get(position)?;
        let n = extent.points as usize;
        let bytes = self.read_bytes(extent.points_offset(), n * POINT_BYTES as usize)?;
        let (x, y, z) = columns(&bytes);
        let cloud = Arc::new(PointCloud::from_columns(x, y, z, vec![0.0; n]).ok()?);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() >= RECENT_FRAMES {
            recent.remove(0);
        }
        recent.push((position, cloud.clone()));
        Some(cloud)
    }

    /// Points of the frame at `position` inside `b` (sensor frame), read row of cells by row.
    pub(crate) fn count_in_box(&self, position: usize, b: &Box3) -> Option<usize> {
        let extent = self.extents.get(position)?;
        let mut inside = 0;
        self.read_runs(extent, extent.layout.cell_runs(b), |bytes| {
            let (x, y, z) = columns(bytes);
            inside += count_points_in_box_xyz(&x, &y, &z, b);
        })?;
        Some(inside)
    }

    /// Points of the frame at `position` in the cells the disc of radius `r` around `centre`
    /// (x, y, sensor frame) can touch: all of the disc's and some around it.
    pub(crate) fn near(&self, position: usize, centre: [f64; 2], r: f64) -> Option<Vec<[f32; 3]>> {
        let extent = self.extents.get(position)?;
        let mut out = Vec::new();
        self.read_runs(extent, extent.layout.disc_runs(centre, r), |bytes| {
            out.extend(bytes.chunks_exact(POINT_BYTES as usize).map(point));
        })?;
        Some(out)
    }

    /// Hands `each` the interleaved points of each run of cells of a frame; `None` on a failed read.
    fn read_runs(
        &self,
        extent: &Extent,
        runs: impl Iterator<Item = std::ops::Range<usize>>,
        mut each: impl FnMut(&[u8]),
    ) -> Option<()> {
        for cells in runs {
            let starts = self.read_bytes(extent.offset + 4 * cells.start as u64, 4 * (cells.len() + 1))?;
            let start_of = |k: usize| u32::from_le_bytes([starts[k], starts[k + 1], starts[k + 2], starts[k + 3]]);
            let (from, to) = (start_of(0) as u64, start_of(4 * cells.len()) as u64);
            if to <= from {
                continue;
            }
            let bytes = self.read_bytes(
                extent.points_offset() + from * POINT_BYTES,
                ((to - from) * POINT_BYTES) as usize,
            )?;
            each(&bytes);
        }
        Some(())
    }

    fn read_bytes(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.reader.as_ref()?.read_exact_at(&mut bytes, offset).ok()?;
        Some(bytes)
    }
}

/// x, y, z columns of interleaved little-endian float32 points.
fn columns(bytes: &[u8]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = bytes.len() / POINT_BYTES as usize;
    let (mut x, mut y, mut z) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for [px, py, pz] in bytes.chunks_exact(POINT_BYTES as usize).map(point) {
        x.push(px);
        y.push(py);
        z.push(pz);
    }
    (x, y, z)
}

/// One interleaved little-endian float32 point (`POINT_BYTES` bytes).
fn point(p: &[u8]) -> [f32; 3] {
    let f = |k: usize| f32::from_le_bytes([p[k], p[k + 1], p[k + 2], p[k + 3]]);
    [f(0), f(4), f(8)]
}

impl SweepPoints for ScratchPoints {
    fn points_in_sensor(&self, frame: usize) -> Option<Arc<PointCloud>> {
        self.read(frame)
    }

    fn count_in_box(&self, frame: usize, box_in_sensor: &Box3) -> IndexedCount {
        if frame >= self.extents.len() {
            return IndexedCount::NoPoints;
        }
        // A read that fails leaves the count to the caller's own read, which reports nothing.
        self.count_in_box(frame, box_in_sensor)
            .map_or(IndexedCount::NotIndexed, IndexedCount::Inside)
    }

    fn points_near(&self, frame: usize, centre: [f64; 2], radius_m: f64) -> Option<Vec<[f32; 3]>> {
        self.near(frame, centre, radius_m)
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
        let a = PointCloud::from_columns(
            vec![1.0, 9.0, 2.0],
            vec![3.0, -4.0, 4.0],
            vec![5.0, 0.5, -6.5],
            vec![9.0; 3],
        )
        .unwrap();
        let b = PointCloud::from_columns(vec![], vec![], vec![], vec![]).unwrap();
        let c = PointCloud::from_columns(vec![7.25], vec![8.0], vec![f32::MAX], vec![0.0]).unwrap();
        for cloud in [&a, &b, &c] {
            s.push(cloud).unwrap();
        }
        s.seal().unwrap();
        // The same points, in cell order.
        let points = |c: &PointCloud| {
            let mut p: Vec<[u32; 3]> = (0..c.len())
                .map(|i| [c.x()[i].to_bits(), c.y()[i].to_bits(), c.z()[i].to_bits()])
                .collect();
            p.sort_unstable();
            p
        };
        for (i, cloud) in [&a, &b, &c].into_iter().enumerate() {
            assert_eq!(points(&s.read(i).unwrap()), points(cloud));
        }
        assert!(s.read(3).is_none());
        let path = dir.path().join("p.bin");
        drop(s);
        assert!(!path.exists());
    }

    /// Counts read row by row from the file equal brute-force counts on the frame's points, for
    /// boxes of every heading and size across three frames; an empty frame counts 0, a frame
    /// past the end has no points.
    #[test]
    fn counts_from_the_file_equal_brute_force() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ScratchPoints::create(&dir.path().join("p.bin")).unwrap();
        let clouds: Vec<PointCloud> = (0..3)
            .map(|f| {
                let n = if f == 1 { 0 } else { 5_000 + 1_000 * f };
                let v = |k: usize, m: usize| ((k * m + f * 11) % 1009) as f32 / 1009.0;
                PointCloud::from_columns(
                    (0..n).map(|k| v(k, 31) * 60.0 - 30.0).collect(),
                    (0..n).map(|k| v(k, 17) * 50.0 - 20.0).collect(),
                    (0..n).map(|k| v(k, 7) * 3.0 - 1.0).collect(),
                    vec![0.0; n],
                )
                .unwrap()
            })
            .collect();
        for c in &clouds {
            s.push(c).unwrap();
        }
        s.seal().unwrap();
        for (f, cloud) in clouds.iter().enumerate() {
            for k in 0..40 {
                let b = Box3::from_array([
                    -32.0 + 1.6 * k as f64,
                    -22.0 + 1.3 * k as f64,
                    0.2,
                    0.6 + 0.2 * k as f64,
                    0.5 + 0.1 * k as f64,
                    1.5,
                    0.41 * k as f64,
                    0.02,
                    -0.03,
                ]);
                let expected = crate::geometry::count_points_in_box(cloud, &b);
                assert_eq!(
                    SweepPoints::count_in_box(&s, f, &b),
                    IndexedCount::Inside(expected),
                    "frame {f}: {b:?}"
                );
            }
        }
        let b = Box3::new(0.0, 0.0, 0.0, 4.0, 2.0, 1.5, 0.0);
        assert_eq!(SweepPoints::count_in_box(&s, 3, &b), IndexedCount::NoPoints);
    }
}
