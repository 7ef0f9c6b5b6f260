//! The source registry: every reader by [`SourceKind`], and [`open`], which opens a path with
//! the named reader or tries each in turn (each refuses a foreign file fast with
//! [`SourceError::Incompatible`] before reading data).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::kitti::{KittiBinSource, KittiConfig};
use super::m3ed::{M3edConfig, M3edSource};
use super::mcap::{McapConfig, McapSource};
use super::npy::{NpyConfig, NpySource};
use super::pcd::{PcdConfig, PcdSource};
use super::waymo::{WaymoConfig, WaymoV1Source, WaymoV2Source};
use super::{Source, SourceError};

/// The readers boxlayer has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SourceKind {
    /// A Waymo Open Dataset v1 segment (`*.tfrecord`).
    #[serde(rename = "waymo-v1")]
    WaymoV1,
    /// A Waymo Open Dataset v2 split folder (one Parquet file per component and segment).
    #[serde(rename = "waymo-v2")]
    WaymoV2,
    /// An M3ED `*_data.h5` file (with `*_pose_gt.h5` beside it).
    #[serde(rename = "m3ed")]
    M3ed,
    /// A KITTI-style `.bin` sweep, a folder of them, or a KITTI sequence folder (`velodyne/` inside).
    #[serde(rename = "kitti-bin")]
    KittiBin,
    /// A PCL `.pcd` sweep or a folder of them.
    #[serde(rename = "pcd")]
    Pcd,
    /// A NumPy `.npy` sweep or a folder of them.
    #[serde(rename = "npy")]
    Npy,
    /// A ROS 2 bag in MCAP (`*.mcap`) with `sensor_msgs/PointCloud2` sweeps.
    #[serde(rename = "mcap")]
    Mcap,
}

impl SourceKind {
    /// Every kind, in the order [`open`] tries them.
    pub const ALL: [SourceKind; 7] = [
        SourceKind::WaymoV1,
        SourceKind::M3ed,
        SourceKind::WaymoV2,
        SourceKind::KittiBin,
        SourceKind::Pcd,
        SourceKind::Npy,
        SourceKind::Mcap,
    ];

    /// The name used in configs, data manifests and shards (`waymo-v1`, `waymo-v2`, `m3ed`, `kitti-bin`, `pcd`, `npy`, `mcap`).
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::WaymoV1 => "waymo-v1",
            SourceKind::WaymoV2 => "waymo-v2",
            SourceKind::M3ed => "m3ed",
            SourceKind::KittiBin => "kitti-bin",
            SourceKind::Pcd => "pcd",
            SourceKind::Npy => "npy",
            SourceKind::Mcap => "mcap",
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SourceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SourceKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            format!("unknown source kind `{s}` (known: waymo-v1, waymo-v2, m3ed, kitti-bin, pcd, npy, mcap)")
        })
    }
}

/// Every reader's options, so one config opens any source.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceOptions {
    /// Waymo v1 and v2 readers.
    pub waymo: WaymoConfig,
    /// The M3ED reader.
    pub m3ed: M3edConfig,
    /// The KITTI `.bin` reader.
    pub kitti: KittiConfig,
    /// The PCD reader.
    pub pcd: PcdConfig,
    /// The `.npy` reader.
    pub npy: NpyConfig,
    /// The ROS 2 MCAP reader.
    pub mcap: McapConfig,
}

/// Opens `path` with the reader of `kind`, or, when `kind` is `None`, with the first reader that
/// accepts it. A path no reader accepts is [`SourceError::Incompatible`] naming every kind tried.
pub fn open(path: &Path, kind: Option<SourceKind>, options: &SourceOptions) -> Result<Box<dyn Source>, SourceError> {
    if let Some(kind) = kind {
        return open_kind(path, kind, options);
    }
    if !path.exists() {
        return Err(SourceError::io(
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    for kind in SourceKind::ALL {
        match open_kind(path, kind, options) {
            Err(SourceError::Incompatible { .. }) => continue,
            other => return other,
        }
    }
    Err(SourceError::Incompatible {
        path: path.to_path_buf(),
        kind: "Waymo v1 TFRecord, Waymo v2 folder, M3ED HDF5, KITTI .bin, PCD, .npy or ROS 2 MCAP",
    })
}

fn open_kind(path: &Path, kind: SourceKind, options: &SourceOptions) -> Result<Box<dyn Source>, SourceError> {
    Ok(match kind {
        SourceKind::WaymoV1 => Box::new(WaymoV1Source::open(path, options.waymo.clone())?),
        SourceKind::WaymoV2 => Box::new(WaymoV2Source::open(path, options.waymo.clone())?),
        SourceKind::M3ed => Box::new(M3edSource::open(path, options.m3ed.clone())?),
        SourceKind::KittiBin => Box::new(KittiBinSource::open(path, options.kitti.clone())?),
        SourceKind::Pcd => Box::new(PcdSource::open(path, options.pcd.clone())?),
        SourceKind::Npy => Box::new(NpySource::open(path, options.npy.clone())?),
        SourceKind::Mcap => Box::new(McapSource::open(path, options.mcap.clone())?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in SourceKind::ALL {
            assert_eq!(kind.as_str().parse::<SourceKind>().unwrap(), kind);
            let toml_text = format!("k = \"{kind}\"");
            #[derive(Deserialize)]
            struct K {
                k: SourceKind,
            }
            assert_eq!(toml::from_str::<K>(&toml_text).unwrap().k, kind);
        }
        assert!("waymo".parse::<SourceKind>().unwrap_err().contains("waymo-v1"));
    }

    #[test]
    fn open_guesses_the_reader_and_refuses_what_none_reads() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("000000.bin");
        std::fs::write(&bin, [0u8; 32]).unwrap();
        let source = open(&bin, None, &SourceOptions::default()).unwrap();
        assert_eq!((source.meta().source_kind, source.len()), ("kitti-bin", 1));
        let txt = dir.path().join("notes.txt");
        std::fs::write(&txt, "hello").unwrap();
        let e = open(&txt, None, &SourceOptions::default()).err().unwrap();
        assert!(matches!(e, SourceError::Incompatible { .. }), "{e}");
        assert!(e.to_string().contains("notes.txt"));
        let e = open(&dir.path().join("missing.tfrecord"), None, &SourceOptions::default())
            .err()
            .unwrap();
        assert!(matches!(e, SourceError::Io { .. }), "{e}");
    }
}
