//! Redirections onto plfs files: a plfs descriptor `dup2`'d onto a
//! standard descriptor (0, 1 or 2: `echo x > MNT/f`, `cmd < MNT/f`,
//! `exec >MNT/f`), or a FILE `freopen`'d onto a plfs path, becomes the end
//! of a pipe whose other end a *pump* process serves.
//!
//! Why a pipe: glibc's stdio (and every program after exec) writes and
//! reads the descriptor with raw system calls no interposer sees, so the
//! descriptor must be a kernel object that carries the bytes. A pipe keeps
//! them in order whoever writes them (the shell's builtins, an exec'd
//! command with or without the interposer, a forked child), and they
//! survive the writer: bytes a crashed writer put into the pipe are still
//! drained. The pump is a fresh process (see [`spawn`]) that opens the file
//! itself at the description's offset and writes what it drains (or reads
//! what it feeds) as its own writer.
//!
//! Close-to-open: a process that releases such a descriptor (close, or a
//! dup2 over it, as a shell restores its stdout after a builtin), and every
//! preloaded process at exit for its descriptors 0–2, first asks the pump,
//! over an abstract unix socket named after the pipe, to drain what is in
//! the pipe and publish it (plfs_sync); so what a command wrote is in the
//! file when the command is done. A program without the interposer gets
//! its bytes into the file in order too, but published only when the pump
//! drains them (at the latest when every holder closed the pipe).
//!
//! The cost of a pipe: the descriptor cannot seek (ESPIPE), as when a
//! shell redirects into a pipe. Descriptors opened read-write stay plfs
//! descriptors (seekable; raw system calls on them fail with EBADF).

use std::ffi::{CString, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};

use libc::pid_t;

use crate::diagnostics::message;
use crate::files::{self, OpenFile, errno};
use crate::libplfs::Errno;
use crate::real;

/// Bytes a pump moves per step.
const CHUNK_BYTES: usize = 64 * 1024;

/// Requests to a pump: one byte, then an i64 (unused by both so far).
const REQUEST_FLUSH: u8 = b'F';
const REQUEST_STOP: u8 = b'Q';
const REQUEST_BYTES: usize = 9;
/// Replies: an i32 errno (0: all well) and an i64 offset.
const REPLY_BYTES: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// The process writes the pipe; the pump writes the file.
    Out,
    /// The pump reads the file into the pipe; the process reads the pipe.
    In,
}

/// A pipe this process (or the process it was forked from) made for a
/// redirection.
#[derive(Debug)]
struct Redirect {
    pipe: PipeId,
    direction: Direction,
    /// This process's descriptors known to hold the pipe.
    fds: Vec<c_int>,
    /// The description whose offset the pump carries on; it gets the
    /// pump's offset back when the redirection is released.
    file: Weak<OpenFile>,
    /// The file's logical path, for the calls that name it by this
    /// descriptor (fchmod, futimens: `touch` reopens its file onto 0)
    /// after the description itself was closed.
    path: CString,
    /// The process that made it: only it may stop a reading pump.
    starter: pid_t,
    /// In: the offset the pump stops at (the file's size when it started).
    end: i64,
}

/// A pipe's identity: the device and inode of its pipefs node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PipeId {
    device: u64,
    inode: u64,
}

static REDIRECTS: Mutex<Vec<Redirect>> = Mutex::new(Vec::new());
/// The pipes this process held as 0, 1 and 2 when it started.
static INHERITED: std::sync::OnceLock<Vec<PipeId>> = std::sync::OnceLock::new();
/// Entries in REDIRECTS: while 0, descriptor calls skip the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn redirects() -> std::sync::MutexGuard<'static, Vec<Redirect>> {
    REDIRECTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a description can be redirected through a pump, and which way.
fn direction(file: &OpenFile) -> Option<Direction> {
    if file.kind != files::Kind::File {
        return None;
    }
    match file.status_flags() & libc::O_ACCMODE {
        libc::O_WRONLY => Some(Direction::Out),
        libc::O_RDONLY => Some(Direction::In),
        _ => None,
    }
}

/// Whether a redirection can carry `file`: opened for reading or for
/// writing only.
pub fn possible(file: &OpenFile) -> bool {
    direction(file).is_some()
}

/// Whether `dup2(fd of file, target)` redirects through a pump: onto a
/// standard descriptor, when [`possible`].
pub fn wanted(file: &OpenFile, target: c_int) -> bool {
    (0..=2).contains(&target) && possible(file)
}

fn pipe_id(fd: c_int) -> Option<PipeId> {
    // SAFETY: stat is plain data; all-zero is valid.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer; the real fstat, not the interposed one.
    if unsafe { real::fstat()(fd, &mut stat) } != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    Some(PipeId { device: stat.st_dev, inode: stat.st_ino })
}

/// The abstract socket address a pump of `pipe` listens on.
fn address(pipe: PipeId) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("plfs-redirect-{}-{}", pipe.device, pipe.inode);
    // sun_path[0] stays 0: an abstract name, gone with the pump.
    for (slot, byte) in address.sun_path[1..].iter_mut().zip(name.bytes()) {
        *slot = byte as libc::c_char;
    }
    let length = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len();
    (address, length as libc::socklen_t)
}

fn close_fd(fd: c_int) {
    // SAFETY: a descriptor of ours; errors leave nothing to do.
    unsafe { real::close()(fd) };
}

/// Reads exactly `buffer.len()` bytes; false on end of file or error.
fn read_exact(fd: c_int, buffer: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: the rest of the buffer is valid for writing.
        let count = unsafe { real::read()(fd, buffer[done..].as_mut_ptr().cast(), buffer.len() - done) };
        if count > 0 {
            done += count as usize;
        } else if count < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Writes all of `buffer` to a blocking descriptor; false on error.
fn write_exact(fd: c_int, buffer: &[u8]) -> bool {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: the rest of the buffer is valid for reading.
        let count = unsafe { real::write()(fd, buffer[done..].as_ptr().cast(), buffer.len() - done) };
        if count > 0 {
            done += count as usize;
        } else if count < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Asks the pump of `pipe`; None when there is none (it finished, or the
/// pipe is no plfs redirection) or it went away before replying.
fn ask(pipe: PipeId, request: u8) -> Option<(Errno, i64)> {
    // SAFETY: plain socket creation.
    let socket = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if socket < 0 {
        return None;
    }
    let (address, length) = address(pipe);
    // SAFETY: a valid address of `length` bytes.
    let connected = unsafe { libc::connect(socket, (&raw const address).cast(), length) } == 0;
    let mut message = [0u8; REQUEST_BYTES];
    message[0] = request;
    let mut reply = [0u8; REPLY_BYTES];
    let replied = connected && write_exact(socket, &message) && read_exact(socket, &mut reply);
    close_fd(socket);
    if !replied {
        return None;
    }
    Some(decode_reply(&reply))
}

fn encode_reply(error: Errno, offset: i64) -> [u8; REPLY_BYTES] {
    let mut reply = [0u8; REPLY_BYTES];
    reply[..4].copy_from_slice(&error.to_le_bytes());
    reply[4..].copy_from_slice(&offset.to_le_bytes());
    reply
}

fn decode_reply(reply: &[u8; REPLY_BYTES]) -> (Errno, i64) {
    let error = i32::from_le_bytes(reply[..4].try_into().expect("4 bytes"));
    let offset = i64::from_le_bytes(reply[4..].try_into().expect("8 bytes"));
    (error, offset)
}

/// Makes `target` a pipe into (or out of) `file`, served by a new pump.
/// `target`, if open, is closed first, as dup2 does.
pub fn start(file: &Arc<OpenFile>, target: c_int, close_on_exec: bool) -> Result<c_int, Errno> {
    let direction = direction(file).ok_or(libc::EINVAL)?;
    let mut ends = [0 as c_int; 2];
    // SAFETY: a valid array of two descriptors.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(errno());
    }
    let (ours, theirs) = match direction {
        Direction::Out => (ends[1], ends[0]),
        Direction::In => (ends[0], ends[1]),
    };
    let result = spawn(file, direction, ours, theirs);
    close_fd(theirs);
    let (pipe, end) = match result {
        Ok(pipe) => pipe,
        Err(error) => {
            close_fd(ours);
            return Err(error);
        }
    };
    // The old target goes as dup2 would close it (a plfs descriptor's
    // description, another redirection's pipe after its pump published);
    // like dup2, a failure to close it does not fail the call.
    let _ = release(target);
    if let Some(Err(error)) = files::close(target) {
        message(&format!(
            "libplfs_preload: closing descriptor {target} before redirecting it: errno {error}"
        ));
    }
    if ours == target {
        // `target` was free, so the pipe took its number (dash closes 0
        // before moving a `< file` onto it): the end is in place already,
        // and dup3 onto itself would fail with EINVAL. Only its flag is
        // dup2's: close-on-exec unless asked for.
        if !close_on_exec {
            // SAFETY: clearing a descriptor flag of our own pipe end.
            if unsafe { real::fcntl()(target, libc::F_SETFD, 0) } < 0 {
                let error = errno();
                close_fd(target);
                return Err(error);
            }
        }
    } else {
        let flags = if close_on_exec { libc::O_CLOEXEC } else { 0 };
        // SAFETY: both are descriptors; dup3 closes a real target atomically.
        let placed = unsafe { real::dup3()(ours, target, flags) };
        let error = errno();
        close_fd(ours);
        if placed < 0 {
            return Err(error);
        }
    }
    register_exit_hook();
    let redirect = Redirect {
        pipe,
        direction,
        fds: vec![target],
        file: Arc::downgrade(file),
        path: file.path.clone(),
        // SAFETY: getpid cannot fail.
        starter: unsafe { libc::getpid() },
        end,
    };
    redirects().push(redirect);
    COUNT.fetch_add(1, Ordering::AcqRel);
    Ok(target)
}

/// Creates the pump's socket and the pump, and waits until the pump has
/// the file open (its failure is this call's error).
///
/// The pump is a fresh process image: a fork of a process with threads
/// (libplfs's own, the program's) keeps only the forking thread and
/// whatever locks the others held, and libplfs's descriptors belong to the
/// redirecting process. So the grandchild execs `/proc/self/exe` (a
/// program this interposer is loaded into) with `PLFS_PRELOAD_PUMP` set,
/// and this library's constructor runs the pump before that program's
/// `main` ever does. SIGCHLD is held while the intermediate child is
/// reaped, so a shell's handler never sees a child it did not make; the
/// pump itself is a grandchild nobody waits for.
fn spawn(
    file: &Arc<OpenFile>,
    direction: Direction,
    ours: c_int,
    theirs: c_int,
) -> Result<(PipeId, i64), Errno> {
    let pipe = pipe_id(ours).ok_or(libc::EIO)?;
    let library = crate::libplfs::this_library().ok_or(libc::ELIBACC)?;
    // SAFETY: plain socket creation.
    let listener = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if listener < 0 {
        return Err(errno());
    }
    let mut status = [0 as c_int; 2];
    // SAFETY: a valid array of two descriptors.
    if unsafe { libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let error = errno();
        close_fd(listener);
        return Err(error);
    }
    let result = bind_and_fork(file, direction, pipe, theirs, listener, status, &library);
    close_fd(listener);
    close_fd(status[1]);
    // The pump's first words, as a reply: 0 and the size it sees once it
    // has the file open (its own fresh view of it), else an errno;
    // nothing if it died first.
    let mut words = [0u8; REPLY_BYTES];
    let started = result.and_then(|()| {
        if !read_exact(status[0], &mut words) {
            return Err(libc::EIO);
        }
        let (error, size) = decode_reply(&words);
        if error == 0 { Ok((pipe, size)) } else { Err(error) }
    });
    close_fd(status[0]);
    started
}

#[allow(clippy::too_many_arguments)]
fn bind_and_fork(
    file: &OpenFile,
    direction: Direction,
    pipe: PipeId,
    theirs: c_int,
    listener: c_int,
    status: [c_int; 2],
    library: &[u8],
) -> Result<(), Errno> {
    let (address, length) = address(pipe);
    // SAFETY: a valid address of `length` bytes.
    if unsafe { libc::bind(listener, (&raw const address).cast(), length) } != 0
        // SAFETY: a bound socket.
        || unsafe { libc::listen(listener, 16) } != 0
    {
        return Err(errno());
    }
    // Everything the child needs is made before fork: after it, only
    // async-signal-safe calls.
    let order = PumpOrder {
        direction,
        pipe: theirs,
        listener,
        status: status[1],
        offset: files::offset(file),
        // A reading pump reads ahead of its reader: its offset is not the
        // description's until the redirection is released (`release`).
        shared: if direction == Direction::Out { files::shareable_offset(file) } else { None },
        flags: file.status_flags() & (libc::O_ACCMODE | libc::O_APPEND),
        path: file.path.to_bytes().to_vec(),
    };
    let environment = pump_environment(&order, library)?;
    let mut environment_pointers: Vec<*const libc::c_char> =
        environment.iter().map(|entry| entry.as_ptr()).collect();
    environment_pointers.push(std::ptr::null());
    let program = c"/proc/self/exe";
    let arguments = [c"plfs-redirect-pump".as_ptr(), std::ptr::null()];
    let keep_stderr = pipe_id(2).is_none();
    let shared_fd = order.shared.map_or(-1, |(fd, _)| fd);
    let keep = [theirs, listener, status[1], if keep_stderr { 2 } else { -1 }, shared_fd];
    let (open, close, fcntl, write) = (real::open(), real::close(), real::fcntl(), real::write());
    // The interposed _exit publishes plfs files: not for these two children.
    let leave = real::_exit();
    // SAFETY: sigset_t is plain data, filled by the calls below.
    let mut held: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid sets.
    unsafe {
        libc::sigemptyset(&mut held);
        libc::sigaddset(&mut held, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut previous);
    }
    // SAFETY: fork; the child forks again and exits, the grandchild only
    // makes async-signal-safe calls before execve.
    let child = unsafe { libc::fork() };
    if child == 0 {
        // SAFETY: as above.
        let pump = unsafe { libc::fork() };
        if pump == 0 {
            // SAFETY: plain calls on our own descriptors (the real libc
            // functions, resolved before fork: the interposed ones take
            // locks), then execve with NULL-terminated arrays of C strings
            // made before fork.
            unsafe {
                // Out of the shell's session and process group, a
                // terminal's ^C cannot kill a pump holding bytes.
                libc::setsid();
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                close_all_but(&keep);
                // 0, 1 and 2 stay taken (by /dev/null), so no file libplfs
                // opens in the pump gets a number messages are written to.
                for _ in 0..3 {
                    let fd = open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    if fd > 2 {
                        close(fd);
                        break;
                    }
                }
                for fd in [theirs, listener, status[1], shared_fd] {
                    if fd >= 0 {
                        fcntl(fd, libc::F_SETFD, 0);
                    }
                }
                libc::execve(program.as_ptr(), arguments.as_ptr(), environment_pointers.as_ptr());
                let word = errno().to_le_bytes();
                write(status[1], word.as_ptr().cast(), word.len());
                leave(127);
            }
        }
        // SAFETY: the intermediate child leaves at once, running nothing.
        unsafe { leave(if pump < 0 { 1 } else { 0 }) };
    }
    let error = errno();
    let mut exit = 0;
    if child > 0 {
        // SAFETY: our own child.
        unsafe { libc::waitpid(child, &mut exit, 0) };
    }
    // SAFETY: restores the caller's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    if child < 0 {
        return Err(error);
    }
    if !libc::WIFEXITED(exit) || libc::WEXITSTATUS(exit) != 0 {
        return Err(libc::EAGAIN);
    }
    Ok(())
}

/// What a pump is to do, passed in `PLFS_PRELOAD_PUMP`.
#[derive(Debug, PartialEq)]
struct PumpOrder {
    direction: Direction,
    pipe: c_int,
    listener: c_int,
    status: c_int,
    offset: i64,
    /// Out: the memfd descriptor and position of the description's offset
    /// (see `offsets`), which the pump moves as it writes, so processes
    /// sharing the description (the one that forked the redirecting child)
    /// write after what came through the pipe.
    shared: Option<(c_int, u64)>,
    flags: c_int,
    path: Vec<u8>,
}

const PUMP_VARIABLE: &str = "PLFS_PRELOAD_PUMP";

impl PumpOrder {
    fn encode(&self) -> Vec<u8> {
        let direction = match self.direction {
            Direction::Out => "out",
            Direction::In => "in",
        };
        let (shared_fd, shared_position) = self.shared.unwrap_or((-1, 0));
        let mut text = format!(
            "{direction}:{}:{}:{}:{}:{shared_fd}:{shared_position}:{}:",
            self.pipe, self.listener, self.status, self.offset, self.flags
        )
        .into_bytes();
        // The path goes last: it may hold ':'.
        text.extend_from_slice(&self.path);
        text
    }

    fn decode(text: &[u8]) -> Option<PumpOrder> {
        let mut fields = text.splitn(9, |&byte| byte == b':');
        let mut next = || fields.next();
        let direction = match next()? {
            b"out" => Direction::Out,
            b"in" => Direction::In,
            _ => return None,
        };
        let number = |field: Option<&[u8]>| -> Option<i64> { std::str::from_utf8(field?).ok()?.parse().ok() };
        let pipe = c_int::try_from(number(next())?).ok()?;
        let listener = c_int::try_from(number(next())?).ok()?;
        let status = c_int::try_from(number(next())?).ok()?;
        let offset = number(next())?;
        let shared_fd = c_int::try_from(number(next())?).ok()?;
        let shared_position = u64::try_from(number(next())?).ok()?;
        let shared = (shared_fd >= 0).then_some((shared_fd, shared_position));
        let flags = c_int::try_from(number(next())?).ok()?;
        let path = next()?.to_vec();
        Some(PumpOrder { direction, pipe, listener, status, offset, shared, flags, path })
    }
}

/// The environment of the pump: this process's, with this interposer as
/// LD_PRELOAD (the program may have dropped it) and the order.
fn pump_environment(order: &PumpOrder, library: &[u8]) -> Result<Vec<std::ffi::CString>, Errno> {
    let mut entries = Vec::new();
    for (name, value) in std::env::vars_os() {
        if name == "LD_PRELOAD" || name == PUMP_VARIABLE {
            continue;
        }
        use std::os::unix::ffi::OsStrExt;
        let mut entry = name.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        entries.push(std::ffi::CString::new(entry).map_err(|_| libc::EINVAL)?);
    }
    let mut preload = b"LD_PRELOAD=".to_vec();
    preload.extend_from_slice(library);
    entries.push(std::ffi::CString::new(preload).map_err(|_| libc::EINVAL)?);
    let mut pump = format!("{PUMP_VARIABLE}=").into_bytes();
    pump.extend_from_slice(&order.encode());
    entries.push(std::ffi::CString::new(pump).map_err(|_| libc::EINVAL)?);
    Ok(entries)
}

/// The pump process, started by this library's constructor: opens the
/// file, says so on the status pipe, serves until the pipe is done, and
/// leaves without running the program it was exec'd as.
fn run(order: PumpOrder) -> ! {
    // SAFETY: a reader that went away is EPIPE, not death.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // The description's own offset, when the redirecting process could
    // share it (the memfd is then of no further use here).
    let shared = order.shared.map(|(fd, position)| {
        let offset = crate::offsets::Offset::attach(fd, position);
        close_fd(fd);
        offset
    });
    let opened = std::ffi::CString::new(order.path.clone())
        .map_err(|_| libc::EINVAL)
        .and_then(|path| match shared {
            Some(offset) => files::open_with_offset(path, order.flags, 0, offset?),
            None => files::open(path, order.flags, 0),
        })
        .and_then(|fd| files::lookup(fd).ok_or(libc::EBADF));
    // A reading pump stops at the size it sees now.
    let sized = opened.and_then(|file| files::size(&file).map(|size| (file, size)));
    let (error, end) = match &sized {
        Ok((_, size)) => (0, *size),
        Err(error) => (*error, 0),
    };
    write_exact(order.status, &encode_reply(error, end));
    close_fd(order.status);
    let Ok((file, end)) = sized else {
        // SAFETY: leaving at once.
        unsafe { real::_exit()(1) }
    };
    if order.shared.is_none() {
        files::set_offset(&file, order.offset);
    }
    // SAFETY: our descriptor; non-blocking so one poll serves both.
    unsafe { libc::fcntl(order.pipe, libc::F_SETFL, libc::O_NONBLOCK) };
    let code = match order.direction {
        Direction::Out => drain_into_file(&file, order.pipe, order.listener),
        Direction::In => feed_from_file(&file, order.pipe, order.listener, end),
    };
    // SAFETY: leaves without the program's atexit handlers or main (and
    // without the interposed _exit: the pump has published what it wrote).
    unsafe { real::_exit()(code) }
}

/// Closes every descriptor but `keep` (-1 entries are ignored).
fn close_all_but(keep: &[c_int]) {
    let mut kept: Vec<c_int> = keep.iter().copied().filter(|fd| *fd >= 0).collect();
    kept.sort_unstable();
    let mut first: c_int = 0;
    for fd in kept.into_iter().chain([c_int::MAX]) {
        if fd > first {
            let last = if fd == c_int::MAX { u32::MAX } else { (fd - 1) as u32 };
            crate::reserve::forget_within(first, c_int::try_from(last).unwrap_or(c_int::MAX));
            // SAFETY: close_range only closes descriptors.
            unsafe { libc::syscall(libc::SYS_close_range, first as u32, last, 0u32) };
        }
        first = fd.saturating_add(1);
    }
}

/// One request on the socket: answered by `answer`, which returns the
/// reply and whether the pump stops now.
fn serve(listener: c_int, answer: &mut dyn FnMut(u8) -> (Errno, i64, bool)) -> bool {
    // SAFETY: accepts on our socket; no address wanted.
    let client =
        unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
    if client < 0 {
        return false;
    }
    let mut request = [0u8; REQUEST_BYTES];
    let mut stop = false;
    if same_user(client) && read_exact(client, &mut request) {
        let (error, offset, stopping) = answer(request[0]);
        stop = stopping;
        write_exact(client, &encode_reply(error, offset));
    }
    close_fd(client);
    stop
}

/// Only this user (or root) may make the pump publish or stop.
fn same_user(client: c_int) -> bool {
    // SAFETY: ucred is plain data.
    let mut credentials: libc::ucred = unsafe { std::mem::zeroed() };
    let mut length = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid out pointer and length.
    let got = unsafe {
        libc::getsockopt(
            client,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut credentials).cast(),
            &mut length,
        )
    };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    got == 0 && (credentials.uid == uid || credentials.uid == 0)
}

fn wait_readable(fds: &mut [libc::pollfd]) {
    loop {
        // SAFETY: a valid array of pollfds.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready >= 0 || errno() != libc::EINTR {
            return;
        }
    }
}

/// Out: the pipe's bytes go to the file in order until every writer has
/// closed the pipe; then the file is published and closed.
fn drain_into_file(file: &Arc<OpenFile>, pipe: c_int, listener: c_int) -> c_int {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut failure: Errno = 0;
    loop {
        let mut fds = [
            libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pipe, events: libc::POLLIN, revents: 0 },
        ];
        wait_readable(&mut fds);
        if fds[0].revents & libc::POLLIN != 0 {
            serve(listener, &mut |_request| {
                // Everything the asker wrote before asking is in the pipe
                // now: drain that much (not more: a writer still going
                // must not keep the asker waiting), then publish.
                let mut waiting: c_int = 0;
                // SAFETY: FIONREAD writes an int.
                unsafe { libc::ioctl(pipe, libc::FIONREAD, &mut waiting) };
                let mut left = waiting.max(0) as usize;
                while left > 0 {
                    match read_some(pipe, &mut buffer[..left.min(CHUNK_BYTES)]) {
                        Some(0) | None => break,
                        Some(count) => {
                            store(file, &buffer[..count], &mut failure);
                            left -= count;
                        }
                    }
                }
                if failure == 0
                    && let Err(error) = files::sync(file)
                {
                    report(file, error, &mut failure);
                }
                (failure, files::offset(file), false)
            });
        }
        if fds[1].revents != 0 {
            match read_some(pipe, &mut buffer) {
                Some(0) => break,
                Some(count) => store(file, &buffer[..count], &mut failure),
                None => {}
            }
        }
    }
    if let Err(error) = files::close_description(file) {
        report(file, error, &mut failure);
    }
    if failure == 0 { 0 } else { 1 }
}

/// One read of the pipe: Some(0) at end of file, None when nothing is
/// there now.
fn read_some(pipe: c_int, buffer: &mut [u8]) -> Option<usize> {
    loop {
        // SAFETY: the buffer is valid for its length.
        let count = unsafe { real::read()(pipe, buffer.as_mut_ptr().cast(), buffer.len()) };
        if count >= 0 {
            return Some(count as usize);
        }
        if errno() != libc::EINTR {
            return None;
        }
    }
}

/// Writes drained bytes to the file. After a failure the rest is drained
/// and dropped (so writers never block), and every reply says so.
fn store(file: &Arc<OpenFile>, mut bytes: &[u8], failure: &mut Errno) {
    while *failure == 0 && !bytes.is_empty() {
        match files::write(file, bytes) {
            Ok(0) => report(file, libc::EIO, failure),
            Ok(count) => bytes = &bytes[count..],
            Err(error) => report(file, error, failure),
        }
    }
}

fn report(file: &OpenFile, error: Errno, failure: &mut Errno) {
    if *failure == 0 {
        *failure = error;
        message(&format!(
            "libplfs_preload: redirection into {}: writing failed (errno {error}); later bytes are dropped",
            file.path.to_string_lossy()
        ));
    }
}

/// In: the file from the description's offset up to `end` goes into the
/// pipe; at `end` the pipe is closed (end of file for its readers). A stop
/// request ends it early and reports how far it got.
fn feed_from_file(file: &Arc<OpenFile>, pipe: c_int, listener: c_int, end: i64) -> c_int {
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut pending = 0..0;
    let mut pushed = files::offset(file);
    loop {
        if pending.is_empty() {
            let want = usize::try_from(end - pushed).unwrap_or(0).min(CHUNK_BYTES);
            if want == 0 {
                return 0;
            }
            match files::read(file, &mut chunk[..want]) {
                Ok(0) => return 0,
                Ok(count) => pending = 0..count,
                Err(error) => {
                    message(&format!(
                        "libplfs_preload: redirection from {}: reading failed (errno {error})",
                        file.path.to_string_lossy()
                    ));
                    return 1;
                }
            }
        }
        let mut fds = [
            libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pipe, events: libc::POLLOUT, revents: 0 },
        ];
        wait_readable(&mut fds);
        if fds[0].revents & libc::POLLIN != 0 {
            let stop = serve(listener, &mut |request| (0, pushed, request == REQUEST_STOP));
            if stop {
                return 0;
            }
        }
        if fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            return 0; // every reader is gone
        }
        if fds[1].revents & libc::POLLOUT != 0 {
            // SAFETY: the pending bytes are valid for reading.
            let count = unsafe { real::write()(pipe, chunk[pending.clone()].as_ptr().cast(), pending.len()) };
            if count > 0 {
                pending.start += count as usize;
                pushed += count as i64;
            } else if count < 0 && errno() == libc::EPIPE {
                return 0;
            }
        }
    }
}

/// The redirection `fd` holds, when it holds one of this process's.
fn find(redirects: &[Redirect], fd: c_int) -> Option<usize> {
    let position = redirects.iter().position(|redirect| redirect.fds.contains(&fd))?;
    // The number may have been reused behind the interposer's back.
    (pipe_id(fd) == Some(redirects[position].pipe)).then_some(position)
}

/// The descriptors in `first..=last` known to hold a redirection (for
/// close_range and closefrom, which close them all).
pub fn held_within(first: c_int, last: c_int) -> Vec<c_int> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Vec::new();
    }
    let redirects = redirects();
    let mut held: Vec<c_int> = redirects.iter().flat_map(|redirect| redirect.fds.iter().copied()).collect();
    held.retain(|fd| (first..=last).contains(fd));
    held
}

/// Before `fd` is closed or replaced: if it holds a redirection, its pump
/// publishes what was written (Out) or stops feeding (In), and the
/// description takes over the offset reached. Err when the pump reported
/// a failure to write the file.
pub fn release(fd: c_int) -> Result<(), Errno> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mut redirects = redirects();
    let Some(position) = find(&redirects, fd) else {
        return Ok(());
    };
    let redirect = &mut redirects[position];
    redirect.fds.retain(|&held| held != fd);
    let last = redirect.fds.is_empty();
    // SAFETY: getpid cannot fail.
    let starter = redirect.starter == unsafe { libc::getpid() };
    let (pipe, direction, end) = (redirect.pipe, redirect.direction, redirect.end);
    let file = redirect.file.upgrade();
    if last {
        redirects.remove(position);
        COUNT.fetch_sub(1, Ordering::AcqRel);
    }
    drop(redirects);
    let result = match direction {
        Direction::Out => ask(pipe, REQUEST_FLUSH),
        // Only the last descriptor of the process that made it stops a
        // reading pump: a forked child closing its copy must not.
        Direction::In if last && starter => ask(pipe, REQUEST_STOP).or(Some((0, end))),
        Direction::In => None,
    };
    let Some((error, offset)) = result else { return Ok(()) };
    if let Some(file) = file {
        let unread = if direction == Direction::In { unread_bytes(fd) } else { 0 };
        files::set_offset(&file, offset - unread);
    }
    if error == 0 { Ok(()) } else { Err(error) }
}

fn unread_bytes(fd: c_int) -> i64 {
    let mut waiting: c_int = 0;
    // SAFETY: FIONREAD writes an int.
    unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) };
    i64::from(waiting.max(0))
}

/// The logical path of the file `fd` is redirected onto, when it holds
/// one of this process's redirections.
pub fn redirected_path(fd: c_int) -> Option<CString> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let redirects = redirects();
    find(&redirects, fd).map(|position| redirects[position].path.clone())
}

/// Has the pump of `fd`'s redirection publish what was written into the
/// pipe so far (nothing to do for a reading one), so that a time set next
/// is not overtaken by those bytes.
pub fn publish(fd: c_int) -> Result<(), Errno> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let redirects = redirects();
    let Some(position) = find(&redirects, fd) else { return Ok(()) };
    let (pipe, direction) = (redirects[position].pipe, redirects[position].direction);
    drop(redirects);
    match direction {
        Direction::Out => match ask(pipe, REQUEST_FLUSH) {
            Some((0, _)) | None => Ok(()),
            Some((error, _)) => Err(error),
        },
        Direction::In => Ok(()),
    }
}

/// After a real descriptor `from` was duplicated to `to` (dup, dup2,
/// fcntl F_DUPFD): `to` holds the same redirection.
pub fn duplicated(from: c_int, to: c_int) {
    if COUNT.load(Ordering::Acquire) == 0 || to < 0 {
        return;
    }
    let mut redirects = redirects();
    if let Some(position) = redirects.iter().position(|redirect| redirect.fds.contains(&from)) {
        let fds = &mut redirects[position].fds;
        if !fds.contains(&to) {
            fds.push(to);
        }
    }
}

/// At exit (after stdio's buffers were flushed into the pipes): every
/// redirection this process writes into, its own and the ones it got as
/// descriptors 0–2 across exec, is published before the process is gone,
/// so a shell that waited for it finds the bytes in the file.
pub fn flush_at_exit() {
    let mut pipes: Vec<PipeId> = (0..=2).filter_map(pipe_id).collect();
    // The ones held at load, even if the program closed them already
    // (coreutils close stdout in their own atexit handler, which runs
    // first): a pump still finishing makes this wait until it is done.
    for pipe in INHERITED.get().into_iter().flatten() {
        if !pipes.contains(pipe) {
            pipes.push(*pipe);
        }
    }
    if COUNT.load(Ordering::Acquire) != 0 {
        for redirect in redirects().iter().filter(|redirect| redirect.direction == Direction::Out) {
            if !pipes.contains(&redirect.pipe) {
                pipes.push(redirect.pipe);
            }
        }
    }
    for pipe in pipes {
        if let Some((error, _)) = ask(pipe, REQUEST_FLUSH)
            && error != 0
        {
            message(&format!("libplfs_preload: redirected output was not all written (errno {error})"));
        }
    }
}

extern "C" fn at_exit() {
    if crate::guard::inside() {
        return;
    }
    // SAFETY: fflush(NULL) flushes every stream (stdout into its pipe).
    unsafe { real::fflush()(std::ptr::null_mut()) };
    flush_at_exit();
}

fn register_exit_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: an extern "C" function that lives as long as the process.
        unsafe { libc::atexit(at_exit) };
        EXIT_HOOK.store(true, Ordering::Release);
    });
}

/// Whether [`at_exit`] is registered: this process holds or held pipes
/// whose pumps publish at its exit.
static EXIT_HOOK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process's exit has redirections to publish.
pub fn publishes_at_exit() -> bool {
    EXIT_HOOK.load(Ordering::Acquire)
}

/// Before _exit, which runs no atexit handler: what [`at_exit`] publishes,
/// without flushing stdio (_exit does not).
pub fn flush_before_exit() {
    if publishes_at_exit() {
        flush_at_exit();
    }
}

/// At load: a pump runs (see [`spawn`]); any other process that got a
/// pipe as 0, 1 or 2 (perhaps a plfs redirection made before exec)
/// publishes it at exit.
extern "C" fn at_load() {
    if let Some(order) = std::env::var_os(PUMP_VARIABLE) {
        use std::os::unix::ffi::OsStrExt;
        match PumpOrder::decode(order.as_bytes()) {
            Some(order) => run(order),
            None => crate::diagnostics::fatal("libplfs_preload: a malformed PLFS_PRELOAD_PUMP"),
        }
    }
    let inherited: Vec<PipeId> = (0..=2).filter_map(pipe_id).collect();
    if !inherited.is_empty() {
        let _ = INHERITED.set(inherited);
        register_exit_hook();
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static AT_LOAD: extern "C" fn() = at_load;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_come_back_as_they_were_sent() {
        let shared = PumpOrder {
            direction: Direction::Out,
            pipe: 5,
            listener: 6,
            status: 7,
            offset: 1 << 40,
            shared: Some((1000, 4096 + 24)),
            flags: libc::O_WRONLY | libc::O_APPEND,
            path: b"/mnt/a:b/c".to_vec(),
        };
        let encoded = shared.encode();
        let alone = PumpOrder { direction: Direction::In, shared: None, flags: libc::O_RDONLY, ..shared };
        assert_eq!(PumpOrder::decode(&encoded).map(|order| order.shared), Some(Some((1000, 4096 + 24))));
        assert_eq!(PumpOrder::decode(&alone.encode()), Some(alone));
        assert_eq!(PumpOrder::decode(b"out:5:6:7:0:-1:0:1"), None, "a field missing");
        let again = PumpOrder::decode(&encoded).unwrap();
        assert_eq!(
            (again.direction, again.offset, again.path),
            (Direction::Out, 1 << 40, b"/mnt/a:b/c".to_vec())
        );
    }
}
