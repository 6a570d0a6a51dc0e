//! Choosing the backends of a new component.
//!
//! The caller (the workload allocating a component when its first byte is
//! written) asks each candidate backend for its space and passes the figures
//! here, so this module stays free of stores and is tested with plain
//! numbers.
//!
//! The policy is Lustre's: round-robin while the backends' free space is
//! balanced, so stripes spread evenly and quickly; once the spread between
//! the emptiest and the fullest passes `imbalance_pct` of the largest
//! backend's size, a weighted pick by free space, so new data fills the
//! emptier backends and the spread shrinks again instead of one backend
//! filling up while others sit idle.

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

/// The backends (indexes into the mount's list) a component of `pool` may
/// use: all `backends` of the mount when it names no pool.
pub fn pool_backends(config: &StripingConfig, pool: Option<&str>, backends: usize) -> Result<Vec<usize>> {
    let Some(name) = pool else { return Ok((0..backends).collect()) };
    match config.pools.get(name) {
        Some(members) => Ok(members.clone()),
        None => {
            let known: Vec<&str> = config.pools.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            Err(Error::new(
                ErrorKind::InvalidInput,
                format!("layout: pool {name}: no such pool on this mount (pools: {known})"),
            ))
        }
    }
}

/// True once the free space is spread widely enough that placement weights
/// by it: (max free − min free) exceeds `imbalance_pct` percent of the
/// largest backend.
pub fn is_imbalanced(candidates: &[BackendSpace], imbalance_pct: u32) -> bool {
    let max_free = candidates.iter().map(|space| space.free_bytes).max().unwrap_or(0);
    let min_free = candidates.iter().map(|space| space.free_bytes).min().unwrap_or(0);
    let max_total = candidates.iter().map(|space| space.total_bytes).max().unwrap_or(0);
    u128::from(max_free - min_free) * 100 > u128::from(max_total) * u128::from(imbalance_pct)
}

/// Picks up to `count` distinct backends for one component (fewer when
/// fewer are usable, as Lustre creates fewer stripes when OSTs are
/// unavailable). `rotor` is something that differs between components and
/// files (so stripe 0 does not always land on one backend): it starts the
/// round-robin and seeds the weighted pick, so a choice is reproducible.
/// Backends with free space at or below the reserve are skipped; none left
/// is reported as no space.
pub fn choose_backends(
    candidates: &[BackendSpace],
    count: u32,
    config: &StripingConfig,
    rotor: u64,
) -> Result<Vec<usize>> {
    let mut usable: Vec<&BackendSpace> =
        candidates.iter().filter(|space| space.free_bytes > config.reserve_bytes).collect();
    if usable.is_empty() {
        return Err(Error::new(
            ErrorKind::NoSpace,
            format!(
                "no backend has free space above the reserve of {} bytes (candidates: {})",
                config.reserve_bytes,
                candidates.iter().map(|space| space.backend.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let count = (count as usize).min(usable.len());
    let owned: Vec<BackendSpace> = usable.iter().map(|space| **space).collect();
    if !is_imbalanced(&owned, config.imbalance_pct) {
        let start = (rotor % usable.len() as u64) as usize;
        return Ok((0..count).map(|step| usable[(start + step) % usable.len()].backend).collect());
    }
    // Weighted by the space above the reserve, drawn without replacement so
    // no backend serves two stripes of one component.
    let mut random = SplitMix(rotor);
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count {
        let weight = |space: &BackendSpace| u128::from(space.free_bytes - config.reserve_bytes);
        let total: u128 = usable.iter().map(|space| weight(space)).sum();
        let mut point = (u128::from(random.next()) << 64 | u128::from(random.next())) % total;
        let index = usable
            .iter()
            .position(|space| {
                let weight = weight(space);
                if point < weight {
                    return true;
                }
                point -= weight;
                false
            })
            .expect("the point lies below the total weight");
        chosen.push(usable.remove(index).backend);
    }
    Ok(chosen)
}

/// SplitMix64: a tiny, well-mixed generator, so consecutive rotors give
/// unrelated picks without a dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn space(backend: usize, free: u64) -> BackendSpace {
        BackendSpace { backend, total_bytes: 100, free_bytes: free }
    }

    #[test]
    fn distinct_backends_skipping_full_ones() {
        let config = StripingConfig { reserve_bytes: 5, ..StripingConfig::default() };
        let chosen = choose_backends(&[space(0, 50), space(1, 3), space(2, 50), space(3, 50)], 4, &config, 1)
            .expect("space left");
        assert_eq!(chosen, vec![2, 3, 0]);
        let error = choose_backends(&[space(0, 1), space(1, 5)], 1, &config, 0).expect_err("all at or below");
        assert_eq!(error.kind(), ErrorKind::NoSpace);
        assert!(error.to_string().contains("reserve of 5 bytes (candidates: 0, 1)"), "{error}");
    }

    #[test]
    fn balanced_backends_take_turns_evenly() {
        let config = StripingConfig::default();
        // A spread of 3% of the size is below the 17% threshold.
        let backends = [space(0, 50), space(1, 52), space(2, 49), space(3, 51)];
        let mut counts = [0; 4];
        for rotor in 0..1000 {
            for backend in choose_backends(&backends, 1, &config, rotor).unwrap() {
                counts[backend] += 1;
            }
        }
        assert_eq!(counts, [250; 4]);
    }

    #[test]
    fn unequal_free_space_fills_the_emptier_backends_in_proportion() {
        let config = StripingConfig::default();
        let backends = [space(0, 10), space(1, 40), space(2, 40), space(3, 90)];
        assert!(is_imbalanced(&backends, config.imbalance_pct));
        let mut counts = [0u32; 4];
        for rotor in 0..1000 {
            for backend in choose_backends(&backends, 1, &config, rotor).unwrap() {
                counts[backend] += 1;
            }
        }
        // Expected 1000 * free / 180: 56, 222, 222, 500 (within 20%).
        for (backend, expected) in [(0, 56.0), (1, 222.0), (2, 222.0), (3, 500.0)] {
            let got = f64::from(counts[backend]);
            assert!((got - expected).abs() <= expected * 0.2, "backend {backend}: {counts:?}");
        }
        // The same rotor chooses the same backends.
        assert_eq!(
            choose_backends(&backends, 3, &config, 7).unwrap(),
            choose_backends(&backends, 3, &config, 7).unwrap()
        );
    }

    #[test]
    fn weighted_components_never_reuse_a_backend_and_honour_the_reserve() {
        let config = StripingConfig { reserve_bytes: 15, ..StripingConfig::default() };
        let backends = [space(0, 10), space(1, 40), space(2, 40), space(3, 90), space(4, 60)];
        let mut first_stripe = BTreeMap::new();
        for rotor in 0..500 {
            let chosen = choose_backends(&backends, 3, &config, rotor).unwrap();
            let mut sorted = chosen.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "{chosen:?}");
            assert!(!chosen.contains(&0), "backend 0 is below the reserve: {chosen:?}");
            *first_stripe.entry(chosen[0]).or_insert(0) += 1;
        }
        // The emptiest backend leads most often.
        let leader = first_stripe.iter().max_by_key(|(_, count)| **count).map(|(backend, _)| *backend);
        assert_eq!(leader, Some(3), "{first_stripe:?}");
        // Asking for more than there are gives every usable one once.
        let mut all = choose_backends(&backends, 9, &config, 3).unwrap();
        all.sort_unstable();
        assert_eq!(all, vec![1, 2, 3, 4]);
    }

    #[test]
    fn pools_restrict_the_candidates() {
        let mut config = StripingConfig::default();
        config.pools.insert("fast".to_owned(), vec![1, 3]);
        assert_eq!(pool_backends(&config, None, 3).unwrap(), vec![0, 1, 2]);
        assert_eq!(pool_backends(&config, Some("fast"), 4).unwrap(), vec![1, 3]);
        let error = pool_backends(&config, Some("slow"), 4).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(error.to_string().contains("pool slow: no such pool on this mount (pools: fast)"), "{error}");
    }
}
