//! Shared builders for the geometry tests: proptest strategies for boxes and rigid motions.

use nalgebra::Isometry3;
use proptest::prelude::*;
use std::f64::consts::PI;

use super::Box3;

/// Yaw-only boxes with centres close enough that about half of the pairs overlap.
pub(crate) fn box_7dof() -> impl Strategy<Value = Box3> {
    (-2.0..2.0, -2.0..2.0, -1.0..1.0, 0.2..5.0, 0.2..3.0, 0.2..2.5, -PI..PI)
        .prop_map(|(x, y, z, l, w, h, yaw)| Box3::new(x, y, z, l, w, h, yaw))
}

/// Boxes of any orientation, centres close enough that about half of the pairs overlap.
pub(crate) fn box_9dof() -> impl Strategy<Value = Box3> {
    (box_7dof(), -PI / 2.0..PI / 2.0, -PI..PI).prop_map(|(b, pitch, roll)| Box3 { pitch, roll, ..b })
}

/// `b` turned by `angle` about the world z axis, then moved by `(dx, dy)`.
pub(crate) fn rotate_about_z(b: &Box3, angle: f64, dx: f64, dy: f64) -> Box3 {
    let (s, c) = angle.sin_cos();
    Box3 {
        x: c * b.x - s * b.y + dx,
        y: s * b.x + c * b.y + dy,
        yaw: b.yaw + angle,
        ..*b
    }
}

/// `b` moved by a rigid motion.
pub(crate) fn transform_box(b: &Box3, motion: &Isometry3<f64>) -> Box3 {
    b.transformed(motion)
}

/// A tiny seeded generator (SplitMix64) for reproducible random loops outside proptest.
pub(crate) struct SeededRng(u64);

impl SeededRng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
}
