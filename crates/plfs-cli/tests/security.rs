//! Another user is refused what a file's mode forbids on every way to its
//! bytes: FUSE with `allow_other`, the library (the `plfs` CLI), the
//! interposer (cat, sh, ls, mv under LD_PRELOAD), and the backend pieces
//! themselves (cat and ls of the container as that user). The other user is
//! `nobody`, through runuser(1); everything lives in 0755 temporary
//! directories it can traverse. Like preload.rs, these need the workspace
//! built (`make test`): libplfs_preload.so and libplfs.so sit next to the
//! plfs binary.

mod fuse_support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use fuse_support::*;

const MIN: Duration = Duration::from_secs(60);
const NOBODY: u32 = 65534;

fn as_nobody(args: &[&str]) -> Output {
    run(Command::new(system_tool("runuser")).args(["-u", "nobody", "--"]).args(args).current_dir("/"), MIN)
}

/// `args` as nobody, which must fail with EACCES or EPERM (by the message
/// the program prints for it).
fn refused(args: &[&str], what: &str) {
    let output = as_nobody(args);
    // Programs print strerror ("Permission denied"); plfs its error kind.
    let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
    assert!(
        !output.status.success()
            && (stderr.contains("permission denied") || stderr.contains("operation not permitted")),
        "nobody should be refused {what} ({args:?}) with EACCES or EPERM, but: {}",
        describe(&output)
    );
}

fn allowed(args: &[&str], what: &str) -> Output {
    let output = as_nobody(args);
    assert!(output.status.success(), "nobody should be allowed {what} ({args:?}) but: {}", describe(&output));
    output
}

/// Every backend path of the container (and shadow containers) of `name`,
/// directories included.
fn pieces(backends: &[PathBuf], name: &str) -> Vec<PathBuf> {
    fn walk(path: &Path, out: &mut Vec<PathBuf>) {
        out.push(path.to_owned());
        if path.symlink_metadata().unwrap().is_dir() {
            for entry in fs::read_dir(path).unwrap() {
                walk(&entry.unwrap().path(), out);
            }
        }
    }
    let mut out = Vec::new();
    for backend in backends {
        let container = backend.join(name);
        if container.exists() {
            walk(&container, &mut out);
        }
    }
    assert!(!out.is_empty(), "no container of {name} on any backend");
    out
}

/// What stat(2) may show anyone who can search the directory: the access
/// and version files and the meta records, and what `getstripe` shows: the
/// layout and stripes records, which name backends but no byte's place
/// (docs/FORMAT.md §1).
fn stat_information(piece: &Path) -> bool {
    let name = piece.file_name().unwrap().to_str().unwrap();
    name == "access"
        || name == "version"
        || name == "layout"
        || name
            .strip_prefix("stripes.")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || name == "meta"
        || piece.parent().and_then(Path::file_name).is_some_and(|parent| parent == "meta")
}

/// The pieces that hold bytes or say where they are: nobody may open none.
fn assert_pieces_refuse_nobody(backends: &[PathBuf], name: &str) {
    let all = pieces(backends, name);
    let logs = all.iter().filter(|piece| piece.to_str().unwrap().contains("/data.")).count();
    assert!(logs > 0, "{name} has no data log: {all:?}");
    for piece in all.iter().filter(|piece| !stat_information(piece)) {
        let mode = fs::symlink_metadata(piece).unwrap().mode();
        if piece.is_dir() {
            refused(&["ls", s(piece)], &format!("listing backend piece {} ({mode:o})", piece.display()));
        } else {
            refused(&["cat", s(piece)], &format!("reading backend piece {} ({mode:o})", piece.display()));
        }
    }
}

fn data_logs(backends: &[PathBuf], name: &str) -> Vec<PathBuf> {
    pieces(backends, name).into_iter().filter(|piece| piece.to_str().unwrap().contains("/data.")).collect()
}

/// Through FUSE (the daemon runs as root), the backend pieces carry the
/// file's mode and owner: at create (also for a user's own file), after
/// chmod either way, after chown, and for logs a later writer adds.
#[test]
fn fuse_backend_pieces_follow_mode_and_owner() {
    let _serial = serial();
    let mount = PlfsMount::new(&["allow_other"]);
    let backends = &mount.backends;

    let secret = mount.path("secret");
    write_file(&secret, b"root only\n", 0o600, None);
    refused(&["cat", s(&secret)], "reading a 0600 file through FUSE");
    assert_pieces_refuse_nobody(backends, "secret");

    // chmod widens every piece, then narrows it again.
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o644)).unwrap();
    for log in data_logs(backends, "secret") {
        allowed(&["cat", s(&log)], "reading the data log of a 0644 file");
    }
    assert_eq!(allowed(&["cat", s(&secret)], "reading a 0644 file").stdout, b"root only\n");
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    assert_pieces_refuse_nobody(backends, "secret");

    // A later writer (another process: its own log pair) after the chmod.
    let before = data_logs(backends, "secret").len();
    run_ok(Command::new("sh").arg("-c").arg(format!("echo more >> '{}'", s(&secret))), MIN);
    assert!(data_logs(backends, "secret").len() > before, "the append made no new log pair");
    assert_pieces_refuse_nobody(backends, "secret");
    assert_eq!(fs::read(&secret).unwrap(), b"root only\nmore\n");

    // chown gives every piece away; the new owner reads its logs.
    let given = mount.path("given");
    write_file(&given, b"for nobody\n", 0o600, None);
    std::os::unix::fs::chown(&given, Some(NOBODY), Some(NOBODY)).unwrap();
    for piece in pieces(backends, "given") {
        let meta = fs::symlink_metadata(&piece).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY), "owner of {}", piece.display());
    }
    for log in data_logs(backends, "given") {
        assert_eq!(allowed(&["cat", s(&log)], "reading its own data log").status.code(), Some(0));
    }

    // A file nobody creates through FUSE is nobody's on the backend too.
    let open_dir = mount.path("open-dir");
    fs::create_dir(&open_dir).unwrap();
    fs::set_permissions(&open_dir, fs::Permissions::from_mode(0o777)).unwrap();
    let mine = open_dir.join("mine");
    allowed(
        &["sh", "-c", &format!("umask 077 && echo mine > '{}'", s(&mine))],
        "creating in a 0777 directory",
    );
    for piece in pieces(backends, "open-dir/mine") {
        let meta = fs::symlink_metadata(&piece).unwrap();
        assert_eq!(meta.uid(), NOBODY, "owner of {}", piece.display());
        if !stat_information(&piece) && piece.is_file() {
            assert_eq!(
                meta.mode() & 0o077,
                0,
                "{} of a 0600 file has mode {:o}",
                piece.display(),
                meta.mode()
            );
        }
    }
}

/// A mount that the library and the interposer use directly, no FUSE.
struct Direct {
    _dir: tempfile::TempDir,
    config: PathBuf,
    mount: PathBuf,
    backends: Vec<PathBuf>,
}

impl Direct {
    fn new() -> Direct {
        require_root();
        let dir = plain_dir("plfs-security-test.");
        let root = dir.path().canonicalize().unwrap();
        let backends: Vec<PathBuf> = (0..2).map(|i| root.join(format!("backend{i}"))).collect();
        let mount = root.join("mnt");
        let mut text = format!("- mount_point: {}\n  workload: shared_file\n  backends:\n", mount.display());
        for backend in &backends {
            fs::create_dir(backend).unwrap();
            text.push_str(&format!("    - location: posix://{}\n", backend.display()));
        }
        let config = root.join("plfsrc");
        fs::write(&config, text).unwrap();
        Direct { _dir: dir, config, mount, backends }
    }

    fn logical(&self, inside: &str) -> String {
        format!("{}/{inside}", self.mount.display())
    }

    /// `env PLFSRC=… LD_PRELOAD=… args…`, to run as root or as nobody.
    fn preloaded(&self, args: &[&str]) -> Vec<String> {
        let library = Path::new(BIN).parent().unwrap().join("libplfs_preload.so");
        assert!(
            library.exists(),
            "{} is missing: run `cargo build --release --workspace`",
            library.display()
        );
        let mut command = vec![
            "env".to_owned(),
            format!("PLFSRC={}", self.config.display()),
            format!("LD_PRELOAD={}", library.display()),
        ];
        command.extend(args.iter().map(|arg| arg.to_string()));
        command
    }

    fn plfs(&self, args: &[&str]) -> Vec<String> {
        let mut command = vec![BIN.to_owned(), "--config".to_owned(), s(&self.config).to_owned()];
        command.extend(args.iter().map(|arg| arg.to_string()));
        command
    }
}

fn strs(command: &[String]) -> Vec<&str> {
    command.iter().map(String::as_str).collect()
}

/// Files root made through the interposer: nobody is refused reading,
/// appending, listing and renaming with EACCES through the interposer and
/// the library, and the backend pieces refuse it too; what the mode allows
/// still works.
#[test]
fn library_and_preload_refuse_what_the_mode_forbids() {
    let setup = Direct::new();
    let (secret, public, private) =
        (setup.logical("secret"), setup.logical("public"), setup.logical("private"));
    // Python makes them with their modes at create (no chmod: the
    // interposer has no fchmodat, which chmod(1) uses).
    let script = format!(
        "import os\n\
         for path, text, mode in (('{secret}', b'top secret\\n', 0o600), ('{public}', b'for all\\n', 0o644)):\n\
         \x20   fd = os.open(path, os.O_CREAT | os.O_WRONLY, mode)\n\
         \x20   os.write(fd, text)\n\
         \x20   os.close(fd)\n\
         os.mkdir('{private}', 0o700)\n\
         fd = os.open('{private}/inner', os.O_CREAT | os.O_WRONLY, 0o644)\n\
         os.write(fd, b'inner\\n')\n\
         os.close(fd)\n"
    );
    run_ok(Command::new("env").args(strs(&setup.preloaded(&["python3", "-c", &script])[1..])), MIN);
    assert_eq!(
        run_ok(Command::new("env").args(strs(&setup.preloaded(&["cat", &secret])[1..])), MIN).stdout,
        b"top secret\n",
        "root reads its file through the interposer"
    );

    // The interposer.
    refused(&strs(&setup.preloaded(&["cat", &secret])), "reading a 0600 file through the interposer");
    // Python opens and writes the file itself; bash's `>>` opens it with
    // O_CREAT | O_APPEND and dup2s the descriptor onto stdout (issue 18
    // item 9: that gave EIO, not EACCES).
    for path in [&public, &secret] {
        let append = format!("import os\nos.write(os.open('{path}', os.O_WRONLY | os.O_APPEND), b'x')\n");
        refused(
            &strs(&setup.preloaded(&["python3", "-c", &append])),
            &format!("appending to {path} through the interposer"),
        );
        let shell = format!("echo x >> '{path}'");
        refused(
            &strs(&setup.preloaded(&["bash", "-c", &shell])),
            &format!("appending to {path} with bash's >> through the interposer"),
        );
    }
    refused(&strs(&setup.preloaded(&["ls", &private])), "listing a 0700 directory through the interposer");
    // A working directory inside the mount: the kernel checks the search
    // permission on the backend directory that stands for it.
    refused(
        &strs(&setup.preloaded(&["bash", "-c", &format!("cd '{private}'")])),
        "entering a 0700 directory with cd through the interposer",
    );
    let output = allowed(
        &strs(&setup.preloaded(&["bash", "-c", &format!("cd '{}' && cat public", setup.mount.display())])),
        "entering the mount with cd through the interposer",
    );
    assert_eq!(output.stdout, b"for all\n");
    refused(
        &strs(&setup.preloaded(&["cat", &format!("{private}/inner")])),
        "reading through a 0700 directory with the interposer",
    );
    refused(
        &strs(&setup.preloaded(&["mv", &public, &setup.logical("moved")])),
        "renaming in root's 0755 directory through the interposer",
    );
    let output =
        allowed(&strs(&setup.preloaded(&["cat", &public])), "reading a 0644 file through the interposer");
    assert_eq!(output.stdout, b"for all\n");

    // The library.
    // Into /tmp, where nobody may create files: only the read can fail.
    let stolen = format!("/tmp/plfs-security-stolen.{}", std::process::id());
    refused(&strs(&setup.plfs(&["cp", &secret, &stolen])), "copying a 0600 file out with plfs cp");
    let copied = fs::read(&stolen).unwrap_or_default();
    let _ = fs::remove_file(&stolen);
    // (cp sizes its output before reading: zeros may be left, not bytes.)
    assert!(copied.iter().all(|byte| *byte == 0), "plfs cp as nobody copied {copied:?}");
    refused(&strs(&setup.plfs(&["ls", &private])), "listing a 0700 directory with plfs ls");

    // The backend pieces, and nothing changed.
    assert_pieces_refuse_nobody(&setup.backends, "secret");
    assert_eq!(
        run_ok(Command::new("env").args(strs(&setup.preloaded(&["cat", &secret, &public])[1..])), MIN).stdout,
        b"top secret\nfor all\n"
    );
}
