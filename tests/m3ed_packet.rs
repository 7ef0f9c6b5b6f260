//! A hand-built LEGACY packet with known ranges decodes, through a real HDF5 file and the
//! `M3edSource`, to hand-computed sensor-frame XYZ — for both metadata JSON flavours.

use std::path::Path;
use std::str::FromStr;

use boxlayer::cloud::ChannelData;
use boxlayer::sources::Source;
use boxlayer::sources::m3ed::{M3edConfig, M3edSource};
use hdf5::types::VarLenUnicode;
use ndarray::{Array1, Array3};

/// 2 beams × 16 columns, one 16-column packet: the format comes from the JSON, nothing is OS1-64.
const ROWS: usize = 2;
const COLUMNS: usize = 16;
const COLUMN_BYTES: usize = 16 + 12 * ROWS + 4;
const SLOT: usize = COLUMNS * COLUMN_BYTES + 1;

// Beam 0: altitude 0°, azimuth 0°. Beam 1: altitude 30°, azimuth 90°.
// lidar_origin_to_beam_origin n = 10 mm; lidar→sensor = 180° about z, +36.18 mm in z.
const LEGACY_JSON: &str = r#"{
  "lidar_mode": "16x10",
  "beam_altitude_angles": [0.0, 30.0],
  "beam_azimuth_angles": [0.0, 90.0],
  "lidar_origin_to_beam_origin_mm": 10.0,
  "lidar_to_sensor_transform": [-1,0,0,0, 0,-1,0,0, 0,0,1,36.18, 0,0,0,1],
  "imu_to_sensor_transform": [1,0,0,6.253, 0,1,0,-11.775, 0,0,1,7.645, 0,0,0,1],
  "data_format": {"pixels_per_column": 2, "columns_per_packet": 16, "columns_per_frame": 16,
                  "pixel_shift_by_row": [0, 3], "column_window": [0, 15], "udp_profile_lidar": "LEGACY"}
}"#;

// The same sensor in the nested layout; the beam offset comes as beam_to_lidar_transform[0,3].
const NESTED_JSON: &str = r#"{
  "config_params": {"lidar_mode": "16x10", "udp_profile_lidar": "LEGACY"},
  "beam_intrinsics": {"beam_altitude_angles": [0.0, 30.0], "beam_azimuth_angles": [0.0, 90.0],
                      "beam_to_lidar_transform": [1,0,0,10, 0,1,0,0, 0,0,1,0, 0,0,0,1]},
  "lidar_intrinsics": {"lidar_to_sensor_transform": [-1,0,0,0, 0,-1,0,0, 0,0,1,36.18, 0,0,0,1]},
  "imu_intrinsics": {"imu_to_sensor_transform": [1,0,0,6.253, 0,1,0,-11.775, 0,0,1,7.645, 0,0,0,1]},
  "lidar_data_format": {"pixels_per_column": 2, "columns_per_packet": 16, "columns_per_frame": 16,
                        "pixel_shift_by_row": [0, 3], "column_window": [0, 15]}
}"#;

/// (beam, column, range mm, reflectivity) of every pixel with a return.
const RETURNS: [(usize, usize, u32, u16); 5] = [
    (0, 0, 1010, 11),
    (0, 4, 2010, 22),
    (1, 0, 1010, 33),
    (1, 8, 3010, 44),
    // Column 12's status word is bad: this return must not appear.
    (0, 12, 5000, 55),
];

/// Hand-computed sensor-frame points (m) of the first four returns.
///
/// θ_enc = 2π − c·2π/16, θ_az = −2π·az/360, φ = 2π·alt/360, n = 10 mm:
/// x_L = (r−n)cos(θ_enc+θ_az)cosφ + n cosθ_enc, y_L = (r−n)sin(θ_enc+θ_az)cosφ + n sinθ_enc,
/// z_L = (r−n) sinφ; sensor = (−x_L, −y_L, z_L + 36.18) mm.
/// - beam 0, c 0, r 1010: θ_enc = 2π → x_L = 1000 + 10 = 1010, y_L = 0, z_L = 0
///   → (−1.010, 0, 0.03618).
/// - beam 0, c 4, r 2010: θ_enc = 3π/2 (cos 0, sin −1) → x_L = 0, y_L = −2000 − 10 = −2010
///   → (0, 2.010, 0.03618).
/// - beam 1, c 0, r 1010: θ_enc = 2π, θ_az = −π/2 → θ = 3π/2 (cos 0, sin −1), cosφ = √3/2,
///   sinφ = 1/2 → x_L = 0 + 10 = 10, y_L = −1000·√3/2 = −866.0254, z_L = 500
///   → (−0.010, 0.8660254, 0.53618).
/// - beam 1, c 8, r 3010: θ_enc = π (cos −1, sin 0), θ = π/2 (cos 0, sin 1) → x_L = −10,
///   y_L = 3000·√3/2 = 2598.0762, z_L = 1500 → (0.010, −2.5980762, 1.53618).
const EXPECTED: [[f64; 3]; 4] = [
    [-1.010, 0.0, 0.03618],
    [0.0, 2.010, 0.03618],
    [-0.010, 0.8660254, 0.53618],
    [0.010, -2.5980762, 1.53618],
];

fn packet_row() -> Vec<u8> {
    let mut row = vec![0u8; SLOT];
    // Columns arrive out of order (as after a reordering switch); placement is by measurement id.
    for slot_index in 0..COLUMNS {
        let c = COLUMNS - 1 - slot_index;
        let col = &mut row[slot_index * COLUMN_BYTES..(slot_index + 1) * COLUMN_BYTES];
        col[0..8].copy_from_slice(&(5_000_000u64 + c as u64 * 6_250).to_le_bytes());
        col[8..10].copy_from_slice(&(c as u16).to_le_bytes());
        col[10..12].copy_from_slice(&7u16.to_le_bytes());
        col[12..16].copy_from_slice(&((c * 90112 / 16) as u32).to_le_bytes());
        for &(beam, column, range, refl) in &RETURNS {
            if column == c {
                let px = 16 + 12 * beam;
                // Bits above the 20-bit range field are flags and must be masked off.
                col[px..px + 4].copy_from_slice(&(range | 0x0030_0000).to_le_bytes());
                col[px + 4..px + 6].copy_from_slice(&refl.to_le_bytes());
                col[px + 6..px + 8].copy_from_slice(&(refl * 2).to_le_bytes());
                col[px + 8..px + 10].copy_from_slice(&(refl * 3).to_le_bytes());
            }
        }
        let status: u32 = if c == 12 { 0x0000_FFFF } else { 0xFFFF_FFFF };
        col[COLUMN_BYTES - 4..].copy_from_slice(&status.to_le_bytes());
    }
    row
}

fn write_file(path: &Path, json: &str) {
    let file = hdf5::File::create(path).unwrap();
    let ouster = file.create_group("ouster").unwrap();
    let data = Array3::from_shape_vec((1, 1, SLOT), packet_row()).unwrap();
    ouster
        .new_dataset_builder()
        .chunk((1, 1, SLOT))
        .lzf()
        .with_data(&data)
        .create("data")
        .unwrap();
    ouster
        .new_dataset::<VarLenUnicode>()
        .shape(())
        .create("metadata")
        .unwrap()
        .write_scalar(&VarLenUnicode::from_str(json).unwrap())
        .unwrap();
    ouster
        .new_dataset_builder()
        .with_data(&Array1::from(vec![5_000i64]))
        .create("ts_start")
        .unwrap();
    ouster
        .new_dataset_builder()
        .with_data(&Array1::from(vec![5_150i64]))
        .create("ts_end")
        .unwrap();
}

#[test]
fn hand_built_packet_decodes_to_hand_computed_xyz_in_both_flavours() {
    let dir = tempfile::tempdir().unwrap();
    for (flavour, json) in [("legacy", LEGACY_JSON), ("nested", NESTED_JSON)] {
        let path = dir.path().join(format!("spot_hand_{flavour}_data.h5"));
        write_file(&path, json);
        let source = M3edSource::open(&path, M3edConfig::default()).unwrap();
        assert_eq!(source.len(), 1);
        let (frame, report) = source.frame_with_report(0).unwrap();
        assert_eq!(report.bad_status_columns, 1, "{flavour}: {}", report.describe());
        assert_eq!(report.valid_columns, 15);
        assert!(report.describe().contains("partial sweep: 15 of 16 columns"));

        let cloud = &frame.cloud;
        assert_eq!(cloud.len(), 4, "{flavour}: the bad-status column's return is dropped");
        let Some(ChannelData::U16(ring)) = cloud.channel("ring") else {
            panic!()
        };
        let Some(ChannelData::U16(column)) = cloud.channel("column") else {
            panic!()
        };
        let Some(ChannelData::U16(image_column)) = cloud.channel("image_column") else {
            panic!()
        };
        let Some(ChannelData::F32(range)) = cloud.channel("range") else {
            panic!()
        };
        let Some(ChannelData::I64(time)) = cloud.channel("time") else {
            panic!()
        };
        for (i, &(beam, c, r, refl)) in RETURNS[..4].iter().enumerate() {
            let k = (0..cloud.len())
                .find(|&k| ring[k] as usize == beam && column[k] as usize == c)
                .unwrap_or_else(|| panic!("{flavour}: no point for beam {beam} column {c}"));
            let p = cloud.point(k);
            for axis in 0..3 {
                assert!(
                    (p[axis] - EXPECTED[i][axis]).abs() < 1e-5,
                    "{flavour}: beam {beam} column {c}: {p:?} vs {:?}",
                    EXPECTED[i]
                );
            }
            // Intensity and the other channels come from the same pixel as the point.
            assert_eq!(cloud.intensity()[k], refl as f32);
            assert!((range[k] - r as f32 / 1000.0).abs() < 1e-6);
            // Beam 1 is shifted by 3 columns when destaggered.
            assert_eq!(image_column[k] as usize, (c + 3 * beam) % 16);
            // 5000..5150 µs spread over columns 0..15: column c at 5000 + 10·c.
            assert_eq!(time[k], 5_000 + 10 * c as i64);
        }
        let Some(ChannelData::U16(signal)) = cloud.channel("signal") else {
            panic!()
        };
        let Some(ChannelData::U16(near_ir)) = cloud.channel("near_ir") else {
            panic!()
        };
        for k in 0..cloud.len() {
            assert_eq!(signal[k] as f32, 2.0 * cloud.intensity()[k]);
            assert_eq!(near_ir[k] as f32, 3.0 * cloud.intensity()[k]);
        }
        assert_eq!(frame.timestamp_micros, 5_000);
        assert!(frame.cameras.is_empty() && frame.imu.is_empty());
    }
}
