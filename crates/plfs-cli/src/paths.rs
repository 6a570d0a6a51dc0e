//! Turning a path the user typed into either a file inside a plfs mount
//! (reached through the library) or an ordinary file.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use plfs::ErrorKind;
use plfs::attr::FileKind;
use plfs::config::MountConfig;
use plfs::config::plfsrc::{self, PlfsConfig};
use plfs::fs::{Options, Plfs};

/// The config (read on first use) and one open `Plfs` per mount.
pub struct Context {
    explicit: Option<PathBuf>,
    config: OnceCell<Option<PlfsConfig>>,
    mounts: RefCell<HashMap<PathBuf, Plfs>>,
}

/// A file inside a plfs mount.
#[derive(Debug, Clone)]
pub struct PlfsPath {
    pub plfs: Plfs,
    pub mount_point: PathBuf,
    /// Path inside the mount, starting with "/".
    pub path: String,
}

#[derive(Debug, Clone)]
pub enum Location {
    Plfs(PlfsPath),
    Local(PathBuf),
}

impl Context {
    pub fn new(explicit: Option<PathBuf>) -> Context {
        Context { explicit, config: OnceCell::new(), mounts: RefCell::new(HashMap::new()) }
    }

    /// The config named by --config, else the first of $PLFSRC, ~/.plfsrc,
    /// /etc/plfsrc; None when there is none at all. A config that exists
    /// but does not parse is an error, never silently "no mounts".
    pub fn config(&self) -> Result<Option<&PlfsConfig>> {
        if self.config.get().is_none() {
            let loaded = match &self.explicit {
                Some(path) => Some(plfsrc::parse_file(path)?),
                None => match plfsrc::discover_path() {
                    Some(path) => Some(plfsrc::parse_file(&path)?),
                    None => None,
                },
            };
            let _ = self.config.set(loaded);
        }
        Ok(self.config.get().and_then(Option::as_ref))
    }

    pub fn require_config(&self) -> Result<&PlfsConfig> {
        match self.config()? {
            Some(config) => Ok(config),
            // discover() words the "none found" error with every place tried.
            None => match plfsrc::discover() {
                Err(error) => Err(anyhow!("{error} (or use --config FILE)")),
                Ok(_) => bail!("no plfsrc found ({SEARCH_ORDER})"),
            },
        }
    }

    /// The mount's `Plfs`, opened once per process.
    pub fn mount(&self, mount: &MountConfig) -> Result<Plfs> {
        if let Some(plfs) = self.mounts.borrow().get(&mount.mount_point) {
            return Ok(plfs.clone());
        }
        let tuning = self.require_config()?.tuning.clone();
        let plfs = Plfs::from_config(mount, Options::from_environment(tuning))
            .with_context(|| format!("mount {}", mount.mount_point.display()))?;
        self.mounts.borrow_mut().insert(mount.mount_point.clone(), plfs.clone());
        Ok(plfs)
    }

    pub fn resolve(&self, user: &Path) -> Result<Location> {
        let absolute = absolute(user)?;
        let Some(config) = self.config()? else { return Ok(Location::Local(user.to_path_buf())) };
        let Some((mount, path)) = config.resolve(&absolute) else {
            return Ok(Location::Local(user.to_path_buf()));
        };
        let plfs = self.mount(mount)?;
        Ok(Location::Plfs(PlfsPath { plfs, mount_point: mount.mount_point.clone(), path }))
    }

    /// For commands that only make sense on plfs files.
    pub fn resolve_plfs(&self, user: &Path) -> Result<PlfsPath> {
        match self.resolve(user)? {
            Location::Plfs(path) => Ok(path),
            Location::Local(_) => {
                let why = match self.config()? {
                    Some(config) if config.mounts.is_empty() => "the plfsrc names no mounts".to_owned(),
                    Some(config) => {
                        let points: Vec<String> =
                            config.mounts.iter().map(|m| m.mount_point.display().to_string()).collect();
                        format!("mount points: {}", points.join(", "))
                    }
                    None => format!("no plfsrc found: {SEARCH_ORDER}"),
                };
                bail!("{}: not under a plfs mount point ({why})", user.display())
            }
        }
    }
}

const SEARCH_ORDER: &str = "use --config FILE, or create $PLFSRC, ~/.plfsrc or /etc/plfsrc";

impl PlfsPath {
    /// What the user sees: the mount point joined with the inside path.
    pub fn shown(&self) -> PathBuf {
        let mut joined = self.mount_point.clone();
        for component in self.path.split('/').filter(|c| !c.is_empty()) {
            joined.push(component);
        }
        joined
    }

    /// The same mount, another path inside it.
    pub fn sibling(&self, path: String) -> PlfsPath {
        PlfsPath { plfs: self.plfs.clone(), mount_point: self.mount_point.clone(), path }
    }

    /// A child of this directory.
    pub fn child(&self, name: &str) -> PlfsPath {
        let path = if self.path.ends_with('/') {
            format!("{}{name}", self.path)
        } else {
            format!("{}/{name}", self.path)
        };
        self.sibling(path)
    }

    pub fn same_mount(&self, other: &PlfsPath) -> bool {
        self.mount_point == other.mount_point
    }

    /// The core names files by their mount-relative path; the user typed
    /// the full one, so swap it in where the core's message starts with it.
    /// A file that is simply not there gets the plain message; any other
    /// "not found" (a piece missing inside a container) keeps the core's
    /// detail, which names the backend.
    pub fn error(&self, error: plfs::Error) -> anyhow::Error {
        let shown = self.shown();
        let shown = shown.display();
        if error.kind() == ErrorKind::NotFound
            && matches!(self.plfs.stat(&self.path), Err(again) if again.kind() == ErrorKind::NotFound)
        {
            return anyhow!("{shown}: no such file or directory");
        }
        let text = error.to_string();
        match text.strip_prefix(&format!("{}: ", self.path)) {
            Some(rest) => anyhow!("{shown}: {rest}"),
            None => anyhow!("{shown}: {text}"),
        }
    }

    /// Tools that read a container (map, flatten, recover, version) need a
    /// file; the core would report an empty map for a directory.
    pub fn require_file(&self) -> Result<()> {
        let attr = self.plfs.stat(&self.path).map_err(|e| self.error(e))?;
        match attr.kind {
            FileKind::File => Ok(()),
            FileKind::Directory => bail!("{}: is a directory", self.shown().display()),
            FileKind::Symlink => bail!("{}: is a symbolic link", self.shown().display()),
        }
    }
}

/// An absolute, lexically normalised path. Symlinks are not followed: the
/// mount point need not exist, so there is nothing to canonicalise against.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().context("current directory")?.join(path)
    };
    let mut normal = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::Normal(name) => normal.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(normal)
}

/// The last component of a path the user typed, for copying into a directory.
pub fn file_name(path: &Path) -> Result<String> {
    let absolute = absolute(path)?;
    absolute
        .file_name()
        .and_then(|name| name.to_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{}: has no file name", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_lexically() {
        assert_eq!(absolute(Path::new("/a/./b/../c/")).unwrap(), PathBuf::from("/a/c"));
        assert_eq!(absolute(Path::new("/../..")).unwrap(), PathBuf::from("/"));
    }
}
