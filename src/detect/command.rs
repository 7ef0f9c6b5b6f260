//! `boxlayer detect`: runs one detector on frames of any log a source reads (Waymo, M3ED, KITTI,
//! PCD, NumPy, MCAP) and reports the boxes.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::detector::{Detector, StageTimings};
use super::error::DetectError;
use crate::boxes::Detection;
use crate::frame::DetectorFrame;
use crate::normalize::{FrameInputs, normalize_frame};

/// What `boxlayer detect` reports for one frame.
#[derive(Debug, Clone, Serialize)]
pub struct DetectReport {
    /// Detector name.
    pub detector: String,
    /// The point file.
    pub file: PathBuf,
    /// The source's sequence name (Waymo context, M3ED sequence, KITTI folder).
    pub sequence: String,
    /// The frame as asked for: the ordinal among the readable frames.
    pub frame: usize,
    /// The frame's index in its sequence ([`crate::Frame::index`]: its position in the file).
    pub frame_index: u64,
    /// Points in the frame.
    pub points: usize,
    /// Time per stage.
    pub timings: StageTimings,
    /// The boxes, highest score first.
    pub detections: Vec<Detection>,
}

/// How `detect` opens its input: the reader (`None`: the first that accepts it) and the readers'
/// options.
#[derive(Debug, Clone, Default)]
pub struct DetectInput {
    /// The reader to use.
    pub kind: Option<crate::sources::SourceKind>,
    /// The readers' options (`kitti.fields`, …).
    pub options: crate::sources::SourceOptions,
    /// The platform profile that gravity-aligns each frame for a detector whose manifest says
    /// `input_frame = "normalized"` (such a detector needs it, or `as_read`; a `sensor` detector
    /// ignores it).
    pub profile: Option<crate::normalize::Profile>,
    /// Give the points as read, whatever frame the detector declares (points already in it).
    pub as_read: bool,
}

/// Loads the detector in `detector_dir` (or the `detector.toml` path itself) and runs it on frame
/// `frame` of `file`, opened as `input` says (`sources::open`).
pub fn detect_file(
    detector_dir: &Path,
    file: &Path,
    frame: usize,
    input: &DetectInput,
) -> Result<DetectReport, DetectError> {
    let source = crate::sources::open(file, input.kind, &input.options)?;
    // The frame is read before the detector loads, so a bad index costs no session.
    let read = source.frame(frame)?;
    let detector = Detector::load(manifest_folder(detector_dir))?;
    report(&detector, input, file, source.meta().name.clone(), frame, read)
}

/// Runs the detector on frames `frames` (positions among the readable frames, clipped to the
/// log) of `file`: the detector loads once; a frame that does not decode is reported (a warning
/// naming it) and skipped, the others keep their indices.
pub fn detect_frames(
    detector_dir: &Path,
    file: &Path,
    frames: std::ops::Range<usize>,
    input: &DetectInput,
) -> Result<Vec<DetectReport>, DetectError> {
    let source = crate::sources::open(file, input.kind, &input.options)?;
    let detector = Detector::load(manifest_folder(detector_dir))?;
    let mut reports = Vec::new();
    for position in frames.start.min(source.len())..frames.end.min(source.len()) {
        match source.frame(position) {
            Ok(read) => reports.push(report(
                &detector,
                input,
                file,
                source.meta().name.clone(),
                position,
                read,
            )?),
            Err(e) => tracing::warn!("{e}; frame skipped"),
        }
    }
    Ok(reports)
}

/// The detector folder of `path`, which may name the `detector.toml` itself.
fn manifest_folder(path: &Path) -> &Path {
    match path.file_name() {
        Some(name) if name == super::MANIFEST_FILE && path.is_file() => path.parent().unwrap_or(Path::new(".")),
        _ => path,
    }
}

fn report(
    detector: &Detector,
    input: &DetectInput,
    file: &Path,
    sequence: String,
    frame: usize,
    read: crate::Frame,
) -> Result<DetectReport, DetectError> {
    let wanted = if input.as_read {
        DetectorFrame::Sensor
    } else {
        detector.manifest().input_frame
    };
    // Where the ground lies in the points given, for a manifest with `ground_z_m`: points as
    // read are taken to be in the frame the detector declares.
    let frame_of_points = if input.as_read {
        detector.manifest().input_frame
    } else {
        wanted
    };
    let ground = input.profile.as_ref().and_then(|p| p.ground_z_m(frame_of_points));
    let (detections, timings) = match (wanted, &input.profile) {
        (DetectorFrame::Sensor, _) => detector.detect_timed_on_ground(&read.cloud, ground)?,
        (DetectorFrame::Normalized, None) => {
            return Err(DetectError::Invalid {
                detector: detector.name().to_string(),
                field: "input_frame".into(),
                reason: "it takes points in the normalized frame: name the log's platform profile \
                         (`--profile m3ed_drone`, `waymo_vehicle`, … or a profile TOML), or \
                         `--no-normalize` for points already in that frame"
                    .into(),
            });
        }
        (DetectorFrame::Normalized, Some(profile)) => {
            // The frame's own estimate, as `boxlayer run`'s first pass makes it.
            let n = normalize_frame(&FrameInputs::from_frame(&read, profile), profile);
            let mut cloud = read.cloud.clone();
            n.cloud_to_normalized(&mut cloud);
            let (mut detections, timings) = detector.detect_timed_on_ground(&cloud, ground)?;
            for d in &mut detections {
                d.box3 = n.box_to_sensor(&d.box3);
            }
            (detections, timings)
        }
    };
    let cloud = read.cloud;
    Ok(DetectReport {
        detector: detector.name().to_string(),
        file: file.to_path_buf(),
        sequence,
        frame,
        frame_index: read.index as u64,
        points: cloud.len(),
        timings,
        detections,
    })
}

impl DetectReport {
    /// One line: detector, frame, points, boxes per class and the time of each stage.
    pub fn summary_line(&self) -> String {
        let mut per_class = std::collections::BTreeMap::new();
        for d in &self.detections {
            *per_class.entry(d.class.as_str()).or_insert(0usize) += 1;
        }
        let classes: Vec<String> = per_class.iter().map(|(c, n)| format!("{c} {n}")).collect();
        let t = &self.timings;
        let ms = (t.pillarize + t.encoder + t.scatter + t.head + t.decode).as_secs_f64() * 1e3;
        format!(
            "{}: frame {} ({} points): {} boxes ({}), {ms:.1} ms",
            self.detector,
            self.frame_index,
            self.points,
            self.detections.len(),
            if classes.is_empty() {
                "none".to_string()
            } else {
                classes.join(", ")
            }
        )
    }

    /// The boxes as JSON lines, one per box, in the detections format that `boxlayer run
    /// --detections` and `boxlayer fuse` read and `eval` takes as predictions:
    /// `{"sequence", "frame", "box": [x, y, z, l, w, h, yaw, pitch, roll], "class", "score", "detector"}`.
    pub fn to_json_lines(&self) -> String {
        let mut text = String::new();
        for d in &self.detections {
            let line = serde_json::json!({
                "sequence": self.sequence,
                "frame": self.frame_index,
                "box": d.box3.to_array(),
                "class": d.class.as_str(),
                "score": d.score,
                "detector": d.detector,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        text
    }
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
        let err = detect_file(Path::new("."), &path, 3, &DetectInput::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("frame 3 out of range"), "{err}");
    }
}
