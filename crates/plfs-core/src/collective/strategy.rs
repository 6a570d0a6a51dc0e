//! The ways M reader ranks can open a file written by N writers, after
//! "Boosting PLFS read performance" §3 (Fig 2):
//!
//! - [`Strategy::Naive`]: every rank lists and reads all N index logs
//!   itself: N·M opens hit the backends at once.
//! - [`Strategy::Broadcast`]: rank 0 reads the N index logs, merges, and
//!   broadcasts the merged index: N opens, all on one rank.
//! - [`Strategy::Parallel`]: rank 0 lists the logs and broadcasts the
//!   list; every rank reads its share; groups (the ranks of one node)
//!   gather to their leader, leaders exchange among themselves, merge,
//!   and broadcast to their group: N opens, spread over the ranks.
//! - [`Strategy::Flatten`]: rank 0 reads the global index `plfs flatten`
//!   wrote (1 open) and broadcasts it; when there is none or it is stale,
//!   it says why and does what broadcast does.
//! - [`Strategy::UniformRestart`]: no exchange at all; rank r reads only
//!   the index logs whose writer id is r (PLFS 2.5's `plfs_uniform_restart`
//!   MPI-IO hint, for a restart on as many ranks as wrote, each reading
//!   back what it wrote). Bytes other writers wrote read as holes. Not in
//!   [`Strategy::ALL`]: it opens part of the file, not all of it.
//! - [`Strategy::Auto`]: broadcast or parallel, whichever costs fewer round
//!   trips on the busiest rank for this file's index logs and this many
//!   ranks ([`auto_broadcasts`]); rank 0 decides after listing the logs and
//!   says which in the message both strategies start with, so the choice
//!   costs no round. The default when the caller names none. Not in
//!   [`Strategy::ALL`]: it is one of them.
//!
//! Files of an n-n (file_per_proc) or 1-n (small_file) mount have no index
//! logs: every strategy opens them as an ordinary read-only open, on each
//! rank, with no exchange.
//!
//! Errors never strand a rank in a collective: whatever a rank sends is an
//! outcome (the payload, or the error it hit), so every rank knows as soon
//! as any rank it depends on has failed, and returns an error naming the
//! path instead of waiting for bytes that will not come.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use super::Comm;
use super::exchange::{GlobalIndexState, IndexLogList, IndexPart, SharedIndex};
use crate::error::{Error, ErrorKind, Result, ResultExt};
use crate::fs::{FileHandle, Plfs};
use crate::open::{OpenFlags, WriterId};
use crate::store::StorePath;

/// Chooses the strategy when the caller does not (`naive`, `broadcast`,
/// `parallel`, `flatten` or `uniform_restart`). Must be the same on every
/// rank.
pub const STRATEGY_ENV: &str = "PLFS_OPEN_STRATEGY";

/// Ranks per group of the parallel index read, consecutive ranks forming
/// a group; the default is the ranks of one node ([`node_groups`]). Must
/// be the same on every rank.
pub const GROUP_RANKS_ENV: &str = "PLFS_OPEN_GROUP_RANKS";

/// How a collective open builds the merged index every rank needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    Naive,
    Broadcast,
    Parallel,
    Flatten,
    UniformRestart,
    Auto,
}

impl Strategy {
    pub const ALL: [Strategy; 4] =
        [Strategy::Naive, Strategy::Broadcast, Strategy::Parallel, Strategy::Flatten];

    /// The paper's choice for PLFS through MPI-IO (parallel: nearly the
    /// read speed of a flattened index without the cost at write close),
    /// except where the file has so few index logs that reading them all on
    /// rank 0 is cheaper than the parallel read's extra rounds.
    pub const DEFAULT: Strategy = Strategy::Auto;

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::Broadcast => "broadcast",
            Strategy::Parallel => "parallel",
            Strategy::Flatten => "flatten",
            Strategy::UniformRestart => "uniform_restart",
            Strategy::Auto => "auto",
        }
    }

    /// [`STRATEGY_ENV`] if set, else `default`; an unknown name is an error
    /// rather than a silent fallback, since ranks that disagree would hang.
    pub fn from_environment(default: Strategy) -> Result<Strategy> {
        match std::env::var(STRATEGY_ENV) {
            Ok(name) if !name.is_empty() => name.parse().context(format!("${STRATEGY_ENV}")),
            _ => Ok(default),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Strategy {
    type Err = Error;

    fn from_str(text: &str) -> Result<Strategy> {
        Strategy::ALL
            .into_iter()
            .chain([Strategy::UniformRestart, Strategy::Auto])
            .find(|strategy| strategy.as_str() == text)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown open strategy {text:?} (expected naive, broadcast, parallel, flatten, uniform_restart or auto)"
                ))
            })
    }
}

/// Everything a collective open can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectiveOptions {
    pub strategy: Strategy,
    /// Ranks per group for [`Strategy::Parallel`]; None: by node
    /// ([`node_groups`]).
    pub group_ranks: Option<usize>,
}

impl CollectiveOptions {
    /// `strategy`, with the group size from [`GROUP_RANKS_ENV`] if set.
    pub fn from_environment(strategy: Strategy) -> Result<CollectiveOptions> {
        let group_ranks = match std::env::var(GROUP_RANKS_ENV) {
            Ok(text) if !text.is_empty() => match text.parse::<usize>() {
                Ok(ranks) if ranks > 0 => Some(ranks),
                _ => {
                    return Err(Error::invalid(format!(
                        "${GROUP_RANKS_ENV}={text:?} is not a positive count"
                    )));
                }
            },
            _ => None,
        };
        Ok(CollectiveOptions { strategy, group_ranks })
    }
}

/// Opens `path` read-only on every rank of `comm` with `strategy`; every
/// rank must call it with the same path and strategy. The group size of
/// the parallel read comes from [`GROUP_RANKS_ENV`].
pub fn open_collective(
    plfs: &Plfs,
    path: &str,
    comm: &dyn Comm,
    strategy: Strategy,
    writer: WriterId,
) -> Result<FileHandle> {
    let options = CollectiveOptions::from_environment(strategy)?;
    open_collective_with(plfs, path, comm, &options, writer)
}

/// [`open_collective`] with every option explicit.
pub fn open_collective_with(
    plfs: &Plfs,
    path: &str,
    comm: &dyn Comm,
    options: &CollectiveOptions,
    writer: WriterId,
) -> Result<FileHandle> {
    assert!(comm.rank() < comm.size(), "rank {} of {} ranks", comm.rank(), comm.size());
    if plfs.files().containers().is_none() {
        // Collective open is a container capability. An n-n file is one
        // plain file and a 1-n file a name in its
        // directory's view: there is no index for ranks to share, and an
        // ordinary open is already the cheap case the strategies aim at.
        // Every rank decides from its own mount's workload, without
        // talking, so no rank waits on a broadcast the others skip (given
        // one plfsrc for all ranks, as MPI jobs have). The writers' (collective)
        // close came before this open on every rank, so what they published
        // must show even where this process cached the directory before:
        // a 1-n view is dropped first (a no-op on n-n).
        let parent = StorePath::parse(path)?.parent().unwrap_or_default();
        plfs.invalidate_read_cache(parent.as_str())?;
        return open_naive(plfs, path, writer);
    }
    // A PLFS 2.5 file has none of plfs's index logs to share: each rank
    // reads its 2.5 index itself. Only rank 0 looks (one lookup, not M):
    // its first message says so instead of carrying an index or a list.
    // A naive open is what a 2.5 file gets anyway, so it does not look;
    // uniform restart sends no message, so each of its ranks looks itself.
    let index = match options.strategy {
        Strategy::Naive => return open_naive(plfs, path, writer),
        Strategy::Broadcast => broadcast_from_root(plfs, path, comm, |plfs| read_whole_index(plfs, path))?,
        Strategy::Flatten => broadcast_from_root(plfs, path, comm, |plfs| read_flattened(plfs, path))?,
        Strategy::Parallel => parallel_read(plfs, path, comm, options.group_ranks, false)?,
        Strategy::Auto => parallel_read(plfs, path, comm, options.group_ranks, true)?,
        Strategy::UniformRestart if plfs.is_plfs25(path)? => Shared::Plfs25,
        Strategy::UniformRestart => Shared::Index(read_own_logs(plfs, path, comm.rank())?),
    };
    match index {
        Shared::Index(index) => plfs.open_with_index(path, writer, index),
        Shared::Plfs25 => open_naive(plfs, path, writer),
    }
}

/// What a collective open's exchange gives every rank: the merged index,
/// or rank 0's word that the file is a PLFS 2.5 file each rank opens
/// itself.
enum Shared {
    Index(SharedIndex),
    Plfs25,
}

/// Rank 0's first message, when the file is a PLFS 2.5 file: this status
/// byte alone, in place of the index or the log list.
const OUTCOME_PLFS25: u8 = 2;

/// Rank 0's first message when its 2.5 check said yes, or failed (which
/// every rank must hear rather than wait for an index).
fn plfs25_message(checked: &Result<bool>, root: usize) -> Vec<u8> {
    match checked {
        Ok(_) => vec![OUTCOME_PLFS25],
        Err(error) => outcome(Err(error), root),
    }
}

/// Whether rank 0's first message says the file is a 2.5 file.
fn says_plfs25(bytes: &[u8]) -> bool {
    bytes == [OUTCOME_PLFS25]
}

/// Rank 0's first message under [`Strategy::Auto`] when it chose to
/// broadcast: this status byte, then the merged index (where the parallel
/// read's message has [`OUTCOME_OK`] and the log list).
const OUTCOME_INDEX: u8 = 3;

/// The collective rounds the parallel read makes after its first message
/// and the broadcast strategy does not: the host-name allgather (none when
/// the group size is given), two splits, the gather to the group leaders,
/// the leaders' allgather and the leaders' broadcast to their groups.
pub fn parallel_extra_rounds(group_ranks_given: bool) -> usize {
    5 + usize::from(!group_ranks_given)
}

/// [`Strategy::Auto`]'s rule: whether `ranks` ranks open a file of `logs`
/// index logs by broadcast (rank 0 reads every log) rather than by the
/// parallel read (each rank reads its share). Broadcast costs rank 0, the
/// busiest rank, `logs − ⌈logs/ranks⌉` more index-log opens than the
/// parallel read does; the parallel read costs every rank
/// [`parallel_extra_rounds`] more collective rounds. An open and a round
/// are each at least one round trip (to a metadata server, to the other
/// ranks), so broadcast wins while its extra opens are no more than the
/// parallel read's extra rounds: up to 7 logs at any rank count, any
/// number on one rank. The weighing is cautious: with more ranks than free
/// cores a round costs far more than a round trip (a wait until every
/// rank has been scheduled, 10-15 ms each on 2 cores), and an index log
/// read on a local disk far less.
pub fn auto_broadcasts(logs: usize, ranks: usize, group_ranks_given: bool) -> bool {
    let ranks = ranks.max(1);
    logs - logs.div_ceil(ranks) <= parallel_extra_rounds(group_ranks_given)
}

/// The reference behaviour: an ordinary open whose index is built before
/// it returns, so its cost is counted where the other strategies pay it.
fn open_naive(plfs: &Plfs, path: &str, writer: WriterId) -> Result<FileHandle> {
    let handle = plfs.open(path, OpenFlags::RDONLY, 0, writer)?;
    // An empty read builds the index (and opens no data log).
    handle.read(&mut [], 0)?;
    Ok(handle)
}

/// Uniform restart: the index logs written by writer id `rank` only, read
/// by this rank alone (no communication).
fn read_own_logs(plfs: &Plfs, path: &str, rank: usize) -> Result<SharedIndex> {
    let list = plfs.index_logs(path)?;
    let own: Vec<_> = list.logs.into_iter().filter(|log| log.id.writer == rank as u64).collect();
    let part = plfs.read_index_part(path, &own)?;
    plfs.merge_index_parts(path, [part])
}

/// Lists and reads every index log on this rank alone.
fn read_whole_index(plfs: &Plfs, path: &str) -> Result<SharedIndex> {
    let list = plfs.index_logs(path)?;
    let part = plfs.read_index_part(path, &list.logs)?;
    plfs.merge_index_parts(path, [part])
}

/// The global index when it is valid; otherwise says why not and reads
/// the index logs.
fn read_flattened(plfs: &Plfs, path: &str) -> Result<SharedIndex> {
    match plfs.read_global_index(path)? {
        GlobalIndexState::Valid(index) => Ok(index),
        GlobalIndexState::Missing => {
            tracing::warn!("{path}: no global index (never flattened); rank 0 reads the index logs instead");
            read_whole_index(plfs, path)
        }
        GlobalIndexState::Ignored(reason) => {
            tracing::warn!("{path}: global index not used: {reason}; rank 0 reads the index logs instead");
            read_whole_index(plfs, path)
        }
    }
}

/// Rank 0 builds the index with `build` and sends it to every rank; rank 0
/// keeps the one it built rather than decoding its own bytes.
fn broadcast_from_root(
    plfs: &Plfs,
    path: &str,
    comm: &dyn Comm,
    build: impl FnOnce(&Plfs) -> Result<SharedIndex>,
) -> Result<Shared> {
    const ROOT: usize = 0;
    if comm.rank() == ROOT {
        match plfs.is_plfs25(path) {
            Ok(false) => {}
            checked => {
                let mut bytes = plfs25_message(&checked, ROOT);
                comm.broadcast(ROOT, &mut bytes).context(path.to_owned())?;
                return checked.map(|_| Shared::Plfs25);
            }
        }
        let built = build(plfs);
        let mut bytes = outcome(built.as_ref().map(SharedIndex::encode), ROOT);
        comm.broadcast(ROOT, &mut bytes).context(path.to_owned())?;
        built.map(Shared::Index)
    } else {
        let mut bytes = Vec::new();
        comm.broadcast(ROOT, &mut bytes).context(path.to_owned())?;
        if says_plfs25(&bytes) {
            return Ok(Shared::Plfs25);
        }
        let payload = from_outcome(&bytes, path)?;
        SharedIndex::decode(plfs, payload).context(path.to_owned()).map(Shared::Index)
    }
}

/// The parallel index read (paper §3.4); with `auto`, [`Strategy::Auto`]:
/// rank 0 may send the merged index in place of the log list.
fn parallel_read(
    plfs: &Plfs,
    path: &str,
    comm: &dyn Comm,
    group_ranks: Option<usize>,
    auto: bool,
) -> Result<Shared> {
    const ROOT: usize = 0;
    // 1. Rank 0 lists the logs once (listing is the metadata storm too),
    // or says the file is a 2.5 file.
    let mut built = None;
    let mut list_bytes = if comm.rank() == ROOT {
        match plfs.is_plfs25(path) {
            Ok(false) => match plfs.index_logs(path) {
                Ok(list) if auto && auto_broadcasts(list.logs.len(), comm.size(), group_ranks.is_some()) => {
                    // Broadcast after all: the same one round as the list.
                    tracing::info!(
                        "{path}: auto open: {} index logs on {} ranks: rank 0 reads them all and broadcasts",
                        list.logs.len(),
                        comm.size()
                    );
                    let index = plfs
                        .read_index_part(path, &list.logs)
                        .and_then(|part| plfs.merge_index_parts(path, [part]));
                    let bytes = match &index {
                        Ok(index) => [&[OUTCOME_INDEX][..], &index.encode()].concat(),
                        Err(error) => outcome(Err(error), ROOT),
                    };
                    built = Some(index);
                    bytes
                }
                listed => outcome(listed.as_ref().map(IndexLogList::encode), ROOT),
            },
            checked => plfs25_message(&checked, ROOT),
        }
    } else {
        Vec::new()
    };
    comm.broadcast(ROOT, &mut list_bytes).context(path.to_owned())?;
    if says_plfs25(&list_bytes) {
        return Ok(Shared::Plfs25);
    }
    if let Some(index) = built {
        return index.map(Shared::Index);
    }
    if let Some((&OUTCOME_INDEX, payload)) = list_bytes.split_first() {
        return SharedIndex::decode(plfs, payload).context(path.to_owned()).map(Shared::Index);
    }
    let list = IndexLogList::decode(from_outcome(&list_bytes, path)?).context(path.to_owned())?;
    drop(list_bytes);

    // 2. Every rank reads its share: each log is opened exactly once.
    let part = plfs.read_index_part(path, &list.share(comm.rank(), comm.size()));
    let part_bytes = outcome(part.as_ref().map(IndexPart::encode), comm.rank());

    // 3. The ranks of one node gather to their leader, so only leaders
    // talk across nodes (an explicit group size groups consecutive ranks).
    let leaders_of = match group_ranks {
        Some(ranks) => consecutive_groups(comm.size(), ranks),
        None => {
            let hosts = comm.allgather(plfs.state().hostname.as_bytes()).context(path.to_owned())?;
            node_groups(&hosts)
        }
    };
    let color = u32::try_from(leaders_of[comm.rank()]).expect("rank numbers fit u32");
    tracing::info!(
        "{path}: parallel index read: rank {} of {} on host {}: group {:?}, {} groups",
        comm.rank(),
        comm.size(),
        plfs.state().hostname,
        (0..comm.size()).filter(|&rank| leaders_of[rank] == leaders_of[comm.rank()]).collect::<Vec<_>>(),
        (0..comm.size()).filter(|&rank| leaders_of[rank] == rank).count(),
    );
    let group = comm.split(color, comm.rank()).context(path.to_owned())?;
    let is_leader = group.rank() == 0;
    let leaders = comm.split(u32::from(!is_leader), comm.rank()).context(path.to_owned())?;
    let gathered = group.gather(0, &part_bytes).context(path.to_owned())?;
    drop(part_bytes);

    // 4. Leaders swap their groups' parts, and each merges them all.
    let mut index_bytes = Vec::new();
    let mut merged = None;
    if let Some(members) = gathered {
        let mine = group_outcome(&members, path);
        let every_group = leaders.allgather(&mine).context(path.to_owned())?;
        let built = merge_groups(plfs, path, &every_group);
        index_bytes = outcome(built.as_ref().map(SharedIndex::encode), comm.rank());
        merged = Some(built);
    }

    // 5. Each leader hands the merged index (or the error) to its group.
    group.broadcast(0, &mut index_bytes).context(path.to_owned())?;
    match merged {
        Some(built) => built,
        None => SharedIndex::decode(plfs, from_outcome(&index_bytes, path)?).context(path.to_owned()),
    }
    .map(Shared::Index)
}

/// The parallel read's groups by node, as the paper has them: for each
/// rank (given every rank's host name, in rank order), its group's leader,
/// the lowest rank on its host. Ranks of a node need not be consecutive
/// (a cyclic mapping), and nodes may hold different numbers of ranks.
///
/// Where grouping by node gains nothing it falls back to
/// [`default_group_ranks`] consecutive ranks: when every rank is on one
/// host (one group of M would have one leader gather and merge all M
/// parts while the others wait: the broadcast strategy's serial step; √M
/// leaders merge in parallel and no link is crossed either way), and when
/// every host holds one rank (M groups of one: every rank a leader, so the
/// leaders' exchange is all M parts to all M ranks).
pub fn node_groups(hosts: &[impl AsRef<[u8]>]) -> Vec<usize> {
    let ranks = hosts.len();
    let mut first_on: HashMap<&[u8], usize> = HashMap::new();
    let leaders: Vec<usize> =
        hosts.iter().enumerate().map(|(rank, host)| *first_on.entry(host.as_ref()).or_insert(rank)).collect();
    let nodes = first_on.len();
    if ranks > 1 && (nodes == 1 || nodes == ranks) {
        return consecutive_groups(ranks, default_group_ranks(ranks));
    }
    leaders
}

/// For each of `ranks` ranks, the leader of its group when groups are
/// `group_ranks` consecutive ranks.
pub fn consecutive_groups(ranks: usize, group_ranks: usize) -> Vec<usize> {
    let group_ranks = group_ranks.max(1);
    (0..ranks).map(|rank| rank - rank % group_ranks).collect()
}

/// About √ranks per group, so a leader gathers from √M ranks and √M
/// leaders exchange: both steps grow with √M instead of M. The groups
/// when [`node_groups`] finds none worth having, and the split of
/// [`GROUP_RANKS_ENV`]'s default.
pub fn default_group_ranks(ranks: usize) -> usize {
    let mut root = (ranks as f64).sqrt().floor() as usize;
    while root * root < ranks {
        root += 1;
    }
    root.max(1)
}

/// A leader's message: its members' parts, or the first error among them
/// (the lowest rank's, so every leader reports the same one).
fn group_outcome(members: &[Vec<u8>], path: &str) -> Vec<u8> {
    let mut payloads = Vec::with_capacity(members.len());
    for bytes in members {
        match from_outcome(bytes, path) {
            Ok(payload) => payloads.push(payload),
            Err(_) => return bytes.clone(),
        }
    }
    let mut framed = frame(&payloads);
    framed.insert(0, OUTCOME_OK);
    framed
}

/// Decodes every group's parts and merges them; the first error wins.
fn merge_groups(plfs: &Plfs, path: &str, groups: &[Vec<u8>]) -> Result<SharedIndex> {
    let mut parts = Vec::new();
    for bytes in groups {
        for part in unframe(from_outcome(bytes, path)?).context(path.to_owned())? {
            parts.push(IndexPart::decode(part).context(path.to_owned())?);
        }
    }
    plfs.merge_index_parts(path, parts)
}

/// Byte strings concatenated, each after its u64 length.
fn frame(pieces: &[&[u8]]) -> Vec<u8> {
    let total = pieces.iter().map(|piece| 8 + piece.len()).sum();
    let mut out = Vec::with_capacity(total);
    for piece in pieces {
        out.extend_from_slice(&(piece.len() as u64).to_le_bytes());
        out.extend_from_slice(piece);
    }
    out
}

fn unframe(mut bytes: &[u8]) -> Result<Vec<&[u8]>> {
    let mut pieces = Vec::new();
    while !bytes.is_empty() {
        let (length, rest) =
            bytes.split_at_checked(8).ok_or_else(|| Error::corrupt("framed parts: short length"))?;
        let length = usize::try_from(u64::from_le_bytes(length.try_into().expect("8 bytes")))
            .map_err(|_| Error::corrupt("framed parts: length"))?;
        let (piece, rest) =
            rest.split_at_checked(length).ok_or_else(|| Error::corrupt("framed parts: short piece"))?;
        pieces.push(piece);
        bytes = rest;
    }
    Ok(pieces)
}

const OUTCOME_OK: u8 = 0;
const OUTCOME_ERROR: u8 = 1;

/// What one rank sends another: a status byte, then the payload, or the
/// error's kind and text (naming the rank it happened on, since it may be
/// relayed by a leader).
pub(super) fn outcome(result: Result<Vec<u8>, &Error>, rank: usize) -> Vec<u8> {
    match result {
        Ok(payload) => {
            let mut bytes = Vec::with_capacity(1 + payload.len());
            bytes.push(OUTCOME_OK);
            bytes.extend_from_slice(&payload);
            bytes
        }
        Err(error) => {
            let mut bytes = vec![OUTCOME_ERROR, kind_code(error.kind())];
            bytes.extend_from_slice(format!("rank {rank}: {error}").as_bytes());
            bytes
        }
    }
}

/// The payload of an outcome, or the error it carries rebuilt here.
pub(super) fn from_outcome<'a>(bytes: &'a [u8], path: &str) -> Result<&'a [u8]> {
    match bytes.split_first() {
        Some((&OUTCOME_OK, payload)) => Ok(payload),
        Some((&OUTCOME_ERROR, rest)) if !rest.is_empty() => {
            let kind = kind_from_code(rest[0]);
            let text = String::from_utf8_lossy(&rest[1..]);
            Err(Error::new(kind, format!("{path}: collective open failed on {text}")))
        }
        _ => Err(Error::corrupt(format!("{path}: malformed message in a collective open"))),
    }
}

/// Kinds as they travel between ranks (any build, same codes).
const KINDS: [ErrorKind; 15] = [
    ErrorKind::Internal,
    ErrorKind::NotFound,
    ErrorKind::AlreadyExists,
    ErrorKind::NotADirectory,
    ErrorKind::IsADirectory,
    ErrorKind::DirectoryNotEmpty,
    ErrorKind::PermissionDenied,
    ErrorKind::InvalidInput,
    ErrorKind::NoSpace,
    ErrorKind::Io,
    ErrorKind::Corrupt,
    ErrorKind::Unsupported,
    ErrorKind::Unavailable,
    ErrorKind::BadHandle,
    ErrorKind::NoAttribute,
];

fn kind_code(kind: ErrorKind) -> u8 {
    KINDS.iter().position(|&known| known == kind).unwrap_or(0) as u8
}

fn kind_from_code(code: u8) -> ErrorKind {
    KINDS.get(usize::from(code)).copied().unwrap_or(ErrorKind::Internal)
}

#[cfg(test)]
mod tests;
