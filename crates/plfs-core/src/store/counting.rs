//! A [`Store`] wrapper that counts backend round trips, so tests can pin
//! how many opens, lists and stats an operation costs.
//!
//! Every call is counted when it is made, whether or not it succeeds; byte
//! counts include only bytes actually read or appended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use super::{
    AppendWriter, Capabilities, DirEntry, Metadata, NewPiece, Protection, RandomWriter, ReadHandle,
    SpaceInfo, Store, StorePath, WriteOpen, by_parts,
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

        /// Field by field: the counts of several stores (or ranks) together.
        impl std::ops::Add for OpCounts {
            type Output = OpCounts;

            fn add(self, other: OpCounts) -> OpCounts {
                OpCounts { $($field: self.$field + other.$field,)* }
            }
        }

        /// Field by field: what the counters moved between two snapshots
        /// (`later - earlier`; counters only grow).
        impl std::ops::Sub for OpCounts {
            type Output = OpCounts;

            fn sub(self, earlier: OpCounts) -> OpCounts {
                OpCounts { $($field: self.$field - earlier.$field,)* }
            }
        }

        impl std::iter::Sum for OpCounts {
            fn sum<I: Iterator<Item = OpCounts>>(counts: I) -> OpCounts {
                counts.fold(OpCounts::default(), |total, counts| total + counts)
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
    /// `ReadHandle::read_at` calls (and `read_vectored_at` calls, each
    /// one request).
    read_ats,
    /// Bytes returned by successful `read_at` calls.
    bytes_read,
    /// Bytes of successful `append` calls.
    bytes_appended,
    /// Bytes of successful `append` calls on index logs (also counted in
    /// `bytes_appended`): what writers pay for their index.
    index_bytes_appended,
    /// Bytes returned by `read_at` on index logs (also in `bytes_read`).
    index_log_bytes_read,
    /// Bytes returned by `read_at` on a global index (also in `bytes_read`).
    global_index_bytes_read,
    /// Bytes of global indexes written whole (`replace` or `create_new`).
    global_index_bytes_written,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// What a path holds, as far as the index counters care. Classified
/// through the layout module, which owns the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    IndexLog,
    GlobalIndex,
    Other,
}

fn piece(path: &StorePath) -> Piece {
    match path.file_name() {
        Some(name) if matches!(layout::parse_log_name(name), Some((LogKind::Index, _))) => Piece::IndexLog,
        Some(name) if layout::classify_container_entry(name) == ContainerEntry::GlobalIndex => {
            Piece::GlobalIndex
        }
        _ => Piece::Other,
    }
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

    /// Counts the bytes of a global index written whole at `path`.
    fn count_whole(&self, path: &StorePath, contents: &[u8]) {
        if piece(path) == Piece::GlobalIndex {
            bump(&self.counters.global_index_bytes_written, contents.len() as u64);
        }
    }

    fn writer(&self, path: &StorePath, inner: Box<dyn AppendWriter>) -> Box<dyn AppendWriter> {
        let index = piece(path) == Piece::IndexLog;
        Box::new(CountingWriter { inner, counters: Arc::clone(&self.counters), index })
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

    /// No backend call: a lookup of where the root is.
    fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
        self.inner.local_path(path)
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.count(|c| &c.renames);
        self.inner.exchange(a, b)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new(path, contents)?;
        self.count_whole(path, contents);
        Ok(())
    }

    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new_deferred(path, contents)
    }

    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }

    // Not counted: made only when a writer's first write meets a closer
    // sealing a summary at that moment (file.rs), never in a counted run.
    fn sync_dir(&self, dir: &StorePath) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    // Not counted, as sync_dir: the cost model counts namespace and data
    // operations, not durability barriers.
    fn sync_file(&self, path: &StorePath) -> Result<()> {
        self.inner.sync_file(path)
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.count(|c| &c.replaces);
        self.inner.replace(path, contents)?;
        self.count_whole(path, contents);
        Ok(())
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        self.count(|c| &c.creates);
        let inner = self.inner.create_append(path)?;
        Ok(self.writer(path, inner))
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
        Ok(self.writer(path, inner))
    }

    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        self.count(|c| &c.creates);
        self.inner.create_new_protected(path, contents, protection)?;
        self.count_whole(path, contents);
        Ok(())
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
        self.inner.replace_protected(path, contents, protection)?;
        self.count_whole(path, contents);
        Ok(())
    }

    // Each piece counts as the create the default makes for it, so a
    // container's creation costs what the cost model says on every store.
    fn fill_private_dir(&self, dir: &StorePath, pieces: &[NewPiece<'_>]) -> Result<()> {
        by_parts::fill_private_dir(self, dir, pieces)
    }

    // An open and reads, through this wrapper's own calls.
    fn read_small(&self, path: &StorePath) -> Result<Vec<u8>> {
        by_parts::read_small(self, path)
    }

    // The container's metadata, then the read, through this wrapper's own calls.
    fn read_head_below(&self, dir: &StorePath, path: &StorePath, buf: &mut [u8]) -> Result<usize> {
        by_parts::read_head_below(self, dir, path, buf)
    }

    // A lookup, then the open, through this wrapper's own calls.
    fn open_file_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        by_parts::open_file_read(self, path)
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        self.count(|c| &c.opens);
        let piece = piece(path);
        match piece {
            Piece::IndexLog => self.count(|c| &c.index_log_opens),
            Piece::GlobalIndex => self.count(|c| &c.global_index_opens),
            Piece::Other => {}
        }
        let inner = self.inner.open_read(path)?;
        Ok(Box::new(CountingReader { inner, counters: Arc::clone(&self.counters), piece }))
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
    /// Appends to an index log.
    index: bool,
}

impl AppendWriter for CountingWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        bump(&self.counters.appends, 1);
        self.inner.append(buf)?;
        bump(&self.counters.bytes_appended, buf.len() as u64);
        if self.index {
            bump(&self.counters.index_bytes_appended, buf.len() as u64);
        }
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

    fn current_path(&self) -> Option<StorePath> {
        self.inner.current_path()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

#[derive(Debug)]
struct CountingReader {
    inner: Box<dyn ReadHandle>,
    counters: Arc<Counters>,
    piece: Piece,
}

impl ReadHandle for CountingReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        bump(&self.counters.read_ats, 1);
        let count = self.inner.read_at(buf, offset)?;
        bump(&self.counters.bytes_read, count as u64);
        match self.piece {
            Piece::IndexLog => bump(&self.counters.index_log_bytes_read, count as u64),
            Piece::GlobalIndex => bump(&self.counters.global_index_bytes_read, count as u64),
            Piece::Other => {}
        }
        Ok(count)
    }

    /// One request, as the store sees it (one preadv on POSIX).
    fn read_vectored_at(&self, bufs: &mut [std::io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        bump(&self.counters.read_ats, 1);
        let count = self.inner.read_vectored_at(bufs, offset)?;
        bump(&self.counters.bytes_read, count as u64);
        match self.piece {
            Piece::IndexLog => bump(&self.counters.index_log_bytes_read, count as u64),
            Piece::GlobalIndex => bump(&self.counters.global_index_bytes_read, count as u64),
            Piece::Other => {}
        }
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
    fn index_bytes_are_told_apart_from_data_and_summed() {
        use crate::layout::{LogId, log_name};
        let store = over_memory();
        let id = LogId::new(1, 2, 3, "host");
        let (index, data) = (log_name(LogKind::Index, &id), log_name(LogKind::Data, &id));
        for (name, bytes) in [(&index, &b"index"[..]), (&data, &b"data bytes"[..])] {
            let mut log = store.create_append(&p(name)).unwrap();
            log.append(bytes).unwrap();
            log.close().unwrap();
        }
        store.replace(&p(layout::GLOBAL_INDEX), b"global").unwrap();
        store.create_new(&p("other"), b"not an index").unwrap();
        assert_eq!(store.read_all(&p(&index)).unwrap().len(), 5);
        assert_eq!(store.read_all(&p(&data)).unwrap().len(), 10);
        assert_eq!(store.read_all(&p(layout::GLOBAL_INDEX)).unwrap().len(), 6);
        let counts = store.counts();
        assert_eq!((counts.bytes_appended, counts.index_bytes_appended), (15, 5));
        assert_eq!(counts.global_index_bytes_written, 6);
        assert_eq!(
            (counts.bytes_read, counts.index_log_bytes_read, counts.global_index_bytes_read),
            (21, 5, 6)
        );
        let twice: OpCounts = [counts, counts].into_iter().sum();
        assert_eq!((twice.opens, twice.index_bytes_appended), (6, 10));
        assert_eq!(twice - counts, counts);
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
