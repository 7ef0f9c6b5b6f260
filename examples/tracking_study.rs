//! The tracking study of `docs/tracking.md`: simulated sequences of all three platforms with the
//! detection-noise model (three detectors), run through the real pipeline
//! (`pipeline::run_sequence` with the detections given: fused per frame, then consolidated by the
//! offline tracker, and once more with the AB3DMOT-style forward-only baseline tracker). Prints one Markdown table of BEV AP
//! (vehicle @0.7, pedestrian @0.5), recall, and vehicle MOTA / ID switches per 100 GT tracks.
//!
//! ```sh
//! cargo run --release --example tracking_study -- --frames 200 --seeds 101,102
//! ```

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use boxlayer::detect::Detection;
use boxlayer::eval::{
    ClassThresholds, DetectionConfig, EvalBox, FrameKey, ThresholdRule, TrackingConfig, evaluate_detection,
    evaluate_tracking,
};
use boxlayer::frame::{ObjectClass, Platform};
use boxlayer::fuse::{FusionConfig, FusionMethod};
use boxlayer::geometry::Box3;
use boxlayer::pipeline::{DetectionsFrom, PipelineConfig, SequenceJob, run_sequence};
use boxlayer::sim::SimConfig;
use boxlayer::sim::detection_noise::standard_detector_profiles;
use boxlayer::sim::noisy_sequence::{NoisySequence, NoisySource, simulate_noisy_sequence};
use boxlayer::track::{BoxOrigin, Consolidation, TrackConfig, TrackInputBox, TrackingProfiles};
use clap::{Parser, ValueEnum};

/// How each frame's detections become per-frame labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Fusion {
    /// KDE box fusion (`--fusion-config`, resolved for the platform).
    Kbf,
    /// Union of the three detectors, then class-wise BEV NMS (`fuse`'s `union_nms` method).
    UnionNms,
}

#[derive(Debug, Parser)]
#[command(about = "Consolidated vs per-frame labels on simulated noisy sequences")]
struct Args {
    /// Frames per sequence.
    #[arg(long, default_value_t = 200)]
    frames: usize,
    /// Simulator seeds, comma-separated (one sequence per platform and seed).
    #[arg(long, value_delimiter = ',', default_value = "101,102")]
    seeds: Vec<u64>,
    /// Per-frame fusion.
    #[arg(long, value_enum, default_value_t = Fusion::Kbf)]
    fusion: Fusion,
    /// A pipeline config whose `[fusion]` table is used; `ms3d` for `FusionConfig::default()`.
    #[arg(long, default_value = "pipelines/demo.toml")]
    fusion_config: String,
    /// Tracking profiles as TOML (`TrackingProfiles`; partial tables keep the defaults).
    #[arg(long)]
    track_config: Option<std::path::PathBuf>,
    /// Also print the vehicle CLEAR-MOT counts of each tracked row to stderr.
    #[arg(long)]
    details: bool,
    /// Also print a breakdown of the offline vehicle ID switches, misses and false positives by
    /// cause to stderr (a replay of the CLEAR-MOT matching with 2 m centre distance).
    #[arg(long)]
    diagnose: bool,
    /// Also score every label set at a Waymo LEVEL_1-style difficulty: GT objects with more than
    /// 5 LiDAR points; predictions whose only GT within 2 m has ≤ 5 points are ignored (neither
    /// true nor false positives), as Waymo ignores LEVEL_2 objects at LEVEL_1.
    #[arg(long)]
    level1: bool,
    /// Platforms (default: all three).
    #[arg(long, value_delimiter = ',', default_values_t = [Platform::Vehicle, Platform::Drone, Platform::Quadruped])]
    platforms: Vec<Platform>,
}

/// BEV IoU above which union+NMS suppresses a box, per class (vehicle, pedestrian, cyclist, unknown).
fn key(sequence: &str, frame: usize) -> FrameKey {
    FrameKey {
        sequence: sequence.to_string(),
        frame: frame as u64,
    }
}

/// Evaluator boxes of the per-frame labels (no track ids).
fn label_eval_boxes(seq: &NoisySequence, labels: &[Vec<TrackInputBox>]) -> Vec<EvalBox> {
    let mut out = Vec::new();
    for (f, boxes) in labels.iter().enumerate() {
        for b in boxes {
            out.push(EvalBox {
                frame: key(&seq.sequence, f),
                bbox: b.box3,
                class: b.class,
                score: b.score,
                track_id: None,
                num_points: None,
                platform: Some(seq.platform),
            });
        }
    }
    out
}

/// Evaluator boxes of a consolidation (sensor frame, with track ids).
fn track_eval_boxes(seq: &NoisySequence, c: &Consolidation) -> Vec<EvalBox> {
    c.boxes
        .iter()
        .map(|b| EvalBox {
            frame: key(&seq.sequence, b.frame),
            bbox: b.box_in_sensor,
            class: b.class,
            score: b.score,
            track_id: Some(b.track_id.to_string()),
            num_points: None,
            platform: Some(seq.platform),
        })
        .collect()
}

/// One row of the table.
struct Row {
    vehicle_ap: f64,
    pedestrian_ap: f64,
    vehicle_recall: f64,
    pedestrian_recall: f64,
    mota: Option<f64>,
    ids_per_100: Option<f64>,
    num_boxes: usize,
}

fn measure(gt: &[EvalBox], pred: &[EvalBox], tracked: bool, details: bool) -> Row {
    let detection = DetectionConfig::bev_only(
        ClassThresholds::none()
            .with(ObjectClass::Vehicle, vec![0.7])
            .with(ObjectClass::Pedestrian, vec![0.5]),
    );
    let results = evaluate_detection(gt, pred, &detection, ThresholdRule::Strict);
    let of = |class: ObjectClass| results.iter().find(|r| r.class == class);
    let ap = |class| of(class).and_then(|r| r.ap_r40).unwrap_or(0.0);
    let recall = |class| of(class).map_or(0.0, |r| r.num_tp as f64 / r.num_gt.max(1) as f64);
    let (mut mota, mut ids_per_100) = (None, None);
    if tracked {
        let config = TrackingConfig {
            classes: vec![ObjectClass::Vehicle],
            ..TrackingConfig::default()
        };
        if let Some(t) = evaluate_tracking(gt, pred, &config, ThresholdRule::Strict).first() {
            if details {
                eprintln!("  vehicle CLEAR-MOT: {:?}", t.clear_mot);
            }
            mota = t.clear_mot.mota;
            ids_per_100 = Some(100.0 * t.clear_mot.id_switches as f64 / t.clear_mot.num_gt_tracks.max(1) as f64);
        }
    }
    Row {
        vehicle_ap: ap(ObjectClass::Vehicle),
        pedestrian_ap: ap(ObjectClass::Pedestrian),
        vehicle_recall: recall(ObjectClass::Vehicle),
        pedestrian_recall: recall(ObjectClass::Pedestrian),
        mota,
        ids_per_100,
        num_boxes: pred.len(),
    }
}

/// For `--details`: each vehicle GT track's sequence of nearest predicted track ids (within 2 m,
/// `-` when none), run-length encoded, for the GT tracks with the most changes.
fn id_runs(gt: &[EvalBox], pred: &[EvalBox]) {
    use std::collections::BTreeMap;
    let mut by_frame: BTreeMap<&FrameKey, Vec<&EvalBox>> = BTreeMap::new();
    for p in pred.iter().filter(|p| p.class == ObjectClass::Vehicle) {
        by_frame.entry(&p.frame).or_default().push(p);
    }
    let mut runs: BTreeMap<(String, String), Vec<(String, usize)>> = BTreeMap::new();
    let mut sorted: Vec<&EvalBox> = gt.iter().filter(|g| g.class == ObjectClass::Vehicle).collect();
    sorted.sort_by(|a, b| a.frame.cmp(&b.frame));
    for g in sorted {
        let near = by_frame.get(&g.frame).and_then(|ps| {
            ps.iter()
                .map(|p| ((p.bbox.x - g.bbox.x).hypot(p.bbox.y - g.bbox.y), p))
                .filter(|(d, _)| *d < 2.0)
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, p)| p.track_id.clone().unwrap_or_default())
        });
        let label = near.unwrap_or_else(|| "-".to_string());
        let label = format!("{label}({})", g.num_points.unwrap_or(0).min(999));
        let key = (g.frame.sequence.clone(), g.track_id.clone().unwrap_or_default());
        let r = runs.entry(key).or_default();
        let id = label.split('(').next().unwrap_or("").to_string();
        match r.last_mut() {
            Some((last, n)) if last.split('(').next() == Some(id.as_str()) => *n += 1,
            _ => r.push((label, 1)),
        }
    }
    let mut worst: Vec<_> = runs.into_iter().collect();
    worst.sort_by_key(|(_, r)| std::cmp::Reverse(r.len()));
    for ((seq, id), r) in worst.iter().take(8) {
        let text: Vec<String> = r.iter().map(|(l, n)| format!("{l}x{n}")).collect();
        eprintln!("  {seq} gt {id}: {}", text.join(" "));
    }
}

/// Counts of the `--diagnose` breakdown of the offline vehicle tracks, by cause.
#[derive(Default)]
struct Diagnosis {
    gt_boxes: usize,
    gt_tracks: usize,
    switches: std::collections::BTreeMap<String, usize>,
    misses: std::collections::BTreeMap<String, usize>,
    false_positives: std::collections::BTreeMap<String, usize>,
}

impl Diagnosis {
    fn print(&self, platform: Platform) {
        eprintln!(
            "{platform}: diagnosis of the offline vehicle tracks ({} GT boxes, {} GT tracks)",
            self.gt_boxes, self.gt_tracks
        );
        for (title, counts) in [
            ("ID switches", &self.switches),
            ("misses (FN)", &self.misses),
            ("false positives", &self.false_positives),
        ] {
            let total: usize = counts.values().sum();
            eprintln!("  {title}: {total}");
            for (cause, n) in counts {
                eprintln!("    {n:6}  {cause}");
            }
        }
    }
}

/// BEV centre distance (m).
fn bev_distance(a: &Box3, b: &Box3) -> f64 {
    (a.x - b.x).hypot(a.y - b.y)
}

/// Replays CLEAR-MOT's vehicle matching (2 m centre distance; last correspondences kept, then an
/// optimal assignment) on one sequence and counts each ID switch, miss and false positive under
/// its cause. Approximate where the evaluator's maximum-cardinality assignment differs.
fn diagnose(seq: &NoisySequence, labels: &[Vec<TrackInputBox>], out: &Consolidation, d: &mut Diagnosis) {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    const GATE_M: f64 = 2.0;
    let span: HashMap<u32, (usize, usize)> = out
        .tracks
        .iter()
        .map(|t| (t.track_id, (t.first_frame, t.last_frame)))
        .collect();
    let mut last_match: HashMap<u32, u32> = HashMap::new();
    let mut last_matched_frame: HashMap<u32, usize> = HashMap::new();
    let mut pred_gts: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    let mut gt_ids: BTreeSet<u32> = BTreeSet::new();
    let mut gt_present: Vec<BTreeSet<u32>> = Vec::new();
    let mut unmatched_preds: Vec<(usize, u32, BoxOrigin, bool)> = Vec::new();
    let mut misses: Vec<(usize, u32, &str, u32)> = Vec::new();
    let mut by_frame: BTreeMap<usize, Vec<&boxlayer::track::TrackedBox>> = BTreeMap::new();
    for b in out.boxes.iter().filter(|b| b.class == ObjectClass::Vehicle) {
        by_frame.entry(b.frame).or_default().push(b);
    }
    for (f, frame) in seq.frames.iter().enumerate() {
        let gts: Vec<_> = frame.truth.iter().filter(|o| o.class == ObjectClass::Vehicle).collect();
        gt_present.push(gts.iter().map(|o| o.track_id).collect());
        let preds = by_frame.remove(&f).unwrap_or_default();
        let mut gt_match: Vec<Option<usize>> = vec![None; gts.len()];
        let mut taken = vec![false; preds.len()];
        for (g, o) in gts.iter().enumerate() {
            gt_ids.insert(o.track_id);
            let Some(&h) = last_match.get(&o.track_id) else {
                continue;
            };
            if let Some(k) = (0..preds.len()).find(|&k| {
                !taken[k] && preds[k].track_id == h && bev_distance(&preds[k].box_in_sensor, &o.box_in_sensor) < GATE_M
            }) {
                gt_match[g] = Some(k);
                taken[k] = true;
            }
        }
        let mut candidates = Vec::new();
        for (g, o) in gts.iter().enumerate() {
            if gt_match[g].is_some() {
                continue;
            }
            for (k, p) in preds.iter().enumerate() {
                let distance = bev_distance(&p.box_in_sensor, &o.box_in_sensor);
                if !taken[k] && distance < GATE_M {
                    candidates.push(boxlayer::track::Candidate {
                        track: g,
                        detection: k,
                        margin: GATE_M - distance + 1.0,
                    });
                }
            }
        }
        let mut switches = Vec::new();
        for (g, k) in boxlayer::track::assign(gts.len(), preds.len(), &candidates) {
            gt_match[g] = Some(k);
            taken[k] = true;
            if let Some(&h) = last_match.get(&gts[g].track_id)
                && h != preds[k].track_id
            {
                switches.push((g, h, k));
            }
        }
        for (g, h, k) in switches {
            let o = gts[g];
            let new_id = preds[k].track_id;
            let gap = f - last_matched_frame.get(&o.track_id).copied().unwrap_or(f);
            let parked = if o.velocity_in_world.xy().norm() < 0.5 {
                "parked"
            } else {
                "moving"
            };
            let new_had_other = pred_gts
                .get(&new_id)
                .is_some_and(|s| s.iter().any(|&x| x != o.track_id));
            let old_here = preds.iter().position(|p| p.track_id == h);
            let old_with_other = old_here.is_some_and(|k| gt_match.contains(&Some(k)));
            let (old_first, old_last) = span.get(&h).copied().unwrap_or((0, 0));
            let new_first = span.get(&new_id).map_or(f, |s| s.0);
            if new_had_other && std::env::var_os("TRACKING_STUDY_TRACE").is_some() {
                let others: Vec<u32> = pred_gts[&new_id].iter().copied().filter(|&x| x != o.track_id).collect();
                let other_box = frame
                    .truth
                    .iter()
                    .find(|t| others.contains(&t.track_id))
                    .map(|t| bev_distance(&t.box_in_sensor, &o.box_in_sensor));
                eprintln!(
                    "    trace {} f{f} gt {} pts {}: {h} -> {new_id} ({}, {:.2} m), other gt {others:?} here at {other_box:?} m, old here {}",
                    seq.sequence,
                    o.track_id,
                    o.num_lidar_points,
                    preds[k].origin.as_str(),
                    bev_distance(&preds[k].box_in_sensor, &o.box_in_sensor),
                    old_here.is_some()
                );
            }
            if !new_had_other && old_here.is_none() && std::env::var_os("TRACKING_STUDY_TRACE").is_some() {
                let summary = |id: u32| out.tracks.iter().find(|t| t.track_id == id);
                let edge = |id: u32, last: bool| {
                    let mut it = out.boxes.iter().filter(|b| b.track_id == id);
                    let b = if last { it.next_back() } else { it.next() };
                    b.map(|b| (b.frame, b.box_in_world.x, b.box_in_world.y, b.origin.as_str()))
                };
                let (a, b) = (summary(h), summary(new_id));
                eprintln!(
                    "    trace {} f{f} gt {} pts {}: {h} {:?} {:?} last {:?} -> {new_id} {:?} {:?} first {:?}",
                    seq.sequence,
                    o.track_id,
                    o.num_lidar_points,
                    a.and_then(|t| t.motion),
                    a.and_then(|t| t.size).map(|s| [s[0], s[1]]),
                    edge(h, true),
                    b.and_then(|t| t.motion),
                    b.and_then(|t| t.size).map(|s| [s[0], s[1]]),
                    edge(new_id, false),
                );
            }
            let cause = if new_had_other {
                "new id was a neighbour's track".to_string()
            } else if old_with_other {
                "old id moved to a neighbour".to_string()
            } else if old_here.is_some() {
                "old id still here but > 2 m off (duplicate/drift)".to_string()
            } else if old_last < f && old_first <= f {
                let bucket = match gap {
                    0..=10 => "gap ≤ 10",
                    11..=21 => "gap 11–21",
                    _ => "gap > 21",
                };
                let born = if new_first + 1 >= f {
                    "new track born here"
                } else {
                    "new track born earlier"
                };
                format!("old id ended, {bucket} frames, {born}")
            } else {
                "old id in a gap of its own here".to_string()
            };
            *d.switches
                .entry(format!("{parked}: {cause} (pts {})", points_bin(o.num_lidar_points)))
                .or_default() += 1;
        }
        for (g, o) in gts.iter().enumerate() {
            match gt_match[g] {
                Some(k) => {
                    last_match.insert(o.track_id, preds[k].track_id);
                    last_matched_frame.insert(o.track_id, f);
                    pred_gts.entry(preds[k].track_id).or_default().insert(o.track_id);
                }
                None => {
                    let input = labels[f]
                        .iter()
                        .any(|l| l.class == ObjectClass::Vehicle && bev_distance(&l.box3, &o.box_in_sensor) < GATE_M);
                    let near_pred = preds
                        .iter()
                        .any(|p| bev_distance(&p.box_in_sensor, &o.box_in_sensor) < GATE_M);
                    let why = match (input, near_pred) {
                        (false, false) => "no fused label, no output box",
                        (true, false) => "fused label within 2 m but no output box",
                        (_, true) => "output box within 2 m taken by another GT",
                    };
                    misses.push((f, o.track_id, why, o.num_lidar_points));
                }
            }
        }
        for (k, p) in preds.iter().enumerate() {
            if !taken[k] {
                let near_gt = gts
                    .iter()
                    .any(|o| bev_distance(&p.box_in_sensor, &o.box_in_sensor) < GATE_M);
                unmatched_preds.push((f, p.track_id, p.origin, near_gt));
            }
        }
    }
    let mut gt_preds: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&p, gts) in &pred_gts {
        for &g in gts {
            gt_preds.entry(g).or_default().push(p);
        }
    }
    for (f, gt_id, why, points) in misses {
        let spans: Vec<(usize, usize)> = gt_preds
            .get(&gt_id)
            .map(|ps| ps.iter().filter_map(|p| span.get(p).copied()).collect())
            .unwrap_or_default();
        let where_ = if spans.is_empty() {
            "object never matched"
        } else if spans.iter().any(|&(a, b)| a <= f && f <= b) {
            "inside its track's span"
        } else {
            "outside its tracks' spans"
        };
        *d.misses
            .entry(format!("{why}, {where_} (pts {})", points_bin(points)))
            .or_default() += 1;
    }
    for (f, id, origin, near_gt) in unmatched_preds {
        let matched = pred_gts.get(&id);
        let cause = match matched {
            None => "track never matched a GT (clutter or unlabelled)",
            Some(s) if s.iter().all(|g| !gt_present[f].contains(g)) => "its object has no returns in this frame",
            Some(_) if near_gt => "duplicate next to a matched GT",
            Some(_) => "its object is here but > 2 m away",
        };
        *d.false_positives
            .entry(format!("{}: {cause}", origin.as_str()))
            .or_default() += 1;
    }
    d.gt_boxes += seq
        .frames
        .iter()
        .map(|f| f.truth.iter().filter(|o| o.class == ObjectClass::Vehicle).count())
        .sum::<usize>();
    d.gt_tracks += gt_ids.len();
}

/// Point-count bucket of a GT box.
fn points_bin(n: u32) -> &'static str {
    match n {
        0..=4 => "1–4",
        5..=9 => "5–9",
        10..=49 => "10–49",
        _ => "≥ 50",
    }
}

/// LEVEL_1-style GT (more than 5 LiDAR points) and the predictions that are not explained only
/// by a LEVEL_2-only GT box (same frame and class, BEV centre within 2 m, no LEVEL_1 box within 2 m).
fn level_1(gt: &[EvalBox], pred: &[EvalBox]) -> (Vec<EvalBox>, Vec<EvalBox>) {
    use std::collections::HashMap;
    const LEVEL_1_MIN_POINTS: u64 = 6;
    const NEAR_M: f64 = 2.0;
    let mut by_frame: HashMap<(&FrameKey, ObjectClass), Vec<&EvalBox>> = HashMap::new();
    for g in gt {
        by_frame.entry((&g.frame, g.class)).or_default().push(g);
    }
    let level = |g: &EvalBox| g.num_points.unwrap_or(0) >= LEVEL_1_MIN_POINTS;
    let kept = pred
        .iter()
        .filter(|p| {
            let near: Vec<&&EvalBox> = by_frame
                .get(&(&p.frame, p.class))
                .map(|v| v.iter().filter(|g| bev_distance(&g.bbox, &p.bbox) < NEAR_M).collect())
                .unwrap_or_default();
            near.is_empty() || near.iter().any(|g| level(g))
        })
        .cloned()
        .collect();
    (gt.iter().filter(|g| level(g)).cloned().collect(), kept)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let profiles = standard_detector_profiles();
    let tracking: TrackingProfiles = match &args.track_config {
        Some(path) => toml::from_str(&std::fs::read_to_string(path)?)
            .with_context(|| format!("{}: bad tracking profiles", path.display()))?,
        None => TrackingProfiles::default(),
    };
    let fusion_config: FusionConfig = match args.fusion_config.as_str() {
        "ms3d" => FusionConfig::default(),
        path => {
            boxlayer::pipeline::PipelineConfig::load(std::path::Path::new(path))?
                .config
                .fusion
        }
    };
    println!(
        "| platform | labels | vehicle BEV AP@0.7 | pedestrian BEV AP@0.5 | vehicle recall | pedestrian recall | vehicle MOTA | vehicle IDS/100 GT tracks | boxes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let fusion_config = FusionConfig {
        method: match args.fusion {
            Fusion::Kbf => fusion_config.method,
            Fusion::UnionNms => FusionMethod::UnionNms,
        },
        ..fusion_config
    };
    let offline_config = PipelineConfig {
        fusion: fusion_config.clone(),
        tracking: tracking.clone(),
        ..PipelineConfig::default()
    };
    let forward_config = PipelineConfig {
        fusion: fusion_config,
        tracking: TrackingProfiles {
            vehicle: TrackConfig::forward_only_baseline(),
            drone: TrackConfig::forward_only_baseline(),
            quadruped: TrackConfig::forward_only_baseline(),
            other: TrackConfig::forward_only_baseline(),
        },
        ..PipelineConfig::default()
    };
    for &platform in &args.platforms {
        let (mut gt, mut per_frame, mut offline, mut baseline) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut seconds = [0.0f64; 2];
        let mut diagnosis = Diagnosis::default();
        for &seed in &args.seeds {
            let seq = simulate_noisy_sequence(SimConfig::default(), platform, args.frames, seed, &profiles)
                .with_context(|| format!("simulating {platform} seed {seed}"))?;
            // The real pipeline, detections given: fusion and tracking as `boxlayer run` does
            // them; the forward-only baseline is the same run with the baseline tracker.
            let source = NoisySource::new(&seq);
            let detections: BTreeMap<i64, Vec<Detection>> = seq
                .frames
                .iter()
                .map(|f| (f.index as i64, f.detections.clone()))
                .collect();
            let run = |config: &PipelineConfig| {
                run_sequence(
                    &SequenceJob {
                        config,
                        source: &source,
                        platform,
                        detections: DetectionsFrom::Given(&detections),
                        frames: None,
                        scratch_dir: None,
                        normalize: None,
                        fusion_frame: boxlayer::DetectorFrame::Sensor,
                        views: &[],
                        progress: false,
                        classifier: None,
                        stop: None,
                    },
                    None,
                )
            };
            let layer = run(&offline_config)?;
            seconds[0] += layer.times.track_s;
            let forward_layer = run(&forward_config)?;
            seconds[1] += forward_layer.times.track_s;
            let labels: Vec<Vec<TrackInputBox>> = layer
                .fused
                .iter()
                .map(|boxes| boxes.iter().map(boxlayer::pipeline::track_input).collect())
                .collect();
            let (consolidated, forward) = (layer.consolidation, forward_layer.consolidation);
            if args.diagnose {
                diagnose(&seq, &labels, &consolidated, &mut diagnosis);
            }
            gt.extend(boxlayer::eval::input::noisy_sequence_truth(&seq));
            per_frame.extend(label_eval_boxes(&seq, &labels));
            offline.extend(track_eval_boxes(&seq, &consolidated));
            baseline.extend(track_eval_boxes(&seq, &forward));
        }
        let fmt = |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |x| format!("{x:.digits$}"));
        let mut rows = vec![
            ("per-frame fused".to_string(), gt.clone(), per_frame.clone(), false),
            (
                "forward-only (AB3DMOT-style)".to_string(),
                gt.clone(),
                baseline.clone(),
                true,
            ),
            ("consolidated (offline)".to_string(), gt.clone(), offline.clone(), true),
        ];
        if args.level1 {
            for (name, pred, tracked) in [
                ("per-frame fused", &per_frame, false),
                ("forward-only (AB3DMOT-style)", &baseline, true),
                ("consolidated (offline)", &offline, true),
            ] {
                let (gt1, pred1) = level_1(&gt, pred);
                rows.push((format!("{name}, LEVEL_1 (> 5 points)"), gt1, pred1, tracked));
            }
        }
        for (name, gt, pred, tracked) in &rows {
            let (gt, pred, tracked) = (gt.as_slice(), pred, *tracked);
            let r = measure(gt, pred, tracked, args.details);
            if args.details && tracked {
                id_runs(gt, pred);
            }
            println!(
                "| {platform} | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
                r.vehicle_ap,
                r.pedestrian_ap,
                r.vehicle_recall,
                r.pedestrian_recall,
                fmt(r.mota, 3),
                fmt(r.ids_per_100, 2),
                r.num_boxes
            );
        }
        if args.diagnose {
            diagnosis.print(platform);
        }
        eprintln!(
            "{platform}: {} GT boxes; tracking CPU {:.3} s offline, {:.3} s forward-only",
            gt.len(),
            seconds[0],
            seconds[1]
        );
    }
    Ok(())
}
