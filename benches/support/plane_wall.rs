//! A synthetic M3ED sweep for reader benchmarks: a ground plane and a wall ahead, so every
//! downward or forward ray returns (smooth ranges, friendlier to LZF than a real scene).

use boxlayer::sources::m3ed::{SweepPixels, XyzLut};

/// Pixels of a sweep seeing ground at height `ground_z_m` and a wall at `x = wall_x_m`, both in
/// the sensor frame, out to 100 m.
pub fn plane_wall_pixels(lut: &XyzLut, ground_z_m: f64, wall_x_m: f64) -> SweepPixels {
    let mut pixels = SweepPixels::empty(lut.rows(), lut.columns());
    for row in 0..lut.rows() {
        for column in 0..lut.columns() {
            let Some((origin, dir)) = lut.ray(row, column) else {
                continue;
            };
            let mut t = f64::INFINITY;
            if dir.z < -1e-6 {
                t = t.min((ground_z_m - origin.z) / dir.z);
            }
            if dir.x > 1e-6 {
                t = t.min((wall_x_m - origin.x) / dir.x);
            }
            if t.is_finite() && t < 100.0 {
                let k = row * lut.columns() + column;
                pixels.range_mm[k] = (t * 1000.0).round() as u32;
                pixels.reflectivity[k] = ((row * 13 + column) % 200) as u16;
                pixels.signal[k] = (column % 700) as u16;
                pixels.near_ir[k] = row as u16 * 9;
            }
        }
    }
    pixels
}
