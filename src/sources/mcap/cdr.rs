//! A small reader and writer of CDR (XCDR1) as ROS 2 serializes messages: a 4-byte encapsulation
//! header (`00 01 00 00` little-endian, `00 00 00 00` big-endian), then primitives aligned to their
//! own size counted from the end of that header; strings are a `u32` length that counts a trailing
//! NUL, the bytes and the NUL; sequences are a `u32` count and the elements. Every read is checked
//! against the bytes left, so a huge length or count is an error, never an allocation.

use thiserror::Error;

/// A CDR payload that cannot be read.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("byte {offset}: {detail}")]
pub struct CdrError {
    /// Offset in the message (counting the 4-byte encapsulation header) where the read failed.
    pub offset: usize,
    /// What was wrong.
    pub detail: String,
}

/// Bytes of the encapsulation header.
pub const HEADER_LEN: usize = 4;

/// Reads CDR primitives, strings and sequences from one message, in order.
#[derive(Debug, Clone)]
pub struct CdrReader<'a> {
    payload: &'a [u8],
    pos: usize,
    big_endian: bool,
}

impl<'a> CdrReader<'a> {
    /// Checks the encapsulation header of `message` (plain CDR, either byte order) and starts
    /// reading after it.
    pub fn new(message: &'a [u8]) -> Result<Self, CdrError> {
        let Some((header, payload)) = message.split_first_chunk::<HEADER_LEN>() else {
            return Err(CdrError {
                offset: 0,
                detail: format!("{} bytes is too short for the 4-byte CDR header", message.len()),
            });
        };
        let big_endian = match [header[0], header[1]] {
            [0, 0] => true,
            [0, 1] => false,
            [a, b] => {
                return Err(CdrError {
                    offset: 0,
                    detail: format!("encapsulation {a:02x} {b:02x} is not plain CDR (00 00 or 00 01)"),
                });
            }
        };
        Ok(Self {
            payload,
            pos: 0,
            big_endian,
        })
    }

    /// Whether the payload is big-endian.
    pub fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.payload.len().saturating_sub(self.pos)
    }

    /// Offset of the next read in the message (counting the header).
    pub fn offset(&self) -> usize {
        self.pos + HEADER_LEN
    }

    fn error(&self, detail: impl Into<String>) -> CdrError {
        CdrError {
            offset: self.offset(),
            detail: detail.into(),
        }
    }

    fn align(&mut self, n: usize) -> Result<(), CdrError> {
        let pad = (n - self.pos % n) % n;
        if pad > self.remaining() {
            return Err(self.error(format!("message ends inside {pad} alignment bytes")));
        }
        self.pos += pad;
        Ok(())
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CdrError> {
        let bytes = self
            .payload
            .get(self.pos..)
            .and_then(|rest| rest.get(..n))
            .ok_or_else(|| self.error(format!("{what}: needs {n} bytes, {} left", self.remaining())))?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CdrError> {
        self.align(N)?;
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N, what)?);
        if self.big_endian {
            b.reverse();
        }
        Ok(b)
    }

    /// An unsigned byte.
    pub fn u8(&mut self) -> Result<u8, CdrError> {
        Ok(self.take(1, "u8")?[0])
    }

    /// A boolean (one byte, 0 or 1).
    pub fn bool(&mut self) -> Result<bool, CdrError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(CdrError {
                offset: self.offset() - 1,
                detail: format!("bool byte is {v}, not 0 or 1"),
            }),
        }
    }

    /// A little- or big-endian `u16`, 2-aligned.
    pub fn u16(&mut self) -> Result<u16, CdrError> {
        self.array::<2>("u16").map(u16::from_le_bytes)
    }

    /// An `i32`, 4-aligned.
    pub fn i32(&mut self) -> Result<i32, CdrError> {
        self.array::<4>("i32").map(i32::from_le_bytes)
    }

    /// A `u32`, 4-aligned.
    pub fn u32(&mut self) -> Result<u32, CdrError> {
        self.array::<4>("u32").map(u32::from_le_bytes)
    }

    /// An `f32`, 4-aligned.
    pub fn f32(&mut self) -> Result<f32, CdrError> {
        self.array::<4>("f32").map(f32::from_le_bytes)
    }

    /// An `f64`, 8-aligned.
    pub fn f64(&mut self) -> Result<f64, CdrError> {
        self.array::<8>("f64").map(f64::from_le_bytes)
    }

    /// `N` consecutive `f64` (a fixed-size array).
    pub fn f64_array<const N: usize>(&mut self) -> Result<[f64; N], CdrError> {
        let mut out = [0.0; N];
        for v in &mut out {
            *v = self.f64()?;
        }
        Ok(out)
    }

    /// A sequence's element count, checked so that `count × min_element_bytes` fits the bytes left.
    pub fn sequence_len(&mut self, min_element_bytes: usize, what: &str) -> Result<usize, CdrError> {
        let at = self.offset();
        let n = self.u32()? as usize;
        if n.saturating_mul(min_element_bytes.max(1)) > self.remaining() {
            return Err(CdrError {
                offset: at,
                detail: format!(
                    "{what}: {n} elements of at least {min_element_bytes} bytes, but only {} bytes left",
                    self.remaining()
                ),
            });
        }
        Ok(n)
    }

    /// A `uint8[]` sequence, borrowed.
    pub fn byte_sequence(&mut self, what: &str) -> Result<&'a [u8], CdrError> {
        let n = self.sequence_len(1, what)?;
        self.take(n, what)
    }

    /// A `float64[]` sequence.
    pub fn f64_sequence(&mut self, what: &str) -> Result<Vec<f64>, CdrError> {
        let n = self.sequence_len(8, what)?;
        (0..n).map(|_| self.f64()).collect()
    }

    /// A string: `u32` length counting the NUL, the UTF-8 bytes, the NUL (length 0 is read as empty).
    pub fn string(&mut self, what: &str) -> Result<String, CdrError> {
        let at = self.offset();
        let n = self.sequence_len(1, what)?;
        let bytes = self.take(n, what)?;
        let text = match bytes.split_last() {
            None => &[][..],
            Some((0, text)) => text,
            Some(_) => {
                return Err(CdrError {
                    offset: at,
                    detail: format!("{what}: string of {n} bytes does not end with NUL"),
                });
            }
        };
        String::from_utf8(text.to_vec()).map_err(|_| CdrError {
            offset: at,
            detail: format!("{what}: string is not UTF-8"),
        })
    }
}

/// Writes a little-endian CDR message (`00 01 00 00` header), aligning each primitive.
#[derive(Debug, Clone)]
pub struct CdrWriter {
    buf: Vec<u8>,
}

impl Default for CdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl CdrWriter {
    /// An empty little-endian message (just the header).
    pub fn new() -> Self {
        Self::with_capacity(64)
    }

    /// An empty message with room for `capacity` payload bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity + HEADER_LEN);
        buf.extend_from_slice(&[0, 1, 0, 0]);
        Self { buf }
    }

    fn align(&mut self, n: usize) {
        let pos = self.buf.len() - HEADER_LEN;
        let pad = (n - pos % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    /// An unsigned byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// A boolean.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// A `u16`.
    pub fn u16(&mut self, v: u16) {
        self.align(2);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// An `i32`.
    pub fn i32(&mut self, v: i32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// An `f32`.
    pub fn f32(&mut self, v: f32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// An `f64`.
    pub fn f64(&mut self, v: f64) {
        self.align(8);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Consecutive `f64` (a fixed-size array).
    pub fn f64s(&mut self, values: &[f64]) {
        for &v in values {
            self.f64(v);
        }
    }

    /// A sequence's element count; `n` over `u32::MAX` is clamped by the caller's checks.
    pub fn sequence_len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// A `uint8[]` sequence.
    pub fn byte_sequence(&mut self, bytes: &[u8]) {
        self.sequence_len(bytes.len());
        self.buf.extend_from_slice(bytes);
    }

    /// A `float64[]` sequence.
    pub fn f64_sequence(&mut self, values: &[f64]) {
        self.sequence_len(values.len());
        self.f64s(values);
    }

    /// A string with its NUL.
    pub fn string(&mut self, s: &str) {
        self.sequence_len(s.len() + 1);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    /// The message bytes, header included.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-computed message: u8 7, f64 1.5, string "ab", u16 3, u32[] {9}, bool true.
    /// Offsets count from the end of the header: the f64 needs 7 padding bytes after the u8,
    /// the u16 right after the 7-byte string needs 1, the sequence count 2 more.
    const GOLDEN: [u8; 38] = [
        0x00, 0x01, 0x00, 0x00, // header: CDR little-endian
        0x07, 0, 0, 0, 0, 0, 0, 0, // u8 7 + 7 pad (f64 aligns to 8)
        0, 0, 0, 0, 0, 0, 0xF8, 0x3F, // f64 1.5 at payload offset 8
        3, 0, 0, 0, b'a', b'b', 0, // string "ab": length 3 with NUL, at 16
        0, // pad: u16 at 24
        3, 0, // u16 3
        0, 0, // pad: u32 at 28
        1, 0, 0, 0, // sequence count 1
        9, // uint8[] {9}
        1, // bool true
    ];

    #[test]
    fn golden_bytes_have_the_alignment_ros_2_uses() {
        let mut w = CdrWriter::new();
        w.u8(7);
        w.f64(1.5);
        w.string("ab");
        w.u16(3);
        w.byte_sequence(&[9]);
        w.bool(true);
        assert_eq!(w.into_bytes(), GOLDEN);

        let mut r = CdrReader::new(&GOLDEN).unwrap();
        assert!(!r.big_endian());
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.f64().unwrap(), 1.5);
        assert_eq!(r.string("s").unwrap(), "ab");
        assert_eq!(r.u16().unwrap(), 3);
        assert_eq!(r.byte_sequence("b").unwrap(), &[9]);
        assert!(r.bool().unwrap());
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn big_endian_payloads_read_the_same_values() {
        let bytes = [
            0x00, 0x00, 0x00, 0x00, 0, 0, 0, 5, 0, 0, 0, 0, 0x3F, 0xF8, 0, 0, 0, 0, 0, 0,
        ];
        let mut r = CdrReader::new(&bytes).unwrap();
        assert!(r.big_endian());
        assert_eq!(r.u32().unwrap(), 5);
        assert_eq!(r.f64().unwrap(), 1.5);
    }

    #[test]
    fn short_or_lying_payloads_are_errors_naming_the_offset() {
        assert!(CdrReader::new(&[0, 1]).unwrap_err().detail.contains("too short"));
        assert!(
            CdrReader::new(&[0, 7, 0, 0])
                .unwrap_err()
                .detail
                .contains("not plain CDR")
        );
        // A count of 4 billion elements with 0 bytes behind it.
        let huge = [0, 1, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF];
        let e = CdrReader::new(&huge).unwrap().byte_sequence("data").unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.detail.contains("4294967295 elements"), "{e}");
        let mut r = CdrReader::new(&[0, 1, 0, 0, 1, 0]).unwrap();
        r.u8().unwrap();
        let e = r.f64().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("byte 5: message ends inside 7 alignment bytes"),
            "{e}"
        );
        let no_nul = [0, 1, 0, 0, 2, 0, 0, 0, b'a', b'b'];
        let e = CdrReader::new(&no_nul).unwrap().string("frame_id").unwrap_err();
        assert!(e.detail.contains("does not end with NUL"), "{e}");
        let e = CdrReader::new(&[0, 1, 0, 0, 2]).unwrap().bool().unwrap_err();
        assert_eq!(e.offset, 4);
    }
}
