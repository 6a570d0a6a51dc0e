//! PLFS 2.5 containers on a `shared_file` mount: found beside plfs's own
//! containers, opened read-only, removable; every change fails naming
//! `plfs migrate` (see `crate::plfs25`).

use std::sync::Arc;

use super::{FileDetail, Found, FoundFile, OpenRequest, WorkloadFile};
use crate::container;
use crate::error::{Error, ErrorKind, Result};
use crate::mount_state::MountState;
use crate::open::WriterId;
use crate::plfs25::{self, Found25, Index25};
use crate::store::{EntryKind, StorePath};

/// A 2.5 container as the file `lookup` reports.
pub(super) fn found(found: Found25) -> Found {
    let access = &found.access;
    Found::File(FoundFile {
        mode: access.mode.unwrap_or(0o600) & 0o7777,
        uid: access.uid.unwrap_or(0),
        gid: access.gid.unwrap_or(0),
        detail: FileDetail::Plfs25(found),
    })
}

/// The 2.5 container behind a file `lookup` found, if it is one.
pub(super) fn detail(file: &FoundFile) -> Option<&Found25> {
    file.plfs25()
}

/// Opens a 2.5 file for reading; any open that could change it fails.
pub(super) fn open(
    mount: &Arc<MountState>,
    logical: &StorePath,
    found: &Found25,
    request: &OpenRequest<'_>,
) -> Result<Box<dyn WorkloadFile>> {
    let (path, flags) = (request.shown, request.flags);
    if flags.create && flags.exclusive {
        return Err(Error::new(ErrorKind::AlreadyExists, path.to_owned()));
    }
    if flags.write || flags.truncate {
        return Err(plfs25::read_only(path));
    }
    if let Some(check_access) = request.check_access {
        check_access()?;
    }
    let index = plfs25::load(mount, logical, found).map_err(|error| error.context(path.to_owned()))?;
    Ok(Box::new(File25 { path: logical.clone(), index }))
}

/// Removes a 2.5 file: the hostdirs its metalinks point at, then its
/// container on its canonical backend (the name is gone once that is;
/// where a migration's switch put it aside, if that is where it is),
/// then shadow containers left on the other backends.
pub(super) fn unlink(mount: &MountState, logical: &StorePath, found: &Found25) -> Result<()> {
    for hostdir in plfs25::hostdirs(mount, logical, found)? {
        if hostdir.metalink.is_some() {
            container::ignore_missing(container::remove_tree(
                hostdir.location.store.as_ref(),
                &hostdir.location.path,
            ))?;
        }
    }
    container::remove_tree(mount.store(found.backend), &found.dir)?;
    if found.dir != *logical {
        // Put aside by a migration's switch cut short: its intent goes
        // after the container, so the name never reads the plfs copy the
        // intent names (a rerun then removes that copy).
        plfs25::forget_switch(mount, logical)?;
    }
    for backend in mount.placement.all_backends().filter(|backend| *backend != found.backend) {
        let store = mount.store(backend);
        match store.metadata(logical) {
            Ok(metadata) if metadata.kind == EntryKind::Directory => container::remove_tree(store, logical)?,
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// One read-only open of a 2.5 file: its merged index, loaded at open.
#[derive(Debug)]
struct File25 {
    path: StorePath,
    index: Index25,
}

impl WorkloadFile for File25 {
    fn write(&self, _buf: &[u8], _offset: u64, _writer: WriterId) -> Result<usize> {
        Err(plfs25::read_only(&format!("/{}", self.path)))
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.index.read(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> Result<u64> {
        Ok(self.index.eof)
    }

    fn truncate(&self, _size: u64, _writer: WriterId) -> Result<()> {
        Err(plfs25::read_only(&format!("/{}", self.path)))
    }

    /// A PLFS 2.5 container is only read here: nothing changes it.
    fn refresh(&self) -> Result<()> {
        Ok(())
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }
}
