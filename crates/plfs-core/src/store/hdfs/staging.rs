//! Small files and exclusive directories are built under a private
//! `.plfs-tmp.` name and put in place with HDFS `rename2` without
//! overwrite: readers see all of a file or nothing, and of racing creators
//! exactly one wins.

use std::process;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hdfs_native::WriteOptions;
use hdfs_native::file::FileWriter;

use super::{FILE_MODE, HdfsStore};
use crate::error::{Error, ErrorKind, Result};
use crate::store::StorePath;
use crate::store::posix::TEMP_PREFIX;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl HdfsStore {
    /// A name beside `path` that no other call, process or host uses.
    pub(super) fn temp_beside(&self, path: &StorePath) -> Result<StorePath> {
        let parent = path.parent().unwrap_or_else(StorePath::root);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let serial = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        parent.join(&format!("{TEMP_PREFIX}{}.{serial}.{nanos}", process::id()))
    }

    /// Creates an empty file at `path`, open for writing; fails if anything
    /// is there.
    pub(super) fn create_file(&self, path: &StorePath) -> hdfs_native::Result<FileWriter> {
        let full = self.full(path);
        let options = WriteOptions::default().overwrite(false).create_parent(false).permission(FILE_MODE);
        self.inner.call(async |client| client.create(&full, options).await)
    }

    /// Writes `contents` to a new file at `path` and hsyncs it, leaving it
    /// open: durable, counted in its length, not yet readable.
    pub(super) fn write_unclosed(&self, path: &StorePath, contents: &[u8]) -> Result<FileWriter> {
        let fail = self.fail("create", path);
        let mut writer = self.create_file(path).map_err(&fail)?;
        let written = async {
            writer.write_bytes(Bytes::copy_from_slice(contents)).await?;
            writer.hsync().await
        };
        if let Err(error) = self.inner.transfer(written) {
            let error = fail(error);
            self.inner.close_later(writer, path.to_string());
            self.remove_quietly(path);
            return Err(error);
        }
        Ok(writer)
    }

    /// Writes `contents` to a new file at `path` and closes it.
    pub(super) fn write_whole(&self, op: &str, path: &StorePath, contents: &[u8]) -> Result<()> {
        let fail = self.fail(op, path);
        let mut writer = self.create_file(path).map_err(&fail)?;
        let written = async {
            if !contents.is_empty() {
                writer.write_bytes(Bytes::copy_from_slice(contents)).await?;
            }
            writer.close().await
        };
        if let Err(error) = self.inner.transfer(written) {
            let error = fail(error);
            self.remove_quietly(path);
            return Err(error);
        }
        Ok(())
    }

    /// Cleanup after a failure; the first error is the one reported.
    pub(super) fn remove_quietly(&self, path: &StorePath) {
        if let Err(error) = self.inner.call(async |client| client.delete(&self.full(path), false).await) {
            tracing::warn!(store = %self.inner.url, %path, %error, "could not remove a temporary");
        }
    }

    /// `rename2` without overwrite: fails when anything is at `to`, with
    /// `AlreadyExists`. HDFS checks the kinds of source and target before
    /// it checks overwrite, so a file renamed onto a directory (or the
    /// reverse) fails with a generic IOException; a look at the target
    /// names the real reason.
    pub(super) fn rename_noreplace(&self, from: &StorePath, to: &StorePath, what: &str) -> Result<()> {
        let Err(error) =
            self.inner.call(async |client| client.rename(&self.full(from), &self.full(to), false).await)
        else {
            return Ok(());
        };
        let error = self.inner.error(&error, what);
        if error.kind() == ErrorKind::Io
            && self.inner.call(async |client| client.get_file_info(&self.full(to)).await).is_ok()
        {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!("{}: {what}: target exists", self.inner.url),
            ));
        }
        Err(error)
    }
}
