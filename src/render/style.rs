//! Colours of the pictures: one per class, one per track, and the marks for flags and truth.

use image::Rgb;

/// Background of bird's-eye views.
pub const BACKGROUND: Rgb<u8> = Rgb([18, 18, 24]);
/// Outline of ground-truth boxes (dashed).
pub const TRUTH_COLOR: Rgb<u8> = Rgb([255, 255, 255]);
/// Marker of a flagged box.
pub const FLAG_COLOR: Rgb<u8> = Rgb([235, 40, 40]);
/// Text on a class-coloured label.
pub const LABEL_TEXT: Rgb<u8> = Rgb([0, 0, 0]);

/// The outline colour of a canonical class (`vehicle` orange, `pedestrian` green, `cyclist` blue,
/// anything else grey).
pub fn class_color(class: &str) -> Rgb<u8> {
    match class {
        "vehicle" => Rgb([255, 159, 28]),
        "pedestrian" => Rgb([46, 204, 113]),
        "cyclist" => Rgb([64, 156, 255]),
        _ => Rgb([190, 190, 190]),
    }
}

/// A colour of its own for a track id: hues spaced by the golden angle, full saturation.
pub fn track_color(track_id: i64) -> Rgb<u8> {
    let hue = (track_id as f64 * 137.507_764).rem_euclid(360.0);
    hsv(hue, 0.75, 1.0)
}

/// An RGB colour from hue (degrees), saturation and value (0…1).
fn hsv(hue: f64, s: f64, v: f64) -> Rgb<u8> {
    let c = v * s;
    let h = hue / 60.0;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    let byte = |f: f64| ((f + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    Rgb([byte(r), byte(g), byte(b)])
}

/// A colour on the viridis scale for `t` in 0…1 (clamped): points by height or intensity.
pub fn viridis(t: f64) -> Rgb<u8> {
    use plotters::style::colors::colormaps::{ColorMap, ViridisRGB};
    let c = ViridisRGB.get_color(t.clamp(0.0, 1.0));
    Rgb([c.0, c.1, c.2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_distinct_colours() {
        let all = ["vehicle", "pedestrian", "cyclist", "unknown"].map(class_color);
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
            assert_ne!(*a, FLAG_COLOR);
            assert_ne!(*a, TRUTH_COLOR);
        }
    }

    #[test]
    fn track_colours_differ_for_neighbouring_ids() {
        for id in 1..50 {
            assert_ne!(track_color(id), track_color(id + 1), "track {id}");
        }
        // Hue 0 is pure red at full value.
        assert_eq!(hsv(0.0, 1.0, 1.0), Rgb([255, 0, 0]));
        assert_eq!(hsv(120.0, 1.0, 1.0), Rgb([0, 255, 0]));
    }

    #[test]
    fn viridis_ends() {
        // Viridis runs from dark purple to yellow.
        let (lo, hi) = (viridis(0.0), viridis(1.0));
        assert!(lo.0[2] > lo.0[1] && lo.0[0] < 100, "{lo:?}");
        assert!(hi.0[0] > 200 && hi.0[1] > 200 && hi.0[2] < 100, "{hi:?}");
    }
}
