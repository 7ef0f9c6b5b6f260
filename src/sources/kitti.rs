//! KITTI-style `.bin` sweeps: little-endian float32 `x, y, z, intensity` per point, one file per
//! sweep. A single file is a one-frame sequence; a folder of `.bin` files is a sequence in file
//! name order. The format carries no time and no pose, so frame `i` is stamped `i × 100 ms` (a
//! 10 Hz LiDAR) and sits at the world origin; a data manifest or platform profile names the
//! platform (`vehicle` unless told).

use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde::{Deserialize, Serialize};

use super::{SequenceMeta, Source, SourceError};
use crate::cloud::PointCloud;
use crate::frame::{Frame, Platform};

/// The `source_kind` of KITTI-style `.bin` sequences.
pub const KIND: &str = "kitti-bin";

/// Bytes of one point: four little-endian float32.
const POINT_BYTES: usize = 16;

/// Time between frames given to a sequence of `.bin` files (µs): a 10 Hz LiDAR.
pub const FRAME_PERIOD_MICROS: i64 = 100_000;

/// Options of the `.bin` reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KittiConfig {
    /// The platform that recorded the sweeps; default `vehicle`.
    pub platform: Platform,
    /// Largest file read, in bytes (a guard against a device or a huge file); default 512 MiB.
    pub max_file_bytes: u64,
}

impl Default for KittiConfig {
    fn default() -> Self {
        Self {
            platform: Platform::Vehicle,
            max_file_bytes: 512 << 20,
        }
    }
}

/// Reads a KITTI-style `.bin` sweep: little-endian float32 `x, y, z, intensity` per point.
pub fn read_kitti_bin(path: &Path) -> Result<PointCloud, SourceError> {
    read_bin_capped(path, KittiConfig::default().max_file_bytes)
}

fn read_bin_capped(path: &Path, max_file_bytes: u64) -> Result<PointCloud, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| SourceError::io(path, e))?;
    if !meta.is_file() {
        return Err(SourceError::corrupt(path, "file", "not a regular file"));
    }
    if meta.len() > max_file_bytes {
        return Err(SourceError::corrupt(
            path,
            "file",
            format!(
                "{} bytes is over the {max_file_bytes}-byte limit (`max_file_bytes`)",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| SourceError::io(path, e))?;
    if bytes.len() % POINT_BYTES != 0 {
        return Err(SourceError::corrupt(
            path,
            "file",
            format!(
                "{} bytes is not a whole number of 16-byte points (float32 x, y, z, intensity)",
                bytes.len()
            ),
        ));
    }
    let n = bytes.len() / POINT_BYTES;
    let mut columns = [
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    ];
    for point in bytes.chunks_exact(POINT_BYTES) {
        for (column, value) in columns.iter_mut().zip(point.chunks_exact(4)) {
            column.push(f32::from_le_bytes([value[0], value[1], value[2], value[3]]));
        }
    }
    let [x, y, z, intensity] = columns;
    PointCloud::from_columns(x, y, z, intensity).map_err(|e| SourceError::corrupt(path, "file", e.to_string()))
}

/// A sequence of KITTI-style `.bin` sweeps.
#[derive(Debug)]
pub struct KittiBinSource {
    meta: SequenceMeta,
    files: Vec<PathBuf>,
    config: KittiConfig,
}

fn is_bin(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("bin"))
}

impl KittiBinSource {
    /// Opens a `.bin` file or a folder of them; anything else is [`SourceError::Incompatible`].
    pub fn open(path: &Path, config: KittiConfig) -> Result<Self, SourceError> {
        let incompatible = || SourceError::Incompatible {
            path: path.to_path_buf(),
            kind: "KITTI .bin",
        };
        let files = if path.is_dir() {
            let mut files = Vec::new();
            for entry in std::fs::read_dir(path).map_err(|e| SourceError::io(path, e))? {
                let entry = entry.map_err(|e| SourceError::io(path, e))?;
                if is_bin(&entry.path()) {
                    files.push(entry.path());
                }
            }
            if files.is_empty() {
                return Err(incompatible());
            }
            files.sort();
            files
        } else if is_bin(path) {
            vec![path.to_path_buf()]
        } else {
            return Err(incompatible());
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kitti".to_string());
        Ok(Self {
            meta: SequenceMeta {
                name,
                platform: config.platform,
                source_kind: KIND,
                path: path.to_path_buf(),
                skipped: Vec::new(),
            },
            files,
            config,
        })
    }
}

impl Source for KittiBinSource {
    fn meta(&self) -> &SequenceMeta {
        &self.meta
    }

    fn len(&self) -> usize {
        self.files.len()
    }

    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let path = self.files.get(index).ok_or_else(|| SourceError::FrameOutOfRange {
            path: self.meta.path.clone(),
            index,
            len: self.files.len(),
        })?;
        let cloud = read_bin_capped(path, self.config.max_file_bytes)?;
        Ok(Frame {
            sequence: self.meta.name.clone(),
            index,
            timestamp_micros: index as i64 * FRAME_PERIOD_MICROS,
            platform: self.meta.platform,
            cloud,
            world_from_sensor: Isometry3::identity(),
            imu: Vec::new(),
            cameras: Vec::new(),
            ground_truth: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_bin(path: &Path, points: &[[f32; 4]]) {
        let bytes: Vec<u8> = points.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_folder_is_a_sequence_in_name_order_at_10_hz() {
        let dir = tempfile::tempdir().unwrap();
        write_bin(&dir.path().join("000001.bin"), &[[1.0, 2.0, 3.0, 0.5]]);
        write_bin(
            &dir.path().join("000000.bin"),
            &[[4.0, 5.0, 6.0, 0.25], [7.0, 8.0, 9.0, 1.0]],
        );
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let source = KittiBinSource::open(dir.path(), KittiConfig::default()).unwrap();
        assert_eq!(source.len(), 2);
        let f0 = source.frame(0).unwrap();
        assert_eq!(f0.cloud.x(), &[4.0, 7.0]);
        assert_eq!(f0.cloud.intensity(), &[0.25, 1.0]);
        let f1 = source.frame(1).unwrap();
        assert_eq!((f1.index, f1.timestamp_micros), (1, 100_000));
        assert_eq!(f1.cloud.z(), &[3.0]);
        assert!(matches!(
            source.frame(2),
            Err(SourceError::FrameOutOfRange { index: 2, len: 2, .. })
        ));
    }

    #[test]
    fn a_ragged_or_oversized_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.bin");
        std::fs::write(&path, [0u8; 18]).unwrap();
        let e = read_kitti_bin(&path).unwrap_err().to_string();
        assert!(e.contains("bad.bin") && e.contains("18 bytes"), "{e}");
        write_bin(&path, &[[0.0; 4]; 4]);
        let e = read_bin_capped(&path, 32).unwrap_err().to_string();
        assert!(e.contains("over the 32-byte limit"), "{e}");
        // Issue 18: a `.bin` that is a symlink to a device was read without limit.
        let device = dir.path().join("zero.bin");
        std::os::unix::fs::symlink("/dev/zero", &device).unwrap();
        let e = read_kitti_bin(&device).unwrap_err().to_string();
        assert!(e.contains("zero.bin") && e.contains("not a regular file"), "{e}");
        let other = dir.path().join("x.pcd");
        std::fs::write(&other, "").unwrap();
        assert!(matches!(
            KittiBinSource::open(&other, KittiConfig::default()),
            Err(SourceError::Incompatible { .. })
        ));
    }
}
