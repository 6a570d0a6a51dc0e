//! Messages to the user, written with the real write(2) on fd 2: stdio
//! could re-enter the interposer, and a message must never fail a call.

pub fn message(text: &str) {
    let line = format!("{text}\n");
    // SAFETY: the buffer is valid for its length; fd 2 may be closed, in
    // which case the message is lost, which is all that can be done.
    unsafe { crate::real::write()(2, line.as_ptr().cast(), line.len()) };
}

pub fn fatal(text: &str) -> ! {
    // Not through real::write: this runs when a libc symbol is missing.
    let line = format!("{text}\n");
    // SAFETY: the raw syscall writes a valid buffer to fd 2.
    unsafe { libc::syscall(libc::SYS_write, 2, line.as_ptr(), line.len()) };
    std::process::abort();
}
