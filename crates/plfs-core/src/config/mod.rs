//! Configuration types: what a mount is made of and the tunables that shape
//! it. [`plfsrc`] turns PLFS 2.x `plfsrc` files into these; the rest of the
//! core only consumes validated values.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::striping::StripingConfig;

pub mod plfsrc;

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

impl Workload {
    /// The workload a plfsrc's `workload:` names, by its name or PLFS
    /// 2.5's (n-1, n-n, 1-n).
    pub fn from_name(name: &str) -> Option<Workload> {
        match name {
            "shared_file" | "n-1" => Some(Workload::SharedFile),
            "file_per_proc" | "n-n" => Some(Workload::FilePerProc),
            "small_file" | "1-n" => Some(Workload::SmallFile),
            _ => None,
        }
    }
}

/// When reads check data against the CRC32C its index record carries
/// (plfsrc `verify_reads:`). A record's CRC covers all its bytes, and a
/// pattern record's covers every block of it, so only a read that holds a
/// whole record or pattern can be checked for free (FORMAT.md §5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyReads {
    /// Check every record (and pattern) a read covers whole; pattern
    /// blocks read in order are checked when the last one is read.
    #[default]
    Whole,
    /// Also read the rest of every record a read covers only in part, and
    /// check it: every byte returned is checked, at the cost of extra reads.
    Always,
    /// Never check on reads (`plfs recover --verify` still does).
    Off,
}

/// Where a backend is. Schemes other than POSIX are recognised so a config
/// naming them gets a clear "not built in" rather than a misread path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BackendLocation {
    Posix(PathBuf),
    Hdfs { host: String, port: u16, path: String },
    S3 { bucket: String, prefix: String, access: S3Access },
}

/// How to reach an S3 bucket. Holds no secret, only where to find one:
/// `credentials_file` names a file with the key id and secret (see
/// `store::s3`); without it the standard `AWS_*` environment variables are
/// used. Written as query parameters of the location
/// (`s3://bucket/prefix?endpoint=http://host:9000&region=eu-west-1`) or as
/// the plfsrc backend keys of the same names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct S3Access {
    /// `http(s)://host:port` of an S3-compatible server; AWS when unset
    /// (or `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// Signing region; `AWS_REGION`, else us-east-1, when unset.
    pub region: Option<String>,
    /// Absolute path of a file holding `aws_access_key_id` and
    /// `aws_secret_access_key` lines.
    pub credentials_file: Option<PathBuf>,
}

impl S3Access {
    /// The query parameter names, in the order `Display` writes them.
    pub const KEYS: [&'static str; 3] = ["endpoint", "region", "credentials_file"];

    /// Sets one setting by its name; the problem text on a bad value.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        if value.is_empty() {
            return Err(format!("{key}: empty value"));
        }
        let taken = match key {
            "endpoint" => {
                if !(value.starts_with("http://") || value.starts_with("https://"))
                    || value.contains(['?', '&', ' '])
                {
                    return Err(format!("endpoint {value:?}: expected http://host:port or https://host"));
                }
                self.endpoint.replace(value.trim_end_matches('/').to_owned()).is_some()
            }
            "region" => {
                if !value.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-') {
                    return Err(format!("region {value:?}: expected a name like us-east-1"));
                }
                self.region.replace(value.to_owned()).is_some()
            }
            "credentials_file" => {
                if !value.starts_with('/') || value.contains(['?', '&']) {
                    return Err(format!("credentials_file {value:?}: expected an absolute path"));
                }
                self.credentials_file.replace(PathBuf::from(value)).is_some()
            }
            other => {
                return Err(format!("unknown setting {other:?} (expected {})", S3Access::KEYS.join(", ")));
            }
        };
        if taken {
            return Err(format!("{key} given twice"));
        }
        Ok(())
    }
}

impl fmt::Display for S3Access {
    /// As query parameters, `?endpoint=…&…`, or nothing when all are unset.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let credentials = self.credentials_file.as_ref().map(|path| path.display().to_string());
        let values = [self.endpoint.clone(), self.region.clone(), credentials];
        let mut separator = '?';
        for (key, value) in S3Access::KEYS.iter().zip(values) {
            if let Some(value) = value {
                write!(f, "{separator}{key}={value}")?;
                separator = '&';
            }
        }
        Ok(())
    }
}

impl BackendLocation {
    /// Parses `/path`, `posix:///path`, `hdfs://host:port/path` or
    /// `s3://bucket/prefix`.
    pub fn parse(text: &str) -> Result<BackendLocation> {
        BackendLocation::parse_detail(text).map_err(Error::invalid)
    }

    /// [`BackendLocation::parse`] with the bare problem text, so the plfsrc
    /// parser can put its own file:line prefix in front of it.
    pub(crate) fn parse_detail(text: &str) -> std::result::Result<BackendLocation, String> {
        if text.starts_with('/') {
            return Ok(BackendLocation::Posix(PathBuf::from(text)));
        }
        if let Some(rest) = text.strip_prefix("posix://") {
            if !rest.starts_with('/') {
                return Err(format!("backend {text:?}: posix:// needs an absolute path (posix:///dir)"));
            }
            return Ok(BackendLocation::Posix(PathBuf::from(rest)));
        }
        if let Some(rest) = text.strip_prefix("hdfs://") {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let (host, port) = authority
                .rsplit_once(':')
                .ok_or_else(|| format!("backend {text:?}: hdfs:// needs host:port"))?;
            let port = port.parse::<u16>().map_err(|_| format!("backend {text:?}: bad port {port:?}"))?;
            if host.is_empty() {
                return Err(format!("backend {text:?}: empty host"));
            }
            return Ok(BackendLocation::Hdfs { host: host.to_owned(), port, path: format!("/{path}") });
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("backend {text:?}: empty bucket"));
            }
            let mut access = S3Access::default();
            for pair in query.split('&').filter(|pair| !pair.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                access.set(key, value).map_err(|problem| format!("backend {text:?}: {problem}"))?;
            }
            return Ok(BackendLocation::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
                access,
            });
        }
        Err(format!(
            "backend {text:?}: unknown location (expected /path, posix:///path, hdfs://host:port/path or s3://bucket/prefix)"
        ))
    }
}

impl fmt::Display for BackendLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendLocation::Posix(path) => write!(f, "posix://{}", path.display()),
            BackendLocation::Hdfs { host, port, path } => write!(f, "hdfs://{host}:{port}{path}"),
            BackendLocation::S3 { bucket, prefix, access } if prefix.is_empty() => {
                write!(f, "s3://{bucket}{access}")
            }
            BackendLocation::S3 { bucket, prefix, access } => write!(f, "s3://{bucket}/{prefix}{access}"),
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
    /// Buffered index bytes per writer before a frame is appended (a
    /// pending pattern counts as the write records it stands for).
    pub index_flush_bytes: usize,
    /// Writers store regular runs of writes as one pattern record.
    pub index_patterns: bool,
    /// The last writer to close a file writes its global index.
    pub flatten_on_close: bool,
    /// Data-log read handles cached per mount (bounds open descriptors).
    pub read_handles_max: usize,
    /// Read-ahead window per data log, so strided reads stream each log.
    pub readahead_bytes: usize,
    /// Create data and index droppings at the first write rather than at open.
    pub lazy_droppings: bool,
    /// Which reads check data CRCs.
    pub verify_reads: VerifyReads,
    /// PLFS `index_buffer_mbs`: MiB of index records a process keeps per
    /// file for a flatten on close under MPI (`plfs_flatten_close=1`), and
    /// the most rank 0 gathers; past it rank 0 reads the index logs.
    pub index_buffer_mbs: u32,
    /// Total small-file read buffer, MiB.
    pub read_buffer_mbs: u32,
    /// Where every close drops a statistics-named file, if anywhere.
    pub global_summary_dir: Option<PathBuf>,
    /// Developer option: never create a hostdir eagerly, so metalinks get
    /// exercised on one node.
    pub test_metalink: bool,
    /// An unlink renames the container away and returns; its pieces are
    /// deleted by a worker thread of the mount (`reclaim.rs`). Off: the
    /// unlink deletes them itself (the simulation, which must replay).
    pub background_reclaim: bool,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            num_hostdirs: 32,
            threadpool_size: 8,
            lazy_stat: true,
            compress_contiguous: true,
            index_flush_bytes: 256 << 10,
            index_patterns: true,
            flatten_on_close: false,
            read_handles_max: 128,
            readahead_bytes: 1 << 20,
            lazy_droppings: true,
            verify_reads: VerifyReads::Whole,
            index_buffer_mbs: 64,
            read_buffer_mbs: 64,
            global_summary_dir: None,
            test_metalink: false,
            background_reclaim: true,
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
    /// Buffer size for buffered (PLFS `glib:`) stores, MiB.
    pub glib_buffer_mbs: u32,
    /// Burst-buffer syncer address; PLFS parsed it but nothing called the syncer.
    pub syncer_ip: Option<String>,
    /// Small-file writers per directory.
    pub max_writers: u32,
    /// Small-file directory cache size.
    pub max_smallfile_containers: u32,
    /// Default layout, pools and placement policy for striped files.
    pub striping: StripingConfig,
}

impl MountConfig {
    /// A mount with PLFS's defaults for everything but its place and backends.
    pub fn new(mount_point: PathBuf, workload: Workload, backends: Vec<BackendConfig>) -> MountConfig {
        MountConfig {
            mount_point,
            workload,
            backends,
            statfs: None,
            glib_buffer_mbs: 16,
            syncer_ip: None,
            max_writers: 4,
            max_smallfile_containers: 32,
            // A plfsrc without `default_layout` gets the progressive layout.
            striping: StripingConfig::mount_default(),
        }
    }
}

/// mlog priorities, most severe first (so `Ord` follows severity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Err,
    Warn,
    Note,
    Info,
    Debug,
}

impl LogLevel {
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Emerg,
        LogLevel::Alert,
        LogLevel::Crit,
        LogLevel::Err,
        LogLevel::Warn,
        LogLevel::Note,
        LogLevel::Info,
        LogLevel::Debug,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Emerg => "EMERG",
            LogLevel::Alert => "ALERT",
            LogLevel::Crit => "CRIT",
            LogLevel::Err => "ERR",
            LogLevel::Warn => "WARN",
            LogLevel::Note => "NOTE",
            LogLevel::Info => "INFO",
            LogLevel::Debug => "DEBUG",
        }
    }

    /// Case-insensitive, as mlog is; `DBUG` is mlog's own four-letter spelling.
    pub fn parse(text: &str) -> Option<LogLevel> {
        if text.eq_ignore_ascii_case("DBUG") {
            return Some(LogLevel::Debug);
        }
        LogLevel::ALL.into_iter().find(|level| level.name().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `mlog_setmasks` item: a level for one facility, or for all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMask {
    pub facility: Option<String>,
    pub level: LogLevel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyslogFacility {
    User,
    /// LOCAL0..=LOCAL7.
    Local(u8),
}

/// Logging settings (plfsrc `mlog_*` keys), with PLFS 2.x defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// Messages at or above this level are logged.
    pub defmask: LogLevel,
    /// Per-facility overrides, applied in order after `defmask`.
    pub setmasks: Vec<LogMask>,
    /// Messages at or above this level also go to stderr.
    pub stderrmask: LogLevel,
    /// Every message goes to stderr.
    pub stderr: bool,
    /// Log file name; `%h`, `%p` and `%t` are left for the logger to expand
    /// when it opens the file, as they differ per process.
    pub file: Option<String>,
    /// In-memory message ring size in bytes; 0 means no ring.
    pub msgbuf_size: usize,
    pub syslog: bool,
    pub syslogfac: SyslogFacility,
    /// UDP log console.
    pub ucon: bool,
    /// Where the FUSE daemon writes a crash log, if anywhere.
    pub fuse_crash_log: Option<PathBuf>,
}

impl Default for LogSettings {
    fn default() -> LogSettings {
        LogSettings {
            defmask: LogLevel::Warn,
            setmasks: Vec::new(),
            stderrmask: LogLevel::Crit,
            stderr: false,
            file: None,
            msgbuf_size: 4096,
            syslog: false,
            syslogfac: SyslogFacility::User,
            ucon: false,
            fuse_crash_log: None,
        }
    }
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
            BackendLocation::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into(),
                access: S3Access::default()
            }
        );
        for bad in ["posix://rel", "hdfs://nn/plfs", "hdfs://nn:x/p", "s3://", "relative", "glib:/x"] {
            assert!(BackendLocation::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locations_display_as_urls() {
        for text in [
            "posix:///data/b0",
            "hdfs://nn:8020/plfs",
            "s3://bucket/a",
            "s3://bucket?endpoint=http://127.0.0.1:9000",
            "s3://bucket/a/b?endpoint=https://s3.example.org&region=eu-west-1&credentials_file=/etc/plfs/s3",
        ] {
            assert_eq!(BackendLocation::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn s3_access_settings_parse_from_the_query() {
        let location =
            BackendLocation::parse("s3://b/p/?credentials_file=/k&endpoint=http://h:9000/").unwrap();
        let access = S3Access {
            endpoint: Some("http://h:9000".into()),
            region: None,
            credentials_file: Some("/k".into()),
        };
        assert_eq!(location, BackendLocation::S3 { bucket: "b".into(), prefix: "p".into(), access });
        let problem = |text: &str| BackendLocation::parse_detail(text).expect_err(text);
        assert_eq!(
            problem("s3://b?endpoint=ftp://h"),
            "backend \"s3://b?endpoint=ftp://h\": endpoint \"ftp://h\": expected http://host:port or https://host"
        );
        assert_eq!(
            problem("s3://b?region=x&region=y"),
            "backend \"s3://b?region=x&region=y\": region given twice"
        );
        assert_eq!(
            problem("s3://b?secret=x"),
            "backend \"s3://b?secret=x\": unknown setting \"secret\" (expected endpoint, region, credentials_file)"
        );
        assert!(problem("s3://b?credentials_file=relative").contains("expected an absolute path"));
        assert!(problem("s3://b?endpoint=").contains("endpoint: empty value"));
    }
}
