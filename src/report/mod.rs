//! One self-contained HTML page about a run's output (`boxlayer report`): the sequences, the
//! quality table where the run was scored against truth or labels, the statistics with their
//! plots, a gallery of flagged boxes (camera crop over bird's-eye view) and the per-stage timings.
//! Every image is inline (`data:` URIs) and the page loads nothing else, so it can be mailed,
//! archived or opened from a headless server's disk.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use base64::Engine as _;
use thiserror::Error;

use crate::export::{ExportError, LogLocation, SequenceLog, ShardSequence, load_sequences};
use crate::pipeline::{ClassAp, LayerScores};
use crate::render::{RenderError, TileOptions, box_tile, png_bytes};
use crate::shards::BoxRow;
use crate::stats::{StatsError, StatsOptions, compute, plots};

/// Errors writing a report.
#[derive(Debug, Error)]
pub enum ReportError {
    /// The sequence folders could not be read.
    #[error(transparent)]
    Read(#[from] ExportError),
    /// The statistics could not be computed or plotted.
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// A gallery picture could not be drawn.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// The page could not be written.
    #[error("write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// What the report holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    /// Where the logs are (camera crops and full sweeps); without them the gallery shows the
    /// stored points and no camera crops.
    pub log: LogLocation,
    /// Flagged boxes shown in the gallery at most.
    pub gallery: usize,
    /// The gallery's tiles.
    pub tile: TileOptions,
    /// The statistics.
    pub stats: StatsOptions,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            log: LogLocation::Without,
            gallery: 24,
            tile: TileOptions::default(),
            stats: StatsOptions::default(),
        }
    }
}

/// What a report holds, for the command's summary line.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSummary {
    /// The page.
    pub path: PathBuf,
    /// Sequences described.
    pub sequences: usize,
    /// Statistics plots.
    pub plots: usize,
    /// Flagged boxes in the gallery.
    pub gallery: usize,
    /// Flagged boxes in the layer.
    pub flagged: usize,
    /// Size of the page (bytes).
    pub bytes: usize,
    /// Seconds spent on the statistics, the gallery, and in all.
    pub seconds: [f64; 3],
}

/// Text made safe inside HTML.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An inline PNG image.
fn img(png: &[u8], class: &str, alt: &str) -> String {
    format!(
        "<img class=\"{class}\" alt=\"{}\" src=\"data:image/png;base64,{}\">",
        escape(alt),
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{:.1}", 100.0 * v))
}

fn ap_pair(a: &ClassAp) -> String {
    format!("{} / {}", pct(a.vehicle), pct(a.pedestrian))
}

/// The flagged boxes the gallery shows: those a camera sees first (a reviewer judges them from
/// the crop), then most flags, then lowest score; taken from the sequences in turn so each gets
/// its share.
fn gallery_picks(sequences: &[ShardSequence], limit: usize) -> Vec<(usize, &BoxRow)> {
    let mut queues: Vec<Vec<&BoxRow>> = sequences
        .iter()
        .map(|s| {
            let mut v: Vec<&BoxRow> = s.boxes.iter().filter(|b| b.review_status == "flagged").collect();
            v.sort_by(|a, b| {
                b.best_camera
                    .is_some()
                    .cmp(&a.best_camera.is_some())
                    .then(b.flags.len().cmp(&a.flags.len()))
                    .then(a.score.total_cmp(&b.score))
                    .then(a.box_id.cmp(&b.box_id))
            });
            v.reverse();
            v
        })
        .collect();
    let mut out = Vec::new();
    while out.len() < limit && queues.iter().any(|q| !q.is_empty()) {
        for (i, q) in queues.iter_mut().enumerate() {
            if out.len() < limit
                && let Some(b) = q.pop()
            {
                out.push((i, b));
            }
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}pre{font-size:12px;background:#f7f7f7;padding:8px;overflow-x:auto}\
img.plot{display:block;margin:12px 0;max-width:100%;border:1px solid #ddd}\
.gallery{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0}figcaption{font-size:12px;max-width:240px}\
.note{color:#666;font-size:13px}";

/// Writes the report of the finished sequences at or under `out_dir` to `file`.
pub fn write_report(out_dir: &Path, file: &Path, options: &ReportOptions) -> Result<ReportSummary, ReportError> {
    let start = Instant::now();
    let sequences = load_sequences(out_dir, &[])?;
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>boxlayer report: {}</title><style>{STYLE}</style></head><body>\n\
         <h1>boxlayer report: {}</h1>\n<p class=\"note\">boxlayer {} · {} sequence(s)</p>\n",
        escape(&out_dir.display().to_string()),
        escape(&out_dir.display().to_string()),
        env!("CARGO_PKG_VERSION"),
        sequences.len()
    );

    // Sequences.
    html.push_str(
        "<h2>Sequences</h2>\n<table id=\"sequences\"><tr><th class=\"l\">platform</th><th class=\"l\">sequence</th>\
         <th>frames</th><th>skipped</th><th>boxes</th><th>tracks</th><th>flagged</th><th>errors</th>\
         <th class=\"l\">source</th></tr>\n",
    );
    for s in &sequences {
        let c = &s.manifest.counts;
        let _ = writeln!(
            html,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            escape(&s.manifest.platform),
            escape(&s.manifest.sequence),
            c.frames,
            c.frames_skipped,
            c.boxes,
            c.tracks,
            c.flagged,
            s.manifest.errors.len(),
            escape(&s.manifest.source)
        );
    }
    html.push_str("</table>\n");

    // Quality, where the run was scored.
    let scored: Vec<(&ShardSequence, LayerScores)> = sequences
        .iter()
        .filter_map(|s| {
            let v = s.manifest.scores.clone()?;
            serde_json::from_value(v).ok().map(|sc| (s, sc))
        })
        .collect();
    html.push_str("<h2>Quality</h2>\n");
    if scored.is_empty() {
        html.push_str("<p class=\"note\">No sequence was scored (run with truth or labels to fill this table).</p>\n");
    } else {
        html.push_str(
            "<p class=\"note\">BEV AP R40, vehicle@0.7 / pedestrian@0.5 (%), against the truth given to the run.</p>\n\
             <table id=\"quality\"><tr><th class=\"l\">sequence</th><th class=\"l\">best single detector</th>\
             <th>fused (KBF)</th><th>fused (WBF)</th><th>consolidated</th><th>vehicle MOTA</th><th>IDS / GT tracks</th></tr>\n",
        );
        for (s, sc) in &scored {
            let best = sc
                .best_single
                .as_ref()
                .and_then(|n| sc.detectors.get(n).map(|a| format!("{n}: {}", ap_pair(a))))
                .unwrap_or_else(|| "–".to_string());
            let _ = writeln!(
                html,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
                escape(&s.manifest.sequence),
                escape(&best),
                ap_pair(&sc.fused),
                ap_pair(&sc.fused_wbf),
                ap_pair(&sc.consolidated),
                sc.vehicle_mota.map_or_else(|| "–".to_string(), |m| format!("{m:.3}")),
                sc.vehicle_id_switches,
                sc.vehicle_gt_tracks
            );
        }
        html.push_str("</table>\n");
    }

    // Statistics.
    let stats_start = Instant::now();
    let stats = compute(out_dir, &options.stats)?;
    let plot_list = plots(&stats)?;
    let stats_s = stats_start.elapsed().as_secs_f64();
    let _ = write!(
        html,
        "<h2>Statistics</h2>\n<pre id=\"stats\">{}</pre>\n",
        escape(&stats.table())
    );
    for p in &plot_list {
        let _ = writeln!(
            html,
            "<p id=\"plot-{}\">{}</p>",
            escape(&p.name),
            img(&p.png, "plot", &p.title)
        );
    }

    // Gallery of flagged boxes.
    let gallery_start = Instant::now();
    let flagged: usize = sequences
        .iter()
        .map(|s| s.boxes.iter().filter(|b| b.review_status == "flagged").count())
        .sum();
    let picks = gallery_picks(&sequences, options.gallery);
    let mut logs: Vec<Option<SequenceLog>> = Vec::with_capacity(sequences.len());
    let mut missing_logs = Vec::new();
    for s in &sequences {
        match SequenceLog::open(s, &options.log) {
            Ok(log) => logs.push(log),
            Err(e) => {
                tracing::warn!("{}: no camera crops in the gallery: {e}", s.manifest.sequence);
                missing_logs.push(s.manifest.sequence.clone());
                logs.push(None);
            }
        }
    }
    let _ = writeln!(
        html,
        "<h2>Flagged boxes</h2>\n<p class=\"note\">{} of {flagged} flagged boxes, most flags first; \
         each tile: the best camera's view over the bird's-eye view around the box (white dashes: truth).{}</p>\n\
         <div class=\"gallery\">",
        picks.len(),
        if missing_logs.is_empty() && !matches!(options.log, LogLocation::Without) {
            String::new()
        } else {
            " Logs not given or not found, so no camera crops and only the points the run kept.".to_string()
        }
    );
    for (i, b) in &picks {
        let tile = box_tile(&sequences[*i], logs[*i].as_ref(), b, &[], &options.tile)?;
        let caption = format!("{} · box {}", sequences[*i].manifest.sequence, b.box_id);
        let _ = writeln!(
            html,
            "<figure class=\"flagged\">{}<figcaption>{}</figcaption></figure>",
            img(&png_bytes(&tile)?, "tile", &caption),
            escape(&caption)
        );
    }
    html.push_str("</div>\n");
    let gallery_s = gallery_start.elapsed().as_secs_f64();

    // Timings.
    html.push_str(
        "<h2>Stage timings</h2>\n<p class=\"note\">Seconds per sequence, from each manifest (CPU seconds summed \
         over threads for the per-frame stages).</p>\n<table id=\"timings\"><tr><th class=\"l\">sequence</th>\
         <th>read (cpu)</th><th>normalize (cpu)</th><th>detect (cpu)</th><th>onnx (cpu)</th><th>fuse (cpu)</th>\
         <th>per-frame pass</th><th>track</th><th>describe</th><th>camera</th><th>write</th><th>total</th></tr>\n",
    );
    for s in &sequences {
        let t = &s.manifest.stage_times;
        let _ = writeln!(
            html,
            "<tr><td class=\"l\">{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>\
             <td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            escape(&s.manifest.sequence),
            t.read_cpu_s,
            t.normalize_cpu_s,
            t.detect_cpu_s,
            t.onnx_cpu_s,
            t.fuse_cpu_s,
            t.per_frame_s,
            t.track_s,
            t.describe_s,
            t.camera_s,
            t.write_s,
            t.total_s
        );
    }
    html.push_str("</table>\n");
    let errors: Vec<String> = sequences
        .iter()
        .flat_map(|s| {
            s.manifest.errors.iter().map(move |e| {
                format!(
                    "{} frame {}: {}: {}",
                    s.manifest.sequence,
                    e.frame_index.map_or_else(|| "–".to_string(), |f| f.to_string()),
                    e.location,
                    e.detail
                )
            })
        })
        .collect();
    if !errors.is_empty() {
        let _ = write!(
            html,
            "<h2>Frames not read</h2>\n<pre id=\"errors\">{}</pre>\n",
            escape(&errors.join("\n"))
        );
    }
    html.push_str("</body></html>\n");

    crate::atomic_file::write_atomic(file, html.as_bytes()).map_err(|source| ReportError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    Ok(ReportSummary {
        path: file.to_path_buf(),
        sequences: sequences.len(),
        plots: plot_list.len(),
        gallery: picks.len(),
        flagged,
        bytes: html.len(),
        seconds: [stats_s, gallery_s, start.elapsed().as_secs_f64()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
