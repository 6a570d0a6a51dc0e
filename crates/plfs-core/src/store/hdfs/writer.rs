//! Logs open for appending: `sync` is `hsync` then close, the next append
//! reopens with HDFS `append` (see the store's module documentation).

use std::fmt;
use std::process;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hdfs_native::HdfsError;
use hdfs_native::file::FileWriter;

use super::connection::Inner;
use super::error::map_kind;
use super::lock;
use crate::error::{Error, ErrorKind, Result};
use crate::store::AppendWriter;

/// One log being written, shared between its writer and this process's
/// readers of it.
#[derive(Debug)]
pub(super) struct OpenLog {
    pub(super) full: String,
    /// The store path, for messages (errors add the store's URL).
    pub(super) name: String,
    pub(super) state: Mutex<LogState>,
}

pub(super) struct LogState {
    /// The HDFS file open for writing, or None once published (closed);
    /// the next append reopens it with HDFS `append`.
    pub(super) writer: Option<FileWriter>,
    /// The process that opened `writer`: its I/O runs on that process's
    /// runtime, which a forked child cannot use.
    pub(super) writer_pid: u32,
    /// Bytes appended so far.
    pub(super) len: u64,
    /// Bytes every reader can read: the length at the last close.
    pub(super) published: u64,
    /// Why the log stopped taking appends: after a failed write or close
    /// HDFS may hold fewer bytes than `len`, and plfs's index records
    /// physical offsets from `len`, so the log must end there.
    pub(super) failed: Option<String>,
}

impl fmt::Debug for LogState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogState")
            .field("open", &self.writer.is_some())
            .field("len", &self.len)
            .field("published", &self.published)
            .field("failed", &self.failed)
            .finish()
    }
}

impl OpenLog {
    /// A writer this process inherited through fork belongs to the parent,
    /// which still writes and closes it; the child gives up its copy
    /// without touching it (dropping it would use the parent's runtime).
    /// plfs's preload syncs every file before fork, so a child normally
    /// finds the log published and reopens it for itself.
    fn refuse_inherited(&self, inner: &Inner, state: &mut LogState) -> Result<()> {
        if state.writer.is_none() || state.writer_pid == process::id() {
            return Ok(());
        }
        std::mem::forget(state.writer.take());
        Err(Error::new(
            ErrorKind::BadHandle,
            format!(
                "{}: {}: the log was open for writing in process {} before a fork; unsynced bytes stay with it",
                inner.url, self.name, state.writer_pid
            ),
        ))
    }

    /// Closes the HDFS file so every appended byte is readable, by any
    /// reader; `durable` adds an `hsync` first (the bytes reach the
    /// DataNodes' disks, not only their memory).
    pub(super) fn publish(&self, inner: &Inner, durable: bool) -> Result<()> {
        let mut state = lock(&self.state);
        self.refuse_failed(inner, &state)?;
        self.refuse_inherited(inner, &mut state)?;
        let Some(mut writer) = state.writer.take() else {
            return Ok(());
        };
        let finished = inner.transfer(async {
            if durable {
                writer.hsync().await?;
            }
            writer.close().await
        });
        match finished {
            Ok(()) => {
                state.published = state.len;
                Ok(())
            }
            // Removed while open (POSIX allows it): nothing is left to
            // finish. The failure may come from the DataNode (its block is
            // gone) rather than the NameNode, so look rather than parse.
            Err(error)
                if map_kind(&error) == ErrorKind::NotFound
                    || matches!(
                        inner.call(async |client| client.get_file_info(&self.full).await),
                        Err(HdfsError::FileNotFound(_))
                    ) =>
            {
                state.published = state.len;
                Ok(())
            }
            Err(error) => {
                let error = inner.error(&error, &format!("{}: closing the log", self.name));
                state.failed = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// `hsync` without closing: the bytes are durable and counted in the
    /// file's length, and readers that reach them wait for the close
    /// ([`HdfsReadHandle::reader_for`]).
    fn persist(&self, inner: &Inner) -> Result<()> {
        let mut state = lock(&self.state);
        self.refuse_failed(inner, &state)?;
        self.refuse_inherited(inner, &mut state)?;
        let Some(writer) = state.writer.as_mut() else {
            return Ok(());
        };
        if let Err(error) = inner.transfer(writer.hsync()) {
            let error = inner.error(&error, &format!("{}: hsync of the log", self.name));
            state.failed = Some(error.to_string());
            return Err(error);
        }
        Ok(())
    }

    fn refuse_failed(&self, inner: &Inner, state: &LogState) -> Result<()> {
        match &state.failed {
            None => Ok(()),
            Some(reason) => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{}: {}: the log failed earlier and takes no more bytes ({reason})",
                    inner.url, self.name
                ),
            )),
        }
    }
}

/// An HDFS log open for appending; see the module documentation for how
/// its bytes become readable.
#[derive(Debug)]
pub(super) struct HdfsAppendWriter {
    pub(super) inner: Arc<Inner>,
    pub(super) log: Arc<OpenLog>,
    pub(super) closed: bool,
}

impl AppendWriter for HdfsAppendWriter {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let mut state = lock(&self.log.state);
        self.log.refuse_failed(inner, &state)?;
        self.log.refuse_inherited(inner, &mut state)?;
        if state.writer.is_none() {
            let reopened =
                inner.call(async |client| client.append(&self.log.full).await).map_err(|error| {
                    inner.error(&error, &format!("{}: reopening the log for appending", self.log.name))
                })?;
            state.writer = Some(reopened);
            state.writer_pid = process::id();
        }
        let writer = state.writer.as_mut().expect("opened above");
        // write_bytes takes owned bytes: its packets outlive this call.
        if let Err(error) = inner.transfer(writer.write_bytes(Bytes::copy_from_slice(buf))) {
            let error = inner.error(&error, &format!("{}: append of {} bytes", self.log.name, buf.len()));
            state.failed = Some(error.to_string());
            return Err(error);
        }
        state.len += buf.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.log.publish(&self.inner, true)
    }

    fn persist(&mut self) -> Result<()> {
        self.log.persist(&self.inner)
    }

    fn publish(&mut self) -> Result<()> {
        self.log.publish(&self.inner, false)
    }

    fn publish_pending(&self) -> bool {
        lock(&self.log.state).writer.is_some()
    }

    fn len(&self) -> u64 {
        lock(&self.log.state).len
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.closed = true;
        let result = self.log.publish(&self.inner, false);
        self.inner.forget_log(&self.log);
        result
    }
}

impl Drop for HdfsAppendWriter {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // An HDFS file left open keeps its lease and stays unreadable past
        // its last full block until the lease expires (an hour): finish it.
        tracing::warn!(store = %self.inner.url, log = %self.log.name, "hdfs log dropped without close; closing it");
        if let Err(error) = self.log.publish(&self.inner, false) {
            tracing::warn!(log = %self.log.name, %error, "closing a dropped log failed");
        }
        self.inner.forget_log(&self.log);
    }
}
