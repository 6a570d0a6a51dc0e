//! A store that runs a test's hooks at the steps a test wants to act
//! between: before every append and every sync of an append log, around
//! every read of the files the hooks watch, and after every listing. Every
//! other call goes straight to the store inside. Test support only.

use std::sync::Arc;
use std::time::SystemTime;

use crate::error::Result;
use crate::store::{
    AppendWriter, Capabilities, DirEntry, Metadata, RandomWriter, ReadHandle, SharedStore, SpaceInfo, Store,
    StorePath, WriteOpen,
};

/// What a [`HookedStore`] runs; every hook does nothing unless overridden.
pub trait Hooks: Send + Sync {
    fn before_append(&self) {}
    fn before_sync(&self) {}
    /// Whether reads through handles opened on `path` go through
    /// [`Hooks::read`].
    fn watches_reads(&self, _path: &StorePath) -> bool {
        false
    }
    /// Runs one watched read (`read` does it and returns its byte count).
    fn read(&self, read: &mut dyn FnMut() -> Result<usize>) -> Result<usize> {
        read()
    }
    /// Runs after a listing of `path` was taken, before the caller sees it.
    fn after_list(&self, _path: &StorePath) {}
    /// Runs after the metadata of `path` was taken, before the caller sees it.
    fn after_metadata(&self, _path: &StorePath) {}
    /// Runs after `path` was removed (`remove_file`), before the caller learns it.
    fn after_remove_file(&self, _path: &StorePath) {}
    /// Runs after `from` was renamed (`rename`), before the caller learns it.
    fn after_rename(&self, _from: &StorePath) {}
    /// Runs after `path` was made (`create_dir`, `create_dir_all`), before
    /// the caller learns it.
    fn after_create_dir(&self, _path: &StorePath) {}
}

/// Hooks made of two closures, run before each append and each sync.
pub struct Before {
    pub append: Arc<dyn Fn() + Send + Sync>,
    pub sync: Arc<dyn Fn() + Send + Sync>,
}

impl Before {
    pub fn nothing() -> Arc<dyn Fn() + Send + Sync> {
        Arc::new(|| {})
    }
}

impl Hooks for Before {
    fn before_append(&self) {
        (self.append)();
    }
    fn before_sync(&self) {
        (self.sync)();
    }
}

pub struct HookedStore {
    pub inner: SharedStore,
    pub hooks: Arc<dyn Hooks>,
}

impl std::fmt::Debug for HookedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookedStore({:?})", self.inner)
    }
}

struct HookedWriter {
    inner: Box<dyn AppendWriter>,
    hooks: Arc<dyn Hooks>,
}

impl std::fmt::Debug for HookedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookedWriter({:?})", self.inner)
    }
}

impl AppendWriter for HookedWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        self.hooks.before_append();
        self.inner.append(buf)
    }
    fn sync(&mut self) -> Result<()> {
        self.hooks.before_sync();
        self.inner.sync()
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

struct HookedReader {
    inner: Box<dyn ReadHandle>,
    hooks: Arc<dyn Hooks>,
}

impl std::fmt::Debug for HookedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookedReader({:?})", self.inner)
    }
}

impl ReadHandle for HookedReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.hooks.read(&mut || self.inner.read_at(buf, offset))
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

impl Store for HookedStore {
    fn url(&self) -> &str {
        self.inner.url()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn create_dir(&self, path: &StorePath, mode: u32) -> Result<()> {
        let made = self.inner.create_dir(path, mode);
        self.hooks.after_create_dir(path);
        made
    }
    fn create_dir_all(&self, path: &StorePath) -> Result<()> {
        let made = self.inner.create_dir_all(path);
        self.hooks.after_create_dir(path);
        made
    }
    fn list(&self, path: &StorePath) -> Result<Vec<DirEntry>> {
        let listed = self.inner.list(path);
        self.hooks.after_list(path);
        listed
    }
    fn metadata(&self, path: &StorePath) -> Result<Metadata> {
        let metadata = self.inner.metadata(path);
        self.hooks.after_metadata(path);
        metadata
    }
    fn remove_file(&self, path: &StorePath) -> Result<()> {
        let removed = self.inner.remove_file(path);
        self.hooks.after_remove_file(path);
        removed
    }
    fn remove_dir(&self, path: &StorePath) -> Result<()> {
        self.inner.remove_dir(path)
    }
    fn rename(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        let renamed = self.inner.rename(from, to);
        self.hooks.after_rename(from);
        renamed
    }
    fn local_path(&self, path: &StorePath) -> Option<std::path::PathBuf> {
        self.inner.local_path(path)
    }
    fn exchange(&self, a: &StorePath, b: &StorePath) -> Result<()> {
        self.inner.exchange(a, b)
    }
    fn create_new(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.inner.create_new(path, contents)
    }

    fn sync_dir(&self, dir: &StorePath) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn sync_file(&self, path: &StorePath) -> Result<()> {
        self.inner.sync_file(path)
    }

    fn replace(&self, path: &StorePath, contents: &[u8]) -> Result<()> {
        self.inner.replace(path, contents)
    }
    fn create_append(&self, path: &StorePath) -> Result<Box<dyn AppendWriter>> {
        let inner = self.inner.create_append(path)?;
        Ok(Box::new(HookedWriter { inner, hooks: self.hooks.clone() }))
    }
    fn open_read(&self, path: &StorePath) -> Result<Box<dyn ReadHandle>> {
        let inner = self.inner.open_read(path)?;
        if !self.hooks.watches_reads(path) {
            return Ok(inner);
        }
        Ok(Box::new(HookedReader { inner, hooks: self.hooks.clone() }))
    }
    fn open_write(&self, path: &StorePath, how: WriteOpen) -> Result<Box<dyn RandomWriter>> {
        self.inner.open_write(path, how)
    }
    fn set_mode(&self, path: &StorePath, mode: u32) -> Result<()> {
        self.inner.set_mode(path, mode)
    }
    fn set_owner(&self, path: &StorePath, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.inner.set_owner(path, uid, gid)
    }
    fn set_times(
        &self,
        path: &StorePath,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        self.inner.set_times(path, atime, mtime)
    }
    fn symlink(&self, target: &str, path: &StorePath) -> Result<()> {
        self.inner.symlink(target, path)
    }
    fn read_link(&self, path: &StorePath) -> Result<String> {
        self.inner.read_link(path)
    }
    fn space(&self) -> Result<SpaceInfo> {
        self.inner.space()
    }
}
