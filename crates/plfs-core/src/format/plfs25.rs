//! What plfs reads of PLFS 2.5's on-disk format (docs/FORMAT.md, "PLFS 2.5
//! containers"): the names inside a 2.5 container, its 48-byte index
//! entries, the flattened `global.index`, metalink texts, and the backend
//! hash 2.5 placed containers with.
//!
//! 2.5 wrote raw C structs in the writer's byte order, unversioned and
//! unchecksummed. Every site that ran it was x86_64 Linux, so the entries
//! are decoded as little-endian 64-bit layouts; a partial trailing entry is
//! ignored, as 2.5 ignored it. plfs only reads this format (and writes it in
//! the fixture generator, under `cfg(test)`), never in production.

use crate::error::{Error, Result};

/// The zero-length file whose presence makes a directory a 2.5 container;
/// its mode, owner and times are the file's.
pub const ACCESS_FILE: &str = ".plfsaccess113918400";
pub const META_DIR: &str = "meta";
pub const GLOBAL_INDEX: &str = "global.index";
pub const HOSTDIR_PREFIX: &str = "hostdir.";
pub const INDEX_PREFIX: &str = "dropping.index.";
pub const DATA_PREFIX: &str = "dropping.data.";
pub const OPEN_PREFIX: &str = "open.";
pub const VERSION_PREFIX: &str = "version";

/// Bytes of one `HostEntry` (and of a `ContainerEntry`, which keeps its
/// extra field in the tail padding): 5 x 8-byte fields, a 4-byte pid, 4
/// bytes of padding.
pub const ENTRY_BYTES: usize = 48;

/// One index entry: `length` bytes at `logical` are at `physical` in the
/// data dropping of writer `id`. Zero length marks an end of file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub begin: f64,
    pub end: f64,
    /// In an index dropping the writer's pid; in a global index the slot
    /// of the data dropping in its chunk list.
    pub id: i32,
    /// The padding word: a global index keeps the writer's pid there
    /// (`original_chunk`), the last tie-break between overlapping writes.
    pub tail: i32,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl Entry {
    pub fn decode(bytes: &[u8]) -> Entry {
        Entry {
            logical: u64_at(bytes, 0),
            physical: u64_at(bytes, 8),
            length: u64_at(bytes, 16),
            begin: f64::from_bits(u64_at(bytes, 24)),
            end: f64::from_bits(u64_at(bytes, 32)),
            id: i32_at(bytes, 40),
            tail: i32_at(bytes, 44),
        }
    }

    /// For the fixture generator: plfs never writes 2.5's format.
    #[cfg(test)]
    pub fn encode(&self, out: &mut Vec<u8>) {
        for word in [self.logical, self.physical, self.length, self.begin.to_bits(), self.end.to_bits()] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.tail.to_le_bytes());
    }
}

/// The whole entries of an index dropping (a partial trailing one, which a
/// writer killed mid-write leaves, is ignored).
pub fn decode_entries(bytes: &[u8]) -> Vec<Entry> {
    bytes.chunks_exact(ENTRY_BYTES).map(Entry::decode).collect()
}

/// A flattened index: `u64 count | count entries | "<path>\n"... | NUL`.
/// Entry ids index `chunks`, the data droppings' absolute physical paths
/// (with the IOStore prefix, e.g. `posix:`, when the backend had one).
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalIndex {
    pub entries: Vec<Entry>,
    pub chunks: Vec<String>,
}

impl GlobalIndex {
    pub fn decode(bytes: &[u8], what: &str) -> Result<GlobalIndex> {
        let corrupt = |why: &str| Error::corrupt(format!("{what}: not a PLFS 2.5 global index: {why}"));
        if bytes.len() < 8 {
            return Err(corrupt("shorter than its entry count"));
        }
        let count = u64_at(bytes, 0);
        let entries_end = usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(ENTRY_BYTES))
            .and_then(|length| length.checked_add(8))
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| corrupt(&format!("{count} entries do not fit in {} bytes", bytes.len())))?;
        let entries = decode_entries(&bytes[8..entries_end]);
        let paths = &bytes[entries_end..];
        let paths = &paths[..paths.iter().position(|byte| *byte == 0).unwrap_or(paths.len())];
        let text = std::str::from_utf8(paths).map_err(|_| corrupt("a chunk path is not UTF-8"))?;
        let chunks: Vec<String> =
            text.split('\n').filter(|path| !path.is_empty()).map(str::to_owned).collect();
        if let Some(entry) = entries.iter().find(|entry| entry.id < 0 || entry.id as usize >= chunks.len()) {
            return Err(corrupt(&format!(
                "an entry at offset {} names chunk {} of {}",
                entry.logical,
                entry.id,
                chunks.len()
            )));
        }
        Ok(GlobalIndex { entries, chunks })
    }

    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = (self.entries.len() as u64).to_le_bytes().to_vec();
        for entry in &self.entries {
            entry.encode(&mut out);
        }
        for chunk in &self.chunks {
            out.extend_from_slice(chunk.as_bytes());
            out.push(b'\n');
        }
        out.push(0);
        out
    }
}

/// A dropping's name: `dropping.{index,data}.<sec>.<usec>.<host>.<pid>`.
/// The host may contain dots, so the pid is after the last one and the
/// stamp is the first two fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppingName {
    pub index: bool,
    /// `<sec>.<usec>`, as written (shared by an open's index and data).
    pub stamp: String,
    pub host: String,
    pub pid: i32,
}

impl DroppingName {
    pub fn parse(name: &str) -> Option<DroppingName> {
        let (index, rest) = if let Some(rest) = name.strip_prefix(INDEX_PREFIX) {
            (true, rest)
        } else {
            (false, name.strip_prefix(DATA_PREFIX)?)
        };
        let (rest, pid) = rest.rsplit_once('.')?;
        let pid = pid.parse().ok()?;
        let mut fields = rest.splitn(3, '.');
        let (sec, usec, host) = (fields.next()?, fields.next()?, fields.next()?);
        if sec.parse::<u64>().is_err() || usec.parse::<u64>().is_err() || host.is_empty() {
            return None;
        }
        Some(DroppingName { index, stamp: format!("{sec}.{usec}"), host: host.to_owned(), pid })
    }

    pub fn name(&self) -> String {
        let prefix = if self.index { INDEX_PREFIX } else { DATA_PREFIX };
        format!("{prefix}{}.{}.{}", self.stamp, self.host, self.pid)
    }

    /// The data dropping of writer `pid` that an index dropping's entries
    /// point into (2.5's `indexpath2chunkpath`).
    pub fn data_of(&self, pid: i32) -> DroppingName {
        DroppingName { index: false, pid, ..self.clone() }
    }
}

/// A size record in `meta/`: `<last_offset>.<bytes>.<sec>.<sub>.<host>`,
/// written at close. `<sub>` is microseconds, except in the names a
/// truncate renamed, which carry nanoseconds (2.5 multiplied before
/// printing): a value past 999,999 can only be nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaName {
    pub last_offset: u64,
    pub bytes: u64,
    pub mtime_ns: u64,
    pub host: String,
}

impl MetaName {
    pub fn parse(name: &str) -> Option<MetaName> {
        let mut fields = name.splitn(5, '.');
        let last_offset = fields.next()?.parse().ok()?;
        let bytes = fields.next()?.parse().ok()?;
        let sec: u64 = fields.next()?.parse().ok()?;
        let sub: u64 = fields.next()?.parse().ok()?;
        let host = fields.next()?.to_owned();
        let sub_ns = if sub > 999_999 { sub } else { sub * 1000 };
        Some(MetaName { last_offset, bytes, mtime_ns: sec * 1_000_000_000 + sub_ns, host })
    }
}

/// The host of an open record `open.<host>.<pid>`.
pub fn open_record_host(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(OPEN_PREFIX)?;
    let (host, pid) = rest.rsplit_once('.')?;
    pid.parse::<i64>().ok().map(|_| host)
}

/// The release and data version of a `version-tag.<x.y.z>-dat.<d>-chk.<n>`
/// dropping.
pub fn parse_version_name(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix("version-tag.")?;
    let (tag, rest) = rest.split_once("-dat.")?;
    let (data, _checksum) = rest.split_once("-chk.")?;
    Some((tag.to_owned(), data.to_owned()))
}

/// A metalink's text: the length of the canonical backend's path, then the
/// shadow backend (with any IOStore prefix), e.g. `23/pana/volume12/store`.
/// The hostdir it names is the shadow backend joined with the metalink's
/// own physical path after that many bytes.
pub fn parse_metalink(text: &str) -> Option<(usize, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (length, backend) = text.split_at(digits);
    if backend.is_empty() {
        return None;
    }
    Some((length.parse().ok()?, backend))
}

/// The IOStore prefix of a 2.5 physical path stripped: `posix:/a` and
/// `/a` are both the POSIX path `/a`; other stores (hdfs, pvfs) are not
/// POSIX paths (None).
pub fn posix_path(physical: &str) -> Option<&str> {
    let path = physical.strip_prefix("posix:").unwrap_or(physical);
    let path = path.strip_prefix("//").filter(|rest| rest.starts_with('/')).unwrap_or(path);
    path.starts_with('/').then_some(path)
}

/// 2.5's `Util::hashValue` (sdbm), as it was computed: in an unsigned long.
pub fn sdbm(name: &str) -> u64 {
    name.bytes().fold(0u64, |sum, byte| {
        u64::from(byte).wrapping_add(sum << 6).wrapping_add(sum << 16).wrapping_sub(sum)
    })
}

/// Which of `count` backends 2.5 put a file named `name` on: the hash cut
/// to a signed 32-bit int, taken modulo `count` (C's remainder keeps the
/// sign), and a negative slot counted from the end of the list.
pub fn backend_slot(name: &str, count: usize) -> usize {
    let hash = sdbm(name) as u32 as i32;
    let slot = hash % count as i32;
    if slot < 0 { (count as i32 + slot) as usize } else { slot as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_dotted_hosts() {
        let name = DroppingName::parse("dropping.index.1700000000.123456.node1.lanl.gov.4242").unwrap();
        assert_eq!(
            (name.index, name.stamp.as_str(), name.host.as_str(), name.pid),
            (true, "1700000000.123456", "node1.lanl.gov", 4242)
        );
        assert_eq!(name.data_of(7).name(), "dropping.data.1700000000.123456.node1.lanl.gov.7");
        assert_eq!(DroppingName::parse("dropping.data.x.1.h.2"), None);
        let meta = MetaName::parse("4096.4096.1700000000.250000.n1.lanl.gov").unwrap();
        assert_eq!(
            (meta.last_offset, meta.mtime_ns, meta.host.as_str()),
            (4096, 1_700_000_000_250_000_000, "n1.lanl.gov")
        );
        // A truncate's rename prints nanoseconds.
        assert_eq!(
            MetaName::parse("10.10.1700000000.250000000.h").unwrap().mtime_ns,
            1_700_000_000_250_000_000
        );
        assert_eq!(open_record_host("open.n1.lanl.gov.77"), Some("n1.lanl.gov"));
        assert_eq!(parse_metalink("23/pana/volume12/.plfs_store"), Some((23, "/pana/volume12/.plfs_store")));
        assert_eq!(parse_metalink("23"), None);
        assert_eq!(
            parse_version_name("version-tag.2.5.1-dat.1.0-chk.77"),
            Some(("2.5.1".into(), "1.0".into()))
        );
        assert_eq!(posix_path("posix:/b/x"), Some("/b/x"));
        assert_eq!(posix_path("hdfs://h:8000/x"), None);
    }

    #[test]
    fn backend_slot_counts_negative_remainders_from_the_end() {
        // sdbm("a") = 97: positive. A long name overflows into the sign bit.
        assert_eq!(backend_slot("a", 3), 97 % 3);
        let negative =
            (0..200).map(|i| format!("file{i}")).find(|name| (sdbm(name) as u32 as i32) < 0).unwrap();
        let hash = sdbm(&negative) as u32 as i32;
        assert_eq!(backend_slot(&negative, 5) as i32, 5 + hash % 5);
    }

    #[test]
    fn entries_and_global_index_round_trip() {
        let entry = Entry { logical: 1, physical: 2, length: 3, begin: 4.5, end: 6.25, id: 0, tail: 99 };
        let global = GlobalIndex {
            entries: vec![entry],
            chunks: vec!["/b0/f/hostdir.1/dropping.data.1.2.h.99".into()],
        };
        let bytes = global.encode();
        assert_eq!(bytes.len(), 8 + ENTRY_BYTES + global.chunks[0].len() + 2);
        assert_eq!(GlobalIndex::decode(&bytes, "g").unwrap(), global);
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert!(GlobalIndex::decode(&bad, "g").unwrap_err().to_string().contains("9 entries"));
    }
}
