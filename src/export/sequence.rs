//! One finished sequence folder read for export, with the frames of its log: points, cameras as
//! pinholes, the export's point frame.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use image::RgbImage;
use nalgebra::{Isometry3, Point3};

use super::ExportError;
use crate::camera::{MIN_DEPTH_M, Undistorter, pinhole, project_point_in_camera};
use crate::frame::{CameraCalibration, CameraView, Frame, Platform};
use crate::geometry::pose::isometry_from_row_major;
use crate::geometry::{Box3, box_corners};
use crate::pipeline::PipelineConfig;
use crate::shards::{
    BoxRow, FrameRow, RunManifest, SUCCESS_FILE, TrackRow, read_box_rows, read_frame_rows, read_points_frame,
    read_track_rows,
};
use crate::sources::{Source, SourceOptions};

/// The frame exported points and boxes are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ExportFrame {
    /// The frame's sensor frame (x forward, y left, z up).
    #[default]
    Sensor,
    /// The gravity-aligned normalized frame (`normalized_from_sensor`).
    Normalized,
}

impl ExportFrame {
    /// `sensor` or `normalized`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFrame::Sensor => "sensor",
            ExportFrame::Normalized => "normalized",
        }
    }
}

/// What the exported camera images are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ImageMode {
    /// Resampled onto each camera's pinhole twin (same `K`, no distortion), so a bare `K`
    /// projects exactly.
    #[default]
    Pinhole,
    /// The log's own images (its JPEG bytes copied where it has them), lens distortion left in:
    /// a bare `K` is then off towards the image corners, by the lens' distortion. Much faster.
    Log,
}

/// Where the logs of the sequences are.
#[derive(Debug, Clone, PartialEq)]
pub enum LogLocation {
    /// Each manifest's `source` under this folder (as `boxlayer run --data-root`).
    DataRoot(PathBuf),
    /// This one log (one sequence).
    Log(PathBuf),
    /// No log: stored points only, no cameras.
    Without,
}

/// A finished sequence folder's rows.
#[derive(Debug, Clone)]
pub struct ShardSequence {
    /// The folder.
    pub dir: PathBuf,
    /// Its `manifest.json`.
    pub manifest: RunManifest,
    /// `frames.parquet`, in frame order.
    pub frames: Vec<FrameRow>,
    /// `boxes.parquet`, in (frame, track) order.
    pub boxes: Vec<BoxRow>,
    /// `tracks.parquet`.
    pub tracks: Vec<TrackRow>,
}

impl ShardSequence {
    /// Reads the finished folder `dir`.
    pub fn load(dir: &Path) -> Result<Self, ExportError> {
        if !dir.join(SUCCESS_FILE).is_file() {
            return Err(ExportError::invalid(
                dir,
                format!("not a finished sequence folder (no {SUCCESS_FILE})"),
            ));
        }
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| ExportError::io(&manifest_path, e))?;
        let manifest: RunManifest =
            serde_json::from_str(&text).map_err(|e| ExportError::invalid(&manifest_path, e.to_string()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            frames: read_frame_rows(&dir.join("frames.parquet"))?,
            boxes: read_box_rows(&dir.join("boxes.parquet"))?,
            tracks: read_track_rows(&dir.join("tracks.parquet"))?,
        })
    }

    /// The platform the manifest names (`Other` for a name this version does not know).
    pub fn platform(&self) -> Platform {
        self.manifest.platform.parse().unwrap_or(Platform::Other)
    }

    /// Whether the log is a Waymo log (its intensities and camera names follow Waymo).
    pub fn is_waymo(&self) -> bool {
        self.manifest.source_kind.starts_with("waymo")
    }

    /// The boxes of each frame index, in row order.
    pub fn boxes_by_frame(&self) -> HashMap<i64, Vec<&BoxRow>> {
        let mut out: HashMap<i64, Vec<&BoxRow>> = HashMap::new();
        for b in &self.boxes {
            out.entry(b.frame_index).or_default().push(b);
        }
        out
    }

    /// The map from the sensor frame of `row` into the export frame.
    pub fn export_from_sensor(&self, row: &FrameRow, frame: ExportFrame) -> Result<Isometry3<f64>, ExportError> {
        match frame {
            ExportFrame::Sensor => Ok(Isometry3::identity()),
            ExportFrame::Normalized => {
                let m = row.normalized_from_sensor.ok_or_else(|| {
                    ExportError::invalid(
                        &self.dir,
                        "the run did not normalize (no normalized_from_sensor); export in the sensor frame",
                    )
                })?;
                self.rigid(&m, row, "normalized_from_sensor")
            }
        }
    }

    /// The sensor pose of `row` in the world frame.
    pub fn world_from_sensor(&self, row: &FrameRow) -> Result<Isometry3<f64>, ExportError> {
        self.rigid(&row.world_from_sensor, row, "world_from_sensor")
    }

    fn rigid(&self, m: &[f64; 16], row: &FrameRow, what: &str) -> Result<Isometry3<f64>, ExportError> {
        isometry_from_row_major(m, 1e-6).ok_or_else(|| {
            ExportError::invalid(
                &self.dir.join("frames.parquet"),
                format!("frame {}: {what} is not rigid", row.frame_index),
            )
        })
    }

    /// A box row's box in the export frame.
    pub fn box_in(&self, b: &BoxRow, frame: ExportFrame) -> Result<Box3, ExportError> {
        match frame {
            ExportFrame::Sensor => Ok(Box3::from_array(b.box_sensor)),
            ExportFrame::Normalized => b.box_normalized.map(Box3::from_array).ok_or_else(|| {
                ExportError::invalid(
                    &self.dir.join("boxes.parquet"),
                    format!("box {}: no box_normalized (the run did not normalize)", b.box_id),
                )
            }),
        }
    }

    /// The reader options the run used.
    fn reader_options(&self) -> SourceOptions {
        toml::from_str::<PipelineConfig>(&self.manifest.config_toml)
            .map(|c| c.source.options)
            .unwrap_or_default()
    }
}

/// Converts a source intensity to 0…1: `tanh` for Waymo (3EED's rule), `min(i / 255, 1)` for
/// every other source (8-bit reflectivity).
pub fn intensity_01(waymo: bool, raw: f32) -> f32 {
    if waymo {
        raw.max(0.0).tanh()
    } else {
        (raw / 255.0).clamp(0.0, 1.0)
    }
}

/// A frame's points in the sensor frame.
#[derive(Debug, Clone, Default)]
pub struct SensorPoints {
    /// x, y, z per point.
    pub xyz: Vec<[f32; 3]>,
    /// The source's raw intensity per point.
    pub intensity: Vec<f32>,
}

/// A camera of a frame, as a pinhole.
#[derive(Debug, Clone)]
pub struct PinholeCamera {
    /// The source's camera name.
    pub name: String,
    /// Its position among the frame's cameras.
    pub position: usize,
    /// The pinhole twin of its calibration (OpenCV axes, no distortion).
    pub calibration: CameraCalibration,
    /// The real camera's lens distortion (what [`ImageMode::Log`] images keep).
    pub distortion: crate::frame::Distortion,
    /// Export frame → camera (OpenCV axes).
    pub camera_from_export: Isometry3<f64>,
}

impl PinholeCamera {
    /// The distortion coefficients of the images under `images`: OpenCV's `[k1, k2, p1, p2, k3]`
    /// (radial-tangential) or `[k1, k2, k3, k4]` (equidistant fisheye) of the real camera for
    /// [`ImageMode::Log`]; zeros for pinhole images.
    pub fn distortion_coefficients(&self, images: ImageMode) -> Vec<f64> {
        use crate::frame::Distortion;
        match (images, self.distortion) {
            (ImageMode::Log, Distortion::RadTan { k1, k2, p1, p2, k3 }) => vec![k1, k2, p1, p2, k3],
            (ImageMode::Log, Distortion::Equidistant { k1, k2, k3, k4 }) => vec![k1, k2, k3, k4],
            _ => vec![0.0; 5],
        }
    }

    /// `E`, the 4×4 export frame → camera, row-major.
    pub fn extrinsic(&self) -> [[f64; 4]; 4] {
        let m = self.camera_from_export.to_homogeneous();
        std::array::from_fn(|r| std::array::from_fn(|c| m[(r, c)]))
    }

    /// `K`, 3×3.
    pub fn intrinsic(&self) -> [[f64; 3]; 3] {
        let c = &self.calibration;
        [[c.fx, 0.0, c.cx], [0.0, c.fy, c.cy], [0.0, 0.0, 1.0]]
    }

    /// The pixel of a point of the export frame, `None` at or behind depth 0.01 m.
    pub fn project(&self, p: &Point3<f64>) -> Option<(f64, f64)> {
        let q = self.camera_from_export * p;
        if q.z <= MIN_DEPTH_M {
            return None;
        }
        project_point_in_camera(&self.calibration, &q).map(|px| (px.x, px.y))
    }

    /// Whether a point of the export frame projects inside the image in front of the camera.
    pub fn sees(&self, p: &Point3<f64>) -> bool {
        self.project(p).is_some_and(|(u, v)| self.inside(u, v))
    }

    /// A test of [`PinholeCamera::sees`] for many points: `K · [R | t]` taken once, so each point
    /// costs three dot products (the pinhole twin has no distortion).
    pub fn view_test(&self) -> impl Fn(&[f32; 3]) -> bool + '_ {
        let m = self.camera_from_export.to_homogeneous();
        let c = &self.calibration;
        let row = |r: usize| [m[(r, 0)], m[(r, 1)], m[(r, 2)], m[(r, 3)]];
        let (r0, r1, r2) = (row(0), row(1), row(2));
        move |p: &[f32; 3]| {
            let (x, y, z) = (f64::from(p[0]), f64::from(p[1]), f64::from(p[2]));
            let dot = |r: &[f64; 4]| r[0] * x + r[1] * y + r[2] * z + r[3];
            let depth = dot(&r2);
            if depth.is_nan() || depth <= MIN_DEPTH_M {
                return false;
            }
            let u = dot(&r0) / depth * c.fx + c.cx;
            let v = dot(&r1) / depth * c.fy + c.cy;
            self.inside(u, v)
        }
    }

    fn inside(&self, u: f64, v: f64) -> bool {
        u >= 0.0 && v >= 0.0 && u < f64::from(self.calibration.width) && v < f64::from(self.calibration.height)
    }

    /// The eight corners' pixel hull clipped to the image, when every corner lies in front of the
    /// camera; `None` otherwise.
    pub fn corner_hull(&self, b: &Box3) -> Option<[f64; 4]> {
        let (w, h) = (f64::from(self.calibration.width), f64::from(self.calibration.height));
        let mut hull = [f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY];
        for corner in box_corners(b) {
            let (u, v) = self.project(&corner)?;
            hull = [hull[0].min(u), hull[1].min(v), hull[2].max(u), hull[3].max(v)];
        }
        Some([
            hull[0].clamp(0.0, w),
            hull[1].clamp(0.0, h),
            hull[2].clamp(0.0, w),
            hull[3].clamp(0.0, h),
        ])
    }
}

/// The log of one sequence, opened for random access by frame index.
pub struct SequenceLog {
    source: Box<dyn Source>,
    path: PathBuf,
    undistorters: HashMap<String, Undistorter>,
    /// What [`SequenceLog::pinhole_image`] and [`pinhole_jpeg`] give (default: pinhole images).
    pub images: ImageMode,
}

impl SequenceLog {
    /// Opens the log of `sequence` as `location` says; `None` for [`LogLocation::Without`].
    pub fn open(sequence: &ShardSequence, location: &LogLocation) -> Result<Option<Self>, ExportError> {
        let path = match location {
            LogLocation::Without => return Ok(None),
            LogLocation::Log(path) => path.clone(),
            LogLocation::DataRoot(root) => root.join(&sequence.manifest.source),
        };
        if !path.exists() {
            return Err(ExportError::invalid(
                &path,
                format!(
                    "the log of sequence `{}` is not there (the manifest's source `{}`); give --data-root or --log, \
                     or --without-log to export from the shards alone (no images, stored points only)",
                    sequence.manifest.sequence, sequence.manifest.source
                ),
            ));
        }
        let kind = sequence.manifest.source_kind.parse().ok();
        let source = crate::sources::open(&path, kind, &sequence.reader_options())?;
        Ok(Some(Self {
            source,
            path,
            undistorters: HashMap::new(),
            images: ImageMode::Pinhole,
        }))
    }

    /// The log frame with source index `frame_index`.
    pub fn frame(&self, frame_index: i64) -> Result<Frame, ExportError> {
        let missing = || {
            ExportError::invalid(
                &self.path,
                format!("frame {frame_index} of the shards is not in the log (a different log?)"),
            )
        };
        // Frame indices grow with position; a skipped damaged record makes the index run ahead.
        let (mut lo, mut hi) = (0usize, self.source.len());
        let guess = usize::try_from(frame_index).map_err(|_| missing())?;
        if guess < hi {
            let frame = self.source.frame(guess)?;
            if frame.index as i64 == frame_index {
                return Ok(frame);
            }
            hi = guess;
        }
        while lo < hi {
            let mid = (lo + hi) / 2;
            let frame = self.source.frame(mid)?;
            match (frame.index as i64).cmp(&frame_index) {
                std::cmp::Ordering::Equal => return Ok(frame),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Err(missing())
    }

    /// The pinhole image of a camera view (its encoded bytes' pixels undistorted); the image as
    /// the log has it under [`ImageMode::Log`].
    pub fn pinhole_image(&mut self, view: &CameraView, frame_index: i64) -> Result<RgbImage, ExportError> {
        let image = view.image().map_err(|e| ExportError::Image {
            path: self.path.clone(),
            detail: format!("frame {frame_index}: {e}"),
        })?;
        if self.images == ImageMode::Log {
            return Ok(std::sync::Arc::unwrap_or_clone(image));
        }
        let undistorter = self
            .undistorters
            .entry(view.name.clone())
            .or_insert_with(|| Undistorter::new(&view.calibration));
        Ok(undistorter.apply(&image))
    }

    /// Whether a camera's images are already pinhole images (no distortion).
    pub fn is_pinhole(view: &CameraView) -> bool {
        view.calibration.distortion == crate::frame::Distortion::None
    }
}

/// The cameras of `frame` as pinholes seen from the export frame.
pub fn pinhole_cameras(frame: &Frame, export_from_sensor: &Isometry3<f64>, waymo: bool) -> Vec<PinholeCamera> {
    frame
        .cameras
        .iter()
        .enumerate()
        .map(|(position, view)| {
            let calibration = pinhole(&view.calibration);
            let camera_from_export = (export_from_sensor * calibration.sensor_from_camera).inverse();
            PinholeCamera {
                position: if waymo {
                    waymo_view_id(&view.name).unwrap_or(position)
                } else {
                    position
                },
                name: view.name.clone(),
                calibration,
                distortion: view.calibration.distortion,
                camera_from_export,
            }
        })
        .collect()
}

/// 3EED's Waymo view id: `CameraName` − 1 (`FRONT` 0 … `SIDE_RIGHT` 4).
fn waymo_view_id(name: &str) -> Option<usize> {
    ["FRONT", "FRONT_LEFT", "FRONT_RIGHT", "SIDE_LEFT", "SIDE_RIGHT"]
        .iter()
        .position(|n| *n == name)
}

/// A frame's points in the sensor frame: the log's sweep where there is a log, else the points
/// the run kept (`None` when it kept none).
pub fn frame_points(
    sequence: &ShardSequence,
    row: &FrameRow,
    log_frame: Option<&Frame>,
) -> Result<Option<SensorPoints>, ExportError> {
    if let Some(frame) = log_frame {
        let c = &frame.cloud;
        let xyz = (0..c.len()).map(|i| [c.x()[i], c.y()[i], c.z()[i]]).collect();
        return Ok(Some(SensorPoints {
            xyz,
            intensity: c.intensity().to_vec(),
        }));
    }
    let Some(file) = &row.points_file else {
        return Ok(None);
    };
    let Some(p) = read_points_frame(&sequence.dir.join(file), row.frame_index)? else {
        return Ok(None);
    };
    let xyz = (0..p.x.len()).map(|i| [p.x[i], p.y[i], p.z[i]]).collect();
    Ok(Some(SensorPoints {
        xyz,
        intensity: p.intensity,
    }))
}

/// The points moved into the export frame (float32 again).
pub fn points_in(points: &SensorPoints, export_from_sensor: &Isometry3<f64>) -> Vec<[f32; 3]> {
    if *export_from_sensor == Isometry3::identity() {
        return points.xyz.clone();
    }
    points
        .xyz
        .iter()
        .map(|p| {
            let q = export_from_sensor * Point3::new(f64::from(p[0]), f64::from(p[1]), f64::from(p[2]));
            [q.x as f32, q.y as f32, q.z as f32]
        })
        .collect()
}

/// JPEG bytes of an image (quality 95; `jpeg-encoder`, several times faster than `image`'s).
pub fn encode_jpeg(image: &RgbImage, what: &Path) -> Result<Vec<u8>, ExportError> {
    let fail = |detail: String| ExportError::Image {
        path: what.to_path_buf(),
        detail,
    };
    let (width, height) = image.dimensions();
    let (w, h) = (
        u16::try_from(width).map_err(|_| fail(format!("{width} px wide: JPEG holds at most 65,535")))?,
        u16::try_from(height).map_err(|_| fail(format!("{height} px high: JPEG holds at most 65,535")))?,
    );
    let mut bytes = Vec::new();
    jpeg_encoder::Encoder::new(&mut bytes, 95)
        .encode(image.as_raw(), w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| fail(e.to_string()))?;
    Ok(bytes)
}

/// The JPEG of a camera view in its pinhole form: the log's own bytes when they are a JPEG of an
/// undistorted camera (or of any camera under [`ImageMode::Log`]), else the resampled image encoded.
pub fn pinhole_jpeg(log: &mut SequenceLog, view: &CameraView, frame_index: i64) -> Result<Vec<u8>, ExportError> {
    if (SequenceLog::is_pinhole(view) || log.images == ImageMode::Log)
        && let Some(bytes) = view.encoded()
        && bytes.starts_with(&[0xFF, 0xD8])
    {
        return Ok(bytes.to_vec());
    }
    let image = log.pinhole_image(view, frame_index)?;
    encode_jpeg(
        &image,
        &log.path.join(format!("frame {frame_index} camera {}", view.name)),
    )
}

/// The finished sequence folders at or under `shards`, read; only those named in `names` when it
/// is not empty (a name no folder has is an error).
pub fn load_sequences(shards: &Path, names: &[String]) -> Result<Vec<ShardSequence>, ExportError> {
    let dirs = crate::shards::sequence_dirs(shards);
    if dirs.is_empty() {
        return Err(ExportError::invalid(
            shards,
            "no finished sequence folder (with boxes.parquet and _SUCCESS) here",
        ));
    }
    let mut out = Vec::new();
    for dir in dirs {
        let sequence = ShardSequence::load(&dir)?;
        if names.is_empty() || names.contains(&sequence.manifest.sequence) {
            out.push(sequence);
        }
    }
    for name in names {
        if !out.iter().any(|s| &s.manifest.sequence == name) {
            return Err(ExportError::invalid(
                shards,
                format!("no finished sequence `{name}` here"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{CameraAxes, Distortion};
    use nalgebra::{Translation3, UnitQuaternion, Vector3};

    #[test]
    fn view_test_agrees_with_sees() {
        let calibration = CameraCalibration {
            width: 640,
            height: 480,
            fx: 500.0,
            fy: 510.0,
            cx: 320.0,
            cy: 240.0,
            distortion: Distortion::None,
            axes: CameraAxes::OpenCv,
            sensor_from_camera: Isometry3::identity(),
        };
        let camera = PinholeCamera {
            name: "c".into(),
            position: 0,
            calibration,
            distortion: Distortion::None,
            camera_from_export: Isometry3::from_parts(
                Translation3::new(0.3, -0.2, 1.5),
                UnitQuaternion::from_scaled_axis(Vector3::new(0.1, -1.2, 0.05)),
            ),
        };
        let sees = camera.view_test();
        let (mut inside, mut total) = (0, 0);
        for i in -20..=20 {
            for j in -20..=20 {
                for k in -5..=5 {
                    let p = [i as f32 * 0.73, j as f32 * 0.61, k as f32 * 0.37];
                    let q = Point3::new(f64::from(p[0]), f64::from(p[1]), f64::from(p[2]));
                    assert_eq!(sees(&p), camera.sees(&q), "{p:?}");
                    inside += usize::from(sees(&p));
                    total += 1;
                }
            }
        }
        assert!(inside > 100 && inside < total / 2, "{inside} of {total} in view");
    }
}
