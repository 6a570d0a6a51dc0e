//! Tables of open file and directory handles: the number the kernel passes
//! back on every read, write and readdir, mapped to what it opened.
//!
//! Values are shared (`Arc`) so a request can use its handle after the
//! table lock is dropped; `remove` at release hands the last reference to
//! the caller, which closes it.

use std::collections::HashMap;
use std::sync::Arc;

use fuser::FileHandle;

/// Handles one daemon keeps open at once. Each holds a core handle (and
/// through it descriptors and buffered index records), so runaway opens are
/// refused with ENFILE rather than exhausting the daemon.
pub const HANDLES_MAX: usize = 1 << 20;

#[derive(Debug)]
pub struct HandleTable<T> {
    open: HashMap<u64, Arc<T>>,
    /// The next number to hand out; 0 is never used, so a handle the
    /// kernel did not get from us (fh 0) is always unknown.
    next: u64,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        HandleTable { open: HashMap::new(), next: 1 }
    }
}

impl<T> HandleTable<T> {
    /// Stores `value` under a fresh number; None when the table is full.
    pub fn insert(&mut self, value: T) -> Option<(FileHandle, Arc<T>)> {
        if self.open.len() >= HANDLES_MAX {
            return None;
        }
        let number = self.next;
        self.next += 1;
        let value = Arc::new(value);
        self.open.insert(number, value.clone());
        Some((FileHandle(number), value))
    }

    pub fn get(&self, fh: FileHandle) -> Option<Arc<T>> {
        self.open.get(&fh.0).cloned()
    }

    pub fn remove(&mut self, fh: FileHandle) -> Option<Arc<T>> {
        self.open.remove(&fh.0)
    }

    /// Everything still open, for shutdown.
    pub fn drain(&mut self) -> Vec<Arc<T>> {
        self.open.drain().map(|(_, value)| value).collect()
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_fresh_and_nonzero() {
        let mut table = HandleTable::default();
        let (a, _) = table.insert("a").unwrap();
        let (b, _) = table.insert("b").unwrap();
        assert_ne!(a, b);
        assert_ne!(a.0, 0);
        assert_eq!(*table.get(a).unwrap(), "a");
        assert_eq!(table.remove(a).as_deref(), Some(&"a"));
        assert!(table.get(a).is_none());
        let (c, _) = table.insert("c").unwrap();
        assert_ne!(c, a, "a released number is not handed out again");
        assert!(table.get(FileHandle(0)).is_none());
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn a_request_keeps_its_handle_after_release() {
        let mut table = HandleTable::default();
        let (fh, _) = table.insert(String::from("open")).unwrap();
        let in_flight = table.get(fh).unwrap();
        let released = table.remove(fh).unwrap();
        assert_eq!(Arc::strong_count(&released), 2);
        drop(in_flight);
        assert!(Arc::try_unwrap(released).is_ok(), "release holds the last reference");
    }

    #[test]
    fn drain_empties_the_table() {
        let mut table = HandleTable::default();
        for i in 0..5 {
            table.insert(i).unwrap();
        }
        let mut all: Vec<i32> = table.drain().iter().map(|value| **value).collect();
        all.sort();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        assert!(table.is_empty());
    }
}
