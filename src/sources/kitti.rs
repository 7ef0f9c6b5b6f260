//! KITTI-style `.bin` sweeps: little-endian float32 fields per point, one file per sweep; the
//! layout is `x, y, z, intensity` (KITTI) unless the config's `fields` names another, and a
//! nuScenes `*.pcd.bin` is `x, y, z, intensity, ring` by its name. A file whose size is not a whole
//! number of points of its layout is refused, never read with another. A single file is a
//! one-frame sequence; a folder of `.bin` files is a sequence in file name order. The format carries no time and no pose, so frame `i` is stamped `i × 100 ms` (a
//! 10 Hz LiDAR) and sits at the world origin; a data manifest or platform profile names the
//! platform (`vehicle` unless told).

use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde::{Deserialize, Serialize};

use super::layout::{Decoded, NonFinite, PointLayout};
use super::{SequenceMeta, Source, SourceError};
use crate::cloud::PointCloud;
use crate::frame::{Frame, Platform};

/// The `source_kind` of KITTI-style `.bin` sequences.
pub const KIND: &str = "kitti-bin";

/// The KITTI layout: four little-endian float32 per point.
const KITTI_FIELDS: [&str; 4] = ["x", "y", "z", "intensity"];

/// The nuScenes `*.pcd.bin` layout: five little-endian float32 per point.
const NUSCENES_FIELDS: [&str; 5] = ["x", "y", "z", "intensity", "ring"];

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
    /// The float32 fields of a point, in file order; `x`, `y`, `z` required, `intensity` used when
    /// present (else 0), other names skipped. Default empty: by file name, `*.pcd.bin` (nuScenes)
    /// `x, y, z, intensity, ring`, anything else KITTI's `x, y, z, intensity`.
    pub fields: Vec<String>,
    /// What to do with a point whose x, y or z is not finite; default drop and count it.
    pub non_finite: NonFinite,
}

impl Default for KittiConfig {
    fn default() -> Self {
        Self {
            platform: Platform::Vehicle,
            max_file_bytes: 512 << 20,
            fields: Vec::new(),
            non_finite: NonFinite::Drop,
        }
    }
}

/// Reads a KITTI-style `.bin` sweep with the default options: little-endian float32
/// `x, y, z, intensity` per point (`x, y, z, intensity, ring` for a `*.pcd.bin`).
pub fn read_kitti_bin(path: &Path) -> Result<PointCloud, SourceError> {
    read_bin(path, &KittiConfig::default()).map(|d| d.cloud)
}

/// The fields of `path`'s points under `config`.
fn layout(path: &Path, config: &KittiConfig) -> Vec<String> {
    if !config.fields.is_empty() {
        return config.fields.clone();
    }
    let nuscenes = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().ends_with(".pcd.bin"));
    let fields: &[&str] = if nuscenes { &NUSCENES_FIELDS } else { &KITTI_FIELDS };
    fields.iter().map(|f| f.to_string()).collect()
}

fn read_bin(path: &Path, config: &KittiConfig) -> Result<Decoded, SourceError> {
    let fields = layout(path, config);
    let layout = PointLayout::packed_f32(&fields)
        .map_err(|e| SourceError::corrupt(path, "layout", format!("{e} (`kitti.fields`)")))?;
    let max_file_bytes = config.max_file_bytes;
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
    layout.decode(&bytes, config.non_finite).map_err(|e| {
        let location = e.offset.map_or("file".to_string(), |o| format!("byte {o}"));
        SourceError::corrupt(
            path,
            location,
            format!("{}; set `kitti.fields` if the file has another layout", e.detail),
        )
    })
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
        let decoded = read_bin(path, &self.config)?;
        Ok(Frame {
            sequence: self.meta.name.clone(),
            index,
            timestamp_micros: index as i64 * FRAME_PERIOD_MICROS,
            platform: self.meta.platform,
            notes: decoded.note().into_iter().collect(),
            cloud: decoded.cloud,
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
        let capped = KittiConfig {
            max_file_bytes: 32,
            ..KittiConfig::default()
        };
        let e = read_bin(&path, &capped).unwrap_err().to_string();
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

    /// Issue 20's silent misread: a nuScenes `*.pcd.bin` (5 floats a point) read as KITTI's 4.
    /// By its name it is read with its own layout, to the same points as its first four columns
    /// written as a KITTI `.bin`; a size that fits no layout is refused saying so.
    #[test]
    fn a_nuscenes_pcd_bin_is_read_with_its_own_layout() {
        let dir = tempfile::tempdir().unwrap();
        let points: Vec<[f32; 5]> = (0..8)
            .map(|i| [i as f32, -(i as f32), 0.5, 0.1 * i as f32, 7.0])
            .collect();
        let nuscenes = dir.path().join("n008__LIDAR_TOP__1.pcd.bin");
        std::fs::write(
            &nuscenes,
            points
                .iter()
                .flatten()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        )
        .unwrap();
        let kitti = dir.path().join("000000.bin");
        write_bin(
            &kitti,
            &points.iter().map(|p| [p[0], p[1], p[2], p[3]]).collect::<Vec<_>>(),
        );
        // 8 five-float points are 160 bytes, also ten four-float ones: only the name tells.
        let a = read_kitti_bin(&nuscenes).unwrap();
        let b = read_kitti_bin(&kitti).unwrap();
        assert_eq!(a.len(), 8);
        assert_eq!(
            (a.x(), a.y(), a.z(), a.intensity()),
            (b.x(), b.y(), b.z(), b.intensity())
        );
        // The same bytes under a KITTI name and an explicit 5-field layout read the same.
        let renamed = dir.path().join("renamed.bin");
        std::fs::copy(&nuscenes, &renamed).unwrap();
        let config = KittiConfig {
            fields: ["x", "y", "z", "intensity", "ring"].map(String::from).to_vec(),
            ..KittiConfig::default()
        };
        assert_eq!(read_bin(&renamed, &config).unwrap().cloud.x(), b.x());
        // 7 points of 5 floats (140 bytes) fit no 4-float layout: refused, naming the layout.
        std::fs::write(&renamed, &std::fs::read(&nuscenes).unwrap()[..140]).unwrap();
        let e = read_kitti_bin(&renamed).unwrap_err().to_string();
        assert!(
            e.contains("byte 128: 140 bytes")
                && e.contains("x f32, y f32, z f32, intensity f32")
                && e.contains("kitti.fields"),
            "{e}"
        );
        let e = read_bin(
            &kitti,
            &KittiConfig {
                fields: vec!["x".into(), "y".into()],
                ..KittiConfig::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("layout: no field `z` (fields: x, y) (`kitti.fields`)"),
            "{e}"
        );
    }

    #[test]
    fn non_finite_points_are_dropped_into_the_frame_notes_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_bin(
            &dir.path().join("000000.bin"),
            &[[1.0, 2.0, 3.0, 0.5], [f32::NAN, 0.0, 0.0, 0.0], [4.0, 5.0, 6.0, 0.5]],
        );
        let source = KittiBinSource::open(dir.path(), KittiConfig::default()).unwrap();
        let frame = source.frame(0).unwrap();
        assert_eq!(frame.cloud.x(), &[1.0, 4.0]);
        assert_eq!(frame.notes, ["1 point with a non-finite x, y or z dropped"]);
        let strict = KittiConfig {
            non_finite: NonFinite::Fail,
            ..KittiConfig::default()
        };
        let e = KittiBinSource::open(dir.path(), strict)
            .unwrap()
            .frame(0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("000000.bin: byte 16: point 1 has a non-finite coordinate"),
            "{e}"
        );
    }
}
