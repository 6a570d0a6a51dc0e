//! A [`Store`] wrapper that fails chosen calls, for testing how plfs copes
//! with backend errors, full disks and torn appends.
//!
//! Faults are rules matched against each call's operation and path. An
//! `Eio` or `Enospc` fault fails the call before it reaches the wrapped
//! store, so the wrapped store is left untouched; `ShortWrite` and
//! `TornAppend` let part of an append through first.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::{
    AppendWriter, Capabilities, DirEntry, Metadata, NewPiece, Protection, RandomWriter, ReadHandle,
    SpaceInfo, Store, StorePath, WriteOpen, by_parts,
};
use crate::error::{Error, Result};

/// A call that can be made to fail: every fallible [`Store`] method, plus the
/// calls on the handles it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    CreateDir,
    CreateDirAll,
    List,
    Metadata,
    RemoveFile,
    RemoveDir,
    Rename,
    Exchange,
    CreateNew,
    Replace,
    CreateAppend,
    OpenRead,
    OpenWrite,
    SetMode,
    SetOwner,
    SetTimes,
    Symlink,
    ReadLink,
    Space,
    /// [`AppendWriter::append`].
    Append,
    /// [`AppendWriter::sync`].
    Sync,
    /// [`AppendWriter::close`].
    Close,
    /// [`ReadHandle::read_at`].
    ReadAt,
    /// [`ReadHandle::len`].
    Len,
    /// [`RandomWriter::write_at`].
    WriteAt,
    /// [`RandomWriter::set_len`].
    SetLen,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::CreateDir => "create_dir",
            Op::CreateDirAll => "create_dir_all",
            Op::List => "list",
            Op::Metadata => "metadata",
            Op::RemoveFile => "remove_file",
            Op::RemoveDir => "remove_dir",
            Op::Rename => "rename",
            Op::Exchange => "exchange",
            Op::CreateNew => "create_new",
            Op::Replace => "replace",
            Op::CreateAppend => "create_append",
            Op::OpenRead => "open_read",
            Op::OpenWrite => "open_write",
            Op::SetMode => "set_mode",
            Op::SetOwner => "set_owner",
            Op::SetTimes => "set_times",
            Op::Symlink => "symlink",
            Op::ReadLink => "read_link",
            Op::Space => "space",
            Op::Append => "append",
            Op::Sync => "sync",
            Op::Close => "close",
            Op::ReadAt => "read_at",
            Op::Len => "len",
            Op::WriteAt => "write_at",
            Op::SetLen => "set_len",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a firing fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Fails with EIO (`ErrorKind::Io`) without calling the wrapped store.
    Eio,
    /// Fails with ENOSPC (`ErrorKind::NoSpace`) without calling the wrapped store.
    Enospc,
    /// An append writes only the first N bytes of its buffer (all of it if
    /// shorter), then fails with EIO. On other operations it acts as `Eio`.
    ShortWrite(usize),
    /// An append writes only the first half of its buffer (rounded down), then
    /// fails with EIO. On other operations it acts as `Eio`.
    TornAppend,
}

/// One rule: which calls fail, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub op: Op,
    /// Fires on the nth matching call (1-based) counted from when the rule was
    /// added; 0 fires on every matching call.
    pub nth: u64,
    /// Only calls on a path containing this text match (either path of a
    /// rename). `Space` has no path, so it matches only when this is None.
    pub path_contains: Option<String>,
    pub action: FaultAction,
}

impl Fault {
    /// A fault on every call of `op`.
    pub fn new(op: Op, action: FaultAction) -> Fault {
        Fault { op, nth: 0, path_contains: None, action }
    }

    /// Fires only on the `nth` matching call (1-based).
    pub fn nth(mut self, nth: u64) -> Fault {
        self.nth = nth;
        self
    }

    /// Matches only calls on paths containing `text`.
    pub fn path_contains(mut self, text: impl Into<String>) -> Fault {
        self.path_contains = Some(text.into());
        self
    }

    fn matches(&self, op: Op, paths: &[&StorePath]) -> bool {
        self.op == op
            && match &self.path_contains {
                None => true,
                Some(text) => paths.iter().any(|path| path.as_str().contains(text.as_str())),
            }
    }
}

/// Wraps a store and fails the calls its rules pick.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    faults: Arc<Faults>,
    /// Answers as a store without `exchange` (as S3 and HDFS are), so a
    /// POSIX backend can stand in for one where only that matters.
    no_exchange: bool,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn Store>) -> FaultyStore {
        let faults = Faults { url: inner.url().to_owned(), ..Faults::default() };
        FaultyStore { inner, faults: Arc::new(faults), no_exchange: false }
    }

    /// The store, saying it cannot exchange two entries, and refusing to.
    pub fn without_exchange(self) -> FaultyStore {
        FaultyStore { no_exchange: true, ..self }
    }

    /// Adds a rule. It also applies to handles opened before it was added.
    pub fn add_fault(&self, fault: Fault) {
        lock(&self.faults.rules).push(Rule { fault, seen: 0 });
    }

    /// Removes every rule (and the halt of [`halt_after_fault`](Self::halt_after_fault)).
    pub fn clear(&self) {
        lock(&self.faults.rules).clear();
        lock(&self.faults.halted).take();
    }

    /// From the first fault that fires here on, every call of every store
    /// sharing `halted` fails with EIO: the process died at that call, and
    /// what it would have done next (undo, retry) never happens.
    pub fn halt_after_fault(&self, halted: Arc<AtomicBool>) {
        *lock(&self.faults.halted) = Some(halted);
    }

    /// How many faults have fired so far.
    pub fn injected(&self) -> u64 {
        self.faults.injected.load(Ordering::Relaxed)
    }

    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }
}

/// Rules shared by the store and every handle it opened.
#[derive(Debug, Default)]
struct Faults {
    url: String,
    rules: Mutex<Vec<Rule>>,
    injected: AtomicU64,
    /// Set by [`FaultyStore::halt_after_fault`].
    halted: Mutex<Option<Arc<AtomicBool>>>,
}

#[derive(Debug)]
struct Rule {
    fault: Fault,
    /// Matching calls since the rule was added.
    seen: u64,
}

impl Faults {
    /// The action of the first rule that fires for this call. Every matching
    /// rule counts the call, fired or not, so `nth` stays independent of
    /// other rules.
    fn check(&self, op: Op, paths: &[&StorePath]) -> Option<FaultAction> {
        let halted = lock(&self.halted).clone();
        if halted.as_ref().is_some_and(|halted| halted.load(Ordering::SeqCst)) {
            return Some(FaultAction::Eio);
        }
        let mut fired = None;
        for rule in lock(&self.rules).iter_mut().filter(|rule| rule.fault.matches(op, paths)) {
            rule.seen += 1;
            if fired.is_none() && (rule.fault.nth == 0 || rule.seen == rule.fault.nth) {
                fired = Some(rule.fault.action);
            }
        }
        if fired.is_some() {
            self.injected.fetch_add(1, Ordering::Relaxed);
            if let Some(halted) = halted {
                halted.store(true, Ordering::SeqCst);
            }
        }
        fired
    }

    fn error(&self, op: Op, paths: &[&StorePath], action: FaultAction) -> Error {
        let code = if action == FaultAction::Enospc { libc::ENOSPC } else { libc::EIO };
        let paths: Vec<String> = paths.iter().map(ToString::to_string).collect();
        let what = format!("injected fault: {op} {}", paths.join(" -> "));
        Error::io(io::Error::from_raw_os_error(code), what).context(self.url.clone())
    }

    /// Fails the call if a rule fires.
    fn guard(&self, op: Op, paths: &[&StorePath]) -> Result<()> {
        match self.check(op, paths) {
            Some(action) => Err(self.error(op, paths, action)),
            None => Ok(()),
        }
    }
}

#[deny(clippy::missing_trait_methods)]
impl Store for FaultyStore {
    fn url(&self) -> &str {
        self.inner.url()
    }

    fn capabilities(&self) -> Capabilities {
        let capabilities = self.inner.capabilities();
        Capabilities { exchange: capabilities.exchange && !self.no_exchange, ..capabilities }
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.faults.guard(Op::CreateDir, &[path])?;
        self.inner.create_dir(path, mode)
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.faults.guard(Op::CreateDirAll, &[path])?;
        self.inner.create_dir_all(path)
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        self.faults.guard(Op::List, &[path])?;
        self.inner.list(path)
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        self.faults.guard(Op::Metadata, &[path])?;
        self.inner.metadata(path)
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.faults.guard(Op::RemoveFile, &[path])?;
        self.inner.remove_file(path)
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.faults.guard(Op::RemoveDir, &[path])?;
        self.inner.remove_dir(path)
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.faults.guard(Op::Rename, &[from, to])?;
        self.inner.rename(from, to)
    }

    /// None: a rename(2) around the store would escape the injected faults,
    /// so moves between backends keep going through the store's calls.
    fn local_path(&self, _path: &StorePath) -> Option<std::path::PathBuf> {
        None
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.faults.guard(Op::Exchange, &[a, b])?;
        if self.no_exchange {
            return Err(super::unsupported_exchange(self.url(), a, b));
        }
        self.inner.exchange(a, b)
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.faults.guard(Op::CreateNew, &[path])?;
        self.inner.create_new(path, contents)
    }

    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.faults.guard(Op::CreateNew, &[path])?;
        self.inner.create_new_deferred(path, contents)
    }

    fn settle(&self) -> Result<()> {
        self.inner.settle()
    }

    fn sync_dir(&self, dir: &StorePath) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn sync_file(&self, path: &StorePath) -> Result<()> {
        self.faults.guard(Op::Sync, &[path])?;
        self.inner.sync_file(path)
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.faults.guard(Op::Replace, &[path])?;
        self.inner.replace(path, contents)
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        self.faults.guard(Op::CreateAppend, &[path])?;
        let inner = self.inner.create_append(path)?;
        let faults = Arc::clone(&self.faults);
        Ok(Box::new(FaultyWriter { inner, path: path.clone(), faults }))
    }

    // The protected calls go piece by piece through this wrapper, so a fault
    // set on the create, on set_owner or on set_mode meets each piece.
    fn protect(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        by_parts::protect(self, path, protection)
    }

    fn create_dir_protected(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        by_parts::create_dir_protected(self, path, protection)
    }

    fn create_append_protected(
        &self,
        path: &StorePath,
        protection: &Protection,
    ) -> Result<Box<dyn AppendWriter>> {
        by_parts::create_append_protected(self, path, protection)
    }

    fn create_new_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        by_parts::create_new_protected(self, path, contents, protection)
    }

    fn create_new_deferred_protected(
        &self,
        path: &StorePath,
        contents: &[u8],
        protection: &Protection,
    ) -> Result<()> {
        by_parts::create_new_deferred_protected(self, path, contents, protection)
    }

    fn replace_protected(&self, path: &StorePath, contents: &[u8], protection: &Protection) -> Result<()> {
        by_parts::replace_protected(self, path, contents, protection)
    }

    // Each piece through its own hooks, so faults and crash points can
    // fall between them.
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
        self.faults.guard(Op::OpenRead, &[path])?;
        let inner = self.inner.open_read(path)?;
        let faults = Arc::clone(&self.faults);
        Ok(Box::new(FaultyReader { inner, path: path.clone(), faults }))
    }

    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        self.faults.guard(Op::OpenWrite, &[path])?;
        let inner = self.inner.open_write(path, how)?;
        let faults = Arc::clone(&self.faults);
        Ok(Box::new(FaultyRandomWriter { inner, path: path.clone(), faults }))
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.faults.guard(Op::SetMode, &[path])?;
        self.inner.set_mode(path, mode)
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.faults.guard(Op::SetOwner, &[path])?;
        self.inner.set_owner(path, uid, gid)
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        self.faults.guard(Op::SetTimes, &[path])?;
        self.inner.set_times(path, atime, mtime)
    }

    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        self.faults.guard(Op::Symlink, &[path])?;
        self.inner.symlink(target, path)
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        self.faults.guard(Op::ReadLink, &[path])?;
        self.inner.read_link(path)
    }

    fn space(&self) -> Result<SpaceInfo> {
        self.faults.guard(Op::Space, &[])?;
        self.inner.space()
    }

    fn filesystem_id(&self) -> Option<u64> {
        self.inner.filesystem_id()
    }
}

#[derive(Debug)]
struct FaultyWriter {
    inner: Box<dyn AppendWriter>,
    path: StorePath,
    faults: Arc<Faults>,
}

impl AppendWriter for FaultyWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let Some(action) = self.faults.check(Op::Append, &[&self.path]) else {
            return self.inner.append(buf);
        };
        let written = match action {
            FaultAction::ShortWrite(count) => count.min(buf.len()),
            FaultAction::TornAppend => buf.len() / 2,
            FaultAction::Eio | FaultAction::Enospc => 0,
        };
        if written > 0 {
            self.inner.append(&buf[..written])?;
        }
        Err(self.faults.error(Op::Append, &[&self.path], action))
    }

    fn sync(&mut self) -> Result<()> {
        self.faults.guard(Op::Sync, &[&self.path])?;
        self.inner.sync()
    }

    // A sync fault strikes the durable half; publishing is not a second sync.
    fn persist(&mut self) -> Result<()> {
        self.faults.guard(Op::Sync, &[&self.path])?;
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
        self.faults.guard(Op::Close, &[&self.path])?;
        self.inner.close()
    }
}

#[derive(Debug)]
struct FaultyReader {
    inner: Box<dyn ReadHandle>,
    path: StorePath,
    faults: Arc<Faults>,
}

impl ReadHandle for FaultyReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.faults.guard(Op::ReadAt, &[&self.path])?;
        self.inner.read_at(buf, offset)
    }

    fn len(&self) -> Result<u64> {
        self.faults.guard(Op::Len, &[&self.path])?;
        self.inner.len()
    }
}

/// Faults on positional writes are all-or-nothing (`ShortWrite` and
/// `TornAppend` act as `Eio`): the n-n layout has no torn-tail recovery.
#[derive(Debug)]
struct FaultyRandomWriter {
    inner: Box<dyn RandomWriter>,
    path: StorePath,
    faults: Arc<Faults>,
}

impl ReadHandle for FaultyRandomWriter {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.faults.guard(Op::ReadAt, &[&self.path])?;
        self.inner.read_at(buf, offset)
    }

    fn len(&self) -> Result<u64> {
        self.faults.guard(Op::Len, &[&self.path])?;
        self.inner.len()
    }
}

impl RandomWriter for FaultyRandomWriter {
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.faults.guard(Op::WriteAt, &[&self.path])?;
        self.inner.write_at(buf, offset)
    }

    fn set_len(&self, size: u64) -> Result<()> {
        self.faults.guard(Op::SetLen, &[&self.path])?;
        self.inner.set_len(size)
    }

    fn sync(&self) -> Result<()> {
        self.faults.guard(Op::Sync, &[&self.path])?;
        self.inner.sync()
    }
}

/// Rules are plain data, so a panic elsewhere cannot leave them inconsistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::store::memory::MemoryStore;
    use crate::store::posix::PosixStore;
    use crate::store::{StoreExt, conformance};

    fn p(text: &str) -> StorePath {
        StorePath::parse(text).unwrap()
    }

    fn over_memory() -> (Arc<MemoryStore>, FaultyStore) {
        let memory = Arc::new(MemoryStore::new("memory://faulty"));
        let faulty = FaultyStore::new(memory.clone());
        (memory, faulty)
    }

    #[test]
    fn conformance_over_memory() {
        let (_memory, faulty) = over_memory();
        conformance::run_all(&faulty);
        assert_eq!(faulty.injected(), 0);
    }

    #[test]
    fn conformance_over_posix() {
        let dir = tempfile::tempdir().unwrap();
        let posix = PosixStore::new(dir.path(), "posix://faulty".into()).unwrap();
        let faulty = FaultyStore::new(Arc::new(posix));
        conformance::run_all(&faulty);
        assert_eq!(faulty.injected(), 0);
    }

    #[test]
    fn injected_errors_have_the_right_kind_and_context() {
        let (memory, faulty) = over_memory();
        faulty.add_fault(Fault::new(Op::CreateNew, FaultAction::Eio));
        faulty.add_fault(Fault::new(Op::CreateDir, FaultAction::Enospc));

        let error = faulty.create_new(&p("a/file"), b"x").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io);
        assert_eq!(error.errno(), libc::EIO);
        let text = error.to_string();
        assert!(text.contains("injected fault: create_new a/file"), "{text}");
        assert!(text.contains("memory://faulty"), "{text}");

        let error = faulty.create_dir(&p("d"), 0o755).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NoSpace);
        assert_eq!(error.errno(), libc::ENOSPC);
        assert!(error.to_string().contains("injected fault: create_dir d"), "{error}");

        assert!(!memory.exists(&p("d")).unwrap());
        assert_eq!(faulty.injected(), 2);
    }

    /// One store call, answering the kind of error it failed with.
    type Call = fn(&FaultyStore) -> Option<ErrorKind>;

    #[test]
    fn every_store_op_can_fail() {
        let (_memory, faulty) = over_memory();
        faulty.create_new(&p("f"), b"x").unwrap();
        let f = p("f");
        let calls: [(Op, Call); 19] = [
            (Op::CreateDir, |s| s.create_dir(&p("n"), 0o755).err().map(|e| e.kind())),
            (Op::CreateDirAll, |s| s.create_dir_all(&p("n")).err().map(|e| e.kind())),
            (Op::List, |s| s.list(&StorePath::root()).err().map(|e| e.kind())),
            (Op::Metadata, |s| s.metadata(&p("f")).err().map(|e| e.kind())),
            (Op::RemoveFile, |s| s.remove_file(&p("f")).err().map(|e| e.kind())),
            (Op::RemoveDir, |s| s.remove_dir(&p("f")).err().map(|e| e.kind())),
            (Op::Rename, |s| s.rename(&p("f"), &p("g")).err().map(|e| e.kind())),
            (Op::Exchange, |s| s.exchange(&p("f"), &p("g")).err().map(|e| e.kind())),
            (Op::CreateNew, |s| s.create_new(&p("n"), b"").err().map(|e| e.kind())),
            (Op::Replace, |s| s.replace(&p("f"), b"").err().map(|e| e.kind())),
            (Op::CreateAppend, |s| s.create_append(&p("n")).err().map(|e| e.kind())),
            (Op::OpenRead, |s| s.open_read(&p("f")).err().map(|e| e.kind())),
            (Op::OpenWrite, |s| s.open_write(&p("f"), WriteOpen::Existing).err().map(|e| e.kind())),
            (Op::SetMode, |s| s.set_mode(&p("f"), 0o600).err().map(|e| e.kind())),
            (Op::SetOwner, |s| s.set_owner(&p("f"), None, None).err().map(|e| e.kind())),
            (Op::SetTimes, |s| s.set_times(&p("f"), None, None).err().map(|e| e.kind())),
            (Op::Symlink, |s| s.symlink("t", &p("n")).err().map(|e| e.kind())),
            (Op::ReadLink, |s| s.read_link(&p("f")).err().map(|e| e.kind())),
            (Op::Space, |s| s.space().err().map(|e| e.kind())),
        ];
        for (op, call) in calls {
            faulty.clear();
            faulty.add_fault(Fault::new(op, FaultAction::Enospc));
            let before = faulty.injected();
            assert_eq!(call(&faulty), Some(ErrorKind::NoSpace), "{op}");
            assert_eq!(faulty.injected(), before + 1, "{op} was not injected");
        }
        faulty.clear();
        assert_eq!(faulty.read_all(&f).unwrap(), b"x");
    }

    #[test]
    fn failed_append_keeps_synced_bytes_in_the_inner_store() {
        for (action, kind) in [(FaultAction::Eio, ErrorKind::Io), (FaultAction::Enospc, ErrorKind::NoSpace)] {
            let (memory, faulty) = over_memory();
            let mut log = faulty.create_append(&p("log")).unwrap();
            log.append(b"synced").unwrap();
            log.sync().unwrap();
            faulty.add_fault(Fault::new(Op::Append, action));
            let error = log.append(b"more").unwrap_err();
            assert_eq!(error.kind(), kind);
            assert!(error.to_string().contains("injected fault: append log"), "{error}");
            assert_eq!(log.len(), 6);
            assert_eq!(memory.read_all(&p("log")).unwrap(), b"synced");
            memory.discard_unsynced();
            assert_eq!(memory.read_all(&p("log")).unwrap(), b"synced");
        }
    }

    #[test]
    fn short_write_leaves_exactly_the_prefix() {
        let (memory, faulty) = over_memory();
        let mut log = faulty.create_append(&p("log")).unwrap();
        log.append(b"head:").unwrap();
        faulty.add_fault(Fault::new(Op::Append, FaultAction::ShortWrite(3)).nth(1));
        let error = log.append(b"abcdef").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io);
        assert_eq!(log.len(), 8);
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"head:abc");
        log.append(b"!").unwrap();
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"head:abc!");
    }

    #[test]
    fn short_write_longer_than_the_buffer_writes_it_all_and_still_fails() {
        let (memory, faulty) = over_memory();
        let mut log = faulty.create_append(&p("log")).unwrap();
        faulty.add_fault(Fault::new(Op::Append, FaultAction::ShortWrite(100)));
        assert_eq!(log.append(b"xyz").unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"xyz");
    }

    #[test]
    fn torn_append_leaves_the_first_half() {
        let (memory, faulty) = over_memory();
        let mut log = faulty.create_append(&p("log")).unwrap();
        log.append(b"ok").unwrap();
        log.sync().unwrap();
        faulty.add_fault(Fault::new(Op::Append, FaultAction::TornAppend));
        assert_eq!(log.append(b"0123456789").unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(log.append(b"abcde").unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"ok01234ab");
        assert_eq!(log.len(), 9);
        memory.discard_unsynced();
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"ok");
    }

    #[test]
    fn nth_counts_matching_calls_after_the_rule_was_added() {
        let (_memory, faulty) = over_memory();
        faulty.create_new(&p("before"), b"").unwrap();
        faulty.add_fault(Fault::new(Op::CreateNew, FaultAction::Eio).nth(2).path_contains("data"));
        faulty.create_new(&p("data.1"), b"").unwrap();
        faulty.create_new(&p("index.1"), b"").unwrap();
        faulty.create_dir(&p("data.dir"), 0o755).unwrap();
        assert!(faulty.create_new(&p("data.2"), b"").is_err());
        faulty.create_new(&p("data.3"), b"").unwrap();
        assert!(!faulty.exists(&p("data.2")).unwrap());
        assert_eq!(faulty.injected(), 1);
    }

    #[test]
    fn nth_zero_fails_every_call_until_cleared() {
        let (_memory, faulty) = over_memory();
        faulty.add_fault(Fault::new(Op::Metadata, FaultAction::Eio));
        for _ in 0..3 {
            assert_eq!(faulty.metadata(&StorePath::root()).unwrap_err().kind(), ErrorKind::Io);
        }
        faulty.clear();
        faulty.metadata(&StorePath::root()).unwrap();
        assert_eq!(faulty.injected(), 3);
    }

    #[test]
    fn rename_faults_match_either_path() {
        let (_memory, faulty) = over_memory();
        faulty.create_new(&p("a"), b"").unwrap();
        faulty.add_fault(Fault::new(Op::Rename, FaultAction::Eio).path_contains("target"));
        let error = faulty.rename(&p("a"), &p("target")).unwrap_err();
        assert!(error.to_string().contains("injected fault: rename a -> target"), "{error}");
        faulty.rename(&p("a"), &p("b")).unwrap();
    }

    #[test]
    fn handle_calls_can_fail() {
        let (_memory, faulty) = over_memory();
        let log = faulty.create_append(&p("log")).unwrap();
        let reader = faulty.open_read(&p("log")).unwrap();
        let mut other = faulty.create_append(&p("other")).unwrap();
        other.append(b"abc").unwrap();
        faulty.add_fault(Fault::new(Op::ReadAt, FaultAction::Eio).nth(1));
        faulty.add_fault(Fault::new(Op::Len, FaultAction::Enospc).nth(1));
        faulty.add_fault(Fault::new(Op::Close, FaultAction::Eio).nth(1));

        let mut buf = [0u8; 3];
        assert_eq!(reader.read_at(&mut buf, 0).unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(reader.read_at(&mut buf, 0).unwrap(), 0);
        assert_eq!(reader.len().unwrap_err().kind(), ErrorKind::NoSpace);
        assert_eq!(reader.len().unwrap(), 0);
        assert_eq!(log.close().unwrap_err().kind(), ErrorKind::Io);
        other.close().unwrap();
        assert_eq!(faulty.injected(), 3);
    }

    #[test]
    fn failed_sync_makes_nothing_durable() {
        let (memory, faulty) = over_memory();
        let mut log = faulty.create_append(&p("log")).unwrap();
        log.append(b"abc").unwrap();
        faulty.add_fault(Fault::new(Op::Sync, FaultAction::Eio).path_contains("log"));
        let error = log.sync().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io);
        assert!(error.to_string().contains("injected fault: sync log"), "{error}");
        memory.discard_unsynced();
        assert_eq!(memory.read_all(&p("log")).unwrap(), b"");
    }
}
