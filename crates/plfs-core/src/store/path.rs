//! A validated path inside one store, so names are never split or joined by hand.

use std::fmt;

use crate::error::{Error, ErrorKind, Result};

/// Longest single component any store must accept (POSIX NAME_MAX).
pub const NAME_MAX_BYTES: usize = 255;

/// A relative path of `/`-separated components, none empty, `.`, `..`, or
/// containing NUL. The empty path is the store's root.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StorePath {
    text: String,
}

impl StorePath {
    pub fn root() -> StorePath {
        StorePath { text: String::new() }
    }

    /// Parses a path; leading, trailing and doubled slashes are tolerated.
    pub fn parse(text: &str) -> Result<StorePath> {
        let mut path = StorePath::root();
        for component in text.split('/').filter(|c| !c.is_empty()) {
            path = path.join(component)?;
        }
        Ok(path)
    }

    /// Appends one component.
    pub fn join(&self, component: &str) -> Result<StorePath> {
        validate_component(component)?;
        let text =
            if self.text.is_empty() { component.to_owned() } else { format!("{}/{}", self.text, component) };
        Ok(StorePath { text })
    }

    pub fn is_root(&self) -> bool {
        self.text.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.text.split('/').filter(|c| !c.is_empty())
    }

    /// The last component, or None for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() { None } else { self.text.rsplit('/').next() }
    }

    /// The containing directory, or None for the root.
    pub fn parent(&self) -> Option<StorePath> {
        if self.is_root() {
            return None;
        }
        let text = match self.text.rfind('/') {
            Some(index) => self.text[..index].to_owned(),
            None => String::new(),
        };
        Some(StorePath { text })
    }

    /// Whether `self` equals `other` or lies beneath it.
    pub fn starts_with(&self, other: &StorePath) -> bool {
        other.is_root()
            || self.text == other.text
            || (self.text.starts_with(&other.text)
                && self.text.as_bytes().get(other.text.len()) == Some(&b'/'))
    }
}

pub fn validate_component(component: &str) -> Result<()> {
    if component.is_empty() || component == "." || component == ".." {
        return Err(Error::invalid(format!("path component {component:?} is not a file name")));
    }
    if component.contains('/') || component.contains('\0') {
        return Err(Error::invalid(format!("path component {component:?} contains '/' or NUL")));
    }
    if component.len() > NAME_MAX_BYTES {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!("path component of {} bytes is longer than {NAME_MAX_BYTES}", component.len()),
        ));
    }
    Ok(())
}

impl fmt::Display for StorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.is_empty() { f.write_str(".") } else { f.write_str(&self.text) }
    }
}

impl fmt::Debug for StorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StorePath({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_normalises_slashes() {
        let path = StorePath::parse("//a/b//c/").unwrap();
        assert_eq!(path.as_str(), "a/b/c");
        assert_eq!(path.file_name(), Some("c"));
        assert_eq!(path.parent().unwrap().as_str(), "a/b");
        assert_eq!(StorePath::parse("a").unwrap().parent().unwrap(), StorePath::root());
        assert!(StorePath::root().parent().is_none());
    }

    #[test]
    fn rejects_dot_components() {
        assert!(StorePath::parse("a/../b").is_err());
        assert!(StorePath::parse("./a").is_err());
        assert!(StorePath::root().join("x\0y").is_err());
        assert!(StorePath::root().join(&"n".repeat(256)).is_err());
    }

    /// A name longer than NAME_MAX is ENAMETOOLONG, as a local file system
    /// answers (it was EINVAL); 255 bytes are a name.
    #[test]
    fn names_longer_than_name_max_are_too_long() {
        let error = StorePath::parse(&format!("d/{}", "n".repeat(256))).unwrap_err();
        assert_eq!((error.kind(), error.errno()), (ErrorKind::NameTooLong, libc::ENAMETOOLONG), "{error}");
        assert!(StorePath::parse(&format!("d/{}", "n".repeat(255))).is_ok());
    }

    #[test]
    fn starts_with_respects_component_boundaries() {
        let ab = StorePath::parse("a/b").unwrap();
        assert!(StorePath::parse("a/b/c").unwrap().starts_with(&ab));
        assert!(!StorePath::parse("a/bc").unwrap().starts_with(&ab));
        assert!(ab.starts_with(&StorePath::root()));
    }
}
