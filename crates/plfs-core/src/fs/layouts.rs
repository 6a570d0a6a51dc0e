//! Layouts as users set and see them: a directory's template, a new file's
//! layout before its first write, and the space of each backend that
//! placement and `plfs df` look at.
//!
//! Both kinds of layout are kept as the extended attribute
//! [`LAYOUT_XATTR`], so `setfattr`/`getfattr` through FUSE and the preload
//! work on them like `plfs setstripe`/`getstripe`. Every value written is
//! validated and stored in canonical text (`Layout`'s `Display`). A file's
//! attribute is read when its data path places its first stripe; once the
//! file has data its layout can no longer change.

use std::collections::BTreeMap;

use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::fs::{Plfs, parse_file_path};
use crate::layout::LogKind;
use crate::store::{SpaceInfo, StorePath};
use crate::striping::placement::pool_backends;
use crate::striping::{LAYOUT_XATTR, Layout};
use crate::workload::Found;

/// One backend's capacity, for `plfs df` and placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendUsage {
    /// Index in the mount's backend list.
    pub backend: usize,
    pub url: String,
    pub space: SpaceInfo,
    /// Backends on one file system share their figures: the index of the
    /// first backend of this one's file system, if it is not itself.
    pub same_filesystem_as: Option<usize>,
}

/// A file's data on one backend, for `plfs getstripe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackendData {
    /// Data logs (objects) on the backend.
    pub objects: u64,
    /// Their size on the backend: the data written there plus each log's
    /// small header (docs/FORMAT.md §4).
    pub bytes: u64,
}

impl Plfs {
    /// Sets the layout of a directory (the template files and directories
    /// created below inherit) or of a file that has no data yet.
    pub fn set_layout(&self, path: &str, layout: &Layout) -> Result<()> {
        // Create or replace (`XattrMode::Any`, the default; naming it would
        // make fs import xattr, which imports fs).
        self.set_xattr(path, LAYOUT_XATTR, layout.to_string().as_bytes(), Default::default())
    }

    /// Removes a directory's template (or an empty file's layout), so the
    /// mount default applies again; no error if there was none.
    pub fn clear_layout(&self, path: &str) -> Result<()> {
        match self.remove_xattr(path, LAYOUT_XATTR) {
            Err(error) if error.kind() == ErrorKind::NoAttribute => Ok(()),
            other => other,
        }
    }

    /// The layout set on `path` (a directory's template or a file's own),
    /// or `None` when none is set.
    pub fn layout(&self, path: &str) -> Result<Option<Layout>> {
        match self.get_xattr(path, LAYOUT_XATTR) {
            Ok(value) => parse_stored(path, &value).map(Some),
            Err(error) if error.kind() == ErrorKind::NoAttribute => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The layout a file's data follows: the one set on it before its
    /// first write, else the one it was created with; `None` for a file
    /// created without a layout (one backend per host).
    pub fn file_layout(&self, path: &str) -> Result<Option<Layout>> {
        let logical = parse_file_path(path)?;
        crate::workload::layout_of_file(&self.state, &logical).context(path.to_owned())
    }

    /// The mount's default layout (plfsrc `default_layout`); `None` keeps
    /// the one-backend-per-host placement, as on a mount with one backend.
    pub fn default_layout(&self) -> Option<&Layout> {
        self.state.default_layout()
    }

    /// The backends a component of `pool` may use (all when `None`).
    pub fn pool_backends(&self, pool: Option<&str>) -> Result<Vec<usize>> {
        pool_backends(&self.state.striping, pool, self.state.stores.len())
    }

    /// The layout a file created in directory `dir` would get.
    pub fn layout_for_new_file_in(&self, dir: &str) -> Result<Option<Layout>> {
        let logical = StorePath::parse(dir)?;
        crate::workload::layout_for_new_file(&self.state, &logical).context(dir.to_owned())
    }

    /// Checks a value written to [`LAYOUT_XATTR`] and returns its canonical
    /// text: it must parse, name only this mount's pools, and belong to a
    /// directory or a file without data.
    pub(crate) fn check_layout_value(&self, path: &str, value: &[u8]) -> Result<Vec<u8>> {
        let layout = parse_stored(path, value)?;
        for component in layout.components() {
            pool_backends(&self.state.striping, component.pool.as_deref(), self.state.stores.len())
                .with_context(|| format!("{path}: {LAYOUT_XATTR}"))?;
        }
        let logical = StorePath::parse(path)?;
        if let Found::File(_) = self.found(&logical).context(path.to_owned())?
            && self.stat(path)?.size > 0
        {
            return Err(Error::invalid(format!(
                "{path}: has data; a layout can only be set before the first write"
            )));
        }
        Ok(layout.to_string().into_bytes())
    }

    /// A new directory copies its parent's template, as Lustre's do: moving
    /// or changing the parent later does not change what it inherited.
    pub(crate) fn inherit_layout(&self, path: &str, logical: &StorePath) -> Result<()> {
        let Some(parent) = logical.parent() else { return Ok(()) };
        // The root displays as "."; the façade's paths start with "/".
        let parent_text = if parent.is_root() { "/".to_owned() } else { format!("/{parent}") };
        match self.get_xattr(&parent_text, LAYOUT_XATTR) {
            Ok(value) => self.set_xattr(path, LAYOUT_XATTR, &value, Default::default()),
            Err(error) if error.kind() == ErrorKind::NoAttribute => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Capacity of every backend, in mount order.
    pub fn space_per_backend(&self) -> Result<Vec<BackendUsage>> {
        let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
        self.state
            .stores
            .iter()
            .enumerate()
            .map(|(backend, store)| {
                let space = store.space().with_context(|| format!("backend {backend} ({})", store.url()))?;
                let same_filesystem_as = store.filesystem_id().and_then(|id| {
                    let first = *seen.entry(id).or_insert(backend);
                    (first != backend).then_some(first)
                });
                Ok(BackendUsage { backend, url: store.url().to_owned(), space, same_filesystem_as })
            })
            .collect()
    }

    /// Data objects and bytes of a container file on each backend that
    /// holds any (an empty map for a file with no data yet).
    pub fn data_per_backend(&self, path: &str) -> Result<BTreeMap<usize, BackendData>> {
        let logical = parse_file_path(path)?;
        let inventory = self.inventory(path)?;
        let mut per_backend: BTreeMap<usize, BackendData> = BTreeMap::new();
        for log in inventory.logs.iter().filter(|log| log.has_data) {
            let store = self.state.store(log.backend);
            let data = log.path(&logical, LogKind::Data);
            let size = match store.metadata(&data) {
                Ok(meta) => meta.size,
                // Removed since the listing (a flatten, an unlink): not there.
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(error.context(format!("{path}: {}: {data}", store.url()))),
            };
            let entry = per_backend.entry(log.backend.0).or_default();
            entry.objects += 1;
            entry.bytes += size;
        }
        Ok(per_backend)
    }
}

/// Sums capacity over distinct file systems: backends on one file system
/// (the same `Store::filesystem_id`, e.g. one device) count once, or `df`
/// would show the disk N times over. Block counts are converted to the
/// smallest block size among them so no bytes are rounded away.
pub(crate) fn sum_space(usage: &[BackendUsage]) -> SpaceInfo {
    let distinct: Vec<&SpaceInfo> =
        usage.iter().filter(|usage| usage.same_filesystem_as.is_none()).map(|usage| &usage.space).collect();
    let block_size =
        distinct.iter().map(|space| space.block_size).filter(|size| *size > 0).min().unwrap_or(4096);
    let blocks = |pick: fn(&SpaceInfo) -> u64| -> u64 {
        let bytes: u128 =
            distinct.iter().map(|space| u128::from(pick(space)) * u128::from(space.block_size)).sum();
        u64::try_from(bytes / u128::from(block_size)).unwrap_or(u64::MAX)
    };
    SpaceInfo {
        block_size,
        blocks: blocks(|space| space.blocks),
        blocks_free: blocks(|space| space.blocks_free),
        blocks_available: blocks(|space| space.blocks_available),
        files: distinct.iter().fold(0u64, |sum, space| sum.saturating_add(space.files)),
        files_free: distinct.iter().fold(0u64, |sum, space| sum.saturating_add(space.files_free)),
        name_max: distinct.iter().map(|space| space.name_max).filter(|max| *max > 0).min().unwrap_or(255),
    }
}

fn parse_stored(path: &str, value: &[u8]) -> Result<Layout> {
    let text = std::str::from_utf8(value)
        .map_err(|_| Error::invalid(format!("{path}: {LAYOUT_XATTR}: the value is not UTF-8 text")))?;
    text.parse::<Layout>().with_context(|| format!("{path}: {LAYOUT_XATTR}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::memory_mount;
    use crate::open::OpenFlags;
    use crate::xattr::XattrMode;

    #[test]
    fn directory_templates_are_validated_canonical_and_inherited() {
        let plfs = memory_mount(3);
        plfs.mkdir("/d", 0o755).unwrap();
        assert_eq!(plfs.layout("/d").unwrap(), None);
        plfs.set_xattr("/d", LAYOUT_XATTR, b"-E 1M -c 1 -E -1 -c -1", XattrMode::Any).unwrap();
        assert_eq!(plfs.get_xattr("/d", LAYOUT_XATTR).unwrap(), b"-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M");
        let error = plfs.set_xattr("/d", LAYOUT_XATTR, b"-E 1M -c 0", XattrMode::Any).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(error.to_string().contains("/d: user.plfs.layout: layout: -c 0"), "{error}");
        let error = plfs.set_xattr("/d", LAYOUT_XATTR, b"-c 2 -p ssd", XattrMode::Any).unwrap_err();
        assert!(error.to_string().contains("pool ssd: no such pool"), "{error}");
        // The bad values left the template as it was.
        let template = plfs.layout("/d").unwrap().unwrap();
        assert_eq!(template.to_string(), "-E 1M -c 1 -S 1M -E -1 -c -1 -S 1M");

        plfs.mkdir("/d/sub", 0o755).unwrap();
        assert_eq!(plfs.layout("/d/sub").unwrap().as_ref(), Some(&template));
        // A copy: changing the parent later leaves the child alone.
        plfs.set_layout("/d", &"-c 2".parse().unwrap()).unwrap();
        assert_eq!(plfs.layout("/d/sub").unwrap().as_ref(), Some(&template));
        assert_eq!(plfs.layout_for_new_file_in("/d/sub").unwrap().as_ref(), Some(&template));
        assert_eq!(plfs.layout_for_new_file_in("/").unwrap(), None);
        plfs.clear_layout("/d/sub").unwrap();
        plfs.clear_layout("/d/sub").unwrap();
        assert_eq!(plfs.layout_for_new_file_in("/d/sub").unwrap(), None);
    }

    #[test]
    fn a_file_takes_a_layout_only_before_its_first_write() {
        let plfs = memory_mount(2);
        let file = plfs.open("/f", OpenFlags::RDWR.create(), 0o644, 1).unwrap();
        plfs.set_layout("/f", &"-c 2 -S 64K".parse().unwrap()).unwrap();
        assert_eq!(plfs.layout("/f").unwrap().unwrap().to_string(), "-E -1 -c 2 -S 64K");
        file.write(b"data", 0).unwrap();
        file.close().unwrap();
        let error = plfs.set_layout("/f", &"-c 1".parse().unwrap()).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(error.to_string().contains("/f: has data; a layout can only be set before the first write"));
        assert_eq!(plfs.layout("/f").unwrap().unwrap().to_string(), "-E -1 -c 2 -S 64K");
        let data = plfs.data_per_backend("/f").unwrap();
        let bytes = data.values().map(|data| data.bytes).sum::<u64>();
        assert!(bytes > 4 && bytes <= 4 + crate::format::data_log::HEADER_MAX_BYTES as u64, "{data:?}");
        assert_eq!(data.values().map(|data| data.objects).sum::<u64>(), 1);
    }

    #[test]
    fn space_sums_distinct_file_systems_once() {
        let space = |blocks, free| SpaceInfo {
            block_size: 4096,
            blocks,
            blocks_free: free,
            blocks_available: free,
            files: 10,
            files_free: 5,
            name_max: 255,
        };
        let usage = |backend, space, same_filesystem_as| BackendUsage {
            backend,
            url: String::new(),
            space,
            same_filesystem_as,
        };
        let mut big = space(100, 50);
        big.block_size = 8192;
        let sum = sum_space(&[
            usage(0, space(100, 40), None),
            usage(1, space(100, 40), Some(0)),
            usage(2, big, None),
        ]);
        assert_eq!((sum.block_size, sum.blocks, sum.blocks_free, sum.files), (4096, 300, 140, 20));
        let plfs = memory_mount(3);
        let each = plfs.space_per_backend().unwrap();
        assert_eq!(each.len(), 3);
        assert_eq!(plfs.statfs().unwrap().blocks, each.iter().map(|usage| usage.space.blocks).sum::<u64>());
    }
}
