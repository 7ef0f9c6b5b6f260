//! `boxlayer detect`: runs one detector on one frame of any log a source reads (Waymo, M3ED,
//! KITTI-style `.bin`) and reports the boxes.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::detector::{Detector, StageTimings};
use super::error::DetectError;
use crate::boxes::Detection;

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

/// Loads the detector in `detector_dir` (or the `detector.toml` path itself) and runs it on frame
/// `frame` of `file`, opened with whichever reader accepts it (`sources::open`).
pub fn detect_file(detector_dir: &Path, file: &Path, frame: usize) -> Result<DetectReport, DetectError> {
    let source = crate::sources::open(file, None, &crate::sources::SourceOptions::default())?;
    let detector_dir = match detector_dir.file_name() {
        Some(name) if name == super::MANIFEST_FILE && detector_dir.is_file() => {
            detector_dir.parent().unwrap_or(Path::new("."))
        }
        _ => detector_dir,
    };
    let cloud = source.frame(frame)?.cloud;
    let detector = Detector::load(detector_dir)?;
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
    fn a_frame_past_the_end_is_refused_before_the_detector_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000000.bin");
        std::fs::write(&path, [0u8; 32]).unwrap();
        let err = detect_file(Path::new("."), &path, 3).unwrap_err().to_string();
        assert!(err.contains("frame 3 out of range"), "{err}");
    }
}
