//! Striping layouts (progressive file layouts): how one file's logical bytes
//! are spread over the mount's backends.
//!
//! A [`Layout`] is an ordered list of [`Component`]s that tile the file from
//! offset 0: each covers an extent `[start, end)` (the last may run to EOF)
//! and deals its extent out round-robin, `stripe_size` bytes at a time, over
//! `stripe_count` backends. One component over the whole file is ordinary
//! striping; several make a progressive layout, where a file's first bytes
//! stay on few backends and its later bytes spread over more, so small files
//! stay one object and large shared files get every backend's bandwidth.
//!
//! This module holds only the value types and the offset → component →
//! stripe arithmetic; it knows nothing of stores, so it sits at the bottom of
//! the core beside the other value types.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

pub mod placement;
pub mod syntax;

/// The extended attribute holding a directory's layout template or a new
/// file's layout, in `lfs setstripe` text ([`syntax`]).
pub const LAYOUT_XATTR: &str = "user.plfs.layout";

/// Stripe sizes and component boundaries are multiples of this.
pub const STRIPE_UNIT: u64 = 64 * 1024;

/// How many backends one component stripes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StripeCount {
    /// Exactly this many (at least 1); fewer when the pool has fewer backends.
    Count(u32),
    /// Every backend of the pool (`-c -1`).
    All,
}

impl StripeCount {
    /// The number of stripes on a pool of `available` backends.
    pub fn resolve(self, available: u32) -> u32 {
        match self {
            StripeCount::Count(count) => count.min(available).max(1),
            StripeCount::All => available.max(1),
        }
    }
}

/// One extent of a layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Component {
    /// First logical byte (a multiple of `stripe_size`).
    pub start: u64,
    /// One past the last logical byte; `None` runs to EOF (only the last component).
    pub end: Option<u64>,
    pub stripe_count: StripeCount,
    /// Bytes dealt to one backend before moving to the next (a multiple of [`STRIPE_UNIT`]).
    pub stripe_size: u64,
    /// A named subset of the mount's backends; `None` is all of them.
    pub pool: Option<String>,
}

impl Component {
    fn contains(&self, offset: u64) -> bool {
        offset >= self.start && self.end.is_none_or(|end| offset < end)
    }
}

/// The layout of new files on a mount whose plfsrc names none (see
/// [`StripingConfig::mount_default`]): the first MiB on one backend, so a
/// small file is one data object; up to 64 MiB on four; beyond, on every
/// backend, so a large shared file gets the whole mount's bandwidth. The
/// paper's Table 2 thresholds (1 MB, 64 MB) on Lustre's 1 MiB stripe.
pub const DEFAULT_LAYOUT: &str = "-E 1M -c 1 -E 64M -c 4 -E -1 -c -1";

/// A mount's striping settings (plfsrc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripingConfig {
    /// Layout of files created where no directory template applies;
    /// `None` keeps the pre-layout placement (one hostdir backend per host).
    /// A mount with a single backend that holds logs ignores it: there is
    /// nothing to spread over, and a layout would only add its records.
    pub default_layout: Option<Layout>,
    /// Named subsets of the mount's backends, by index into its backend list.
    pub pools: BTreeMap<String, Vec<usize>>,
    /// Free-space imbalance (percent of the fullest backend's size) past
    /// which placement weights by free space instead of going round-robin.
    pub imbalance_pct: u32,
    /// A backend with fewer free bytes than this gets no new stripes.
    pub reserve_bytes: u64,
    /// Where the mount's placement rotor starts. `None` (every plfsrc
    /// mount): from the host and process, so processes creating files at
    /// once begin on different backends. A fixed start makes one process's
    /// placements reproducible from run to run (`plfs bench placement`
    /// sets it from `--seed`); not a plfsrc key.
    pub rotor_start: Option<u64>,
}

impl StripingConfig {
    /// What a mount configuration gets when it names no layout
    /// (plfsrc without `default_layout`, [`crate::config::MountConfig::new`]):
    /// [`DEFAULT_LAYOUT`]. [`Default`] is the library's bare mount
    /// (`Plfs::new`), which keeps the pre-layout placement.
    pub fn mount_default() -> StripingConfig {
        let layout = DEFAULT_LAYOUT.parse().expect("DEFAULT_LAYOUT is a valid layout");
        StripingConfig { default_layout: Some(layout), ..StripingConfig::default() }
    }
}

impl Default for StripingConfig {
    fn default() -> StripingConfig {
        // 17% is Lustre's default `qos_threshold_rr`.
        StripingConfig {
            default_layout: None,
            pools: BTreeMap::new(),
            imbalance_pct: 17,
            reserve_bytes: 0,
            rotor_start: None,
        }
    }
}

/// Where one logical byte goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StripeLocation {
    /// Index of the component in the layout.
    pub component: usize,
    /// Stripe within the component, `0..stripe_count.resolve(pool size)`.
    pub stripe: u32,
    /// First logical offset past this stripe unit: every byte in
    /// `[offset, unit_end)` has the same location, so a write can be split
    /// at these boundaries and each piece appended to one log.
    pub unit_end: u64,
}

/// A validated layout: components tile `[0, end)` without gaps or overlap,
/// every boundary is aligned to its component's stripe size, and only the
/// last component may run to EOF.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    components: Vec<Component>,
}

impl Layout {
    pub fn new(components: Vec<Component>) -> Result<Layout> {
        if components.is_empty() {
            return Err(Error::invalid("layout: no components"));
        }
        let mut expected_start = 0u64;
        let last = components.len() - 1;
        for (index, component) in components.iter().enumerate() {
            let name = || format!("layout component {} (starting at {})", index + 1, component.start);
            if component.stripe_size == 0 || !component.stripe_size.is_multiple_of(STRIPE_UNIT) {
                return Err(Error::invalid(format!(
                    "{}: stripe size {} is not a positive multiple of 64 KiB",
                    name(),
                    component.stripe_size
                )));
            }
            if component.stripe_count == StripeCount::Count(0) {
                return Err(Error::invalid(format!("{}: stripe count 0", name())));
            }
            if component.start != expected_start {
                return Err(Error::invalid(format!(
                    "{}: starts at {} but the previous component ends at {expected_start}",
                    name(),
                    component.start
                )));
            }
            if !component.start.is_multiple_of(component.stripe_size) {
                return Err(Error::invalid(format!(
                    "{}: start {} is not a multiple of the stripe size {}",
                    name(),
                    component.start,
                    component.stripe_size
                )));
            }
            match component.end {
                None if index != last => {
                    return Err(Error::invalid(format!(
                        "{}: only the last component may run to EOF",
                        name()
                    )));
                }
                None => {}
                Some(end) => {
                    if end <= component.start || !end.is_multiple_of(component.stripe_size) {
                        return Err(Error::invalid(format!(
                            "{}: end {end} is not past the start and a multiple of the stripe size {}",
                            name(),
                            component.stripe_size
                        )));
                    }
                    expected_start = end;
                }
            }
            if let Some(pool) = &component.pool
                && pool.is_empty()
            {
                return Err(Error::invalid(format!("{}: empty pool name", name())));
            }
        }
        Ok(Layout { components })
    }

    /// Ordinary striping: one component over the whole file.
    pub fn striped(stripe_count: StripeCount, stripe_size: u64) -> Result<Layout> {
        Layout::new(vec![Component { start: 0, end: None, stripe_count, stripe_size, pool: None }])
    }

    pub fn components(&self) -> &[Component] {
        &self.components
    }

    /// One past the last byte the layout can hold (`None`: unbounded).
    pub fn end(&self) -> Option<u64> {
        self.components.last().and_then(|component| component.end)
    }

    /// Where logical byte `offset` goes, given the size of each component's
    /// pool (`pool_size(component)`), or `None` past the layout's end.
    pub fn locate(&self, offset: u64, pool_size: impl Fn(&Component) -> u32) -> Option<StripeLocation> {
        let index = self.components.iter().position(|component| component.contains(offset))?;
        let component = &self.components[index];
        let stripes = u64::from(component.stripe_count.resolve(pool_size(component)));
        let unit = (offset - component.start) / component.stripe_size;
        let unit_end = component.start.saturating_add((unit + 1).saturating_mul(component.stripe_size));
        let unit_end = component.end.map_or(unit_end, |end| unit_end.min(end));
        Some(StripeLocation { component: index, stripe: (unit % stripes) as u32, unit_end })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn progressive() -> Layout {
        Layout::new(vec![
            Component {
                start: 0,
                end: Some(MIB),
                stripe_count: StripeCount::Count(1),
                stripe_size: MIB,
                pool: None,
            },
            Component {
                start: MIB,
                end: Some(64 * MIB),
                stripe_count: StripeCount::Count(4),
                stripe_size: MIB,
                pool: None,
            },
            Component {
                start: 64 * MIB,
                end: None,
                stripe_count: StripeCount::All,
                stripe_size: 4 * MIB,
                pool: None,
            },
        ])
        .expect("valid layout")
    }

    #[test]
    fn offsets_map_to_component_stripe_and_unit_end() {
        let layout = progressive();
        let six = |_: &Component| 6;
        assert_eq!(layout.locate(0, six), Some(StripeLocation { component: 0, stripe: 0, unit_end: MIB }));
        assert_eq!(
            layout.locate(MIB, six),
            Some(StripeLocation { component: 1, stripe: 0, unit_end: 2 * MIB })
        );
        assert_eq!(
            layout.locate(5 * MIB + 7, six),
            Some(StripeLocation { component: 1, stripe: 0, unit_end: 6 * MIB })
        );
        assert_eq!(
            layout.locate(64 * MIB + 4 * MIB * 7, six),
            Some(StripeLocation { component: 2, stripe: 1, unit_end: 64 * MIB + 4 * MIB * 8 })
        );
        // A pool smaller than the count caps it.
        assert_eq!(layout.locate(3 * MIB, |_| 2).map(|location| location.stripe), Some(0));
    }

    #[test]
    fn bounded_layouts_end() {
        let layout = Layout::new(vec![Component {
            start: 0,
            end: Some(2 * MIB),
            stripe_count: StripeCount::Count(2),
            stripe_size: MIB,
            pool: None,
        }])
        .expect("valid");
        assert_eq!(layout.end(), Some(2 * MIB));
        assert_eq!(layout.locate(2 * MIB, |_| 4), None);
    }

    #[test]
    fn malformed_layouts_are_refused_naming_the_component() {
        let component = |start, end, size| Component {
            start,
            end,
            stripe_count: StripeCount::Count(1),
            stripe_size: size,
            pool: None,
        };
        for (components, expect) in [
            (vec![], "no components"),
            (vec![component(0, None, 1000)], "multiple of 64 KiB"),
            (vec![component(MIB, None, MIB)], "previous component ends at 0"),
            (vec![component(0, None, MIB), component(MIB, None, MIB)], "only the last"),
            (vec![component(0, Some(MIB + STRIPE_UNIT), MIB)], "multiple of the stripe size"),
        ] {
            let error = Layout::new(components).expect_err(expect);
            assert!(error.to_string().contains(expect), "{error} should mention {expect}");
        }
    }
}
