//! Realism of the standard detection-noise profiles: simulates a noisy sequence per platform and
//! prints, per detector, BEV AP (R40) for vehicles @0.7 and pedestrians @0.5 with the project's
//! evaluator, recall at score 0.5 and predictions unmatched at BEV IoU 0.5 per frame (the table in docs/simulator.md).
//!
//! `cargo run --release --example noise_realism -- [frames] [seed]` (defaults 100 and 7).

use boxlayer::Platform;
use boxlayer::eval::{EvalConfig, EvalData, IouKind, evaluate};
use boxlayer::frame::ObjectClass;
use boxlayer::sim::{SimConfig, simulate_noisy_sequence, standard_detector_profiles};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let frames: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let seed: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(7);
    let profiles = standard_detector_profiles();
    let config = EvalConfig::default();
    println!("{frames} consecutive sweeps per platform, seed {seed}; BEV AP R40 (%)");
    println!();
    println!(
        "| platform | detector | vehicle AP@0.7 | pedestrian AP@0.5 | vehicle AP@0.5 | recall veh / ped @score 0.5 | unmatched @0.5 / frame | GT veh / ped |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for platform in [Platform::Vehicle, Platform::Drone, Platform::Quadruped] {
        let seq = simulate_noisy_sequence(SimConfig::default(), platform, frames, seed, &profiles)?;
        let gt = EvalData {
            boxes: boxlayer::eval::input::noisy_sequence_truth(&seq),
            queries: Vec::new(),
        };
        for profile in &profiles {
            let pred = EvalData {
                boxes: boxlayer::eval::input::noisy_sequence_detections(&seq, &profile.name),
                queries: Vec::new(),
            };
            let report = evaluate(&gt, &pred, &config)?;
            let find = |class: ObjectClass, threshold: f64| {
                report
                    .detection
                    .iter()
                    .find(|r| r.class == class && r.iou_kind == IouKind::Bev && r.threshold == threshold)
            };
            let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
            let veh7 = find(ObjectClass::Vehicle, 0.7);
            let veh5 = find(ObjectClass::Vehicle, 0.5);
            let ped5 = find(ObjectClass::Pedestrian, 0.5);
            let fps: usize = report
                .detection
                .iter()
                .filter(|r| r.iou_kind == IouKind::Bev && r.threshold == 0.5)
                .map(|r| r.num_pred - r.num_tp)
                .sum();
            println!(
                "| {platform} | {} | {} | {} | {} | {} / {} | {:.2} | {} / {} |",
                profile.name,
                pct(veh7.and_then(|r| r.ap_r40)),
                pct(ped5.and_then(|r| r.ap_r40)),
                pct(veh5.and_then(|r| r.ap_r40)),
                pct(veh5.and_then(|r| r.recall_at_score)),
                pct(ped5.and_then(|r| r.recall_at_score)),
                fps as f64 / frames as f64,
                veh7.map_or(0, |r| r.num_gt),
                ped5.map_or(0, |r| r.num_gt),
            );
        }
    }
    Ok(())
}
