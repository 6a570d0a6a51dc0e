//! Names inside a small-file (1-N) directory container. Like the rest of
//! [`crate::layout`], every name is built from typed ids here and parsed
//! back here.
//!
//! ```text
//! <dir>/.plfs-smallfile/               directory container (on each backend holding writers)
//!     name.<log-id>                    name log of one writer session
//!     index.<log-id>                   index log of the same session
//!     data.<log-id>                    data log of the same session
//! ```
//!
//! `<log-id>` is the same [`LogId`] as in file containers.

use crate::error::Result;
use crate::layout::LogId;
use crate::store::StorePath;

/// The directory container's name inside the logical directory. The
/// reserved `.plfs-` prefix keeps it out of every listing.
pub const CONTAINER_DIR: &str = ".plfs-smallfile";

const NAME_PREFIX: &str = "name.";
const INDEX_PREFIX: &str = "index.";
const DATA_PREFIX: &str = "data.";

/// The three logs of one writer session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SmallLogKind {
    Name,
    Index,
    Data,
}

impl SmallLogKind {
    pub const ALL: [SmallLogKind; 3] = [SmallLogKind::Name, SmallLogKind::Index, SmallLogKind::Data];

    fn prefix(self) -> &'static str {
        match self {
            SmallLogKind::Name => NAME_PREFIX,
            SmallLogKind::Index => INDEX_PREFIX,
            SmallLogKind::Data => DATA_PREFIX,
        }
    }
}

pub fn small_log_name(kind: SmallLogKind, id: &LogId) -> String {
    format!("{}{id}", kind.prefix())
}

/// None for any name plfs does not write in a directory container.
pub fn parse_small_log_name(name: &str) -> Option<(SmallLogKind, LogId)> {
    SmallLogKind::ALL
        .into_iter()
        .find_map(|kind| name.strip_prefix(kind.prefix()).and_then(LogId::parse).map(|id| (kind, id)))
}

/// The directory container of the logical directory `dir`.
pub fn container_dir(dir: &StorePath) -> Result<StorePath> {
    dir.join(CONTAINER_DIR)
}

/// One log of a writer session inside the container of `dir`.
pub fn small_log_path(dir: &StorePath, kind: SmallLogKind, id: &LogId) -> Result<StorePath> {
    container_dir(dir)?.join(&small_log_name(kind, id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_fixed_width_and_reserved() {
        let id = LogId { stamp: 0x11, writer: 7, pid: 42, host: 0xabcdef01 };
        assert_eq!(
            small_log_name(SmallLogKind::Name, &id),
            "name.0000000000000011.0000000000000007.0000002a.abcdef01"
        );
        assert!(crate::layout::is_reserved(CONTAINER_DIR));
        let path = small_log_path(&StorePath::parse("a/b").unwrap(), SmallLogKind::Data, &id).unwrap();
        assert_eq!(
            path.as_str(),
            "a/b/.plfs-smallfile/data.0000000000000011.0000000000000007.0000002a.abcdef01"
        );
        assert_eq!(parse_small_log_name("hostdir.1"), None);
        assert_eq!(parse_small_log_name("name.zz"), None);
    }

    proptest! {
        #[test]
        fn names_round_trip(stamp: u64, writer: u64, pid: u32, host: u32, kind in 0usize..3) {
            let id = LogId { stamp, writer, pid, host };
            let kind = SmallLogKind::ALL[kind];
            prop_assert_eq!(parse_small_log_name(&small_log_name(kind, &id)), Some((kind, id)));
        }
    }
}
