//! The Ouster XYZ lookup table: per (beam row, measurement column) a unit direction and an offset
//! in the sensor frame, so that a pixel with range `r` lies at `offset + r · direction` (metres).
//! Built from the beam angles, the beam-origin offset and the lidar → sensor transform exactly as
//! the Ouster SDK's `make_xyz_lut` does; also inverted, so a simulator can turn sensor-frame points
//! into (row, column, range) pixels that read back through the same table.

use std::f64::consts::PI;

use nalgebra::{Matrix3, Matrix4, Point3, Vector3};

use super::metadata::OusterMetadata;

/// Millimetres to metres.
const M_PER_MM: f64 = 0.001;

/// Precomputed sensor-frame ray for every pixel of a sweep.
#[derive(Debug, Clone)]
pub struct XyzLut {
    rows: usize,
    columns: usize,
    /// Per pixel, column-major (`[column * rows + row]`, the order packets deliver pixels): the
    /// unit direction then the offset (m), six f32 values.
    ray_f32: Vec<[f32; 6]>,
    /// Unit directions in f64, row-major (`[row * columns + column]`), for rays and the inverse,
    /// where millimetre rounding must not be hidden by f32 error.
    direction_f64: Vec<Vector3<f64>>,
    offset_f64: Vec<Vector3<f64>>,
    altitude_rad: Vec<f64>,
    azimuth_rad: Vec<f64>,
    /// Inverse rotation of the lidar → sensor transform.
    lidar_from_sensor_rotation: Matrix3<f64>,
    /// Translation of the lidar → sensor transform (mm).
    sensor_from_lidar_mm: Vector3<f64>,
}

/// A sensor-frame point expressed as the pixel that would return it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelHit {
    /// Beam row (0 = first beam in the metadata, the top one on an OS1).
    pub row: usize,
    /// Measurement id (column) of the sweep.
    pub column: usize,
    /// Range along that pixel's ray (mm), as the packet stores it.
    pub range_mm: u32,
    /// Distance from the input point to where that pixel's range puts it (m).
    pub residual_m: f64,
}

impl XyzLut {
    /// Builds the table for every beam and every column of the sweep.
    pub fn new(meta: &OusterMetadata) -> Self {
        let rows = meta.data_format.pixels_per_column;
        let columns = meta.data_format.columns_per_frame;
        let n = meta.lidar_origin_to_beam_origin_mm;
        let sensor_from_lidar = Matrix4::from_row_slice(&meta.lidar_to_sensor_transform);
        let rotation = sensor_from_lidar.fixed_view::<3, 3>(0, 0).into_owned();
        let translation_mm = Vector3::new(
            sensor_from_lidar[(0, 3)],
            sensor_from_lidar[(1, 3)],
            sensor_from_lidar[(2, 3)],
        );
        let altitude_rad: Vec<f64> = meta.beam_altitude_angles_deg.iter().map(|a| a * PI / 180.0).collect();
        let azimuth_rad: Vec<f64> = meta.beam_azimuth_angles_deg.iter().map(|a| -a * PI / 180.0).collect();

        let mut direction_f64 = Vec::with_capacity(rows * columns);
        let mut offset_f64 = Vec::with_capacity(rows * columns);
        for row in 0..rows {
            let phi = altitude_rad[row];
            let theta_az = azimuth_rad[row];
            for column in 0..columns {
                let theta_enc = 2.0 * PI - column as f64 * 2.0 * PI / columns as f64;
                let dir_lidar = Vector3::new(
                    (theta_enc + theta_az).cos() * phi.cos(),
                    (theta_enc + theta_az).sin() * phi.cos(),
                    phi.sin(),
                );
                // (r − n)·dir + n·(cos θ_enc, sin θ_enc, 0) = r·dir + n·((cos, sin, 0) − dir).
                let beam_origin = Vector3::new(n * theta_enc.cos(), n * theta_enc.sin(), meta.beam_origin_z_mm);
                let offset_lidar_mm = beam_origin - n * dir_lidar;
                direction_f64.push(rotation * dir_lidar);
                offset_f64.push((rotation * offset_lidar_mm + translation_mm) * M_PER_MM);
            }
        }
        let mut ray_f32 = Vec::with_capacity(rows * columns);
        for column in 0..columns {
            for row in 0..rows {
                let (d, o) = (
                    direction_f64[row * columns + column],
                    offset_f64[row * columns + column],
                );
                ray_f32.push([d.x, d.y, d.z, o.x, o.y, o.z].map(|v| v as f32));
            }
        }
        XyzLut {
            rows,
            columns,
            ray_f32,
            direction_f64,
            offset_f64,
            altitude_rad,
            azimuth_rad,
            lidar_from_sensor_rotation: rotation.transpose(),
            sensor_from_lidar_mm: translation_mm,
        }
    }

    /// Beam rows in the table.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns in the table.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// The sensor-frame point (m) of pixel (`row`, `column`) at `range_mm`; no check that the
    /// pixel exists, callers index within `rows() × columns()`.
    #[inline]
    pub fn point(&self, row: usize, column: usize, range_mm: u32) -> [f32; 3] {
        let ray = &self.ray_f32[column * self.rows + row];
        let r = range_mm as f32 * M_PER_MM as f32;
        [ray[3] + r * ray[0], ray[4] + r * ray[1], ray[5] + r * ray[2]]
    }

    /// The ray of pixel (`row`, `column`) in the sensor frame: origin (m) and unit direction; a
    /// return at range r mm lies at `origin + r/1000 · direction`. `None` outside the table.
    pub fn ray(&self, row: usize, column: usize) -> Option<(Point3<f64>, Vector3<f64>)> {
        if row >= self.rows || column >= self.columns {
            return None;
        }
        let k = row * self.columns + column;
        Some((Point3::from(self.offset_f64[k]), self.direction_f64[k]))
    }

    /// The pixel whose ray passes closest to `point_in_sensor` (m), with the range (mm, rounded,
    /// clamped to the 20-bit field) that puts the return nearest to it. `None` for points at the
    /// sensor origin, behind every ray, or beyond the 20-bit range field.
    pub fn pixel_for_point(&self, point_in_sensor: &Point3<f64>) -> Option<PixelHit> {
        // Undo lidar → sensor to get a first guess of elevation and azimuth in the lidar frame.
        // The table's own rays decide the final pixel, so the guess only has to be near.
        let (elevation, azimuth) = self.lidar_frame_angles(point_in_sensor)?;
        // Nearest beams by elevation; check a few neighbours since beam azimuth offsets move
        // the best column per row.
        let mut rows_by_gap: Vec<(f64, usize)> = self
            .altitude_rad
            .iter()
            .enumerate()
            .map(|(i, a)| ((a - elevation).abs(), i))
            .collect();
        rows_by_gap.sort_by(|a, b| a.0.total_cmp(&b.0));
        let w = self.columns as f64;
        let mut best: Option<PixelHit> = None;
        for &(_, row) in rows_by_gap.iter().take(3) {
            // θ_enc + θ_az = azimuth → θ_enc = azimuth − θ_az; column = (2π − θ_enc)·W/2π.
            let theta_enc = azimuth - self.azimuth_rad[row];
            let c_float = ((2.0 * PI - theta_enc) * w / (2.0 * PI)).rem_euclid(w);
            let centre = c_float.round() as i64;
            for dc in -2..=2 {
                let column = (centre + dc).rem_euclid(self.columns as i64) as usize;
                let k = row * self.columns + column;
                let rel = point_in_sensor.coords - self.offset_f64[k];
                let along = rel.dot(&self.direction_f64[k]);
                if along <= 0.0 {
                    continue;
                }
                let range_mm = (along / M_PER_MM).round();
                if range_mm < 1.0 || range_mm > f64::from(0x000F_FFFFu32) {
                    continue;
                }
                let placed = self.offset_f64[k] + self.direction_f64[k] * (range_mm * M_PER_MM);
                let residual_m = (placed - point_in_sensor.coords).norm();
                if best.is_none_or(|b| residual_m < b.residual_m) {
                    best = Some(PixelHit {
                        row,
                        column,
                        range_mm: range_mm as u32,
                        residual_m,
                    });
                }
            }
        }
        best
    }

    /// The measurement id (fractional, in `[0, columns)`) at which the sweep looks along the
    /// sensor-frame `direction`, for the beams' mean azimuth offset: the column time of a camera's
    /// optical axis. `None` for a direction along the spin axis.
    pub fn column_facing(&self, direction: &Vector3<f64>) -> Option<f64> {
        let d = self.lidar_from_sensor_rotation * direction;
        if d.x == 0.0 && d.y == 0.0 {
            return None;
        }
        let mean_offset = self.azimuth_rad.iter().sum::<f64>() / self.azimuth_rad.len().max(1) as f64;
        let theta_enc = d.y.atan2(d.x) - mean_offset;
        let w = self.columns as f64;
        Some(((2.0 * PI - theta_enc) * w / (2.0 * PI)).rem_euclid(w))
    }

    /// Elevation and azimuth (rad) of a sensor-frame point seen from the lidar origin.
    fn lidar_frame_angles(&self, point_in_sensor: &Point3<f64>) -> Option<(f64, f64)> {
        let p_mm = self.lidar_from_sensor_rotation * (point_in_sensor.coords / M_PER_MM - self.sensor_from_lidar_mm);
        let horizontal = (p_mm.x * p_mm.x + p_mm.y * p_mm.y).sqrt();
        if horizontal == 0.0 && p_mm.z == 0.0 {
            return None;
        }
        Some((p_mm.z.atan2(horizontal), p_mm.y.atan2(p_mm.x)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rays_are_unit_and_points_lie_on_them() {
        let meta = OusterMetadata::os1_64_2048x10();
        let lut = XyzLut::new(&meta);
        let (origin, dir) = lut.ray(10, 700).unwrap();
        assert!((dir.norm() - 1.0).abs() < 1e-12);
        let p = lut.point(10, 700, 12_345);
        let expect = origin + dir * 12.345;
        for k in 0..3 {
            assert!((p[k] as f64 - expect[k]).abs() < 1e-5, "{p:?} vs {expect:?}");
        }
        assert!(lut.ray(64, 0).is_none() && lut.ray(0, 2048).is_none());
    }

    #[test]
    fn pixel_for_point_inverts_the_table() {
        let meta = OusterMetadata::os1_64_2048x10();
        let lut = XyzLut::new(&meta);
        for &(row, column, range) in &[
            (0usize, 0usize, 5_000u32),
            (31, 1024, 20_000),
            (63, 2047, 750),
            (17, 333, 90_000),
        ] {
            let p = lut.point(row, column, range);
            let p = Point3::new(p[0] as f64, p[1] as f64, p[2] as f64);
            let hit = lut.pixel_for_point(&p).unwrap();
            assert_eq!((hit.row, hit.column), (row, column), "for {p:?}");
            assert!(hit.range_mm.abs_diff(range) <= 1, "{} vs {range}", hit.range_mm);
            assert!(hit.residual_m < 2e-3);
        }
        assert!(lut.pixel_for_point(&Point3::new(1e7, 0.0, 0.0)).is_none());
    }

    #[test]
    fn column_facing_finds_the_measurement_that_looks_along_a_direction() {
        let meta = OusterMetadata::os1_64_2048x10();
        let lut = XyzLut::new(&meta);
        let mean_deg = meta.beam_azimuth_angles_deg.iter().sum::<f64>() / 64.0;
        let per_column_deg = 360.0 / 2048.0;
        // The lidar frame is the sensor frame turned 180° about z: measurement 0 looks back
        // (sensor −x), 512 left (+y), 1024 forward (+x), 1536 right, less the mean beam offset.
        for (direction, column) in [
            (Vector3::new(1.0, 0.0, 0.0), 1024.0),
            (Vector3::new(0.0, 1.0, 0.3), 512.0),
            (Vector3::new(0.0, -1.0, -0.3), 1536.0),
        ] {
            let expect = column - mean_deg / per_column_deg;
            let got = lut.column_facing(&direction).unwrap();
            assert!((got - expect).abs() < 1e-6, "{direction:?}: {got} vs {expect}");
        }
        // A beam whose offset is the mean looks along its own column's ray.
        let row = (0..64)
            .min_by(|&a, &b| {
                let gap = |r: usize| (meta.beam_azimuth_angles_deg[r] - mean_deg).abs();
                gap(a).total_cmp(&gap(b))
            })
            .unwrap();
        let (_, dir) = lut.ray(row, 700).unwrap();
        let slack = (meta.beam_azimuth_angles_deg[row] - mean_deg).abs() / per_column_deg + 1e-6;
        assert!((lut.column_facing(&dir).unwrap() - 700.0).abs() <= slack);
        assert!(lut.column_facing(&Vector3::z()).is_none());
    }
}
