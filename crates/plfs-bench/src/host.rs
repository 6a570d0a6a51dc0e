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
