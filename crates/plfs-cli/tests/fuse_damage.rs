//! Damaged containers, refused names and unsafe plfsrc files, seen the way
//! a user meets them: through a real FUSE mount, with rm, rmdir, ls, stat,
//! touch and the `plfs` binary. Each test was a bug report (issue 18).

mod fuse_support;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fuse_support::*;

const MIN: Duration = Duration::from_secs(60);

/// The backend directory holding the container `inside`'s access file
/// (its canonical backend).
fn canonical_container(mount: &PlfsMount, inside: &str) -> PathBuf {
    mount
        .backends
        .iter()
        .map(|backend| backend.join(inside))
        .find(|container| container.join("access").is_file())
        .unwrap_or_else(|| panic!("no backend holds {inside}/access"))
}

/// Bytes of every plain file under `inside` on every backend (the logs).
fn backend_bytes(mount: &PlfsMount, inside: &str) -> u64 {
    fn walk(path: &Path) -> u64 {
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => fs::read_dir(path).unwrap().map(|e| walk(&e.unwrap().path())).sum(),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        }
    }
    mount.backends.iter().map(|backend| walk(&backend.join(inside))).sum()
}

/// A bash script's output, whether it failed or not.
fn shell(script: &str, cwd: &Path) -> std::process::Output {
    run(Command::new(system_tool("bash")).arg("-c").arg(script).current_dir(cwd), MIN)
}

/// `rm BACKEND/c/access` made `rmdir MNT/c` succeed and delete all 524,672
/// bytes of logs. Now rmdir refuses, the file stays listed, `plfs recover`
/// reports it and `--fix` makes every byte readable again.
#[test]
fn rmdir_keeps_a_file_whose_access_file_is_lost() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    let data = random_bytes(524_672, 4);
    fs::write(mount.path("c"), &data).unwrap();
    let container = canonical_container(&mount, "c");
    fs::remove_file(container.join("access")).unwrap();
    // The kernel sends the close's RELEASE after close(2) returns, so the
    // last close may have left a closed summary, which would answer stats
    // without reading the access file.
    let _ = fs::remove_file(container.join("meta").join("closed"));
    let logs = backend_bytes(&mount, "c");
    assert!(logs >= data.len() as u64, "{logs} bytes of logs");

    // The kernel sees a file, so it refuses with ENOTDIR itself (the
    // library's rmdir fails with EIO, naming the damage).
    let rmdir = shell(&format!("rmdir {}", s(&mount.path("c"))), &mount.root);
    assert!(!rmdir.status.success(), "rmdir of a damaged file succeeded: {}", describe(&rmdir));
    assert!(String::from_utf8_lossy(&rmdir.stderr).contains("Not a directory"), "{}", describe(&rmdir));

    assert_eq!(backend_bytes(&mount, "c"), logs, "rmdir removed logs");
    let ls = shell(&format!("ls {}", s(&mount.mountpoint)), &mount.root);
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "c\n", "{}", describe(&ls));
    assert!(mount.log_tail(40).contains("lost its access file"), "{}", mount.log_tail(40));

    let found = mount.plfs(&["recover", s(&mount.path("c"))]);
    let text = String::from_utf8_lossy(&found.stdout);
    assert!(!found.status.success() && text.contains("damaged-access-file"), "{}", describe(&found));
    let fixed = mount.plfs(&["recover", "--fix", s(&mount.path("c"))]);
    assert!(fixed.status.success(), "{}", describe(&fixed));
    cmp_bytes(&fs::read(mount.path("c")).unwrap(), &data);
}

/// One undecodable access file failed `ls` of its whole directory with EIO,
/// and `rm` of the damaged file too. Now the others list, the damaged file
/// lists and fails only its own stat, and rm removes it.
#[test]
fn a_corrupt_access_file_spoils_only_its_own_file() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    fs::create_dir(mount.path("one")).unwrap();
    for name in ["a", "zbad", "z"] {
        fs::write(mount.path(&format!("one/{name}")), name).unwrap();
    }
    let container = canonical_container(&mount, "one/zbad");
    fs::write(container.join("access"), b"not an access record at all").unwrap();
    // The closed summary the last close left would still answer a stat with
    // the record as it was (damage from outside plfs does not remove it; the
    // library's test covers that); without it a stat reads the access file.
    let _ = fs::remove_file(container.join("meta").join("closed"));

    let ls = shell(&format!("ls {}", s(&mount.path("one"))), &mount.root);
    assert!(ls.status.success(), "{}", describe(&ls));
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "a\nz\nzbad\n");
    let stat = shell(&format!("stat {}", s(&mount.path("one/zbad"))), &mount.root);
    assert!(!stat.status.success(), "{}", describe(&stat));
    assert!(String::from_utf8_lossy(&stat.stderr).contains("Input/output error"), "{}", describe(&stat));
    assert!(fs::read(mount.path("one/zbad")).is_err());
    assert_eq!(fs::read(mount.path("one/z")).unwrap(), b"z");
    let recover = mount.plfs(&["recover", s(&mount.path("one/zbad"))]);
    assert!(String::from_utf8_lossy(&recover.stdout).contains("does not decode"), "{}", describe(&recover));

    let rm = shell(&format!("rm {}", s(&mount.path("one/zbad"))), &mount.root);
    assert!(rm.status.success(), "{}", describe(&rm));
    let ls = shell(&format!("ls {}", s(&mount.path("one"))), &mount.root);
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "a\nz\n", "{}", describe(&ls));
    assert_eq!(backend_bytes(&mount, "one/zbad"), 0, "its logs are gone too");

    // `plfs rm` removes one too (it cannot stat it first).
    fs::write(mount.path("one/zbad2"), b"x").unwrap();
    fs::remove_file(canonical_container(&mount, "one/zbad2").join("access")).unwrap();
    let rm = mount.plfs(&["rm", s(&mount.path("one/zbad2"))]);
    assert!(rm.status.success(), "{}", describe(&rm));
    assert_eq!(backend_bytes(&mount, "one/zbad2"), 0);
    assert_eq!(fs::read(mount.path("one/a")).unwrap(), b"a");
}

/// Reserved names and names that are not UTF-8 are refused with EINVAL
/// wherever a name is made; neither kind is ever listed.
#[test]
fn reserved_and_non_utf8_names_are_invalid_arguments() {
    let _serial = serial();
    let mount = PlfsMount::new(&[]);
    fs::write(mount.path("f"), b"f").unwrap();
    let names: [&[u8]; 3] = [b".plfs-new.12345678.0000000000000001.00000001", b".plfs-gone.x", b"caf\xe9"];
    for name in names {
        let path = mount.mountpoint.join(OsStr::from_bytes(name));
        let shown = path.display();
        for (what, error) in [
            ("create", fs::write(&path, b"x").unwrap_err()),
            ("mkdir", fs::create_dir(&path).unwrap_err()),
            ("symlink", std::os::unix::fs::symlink("f", &path).unwrap_err()),
            ("rename", fs::rename(mount.path("f"), &path).unwrap_err()),
        ] {
            assert_eq!(error.raw_os_error(), Some(libc::EINVAL), "{what} {shown}: {error}");
        }
    }
    let utf8 = fs::metadata(mount.mountpoint.join(OsStr::from_bytes(b"caf\xe9"))).unwrap_err();
    assert_eq!(utf8.raw_os_error(), Some(libc::EINVAL), "stat: {utf8}");
    let listing: Vec<_> = fs::read_dir(&mount.mountpoint).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(listing, ["f"]);
    assert_eq!(fs::read(mount.path("f")).unwrap(), b"f");
}

/// A plfsrc with a backend inside its own mount point passed check-config,
/// and `stat MNT` then hung unkillably. check-config and the daemon now
/// refuse it (and overlapping mount points, and `/`), naming file:line:key.
#[test]
fn unsafe_plfsrc_files_are_refused_by_check_config_and_mount() {
    let dir = plain_dir("plfs-overlap.");
    let root = dir.path();
    let mnt = root.join("mnt");
    fs::create_dir_all(mnt.join("b")).unwrap();
    fs::create_dir(root.join("b0")).unwrap();
    let cases = [
        (
            format!("- mount_point: {}\n  backends:\n    - location: {}\n", s(&mnt), s(&mnt.join("b"))),
            "3: location: backend",
            "is inside the mount point",
        ),
        (
            format!("- mount_point: {}\n  backends: [{}]\n", s(&mnt), s(root)),
            "2: backends: backend",
            "contains the mount point",
        ),
        (
            format!(
                "- mount_point: {}\n  backends: [{}]\n- mount_point: {}\n  backends: [/nonexistent/b]\n",
                s(&mnt),
                s(&root.join("b0")),
                s(&mnt.join("inner"))
            ),
            "3: mount_point:",
            "mount points may not nest",
        ),
        (
            "- mount_point: /\n  backends: [/nonexistent/b]\n".to_owned(),
            "1: mount_point:",
            "cannot be a mount point",
        ),
    ];
    for (text, site, problem) in cases {
        let config = root.join("plfsrc");
        fs::write(&config, &text).unwrap();
        let expected = format!("{}:{site}", s(&config));
        for args in [vec!["check-config"], vec!["mount", s(&mnt), "--foreground"]] {
            let output =
                run(Command::new(BIN).arg("--config").arg(&config).args(&args).env_remove("PLFSRC"), MIN);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                !output.status.success() && stderr.contains(&expected) && stderr.contains(problem),
                "{args:?} on\n{text}\nexpected {expected} … {problem}: {}",
                describe(&output)
            );
        }
        assert!(!is_mounted(&mnt), "{text}");
    }
}

fn cmp_bytes(actual: &[u8], expected: &[u8]) {
    assert_eq!(actual.len(), expected.len(), "length");
    if let Some(at) = actual.iter().zip(expected).position(|(a, b)| a != b) {
        panic!("first difference at byte {at}");
    }
}
