//! PNG plots of [`DatasetStats`], drawn with plotters into an in-memory RGB buffer and encoded
//! with `image`: one plot per statistic, the platforms as grouped bars, line series or panels.

use std::io::Cursor;

use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

use super::{DatasetStats, Histogram, PlatformStats, RHO_BINS, StatsError, THETA_BINS};

/// Width of every plot (px).
pub const PLOT_WIDTH: u32 = 900;
/// Height of every plot (px).
pub const PLOT_HEIGHT: u32 = 500;

const FONT: &str = "sans-serif";

/// One PNG plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// File stem (`objects_per_frame`).
    pub name: String,
    /// Its title.
    pub title: String,
    /// The PNG file's bytes.
    pub png: Vec<u8>,
}

/// Every plot of `stats`, in memory: objects per frame, points per box, the targets' (ρ, θ)
/// heatmap, point elevation, class counts, track lengths and flag rates.
pub fn plots(stats: &DatasetStats) -> Result<Vec<Plot>, StatsError> {
    let platforms: Vec<(&str, &PlatformStats)> = stats
        .platform_order()
        .into_iter()
        .map(|p| (p, &stats.platforms[p]))
        .collect();
    let share_series = |get: &dyn Fn(&PlatformStats) -> &Histogram| -> Vec<Series> {
        platforms
            .iter()
            .map(|(name, p)| {
                let h = get(p);
                let total = h.total();
                Series {
                    name: format!("{name} (n = {total})"),
                    color: platform_color(name, stats),
                    values: h.counts.iter().map(|&c| percent(c, total)).collect(),
                }
            })
            .collect()
    };
    let mut out = Vec::new();

    let title = "Objects per frame";
    out.push(draw("objects_per_frame", title, |area| {
        grouped_bars(
            area,
            title,
            "boxes in the frame",
            "% of frames",
            &stats.all.objects_per_frame.histogram.labels,
            &share_series(&|p| &p.objects_per_frame.histogram),
        )
    })?);

    let title = "LiDAR points per box";
    out.push(draw("points_per_box", title, |area| {
        grouped_bars(
            area,
            title,
            "points inside the box",
            "% of boxes",
            &stats.all.points_per_box.histogram.labels,
            &share_series(&|p| &p.points_per_box.histogram),
        )
    })?);

    let title = "Targets by BEV range ρ and relative pitch θ (share of each platform's boxes)";
    out.push(draw("target_polar", title, |area| {
        polar_panels(area, title, &platforms)
    })?);

    let title = "Elevation of LiDAR points (gravity-aligned frame)";
    out.push(draw("point_elevation", title, |area| {
        elevation_lines(area, title, &platforms, stats)
    })?);

    let title = "Boxes and tracks by class";
    out.push(draw("class_counts", title, |area| {
        class_panels(area, title, &platforms, stats)
    })?);

    let title = "Track lengths";
    out.push(draw("track_lengths", title, |area| {
        grouped_bars(
            area,
            title,
            "boxes in the track",
            "% of tracks",
            &stats.all.track_lengths.histogram.labels,
            &share_series(&|p| &p.track_lengths.histogram),
        )
    })?);

    let title = "Review flag rates";
    let flags: Vec<String> = stats.all.flags.keys().cloned().collect();
    let flag_series: Vec<Series> = platforms
        .iter()
        .map(|(name, p)| Series {
            name: format!("{name} (n = {})", p.boxes),
            color: platform_color(name, stats),
            values: flags
                .iter()
                .map(|f| p.flags.get(f).map_or(0, |r| r.count))
                .map(|c| percent(c, p.boxes))
                .collect(),
        })
        .collect();
    out.push(draw("flag_rates", title, |area| {
        grouped_bars(area, title, "flag", "% of boxes", &flags, &flag_series)
    })?);
    Ok(out)
}

/// Which per-class counts of a platform a panel shows.
type ClassCounts = fn(&PlatformStats) -> &std::collections::BTreeMap<String, u64>;

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type DrawResult = Result<(), String>;

/// One bar or line series.
struct Series {
    name: String,
    color: RGBColor,
    values: Vec<f64>,
}

fn percent(count: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * count as f64 / total as f64
    }
}

/// A fixed colour per platform, so every plot colours a platform alike.
fn platform_color(name: &str, stats: &DatasetStats) -> RGBColor {
    match name {
        "vehicle" => RGBColor(31, 119, 180),
        "drone" => RGBColor(255, 127, 14),
        "quadruped" => RGBColor(44, 160, 44),
        _ => {
            let others = [RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(140, 86, 75)];
            let i = stats.platform_order().iter().position(|p| *p == name).unwrap_or(0);
            others[i % others.len()]
        }
    }
}

/// Draws with `f` into a white 900 × 500 RGB buffer and encodes it as PNG.
fn draw(name: &str, title: &str, f: impl FnOnce(&Area) -> DrawResult) -> Result<Plot, StatsError> {
    let fail = |detail: String| StatsError::Plot {
        name: name.to_string(),
        detail,
    };
    let mut buffer = vec![0u8; (PLOT_WIDTH * PLOT_HEIGHT * 3) as usize];
    {
        let area = BitMapBackend::with_buffer(&mut buffer, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
        area.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        f(&area).map_err(fail)?;
        area.present().map_err(|e| fail(e.to_string()))?;
    }
    let image = image::RgbImage::from_raw(PLOT_WIDTH, PLOT_HEIGHT, buffer)
        .ok_or_else(|| fail("the buffer does not match the image size".into()))?;
    let mut png = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| fail(format!("PNG encoding: {e}")))?;
    Ok(Plot {
        name: name.to_string(),
        title: title.to_string(),
        png,
    })
}

/// An axis number: no decimals when whole, one otherwise.
fn axis_number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The label of category `v` (an integer position) of `labels`, empty between positions.
fn category_label(labels: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

/// Grouped bars: one group per category, one bar per series, in a chart titled `title`.
fn grouped_bars(
    area: &Area,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    categories: &[String],
    series: &[Series],
) -> DrawResult {
    let n = categories.len().max(1);
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0_f64, f64::max);
    let y_max = if top > 0.0 { top * 1.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|v| category_label(categories, *v))
        .y_label_formatter(&|v| axis_number(*v))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    let k = series.len().max(1) as f64;
    let group = 0.8;
    for (s, one) in series.iter().enumerate() {
        let color = one.color;
        let bars = one.values.iter().enumerate().map(move |(i, &v)| {
            let x0 = i as f64 - group / 2.0 + s as f64 * group / k;
            Rectangle::new([(x0, 0.0), (x0 + group / k * 0.92, v)], color.filled())
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(one.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    if categories.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new("none", (-0.05, y_max / 2.0), (FONT, 18))))
            .map_err(err)?;
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// One ρ × θ heatmap panel per platform, each coloured by its share of that platform's boxes.
fn polar_panels(area: &Area, title: &str, platforms: &[(&str, &PlatformStats)]) -> DrawResult {
    let area = area.titled(title, (FONT, 20)).map_err(err)?;
    let panels = area.split_evenly((1, platforms.len().max(1)));
    for ((name, p), panel) in platforms.iter().zip(&panels) {
        let counts = &p.target_polar.counts;
        let max = counts.iter().flatten().copied().max().unwrap_or(0);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{name}: {} boxes, brightest cell {max}", p.boxes), (FONT, 16))
            .margin(8)
            .x_label_area_size(38)
            .y_label_area_size(48)
            .build_cartesian_2d(-90.0..90.0, 0.0..(RHO_BINS as f64 * 10.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(7)
            .y_labels(10)
            .x_label_formatter(&|v| format!("{v:.0}°"))
            .y_label_formatter(&|v| {
                if *v >= 80.0 + 1e-9 {
                    String::new()
                } else {
                    format!("{v:.0}")
                }
            })
            .x_desc("θ relative pitch")
            .y_desc("ρ BEV range (m); top row 80+")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(err)?;
        let cells = (0..RHO_BINS).flat_map(|r| (0..THETA_BINS).map(move |t| (r, t)));
        chart
            .draw_series(cells.map(|(r, t)| {
                let c = counts.get(r).and_then(|row| row.get(t)).copied().unwrap_or(0);
                let color = if c == 0 || max == 0 {
                    RGBColor(240, 240, 240)
                } else {
                    ViridisRGB::get_color(c as f64 / max as f64)
                };
                let (x0, y0) = (-90.0 + 10.0 * t as f64, 10.0 * r as f64);
                Rectangle::new([(x0, y0), (x0 + 10.0, y0 + 10.0)], color.filled())
            }))
            .map_err(err)?;
    }
    Ok(())
}

/// The elevation histogram as one line per platform (share of its points per 5° bin).
fn elevation_lines(area: &Area, title: &str, platforms: &[(&str, &PlatformStats)], stats: &DatasetStats) -> DrawResult {
    let series: Vec<Series> = platforms
        .iter()
        .map(|(name, p)| {
            let h = &p.point_elevation.histogram;
            Series {
                name: format!(
                    "{name} ({} points, {} frames)",
                    p.point_elevation.points_used, p.point_elevation.frames_used
                ),
                color: platform_color(name, stats),
                values: h.counts.iter().map(|&c| percent(c, h.total())).collect(),
            }
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0_f64, f64::max);
    let y_max = if top > 0.0 { top * 1.15 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-90.0..90.0, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(13)
        .x_label_formatter(&|v| format!("{v:.0}°"))
        .y_label_formatter(&|v| axis_number(*v))
        .x_desc("elevation angle (5° bins)")
        .y_desc("% of points")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    for one in &series {
        let color = one.color;
        let points: Vec<(f64, f64)> = one
            .values
            .iter()
            .enumerate()
            .map(|(i, &v)| (-87.5 + 5.0 * i as f64, v))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(one.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// Boxes by class (left) and tracks by class (right), platforms as grouped bars.
fn class_panels(area: &Area, title: &str, platforms: &[(&str, &PlatformStats)], stats: &DatasetStats) -> DrawResult {
    let area = area.titled(title, (FONT, 22)).map_err(err)?;
    let panels = area.split_evenly((1, 2));
    let parts: [(&str, &str, ClassCounts); 2] = [
        ("boxes", "boxes", |p| &p.boxes_by_class),
        ("tracks", "tracks", |p| &p.tracks_by_class),
    ];
    for ((caption, unit, get), panel) in parts.into_iter().zip(&panels) {
        let classes: Vec<String> = get(&stats.all).keys().cloned().collect();
        let series: Vec<Series> = platforms
            .iter()
            .map(|(name, p)| Series {
                name: name.to_string(),
                color: platform_color(name, stats),
                values: classes
                    .iter()
                    .map(|c| get(p).get(c).copied().unwrap_or(0) as f64)
                    .collect(),
            })
            .collect();
        grouped_bars(panel, caption, "class", unit, &classes, &series)?;
    }
    Ok(())
}
