//! Extended attributes. A file's live in its container (`xattrs/<name>`);
//! a directory's live beside its entries on its canonical backend as
//! reserved names (`.plfs-xattr.<name>`), hidden from listings. Values are
//! whole small files, published atomically, so they work on every store.

use crate::container;
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::format::xattr as format;
/// The largest attribute value a file or directory may hold.
pub use crate::format::xattr::VALUE_MAX_BYTES;
use crate::fs::Plfs;
use crate::layout::{self, ContainerPaths};
use crate::protection::Pieces;
use crate::store::{Protection, StoreExt, StorePath};
use crate::striping::LAYOUT_XATTR;
use crate::workload::Found;

/// How `set_xattr` treats an existing attribute (setxattr(2) flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XattrMode {
    /// Create or replace.
    #[default]
    Any,
    /// Fail with `AlreadyExists` if present (XATTR_CREATE).
    Create,
    /// Fail with `NoAttribute` if absent (XATTR_REPLACE).
    Replace,
}

impl Plfs {
    pub fn set_xattr(&self, path: &str, name: &str, value: &[u8], mode: XattrMode) -> Result<()> {
        if value.len() > VALUE_MAX_BYTES {
            return Err(Error::invalid(format!(
                "{path}: attribute {name}: {} bytes exceeds {VALUE_MAX_BYTES}",
                value.len()
            )));
        }
        // A layout is checked and kept in canonical text (fs/layouts.rs).
        let canonical;
        let value = if name == LAYOUT_XATTR {
            canonical = self.check_layout_value(path, value)?;
            &canonical[..]
        } else {
            value
        };
        let (store, location, protection) = self.xattr_location(path, name, true)?;
        let store = self.state().store(store);
        let encoded = format::encode(value);
        // A file's values are protected like its data; a directory's are
        // beside its entries, as before.
        let protection = protection.unwrap_or(Protection::mode(0o644));
        let result = match mode {
            XattrMode::Create => store.create_new_protected(&location, &encoded, &protection),
            XattrMode::Replace => {
                if !store.exists(&location)? {
                    return Err(Error::new(ErrorKind::NoAttribute, format!("{path}: {name}")));
                }
                store.replace_protected(&location, &encoded, &protection)
            }
            XattrMode::Any => store.replace_protected(&location, &encoded, &protection),
        };
        result.with_context(|| format!("{path}: attribute {name}"))
    }

    pub fn get_xattr(&self, path: &str, name: &str) -> Result<Vec<u8>> {
        let (store, location, _) = self.xattr_location(path, name, false)?;
        let store = self.state().store(store);
        match store.read_all(&location) {
            Ok(bytes) => format::decode(&bytes).with_context(|| format!("{}: {location}", store.url())),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                Err(Error::new(ErrorKind::NoAttribute, format!("{path}: {name}")))
            }
            Err(error) => Err(error.context(format!("{path}: attribute {name}"))),
        }
    }

    pub fn remove_xattr(&self, path: &str, name: &str) -> Result<()> {
        let (store, location, _) = self.xattr_location(path, name, false)?;
        match self.state().store(store).remove_file(&location) {
            Err(error) if error.kind() == ErrorKind::NotFound => {
                Err(Error::new(ErrorKind::NoAttribute, format!("{path}: {name}")))
            }
            other => other.with_context(|| format!("{path}: attribute {name}")),
        }
    }

    /// Attribute names, sorted.
    pub fn list_xattrs(&self, path: &str) -> Result<Vec<String>> {
        let logical = StorePath::parse(path)?;
        let (backend, paths) = container::canonical(self.state(), &logical);
        let store = self.state().store(backend);
        let mut names: Vec<String> = match self.found(&logical).context(path.to_owned())? {
            Found::File(file) if file.access_record().is_none() => return Err(no_flat_xattrs(path)),
            Found::File(_) => match store.list(&paths.xattr_dir()) {
                Ok(entries) => {
                    entries.iter().filter_map(|entry| layout::parse_xattr_component(&entry.name)).collect()
                }
                Err(error) if error.kind() == ErrorKind::NotFound => Vec::new(),
                Err(error) => return Err(error.context(path.to_owned())),
            },
            Found::Directory(_) => store
                .list(&logical)
                .context(path.to_owned())?
                .iter()
                .filter_map(|entry| layout::parse_dir_xattr_name(&entry.name))
                .collect(),
            Found::Symlink(_) => Vec::new(),
        };
        names.sort();
        Ok(names)
    }

    /// Which backend and path hold attribute `name` of `path`, and for a
    /// file the protection of its values.
    fn xattr_location(
        &self,
        path: &str,
        name: &str,
        creating: bool,
    ) -> Result<(crate::placement::BackendId, StorePath, Option<Protection>)> {
        let logical = StorePath::parse(path)?;
        let (backend, paths) = container::canonical(self.state(), &logical);
        let mut protection = None;
        let location = match self.found(&logical).context(path.to_owned())? {
            Found::File(file) => {
                // Attributes live in the container; other files have none.
                let Some(access) = file.access_record() else { return Err(no_flat_xattrs(path)) };
                let pieces = Pieces::of(access);
                if creating {
                    match self.state().store(backend).create_dir_protected(&paths.xattr_dir(), &pieces.dir) {
                        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
                        other => other.context(path.to_owned())?,
                    }
                }
                protection = Some(pieces.file);
                ContainerPaths::new(logical).xattr_dir().join(&layout::xattr_component(name)?)?
            }
            Found::Directory(_) => logical.join(&layout::dir_xattr_name(name)?)?,
            Found::Symlink(_) => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!("{path}: extended attributes of a symbolic link"),
                ));
            }
        };
        Ok((backend, location, protection))
    }
}

/// An n-n file is one plain backend file with no container to keep
/// attributes in; directories of an n-n mount keep theirs as usual.
fn no_flat_xattrs(path: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "{path}: extended attributes of an n-n (file_per_proc) or small_file (1-n) file are not supported"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::memory_mount;
    use crate::open::OpenFlags;

    #[test]
    fn files_and_directories_keep_attributes() {
        let plfs = memory_mount(3);
        plfs.open("/f", OpenFlags::WRONLY.create(), 0o644, 1).unwrap().close().unwrap();
        plfs.mkdir("/d", 0o755).unwrap();
        for path in ["/f", "/d", "/"] {
            assert_eq!(plfs.get_xattr(path, "user.a").unwrap_err().kind(), ErrorKind::NoAttribute);
            plfs.set_xattr(path, "user.a", b"1", XattrMode::Create).unwrap();
            assert_eq!(
                plfs.set_xattr(path, "user.a", b"2", XattrMode::Create).unwrap_err().kind(),
                ErrorKind::AlreadyExists
            );
            plfs.set_xattr(path, "user.a", b"2", XattrMode::Replace).unwrap();
            assert_eq!(
                plfs.set_xattr(path, "user.b/c", b"x", XattrMode::Replace).unwrap_err().kind(),
                ErrorKind::NoAttribute
            );
            plfs.set_xattr(path, "user.b/c", b"", XattrMode::Any).unwrap();
            assert_eq!(plfs.get_xattr(path, "user.a").unwrap(), b"2");
            assert_eq!(plfs.get_xattr(path, "user.b/c").unwrap(), b"");
            assert_eq!(plfs.list_xattrs(path).unwrap(), vec!["user.a".to_string(), "user.b/c".to_string()]);
            plfs.remove_xattr(path, "user.a").unwrap();
            assert_eq!(plfs.remove_xattr(path, "user.a").unwrap_err().kind(), ErrorKind::NoAttribute);
            assert_eq!(plfs.list_xattrs(path).unwrap(), vec!["user.b/c".to_string()]);
        }
        // Attributes are not directory entries, and the file reads the same.
        let names: Vec<String> = plfs.readdir("/d").unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.is_empty(), "{names:?}");
        assert_eq!(plfs.stat("/f").unwrap().size, 0);
        assert!(plfs.set_xattr("/f", "user.big", &vec![0; VALUE_MAX_BYTES + 1], XattrMode::Any).is_err());
    }

    #[test]
    fn attributes_of_a_directory_do_not_block_rmdir() {
        let plfs = memory_mount(2);
        plfs.mkdir("/d", 0o755).unwrap();
        plfs.set_xattr("/d", "user.tag", b"v", XattrMode::Any).unwrap();
        plfs.rmdir("/d").unwrap();
    }
}
