//! Writes Waymo v1 segments, as `m3ed/writer.rs` writes M3ED files: frames go in one by one
//! without their context (which needs the whole segment: object counts), into a scratch file;
//! [`SegmentWriter::finish`] prefixes each with the context as the segment's records and renames
//! the file into place. prost writes fields in tag order and `context` is field 1, so each record
//! equals the encoding of the whole `Frame`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use prost::Message;

use super::proto;
use super::tfrecord::TfRecordWriter;
use crate::atomic_file::partial_path;

/// A segment being written; dropped unfinished, it leaves no file behind.
pub struct SegmentWriter {
    path: PathBuf,
    bodies_path: PathBuf,
    bodies: Option<BufWriter<File>>,
    lengths: Vec<u64>,
}

impl SegmentWriter {
    /// Starts the segment `path` (a `.tfrecord`); nothing appears under that name before `finish`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".frames.tmp");
        let bodies_path = path.with_file_name(name);
        let bodies = BufWriter::new(File::create(&bodies_path)?);
        Ok(Self {
            path: path.to_path_buf(),
            bodies_path,
            bodies: Some(bodies),
            lengths: Vec::new(),
        })
    }

    /// Appends the next frame (its `context` left empty); returns its encoded size in bytes.
    pub fn push_frame(&mut self, frame: &proto::Frame) -> std::io::Result<u64> {
        let body = frame.encode_to_vec();
        self.bodies
            .as_mut()
            .ok_or_else(|| std::io::Error::other("segment already finished"))?
            .write_all(&body)?;
        self.lengths.push(body.len() as u64);
        Ok(body.len() as u64)
    }

    /// Writes every frame with `context` as one record each, syncs and renames the segment into
    /// place; returns each record's size in bytes.
    pub fn finish(mut self, context: proto::Context) -> std::io::Result<Vec<u64>> {
        let bodies = self
            .bodies
            .take()
            .ok_or_else(|| std::io::Error::other("segment already finished"))?;
        bodies.into_inner().map_err(|e| e.into_error())?.flush()?;
        let context_field = proto::Frame {
            context: Some(context),
            ..Default::default()
        }
        .encode_to_vec();
        let bodies = File::open(&self.bodies_path)?;
        let partial = partial_path(&self.path);
        let mut writer = TfRecordWriter::new(BufWriter::new(File::create(&partial)?));
        let mut sizes = Vec::with_capacity(self.lengths.len());
        let mut offset = 0u64;
        let mut record = Vec::new();
        for &len in &self.lengths {
            let body_len = usize::try_from(len).map_err(|_| std::io::Error::other("frame too large"))?;
            record.clear();
            record.extend_from_slice(&context_field);
            let start = record.len();
            record.resize(start + body_len, 0);
            bodies.read_exact_at(&mut record[start..], offset)?;
            offset += len;
            writer.write_record(&record)?;
            sizes.push(record.len() as u64);
        }
        let finished = writer
            .finish()
            .and_then(|out| out.into_inner().map_err(|e| e.into_error()))
            .and_then(|file| file.sync_all())
            .and_then(|()| std::fs::rename(&partial, &self.path));
        if finished.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        finished?;
        Ok(sizes)
    }
}

impl Drop for SegmentWriter {
    fn drop(&mut self) {
        // The scratch bodies go in every case; an unfinished segment never got its final name.
        let _ = std::fs::remove_file(&self.bodies_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::OnCorrupt;
    use crate::sources::waymo::tfrecord::TfRecordReader;

    #[test]
    fn records_carry_the_context_first_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment-x.tfrecord");
        let mut w = SegmentWriter::create(&path).unwrap();
        for ts in [10, 20] {
            w.push_frame(&proto::Frame {
                timestamp_micros: Some(ts),
                ..Default::default()
            })
            .unwrap();
        }
        assert!(!path.exists(), "nothing under the final name before finish");
        let context = proto::Context {
            name: Some("x".into()),
            ..Default::default()
        };
        let sizes = w.finish(context.clone()).unwrap();
        assert_eq!(sizes.len(), 2);
        let reader = TfRecordReader::open(&path, OnCorrupt::Fail).unwrap();
        assert_eq!(reader.len(), 2);
        for (i, ts) in [10, 20].into_iter().enumerate() {
            let bytes = std::fs::read(&path).unwrap();
            let span = &reader.spans()[i];
            // Header: 8-byte length, 4-byte CRC; then the data.
            let start = span.offset as usize + 12;
            let frame = proto::Frame::decode(&bytes[start..start + span.len as usize]).unwrap();
            let whole = proto::Frame {
                context: Some(context.clone()),
                timestamp_micros: Some(ts),
                ..Default::default()
            };
            assert_eq!(frame, whole);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }

    #[test]
    fn an_unfinished_segment_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment-y.tfrecord");
        let mut w = SegmentWriter::create(&path).unwrap();
        w.push_frame(&proto::Frame::default()).unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
