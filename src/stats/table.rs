//! The terminal table of [`DatasetStats`]: one row per number, one column per platform and `all`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{DatasetStats, Histogram, PlatformStats};

/// One table row: a label and a cell per column.
struct Row {
    label: String,
    cells: Vec<String>,
}

fn count_share(count: u64, total: u64) -> String {
    if total == 0 {
        count.to_string()
    } else {
        format!("{count} ({:.1}%)", 100.0 * count as f64 / total as f64)
    }
}

fn mean_cell(mean: Option<f64>) -> String {
    mean.map_or_else(|| "-".to_string(), |m| format!("{m:.2}"))
}

pub(super) fn render(stats: &DatasetStats) -> String {
    let mut names: Vec<String> = stats.platform_order().iter().map(|s| s.to_string()).collect();
    let mut columns: Vec<&PlatformStats> = names.iter().map(|n| &stats.platforms[n]).collect();
    names.push("all".to_string());
    columns.push(&stats.all);
    let mut rows: Vec<Row> = Vec::new();
    let section = |rows: &mut Vec<Row>, title: &str| {
        rows.push(Row {
            label: title.to_string(),
            cells: Vec::new(),
        })
    };
    let row = |label: String, f: &dyn Fn(&PlatformStats) -> String| Row {
        label,
        cells: columns.iter().map(|p| f(p)).collect(),
    };
    let histogram_rows = |rows: &mut Vec<Row>, unit: &str, get: &dyn Fn(&PlatformStats) -> &Histogram| {
        let labels = get(&stats.all).labels.clone();
        for (i, label) in labels.iter().enumerate() {
            rows.push(row(format!("  {unit} {label}"), &|p| {
                let h = get(p);
                count_share(h.counts[i], h.total())
            }));
        }
    };
    rows.push(row("sequences".into(), &|p| p.sequences.to_string()));
    rows.push(row("frames".into(), &|p| p.frames.to_string()));
    rows.push(row("boxes".into(), &|p| p.boxes.to_string()));
    rows.push(row("tracks".into(), &|p| p.tracks.to_string()));

    section(&mut rows, "objects per frame");
    rows.push(row("  mean".into(), &|p| mean_cell(p.objects_per_frame.mean)));
    histogram_rows(&mut rows, "frames with", &|p| &p.objects_per_frame.histogram);

    section(&mut rows, "points per box");
    rows.push(row("  mean".into(), &|p| mean_cell(p.points_per_box.mean)));
    histogram_rows(&mut rows, "boxes with", &|p| &p.points_per_box.histogram);

    section(&mut rows, "target range ρ (m)");
    let rho_labels = stats.all.target_polar.rho_labels.clone();
    for (i, label) in rho_labels.iter().enumerate() {
        rows.push(row(format!("  boxes at {label}"), &|p| {
            let t = &p.target_polar;
            let in_row: u64 = t.counts.get(i).map_or(0, |r| r.iter().sum());
            count_share(in_row, p.boxes)
        }));
    }

    section(&mut rows, "point elevation sample");
    rows.push(row("  frames used".into(), &|p| {
        format!(
            "{} / {}",
            p.point_elevation.frames_used, p.point_elevation.frames_with_points
        )
    }));
    rows.push(row("  points used".into(), &|p| {
        p.point_elevation.points_used.to_string()
    }));
    rows.push(row("  below horizon".into(), &|p| {
        let h = &p.point_elevation.histogram;
        count_share(h.counts.iter().take(h.counts.len() / 2).sum(), h.total())
    }));

    section(&mut rows, "track length (boxes)");
    rows.push(row("  mean".into(), &|p| mean_cell(p.track_lengths.mean)));
    histogram_rows(&mut rows, "tracks of", &|p| &p.track_lengths.histogram);

    let keys =
        |get: &dyn Fn(&PlatformStats) -> Vec<String>| -> BTreeSet<String> { get(&stats.all).into_iter().collect() };
    section(&mut rows, "boxes by class");
    for class in keys(&|p| p.boxes_by_class.keys().cloned().collect()) {
        rows.push(row(format!("  {class}"), &|p| {
            count_share(p.boxes_by_class.get(&class).copied().unwrap_or(0), p.boxes)
        }));
    }
    section(&mut rows, "tracks by class");
    for class in keys(&|p| p.tracks_by_class.keys().cloned().collect()) {
        rows.push(row(format!("  {class}"), &|p| {
            count_share(p.tracks_by_class.get(&class).copied().unwrap_or(0), p.tracks)
        }));
    }
    section(&mut rows, "review flags (boxes)");
    for flag in keys(&|p| p.flags.keys().cloned().collect()) {
        rows.push(row(format!("  {flag}"), &|p| {
            count_share(p.flags.get(&flag).map_or(0, |r| r.count), p.boxes)
        }));
    }
    section(&mut rows, "review status");
    for status in keys(&|p| p.review_status.keys().cloned().collect()) {
        rows.push(row(format!("  {status}"), &|p| {
            count_share(p.review_status.get(&status).copied().unwrap_or(0), p.boxes)
        }));
    }
    section(&mut rows, "origin");
    for origin in keys(&|p| p.origin.keys().cloned().collect()) {
        rows.push(row(format!("  {origin}"), &|p| {
            count_share(p.origin.get(&origin).copied().unwrap_or(0), p.boxes)
        }));
    }

    let label_width = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max("statistic".len());
    let widths: Vec<usize> = (0..names.len())
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.cells.get(c))
                .map(|s| s.chars().count())
                .chain([names[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} sequences{}",
        stats.input,
        stats.all.sequences,
        if stats.incomplete_skipped > 0 {
            format!(" ({} incomplete folders skipped)", stats.incomplete_skipped)
        } else {
            String::new()
        }
    );
    let pad = |s: &str, w: usize| format!("{}{s}", " ".repeat(w.saturating_sub(s.chars().count())));
    let mut header = format!("{:<label_width$}", "statistic");
    for (name, w) in names.iter().zip(&widths) {
        header.push_str("  ");
        header.push_str(&pad(name, *w));
    }
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.chars().count()));
    for r in &rows {
        let mut line = r.label.clone();
        line.push_str(&" ".repeat(label_width.saturating_sub(r.label.chars().count())));
        for (cell, w) in r.cells.iter().zip(&widths) {
            line.push_str("  ");
            line.push_str(&pad(cell, *w));
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}
