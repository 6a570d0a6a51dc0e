//! The `lfs setstripe` syntax for layouts, as users type it and as plfs
//! prints it back:
//!
//! ```text
//! -E 1M -c 1 -E 64M -c 4 -E -1 -c -1 -S 4M     # progressive: three components
//! -c 4 -S 1M                                   # one component to EOF (plain striping)
//! ```
//!
//! `-E END` (`--component-end`) starts a component ending at END (`-1` or
//! `eof`: to the end of the file); `-c COUNT` (`--stripe-count`, `-1`: every
//! backend of the pool), `-S SIZE` (`--stripe-size`) and `-p POOL` (`--pool`)
//! describe it. Sizes are bytes, or with a K, M, G or T suffix (powers of
//! 1024, as lfs reads them). A component that leaves out `-c` or `-S` takes
//! the previous component's; the first defaults to one stripe of 1 MiB
//! (Lustre's defaults). A pool applies only to the component that names it,
//! so that a component without `-p` (all backends) can always be written. Options without any `-E` describe a single
//! component to EOF; with `-E`, every option must follow one.
//!
//! [`Layout`]'s `Display` prints the canonical text, which parses back to the
//! same layout: every component in full, sizes in the largest exact unit.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::striping::{Component, Layout, StripeCount};

/// Stripe size of a component that names none and follows none (lfs's 1 MiB).
pub const DEFAULT_STRIPE_SIZE: u64 = 1 << 20;

/// Stripe count of a component that names none and follows none (lfs's 1).
pub const DEFAULT_STRIPE_COUNT: StripeCount = StripeCount::Count(1);

/// What one component has been given so far.
#[derive(Default)]
struct Draft {
    end: Option<Option<u64>>,
    count: Option<StripeCount>,
    size: Option<u64>,
    pool: Option<String>,
}

impl Layout {
    /// Parses options already split into words (a command line's arguments).
    pub fn parse_args<S: AsRef<str>>(words: &[S]) -> Result<Layout> {
        let mut drafts: Vec<Draft> = Vec::new();
        let mut loose = Draft::default();
        let mut words = words.iter().map(AsRef::as_ref);
        while let Some(word) = words.next() {
            let (option, inline) = match word.split_once('=') {
                Some((option, value)) if option.starts_with("--") => (option, Some(value)),
                _ => (word, None),
            };
            let mut value = || -> Result<&str> {
                inline.or_else(|| words.next()).ok_or_else(|| bad(word, "needs a value"))
            };
            match option {
                "-E" | "--component-end" => {
                    let text = value()?;
                    if drafts.is_empty()
                        && (loose.count.is_some() || loose.size.is_some() || loose.pool.is_some())
                    {
                        return Err(bad(
                            word,
                            "options before the first -E: with -E, every -c, -S and -p follows an -E",
                        ));
                    }
                    let end = match text {
                        "-1" | "eof" | "EOF" => None,
                        _ => Some(size(option, text)?),
                    };
                    drafts.push(Draft { end: Some(end), ..Draft::default() });
                }
                "-c" | "--stripe-count" => {
                    let text = value()?;
                    let count = match text {
                        "-1" => StripeCount::All,
                        _ => match text.parse::<u32>() {
                            Ok(count) if count >= 1 => StripeCount::Count(count),
                            _ => {
                                return Err(bad(
                                    &format!("{option} {text}"),
                                    "expected a stripe count of 1 or more, or -1 for every backend",
                                ));
                            }
                        },
                    };
                    set(&mut current(&mut drafts, &mut loose).count, count, option)?;
                }
                "-S" | "--stripe-size" => {
                    let text = value()?;
                    let bytes = size(option, text)?;
                    set(&mut current(&mut drafts, &mut loose).size, bytes, option)?;
                }
                "-p" | "--pool" => {
                    let text = value()?;
                    if !valid_pool_name(text) {
                        return Err(bad(
                            &format!("{option} {text}"),
                            "a pool name is letters, digits, '_', '-' and '.'",
                        ));
                    }
                    set(&mut current(&mut drafts, &mut loose).pool, text.to_owned(), option)?;
                }
                _ => {
                    return Err(bad(word, "unknown option (expected -E END, -c COUNT, -S SIZE or -p POOL)"));
                }
            }
        }
        if drafts.is_empty() {
            if loose.count.is_none() && loose.size.is_none() && loose.pool.is_none() {
                return Err(Error::invalid("layout: empty (expected -E END, -c COUNT, -S SIZE or -p POOL)"));
            }
            loose.end = Some(None);
            drafts.push(loose);
        }
        build(drafts)
    }

    /// The canonical text of one component, as [`Display`](fmt::Display) prints it.
    pub fn component_text(component: &Component) -> String {
        let mut text = String::new();
        write_component(&mut text, component).expect("writing to a String cannot fail");
        text
    }
}

/// Turns the drafts into components: starts follow the previous end, and
/// what a component leaves out it takes from the previous one.
fn build(drafts: Vec<Draft>) -> Result<Layout> {
    let mut components: Vec<Component> = Vec::with_capacity(drafts.len());
    let mut start = 0u64;
    for (index, draft) in drafts.into_iter().enumerate() {
        let previous = components.last();
        let end = draft.end.flatten();
        let shown_end = end.map_or("-1".to_owned(), size_text);
        if let Some(end) = end
            && end <= start
        {
            return Err(bad(
                &format!("-E {shown_end}"),
                &format!("component {} must end past its start {}", index + 1, size_text(start)),
            ));
        }
        let component = Component {
            start,
            end,
            stripe_count: draft.count.or(previous.map(|c| c.stripe_count)).unwrap_or(DEFAULT_STRIPE_COUNT),
            stripe_size: draft.size.or(previous.map(|c| c.stripe_size)).unwrap_or(DEFAULT_STRIPE_SIZE),
            pool: draft.pool,
        };
        start = end.unwrap_or(start);
        components.push(component);
    }
    // Layout::new names the component and the misaligned number.
    Layout::new(components)
}

/// The component options apply to: the last `-E`'s, or before any `-E` the
/// single component to EOF.
fn current<'a>(drafts: &'a mut [Draft], loose: &'a mut Draft) -> &'a mut Draft {
    match drafts.last_mut() {
        Some(draft) => draft,
        None => loose,
    }
}

fn set<T>(slot: &mut Option<T>, value: T, option: &str) -> Result<()> {
    if slot.is_some() {
        return Err(bad(option, "given twice for one component"));
    }
    *slot = Some(value);
    Ok(())
}

fn bad(token: &str, problem: &str) -> Error {
    Error::invalid(format!("layout: {token}: {problem}"))
}

/// Pool names are printed unquoted in the layout text, so they may not hold
/// spaces or anything that reads as an option.
pub fn valid_pool_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

const UNITS: [(char, u32); 4] = [('T', 40), ('G', 30), ('M', 20), ('K', 10)];

/// `1M`, `64k`, `4194304`: bytes, or a binary K/M/G/T multiple.
pub fn parse_size(text: &str) -> Option<u64> {
    let (digits, shift) = match text.chars().last()?.to_ascii_uppercase() {
        last @ ('K' | 'M' | 'G' | 'T') => {
            let shift = UNITS.iter().find(|(unit, _)| *unit == last).map(|(_, shift)| *shift)?;
            (&text[..text.len() - 1], shift)
        }
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

fn size(option: &str, text: &str) -> Result<u64> {
    parse_size(text).ok_or_else(|| {
        bad(&format!("{option} {text}"), "expected a size in bytes, or with a K, M, G or T suffix")
    })
}

/// A size in the largest unit that divides it exactly (`1M`, `1536K`, `7`).
pub fn size_text(bytes: u64) -> String {
    match UNITS.iter().find(|(_, shift)| bytes != 0 && bytes.is_multiple_of(1u64 << shift)) {
        Some((unit, shift)) => format!("{}{unit}", bytes >> shift),
        None => bytes.to_string(),
    }
}

fn write_component(f: &mut impl fmt::Write, component: &Component) -> fmt::Result {
    let end = component.end.map_or("-1".to_owned(), size_text);
    let count = match component.stripe_count {
        StripeCount::Count(count) => count.to_string(),
        StripeCount::All => "-1".to_owned(),
    };
    write!(f, "-E {end} -c {count} -S {}", size_text(component.stripe_size))?;
    if let Some(pool) = &component.pool {
        write!(f, " -p {pool}")?;
    }
    Ok(())
}

impl fmt::Display for Layout {
    /// Every component in full, so the text is the same whatever was left
    /// out when it was typed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, component) in self.components().iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            write_component(f, component)?;
        }
        Ok(())
    }
}

impl FromStr for Layout {
    type Err = Error;

    /// Parses the text split at whitespace (a plfsrc value, an xattr value).
    fn from_str(text: &str) -> Result<Layout> {
        let words: Vec<&str> = text.split_whitespace().collect();
        Layout::parse_args(&words)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::striping::STRIPE_UNIT;

    const MIB: u64 = 1 << 20;

    fn component(
        start: u64,
        end: Option<u64>,
        count: StripeCount,
        size: u64,
        pool: Option<&str>,
    ) -> Component {
        Component { start, end, stripe_count: count, stripe_size: size, pool: pool.map(str::to_owned) }
    }

    #[test]
    fn progressive_layout_parses_with_inheritance_and_defaults() {
        let layout: Layout = "-E 1M -c 1 -E 64M -c 4 -E -1 -c -1 -S 4M".parse().unwrap();
        assert_eq!(
            layout.components(),
            &[
                component(0, Some(MIB), StripeCount::Count(1), MIB, None),
                component(MIB, Some(64 * MIB), StripeCount::Count(4), MIB, None),
                component(64 * MIB, None, StripeCount::All, 4 * MIB, None),
            ]
        );
        assert_eq!(layout.to_string(), "-E 1M -c 1 -S 1M -E 64M -c 4 -S 1M -E -1 -c -1 -S 4M");
        // Long options, `=` values, eof and lower-case suffixes read the same.
        let long: Layout =
            "--component-end=1m --stripe-count 1 --component-end 64M -c 4 -E eof -c -1 -S 4096k"
                .parse()
                .unwrap();
        assert_eq!(long, layout);
    }

    #[test]
    fn options_without_e_are_one_component_to_eof() {
        let layout: Layout = "-c 4 -S 2M -p fast".parse().unwrap();
        assert_eq!(layout.components(), &[component(0, None, StripeCount::Count(4), 2 * MIB, Some("fast"))]);
        assert_eq!("-c 2".parse::<Layout>().unwrap().components()[0].stripe_size, DEFAULT_STRIPE_SIZE);
        assert_eq!(layout.to_string().parse::<Layout>().unwrap(), layout);
    }

    #[test]
    fn errors_name_the_bad_token() {
        for (text, expect) in [
            ("", "empty"),
            ("-E 1M -c 0", "-c 0"),
            ("-E 1M -c x", "-c x"),
            ("-E 1Q", "-E 1Q"),
            ("-S 100K", "multiple of 64 KiB"),
            ("-E 1M -c 1 -E 1M", "-E 1M: component 2 must end past its start 1M"),
            ("-E 1M -E -1 -E 2M", "only the last component may run to EOF"),
            ("-c 1 -E 1M", "-E: options before the first -E"),
            ("-E 1M -c 1 -c 2", "-c: given twice"),
            ("-E 1M -x 3", "-x: unknown option"),
            ("-E", "-E: needs a value"),
            ("-E 1M -p 'a b'", "a pool name"),
            ("-E 1M -S 1M -E 3M -S 2M", "start 1048576 is not a multiple of the stripe size 2097152"),
            ("-E 99999999999999999999", "expected a size"),
        ] {
            let error = text.parse::<Layout>().expect_err(text);
            assert!(error.to_string().contains(expect), "{text:?}: {error} should mention {expect:?}");
        }
    }

    #[test]
    fn sizes_print_in_the_largest_exact_unit() {
        assert_eq!(size_text(MIB), "1M");
        assert_eq!(size_text(1536 << 10), "1536K");
        assert_eq!(size_text(3 << 40), "3T");
        assert_eq!(size_text(7), "7");
        assert_eq!(size_text(0), "0");
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("-1"), None);
    }

    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }

    prop_compose! {
        /// A valid layout: each end is a multiple of its own stripe size and
        /// of the next component's (which starts there).
        fn layouts()(
            specs in prop::collection::vec(
                (1u64..=64, 1u64..=8, prop_oneof![Just(None), (1u32..=2000).prop_map(Some)],
                 prop::option::of("[a-z][a-z0-9_.-]{0,7}")),
                1..6),
            bounded in any::<bool>(),
        ) -> Layout {
            let sizes: Vec<u64> = specs.iter().map(|(units, _, _, _)| units * STRIPE_UNIT).collect();
            let mut components = Vec::new();
            let mut start = 0u64;
            for (index, (_, steps, count, pool)) in specs.iter().enumerate() {
                let size = sizes[index];
                let last = index + 1 == specs.len();
                let end = if last && !bounded {
                    None
                } else {
                    let next = if last { size } else { sizes[index + 1] };
                    let lcm = size / gcd(size, next) * next;
                    Some((start / lcm + steps) * lcm)
                };
                let count = count.map_or(StripeCount::All, StripeCount::Count);
                components.push(Component { start, end, stripe_count: count, stripe_size: size, pool: pool.clone() });
                start = end.unwrap_or(start);
            }
            Layout::new(components).expect("generated layouts are valid")
        }
    }

    proptest! {
        #[test]
        fn every_layout_prints_and_parses_back_to_itself(layout in layouts()) {
            let text = layout.to_string();
            let parsed: Layout = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(&parsed, &layout);
            // Split as a command line would be, too.
            let words: Vec<&str> = text.split(' ').collect();
            prop_assert_eq!(Layout::parse_args(&words).unwrap(), layout);
        }
    }
}
