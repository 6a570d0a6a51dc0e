//! The state every workload of one mount shares: its stores and where
//! things go on them, tuning, who this process is, its clock, and the read
//! caches. The façade (`fs`) builds it and keeps its own open-file registry
//! beside it; the workloads below the façade take it by reference and never
//! need the façade's types.

use crate::clock::Stamper;
use crate::config::{Tuning, Workload};
use crate::error::Result;
use crate::layout::ContainerPaths;
use crate::placement::{BackendId, Placement, placement_name};
use crate::reader::{LogCache, ReadPool};
use crate::smallfile::SmallMount;
use crate::store::{SharedStore, Store, StorePath};

/// State shared by every open file of a mount.
#[derive(Debug)]
pub(crate) struct MountState {
    pub(crate) stores: Vec<SharedStore>,
    /// Containers (n-1) or one plain file per logical file (n-n).
    pub(crate) workload: Workload,
    pub(crate) placement: Placement,
    pub(crate) tuning: Tuning,
    pub(crate) hostname: String,
    pub(crate) pid: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) stamper: Stamper,
    pub(crate) log_cache: LogCache,
    pub(crate) read_pool: ReadPool,
    /// The 1-N engine of a small_file mount.
    pub(crate) small: Option<SmallMount>,
}

impl MountState {
    pub(crate) fn store(&self, backend: BackendId) -> &dyn Store {
        self.stores[backend.0].as_ref()
    }

    /// Settles every backend (see `Store::settle`); the first failure.
    pub(crate) fn settle(&self) -> Result<()> {
        let mut first_error = None;
        for store in &self.stores {
            if let Err(error) = store.settle() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Whether files are plain backend files (n-n) rather than containers.
    pub(crate) fn is_flat(&self) -> bool {
        self.workload == Workload::FilePerProc
    }

    /// The 1-N engine, on a small_file mount.
    pub(crate) fn small(&self) -> Option<&SmallMount> {
        self.small.as_ref()
    }
}

/// Where a logical file's container lives: its canonical backend and the
/// container's names. Every workload and the façade find containers here.
pub(crate) fn canonical(mount: &MountState, path: &StorePath) -> (BackendId, ContainerPaths) {
    let backend = mount.placement.canonical_backend(placement_name(path));
    (backend, ContainerPaths::new(path.clone()))
}
