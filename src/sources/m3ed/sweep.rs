//! Decodes one `/ouster/data` row (the LEGACY lidar packets of one sweep, in arrival order) into
//! per-pixel range / reflectivity / signal / near-IR, placing every column by its own
//! `measurement_id`, and turns the pixels into a sensor-frame [`PointCloud`].

use crate::cloud::{ChannelData, PointCloud};

use super::metadata::DataFormat;
use super::xyz::XyzLut;

/// Status word of a column the sensor measured completely.
pub const VALID_COLUMN_STATUS: u32 = 0xFFFF_FFFF;

/// The RANGE field is the low 20 bits of its u32.
pub const RANGE_MASK: u32 = 0x000F_FFFF;

/// What was wrong with a sweep row, counted per kind; a clean sweep has every count at zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Columns the column window says a full sweep has.
    pub expected_columns: usize,
    /// Distinct columns decoded with a valid status.
    pub valid_columns: usize,
    /// Every byte of the row is zero: the sensor skipped this frame.
    pub all_zero: bool,
    /// Packet slots that are entirely zero (the packet never arrived).
    pub missing_packets: usize,
    /// Columns in non-empty packets whose status word is not 0xFFFFFFFF.
    pub bad_status_columns: usize,
    /// Valid-status columns whose measurement id lies outside the column window.
    pub out_of_window_columns: usize,
    /// Valid-status columns whose measurement id was already seen in this row.
    pub duplicate_columns: usize,
    /// Valid-status columns from another frame than the row's majority `frame_id`.
    pub foreign_frame_columns: usize,
}

impl SweepReport {
    /// Whether every expected column arrived with a valid status and nothing was rejected.
    pub fn is_complete(&self) -> bool {
        !self.all_zero
            && self.valid_columns == self.expected_columns
            && self.missing_packets == 0
            && self.bad_status_columns == 0
            && self.out_of_window_columns == 0
            && self.duplicate_columns == 0
            && self.foreign_frame_columns == 0
    }

    /// Columns of the window that have no valid data.
    pub fn missing_columns(&self) -> usize {
        self.expected_columns.saturating_sub(self.valid_columns)
    }

    /// One line naming each problem, e.g. `partial sweep: 2016 of 2048 columns (2 packets missing)`.
    pub fn describe(&self) -> String {
        if self.all_zero {
            return "skipped frame (all-zero row)".to_string();
        }
        let mut parts = Vec::new();
        if self.missing_packets > 0 {
            parts.push(format!("{} packets missing", self.missing_packets));
        }
        if self.bad_status_columns > 0 {
            parts.push(format!("{} columns with bad status", self.bad_status_columns));
        }
        if self.out_of_window_columns > 0 {
            parts.push(format!(
                "{} columns outside the column window",
                self.out_of_window_columns
            ));
        }
        if self.duplicate_columns > 0 {
            parts.push(format!("{} duplicate columns", self.duplicate_columns));
        }
        if self.foreign_frame_columns > 0 {
            parts.push(format!("{} columns from another frame", self.foreign_frame_columns));
        }
        let head = if self.valid_columns < self.expected_columns {
            format!(
                "partial sweep: {} of {} columns",
                self.valid_columns, self.expected_columns
            )
        } else {
            "complete sweep".to_string()
        };
        if parts.is_empty() {
            head
        } else {
            format!("{head} ({})", parts.join(", "))
        }
    }
}

/// Why a row could not be decoded at all; the caller adds file and sweep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// The row's packet size does not hold a LEGACY packet of the metadata's format.
    #[error("packet slots of {slot} bytes cannot hold {needed}-byte LEGACY packets")]
    PacketTooSmall {
        /// Bytes per packet slot in the row.
        slot: usize,
        /// Bytes one packet needs.
        needed: usize,
    },
    /// The sweep, lookup table and data format describe different image sizes.
    #[error("sweep of {sweep:?} rows × columns does not match a lookup table of {table:?} or its data format")]
    ShapeMismatch {
        /// Rows and columns of the decoded sweep.
        sweep: (usize, usize),
        /// Rows and columns of the lookup table.
        table: (usize, usize),
    },
    /// The row's length is not a whole number of packet slots.
    #[error("row of {len} bytes is not a whole number of {slot}-byte packet slots")]
    RaggedRow {
        /// Row length.
        len: usize,
        /// Bytes per slot.
        slot: usize,
    },
}

/// One sweep's pixels, staggered (indexed by beam row and measurement id), plus its report.
#[derive(Debug, Clone, Default)]
pub struct DecodedSweep {
    /// Beam rows.
    pub rows: usize,
    /// Columns per frame.
    pub columns: usize,
    /// RANGE (mm), column-major as the packets deliver it: `[column * rows + row]`; 0 = no return.
    pub range_mm: Vec<u32>,
    /// REFLECTIVITY, same layout.
    pub reflectivity: Vec<u16>,
    /// SIGNAL photons, same layout.
    pub signal: Vec<u16>,
    /// NEAR_IR photons, same layout.
    pub near_ir: Vec<u16>,
    /// Whether each measurement id arrived with a valid status.
    pub column_valid: Vec<bool>,
    /// Raw sensor-clock column timestamp (ns), 0 where the column is missing.
    pub column_timestamp_ns: Vec<u64>,
    /// The row's frame id, `None` when no column was valid.
    pub frame_id: Option<u16>,
    /// What was wrong, if anything.
    pub report: SweepReport,
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

impl DecodedSweep {
    /// An empty sweep sized for `format`, reusable across calls to [`DecodedSweep::decode_into`].
    pub fn new(format: &DataFormat) -> Self {
        let rows = format.pixels_per_column;
        let columns = format.columns_per_frame;
        DecodedSweep {
            rows,
            columns,
            range_mm: vec![0; rows * columns],
            reflectivity: vec![0; rows * columns],
            signal: vec![0; rows * columns],
            near_ir: vec![0; rows * columns],
            column_valid: vec![false; columns],
            column_timestamp_ns: vec![0; columns],
            frame_id: None,
            report: SweepReport::default(),
        }
    }

    /// Decodes `row` (packet slots of `slot_bytes` each, LEGACY layout, little-endian).
    pub fn decode(row: &[u8], slot_bytes: usize, format: &DataFormat) -> Result<Self, SweepError> {
        let mut sweep = Self::new(format);
        sweep.decode_into(row, slot_bytes, format)?;
        Ok(sweep)
    }

    /// Decodes `row` into this sweep's buffers, overwriting everything.
    pub fn decode_into(&mut self, row: &[u8], slot_bytes: usize, format: &DataFormat) -> Result<(), SweepError> {
        let needed = format.packet_bytes();
        if slot_bytes < needed {
            return Err(SweepError::PacketTooSmall {
                slot: slot_bytes,
                needed,
            });
        }
        if !row.len().is_multiple_of(slot_bytes) {
            return Err(SweepError::RaggedRow {
                len: row.len(),
                slot: slot_bytes,
            });
        }
        let rows = format.pixels_per_column;
        let columns = format.columns_per_frame;
        if self.rows != rows || self.columns != columns {
            *self = Self::new(format);
        }
        self.range_mm.fill(0);
        self.reflectivity.fill(0);
        self.signal.fill(0);
        self.near_ir.fill(0);
        self.column_valid.fill(false);
        self.column_timestamp_ns.fill(0);
        self.frame_id = None;
        let mut report = SweepReport {
            expected_columns: format.window_columns(),
            ..SweepReport::default()
        };
        let column_bytes = format.column_bytes();
        let status_at = 16 + 12 * rows;

        // Pass 1: the majority frame id among valid-status columns names the row's frame, so a
        // stray packet from a neighbouring frame is rejected rather than mixed in.
        let mut frame_ids: Vec<u16> = Vec::with_capacity(columns);
        let mut nonzero_slots = 0usize;
        let mut slot_empty = Vec::with_capacity(row.len() / slot_bytes);
        for slot in row.chunks_exact(slot_bytes) {
            let packet = &slot[..needed];
            let empty = packet.iter().all(|&b| b == 0);
            slot_empty.push(empty);
            if empty {
                report.missing_packets += 1;
                continue;
            }
            nonzero_slots += 1;
            for col in packet.chunks_exact(column_bytes) {
                if u32_at(col, status_at) == VALID_COLUMN_STATUS {
                    frame_ids.push(u16_at(col, 10));
                }
            }
        }
        if nonzero_slots == 0 {
            report.all_zero = true;
            report.missing_packets = 0;
            self.report = report;
            return Ok(());
        }
        // Slots beyond what a frame needs are padding in some writers, not lost packets.
        report.missing_packets = report
            .missing_packets
            .min(format.packets_per_frame().saturating_sub(nonzero_slots));
        frame_ids.sort_unstable();
        let frame_id = frame_ids
            .chunk_by(|a, b| a == b)
            .max_by_key(|run| run.len())
            .map(|run| run[0]);
        self.frame_id = frame_id;

        // Pass 2: place each valid column by its measurement id.
        for (slot, empty) in row.chunks_exact(slot_bytes).zip(slot_empty) {
            if empty {
                continue;
            }
            let packet = &slot[..needed];
            for col in packet.chunks_exact(column_bytes) {
                if u32_at(col, status_at) != VALID_COLUMN_STATUS {
                    report.bad_status_columns += 1;
                    continue;
                }
                let measurement_id = usize::from(u16_at(col, 8));
                if Some(u16_at(col, 10)) != frame_id {
                    report.foreign_frame_columns += 1;
                    continue;
                }
                if measurement_id >= columns || !format.in_window(measurement_id) {
                    report.out_of_window_columns += 1;
                    continue;
                }
                if self.column_valid[measurement_id] {
                    report.duplicate_columns += 1;
                    continue;
                }
                self.column_valid[measurement_id] = true;
                self.column_timestamp_ns[measurement_id] = u64_at(col, 0);
                report.valid_columns += 1;
                let base = measurement_id * rows;
                let pixels = col[16..16 + 12 * rows].chunks_exact(12);
                let range = &mut self.range_mm[base..base + rows];
                let reflectivity = &mut self.reflectivity[base..base + rows];
                let signal = &mut self.signal[base..base + rows];
                let near_ir = &mut self.near_ir[base..base + rows];
                for (r, px) in pixels.enumerate() {
                    range[r] = u32_at(px, 0) & RANGE_MASK;
                    reflectivity[r] = u16_at(px, 4);
                    signal[r] = u16_at(px, 6);
                    near_ir[r] = u16_at(px, 8);
                }
            }
        }
        self.report = report;
        Ok(())
    }

    /// The returns of this sweep as a sensor-frame cloud, in destaggered image order (image
    /// column by image column, beam row by beam row within each). Every channel comes from the
    /// same pixel as its point.
    ///
    /// Channels: `range` (f32 m), `reflectivity`, `signal`, `near_ir`, `ring` (beam row),
    /// `column` (measurement id), `image_column` (destaggered column) as u16, and `time` (i64 µs,
    /// linear in the measurement id between `ts_start` and `ts_end`, as M3ED does not deskew).
    /// Intensity is the raw REFLECTIVITY value. Pixels with range 0 (no return) and pixels of
    /// rejected columns are left out.
    pub fn to_cloud(
        &self,
        lut: &XyzLut,
        format: &DataFormat,
        ts_start: i64,
        ts_end: i64,
    ) -> Result<PointCloud, SweepError> {
        let columns = self.columns;
        let rows = self.rows;
        if (lut.rows(), lut.columns()) != (rows, columns)
            || (format.pixels_per_column, format.columns_per_frame) != (rows, columns)
            || format.pixel_shift_by_row.len() != rows
        {
            return Err(SweepError::ShapeMismatch {
                sweep: (rows, columns),
                table: (lut.rows(), lut.columns()),
            });
        }
        let capacity = self.range_mm.iter().filter(|&&r| r != 0).count();
        let mut x = Vec::with_capacity(capacity);
        let mut y = Vec::with_capacity(capacity);
        let mut z = Vec::with_capacity(capacity);
        let mut intensity = Vec::with_capacity(capacity);
        let mut range = Vec::with_capacity(capacity);
        let mut reflectivity = Vec::with_capacity(capacity);
        let mut signal = Vec::with_capacity(capacity);
        let mut near_ir = Vec::with_capacity(capacity);
        let mut ring = Vec::with_capacity(capacity);
        let mut column_id = Vec::with_capacity(capacity);
        let mut image_column = Vec::with_capacity(capacity);
        let mut time = Vec::with_capacity(capacity);

        let window_start = format.column_window.0;
        let span = format.window_columns().saturating_sub(1).max(1) as i64;
        let column_time: Vec<i64> = (0..columns)
            .map(|c| {
                let step = ((c + columns - window_start) % columns) as i64;
                ts_start + (ts_end - ts_start) * step / span
            })
            .collect();
        let shifts: Vec<usize> = format
            .pixel_shift_by_row
            .iter()
            .map(|s| s.rem_euclid(columns as i64) as usize)
            .collect();
        for v in 0..columns {
            for (r, shift) in shifts.iter().enumerate() {
                // Image column v of row r shows measurement id c with (c + shift) mod W = v.
                let c = (v + columns - shift) % columns;
                let k = c * rows + r;
                let range_mm = self.range_mm[k];
                if range_mm == 0 || !self.column_valid[c] {
                    continue;
                }
                let p = lut.point(r, c, range_mm);
                x.push(p[0]);
                y.push(p[1]);
                z.push(p[2]);
                intensity.push(f32::from(self.reflectivity[k]));
                range.push(range_mm as f32 * 0.001);
                reflectivity.push(self.reflectivity[k]);
                signal.push(self.signal[k]);
                near_ir.push(self.near_ir[k]);
                ring.push(r as u16);
                column_id.push(c as u16);
                image_column.push(v as u16);
                time.push(column_time[c]);
            }
        }
        let mut cloud = PointCloud::from_columns(x, y, z, intensity).unwrap_or_default();
        let channels = [
            ("range", ChannelData::F32(range)),
            ("reflectivity", ChannelData::U16(reflectivity)),
            ("signal", ChannelData::U16(signal)),
            ("near_ir", ChannelData::U16(near_ir)),
            ("ring", ChannelData::U16(ring)),
            ("column", ChannelData::U16(column_id)),
            ("image_column", ChannelData::U16(image_column)),
            ("time", ChannelData::I64(time)),
        ];
        for (name, data) in channels {
            // Every channel has one value per point and a distinct name, so this cannot fail.
            let _ = cloud.add_channel(name, data);
        }
        Ok(cloud)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::m3ed::metadata::OusterMetadata;
    use crate::sources::m3ed::writer::{SweepPixels, encode_sweep_packets};

    /// A 2-beam, 32-column sensor: two 16-column packets per sweep.
    fn small() -> OusterMetadata {
        let mut m = OusterMetadata::os1_64_2048x10();
        m.beam_altitude_angles_deg = vec![1.0, -1.0];
        m.beam_azimuth_angles_deg = vec![0.0, 0.0];
        m.data_format.pixels_per_column = 2;
        m.data_format.columns_per_frame = 32;
        m.data_format.pixel_shift_by_row = vec![0, 0];
        m.data_format.column_window = (0, 31);
        m
    }

    fn row(meta: &OusterMetadata, frame_id: u16) -> Vec<u8> {
        let mut pixels = SweepPixels::empty(2, 32);
        pixels
            .range_mm
            .iter_mut()
            .enumerate()
            .for_each(|(k, r)| *r = 1000 + k as u32);
        encode_sweep_packets(meta, frame_id, 0, 1000, &pixels, meta.data_format.packet_bytes() + 1)
    }

    #[test]
    fn duplicate_and_foreign_columns_are_counted_and_dropped() {
        let meta = small();
        let f = &meta.data_format;
        let slot = f.packet_bytes() + 1;
        // Packet 1 replaced by a copy of packet 0 (duplicates), then packet 0 from another frame.
        let mut bytes = row(&meta, 9);
        let first = bytes[..slot].to_vec();
        bytes[slot..2 * slot].copy_from_slice(&first);
        let sweep = DecodedSweep::decode(&bytes, slot, f).unwrap();
        assert_eq!(sweep.report.duplicate_columns, 16);
        assert_eq!(sweep.report.valid_columns, 16);
        assert_eq!(sweep.frame_id, Some(9));

        let mut bytes = row(&meta, 9);
        let other = row(&meta, 10);
        bytes[..slot].copy_from_slice(&other[..slot]);
        bytes.extend_from_slice(&row(&meta, 9)[slot..]);
        let sweep = DecodedSweep::decode(&bytes, slot, f).unwrap();
        assert_eq!(sweep.report.foreign_frame_columns, 16);
        assert_eq!(sweep.report.duplicate_columns, 16);
        assert_eq!(sweep.report.valid_columns, 16);
        assert!(sweep.column_valid[16..].iter().all(|&v| v) && sweep.column_valid[..16].iter().all(|&v| !v));
    }

    #[test]
    fn malformed_rows_and_mismatched_tables_are_errors() {
        let meta = small();
        let f = &meta.data_format;
        let bytes = row(&meta, 1);
        assert_eq!(
            DecodedSweep::decode(&bytes, 100, f).unwrap_err(),
            SweepError::PacketTooSmall {
                slot: 100,
                needed: f.packet_bytes()
            }
        );
        assert!(matches!(
            DecodedSweep::decode(&bytes[1..], f.packet_bytes() + 1, f),
            Err(SweepError::RaggedRow { .. })
        ));
        let sweep = DecodedSweep::decode(&bytes, f.packet_bytes() + 1, f).unwrap();
        assert!(sweep.report.is_complete(), "{}", sweep.report.describe());
        let cloud = sweep.to_cloud(&XyzLut::new(&meta), f, 0, 310).unwrap();
        assert_eq!(cloud.len(), 64);
        let os1 = OusterMetadata::os1_64_2048x10();
        assert!(matches!(
            sweep.to_cloud(&XyzLut::new(&os1), f, 0, 1),
            Err(SweepError::ShapeMismatch { .. })
        ));
    }
}
