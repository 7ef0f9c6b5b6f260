//! Drawing on an RGB image with `plotters`: lines, dashed lines, dots and labelled text, clipped
//! to the image; pixel coordinates are `(column, row)`, fractional where they come from geometry.

use image::{Rgb, RgbImage};
use plotters::backend::BitMapBackend;
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, IntoDrawingArea};
use plotters::element::{Circle, DashedPathElement, PathElement, Rectangle, Text};
use plotters::style::{Color, IntoFont, RGBColor, TextStyle};

use super::RenderError;

/// The font family of every label (fontconfig's default sans-serif; DejaVu Sans on Debian).
const FONT: &str = "sans-serif";

/// An image being drawn on.
pub struct Canvas {
    /// The pixels.
    pub image: RgbImage,
}

fn rgb(c: Rgb<u8>) -> RGBColor {
    RGBColor(c.0[0], c.0[1], c.0[2])
}

/// A coordinate that plotters can take: far-off points are pulled in so the i32 never overflows,
/// which keeps a line's direction for anything within a few image sizes.
fn px(p: (f64, f64)) -> (i32, i32) {
    const LIMIT: f64 = 1.0e6;
    (
        p.0.round().clamp(-LIMIT, LIMIT) as i32,
        p.1.round().clamp(-LIMIT, LIMIT) as i32,
    )
}

fn draw_error(e: impl std::fmt::Display) -> RenderError {
    RenderError::Draw(format!(
        "{e} (text needs a sans-serif TrueType font through fontconfig; on Debian: apt-get install fonts-dejavu-core)"
    ))
}

impl Canvas {
    /// A canvas over `image`.
    pub fn new(image: RgbImage) -> Self {
        Self { image }
    }

    /// A `width` × `height` canvas filled with `color`.
    pub fn filled(width: u32, height: u32, color: Rgb<u8>) -> Self {
        Self::new(RgbImage::from_pixel(width, height, color))
    }

    fn with_area<T>(
        &mut self,
        f: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<T, RenderError>,
    ) -> Result<T, RenderError> {
        let (w, h) = self.image.dimensions();
        let root = BitMapBackend::with_buffer(&mut self.image, (w, h)).into_drawing_area();
        let out = f(&root)?;
        root.present().map_err(draw_error)?;
        Ok(out)
    }

    /// Sets one pixel; outside the image nothing happens.
    pub fn pixel(&mut self, column: i64, row: i64, color: Rgb<u8>) {
        let (w, h) = self.image.dimensions();
        if column >= 0 && row >= 0 && column < i64::from(w) && row < i64::from(h) {
            self.image.put_pixel(column as u32, row as u32, color);
        }
    }

    /// An open polyline `width` pixels wide.
    pub fn polyline(&mut self, points: &[(f64, f64)], color: Rgb<u8>, width: u32) -> Result<(), RenderError> {
        if points.len() < 2 {
            return Ok(());
        }
        let path: Vec<(i32, i32)> = points.iter().copied().map(px).collect();
        let style = rgb(color).stroke_width(width);
        self.with_area(|a| a.draw(&PathElement::new(path, style)).map_err(draw_error))
    }

    /// A closed polygon outline `width` pixels wide.
    pub fn outline(&mut self, corners: &[(f64, f64)], color: Rgb<u8>, width: u32) -> Result<(), RenderError> {
        let mut ring = corners.to_vec();
        if let Some(first) = corners.first() {
            ring.push(*first);
        }
        self.polyline(&ring, color, width)
    }

    /// A closed polygon outline in dashes of `dash` pixels with gaps of `gap`.
    pub fn dashed_outline(
        &mut self,
        corners: &[(f64, f64)],
        color: Rgb<u8>,
        dash: u32,
        gap: u32,
    ) -> Result<(), RenderError> {
        let mut ring: Vec<(i32, i32)> = corners.iter().copied().map(px).collect();
        if let Some(first) = ring.first().copied() {
            ring.push(first);
        }
        let style = rgb(color).stroke_width(1);
        self.with_area(|a| {
            a.draw(&DashedPathElement::new(ring, dash, gap, style))
                .map_err(draw_error)
        })
    }

    /// A filled disc of `radius` pixels.
    pub fn dot(&mut self, center: (f64, f64), radius: u32, color: Rgb<u8>) -> Result<(), RenderError> {
        let style = rgb(color).filled();
        self.with_area(|a| a.draw(&Circle::new(px(center), radius, style)).map_err(draw_error))
    }

    /// A filled rectangle between two corners.
    pub fn rect(&mut self, a: (f64, f64), b: (f64, f64), color: Rgb<u8>) -> Result<(), RenderError> {
        let style = rgb(color).filled();
        self.with_area(|area| area.draw(&Rectangle::new([px(a), px(b)], style)).map_err(draw_error))
    }

    /// Text of `size` pixels with its top-left corner at `at`.
    pub fn text(&mut self, text: &str, at: (f64, f64), size: u32, color: Rgb<u8>) -> Result<(), RenderError> {
        let style: TextStyle = (FONT, size).into_font().color(&rgb(color));
        self.with_area(|a| a.draw(&Text::new(text.to_string(), px(at), style)).map_err(draw_error))
    }

    /// The size `(width, height)` in pixels that [`Canvas::text`] gives `text`.
    pub fn text_size(&mut self, text: &str, size: u32) -> Result<(u32, u32), RenderError> {
        let style: TextStyle = (FONT, size).into_font().into();
        self.with_area(|a| a.estimate_text_size(text, &style).map_err(draw_error))
    }

    /// A label: `text` on a filled background, placed with its bottom-left corner at `anchor`
    /// and moved inside the image where it would cross an edge. Returns its rectangle.
    pub fn label(
        &mut self,
        text: &str,
        anchor: (f64, f64),
        size: u32,
        background: Rgb<u8>,
        color: Rgb<u8>,
    ) -> Result<[f64; 4], RenderError> {
        let (tw, th) = self.text_size(text, size)?;
        let (w, h) = (f64::from(tw) + 4.0, f64::from(th) + 2.0);
        let (iw, ih) = (f64::from(self.image.width()), f64::from(self.image.height()));
        let x = anchor.0.clamp(0.0, (iw - w).max(0.0));
        let y = (anchor.1 - h).clamp(0.0, (ih - h).max(0.0));
        self.rect((x, y), (x + w - 1.0, y + h - 1.0), background)?;
        self.text(text, (x + 2.0, y + 1.0), size, color)?;
        Ok([x, y, x + w, y + h])
    }
}

/// PNG bytes of an image.
pub fn png_bytes(image: &RgbImage) -> Result<Vec<u8>, RenderError> {
    let mut out = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| RenderError::Png(e.to_string()))?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: Rgb<u8> = Rgb([255, 0, 0]);
    const BLACK: Rgb<u8> = Rgb([0, 0, 0]);

    #[test]
    fn a_line_covers_every_column_between_its_ends_and_nothing_far_from_it() {
        // Thin lines are anti-aliased: a pixel is red blended onto black by its coverage.
        let mut c = Canvas::filled(50, 40, BLACK);
        c.polyline(&[(5.0, 5.0), (40.0, 30.0)], RED, 1).unwrap();
        let red_at = |x: u32, y: u32| {
            let p = c.image.get_pixel(x, y).0;
            p[0] > 60 && p[1] == 0 && p[2] == 0
        };
        assert!(red_at(5, 5));
        for x in 5..40 {
            // The line's row at this column, ± 1.
            let y = 5.0 + 25.0 * f64::from(x - 5) / 35.0;
            assert!(
                (y.floor() as u32 - 1..=y.ceil() as u32 + 1).any(|y| red_at(x, y)),
                "column {x}"
            );
        }
        assert_eq!(*c.image.get_pixel(40, 5), BLACK);
        assert_eq!(*c.image.get_pixel(5, 30), BLACK);
        // A wide line is filled solid in its colour.
        let mut c = Canvas::filled(50, 40, BLACK);
        c.polyline(&[(5.0, 5.0), (40.0, 30.0)], RED, 2).unwrap();
        assert_eq!(*c.image.get_pixel(22, 17), RED);
    }

    #[test]
    fn lines_reaching_far_outside_are_clipped_not_wrapped() {
        let mut c = Canvas::filled(20, 20, BLACK);
        c.polyline(&[(-1.0e9, 10.0), (1.0e9, 10.0)], RED, 1).unwrap();
        for x in 0..20 {
            assert_eq!(*c.image.get_pixel(x, 10), RED, "column {x}");
            assert_eq!(*c.image.get_pixel(x, 5), BLACK);
        }
    }

    #[test]
    fn labels_stay_inside_the_image() {
        let mut c = Canvas::filled(120, 60, BLACK);
        let r = c.label("vehicle #12", (110.0, 5.0), 12, RED, BLACK).unwrap();
        assert!(r[0] >= 0.0 && r[1] >= 0.0 && r[2] <= 120.0 && r[3] <= 60.0, "{r:?}");
        // The text itself is drawn: some pixel inside the label is the text colour.
        let (x0, y0, x1, y1) = (r[0] as u32, r[1] as u32, r[2] as u32, r[3] as u32);
        let text_pixels = (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|&(x, y)| c.image.get_pixel(x, y).0[0] < 128)
            .count();
        assert!(text_pixels > 10, "{text_pixels} text pixels");
    }

    #[test]
    fn png_round_trips() {
        let mut c = Canvas::filled(8, 4, BLACK);
        c.pixel(3, 2, RED);
        c.pixel(-1, 99, RED);
        let back = image::load_from_memory(&png_bytes(&c.image).unwrap())
            .unwrap()
            .to_rgb8();
        assert_eq!(back, c.image);
    }
}
