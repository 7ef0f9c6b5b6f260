//! KITTI-style sweeps: `.bin` files of little-endian float32 fields per point, one file per
//! sweep; the layout is `x, y, z, intensity` (KITTI) unless the config's `fields` names another,
//! and a nuScenes `*.pcd.bin` is `x, y, z, intensity, ring` by its name. A file whose size is not a
//! whole number of points of its layout is refused, never read with another.
//!
//! A single file is a one-frame sequence; a folder of `.bin` files is a sequence in file-name
//! order. A KITTI sequence folder (`velodyne/*.bin` with, optionally, `times.txt`, `calib.txt`,
//! `poses.txt` — or the odometry benchmark's `../../poses/<sequence>.txt` — and `image_2/*.png`)
//! brings its times, poses and camera along: sweep `NNNNNN.bin` takes line `NNNNNN` of
//! `times.txt` and of the poses, and `image_2/NNNNNN.png`. Without times a frame is stamped
//! `index × 100 ms` (a 10 Hz LiDAR); without poses it sits at the world origin. A data manifest or
//! platform profile names the platform (`vehicle` unless told).

mod calib;
mod write;

use std::path::{Path, PathBuf};

use nalgebra::Isometry3;
use serde::{Deserialize, Serialize};

pub use self::calib::KittiCalib;
pub use self::write::{KittiWriteSummary, write_kitti_bin, write_kitti_sequence};
use super::layout::{Decoded, NonFinite, PointLayout};
use super::poses::{PoseTrack, read_kitti_poses, read_timed_poses, read_times};
use super::{SequenceMeta, Source, SourceError};
use crate::cloud::PointCloud;
use crate::frame::{CameraCalibration, CameraView, Frame, ImageData, Platform};

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
    /// A pose file to use instead of the sequence folder's (`poses.txt`): 12 values a line is
    /// KITTI's 3×4 form, one pose per sweep; 8 is `timestamp tx ty tz qx qy qz qw` (seconds),
    /// interpolated at each sweep's time.
    pub poses: Option<PathBuf>,
    /// The frame 3×4 poses are given in: `camera0` (KITTI odometry: camera 0's poses, turned into
    /// LiDAR poses with the calibration's `Tr`) or `lidar`.
    pub poses_frame: PosesFrame,
    /// A calibration file to use instead of the sequence folder's `calib.txt`.
    pub calib: Option<PathBuf>,
    /// Whether `image_2/*.png` (with `P2` of the calibration) comes along as camera `image_2`.
    pub cameras: bool,
}

/// The frame the 3×4 poses of a KITTI pose file describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PosesFrame {
    /// Camera 0's poses in camera 0's first frame (KITTI odometry ground truth, SemanticKITTI).
    #[default]
    Camera0,
    /// The LiDAR's poses.
    Lidar,
}

impl Default for KittiConfig {
    fn default() -> Self {
        Self {
            platform: Platform::Vehicle,
            max_file_bytes: 512 << 20,
            fields: Vec::new(),
            non_finite: NonFinite::Drop,
            poses: None,
            poses_frame: PosesFrame::Camera0,
            calib: None,
            cameras: true,
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

/// A sequence of KITTI-style `.bin` sweeps, with the times, poses and camera of its folder.
#[derive(Debug)]
pub struct KittiBinSource {
    meta: SequenceMeta,
    files: Vec<PathBuf>,
    config: KittiConfig,
    times_micros: Option<Vec<i64>>,
    poses: Option<Vec<Isometry3<f64>>>,
    camera: Option<(PathBuf, CameraCalibration)>,
}

fn is_bin(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("bin"))
}

fn bin_files(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| SourceError::io(dir, e))? {
        let entry = entry.map_err(|e| SourceError::io(dir, e))?;
        if is_bin(&entry.path()) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// A sweep's number in the sequence's side files: its file stem when every stem is a number
/// (`000123.bin` is line 123 of `times.txt`), else its position.
fn sweep_numbers(files: &[PathBuf]) -> Vec<usize> {
    let stems: Option<Vec<usize>> = files
        .iter()
        .map(|f| f.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()))
        .collect();
    stems.unwrap_or_else(|| (0..files.len()).collect())
}

/// The existing file among `candidates`, if any.
fn first_existing(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates.into_iter().find(|p| p.is_file())
}

/// Values on the first data line of a pose file (12: KITTI 3×4, 8: timed).
fn pose_columns(path: &Path) -> Result<usize, SourceError> {
    use std::io::BufRead as _;
    let file = std::fs::File::open(path).map_err(|e| SourceError::io(path, e))?;
    for line in std::io::BufReader::new(file).lines().take(64) {
        let line = line.map_err(|e| SourceError::io(path, e))?;
        let fields: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|v| !v.is_empty())
            .collect();
        if fields.is_empty() || line.trim_start().starts_with('#') || fields[0].parse::<f64>().is_err() {
            continue;
        }
        return Ok(fields.len());
    }
    Err(SourceError::Missing {
        path: path.to_path_buf(),
        what: "poses (no data lines)".to_string(),
    })
}

impl KittiBinSource {
    /// Opens a `.bin` file, a folder of them, or a KITTI sequence folder (`velodyne/` inside);
    /// anything else is [`SourceError::Incompatible`]. Side files that are present but damaged,
    /// or shorter than the sweeps, fail the open naming the file.
    pub fn open(path: &Path, config: KittiConfig) -> Result<Self, SourceError> {
        let incompatible = || SourceError::Incompatible {
            path: path.to_path_buf(),
            kind: "KITTI .bin",
        };
        // The sequence root: the folder holding `velodyne/`, `calib.txt`, `times.txt`, … .
        let (files, root) = if path.is_dir() && path.join("velodyne").is_dir() {
            (bin_files(&path.join("velodyne"))?, Some(path.to_path_buf()))
        } else if path.is_dir() {
            let root = (path.file_name().is_some_and(|n| n == "velodyne"))
                .then(|| path.parent().map(Path::to_path_buf))
                .flatten();
            (bin_files(path)?, root)
        } else if is_bin(path) {
            (vec![path.to_path_buf()], None)
        } else {
            return Err(incompatible());
        };
        if files.is_empty() {
            return Err(incompatible());
        }
        let name = root
            .as_deref()
            .unwrap_or(path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kitti".to_string());
        let numbers = sweep_numbers(&files);
        let needed = numbers.iter().max().map_or(0, |m| m + 1);
        let short = |file: &Path, have: usize, what: &str| SourceError::Corrupt {
            path: file.to_path_buf(),
            location: "file".to_string(),
            detail: format!(
                "{have} {what} for sweeps numbered up to {} ({} sweeps)",
                needed - 1,
                files.len()
            ),
        };
        let side = |name: &str| root.as_ref().map(|r| r.join(name));

        let times_micros = match side("times.txt").filter(|p| p.is_file()) {
            Some(p) => {
                let times = read_times(&p)?;
                if times.len() < needed {
                    return Err(short(&p, times.len(), "times"));
                }
                Some(numbers.iter().map(|&n| times[n]).collect::<Vec<_>>())
            }
            None => None,
        };
        let frame_time = |i: usize| times_micros.as_ref().map_or(i as i64 * FRAME_PERIOD_MICROS, |t| t[i]);

        let calib_path = config
            .calib
            .clone()
            .or_else(|| side("calib.txt").filter(|p| p.is_file()));
        let calib = calib_path.as_deref().map(KittiCalib::read).transpose()?;

        let odometry_poses = root.as_ref().and_then(|r| {
            let seq = r.file_name()?;
            Some(r.parent()?.parent()?.join("poses").join(seq).with_extension("txt"))
        });
        let poses_path = config
            .poses
            .clone()
            .or_else(|| first_existing(side("poses.txt").into_iter().chain(odometry_poses)));
        let poses = match &poses_path {
            None => None,
            Some(p) if pose_columns(p)? == 8 => {
                let track: PoseTrack = read_timed_poses(p)?;
                let mut poses = Vec::with_capacity(files.len());
                for (i, file) in files.iter().enumerate() {
                    let t = frame_time(i);
                    poses.push(track.at(t).ok_or_else(|| {
                        SourceError::corrupt(
                            p,
                            "file",
                            format!(
                                "no pose at sweep {} ({} s): the trajectory does not cover it",
                                file.display(),
                                t as f64 * 1e-6
                            ),
                        )
                    })?);
                }
                Some(poses)
            }
            Some(p) => {
                let all = read_kitti_poses(p)?;
                if all.len() < needed {
                    return Err(short(p, all.len(), "poses"));
                }
                let picked = numbers.iter().map(|&n| all[n]);
                Some(match config.poses_frame {
                    PosesFrame::Lidar => picked.collect(),
                    PosesFrame::Camera0 => {
                        let Some(calib) = &calib else {
                            return Err(SourceError::Missing {
                                path: p.clone(),
                                what: "calib.txt with `Tr`: the poses are camera 0's (set `kitti.calib`, or \
                                       `kitti.poses_frame = \"lidar\"` if they are the LiDAR's)"
                                    .to_string(),
                            });
                        };
                        let tr = calib.cam0_from_velo;
                        // world = LiDAR frame of the first pose: velo0_from_velo_i = Tr⁻¹ · cam0_from_cam_i · Tr.
                        picked.map(|cam| tr.inverse() * cam * tr).collect()
                    }
                })
            }
        };

        let camera = match (&calib, side("image_2").filter(|d| d.is_dir() && config.cameras)) {
            (Some(calib), Some(dir)) => {
                let first = files
                    .iter()
                    .filter_map(|f| Some(dir.join(f.file_stem()?).with_extension("png")))
                    .find(|p| p.is_file());
                match first {
                    Some(png) => {
                        let (width, height) = image::ImageReader::open(&png)
                            .map_err(|e| SourceError::io(&png, e))?
                            .into_dimensions()
                            .map_err(|e| SourceError::corrupt(&png, "header", e.to_string()))?;
                        calib.camera(2, width, height).map(|c| (dir, c))
                    }
                    None => None,
                }
            }
            _ => None,
        };
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
            times_micros,
            poses,
            camera,
        })
    }

    /// Whether the sweeps come with poses (`poses.txt` or `kitti.poses`).
    pub fn has_poses(&self) -> bool {
        self.poses.is_some()
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
        let timestamp_micros = self
            .times_micros
            .as_ref()
            .map_or(index as i64 * FRAME_PERIOD_MICROS, |t| t[index]);
        let mut cameras = Vec::new();
        if let Some((dir, calibration)) = &self.camera {
            let png = path.file_stem().map(|s| dir.join(s).with_extension("png"));
            if let Some(png) = png.filter(|p| p.is_file()) {
                let bytes = std::fs::read(&png).map_err(|e| SourceError::io(&png, e))?;
                cameras.push(CameraView::new(
                    "image_2",
                    calibration.clone(),
                    timestamp_micros,
                    ImageData::Encoded(bytes.into()),
                ));
            }
        }
        Ok(Frame {
            sequence: self.meta.name.clone(),
            index,
            timestamp_micros,
            platform: self.meta.platform,
            notes: decoded.note().into_iter().collect(),
            cloud: decoded.cloud,
            world_from_sensor: self.poses.as_ref().map_or_else(Isometry3::identity, |p| p[index]),
            imu: Vec::new(),
            cameras,
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

    /// A KITTI odometry sequence folder: `times.txt` stamps the sweeps, camera 0's poses become
    /// LiDAR poses through `Tr`, `image_2/NNNNNN.png` comes with `P2` where it exists.
    #[test]
    fn a_kitti_sequence_folder_brings_times_poses_and_camera() {
        let dataset = tempfile::tempdir().unwrap();
        let root = dataset.path().join("sequences/07");
        std::fs::create_dir_all(root.join("velodyne")).unwrap();
        std::fs::create_dir_all(root.join("image_2")).unwrap();
        for i in 0..3 {
            write_bin(
                &root.join(format!("velodyne/{i:06}.bin")),
                &[[1.0 + i as f32, 0.0, 0.0, 0.5]],
            );
        }
        std::fs::write(root.join("times.txt"), "0.000000e+00\n1.036000e-01\n2.072000e-01\n").unwrap();
        std::fs::write(
            root.join("calib.txt"),
            "P2: 718.856 0 607.1928 45.38225 0 718.856 185.2157 -0.1130887 0 0 1 0.003779761\n\
             Tr: 0 -1 0 0 0 0 -1 0 1 0 0 -0.27\n",
        )
        .unwrap();
        let png = image::RgbImage::from_pixel(8, 4, image::Rgb([9, 8, 7]));
        png.save(root.join("image_2/000000.png")).unwrap();
        // Camera 0 drives 2 m along its z (forward) by sweep 1 and turns 90° left (about -y) by sweep 2.
        std::fs::create_dir_all(dataset.path().join("poses")).unwrap();
        std::fs::write(
            dataset.path().join("poses/07.txt"),
            "1 0 0 0 0 1 0 0 0 0 1 0\n1 0 0 0 0 1 0 0 0 0 1 2\n0 0 -1 0 0 1 0 0 1 0 0 2\n",
        )
        .unwrap();
        let source = KittiBinSource::open(&root, KittiConfig::default()).unwrap();
        assert_eq!((source.len(), source.meta().name.as_str()), (3, "07"));
        assert!(source.has_poses());
        let f1 = source.frame(1).unwrap();
        assert_eq!(f1.timestamp_micros, 103_600);
        // In the LiDAR frame (x forward): 2 m forward.
        approx::assert_relative_eq!(
            f1.world_from_sensor.translation.vector,
            nalgebra::Vector3::new(2.0, 0.0, 0.0),
            epsilon = 1e-9
        );
        let f2 = source.frame(2).unwrap();
        let yaw = f2.world_from_sensor.rotation.euler_angles().2;
        approx::assert_relative_eq!(yaw, std::f64::consts::FRAC_PI_2, epsilon = 1e-9);
        let f0 = source.frame(0).unwrap();
        assert_eq!(f0.cameras.len(), 1);
        let cam = &f0.cameras[0];
        assert_eq!(
            (cam.name.as_str(), cam.calibration.width, cam.calibration.height),
            ("image_2", 8, 4)
        );
        assert_eq!(cam.image().unwrap().get_pixel(7, 3), &image::Rgb([9, 8, 7]));
        assert!(f1.cameras.is_empty(), "no image_2/000001.png");

        // The poses are camera 0's: without the calibration they cannot become LiDAR poses.
        std::fs::remove_file(root.join("calib.txt")).unwrap();
        let e = KittiBinSource::open(&root, KittiConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("07.txt: missing calib.txt with `Tr`"), "{e}");
        let lidar = KittiConfig {
            poses_frame: PosesFrame::Lidar,
            ..KittiConfig::default()
        };
        let f1 = KittiBinSource::open(&root, lidar).unwrap().frame(1).unwrap();
        assert_eq!(f1.world_from_sensor.translation.vector.z, 2.0);
        assert!(f1.cameras.is_empty(), "no calibration, no camera");

        // Side files shorter than the sweeps fail the open naming the file.
        std::fs::write(root.join("times.txt"), "0.0\n0.1\n").unwrap();
        let e = KittiBinSource::open(&root, KittiConfig::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("times.txt: file: 2 times for sweeps numbered up to 2 (3 sweeps)"),
            "{e}"
        );
    }

    /// A timestamped trajectory (`timestamp tx ty tz qx qy qz qw`) is interpolated at each sweep's
    /// time, and a sweep it does not cover fails the open.
    #[test]
    fn timed_poses_are_interpolated_at_the_sweep_times() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("run");
        std::fs::create_dir_all(root.join("velodyne")).unwrap();
        for i in 0..2 {
            write_bin(&root.join(format!("velodyne/{i:06}.bin")), &[[1.0, 0.0, 0.0, 0.5]]);
        }
        std::fs::write(root.join("times.txt"), "0.05\n0.15\n").unwrap();
        std::fs::write(root.join("poses.txt"), "0.0 0 0 0 0 0 0 1\n0.2 4 0 0 0 0 0 1\n").unwrap();
        let source = KittiBinSource::open(&root, KittiConfig::default()).unwrap();
        let x = |i| source.frame(i).unwrap().world_from_sensor.translation.vector.x;
        approx::assert_relative_eq!(x(0), 1.0, epsilon = 1e-9);
        approx::assert_relative_eq!(x(1), 3.0, epsilon = 1e-9);
        std::fs::write(root.join("times.txt"), "0.05\n0.25\n").unwrap();
        let e = KittiBinSource::open(&root, KittiConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("poses.txt") && e.contains("does not cover it"), "{e}");
    }
}
