//! A seeded xorshift source of uniform floats for the detect unit tests (test builds only).

/// Uniform values in [0, 1) from a 64-bit xorshift generator started at `seed` (non-zero).
pub(crate) fn unit_floats(seed: u64) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    }
}
