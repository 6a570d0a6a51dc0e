//! Configuration types: what a mount is made of and the tunables that shape
//! it. Parsing plfsrc files into these lives with the tools (issue [2/7]);
//! the core only consumes validated values.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// The role of a backend in a mount (plfsrc `type:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendRole {
    /// Untyped: holds containers and hostdirs.
    Any,
    /// Holds containers and metadata.
    Canonical,
    /// Holds writers' hostdirs (fast or node-near storage).
    Shadow,
}

/// The access pattern a mount is laid out for (plfsrc `workload:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// N-1: many writers, one logical file, containers.
    SharedFile,
    /// N-N: one plain file per logical file, spread by name.
    FilePerProc,
    /// 1-N: many small files per writer, packed per directory.
    SmallFile,
}

/// Where a backend is. Schemes other than POSIX are recognised so a config
/// naming them gets a clear "not built in" rather than a misread path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BackendLocation {
    Posix(PathBuf),
    Hdfs { host: String, port: u16, path: String },
    S3 { bucket: String, prefix: String },
}

impl BackendLocation {
    /// Parses `/path`, `posix:///path`, `hdfs://host:port/path` or
    /// `s3://bucket/prefix`.
    pub fn parse(text: &str) -> Result<BackendLocation> {
        if text.starts_with('/') {
            return Ok(BackendLocation::Posix(PathBuf::from(text)));
        }
        if let Some(rest) = text.strip_prefix("posix://") {
            if !rest.starts_with('/') {
                return Err(Error::invalid(format!(
                    "backend {text:?}: posix:// needs an absolute path (posix:///dir)"
                )));
            }
            return Ok(BackendLocation::Posix(PathBuf::from(rest)));
        }
        if let Some(rest) = text.strip_prefix("hdfs://") {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let (host, port) = authority
                .rsplit_once(':')
                .ok_or_else(|| Error::invalid(format!("backend {text:?}: hdfs:// needs host:port")))?;
            let port = port
                .parse::<u16>()
                .map_err(|_| Error::invalid(format!("backend {text:?}: bad port {port:?}")))?;
            if host.is_empty() {
                return Err(Error::invalid(format!("backend {text:?}: empty host")));
            }
            return Ok(BackendLocation::Hdfs { host: host.to_owned(), port, path: format!("/{path}") });
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Error::invalid(format!("backend {text:?}: empty bucket")));
            }
            return Ok(BackendLocation::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_end_matches('/').to_owned(),
            });
        }
        Err(Error::invalid(format!(
            "backend {text:?}: unknown location (expected /path, posix:///path, hdfs://host:port/path or s3://bucket/prefix)"
        )))
    }
}

impl fmt::Display for BackendLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendLocation::Posix(path) => write!(f, "posix://{}", path.display()),
            BackendLocation::Hdfs { host, port, path } => write!(f, "hdfs://{host}:{port}{path}"),
            BackendLocation::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            BackendLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConfig {
    pub location: BackendLocation,
    pub role: BackendRole,
}

/// Tunables (plfsrc `global_params`), with PLFS 2.x defaults where PLFS
/// had the same knob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuning {
    /// Hostdir buckets per container (1..=1024).
    pub num_hostdirs: u32,
    /// Threads for parallel reads of many logs.
    pub threadpool_size: usize,
    /// Stat on a file this process has open for write answers from memory.
    pub lazy_stat: bool,
    /// Merge contiguous index records of one writer.
    pub compress_contiguous: bool,
    /// Buffered index bytes per writer before a frame is appended.
    pub index_flush_bytes: usize,
    /// Data-log read handles cached per mount (bounds open descriptors).
    pub read_handles_max: usize,
    /// Read-ahead window per data log, so strided reads stream each log.
    pub readahead_bytes: usize,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            num_hostdirs: 32,
            threadpool_size: 8,
            lazy_stat: true,
            compress_contiguous: true,
            index_flush_bytes: 256 << 10,
            read_handles_max: 128,
            readahead_bytes: 1 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountConfig {
    /// The logical mount point, e.g. /mnt/plfs.
    pub mount_point: PathBuf,
    pub workload: Workload,
    pub backends: Vec<BackendConfig>,
    /// Where statfs is answered from, so it never hangs on a slow backend.
    pub statfs: Option<BackendLocation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_by_scheme() {
        assert_eq!(BackendLocation::parse("/data/b0").unwrap(), BackendLocation::Posix("/data/b0".into()));
        assert_eq!(
            BackendLocation::parse("posix:///data/b0").unwrap(),
            BackendLocation::Posix("/data/b0".into())
        );
        assert_eq!(
            BackendLocation::parse("hdfs://nn:8020/plfs").unwrap(),
            BackendLocation::Hdfs { host: "nn".into(), port: 8020, path: "/plfs".into() }
        );
        assert_eq!(
            BackendLocation::parse("s3://bucket/a/b/").unwrap(),
            BackendLocation::S3 { bucket: "bucket".into(), prefix: "a/b".into() }
        );
        for bad in ["posix://rel", "hdfs://nn/plfs", "hdfs://nn:x/p", "s3://", "relative", "glib:/x"] {
            assert!(BackendLocation::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locations_display_as_urls() {
        for text in ["posix:///data/b0", "hdfs://nn:8020/plfs", "s3://bucket/a"] {
            assert_eq!(BackendLocation::parse(text).unwrap().to_string(), text);
        }
    }
}
