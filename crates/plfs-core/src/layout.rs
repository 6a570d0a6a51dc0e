//! The one module that knows the names inside a container. Every name is
//! built from typed ids here and parsed back here, with fixed-width hex
//! fields so hostnames with dots can never confuse a parser. Nothing else in
//! plfs splits or formats these names.
//!
//! ```text
//! <dir>/<file>/                    container (canonical backend)
//!     access                       mode, owner, times (format::access)
//!     renaming                     a rename in progress (format::rename)
//!     version                      format version (format::version)
//!     global.index                 optional flattened index (format::global_index)
//!     xattrs/<name>                one extended attribute (format::xattr)
//!     meta/open.<log>              writer <log> has the file open
//!     meta/size.<log>.<fields>     writer <log> closed: its size summary
//!     meta/closed                  no writer open: what stat shows (format::closed)
//!     hostdir.<N>/index.<log>      index log of writer <log>
//!     hostdir.<N>/data.<log>       data log of writer <log>
//! <dir>/<file>/hostdir.<M>/...     on other backends: shadow containers
//! <dir>/.plfs-new.<hash>.<...>     a container being created
//! <dir>/.plfs-gone.<hash>.<...>    a file unlinked while open, or one a
//!                                  rename displaced
//! <dir>/.plfs-reclaim.<hash>.<...> a removed container whose pieces are
//!                                  still being deleted (on every backend)
//! <dir>/.plfs-swap.<hash>.<...>    a container being renamed onto <dir>/<name>,
//!                                  or the one it displaced
//! <dir>/.plfs-migrate.<...>.<name>  a PLFS 2.5 file's copy being built (crate::migrate)
//! <dir>/.plfs-migrated.<...>.<name> that copy verified, or the 2.5 container
//!                                  it displaced
//! ```
//!
//! The small-file (1-N) directory containers have their names in
//! [`smallfile`].

use std::fmt;

use crate::error::{Error, Result};
use crate::placement::{HostdirId, name_hash};
use crate::store::StorePath;

pub mod smallfile;

pub const ACCESS: &str = "access";
pub const VERSION: &str = "version";
pub const META_DIR: &str = "meta";
pub const GLOBAL_INDEX: &str = "global.index";
pub const XATTR_DIR: &str = "xattrs";
/// The rename intent of a container being renamed (format::rename).
pub const RENAME_INTENT: &str = "renaming";
/// A striped file's layout (format::striping), fixed at creation.
pub const LAYOUT: &str = "layout";
/// `stripes.<c>`: the backends of component `c` of a striped file.
const STRIPES_PREFIX: &str = "stripes.";
/// A directory's extended attributes live beside its entries under this prefix.
const DIR_XATTR_PREFIX: &str = ".plfs-xattr.";
/// Names starting with this are plfs's own and never shown to users.
pub const RESERVED_PREFIX: &str = ".plfs-";

const HOSTDIR_PREFIX: &str = "hostdir.";
const DATA_PREFIX: &str = "data.";
const INDEX_PREFIX: &str = "index.";
const OPEN_PREFIX: &str = "open.";
const SIZE_PREFIX: &str = "size.";
const CLOSED_SUMMARY: &str = "closed";
const NEW_CONTAINER_PREFIX: &str = ".plfs-new.";
const REMOVED_CONTAINER_PREFIX: &str = ".plfs-gone.";
const RECLAIM_PREFIX: &str = ".plfs-reclaim.";
const MOVING_FILE_PREFIX: &str = ".plfs-moving.";
const SWAP_CONTAINER_PREFIX: &str = ".plfs-swap.";
const MIGRATING_PREFIX: &str = ".plfs-migrate.";
const MIGRATED_PREFIX: &str = ".plfs-migrated.";
const SWITCH_INTENT_PREFIX: &str = ".plfs-switch.";

/// Identifies one writer's pair of logs: unique because stamps from one
/// process strictly increase and pid and host tell processes apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogId {
    pub stamp: u64,
    pub writer: u64,
    pub pid: u32,
    /// `name_hash` of the writer's hostname (the full name is in the log header).
    pub host: u32,
}

const LOG_ID_TEXT_BYTES: usize = 16 + 1 + 16 + 1 + 8 + 1 + 8;

impl LogId {
    pub fn new(stamp: u64, writer: u64, pid: u32, hostname: &str) -> LogId {
        LogId { stamp, writer, pid, host: name_hash(hostname) }
    }

    pub fn parse(text: &str) -> Option<LogId> {
        if text.len() != LOG_ID_TEXT_BYTES {
            return None;
        }
        let mut fields = text.split('.');
        let id = LogId {
            stamp: hex_u64(fields.next()?, 16)?,
            writer: hex_u64(fields.next()?, 16)?,
            pid: hex_u64(fields.next()?, 8)? as u32,
            host: hex_u64(fields.next()?, 8)? as u32,
        };
        fields.next().is_none().then_some(id)
    }

    /// Whether the process that writes this log may still be running, as
    /// seen from a process on `hostname`: on this host, whether its pid
    /// exists; on another host there is no way to know, so it may be.
    pub fn writer_may_be_alive(&self, hostname: &str) -> bool {
        if self.host != name_hash(hostname) {
            return true;
        }
        let Ok(pid) = libc::pid_t::try_from(self.pid) else { return false };
        // SAFETY: signal 0 only checks that the process exists.
        let result = unsafe { libc::kill(pid, 0) };
        result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}.{:016x}.{:08x}.{:08x}", self.stamp, self.writer, self.pid, self.host)
    }
}

fn hex_u64(text: &str, width: usize) -> Option<u64> {
    if text.len() != width || !text.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogKind {
    Data,
    Index,
}

pub fn log_name(kind: LogKind, id: &LogId) -> String {
    match kind {
        LogKind::Data => format!("{DATA_PREFIX}{id}"),
        LogKind::Index => format!("{INDEX_PREFIX}{id}"),
    }
}

pub fn parse_log_name(name: &str) -> Option<(LogKind, LogId)> {
    if let Some(rest) = name.strip_prefix(DATA_PREFIX) {
        return LogId::parse(rest).map(|id| (LogKind::Data, id));
    }
    if let Some(rest) = name.strip_prefix(INDEX_PREFIX) {
        return LogId::parse(rest).map(|id| (LogKind::Index, id));
    }
    None
}

pub fn hostdir_name(hostdir: HostdirId) -> String {
    format!("{HOSTDIR_PREFIX}{}", hostdir.0)
}

pub fn parse_hostdir_name(name: &str) -> Option<HostdirId> {
    let digits = name.strip_prefix(HOSTDIR_PREFIX)?;
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    digits.parse().ok().map(HostdirId)
}

/// What an entry directly inside a container directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerEntry {
    Access,
    Version,
    Meta,
    GlobalIndex,
    Xattrs,
    RenameIntent,
    Layout,
    Stripes(u32),
    Hostdir(HostdirId),
    /// Not a name plfs writes: reported by `plfs recover`, otherwise left alone.
    Unknown,
}

pub fn classify_container_entry(name: &str) -> ContainerEntry {
    match name {
        ACCESS => ContainerEntry::Access,
        VERSION => ContainerEntry::Version,
        META_DIR => ContainerEntry::Meta,
        GLOBAL_INDEX => ContainerEntry::GlobalIndex,
        XATTR_DIR => ContainerEntry::Xattrs,
        RENAME_INTENT => ContainerEntry::RenameIntent,
        LAYOUT => ContainerEntry::Layout,
        _ => match parse_stripes_name(name) {
            Some(component) => ContainerEntry::Stripes(component),
            None => parse_hostdir_name(name).map_or(ContainerEntry::Unknown, ContainerEntry::Hostdir),
        },
    }
}

pub fn stripes_name(component: u32) -> String {
    format!("{STRIPES_PREFIX}{component}")
}

/// `stripes.<c>` with `c` in decimal without leading zeros.
pub fn parse_stripes_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(STRIPES_PREFIX)?;
    if digits.is_empty()
        || !digits.bytes().all(|byte| byte.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// The summary a writer leaves in `meta/` when it closes, so `stat` of a
/// closed file is one listing and no reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeRecord {
    pub log: LogId,
    /// Largest end offset of this log's writes after its own last truncate.
    pub max_end: u64,
    /// Data bytes this log holds (for st_blocks).
    pub bytes: u64,
    /// Stamp of this log's newest record (the file's mtime candidate).
    pub last_stamp: u64,
    /// This log's newest truncate: (stamp, size).
    pub truncate: Option<(u64, u64)>,
}

impl SizeRecord {
    /// A size record's fields travel in its name; a CRC32C of them closes
    /// the name so a damaged or hand-made name is rejected, not believed.
    pub fn name(&self) -> String {
        let (truncate_stamp, truncate_size) = self.truncate.unwrap_or((0, 0));
        let fields = format!(
            "{}.{:016x}.{:016x}.{:016x}.{:016x}.{:016x}",
            self.log, self.max_end, self.bytes, self.last_stamp, truncate_stamp, truncate_size
        );
        format!("{SIZE_PREFIX}{fields}.{:08x}", crc32c::crc32c(fields.as_bytes()))
    }

    fn parse(rest: &str) -> Result<SizeRecord> {
        let bad = || Error::corrupt(format!("size record name {SIZE_PREFIX}{rest} is malformed"));
        let (fields, crc) = rest.rsplit_once('.').ok_or_else(bad)?;
        let crc = hex_u64(crc, 8).ok_or_else(bad)? as u32;
        if crc != crc32c::crc32c(fields.as_bytes()) {
            return Err(Error::corrupt(format!("size record name {SIZE_PREFIX}{rest}: checksum mismatch")));
        }
        if fields.len() < LOG_ID_TEXT_BYTES + 1 {
            return Err(bad());
        }
        let (log, numbers) = fields.split_at(LOG_ID_TEXT_BYTES);
        let log = LogId::parse(log).ok_or_else(bad)?;
        let numbers: Vec<u64> = numbers
            .strip_prefix('.')
            .ok_or_else(bad)?
            .split('.')
            .map(|field| hex_u64(field, 16))
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let [max_end, bytes, last_stamp, truncate_stamp, truncate_size] = numbers[..] else {
            return Err(bad());
        };
        let truncate = (truncate_stamp != 0).then_some((truncate_stamp, truncate_size));
        Ok(SizeRecord { log, max_end, bytes, last_stamp, truncate })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaEntry {
    /// The writer of this log has the file open (or crashed with it open).
    Open(LogId),
    Size(SizeRecord),
}

pub fn open_record_name(log: &LogId) -> String {
    format!("{OPEN_PREFIX}{log}")
}

/// Parses a name in `meta/`. None for names plfs does not write; an error
/// for a size record whose checksum fails.
pub fn parse_meta_name(name: &str) -> Option<Result<MetaEntry>> {
    if let Some(rest) = name.strip_prefix(OPEN_PREFIX) {
        return LogId::parse(rest).map(|id| Ok(MetaEntry::Open(id)));
    }
    if let Some(rest) = name.strip_prefix(SIZE_PREFIX) {
        return Some(SizeRecord::parse(rest).map(MetaEntry::Size));
    }
    None
}

/// Name of the temporary directory a container is assembled in before it
/// is renamed into place; it embeds a hash of the final name so it stays
/// short whatever the file name's length.
pub fn new_container_name(file_name: &str, stamp: u64, pid: u32) -> String {
    format!("{NEW_CONTAINER_PREFIX}{:08x}.{stamp:016x}.{pid:08x}", name_hash(file_name))
}

/// Name a file takes when it is unlinked while open, or when a rename
/// displaces it (a container, an n-n file; a small file's is a name in its
/// directory's records). Process and host say whether its holder may still
/// be running ([`removed_owner`]): until its last close it is that
/// process's file, not crash debris.
pub fn removed_container_name(file_name: &str, stamp: u64, pid: u32, hostname: &str) -> String {
    format!(
        "{REMOVED_CONTAINER_PREFIX}{:08x}.{stamp:016x}.{pid:08x}.{:08x}",
        name_hash(file_name),
        name_hash(hostname)
    )
}

/// The process that gave a file its removed name (stamp, pid and host, as
/// a log id with writer 0). None for a name plfs did not write, or one
/// written before names carried the host (nothing tells its holder then).
pub fn removed_owner(name: &str) -> Option<LogId> {
    owner_fields(name.strip_prefix(REMOVED_CONTAINER_PREFIX)?)
}

/// Name an unlinked container (and its shadows on other backends) takes
/// while its pieces are deleted after the unlink returned. Unlike
/// [`removed_container_name`], which FUSE also gives files unlinked while
/// open, nothing ever reads a container under this name: it is only work
/// left to finish, which `plfs recover` does.
pub fn reclaim_name(file_name: &str, stamp: u64, pid: u32) -> String {
    format!("{RECLAIM_PREFIX}{:08x}.{stamp:016x}.{pid:08x}", name_hash(file_name))
}

/// Whether `name` is a removed container whose pieces await deletion.
pub fn is_reclaim(name: &str) -> bool {
    name.starts_with(RECLAIM_PREFIX)
}

/// Whether `reclaim` ([`reclaim_name`]) was made for a file named
/// `file_name` (by its name's hash: another name may share it).
pub fn reclaim_may_be_of(reclaim: &str, file_name: &str) -> bool {
    reclaim
        .strip_prefix(RECLAIM_PREFIX)
        .and_then(|rest| rest.split('.').next())
        .and_then(|hash| u32::from_str_radix(hash, 16).ok())
        .is_some_and(|hash| hash == name_hash(file_name))
}

/// Name a container takes in the target's directory while a rename moves
/// it onto `file_name` (it is then swapped with the file it replaces,
/// which leaves under this name). Process and host say whether the
/// renaming process may still be running ([`swap_owner`]).
pub fn swap_container_name(file_name: &str, stamp: u64, pid: u32, hostname: &str) -> String {
    format!(
        "{SWAP_CONTAINER_PREFIX}{:08x}.{stamp:016x}.{pid:08x}.{:08x}",
        name_hash(file_name),
        name_hash(hostname)
    )
}

/// Whether `name` is a container in the middle of a rename.
pub fn is_swap(name: &str) -> bool {
    name.starts_with(SWAP_CONTAINER_PREFIX)
}

/// Whether `path` (or a location ending in one) is a swap name for a file
/// named `file_name`.
pub fn is_swap_for(path: &str, file_name: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_prefix(SWAP_CONTAINER_PREFIX)
        .is_some_and(|rest| rest.starts_with(&format!("{:08x}.", name_hash(file_name))))
}

/// The process that made a swap name, as a log id (stamp, pid and host;
/// writer 0) so [`LogId::writer_may_be_alive`] can judge it.
pub fn swap_owner(name: &str) -> Option<LogId> {
    owner_fields(name.strip_prefix(SWAP_CONTAINER_PREFIX)?)
}

/// `<hash>.<stamp>.<pid>.<host>` after a swap or removed name's prefix.
fn owner_fields(rest: &str) -> Option<LogId> {
    let fields: Vec<&str> = rest.split('.').collect();
    let [_, stamp, pid, host] = fields[..] else { return None };
    Some(LogId {
        stamp: hex_u64(stamp, 16)?,
        writer: 0,
        pid: u32::try_from(hex_u64(pid, 8)?).ok()?,
        host: u32::try_from(hex_u64(host, 8)?).ok()?,
    })
}

/// Name the plfs copy of the PLFS 2.5 file `file_name` takes beside it
/// while `plfs migrate` builds it (`verified` false) and once every byte
/// was checked against the 2.5 file (`verified` true); after the switch
/// the verified name holds what the copy displaced. The file name is kept
/// whole (not hashed) so a rerun or `plfs recover` of the file finds its
/// migration by listing the directory; process and host say whether the
/// migrating process may still be running.
pub fn migration_name(verified: bool, file_name: &str, owner: &LogId) -> String {
    let prefix = if verified { MIGRATED_PREFIX } else { MIGRATING_PREFIX };
    format!("{prefix}{:016x}.{:08x}.{:08x}.{file_name}", owner.stamp, owner.pid, owner.host)
}

/// A migration name: whether verified, the migrating process (as a log id
/// with stamp, pid and host) and the file it is for.
pub fn parse_migration_name(name: &str) -> Option<(bool, LogId, &str)> {
    let (verified, rest) = match name.strip_prefix(MIGRATED_PREFIX) {
        Some(rest) => (true, rest),
        None => (false, name.strip_prefix(MIGRATING_PREFIX)?),
    };
    let mut fields = rest.splitn(4, '.');
    let (stamp, pid, host, file) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let owner = LogId {
        stamp: hex_u64(stamp, 16)?,
        writer: 0,
        pid: u32::try_from(hex_u64(pid, 8)?).ok()?,
        host: u32::try_from(hex_u64(host, 8)?).ok()?,
    };
    (!file.is_empty()).then_some((verified, owner, file))
}

/// Name of the switch intent (format::switch) of the file `file_name`
/// beside it: fixed per name, so a lookup that finds neither file at the
/// name can ask for it directly, without listing the directory.
pub fn switch_intent_name(file_name: &str) -> String {
    format!("{SWITCH_INTENT_PREFIX}{file_name}")
}

/// Name an n-n file is copied under on its new backend while a rename
/// moves it between backends; published by a rename once complete.
pub fn moving_file_name(file_name: &str, stamp: u64, pid: u32) -> String {
    format!("{MOVING_FILE_PREFIX}{:08x}.{stamp:016x}.{pid:08x}", name_hash(file_name))
}

/// Whether `name` is a copy an n-n rename between backends makes (or the
/// replaced file it swaps out): hidden, and debris once its process stopped.
pub fn is_moving_file(name: &str) -> bool {
    name.starts_with(MOVING_FILE_PREFIX)
}

/// An extended attribute's name as a path component: `%` and `/` are
/// percent-encoded, everything else is kept so names stay readable.
pub fn xattr_component(name: &str) -> Result<String> {
    if name.is_empty() {
        return Err(Error::invalid("empty extended attribute name"));
    }
    let mut encoded = String::with_capacity(name.len());
    for character in name.chars() {
        match character {
            '%' => encoded.push_str("%25"),
            '/' => encoded.push_str("%2F"),
            '\0' => return Err(Error::invalid("extended attribute name contains NUL")),
            other => encoded.push(other),
        }
    }
    if encoded == "." || encoded == ".." {
        encoded = encoded.replace('.', "%2E");
    }
    Ok(encoded)
}

/// The attribute name a component encodes; None if it is not one.
pub fn parse_xattr_component(component: &str) -> Option<String> {
    let mut decoded = String::with_capacity(component.len());
    let mut rest = component;
    while let Some(index) = rest.find('%') {
        decoded.push_str(&rest[..index]);
        let code = rest.get(index + 1..index + 3)?;
        decoded.push(match code {
            "25" => '%',
            "2F" => '/',
            "2E" => '.',
            _ => return None,
        });
        rest = &rest[index + 3..];
    }
    decoded.push_str(rest);
    Some(decoded)
}

/// Name of the file holding a directory's attribute `name`, in that directory.
pub fn dir_xattr_name(name: &str) -> Result<String> {
    Ok(format!("{DIR_XATTR_PREFIX}{}", xattr_component(name)?))
}

/// The attribute a directory entry holds, if it is one of plfs's.
pub fn parse_dir_xattr_name(entry: &str) -> Option<String> {
    parse_xattr_component(entry.strip_prefix(DIR_XATTR_PREFIX)?)
}

/// Whether a name in a logical directory is plfs's own. Every name plfs
/// hides in a logical directory starts with [`RESERVED_PREFIX`], so this one
/// test covers them all, including prefixes added later.
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// Refuses a path that would make an entry under a reserved name: readdir
/// hides such names and `plfs recover --fix` deletes some as crash debris,
/// so a user's entry there would vanish and then be lost. Every call that
/// makes a name (create, mkdir, symlink, rename's target) checks here.
pub fn check_user_path(path: &StorePath) -> Result<()> {
    match path.components().find(|component| is_reserved(component)) {
        Some(reserved) => Err(Error::invalid(format!(
            "/{path}: {reserved:?} is a reserved name (names starting {RESERVED_PREFIX} are plfs's own)"
        ))),
        None => Ok(()),
    }
}

/// Whether `name` is a container being removed (left by a crashed unlink).
pub fn is_removed(name: &str) -> bool {
    name.starts_with(REMOVED_CONTAINER_PREFIX)
}

/// Whether `name` is a half-built container (left by a crashed creator).
pub fn is_new_container(name: &str) -> bool {
    name.starts_with(NEW_CONTAINER_PREFIX)
}

/// Paths inside one container directory on one backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPaths {
    pub dir: StorePath,
}

impl ContainerPaths {
    pub fn new(dir: StorePath) -> ContainerPaths {
        ContainerPaths { dir }
    }

    fn child(&self, name: &str) -> StorePath {
        // Names built in this module are always valid components.
        self.dir.join(name).expect("layout names are valid path components")
    }

    pub fn access(&self) -> StorePath {
        self.child(ACCESS)
    }

    pub fn version(&self) -> StorePath {
        self.child(VERSION)
    }

    pub fn xattr_dir(&self) -> StorePath {
        self.child(XATTR_DIR)
    }

    pub fn rename_intent(&self) -> StorePath {
        self.child(RENAME_INTENT)
    }

    pub fn global_index(&self) -> StorePath {
        self.child(GLOBAL_INDEX)
    }

    pub fn layout(&self) -> StorePath {
        self.child(LAYOUT)
    }

    pub fn stripes(&self, component: u32) -> StorePath {
        self.child(&stripes_name(component))
    }

    pub fn meta_dir(&self) -> StorePath {
        self.child(META_DIR)
    }

    pub fn meta(&self, name: &str) -> Result<StorePath> {
        self.meta_dir().join(name)
    }

    /// The closed summary (FORMAT.md §6.1). Not a meta record: its name
    /// parses as neither an open nor a size record, so listings skip it.
    pub fn closed_summary(&self) -> StorePath {
        self.meta_dir().join(CLOSED_SUMMARY).expect("layout names are valid path components")
    }

    pub fn hostdir(&self, hostdir: HostdirId) -> StorePath {
        self.child(&hostdir_name(hostdir))
    }

    pub fn log(&self, hostdir: HostdirId, kind: LogKind, log: &LogId) -> StorePath {
        self.hostdir(hostdir).join(&log_name(kind, log)).expect("layout names are valid path components")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn log_id() -> impl Strategy<Value = LogId> {
        (any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>())
            .prop_map(|(stamp, writer, pid, host)| LogId { stamp, writer, pid, host })
    }

    proptest! {
        #[test]
        fn log_names_round_trip(id in log_id(), data in any::<bool>()) {
            let kind = if data { LogKind::Data } else { LogKind::Index };
            let name = log_name(kind, &id);
            prop_assert!(name.len() <= 255);
            prop_assert_eq!(parse_log_name(&name), Some((kind, id)));
        }

        #[test]
        fn size_records_round_trip(
            id in log_id(), max_end in any::<u64>(), bytes in any::<u64>(),
            last_stamp in any::<u64>(), truncate in proptest::option::of((1u64.., any::<u64>()))
        ) {
            let record = SizeRecord { log: id, max_end, bytes, last_stamp, truncate };
            let name = record.name();
            prop_assert!(name.len() <= 255, "{} bytes", name.len());
            prop_assert_eq!(parse_meta_name(&name).unwrap().unwrap(), MetaEntry::Size(record));
        }

        #[test]
        fn stripes_names_round_trip(c in any::<u32>()) {
            prop_assert_eq!(classify_container_entry(&stripes_name(c)), ContainerEntry::Stripes(c));
        }

        #[test]
        fn hostdir_names_round_trip(n in 0u32..1024) {
            prop_assert_eq!(parse_hostdir_name(&hostdir_name(HostdirId(n))), Some(HostdirId(n)));
        }
    }

    proptest! {
        #[test]
        fn xattr_names_round_trip(name in "[a-z./%\\\\ ]{1,40}") {
            let component = xattr_component(&name).unwrap();
            crate::store::path::validate_component(&component).unwrap();
            prop_assert_eq!(parse_xattr_component(&component), Some(name.clone()));
            prop_assert_eq!(parse_dir_xattr_name(&dir_xattr_name(&name).unwrap()), Some(name));
        }
    }

    #[test]
    fn open_records_round_trip() {
        let id = LogId::new(5, 6, 7, "host.with.dots");
        assert_eq!(parse_meta_name(&open_record_name(&id)).unwrap().unwrap(), MetaEntry::Open(id));
    }

    #[test]
    fn damaged_size_record_names_are_rejected() {
        let record = SizeRecord {
            log: LogId::new(1, 2, 3, "h"),
            max_end: 100,
            bytes: 100,
            last_stamp: 9,
            truncate: None,
        };
        let name = record.name();
        let damaged = name.replacen("0000000000000064", "0000000000000065", 1);
        assert_ne!(damaged, name);
        let error = parse_meta_name(&damaged).unwrap().unwrap_err();
        assert!(error.to_string().contains("checksum"), "{error}");
    }

    #[test]
    fn foreign_names_are_not_misread() {
        for name in ["data.x", "index.", "hostdir.", "hostdir.01", "hostdir.12345", "hostdir.-1", "notes.txt"]
        {
            assert_eq!(parse_log_name(name), None, "{name}");
            if name.starts_with("hostdir") {
                assert_eq!(parse_hostdir_name(name), None, "{name}");
            }
        }
        assert_eq!(classify_container_entry("hostdir.7"), ContainerEntry::Hostdir(HostdirId(7)));
        assert_eq!(classify_container_entry("README"), ContainerEntry::Unknown);
        assert!(parse_meta_name("open.garbage").is_none());
        assert!(is_reserved(&new_container_name(&"x".repeat(255), 1, 2)));
        let swap = swap_container_name(&"x".repeat(255), 7, 8, "host.a");
        assert!(is_reserved(&swap) && is_swap(&swap) && !is_removed(&swap));
        assert_eq!(swap_owner(&swap), Some(LogId::new(7, 0, 8, "host.a")));
        assert_eq!(swap_owner(".plfs-swap.garbage"), None);
        let removed = removed_container_name(&"x".repeat(255), 7, 8, "host.a");
        assert!(is_reserved(&removed) && is_removed(&removed) && !is_swap(&removed));
        assert_eq!(removed_owner(&removed), Some(LogId::new(7, 0, 8, "host.a")));
        // Names from before the host field: no owner to ask about.
        assert_eq!(removed_owner(".plfs-gone.0000002a.0000000000000007.00000008"), None);
        assert_eq!(removed_owner(".plfs-gone.0"), None);
    }

    #[test]
    fn a_reclaim_name_tells_which_file_it_may_be_of() {
        let reclaim = reclaim_name("checkpoint.7", 0x1234, 99);
        assert!(reclaim_may_be_of(&reclaim, "checkpoint.7"));
        assert!(!reclaim_may_be_of(&reclaim, "checkpoint.8"));
        assert!(!reclaim_may_be_of("checkpoint.7", "checkpoint.7"));
        assert!(!reclaim_may_be_of(".plfs-reclaim.zz.1.2", "checkpoint.7"));
    }

    #[test]
    fn every_hidden_name_is_reserved_and_refused_for_users() {
        let hidden = [
            new_container_name("f", 1, 2),
            removed_container_name("f", 1, 2, "host.a"),
            reclaim_name("f", 1, 2),
            moving_file_name("f", 1, 2),
            dir_xattr_name("user.a").unwrap(),
            smallfile::CONTAINER_DIR.to_owned(),
        ];
        for name in hidden {
            assert!(is_reserved(&name), "{name}");
            let path = StorePath::parse(&format!("d/{name}")).unwrap();
            let error = check_user_path(&path).unwrap_err();
            assert_eq!(error.kind(), crate::error::ErrorKind::InvalidInput);
            assert!(error.to_string().contains(&format!("/d/{name}")), "{error}");
            let below = StorePath::parse(&format!("{name}/f")).unwrap();
            assert!(check_user_path(&below).is_err(), "{below}");
        }
        check_user_path(&StorePath::parse("d/.plfs/plfs-new.1/access").unwrap()).unwrap();
    }
}
