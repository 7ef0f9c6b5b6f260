//! The Ouster sensor metadata JSON stored in `/ouster/metadata`, in both flavours Ouster has
//! written: the legacy flat layout (top-level `beam_altitude_angles`, `data_format`, …) and the
//! nested layout (`beam_intrinsics`, `lidar_intrinsics`, `lidar_data_format`, `config_params`).

use serde_json::Value;

use crate::geometry::pose::isometry_from_row_major;

/// Which JSON layout the metadata used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataFlavour {
    /// Top-level angle arrays plus a `data_format` object (ouster-sdk ≤ 0.9, ouster-ros 1).
    LegacyFlat,
    /// `beam_intrinsics` / `lidar_intrinsics` / `lidar_data_format` / `config_params`.
    Nested,
}

/// How a sweep is laid out in packets (`data_format` / `lidar_data_format`).
#[derive(Debug, Clone, PartialEq)]
pub struct DataFormat {
    /// Beams (rows) per column, 64 for an OS1-64.
    pub pixels_per_column: usize,
    /// Columns in one UDP packet, 16 for the LEGACY profile.
    pub columns_per_packet: usize,
    /// Columns in a full sweep, 2048 in 2048×10 mode.
    pub columns_per_frame: usize,
    /// Per-row shift (columns) that destaggers the image: pixel (row, measurement c) belongs to
    /// image column `(c + pixel_shift_by_row[row]) mod columns_per_frame`.
    pub pixel_shift_by_row: Vec<i64>,
    /// First and last measurement id the sensor sends (inclusive), `[0, 2047]` by default.
    pub column_window: (usize, usize),
    /// The lidar UDP profile; only `LEGACY` is decoded.
    pub udp_profile_lidar: String,
}

impl DataFormat {
    /// Bytes in one column block of a LEGACY packet: 16 header + 12 per pixel + 4 status.
    pub fn column_bytes(&self) -> usize {
        16 + 12 * self.pixels_per_column + 4
    }

    /// Bytes in one LEGACY lidar packet (12,608 for an OS1-64).
    pub fn packet_bytes(&self) -> usize {
        self.columns_per_packet * self.column_bytes()
    }

    /// Packets that carry one full sweep (128 for 2048 columns of 16).
    pub fn packets_per_frame(&self) -> usize {
        self.columns_per_frame.div_ceil(self.columns_per_packet)
    }

    /// Number of columns the window covers (all of them unless the sensor was windowed).
    pub fn window_columns(&self) -> usize {
        let (start, end) = self.column_window;
        if end >= start {
            end - start + 1
        } else {
            // A window that wraps past column 0.
            self.columns_per_frame - start + end + 1
        }
    }

    /// Whether measurement id `column` lies inside the column window.
    pub fn in_window(&self, column: usize) -> bool {
        let (start, end) = self.column_window;
        if end >= start {
            (start..=end).contains(&column)
        } else {
            column >= start || column <= end
        }
    }
}

/// Everything boxlayer needs from the Ouster metadata: beam angles, offsets, transforms, layout.
#[derive(Debug, Clone, PartialEq)]
pub struct OusterMetadata {
    /// The layout the JSON used.
    pub flavour: MetadataFlavour,
    /// `lidar_mode`, e.g. `2048x10`.
    pub lidar_mode: String,
    /// Elevation of each beam (degrees, up positive), one per row.
    pub beam_altitude_angles_deg: Vec<f64>,
    /// Azimuth offset of each beam (degrees), one per row.
    pub beam_azimuth_angles_deg: Vec<f64>,
    /// Distance from the lidar origin to the beam origin along the beam's horizontal direction (mm).
    pub lidar_origin_to_beam_origin_mm: f64,
    /// Height of the beam origin above the lidar origin (mm); `beam_to_lidar_transform[2,3]`, else 0.
    pub beam_origin_z_mm: f64,
    /// Row-major 4×4 lidar → sensor transform, translation in mm.
    pub lidar_to_sensor_transform: [f64; 16],
    /// Row-major 4×4 IMU → sensor transform, translation in mm.
    pub imu_to_sensor_transform: [f64; 16],
    /// Packet and image layout.
    pub data_format: DataFormat,
}

/// Why metadata JSON could not be used; the caller adds the file name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetadataError {
    /// Not JSON at all.
    #[error("metadata is not JSON: {0}")]
    Json(String),
    /// A field is missing or has the wrong type.
    #[error("metadata field `{0}` missing or not {1}")]
    Field(String, &'static str),
    /// Field values contradict each other.
    #[error("metadata: {0}")]
    Inconsistent(String),
}

fn get<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, k| v.get(*k))
}

fn field<'a>(root: &'a Value, path: &[&str]) -> Result<&'a Value, MetadataError> {
    get(root, path).ok_or_else(|| MetadataError::Field(path.join("."), "present"))
}

fn f64_array(root: &Value, path: &[&str]) -> Result<Vec<f64>, MetadataError> {
    let v = field(root, path)?;
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<_>>>())
        .ok_or_else(|| MetadataError::Field(path.join("."), "an array of numbers"))
}

fn matrix(root: &Value, path: &[&str]) -> Result<[f64; 16], MetadataError> {
    let v = f64_array(root, path)?;
    v.try_into()
        .map_err(|_| MetadataError::Field(path.join("."), "16 numbers (row-major 4×4)"))
}

fn usize_field(root: &Value, path: &[&str]) -> Result<usize, MetadataError> {
    field(root, path)?
        .as_u64()
        .map(|v| v as usize)
        .ok_or_else(|| MetadataError::Field(path.join("."), "a non-negative integer"))
}

/// The OS1 design lidar → sensor transform (180° about z, +36.18 mm), used when a file omits it.
pub const OS1_LIDAR_TO_SENSOR: [f64; 16] = [
    -1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 36.18, 0.0, 0.0, 0.0, 1.0,
];

/// How far the metadata's transforms may be from rigid (they are printed with 6+ digits).
const TRANSFORM_EPS: f64 = 1e-3;

/// The OS1 design IMU → sensor transform (translation 6.253, −11.775, 7.645 mm).
pub const OS1_IMU_TO_SENSOR: [f64; 16] = [
    1.0, 0.0, 0.0, 6.253, 0.0, 1.0, 0.0, -11.775, 0.0, 0.0, 1.0, 7.645, 0.0, 0.0, 0.0, 1.0,
];

impl OusterMetadata {
    /// Parses either JSON flavour and checks that the arrays agree with the data format.
    pub fn parse(json: &str) -> Result<Self, MetadataError> {
        let root: Value = serde_json::from_str(json).map_err(|e| MetadataError::Json(e.to_string()))?;
        let flavour = if root.get("beam_intrinsics").is_some() {
            MetadataFlavour::Nested
        } else {
            MetadataFlavour::LegacyFlat
        };
        let (angles_at, format_at, mode_at, profile_at): (&[&str], &[&str], &[&str], &[&str]) = match flavour {
            MetadataFlavour::LegacyFlat => (&[], &["data_format"], &["lidar_mode"], &["data_format"]),
            MetadataFlavour::Nested => (
                &["beam_intrinsics"],
                &["lidar_data_format"],
                &["config_params", "lidar_mode"],
                &["config_params"],
            ),
        };
        fn at<'a>(base: &[&'a str], leaf: &'a str) -> Vec<&'a str> {
            let mut p = base.to_vec();
            p.push(leaf);
            p
        }
        let altitudes = f64_array(&root, &at(angles_at, "beam_altitude_angles"))?;
        let azimuths = f64_array(&root, &at(angles_at, "beam_azimuth_angles"))?;

        // Newer SDKs give the beam offset as `beam_to_lidar_transform`; older ones as a scalar.
        let beam_to_lidar = match flavour {
            MetadataFlavour::Nested => get(&root, &["beam_intrinsics", "beam_to_lidar_transform"])
                .map(|_| matrix(&root, &["beam_intrinsics", "beam_to_lidar_transform"]))
                .transpose()?,
            MetadataFlavour::LegacyFlat => None,
        };
        let (origin_mm, origin_z_mm) = match beam_to_lidar {
            Some(m) => (m[3], m[11]),
            None => {
                let p = at(angles_at, "lidar_origin_to_beam_origin_mm");
                let n = field(&root, &p)?
                    .as_f64()
                    .ok_or_else(|| MetadataError::Field(p.join("."), "a number"))?;
                (n, 0.0)
            }
        };
        let lidar_to_sensor_path: &[&str] = match flavour {
            MetadataFlavour::LegacyFlat => &["lidar_to_sensor_transform"],
            MetadataFlavour::Nested => &["lidar_intrinsics", "lidar_to_sensor_transform"],
        };
        let imu_to_sensor_path: &[&str] = match flavour {
            MetadataFlavour::LegacyFlat => &["imu_to_sensor_transform"],
            MetadataFlavour::Nested => &["imu_intrinsics", "imu_to_sensor_transform"],
        };
        // Very old firmware omits the transforms; the SDK then uses the OS1 design values.
        let lidar_to_sensor = match get(&root, lidar_to_sensor_path) {
            Some(_) => matrix(&root, lidar_to_sensor_path)?,
            None => OS1_LIDAR_TO_SENSOR,
        };
        let imu_to_sensor = match get(&root, imu_to_sensor_path) {
            Some(_) => matrix(&root, imu_to_sensor_path)?,
            None => OS1_IMU_TO_SENSOR,
        };
        let lidar_mode = field(&root, mode_at)?
            .as_str()
            .ok_or_else(|| MetadataError::Field(mode_at.join("."), "a string"))?
            .to_string();

        let pixels_per_column = usize_field(&root, &at(format_at, "pixels_per_column"))?;
        let columns_per_packet = usize_field(&root, &at(format_at, "columns_per_packet"))?;
        let columns_per_frame = usize_field(&root, &at(format_at, "columns_per_frame"))?;
        let shift_path = at(format_at, "pixel_shift_by_row");
        let pixel_shift_by_row = field(&root, &shift_path)?
            .as_array()
            .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<_>>>())
            .ok_or_else(|| MetadataError::Field(shift_path.join("."), "an array of integers"))?;
        let column_window = match get(&root, &at(format_at, "column_window")) {
            Some(w) => {
                let w = w
                    .as_array()
                    .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| MetadataError::Field(at(format_at, "column_window").join("."), "two integers"))?;
                (w[0] as usize, w[1] as usize)
            }
            None => (0, columns_per_frame.saturating_sub(1)),
        };
        // The profile sits in `data_format` (legacy) or `config_params` (nested); firmware older
        // than 2.2 has no profiles at all, which means LEGACY.
        let udp_profile_lidar = get(&root, &at(profile_at, "udp_profile_lidar"))
            .or_else(|| get(&root, &at(format_at, "udp_profile_lidar")))
            .and_then(Value::as_str)
            .unwrap_or("LEGACY")
            .to_string();

        let meta = OusterMetadata {
            flavour,
            lidar_mode,
            beam_altitude_angles_deg: altitudes,
            beam_azimuth_angles_deg: azimuths,
            lidar_origin_to_beam_origin_mm: origin_mm,
            beam_origin_z_mm: origin_z_mm,
            lidar_to_sensor_transform: lidar_to_sensor,
            imu_to_sensor_transform: imu_to_sensor,
            data_format: DataFormat {
                pixels_per_column,
                columns_per_packet,
                columns_per_frame,
                pixel_shift_by_row,
                column_window,
                udp_profile_lidar,
            },
        };
        meta.check()?;
        Ok(meta)
    }

    fn check(&self) -> Result<(), MetadataError> {
        let f = &self.data_format;
        let rows = f.pixels_per_column;
        if rows == 0 || f.columns_per_packet == 0 || f.columns_per_frame == 0 {
            return Err(MetadataError::Inconsistent(
                "pixels_per_column, columns_per_packet and columns_per_frame must be positive".into(),
            ));
        }
        if f.columns_per_frame > usize::from(u16::MAX) + 1 {
            return Err(MetadataError::Inconsistent(format!(
                "columns_per_frame {} does not fit a 16-bit measurement id",
                f.columns_per_frame
            )));
        }
        for (name, len) in [
            ("beam_altitude_angles", self.beam_altitude_angles_deg.len()),
            ("beam_azimuth_angles", self.beam_azimuth_angles_deg.len()),
            ("pixel_shift_by_row", f.pixel_shift_by_row.len()),
        ] {
            if len != rows {
                return Err(MetadataError::Inconsistent(format!(
                    "{name} has {len} values but pixels_per_column is {rows}"
                )));
            }
        }
        // A NaN angle or an all-zero transform decodes every point to NaN or to the origin with
        // no other sign (issue 18), so both are refused here, naming the field.
        for (name, values) in [
            ("beam_altitude_angles", &self.beam_altitude_angles_deg),
            ("beam_azimuth_angles", &self.beam_azimuth_angles_deg),
        ] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(MetadataError::Inconsistent(format!(
                    "field `{name}`: value {i} is {}",
                    values[i]
                )));
            }
        }
        for (name, value) in [
            ("lidar_origin_to_beam_origin_mm", self.lidar_origin_to_beam_origin_mm),
            ("beam_origin_z_mm", self.beam_origin_z_mm),
        ] {
            if !value.is_finite() {
                return Err(MetadataError::Inconsistent(format!("field `{name}` is {value}")));
            }
        }
        for (name, m) in [
            ("lidar_to_sensor_transform", &self.lidar_to_sensor_transform),
            ("imu_to_sensor_transform", &self.imu_to_sensor_transform),
        ] {
            if isometry_from_row_major(m, TRANSFORM_EPS).is_none() {
                return Err(MetadataError::Inconsistent(format!(
                    "field `{name}` is not a rigid 4×4 transform: {m:?}"
                )));
            }
        }
        let (start, end) = f.column_window;
        if start >= f.columns_per_frame || end >= f.columns_per_frame {
            return Err(MetadataError::Inconsistent(format!(
                "column_window [{start}, {end}] outside 0..{}",
                f.columns_per_frame
            )));
        }
        Ok(())
    }

    /// A legacy-flat or nested metadata JSON for these values (what ouster-ros would store).
    pub fn to_json(&self, flavour: MetadataFlavour) -> String {
        let f = &self.data_format;
        let format = serde_json::json!({
            "pixels_per_column": f.pixels_per_column,
            "columns_per_packet": f.columns_per_packet,
            "columns_per_frame": f.columns_per_frame,
            "pixel_shift_by_row": f.pixel_shift_by_row,
            "column_window": [f.column_window.0, f.column_window.1],
            "udp_profile_lidar": f.udp_profile_lidar,
        });
        let value = match flavour {
            MetadataFlavour::LegacyFlat => serde_json::json!({
                "hostname": "os-boxlayer-sim",
                "prod_line": "OS-1-64",
                "lidar_mode": self.lidar_mode,
                "beam_altitude_angles": self.beam_altitude_angles_deg,
                "beam_azimuth_angles": self.beam_azimuth_angles_deg,
                "lidar_origin_to_beam_origin_mm": self.lidar_origin_to_beam_origin_mm,
                "lidar_to_sensor_transform": self.lidar_to_sensor_transform,
                "imu_to_sensor_transform": self.imu_to_sensor_transform,
                "data_format": format,
            }),
            MetadataFlavour::Nested => {
                let mut beam_to_lidar = [0.0; 16];
                for d in 0..4 {
                    beam_to_lidar[d * 5] = 1.0;
                }
                beam_to_lidar[3] = self.lidar_origin_to_beam_origin_mm;
                beam_to_lidar[11] = self.beam_origin_z_mm;
                serde_json::json!({
                    "sensor_info": {"prod_line": "OS-1-64", "hostname": "os-boxlayer-sim"},
                    "config_params": {"lidar_mode": self.lidar_mode, "udp_profile_lidar": f.udp_profile_lidar},
                    "beam_intrinsics": {
                        "beam_altitude_angles": self.beam_altitude_angles_deg,
                        "beam_azimuth_angles": self.beam_azimuth_angles_deg,
                        "lidar_origin_to_beam_origin_mm": self.lidar_origin_to_beam_origin_mm,
                        "beam_to_lidar_transform": beam_to_lidar,
                    },
                    "lidar_intrinsics": {"lidar_to_sensor_transform": self.lidar_to_sensor_transform},
                    "imu_intrinsics": {"imu_to_sensor_transform": self.imu_to_sensor_transform},
                    "lidar_data_format": format,
                })
            }
        };
        value.to_string()
    }

    /// OS1-64 in 2048×10 LEGACY mode with plausible beam angles (±22.5° elevation, a four-beam
    /// azimuth stagger of ±3.1°) and the OS1 design transforms: what the simulator writes.
    pub fn os1_64_2048x10() -> Self {
        let rows = 64;
        let columns = 2048;
        let altitudes: Vec<f64> = (0..rows).map(|i| 22.5 - 45.0 * i as f64 / (rows - 1) as f64).collect();
        let stagger = [3.1, 1.05, -1.05, -3.1];
        let azimuths: Vec<f64> = (0..rows).map(|i| stagger[i % 4]).collect();
        // Destaggering lines up beams that point the same way: column c of beam i points where
        // column c + azimuth_i·W/360 of a zero-offset beam would.
        let min_az = -3.1;
        let shifts: Vec<i64> = azimuths
            .iter()
            .map(|a| ((a - min_az) * columns as f64 / 360.0).round() as i64)
            .collect();
        OusterMetadata {
            flavour: MetadataFlavour::LegacyFlat,
            lidar_mode: "2048x10".into(),
            beam_altitude_angles_deg: altitudes,
            beam_azimuth_angles_deg: azimuths,
            lidar_origin_to_beam_origin_mm: 15.806,
            beam_origin_z_mm: 0.0,
            lidar_to_sensor_transform: OS1_LIDAR_TO_SENSOR,
            imu_to_sensor_transform: OS1_IMU_TO_SENSOR,
            data_format: DataFormat {
                pixels_per_column: rows,
                columns_per_packet: 16,
                columns_per_frame: columns,
                pixel_shift_by_row: shifts,
                column_window: (0, columns - 1),
                udp_profile_lidar: "LEGACY".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_flavours_round_trip_to_the_same_values() {
        let meta = OusterMetadata::os1_64_2048x10();
        for flavour in [MetadataFlavour::LegacyFlat, MetadataFlavour::Nested] {
            let parsed = OusterMetadata::parse(&meta.to_json(flavour)).unwrap();
            assert_eq!(parsed.flavour, flavour);
            assert_eq!(parsed.data_format, meta.data_format);
            assert_eq!(parsed.beam_altitude_angles_deg, meta.beam_altitude_angles_deg);
            assert_eq!(parsed.lidar_to_sensor_transform, meta.lidar_to_sensor_transform);
            assert_eq!(parsed.lidar_origin_to_beam_origin_mm, 15.806);
        }
        assert_eq!(meta.data_format.packet_bytes(), 12_608);
        assert_eq!(meta.data_format.packets_per_frame(), 128);
    }

    #[test]
    fn inconsistent_or_missing_fields_are_named() {
        let e = OusterMetadata::parse("{\"lidar_mode\": 3}").unwrap_err();
        assert!(e.to_string().contains("beam_altitude_angles"), "{e}");
        let mut meta = OusterMetadata::os1_64_2048x10();
        meta.beam_azimuth_angles_deg.pop();
        let e = OusterMetadata::parse(&meta.to_json(MetadataFlavour::Nested)).unwrap_err();
        assert!(e.to_string().contains("beam_azimuth_angles has 63 values"), "{e}");
        assert!(matches!(OusterMetadata::parse("not json"), Err(MetadataError::Json(_))));
    }

    #[test]
    fn column_window_may_wrap() {
        let mut f = OusterMetadata::os1_64_2048x10().data_format;
        f.column_window = (2000, 47);
        assert_eq!(f.window_columns(), 96);
        assert!(f.in_window(2047) && f.in_window(0) && f.in_window(47) && !f.in_window(48));
    }
}
