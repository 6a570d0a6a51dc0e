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
use crate::error::{Error, ErrorKind, Result, ResultExt};
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
    let name = target.file_name().ok_or_else(|| Error::new(ErrorKind::IsADirectory, "/"))?;
    let staging = target.parent().unwrap_or_default().join(&layout::moving_file_name(
        name,
        mount.stamper.next(),
        mount.pid,
    ))?;
    let metadata = from.metadata(source)?;
    let copied = copy_file(from, source, to, &staging, &metadata)
        .and_then(|()| to.rename(&staging, target))
        .with_context(|| format!("copying /{source} from {} to {}", from.url(), to.url()));
    if let Err(error) = copied {
        // Best effort: the staging name is hidden either way.
        let _ = to.remove_file(&staging);
        return Err(error);
    }
    from.remove_file(source)
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
