//! `plfs bench cost`: a cost model of the container layout, checked against
//! exact counts. [`model`] predicts, from the parameters of a checkpoint
//! (ranks, readers, nodes, backends, hostdirs, records, pattern, strategy),
//! what each operation costs the backends (opens, metadata operations,
//! bytes of index) and the communicator (calls, messages, bytes); every
//! term is derived from what the code does, and docs/COST_MODEL.md says
//! how. [`measure`] runs the operations with ranks as threads, counting
//! every store and communicator call, so the two can be compared exactly.

mod measure;
pub mod model;
mod plot;

use std::fmt;
use std::path::Path;

use plfs::collective::CommCounts;
use plfs::store::counting::OpCounts;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

pub use measure::measure;
pub use model::predict;
pub use plot::{CostRuns, Extrapolation};

/// The logical file every run writes.
pub const COST_PATH: &str = "/checkpoint";

/// The hostname of node `node` (ranks on one node share it, so its hostdir).
pub fn node_name(node: u64) -> String {
    format!("node{node}")
}

/// How each rank's writes fall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// N-1 strided in order: rank r's k-th write at (k·N + r)·S. Each
    /// writer's records form one run: one pattern record per index frame.
    Regular,
    /// The same records written last to first: no two consecutive writes
    /// form a run, so every write is its own index record and its own
    /// merged-index entry (the shape of any pattern the index cannot
    /// compress).
    Irregular,
}

impl Pattern {
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Regular => "regular",
            Pattern::Irregular => "irregular",
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Pattern {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<Pattern> {
        match text {
            "regular" => Ok(Pattern::Regular),
            "irregular" => Ok(Pattern::Irregular),
            other => {
                Err(BenchError::invalid(format!("unknown pattern {other:?} (expected regular or irregular)")))
            }
        }
    }
}

/// One checkpoint's shape: what the model is a function of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostParams {
    /// Writer ranks (N), one writer id and one index log each.
    pub ranks: u64,
    /// Ranks that open the file for the restart (M, the first M ranks).
    pub readers: u64,
    /// Nodes the ranks run on, consecutive ranks per node (block mapping).
    pub nodes: u64,
    /// Backends of the mount (K).
    pub backends: u64,
    pub num_hostdirs: u32,
    /// Records per rank (R).
    pub records: u64,
    /// Bytes per record (S).
    pub record_bytes: u64,
    pub pattern: Pattern,
    /// Parallel read group size; None: the strategy's default (⌈√M⌉).
    pub group_ranks: Option<u64>,
}

impl CostParams {
    /// The measured points' shape: `ranks` ranks on `ranks / 2` nodes (at
    /// least one), each reading back, over 4 backends and the default 32
    /// hostdirs, 8 records of 1000 bytes.
    pub fn checkpoint(ranks: u64, pattern: Pattern) -> CostParams {
        CostParams {
            ranks,
            readers: ranks,
            nodes: (ranks / 2).max(1),
            backends: 4,
            num_hostdirs: plfs::config::Tuning::default().num_hostdirs,
            records: 8,
            record_bytes: 1000,
            pattern,
            group_ranks: None,
        }
    }

    pub fn check(&self) -> Result<()> {
        if self.ranks == 0 || self.records == 0 || self.backends == 0 {
            return Err(BenchError::invalid("ranks, records and backends must be positive"));
        }
        if self.readers == 0 || self.readers > self.ranks {
            return Err(BenchError::invalid(format!(
                "{} readers: must be 1 to the {} ranks",
                self.readers, self.ranks
            )));
        }
        if self.nodes == 0 || self.nodes > self.ranks {
            return Err(BenchError::invalid(format!(
                "{} nodes: must be 1 to the {} ranks",
                self.nodes, self.ranks
            )));
        }
        if self.record_bytes == 0 || self.num_hostdirs == 0 || self.group_ranks == Some(0) {
            return Err(BenchError::invalid("record size, num_hostdirs and group size must be positive"));
        }
        Ok(())
    }

    /// The node rank `rank` runs on (block mapping).
    pub fn node_of(&self, rank: u64) -> u64 {
        rank * self.nodes / self.ranks
    }

    /// Where rank `rank`'s `k`-th record goes (N-1 strided).
    pub fn record_offset(&self, rank: u64, k: u64) -> u64 {
        (k * self.ranks + rank) * self.record_bytes
    }

    /// The order a rank writes its records in.
    pub fn write_order(&self) -> Box<dyn Iterator<Item = u64>> {
        match self.pattern {
            Pattern::Regular => Box::new(0..self.records),
            Pattern::Irregular => Box::new((0..self.records).rev()),
        }
    }
}

/// The operations measured and predicted, in the order a run makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Rank 0 creates the file (open O_CREAT, close).
    Create,
    /// Every rank opens the file for writing and writes its R records.
    Write,
    /// Every rank closes it.
    Close,
    /// One stat of the closed file from a fresh mount.
    Stat,
    /// M readers open it collectively, by each strategy.
    OpenNaive,
    OpenBroadcast,
    OpenParallel,
    OpenUniformRestart,
    /// After the parallel open, each reader reads back its own records.
    RestartRead,
    /// One rank writes the global index.
    Flatten,
    OpenFlatten,
    /// A naive open once there is a global index (every reader reads it).
    OpenNaiveFlattened,
}

impl Operation {
    pub const ALL: [Operation; 12] = [
        Operation::Create,
        Operation::Write,
        Operation::Close,
        Operation::Stat,
        Operation::OpenNaive,
        Operation::OpenBroadcast,
        Operation::OpenParallel,
        Operation::OpenUniformRestart,
        Operation::RestartRead,
        Operation::Flatten,
        Operation::OpenFlatten,
        Operation::OpenNaiveFlattened,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Write => "write",
            Operation::Close => "close",
            Operation::Stat => "stat",
            Operation::OpenNaive => "open naive",
            Operation::OpenBroadcast => "open broadcast",
            Operation::OpenParallel => "open parallel",
            Operation::OpenUniformRestart => "open uniform_restart",
            Operation::RestartRead => "restart read",
            Operation::Flatten => "flatten",
            Operation::OpenFlatten => "open flatten",
            Operation::OpenNaiveFlattened => "open naive (flattened)",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one operation costs, summed over the ranks taking part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Backend opens for reading (`open_read`), and of those the index
    /// logs and global indexes.
    pub opens: u64,
    pub index_log_opens: u64,
    pub global_index_opens: u64,
    /// Opens of the busiest rank: the serial part.
    pub max_rank_opens: u64,
    /// Metadata operations on the backends, by kind.
    pub creates: u64,
    pub lists: u64,
    pub stats: u64,
    pub removes: u64,
    pub renames: u64,
    pub replaces: u64,
    /// Appends to logs, and the index's share of their bytes.
    pub appends: u64,
    pub bytes_appended: u64,
    pub index_bytes_written: u64,
    /// Bytes read from the backends, and the index's share.
    pub bytes_read: u64,
    pub index_bytes_read: u64,
    /// Collective calls (each rank's call counts once).
    pub collectives: u64,
    /// Point-to-point messages and payload bytes they stand for.
    pub messages: u64,
    pub message_bytes: u64,
    /// Messages the busiest rank received.
    pub max_rank_messages_received: u64,
    /// Latency rounds of the collectives, one rank's view.
    pub rounds: u64,
    /// Entries of the merged index of the whole file (extents plus pattern
    /// slots): what a rank holding all of it keeps in memory.
    pub index_entries: u64,
}

impl Figures {
    /// Metadata operations of every kind together.
    pub fn metadata_ops(&self) -> u64 {
        self.creates + self.lists + self.stats + self.removes + self.renames + self.replaces
    }

    /// Adds one rank's counts.
    fn absorb(&mut self, store: &OpCounts, comm: &CommCounts, entries: u64) {
        self.opens += store.opens;
        self.index_log_opens += store.index_log_opens;
        self.global_index_opens += store.global_index_opens;
        self.max_rank_opens = self.max_rank_opens.max(store.opens);
        self.creates += store.creates;
        self.lists += store.lists;
        self.stats += store.metadata;
        self.removes += store.removes;
        self.renames += store.renames;
        self.replaces += store.replaces;
        self.appends += store.appends;
        self.bytes_appended += store.bytes_appended;
        self.index_bytes_written += store.index_bytes_appended + store.global_index_bytes_written;
        self.bytes_read += store.bytes_read;
        self.index_bytes_read += store.index_log_bytes_read + store.global_index_bytes_read;
        self.collectives += comm.barriers + comm.broadcasts + comm.gathers + comm.allgathers + comm.splits;
        self.messages += comm.messages_sent;
        self.message_bytes += comm.bytes_sent;
        self.max_rank_messages_received = self.max_rank_messages_received.max(comm.messages_received);
        self.rounds = self.rounds.max(comm.rounds);
        self.index_entries = self.index_entries.max(entries);
    }
}

/// One operation measured and predicted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostRow {
    pub operation: Operation,
    pub measured: Figures,
    pub predicted: Figures,
}

impl CostRow {
    pub fn agrees(&self) -> bool {
        self.measured == self.predicted
    }
}

/// Measured against predicted for every operation at one point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostReport {
    pub params: CostParams,
    pub rows: Vec<CostRow>,
}

impl CostReport {
    pub fn agrees(&self) -> bool {
        self.rows.iter().all(CostRow::agrees)
    }
}

/// Measures every operation at `params` (work files under `dir`) and
/// predicts it.
pub fn run_cost(params: &CostParams, dir: &Path) -> Result<CostReport> {
    let predicted = predict(params);
    let rows = measure(params, dir)?
        .into_iter()
        .map(|(operation, measured)| {
            let predicted = predicted
                .iter()
                .find(|(op, _)| *op == operation)
                .map(|(_, figures)| *figures)
                .unwrap_or_default();
            CostRow { operation, measured, predicted }
        })
        .collect();
    Ok(CostReport { params: params.clone(), rows })
}

#[cfg(test)]
mod tests;

/// Heap bytes of the merged index one reader holds after an open by
/// `operation` (the whole file's, but under uniform restart only its own
/// log's); None for operations that build no index.
pub fn index_memory_per_rank(params: &CostParams, operation: Operation) -> Option<u64> {
    let whole = model::MergedShape::of(params);
    match operation {
        Operation::OpenNaive
        | Operation::OpenBroadcast
        | Operation::OpenParallel
        | Operation::OpenFlatten
        | Operation::OpenNaiveFlattened
        | Operation::Flatten => Some(whole.memory_bytes()),
        Operation::OpenUniformRestart => {
            let own = CostParams { ranks: 1, readers: 1, nodes: 1, ..params.clone() };
            Some(model::MergedShape::of(&own).memory_bytes())
        }
        _ => None,
    }
}

/// Table headings shared by the measured and the extrapolated tables.
const HEADINGS: [&str; 9] = [
    "opens",
    "busiest",
    "metadata",
    "index B written",
    "index B read",
    "messages",
    "message B",
    "rounds",
    "entries",
];

fn cells(figures: &Figures) -> [u64; 9] {
    [
        figures.opens,
        figures.max_rank_opens,
        figures.metadata_ops(),
        figures.index_bytes_written,
        figures.index_bytes_read,
        figures.messages,
        figures.message_bytes,
        figures.rounds,
        figures.index_entries,
    ]
}

impl CostReport {
    /// One line per operation: the measured figures, and where the model
    /// disagrees, what it predicted.
    pub fn to_text(&self) -> String {
        let p = &self.params;
        let mut text = format!(
            "{} ranks on {} nodes, {} readers, {} backends, {} hostdirs, {} {} records x {} B{}\n",
            p.ranks,
            p.nodes,
            p.readers,
            p.backends,
            p.num_hostdirs,
            p.records,
            p.pattern,
            p.record_bytes,
            p.group_ranks.map(|g| format!(", groups of {g}")).unwrap_or_default()
        );
        text.push_str(&format!("{:<24}", "operation"));
        for heading in HEADINGS {
            text.push_str(&format!(" {heading:>15}"));
        }
        text.push('\n');
        for row in &self.rows {
            text.push_str(&format!("{:<24}", row.operation.as_str()));
            for cell in cells(&row.measured) {
                text.push_str(&format!(" {cell:>15}"));
            }
            text.push('\n');
            if !row.agrees() {
                text.push_str(&format!("{:<24}", "  predicted"));
                for cell in cells(&row.predicted) {
                    text.push_str(&format!(" {cell:>15}"));
                }
                text.push('\n');
                text.push_str(&format!("  measured  {:?}\n  predicted {:?}\n", row.measured, row.predicted));
            }
        }
        text.push_str(if self.agrees() { "model agrees\n" } else { "MODEL DISAGREES\n" });
        text
    }
}

/// One predicted point of the extrapolation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExtrapolatedRow {
    pub params: CostParams,
    pub operation: Operation,
    pub predicted: Figures,
    /// Merged-index heap bytes per reader (None: no index built).
    pub index_memory_per_rank: Option<u64>,
}

/// The scales the extrapolation covers: N ranks, 32 per node.
pub const EXTRAPOLATED_RANKS: [u64; 4] = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
pub const EXTRAPOLATED_BACKENDS: [u64; 3] = [4, 16, 64];
/// Records per rank in the extrapolation.
pub const EXTRAPOLATED_RECORDS: u64 = 1000;
pub const RANKS_PER_NODE: u64 = 32;

/// The model at scales no test machine reaches: every reader restarts
/// (M = N), ranks 32 to a node, 1000 records of 1 MiB per rank.
pub fn extrapolate() -> Vec<ExtrapolatedRow> {
    let mut rows = Vec::new();
    for pattern in [Pattern::Regular, Pattern::Irregular] {
        for ranks in EXTRAPOLATED_RANKS {
            for backends in EXTRAPOLATED_BACKENDS {
                let params = CostParams {
                    ranks,
                    readers: ranks,
                    nodes: ranks / RANKS_PER_NODE,
                    backends,
                    num_hostdirs: plfs::config::Tuning::default().num_hostdirs,
                    records: EXTRAPOLATED_RECORDS,
                    record_bytes: 1 << 20,
                    pattern,
                    group_ranks: None,
                };
                for (operation, predicted) in predict(&params) {
                    let index_memory_per_rank = index_memory_per_rank(&params, operation);
                    rows.push(ExtrapolatedRow {
                        params: params.clone(),
                        operation,
                        predicted,
                        index_memory_per_rank,
                    });
                }
            }
        }
    }
    rows
}

/// The extrapolation as a table, one block per pattern and scale.
pub fn extrapolation_text(rows: &[ExtrapolatedRow]) -> String {
    let mut text = String::new();
    let mut last: Option<(Pattern, u64, u64)> = None;
    for row in rows {
        let p = &row.params;
        let key = (p.pattern, p.ranks, p.backends);
        if last != Some(key) {
            text.push_str(&format!(
                "\n{} ranks on {} nodes, {} backends, {} {} records per rank\n{:<24}",
                p.ranks, p.nodes, p.backends, p.records, p.pattern, "operation"
            ));
            for heading in HEADINGS.iter().take(8) {
                text.push_str(&format!(" {heading:>15}"));
            }
            text.push_str(&format!(" {:>15}\n", "index MiB/rank"));
            last = Some(key);
        }
        text.push_str(&format!("{:<24}", row.operation.as_str()));
        for cell in cells(&row.predicted).iter().take(8) {
            text.push_str(&format!(" {cell:>15}"));
        }
        match row.index_memory_per_rank {
            Some(bytes) => text.push_str(&format!(" {:>15.3}\n", bytes as f64 / (1 << 20) as f64)),
            None => text.push_str(&format!(" {:>15}\n", "-")),
        }
    }
    text
}
