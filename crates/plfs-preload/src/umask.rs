//! The process's umask, which the kernel applies to the modes of files and
//! directories that open(2), creat(2) and mkdir(2) create. Calls the
//! interposer serves never reach the kernel, so it applies the umask itself.

/// The umask now, from /proc/self/status (read with raw system calls, so
/// nothing here is interposed and no thread ever sees the umask changed);
/// where /proc is missing, by setting it and setting it back.
pub fn current() -> libc::mode_t {
    from_proc().unwrap_or_else(|| {
        // SAFETY: umask cannot fail; the second call restores the first's
        // answer (another thread creating a file in between gets 0o077,
        // never something more open than it asked for).
        unsafe {
            let old = libc::umask(0o077);
            libc::umask(old);
            old
        }
    })
}

fn from_proc() -> Option<libc::mode_t> {
    let mut buffer = [0u8; 4096];
    // SAFETY: a C string path; the descriptor is closed before returning;
    // read writes at most the buffer's length.
    let length = unsafe {
        let fd = libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let length = libc::syscall(libc::SYS_read, fd, buffer.as_mut_ptr(), buffer.len());
        libc::syscall(libc::SYS_close, fd);
        usize::try_from(length).ok()?
    };
    let text = std::str::from_utf8(&buffer[..length]).ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("Umask:"))?;
    libc::mode_t::from_str_radix(line.trim(), 8).ok()
}
