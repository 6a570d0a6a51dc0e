//! Positional reads of whole objects, of logs other processes wrote, and
//! of logs this process is writing.

use std::sync::{Arc, PoisonError, RwLock};

use object_store::ObjectStoreExt;
use object_store::path::Path as Key;

use super::client::Shared;
use super::writer::{LiveLog, Segment};
use crate::error::{Error, Result};
use crate::store::{ReadHandle, StorePath};

/// Where a reader's bytes come from.
#[derive(Debug)]
pub(super) enum Source {
    /// A whole file: one object of fixed size.
    Object(Segment),
    /// A log another process wrote (or is writing): its sealed segments,
    /// listed at the first read and again when a read runs past them.
    Sealed { path: StorePath, segments: RwLock<Option<Arc<Vec<Segment>>>> },
    /// A log this process is writing: sealed segments plus its buffer.
    Live(Arc<LiveLog>),
}

#[derive(Debug)]
pub(super) struct S3ReadHandle {
    pub(super) store: Arc<Shared>,
    pub(super) path: StorePath,
    pub(super) source: Source,
}

impl S3ReadHandle {
    pub(super) fn fail(&self, error: object_store::Error) -> Error {
        self.store.error("read", &self.path, error)
    }

    /// Lists the segments again and keeps the answer.
    pub(super) fn reload(
        &self,
        path: &StorePath,
        cache: &RwLock<Option<Arc<Vec<Segment>>>>,
    ) -> Result<Arc<Vec<Segment>>> {
        let segments =
            Arc::new(self.store.block_on(self.store.segments(path)).map_err(|error| self.fail(error))?);
        *cache.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&segments));
        Ok(segments)
    }

    /// Fills `buf` from `segments` at `offset`, fetching the pieces at once.
    pub(super) fn read_segments(&self, segments: &[Segment], buf: &mut [u8], offset: u64) -> Result<usize> {
        let end = segments.last().map_or(0, |last| last.start + last.len);
        if offset >= end || buf.is_empty() {
            return Ok(0);
        }
        let wanted = (end - offset).min(buf.len() as u64);
        let pieces: Vec<(usize, &Key, std::ops::Range<u64>)> = segments
            .iter()
            .filter(|segment| segment.start < offset + wanted && segment.start + segment.len > offset)
            .map(|segment| {
                let from = offset.max(segment.start);
                let to = (offset + wanted).min(segment.start + segment.len);
                ((from - offset) as usize, &segment.key, from - segment.start..to - segment.start)
            })
            .collect();
        let store = &self.store;
        let fetched = store
            .block_on(futures::future::try_join_all(
                pieces.iter().map(|(_, key, range)| store.client.get_range(key, range.clone())),
            ))
            .map_err(|error| self.fail(error))?;
        for ((at, _, range), bytes) in pieces.iter().zip(fetched) {
            let length = (range.end - range.start) as usize;
            if bytes.len() != length {
                return Err(Error::corrupt(format!(
                    "{}: read {}: a segment returned {} bytes where {length} were asked for",
                    store.url,
                    self.path,
                    bytes.len()
                )));
            }
            buf[*at..*at + length].copy_from_slice(&bytes);
        }
        Ok(wanted as usize)
    }
}

impl ReadHandle for S3ReadHandle {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        match &self.source {
            Source::Object(whole) => self.read_segments(std::slice::from_ref(whole), buf, offset),
            Source::Sealed { path, segments } => {
                let known = segments.read().unwrap_or_else(PoisonError::into_inner).clone();
                let known = match known {
                    Some(known) => known,
                    None => self.reload(path, segments)?,
                };
                let end = known.last().map_or(0, |last| last.start + last.len);
                // The writer may have sealed more since the listing.
                let current =
                    if offset + buf.len() as u64 > end { self.reload(path, segments)? } else { known };
                self.read_segments(&current, buf, offset)
            }
            Source::Live(log) => {
                let (sealed, buffered, buffer_start) = {
                    let state = log.lock();
                    let end = offset.saturating_add(buf.len() as u64);
                    let sealed: Vec<Segment> = state
                        .sealed
                        .iter()
                        .filter(|segment| segment.start < end && segment.start + segment.len > offset)
                        .cloned()
                        .collect();
                    let from = offset.max(state.sealed_bytes);
                    let to = end.min(state.len());
                    let buffered = if from < to {
                        let start = (from - state.sealed_bytes) as usize;
                        state.buffer[start..start + (to - from) as usize].to_vec()
                    } else {
                        Vec::new()
                    };
                    (sealed, buffered, from)
                };
                let mut done = self.read_segments(&sealed, buf, offset)?;
                if !buffered.is_empty() {
                    let at = (buffer_start - offset) as usize;
                    buf[at..at + buffered.len()].copy_from_slice(&buffered);
                    done = at + buffered.len();
                }
                Ok(done)
            }
        }
    }

    fn len(&self) -> Result<u64> {
        match &self.source {
            Source::Object(whole) => Ok(whole.len),
            Source::Sealed { path, segments } => {
                let current = self.reload(path, segments)?;
                Ok(current.last().map_or(0, |last| last.start + last.len))
            }
            Source::Live(log) => Ok(log.lock().len()),
        }
    }
}
