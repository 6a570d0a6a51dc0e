//! Choosing the backends of a new component.
//!
//! The caller (the workload allocating a component when its first byte is
//! written) asks each candidate backend for its space and passes the figures
//! here, so this module stays free of stores and is tested with plain
//! numbers.

use crate::error::{Error, ErrorKind, Result};
use crate::striping::StripingConfig;

/// Space of one candidate backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendSpace {
    /// Index of the backend in the mount's backend list.
    pub backend: usize,
    pub total_bytes: u64,
    pub free_bytes: u64,
}

/// Picks `count` distinct backends for one component, starting the
/// round-robin at `rotor` (callers pass something that differs between
/// components and files, so stripe 0 does not always land on one backend).
/// Backends below the reserve are skipped; fewer than `count` left is
/// reported as no space.
pub fn choose_backends(
    candidates: &[BackendSpace],
    count: u32,
    config: &StripingConfig,
    rotor: u64,
) -> Result<Vec<usize>> {
    let usable: Vec<&BackendSpace> =
        candidates.iter().filter(|space| space.free_bytes > config.reserve_bytes).collect();
    if usable.is_empty() {
        return Err(Error::new(ErrorKind::NoSpace, "no backend has free space above the reserve"));
    }
    let count = (count as usize).min(usable.len());
    let start = (rotor % usable.len() as u64) as usize;
    Ok((0..count).map(|step| usable[(start + step) % usable.len()].backend).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_backends_skipping_full_ones() {
        let space = |backend, free| BackendSpace { backend, total_bytes: 100, free_bytes: free };
        let config = StripingConfig { reserve_bytes: 5, ..StripingConfig::default() };
        let chosen = choose_backends(&[space(0, 50), space(1, 3), space(2, 50), space(3, 50)], 4, &config, 1)
            .expect("space left");
        assert_eq!(chosen, vec![2, 3, 0]);
        let error = choose_backends(&[space(0, 1)], 1, &config, 0).expect_err("all below reserve");
        assert_eq!(error.kind(), ErrorKind::NoSpace);
    }
}
