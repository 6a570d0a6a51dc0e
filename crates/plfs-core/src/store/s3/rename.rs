//! Renames by copy and delete (S3 has none): the target is claimed with a
//! conditional put first, so a rename never replaces.

use std::sync::{Arc, MutexGuard};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{Attributes, ObjectStoreExt, PutMode};

use super::client::{BULK_CONCURRENCY, Shared, log_attributes};
use super::writer::{LiveLog, LogState};
use crate::error::Result;
use crate::store::StorePath;

impl Shared {
    /// Rename of one file or log: the target is claimed with a conditional
    /// put (so a rename never replaces, and of racing renames one wins),
    /// then the source goes.
    pub(super) fn rename_file(&self, from: &StorePath, to: &StorePath, is_log: bool) -> Result<()> {
        let fail = |error| self.error("rename", from, error).context(format!("to {to}"));
        if !is_log {
            return self
                .block_on(async {
                    let bytes = self.client.get(&self.key(from)).await?.bytes().await?;
                    self.put(&self.key(to), bytes, PutMode::Create, Attributes::new()).await?;
                    self.client.delete(&self.key(from)).await
                })
                .map_err(fail);
        }
        // A live log keeps its lock for the whole move, so no segment is
        // sealed under the old name after its segments were copied.
        let live = self.live_log(from);
        let mut state = live.as_ref().map(|log| log.lock());
        self.block_on(async {
            self.put(&self.key(to), Bytes::new(), PutMode::Create, log_attributes()).await?;
            let segments = self.segments(from).await?;
            let copies: Vec<(Key, Key)> = segments
                .iter()
                .enumerate()
                .map(|(number, segment)| (segment.key.clone(), self.segment_key(to, number as u64)))
                .collect();
            self.copy_all(copies).await?;
            self.delete_all(segments.into_iter().map(|segment| segment.key).collect()).await?;
            self.client.delete(&self.key(from)).await
        })
        .map_err(fail)?;
        if let (Some(log), Some(state)) = (&live, state.as_mut()) {
            state.move_to(self, to.clone());
            let mut table = self.live();
            table.remove(from);
            table.insert(to.clone(), Arc::downgrade(log));
        }
        Ok(())
    }

    pub(super) async fn copy_all(&self, pairs: Vec<(Key, Key)>) -> object_store::Result<()> {
        futures::stream::iter(pairs)
            .map(|(from, to)| async move { self.client.copy(&from, &to).await })
            .buffer_unordered(BULK_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
    }

    /// Rename of a directory: the target's marker is claimed with a
    /// conditional put, then every object under the source is copied on the
    /// server and deleted. Not atomic: a reader in between sees both trees,
    /// and a failure part-way leaves a partial copy. Logs this process
    /// writes under it move with it.
    pub(super) fn rename_directory(&self, from: &StorePath, to: &StorePath) -> Result<()> {
        let fail = |error| self.error("rename directory", from, error).context(format!("to {to}"));
        let mut moving: Vec<(StorePath, Arc<LiveLog>)> = {
            let table = self.live();
            table
                .iter()
                .filter(|(path, _)| path.starts_with(from))
                .filter_map(|(path, log)| log.upgrade().map(|log| (path.clone(), log)))
                .collect()
        };
        // One global order (by address), so two renames never deadlock.
        moving.sort_by_key(|(_, log)| Arc::as_ptr(log) as usize);
        let mut states: Vec<MutexGuard<'_, LogState>> = moving.iter().map(|(_, log)| log.lock()).collect();
        let source = self.key(from);
        let target = self.key(to);
        self.block_on(async {
            // Claiming the target's marker first makes racing renames onto
            // one name end with one winner, as for files.
            self.put(&self.marker_key(to), Bytes::new(), PutMode::Create, Attributes::new()).await?;
            let keys = self.keys_under(&source).await?;
            let pairs: Vec<(Key, Key)> = keys
                .iter()
                .map(|key| {
                    let rest = key.prefix_match(&source).into_iter().flatten();
                    let moved = rest.fold(target.clone(), |moved, part| moved.join(part));
                    (key.clone(), moved)
                })
                .collect();
            self.copy_all(pairs).await?;
            self.delete_all(keys).await
        })
        .map_err(fail)?;
        let mut table = self.live();
        for ((old, log), state) in moving.iter().zip(states.iter_mut()) {
            let relative: Vec<&str> = old.components().skip(from.components().count()).collect();
            let moved = relative.iter().try_fold(to.clone(), |path, part| path.join(part))?;
            state.move_to(self, moved.clone());
            table.remove(old);
            table.insert(moved, Arc::downgrade(log));
        }
        Ok(())
    }
}
