//! The RGB class check's study of `docs/classifiers.md`: simulated M3ED sequences (quadruped and
//! drone, OVC colour camera) written in the real HDF5 format and read back by the M3ED reader,
//! their true boxes given as labels with a seeded 10 % of the boxes' classes changed to another
//! class, run through the real pipeline (`pipeline::run_sequence`, `labels` origin, the check on).
//! Prints how many wrong boxes `class_conflict` flags (recall) and how many correct ones it flags
//! too (over all boxes, over the boxes it judged and over those whose centre is in the image),
//! and the notes of the tracks the check could not judge.
//!
//! ```sh
//! cargo run --release --example class_check_study -- --classifier classifiers/crop_sim --frames 40 --seeds 31,32
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use boxlayer::classify::Classifier;
use boxlayer::frame::{CameraView, Frame, GroundTruthBox, ObjectClass, Platform};
use boxlayer::pipeline::{DetectionsFrom, LayerOrigin, PipelineConfig, SequenceJob, run_sequence};
use boxlayer::sim::{SimConfig, Simulator};
use boxlayer::sim::{default_sequence_name, write_m3ed_sequence};
use boxlayer::sources::{SequenceMeta, Source, SourceError, SourceOptions};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "class_conflict recall and false flags on simulated M3ED sequences with wrong classes injected")]
struct Args {
    /// The classifier folder.
    #[arg(long, default_value = "classifiers/crop_sim")]
    classifier: PathBuf,
    /// Sweeps per sequence.
    #[arg(long, default_value_t = 40)]
    frames: usize,
    /// Simulator seeds (one sequence per platform and seed).
    #[arg(long, value_delimiter = ',', default_value = "31")]
    seeds: Vec<u64>,
    /// Share of the boxes whose class is changed.
    #[arg(long, default_value_t = 0.1)]
    rate: f64,
    /// Platforms.
    #[arg(long, value_delimiter = ',', default_value = "quadruped,drone")]
    platforms: Vec<String>,
    /// `camera.min_view_in_image` (default: the pipeline's).
    #[arg(long)]
    min_view_in_image: Option<f64>,
    /// `camera.min_view_points` (default: the pipeline's).
    #[arg(long)]
    min_view_points: Option<u32>,
    /// `camera.conflict_score` (default: the pipeline's).
    #[arg(long)]
    conflict_score: Option<f64>,
}

/// An M3ED log with the simulator's boxes as its labels (M3ED itself has none).
struct Labelled {
    inner: Box<dyn Source>,
    labels: Vec<Vec<GroundTruthBox>>,
}

impl Source for Labelled {
    fn meta(&self) -> &SequenceMeta {
        self.inner.meta()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn frame(&self, index: usize) -> Result<Frame, SourceError> {
        let mut frame = self.inner.frame(index)?;
        frame.ground_truth = self.labels.get(frame.index).cloned().unwrap_or_default();
        Ok(frame)
    }
    fn cameras(&self, index: usize) -> Result<Vec<CameraView>, SourceError> {
        self.inner.cameras(index)
    }
}

/// A deterministic uniform number in [0, 1) for (seed, frame, track).
fn unit(seed: u64, frame: usize, track: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in frame.to_le_bytes().iter().chain(track.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn wrong_class(true_class: ObjectClass, u: f64) -> ObjectClass {
    let others: Vec<ObjectClass> = [ObjectClass::Vehicle, ObjectClass::Pedestrian, ObjectClass::Cyclist]
        .into_iter()
        .filter(|c| *c != true_class)
        .collect();
    others[((u * others.len() as f64) as usize).min(others.len() - 1)]
}

#[derive(Debug, Default)]
struct Tally {
    injected: usize,
    injected_flagged: usize,
    /// Wrong boxes whose centre is inside a camera's image, and how many of them are flagged.
    injected_in_view: usize,
    injected_in_view_flagged: usize,
    /// The same for the correct boxes.
    correct_in_view: usize,
    correct_in_view_flagged: usize,
    injected_checked: usize,
    correct: usize,
    correct_flagged: usize,
    correct_checked: usize,
    notes: BTreeMap<String, usize>,
    /// (class, rgb class) of the judged correct boxes.
    confusion: BTreeMap<(String, String), usize>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let classifier = Classifier::load(&args.classifier).context("loading the classifier")?;
    let mut config = PipelineConfig {
        origin: LayerOrigin::Labels,
        ..PipelineConfig::default()
    };
    config.stages.camera_check = true;
    if let Some(v) = args.min_view_in_image {
        config.camera.min_view_in_image = v;
    }
    if let Some(v) = args.min_view_points {
        config.camera.min_view_points = v;
    }
    if let Some(v) = args.conflict_score {
        config.camera.conflict_score = v;
    }
    config.stages.normalize = false;
    let tmp = tempfile::tempdir()?;
    let mut total = Tally::default();
    println!("| platform | seed | boxes | wrong | wrong flagged | correct flagged | not judged |");
    println!("|---|---|---|---|---|---|---|");
    for platform in &args.platforms {
        let platform: Platform = platform.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        for &seed in &args.seeds {
            let sim = Simulator::new(
                SimConfig {
                    frames: args.frames,
                    ..SimConfig::default()
                },
                platform,
                seed,
            )?;
            let name = default_sequence_name(platform, seed).context("not an M3ED platform")?;
            let dir = tmp.path().join(format!("{platform}-{seed}"));
            std::fs::create_dir_all(&dir)?;
            let written = write_m3ed_sequence(&sim, args.frames, &dir, &name)?;
            let inner = boxlayer::sources::open(&written.data_path, None, &SourceOptions::default())?;
            let mut injected: BTreeSet<(i64, String)> = BTreeSet::new();
            let mut labels = Vec::with_capacity(args.frames);
            for i in 0..args.frames {
                let sweep = sim.sweep(i)?;
                let boxes: Vec<GroundTruthBox> = sweep
                    .objects
                    .iter()
                    .map(|o| {
                        let mut gt = o.to_ground_truth_box();
                        let u = unit(seed, i, &gt.track_id);
                        if u < args.rate {
                            gt.class = wrong_class(gt.class, u / args.rate);
                            injected.insert((i as i64, gt.track_id.clone()));
                        }
                        gt
                    })
                    .collect();
                labels.push(boxes);
            }
            let source = Labelled { inner, labels };
            let layer = run_sequence(
                &SequenceJob {
                    config: &config,
                    source: &source,
                    platform,
                    detections: DetectionsFrom::Given(&BTreeMap::new()),
                    frames: None,
                    scratch_dir: None,
                    progress: false,
                    normalize: None,
                    fusion_frame: boxlayer::DetectorFrame::Sensor,
                    views: &[],
                    classifier: Some(&classifier),
                    stop: None,
                },
                None,
            )?;
            let mut t = Tally::default();
            for r in &layer.boxes {
                let key = (r.frame_index, r.source_track_id.clone().unwrap_or_default());
                let flagged = r.flags.iter().any(|f| f == "class_conflict");
                let checked = r.rgb_class.is_some();
                let in_view = r.cameras.iter().any(|c| c.in_fov);
                if let Some(note) = &r.rgb_note {
                    *t.notes.entry(note.clone()).or_default() += 1;
                }
                if injected.contains(&key) {
                    t.injected += 1;
                    t.injected_flagged += usize::from(flagged);
                    t.injected_checked += usize::from(checked);
                    t.injected_in_view += usize::from(in_view);
                    t.injected_in_view_flagged += usize::from(in_view && flagged);
                } else {
                    if let Some(rgb) = &r.rgb_class {
                        *total.confusion.entry((r.class.clone(), rgb.clone())).or_default() += 1;
                    }
                    t.correct += 1;
                    t.correct_flagged += usize::from(flagged);
                    t.correct_checked += usize::from(checked);
                    t.correct_in_view += usize::from(in_view);
                    t.correct_in_view_flagged += usize::from(in_view && flagged);
                }
            }
            let notes: Vec<String> = t.notes.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!(
                "| {platform} | {seed} | {} | {} | {} ({}) | {} ({}) | {} |",
                t.injected + t.correct,
                t.injected,
                t.injected_flagged,
                pct(t.injected_flagged, t.injected),
                t.correct_flagged,
                pct(t.correct_flagged, t.correct),
                if notes.is_empty() {
                    "-".to_string()
                } else {
                    notes.join(", ")
                }
            );
            total.injected += t.injected;
            total.injected_flagged += t.injected_flagged;
            total.injected_checked += t.injected_checked;
            total.correct += t.correct;
            total.correct_flagged += t.correct_flagged;
            total.correct_checked += t.correct_checked;
            total.injected_in_view += t.injected_in_view;
            total.injected_in_view_flagged += t.injected_in_view_flagged;
            total.correct_in_view += t.correct_in_view;
            total.correct_in_view_flagged += t.correct_in_view_flagged;
        }
    }
    let tp = total.injected_flagged;
    let fp = total.correct_flagged;
    println!();
    println!(
        "all: {} wrong boxes, {} flagged: recall {}; {} correct boxes, {} flagged: {}; precision {}",
        total.injected,
        tp,
        pct(tp, total.injected),
        total.correct,
        fp,
        pct(fp, total.correct),
        pct(tp, tp + fp)
    );
    println!(
        "of the boxes the check judged: recall {}, correct flagged {}",
        pct(tp, total.injected_checked),
        pct(fp, total.correct_checked)
    );
    println!(
        "of the boxes whose centre is in the camera's image ({} wrong, {} correct): recall {}, correct flagged {}",
        total.injected_in_view,
        total.correct_in_view,
        pct(total.injected_in_view_flagged, total.injected_in_view),
        pct(total.correct_in_view_flagged, total.correct_in_view)
    );
    println!("\njudged correct boxes, class → RGB vote:");
    for ((class, rgb), n) in &total.confusion {
        println!("  {class} → {rgb}: {n}");
    }
    Ok(())
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "-".to_string()
    } else {
        format!("{:.1} %", 100.0 * a as f64 / b as f64)
    }
}
