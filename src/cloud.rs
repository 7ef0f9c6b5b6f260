//! `PointCloud`: one sweep's points as a structure of arrays (x, y, z, intensity and optional
//! named channels such as ring, range or per-point time). It knows no sensor or file format.

use nalgebra::{Isometry3, Point3};
use thiserror::Error;

/// Errors building or editing a point cloud.
#[derive(Debug, Error, PartialEq)]
pub enum CloudError {
    /// A column's length differs from the cloud's point count.
    #[error("channel `{name}`: expected {expected} values, got {actual}")]
    LengthMismatch {
        /// The column's name (`x`, `y`, `z`, `intensity` or a channel name).
        name: String,
        /// The cloud's point count.
        expected: usize,
        /// The column's length.
        actual: usize,
    },
    /// A channel of this name exists already.
    #[error("channel `{0}` already exists")]
    DuplicateChannel(String),
}

/// The values of one named per-point channel.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelData {
    /// 32-bit floats (range in m, elongation, signal).
    F32(Vec<f32>),
    /// 8-bit unsigned integers (laser id, return index, flags).
    U8(Vec<u8>),
    /// 16-bit unsigned integers (ring, column, reflectivity).
    U16(Vec<u16>),
    /// 32-bit unsigned integers (raw signal or near-IR counts).
    U32(Vec<u32>),
    /// 64-bit signed integers (per-point timestamps in µs).
    I64(Vec<i64>),
}

impl ChannelData {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            ChannelData::F32(v) => v.len(),
            ChannelData::U8(v) => v.len(),
            ChannelData::U16(v) => v.len(),
            ChannelData::U32(v) => v.len(),
            ChannelData::I64(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The short type name (`f32`, `u8`, …) for summaries.
    pub fn type_name(&self) -> &'static str {
        match self {
            ChannelData::F32(_) => "f32",
            ChannelData::U8(_) => "u8",
            ChannelData::U16(_) => "u16",
            ChannelData::U32(_) => "u32",
            ChannelData::I64(_) => "i64",
        }
    }

    fn select(&self, keep: &[bool]) -> ChannelData {
        fn pick<T: Copy>(v: &[T], keep: &[bool]) -> Vec<T> {
            v.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect()
        }
        match self {
            ChannelData::F32(v) => ChannelData::F32(pick(v, keep)),
            ChannelData::U8(v) => ChannelData::U8(pick(v, keep)),
            ChannelData::U16(v) => ChannelData::U16(pick(v, keep)),
            ChannelData::U32(v) => ChannelData::U32(pick(v, keep)),
            ChannelData::I64(v) => ChannelData::I64(pick(v, keep)),
        }
    }
}

/// One sweep's points in a structure-of-arrays layout, in metres in the frame its owner names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointCloud {
    x: Vec<f32>,
    y: Vec<f32>,
    z: Vec<f32>,
    intensity: Vec<f32>,
    /// Extra channels in insertion order (deterministic output order).
    channels: Vec<(String, ChannelData)>,
}

impl PointCloud {
    /// An empty cloud.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cloud from its four base columns; all must have the same length.
    pub fn from_columns(x: Vec<f32>, y: Vec<f32>, z: Vec<f32>, intensity: Vec<f32>) -> Result<Self, CloudError> {
        let n = x.len();
        for (name, len) in [("y", y.len()), ("z", z.len()), ("intensity", intensity.len())] {
            if len != n {
                return Err(CloudError::LengthMismatch {
                    name: name.into(),
                    expected: n,
                    actual: len,
                });
            }
        }
        Ok(Self {
            x,
            y,
            z,
            intensity,
            channels: Vec::new(),
        })
    }

    /// Adds a named channel, which must have one value per point and a new name.
    pub fn add_channel(&mut self, name: impl Into<String>, data: ChannelData) -> Result<(), CloudError> {
        let name = name.into();
        if data.len() != self.len() {
            return Err(CloudError::LengthMismatch {
                name,
                expected: self.len(),
                actual: data.len(),
            });
        }
        if self.channel(&name).is_some() {
            return Err(CloudError::DuplicateChannel(name));
        }
        self.channels.push((name, data));
        Ok(())
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Whether the cloud has no points.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// x coordinates (m).
    pub fn x(&self) -> &[f32] {
        &self.x
    }

    /// y coordinates (m).
    pub fn y(&self) -> &[f32] {
        &self.y
    }

    /// z coordinates (m).
    pub fn z(&self) -> &[f32] {
        &self.z
    }

    /// Intensities, in the source's own scale (documented by each source).
    pub fn intensity(&self) -> &[f32] {
        &self.intensity
    }

    /// A named channel, if present.
    pub fn channel(&self, name: &str) -> Option<&ChannelData> {
        self.channels.iter().find(|(n, _)| n == name).map(|(_, d)| d)
    }

    /// The extra channels in insertion order.
    pub fn channels(&self) -> impl Iterator<Item = (&str, &ChannelData)> {
        self.channels.iter().map(|(n, d)| (n.as_str(), d))
    }

    /// Point `i` as f64 coordinates.
    pub fn point(&self, i: usize) -> Point3<f64> {
        Point3::new(self.x[i] as f64, self.y[i] as f64, self.z[i] as f64)
    }

    /// The points (and every channel) where `keep` is true; `keep` has one flag per point.
    pub fn select(&self, keep: &[bool]) -> Result<PointCloud, CloudError> {
        if keep.len() != self.len() {
            return Err(CloudError::LengthMismatch {
                name: "mask".into(),
                expected: self.len(),
                actual: keep.len(),
            });
        }
        let pick = |v: &[f32]| -> Vec<f32> { v.iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| *x).collect() };
        Ok(PointCloud {
            x: pick(&self.x),
            y: pick(&self.y),
            z: pick(&self.z),
            intensity: pick(&self.intensity),
            channels: self.channels.iter().map(|(n, d)| (n.clone(), d.select(keep))).collect(),
        })
    }

    /// Moves every point by `target_from_source` (computed in f64, stored as f32).
    pub fn transform(&mut self, target_from_source: &Isometry3<f64>) {
        let m = target_from_source.to_homogeneous();
        for i in 0..self.len() {
            let (px, py, pz) = (self.x[i] as f64, self.y[i] as f64, self.z[i] as f64);
            self.x[i] = (m[(0, 0)] * px + m[(0, 1)] * py + m[(0, 2)] * pz + m[(0, 3)]) as f32;
            self.y[i] = (m[(1, 0)] * px + m[(1, 1)] * py + m[(1, 2)] * pz + m[(1, 3)]) as f32;
            self.z[i] = (m[(2, 0)] * px + m[(2, 1)] * py + m[(2, 2)] * pz + m[(2, 3)]) as f32;
        }
    }

    /// Axis-aligned bounds `(min, max)` of the points, or `None` when empty.
    pub fn bounds(&self) -> Option<([f32; 3], [f32; 3])> {
        if self.is_empty() {
            return None;
        }
        let mut lo = [f32::INFINITY; 3];
        let mut hi = [f32::NEG_INFINITY; 3];
        for i in 0..self.len() {
            for (k, v) in [self.x[i], self.y[i], self.z[i]].into_iter().enumerate() {
                lo[k] = lo[k].min(v);
                hi[k] = hi[k].max(v);
            }
        }
        Some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Vector3;

    fn cloud3() -> PointCloud {
        PointCloud::from_columns(
            vec![1.0, 2.0, 3.0],
            vec![0.0; 3],
            vec![-1.0, 0.0, 1.0],
            vec![5.0, 6.0, 7.0],
        )
        .unwrap()
    }

    #[test]
    fn rejects_ragged_columns() {
        let e = PointCloud::from_columns(vec![1.0], vec![1.0, 2.0], vec![1.0], vec![1.0]).unwrap_err();
        assert_eq!(
            e,
            CloudError::LengthMismatch {
                name: "y".into(),
                expected: 1,
                actual: 2
            }
        );
        let mut c = cloud3();
        assert!(c.add_channel("ring", ChannelData::U16(vec![1, 2])).is_err());
        c.add_channel("ring", ChannelData::U16(vec![1, 2, 3])).unwrap();
        assert_eq!(
            c.add_channel("ring", ChannelData::U16(vec![1, 2, 3])),
            Err(CloudError::DuplicateChannel("ring".into()))
        );
    }

    #[test]
    fn select_keeps_channels_aligned() {
        let mut c = cloud3();
        c.add_channel("ring", ChannelData::U16(vec![10, 11, 12])).unwrap();
        let s = c.select(&[true, false, true]).unwrap();
        assert_eq!(s.x(), &[1.0, 3.0]);
        assert_eq!(s.intensity(), &[5.0, 7.0]);
        assert_eq!(s.channel("ring"), Some(&ChannelData::U16(vec![10, 12])));
    }

    #[test]
    fn transform_and_bounds() {
        let mut c = cloud3();
        c.transform(&Isometry3::new(
            Vector3::new(0.0, 0.0, 10.0),
            Vector3::new(0.0, 0.0, std::f64::consts::FRAC_PI_2),
        ));
        // (1,0,-1) rotated 90° about z -> (0,1,-1), then +10 in z.
        assert!((c.x()[0] - 0.0).abs() < 1e-6 && (c.y()[0] - 1.0).abs() < 1e-6 && (c.z()[0] - 9.0).abs() < 1e-6);
        let (lo, hi) = c.bounds().unwrap();
        assert_eq!(lo[2], 9.0);
        assert_eq!(hi[2], 11.0);
        assert!(PointCloud::new().bounds().is_none());
    }
}
