//! Every decision of *where* something lives: which backend holds a file's
//! canonical container, which hostdir a host writes into, and which backend
//! holds each hostdir. Progressive layouts (by extent) will plug in here.
//!
//! The hash is CRC32C of the UTF-8 name: stable across releases and hosts,
//! which matters because placement is recomputed on every open and must
//! agree with what was written years before.

use crate::config::BackendRole;
use crate::error::{Error, Result};
use crate::store::StorePath;

/// Most hostdirs a container may have (bounds directory fan-out).
pub const HOSTDIRS_MAX: u32 = 1024;

/// Index of a backend in the mount's backend list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(pub usize);

/// A hostdir bucket inside a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostdirId(pub u32);

/// The name that decides placement: the last component, or "/" for the root.
pub(crate) fn placement_name(path: &StorePath) -> &str {
    path.file_name().unwrap_or("/")
}

pub fn name_hash(name: &str) -> u32 {
    crc32c::crc32c(name.as_bytes())
}

#[derive(Debug, Clone)]
pub struct Placement {
    /// Backends that may hold containers and their metadata.
    canonical: Vec<BackendId>,
    /// Backends that may hold hostdirs (writers' logs).
    shadow: Vec<BackendId>,
    backend_count: usize,
    num_hostdirs: u32,
}

impl Placement {
    /// Builds the placement for a mount's backends, in configured order.
    /// Untyped backends take both roles; typed and untyped cannot mix.
    pub fn new(roles: &[BackendRole], num_hostdirs: u32) -> Result<Placement> {
        if roles.is_empty() {
            return Err(Error::invalid("a mount needs at least one backend"));
        }
        if num_hostdirs == 0 || num_hostdirs > HOSTDIRS_MAX {
            return Err(Error::invalid(format!("num_hostdirs {num_hostdirs} is outside 1..={HOSTDIRS_MAX}")));
        }
        let typed = roles.iter().filter(|role| **role != BackendRole::Any).count();
        if typed != 0 && typed != roles.len() {
            return Err(Error::invalid("backends must be all typed (canonical/shadow) or all untyped"));
        }
        let with_role = |wanted: BackendRole| -> Vec<BackendId> {
            roles
                .iter()
                .enumerate()
                .filter(|(_, role)| **role == BackendRole::Any || **role == wanted)
                .map(|(index, _)| BackendId(index))
                .collect()
        };
        let canonical = with_role(BackendRole::Canonical);
        let shadow = with_role(BackendRole::Shadow);
        if canonical.is_empty() {
            return Err(Error::invalid("no backend has the canonical role"));
        }
        if shadow.is_empty() {
            return Err(Error::invalid("no backend has the shadow role"));
        }
        Ok(Placement { canonical, shadow, backend_count: roles.len(), num_hostdirs })
    }

    pub fn backend_count(&self) -> usize {
        self.backend_count
    }

    pub fn num_hostdirs(&self) -> u32 {
        self.num_hostdirs
    }

    /// Where the container of a file named `file_name` (last path
    /// component) lives. Only the name is hashed, as in PLFS, so moving a
    /// file between directories never moves its container between backends.
    pub fn canonical_backend(&self, file_name: &str) -> BackendId {
        self.canonical[name_hash(file_name) as usize % self.canonical.len()]
    }

    /// The backend holding the one plain file of an n-n (file-per-process)
    /// logical file named `file_name` (last path component): `hash(name) %
    /// K` over the backends that may hold files, as PLFS's FlatFile did.
    /// It is deliberately the same choice as [`canonical_backend`], so a
    /// directory's canonical copy, symlinks and files agree on one rule,
    /// and renaming a directory never moves the files below it.
    ///
    /// [`canonical_backend`]: Placement::canonical_backend
    pub fn flat_file_backend(&self, file_name: &str) -> BackendId {
        self.canonical_backend(file_name)
    }

    /// The hostdir all writers on `hostname` share, bounding the number of
    /// entries per directory by hosts rather than by processes.
    pub fn hostdir(&self, hostname: &str) -> HostdirId {
        HostdirId(name_hash(hostname) % self.num_hostdirs)
    }

    /// The backend holding hostdir `hostdir` of the file `file_name`.
    /// Consecutive hostdirs land on consecutive shadow backends, starting at
    /// an offset given by the file name, so no single backend holds every
    /// hostdir of a file and different files start on different backends.
    pub fn hostdir_backend(&self, file_name: &str, hostdir: HostdirId) -> BackendId {
        let start = name_hash(file_name) as usize;
        self.shadow[(start + hostdir.0 as usize) % self.shadow.len()]
    }

    /// The hostdir on `backend` that writers on `hostname` use for the
    /// stripes of file `file_name` they write there: the host's own hostdir
    /// moved up to the next id [`hostdir_backend`] puts on `backend`, so
    /// hosts stay spread over hostdirs and every name still obeys the
    /// placement rule. None if `backend` holds no hostdirs (not a shadow
    /// backend) or no id below [`HOSTDIRS_MAX`] lands there.
    ///
    /// [`hostdir_backend`]: Placement::hostdir_backend
    pub fn hostdir_on(&self, file_name: &str, hostname: &str, backend: BackendId) -> Option<HostdirId> {
        let position = self.shadow.iter().position(|shadow| *shadow == backend)?;
        let count = self.shadow.len();
        let own = self.hostdir(hostname).0 as usize;
        let lands = (name_hash(file_name) as usize + own) % count;
        let id = own + (position + count - lands) % count;
        u32::try_from(id).ok().filter(|id| *id < HOSTDIRS_MAX).map(HostdirId)
    }

    /// Backends that may hold any hostdir of any file; readers look here.
    /// Backends that may hold containers, in configured order (PLFS 2.5
    /// hashed names over this list).
    pub fn canonical_backends(&self) -> &[BackendId] {
        &self.canonical
    }

    pub fn shadow_backends(&self) -> &[BackendId] {
        &self.shadow
    }

    /// Every backend: directories are mirrored on all of them.
    pub fn all_backends(&self) -> impl Iterator<Item = BackendId> {
        (0..self.backend_count).map(BackendId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn untyped(count: usize) -> Vec<BackendRole> {
        vec![BackendRole::Any; count]
    }

    #[test]
    fn hostdirs_of_one_file_spread_over_every_backend() {
        let placement = Placement::new(&untyped(3), 32).unwrap();
        let used: BTreeSet<_> =
            (0..32).map(|h| placement.hostdir_backend("checkpoint.0001", HostdirId(h))).collect();
        assert_eq!(used.len(), 3);
    }

    #[test]
    fn canonical_choice_spreads_names_and_is_stable() {
        let placement = Placement::new(&untyped(4), 32).unwrap();
        let used: BTreeSet<_> = (0..64).map(|i| placement.canonical_backend(&format!("file.{i}"))).collect();
        assert_eq!(used.len(), 4);
        // Pinned: placement must never change between releases.
        assert_eq!(name_hash("checkpoint"), crc32c::crc32c(b"checkpoint"));
        assert_eq!(placement.canonical_backend("a"), BackendId(crc32c::crc32c(b"a") as usize % 4));
    }

    #[test]
    fn flat_files_spread_evenly_over_every_backend() {
        for backends in 1..=5 {
            let placement = Placement::new(&untyped(backends), 32).unwrap();
            let mut per_backend = vec![0usize; backends];
            let files = 4000;
            for i in 0..files {
                let BackendId(index) = placement.flat_file_backend(&format!("rank.{i}.out"));
                per_backend[index] += 1;
            }
            let even = files / backends;
            for (index, count) in per_backend.iter().enumerate() {
                // CRC32C spreads sequential names within 20% of even.
                assert!(
                    count * 5 > even * 4 && count * 5 < even * 6,
                    "{backends} backends: #{index} got {count}"
                );
            }
        }
        // Stable: only the last component decides, and it is pinned.
        let placement = Placement::new(&untyped(4), 32).unwrap();
        assert_eq!(placement.flat_file_backend("a"), BackendId(crc32c::crc32c(b"a") as usize % 4));
    }

    #[test]
    fn a_hosts_stripe_hostdir_lands_on_the_asked_backend() {
        for (count, hostdirs) in [(1, 1), (4, 1), (4, 32), (3, 7)] {
            let placement = Placement::new(&untyped(count), hostdirs).unwrap();
            for host in ["node0", "node1", "a-much-longer-host-name"] {
                for file in ["ckpt", "x", "y.out"] {
                    for backend in 0..count {
                        let hostdir = placement.hostdir_on(file, host, BackendId(backend)).unwrap();
                        assert_eq!(placement.hostdir_backend(file, hostdir), BackendId(backend));
                        // Never below the host's own id, at most one lap of backends above it.
                        let own = placement.hostdir(host).0;
                        assert!(hostdir.0 >= own && hostdir.0 < own + count as u32);
                    }
                    // The host's own hostdir is chosen for its own backend.
                    let own = placement.hostdir(host);
                    assert_eq!(
                        placement.hostdir_on(file, host, placement.hostdir_backend(file, own)),
                        Some(own)
                    );
                }
            }
        }
        let typed = Placement::new(&[BackendRole::Canonical, BackendRole::Shadow], 4).unwrap();
        assert_eq!(typed.hostdir_on("f", "h", BackendId(0)), None);
        assert!(typed.hostdir_on("f", "h", BackendId(1)).is_some());
    }

    #[test]
    fn typed_roles_are_respected() {
        let roles = [BackendRole::Canonical, BackendRole::Shadow, BackendRole::Shadow];
        let placement = Placement::new(&roles, 8).unwrap();
        for i in 0..50 {
            let name = format!("f{i}");
            assert_eq!(placement.canonical_backend(&name), BackendId(0));
            assert_ne!(placement.hostdir_backend(&name, HostdirId(i % 8)), BackendId(0));
        }
    }

    #[test]
    fn bad_configurations_are_rejected() {
        assert!(Placement::new(&[], 32).is_err());
        assert!(Placement::new(&untyped(1), 0).is_err());
        assert!(Placement::new(&untyped(1), HOSTDIRS_MAX + 1).is_err());
        assert!(Placement::new(&[BackendRole::Any, BackendRole::Shadow], 4).is_err());
        assert!(Placement::new(&[BackendRole::Shadow], 4).is_err());
    }
}
