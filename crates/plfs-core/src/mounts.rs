//! The mounts of one process, for the interfaces that take absolute paths
//! (the C library, the LD_PRELOAD interposer, the MPI-IO wrapper): the
//! plfsrc is found once, each mount is built on first use and then shared
//! by every caller in the process, so one file has one open-file state (and
//! one merged index) however it was reached.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::config::plfsrc::{self, PlfsConfig};
use crate::error::{Error, Result};
use crate::fs::{Options, Plfs};

/// A plfsrc and the mounts built from it so far.
#[derive(Debug)]
pub struct MountTable {
    config: PlfsConfig,
    /// Mount points, longest first, for a quick "is this ours" test.
    points: Vec<PathBuf>,
    /// The mounts built so far, one slot per mount of the plfsrc: read
    /// without a lock or a hash of the mount point on every call (a tenth
    /// of a stat through the interposer was that lookup).
    built: Vec<OnceLock<Plfs>>,
    /// Held while a mount is built, so each is built once.
    building: Mutex<()>,
}

impl MountTable {
    pub fn new(config: PlfsConfig) -> MountTable {
        let mut points: Vec<PathBuf> = config.mounts.iter().map(|mount| mount.mount_point.clone()).collect();
        points.sort_by_key(|point| std::cmp::Reverse(point.components().count()));
        let built = config.mounts.iter().map(|_| OnceLock::new()).collect();
        MountTable { config, points, built, building: Mutex::new(()) }
    }

    /// The table of this process: the plfsrc from `$PLFSRC`, `~/.plfsrc`
    /// or `/etc/plfsrc`, read once. An error (no plfsrc, a bad one) is kept
    /// and returned to every caller.
    pub fn process() -> std::result::Result<&'static MountTable, &'static Error> {
        static TABLE: OnceLock<Result<MountTable>> = OnceLock::new();
        TABLE.get_or_init(|| plfsrc::discover().map(MountTable::new)).as_ref()
    }

    pub fn config(&self) -> &PlfsConfig {
        &self.config
    }

    /// Mount points, deepest first.
    pub fn mount_points(&self) -> &[PathBuf] {
        &self.points
    }

    /// Whether an absolute, normalised path is at or under a mount point
    /// (no I/O; what an interposer asks on every call).
    pub fn covers(&self, path: &Path) -> bool {
        if plfsrc::is_normal(path) {
            return self.covers_normal(path.as_os_str().as_encoded_bytes());
        }
        self.points.iter().any(|point| path.starts_with(point))
    }

    /// `covers` for a normal path, on its bytes: `Path::starts_with` walks
    /// both paths component by component, which was a tenth of a stat
    /// through the interposer (it asks `is_above_mount` on every call).
    fn covers_normal(&self, path: &[u8]) -> bool {
        self.points
            .iter()
            .any(|point| plfsrc::below_point(path, point.as_os_str().as_encoded_bytes()).is_some())
    }

    /// Whether an absolute `path` is a directory above a mount point (an
    /// ancestor of one, not covered by any): such directories are the way
    /// to the mounts, so a program walking down to a file asks about them
    /// (PLFS 2.5 answered `access` on them with success).
    pub fn is_above_mount(&self, path: &Path) -> bool {
        // A normal path is tested as it is, on its bytes, without a
        // normalised copy.
        if plfsrc::is_normal(path) {
            let path = path.as_os_str().as_encoded_bytes();
            return !self.covers_normal(path)
                && self
                    .points
                    .iter()
                    .any(|point| plfsrc::below_point(point.as_os_str().as_encoded_bytes(), path).is_some());
        }
        // What `normalize` returns is normal: the test above, once.
        plfsrc::normalize(path).is_some_and(|normal| self.is_above_mount(&normal))
    }

    /// The mount holding an absolute `path` and the path inside it (`/…`),
    /// or None when no mount point covers it. The mount is built on first use.
    pub fn resolve(&self, path: &Path) -> Result<Option<(Plfs, String)>> {
        let Some((mount, inner)) = self.config.resolve(path) else { return Ok(None) };
        let slot = self
            .config
            .mounts
            .iter()
            .position(|candidate| std::ptr::eq(candidate, mount))
            .and_then(|index| self.built.get(index))
            .expect("the plfsrc's resolve returns one of its own mounts");
        if let Some(plfs) = slot.get() {
            return Ok(Some((plfs.clone(), inner)));
        }
        let _building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(plfs) = slot.get() {
            return Ok(Some((plfs.clone(), inner)));
        }
        let plfs = Plfs::from_config(mount, Options::from_environment(self.config.tuning.clone()))?;
        let _ = slot.set(plfs.clone());
        Ok(Some((plfs, inner)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_the_mount_and_shares_it() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("b0"), dir.path().join("b1"));
        std::fs::create_dir(&first).unwrap();
        std::fs::create_dir(&second).unwrap();
        let text = format!(
            "- mount_point: /mnt/p\n  backends:\n    - location: {}\n- mount_point: /mnt/q\n  backends:\n    - location: {}\n",
            first.display(),
            second.display()
        );
        let table = MountTable::new(plfsrc::parse_str(&text, Path::new("test.plfsrc")).unwrap());
        assert!(table.covers(Path::new("/mnt/p/x")));
        assert!(!table.covers(Path::new("/mnt/px")));
        assert!(table.resolve(Path::new("/elsewhere/f")).unwrap().is_none());
        for above in ["/", "/mnt", "/mnt/", "/mnt/./x/.."] {
            assert!(table.is_above_mount(Path::new(above)), "{above}");
        }
        for not_above in ["/mnt/p", "/mnt/p/deep", "/mn", "/mnt/q", "/mnt/q/a", "/elsewhere", "mnt"] {
            assert!(!table.is_above_mount(Path::new(not_above)), "{not_above}");
        }
        let (q, path) = table.resolve(Path::new("/mnt/q/a/f")).unwrap().unwrap();
        assert_eq!(path, "/a/f");
        let (again, _) = table.resolve(Path::new("/mnt/q/g")).unwrap().unwrap();
        assert!(std::ptr::eq(q.stores()[0].as_ref(), again.stores()[0].as_ref()), "one mount, built once");
        let (p, p_path) = table.resolve(Path::new("/mnt/p/../p/x")).unwrap().unwrap();
        assert_eq!(p_path, "/x");
        assert!(!std::ptr::eq(p.stores()[0].as_ref(), q.stores()[0].as_ref()));
    }
}
