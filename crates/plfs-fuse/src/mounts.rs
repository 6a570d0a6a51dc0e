//! The kernel's mount table (/proc/self/mountinfo), read without touching
//! the mounted file system: stat-ing a FUSE mount point whose daemon is
//! stuck or gone would hang or fail, so nothing here does.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// The device numbers (`st_dev`) of the mount: an anonymous device
    /// for FUSE, which names its readahead knob and its fusectl directory.
    pub major: u32,
    pub minor: u32,
}

impl MountEntry {
    pub fn is_fuse(&self) -> bool {
        self.fstype == "fuse" || self.fstype.starts_with("fuse.")
    }

    /// The device number as the kernel prints it in /sys/fs/fuse/connections.
    pub fn kernel_dev(&self) -> u64 {
        (u64::from(self.major) << 20) | u64::from(self.minor)
    }
}

/// The mount at `mount_point` (the topmost, if several are stacked), or
/// None if nothing is mounted there.
pub fn find(mount_point: &Path) -> io::Result<Option<MountEntry>> {
    let wanted = resolve_parent(mount_point);
    let table = std::fs::read("/proc/self/mountinfo")?;
    Ok(parse(&table).into_iter().rev().find(|entry| entry.mount_point == wanted))
}

/// `path` with its parent resolved (symlinks, `..`) but the last component
/// left alone, so a dead mount at `path` itself is never stat-ed.
pub fn resolve_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            std::fs::canonicalize(parent).map_or_else(|_| path.to_path_buf(), |parent| parent.join(name))
        }
        _ => path.to_path_buf(),
    }
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse(table: &[u8]) -> Vec<MountEntry> {
    table.split(|&byte| byte == b'\n').filter_map(parse_line).collect()
}

fn parse_line(line: &[u8]) -> Option<MountEntry> {
    // id parent major:minor root mount_point options [optional…] - fstype source super_options
    let fields: Vec<&[u8]> = line.split(|&byte| byte == b' ').collect();
    let separator = fields.iter().position(|field| *field == b"-")?;
    if separator < 6 || fields.len() < separator + 3 {
        return None;
    }
    let device = std::str::from_utf8(fields[2]).ok()?;
    let (major, minor) = device.split_once(':')?;
    Some(MountEntry {
        mount_point: PathBuf::from(OsString::from_vec(unescape(fields[4]))),
        fstype: String::from_utf8_lossy(&unescape(fields[separator + 1])).into_owned(),
        source: String::from_utf8_lossy(&unescape(fields[separator + 2])).into_owned(),
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space and so on).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut index = 0;
    while index < field.len() {
        if field[index] == b'\\'
            && index + 3 < field.len()
            && field[index + 1..index + 4].iter().all(|digit| (b'0'..=b'7').contains(digit))
        {
            let value = field[index + 1..index + 4]
                .iter()
                .fold(0u32, |value, digit| value * 8 + u32::from(digit - b'0'));
            out.push(value as u8);
            index += 4;
        } else {
            out.push(field[index]);
            index += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[u8] = b"22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
        60 22 0:52 / /mnt/plfs\\040one rw,nosuid,nodev,relatime shared:1 - fuse plfs rw,user_id=0,group_id=0\n\
        61 22 0:53 / /mnt/other rw - fuse.sshfs host: rw\n\
        garbage line\n";

    #[test]
    fn parses_escaped_fuse_mounts() {
        let entries = parse(TABLE);
        assert_eq!(entries.len(), 3);
        let plfs = &entries[1];
        assert_eq!(plfs.mount_point, PathBuf::from("/mnt/plfs one"));
        assert_eq!(plfs.fstype, "fuse");
        assert_eq!(plfs.source, "plfs");
        assert_eq!((plfs.major, plfs.minor), (0, 52));
        assert_eq!(plfs.kernel_dev(), 52);
        assert!(plfs.is_fuse());
        assert!(entries[2].is_fuse());
        assert!(!entries[0].is_fuse());
    }

    #[test]
    fn unescapes_octal_only() {
        assert_eq!(unescape(b"a\\040b\\134c"), b"a b\\c");
        assert_eq!(unescape(b"tail\\04"), b"tail\\04");
        assert_eq!(unescape(b"x\\9zz"), b"x\\9zz");
    }

    #[test]
    fn finds_the_root_mount() {
        let root = find(Path::new("/")).unwrap();
        assert!(root.is_some(), "/ is always mounted");
    }
}
