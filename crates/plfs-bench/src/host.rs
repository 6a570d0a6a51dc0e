//! Conditions of the machine that skew a bandwidth comparison between two
//! phases run one after the other, found in sysfs and reported with the
//! figures.
//!
//! A guest that hands freed memory back to its host makes the cost of a
//! page depend on its history: a page the host has discarded is faulted
//! back in (allocated and zeroed by the host) on its first write. A write
//! phase fills gigabytes of page cache, so it runs at the speed of the host's
//! faults or of plain copies depending on which pages the allocator gives
//! it, and that depends on what ran before it, not on what it does. Seen on
//! this project's VM: writing a 17 GiB tmpfs file ran at 672 MB/s the first
//! time and 3.1 GB/s straight after, once every page was backed.
//!
//! Two mechanisms do this: virtio-balloon free page reporting (the guest
//! reports free pages and the host discards them) and DAMON proactive
//! reclaim (`pageout` of memory unused for a while, which then is free).

use std::fs;
use std::path::Path;

/// `VIRTIO_BALLOON_F_REPORTING`: the device takes free page reports.
const BALLOON_F_REPORTING: usize = 5;

/// One sentence per condition found under `sys` (normally `/sys`); empty
/// when none is, or when sysfs cannot be read (nothing is claimed then).
pub fn memory_notes(sys: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    for device in balloons_reporting(sys) {
        notes.push(format!(
            "virtio-balloon free page reporting is on ({device}): freed memory goes back to the host, \
             and writing to it again costs a host page fault per page"
        ));
    }
    for kdamond in damon_pageout(sys) {
        notes.push(format!(
            "DAMON reclaim is running (kdamond {kdamond}, action pageout): page cache left unused is \
             freed behind the benchmark's back"
        ));
    }
    if reads(&sys.join("module/damon_reclaim/parameters/enabled"), "Y") {
        notes.push(
            "DAMON_RECLAIM is enabled: page cache left unused is freed behind the benchmark's back".into(),
        );
    }
    notes
}

/// Touches `bytes` of fresh anonymous memory (huge pages where the kernel
/// gives them) and frees it again, so the pages the next few allocations
/// get are backed by the host. After the page cache is dropped, a guest
/// with free page reporting hands the freed pages to its host, which
/// discards them; a read that then fills the page cache pays a host fault
/// per page on its first copy out of it (seen in `_copy_to_iter`). Which
/// reads pay depends on the folios they get, not on what they do: a file
/// read front to back gets large read-ahead folios, carved from the large
/// free blocks that were reported, while strided reads of one shared file
/// get small ones from recently freed pages (restart uniform: plfs's logs
/// paid 5-10x the direct file's copy cost). Freed pages are reported only
/// after they have lain free for a while (2 s in Linux), so this is done
/// right before a clock starts, by the processes that will read. The
/// process's peak resident set is reset afterwards, so the touched memory
/// does not show in the peak RSS its figures report.
pub fn back_free_memory(bytes: u64) -> std::io::Result<()> {
    const PAGE: usize = 4096;
    let len = usize::try_from(bytes).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a private anonymous mapping at an address the kernel picks;
    // nothing else refers to it.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // Huge pages are freed as whole large blocks, which large read-ahead
    // folios are then carved from; a refusal only means small pages.
    // SAFETY: `at..at + len` is the mapping made above.
    unsafe { libc::madvise(at, len, libc::MADV_HUGEPAGE) };
    let base = at.cast::<u8>();
    for offset in (0..len).step_by(PAGE) {
        // SAFETY: inside the mapping; volatile so the touch is not elided.
        unsafe { base.add(offset).write_volatile(1) };
    }
    // SAFETY: unmaps exactly the mapping made above, which nothing uses.
    if unsafe { libc::munmap(at, len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // "5" resets the peak RSS (VmHWM, getrusage's ru_maxrss) to the
    // current RSS (proc(5), clear_refs).
    fs::write("/proc/self/clear_refs", "5")
}

/// Bound virtio-balloon devices whose negotiated features include free
/// page reporting (sysfs shows features as one '0'/'1' per bit, bit 0 first).
fn balloons_reporting(sys: &Path) -> Vec<String> {
    names_where(&sys.join("bus/virtio/drivers/virtio_balloon"), |device| {
        fs::read_to_string(device.join("features"))
            .is_ok_and(|features| features.as_bytes().get(BALLOON_F_REPORTING) == Some(&b'1'))
    })
}

/// kdamonds that are on with at least one `pageout` scheme.
fn damon_pageout(sys: &Path) -> Vec<String> {
    names_where(&sys.join("kernel/mm/damon/admin/kdamonds"), |kdamond| {
        reads(&kdamond.join("state"), "on")
            && any_entry(&kdamond.join("contexts"), |context| {
                any_entry(&context.join("schemes"), |scheme| reads(&scheme.join("action"), "pageout"))
            })
    })
}

/// The sorted names of `dir`'s entries that pass `test`.
fn names_where(dir: &Path, test: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| test(&entry.path()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn any_entry(dir: &Path, test: impl Fn(&Path) -> bool) -> bool {
    fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| test(&entry.path()))
}

/// Whether the sysfs file at `path` holds `value` (trailing newline aside).
fn reads(path: &Path, value: &str) -> bool {
    fs::read_to_string(path).is_ok_and(|contents| contents.trim() == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, contents: &str) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }

    /// The memory is really touched: this thread takes at least one page
    /// fault per huge page of it (one per 4 KiB page without huge pages);
    /// and it does not show in the process's peak RSS afterwards. VmHWM,
    /// not getrusage: a test binary's ru_maxrss starts at its parent's
    /// (cargo's) peak, inherited at exec, which hides 64 MiB.
    #[test]
    fn backing_free_memory_touches_every_page_and_leaves_the_peak_alone() {
        const BYTES: u64 = 64 << 20;
        let faults = || {
            // SAFETY: an all-zero rusage is valid for getrusage to fill.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: getrusage fills the one rusage it is given.
            assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
            usage.ru_minflt as u64
        };
        let peak_kib = || {
            let status = fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
        };
        let (before_faults, before_peak) = (faults(), peak_kib());
        back_free_memory(BYTES).unwrap();
        let taken = faults() - before_faults;
        assert!(taken >= BYTES / (2 << 20), "{taken} page faults for {BYTES} bytes");
        let after_peak = peak_kib();
        assert!(
            after_peak < before_peak + BYTES / 1024 / 2,
            "peak RSS {before_peak} KiB -> {after_peak} KiB"
        );
        back_free_memory(0).unwrap();
    }

    #[test]
    fn an_unreadable_or_quiet_sysfs_claims_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(memory_notes(&dir.path().join("missing")).is_empty());
        // A balloon without reporting, a kdamond that is off, one that is
        // on but only collects statistics.
        write(dir.path(), "bus/virtio/drivers/virtio_balloon/virtio0/features", "0110000000\n");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/0/state", "off\n");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/0/contexts/0/schemes/0/action", "pageout\n");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/1/state", "on\n");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/1/contexts/0/schemes/0/action", "stat\n");
        write(dir.path(), "module/damon_reclaim/parameters/enabled", "N\n");
        assert!(memory_notes(dir.path()).is_empty());
    }

    #[test]
    fn reporting_and_reclaim_are_named() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "bus/virtio/drivers/virtio_balloon/virtio3/features", "0110010100000000\n");
        // The driver directory also holds files that are not devices.
        write(dir.path(), "bus/virtio/drivers/virtio_balloon/uevent", "");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/0/state", "on\n");
        write(dir.path(), "kernel/mm/damon/admin/kdamonds/0/contexts/0/schemes/1/action", "pageout\n");
        write(dir.path(), "module/damon_reclaim/parameters/enabled", "Y\n");
        let notes = memory_notes(dir.path());
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].contains("free page reporting") && notes[0].contains("virtio3"), "{notes:?}");
        assert!(notes[1].contains("kdamond 0") && notes[1].contains("pageout"), "{notes:?}");
        assert!(notes[2].contains("DAMON_RECLAIM"), "{notes:?}");
    }
}
