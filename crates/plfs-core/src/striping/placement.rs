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
//!
//! The round-robin goes over the backends with the most free space (within
//! [`NEAR_TIE_PCT`] of the emptiest one's free space), taken in turn by the
//! mount's rotor, then the rest emptiest first. Lustre's rotor
//! over every OST is fair in objects but not in bytes when file sizes mix;
//! a start picked by the file's name was neither, so usage wandered up to
//! the imbalance threshold before anything pulled it back. Near-ties keep
//! concurrent creators apart: files created at once see the same free
//! space, and without the tie band would all pick the one backend a few
//! bytes emptier than the rest. The band is a share of the free space left,
//! not of the backends' size: wide while there is room (where taking turns
//! costs nothing), it narrows as the backends fill, so the last free
//! space is shared out by how much each backend has left and the spread at
//! the end of a fill shrinks with it (a band of 1% of the size kept up to
//! that much, and usage ended uniformly spread within it).
//!
//! Among equally empty backends, those holding fewer of this file's bytes
//! (from its earlier components, [`component_bytes`]) come first. A
//! progressive layout's components are placed one at a time; taken by the
//! rotor alone, a file's first components can land on the backends its
//! striped component then gives the extra stripe, so one backend carries
//! a stripe more of the file than another (5, 3, 4 and 4 MiB of a 16 MiB
//! file on four backends, where 4 each is possible) and a shared file's
//! writes and reads wait on that one backend.

use crate::error::{Error, ErrorKind, Result};
use crate::striping::{Component, StripingConfig};

/// Space of one candidate backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendSpace {
    /// Index of the backend in the mount's backend list.
    pub backend: usize,
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// Bytes of the file being placed that its other components put on
    /// this backend ([`component_bytes`]): among backends equally empty,
    /// the fewest first.
    pub file_bytes: u64,
}

/// The bytes each of a placed component's `stripes` backends carries, in
/// stripe order, once the file reaches the component's end (components are
/// placed in order, so the ones before the component being placed are
/// bounded and, but for holes, full). The last component, which may run
/// to EOF, is never before another: it counts nothing.
pub fn component_bytes(component: &Component, stripes: usize) -> Vec<u64> {
    let stripes = stripes.max(1) as u64;
    let size = component.stripe_size;
    let Some(end) = component.end else { return vec![0; stripes as usize] };
    let length = end.saturating_sub(component.start);
    let (units, partial) = (length / size, length % size);
    (0..stripes)
        .map(|stripe| {
            let whole = units / stripes + u64::from(stripe < units % stripes);
            whole * size + if units % stripes == stripe { partial } else { 0 }
        })
        .collect()
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

/// Backends whose free space is within this percentage of the emptiest
/// one's free space count as equally empty: the round-robin takes them in
/// turn. Small enough that usage stays within about this much of the free
/// space left of even (the weighted pick only starts at `imbalance_pct`),
/// large enough that the free-space noise of other users and of writes
/// still in flight does not send every new file to one backend while
/// there is room to spare.
pub const NEAR_TIE_PCT: u64 = 1;

/// Picks up to `count` distinct backends for one component (fewer when
/// fewer are usable, as Lustre creates fewer stripes when OSTs are
/// unavailable). `rotor` is the mount's turn counter (one step per
/// component placed, so consecutive components and files take the
/// equally empty backends in turn); it also seeds the weighted pick, so a
/// choice is reproducible from the same figures and rotor.
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
        return Ok(emptiest_in_turn(&owned, count, rotor));
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

/// The balanced pick: the backends within the near-tie band of the most
/// free space (a share of that free space, [`NEAR_TIE_PCT`]), the fewest of
/// this file's bytes first and in the candidates' order rotated by `rotor`
/// among equals, then the others emptiest first (ties by position), the
/// first `count` of those.
fn emptiest_in_turn(usable: &[BackendSpace], count: usize, rotor: u64) -> Vec<usize> {
    let max_free = usable.iter().map(|space| space.free_bytes).max().unwrap_or(0);
    let band = u64::try_from(u128::from(max_free) * u128::from(NEAR_TIE_PCT) / 100).unwrap_or(u64::MAX);
    let (mut leaders, mut rest): (Vec<&BackendSpace>, Vec<&BackendSpace>) =
        usable.iter().partition(|space| space.free_bytes.saturating_add(band) >= max_free);
    let start = (rotor % leaders.len() as u64) as usize;
    leaders.rotate_left(start);
    leaders.sort_by_key(|space| space.file_bytes);
    // A stable sort keeps the candidates' order among equal figures.
    rest.sort_by_key(|space| std::cmp::Reverse(space.free_bytes));
    leaders.into_iter().chain(rest).take(count).map(|space| space.backend).collect()
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
        BackendSpace { backend, total_bytes: 100, free_bytes: free, file_bytes: 0 }
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

    fn sized(backend: usize, total: u64, free: u64) -> BackendSpace {
        BackendSpace { backend, total_bytes: total, free_bytes: free, file_bytes: 0 }
    }

    #[test]
    fn equally_empty_backends_take_turns_evenly() {
        let config = StripingConfig::default();
        // A spread of 0.9% of the most free space is inside the 1% near-tie band.
        let backends = [sized(0, 1000, 500), sized(1, 1000, 503), sized(2, 1000, 498), sized(3, 1000, 502)];
        let mut counts = [0; 4];
        for rotor in 0..1000 {
            for backend in choose_backends(&backends, 1, &config, rotor).unwrap() {
                counts[backend] += 1;
            }
        }
        assert_eq!(counts, [250; 4]);
        // Consecutive turns go round the backends, not by a hash.
        let turns: Vec<usize> =
            (0..4).map(|rotor| choose_backends(&backends, 1, &config, rotor).unwrap()[0]).collect();
        assert_eq!(turns, vec![0, 1, 2, 3]);
    }

    #[test]
    fn balanced_backends_give_the_emptiest_first_whatever_the_turn() {
        let config = StripingConfig::default();
        // A spread of 10% is below the 17% threshold, so no weighting, but
        // backend 2 is emptier than the others by more than the band.
        let backends = [sized(0, 1000, 500), sized(1, 1000, 560), sized(2, 1000, 600), sized(3, 1000, 530)];
        assert!(!is_imbalanced(&backends, config.imbalance_pct));
        for rotor in 0..20 {
            assert_eq!(choose_backends(&backends, 1, &config, rotor).unwrap(), vec![2], "rotor {rotor}");
            // More stripes than leaders: the rest emptiest first.
            assert_eq!(
                choose_backends(&backends, 3, &config, rotor).unwrap(),
                vec![2, 1, 3],
                "rotor {rotor}"
            );
        }
        // Two leaders in the band take stripe 0 in turn.
        let backends = [sized(0, 1000, 500), sized(1, 1000, 595), sized(2, 1000, 600), sized(3, 1000, 530)];
        assert_eq!(choose_backends(&backends, 2, &config, 0).unwrap(), vec![1, 2]);
        assert_eq!(choose_backends(&backends, 2, &config, 1).unwrap(), vec![2, 1]);
    }

    #[test]
    fn the_near_tie_band_narrows_as_the_backends_fill() {
        let config = StripingConfig::default();
        // Nearly empty: 0.9% of the free space apart, the three take turns.
        let roomy = [sized(0, 1000, 990), sized(1, 1000, 999), sized(2, 1000, 995)];
        let turns: Vec<usize> =
            (0..3).map(|rotor| choose_backends(&roomy, 1, &config, rotor).unwrap()[0]).collect();
        assert_eq!(turns, vec![0, 1, 2]);
        // Nearly full, the same 9 units apart are 9% of what is left: the
        // emptiest leads, then the next emptiest, whatever the turn. (A band
        // of 1% of the size, 10 units, took them in turn here too, so usage
        // ended anywhere within it.)
        let full = [sized(0, 1000, 91), sized(1, 1000, 100), sized(2, 1000, 96)];
        for rotor in 0..6 {
            assert_eq!(choose_backends(&full, 2, &config, rotor).unwrap(), vec![1, 2], "rotor {rotor}");
        }
    }

    #[test]
    fn a_components_bytes_per_stripe() {
        const MIB: u64 = 1 << 20;
        let component = |start, end, size| Component {
            start,
            end,
            stripe_count: crate::striping::StripeCount::All,
            stripe_size: size,
            pool: None,
        };
        // 1 MiB over two stripes of 1 MiB: all on the first.
        assert_eq!(component_bytes(&component(MIB, Some(2 * MIB), MIB), 2), vec![MIB, 0]);
        // 7 units over 3 stripes: 3, 2, 2.
        assert_eq!(component_bytes(&component(0, Some(7 * MIB), MIB), 3), vec![3 * MIB, 2 * MIB, 2 * MIB]);
        assert_eq!(component_bytes(&component(0, Some(4 * MIB), 2 * MIB), 1), vec![4 * MIB]);
        // To EOF: never before another component, so it counts nothing.
        assert_eq!(component_bytes(&component(0, None, 4 * MIB), 2), vec![0, 0]);
    }

    #[test]
    fn equally_empty_backends_holding_less_of_the_file_come_first() {
        let config = StripingConfig::default();
        let with_file = |backend, file_bytes| BackendSpace { file_bytes, ..sized(backend, 1000, 500) };
        // The file has a stripe on 1 and 2 already: they take the last
        // turns, whatever the rotor; 0 and 3 go first in the rotor's order.
        let backends = [with_file(0, 0), with_file(1, 10), with_file(2, 10), with_file(3, 0)];
        for rotor in 0..8 {
            let chosen = choose_backends(&backends, 4, &config, rotor).unwrap();
            let (first, last): (Vec<usize>, Vec<usize>) = (chosen[..2].to_vec(), chosen[2..].to_vec());
            assert!(first.contains(&0) && first.contains(&3), "rotor {rotor}: {chosen:?}");
            assert!(last.contains(&1) && last.contains(&2), "rotor {rotor}: {chosen:?}");
        }
        // Free space still comes first: an emptier backend leads even if
        // the file has bytes there.
        let backends = [with_file(0, 0), BackendSpace { file_bytes: 10, ..sized(1, 1000, 600) }];
        assert_eq!(choose_backends(&backends, 1, &config, 0).unwrap(), vec![1]);
    }

    /// Files of mixed sizes placed one after another, each on the backends
    /// the choice gives, with the backends' free space updated as they
    /// fill: what `plfs bench placement` does with real file systems.
    /// Returns the final usage of every backend in percent.
    fn fill(mut choose: impl FnMut(&[BackendSpace], u32, u64) -> Vec<usize>) -> Vec<f64> {
        const TOTAL: u64 = 64 << 20;
        let mut free = [TOTAL; 8];
        let mut random = SplitMix(42);
        let mut rotor = 0;
        loop {
            // 70% small (one stripe), 20% medium over 2, 9% large over 4,
            // 1% huge over all 8; stripes of 64 KiB.
            let (bytes, count): (u64, u32) = match random.next() % 100 {
                0..70 => (64 << 10, 1),
                70..90 => (256 << 10, 2),
                90..99 => (2 << 20, 4),
                _ => (8 << 20, 8),
            };
            let spaces: Vec<BackendSpace> =
                free.iter().enumerate().map(|(backend, &free)| sized(backend, TOTAL, free)).collect();
            let chosen = choose(&spaces, count, rotor);
            rotor += 1;
            let share = bytes / chosen.len() as u64;
            if chosen.iter().any(|&backend| free[backend] < share) {
                break;
            }
            for backend in chosen {
                free[backend] -= share;
            }
        }
        free.iter().map(|&free| 100.0 * (TOTAL - free) as f64 / TOTAL as f64).collect()
    }

    fn std_dev(values: &[f64]) -> f64 {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        (values.iter().map(|value| (value - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
    }

    #[test]
    fn many_files_of_mixed_sizes_fill_the_backends_evenly() {
        let config = StripingConfig::default();
        let usage = fill(|spaces, count, rotor| choose_backends(spaces, count, &config, rotor).unwrap());
        // Filled until some stripe found no room: every backend nearly full,
        // within a large file's share of each other.
        assert!(usage.iter().all(|&used| used > 85.0), "{usage:?}");
        assert!(std_dev(&usage) < 1.0, "usage {usage:?}, std-dev {}", std_dev(&usage));
        // A start picked by a hash (what placement did before) wanders up
        // to the imbalance threshold: the test tells the two apart.
        let hashed = fill(|spaces, count, rotor| {
            let start = (SplitMix(rotor).next() % spaces.len() as u64) as usize;
            (0..count as usize).map(|step| (start + step) % spaces.len()).collect()
        });
        assert!(std_dev(&hashed) > 2.0 * std_dev(&usage), "hashed {hashed:?} against {usage:?}");
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
