//! The state every workload of one mount shares: its stores and where
//! things go on them, tuning, who this process is, its clock, and the read
//! caches. The façade (`fs`) builds it and keeps the mount's `Workload`
//! beside it; the workloads below the façade take it by reference and never
//! need the façade's types.

use std::sync::atomic::AtomicU64;

use crate::clock::Stamper;
use crate::config::{Tuning, Workload};
use crate::error::Result;
use crate::layout::ContainerPaths;
use crate::placement::{BackendId, Placement, name_hash, placement_name};
use crate::reader::{LogCache, ReadPool};
use crate::reclaim::Reclaimer;
use crate::retained::RetainedIndexes;
use crate::store::{SharedStore, Store, StorePath};
use crate::striping::{Layout, StripingConfig};

/// State shared by every open file of a mount.
#[derive(Debug)]
pub(crate) struct MountState {
    pub(crate) stores: Vec<SharedStore>,
    /// How files are kept: the façade's `Workload` implementation is
    /// chosen from this once, when the mount is built.
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
    /// Index records kept for a collective flatten on close.
    pub(crate) retained: RetainedIndexes,
    /// Default layout, pools and placement policy (plfsrc).
    pub(crate) striping: StripingConfig,
    /// The round-robin turn of component placement: one step per component
    /// this mount places, so its new files take the equally empty backends
    /// in turn. It starts from the host and pid ([`placement_rotor_start`])
    /// so that processes creating files at once do not all begin on the
    /// same backend, unless the striping configuration fixes its start
    /// (`StripingConfig::rotor_start`).
    pub(crate) placement_rotor: AtomicU64,
    /// Deletes removed containers' pieces after their unlink returned.
    pub(crate) reclaimer: Reclaimer,
}

/// Where a mount's placement rotor starts: different for each host and
/// process, the same for the same ones.
pub(crate) fn placement_rotor_start(hostname: &str, pid: u32) -> u64 {
    u64::from(name_hash(hostname)).wrapping_add(u64::from(pid))
}

impl MountState {
    /// The layout of new files where no template applies: the configured
    /// default, unless only one backend holds logs. Striping over one
    /// backend spreads nothing and would cost a layout record per file and a
    /// stripes record per component, so such a mount keeps the pre-layout
    /// placement (an explicit template or file layout still applies).
    pub(crate) fn default_layout(&self) -> Option<&Layout> {
        match self.placement.shadow_backends().len() {
            0 | 1 => None,
            _ => self.striping.default_layout.as_ref(),
        }
    }

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
}

/// Where a logical file's container lives: its canonical backend and the
/// container's names. Every workload and the façade find containers here.
pub(crate) fn canonical(mount: &MountState, path: &StorePath) -> (BackendId, ContainerPaths) {
    let backend = mount.placement.canonical_backend(placement_name(path));
    (backend, ContainerPaths::new(path.clone()))
}
