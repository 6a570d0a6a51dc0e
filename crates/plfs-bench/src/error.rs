//! What can go wrong in a benchmark run, by what failed: the run's own
//! arguments, a local file, a plfs or store call, a worker process (its
//! start, its pipes, its protocol, its own reported failure), the data read
//! back, or a DataNode's JMX servlet. Every variant names the thing (path,
//! store URL, phase and rank) so the CLI's one-line message says where.

use std::io;
use std::path::PathBuf;

use crate::protocol::ProtocolError;

/// The bench's error. Its message is complete on its own (it already
/// includes its source's text); the source is kept for callers that walk
/// the chain, and the CLI prints a source only when it adds something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The spec or an argument cannot run as given.
    #[error("{0}")]
    Invalid(String),
    /// I/O on a named local file or directory.
    #[error("{doing} {}: {source}", path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// I/O at an offset of a named local file.
    #[error("{doing} {} at {offset}: {source}", path.display())]
    IoAt {
        doing: &'static str,
        path: PathBuf,
        offset: u64,
        #[source]
        source: io::Error,
    },
    /// Opening the store a backend URL names.
    #[error("{}", store_message(url, source))]
    Store {
        url: String,
        #[source]
        source: plfs::Error,
    },
    /// A plfs or store call; `target` names its logical path, store URL
    /// or mount.
    #[error("{doing} {target}: {source}")]
    Plfs {
        doing: &'static str,
        target: String,
        #[source]
        source: plfs::Error,
    },
    /// A plfs write or read moved fewer bytes than asked (where the bench
    /// counts that as an error, not as a mismatch to report).
    #[error("{doing} {target}: {count} of {expected} bytes")]
    Short { doing: &'static str, target: String, count: usize, expected: usize },
    /// Starting a worker process.
    #[error("{phase}: starting worker {rank} ({}): {source}", program.display())]
    Spawn {
        phase: String,
        rank: usize,
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Talking to a running worker, or to this process's own stdin and
    /// stdout as a worker.
    #[error("{phase}: {doing}: {source}")]
    Pipe {
        phase: String,
        doing: String,
        #[source]
        source: io::Error,
    },
    /// A worker reported that it failed, with its own message.
    #[error("{phase}: worker {rank}: {message}")]
    Worker { phase: String, rank: usize, message: String },
    /// A worker (or the parent) broke the READY/GO/RESULT protocol: it
    /// exited early, spoke out of turn or sent an unreadable line.
    #[error("{phase}: {problem}")]
    Protocol { phase: String, problem: String },
    /// A malformed protocol line.
    #[error("{phase}: {source}")]
    Malformed {
        phase: String,
        #[source]
        source: ProtocolError,
    },
    /// No answer from the workers before the deadline.
    #[error("{phase}: {who} still {doing} at the deadline")]
    Timeout { phase: String, who: &'static str, doing: &'static str },
    /// Encoding or decoding a JSON spec or result.
    #[error("{what}: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A collective call (MPI or threads) of the open benchmark.
    #[error("{doing}: {source}")]
    Collective {
        doing: &'static str,
        #[source]
        source: plfs::Error,
    },
    /// Another rank's failure, as that rank described it.
    #[error("{0}")]
    Rank(String),
    /// Data read back is not what was written.
    #[error("{what}: {problem}")]
    Data { what: String, problem: String },
    /// A DataNode's JMX servlet did not answer usefully.
    #[error("DataNode JMX {url}: {problem}")]
    Jmx { url: String, problem: String },
    /// Drawing or writing a figure (`plfs bench --plot/--report`).
    #[error("drawing {}: {message}", path.display())]
    Plot { path: PathBuf, message: String },
    /// A failure inside a larger step, which `context` names.
    #[error("{context}: {source}")]
    Context {
        context: String,
        #[source]
        source: Box<BenchError>,
    },
}

/// The store's message, with the URL in front unless the parser's or the
/// store's own message names it already.
fn store_message(url: &str, source: &plfs::Error) -> String {
    let message = source.to_string();
    if message.contains(url) { message } else { format!("backend {url}: {message}") }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

impl BenchError {
    pub(crate) fn invalid(message: impl Into<String>) -> BenchError {
        BenchError::Invalid(message.into())
    }

    pub(crate) fn io(doing: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> BenchError {
        let path = path.into();
        move |source| BenchError::Io { doing, path, source }
    }

    pub(crate) fn plfs(
        doing: &'static str,
        target: impl Into<String>,
    ) -> impl FnOnce(plfs::Error) -> BenchError {
        let target = target.into();
        move |source| BenchError::Plfs { doing, target, source }
    }

    /// This error inside the step `context` names.
    pub fn context(self, context: impl Into<String>) -> BenchError {
        BenchError::Context { context: context.into(), source: Box::new(self) }
    }
}
