//! The fusion study of `docs/fusion.md`: on simulated sequences of every platform with the
//! detection-noise model's three standard detectors (or `--profiles`), BEV AP (R40; vehicle @0.7,
//! pedestrian and cyclist @0.5) of each single detector, the best single detector, union + NMS,
//! WBF and KBF. Every method's parameters are tuned per platform and class on one seed; the table
//! is measured on other seeds, and optionally confirmed on further ones. The noise model is never
//! tuned; its flags set values measured elsewhere (e.g. on the bundled networks, `docs/fusion.md`).
//!
//! `cargo run --release --example fusion_study -- [--frames 100] [--tune-seed 1] [--eval-seeds 2,3]
//! [--confirm-seeds 4,5] [--platforms vehicle,drone] [--diagnose] [--out DIR]
//! [--centre-outlier-probability Q --centre-outlier-scale K] [--score-slope S --score-noise N]
//! [--profiles a.toml,b.toml,c.toml] [--copies N]`
//!
//! Prints markdown tables (pooled eval seeds, pooled confirmation seeds, AP R40 and all-point AP
//! per seed; with `--diagnose`, what decides each method's AP: `support/fusion_diagnosis.rs`);
//! with `--out`, also writes `fusion_study.json` (every number) and `fusion_tuned.toml` (the tuned
//! KBF configuration of the "peak centre and axis, agreement score" row, with per-platform
//! overrides).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use boxlayer::eval::{ClassThresholds, DetectionConfig, EvalBox, FrameKey, ThresholdRule, evaluate_detection};
use boxlayer::fuse::{Bandwidth, CentreEstimate, ClassFusionConfig, Fuser, FusionConfig, FusionMethod, YawEstimate};
use boxlayer::sim::{
    DetectorNoiseProfile, NoisySequence, SimConfig, simulate_noisy_sequence, standard_detector_profiles,
};
use boxlayer::{ObjectClass, Platform};
use clap::Parser;

#[path = "support/fusion_diagnosis.rs"]
mod fusion_diagnosis;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Sweeps per simulated sequence.
    #[arg(long, default_value_t = 100)]
    frames: usize,
    /// Seed of the sequences the parameters are tuned on.
    #[arg(long, default_value_t = 1)]
    tune_seed: u64,
    /// Seeds of the sequences the table is measured on (comma-separated).
    #[arg(long, default_value = "2,3", value_delimiter = ',')]
    eval_seeds: Vec<u64>,
    /// Seeds the tuned methods are measured on once more, for confirmation (comma-separated;
    /// default none). The per-seed table then lists every eval and confirmation seed.
    #[arg(long, value_delimiter = ',')]
    confirm_seeds: Vec<u64>,
    /// Folder for `fusion_study.json` and `fusion_tuned.toml`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Platforms to study (comma-separated; default all three).
    #[arg(long, value_delimiter = ',')]
    platforms: Vec<Platform>,
    /// Also print, per method and class, what decides its AP on the eval seeds (`diagnose`).
    #[arg(long)]
    diagnose: bool,
    /// Give every detector's centre errors, every class, a heavy tail: this share of boxes
    /// draws its BEV centre error with `--centre-outlier-scale` times the σ
    /// (`ClassNoise::center_outlier_probability`; default: each profile's own, 0 in the
    /// standard profiles).
    #[arg(long)]
    centre_outlier_probability: Option<f64>,
    /// σ multiple of the tail's boxes (`ClassNoise::center_outlier_scale`; default: each
    /// profile's own).
    #[arg(long)]
    centre_outlier_scale: Option<f64>,
    /// Every detector's score slope (`DetectorNoiseProfile::score_slope`: how strongly the score
    /// follows the box's IoU with its object; default: each profile's own, 10 in the standard ones).
    #[arg(long)]
    score_slope: Option<f64>,
    /// Every detector's score noise (`DetectorNoiseProfile::score_noise`; default: each profile's own).
    #[arg(long)]
    score_noise: Option<f64>,
    /// Runs every profile this many times under different names (independent draws), e.g. to
    /// see how the methods scale with the size of the ensemble (default 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    copies: u32,
    /// Detector profiles (TOML files of `DetectorNoiseProfile`, e.g. fitted to real detectors by
    /// `detector_quality --fit-noise-profile`), replacing the standard three (comma-separated).
    #[arg(long, value_delimiter = ',')]
    profiles: Vec<PathBuf>,
}

/// AP of each class in `CLASSES` order (`None` without GT of that class).
type ClassAps = [Option<f64>; 3];

/// One method's confirmation-pooled AP R40 and, per seed, AP R40 and all-point AP.
type SeedRow = (String, Option<ClassAps>, Vec<(ClassAps, ClassAps)>);

const PLATFORMS: [Platform; 3] = [Platform::Vehicle, Platform::Drone, Platform::Quadruped];
const CLASSES: [ObjectClass; 3] = [ObjectClass::Vehicle, ObjectClass::Pedestrian, ObjectClass::Cyclist];

fn detection_config() -> DetectionConfig {
    DetectionConfig::bev_only(
        ClassThresholds::none()
            .with(ObjectClass::Vehicle, vec![0.7])
            .with(ObjectClass::Pedestrian, vec![0.5])
            .with(ObjectClass::Cyclist, vec![0.5]),
    )
}

/// BEV AP R40 per class in `CLASSES` order (`None` without GT of that class).
fn ap(gt: &[EvalBox], pred: &[EvalBox]) -> [Option<f64>; 3] {
    ap_r40_and_all_points(gt, pred).0
}

/// BEV AP R40 and all-point AP per class in `CLASSES` order.
fn ap_r40_and_all_points(gt: &[EvalBox], pred: &[EvalBox]) -> (ClassAps, ClassAps) {
    let results = evaluate_detection(gt, pred, &detection_config(), ThresholdRule::Strict);
    let of = |c: ObjectClass| results.iter().find(|r| r.class == c);
    (
        CLASSES.map(|c| of(c).and_then(|r| r.ap_r40)),
        CLASSES.map(|c| of(c).and_then(|r| r.ap_all_points)),
    )
}

fn class_ap(gt: &[EvalBox], pred: &[EvalBox], class: ObjectClass) -> f64 {
    let i = CLASSES.iter().position(|&c| c == class).unwrap_or(0);
    ap(gt, pred)[i].unwrap_or(f64::NAN)
}

fn truth(seqs: &[NoisySequence]) -> Vec<EvalBox> {
    seqs.iter()
        .flat_map(boxlayer::eval::input::noisy_sequence_truth)
        .collect()
}

fn fused(seqs: &[NoisySequence], config: &FusionConfig) -> anyhow::Result<Vec<EvalBox>> {
    let mut out = Vec::new();
    for seq in seqs {
        let fuser = Fuser::new(config, seq.platform)?;
        for frame in &seq.frames {
            for b in fuser.fuse(&frame.detections)? {
                out.push(EvalBox {
                    frame: FrameKey {
                        sequence: seq.sequence.clone(),
                        frame: frame.index as u64,
                    },
                    bbox: b.box3,
                    class: b.class,
                    score: f64::from(b.score),
                    track_id: None,
                    num_points: None,
                    platform: Some(seq.platform),
                });
            }
        }
    }
    Ok(out)
}

/// `base` with `method`, only `class` enabled, and that class's table replaced.
fn only_class(
    base: &FusionConfig,
    method: FusionMethod,
    class: ObjectClass,
    table: &ClassFusionConfig,
) -> FusionConfig {
    let mut c = FusionConfig { method, ..base.clone() };
    for other in ObjectClass::ALL {
        c.class_mut(other).enabled = false;
    }
    *c.class_mut(class) = ClassFusionConfig {
        enabled: true,
        ..table.clone()
    };
    c
}

/// The KBF variant a study row tunes: which centre estimates, how the yaw is estimated (and
/// with which bandwidths), and whether sizes are weighted.
struct KbfVariant {
    centre_estimates: &'static [CentreEstimate],
    yaw_estimate: YawEstimate,
    yaw_bandwidths: &'static [Bandwidth],
    weighted_sizes: &'static [bool],
    /// Fused-box NMS thresholds, as factors of the class's MS3D `nms_iou`.
    nms_scales: &'static [f64],
    /// Whether the centre-agreement score (`agreement_sigma_m`) is tuned too, as a second stage
    /// on top of the best table of the rest (0, off, stays a candidate).
    agreement: bool,
}

/// The `agreement_sigma_m` candidates of a class's second tuning stage (m; 0 = off).
fn agreement_sigmas(class: ObjectClass) -> [f64; 5] {
    if class == ObjectClass::Vehicle {
        [0.0, 0.15, 0.3, 0.6, 1.2]
    } else {
        [0.0, 0.05, 0.1, 0.2, 0.4]
    }
}

/// Candidate class tables of one method, built on the class's MS3D defaults.
fn candidates(
    method: FusionMethod,
    class: ObjectClass,
    weightings: &[BTreeMap<String, f64>],
    kbf: &KbfVariant,
) -> Vec<ClassFusionConfig> {
    let base = ClassFusionConfig::default_for(class);
    let mut out = Vec::new();
    match method {
        FusionMethod::Kbf => {
            let sigmas = if class == ObjectClass::Vehicle {
                [0.15, 0.4]
            } else {
                [0.05, 0.15]
            };
            for radius_scale in [0.5, 1.0, 2.0] {
                for min_votes in [1, 2, 3] {
                    for centre in [
                        Bandwidth::Factor(1.0),
                        Bandwidth::Absolute(sigmas[0]),
                        Bandwidth::Absolute(sigmas[1]),
                    ] {
                        for share in [false, true] {
                            for weights in weightings {
                                for &centre_estimate in kbf.centre_estimates {
                                    for (&yaw_bandwidth, &weighted_sizes, &nms_scale) in
                                        kbf.yaw_bandwidths.iter().flat_map(|b| {
                                            kbf.weighted_sizes
                                                .iter()
                                                .flat_map(move |w| kbf.nms_scales.iter().map(move |n| (b, w, n)))
                                        })
                                    {
                                        out.push(ClassFusionConfig {
                                            radius_m: base.radius_m * radius_scale,
                                            min_votes,
                                            centre_bandwidth: centre,
                                            centre_estimate,
                                            score_by_detector_share: share,
                                            detector_weights: weights.clone(),
                                            yaw_estimate: kbf.yaw_estimate,
                                            yaw_bandwidth,
                                            weighted_sizes,
                                            nms_iou: (base.nms_iou * nms_scale).min(1.0),
                                            ..base.clone()
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        FusionMethod::Wbf => {
            for wbf_iou in [0.1, 0.2, 0.3, 0.4, 0.55, 0.7] {
                for weights in weightings {
                    out.push(ClassFusionConfig {
                        wbf_iou,
                        detector_weights: weights.clone(),
                        ..base.clone()
                    });
                }
            }
        }
        FusionMethod::UnionNms => {
            for union_nms_iou in [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7] {
                out.push(ClassFusionConfig {
                    union_nms_iou,
                    ..base.clone()
                });
            }
        }
        FusionMethod::SingleDetector => out.push(base),
    }
    out
}

fn fmt_ap(v: Option<f64>) -> String {
    v.map(|a| format!("{:.1}", 100.0 * a)).unwrap_or_else(|| "—".into())
}

fn describe(method: FusionMethod, t: &ClassFusionConfig) -> String {
    let weights = if t.detector_weights.is_empty() {
        "uniform".to_string()
    } else {
        t.detector_weights
            .iter()
            .map(|(n, w)| format!("{n} {w:.2}"))
            .collect::<Vec<_>>()
            .join("/")
    };
    let bw = |b: Bandwidth, unit: &str| match b {
        Bandwidth::Factor(f) => format!("×{f}"),
        Bandwidth::Absolute(s) => format!("σ {s} {unit}"),
        other => format!("{other:?}"),
    };
    match method {
        FusionMethod::Kbf => format!(
            "r {:.2} m, votes ≥ {}, nms > {:.2}, centre {:?} bw {}, yaw {:?} bw {}, sizes {}, share {}, agreement {}, weights {weights}",
            t.radius_m,
            t.min_votes,
            t.nms_iou,
            t.centre_estimate,
            bw(t.centre_bandwidth, "m"),
            t.yaw_estimate,
            bw(t.yaw_bandwidth, "rad"),
            if t.weighted_sizes { "weighted" } else { "unweighted" },
            if t.score_by_detector_share { "on" } else { "off" },
            if t.agreement_sigma_m > 0.0 {
                format!("σ {} m", t.agreement_sigma_m)
            } else {
                "off".to_string()
            }
        ),
        FusionMethod::Wbf => format!("iou > {}, weights {weights}", t.wbf_iou),
        FusionMethod::UnionNms => format!("iou > {}", t.union_nms_iou),
        FusionMethod::SingleDetector => t.single_detector.clone().unwrap_or_default(),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut profiles = if args.profiles.is_empty() {
        standard_detector_profiles()
    } else {
        args.profiles
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                toml::from_str::<DetectorNoiseProfile>(&text).with_context(|| format!("parsing {}", path.display()))
            })
            .collect::<anyhow::Result<_>>()?
    };
    if args.copies > 1 {
        profiles = (1..=args.copies)
            .flat_map(|copy| {
                profiles.iter().map(move |p| DetectorNoiseProfile {
                    name: format!("{}_{copy}", p.name),
                    ..p.clone()
                })
            })
            .collect();
    }
    for profile in &mut profiles {
        if let Some(slope) = args.score_slope {
            profile.score_slope = slope;
        }
        if let Some(noise) = args.score_noise {
            profile.score_noise = noise;
        }
        for class in [&mut profile.vehicle, &mut profile.pedestrian, &mut profile.cyclist] {
            if let Some(q) = args.centre_outlier_probability {
                class.center_outlier_probability = q;
            }
            if let Some(k) = args.centre_outlier_scale {
                class.center_outlier_scale = k;
            }
        }
    }
    let names: Vec<String> = profiles.iter().map(|p| p.name.clone()).collect();
    let started = Instant::now();
    let mut report = serde_json::Map::new();
    let mut tuned_config = FusionConfig::default();
    let mut tables = String::new();
    let mut tuning_notes = String::new();

    let platforms = if args.platforms.is_empty() {
        PLATFORMS.to_vec()
    } else {
        args.platforms.clone()
    };
    let mut diagnosis_tables = String::new();
    for platform in platforms {
        let mut diagnosis = String::new();
        let mut diagnose = |label: &str, gt: &[EvalBox], pred: &[EvalBox]| {
            if args.diagnose {
                for (class, threshold) in CLASSES.iter().zip([0.7, 0.5, 0.5]) {
                    if gt.iter().any(|b| b.class == *class) {
                        let d = fusion_diagnosis::diagnose(gt, pred, *class, threshold);
                        diagnosis.push_str(&fusion_diagnosis::row(label, *class, &d));
                    }
                }
            }
        };
        let simulate = |seed: u64| {
            simulate_noisy_sequence(SimConfig::default(), platform, args.frames, seed, &profiles)
                .with_context(|| format!("simulating {platform} seed {seed}"))
        };
        let tune = vec![simulate(args.tune_seed)?];
        // Eval seeds then confirmation seeds, one sequence each.
        let seeds: Vec<u64> = args.eval_seeds.iter().chain(&args.confirm_seeds).copied().collect();
        let all: Vec<NoisySequence> = seeds.iter().map(|&s| simulate(s)).collect::<anyhow::Result<_>>()?;
        let (eval, confirm) = all.split_at(args.eval_seeds.len());
        let (gt_tune, gt_eval, gt_confirm) = (truth(&tune), truth(eval), truth(confirm));
        let gt_seed: Vec<Vec<EvalBox>> = all.iter().map(|s| truth(std::slice::from_ref(s))).collect();
        // Confirmation-pooled AP and AP of each seed on its own.
        let mut seed_rows: Vec<SeedRow> = Vec::new();
        let mut measure = |label: &str, predict: &dyn Fn(&[NoisySequence]) -> anyhow::Result<Vec<EvalBox>>| {
            let pooled = if confirm.is_empty() {
                None
            } else {
                Some(ap(&gt_confirm, &predict(confirm)?))
            };
            let each = all
                .iter()
                .zip(&gt_seed)
                .map(|(s, gt)| Ok(ap_r40_and_all_points(gt, &predict(std::slice::from_ref(s))?)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            seed_rows.push((label.to_string(), pooled, each));
            anyhow::Ok(())
        };
        eprintln!(
            "{platform}: simulated ({:.0} s); tune GT {} boxes, eval GT {} boxes",
            started.elapsed().as_secs_f64(),
            gt_tune.len(),
            gt_eval.len()
        );
        let count = |gt: &[EvalBox], c: ObjectClass| gt.iter().filter(|b| b.class == c).count();

        // Single detectors on both splits; AP-proportional weights and the best one come from tuning.
        let single = |seqs: &[NoisySequence], name: &str| -> Vec<EvalBox> {
            seqs.iter()
                .flat_map(|s| boxlayer::eval::input::noisy_sequence_detections(s, name))
                .collect()
        };
        let mut rows: Vec<(String, [Option<f64>; 3], String)> = Vec::new();
        let mut single_tune: BTreeMap<String, [Option<f64>; 3]> = BTreeMap::new();
        for name in &names {
            single_tune.insert(name.clone(), ap(&gt_tune, &single(&tune, name)));
            let pred = single(eval, name);
            diagnose(name, &gt_eval, &pred);
            measure(name, &|seqs| Ok(single(seqs, name)))?;
            rows.push((name.clone(), ap(&gt_eval, &pred), String::new()));
        }

        let mut best_single = FusionConfig {
            method: FusionMethod::SingleDetector,
            ..FusionConfig::default()
        };
        let mut ap_weights: BTreeMap<ObjectClass, BTreeMap<String, f64>> = BTreeMap::new();
        // Inverse-variance weights: each detector's mean squared BEV centre error of its loose
        // matches on the tune seed, as min / own (the minimum-variance combination of unbiased
        // independent estimates weighs each by 1/σ²).
        let mut inverse_variance_weights: BTreeMap<ObjectClass, BTreeMap<String, f64>> = BTreeMap::new();
        let mut best_names = Vec::new();
        for (k, class) in CLASSES.iter().enumerate() {
            let score = |n: &String| single_tune[n][k].unwrap_or(0.0);
            let best = names.iter().max_by(|a, b| score(a).total_cmp(&score(b))).cloned();
            let top = names.iter().map(score).fold(0.0, f64::max);
            if top > 0.0 {
                ap_weights.insert(
                    *class,
                    names.iter().map(|n| (n.clone(), (score(n) / top).max(0.05))).collect(),
                );
            }
            let mse: Vec<f64> = names
                .iter()
                .map(|n| fusion_diagnosis::diagnose(&gt_tune, &single(&tune, n), *class, 0.5).centre_mse_m2)
                .collect();
            let least = mse
                .iter()
                .copied()
                .filter(|m| m.is_finite())
                .fold(f64::INFINITY, f64::min);
            if least.is_finite() && least > 0.0 {
                inverse_variance_weights.insert(
                    *class,
                    names
                        .iter()
                        .zip(&mse)
                        .map(|(n, m)| (n.clone(), if m.is_finite() { (least / m).max(0.05) } else { 0.05 }))
                        .collect(),
                );
            }
            best_single.class_mut(*class).single_detector = best.clone();
            best_names.push(format!("{class}: {}", best.unwrap_or_default()));
        }
        measure("best single (chosen on the tune seed)", &|seqs| {
            fused(seqs, &best_single)
        })?;
        rows.push((
            "best single (chosen on the tune seed)".into(),
            ap(&gt_eval, &fused(eval, &best_single)?),
            best_names.join(", "),
        ));

        // Tune union + NMS, WBF and KBF per class on the tune seed.
        let mut platform_json = serde_json::Map::new();
        let ms3d_yaw: &[Bandwidth] = &[Bandwidth::Factor(0.1)];
        let member = KbfVariant {
            centre_estimates: &[CentreEstimate::Member],
            yaw_estimate: YawEstimate::Member,
            yaw_bandwidths: ms3d_yaw,
            weighted_sizes: &[false],
            nms_scales: &[1.0],
            agreement: false,
        };
        let member_or_peak = KbfVariant {
            centre_estimates: &[CentreEstimate::Member, CentreEstimate::Peak],
            ..member
        };
        let peak_axis = KbfVariant {
            centre_estimates: &[CentreEstimate::Peak],
            yaw_estimate: YawEstimate::Peak,
            yaw_bandwidths: &[
                Bandwidth::Factor(1.0),
                Bandwidth::Absolute(0.1),
                Bandwidth::Absolute(0.3),
            ],
            weighted_sizes: &[true],
            nms_scales: &[1.0, 3.0],
            agreement: false,
        };
        let peak_axis_agreement = KbfVariant {
            agreement: true,
            ..peak_axis
        };
        const RECOMMENDED: &str = "KBF, peak centre and axis, agreement score (tuned)";
        for (method, label, variant) in [
            (FusionMethod::UnionNms, "union + NMS (tuned)", &member),
            (FusionMethod::Wbf, "WBF (tuned)", &member),
            (FusionMethod::Kbf, "KBF, member centre (tuned)", &member),
            (FusionMethod::Kbf, "KBF, member or peak centre (tuned)", &member_or_peak),
            (FusionMethod::Kbf, "KBF, peak centre and axis (tuned)", &peak_axis),
            (FusionMethod::Kbf, RECOMMENDED, &peak_axis_agreement),
        ] {
            let mut config = FusionConfig {
                method,
                ..FusionConfig::default()
            };
            let mut notes = Vec::new();
            for class in CLASSES {
                if count(&gt_tune, class) == 0 {
                    continue;
                }
                let mut weightings = vec![BTreeMap::new()];
                weightings.extend(ap_weights.get(&class).cloned());
                weightings.extend(inverse_variance_weights.get(&class).cloned());
                let tune_ap = |table: &ClassFusionConfig| -> anyhow::Result<f64> {
                    let pred = fused(&tune, &only_class(&config, method, class, table))?;
                    Ok(class_ap(&gt_tune, &pred, class))
                };
                let mut best: Option<(f64, ClassFusionConfig)> = None;
                for table in candidates(method, class, &weightings, variant) {
                    let a = tune_ap(&table)?;
                    if best.as_ref().is_none_or(|(b, _)| a > *b) {
                        best = Some((a, table));
                    }
                }
                if variant.agreement
                    && let Some((_, first)) = best.clone()
                {
                    for sigma in agreement_sigmas(class).into_iter().filter(|&s| s > 0.0) {
                        let table = ClassFusionConfig {
                            agreement_sigma_m: sigma,
                            ..first.clone()
                        };
                        let a = tune_ap(&table)?;
                        if best.as_ref().is_none_or(|(b, _)| a > *b) {
                            best = Some((a, table));
                        }
                    }
                }
                if let Some((a, table)) = best {
                    notes.push(format!(
                        "{class}: {} (tune AP {:.1})",
                        describe(method, &table),
                        100.0 * a
                    ));
                    *config.class_mut(class) = table;
                }
            }
            let pred = fused(eval, &config)?;
            diagnose(label, &gt_eval, &pred);
            measure(label, &|seqs| fused(seqs, &config))?;
            let eval_ap = ap(&gt_eval, &pred);
            rows.push((label.into(), eval_ap, notes.join("; ")));
            platform_json.insert(label.to_string(), serde_json::to_value(&config)?);
            if label == RECOMMENDED {
                // Keep the tuned tables as this platform's overrides of the shipped defaults.
                let o = tuned_config.platforms.of_mut(platform);
                for class in CLASSES {
                    let t = config.class(class);
                    let mut table = toml::Table::new();
                    table.insert("radius_m".into(), t.radius_m.into());
                    table.insert("min_votes".into(), i64::from(t.min_votes).into());
                    table.insert("centre_bandwidth".into(), toml::Value::try_from(t.centre_bandwidth)?);
                    table.insert("centre_estimate".into(), toml::Value::try_from(t.centre_estimate)?);
                    table.insert("yaw_estimate".into(), toml::Value::try_from(t.yaw_estimate)?);
                    table.insert("yaw_bandwidth".into(), toml::Value::try_from(t.yaw_bandwidth)?);
                    table.insert("weighted_sizes".into(), t.weighted_sizes.into());
                    table.insert("nms_iou".into(), t.nms_iou.into());
                    table.insert("score_by_detector_share".into(), t.score_by_detector_share.into());
                    table.insert("agreement_sigma_m".into(), t.agreement_sigma_m.into());
                    table.insert("detector_weights".into(), toml::Value::try_from(&t.detector_weights)?);
                    o.insert(class.as_str().into(), toml::Value::Table(table));
                }
            }
            eprintln!("{platform}: {label} done ({:.0} s)", started.elapsed().as_secs_f64());
        }
        measure("KBF (MS3D defaults)", &|seqs| fused(seqs, &FusionConfig::default()))?;
        rows.push((
            "KBF (MS3D defaults)".into(),
            ap(&gt_eval, &fused(eval, &FusionConfig::default())?),
            "`FusionConfig::default()`".into(),
        ));

        if args.diagnose {
            diagnosis_tables.push_str(&format!("\n#### {platform}\n\n{}{diagnosis}", fusion_diagnosis::HEADER));
        }
        tables.push_str(&format!(
            "\n### {platform} ({} frames × {} eval seeds; GT boxes: {} vehicles, {} pedestrians, {} cyclists)\n\n",
            args.frames,
            args.eval_seeds.len(),
            count(&gt_eval, ObjectClass::Vehicle),
            count(&gt_eval, ObjectClass::Pedestrian),
            count(&gt_eval, ObjectClass::Cyclist)
        ));
        tables.push_str("| method | vehicle AP@0.7 | pedestrian AP@0.5 | cyclist AP@0.5 |\n|---|---|---|---|\n");
        for (label, a, note) in &rows {
            tables.push_str(&format!(
                "| {label} | {} | {} | {} |\n",
                fmt_ap(a[0]),
                fmt_ap(a[1]),
                fmt_ap(a[2])
            ));
            if !note.is_empty() {
                tuning_notes.push_str(&format!("- {platform}, {label}: {note}\n"));
            }
        }
        if !args.confirm_seeds.is_empty() {
            tables.push_str(&format!(
                "\nConfirmation on seeds {:?} (GT boxes: {} vehicles, {} pedestrians, {} cyclists):\n\n",
                args.confirm_seeds,
                count(&gt_confirm, ObjectClass::Vehicle),
                count(&gt_confirm, ObjectClass::Pedestrian),
                count(&gt_confirm, ObjectClass::Cyclist)
            ));
            tables.push_str("| method | vehicle AP@0.7 | pedestrian AP@0.5 | cyclist AP@0.5 |\n|---|---|---|---|\n");
            for (label, pooled, _) in &seed_rows {
                if let Some(a) = pooled {
                    tables.push_str(&format!(
                        "| {label} | {} | {} | {} |\n",
                        fmt_ap(a[0]),
                        fmt_ap(a[1]),
                        fmt_ap(a[2])
                    ));
                }
            }
        }
        for (kind, all_points) in [("AP R40", false), ("all-point AP", true)] {
            tables.push_str(&format!(
                "\nPer seed, {kind} (vehicle / pedestrian / cyclist):\n\n| method |"
            ));
            for s in &seeds {
                tables.push_str(&format!(" seed {s} |"));
            }
            tables.push_str(&format!("\n|---|{}\n", "---|".repeat(seeds.len())));
            for (label, _, each) in &seed_rows {
                tables.push_str(&format!("| {label} |"));
                for (r40, all) in each {
                    let a = if all_points { all } else { r40 };
                    let f = |v: Option<f64>| v.map(|x| format!("{:.2}", 100.0 * x)).unwrap_or_else(|| "—".into());
                    if all_points {
                        tables.push_str(&format!(" {} / {} / {} |", f(a[0]), f(a[1]), f(a[2])));
                    } else {
                        tables.push_str(&format!(" {} / {} / {} |", fmt_ap(a[0]), fmt_ap(a[1]), fmt_ap(a[2])));
                    }
                }
                tables.push('\n');
            }
        }
        platform_json.insert(
            "per_seed".into(),
            Value::Array(
                seed_rows
                    .iter()
                    .map(
                        |(label, pooled, each)| json!({"method": label, "confirm": pooled, "seeds": seeds, "ap": each}),
                    )
                    .collect(),
            ),
        );
        platform_json.insert(
            "rows".into(),
            Value::Array(
                rows.iter()
                    .map(|(label, a, note)| json!({"method": label, "vehicle": a[0], "pedestrian": a[1], "cyclist": a[2], "tuned": note}))
                    .collect(),
            ),
        );
        report.insert(platform.as_str().into(), Value::Object(platform_json));
    }

    println!(
        "BEV AP R40 (%), tuned on seed {}, measured on seeds {:?}\n{tables}\nTuned parameters:\n{tuning_notes}",
        args.tune_seed, args.eval_seeds
    );
    if args.diagnose {
        println!(
            "Diagnosis on seeds {:?} (loose = BEV IoU > {}):\n{diagnosis_tables}",
            args.eval_seeds,
            fusion_diagnosis::LOOSE_IOU
        );
    }
    eprintln!("total {:.0} s", started.elapsed().as_secs_f64());
    if let Some(dir) = args.out {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let summary = json!({
            "frames": args.frames, "tune_seed": args.tune_seed, "eval_seeds": args.eval_seeds,
            "confirm_seeds": args.confirm_seeds,
            "platforms": Value::Object(report),
        });
        std::fs::write(dir.join("fusion_study.json"), serde_json::to_string_pretty(&summary)?)?;
        std::fs::write(dir.join("fusion_tuned.toml"), toml::to_string(&tuned_config)?)?;
    }
    Ok(())
}
