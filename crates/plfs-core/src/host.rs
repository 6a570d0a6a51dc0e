//! Which host this process runs on, as logs, log names and hostdir
//! placement record it. Interfaces and tests pass a fixed name instead
//! (`fs::Options`), so nothing below the façade calls this on its own but
//! the small-file engine's process-wide defaults.

/// This host's name, or "localhost" if the system will not say.
pub fn hostname() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // or truncates within it.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "localhost".to_owned();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}
