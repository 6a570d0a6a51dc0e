//! An in-process [`Store`] with the same semantics as the POSIX store, for
//! fast tests and for simulating crashes.
//!
//! Errors are built from the errno POSIX would return, so kinds and
//! [`Error::errno`] match the POSIX store exactly. Known differences: no
//! umask is applied, permissions are never enforced (as for root), and an
//! absolute symlink target is resolved from the store root rather than from
//! the host's `/`.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use super::{
    AppendWriter, Capabilities, DirEntry, EntryKind, Metadata, RandomWriter, ReadHandle, SpaceInfo, Store,
    StorePath, WriteOpen,
};
use crate::error::{Error, Result};

/// What plfs-created files and `create_dir_all` directories get under the usual umask.
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;
const SYMLINK_MODE: u32 = 0o777;

/// Linux's limit, after which resolution fails with ELOOP.
const MAX_SYMLINK_HOPS: usize = 40;

const BLOCK_SIZE: u64 = 4096;
const TOTAL_BLOCKS: u64 = 1 << 24;
const TOTAL_FILES: u64 = 1 << 20;

/// A whole directory tree held in memory.
pub struct MemoryStore {
    url: String,
    tree: Mutex<Tree>,
    /// The size `space` reports, in blocks.
    total_blocks: u64,
}

impl MemoryStore {
    pub fn new(url: impl Into<String>) -> MemoryStore {
        let mut entries = BTreeMap::new();
        entries.insert(String::new(), Node::new(Kind::Dir, DIR_MODE));
        MemoryStore { url: url.into(), tree: Mutex::new(Tree { entries }), total_blocks: TOTAL_BLOCKS }
    }

    /// A store whose `space` reports a size of `bytes` (rounded down to
    /// whole blocks) and, as free, what its files leave of it: a model of a
    /// small file system for placement by free space without root (`plfs
    /// bench placement --backend-kind memory`). The size is reported, not
    /// enforced: writes past it succeed, so the caller checks the usage.
    pub fn with_capacity(url: impl Into<String>, bytes: u64) -> MemoryStore {
        MemoryStore { total_blocks: bytes / BLOCK_SIZE, ..MemoryStore::new(url) }
    }

    /// Simulates a crash of the machine: every file is cut back to the length
    /// it had at its last [`AppendWriter::sync`]. Files published by
    /// `create_new` or `replace` count as synced when they appear, and
    /// namespace changes (creates, renames, removals) are kept, as a journaled
    /// file system keeps them. Writers opened before the call should be
    /// dropped, as a crashed process's descriptors would be.
    pub fn discard_unsynced(&self) {
        self.crash(|_, _| 0);
    }

    /// A crash in which part of each file's unsynced tail may have reached
    /// the disk anyway (a torn append): `kept(path, unsynced)` says how many
    /// of the `unsynced` bytes past a file's synced length survive (at most
    /// all of them). Files are visited in path order, so a seeded choice
    /// replays exactly. [`discard_unsynced`](Self::discard_unsynced) keeps none.
    ///
    /// A file written in place or cut below its synced length since its
    /// last sync (`write_at`, `set_len`) comes back as it was at that sync
    /// when `kept` answers 0, else with its rewrites and `kept` bytes of
    /// its tail: a crash never takes synced bytes the rewrite did not
    /// touch, as a real file system's would not.
    pub fn crash(&self, mut kept: impl FnMut(&str, usize) -> usize) {
        for (path, node) in &self.tree().entries {
            let mut state = node.state();
            let synced = state.synced.min(state.data.len());
            let unsynced = state.data.len() - synced;
            if let Some(at_sync) = state.at_sync.take() {
                let kept = kept(path, unsynced.max(1));
                if kept == 0 {
                    state.synced = at_sync.len();
                    state.data = at_sync;
                } else {
                    state.data.truncate(synced + kept.min(unsynced));
                    state.mark_synced();
                }
                continue;
            }
            let survives = synced + kept(path, unsynced).min(unsynced);
            state.data.truncate(survives);
            state.synced = survives;
        }
    }

    fn tree(&self) -> MutexGuard<'_, Tree> {
        lock(&self.tree)
    }

    fn fail<'a>(&'a self, op: &'a str, path: &'a StorePath) -> impl Fn(io::Error) -> Error + 'a {
        move |error| Error::io(error, format!("{}: {op} {path}", self.url))
    }

    /// Same guard as the POSIX store, so both refuse identically.
    fn refuse_root(&self, op: &str, path: &StorePath) -> Result<()> {
        if path.is_root() {
            return Err(Error::invalid(format!(
                "{}: {op} {path}: the store root cannot be removed or moved",
                self.url
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Store for MemoryStore {
    fn url(&self) -> &str {
        &self.url
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.tree().mkdir(path, mode & 0o7777).map_err(self.fail("mkdir", path))
    }

    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        self.tree().mkdir_all(path).map_err(self.fail("mkdir -p", path))
    }

    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        self.tree().list(path).map_err(self.fail("list", path))
    }

    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        let tree = self.tree();
        let node = tree.node(path, false).map_err(self.fail("stat", path))?;
        Ok(node.metadata())
    }

    fn remove_file(&self, path: &StorePath) -> Result<()> {
        self.tree().remove_file(path).map_err(self.fail("unlink", path))
    }

    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.refuse_root("rmdir", path)?;
        self.tree().remove_dir(path).map_err(self.fail("rmdir", path))
    }

    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        self.refuse_root("rename", from)?;
        self.tree()
            .rename(from, to)
            .map_err(|error| Error::io(error, format!("{}: rename {from} -> {to}", self.url)))
    }

    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.refuse_root("exchange", a)?;
        self.refuse_root("exchange", b)?;
        self.tree()
            .exchange(a, b)
            .map_err(|error| Error::io(error, format!("{}: exchange {a} <-> {b}", self.url)))
    }

    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        let mut tree = self.tree();
        let key = tree.vacant(path).map_err(self.fail("create", path))?;
        tree.insert(key, Node::file(contents.to_vec()));
        Ok(())
    }

    /// In place at once but not durable before [`sync_file`]: a crash
    /// ([`MemoryStore::crash`]) may leave it empty or cut short, as it may
    /// a new container's pieces on a local file system.
    ///
    /// [`sync_file`]: Store::sync_file
    fn create_new_deferred(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        let mut tree = self.tree();
        let key = tree.vacant(path).map_err(self.fail("create", path))?;
        let node = Node::new(Kind::File, FILE_MODE);
        node.modify(|state| state.data = contents.to_vec());
        tree.insert(key, node);
        Ok(())
    }

    fn sync_file(&self, path: &StorePath) -> Result<()> {
        let tree = self.tree();
        let node = tree.node(path, false).map_err(self.fail("fsync", path))?;
        let mut state = node.state();
        state.mark_synced();
        Ok(())
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        let mut tree = self.tree();
        let key = tree.replaceable(path).map_err(self.fail("replace", path))?;
        // A new node, like rename(2) of a temp file: open readers keep the old bytes.
        tree.insert(key, Node::file(contents.to_vec()));
        Ok(())
    }

    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        let mut tree = self.tree();
        let key = tree.vacant(path).map_err(self.fail("create log", path))?;
        let node = Node::new(Kind::File, FILE_MODE);
        tree.insert(key, Arc::clone(&node));
        Ok(Box::new(MemoryAppendWriter { node, len: 0 }))
    }

    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        let tree = self.tree();
        let node = tree.node(path, true).map_err(self.fail("open", path))?;
        if matches!(node.kind, Kind::Dir) {
            return Err(self.fail("open", path)(errno(libc::EISDIR)));
        }
        Ok(Box::new(MemoryReadHandle { node: Arc::clone(node) }))
    }

    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        let mut tree = self.tree();
        let fail = self.fail("open for writing", path);
        let node = match how {
            WriteOpen::CreateNew { mode } => {
                let key = tree.vacant(path).map_err(&fail)?;
                let node = Node::new(Kind::File, mode & 0o7777);
                tree.insert(key, Arc::clone(&node));
                node
            }
            WriteOpen::Existing => {
                let node = tree.node(path, true).map_err(&fail)?;
                if matches!(node.kind, Kind::Dir) {
                    return Err(fail(errno(libc::EISDIR)));
                }
                Arc::clone(node)
            }
        };
        Ok(Box::new(MemoryRandomWriter { reader: MemoryReadHandle { node } }))
    }

    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        let tree = self.tree();
        // chmod(2) follows a final symlink.
        let node = tree.node(path, true).map_err(self.fail("chmod", path))?;
        node.change(|state| state.mode = mode & 0o7777);
        Ok(())
    }

    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let tree = self.tree();
        let node = tree.node(path, false).map_err(self.fail("chown", path))?;
        node.change(|state| {
            state.uid = uid.unwrap_or(state.uid);
            state.gid = gid.unwrap_or(state.gid);
        });
        Ok(())
    }

    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        let tree = self.tree();
        let node = tree.node(path, false).map_err(self.fail("utimens", path))?;
        node.change(|state| {
            state.atime = atime.unwrap_or(state.atime);
            state.mtime = mtime.unwrap_or(state.mtime);
        });
        Ok(())
    }

    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        let fail = self.fail("symlink", path);
        if target.is_empty() {
            return Err(fail(errno(libc::ENOENT)));
        }
        let mut tree = self.tree();
        let key = tree.vacant(path).map_err(fail)?;
        tree.insert(key, Node::new(Kind::Symlink(target.to_owned()), SYMLINK_MODE));
        Ok(())
    }

    fn read_link(&self, path: &StorePath) -> Result<String> {
        let fail = self.fail("readlink", path);
        let tree = self.tree();
        match &tree.node(path, false).map_err(&fail)?.kind {
            Kind::Symlink(target) => Ok(target.clone()),
            _ => Err(fail(errno(libc::EINVAL))),
        }
    }

    fn space(&self) -> Result<SpaceInfo> {
        let tree = self.tree();
        let bytes: u64 = tree.entries.values().map(|node| node.size()).sum();
        let used_blocks = bytes.div_ceil(BLOCK_SIZE);
        let blocks_free = self.total_blocks.saturating_sub(used_blocks);
        Ok(SpaceInfo {
            block_size: BLOCK_SIZE,
            blocks: self.total_blocks,
            blocks_free,
            blocks_available: blocks_free,
            files: TOTAL_FILES,
            files_free: TOTAL_FILES.saturating_sub(tree.entries.len() as u64),
            name_max: super::path::NAME_MAX_BYTES as u64,
        })
    }
}

/// Every object by its full path text; the root is "". Keys sharing a
/// prefix sort together, so a directory's subtree is one range.
struct Tree {
    entries: BTreeMap<String, Arc<Node>>,
}

impl Tree {
    /// The key `path` names, following symlinks in every component but the
    /// last (and in the last too when `follow_last`). The parent of the
    /// returned key is a directory; the key itself may be absent.
    fn resolve(&self, path: &StorePath, follow_last: bool) -> io::Result<String> {
        // A stack: the next component is at the end.
        let mut pending: Vec<String> = path.components().map(str::to_owned).collect();
        pending.reverse();
        let mut current = String::new();
        let mut hops = 0;
        while let Some(component) = pending.pop() {
            match component.as_str() {
                "" | "." => continue,
                ".." => {
                    current = parent_key(&current).to_owned();
                    continue;
                }
                _ => {}
            }
            let next = join_key(&current, &component);
            let last = pending.is_empty();
            match self.entries.get(&next).map(|node| &node.kind) {
                None if last => current = next,
                None => return Err(errno(libc::ENOENT)),
                Some(Kind::Symlink(target)) if !last || follow_last => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(errno(libc::ELOOP));
                    }
                    if target.starts_with('/') {
                        current.clear();
                    }
                    pending.extend(target.split('/').rev().map(str::to_owned));
                }
                Some(Kind::File) if !last => return Err(errno(libc::ENOTDIR)),
                Some(_) => current = next,
            }
        }
        Ok(current)
    }

    fn node(&self, path: &StorePath, follow_last: bool) -> io::Result<&Arc<Node>> {
        let key = self.resolve(path, follow_last)?;
        self.entries.get(&key).ok_or_else(|| errno(libc::ENOENT))
    }

    /// The key for a new object at `path`; anything there, even a dangling
    /// symlink, makes it EEXIST as with `O_EXCL`, `link(2)` and `mkdir(2)`.
    fn vacant(&self, path: &StorePath) -> io::Result<String> {
        let key = self.resolve(path, false)?;
        if self.entries.contains_key(&key) {
            return Err(errno(libc::EEXIST));
        }
        Ok(key)
    }

    /// The key rename(2) of a file onto `path` would replace.
    fn replaceable(&self, path: &StorePath) -> io::Result<String> {
        let key = self.resolve(path, false)?;
        match self.entries.get(&key) {
            Some(node) if matches!(node.kind, Kind::Dir) => Err(errno(libc::EISDIR)),
            _ => Ok(key),
        }
    }

    fn is_dir(&self, path: &StorePath) -> bool {
        self.node(path, true).is_ok_and(|node| matches!(node.kind, Kind::Dir))
    }

    fn mkdir(&mut self, path: &StorePath, mode: u32) -> io::Result<()> {
        let key = self.vacant(path)?;
        self.insert(key, Node::new(Kind::Dir, mode));
        Ok(())
    }

    /// Mirrors std's `create_dir_all`, which the POSIX store uses, error for error.
    fn mkdir_all(&mut self, path: &StorePath) -> io::Result<()> {
        match self.mkdir(path, DIR_MODE) {
            Ok(()) => return Ok(()),
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => {}
            Err(_) if self.is_dir(path) => return Ok(()),
            Err(error) => return Err(error),
        }
        let Some(parent) = path.parent() else {
            return Err(errno(libc::ENOENT));
        };
        self.mkdir_all(&parent)?;
        match self.mkdir(path, DIR_MODE) {
            Err(_) if self.is_dir(path) => Ok(()),
            result => result,
        }
    }

    fn list(&self, path: &StorePath) -> io::Result<Vec<DirEntry>> {
        let key = self.resolve(path, true)?;
        let node = self.entries.get(&key).ok_or_else(|| errno(libc::ENOENT))?;
        if !matches!(node.kind, Kind::Dir) {
            return Err(errno(libc::ENOTDIR));
        }
        let entries = self
            .subtree(&key)
            .filter(|(name, _)| !name.contains('/'))
            .map(|(name, node)| DirEntry { name: name.to_owned(), kind: node.kind.entry_kind() });
        Ok(entries.collect())
    }

    /// Everything strictly below `key`, as (path relative to `key`, node).
    fn subtree<'a>(&'a self, key: &str) -> impl Iterator<Item = (&'a str, &'a Arc<Node>)> + 'a {
        let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
        let start = prefix.len();
        self.entries
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(move |(name, _)| name.starts_with(&prefix))
            .filter_map(move |(name, node)| {
                let rest = &name[start..];
                (!rest.is_empty()).then_some((rest, node))
            })
    }

    fn remove_file(&mut self, path: &StorePath) -> io::Result<()> {
        let key = self.resolve(path, false)?;
        match self.entries.get(&key) {
            None => Err(errno(libc::ENOENT)),
            // Linux's unlink(2) answers EISDIR rather than POSIX's EPERM.
            Some(node) if matches!(node.kind, Kind::Dir) => Err(errno(libc::EISDIR)),
            Some(_) => {
                self.remove(&key);
                Ok(())
            }
        }
    }

    fn remove_dir(&mut self, path: &StorePath) -> io::Result<()> {
        let key = self.resolve(path, false)?;
        match self.entries.get(&key) {
            None => return Err(errno(libc::ENOENT)),
            Some(node) if !matches!(node.kind, Kind::Dir) => return Err(errno(libc::ENOTDIR)),
            Some(_) => {}
        }
        if self.subtree(&key).next().is_some() {
            return Err(errno(libc::ENOTEMPTY));
        }
        self.remove(&key);
        Ok(())
    }

    /// renameat2(RENAME_NOREPLACE), checked in the kernel's order.
    fn rename(&mut self, from: &StorePath, to: &StorePath) -> io::Result<()> {
        // As the POSIX store: the root is taken before the source is looked at.
        if to.is_root() {
            return Err(errno(libc::EEXIST));
        }
        let source = self.resolve(from, false)?;
        let target = self.resolve(to, false)?;
        if !self.entries.contains_key(&source) {
            return Err(errno(libc::ENOENT));
        }
        if self.entries.contains_key(&target) {
            return Err(errno(libc::EEXIST));
        }
        if target.starts_with(&format!("{source}/")) {
            return Err(errno(libc::EINVAL));
        }
        let moved: Vec<String> = self.subtree(&source).map(|(rest, _)| rest.to_owned()).collect();
        for rest in moved {
            if let Some(node) = self.entries.remove(&join_key(&source, &rest)) {
                self.entries.insert(join_key(&target, &rest), node);
            }
        }
        if let Some(node) = self.remove(&source) {
            node.change(|_| {});
            self.insert(target, node);
        }
        Ok(())
    }

    /// renameat2(RENAME_EXCHANGE): both must exist, neither inside the other.
    fn exchange(&mut self, a: &StorePath, b: &StorePath) -> io::Result<()> {
        let first = self.resolve(a, false)?;
        let second = self.resolve(b, false)?;
        if !self.entries.contains_key(&first) || !self.entries.contains_key(&second) {
            return Err(errno(libc::ENOENT));
        }
        if first == second {
            return Ok(());
        }
        if first.starts_with(&format!("{second}/")) || second.starts_with(&format!("{first}/")) {
            return Err(errno(libc::EINVAL));
        }
        let take = |entries: &mut BTreeMap<String, Arc<Node>>, key: &str| -> Vec<(String, Arc<Node>)> {
            let prefix = format!("{key}/");
            let inside: Vec<String> = entries
                .range(prefix.clone()..)
                .take_while(|(name, _)| name.starts_with(&prefix))
                .map(|(name, _)| name[prefix.len()..].to_owned())
                .collect();
            let mut taken: Vec<(String, Arc<Node>)> = inside
                .into_iter()
                .filter_map(|rest| entries.remove(&join_key(key, &rest)).map(|node| (rest, node)))
                .collect();
            if let Some(node) = entries.remove(key) {
                taken.push((String::new(), node));
            }
            taken
        };
        let moved_first = take(&mut self.entries, &first);
        let moved_second = take(&mut self.entries, &second);
        for (moved, destination) in [(moved_first, &second), (moved_second, &first)] {
            for (rest, node) in moved {
                let key = if rest.is_empty() { destination.clone() } else { join_key(destination, &rest) };
                if rest.is_empty() {
                    node.change(|_| {});
                }
                self.entries.insert(key, node);
            }
        }
        self.touch_parent(&first);
        self.touch_parent(&second);
        Ok(())
    }

    /// Adds an entry and, like a real directory, updates its parent's times.
    fn insert(&mut self, key: String, node: Arc<Node>) {
        self.touch_parent(&key);
        self.entries.insert(key, node);
    }

    fn remove(&mut self, key: &str) -> Option<Arc<Node>> {
        self.touch_parent(key);
        self.entries.remove(key)
    }

    fn touch_parent(&self, key: &str) {
        if let Some(parent) = self.entries.get(parent_key(key)) {
            parent.modify(|_| {});
        }
    }
}

fn join_key(parent: &str, name: &str) -> String {
    if parent.is_empty() { name.to_owned() } else { format!("{parent}/{name}") }
}

fn parent_key(key: &str) -> &str {
    key.rfind('/').map_or("", |index| &key[..index])
}

enum Kind {
    File,
    Dir,
    Symlink(String),
}

impl Kind {
    fn entry_kind(&self) -> EntryKind {
        match self {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Directory,
            Kind::Symlink(_) => EntryKind::Symlink,
        }
    }
}

/// One inode. Handles hold it by `Arc`, so it outlives unlink and rename
/// just as an open descriptor does.
struct Node {
    kind: Kind,
    state: Mutex<State>,
}

struct State {
    data: Vec<u8>,
    /// Length that survives [`MemoryStore::discard_unsynced`].
    synced: usize,
    /// The file as at its last sync, kept from the first change below
    /// `synced` since (a rewrite or a cut): what a crash may go back to.
    at_sync: Option<Vec<u8>>,
    mode: u32,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
}

impl State {
    /// Everything written so far is durable.
    fn mark_synced(&mut self) {
        self.synced = self.data.len();
        self.at_sync = None;
    }

    /// Before the first change since the last sync to bytes it covered.
    fn keep_synced_copy(&mut self) {
        if self.at_sync.is_none() {
            let synced = self.synced.min(self.data.len());
            self.at_sync = Some(self.data[..synced].to_vec());
        }
    }
}

impl Node {
    fn new(kind: Kind, mode: u32) -> Arc<Node> {
        let now = SystemTime::now();
        let (uid, gid) = current_owner();
        let state = State {
            data: Vec::new(),
            synced: 0,
            at_sync: None,
            mode,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        };
        Arc::new(Node { kind, state: Mutex::new(state) })
    }

    /// A file published whole, which is durable from the start.
    fn file(data: Vec<u8>) -> Arc<Node> {
        let node = Node::new(Kind::File, FILE_MODE);
        node.modify(|state| {
            state.synced = data.len();
            state.data = data;
        });
        node
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// An attribute change: bumps ctime.
    fn change(&self, update: impl FnOnce(&mut State)) {
        let mut state = self.state();
        update(&mut state);
        state.ctime = SystemTime::now();
    }

    /// A content change: bumps mtime and ctime.
    fn modify(&self, update: impl FnOnce(&mut State)) {
        let mut state = self.state();
        update(&mut state);
        let now = SystemTime::now();
        state.mtime = now;
        state.ctime = now;
    }

    fn size(&self) -> u64 {
        match &self.kind {
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir => 0,
            Kind::File => self.state().data.len() as u64,
        }
    }

    fn metadata(&self) -> Metadata {
        let size = self.size();
        let state = self.state();
        Metadata {
            kind: self.kind.entry_kind(),
            size,
            mode: Some(state.mode),
            uid: Some(state.uid),
            gid: Some(state.gid),
            atime: Some(state.atime),
            mtime: Some(state.mtime),
            ctime: Some(state.ctime),
        }
    }
}

struct MemoryAppendWriter {
    node: Arc<Node>,
    len: u64,
}

impl fmt::Debug for MemoryAppendWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryAppendWriter").field("len", &self.len).finish_non_exhaustive()
    }
}

impl AppendWriter for MemoryAppendWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        self.node.modify(|state| state.data.extend_from_slice(buf));
        self.len += buf.len() as u64;
        Ok(())
    }

    /// fdatasync covers the whole file, including other writers' bytes.
    fn sync(&mut self) -> Result<()> {
        let mut state = self.node.state();
        state.mark_synced();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

struct MemoryReadHandle {
    node: Arc<Node>,
}

impl fmt::Debug for MemoryReadHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryReadHandle").finish_non_exhaustive()
    }
}

impl ReadHandle for MemoryReadHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let state = self.node.state();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(state.data.len());
        let count = buf.len().min(state.data.len() - start);
        buf[..count].copy_from_slice(&state.data[start..start + count]);
        Ok(count)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.node.size())
    }
}

#[derive(Debug)]
struct MemoryRandomWriter {
    reader: MemoryReadHandle,
}

impl ReadHandle for MemoryRandomWriter {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.reader.read_at(buf, offset)
    }

    fn len(&self) -> Result<u64> {
        self.reader.len()
    }
}

impl RandomWriter for MemoryRandomWriter {
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        // pwrite(2) of nothing changes nothing, not even the length.
        if buf.is_empty() {
            return Ok(());
        }
        let start =
            usize::try_from(offset).map_err(|_| Error::invalid(format!("offset {offset} is too large")))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| Error::invalid(format!("offset {offset} is too large")))?;
        self.reader.node.modify(|state| {
            if state.data.len() < end {
                state.data.resize(end, 0);
            }
            if start < state.synced {
                state.keep_synced_copy();
            }
            state.data[start..end].copy_from_slice(buf);
        });
        Ok(())
    }

    fn set_len(&self, size: u64) -> Result<()> {
        let size = usize::try_from(size).map_err(|_| Error::invalid(format!("size {size} is too large")))?;
        self.reader.node.modify(|state| {
            if size < state.synced {
                state.keep_synced_copy();
            }
            state.data.resize(size, 0);
        });
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut state = self.reader.node.state();
        state.mark_synced();
        Ok(())
    }
}

/// A panic while a lock was held leaves the tree consistent (every update is
/// a single insert or field store), so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// New objects belong to the caller, as they would on a local file system.
fn current_owner() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::store::{StoreExt, conformance};

    fn p(text: &str) -> StorePath {
        StorePath::parse(text).unwrap()
    }

    #[test]
    fn conformance_suite() {
        conformance::run_all(&MemoryStore::new("memory://conformance"));
    }

    #[test]
    fn discard_unsynced_cuts_files_back_to_their_last_sync() {
        let store = MemoryStore::new("memory://crash");
        let mut log = store.create_append(&p("log")).unwrap();
        log.append(b"durable").unwrap();
        log.sync().unwrap();
        log.append(b" lost").unwrap();
        let mut never_synced = store.create_append(&p("fresh")).unwrap();
        never_synced.append(b"gone").unwrap();
        store.create_new(&p("published"), b"whole").unwrap();
        store.replace(&p("replaced"), b"also whole").unwrap();
        let reader = store.open_read(&p("log")).unwrap();
        assert_eq!(reader.len().unwrap(), 12);

        store.discard_unsynced();

        assert_eq!(store.read_all(&p("log")).unwrap(), b"durable");
        assert_eq!(reader.len().unwrap(), 7);
        assert_eq!(store.read_all(&p("fresh")).unwrap(), b"");
        assert_eq!(store.read_all(&p("published")).unwrap(), b"whole");
        assert_eq!(store.read_all(&p("replaced")).unwrap(), b"also whole");
    }

    /// A rewrite in place of synced bytes is undone by a crash or kept,
    /// never a reason to lose the synced bytes after it. Before, the
    /// synced length dropped to the rewrite's offset, and a crash cut the
    /// file there (an n-n file lost synced bytes in the simulation).
    #[test]
    fn a_crash_after_a_rewrite_in_place_keeps_the_synced_bytes_after_it() {
        let store = MemoryStore::new("memory://rewrite");
        let file = store.open_write(&p("plain"), WriteOpen::CreateNew { mode: 0o644 }).unwrap();
        file.write_at(b"0123456789", 0).unwrap();
        file.sync().unwrap();
        file.write_at(b"ab", 2).unwrap();
        file.write_at(b"XY", 10).unwrap();
        store.discard_unsynced();
        assert_eq!(store.read_all(&p("plain")).unwrap(), b"0123456789", "back to the sync");

        file.write_at(b"ab", 2).unwrap();
        file.write_at(b"XY", 10).unwrap();
        store.crash(|_, _| 1);
        assert_eq!(store.read_all(&p("plain")).unwrap(), b"01ab456789X", "the rewrite and 1 tail byte");

        file.sync().unwrap();
        file.set_len(4).unwrap();
        store.discard_unsynced();
        assert_eq!(store.read_all(&p("plain")).unwrap(), b"01ab456789X", "the cut undone");
    }

    #[test]
    fn sync_covers_bytes_from_every_writer_so_far() {
        let store = MemoryStore::new("memory://sync");
        let mut log = store.create_append(&p("log")).unwrap();
        log.append(b"abc").unwrap();
        log.sync().unwrap();
        log.sync().unwrap();
        store.discard_unsynced();
        assert_eq!(store.read_all(&p("log")).unwrap(), b"abc");
    }

    #[test]
    fn root_cannot_be_removed_moved_or_overwritten() {
        let store = MemoryStore::new("memory://root");
        let root = StorePath::root();
        assert_eq!(store.remove_dir(&root).unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(store.rename(&root, &p("x")).unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(store.rename(&p("x"), &root).unwrap_err().kind(), ErrorKind::AlreadyExists);
        assert_eq!(store.create_new(&root, b"x").unwrap_err().kind(), ErrorKind::AlreadyExists);
        assert_eq!(store.replace(&root, b"x").unwrap_err().kind(), ErrorKind::IsADirectory);
        assert_eq!(store.metadata(&root).unwrap().kind, EntryKind::Directory);
    }

    #[test]
    fn errors_carry_posix_errno_and_context() {
        let store = MemoryStore::new("memory://errors");
        let error = store.open_read(&p("no/such")).unwrap_err();
        assert_eq!(error.errno(), libc::ENOENT);
        let text = error.to_string();
        assert!(text.contains("memory://errors") && text.contains("no/such"), "{text}");
    }

    #[test]
    fn handles_outlive_unlink_and_replace() {
        let store = MemoryStore::new("memory://handles");
        store.create_new(&p("f"), b"old").unwrap();
        let reader = store.open_read(&p("f")).unwrap();
        store.replace(&p("f"), b"new!").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(reader.read_at(&mut buf, 0).unwrap(), 3);
        assert_eq!(&buf[..3], b"old");
        store.remove_file(&p("f")).unwrap();
        assert_eq!(reader.read_at(&mut buf, 1).unwrap(), 2);
    }

    #[test]
    fn absolute_and_dotted_symlinks_resolve_inside_the_store() {
        let store = MemoryStore::new("memory://links");
        store.create_dir_all(&p("a/b")).unwrap();
        store.create_new(&p("a/b/f"), b"F").unwrap();
        store.symlink("/a/b", &p("abs")).unwrap();
        store.symlink("../a/./b/f", &p("a/rel")).unwrap();
        assert_eq!(store.read_all(&p("abs/f")).unwrap(), b"F");
        assert_eq!(store.read_all(&p("a/rel")).unwrap(), b"F");
        store.symlink("a/rel", &p("chain")).unwrap();
        assert_eq!(store.read_all(&p("chain")).unwrap(), b"F");
    }

    #[test]
    fn renaming_a_directory_moves_only_its_own_subtree() {
        let store = MemoryStore::new("memory://prefix");
        store.create_dir_all(&p("d/x")).unwrap();
        store.create_new(&p("d-sibling"), b"s").unwrap();
        store.create_new(&p("d0"), b"0").unwrap();
        store.rename(&p("d"), &p("e")).unwrap();
        let mut names: Vec<String> =
            store.list(&StorePath::root()).unwrap().into_iter().map(|entry| entry.name).collect();
        names.sort();
        assert_eq!(names, ["d-sibling", "d0", "e"]);
        assert_eq!(store.metadata(&p("e/x")).unwrap().kind, EntryKind::Directory);
    }
}
