//! Permissions of a container's pieces on the backends.
//!
//! A logical file's mode and owner live in its access file, but its bytes
//! live in backend directories and logs that anyone with a shell on the
//! backend, or a process running the library or the preload as another
//! user, can open directly. So every piece is created with (and chmod and
//! chown keep it at) a mode derived from the logical one and the file's
//! owner, and the backend refuses what the logical mode refuses
//! (docs/FORMAT.md §1, "Permissions of the pieces").

use std::sync::OnceLock;

use crate::error::{ErrorKind, Result};
use crate::format::access::AccessRecord;
use crate::layout::{self, ContainerEntry, ContainerPaths};
use crate::mount_state::MountState;
use crate::store::{EntryKind, Protection, Store, StoreExt, StorePath};

/// Stat information (`access`, `version`): whoever may look up the name may
/// read it, as stat(2) needs only search permission on the parent.
const PUBLIC_FILE_MODE: u32 = 0o644;

/// Permission bits of each kind of piece of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pieces {
    /// The container directory and its shadows on other backends.
    pub container: Protection,
    /// `meta/`, which `stat` lists for the size.
    pub meta: Protection,
    /// Hostdirs and `xattrs/`.
    pub dir: Protection,
    /// Logs, `global.index`, attribute values, meta records.
    pub file: Protection,
    /// `access` and `version`.
    pub public: Protection,
}

impl Pieces {
    /// The pieces of a file with `access`'s mode and owner, as this
    /// process creates them (owned by it unless that differs).
    pub(crate) fn of(access: &AccessRecord) -> Pieces {
        Pieces::with_owner(access, false)
    }

    /// The same, with the owner set even where this process would create
    /// pieces as that owner: for changing pieces that exist.
    pub(crate) fn exact(access: &AccessRecord) -> Pieces {
        Pieces::with_owner(access, true)
    }

    fn with_owner(access: &AccessRecord, always: bool) -> Pieces {
        // The kernel judges a chown by the process's real credentials, not
        // by the user a mount was told it runs as.
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        let (process_uid, process_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let (uid, gid) = owner_change(process_uid, process_gid, access.uid, access.gid, always);
        let with = |mode| Protection { mode, uid, gid };
        let mode = access.mode;
        Pieces {
            container: with(container_mode(mode)),
            meta: with(dir_mode(mode) | 0o055),
            dir: with(dir_mode(mode)),
            file: with(file_mode(mode)),
            public: with(PUBLIC_FILE_MODE),
        }
    }
}

/// The owner change a piece needs to belong to the file's owner (`always`:
/// also when a piece this process creates would get it anyway). Only root
/// can give a file away; another user can still set a group it belongs to,
/// so group readers can read the logs that user writes.
fn owner_change(
    process_uid: u32,
    process_gid: u32,
    uid: u32,
    gid: u32,
    always: bool,
) -> (Option<u32>, Option<u32>) {
    if process_uid == 0 {
        return ((always || uid != 0).then_some(uid), (always || gid != process_gid).then_some(gid));
    }
    let settable = gid == process_gid || process_groups().contains(&gid);
    (None, (settable && (always || gid != process_gid)).then_some(gid))
}

/// Supplementary groups of this process, read once.
fn process_groups() -> &'static [u32] {
    static GROUPS: OnceLock<Vec<u32>> = OnceLock::new();
    GROUPS.get_or_init(|| {
        // SAFETY: a count query (size 0) writes nothing.
        let count = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut groups = vec![0; usize::try_from(count).unwrap_or(0)];
        // SAFETY: groups has room for count entries.
        let filled = unsafe { libc::getgroups(count.max(0), groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(filled).unwrap_or(0));
        groups
    })
}

/// Files: the owner reads and writes (only the owner's processes append
/// or replace, and the owner may chmod anyway); group and others get the
/// logical read and write bits, nothing else.
pub(crate) fn file_mode(mode: u32) -> u32 {
    0o600 | (mode & 0o066)
}

/// Directories holding the bytes: group and others may enter one only if
/// the logical mode lets them read (r-x) or write (-wx: create logs).
pub(crate) fn dir_mode(mode: u32) -> u32 {
    let class = |bits: u32| {
        let read = if bits & 4 != 0 { 0o5 } else { 0 };
        let write = if bits & 2 != 0 { 0o3 } else { 0 };
        read | write
    };
    0o700 | (class((mode >> 3) & 7) << 3) | class(mode & 7)
}

/// The container directory: searchable by all (a lookup, a `stat` or a
/// `readdir` of the parent reads the access file, as stat(2) of a 0600 file
/// needs only search permission on its directory), listable and writable
/// as [`dir_mode`]. When group or others may write (to make hostdirs), the
/// sticky bit keeps them from renaming or removing the owner's `access`.
pub(crate) fn container_mode(mode: u32) -> u32 {
    let sticky = if mode & 0o022 != 0 { 0o1000 } else { 0 };
    dir_mode(mode) | 0o011 | sticky
}

/// Reads a file's access record from its canonical container.
pub(crate) fn read_access(mount: &MountState, path: &StorePath) -> Result<AccessRecord> {
    let (backend, paths) = crate::mount_state::canonical(mount, path);
    let store = mount.store(backend);
    let bytes = store.read_all(&paths.access())?;
    AccessRecord::decode(&bytes)
        .map_err(|error| error.context(format!("{}: {}", store.url(), paths.access())))
}

/// Whether two records ask for different protections.
pub(crate) fn differs(a: &AccessRecord, b: &AccessRecord) -> bool {
    (a.mode, a.uid, a.gid) != (b.mode, b.uid, b.gid)
}

/// Brings every piece of the file at `path`, on every backend, to what
/// `access` asks (after chmod or chown, or a writer that raced one). A
/// piece that vanished meanwhile is skipped; one this process may not
/// change (another user's log, when not running as root) is reported in
/// the log and left: its directories, the owner's, still guard it.
pub(crate) fn protect_container(mount: &MountState, path: &StorePath, access: &AccessRecord) -> Result<()> {
    let pieces = Pieces::exact(access);
    let paths = ContainerPaths::new(path.clone());
    for backend in mount.placement.all_backends() {
        let store = mount.store(backend);
        let capabilities = store.capabilities();
        if !capabilities.modes && !capabilities.owners {
            continue;
        }
        let walk = Walk { store };
        let Some(entries) = walk.list(path)? else { continue };
        walk.apply(path, &pieces.container)?;
        for entry in entries {
            let child = path.join(&entry.name)?;
            match (layout::classify_container_entry(&entry.name), entry.kind) {
                (_, EntryKind::Symlink) => {}
                (
                    ContainerEntry::Access
                    | ContainerEntry::Version
                    | ContainerEntry::Layout
                    | ContainerEntry::Stripes(_),
                    EntryKind::File,
                ) => {
                    walk.apply(&child, &pieces.public)?;
                }
                (ContainerEntry::Meta, EntryKind::Directory) => {
                    walk.tree(&paths.meta_dir(), &pieces.meta, &pieces)?
                }
                (_, EntryKind::Directory) => walk.tree(&child, &pieces.dir, &pieces)?,
                (_, EntryKind::File) => walk.apply(&child, &pieces.file)?,
            }
        }
    }
    Ok(())
}

struct Walk<'a> {
    store: &'a dyn Store,
}

impl Walk<'_> {
    fn list(&self, path: &StorePath) -> Result<Option<Vec<crate::store::DirEntry>>> {
        match self.store.list(path) {
            Ok(entries) => Ok(Some(entries)),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.context(format!("{}: {path}", self.store.url()))),
        }
    }

    /// A directory with `protection`, and its files with `pieces.file`.
    fn tree(&self, dir: &StorePath, protection: &Protection, pieces: &Pieces) -> Result<()> {
        // Narrowing the directory first stops new opens of what is below.
        self.apply(dir, protection)?;
        let Some(entries) = self.list(dir)? else { return Ok(()) };
        for entry in entries.iter().filter(|entry| entry.kind == EntryKind::File) {
            self.apply(&dir.join(&entry.name)?, &pieces.file)?;
        }
        Ok(())
    }

    fn apply(&self, path: &StorePath, protection: &Protection) -> Result<()> {
        match self.store.protect(path, protection) {
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
            Err(error) if error.kind() == ErrorKind::PermissionDenied => {
                tracing::warn!(
                    "{}: {path}: cannot change a piece another user made: {error}",
                    self.store.url()
                );
                Ok(())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_modes_grant_no_class_more_than_the_logical_mode() {
        assert_eq!(file_mode(0o600), 0o600);
        assert_eq!(file_mode(0o644), 0o644);
        assert_eq!(file_mode(0o460), 0o660);
        assert_eq!(file_mode(0o4755), 0o644);
        assert_eq!(dir_mode(0o600), 0o700);
        assert_eq!(dir_mode(0o640), 0o750);
        assert_eq!(dir_mode(0o622), 0o733);
        assert_eq!(dir_mode(0o611), 0o700);
        assert_eq!(container_mode(0o600), 0o711);
        assert_eq!(container_mode(0o644), 0o755);
        assert_eq!(container_mode(0o660), 0o1771);
        for mode in 0..0o1000u32 {
            for shift in [0, 3] {
                let logical = (mode >> shift) & 7;
                let file = (file_mode(mode) >> shift) & 7;
                let dir = (dir_mode(mode) >> shift) & 7;
                assert_eq!(file & 4 != 0, logical & 4 != 0, "read of {mode:o}");
                assert_eq!(file & 2 != 0, logical & 2 != 0, "write of {mode:o}");
                assert_eq!(file & 1, 0, "execute of {mode:o}");
                assert_eq!(dir & 4 != 0, logical & 4 != 0, "listing of {mode:o}");
                assert_eq!(dir & 2 != 0, logical & 2 != 0, "creating in {mode:o}");
            }
        }
    }

    #[test]
    fn only_root_gives_pieces_away() {
        assert_eq!(owner_change(0, 0, 1000, 100, false), (Some(1000), Some(100)));
        assert_eq!(owner_change(0, 0, 0, 0, false), (None, None));
        // chown back to root must change what another owner's pieces hold.
        assert_eq!(owner_change(0, 0, 0, 0, true), (Some(0), Some(0)));
        assert_eq!(owner_change(1000, 100, 1000, 100, false), (None, None));
        assert_eq!(owner_change(1000, 100, 1000, 100, true), (None, Some(100)));
        // Another user's file: the uid stays, and a group not ours too.
        assert_eq!(owner_change(1000, 100, 2000, u32::MAX - 7, true), (None, None));
    }
}
