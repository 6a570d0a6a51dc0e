//! The cost model: what each operation costs, from the code's own rules.
//! Every constant below is the size of something the code writes or the
//! number of calls a step makes; docs/COST_MODEL.md derives each term.
//!
//! Notation: N ranks (writers), M readers, K backends, R records per rank
//! of S bytes, D hostdirs in use, A the access record, G the global index.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use plfs::collective::counting::{SPLIT_ENTRY_BYTES, ceil_log2};
use plfs::collective::strategy::default_group_ranks;
use plfs::config::Tuning;
use plfs::format::frame::{FRAME_HEADER_BYTES, FRAME_PAYLOAD_MAX_BYTES};
use plfs::format::index_log::WRITE_RECORD_BYTES;
use plfs::format::plfs25;
use plfs::placement::name_hash;

use super::{COST_PATH, CostParams, Figures, Operation, Pattern, node_name};

/// An access record: magic and version (10), mode, uid, gid (12), three
/// times and a stamp (32), CRC (4). Read whole at every lookup.
pub const ACCESS_BYTES: u64 = 10 + 12 + 32 + 4;

/// A closed summary (`meta/closed`): magic and version, the access
/// record's fields, three sizes, CRC32C.
pub const SUMMARY_BYTES: u64 = 10 + 12 + 32 + 24 + 4;
/// A log header without its hostname: magic, version, length, flags,
/// stamp, writer, pid, hostname length (38), and its CRC (4).
pub const LOG_HEADER_FIXED_BYTES: u64 = 38 + 4;
/// A write record (4-byte record header, 56-byte body).
pub const WRITE_BYTES: u64 = WRITE_RECORD_BYTES as u64;
/// A pattern record (4-byte record header, 80-byte body).
pub const PATTERN_BYTES: u64 = 4 + 80;
pub const FRAME_BYTES: u64 = FRAME_HEADER_BYTES as u64;
/// A global index without its tables: magic and version (10), eof, table
/// counts and frozen limit (40), CRC (4).
pub const GLOBAL_FIXED_BYTES: u64 = 10 + 40 + 4;
/// Per covered log, per extent (frozen or overlay), per group, per slot.
pub const GLOBAL_LOG_BYTES: u64 = 32;
pub const GLOBAL_EXTENT_BYTES: u64 = 32;
pub const GLOBAL_GROUP_BYTES: u64 = 32;
pub const GLOBAL_SLOT_BYTES: u64 = 48;
/// A log location in a collective open's messages.
pub const LOCATION_BYTES: u64 = 8 + 8 + 4 + 4 + 4 + 4 + 4;
/// The status byte every collective-open message starts with.
pub const OUTCOME_BYTES: u64 = 1;
/// A CRC32C closing an index log list or an index part.
pub const CRC_BYTES: u64 = 4;
/// A unit of a log's data checksums in a shared index (a run of records
/// or a pattern): physical, length, count, CRC, pattern flag.
pub const CHECKSUM_UNIT_BYTES: u64 = 8 + 8 + 8 + 4 + 1;
/// Heap bytes of one merged-index entry: a frozen extent is its start
/// (8) and span (24); a group slot is 48.
pub const EXTENT_MEMORY_BYTES: u64 = 8 + 24;
pub const SLOT_MEMORY_BYTES: u64 = 48;

/// Where the file's pieces land: derived from the placement rules.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Hostdir of each node.
    pub node_hostdir: Vec<u32>,
    /// Distinct hostdirs in use (D).
    pub hostdirs: u64,
    /// Backend of each node's hostdir.
    pub node_backend: Vec<u64>,
    /// The file's canonical backend.
    pub canonical: u64,
    /// The backend PLFS 2.5 would have put the file on (its own hash).
    pub plfs25: u64,
}

impl Placement {
    /// As `Placement::hostdir` and `hostdir_backend` place them: hostdir
    /// crc32c(hostname) mod num_hostdirs, on backend (crc32c(file name) +
    /// hostdir) mod K; the container on backend crc32c(file name) mod K.
    pub fn of(params: &CostParams) -> Placement {
        let name = COST_PATH.trim_start_matches('/');
        let file_hash = u64::from(name_hash(name));
        let node_hostdir: Vec<u32> =
            (0..params.nodes).map(|node| name_hash(&node_name(node)) % params.num_hostdirs).collect();
        let node_backend =
            node_hostdir.iter().map(|&h| (file_hash + u64::from(h)) % params.backends).collect();
        let hostdirs = node_hostdir.iter().collect::<BTreeSet<_>>().len() as u64;
        let plfs25 = plfs25::backend_slot(name, params.backends as usize) as u64;
        Placement { node_hostdir, hostdirs, node_backend, canonical: file_hash % params.backends, plfs25 }
    }
}

/// One writer's index log and what readers get from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterIndex {
    /// Frames appended while writing (the flush threshold reached), and
    /// their bytes.
    pub flushes_while_writing: u64,
    pub flushed_bytes: u64,
    /// The last frame, appended at close (0: none).
    pub close_bytes: u64,
    /// Bytes of frames in the log (without its header).
    pub frame_bytes: u64,
    /// Index records stored (a pattern counts once).
    pub records: u64,
    /// Bytes of those records re-encoded into a collective open's part.
    pub part_frames_bytes: u64,
    /// Bytes of its data checksums in a shared index (checksums.rs
    /// `LogChecksums::encode`): a unit count, the units (a pattern each,
    /// and one per run of same-length write records back to back), a
    /// CRC count and one CRC per write record.
    pub checksums_bytes: u64,
}

fn checksums_bytes(units: u64, crcs: u64) -> u64 {
    4 + units * CHECKSUM_UNIT_BYTES + 4 + crcs * 4
}

/// What a writer's index log holds after R writes of `pattern`, as the
/// writer's frame flushing does it (`OpenFile::flush_if_full`): a frame is
/// appended once its bytes plus 60 per write of the pending run reach
/// `index_flush_bytes`; a run is ended at every flush.
pub fn writer_index(records: u64, pattern: Pattern, flush_bytes: u64) -> WriterIndex {
    let record_bytes = |count: u64| if count >= 2 { PATTERN_BYTES } else { WRITE_BYTES };
    match pattern {
        // The pending run holds every write: a flush comes when
        // (writes)·60 reaches the threshold, with the frame still empty.
        Pattern::Regular => {
            let per_frame = flush_bytes.div_ceil(WRITE_BYTES).max(1);
            let (full, tail) = (records / per_frame, records % per_frame);
            let full_frame = FRAME_BYTES + record_bytes(per_frame);
            let tail_frame = if tail > 0 { FRAME_BYTES + record_bytes(tail) } else { 0 };
            let stored = full + u64::from(tail > 0);
            let record_total = full * record_bytes(per_frame) + if tail > 0 { record_bytes(tail) } else { 0 };
            // Records stored as write records (a run of one write); being
            // appended back to back, they form one checksum unit.
            let writes = if per_frame == 1 { full } else { 0 } + u64::from(tail == 1);
            let patterns = stored - writes;
            WriterIndex {
                flushes_while_writing: full,
                flushed_bytes: full * full_frame,
                close_bytes: tail_frame,
                frame_bytes: full * full_frame + tail_frame,
                records: stored,
                part_frames_bytes: part_frames(stored, record_total),
                checksums_bytes: checksums_bytes(patterns + u64::from(writes > 0), writes),
            }
        }
        // Every write is its own record: the k-th write of a frame leaves
        // k−1 records in it and one pending, 16 + 60·k bytes in all.
        Pattern::Irregular => {
            let per_frame = flush_bytes.saturating_sub(FRAME_BYTES).div_ceil(WRITE_BYTES).max(2);
            let (full, tail) = (records / per_frame, records % per_frame);
            let full_frame = FRAME_BYTES + per_frame * WRITE_BYTES;
            let tail_frame = if tail > 0 { FRAME_BYTES + tail * WRITE_BYTES } else { 0 };
            WriterIndex {
                flushes_while_writing: full,
                flushed_bytes: full * full_frame,
                close_bytes: tail_frame,
                frame_bytes: full * full_frame + tail_frame,
                records,
                part_frames_bytes: part_frames(records, records * WRITE_BYTES),
                // One run: the writes are appended back to back.
                checksums_bytes: checksums_bytes(u64::from(records > 0), records),
            }
        }
    }
}

/// Bytes of `records` records (of `record_bytes` in all) re-encoded in
/// frames of at most half the frame payload limit (`encode_frames`).
fn part_frames(records: u64, record_bytes: u64) -> u64 {
    if records == 0 {
        return 0;
    }
    // A frame is closed once it reaches half the limit: at most this many
    // bytes of records (frames are cut between records; records here are
    // all of one size, so the count per frame is exact).
    let average = record_bytes / records;
    let per_frame =
        ((FRAME_PAYLOAD_MAX_BYTES as u64 / 2).saturating_sub(FRAME_BYTES)).div_ceil(average).max(1);
    records.div_ceil(per_frame) * FRAME_BYTES + record_bytes
}

/// The whole file's merged index: entries and its global-index size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergedShape {
    pub extents: u64,
    pub groups: u64,
    pub slots: u64,
}

impl MergedShape {
    /// What the frozen layer makes of N strided writers (index/frozen.rs):
    /// a writer's run with a stride wider than its records joins the one
    /// group of that stride (a slot each, at most 2^16 per group); a run
    /// with nothing between its records (N = 1) is one contiguous extent;
    /// single writes are extents.
    pub fn of(params: &CostParams) -> MergedShape {
        let (n, r) = (params.ranks, params.records);
        match params.pattern {
            _ if r == 1 => MergedShape { extents: n, groups: 0, slots: 0 },
            Pattern::Regular if n == 1 => MergedShape { extents: 1, groups: 0, slots: 0 },
            Pattern::Regular => MergedShape { extents: 0, groups: n.div_ceil(1 << 16), slots: n },
            Pattern::Irregular => MergedShape { extents: n * r, groups: 0, slots: 0 },
        }
    }

    pub fn entries(&self) -> u64 {
        self.extents + self.slots
    }

    /// Heap bytes a rank holding the whole merged index keeps.
    pub fn memory_bytes(&self) -> u64 {
        self.extents * EXTENT_MEMORY_BYTES + self.slots * SLOT_MEMORY_BYTES
    }

    /// The global index of `logs` logs: what flatten writes and what a
    /// broadcast sends.
    pub fn global_bytes(&self, logs: u64) -> u64 {
        GLOBAL_FIXED_BYTES
            + logs * GLOBAL_LOG_BYTES
            + self.extents * GLOBAL_EXTENT_BYTES
            + self.groups * GLOBAL_GROUP_BYTES
            + self.slots * GLOBAL_SLOT_BYTES
    }
}

/// Everything the per-operation formulas share.
struct Terms {
    n: u64,
    m: u64,
    k: u64,
    r: u64,
    s: u64,
    /// Hostdirs in use (D).
    d: u64,
    /// Header bytes of rank i's logs (its hostname's length varies).
    header: Vec<u64>,
    /// Whether rank i's hostdir is on the canonical backend.
    on_canonical: Vec<bool>,
    writer: WriterIndex,
    merged: MergedShape,
    /// The global index (G).
    global: u64,
    /// A collective open's shared index built from the index logs: G and
    /// every log's data checksums (C), each after its length or count,
    /// and a CRC (collective/exchange.rs `SharedIndex::encode`).
    shared: u64,
    /// The same from a global index, which has no data checksums.
    shared_flattened: u64,
    /// Stats of the create's look for a PLFS 2.5 file of the name: its
    /// access file on 2.5's backend, and on plfs's own when they differ.
    plfs25_stats: u64,
}

impl Terms {
    fn of(params: &CostParams) -> Terms {
        let placement = Placement::of(params);
        let flush_bytes = Tuning::default().index_flush_bytes as u64;
        let node_of = |rank: u64| params.node_of(rank) as usize;
        let merged = MergedShape::of(params);
        let writer = writer_index(params.records, params.pattern, flush_bytes);
        Terms {
            n: params.ranks,
            m: params.readers,
            k: params.backends,
            r: params.records,
            s: params.record_bytes,
            d: placement.hostdirs,
            header: (0..params.ranks)
                .map(|rank| LOG_HEADER_FIXED_BYTES + node_name(node_of(rank) as u64).len() as u64)
                .collect(),
            on_canonical: (0..params.ranks)
                .map(|rank| placement.node_backend[node_of(rank)] == placement.canonical)
                .collect(),
            writer,
            merged,
            global: merged.global_bytes(params.ranks),
            shared: 8
                + merged.global_bytes(params.ranks)
                + 4
                + params.ranks * writer.checksums_bytes
                + CRC_BYTES,
            shared_flattened: 8 + merged.global_bytes(params.ranks) + 4 + CRC_BYTES,
            plfs25_stats: 1 + u64::from(placement.plfs25 != placement.canonical),
        }
    }

    /// Bytes of rank i's index log.
    fn index_log(&self, rank: u64) -> u64 {
        self.header[rank as usize] + self.writer.frame_bytes
    }

    fn all_index_logs(&self) -> u64 {
        (0..self.n).map(|rank| self.index_log(rank)).sum()
    }

    /// Lists that find a file's logs (`container::file_logs`): meta/, the
    /// container on every backend (a missing one is a failed list), and
    /// every hostdir in use.
    fn find_logs_lists(&self) -> u64 {
        1 + self.k + self.d
    }
}

/// One collective's cost over `size` ranks, as [`CountingComm`] counts it.
///
/// [`CountingComm`]: plfs::collective::CountingComm
#[derive(Debug, Clone, Copy, Default)]
struct CommCost {
    calls: u64,
    messages: u64,
    bytes: u64,
    rounds: u64,
}

fn broadcast(size: u64, bytes: u64) -> CommCost {
    CommCost { calls: size, messages: size - 1, bytes: (size - 1) * bytes, rounds: ceil_log2(size) }
}

/// A split is a Bruck allgather of 12-byte entries.
fn split(size: u64) -> CommCost {
    allgather(size, size * SPLIT_ENTRY_BYTES)
}

/// Bruck's allgather of payloads totalling `total` bytes: every payload
/// reaches every other rank once, in ⌈log2 P⌉ rounds of one message each.
fn allgather(size: u64, total: u64) -> CommCost {
    let rounds = ceil_log2(size);
    CommCost { calls: size, messages: size * rounds, bytes: (size - 1) * total, rounds }
}

/// Predicted figures for every operation of [`Operation::ALL`].
pub fn predict(params: &CostParams) -> Vec<(Operation, Figures)> {
    let t = Terms::of(params);
    Operation::ALL
        .iter()
        .map(|&operation| {
            let mut figures = predict_one(params, &t, operation);
            if is_collective_open(operation) {
                add_plfs25_check(&mut figures, operation, t.m);
            }
            (operation, figures)
        })
        .collect()
}

fn is_collective_open(operation: Operation) -> bool {
    matches!(
        operation,
        Operation::OpenNaive
            | Operation::OpenNaiveFlattened
            | Operation::OpenBroadcast
            | Operation::OpenFlatten
            | Operation::OpenParallel
            | Operation::OpenUniformRestart
    )
}

/// The look whether the file is a PLFS 2.5 container (those have no logs
/// to share, each rank reads its own): one more lookup, a stat and the
/// access record. Rank 0 alone looks and says so in its first message
/// (broadcast, flatten, parallel; rank 0 is their busiest rank); uniform
/// restart sends no message, so each of its readers looks; a naive open
/// is what a 2.5 file gets anyway, so it does not look.
fn add_plfs25_check(figures: &mut Figures, operation: Operation, m: u64) {
    let lookups = match operation {
        Operation::OpenNaive | Operation::OpenNaiveFlattened => return,
        Operation::OpenUniformRestart => m,
        _ => 1,
    };
    figures.opens += lookups;
    figures.max_rank_opens += 1;
    figures.stats += lookups;
    figures.bytes_read += lookups * ACCESS_BYTES;
}

/// The data logs an open for reading opens at once (so that its bytes
/// stay readable if another process removes the file): all of a file with
/// few logs, none of a larger one.
fn prepared_data_logs(n: u64) -> u64 {
    if n <= plfs::PREPARED_DATA_LOGS_MAX as u64 { n } else { 0 }
}

fn predict_one(params: &CostParams, t: &Terms, operation: Operation) -> Figures {
    let (n, m) = (t.n, t.m);
    let headers: u64 = t.header.iter().sum();
    match operation {
        // lookup (a stat, NotFound) and the parent's stat; a look for a
        // PLFS 2.5 file of the name (one stat per candidate backend); the
        // parent's layout template read (an open, NotFound here); then the
        // container is assembled under a temporary name (directory, meta/,
        // version, access: 4 creates) and renamed into place.
        Operation::Create => Figures {
            opens: 1,
            max_rank_opens: 1,
            stats: 2 + t.plfs25_stats,
            creates: 4,
            renames: 1,
            ..Figures::default()
        },
        // Per rank: the open looks the file up twice (its own lookup and
        // the access check: a stat and an access-file read each); the
        // first write reads the access record twice more (the logs'
        // protection, and again to catch a chmod meanwhile), makes the
        // hostdir (and the shadow container when the hostdir is not on the
        // canonical backend), the open record, and both logs with their
        // headers; then R data appends and any index frame that filled.
        // The first write also reads the file's layout: its own layout
        // attribute and its layout record (two opens, NotFound here).
        Operation::Write => {
            let shadows = t.on_canonical.iter().filter(|&&canonical| !canonical).count() as u64;
            let flushed = n * t.writer.flushed_bytes;
            Figures {
                opens: 6 * n,
                max_rank_opens: 6,
                stats: 2 * n,
                // The closed summary removed before and after the open
                // record (there is none here: counted, not found).
                removes: 2 * n,
                creates: n * 4 + shadows,
                appends: n * (2 + t.r + t.writer.flushes_while_writing),
                bytes_appended: 2 * headers + n * t.r * t.s + flushed,
                index_bytes_written: headers + flushed,
                bytes_read: 4 * n * ACCESS_BYTES,
                ..Figures::default()
            }
        }
        // Per rank: the last frame (if any), the open record renamed to
        // the size record, and meta/ listed to see whether it was the last
        // writer. The last (ranks close in turn: rank N-1) leaves the
        // closed summary: the access record read, the summary created and
        // appended without its CRC, meta/ and the access record read again,
        // the CRC appended.
        Operation::Close => {
            let last = t.writer.close_bytes;
            Figures {
                opens: 2,
                max_rank_opens: 2,
                creates: 1,
                lists: n + 1,
                renames: n,
                appends: n * u64::from(last > 0) + 2,
                bytes_appended: n * last + SUMMARY_BYTES,
                index_bytes_written: n * last,
                bytes_read: 2 * ACCESS_BYTES,
                ..Figures::default()
            }
        }
        // The container's statx and its closed summary read: no access
        // file, no listing of meta/, no index log, whatever N.
        Operation::Stat => {
            Figures { opens: 1, max_rank_opens: 1, stats: 1, bytes_read: SUMMARY_BYTES, ..Figures::default() }
        }
        // Every reader alone: two lookups (open and access check), the
        // version file's stat (which tells this container from one put at
        // the name later), a try at the global index (counted though it
        // fails), the logs found, every index log read, and meta/ listed
        // again to check that no closed log lost records; then the data
        // logs, if few.
        Operation::OpenNaive => Figures {
            opens: m * (3 + n + prepared_data_logs(n)),
            index_log_opens: m * n,
            global_index_opens: m,
            max_rank_opens: 3 + n + prepared_data_logs(n),
            stats: 3 * m,
            lists: m * (t.find_logs_lists() + 1),
            bytes_read: m * (2 * ACCESS_BYTES + t.all_index_logs()),
            index_bytes_read: m * t.all_index_logs(),
            ..Figures::default()
        },
        // With a valid global index every reader reads it instead: two
        // lookups, the version file's stat, the global index, and meta/ to
        // check it is current; then the data logs, if few.
        Operation::OpenNaiveFlattened => Figures {
            opens: m * (3 + prepared_data_logs(n)),
            global_index_opens: m,
            max_rank_opens: 3 + prepared_data_logs(n),
            stats: 3 * m,
            lists: m,
            bytes_read: m * (2 * ACCESS_BYTES + t.global),
            index_bytes_read: m * t.global,
            ..Figures::default()
        },
        // Rank 0 alone: one lookup, the logs found, N index logs read,
        // merged; the merged index (with the data checksums) broadcast to
        // the M readers.
        Operation::OpenBroadcast => {
            let comm = broadcast(m, OUTCOME_BYTES + t.shared);
            with_comm(
                Figures {
                    opens: 1 + n,
                    index_log_opens: n,
                    max_rank_opens: 1 + n,
                    stats: 1,
                    lists: t.find_logs_lists(),
                    bytes_read: ACCESS_BYTES + t.all_index_logs(),
                    index_bytes_read: t.all_index_logs(),
                    ..Figures::default()
                },
                &[comm],
                broadcast_max_received(m),
            )
        }
        // Rank 0 alone: one lookup, the global index and meta/ (to check it
        // is current); then the broadcast.
        Operation::OpenFlatten => {
            let comm = broadcast(m, OUTCOME_BYTES + t.shared_flattened);
            with_comm(
                Figures {
                    opens: 2,
                    global_index_opens: 1,
                    max_rank_opens: 2,
                    stats: 1,
                    lists: 1,
                    bytes_read: ACCESS_BYTES + t.global,
                    index_bytes_read: t.global,
                    ..Figures::default()
                },
                &[comm],
                broadcast_max_received(m),
            )
        }
        Operation::OpenParallel => parallel(params, t),
        // Every reader alone: one lookup, the logs found, and only its own
        // index log read (writer id = rank).
        Operation::OpenUniformRestart => {
            let own: u64 = (0..m).map(|rank| t.index_log(rank)).sum();
            Figures {
                opens: 2 * m,
                index_log_opens: m,
                max_rank_opens: 2,
                stats: m,
                lists: m * t.find_logs_lists(),
                bytes_read: m * ACCESS_BYTES + own,
                index_bytes_read: own,
                ..Figures::default()
            }
        }
        // Each reader's first read opens its own data log, and reads go
        // through its read-ahead window. The data CRCs came with the index
        // (a parallel open's merged index carries them): no index log is
        // read again.
        Operation::RestartRead => {
            let window = window_bytes(params, Tuning::default().readahead_bytes as u64);
            Figures { opens: m, max_rank_opens: 1, bytes_read: m * window, ..Figures::default() }
        }
        // One lookup, meta/ checked for open writers, the logs found and
        // read (and meta/ listed again by the loss check), the access
        // record read for the global index's protection, and G written.
        Operation::Flatten => Figures {
            opens: 2 + n,
            index_log_opens: n,
            max_rank_opens: 2 + n,
            stats: 1,
            lists: t.find_logs_lists() + 2,
            replaces: 1,
            bytes_read: 2 * ACCESS_BYTES + t.all_index_logs(),
            index_bytes_read: t.all_index_logs(),
            index_bytes_written: t.global,
            index_entries: t.merged.entries(),
            ..Figures::default()
        },
    }
}

/// Messages the busiest rank receives in one broadcast: one.
fn broadcast_max_received(m: u64) -> u64 {
    u64::from(m > 1)
}

fn with_comm(mut figures: Figures, calls: &[CommCost], max_received: u64) -> Figures {
    for call in calls {
        figures.collectives += call.calls;
        figures.messages += call.messages;
        figures.message_bytes += call.bytes;
        figures.rounds += call.rounds;
    }
    figures.max_rank_messages_received = max_received;
    figures
}

/// Bytes one reader's data log yields to read back its R records in
/// logical order through the read-ahead window (reader.rs): a record
/// outside the window refills it from that record, up to `readahead`
/// bytes or the log's end. Records of 32 KiB or more (or half the window)
/// are read straight, exactly.
pub fn window_bytes(params: &CostParams, readahead: u64) -> u64 {
    let (r, s) = (params.records, params.record_bytes);
    let windowed = s < (32u64 << 10).min(readahead / 2);
    if !windowed {
        return r * s;
    }
    // Positions relative to the first data byte; the log holds R·S.
    let log = r * s;
    let (mut start, mut end) = (0u64, 0u64);
    let mut total = 0;
    for k in 0..r {
        let physical = match params.pattern {
            Pattern::Regular => k * s,
            Pattern::Irregular => (r - 1 - k) * s,
        };
        if physical < start || physical + s > end || start == end {
            start = physical;
            end = (physical + readahead).min(log);
            total += end - start;
        }
    }
    total
}

/// The parallel read's group leader of each reader
/// (collective/strategy.rs): `group_ranks` consecutive ranks when given;
/// otherwise the readers of one node (the lowest its leader), falling back
/// to about √M consecutive ranks when every reader shares one node or each
/// has a node of its own.
fn leaders(params: &CostParams) -> Vec<u64> {
    let m = params.readers;
    let consecutive = |g: u64| -> Vec<u64> { (0..m).map(|rank| rank - rank % g.max(1)).collect() };
    if let Some(g) = params.group_ranks {
        return consecutive(g);
    }
    let nodes = (0..m).map(|rank| params.node_of(rank)).collect::<BTreeSet<_>>().len() as u64;
    if m > 1 && (nodes == 1 || nodes == m) {
        return consecutive(default_group_ranks(m as usize) as u64);
    }
    let mut first_on = HashMap::new();
    (0..m).map(|rank| *first_on.entry(params.node_of(rank)).or_insert(rank)).collect()
}

/// The parallel index read (collective/strategy.rs `parallel_read`).
fn parallel(params: &CostParams, t: &Terms) -> Figures {
    let (n, m) = (t.n, t.m);
    let leader_of = &leaders(params);
    let is_leader = |rank: u64| leader_of[rank as usize] == rank;
    // Without a given group size the readers first swap host names.
    let host_exchange = params.group_ranks.is_none();
    let host_bytes: u64 = (0..m).map(|rank| node_name(params.node_of(rank)).len() as u64).sum();
    // Rank r reads logs r, r + M, …: ⌈(N − r) / M⌉ of them.
    let share = |rank: u64| (n - rank).div_ceil(m);
    let log_part = LOCATION_BYTES + 8 + t.writer.part_frames_bytes;
    let part = |rank: u64| OUTCOME_BYTES + 4 + share(rank) * log_part + CRC_BYTES;
    // Per leader: its group's size and the sum of what its members send
    // the other leaders (a length and the part without its status byte).
    let mut groups: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for rank in 0..m {
        let group = groups.entry(leader_of[rank as usize]).or_default();
        group.0 += 1;
        group.1 += 8 + part(rank) - OUTCOME_BYTES;
    }
    let group_size = |leader: u64| groups.get(&leader).map_or(0, |group| group.0);
    let leaders = groups.len() as u64;
    let list = OUTCOME_BYTES + 4 + n * LOCATION_BYTES + CRC_BYTES;
    let index = OUTCOME_BYTES + t.shared;

    // 1. The list broadcast to every reader.
    let mut calls = vec![broadcast(m, list)];
    // 2. The host names swapped, to group the readers by node.
    if host_exchange {
        calls.push(allgather(m, host_bytes));
    }
    // 3. Two splits of the readers: into groups, and leaders apart.
    calls.push(split(m));
    calls.push(split(m));
    // Gathers to each leader: every member but the leader sends its part.
    let gathered: u64 = (0..m).filter(|&rank| !is_leader(rank)).map(part).sum();
    calls.push(CommCost {
        calls: m,
        messages: m - leaders,
        bytes: gathered,
        rounds: u64::from(group_size(0) > 1),
    });
    // 4. Leaders allgather their groups' parts: each leader's
    // message is its status byte and, per member, a length (8) and the
    // member's part without its own status byte.
    let leader_payloads: Vec<u64> = groups.values().map(|&(_, members)| OUTCOME_BYTES + members).collect();
    calls.push(allgather(leaders, leader_payloads.iter().sum()));
    // 5. Each leader broadcasts the merged index to its group.
    calls.push(CommCost {
        calls: m,
        messages: m - leaders,
        bytes: (m - leaders) * index,
        rounds: ceil_log2(group_size(0)),
    });

    // The busiest receiver: per rank, what it receives in each step.
    let received = |rank: u64| -> u64 {
        let leader = is_leader(rank);
        let group = group_size(leader_of[rank as usize]);
        let list = u64::from(rank != 0);
        let splits = 2 * ceil_log2(m) + if host_exchange { ceil_log2(m) } else { 0 };
        let gather = if leader { group - 1 } else { 0 };
        let exchange = if leader { ceil_log2(leaders) } else { 0 };
        let index = u64::from(!leader);
        list + splits + gather + exchange + index
    };
    let max_received = (0..m).map(received).max().unwrap_or(0);
    let max_opens = (0..m).map(|rank| share(rank) + if rank == 0 { 1 } else { 0 }).max().unwrap_or(0);
    let figures = Figures {
        opens: 1 + n,
        index_log_opens: n,
        max_rank_opens: max_opens,
        stats: 1,
        lists: t.find_logs_lists(),
        bytes_read: ACCESS_BYTES + t.all_index_logs(),
        index_bytes_read: t.all_index_logs(),
        ..Figures::default()
    };
    with_comm(figures, &calls, max_received)
}
