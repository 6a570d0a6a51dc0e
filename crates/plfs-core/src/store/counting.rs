//! A [`Store`] wrapper that counts backend round trips, so tests can pin
//! how many opens, lists and stats an operation costs.
//!
//! Every call is counted when it is made, whether or not it succeeds; byte
//! counts include only bytes actually read or appended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::{
    AppendWriter, Capabilities, DirEntry, Metadata, Protection, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen, by_parts,
};
use crate::error::Result;
use crate::layout::{self, ContainerEntry, LogKind};

/// Declares [`OpCounts`] and its atomic twin with the same fields.
macro_rules! op_counts {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// A snapshot of a [`CountingStore`]'s counters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct OpCounts {
            $($(#[$doc])* pub $field: u64,)*
        }

        #[derive(Debug, Default)]
        struct Counters {
            $($field: AtomicU64,)*
        }

        impl Counters {
            fn snapshot(&self) -> OpCounts {
                OpCounts { $($field: self.$field.load(Ordering::Relaxed),)* }
            }

            fn reset(&self) {
                $(self.$field.store(0, Ordering::Relaxed);)*
            }
        }
    };
}

op_counts! {
    /// `open_read` calls.
    opens,
    /// `open_read` calls on index logs (also counted in `opens`): what a
    /// collective open exists to cut down.
    index_log_opens,
    /// `open_read` calls on a global index (also counted in `opens`).
    global_index_opens,
    /// `create_append`, `create_new`, `create_dir` and `create_dir_all` calls.
    creates,
    /// `replace` calls.
    replaces,
    /// `list` calls.
    lists,
    /// `metadata` calls.
    metadata,
    /// `remove_file` and `remove_dir` calls.
    removes,
    /// `rename` calls.
    renames,
    /// `set_mode`, `set_owner` and `set_times` calls.
    attribute_changes,
    /// `symlink` and `read_link` calls.
    links,
    /// `space` calls.
    space,
    /// `AppendWriter::append` calls.
    appends,
    /// `AppendWriter::sync` calls.
    syncs,
    /// `ReadHandle::read_at` calls.
    read_ats,
    /// Bytes returned by successful `read_at` calls.
    bytes_read,
    /// Bytes of successful `append` calls.
    bytes_appended,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Wraps a store and counts every call made through it and its handles.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn Store>,
    counters: Arc<Counters>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>) -> CountingStore {
        CountingStore { inner, counters: Arc::default() }
    }

    pub fn counts(&self) -> OpCounts {
        self.counters.snapshot()
    }

    /// Zeroes every counter, including those fed by handles already open.
    pub fn reset(&self) {
        self.counters.reset();
    }

    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn count(&self, counter: impl Fn(&Counters) -> &AtomicU64) {
        bump(counter(&self.counters), 1);
    }
}

#[deny(clippy::missing_trait_methods)]
impl Store for CountingStore {
    fn url(&self) -> &str {
        self.inner.url()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_dir(path, mode)
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_dir_all(path)
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        self.count(|c| &c.lists);
        self.inner.list(path)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        self.count(|c| &c.metadata);
        self.inner.metadata(path)
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.count(|c| &c.removes);
        self.inner.remove_file(path)
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.count(|c| &c.removes);
        self.inner.remove_dir(path)
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.count(|c| &c.renames);
        self.inner.rename(from, to)
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.count(|c| &c.renames);
        self.inner.exchange(a, b)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new(path, contents)
    }

    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new_deferred(path, contents)
    }

    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.replaces);
        self.inner.replace(path, contents)
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        self.count(|c| &c.creates);
        let inner = self.inner.create_append(path)?;
        Ok(Box::new(CountingWriter { inner, counters: Arc::clone(&self.counters) }))
    }

    // Protecting an existing piece counts its chown and chmod calls.
    fn protect(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        by_parts::protect(self, path, protection)
    }

    // The protected creates are one create each, as the inner store makes
    // them (POSIX: with the mode, no separate chmod call to count).
    fn create_dir_protected(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_dir_protected(path, protection)
    }

    fn create_append_protected(
        &self,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        self.count(|c| &c.creates);
        let inner = self.inner.create_append_protected(path, protection)?;
        Ok(Box::new(CountingWriter { inner, counters: Arc::clone(&self.counters) }))
    }

    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new_protected(path, contents, protection)
    }

    fn create_new_deferred_protected(
        &self,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new_deferred_protected(path, contents, protection)
    }

    fn replace_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.count(|c| &c.replaces);
        self.inner.replace_protected(path, contents, protection)
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        self.count(|c| &c.opens);
        // Classified through the layout module, which owns the names.
        match path.file_name() {
            Some(name) if matches!(layout::parse_log_name(name), Some((LogKind::Index, _))) => {
                self.count(|c| &c.index_log_opens)
            }
            Some(name) if layout::classify_container_entry(name) == ContainerEntry::GlobalIndex => {
                self.count(|c| &c.global_index_opens)
            }
            _ => {}
        }
        let inner = self.inner.open_read(path)?;
        Ok(Box::new(CountingReader { inner, counters: Arc::clone(&self.counters) }))
    }

    /// Counted as an open; the writes through it are not counted (only
    /// the container layout's appends are).
    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        self.count(|c| &c.opens);
        self.inner.open_write(path, how)
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.count(|c| &c.attribute_changes);
        self.inner.set_mode(path, mode)
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.count(|c| &c.attribute_changes);
        self.inner.set_owner(path, uid, gid)
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        self.count(|c| &c.attribute_changes);
        self.inner.set_times(path, atime, mtime)
    }

    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        self.count(|c| &c.links);
        self.inner.symlink(target, path)
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        self.count(|c| &c.links);
        self.inner.read_link(path)
    }

    fn space(&self) -> Result<SpaceInfo> {
        self.count(|c| &c.space);
        self.inner.space()
    }

    fn filesystem_id(&self) -> Option<u64> {
        self.inner.filesystem_id()
    }
}

#[derive(Debug)]
struct CountingWriter {
    inner: Box<dyn AppendWriter>,
    counters: Arc<Counters>,
}

impl AppendWriter for CountingWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        bump(&self.counters.appends, 1);
        self.inner.append(buf)?;
        bump(&self.counters.bytes_appended, buf.len() as u64);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        bump(&self.counters.syncs, 1);
        self.inner.sync()
    }

    // The durable half counts as the sync it is; publishing is not another.
    fn persist(&mut self) -> Result<()> {
        bump(&self.counters.syncs, 1);
        self.inner.persist()
    }

    fn publish(&mut self) -> Result<()> {
        self.inner.publish()
    }

    fn publish_pending(&self) -> bool {
        self.inner.publish_pending()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

#[derive(Debug)]
struct CountingReader {
    inner: Box<dyn ReadHandle>,
    counters: Arc<Counters>,
}

impl ReadHandle for CountingReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        bump(&self.counters.read_ats, 1);
        let count = self.inner.read_at(buf, offset)?;
        bump(&self.counters.bytes_read, count as u64);
        Ok(count)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::posix::PosixStore;
    use crate::store::{StoreExt, conformance};

    fn p(text: &str) -> StorePath {
        StorePath::parse(text).unwrap()
    }

    fn over_memory() -> CountingStore {
        CountingStore::new(Arc::new(MemoryStore::new("memory://counting")))
    }

    #[test]
    fn conformance_over_memory() {
        let store = over_memory();
        conformance::run_all(&store);
        assert!(store.counts().creates > 0);
    }

    #[test]
    fn conformance_over_posix() {
        let dir = tempfile::tempdir().unwrap();
        let posix = PosixStore::new(dir.path(), "posix://counting".into()).unwrap();
        let store = CountingStore::new(Arc::new(posix));
        conformance::run_all(&store);
        assert!(store.counts().appends > 0);
    }

    #[test]
    fn counts_a_known_sequence_exactly() {
        let store = over_memory();
        store.create_dir(&p("d"), 0o755).unwrap();
        store.create_dir_all(&p("d/e/f")).unwrap();
        store.create_new(&p("d/small"), b"12345").unwrap();
        assert!(store.create_new(&p("d/small"), b"again").is_err());
        store.replace(&p("d/small"), b"123").unwrap();
        let mut log = store.create_append(&p("d/log")).unwrap();
        log.append(b"abc").unwrap();
        log.append(b"defg").unwrap();
        log.sync().unwrap();
        log.close().unwrap();
        let reader = store.open_read(&p("d/log")).unwrap();
        let mut buf = [0u8; 5];
        assert_eq!(reader.read_at(&mut buf, 0).unwrap(), 5);
        assert_eq!(reader.read_at(&mut buf, 5).unwrap(), 2);
        assert_eq!(reader.read_at(&mut buf, 7).unwrap(), 0);
        assert_eq!(store.list(&p("d")).unwrap().len(), 3);
        store.metadata(&p("d/log")).unwrap();
        assert!(store.exists(&p("d/nothing")).is_ok());
        store.rename(&p("d/log"), &p("d/log2")).unwrap();
        store.set_mode(&p("d/log2"), 0o600).unwrap();
        store.set_times(&p("d/log2"), None, None).unwrap();
        store.symlink("log2", &p("d/link")).unwrap();
        store.read_link(&p("d/link")).unwrap();
        store.remove_file(&p("d/link")).unwrap();
        store.remove_dir(&p("d/e/f")).unwrap();
        store.space().unwrap();

        let expected = OpCounts {
            opens: 1,
            creates: 5,
            replaces: 1,
            lists: 1,
            metadata: 2,
            removes: 2,
            renames: 1,
            attribute_changes: 2,
            links: 2,
            space: 1,
            appends: 2,
            syncs: 1,
            read_ats: 3,
            bytes_read: 7,
            bytes_appended: 7,
            ..OpCounts::default()
        };
        assert_eq!(store.counts(), expected);

        store.reset();
        assert_eq!(store.counts(), OpCounts::default());
        assert_eq!(reader.read_at(&mut buf, 1).unwrap(), 5);
        assert_eq!(store.counts(), OpCounts { read_ats: 1, bytes_read: 5, ..OpCounts::default() });
    }

    #[test]
    fn opens_of_index_logs_and_the_global_index_are_told_apart() {
        use crate::layout::{LogId, log_name};
        let store = over_memory();
        let index = log_name(LogKind::Index, &LogId::new(1, 2, 3, "host"));
        let data = log_name(LogKind::Data, &LogId::new(1, 2, 3, "host"));
        let global = layout::GLOBAL_INDEX.to_owned();
        for name in [&index, &data, &global] {
            store.create_new(&p(name), b"x").unwrap();
            store.open_read(&p(name)).unwrap();
        }
        let counts = store.counts();
        assert_eq!((counts.opens, counts.index_log_opens, counts.global_index_opens), (3, 1, 1));
    }

    #[test]
    fn read_all_costs_one_open_and_one_read_per_chunk() {
        let store = over_memory();
        store.create_new(&p("f"), &[7u8; 100]).unwrap();
        store.reset();
        assert_eq!(store.read_all(&p("f")).unwrap().len(), 100);
        let counts = store.counts();
        assert_eq!((counts.opens, counts.read_ats, counts.bytes_read), (1, 1, 100));
    }

    #[test]
    fn failed_appends_count_the_call_but_not_the_bytes() {
        use crate::store::faulty::{Fault, FaultAction, FaultyStore, Op};
        let faulty = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new("memory://c"))));
        faulty.add_fault(Fault::new(Op::Append, FaultAction::Eio).nth(2));
        let store = CountingStore::new(faulty);
        let mut log = store.create_append(&p("log")).unwrap();
        log.append(b"ok").unwrap();
        assert!(log.append(b"fails").is_err());
        let counts = store.counts();
        assert_eq!((counts.appends, counts.bytes_appended), (2, 2));
    }
}
