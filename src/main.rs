//! The `boxlayer` command line: parses arguments, calls one library function per subcommand and
//! prints the error chain once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Turns raw outdoor LiDAR + RGB logs into the 3D box layer of a grounding dataset.
#[derive(Debug, Parser)]
#[command(name = "boxlayer", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Simulate a vehicle, drone and quadruped log, run the whole pipeline on them with the
    /// bundled detectors, and print each step's quality against the simulator's truth.
    Demo {
        /// Sweeps per platform.
        #[arg(long, default_value_t = 40)]
        frames: usize,
        /// Simulator seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Output folder: the logs go to `OUT/logs/`, the shards to `OUT/shards/`.
        #[arg(long, default_value = "demo-out")]
        out: PathBuf,
        /// The pipeline config (default: the repository's `pipelines/demo.toml`).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Turn logs into the box layer: read → detect → fuse → track → ground contact → box rows → Parquet shards
    /// in `OUT/<platform>/<sequence>/`.
    Run {
        /// The pipeline config (`pipelines/*.toml`).
        config: PathBuf,
        /// Folder the data manifest's paths start from.
        #[arg(long, default_value = ".")]
        data_root: PathBuf,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// One log to run instead of the config's data manifest.
        #[arg(long)]
        input: Option<PathBuf>,
        /// The platform of `--input` (vehicle, drone, quadruped).
        #[arg(long, requires = "input")]
        platform: Option<boxlayer::Platform>,
        /// Ground truth of `--input` (JSON lines) to score the run against.
        #[arg(long, requires = "input")]
        truth: Option<PathBuf>,
        /// Only these sequences of the data manifest, comma-separated.
        #[arg(long, value_delimiter = ',')]
        sequences: Vec<String>,
        /// Only these positions of each sequence's frames, `A..B` (B excluded).
        #[arg(long, value_parser = parse_range)]
        frames: Option<std::ops::Range<usize>>,
        /// Start from an earlier run's stored detections (`fuse`, `track`, `camera`) instead of reading and detecting.
        #[arg(long, value_enum, default_value = "read")]
        from: boxlayer::pipeline::StartFrom,
        /// Your own detections (JSON lines, docs/pipeline.md) instead of the config's detectors.
        #[arg(long, conflicts_with = "from")]
        detections: Option<PathBuf>,
        /// This worker's index among `--workers` (0-based): it takes the manifest's sequences at
        /// positions k with k mod workers = worker. Default: the job array's index from the
        /// environment (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX; docs/cluster.md), else all.
        #[arg(long, requires = "workers")]
        worker: Option<usize>,
        /// How many workers share the manifest (default: SLURM_ARRAY_TASK_COUNT, BOXLAYER_WORKERS).
        #[arg(long)]
        workers: Option<usize>,
        /// Skip sequences finished by the same config and frame selection; clear and redo
        /// unfinished ones; refuse ones finished by another config (unless --force).
        #[arg(long)]
        resume: bool,
        /// With --resume: redo sequences finished by another config.
        #[arg(long, requires = "resume")]
        force: bool,
        /// Frames processed at once, and ONNX Runtime sessions per detector graph (one intra-op
        /// thread each); default: the config's `runtime.threads`, 0 there meaning every core.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Gather a run's sequence folders into `OUT/dataset.json` and check the dataset is complete:
    /// every sequence of the config's data manifest present once, finished, by one config; print
    /// the missing and failed ones with the command that redoes them (exit 1 if any).
    Merge {
        /// The run's output folder.
        out: PathBuf,
        /// The run's pipeline config (its data manifest lists the sequences that belong); without
        /// it, the folders found are the dataset.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The run's `--data-root` (for the commands printed).
        #[arg(long, default_value = ".")]
        data_root: PathBuf,
    },
    /// Dataset statistics of a run's box layer (3EED Table 6, Table 10, Fig. 4, Fig. 13), per
    /// platform and over all: objects per frame, points per box, targets by range and pitch,
    /// point elevation, classes, track lengths, review flags (docs/stats.md).
    Stats {
        /// A run's output folder, or one sequence folder.
        out_dir: PathBuf,
        /// Also write the statistics as JSON to this file (`-`: to standard output instead of the table).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Also draw the plots as PNG files into this folder (created if missing).
        #[arg(long)]
        plots: Option<PathBuf>,
        /// Frames with kept points read per sequence for the point-elevation histogram (evenly spaced).
        #[arg(long, default_value_t = 50)]
        point_frames: usize,
    },
    /// Draw a finished sequence: a frame from above or through a camera, or a track over time
    /// (PNG; docs/render.md).
    Render {
        #[command(subcommand)]
        kind: RenderKind,
    },
    /// One self-contained HTML page about a run's output: sequences, quality against truth,
    /// statistics and plots, a gallery of flagged boxes, stage timings (docs/render.md).
    Report {
        /// A run's output folder, or one sequence folder.
        out_dir: PathBuf,
        /// The page to write.
        file: PathBuf,
        /// The folder the manifests' `source` paths start from (the run's `--data-root`), for
        /// camera crops and full sweeps in the gallery.
        #[arg(long, conflicts_with = "without_log")]
        data_root: Option<PathBuf>,
        /// Without the logs: the gallery shows the points the run kept and no camera crops.
        #[arg(long)]
        without_log: bool,
        /// Flagged boxes shown in the gallery at most.
        #[arg(long, default_value_t = 24)]
        gallery: usize,
    },
    /// Write finished sequence folders in another tool's layout: 3EED's release layout, KITTI's
    /// object layout, or an Xtreme1 upload with pre-labels (`docs/export.md`).
    Export {
        #[command(subcommand)]
        format: ExportFormat,
    },
    /// Take an annotation tool's corrections back into the shards: moves, resizes, class
    /// changes, deletions and additions, with review status and history (`edits.parquet`).
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
    /// Measure the pipeline against its ONNX-bound limit on a simulated vehicle log: the whole
    /// run's wall time, then the detectors' ONNX sessions alone on the same sweeps and threads.
    Bench {
        /// Sweeps of the simulated log.
        #[arg(long, default_value_t = 200)]
        frames: usize,
        /// Simulator seed.
        #[arg(long, default_value_t = 5000)]
        seed: u64,
        /// Work folder (the log goes to `OUT/logs/`, the shards to `OUT/shards/`); an existing log is
        /// reused, and an earlier bench's finished sequence folder is removed before the clock starts.
        #[arg(long, default_value = "bench-out")]
        out: PathBuf,
        /// The pipeline config (default: the repository's `pipelines/demo.toml`).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Fuse detections given as JSON lines (docs/pipeline.md) with a pipeline config's fusion
    /// settings; write the fused boxes as JSON lines `eval` reads.
    Fuse {
        /// The detections.
        detections: PathBuf,
        /// The pipeline config whose `[fusion]` applies.
        #[arg(long)]
        config: PathBuf,
        /// The platform (selects the fusion overrides).
        #[arg(long)]
        platform: boxlayer::Platform,
        /// Output file (`-`: standard output).
        #[arg(long)]
        out: PathBuf,
    },
    /// Track per-frame boxes given as JSON lines (`fuse` output, or one detector's `detect
    /// --json` lines) with a pipeline config's tracking settings; write the consolidated boxes
    /// as JSON lines with `track_id` and `origin`, which `eval` reads.
    Track {
        /// The per-frame boxes (sequence, frame, box, class, score).
        boxes: PathBuf,
        /// The pipeline config whose `[tracking]` applies.
        #[arg(long)]
        config: PathBuf,
        /// The platform (selects the tracking profile).
        #[arg(long)]
        platform: boxlayer::Platform,
        /// The log the boxes were detected on: each frame's time, pose and points come from its
        /// frame of the same index. Without it frames are 100 ms apart and the sensor still.
        #[arg(long)]
        log: Option<PathBuf>,
        /// Output file (`-`: standard output).
        #[arg(long)]
        out: PathBuf,
    },
    /// Re-normalize finished shard folders with a platform profile, without rerunning detection:
    /// each frame's gravity and altitude and every box's normalized-frame values are recomputed
    /// from the stored sensor-frame values (the kept points feed the ground fit; `--log` adds the
    /// IMU and the sweeps not kept), and the manifest records the profile and its sha256.
    Normalize {
        /// A shipped profile (`m3ed_drone`, `waymo_vehicle`, …; `pipelines/platforms/`) or a
        /// profile TOML.
        #[arg(long)]
        profile: String,
        /// The log of the one sequence folder given.
        #[arg(long)]
        log: Option<PathBuf>,
        /// Sequence folders, or folders holding them (`run --out`).
        #[arg(required = true)]
        shards: Vec<PathBuf>,
    },
    /// Print a one-screen summary of an input: an ONNX model, or any log a source reads (Waymo,
    /// M3ED, KITTI, PCD, `.npy`, MCAP); `--check` also decodes every frame of the log.
    Inspect {
        /// The file to summarise.
        file: PathBuf,
        /// Also decode every frame of a sensor log and list each damaged record or frame; exits
        /// non-zero if there is one.
        #[arg(long)]
        check: bool,
    },
    /// Evaluate predictions against ground truth: detection AP, tracking CLEAR-MOT/AMOTA, grounding Acc@δ/mIoU.
    Eval {
        /// Ground truth: a 3EED-layout folder, a JSON-lines box list, a Waymo v1 segment or the simulator's truth Parquet.
        #[arg(long)]
        gt: PathBuf,
        /// Predictions: JSON lines (`detect --json` output too), shards or any ground-truth format.
        #[arg(long)]
        pred: PathBuf,
        /// Ground-truth format: `3eed`, `jsonl`, `waymo` (a v1 segment's labels), `shards`
        /// (`boxlayer run` output) or `truth` (the simulator's `<seq>_boxes_gt.parquet`); by default
        /// a folder of shards is shards, another folder 3eed, a `.tfrecord` waymo, a
        /// `*_boxes_gt.parquet` truth and any other file jsonl.
        #[arg(long)]
        format: Option<boxlayer::eval::InputFormat>,
        /// Prediction format, guessed the same way by default.
        #[arg(long)]
        pred_format: Option<boxlayer::eval::InputFormat>,
        /// Also write the full results as JSON to this file (`-`: to standard output instead of the table).
        #[arg(long)]
        json: Option<PathBuf>,
        /// An `EvalConfig` TOML file; defaults apply to everything it leaves out.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also measure the predictions' detection-noise profile against the ground truth
        /// (`sim::DetectorNoiseProfile::fit`) and write it to this TOML file.
        #[arg(long)]
        fit_noise_profile: Option<PathBuf>,
    },
    /// Run one detector on frames of a log and print (or export as JSON) its boxes.
    ///
    /// The input is anything a reader opens: a Waymo segment or v2 folder, an M3ED data file, a
    /// KITTI `.bin` sweep or sequence folder, PCD or `.npy` files or folders, a ROS 2 MCAP bag.
    Detect {
        /// The detector folder (holding `detector.toml`).
        #[arg(long)]
        detector: PathBuf,
        /// The log: a file or folder.
        file: PathBuf,
        /// The reader to open it with (`waymo-v1`, `m3ed`, `kitti-bin`, …); default: the first
        /// that accepts it.
        #[arg(long)]
        kind: Option<boxlayer::sources::SourceKind>,
        /// The fields of a raw `.bin` sweep's float32 points, in file order (default `x,y,z,intensity`;
        /// `x,y,z,intensity,ring` for a nuScenes `*.pcd.bin`).
        #[arg(long, value_delimiter = ',')]
        fields: Option<Vec<String>>,
        /// The frame: its position among the log's readable frames.
        #[arg(long, default_value_t = 0, conflicts_with = "frames")]
        frame: usize,
        /// Every frame in `A..B` (positions, clipped to the log) instead of one: the detector
        /// loads once, a frame that does not decode is skipped with a warning, and a line per
        /// frame replaces the table.
        #[arg(long, value_parser = parse_range)]
        frames: Option<std::ops::Range<usize>>,
        /// Also write the boxes as JSON lines to this file, in the detections format that `run
        /// --detections`, `fuse` and `eval` read (`-`: to standard output instead of the table).
        #[arg(long)]
        json: Option<PathBuf>,
        /// The platform profile (`m3ed_drone`, `waymo_vehicle`, …; `pipelines/platforms/`) or a
        /// profile TOML that gravity-aligns each frame for a detector trained in the normalized
        /// frame (its `input_frame`); its boxes come back in the sensor frame.
        #[arg(long)]
        profile: Option<String>,
        /// Give the points as read, whatever frame the detector's manifest declares (for points
        /// already in its frame, such as `export_training_set --frame normalized` sweeps).
        #[arg(long, conflicts_with = "profile")]
        no_normalize: bool,
    },
    /// Simulate a sequence and write it in its platform's real format: a car as a Waymo v1
    /// segment (`segment-sim_seed<S>_with_camera_labels.tfrecord`), a drone or quadruped as M3ED
    /// files (`<seq>_data.h5`, `<seq>_pose_gt.h5`); ground truth as JSON lines (`<seq>_boxes_gt.jsonl`)
    /// and Parquet (`<seq>_boxes_gt.parquet`, `<seq>_frames_gt.parquet`).
    Simulate {
        /// `vehicle` (Waymo segment `sim_seed<S>`), `drone` (M3ED `falcon_sim_seed<S>`) or
        /// `quadruped` (`spot_sim_seed<S>`).
        #[arg(long, value_parser = parse_sim_platform)]
        platform: boxlayer::Platform,
        /// Number of 100 ms sweeps.
        #[arg(long, default_value_t = 20)]
        frames: usize,
        /// Seed of the scene, route and noise; the same seed and options give identical files.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output folder (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// A `SimConfig` TOML file; defaults apply to everything it leaves out (`frames` is set by `--frames`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Vehicle only: the cameras whose images are rendered, comma-separated Waymo names
        /// (`FRONT,FRONT_LEFT,FRONT_RIGHT,SIDE_LEFT,SIDE_RIGHT`, the default), or `none`; all
        /// five are calibrated either way.
        #[arg(long, value_delimiter = ',')]
        cameras: Option<Vec<String>>,
    },
}

/// Parses a platform the simulator writes: every platform but `other`, which has no sensor format.
fn parse_sim_platform(text: &str) -> Result<boxlayer::Platform, String> {
    match text.parse::<boxlayer::Platform>() {
        Ok(boxlayer::Platform::Other) | Err(_) => Err(format!(
            "`{text}`: the simulator writes `vehicle` (a Waymo segment), `drone` or `quadruped` (M3ED files)"
        )),
        Ok(platform) => Ok(platform),
    }
}

/// Parses `A..B` into a half-open range.
/// What every picture reads.
#[derive(Debug, clap::Args)]
struct RenderInput {
    /// A finished sequence folder (`<out>/<platform>/<sequence>`).
    sequence_dir: PathBuf,
    /// The PNG file to write.
    #[arg(long)]
    out: PathBuf,
    /// The folder the manifest's `source` path starts from (the run's `--data-root`).
    #[arg(long, default_value = ".")]
    data_root: PathBuf,
    /// The sequence's log (instead of finding it under `--data-root`).
    #[arg(long, conflicts_with = "without_log")]
    log: Option<PathBuf>,
    /// Draw from the shards alone: the points the run kept, no images.
    #[arg(long)]
    without_log: bool,
    /// Ground truth to draw beside the boxes, in any input `boxlayer eval` reads (simulator
    /// truth, JSON lines, a Waymo segment's labels).
    #[arg(long)]
    truth: Option<PathBuf>,
}

impl RenderInput {
    /// The sequence, its log and the truth.
    fn open(
        &self,
    ) -> anyhow::Result<(
        boxlayer::export::ShardSequence,
        Option<boxlayer::export::SequenceLog>,
        Vec<boxlayer::eval::EvalBox>,
    )> {
        let sequence = boxlayer::export::ShardSequence::load(&self.sequence_dir)?;
        let log = boxlayer::export::SequenceLog::open(
            &sequence,
            &log_location(&self.log, self.without_log, &self.data_root),
        )?;
        let truth = match &self.truth {
            Some(path) => boxlayer::render::load_truth(path)?,
            None => Vec::new(),
        };
        Ok((sequence, log, truth))
    }
}

#[derive(Debug, Subcommand)]
enum RenderKind {
    /// A frame from above: points by height or intensity, boxes in class colours with heading
    /// ticks, track ids and flag marks, truth dashed.
    Bev {
        #[command(flatten)]
        input: RenderInput,
        /// The frame index.
        #[arg(long)]
        frame: i64,
        /// Half the side of the square shown (m), around the sensor.
        #[arg(long, default_value_t = 60.0)]
        range: f64,
        /// Image side (px).
        #[arg(long, default_value_t = 1000)]
        size: u32,
        /// What colours the points.
        #[arg(long, value_enum, default_value_t = boxlayer::render::ColorBy::Height)]
        color_by: boxlayer::render::ColorBy,
    },
    /// A frame's camera image with the boxes drawn in through the lens model, labelled.
    Camera {
        #[command(flatten)]
        input: RenderInput,
        /// The frame index.
        #[arg(long)]
        frame: i64,
        /// The camera (`FRONT`, `ovc_rgb`, …); default: the one most boxes are best seen in.
        #[arg(long)]
        camera: Option<String>,
    },
    /// A track over time: a strip of camera crops over bird's-eye views.
    Track {
        #[command(flatten)]
        input: RenderInput,
        /// The track id.
        #[arg(long)]
        track: i64,
        /// Boxes shown at most, evenly spaced in time.
        #[arg(long, default_value_t = 8)]
        columns: usize,
    },
}

/// What every export reads.
#[derive(Debug, clap::Args)]
struct ExportInput {
    /// A run's output folder, or one sequence folder.
    shards: PathBuf,
    /// The output folder (replaced when it exists; written under `OUT.partial` until complete).
    out: PathBuf,
    /// The folder the manifests' `source` paths start from (the run's `--data-root`).
    #[arg(long, default_value = ".")]
    data_root: PathBuf,
    /// The log of the one sequence exported (instead of finding it under `--data-root`).
    #[arg(long, conflicts_with = "without_log")]
    log: Option<PathBuf>,
    /// Export from the shards alone: stored points only, no images or cameras.
    #[arg(long)]
    without_log: bool,
    /// Only these sequences, comma-separated.
    #[arg(long, value_delimiter = ',')]
    sequences: Vec<String>,
}

impl ExportInput {
    fn log(&self) -> boxlayer::export::LogLocation {
        log_location(&self.log, self.without_log, &self.data_root)
    }
}

/// Where the logs are, from `--log`, `--without-log` and `--data-root` (clap keeps the first two
/// apart).
fn log_location(
    log: &Option<PathBuf>,
    without_log: bool,
    data_root: &std::path::Path,
) -> boxlayer::export::LogLocation {
    use boxlayer::export::LogLocation;
    match (log, without_log) {
        (Some(log), _) => LogLocation::Log(log.clone()),
        (None, true) => LogLocation::Without,
        (None, false) => LogLocation::DataRoot(data_root.to_path_buf()),
    }
}

#[derive(Debug, Subcommand)]
enum ExportFormat {
    /// 3EED's release layout: `<platform>/<sequence>/<NNNN>_<k>/{lidar.bin, image.jpg,
    /// meta_info.json}` per camera view with targets, and split files.
    #[command(name = "3eed")]
    ThreeEed {
        #[command(flatten)]
        input: ExportInput,
        /// Only every K-th frame index.
        #[arg(long, default_value_t = 1)]
        every: usize,
        /// Keep views without a target (3EED drops them).
        #[arg(long)]
        all_frames: bool,
        /// `camera-fov` crops `lidar.bin` to the view's camera, `none` keeps every point.
        #[arg(long, default_value = "camera-fov", value_parser = ["camera-fov", "none"])]
        crop: String,
        /// The frame points and boxes are written in.
        #[arg(long, value_enum, default_value_t = boxlayer::export::ExportFrame::Sensor)]
        frame: boxlayer::export::ExportFrame,
        /// Sequences of the `val` split, comma-separated (the rest are `train`).
        #[arg(long, value_delimiter = ',')]
        val: Vec<String>,
        /// `pinhole`: images resampled onto each camera's pinhole twin, exact for a bare K;
        /// `log`: the log's own images, lens distortion left in (much faster).
        #[arg(long, value_enum, default_value_t = boxlayer::export::ImageMode::Pinhole)]
        images: boxlayer::export::ImageMode,
    },
    /// KITTI's object layout (`training/{velodyne,label_2,calib,image_2}`) for OpenPCDet and
    /// mmdetection3d.
    Kitti {
        #[command(flatten)]
        input: ExportInput,
        /// The camera of `image_2` (default: each frame's first).
        #[arg(long)]
        camera: Option<String>,
        /// Label every box, not only those the camera sees.
        #[arg(long)]
        all_boxes: bool,
        /// Only every K-th frame index.
        #[arg(long, default_value_t = 1)]
        every: usize,
        /// Sequences of `ImageSets/val.txt`, comma-separated (the rest go to `train.txt`).
        #[arg(long, value_delimiter = ',')]
        val: Vec<String>,
        /// `pinhole`: images resampled onto each camera's pinhole twin, exact for a bare K;
        /// `log`: the log's own images, lens distortion left in (much faster).
        #[arg(long, value_enum, default_value_t = boxlayer::export::ImageMode::Pinhole)]
        images: boxlayer::export::ImageMode,
    },
    /// An Xtreme1 "LiDAR Fusion" upload (`OUT/xtreme1_upload.zip`) with pre-labels, and the
    /// class list they use (`OUT/classes.json`).
    Xtreme1 {
        #[command(flatten)]
        input: ExportInput,
        /// Only frames holding a flagged box (with all their boxes).
        #[arg(long)]
        flagged_only: bool,
        /// Only frame indices in `A..B`.
        #[arg(long, value_parser = parse_range)]
        frames: Option<std::ops::Range<usize>>,
        /// The Xtreme1 dataset's class list (`[{"id": …, "name": …}]`); default boxlayer's.
        #[arg(long)]
        classes: Option<PathBuf>,
        /// The frame points and boxes are written in.
        #[arg(long, value_enum, default_value_t = boxlayer::export::ExportFrame::Sensor)]
        frame: boxlayer::export::ExportFrame,
        /// `pinhole`: images resampled onto each camera's pinhole twin, exact for a bare K;
        /// `log`: the log's own images, lens distortion left in (much faster).
        #[arg(long, value_enum, default_value_t = boxlayer::export::ImageMode::Pinhole)]
        images: boxlayer::export::ImageMode,
    },
    /// An MCAP recording for Foxglove: points, boxes as cubes coloured by track, poses,
    /// transforms and camera images over time. OUT is the `.mcap` file for one sequence, or a
    /// folder of `<platform>/<sequence>.mcap` when several are selected.
    Mcap {
        #[command(flatten)]
        input: ExportInput,
        /// The frame points and boxes are written in.
        #[arg(long, value_enum, default_value_t = boxlayer::export::ExportFrame::Sensor)]
        frame: boxlayer::export::ExportFrame,
        /// zstd level of the chunks (ROS 2's default, 1; 0 = the zstd library's default, 3).
        #[arg(long, default_value_t = boxlayer::sources::mcap::ROS2_ZSTD_LEVEL)]
        compression_level: u32,
    },
}

#[derive(Debug, Subcommand)]
enum ImportFormat {
    /// An Xtreme1 export zip (`<dataset>-<time>.zip`) of a dataset uploaded from `export xtreme1`.
    Xtreme1 {
        /// The export zip.
        export: PathBuf,
        /// The run's output folder holding the sequences.
        shards: PathBuf,
        /// The frame the upload was written in (`export xtreme1 --frame`).
        #[arg(long, value_enum, default_value_t = boxlayer::export::ExportFrame::Sensor)]
        frame: boxlayer::export::ExportFrame,
        /// The class list the upload used (`export xtreme1 --classes`); default boxlayer's.
        #[arg(long)]
        classes: Option<PathBuf>,
    },
}

fn parse_range(text: &str) -> Result<std::ops::Range<usize>, String> {
    let (a, b) = text.split_once("..").ok_or_else(|| format!("`{text}` is not A..B"))?;
    let a: usize = a.trim().parse().map_err(|e| format!("`{a}`: {e}"))?;
    let b: usize = b.trim().parse().map_err(|e| format!("`{b}`: {e}"))?;
    if b <= a {
        return Err(format!("`{text}`: the end must be after the start"));
    }
    Ok(a..b)
}

/// Writes `text` to `out`, or to standard output when `out` is `-`; a file is written whole under
/// a temporary name and renamed, so it is never seen half-written.
fn write_output(out: &std::path::Path, text: &str) -> anyhow::Result<()> {
    if out.as_os_str() == "-" {
        write_stdout(text)
    } else {
        boxlayer::atomic_file::write_atomic(out, text.as_bytes()).with_context(|| format!("write {}", out.display()))
    }
}

/// Writes `text` to standard output. A closed stdout (`boxlayer … | head`) ends the output
/// quietly, as Unix tools do, instead of panicking as `print!` would; files already written stay.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("write to standard output"),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("BOXLAYER_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<Exit>() {
            Some(exit) => {
                eprintln!("{}", exit.message);
                ExitCode::from(exit.code)
            }
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// A command that ran to its end but must report failure with this exit status; its message
/// is printed alone (what failed was listed on the way).
#[derive(Debug)]
struct Exit {
    code: u8,
    message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// SIGINT and SIGTERM raise `stop` (the run ends the current sequence without output, then
/// exits 130 or 143); a second one ends the process at once with the same status, which also
/// leaves nothing that looks complete.
fn stop_on_signals(stop: &boxlayer::pipeline::StopSignal) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let seen = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees `seen` as the earlier signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&seen))
            .context("install the signal handlers")?;
        signal_hook::flag::register(signal, Arc::clone(&seen)).context("install the signal handlers")?;
        signal_hook::flag::register_usize(signal, stop.flag(), signal as usize)
            .context("install the signal handlers")?;
    }
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Demo {
            frames,
            seed,
            out,
            config,
        } => {
            let options = boxlayer::demo::DemoOptions {
                frames,
                seed,
                out,
                config: config.unwrap_or_else(|| PathBuf::from(boxlayer::demo::DEMO_CONFIG)),
                progress: true,
            };
            let report = boxlayer::demo::run(&options).context("demo")?;
            write_stdout(&report.to_string())?;
        }
        Command::Run {
            config,
            data_root,
            out,
            input,
            platform,
            truth,
            sequences,
            frames,
            from,
            detections,
            worker,
            workers,
            resume,
            force,
            threads,
        } => {
            let loaded = boxlayer::pipeline::PipelineConfig::load(&config)?;
            let share = boxlayer::pipeline::WorkerShare::resolve(worker, workers, |name| std::env::var(name).ok())?;
            let stop = boxlayer::pipeline::StopSignal::new();
            stop_on_signals(&stop)?;
            let options = boxlayer::pipeline::RunOptions {
                data_root,
                input,
                platform,
                truth,
                sequences,
                frames,
                from,
                detections,
                progress: true,
                share,
                resume,
                force,
                threads,
                stop,
                ..boxlayer::pipeline::RunOptions::new(loaded, out)
            };
            let summary = boxlayer::pipeline::run(&options).context("run")?;
            write_stdout(&summary.to_string())?;
            if let Some(signal) = summary.interrupted {
                return Err(Exit {
                    code: 128 + signal.clamp(1, 127) as u8,
                    message: format!("run stopped by signal {signal}; rerun with --resume to finish it"),
                }
                .into());
            }
            if !summary.failed.is_empty() {
                return Err(Exit {
                    code: 1,
                    message: format!(
                        "{} of {} sequences failed (listed above; each left a <sequence>.failed.json)",
                        summary.failed.len(),
                        summary.failed.len() + summary.sequences.len() + summary.skipped.len()
                    ),
                }
                .into());
            }
        }
        Command::Render { kind } => {
            use boxlayer::render::{BevOptions, TileOptions, render_bev, render_camera, render_track, save_png};
            let (image, out) = match kind {
                RenderKind::Bev {
                    input,
                    frame,
                    range,
                    size,
                    color_by,
                } => {
                    let (sequence, log, truth) = input.open()?;
                    let options = BevOptions {
                        size_px: size,
                        range_m: range,
                        color_by,
                        ..BevOptions::default()
                    };
                    let image = render_bev(&sequence, log.as_ref(), frame, &truth, &options)
                        .with_context(|| format!("render bev {} frame {frame}", input.sequence_dir.display()))?;
                    (image, input.out)
                }
                RenderKind::Camera { input, frame, camera } => {
                    let (sequence, log, truth) = input.open()?;
                    let log = log.context("a camera picture needs the log (give --data-root or --log)")?;
                    let image = render_camera(&sequence, &log, frame, camera.as_deref(), &truth)
                        .with_context(|| format!("render camera {} frame {frame}", input.sequence_dir.display()))?;
                    (image, input.out)
                }
                RenderKind::Track { input, track, columns } => {
                    let (sequence, log, _) = input.open()?;
                    let image = render_track(&sequence, log.as_ref(), track, columns, &TileOptions::default())
                        .with_context(|| format!("render track {} track {track}", input.sequence_dir.display()))?;
                    (image, input.out)
                }
            };
            save_png(&image, &out)?;
            println!("{} ({}×{})", out.display(), image.width(), image.height());
        }
        Command::Report {
            out_dir,
            file,
            data_root,
            without_log,
            gallery,
        } => {
            use boxlayer::export::LogLocation;
            let options = boxlayer::report::ReportOptions {
                log: match (data_root, without_log) {
                    (Some(root), false) => LogLocation::DataRoot(root),
                    _ => LogLocation::Without,
                },
                gallery,
                ..boxlayer::report::ReportOptions::default()
            };
            let summary = boxlayer::report::write_report(&out_dir, &file, &options)
                .with_context(|| format!("report on {}", out_dir.display()))?;
            println!(
                "{}: {} sequences, {} plots, {} of {} flagged boxes shown, {:.1} MB, {:.1} s",
                summary.path.display(),
                summary.sequences,
                summary.plots,
                summary.gallery,
                summary.flagged,
                summary.bytes as f64 / 1e6,
                summary.seconds[2]
            );
        }
        Command::Export { format } => {
            use boxlayer::export::{KittiOptions, ThreeEedOptions, Xtreme1Class, Xtreme1Options};
            let summary = match format {
                ExportFormat::ThreeEed {
                    input,
                    every,
                    all_frames,
                    crop,
                    frame,
                    val,
                    images,
                } => {
                    let options = ThreeEedOptions {
                        every,
                        all_frames,
                        crop_to_camera: crop == "camera-fov",
                        frame,
                        val_sequences: val,
                        sequences: input.sequences.clone(),
                        log: input.log(),
                        images,
                    };
                    boxlayer::export::export_3eed(&input.shards, &input.out, &options)
                        .with_context(|| format!("export 3eed {}", input.shards.display()))?
                }
                ExportFormat::Kitti {
                    input,
                    camera,
                    all_boxes,
                    every,
                    val,
                    images,
                } => {
                    let options = KittiOptions {
                        camera,
                        all_boxes,
                        every,
                        val_sequences: val,
                        sequences: input.sequences.clone(),
                        log: input.log(),
                        images,
                    };
                    boxlayer::export::export_kitti(&input.shards, &input.out, &options)
                        .with_context(|| format!("export kitti {}", input.shards.display()))?
                }
                ExportFormat::Xtreme1 {
                    input,
                    flagged_only,
                    frames,
                    classes,
                    frame,
                    images,
                } => {
                    let classes = match classes {
                        Some(path) => Xtreme1Class::load(&path)?,
                        None => Xtreme1Class::defaults(),
                    };
                    let options = Xtreme1Options {
                        flagged_only,
                        frames: frames.map(|r| r.start as i64..r.end as i64),
                        classes,
                        frame,
                        sequences: input.sequences.clone(),
                        log: input.log(),
                        images,
                    };
                    boxlayer::export::export_xtreme1(&input.shards, &input.out, &options)
                        .with_context(|| format!("export xtreme1 {}", input.shards.display()))?
                }
                ExportFormat::Mcap {
                    input,
                    frame,
                    compression_level,
                } => {
                    let options = boxlayer::export::McapOptions {
                        frame,
                        sequences: input.sequences.clone(),
                        log: input.log(),
                        compression_level,
                    };
                    let s = boxlayer::export::export_mcap(&input.shards, &input.out, &options)
                        .with_context(|| format!("export mcap {}", input.shards.display()))?;
                    let mut text = String::new();
                    for (topic, n) in &s.messages {
                        text.push_str(&format!("  {topic}: {n} messages\n"));
                    }
                    write_stdout(&text)?;
                    s.export
                }
            };
            write_stdout(&format!(
                "{}: {} sequences, {} samples, {} boxes, {} images\n",
                summary.out.display(),
                summary.sequences,
                summary.samples,
                summary.boxes,
                summary.images
            ))?;
        }
        Command::Import {
            format:
                ImportFormat::Xtreme1 {
                    export,
                    shards,
                    frame,
                    classes,
                },
        } => {
            let classes = match classes {
                Some(path) => boxlayer::export::Xtreme1Class::load(&path)?,
                None => boxlayer::export::Xtreme1Class::defaults(),
            };
            let options = boxlayer::export::ImportOptions {
                frame,
                classes,
                ..boxlayer::export::ImportOptions::default()
            };
            let s = boxlayer::export::import_xtreme1(&export, &shards, &options)
                .with_context(|| format!("import xtreme1 {}", export.display()))?;
            write_stdout(&format!(
                "{}: {} scenes, {} frames; {} moved or resized, {} reclassed, {} verified, {} rejected, {} added; \
                 {} sequence folders rewritten, {} history rows\n",
                export.display(),
                s.sequences,
                s.frames,
                s.moved,
                s.reclassed,
                s.verified,
                s.rejected,
                s.added,
                s.sequences_changed,
                s.edits
            ))?;
        }
        Command::Merge { out, config, data_root } => {
            let loaded = config
                .as_deref()
                .map(boxlayer::pipeline::PipelineConfig::load)
                .transpose()?;
            let report = boxlayer::pipeline::merge(&out, loaded.as_ref(), &data_root)
                .with_context(|| format!("merge {}", out.display()))?;
            write_stdout(&report.to_string())?;
            if !report.dataset.complete {
                return Err(Exit {
                    code: 1,
                    message: format!("{}: the dataset is incomplete (listed above)", out.display()),
                }
                .into());
            }
        }
        Command::Stats {
            out_dir,
            json,
            plots,
            point_frames,
        } => {
            let options = boxlayer::stats::StatsOptions { point_frames };
            let stats =
                boxlayer::stats::compute(&out_dir, &options).with_context(|| format!("stats {}", out_dir.display()))?;
            match &json {
                Some(path) if path.as_os_str() == "-" => {
                    let text = serde_json::to_string_pretty(&stats).context("encode the statistics as JSON")?;
                    write_stdout(&(text + "\n"))?;
                }
                Some(path) => {
                    write_stdout(&stats.table())?;
                    let text = serde_json::to_string_pretty(&stats).context("encode the statistics as JSON")?;
                    boxlayer::atomic_file::write_atomic(path, (text + "\n").as_bytes())
                        .with_context(|| format!("write {}", path.display()))?;
                }
                None => write_stdout(&stats.table())?,
            }
            if let Some(dir) = plots {
                std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
                for plot in boxlayer::stats::plots(&stats).context("draw the statistics plots")? {
                    let path = dir.join(format!("{}.png", plot.name));
                    boxlayer::atomic_file::write_atomic(&path, &plot.png)
                        .with_context(|| format!("write {}", path.display()))?;
                }
            }
        }
        Command::Bench {
            frames,
            seed,
            out,
            config,
        } => {
            let config = config.unwrap_or_else(|| PathBuf::from(boxlayer::demo::DEMO_CONFIG));
            let loaded = boxlayer::pipeline::PipelineConfig::load(&config)?;
            let logs = out.join("logs");
            let segment = logs.join(boxlayer::sim::segment_file_name(&boxlayer::sim::default_segment_name(
                seed,
            )));
            let log = if segment.is_file() {
                segment
            } else {
                boxlayer::demo::simulate_log(boxlayer::Platform::Vehicle, frames, seed, &logs)
                    .context("simulate the bench log")?
                    .path
            };
            let report = boxlayer::pipeline::bench(&boxlayer::pipeline::BenchOptions {
                config: loaded,
                log,
                out: out.join("shards"),
            })
            .context("bench")?;
            write_stdout(&report.to_string())?;
        }
        Command::Fuse {
            detections,
            config,
            platform,
            out,
        } => {
            let settings = boxlayer::pipeline::PipelineConfig::load_settings(&config)?;
            let text = boxlayer::pipeline::fuse_detections_file(&detections, &settings.fusion, platform)
                .with_context(|| format!("fuse {}", detections.display()))?;
            write_output(&out, &text)?;
        }
        Command::Track {
            boxes,
            config,
            platform,
            log,
            out,
        } => {
            let settings = boxlayer::pipeline::PipelineConfig::load_settings(&config)?;
            let source = log
                .as_deref()
                .map(|path| boxlayer::sources::open(path, None, &settings.source.options))
                .transpose()
                .context("open --log")?;
            let text = boxlayer::pipeline::track_boxes_file(&boxes, &settings.tracking, platform, source.as_deref())
                .with_context(|| format!("track {}", boxes.display()))?;
            write_output(&out, &text)?;
        }
        Command::Normalize { profile, log, shards } => {
            let profile = boxlayer::normalize::Profile::load(&profile).context("load --profile")?;
            let dirs: Vec<PathBuf> = shards.iter().flat_map(|p| boxlayer::shards::sequence_dirs(p)).collect();
            if dirs.is_empty() {
                anyhow::bail!("no finished sequence folder (with boxes.parquet and _SUCCESS) in the paths given");
            }
            if log.is_some() && dirs.len() != 1 {
                anyhow::bail!(
                    "--log names one sequence's log, but {} sequence folders were given",
                    dirs.len()
                );
            }
            let reader_options = profile
                .profile
                .reader_options(&boxlayer::sources::SourceOptions::default())
                .map_err(anyhow::Error::msg)
                .context("--profile: [source]")?;
            let source = log
                .as_deref()
                .map(|path| boxlayer::sources::open(path, None, &reader_options))
                .transpose()
                .context("open --log")?;
            for dir in dirs {
                let s = boxlayer::pipeline::renormalize(&dir, &profile, source.as_deref())
                    .with_context(|| format!("normalize {}", dir.display()))?;
                write_stdout(&format!(
                    "{}: {} frames ({} with points, {} with IMU), {} boxes, profile {} ({})\n",
                    s.dir.display(),
                    s.frames,
                    s.frames_with_points,
                    s.frames_with_imu,
                    s.boxes,
                    profile.profile.name,
                    &profile.sha256[..12]
                ))?;
            }
        }
        Command::Inspect { file, check } => {
            let summary = boxlayer::inspect::inspect(&file).with_context(|| format!("inspect {}", file.display()));
            match summary {
                Ok(summary) => write_stdout(&summary)?,
                // `--check` reads whatever a source reads, including kinds the summary does not know.
                Err(e) if check => tracing::warn!("no summary: {e:#}"),
                Err(e) => return Err(e),
            }
            if check {
                let report = boxlayer::inspect::check(&file).with_context(|| format!("check {}", file.display()))?;
                write_stdout(&report.to_string())?;
                if !report.is_clean() {
                    anyhow::bail!(
                        "{}: {} damaged records or frames (listed above)",
                        file.display(),
                        report.damaged.len()
                    );
                }
            }
        }
        Command::Eval {
            gt,
            pred,
            format,
            pred_format,
            json,
            config,
            fit_noise_profile,
        } => {
            let config = match config {
                Some(path) => boxlayer::eval::read_config(&path)?,
                None => boxlayer::eval::EvalConfig::default(),
            };
            let gt_format = format.unwrap_or_else(|| boxlayer::eval::InputFormat::guess(&gt));
            let pred_format = pred_format.unwrap_or_else(|| boxlayer::eval::InputFormat::guess(&pred));
            let report = match fit_noise_profile {
                None => boxlayer::eval::run(&gt, gt_format, &pred, pred_format, &config).context("eval")?,
                Some(out) => {
                    let gt_data = boxlayer::eval::load(&gt, gt_format).context("eval")?;
                    let pred_data = boxlayer::eval::load(&pred, pred_format).context("eval")?;
                    let mut profile = boxlayer::sim::DetectorNoiseProfile::fit(&gt_data.boxes, &pred_data.boxes);
                    if let Some(stem) = pred.file_stem() {
                        profile.name = stem.to_string_lossy().into_owned();
                    }
                    let text = toml::to_string(&profile).context("serialise the fitted noise profile")?;
                    std::fs::write(&out, text).with_context(|| format!("{}: write", out.display()))?;
                    boxlayer::eval::evaluate(&gt_data, &pred_data, &config).context("eval")?
                }
            };
            match json {
                // `-` means standard output instead of the table, as for `detect --json -`.
                Some(path) if path.as_os_str() == "-" => {
                    let text = serde_json::to_string_pretty(&report).context("encode the report as JSON")?;
                    write_stdout(&(text + "\n"))?;
                }
                Some(path) => {
                    write_stdout(&report.to_string())?;
                    boxlayer::eval::write_json_report(&path, &report)?;
                }
                None => write_stdout(&report.to_string())?,
            }
        }
        Command::Detect {
            detector,
            file,
            kind,
            fields,
            frame,
            frames,
            json,
            profile,
            no_normalize,
        } => {
            let context = || format!("detect {} with {}", file.display(), detector.display());
            let mut input = boxlayer::detect::DetectInput {
                kind,
                as_read: no_normalize,
                ..Default::default()
            };
            if let Some(name) = &profile {
                input.profile = Some(
                    boxlayer::normalize::Profile::load(name)
                        .context("load --profile")?
                        .profile,
                );
            }
            if let Some(fields) = fields {
                input.options.kitti.fields = fields;
            }
            let (table, text) = match frames {
                Some(range) => {
                    let reports =
                        boxlayer::detect::detect_frames(&detector, &file, range, &input).with_context(context)?;
                    let table: String = reports.iter().map(|r| r.summary_line() + "\n").collect();
                    (table, reports.iter().map(|r| r.to_json_lines()).collect::<String>())
                }
                None => {
                    let report =
                        boxlayer::detect::detect_file(&detector, &file, frame, &input).with_context(context)?;
                    (report.to_string(), report.to_json_lines())
                }
            };
            match json {
                Some(path) if path.as_os_str() == "-" => write_stdout(&text)?,
                Some(path) => {
                    write_stdout(&table)?;
                    boxlayer::atomic_file::write_atomic(&path, text.as_bytes())
                        .with_context(|| format!("write {}", path.display()))?;
                }
                None => write_stdout(&table)?,
            }
        }
        Command::Simulate {
            platform,
            frames,
            seed,
            out,
            config,
            cameras,
        } => {
            let config = match config {
                Some(path) => {
                    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
                    toml::from_str(&text).with_context(|| format!("{}: sim config", path.display()))?
                }
                None => boxlayer::sim::SimConfig::default(),
            };
            let started = std::time::Instant::now();
            if platform == boxlayer::Platform::Vehicle {
                let mut options = boxlayer::sim::WaymoWriteOptions::default();
                if let Some(names) = cameras {
                    options.cameras = names
                        .iter()
                        .filter(|n| !(names.len() == 1 && n.trim() == "none"))
                        .map(|n| {
                            boxlayer::sources::waymo::CameraName::from_name(n.trim())
                                .with_context(|| format!("--cameras: unknown Waymo camera `{n}`"))
                        })
                        .collect::<anyhow::Result<_>>()?;
                }
                let summary =
                    boxlayer::sim::simulate_waymo_with(config, &options, frames, seed, &out).context("simulate")?;
                write_stdout(&summary.display(started.elapsed()).to_string())?;
            } else if cameras.is_some() {
                anyhow::bail!("--cameras applies to --platform vehicle (Waymo cameras)");
            } else {
                let summary = boxlayer::sim::simulate_m3ed(config, platform, frames, seed, &out).context("simulate")?;
                write_stdout(&summary.display(started.elapsed()).to_string())?;
            }
        }
    }
    Ok(())
}
