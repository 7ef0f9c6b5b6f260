//! SplitMix64, a tiny seeded generator shared by the integration tests, so random cases are
//! reproducible without extra crates. Each test binary uses part of it.
#![allow(dead_code)]

/// SplitMix64 state.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Normal with mean 0 and standard deviation `std` (Box–Muller).
    pub fn normal(&mut self, std: f64) -> f64 {
        let (u1, u2) = (self.uniform(0.0, 1.0).max(1e-12), self.uniform(0.0, 1.0));
        std * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
