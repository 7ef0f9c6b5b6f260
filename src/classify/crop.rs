//! Image regions to model inputs: the crop region around a projected box, cutting and resizing
//! it (or a whole image, letterboxed) to the input size, and filling the normalised tensor.
//!
//! Training and inference cut crops with these same functions (`examples/classifier_crops.rs`
//! writes the bundled classifier's training set through [`cut_crop`]), so a crop looks the same
//! to the model in both.

use image::imageops::{self, FilterType};
use image::{Rgb, RgbImage};

use super::manifest::{ChannelOrder, CropConfig, InputConfig, ResizeMode, TensorLayout};

/// An axis-aligned pixel rectangle `[x_min, y_min, x_max, y_max]` (origin at the first pixel's
/// top-left corner, as `crate::camera` uses).
pub type PixelRect = [f64; 4];

/// Where an image region landed in the model input: input px = region px × `scale` + `offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputPlacement {
    /// Scale from region pixels to input pixels, per axis.
    pub scale: [f64; 2],
    /// Input-pixel position of the region's `(x_min, y_min)`.
    pub offset: [f64; 2],
    /// The region, in image pixels.
    pub region: PixelRect,
}

impl InputPlacement {
    /// Maps an input-pixel rectangle back to image pixels.
    pub fn to_image(&self, r: PixelRect) -> PixelRect {
        let x = |v: f64| (v - self.offset[0]) / self.scale[0] + self.region[0];
        let y = |v: f64| (v - self.offset[1]) / self.scale[1] + self.region[1];
        [x(r[0]), y(r[1]), x(r[2]), y(r[3])]
    }
}

/// The region a crop classifier sees for a projected box: grown by `context` of its size on each
/// side and, when `square`, its shorter side grown to the longer about the centre. `None` when the
/// box is smaller than `min_side_px` on either side or not finite.
pub fn crop_region(box_px: PixelRect, crop: &CropConfig) -> Option<PixelRect> {
    let [x0, y0, x1, y1] = box_px;
    let (w, h) = (x1 - x0, y1 - y0);
    if !(w.is_finite() && h.is_finite()) || w < crop.min_side_px || h < crop.min_side_px || w <= 0.0 || h <= 0.0 {
        return None;
    }
    let (cx, cy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
    let (mut hw, mut hh) = (w * (0.5 + crop.context), h * (0.5 + crop.context));
    if crop.square {
        let m = hw.max(hh);
        (hw, hh) = (m, m);
    }
    Some([cx - hw, cy - hh, cx + hw, cy + hh])
}

/// Cuts `region` out of `image` and brings it to the input size (`input.resize`); pixels outside
/// the image are `input.pad_value`. Downscaling averages (triangle filter), so a large crop does
/// not alias. `None` when the region is empty or misses the image.
pub fn cut_region(image: &RgbImage, region: PixelRect, input: &InputConfig) -> Option<(RgbImage, InputPlacement)> {
    let [x0, y0, x1, y1] = region;
    let (rw, rh) = (x1 - x0, y1 - y0);
    if !(rw.is_finite() && rh.is_finite()) || rw <= 0.0 || rh <= 0.0 {
        return None;
    }
    let (iw, ih) = (f64::from(input.width), f64::from(input.height));
    let (scale, offset) = match input.resize {
        ResizeMode::Stretch => ([iw / rw, ih / rh], [0.0, 0.0]),
        ResizeMode::Letterbox => {
            let s = (iw / rw).min(ih / rh);
            ([s, s], [(iw - rw * s) / 2.0, (ih - rh * s) / 2.0])
        }
    };
    let pad = input.pad_value;
    let mut out = RgbImage::from_pixel(input.width, input.height, Rgb([pad, pad, pad]));
    // The part of the region inside the image, in whole image pixels.
    let (w, h) = (f64::from(image.width()), f64::from(image.height()));
    let (ax0, ay0) = (x0.max(0.0).floor(), y0.max(0.0).floor());
    let (ax1, ay1) = (x1.min(w).ceil(), y1.min(h).ceil());
    if ax1 <= ax0 || ay1 <= ay0 {
        return None;
    }
    // Where that part lands in the input.
    let dx0 = ((ax0 - x0) * scale[0] + offset[0]).round().max(0.0);
    let dy0 = ((ay0 - y0) * scale[1] + offset[1]).round().max(0.0);
    let dx1 = ((ax1 - x0) * scale[0] + offset[0]).round().min(iw);
    let dy1 = ((ay1 - y0) * scale[1] + offset[1]).round().min(ih);
    let placement = InputPlacement { scale, offset, region };
    if dx1 <= dx0 || dy1 <= dy0 {
        return Some((out, placement));
    }
    let part = imageops::crop_imm(image, ax0 as u32, ay0 as u32, (ax1 - ax0) as u32, (ay1 - ay0) as u32).to_image();
    let resized = imageops::resize(&part, (dx1 - dx0) as u32, (dy1 - dy0) as u32, FilterType::Triangle);
    imageops::replace(&mut out, &resized, dx0 as i64, dy0 as i64);
    Some((out, placement))
}

/// The crop a crop classifier sees for a projected box ([`crop_region`] then [`cut_region`]).
pub fn cut_crop(image: &RgbImage, box_px: PixelRect, crop: &CropConfig, input: &InputConfig) -> Option<RgbImage> {
    let region = crop_region(box_px, crop)?;
    cut_region(image, region, input).map(|(img, _)| img)
}

/// The whole image letterboxed (or stretched) to the input size, for a 2D detector.
pub fn fit_image(image: &RgbImage, input: &InputConfig) -> Option<(RgbImage, InputPlacement)> {
    let region = [0.0, 0.0, f64::from(image.width()), f64::from(image.height())];
    cut_region(image, region, input)
}

/// Appends `image` (already the input size) to `tensor` as one batch item: channels in
/// `channel_order`, `(v · scale − mean) / std`, in `layout`.
pub fn push_tensor(image: &RgbImage, input: &InputConfig, tensor: &mut Vec<f32>) {
    let order: [usize; 3] = match input.channel_order {
        ChannelOrder::Rgb => [0, 1, 2],
        ChannelOrder::Bgr => [2, 1, 0],
    };
    let norm = |c: usize, v: u8| (f32::from(v) * input.scale - input.mean[c]) / input.std[c];
    match input.layout {
        TensorLayout::Nchw => {
            for (c, &src) in order.iter().enumerate() {
                tensor.extend(image.pixels().map(|p| norm(c, p.0[src])));
            }
        }
        TensorLayout::Nhwc => {
            for p in image.pixels() {
                for (c, &src) in order.iter().enumerate() {
                    tensor.push(norm(c, p.0[src]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(w: u32, h: u32, resize: ResizeMode) -> InputConfig {
        InputConfig {
            width: w,
            height: h,
            resize,
            ..InputConfig::default()
        }
    }

    #[test]
    fn region_adds_context_and_squares_about_the_centre() {
        let crop = CropConfig {
            context: 0.25,
            square: true,
            min_side_px: 4.0,
        };
        // 20 × 40 box centred at (20, 40): half sizes 15 × 30 with context, squared to 30.
        assert_eq!(
            crop_region([10.0, 20.0, 30.0, 60.0], &crop),
            Some([-10.0, 10.0, 50.0, 70.0])
        );
        let crop = CropConfig { square: false, ..crop };
        assert_eq!(
            crop_region([10.0, 20.0, 30.0, 60.0], &crop),
            Some([5.0, 10.0, 35.0, 70.0])
        );
        assert_eq!(
            crop_region([10.0, 20.0, 13.0, 60.0], &crop),
            None,
            "narrower than min_side_px"
        );
        assert_eq!(crop_region([10.0, 20.0, f64::NAN, 60.0], &crop), None);
    }

    #[test]
    fn outside_pixels_are_padded_and_the_inside_lands_in_place() {
        // A 10 × 10 red image; a 20 × 20 region starting at (−10, 0) at 1:1 scale puts the image
        // in the right half and padding in the left half.
        let image = RgbImage::from_pixel(10, 10, Rgb([200, 0, 0]));
        let (out, placement) =
            cut_region(&image, [-10.0, 0.0, 10.0, 20.0], &input(20, 20, ResizeMode::Stretch)).unwrap();
        assert_eq!(out.get_pixel(5, 5), &Rgb([114, 114, 114]));
        assert_eq!(out.get_pixel(15, 5), &Rgb([200, 0, 0]));
        assert_eq!(out.get_pixel(15, 15), &Rgb([114, 114, 114]), "below the image");
        assert_eq!(placement.to_image([10.0, 0.0, 20.0, 10.0]), [0.0, 0.0, 10.0, 10.0]);
        assert!(cut_region(&image, [20.0, 20.0, 30.0, 30.0], &input(8, 8, ResizeMode::Stretch)).is_none());
    }

    #[test]
    fn letterbox_centres_and_maps_back() {
        // 200 × 100 image into 64 × 64: scale 0.32, 16 px bars above and below.
        let image = RgbImage::from_pixel(200, 100, Rgb([10, 20, 30]));
        let (out, p) = fit_image(&image, &input(64, 64, ResizeMode::Letterbox)).unwrap();
        assert_eq!(p.scale, [0.32, 0.32]);
        assert_eq!(p.offset, [0.0, 16.0]);
        assert_eq!(out.get_pixel(32, 8), &Rgb([114, 114, 114]));
        assert_eq!(out.get_pixel(32, 32), &Rgb([10, 20, 30]));
        assert_eq!(out.get_pixel(32, 56), &Rgb([114, 114, 114]));
        let back = p.to_image([16.0, 16.0, 48.0, 48.0]);
        for (got, want) in back.iter().zip([50.0, 0.0, 150.0, 100.0]) {
            approx::assert_abs_diff_eq!(*got, want, epsilon = 1e-9);
        }
    }

    #[test]
    fn tensor_follows_layout_order_and_normalisation() {
        let image = RgbImage::from_fn(2, 1, |x, _| Rgb([10 * (x as u8 + 1), 100, 250]));
        let mut cfg = input(2, 1, ResizeMode::Stretch);
        cfg.scale = 1.0;
        cfg.mean = [0.0, 50.0, 0.0];
        cfg.std = [1.0, 2.0, 10.0];
        let mut t = Vec::new();
        push_tensor(&image, &cfg, &mut t);
        assert_eq!(t, vec![10.0, 20.0, 25.0, 25.0, 25.0, 25.0]);
        cfg.layout = TensorLayout::Nhwc;
        cfg.channel_order = ChannelOrder::Bgr;
        // B, G, R per pixel, normalised with the tensor-order mean/std.
        let mut t = Vec::new();
        push_tensor(&image, &cfg, &mut t);
        assert_eq!(t, vec![250.0, 25.0, 1.0, 250.0, 25.0, 2.0]);
    }
}
