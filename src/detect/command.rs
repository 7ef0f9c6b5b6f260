//! `boxlayer detect`: runs one detector on one frame of a point file and reports the boxes.
//! Until the Waymo and M3ED sources are wired in, the only input is a KITTI-style `.bin` file
//! (little-endian float32 `x, y, z, intensity` per point, one sweep = frame 0).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::detector::{Detection, Detector, StageTimings};
use super::error::DetectError;
use crate::cloud::PointCloud;

/// Reads a KITTI-style `.bin` sweep: little-endian float32 `x, y, z, intensity` per point.
pub fn read_kitti_bin(path: &Path) -> Result<PointCloud, DetectError> {
    let bytes = std::fs::read(path).map_err(|e| DetectError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if bytes.len() % 16 != 0 {
        return Err(DetectError::Input {
            path: path.to_path_buf(),
            reason: format!(
                "{} bytes is not a whole number of 16-byte points (float32 x, y, z, intensity)",
                bytes.len()
            ),
        });
    }
    let n = bytes.len() / 16;
    let mut columns = [
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    ];
    for point in bytes.chunks_exact(16) {
        for (column, value) in columns.iter_mut().zip(point.chunks_exact(4)) {
            column.push(f32::from_le_bytes([value[0], value[1], value[2], value[3]]));
        }
    }
    let [x, y, z, intensity] = columns;
    PointCloud::from_columns(x, y, z, intensity).map_err(|e| DetectError::Input {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// What `boxlayer detect` reports for one frame.
#[derive(Debug, Clone, Serialize)]
pub struct DetectReport {
    /// Detector name.
    pub detector: String,
    /// The point file.
    pub file: PathBuf,
    /// Frame index within the file.
    pub frame: usize,
    /// Points in the frame.
    pub points: usize,
    /// Time per stage.
    pub timings: StageTimings,
    /// The boxes, highest score first.
    pub detections: Vec<Detection>,
}

/// Loads the detector in `detector_dir` and runs it on frame `frame` of `file`.
pub fn detect_file(detector_dir: &Path, file: &Path, frame: usize) -> Result<DetectReport, DetectError> {
    let is_bin = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("bin"));
    if !is_bin {
        return Err(DetectError::Input {
            path: file.to_path_buf(),
            reason: "unsupported input: only KITTI-style .bin sweeps (float32 x, y, z, intensity) so far".into(),
        });
    }
    if frame != 0 {
        return Err(DetectError::Input {
            path: file.to_path_buf(),
            reason: format!("frame {frame} out of range (a .bin file holds one sweep, frame 0)"),
        });
    }
    let detector = Detector::load(detector_dir)?;
    let cloud = read_kitti_bin(file)?;
    let (detections, timings) = detector.detect_timed(&cloud)?;
    Ok(DetectReport {
        detector: detector.name().to_string(),
        file: file.to_path_buf(),
        frame,
        points: cloud.len(),
        timings,
        detections,
    })
}

impl std::fmt::Display for DetectReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        writeln!(
            f,
            "{}: frame {} of {} ({} points): {} boxes",
            self.detector,
            self.frame,
            self.file.display(),
            self.points,
            self.detections.len()
        )?;
        let t = &self.timings;
        writeln!(
            f,
            "time (ms): pillarize {:.1}, encoder {:.1}, scatter {:.1}, head {:.1}, decode+nms {:.1}",
            ms(t.pillarize),
            ms(t.encoder),
            ms(t.scatter),
            ms(t.head),
            ms(t.decode)
        )?;
        writeln!(
            f,
            "{:>10} {:>6} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>7}",
            "class", "score", "x", "y", "z", "l", "w", "h", "yaw"
        )?;
        for d in &self.detections {
            let b = &d.box3;
            writeln!(
                f,
                "{:>10} {:>6.3} {:>8.2} {:>8.2} {:>7.2} {:>6.2} {:>6.2} {:>6.2} {:>7.3}",
                d.class.as_str(),
                d.score,
                b.x,
                b.y,
                b.z,
                b.l,
                b.w,
                b.h,
                b.yaw
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kitti_bin_round_trips_and_rejects_partial_points() {
        let dir = std::env::temp_dir().join(format!("boxlayer-kitti-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("000000.bin");
        let values = [1.0f32, 2.0, 3.0, 0.5, -4.0, 5.5, -1.0, 0.25];
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, &bytes).unwrap();
        let cloud = read_kitti_bin(&path).unwrap();
        assert_eq!(cloud.x(), &[1.0, -4.0]);
        assert_eq!(cloud.intensity(), &[0.5, 0.25]);
        std::fs::write(&path, &bytes[..20]).unwrap();
        let err = read_kitti_bin(&path).unwrap_err().to_string();
        assert!(err.ends_with("20 bytes is not a whole number of 16-byte points (float32 x, y, z, intensity)"));
        let err = detect_file(Path::new("."), &path, 3).unwrap_err().to_string();
        assert!(err.contains("frame 3 out of range"), "{err}");
    }
}
