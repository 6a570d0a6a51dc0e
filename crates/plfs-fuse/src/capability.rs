//! `security.capability`, which the kernel asks for before every write to a
//! file (to drop file capabilities when it changes), costs a round trip
//! and a container lookup each time. Its absence is remembered per inode
//! until the next open of the file or the next xattr change through this
//! mount, so a stream of writes asks the backend once per open.
//!
//! Another node adding the attribute to a file open here is seen at the
//! next open, the same close-to-open rule as the file's data.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use fuser::INodeNo;

pub const NAME: &str = "security.capability";

/// Inodes remembered; the set is cleared when full (the cost is one
/// lookup per inode), so forgotten inodes never pile up.
const ENTRIES_MAX: usize = 1 << 16;

#[derive(Debug, Default)]
pub struct AbsentCapabilities {
    absent: Mutex<HashSet<INodeNo>>,
}

impl AbsentCapabilities {
    pub fn is_absent(&self, ino: INodeNo) -> bool {
        self.absent.lock().unwrap_or_else(PoisonError::into_inner).contains(&ino)
    }

    pub fn note_absent(&self, ino: INodeNo) {
        let mut absent = self.absent.lock().unwrap_or_else(PoisonError::into_inner);
        if absent.len() >= ENTRIES_MAX {
            absent.clear();
        }
        absent.insert(ino);
    }

    /// Ask the backend again next time (an open, or an xattr change).
    pub fn recheck(&self, ino: INodeNo) {
        self.absent.lock().unwrap_or_else(PoisonError::into_inner).remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absence_is_remembered_until_rechecked() {
        let cache = AbsentCapabilities::default();
        let ino = INodeNo(5);
        assert!(!cache.is_absent(ino));
        cache.note_absent(ino);
        assert!(cache.is_absent(ino));
        assert!(!cache.is_absent(INodeNo(6)));
        cache.recheck(ino);
        assert!(!cache.is_absent(ino));
    }

    #[test]
    fn the_set_stays_bounded() {
        let cache = AbsentCapabilities::default();
        for number in 0..(ENTRIES_MAX as u64 + 10) {
            cache.note_absent(INodeNo(number + 2));
        }
        assert!(cache.absent.lock().unwrap().len() <= ENTRIES_MAX);
        assert!(cache.is_absent(INodeNo(ENTRIES_MAX as u64 + 11)));
    }
}
