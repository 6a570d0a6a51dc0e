//! `plfs_open_collective_ops`, `plfs_index_retain` and
//! `plfs_flatten_close_ops`: the Rust half of include/plfs_mpi.h.

use std::ffi::{CStr, c_char, c_int};

use plfs_mpi::{PlfsCommOps, ShimComm};

use crate::errors::{PLFS_EINVAL, PlfsError, guard, report};
use crate::files::{PlfsFd, add_reference, open_one, writer_of};
use crate::mounts::{path_argument, resolve};
use crate::plfs::collective::{Comm, Strategy, flatten_on_close, open_collective, retain_index};
use crate::plfs::open::OpenFlags;

/// Opens on every rank of `comm`. Arguments are checked before any
/// communication, so ranks must pass equally valid ones (as every rank
/// must pass the same path, flags and strategy).
///
/// # Safety
/// As plfs_open; `comm` is NULL or a table built by plfs_mpi.h whose
/// communicator outlives the call; `strategy` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_open_collective_ops(
    fd: *mut *mut PlfsFd,
    path: *const c_char,
    flags: c_int,
    pid: libc::pid_t,
    comm: *const PlfsCommOps,
    strategy: *const c_char,
) -> PlfsError {
    guard(|| {
        if fd.is_null() {
            return Err(PLFS_EINVAL);
        }
        // SAFETY: the caller's contract.
        let path = unsafe { path_argument(path) }?;
        // SAFETY: NULL or a table.
        let ops = unsafe { comm.as_ref() }.ok_or(PLFS_EINVAL)?;
        // SAFETY: plfs_mpi.h builds the table from a live MPI_Comm.
        let comm = unsafe { ShimComm::from_ops(ops) }.map_err(report)?;
        let strategy = strategy_argument(strategy)?;
        // SAFETY: fd points to a pointer.
        let existing = unsafe { *fd };
        if !existing.is_null() {
            // SAFETY: a non-NULL *fd is a live fd: a reopen, as plfs_open.
            unsafe { add_reference(existing) };
            return Ok(());
        }
        let opened = open_on_ranks(path, flags, pid, &comm, strategy)?;
        // SAFETY: fd points to a pointer.
        unsafe { *fd = Box::into_raw(Box::new(opened)) };
        Ok(())
    })
}

/// Keeps the index records this process appends to `path` for
/// plfs_flatten_close_ops (see include/plfs_mpi.h).
///
/// # Safety
/// `path` is NULL or a C string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_index_retain(path: *const c_char) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { path_argument(path) }?;
        let (plfs, inner) = resolve(path)?;
        retain_index(&plfs, &inner).map_err(report)
    })
}

/// The collective flatten on close (see include/plfs_mpi.h). Arguments
/// are checked before any communication, as for plfs_open_collective_ops.
///
/// # Safety
/// `path` is NULL or a C string; `comm` NULL or a table built by
/// plfs_mpi.h whose communicator outlives the call; `gathered` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn plfs_flatten_close_ops(
    path: *const c_char,
    comm: *const PlfsCommOps,
    closed: c_int,
    gathered: *mut c_int,
) -> PlfsError {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { path_argument(path) }?;
        // SAFETY: NULL or a table.
        let ops = unsafe { comm.as_ref() }.ok_or(PLFS_EINVAL)?;
        // SAFETY: plfs_mpi.h builds the table from a live MPI_Comm.
        let comm = unsafe { ShimComm::from_ops(ops) }.map_err(report)?;
        let (plfs, inner) = resolve(path)?;
        let report_of = flatten_on_close(&plfs, &inner, &comm, closed != 0).map_err(report)?;
        // SAFETY: NULL or writable (the caller's contract).
        if let Some(gathered) = unsafe { gathered.as_mut() } {
            *gathered = c_int::from(report_of.gathered);
        }
        Ok(())
    })
}

/// NULL: $PLFS_OPEN_STRATEGY, else the default.
fn strategy_argument(strategy: *const c_char) -> Result<Strategy, PlfsError> {
    if strategy.is_null() {
        return Strategy::from_environment(Strategy::DEFAULT).map_err(report);
    }
    // SAFETY: a non-NULL strategy is a C string (caller's contract).
    let name = unsafe { CStr::from_ptr(strategy) }.to_str().map_err(|_| PLFS_EINVAL)?;
    name.parse().map_err(report)
}

fn open_on_ranks(
    path: &str,
    flags: c_int,
    pid: libc::pid_t,
    comm: &dyn Comm,
    strategy: Strategy,
) -> Result<PlfsFd, PlfsError> {
    let open_flags = OpenFlags::from_posix(flags).map_err(report)?;
    if open_flags.read && !open_flags.write {
        let writer = writer_of(pid)?;
        let (plfs, inner) = resolve(path)?;
        let handle = open_collective(&plfs, &inner, comm, strategy, writer).map_err(report)?;
        return Ok(PlfsFd::new(plfs, handle, open_flags));
    }
    // Writers share no index; only creation is ordered: rank 0 makes the
    // file before the others look for it. Each rank's own error is its
    // own, and the barrier is reached either way.
    let mode = 0o644;
    if open_flags.create && comm.size() > 1 {
        // On a small_file mount a create is a record this process buffers
        // until close, and the others decide whether the file exists from
        // their cached view of the directory: rank 0 publishes its create
        // and the others drop their view, or each would create the file
        // again and replace what the ranks before it wrote. (No-ops on the
        // other workloads.)
        let directory = resolve(path).map(|(plfs, inner)| (plfs, parent_of(&inner)));
        let first = (comm.rank() == 0).then(|| {
            let opened = open_one(path, flags, pid, mode)?;
            let (plfs, parent) = directory.as_ref().map_err(|code| *code)?;
            plfs.flush_writes(parent).map_err(report)?;
            Ok(opened)
        });
        comm.barrier().map_err(report)?;
        if let Some(result) = first {
            return result;
        }
        let (plfs, parent) = directory?;
        plfs.invalidate_read_cache(&parent).map_err(report)?;
    }
    open_one(path, flags, pid, mode)
}

/// The directory holding the mount-relative path `inner`.
fn parent_of(inner: &str) -> String {
    match inner.trim_end_matches('/').rsplit_once('/') {
        Some((parent, _)) => parent.to_owned(),
        None => String::new(),
    }
}
