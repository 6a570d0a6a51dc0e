//! The n-n layout (plfsrc `workload: n-n` / `file_per_proc`): each logical
//! file is ONE plain file, at the same path, on backend `hash(name) % K`
//! ([`Placement::flat_file_backend`]). There is no container, index or log:
//! the only gain over a plain file system is that the metadata load of
//! creating many files spreads over K backends (PLFS 2.5's FlatFile).
//!
//! Directories are mirrored on every backend exactly as in the container
//! layout, and symlinks live on the same backend a file of that name would,
//! so [`crate::fs::Plfs`] serves directories and symlinks with the same
//! code for both layouts and calls here for files only.
//!
//! [`Placement::flat_file_backend`]: crate::placement::Placement::flat_file_backend

mod file;

pub(crate) use file::FlatFile;

use std::time::SystemTime;

use crate::attr::{FileAttr, FileKind, Owner};
use crate::container::placement_name;
use crate::error::{Error, ErrorKind, Result};
use crate::layout;
use crate::mount_state::MountState;
use crate::open::OpenFlags;
use crate::placement::BackendId;
use crate::store::{EntryKind, Metadata, Store, StorePath, WriteOpen, unsupported_random_writes};

/// Bytes copied per step when a rename moves a file between backends.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Mode reported for a file whose store keeps no modes.
const FILE_MODE_DEFAULT: u32 = 0o644;

/// The backend holding `path`'s plain file (or symlink).
pub(crate) fn backend(mount: &MountState, path: &StorePath) -> BackendId {
    mount.placement.flat_file_backend(placement_name(path))
}

/// Fails, naming the backend, unless every backend can write in place.
pub(crate) fn check_backends(stores: &[&dyn Store]) -> Result<()> {
    match stores.iter().find(|store| !store.capabilities().random_writes) {
        Some(store) => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "backend {}: the n-n workload writes files in place (pwrite), which this store cannot do",
                store.url()
            ),
        )),
        None => Ok(()),
    }
}

/// What is at `path`: its entry on the backend its name hashes to. A plain
/// file is a logical file; nothing is read from inside it.
pub(crate) fn lookup(mount: &MountState, path: &StorePath) -> Result<Metadata> {
    mount.store(backend(mount, path)).metadata(path)
}

/// `stat` of a file: the backend file's own size, mode, owner and times.
pub(crate) fn file_attr(mount: &MountState, metadata: &Metadata) -> FileAttr {
    let epoch = SystemTime::UNIX_EPOCH;
    FileAttr {
        kind: FileKind::File,
        size: metadata.size,
        blocks: metadata.size.div_ceil(512),
        mode: metadata.mode.unwrap_or(FILE_MODE_DEFAULT),
        uid: metadata.uid.unwrap_or(mount.uid),
        gid: metadata.gid.unwrap_or(mount.gid),
        nlink: 1,
        atime: metadata.atime.unwrap_or(epoch),
        mtime: metadata.mtime.unwrap_or(epoch),
        ctime: metadata.ctime.or(metadata.mtime).unwrap_or(epoch),
    }
}

/// Opens (with `flags.create`, creates) the plain file: one store open
/// (for reading, one that refuses anything but a regular file).
pub(crate) fn open(
    mount: &MountState,
    logical: &StorePath,
    flags: OpenFlags,
    mode: u32,
    owner: Owner,
) -> Result<FlatFile> {
    let home = backend(mount, logical);
    let store = mount.store(home);
    if flags.create {
        match store.open_write(logical, WriteOpen::CreateNew { mode: mode & 0o7777 }) {
            Ok(file) => {
                set_new_attributes(mount, store, logical, mode, owner)?;
                return Ok(FlatFile::writable(logical.clone(), home, file));
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists && !flags.exclusive => {}
            Err(error) => return Err(error),
        }
    }
    if !flags.write
        && let Ok(file) = store.open_file_read(logical)
    {
        // A regular file, opened without a lookup first; anything else is
        // looked up below to say what it is.
        return Ok(FlatFile::readable(logical.clone(), home, file));
    }
    match lookup(mount, logical)?.kind {
        EntryKind::File => {}
        EntryKind::Directory => return Err(Error::new(ErrorKind::IsADirectory, format!("/{logical}"))),
        EntryKind::Symlink => {
            return Err(Error::invalid(format!(
                "/{logical}: is a symbolic link (the core does not follow links)"
            )));
        }
    }
    let file = if flags.write {
        let file = FlatFile::writable(logical.clone(), home, store.open_write(logical, WriteOpen::Existing)?);
        if flags.truncate {
            file.truncate(0)?;
        }
        file
    } else {
        FlatFile::readable(logical.clone(), home, store.open_read(logical)?)
    };
    Ok(file)
}

/// The create asked for `mode` exactly (the umask is the caller's business,
/// as with the container layout's access record) and for `owner`.
fn set_new_attributes(
    mount: &MountState,
    store: &dyn Store,
    logical: &StorePath,
    mode: u32,
    owner: Owner,
) -> Result<()> {
    let capabilities = store.capabilities();
    if capabilities.modes {
        store.set_mode(logical, mode & 0o7777)?;
    }
    if capabilities.owners && (owner.uid != mount.uid || owner.gid != mount.gid) {
        store.set_owner(logical, Some(owner.uid), Some(owner.gid))?;
    }
    Ok(())
}

/// Moves a file whose target name is free (the caller removed any old
/// target). On one backend this is a single store rename, and so it is
/// between two backends that are directories of one file system: one
/// rename(2) from one root into the other keeps the inode, so a process
/// writing the file through its own descriptor (another program, another
/// libplfs) keeps writing to it under its new name. Between other
/// backends the bytes are copied, in this order, so a crash at any point
/// loses nothing:
///
/// 1. copy to a reserved, hidden name (`.plfs-moving.*`) beside the
///    target on the new backend, then set its mode and times and fsync;
/// 2. publish it with a no-replace rename to the target name;
/// 3. remove the source.
///
/// A crash before 2 leaves hidden debris (removed with its directory); a
/// crash between 2 and 3 leaves both names, i.e. a copy, never a loss.
pub(crate) fn rename_file(mount: &MountState, source: &StorePath, target: &StorePath) -> Result<()> {
    let from_backend = backend(mount, source);
    let to_backend = backend(mount, target);
    let from = mount.store(from_backend);
    if from_backend == to_backend {
        return from.rename(source, target);
    }
    let to = mount.store(to_backend);
    if let (Some(from_path), Some(to_path)) = (from.local_path(source), to.local_path(target)) {
        match crate::store::posix::rename_noreplace(&from_path, &to_path) {
            Ok(()) => return Ok(()),
            // Two file systems: copy below.
            Err(error) if error.raw_os_error() == Some(libc::EXDEV) => {}
            Err(error) => {
                return Err(Error::io(
                    error,
                    format!("rename /{source} from {} to /{target} on {}", from.url(), to.url()),
                ));
            }
        }
    }
    let staging = copy_beside(mount, (from, source), (to, target))?;
    if let Err(error) = to.rename(&staging, target) {
        // Best effort: the staging name is hidden either way.
        let _ = to.remove_file(&staging);
        return Err(error.context(format!("copying /{source} from {} to {}", from.url(), to.url())));
    }
    match from.remove_file(source) {
        Err(error) if still_there(from, source) => {
            // The file stays at its old name only: a rename that fails
            // changes nothing.
            let _ = to.remove_file(target);
            Err(error)
        }
        _ => Ok(()),
    }
}

/// After a removal reported failure: whether the entry is still there
/// (an error that leaves the answer unknown counts as there).
fn still_there(store: &dyn Store, path: &StorePath) -> bool {
    !matches!(store.metadata(path), Err(error) if error.kind() == ErrorKind::NotFound)
}

/// Moves the n-n file at `source` onto the file at `target`, replacing it
/// in one step for readers of `target`, as rename(2) does: at no instant
/// is the name missing, and a move that fails leaves both names as they
/// were. Where the backends are directories of one file system that is
/// one rename(2). Otherwise the file goes next to the target (a copy
/// under a moving name when the backends differ) and the store swaps the
/// two entries (`exchange`), then removes the old file from the name the
/// swap gave it. Returns false, having changed nothing, where the store
/// cannot swap: the caller then removes the target first.
///
/// With `keep` (a hidden name beside `target`, on its backend) the old
/// file is not removed but lives on there, for handles still open on it:
/// a hard link made before the rename(2), or a rename after the swap.
pub(crate) fn replace_file(
    mount: &MountState,
    source: &StorePath,
    target: &StorePath,
    keep: Option<&StorePath>,
) -> Result<bool> {
    let from_backend = backend(mount, source);
    let to_backend = backend(mount, target);
    let from = mount.store(from_backend);
    let to = mount.store(to_backend);
    if let (Some(from_path), Some(to_path)) = (from.local_path(source), to.local_path(target))
        && let Some(done) = rename_locally(&from_path, &to_path, keep.map(|keep| to.local_path(keep)))
    {
        return done.map(|()| true).map_err(|error| {
            Error::io(error, format!("rename /{source} on {} onto /{target} on {}", from.url(), to.url()))
        });
    }
    if !to.capabilities().exchange {
        return Ok(false);
    }
    if from_backend == to_backend {
        // The old file takes the source's name for the moment between
        // the swap and its removal (or its move to `keep`).
        return swap_in(to, source, target, None, keep);
    }
    let staging = copy_beside(mount, (from, source), (to, target))?;
    swap_in(to, &staging, target, Some((from, source)), keep)
}

/// One rename(2) of local backend files, after a hard link of the old
/// file at `keep` when one is asked for. None where rename(2) cannot do
/// it (two file systems, or a keep name the store has no local path or
/// hard link for): the caller goes on with the store's calls, and nothing
/// has changed.
fn rename_locally(
    from_path: &std::path::Path,
    to_path: &std::path::Path,
    keep: Option<Option<std::path::PathBuf>>,
) -> Option<std::io::Result<()>> {
    let linked = match keep {
        None => None,
        Some(None) => return None,
        Some(Some(keep)) => match std::fs::hard_link(to_path, &keep) {
            Ok(()) => Some(keep),
            // Not a failure of the rename: no hard links here (or the old
            // file went meanwhile, which the swap below also answers).
            Err(_) => return None,
        },
    };
    let renamed = std::fs::rename(from_path, to_path);
    if renamed.is_err()
        && let Some(keep) = &linked
    {
        let _ = std::fs::remove_file(keep);
    }
    match renamed {
        // Two file systems: the store's calls copy.
        Err(error) if error.raw_os_error() == Some(libc::EXDEV) => None,
        result => Some(result),
    }
}

/// Copies the file at `source` on `from` to a hidden moving name beside
/// `target` on `to`, and returns that name; on failure nothing is left
/// there (best effort: the name is hidden either way).
fn copy_beside(
    mount: &MountState,
    (from, source): (&dyn Store, &StorePath),
    (to, target): (&dyn Store, &StorePath),
) -> Result<StorePath> {
    let name = target.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
    let staging = target.parent().unwrap_or_default().join(&layout::moving_file_name(
        name,
        mount.stamper.next(),
        mount.pid,
    ))?;
    let copied = from.metadata(source).and_then(|metadata| copy_file(from, source, to, &staging, &metadata));
    if let Err(error) = copied {
        let _ = to.remove_file(&staging);
        return Err(error.context(format!("copying /{source} from {} to {}", from.url(), to.url())));
    }
    Ok(staging)
}

/// Swaps the new file at `new` with the old one at `target` on `store`,
/// then removes the source's original (`copied_from`, after a copy) and
/// the old file, or moves the old file to `keep`. Until that is done the
/// swap is undone on failure, so a failed move changes nothing.
fn swap_in(
    store: &dyn Store,
    new: &StorePath,
    target: &StorePath,
    copied_from: Option<(&dyn Store, &StorePath)>,
    keep: Option<&StorePath>,
) -> Result<bool> {
    let cleanup = |store: &dyn Store| {
        if copied_from.is_some() {
            let _ = store.remove_file(new);
        }
    };
    match store.exchange(new, target) {
        Ok(()) => {}
        // The file to move went meanwhile (another process removed or
        // moved it): nothing to move, and the target stays.
        Err(error) if error.kind() == ErrorKind::NotFound && !still_there(store, new) => {
            return Err(error);
        }
        // No swap here, or the target went meanwhile (another process
        // removed it): the caller's remove-then-move handles both.
        Err(error) if matches!(error.kind(), ErrorKind::Unsupported | ErrorKind::NotFound) => {
            cleanup(store);
            return Ok(false);
        }
        Err(error) => {
            cleanup(store);
            return Err(error);
        }
    }
    // `new` now holds the old file; handles open on it want it at `keep`.
    if let Some(keep) = keep
        && let Err(error) = store.rename(new, keep)
    {
        if store.exchange(new, target).is_ok() {
            cleanup(store);
        }
        return Err(error);
    }
    let removed = match copied_from {
        Some((from, source)) => from.remove_file(source),
        None => Ok(()),
    }
    .and_then(|()| {
        match (copied_from, keep) {
            (_, Some(_)) => Ok(()),
            // The copy is in place and its original gone: the move is
            // done, and the old file is only debris at a hidden name.
            (Some(_), None) => {
                if let Err(error) = store.remove_file(new) {
                    tracing::warn!("{}: /{new}: a replaced file left behind: {error}", store.url());
                }
                Ok(())
            }
            (None, None) => store.remove_file(new),
        }
    });
    if let Err(error) = removed {
        let done = match copied_from {
            Some((from, source)) => !still_there(from, source),
            None => !still_there(store, new),
        };
        if done {
            if copied_from.is_some() && keep.is_none() {
                let _ = store.remove_file(new);
            }
            return Ok(true);
        }
        // Back as it was: the old file to the name the swap gave it, and
        // the swap undone.
        if keep.is_none_or(|keep| store.rename(keep, new).is_ok()) && store.exchange(new, target).is_ok() {
            cleanup(store);
        }
        return Err(error);
    }
    Ok(true)
}

fn copy_file(
    from: &dyn Store,
    source: &StorePath,
    to: &dyn Store,
    staging: &StorePath,
    metadata: &Metadata,
) -> Result<()> {
    if !to.capabilities().random_writes {
        return Err(unsupported_random_writes(to.url(), staging));
    }
    let reader = from.open_read(source)?;
    let writer = to.open_write(staging, WriteOpen::CreateNew { mode: 0o600 })?;
    let length = reader.len()?;
    let mut buffer = vec![0u8; COPY_CHUNK_BYTES.min(usize::try_from(length).unwrap_or(COPY_CHUNK_BYTES))];
    let mut offset = 0;
    while offset < length {
        let count = reader.read_at(&mut buffer, offset)?;
        if count == 0 {
            break; // the source shrank while being copied: keep what was read
        }
        writer.write_at(&buffer[..count], offset)?;
        offset += count as u64;
    }
    writer.sync()?;
    drop(writer);
    let capabilities = to.capabilities();
    if let Some(mode) = metadata.mode.filter(|_| capabilities.modes) {
        to.set_mode(staging, mode)?;
    }
    if capabilities.times {
        to.set_times(staging, metadata.atime, metadata.mtime)?;
    }
    Ok(())
}
