//! The PLFS 2.x `plfsrc` file: a YAML list of sections, each an `include`,
//! the `global_params`, or a mount.
//!
//! ```yaml
//! - include: shared.plfsrc          # relative to the including file
//! - global_params:
//!   num_hostdirs: 101               # same indentation as global_params, as PLFS wrote it
//!   mlog_defmask: INFO
//! - mount_point: /mnt/plfs
//!   workload: shared_file           # n-1[:byterange], file_per_proc|n-n, small_file|1-n
//!   backends:
//!     - location: posix:///lustre/pstore1
//!       type: canonical             # optional; canonical|shadow, all or none
//!     - location: /local/shadow
//!       type: shadow
//! - mount_point: /mnt/plfs-s3
//!   backends:
//!     - location: s3://bucket/plfs      # s3:// backends take three optional keys,
//!       endpoint: http://minio:9000     # also written as ?endpoint=...&region=...
//!       region: us-east-1               # default $AWS_REGION, else us-east-1
//!       credentials_file: /etc/plfs/s3  # aws_access_key_id / aws_secret_access_key
//!                                       # lines; default: the AWS_* environment
//! - mount_point: /mnt/plfs-striped
//!   backends: [/ssd1, /ssd2, /disk1, /disk2]
//!   default_layout: -E 1M -c 1 -E 64M -c 4 -E -1 -c -1   # lfs setstripe syntax, or none
//!                                       # (absent: this progressive layout)
//!   pools:                              # named subsets for -p POOL: backends by
//!     ssd: [0, 1]                       # index (from 0) or by location as listed
//!     disk: [/disk1, /disk2]
//!   stripe_imbalance_pct: 17            # weigh placement by free space past this spread
//!   stripe_reserve: 10G                 # a backend with this little free gets no new stripes
//! ```
//!
//! A secret is never accepted inline: an S3 backend names the file holding
//! it (absolute path), or takes it from the environment.
//!
//! Every problem is an [`ErrorKind::InvalidInput`] error reading
//! `<file>:<line>: <key>: <problem>`, so an admin can go straight to it.
//!
//! Where this parser is stricter than PLFS, it is on purpose:
//! - A second `global_params` section is rejected. PLFS let the last one win
//!   by resetting every global key to its default first, which silently
//!   dropped the earlier section's settings (easy to hit with `include`).
//! - Keys PLFS parsed but forgot in `Valid_Keys` (`max_writers`,
//!   `max_smallfile_containers`, `fuse_crash_log`) are accepted; `mount_type`,
//!   which PLFS listed but never read, is rejected with a note saying so.
//! - A config with no mount at all is rejected, as PLFS did.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, ScanError, YamlData};

use super::{
    BackendConfig, BackendLocation, BackendRole, LogLevel, LogMask, LogSettings, MountConfig, S3Access,
    SyslogFacility, Tuning, VerifyReads, Workload,
};
use crate::error::{Error, ErrorKind, Result};
use crate::striping::Layout;
use crate::striping::placement::pool_backends;
use crate::striping::syntax::{parse_size, valid_pool_name};

/// A whole parsed configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlfsConfig {
    /// From `global_params`.
    pub tuning: Tuning,
    /// The `mlog_*` keys of `global_params`.
    pub logging: LogSettings,
    pub mounts: Vec<MountConfig>,
    /// Every file read, in the order read: the main file, then includes.
    pub files: Vec<PathBuf>,
}

impl PlfsConfig {
    /// The mount holding an absolute logical path (the one mount point that
    /// is a whole-component prefix: they never nest), and the path inside
    /// it: "/" plus the rest, or "/" for the mount point itself. `.` and `..`
    /// are resolved lexically first, so `..` cannot climb out of a mount
    /// unnoticed.
    pub fn resolve(&self, path: &Path) -> Option<(&MountConfig, String)> {
        // A clean path (what the interposer and most C callers pass) is
        // matched on its bytes: normalising rebuilt it component by
        // component, allocating, on every call of every interface.
        if is_normal(path) {
            let bytes = path.as_os_str().as_encoded_bytes();
            return self.mounts.iter().find_map(|mount| {
                let rest = below_point(bytes, mount.mount_point.as_os_str().as_encoded_bytes())?;
                Some((mount, String::from_utf8_lossy(rest).into_owned()))
            });
        }
        let path = normalize(path)?;
        let (mount, rest) = self
            .mounts
            .iter()
            .find_map(|mount| path.strip_prefix(&mount.mount_point).ok().map(|rest| (mount, rest)))?;
        Some((mount, format!("/{}", rest.to_string_lossy())))
    }
}

/// Reads and parses one plfsrc file and everything it includes.
pub fn parse_file(path: &Path) -> Result<PlfsConfig> {
    let text = fs::read_to_string(path).map_err(|error| Error::io(error, path.display().to_string()))?;
    parse_str(&text, path)
}

/// Parses plfsrc text; `origin` names it in errors and anchors relative includes.
pub fn parse_str(text: &str, origin: &Path) -> Result<PlfsConfig> {
    let mut loader = Loader::default();
    loader.load(text, Rc::from(origin), None)?;
    loader.finish(origin)
}

/// Parses the first plfsrc that exists of `$PLFSRC`, `$HOME/.plfsrc` and
/// `/etc/plfsrc`, as PLFS did.
pub fn discover() -> Result<PlfsConfig> {
    let places = search_list();
    match first_existing(places.iter().filter_map(|(_, path)| path.as_deref())) {
        Some(path) => parse_file(&path),
        None => Err(none_found(places.into_iter().map(|(label, _)| label).collect())),
    }
}

/// The file [`discover`] would parse, if any.
pub fn discover_path() -> Option<PathBuf> {
    first_existing(search_list().iter().filter_map(|(_, path)| path.as_deref()))
}

/// [`discover`] over an explicit candidate list, for tools and tests that
/// must not depend on the caller's environment.
pub fn discover_from(candidates: &[PathBuf]) -> Result<PlfsConfig> {
    match first_existing(candidates.iter().map(PathBuf::as_path)) {
        Some(path) => parse_file(&path),
        None => Err(none_found(candidates.iter().map(|path| path.display().to_string()).collect())),
    }
}

/// Each place discover looks, labelled so an unset variable shows up in the
/// "none found" error rather than silently shortening the list.
fn search_list() -> Vec<(String, Option<PathBuf>)> {
    search_list_from(std::env::var_os("PLFSRC"), std::env::var_os("HOME"))
}

fn search_list_from(plfsrc: Option<OsString>, home: Option<OsString>) -> Vec<(String, Option<PathBuf>)> {
    let set = |value: Option<OsString>| value.filter(|value| !value.is_empty()).map(PathBuf::from);
    let plfsrc = set(plfsrc);
    let home = set(home).map(|home| home.join(".plfsrc"));
    vec![
        (plfsrc.as_ref().map_or("$PLFSRC (not set)".to_owned(), |p| p.display().to_string()), plfsrc),
        (home.as_ref().map_or("$HOME/.plfsrc ($HOME not set)".to_owned(), |p| p.display().to_string()), home),
        ("/etc/plfsrc".to_owned(), Some(PathBuf::from("/etc/plfsrc"))),
    ]
}

fn first_existing<'a>(mut candidates: impl Iterator<Item = &'a Path>) -> Option<PathBuf> {
    candidates.find(|path| path.exists()).map(Path::to_path_buf)
}

fn none_found(tried: Vec<String>) -> Error {
    Error::new(ErrorKind::NotFound, format!("no plfsrc found (tried {})", tried.join(", ")))
}

/// Whether `path` is absolute and already what `normalize` makes of it:
/// no empty, "." or ".." component and no trailing slash.
pub(crate) fn is_normal(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    bytes == b"/"
        || bytes.first() == Some(&b'/')
            && bytes[1..].split(|&byte| byte == b'/').all(|part| !matches!(part, b"" | b"." | b".."))
}

/// The path inside the mount at normalised `point` of normalised `path`
/// ("/" for the point itself), or None when `path` is not at or below it.
pub(crate) fn below_point<'a>(path: &'a [u8], point: &[u8]) -> Option<&'a [u8]> {
    if point == b"/" {
        return Some(path);
    }
    match path.strip_prefix(point)? {
        [] => Some(b"/"),
        rest if rest[0] == b'/' => Some(rest),
        _ => None,
    }
}

/// Lexical normalization of an absolute path; `None` for a relative one.
pub(crate) fn normalize(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// Where a key was written: the file and the 1-based line.
#[derive(Debug, Clone)]
struct Site {
    file: Rc<Path>,
    line: usize,
}

impl Site {
    fn of(file: &Rc<Path>, node: &MarkedYaml<'_>) -> Site {
        Site { file: file.clone(), line: node.span.start.line() }
    }

    fn error(&self, key: &str, problem: impl fmt::Display) -> Error {
        Error::invalid(format!("{self}: {key}: {problem}"))
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One `key: value` of a section, with where the key was written.
struct Entry<'n, 'y> {
    key: &'n str,
    site: Site,
    value: &'n MarkedYaml<'y>,
}

impl Entry<'_, '_> {
    fn error(&self, problem: impl fmt::Display) -> Error {
        self.site.error(self.key, problem)
    }

    fn expected(&self, what: impl fmt::Display) -> Error {
        self.error(format!("expected {what}, got {}", describe(self.value)))
    }

    fn text(&self, what: &str) -> Result<String> {
        match &self.value.data {
            YamlData::Value(Scalar::String(text)) if !text.is_empty() => Ok(text.to_string()),
            YamlData::Value(Scalar::Integer(number)) => Ok(number.to_string()),
            _ => Err(self.expected(what)),
        }
    }

    fn number<T: TryFrom<u64>>(&self, min: u64, max: u64) -> Result<T> {
        let what = if max == u64::MAX {
            format!("an integer >= {min}")
        } else {
            format!("an integer from {min} to {max}")
        };
        scalar_text(self.value)
            .and_then(|text| text.parse::<u64>().ok())
            .filter(|value| (min..=max).contains(value))
            .and_then(|value| T::try_from(value).ok())
            .ok_or_else(|| self.expected(what))
    }

    /// PLFS wrote booleans as 0/1; YAML users write true/false. Both work.
    fn flag(&self) -> Result<bool> {
        match scalar_text(self.value).map(|text| text.to_ascii_lowercase()).as_deref() {
            Some("1" | "true") => Ok(true),
            Some("0" | "false") => Ok(false),
            _ => Err(self.expected("0, 1, true or false")),
        }
    }

    fn level(&self) -> Result<LogLevel> {
        scalar_text(self.value).and_then(|text| LogLevel::parse(&text)).ok_or_else(|| self.expected(LEVELS))
    }

    fn absolute(&self) -> Result<PathBuf> {
        match scalar_text(self.value) {
            Some(text) if text.starts_with('/') => Ok(PathBuf::from(text)),
            _ => Err(self.expected("an absolute path (starting with /)")),
        }
    }

    fn location(&self) -> Result<BackendLocation> {
        let text = self.text("a backend location such as /path or posix:///path")?;
        if let Some(scheme) = UNSUPPORTED_SCHEMES.iter().find(|scheme| text.starts_with(**scheme)) {
            return Err(self.error(format!(
                "backend type {scheme} is not supported by this plfs \
                 (use /path, posix:///path, hdfs://host:port/path or s3://bucket/prefix)"
            )));
        }
        BackendLocation::parse_detail(&text).map_err(|problem| self.error(problem))
    }
}

/// PLFS IOStores this plfs does not have; named so a config using one gets a
/// clear refusal rather than "unknown location".
const UNSUPPORTED_SCHEMES: [&str; 3] = ["glib:", "pvfs://", "iofsl:"];

const LEVELS: &str = "one of EMERG, ALERT, CRIT, ERR, WARN, NOTE, INFO, DEBUG";

const GLOBAL_KEYS: [&str; 25] = [
    "num_hostdirs",
    "threadpool_size",
    "lazy_stat",
    "lazy_droppings",
    "compress_contiguous",
    "index_buffer_mbs",
    "read_buffer_mbs",
    "global_summary_dir",
    "test_metalink",
    "index_flush_kib",
    "index_patterns",
    "flatten_on_close",
    "read_handles_max",
    "readahead_kib",
    "verify_reads",
    "mlog_defmask",
    "mlog_setmasks",
    "mlog_stderrmask",
    "mlog_stderr",
    "mlog_file",
    "mlog_msgbuf_size",
    "mlog_syslog",
    "mlog_syslogfac",
    "mlog_ucon",
    "fuse_crash_log",
];

const MOUNT_KEYS: [&str; 12] = [
    "mount_point",
    "workload",
    "backends",
    "statfs",
    "glib_buffer_mbs",
    "syncer_ip",
    "max_writers",
    "max_smallfile_containers",
    "default_layout",
    "pools",
    "stripe_imbalance_pct",
    "stripe_reserve",
];

fn scalar_text(node: &MarkedYaml<'_>) -> Option<String> {
    match &node.data {
        YamlData::Value(Scalar::String(text)) => Some(text.to_string()),
        YamlData::Value(Scalar::Integer(number)) => Some(number.to_string()),
        YamlData::Value(Scalar::Boolean(flag)) => Some(flag.to_string()),
        YamlData::Value(Scalar::FloatingPoint(number)) => Some(number.to_string()),
        _ => None,
    }
}

/// How a value reads in "expected X, got Y".
fn describe(node: &MarkedYaml<'_>) -> String {
    match &node.data {
        YamlData::Value(Scalar::Null) => "nothing".to_owned(),
        YamlData::Value(Scalar::String(text)) if text.is_empty() => "an empty string".to_owned(),
        YamlData::Sequence(_) => "a list".to_owned(),
        YamlData::Mapping(_) => "a mapping".to_owned(),
        _ => scalar_text(node).unwrap_or_else(|| "an unreadable value".to_owned()),
    }
}

/// The key/value pairs of a mapping node, in file order; `what` names the
/// node in the error if it is not a mapping.
fn entries<'n, 'y>(
    node: &'n MarkedYaml<'y>,
    file: &Rc<Path>,
    what: &str,
    expected: &str,
) -> Result<Vec<Entry<'n, 'y>>> {
    let YamlData::Mapping(map) = &node.data else {
        return Err(Site::of(file, node).error(what, format!("expected {expected}, got {}", describe(node))));
    };
    map.iter()
        .map(|(key, value)| {
            let site = Site::of(file, key);
            match &key.data {
                YamlData::Value(Scalar::String(name)) => Ok(Entry { key: name.as_ref(), site, value }),
                _ => Err(site.error(what, format!("expected a key name, got {}", describe(key)))),
            }
        })
        .collect()
}

fn syntax_error(error: &ScanError, text: &str, file: &Path) -> Error {
    let mark = error.marker();
    let site = format!("{}:{}", file.display(), mark.line());
    if error.info() == "duplicated key in mapping" {
        let key: String = text.chars().skip(mark.index()).take_while(|c| *c != ':' && *c != '\n').collect();
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        return Error::invalid(format!("{site}: {key}: given twice in the same section"));
    }
    Error::invalid(format!("{site}: yaml: {} at column {}", error.info(), mark.col() + 1))
}

enum Section {
    Include,
    Global,
    Mount,
}

/// A mount being read, with the sites later checks need.
struct MountDraft {
    mount: MountConfig,
    point: Option<Site>,
    backends: Option<(Vec<BackendEntry>, Site)>,
    /// Pools as written; resolved to backend indexes once the backends are known.
    pools: Vec<PoolDraft>,
    /// Where `default_layout` was written, to name it if it uses an unknown pool.
    layout: Option<Site>,
}

/// One `pools:` entry: its name and members as written.
struct PoolDraft {
    name: String,
    site: Site,
    members: Vec<(PoolMember, Site)>,
}

/// A pool member: a backend's index in the mount's list, or its location.
enum PoolMember {
    Index(usize),
    Location(BackendLocation),
}

struct BackendEntry {
    config: BackendConfig,
    site: Site,
    key: &'static str,
}

/// Parsing state across the main file and its includes.
#[derive(Default)]
struct Loader {
    files: Vec<PathBuf>,
    /// Identity of every file read, with the include that read it (`None`
    /// for the main file), so a repeat or a cycle names the first read.
    read: HashMap<PathBuf, Option<Site>>,
    globals: Option<Site>,
    tuning: Tuning,
    logging: LogSettings,
    mounts: Vec<(MountConfig, Site)>,
    backends: HashMap<BackendLocation, Site>,
    /// Every POSIX backend directory (lexically normalized), where it was
    /// written and under which key, for the checks against mount points.
    directories: Vec<(PathBuf, Site, &'static str)>,
}

impl Loader {
    fn load(&mut self, text: &str, file: Rc<Path>, from: Option<&Site>) -> Result<()> {
        self.register(&file, from)?;
        let documents = MarkedYaml::load_from_str(text).map_err(|error| syntax_error(&error, text, &file))?;
        for document in &documents {
            self.document(document, &file)?;
        }
        Ok(())
    }

    fn register(&mut self, file: &Rc<Path>, from: Option<&Site>) -> Result<()> {
        let identity =
            fs::canonicalize(file).or_else(|_| std::path::absolute(file)).unwrap_or(file.to_path_buf());
        if let (Some(first), Some(from)) = (self.read.get(&identity), from) {
            let first = first
                .as_ref()
                .map_or("it is the main file".to_owned(), |site| format!("first included at {site}"));
            return Err(from.error(
                "include",
                format!(
                    "{} was already read ({first}); a file may be read only once, so no repeats or cycles",
                    file.display()
                ),
            ));
        }
        self.read.insert(identity, from.cloned());
        self.files.push(file.to_path_buf());
        Ok(())
    }

    fn document(&mut self, document: &MarkedYaml<'_>, file: &Rc<Path>) -> Result<()> {
        match &document.data {
            YamlData::Sequence(sections) => {
                sections.iter().try_for_each(|section| self.section(section, file))
            }
            YamlData::Value(Scalar::Null) | YamlData::BadValue => Ok(()),
            _ => Err(Site::of(file, document).error(
                "plfsrc",
                format!(
                    "expected a list of sections (- include, - global_params, - mount_point), got {}",
                    describe(document)
                ),
            )),
        }
    }

    fn section(&mut self, node: &MarkedYaml<'_>, file: &Rc<Path>) -> Result<()> {
        let expected = "a section (a mapping with include, global_params or mount_point)";
        let entries = entries(node, file, "plfsrc", expected)?;
        let Some(first) = entries.first() else {
            return Err(
                Site::of(file, node).error("plfsrc", format!("expected {expected}, got an empty mapping"))
            );
        };
        match classify(&entries)? {
            Section::Include => self.include(&entries),
            Section::Global => self.global(&entries, file, first.site.clone()),
            Section::Mount => self.mount(&entries, file, first.site.clone()),
        }
    }

    fn include(&mut self, entries: &[Entry<'_, '_>]) -> Result<()> {
        if let Some(entry) = entries.iter().find(|entry| entry.key != "include") {
            return Err(entry.error("unknown key in an include section (valid keys: include)"));
        }
        for entry in entries {
            let name = PathBuf::from(entry.text("a file name")?);
            let target = entry.site.file.parent().map_or(name.clone(), |dir| dir.join(&name));
            let text = fs::read_to_string(&target)
                .map_err(|error| entry.error(format!("cannot read {}: {error}", target.display())))?;
            self.load(&text, Rc::from(target.as_path()), Some(&entry.site))?;
        }
        Ok(())
    }

    fn global(&mut self, entries: &[Entry<'_, '_>], file: &Rc<Path>, site: Site) -> Result<()> {
        if let Some(first) = &self.globals {
            return Err(site.error(
                "global_params",
                format!("a second global_params section (the first is at {first}); merge them into one"),
            ));
        }
        self.globals = Some(site);
        let mut seen = HashMap::new();
        for entry in entries {
            if entry.key != "global_params" {
                self.apply_global(entry, &mut seen)?;
                continue;
            }
            for inner in nested_globals(entry, file)? {
                self.apply_global(&inner, &mut seen)?;
            }
        }
        Ok(())
    }

    /// `seen` catches a key given both beside and inside `global_params:`,
    /// which YAML's own duplicate check cannot see.
    fn apply_global(&mut self, entry: &Entry<'_, '_>, seen: &mut HashMap<String, Site>) -> Result<()> {
        if let Some(before) = seen.insert(entry.key.to_owned(), entry.site.clone()) {
            return Err(entry.error(format!("given twice in global_params (also at {before})")));
        }
        if apply_tuning(&mut self.tuning, entry)? || apply_logging(&mut self.logging, entry)? {
            return Ok(());
        }
        Err(entry.error(format!("unknown key in global_params (valid keys: {})", GLOBAL_KEYS.join(", "))))
    }

    fn mount(&mut self, entries: &[Entry<'_, '_>], file: &Rc<Path>, site: Site) -> Result<()> {
        let mut draft = MountDraft {
            mount: MountConfig::new(PathBuf::new(), Workload::SharedFile, Vec::new()),
            point: None,
            backends: None,
            pools: Vec::new(),
            layout: None,
        };
        for entry in entries {
            apply_mount(&mut draft, entry, file)?;
        }
        self.add_mount(draft, site)
    }

    fn add_mount(&mut self, draft: MountDraft, section: Site) -> Result<()> {
        let MountDraft { mut mount, point, backends, pools, layout } = draft;
        let Some(point) = point else {
            return Err(section.error("mount_point", "missing: every mount section needs one"));
        };
        let name = mount.mount_point.display().to_string();
        let Some((backends, backends_site)) = backends else {
            return Err(point.error("backends", format!("missing: mount {name} needs a backends list")));
        };
        check_roles(&backends, &backends_site)?;
        mount.striping.pools = resolve_pools(pools, &backends)?;
        check_layout_pools(&mount, layout.as_ref())?;
        if let Some((_, first)) = self.mounts.iter().find(|(other, _)| other.mount_point == mount.mount_point)
        {
            return Err(point.error("mount_point", format!("{name} is already a mount point (at {first})")));
        }
        self.claim(&backends)?;
        mount.backends = backends.into_iter().map(|backend| backend.config).collect();
        self.mounts.push((mount, point));
        Ok(())
    }

    /// PLFS forbade listing one backend twice anywhere: two mounts (or one
    /// mount twice) writing the same containers would corrupt each other.
    fn claim(&mut self, backends: &[BackendEntry]) -> Result<()> {
        for backend in backends {
            let location = &backend.config.location;
            if let Some(first) = self.backends.get(location) {
                return Err(backend.site.error(
                    backend.key,
                    format!(
                        "backend {location} is already listed at {first}; a backend may appear only once"
                    ),
                ));
            }
            self.backends.insert(location.clone(), backend.site.clone());
            if let BackendLocation::Posix(directory) = location
                && let Some(directory) = normalize(directory)
            {
                self.directories.push((directory, backend.site.clone(), backend.key));
            }
        }
        Ok(())
    }

    /// A mount point inside another, or a backend at, inside or around a
    /// mount point, makes plfs call into its own mount: the daemon waits on
    /// a request only it could answer, and `stat MNT` hangs unkillably.
    /// Compared lexically (a symbolic link can still hide such a loop).
    fn check_overlaps(&self) -> Result<()> {
        for (index, (mount, site)) in self.mounts.iter().enumerate() {
            let point = &mount.mount_point;
            for (other, first) in &self.mounts[..index] {
                let other = &other.mount_point;
                if point.starts_with(other) || other.starts_with(point) {
                    return Err(site.error(
                        "mount_point",
                        format!(
                            "{} and the mount point {} (at {first}) contain one another; mount points may not nest",
                            point.display(),
                            other.display()
                        ),
                    ));
                }
            }
        }
        for (directory, site, key) in &self.directories {
            for (mount, point_site) in &self.mounts {
                let point = &mount.mount_point;
                let problem = if directory.starts_with(point) {
                    "is inside the mount point"
                } else if point.starts_with(directory) {
                    "contains the mount point"
                } else {
                    continue;
                };
                return Err(site.error(
                    key,
                    format!(
                        "backend {} {problem} {} (at {point_site}); plfs would call into its own mount and hang",
                        directory.display(),
                        point.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn finish(self, origin: &Path) -> Result<PlfsConfig> {
        if self.mounts.is_empty() {
            return Err(Error::invalid(format!(
                "{}:1: mount_point: no mount points defined (add a - mount_point: section)",
                origin.display()
            )));
        }
        self.check_overlaps()?;
        Ok(PlfsConfig {
            tuning: self.tuning,
            logging: self.logging,
            mounts: self.mounts.into_iter().map(|(mount, _)| mount).collect(),
            files: self.files,
        })
    }
}

/// Which kind of section a list item is, by the key that starts it; a
/// mount missing its mount_point is still a mount so the error says so.
fn classify(entries: &[Entry<'_, '_>]) -> Result<Section> {
    let has = |key: &str| entries.iter().any(|entry| entry.key == key);
    if has("include") {
        return Ok(Section::Include);
    }
    if has("global_params") {
        return Ok(Section::Global);
    }
    match entries.first() {
        Some(first) if !entries.iter().any(|entry| MOUNT_KEYS.contains(&entry.key)) => {
            Err(first.error("unknown section (a section starts with include, global_params or mount_point)"))
        }
        _ => Ok(Section::Mount),
    }
}

/// `global_params:` is either empty, with its keys beside it at the same
/// indentation (how PLFS files are written), or a mapping of them.
fn nested_globals<'n, 'y>(entry: &Entry<'n, 'y>, file: &Rc<Path>) -> Result<Vec<Entry<'n, 'y>>> {
    match &entry.value.data {
        YamlData::Value(Scalar::Null) => Ok(Vec::new()),
        YamlData::Mapping(_) => entries(entry.value, file, "global_params", "a mapping of global keys"),
        _ => Err(entry.expected("nothing (keys follow at the same indentation) or a mapping of global keys")),
    }
}

/// Sets a `Tuning` key; `false` if the key is not one of them.
fn apply_tuning(tuning: &mut Tuning, entry: &Entry<'_, '_>) -> Result<bool> {
    const MIB: u64 = u32::MAX as u64;
    match entry.key {
        "num_hostdirs" => tuning.num_hostdirs = entry.number(1, 1024)?,
        "threadpool_size" => tuning.threadpool_size = entry.number(1, 1024)?,
        "lazy_stat" => tuning.lazy_stat = entry.flag()?,
        "lazy_droppings" => tuning.lazy_droppings = entry.flag()?,
        "compress_contiguous" => tuning.compress_contiguous = entry.flag()?,
        "index_buffer_mbs" => tuning.index_buffer_mbs = entry.number(0, MIB)?,
        "read_buffer_mbs" => tuning.read_buffer_mbs = entry.number(0, MIB)?,
        "global_summary_dir" => tuning.global_summary_dir = Some(entry.absolute()?),
        "test_metalink" => tuning.test_metalink = entry.flag()?,
        "index_flush_kib" => tuning.index_flush_bytes = entry.number::<usize>(1, 1 << 20)? << 10,
        "index_patterns" => tuning.index_patterns = entry.flag()?,
        "flatten_on_close" => tuning.flatten_on_close = entry.flag()?,
        "read_handles_max" => tuning.read_handles_max = entry.number(1, 1 << 16)?,
        "readahead_kib" => tuning.readahead_bytes = entry.number::<usize>(4, 1 << 20)? << 10,
        "verify_reads" => tuning.verify_reads = verify_reads(entry)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn verify_reads(entry: &Entry<'_, '_>) -> Result<VerifyReads> {
    match scalar_text(entry.value).map(|text| text.to_ascii_lowercase()).as_deref() {
        Some("whole") => Ok(VerifyReads::Whole),
        Some("always") => Ok(VerifyReads::Always),
        Some("off") => Ok(VerifyReads::Off),
        _ => Err(entry.expected("whole, always or off")),
    }
}

/// Sets a `LogSettings` key; `false` if the key is not one of them.
fn apply_logging(logging: &mut LogSettings, entry: &Entry<'_, '_>) -> Result<bool> {
    match entry.key {
        "mlog_defmask" => logging.defmask = entry.level()?,
        "mlog_setmasks" => logging.setmasks = setmasks(entry)?,
        "mlog_stderrmask" => logging.stderrmask = entry.level()?,
        "mlog_stderr" => logging.stderr = entry.flag()?,
        "mlog_file" => logging.file = Some(entry.text("a file name (%h, %p and %t are expanded)")?),
        "mlog_msgbuf_size" => logging.msgbuf_size = msgbuf_size(entry)?,
        "mlog_syslog" => logging.syslog = entry.flag()?,
        "mlog_syslogfac" => logging.syslogfac = syslog_facility(entry)?,
        "mlog_ucon" => logging.ucon = entry.flag()?,
        "fuse_crash_log" => logging.fuse_crash_log = Some(entry.absolute()?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// mlog treats 0 as "no ring buffer" and anything else below 256 as an error.
fn msgbuf_size(entry: &Entry<'_, '_>) -> Result<usize> {
    match entry.number::<usize>(0, u32::MAX.into()) {
        Ok(size) if size == 0 || size >= 256 => Ok(size),
        _ => Err(entry.expected("0 (no buffer) or a size in bytes >= 256")),
    }
}

fn syslog_facility(entry: &Entry<'_, '_>) -> Result<SyslogFacility> {
    let text = scalar_text(entry.value).unwrap_or_default().to_ascii_uppercase();
    match text.strip_prefix("LOCAL").map(str::as_bytes) {
        Some([digit @ b'0'..=b'7']) => Ok(SyslogFacility::Local(digit - b'0')),
        _ => Err(entry.expected("LOCAL0 to LOCAL7")),
    }
}

/// `INFO,index=DEBUG`: a bare level applies to every facility. PLFS also
/// allowed spaces as separators.
fn setmasks(entry: &Entry<'_, '_>) -> Result<Vec<LogMask>> {
    let text = entry.text("LEVEL or facility=LEVEL items separated by commas")?;
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (facility, level) = match item.split_once('=') {
                Some((facility, level)) => (Some(facility.to_owned()), level),
                None => (None, item),
            };
            let level = LogLevel::parse(level)
                .ok_or_else(|| entry.error(format!("bad level {level:?} in {item:?} (expected {LEVELS})")))?;
            Ok(LogMask { facility, level })
        })
        .collect()
}

fn apply_mount(draft: &mut MountDraft, entry: &Entry<'_, '_>, file: &Rc<Path>) -> Result<()> {
    const MAX: u64 = u32::MAX as u64;
    let mount = &mut draft.mount;
    match entry.key {
        "mount_point" => {
            mount.mount_point = mount_point(entry)?;
            draft.point = Some(entry.site.clone());
        }
        "workload" => mount.workload = workload(entry)?,
        "backends" => draft.backends = Some((backend_list(entry, file)?, entry.site.clone())),
        "statfs" => mount.statfs = Some(entry.location()?),
        "glib_buffer_mbs" => mount.glib_buffer_mbs = entry.number(0, MAX)?,
        "syncer_ip" => mount.syncer_ip = Some(entry.text("an address")?),
        "max_writers" => mount.max_writers = entry.number(1, MAX)?,
        "max_smallfile_containers" => mount.max_smallfile_containers = entry.number(1, MAX)?,
        "default_layout" => {
            mount.striping.default_layout = default_layout(entry)?;
            draft.layout = Some(entry.site.clone());
        }
        "pools" => draft.pools = pool_list(entry, file)?,
        "stripe_imbalance_pct" => mount.striping.imbalance_pct = entry.number(0, 100)?,
        "stripe_reserve" => {
            mount.striping.reserve_bytes = scalar_text(entry.value)
                .and_then(|text| parse_size(&text))
                .ok_or_else(|| entry.expected("a size in bytes, or with a K, M, G or T suffix"))?;
        }
        "mount_type" => return Err(entry.error("PLFS listed this key but never used it; remove it")),
        _ => {
            let valid = MOUNT_KEYS.join(", ");
            return Err(entry.error(format!("unknown key in a mount section (valid keys: {valid})")));
        }
    }
    Ok(())
}

/// Normalized so `/mnt/plfs/` and `/mnt//plfs` are one mount point; `..` is
/// refused rather than resolved, as it is surely a mistake here.
fn mount_point(entry: &Entry<'_, '_>) -> Result<PathBuf> {
    let text = scalar_text(entry.value).unwrap_or_default();
    let path = Path::new(&text);
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(entry.expected("an absolute path without .. components"));
    }
    let point = normalize(path).ok_or_else(|| entry.expected("an absolute path"))?;
    if point == Path::new("/") {
        return Err(entry.error(
            "/ cannot be a mount point: the mount would cover the whole system, its backends included",
        ));
    }
    Ok(point)
}

fn workload(entry: &Entry<'_, '_>) -> Result<Workload> {
    let text = scalar_text(entry.value).unwrap_or_default();
    let (name, index) =
        text.split_once(':').map_or((text.as_str(), None), |(name, index)| (name, Some(index)));
    // Only shared_file has an index type to name.
    let Some(workload) =
        Workload::from_name(name).filter(|workload| index.is_none() || *workload == Workload::SharedFile)
    else {
        return Err(entry.expected("shared_file (n-1), file_per_proc (n-n) or small_file (1-n)"));
    };
    match index {
        None | Some("byterange") => Ok(workload),
        Some(other) => Err(entry.error(format!("index type {other:?} is not supported (only byterange)"))),
    }
}

/// `none` keeps the one-backend-per-host placement; anything else is a
/// layout in `lfs setstripe` syntax.
fn default_layout(entry: &Entry<'_, '_>) -> Result<Option<Layout>> {
    let text = entry.text("a layout such as -E 1M -c 1 -E -1 -c -1, or none")?;
    if text.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    text.parse::<Layout>().map(Some).map_err(|error| entry.error(error.message()))
}

/// `pools:` is a mapping of pool names to lists of backends.
fn pool_list(entry: &Entry<'_, '_>, file: &Rc<Path>) -> Result<Vec<PoolDraft>> {
    let pools = entries(entry.value, file, "pools", "a mapping of pool names to lists of backends")?;
    pools
        .iter()
        .map(|pool| {
            if !valid_pool_name(pool.key) {
                return Err(pool.error("a pool name is letters, digits, '_', '-' and '.'"));
            }
            let YamlData::Sequence(items) = &pool.value.data else {
                return Err(pool.expected("a list of backends (indexes from 0, or locations)"));
            };
            if items.is_empty() {
                return Err(pool.error("empty list: a pool needs at least one backend"));
            }
            let members = items
                .iter()
                .map(|item| {
                    let member = Entry { key: pool.key, site: Site::of(file, item), value: item };
                    let parsed = match &item.data {
                        YamlData::Value(Scalar::Integer(index)) => usize::try_from(*index)
                            .map(PoolMember::Index)
                            .map_err(|_| member.expected("a backend index from 0, or a location"))?,
                        _ => PoolMember::Location(member.location()?),
                    };
                    Ok((parsed, member.site))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(PoolDraft { name: pool.key.to_owned(), site: pool.site.clone(), members })
        })
        .collect()
}

/// Each pool's members as indexes into the mount's backends, each once.
fn resolve_pools(pools: Vec<PoolDraft>, backends: &[BackendEntry]) -> Result<BTreeMap<String, Vec<usize>>> {
    let mut resolved = BTreeMap::new();
    for pool in pools {
        let mut indexes: Vec<usize> = Vec::with_capacity(pool.members.len());
        for (member, site) in pool.members {
            let index = match member {
                PoolMember::Index(index) if index < backends.len() => index,
                PoolMember::Index(index) => {
                    return Err(site.error(
                        &pool.name,
                        format!(
                            "backend index {index} is past the mount's {} backends (0 to {})",
                            backends.len(),
                            backends.len() - 1
                        ),
                    ));
                }
                PoolMember::Location(location) => {
                    backends.iter().position(|backend| backend.config.location == location).ok_or_else(
                        || site.error(&pool.name, format!("{location} is not one of this mount's backends")),
                    )?
                }
            };
            if indexes.contains(&index) {
                return Err(site.error(&pool.name, format!("backend {index} is listed twice in the pool")));
            }
            indexes.push(index);
        }
        if resolved.insert(pool.name.clone(), indexes).is_some() {
            return Err(pool.site.error(&pool.name, "pool given twice"));
        }
    }
    Ok(resolved)
}

/// A default layout may only name pools the mount defines.
fn check_layout_pools(mount: &MountConfig, site: Option<&Site>) -> Result<()> {
    let (Some(layout), Some(site)) = (&mount.striping.default_layout, site) else { return Ok(()) };
    for component in layout.components() {
        let pool = component.pool.as_deref();
        if let Err(error) = pool_backends(&mount.striping, pool, mount.backends.len()) {
            return Err(site.error("default_layout", error.message()));
        }
    }
    Ok(())
}

fn backend_list(entry: &Entry<'_, '_>, file: &Rc<Path>) -> Result<Vec<BackendEntry>> {
    let YamlData::Sequence(items) = &entry.value.data else {
        return Err(entry.expected("a list of backends (- location: ...)"));
    };
    if items.is_empty() {
        return Err(entry.error("empty list: a mount needs at least one backend"));
    }
    items.iter().map(|item| backend(item, file)).collect()
}

/// A backend is `- location: X` with an optional `type:`, or, as a
/// shorthand, just `- X` (untyped).
fn backend(item: &MarkedYaml<'_>, file: &Rc<Path>) -> Result<BackendEntry> {
    if let YamlData::Value(_) = &item.data {
        let entry = Entry { key: "backends", site: Site::of(file, item), value: item };
        let config = BackendConfig { location: entry.location()?, role: BackendRole::Any };
        return Ok(BackendEntry { config, site: entry.site, key: "backends" });
    }
    let entries = entries(item, file, "backends", "a backend (- location: ...)")?;
    let mut location = None;
    let mut role = BackendRole::Any;
    let mut s3_keys = Vec::new();
    for entry in &entries {
        match entry.key {
            "location" => location = Some((entry.location()?, entry.site.clone())),
            "type" => role = backend_role(entry)?,
            key if S3Access::KEYS.contains(&key) => s3_keys.push(entry),
            _ => {
                return Err(entry.error(format!(
                    "unknown key in a backend (valid keys: location, type, and for s3:// {})",
                    S3Access::KEYS.join(", ")
                )));
            }
        }
    }
    let Some((mut location, site)) = location else {
        return Err(Site::of(file, item).error("location", "missing: every backend needs one"));
    };
    for entry in s3_keys {
        let BackendLocation::S3 { access, .. } = &mut location else {
            return Err(entry.error(format!("only an s3:// backend takes this key, not {location}")));
        };
        // A credentials file is named, never the secret itself: plfsrc files
        // are world-readable and copied around.
        let value = match entry.key {
            "credentials_file" => entry.absolute()?.display().to_string(),
            _ => entry.text("a value")?,
        };
        access.set(entry.key, &value).map_err(|problem| {
            let problem = problem.replace("given twice", "given twice (here and in the location)");
            entry.error(problem)
        })?;
    }
    Ok(BackendEntry { config: BackendConfig { location, role }, site, key: "location" })
}

fn backend_role(entry: &Entry<'_, '_>) -> Result<BackendRole> {
    match scalar_text(entry.value).as_deref() {
        Some("canonical") => Ok(BackendRole::Canonical),
        Some("shadow") => Ok(BackendRole::Shadow),
        _ => Err(entry.expected("canonical or shadow")),
    }
}

/// PLFS's rules for typed backends: all typed or none, and a typed mount
/// needs somewhere for containers (canonical) and for hostdirs (shadow).
fn check_roles(backends: &[BackendEntry], site: &Site) -> Result<()> {
    let with = |role: BackendRole| backends.iter().find(|backend| backend.config.role == role);
    let typed = backends.iter().find(|backend| backend.config.role != BackendRole::Any);
    let (Some(typed), untyped) = (typed, with(BackendRole::Any)) else {
        return Ok(());
    };
    if let Some(untyped) = untyped {
        return Err(site.error(
            "backends",
            format!(
                "mixes typed and untyped backends (typed at line {}, untyped at line {}); give every backend a type, or none",
                typed.site.line, untyped.site.line
            ),
        ));
    }
    for (role, name) in [(BackendRole::Canonical, "canonical"), (BackendRole::Shadow, "shadow")] {
        if with(role).is_none() {
            return Err(site.error("backends", format!("typed backends need at least one with type: {name}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/plfsrc").join(name)
    }

    fn inline(text: &str) -> Result<PlfsConfig> {
        parse_str(text, Path::new("t.plfsrc"))
    }

    /// The error text without the kind suffix every InvalidInput error ends with.
    fn message(result: Result<PlfsConfig>) -> String {
        let error = result.expect_err("config should be rejected");
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{error}");
        let text = error.to_string();
        text.strip_suffix(": invalid input").unwrap_or(&text).to_owned()
    }

    fn error_of(text: &str) -> String {
        message(inline(text))
    }

    fn posix(path: &str) -> BackendLocation {
        BackendLocation::Posix(path.into())
    }

    fn backend(location: BackendLocation, role: BackendRole) -> BackendConfig {
        BackendConfig { location, role }
    }

    const MOUNT: &str = "- mount_point: /mnt/plfs\n  backends: [/b0]\n";

    #[test]
    fn inventory_example_with_include_and_typed_backends() {
        let config = parse_file(&fixture("inventory.plfsrc")).unwrap();
        assert_eq!(config.files, [fixture("inventory.plfsrc"), fixture("inventory-shared.plfsrc")]);
        assert_eq!(config.tuning, Tuning { num_hostdirs: 101, threadpool_size: 16, ..Tuning::default() });
        assert_eq!(config.logging.file.as_deref(), Some("/tmp/plfs-%p-%h-%t.log"));
        assert_eq!(config.logging.defmask, LogLevel::Warn);
        let [shared, plfs] = config.mounts.as_slice() else { panic!("{:?}", config.mounts) };
        let mut expected = MountConfig::new(
            "/mnt/shared".into(),
            Workload::FilePerProc,
            vec![
                backend(posix("/panfs/shared1"), BackendRole::Any),
                backend(posix("/panfs/shared2"), BackendRole::Any),
            ],
        );
        assert_eq!(*shared, expected);
        expected = MountConfig::new(
            "/mnt/plfs".into(),
            Workload::SharedFile,
            vec![
                backend(posix("/lustre/pstore1"), BackendRole::Canonical),
                backend(
                    BackendLocation::Hdfs { host: "nn".into(), port: 8000, path: "/plfs".into() },
                    BackendRole::Shadow,
                ),
            ],
        );
        expected.statfs = Some(posix("/global/visible"));
        assert_eq!(*plfs, expected);
    }

    #[test]
    fn flat_global_params_set_every_key() {
        let config = parse_file(&fixture("flat-globals.plfsrc")).unwrap();
        let tuning = Tuning {
            num_hostdirs: 1024,
            threadpool_size: 1,
            lazy_stat: false,
            compress_contiguous: false,
            index_flush_bytes: 64 << 10,
            index_patterns: false,
            flatten_on_close: true,
            read_handles_max: 16,
            readahead_bytes: 512 << 10,
            lazy_droppings: false,
            verify_reads: VerifyReads::Always,
            index_buffer_mbs: 0,
            read_buffer_mbs: 128,
            global_summary_dir: Some("/var/plfs/summary".into()),
            test_metalink: true,
            background_reclaim: true,
        };
        assert_eq!(config.tuning, tuning);
        let mask = |facility: Option<&str>, level| LogMask { facility: facility.map(str::to_owned), level };
        let logging = LogSettings {
            defmask: LogLevel::Info,
            setmasks: vec![
                mask(None, LogLevel::Info),
                mask(Some("index"), LogLevel::Debug),
                mask(Some("container"), LogLevel::Debug),
            ],
            stderrmask: LogLevel::Err,
            stderr: true,
            file: Some("/tmp/plfs-%h.log".into()),
            msgbuf_size: 256,
            syslog: true,
            syslogfac: SyslogFacility::Local(3),
            ucon: false,
            fuse_crash_log: Some("/tmp/plfs-crash.log".into()),
        };
        assert_eq!(config.logging, logging);
        let mount = &config.mounts[0];
        assert_eq!(mount.mount_point, Path::new("/mnt/small"));
        assert_eq!(mount.workload, Workload::SmallFile);
        assert_eq!(mount.statfs, Some(posix("/global/visible")));
        assert_eq!(mount.glib_buffer_mbs, 32);
        assert_eq!(mount.syncer_ip.as_deref(), Some("10.0.0.7"));
        assert_eq!((mount.max_writers, mount.max_smallfile_containers), (8, 64));
    }

    #[test]
    fn every_global_key_is_listed_and_in_the_flat_fixture() {
        let text = fs::read_to_string(fixture("flat-globals.plfsrc")).unwrap();
        for key in GLOBAL_KEYS {
            assert!(text.contains(&format!("\n  {key}: ")), "{key}");
        }
    }

    #[test]
    fn nested_global_params_block_and_flow_forms() {
        let config = parse_file(&fixture("nested-globals.plfsrc")).unwrap();
        assert_eq!((config.tuning.num_hostdirs, config.tuning.threadpool_size), (7, 3));
        assert_eq!(config.logging.defmask, LogLevel::Note);
        let locations: Vec<_> = config.mounts[0].backends.iter().map(|b| b.location.clone()).collect();
        assert_eq!(locations, [posix("/b0"), posix("/b1")]);

        let config =
            inline(&format!("- global_params: {{num_hostdirs: 5, lazy_stat: false}}\n{MOUNT}")).unwrap();
        assert_eq!((config.tuning.num_hostdirs, config.tuning.lazy_stat), (5, false));
    }

    #[test]
    fn defaults_without_global_params() {
        let config = inline(MOUNT).unwrap();
        assert_eq!(config.tuning, Tuning::default());
        assert_eq!(config.logging, LogSettings::default());
        assert_eq!(config.files, [PathBuf::from("t.plfsrc")]);
        let mount = &config.mounts[0];
        assert_eq!(
            *mount,
            MountConfig::new("/mnt/plfs".into(), Workload::SharedFile, mount.backends.clone())
        );
        assert_eq!((mount.glib_buffer_mbs, mount.max_writers, mount.max_smallfile_containers), (16, 4, 32));
    }

    #[test]
    fn all_workload_spellings_over_untyped_backends() {
        let config = parse_file(&fixture("workloads.plfsrc")).unwrap();
        let got: Vec<(String, Workload)> =
            config.mounts.iter().map(|m| (m.mount_point.display().to_string(), m.workload)).collect();
        let expected = [
            ("/w/shared_file", Workload::SharedFile),
            ("/w/n-1", Workload::SharedFile),
            ("/w/shared_file_byterange", Workload::SharedFile),
            ("/w/n-1_byterange", Workload::SharedFile),
            ("/w/file_per_proc", Workload::FilePerProc),
            ("/w/n-n", Workload::FilePerProc),
            ("/w/small_file", Workload::SmallFile),
            ("/w/1-n", Workload::SmallFile),
            ("/w/default", Workload::SharedFile),
        ];
        assert_eq!(got, expected.map(|(point, workload)| (point.to_owned(), workload)));
        assert!(config.mounts.iter().flat_map(|m| &m.backends).all(|b| b.role == BackendRole::Any));
        assert_eq!(config.mounts[1].backends, [backend(posix("/b/2"), BackendRole::Any)]);
        assert_eq!(config.mounts[2].backends[1].location, posix("/b/4"));
        let s3 = BackendLocation::S3 {
            bucket: "bucket".into(),
            prefix: "plfs".into(),
            access: Default::default(),
        };
        assert_eq!(config.mounts[3].backends[0].location, s3);
    }

    #[test]
    fn resolve_matches_whole_components() {
        let text = "- mount_point: /mnt/plfs\n  backends: [/b0]\n\
                    - mount_point: /mnt/plfs2\n  backends: [/b2]\n";
        let config = inline(text).unwrap();
        let resolve = |path: &str| {
            config
                .resolve(Path::new(path))
                .map(|(mount, rest)| (mount.mount_point.display().to_string(), rest))
        };
        let hit = |mount: &str, rest: &str| Some((mount.to_owned(), rest.to_owned()));
        assert_eq!(resolve("/mnt/plfs"), hit("/mnt/plfs", "/"));
        assert_eq!(resolve("/mnt/plfs/"), hit("/mnt/plfs", "/"));
        assert_eq!(resolve("/mnt/plfs/a/b"), hit("/mnt/plfs", "/a/b"));
        assert_eq!(resolve("/mnt/plfs/deeper"), hit("/mnt/plfs", "/deeper"));
        assert_eq!(resolve("/mnt/plfs2/x"), hit("/mnt/plfs2", "/x"));
        assert_eq!(resolve("/mnt//plfs/./a/../b"), hit("/mnt/plfs", "/b"));
        assert_eq!(resolve("/mnt/plfs/../plfs2/x"), hit("/mnt/plfs2", "/x"));
        assert_eq!(resolve("/mnt/plfs/../etc"), None);
        assert_eq!(resolve("/mnt"), None);
        assert_eq!(resolve("/mnt/plf"), None);
        assert_eq!(resolve("mnt/plfs"), None);
        // The spelling does not matter: a normal path takes the byte test,
        // any other is normalised first; both give the same answer.
        for (normal, other) in [("/mnt/plfs/a", "/mnt/plfs//a/"), ("/mnt/plfs2", "/mnt/./plfs2/x/..")] {
            assert_eq!(resolve(normal), resolve(other), "{normal} vs {other}");
        }
    }

    #[test]
    fn only_normal_paths_skip_normalisation() {
        for normal in ["/", "/a", "/mnt/plfs/f", "/a.b/..c"] {
            assert!(is_normal(Path::new(normal)), "{normal}");
        }
        for other in ["", "a/b", "/a//b", "/a/./b", "/a/../b", "/a/", "/a/.", "/.."] {
            assert!(!is_normal(Path::new(other)), "{other}");
        }
    }

    #[test]
    fn discover_takes_the_first_existing_candidate() {
        let missing = fixture("no-such.plfsrc");
        let config =
            discover_from(&[missing.clone(), fixture("nested-globals.plfsrc"), fixture("inventory.plfsrc")])
                .unwrap();
        assert_eq!(config.files, [fixture("nested-globals.plfsrc")]);

        let error = discover_from(&[missing.clone(), fixture("also-missing")]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound);
        let tried = format!("{}, {}", missing.display(), fixture("also-missing").display());
        assert_eq!(error.to_string(), format!("no plfsrc found (tried {tried}): not found"));
    }

    #[test]
    fn discover_looks_at_plfsrc_then_home_then_etc() {
        let places = search_list_from(Some("/site/rc".into()), Some("/home/u".into()));
        let paths: Vec<_> = places.iter().map(|(_, path)| path.clone()).collect();
        assert_eq!(
            paths,
            [Some("/site/rc".into()), Some("/home/u/.plfsrc".into()), Some("/etc/plfsrc".into())]
        );

        let places = search_list_from(Some("".into()), None);
        let labels: Vec<_> = places.iter().map(|(label, _)| label.as_str()).collect();
        assert_eq!(labels, ["$PLFSRC (not set)", "$HOME/.plfsrc ($HOME not set)", "/etc/plfsrc"]);
        assert_eq!(places[0].1, None);
        assert_eq!(
            none_found(places.into_iter().map(|(label, _)| label).collect()).to_string(),
            "no plfsrc found (tried $PLFSRC (not set), $HOME/.plfsrc ($HOME not set), /etc/plfsrc): not found"
        );
    }

    #[test]
    fn unknown_keys_name_the_valid_ones() {
        let globals = GLOBAL_KEYS.join(", ");
        assert_eq!(
            error_of(&format!("- global_params:\n  num_hostdir: 3\n{MOUNT}")),
            format!("t.plfsrc:2: num_hostdir: unknown key in global_params (valid keys: {globals})")
        );
        assert_eq!(
            error_of(&format!("- global_params:\n    mount_point: /x\n{MOUNT}")),
            format!("t.plfsrc:2: mount_point: unknown key in global_params (valid keys: {globals})")
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backend: [/b]\n"),
            "t.plfsrc:2: backend: unknown key in a mount section (valid keys: mount_point, workload, backends, \
             statfs, glib_buffer_mbs, syncer_ip, max_writers, max_smallfile_containers, default_layout, pools, \
             stripe_imbalance_pct, stripe_reserve)"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends:\n    - location: /b\n      kind: shadow\n"),
            "t.plfsrc:4: kind: unknown key in a backend (valid keys: location, type, and for s3:// endpoint, region, \
             credentials_file)"
        );
        assert_eq!(
            error_of(&format!("{MOUNT}- include: x\n  mount_point: /y\n")),
            "t.plfsrc:4: mount_point: unknown key in an include section (valid keys: include)"
        );
        assert_eq!(
            error_of(&format!("{MOUNT}- global_param:\n  num_hostdirs: 3\n")),
            "t.plfsrc:3: global_param: unknown section (a section starts with include, global_params or mount_point)"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  mount_type: posix\n  backends: [/b]\n"),
            "t.plfsrc:2: mount_type: PLFS listed this key but never used it; remove it"
        );
    }

    #[test]
    fn bad_global_values_say_what_is_expected() {
        let cases = [
            ("num_hostdirs: 0", "num_hostdirs: expected an integer from 1 to 1024, got 0"),
            ("num_hostdirs: 1025", "num_hostdirs: expected an integer from 1 to 1024, got 1025"),
            ("num_hostdirs: -3", "num_hostdirs: expected an integer from 1 to 1024, got -3"),
            ("num_hostdirs: lots", "num_hostdirs: expected an integer from 1 to 1024, got lots"),
            ("threadpool_size: 0", "threadpool_size: expected an integer from 1 to 1024, got 0"),
            ("lazy_stat: yes", "lazy_stat: expected 0, 1, true or false, got yes"),
            ("compress_contiguous: 2", "compress_contiguous: expected 0, 1, true or false, got 2"),
            ("index_buffer_mbs: -1", "index_buffer_mbs: expected an integer from 0 to 4294967295, got -1"),
            ("index_flush_kib: 0", "index_flush_kib: expected an integer from 1 to 1048576, got 0"),
            ("readahead_kib: 2", "readahead_kib: expected an integer from 4 to 1048576, got 2"),
            ("verify_reads: yes", "verify_reads: expected whole, always or off, got yes"),
            ("verify_reads:", "verify_reads: expected whole, always or off, got nothing"),
            ("read_handles_max: []", "read_handles_max: expected an integer from 1 to 65536, got a list"),
            ("mlog_defmask: LOUD", &format!("mlog_defmask: expected {LEVELS}, got LOUD")),
            ("mlog_stderrmask:", &format!("mlog_stderrmask: expected {LEVELS}, got nothing")),
            (
                "mlog_setmasks: INFO,index=LOUD",
                &format!("mlog_setmasks: bad level \"LOUD\" in \"index=LOUD\" (expected {LEVELS})"),
            ),
            ("mlog_syslogfac: USER", "mlog_syslogfac: expected LOCAL0 to LOCAL7, got USER"),
            ("mlog_syslogfac: LOCAL8", "mlog_syslogfac: expected LOCAL0 to LOCAL7, got LOCAL8"),
            (
                "mlog_msgbuf_size: 255",
                "mlog_msgbuf_size: expected 0 (no buffer) or a size in bytes >= 256, got 255",
            ),
            (
                "global_summary_dir: var/plfs",
                "global_summary_dir: expected an absolute path (starting with /), got var/plfs",
            ),
        ];
        for (line, expected) in cases {
            let text = format!("- global_params:\n  {line}\n{MOUNT}");
            assert_eq!(error_of(&text), format!("t.plfsrc:2: {expected}"), "{line}");
        }
        assert_eq!(
            error_of(&format!("- global_params:\n  num_hostdirs: 3\n  num_hostdirs: 4\n{MOUNT}")),
            "t.plfsrc:3: num_hostdirs: given twice in the same section"
        );
        assert_eq!(
            error_of(&format!("- global_params:\n  num_hostdirs: 3\n  global_params:\n{MOUNT}")),
            "t.plfsrc:3: global_params: given twice in the same section"
        );
        assert_eq!(
            error_of(&format!("- global_params: {{num_hostdirs: 3}}\n  num_hostdirs: 4\n{MOUNT}")),
            "t.plfsrc:2: num_hostdirs: given twice in global_params (also at t.plfsrc:1)"
        );
        assert_eq!(
            error_of(&format!("- global_params: 12\n{MOUNT}")),
            "t.plfsrc:1: global_params: expected nothing (keys follow at the same indentation) or a mapping \
             of global keys, got 12"
        );
    }

    #[test]
    fn a_second_global_params_section_is_rejected() {
        assert_eq!(
            error_of(&format!(
                "- global_params:\n  num_hostdirs: 3\n{MOUNT}- global_params:\n  lazy_stat: 0\n"
            )),
            "t.plfsrc:5: global_params: a second global_params section (the first is at t.plfsrc:1); \
             merge them into one"
        );
    }

    #[test]
    fn bad_mount_values_say_what_is_expected() {
        let cases = [
            (
                "workload: bogus",
                "workload: expected shared_file (n-1), file_per_proc (n-n) or small_file (1-n), got bogus",
            ),
            (
                "workload: n-n:byterange",
                "workload: expected shared_file (n-1), file_per_proc (n-n) or small_file (1-n), got n-n:byterange",
            ),
            (
                "workload: shared_file:pattern",
                "workload: index type \"pattern\" is not supported (only byterange)",
            ),
            ("max_writers: 0", "max_writers: expected an integer from 1 to 4294967295, got 0"),
            (
                "max_smallfile_containers: x",
                "max_smallfile_containers: expected an integer from 1 to 4294967295, got x",
            ),
            (
                "statfs: global",
                "statfs: backend \"global\": unknown location (expected /path, posix:///path, hdfs://host:port/path or s3://bucket/prefix)",
            ),
            ("syncer_ip: [a]", "syncer_ip: expected an address, got a list"),
        ];
        for (line, expected) in cases {
            let text = format!("- mount_point: /m\n  {line}\n  backends: [/b]\n");
            assert_eq!(error_of(&text), format!("t.plfsrc:2: {expected}"), "{line}");
        }
        assert_eq!(
            error_of("- mount_point: /m\n  backends:\n    - location: /b\n      type: primary\n"),
            "t.plfsrc:4: type: expected canonical or shadow, got primary"
        );
    }

    #[test]
    fn backend_locations_are_checked() {
        let location =
            |text: &str| error_of(&format!("- mount_point: /m\n  backends:\n    - location: {text}\n"));
        let supported = "(use /path, posix:///path, hdfs://host:port/path or s3://bucket/prefix)";
        for scheme in ["glib:", "pvfs://", "iofsl:"] {
            assert_eq!(
                location(&format!("{scheme}/x")),
                format!(
                    "t.plfsrc:3: location: backend type {scheme} is not supported by this plfs {supported}"
                )
            );
        }
        assert_eq!(
            location("posix://rel"),
            "t.plfsrc:3: location: backend \"posix://rel\": posix:// needs an absolute path (posix:///dir)"
        );
        assert_eq!(
            location("hdfs://nn/p"),
            "t.plfsrc:3: location: backend \"hdfs://nn/p\": hdfs:// needs host:port"
        );
        assert_eq!(
            location(""),
            "t.plfsrc:3: location: expected a backend location such as /path or posix:///path, got nothing"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends:\n    - type: canonical\n"),
            "t.plfsrc:3: location: missing: every backend needs one"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends:\n    - glib:/x\n"),
            format!("t.plfsrc:3: backends: backend type glib: is not supported by this plfs {supported}")
        );
    }

    #[test]
    fn s3_backends_take_endpoint_region_and_credentials_file() {
        let text = "- mount_point: /m\n  backends:\n    - location: s3://bucket/plfs\n      \
                    endpoint: http://127.0.0.1:9000\n      region: eu-west-1\n      \
                    credentials_file: /etc/plfs/s3-credentials\n";
        let config = inline(text).unwrap();
        let access = S3Access {
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
            credentials_file: Some("/etc/plfs/s3-credentials".into()),
        };
        let expected = BackendLocation::S3 { bucket: "bucket".into(), prefix: "plfs".into(), access };
        assert_eq!(config.mounts[0].backends[0].location, expected);

        let backend =
            |keys: &str| error_of(&format!("- mount_point: /m\n  backends:\n    - location: {keys}\n"));
        assert_eq!(
            backend("/b\n      endpoint: http://h:9000"),
            "t.plfsrc:4: endpoint: only an s3:// backend takes this key, not posix:///b"
        );
        assert_eq!(
            backend("s3://b?region=x\n      region: y"),
            "t.plfsrc:4: region: region given twice (here and in the location)"
        );
        assert_eq!(
            backend("s3://b\n      credentials_file: keys.txt"),
            "t.plfsrc:4: credentials_file: expected an absolute path (starting with /), got keys.txt"
        );
        assert_eq!(
            backend("s3://b\n      endpoint: h:9000"),
            "t.plfsrc:4: endpoint: endpoint \"h:9000\": expected http://host:port or https://host"
        );
        assert_eq!(
            backend("s3://b\n      secret_access_key: x"),
            "t.plfsrc:4: secret_access_key: unknown key in a backend (valid keys: location, type, and for s3:// \
             endpoint, region, credentials_file)"
        );
    }

    #[test]
    fn a_backend_may_appear_only_once() {
        assert_eq!(
            error_of("- mount_point: /m\n  backends:\n    - location: /b\n    - location: posix:///b/\n"),
            "t.plfsrc:4: location: backend posix:///b/ is already listed at t.plfsrc:3; a backend may appear only once"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends: [/a, /b]\n- mount_point: /n\n  backends: [/c, /b]\n"),
            "t.plfsrc:4: backends: backend posix:///b is already listed at t.plfsrc:2; a backend may appear only once"
        );
        let text = "- include: inventory-shared.plfsrc\n- mount_point: /m\n  backends:\n    - location: /panfs/shared2\n";
        let error = message(parse_str(text, &fixture("main.plfsrc")));
        assert_eq!(
            error,
            format!(
                "{}:4: location: backend posix:///panfs/shared2 is already listed at {}:6; a backend may appear only once",
                fixture("main.plfsrc").display(),
                fixture("inventory-shared.plfsrc").display()
            )
        );
    }

    #[test]
    fn mount_points_are_required_absolute_and_unique() {
        assert_eq!(
            error_of("- workload: n-n\n  backends: [/b]\n"),
            "t.plfsrc:1: mount_point: missing: every mount section needs one"
        );
        assert_eq!(
            error_of("- mount_point: mnt/plfs\n  backends: [/b]\n"),
            "t.plfsrc:1: mount_point: expected an absolute path without .. components, got mnt/plfs"
        );
        assert_eq!(
            error_of("- mount_point: /mnt/../plfs\n  backends: [/b]\n"),
            "t.plfsrc:1: mount_point: expected an absolute path without .. components, got /mnt/../plfs"
        );
        assert_eq!(
            error_of(
                "- mount_point: /mnt/plfs\n  backends: [/a]\n- mount_point: /mnt//plfs/\n  backends: [/b]\n"
            ),
            "t.plfsrc:3: mount_point: /mnt/plfs is already a mount point (at t.plfsrc:1)"
        );
        assert_eq!(
            error_of("[]"),
            "t.plfsrc:1: mount_point: no mount points defined (add a - mount_point: section)"
        );
    }

    /// Each of these makes plfs call into its own mount (`stat MNT` hung
    /// unkillably with a backend inside the mount point).
    #[test]
    fn mount_points_and_backends_may_not_overlap() {
        assert_eq!(
            error_of("- mount_point: /\n  backends: [/b]\n"),
            "t.plfsrc:1: mount_point: / cannot be a mount point: the mount would cover the whole system, \
             its backends included"
        );
        assert_eq!(
            error_of(
                "- mount_point: /mnt/plfs\n  backends:\n    - location: /b\n    - location: /mnt/plfs/b1\n"
            ),
            "t.plfsrc:4: location: backend /mnt/plfs/b1 is inside the mount point /mnt/plfs (at t.plfsrc:1); \
             plfs would call into its own mount and hang"
        );
        assert_eq!(
            error_of("- mount_point: /mnt/plfs\n  backends: [posix:///mnt//plfs/]\n"),
            "t.plfsrc:2: backends: backend /mnt/plfs is inside the mount point /mnt/plfs (at t.plfsrc:1); \
             plfs would call into its own mount and hang"
        );
        assert_eq!(
            error_of("- mount_point: /data/mnt\n  backends: [/data]\n"),
            "t.plfsrc:2: backends: backend /data contains the mount point /data/mnt (at t.plfsrc:1); \
             plfs would call into its own mount and hang"
        );
        // Another mount's point counts as much as the mount's own.
        assert_eq!(
            error_of("- mount_point: /m\n  backends: [/n/b]\n- mount_point: /n\n  backends: [/c]\n"),
            "t.plfsrc:2: backends: backend /n/b is inside the mount point /n (at t.plfsrc:3); \
             plfs would call into its own mount and hang"
        );
        assert_eq!(
            error_of("- mount_point: /mnt/a\n  backends: [/b]\n- mount_point: /mnt/a/b\n  backends: [/c]\n"),
            "t.plfsrc:3: mount_point: /mnt/a/b and the mount point /mnt/a (at t.plfsrc:1) contain one another; \
             mount points may not nest"
        );
        // Neighbours sharing a name prefix do not overlap.
        let config = inline(
            "- mount_point: /mnt/a\n  backends: [/mnt/ab]\n- mount_point: /mnt/abc\n  backends: [/c]\n",
        )
        .unwrap();
        assert_eq!(config.mounts.len(), 2);
    }

    #[test]
    fn mounts_need_backends() {
        assert_eq!(
            error_of("- mount_point: /m\n  workload: n-1\n"),
            "t.plfsrc:1: backends: missing: mount /m needs a backends list"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends: []\n"),
            "t.plfsrc:2: backends: empty list: a mount needs at least one backend"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends: /b\n"),
            "t.plfsrc:2: backends: expected a list of backends (- location: ...), got /b"
        );
    }

    #[test]
    fn typed_backends_follow_plfs_rules() {
        let mount = |backends: &str| error_of(&format!("- mount_point: /m\n  backends:\n{backends}"));
        assert_eq!(
            mount("    - location: /a\n      type: canonical\n    - location: /b\n"),
            "t.plfsrc:2: backends: mixes typed and untyped backends (typed at line 3, untyped at line 5); \
             give every backend a type, or none"
        );
        assert_eq!(
            mount("    - location: /a\n      type: shadow\n"),
            "t.plfsrc:2: backends: typed backends need at least one with type: canonical"
        );
        assert_eq!(
            mount("    - location: /a\n      type: canonical\n    - location: /b\n      type: canonical\n"),
            "t.plfsrc:2: backends: typed backends need at least one with type: shadow"
        );
    }

    #[test]
    fn include_errors_name_the_include_line() {
        let main = fixture("main.plfsrc");
        let twice = "- include: inventory-shared.plfsrc\n- include: ./inventory-shared.plfsrc\n";
        assert_eq!(
            message(parse_str(twice, &main)),
            format!(
                "{}:2: include: {} was already read (first included at {}:1); a file may be read only once, \
                 so no repeats or cycles",
                main.display(),
                fixture("./inventory-shared.plfsrc").display(),
                main.display()
            )
        );
        let cycle_a = fixture("cycle-a.plfsrc");
        assert_eq!(
            message(parse_file(&cycle_a)),
            format!(
                "{}:4: include: {} was already read (it is the main file); a file may be read only once, \
                 so no repeats or cycles",
                fixture("cycle-b.plfsrc").display(),
                cycle_a.display()
            )
        );
        let missing = format!("{MOUNT}- include: no-such.plfsrc\n");
        assert_eq!(
            message(parse_str(&missing, &main)),
            format!(
                "{}:3: include: cannot read {}: No such file or directory (os error 2)",
                main.display(),
                fixture("no-such.plfsrc").display()
            )
        );
        assert_eq!(
            error_of(&format!("{MOUNT}- include: [a]\n")),
            "t.plfsrc:3: include: expected a file name, got a list"
        );
    }

    #[test]
    fn yaml_and_structure_errors_carry_the_line() {
        assert_eq!(
            error_of("- mount_point: /m\n  backends: [/a\n- mount_point: /n\n"),
            "t.plfsrc:3: yaml: illegal placement of ':' indicator at column 14"
        );
        assert_eq!(
            error_of("- mount_point: /m\n  backends: [/a]\n  mount_point: /n\n"),
            "t.plfsrc:3: mount_point: given twice in the same section"
        );
        assert_eq!(
            error_of("mount_point: /m\n"),
            "t.plfsrc:1: plfsrc: expected a list of sections (- include, - global_params, - mount_point), got a mapping"
        );
        assert_eq!(
            error_of(&format!("{MOUNT}- /mnt/x\n")),
            "t.plfsrc:3: plfsrc: expected a section (a mapping with include, global_params or mount_point), got /mnt/x"
        );
        assert_eq!(
            error_of(&format!("{MOUNT}- {{}}\n")),
            "t.plfsrc:3: plfsrc: expected a section (a mapping with include, global_params or mount_point), \
             got an empty mapping"
        );
    }

    #[test]
    fn main_file_errors() {
        let error = parse_file(&fixture("no-such.plfsrc")).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert!(error.to_string().starts_with(&fixture("no-such.plfsrc").display().to_string()));
    }

    #[test]
    fn striping_keys_fill_the_mount_config() {
        let config = inline(
            "- mount_point: /mnt/s\n  backends: [/b0, /b1, /b2, /b3]\n  \
             default_layout: -E 1M -c 1 -E 64M -c 4 -E -1 -c -1 -p disk\n  pools:\n    ssd: [0, 1]\n    \
             disk: [/b2, 3]\n  stripe_imbalance_pct: 25\n  stripe_reserve: 10G\n",
        )
        .unwrap();
        let striping = &config.mounts[0].striping;
        assert_eq!(
            striping.default_layout.as_ref().map(ToString::to_string).as_deref(),
            Some("-E 1M -c 1 -S 1M -E 64M -c 4 -S 1M -E -1 -c -1 -S 1M -p disk")
        );
        assert_eq!(striping.pools["ssd"], vec![0, 1]);
        assert_eq!(striping.pools["disk"], vec![2, 3]);
        assert_eq!((striping.imbalance_pct, striping.reserve_bytes), (25, 10 << 30));
        // `none` keeps one backend per host; no key at all is the progressive default.
        let none = inline("- mount_point: /mnt/s\n  backends: [/b0]\n  default_layout: none\n").unwrap();
        assert_eq!(none.mounts[0].striping, crate::striping::StripingConfig::default());
        let absent = inline("- mount_point: /mnt/s\n  backends: [/b0, /b1]\n").unwrap();
        assert_eq!(
            absent.mounts[0].striping.default_layout.as_ref().map(ToString::to_string).as_deref(),
            Some("-E 1M -c 1 -S 1M -E 64M -c 4 -S 1M -E -1 -c -1 -S 1M")
        );
    }

    #[test]
    fn bad_striping_values_name_the_file_line_and_key() {
        let mount = "- mount_point: /mnt/s\n  backends: [/b0, /b1]\n";
        for (extra, expect) in [
            (
                "  default_layout: -E 1M -c 0\n",
                "t.plfsrc:3: default_layout: layout: -c 0: expected a stripe count",
            ),
            (
                "  default_layout: -c 2 -p fast\n",
                "t.plfsrc:3: default_layout: layout: pool fast: no such pool",
            ),
            (
                "  stripe_imbalance_pct: 101\n",
                "t.plfsrc:3: stripe_imbalance_pct: expected an integer from 0 to 100",
            ),
            ("  stripe_reserve: 10X\n", "t.plfsrc:3: stripe_reserve: expected a size in bytes"),
            (
                "  pools:\n    a: [2]\n",
                "t.plfsrc:4: a: backend index 2 is past the mount's 2 backends (0 to 1)",
            ),
            ("  pools:\n    a: [/b9]\n", "t.plfsrc:4: a: posix:///b9 is not one of this mount's backends"),
            ("  pools:\n    a: [0, /b0]\n", "t.plfsrc:4: a: backend 0 is listed twice in the pool"),
            ("  pools:\n    a: []\n", "t.plfsrc:4: a: empty list"),
            ("  pools: [0]\n", "t.plfsrc:3: pools: expected a mapping of pool names"),
        ] {
            let error = error_of(&format!("{mount}{extra}"));
            assert!(error.starts_with(expect), "{extra:?}: {error}\n  should start with {expect}");
        }
    }
}
