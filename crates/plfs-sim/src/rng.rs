//! The one source of randomness of a run: PCG64 seeded from the run's seed.

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;

pub struct SimRng(Pcg64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(Pcg64::seed_from_u64(seed))
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}
