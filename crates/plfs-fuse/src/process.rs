//! Who is calling: FUSE requests carry the calling *thread's* id, while
//! plfs gives each client *process* its own writer (its own data and index
//! log). Thread ids are mapped to their process through /proc.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use plfs::open::WriterId;

/// Thread → process entries remembered; the map is cleared when full, so a
/// daemon serving many short-lived processes stays bounded.
const CACHED_MAX: usize = 4096;

#[derive(Debug, Default)]
pub struct Processes {
    process_of_thread: Mutex<HashMap<u32, u32>>,
}

impl Processes {
    /// The writer id for a request from thread `tid`: its process id. None
    /// for tid 0 (a request the kernel makes on its own, or from a process
    /// outside the daemon's pid namespace); the caller then uses the
    /// opener's writer.
    pub fn writer(&self, tid: u32) -> Option<WriterId> {
        if tid == 0 {
            return None;
        }
        let mut cache = self.process_of_thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&process) = cache.get(&tid) {
            return Some(WriterId::from(process));
        }
        // A thread that already exited maps to itself: its writes still
        // get a log of their own, which is all the id is for.
        let process = thread_group(tid).unwrap_or(tid);
        if cache.len() >= CACHED_MAX {
            cache.clear();
        }
        cache.insert(tid, process);
        Some(WriterId::from(process))
    }
}

/// The process (thread group) a thread belongs to.
fn thread_group(tid: u32) -> Option<u32> {
    status_field(tid, "Tgid:")?.trim().parse().ok()
}

/// Supplementary groups of a caller, for `access`. The FUSE request only
/// carries the primary gid.
pub fn groups(tid: u32) -> Vec<u32> {
    status_field(tid, "Groups:")
        .map(|list| list.split_whitespace().filter_map(|group| group.parse().ok()).collect())
        .unwrap_or_default()
}

fn status_field(tid: u32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix(key)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_map_to_their_process() {
        let processes = Processes::default();
        let me = std::process::id();
        assert_eq!(processes.writer(me), Some(WriterId::from(me)));
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert_eq!(processes.writer(tid), Some(WriterId::from(me)));
        let other = std::thread::spawn(move || {
            // SAFETY: as above.
            let tid = unsafe { libc::gettid() } as u32;
            processes.writer(tid)
        });
        assert_eq!(other.join().unwrap(), Some(WriterId::from(me)));
        assert_eq!(Processes::default().writer(0), None);
    }

    #[test]
    fn groups_of_this_process_parse() {
        // Whatever the list is, reading it must not fail or invent entries.
        let groups = groups(std::process::id());
        assert!(groups.len() < 65536);
    }
}
