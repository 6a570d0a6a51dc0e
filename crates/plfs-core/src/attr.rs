//! What a logical file, directory or symlink is and who may use it: the
//! attributes `stat` reports, directory entries, owners and the caller's
//! credentials. Plain values shared by the façade and every workload below
//! it, so this module imports nothing of plfs.

use std::time::SystemTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Directory,
    Symlink,
}

/// What `stat` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileAttr {
    pub kind: FileKind,
    pub size: u64,
    /// 512-byte blocks of data stored.
    pub blocks: u64,
    /// Permission bits only.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    pub name: String,
    pub kind: FileKind,
}

/// The caller whose permissions `access` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Credentials {
    /// This process, as open(2) checks it: the effective ids and the
    /// supplementary groups.
    pub fn of_this_process() -> Credentials {
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut groups = vec![0 as libc::gid_t; GROUPS_MAX];
        // SAFETY: the buffer holds groups.len() ids; getgroups writes at most that.
        let count = unsafe { libc::getgroups(GROUPS_MAX as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(count).unwrap_or(0));
        Credentials { uid, gid, groups }
    }
}

/// Supplementary groups read for a permission check (Linux's NGROUPS_MAX
/// is 65536, but more than a few hundred is unheard of).
const GROUPS_MAX: usize = 1024;

/// Who a new file, directory or symlink belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Access-check bits, as in access(2).
pub const R_OK: u32 = 4;
pub const W_OK: u32 = 2;
pub const X_OK: u32 = 1;
