//! Mounts plfs for real (in-process, over temporary backends) and drives it
//! through std::fs, the way every tool on the node would. The mount guard
//! unmounts when dropped, so a failing assertion still unmounts.
//!
//! Needs root (or a user allowed to mount FUSE) and /dev/fuse; skipped
//! with a message otherwise, except under `PLFS_REQUIRE_FUSE=1` (set by
//! `make test`), where a test that cannot mount fails.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use plfs::config::{BackendConfig, BackendLocation, BackendRole, MountConfig, Tuning, Workload};
use plfs::fs::{Options, Plfs};
use plfs::open::OpenFlags;
use plfs_fuse::{Mount, MountSettings};
use tempfile::TempDir;

/// A live mount over fresh backends. Field order is drop order: the mount
/// goes first, then the directories under it.
struct Mounted {
    mount: Option<Mount>,
    point: TempDir,
    backends: Vec<TempDir>,
}

impl Mounted {
    fn path(&self, name: &str) -> PathBuf {
        self.point.path().join(name)
    }

    /// A second view of the same backends through the library.
    fn library(&self) -> Plfs {
        open_plfs(self.point.path(), &self.backends)
    }

    fn unmount(&mut self) {
        if let Some(mount) = self.mount.take() {
            mount.unmount().expect("unmount");
        }
    }
}

fn open_plfs(point: &Path, backends: &[TempDir]) -> Plfs {
    let configs = backends
        .iter()
        .map(|dir| BackendConfig {
            location: BackendLocation::Posix(dir.path().to_path_buf()),
            role: BackendRole::Any,
        })
        .collect();
    let config = MountConfig::new(point.to_path_buf(), Workload::SharedFile, configs);
    Plfs::from_config(&config, Options::from_environment(Tuning::default())).expect("open plfs")
}

fn can_mount() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let device = OpenOptions::new().read(true).write(true).open("/dev/fuse").is_ok();
    if !(root && device) {
        // `make test` sets PLFS_REQUIRE_FUSE=1: there a smoke test that
        // cannot mount fails instead of passing without having run.
        let required = std::env::var("PLFS_REQUIRE_FUSE").is_ok_and(|value| value == "1");
        assert!(
            !required,
            "PLFS_REQUIRE_FUSE=1 but mounting FUSE needs root and /dev/fuse (root {root}, /dev/fuse usable {device})"
        );
        eprintln!(
            "skipping: mounting FUSE needs root and /dev/fuse (root {root}, /dev/fuse usable {device})"
        );
    }
    root && device
}

fn mount(backends: usize) -> Mounted {
    let point = tempfile::tempdir().expect("mount point");
    let backends: Vec<TempDir> = (0..backends).map(|_| tempfile::tempdir().expect("backend")).collect();
    let plfs = open_plfs(point.path(), &backends);
    let mount = Mount::spawn(plfs, point.path(), &MountSettings::default()).expect("mount");
    Mounted { mount: Some(mount), point, backends }
}

fn errno_of<T>(result: std::io::Result<T>) -> i32 {
    match result {
        Ok(_) => 0,
        Err(error) => error.raw_os_error().unwrap_or(-1),
    }
}

fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn files_directories_and_attributes_through_the_mount() {
    if !can_mount() {
        return;
    }
    let mut mounted = mount(2);

    // Write, read, stat.
    let data = pattern(3 << 20, 7);
    fs::write(mounted.path("big"), &data).unwrap();
    assert_eq!(fs::read(mounted.path("big")).unwrap(), data);
    let metadata = fs::metadata(mounted.path("big")).unwrap();
    assert_eq!(metadata.len(), data.len() as u64);
    assert!(metadata.is_file());
    assert_eq!(metadata.blksize(), 1 << 20);

    // Directories and listings (readdir and readdirplus both).
    fs::create_dir(mounted.path("dir")).unwrap();
    for name in ["b", "a", "c"] {
        fs::write(mounted.path(&format!("dir/{name}")), name.as_bytes()).unwrap();
    }
    let mut names: Vec<String> = fs::read_dir(mounted.path("dir"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b", "c"]);
    let listed = Command::new("ls").arg("-la").arg(mounted.path("dir")).output().unwrap();
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success() && listing.contains(" .\n") && listing.contains(" ..\n"), "{listing}");

    // Rename, and RENAME_NOREPLACE.
    fs::rename(mounted.path("dir/a"), mounted.path("dir/z")).unwrap();
    assert_eq!(fs::read(mounted.path("dir/z")).unwrap(), b"a");
    assert_eq!(errno_of(fs::metadata(mounted.path("dir/a"))), libc::ENOENT);
    assert_eq!(rename_noreplace(&mounted.path("dir/z"), &mounted.path("dir/b")), libc::EEXIST);
    assert_eq!(rename_noreplace(&mounted.path("dir/z"), &mounted.path("dir/y")), 0);
    fs::rename(mounted.path("dir"), mounted.path("moved")).unwrap();
    assert_eq!(fs::read(mounted.path("moved/y")).unwrap(), b"a");

    // Unlink and rmdir.
    for name in ["b", "c", "y"] {
        fs::remove_file(mounted.path(&format!("moved/{name}"))).unwrap();
    }
    fs::remove_dir(mounted.path("moved")).unwrap();
    assert_eq!(errno_of(fs::metadata(mounted.path("moved"))), libc::ENOENT);

    // Mode, times, truncate.
    fs::set_permissions(mounted.path("big"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(mounted.path("big")).unwrap().permissions().mode() & 0o7777, 0o640);
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    File::options().write(true).open(mounted.path("big")).unwrap().set_modified(when).unwrap();
    assert_eq!(fs::metadata(mounted.path("big")).unwrap().modified().unwrap(), when);
    File::options().write(true).open(mounted.path("big")).unwrap().set_len(1000).unwrap();
    assert_eq!(fs::read(mounted.path("big")).unwrap(), &data[..1000]);

    // Symlinks; no hard links; regular files only.
    std::os::unix::fs::symlink("big", mounted.path("link")).unwrap();
    assert_eq!(fs::read_link(mounted.path("link")).unwrap(), Path::new("big"));
    // No link times in plfs: accepted (so cp -a and rsync -a succeed), not kept.
    let touched =
        Command::new("touch").arg("-h").arg("-d").arg("2001-01-01").arg(mounted.path("link")).status();
    assert!(touched.unwrap().success());
    assert_eq!(fs::read(mounted.path("link")).unwrap(), &data[..1000]);
    // lchown, as cp -a and rsync -a do for every link.
    std::os::unix::fs::lchown(mounted.path("link"), Some(65534), Some(65534)).unwrap();
    let link = fs::symlink_metadata(mounted.path("link")).unwrap();
    assert_eq!((link.uid(), link.gid()), (65534, 65534));
    assert_eq!(fs::read_link(mounted.path("link")).unwrap(), Path::new("big"));
    assert_eq!(errno_of(fs::hard_link(mounted.path("big"), mounted.path("hard"))), libc::EPERM);
    let fifo = CString::new(mounted.path("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));

    // A set-group-ID directory hands its group down, and its bit to subdirectories.
    fs::create_dir(mounted.path("shared")).unwrap();
    std::os::unix::fs::chown(mounted.path("shared"), None, Some(65534)).unwrap();
    fs::set_permissions(mounted.path("shared"), fs::Permissions::from_mode(0o2775)).unwrap();
    fs::write(mounted.path("shared/file"), b"").unwrap();
    fs::create_dir(mounted.path("shared/sub")).unwrap();
    assert_eq!(fs::metadata(mounted.path("shared/file")).unwrap().gid(), 65534);
    let sub = fs::metadata(mounted.path("shared/sub")).unwrap();
    assert_eq!(sub.gid(), 65534);
    assert_ne!(sub.mode() & libc::S_ISGID, 0);

    // O_APPEND and O_EXCL.
    fs::write(mounted.path("log"), b"one\n").unwrap();
    OpenOptions::new().append(true).open(mounted.path("log")).unwrap().write_all(b"two\n").unwrap();
    assert_eq!(fs::read(mounted.path("log")).unwrap(), b"one\ntwo\n");
    let exclusive = OpenOptions::new().write(true).create_new(true).open(mounted.path("log"));
    assert_eq!(errno_of(exclusive), libc::EEXIST);

    // statfs answers.
    let point = CString::new(mounted.point.path().as_os_str().as_bytes()).unwrap();
    // SAFETY: statvfs writes into the zeroed struct we pass.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `point` is a NUL-terminated path; `stats` is ours to fill.
    assert_eq!(unsafe { libc::statvfs(point.as_ptr(), &mut stats) }, 0);
    assert!(stats.f_blocks > 0);

    // What the mount wrote is there for the library once unmounted.
    mounted.unmount();
    let plfs = mounted.library();
    assert_eq!(plfs.stat("/log").unwrap().size, 8);
    let handle = plfs.open("/big", OpenFlags::RDONLY, 0, 1).unwrap();
    let mut buffer = vec![0; 1000];
    assert_eq!(handle.read(&mut buffer, 0).unwrap(), 1000);
    assert_eq!(buffer, &data[..1000]);
    handle.close().unwrap();
}

#[test]
fn extended_attributes_follow_the_size_probe_protocol() {
    if !can_mount() {
        return;
    }
    let mounted = mount(1);
    fs::write(mounted.path("f"), b"x").unwrap();
    let path = CString::new(mounted.path("f").as_os_str().as_bytes()).unwrap();
    let name = CString::new("user.color").unwrap();
    let other = CString::new("user.size").unwrap();
    // SAFETY: every call below gets NUL-terminated strings and buffers of
    // the stated lengths, all alive for the call.
    unsafe {
        assert_eq!(libc::setxattr(path.as_ptr(), name.as_ptr(), b"blue".as_ptr().cast(), 4, 0), 0);
        assert_eq!(libc::setxattr(path.as_ptr(), other.as_ptr(), b"L".as_ptr().cast(), 1, 0), 0);
        assert_eq!(
            libc::setxattr(path.as_ptr(), name.as_ptr(), b"red".as_ptr().cast(), 3, libc::XATTR_CREATE),
            -1
        );
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EEXIST));
        assert_eq!(libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0), 4);
        let mut small = [0u8; 2];
        assert_eq!(libc::getxattr(path.as_ptr(), name.as_ptr(), small.as_mut_ptr().cast(), 2), -1);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ERANGE));
        let mut value = [0u8; 16];
        assert_eq!(libc::getxattr(path.as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), 16), 4);
        assert_eq!(&value[..4], b"blue");
        let needed = libc::listxattr(path.as_ptr(), std::ptr::null_mut(), 0);
        assert_eq!(needed, "user.color\0user.size\0".len() as isize);
        let mut list = vec![0u8; needed as usize];
        assert_eq!(libc::listxattr(path.as_ptr(), list.as_mut_ptr().cast(), list.len()), needed);
        assert_eq!(list, b"user.color\0user.size\0");
        // ACLs are not stored as plain values (cp -a then falls back to chmod).
        let acl = CString::new("system.posix_acl_access").unwrap();
        // user::rw- group::r-- other::r--, as `cp -a` copies a 0644 file.
        let value: [u8; 28] = [
            2, 0, 0, 0, 1, 0, 6, 0, 255, 255, 255, 255, 4, 0, 4, 0, 255, 255, 255, 255, 32, 0, 4, 0, 255,
            255, 255, 255,
        ];
        assert_eq!(libc::setxattr(path.as_ptr(), acl.as_ptr(), value.as_ptr().cast(), value.len(), 0), -1);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EOPNOTSUPP));
        assert_eq!(libc::removexattr(path.as_ptr(), name.as_ptr()), 0);
        assert_eq!(libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0), -1);
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENODATA));
    }
}

#[test]
fn an_unlinked_open_file_stays_usable_until_closed() {
    if !can_mount() {
        return;
    }
    let mounted = mount(2);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(mounted.path("tmp"))
        .unwrap();
    file.write_all(b"before").unwrap();
    fs::remove_file(mounted.path("tmp")).unwrap();
    assert_eq!(errno_of(fs::metadata(mounted.path("tmp"))), libc::ENOENT);
    assert!(fs::read_dir(mounted.point.path()).unwrap().next().is_none(), "the hidden name does not show");
    file.write_all(b" after").unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    assert_eq!(text, "before after");
    assert_eq!(file.metadata().unwrap().nlink(), 0);
    drop(file);
    // The last close removed it from the backends too.
    let plfs = mounted.library();
    assert!(plfs.readdir("/").unwrap().is_empty());
}

#[test]
fn writing_processes_share_the_daemons_log_and_readers_see_flushed_data() {
    if !can_mount() {
        return;
    }
    let mounted = mount(2);
    let target = mounted.path("shared");
    fs::write(&target, b"").unwrap();
    // Two processes write alternate 4 KiB blocks of one file (N-1 strided).
    let children: Vec<_> = (0..2)
        .map(|writer| {
            let script = format!(
                "for i in 0 1 2 3; do head -c 4096 /dev/zero | tr '\\0' '{letter}' | \
                 dd of={target} bs=4096 seek=$((i * 2 + {writer})) conv=notrunc status=none; done",
                letter = (b'a' + writer as u8) as char,
                target = target.display(),
            );
            Command::new("sh").arg("-c").arg(script).spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    // A reader on the node sees both writers' data.
    let data = fs::read(&target).unwrap();
    assert_eq!(data.len(), 8 * 4096);
    for (block, chunk) in data.chunks(4096).enumerate() {
        let expected = if block % 2 == 0 { b'a' } else { b'b' };
        assert!(chunk.iter().all(|&byte| byte == expected), "block {block}");
    }
    // One writer for the node, the daemon, however many local processes
    // wrote (each dd is its own process): one index log per node per file.
    let map = mounted.library().map("/shared").unwrap();
    assert_eq!(map.totals.writers, 1, "{:?}", map.totals);

    // Positional writes through one descriptor from two threads.
    let file = OpenOptions::new().write(true).open(&target).unwrap();
    std::thread::scope(|scope| {
        for part in 0..2u64 {
            let file = &file;
            scope.spawn(move || file.write_all_at(&[b'x' + part as u8; 100], part * 100).unwrap());
        }
    });
    drop(file);
    let data = fs::read(&target).unwrap();
    assert_eq!(&data[..100], &[b'x'; 100]);
    assert_eq!(&data[100..200], &[b'y'; 100]);
}

fn rename_noreplace(from: &Path, to: &Path) -> i32 {
    let from = CString::new(from.as_os_str().as_bytes()).unwrap();
    let to = CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid paths relative to the current directory (absolute here).
    let result = unsafe {
        libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE)
    };
    if result == 0 { 0 } else { std::io::Error::last_os_error().raw_os_error().unwrap_or(-1) }
}

#[test]
fn unmounting_a_busy_mount_forces_it_and_keeps_what_was_written() {
    if !can_mount() {
        return;
    }
    let mut mounted = mount(2);
    let mut held = File::create(mounted.path("held")).unwrap();
    held.write_all(b"written before the unmount").unwrap();
    // A plain unmount would fail with EBUSY; the guard's unmount detaches
    // the mount, aborts the connection, and the session closes the handle.
    mounted.unmount();
    assert!(plfs_fuse::mounts::find(mounted.point.path()).unwrap().is_none());
    assert_eq!(errno_of(held.write_all(b"after")), libc::ENOTCONN);
    drop(held);
    let plfs = mounted.library();
    let handle = plfs.open("/held", OpenFlags::RDONLY, 0, 1).unwrap();
    let mut buffer = vec![0; 64];
    let count = handle.read(&mut buffer, 0).unwrap();
    assert_eq!(&buffer[..count], b"written before the unmount");
    handle.close().unwrap();
    // The daemon closed the writer cleanly: nothing for recover to repair.
    let report = plfs.recover("/held", false).unwrap();
    assert!(report.findings.is_empty(), "{report:?}");
}
