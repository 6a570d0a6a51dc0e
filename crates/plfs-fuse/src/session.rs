//! Mounting a [`Plfs`] and shutting it down cleanly.
//!
//! Two ways to run: [`Mount::spawn`] serves from background threads and
//! unmounts when dropped (tests, embedding), and [`run`] serves in the
//! calling thread until unmounted or signalled (the `plfs mount` daemon).
//! Either way, when the session ends the file system closes every handle
//! still open, so indexes are flushed and size records published.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};
use plfs::fs::Plfs;

use crate::filesystem::{FsOptions, PlfsFs};
use crate::mounts::{self, MountEntry};

/// Fewest and most request threads a mount gets by default (see
/// [`threads_for`]). Each holds a 16 MiB request buffer (fuser's
/// maximum write), mostly untouched.
pub const THREADS_MIN: usize = 4;
pub const THREADS_MAX: usize = 8;

/// Request threads for a node with `cpus` CPUs. Without the writeback
/// cache: two per CPU, from [`THREADS_MIN`] to [`THREADS_MAX`]. Every
/// write is a request its writer waits for, and the node's writes of a
/// file append to one data log under one lock: threads beyond what the
/// CPUs run only queue there, and on a loaded 2-core node eight threads
/// wrote N-1 strided records at half the rate of four
/// (docs/PERFORMANCE.md). At least four, so that a few requests waiting
/// on a backend (an fsync, a slow store) leave others served. With the
/// writeback cache, [`THREADS_MAX`]: write-backs arrive in bursts, and
/// the reads a cached write waits for (the rest of a partly written page,
/// under the file's lock) need a thread free of them; four threads
/// wrote slower than eight there.
pub fn threads_for(cpus: usize, writeback_cache: bool) -> usize {
    if writeback_cache {
        return THREADS_MAX;
    }
    cpus.saturating_mul(2).clamp(THREADS_MIN, THREADS_MAX)
}

/// Request threads for this node and cache mode (`plfs mount --threads`
/// overrides).
pub fn default_threads(writeback_cache: bool) -> usize {
    let cpus = std::thread::available_parallelism().map_or(THREADS_MAX, std::num::NonZero::get);
    threads_for(cpus, writeback_cache)
}

/// Readahead asked of the kernel for the mount's device: several
/// max-size reads in flight, so a streaming reader keeps the daemon's
/// threads busy.
pub const READAHEAD_DEFAULT_BYTES: u64 = 8 << 20;

/// How a mount is made.
#[derive(Debug, Clone)]
pub struct MountSettings {
    /// `-o` options as the user typed them (see [`parse_options`]).
    pub options: Vec<String>,
    /// Request threads; None for [`default_threads`] of the mount's cache
    /// mode.
    pub threads: Option<usize>,
    /// Written to the device's read_ahead_kb after mounting; 0 leaves the
    /// kernel's default.
    pub readahead_bytes: u64,
    pub fs: FsOptions,
}

impl Default for MountSettings {
    fn default() -> MountSettings {
        MountSettings {
            options: Vec::new(),
            threads: None,
            readahead_bytes: READAHEAD_DEFAULT_BYTES,
            fs: FsOptions::default(),
        }
    }
}

/// `-o` options, sorted by who takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedOptions {
    /// For the kernel (and fusermount).
    pub mount: Vec<MountOption>,
    /// Who may use the mount.
    pub acl: SessionACL,
    /// For the daemon: open every file with FOPEN_DIRECT_IO.
    pub direct_io: bool,
    /// For the daemon: ask for the kernel's writeback cache.
    pub writeback_cache: bool,
    /// For the daemon: how long the kernel may trust attributes
    /// (`attr_timeout=S`) and names (`entry_timeout=S`), if given.
    pub attr_timeout: Option<Duration>,
    pub entry_timeout: Option<Duration>,
}

/// Turns `-o` options into fuser's: `allow_other`/`allow_root` set who may
/// use the mount, the kernel's flags map to theirs, `direct_io` is the
/// daemon's, anything else is passed to the kernel as typed.
/// `default_permissions` is always on: the kernel enforces mode bits and
/// ownership, which the daemon (running as root) would otherwise bypass.
pub fn parse_options(options: &[String]) -> io::Result<ParsedOptions> {
    let mut parsed = ParsedOptions {
        mount: vec![MountOption::DefaultPermissions],
        acl: SessionACL::Owner,
        direct_io: false,
        writeback_cache: false,
        attr_timeout: None,
        entry_timeout: None,
    };
    let mut named = false;
    for option in options.iter().flat_map(|list| list.split(',')).map(str::trim).filter(|o| !o.is_empty()) {
        let mapped = match option {
            "allow_other" => {
                parsed.acl = SessionACL::All;
                continue;
            }
            "allow_root" => {
                parsed.acl = SessionACL::RootAndOwner;
                continue;
            }
            "direct_io" => {
                parsed.direct_io = true;
                continue;
            }
            "writeback_cache" => {
                parsed.writeback_cache = true;
                continue;
            }
            // Always on (kernel permission checks; fuser asks for big writes).
            "default_permissions" | "big_writes" => continue,
            "auto_unmount" => MountOption::AutoUnmount,
            "ro" => MountOption::RO,
            "rw" => MountOption::RW,
            "exec" => MountOption::Exec,
            "noexec" => MountOption::NoExec,
            "suid" => MountOption::Suid,
            "nosuid" => MountOption::NoSuid,
            "dev" => MountOption::Dev,
            "nodev" => MountOption::NoDev,
            "atime" => MountOption::Atime,
            "noatime" => MountOption::NoAtime,
            "sync" => MountOption::Sync,
            "async" => MountOption::Async,
            "dirsync" => MountOption::DirSync,
            "kernel_cache" | "auto_cache" => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "-o {option}: plfs sets its own cache policy (page cache dropped at every open; \
                         -o writeback_cache to keep it; -o direct_io for none) and does not take this \
                         libfuse option"
                    ),
                ));
            }
            other => match other.split_once('=') {
                Some(("attr_timeout", seconds)) => {
                    parsed.attr_timeout = Some(timeout_option("attr_timeout", seconds)?);
                    continue;
                }
                Some(("entry_timeout", seconds)) => {
                    parsed.entry_timeout = Some(timeout_option("entry_timeout", seconds)?);
                    continue;
                }
                Some(("fsname", name)) => {
                    named = true;
                    MountOption::FSName(name.to_owned())
                }
                Some(("subtype", name)) => MountOption::Subtype(name.to_owned()),
                _ => MountOption::CUSTOM(other.to_owned()),
            },
        };
        parsed.mount.push(mapped);
    }
    if !named {
        // The mount table's source column: what `df` and `mount` show.
        parsed.mount.push(MountOption::FSName("plfs".to_owned()));
    }
    if parsed.mount.contains(&MountOption::AutoUnmount) && parsed.acl == SessionACL::Owner {
        // fusermount's auto_unmount needs allow_root or allow_other.
        parsed.acl = SessionACL::RootAndOwner;
    }
    Ok(parsed)
}

/// Longest cache timeout a mount takes: a day. Beyond that a typo (ms
/// for s) is likelier than intent, and `Duration` arithmetic stays far
/// from overflow.
const TIMEOUT_MAX_SECS: f64 = 86_400.0;

/// A cache timeout in seconds as libfuse takes it (`attr_timeout=0.5`).
fn timeout_option(option: &str, seconds: &str) -> io::Result<Duration> {
    match seconds.parse::<f64>() {
        Ok(value) if (0.0..=TIMEOUT_MAX_SECS).contains(&value) => Ok(Duration::from_secs_f64(value)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("-o {option}={seconds}: want seconds from 0 to {TIMEOUT_MAX_SECS} (e.g. {option}=1.5)"),
        )),
    }
}

fn session_config(settings: &MountSettings, parsed: ParsedOptions) -> Config {
    let threads = settings.threads.unwrap_or_else(|| default_threads(parsed.writeback_cache));
    let mut config = Config::default();
    config.mount_options = parsed.mount;
    config.acl = parsed.acl;
    config.n_threads = Some(threads.max(1));
    // One /dev/fuse descriptor per thread: requests spread over threads
    // without all of them waking on one descriptor.
    config.clone_fd = true;
    config
}

fn start(plfs: Plfs, mount_point: &Path, settings: &MountSettings) -> io::Result<Session<PlfsFs>> {
    let parsed = parse_options(&settings.options)?;
    let mut fs_options = settings.fs.clone();
    fs_options.direct_io |= parsed.direct_io;
    fs_options.writeback_cache |= parsed.writeback_cache;
    fs_options.attr_timeout = parsed.attr_timeout.unwrap_or(fs_options.attr_timeout);
    fs_options.entry_timeout = parsed.entry_timeout.unwrap_or(fs_options.entry_timeout);
    let config = session_config(settings, parsed);
    let fs = PlfsFs::new(plfs, fs_options);
    let notifier = fs.notifier_slot();
    let session = Session::new(fs, mount_point, &config).map_err(|error| {
        io::Error::new(error.kind(), format!("mounting {}: {error}", mount_point.display()))
    })?;
    // The file system exists before its session; it gets the session's
    // channel to the kernel here, before any request is served.
    let _ = notifier.set(session.notifier());
    if settings.readahead_bytes > 0 {
        tune_readahead(mount_point, settings.readahead_bytes);
    }
    tracing::info!("mounted {} ({} threads)", mount_point.display(), config.n_threads.unwrap_or(1));
    Ok(session)
}

/// A mount served from background threads; dropping it unmounts.
#[derive(Debug)]
pub struct Mount {
    mount_point: PathBuf,
    unmounter: Option<SessionUnmounter>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Mount {
    /// Mounts `plfs` at `mount_point`; the mount is live when this returns.
    pub fn spawn(plfs: Plfs, mount_point: &Path, settings: &MountSettings) -> io::Result<Mount> {
        let mut session = start(plfs, mount_point, settings)?;
        let unmounter = session.unmount_callable();
        let thread = std::thread::Builder::new().name("plfs-fuse".to_owned()).spawn(move || session.run())?;
        Ok(Mount { mount_point: mount_point.to_path_buf(), unmounter: Some(unmounter), thread: Some(thread) })
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }

    /// Unmounts (forcibly if files are still open there) and waits until
    /// every handle is closed.
    pub fn unmount(mut self) -> io::Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> io::Result<()> {
        let stopped = match self.unmounter.take() {
            Some(unmounter) => stop(&self.mount_point, unmounter),
            None => Ok(()),
        };
        let served = match self.thread.take() {
            Some(thread) => {
                thread.join().map_err(|_| io::Error::other("the FUSE session thread panicked"))?
            }
            None => Ok(()),
        };
        stopped.and(served)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(error) = self.shut_down() {
            tracing::warn!("unmounting {}: {error}", self.mount_point.display());
        }
    }
}

/// Ends a session: a plain unmount, or if files are still open there, a
/// lazy one plus an abort of the FUSE connection, so the session ends now
/// and the daemon closes (and flushes) every handle itself.
fn stop(mount_point: &Path, mut unmounter: SessionUnmounter) -> io::Result<()> {
    // Read before unmounting: afterwards the entry is gone.
    let entry = mounts::find(mount_point).ok().flatten();
    match unmounter.unmount() {
        Ok(()) => Ok(()),
        Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
            tracing::warn!("{}: busy; detaching and aborting open requests", mount_point.display());
            force_unmount(mount_point, entry.as_ref())
        }
        Err(error) => match mounts::find(mount_point) {
            Ok(None) => Ok(()),
            _ => Err(error),
        },
    }
}

/// Detaches the mount from the namespace and aborts its FUSE connection:
/// processes still using it get ENOTCONN, the daemon's session ends.
pub fn force_unmount(mount_point: &Path, entry: Option<&MountEntry>) -> io::Result<()> {
    let path = CString::new(mount_point.as_os_str().as_bytes())?;
    // SAFETY: `path` is a valid NUL-terminated string for the call.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
    }
    match entry.filter(|entry| entry.is_fuse()) {
        Some(entry) => abort_connection(entry),
        None => Ok(()),
    }
}

const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Aborts a FUSE connection through fusectl, mounting fusectl first if the
/// system has not.
fn abort_connection(entry: &MountEntry) -> io::Result<()> {
    let abort = PathBuf::from(FUSECTL).join(entry.kernel_dev().to_string()).join("abort");
    if !abort.exists() {
        let target = CString::new(FUSECTL)?;
        let kind = CString::new("fusectl")?;
        // SAFETY: all strings are valid and NUL-terminated; no data argument.
        let mounted =
            unsafe { libc::mount(kind.as_ptr(), target.as_ptr(), kind.as_ptr(), 0, std::ptr::null()) };
        if mounted != 0 {
            tracing::debug!("mounting fusectl: {}", io::Error::last_os_error());
        }
    }
    std::fs::write(&abort, b"1")
        .map_err(|error| io::Error::new(error.kind(), format!("{}: {error}", abort.display())))
}

/// Raises the readahead of the mount's device: the kernel offers FUSE
/// only its default (128 KiB) at init, far below what streaming reads of
/// plfs files want. Best effort: a failure only costs speed.
fn tune_readahead(mount_point: &Path, bytes: u64) {
    let entry = match mounts::find(mount_point) {
        Ok(Some(entry)) => entry,
        other => {
            tracing::debug!("readahead: mount {} not found: {other:?}", mount_point.display());
            return;
        }
    };
    let knob = format!("/sys/class/bdi/{}:{}/read_ahead_kb", entry.major, entry.minor);
    match std::fs::write(&knob, (bytes / 1024).to_string()) {
        Ok(()) => tracing::info!("readahead {} KiB ({knob})", bytes / 1024),
        Err(error) => tracing::info!("readahead left at the kernel's default: {knob}: {error}"),
    }
}

/// SIGINT, SIGTERM and SIGHUP, blocked so that one thread can wait for
/// them. Block them before any other thread starts (the core's read pool
/// included): a thread that does not block them would take the signal and
/// die with the default action, skipping the clean shutdown.
#[derive(Debug)]
pub struct ShutdownSignals {
    set: libc::sigset_t,
}

impl ShutdownSignals {
    pub fn block() -> io::Result<ShutdownSignals> {
        // SAFETY: sigset_t is plain data, initialised by sigemptyset before
        // use; pthread_sigmask only reads the set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::sigaddset(&mut set, signal);
            }
            let result = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if result != 0 {
                return Err(io::Error::from_raw_os_error(result));
            }
            Ok(ShutdownSignals { set })
        }
    }

    /// The next signal, or None after `timeout`.
    fn wait(&self, timeout: Duration) -> Option<i32> {
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: the set and timespec are valid; no siginfo is requested.
        let signal = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &timeout) };
        (signal > 0).then_some(signal)
    }
}

// SAFETY: sigset_t is plain data, only read after construction.
unsafe impl Send for ShutdownSignals {}

/// How often the signal thread checks whether the session already ended.
const SIGNAL_POLL: Duration = Duration::from_millis(200);

/// Serves `plfs` at `mount_point` in this thread until it is unmounted or
/// one of `signals` arrives; then every handle is closed before returning.
pub fn run(
    plfs: Plfs,
    mount_point: &Path,
    settings: &MountSettings,
    signals: ShutdownSignals,
) -> io::Result<()> {
    let mut session = start(plfs, mount_point, settings)?;
    let mut unmounter = Some(session.unmount_callable());
    let ended = Arc::new(AtomicBool::new(false));
    let watcher = {
        let ended = ended.clone();
        let mount_point = mount_point.to_path_buf();
        std::thread::Builder::new().name("plfs-signals".to_owned()).spawn(move || {
            while !ended.load(Ordering::SeqCst) {
                let Some(signal) = signals.wait(SIGNAL_POLL) else { continue };
                tracing::info!("signal {signal}: unmounting {}", mount_point.display());
                if let Some(unmounter) = unmounter.take()
                    && let Err(error) = stop(&mount_point, unmounter)
                {
                    tracing::error!("unmounting {}: {error}", mount_point.display());
                }
            }
        })?
    };
    let served = session.run();
    ended.store(true, Ordering::SeqCst);
    if watcher.join().is_err() {
        tracing::error!("the signal thread panicked");
    }
    tracing::info!("unmounted {}", mount_point.display());
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_map_to_fuser() {
        let parsed = parse_options(&strings(&["allow_other,noatime", "ro", "max_read=1048576"])).unwrap();
        assert_eq!(parsed.acl, SessionACL::All);
        assert!(!parsed.direct_io);
        for option in [
            MountOption::DefaultPermissions,
            MountOption::NoAtime,
            MountOption::RO,
            MountOption::CUSTOM("max_read=1048576".to_owned()),
            MountOption::FSName("plfs".to_owned()),
        ] {
            assert!(parsed.mount.contains(&option), "{option:?} in {:?}", parsed.mount);
        }
    }

    #[test]
    fn defaults_are_private_with_kernel_permission_checks() {
        let parsed = parse_options(&[]).unwrap();
        assert_eq!(parsed.acl, SessionACL::Owner);
        assert_eq!(
            parsed.mount,
            vec![MountOption::DefaultPermissions, MountOption::FSName("plfs".to_owned())]
        );
        let parsed = parse_options(&strings(&["fsname=scratch,default_permissions"])).unwrap();
        assert_eq!(
            parsed.mount,
            vec![MountOption::DefaultPermissions, MountOption::FSName("scratch".to_owned())]
        );
    }

    #[test]
    fn direct_io_is_the_daemons_and_other_cache_options_are_refused() {
        let parsed = parse_options(&strings(&["direct_io"])).unwrap();
        assert!(parsed.direct_io);
        let parsed = parse_options(&strings(&["writeback_cache"])).unwrap();
        assert!(parsed.writeback_cache && !parsed.direct_io);
        assert!(!parsed.mount.iter().any(|option| matches!(option, MountOption::CUSTOM(_))));
        assert!(!parsed.mount.iter().any(|option| matches!(option, MountOption::CUSTOM(_))));
        let error = parse_options(&strings(&["kernel_cache"])).unwrap_err();
        assert!(error.to_string().contains("kernel_cache"), "{error}");
    }

    #[test]
    fn cache_timeouts_are_the_daemons_and_checked() {
        let parsed = parse_options(&strings(&["attr_timeout=2.5,entry_timeout=0"])).unwrap();
        assert_eq!(parsed.attr_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(parsed.entry_timeout, Some(Duration::ZERO));
        assert!(!parsed.mount.iter().any(|option| matches!(option, MountOption::CUSTOM(_))));
        for bad in ["attr_timeout=-1", "entry_timeout=soon", "attr_timeout=1e9"] {
            let error = parse_options(&strings(&[bad])).unwrap_err();
            assert!(error.to_string().contains(bad), "{error}");
        }
    }

    #[test]
    fn request_threads_follow_the_cpus_within_bounds() {
        assert_eq!(threads_for(1, false), THREADS_MIN);
        assert_eq!(threads_for(2, false), 4, "a 2-core node: four threads, not eight");
        assert_eq!(threads_for(3, false), 6);
        assert_eq!(threads_for(4, false), THREADS_MAX);
        assert_eq!(threads_for(256, false), THREADS_MAX);
        assert_eq!(threads_for(2, true), THREADS_MAX, "the writeback cache keeps eight");
        let parsed = |options: &[&str]| parse_options(&strings(options)).unwrap();
        let automatic = MountSettings::default();
        let threads = |settings: &MountSettings, options: &[&str]| {
            session_config(settings, parsed(options)).n_threads.unwrap()
        };
        assert_eq!(threads(&automatic, &["writeback_cache"]), THREADS_MAX);
        assert_eq!(threads(&automatic, &[]), default_threads(false));
        let chosen = MountSettings { threads: Some(3), ..MountSettings::default() };
        assert_eq!(threads(&chosen, &["writeback_cache"]), 3, "--threads wins");
    }

    #[test]
    fn auto_unmount_gets_the_acl_fusermount_needs() {
        assert_eq!(parse_options(&strings(&["auto_unmount"])).unwrap().acl, SessionACL::RootAndOwner);
    }
}
