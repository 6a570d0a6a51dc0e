//! The line protocol between the bench's parent and its worker processes,
//! one encoder and one parser for both directions, used by the bandwidth
//! bench ([`crate::runner`], [`crate::worker`]), the MPI-IO phases (whose
//! C program prints the same result lines) and `plfs bench mdtest`.
//!
//! Worker → parent, on the worker's stdout; every line carries its
//! [`Channel`]'s marker, so a CLI or test harness may print anything else
//! around it (even earlier on the same line):
//!
//! | line                          | meaning                                   |
//! |-------------------------------|-------------------------------------------|
//! | `<MARKER>READY <rank>`        | set-up done, waiting for GO               |
//! | `<MARKER>RESULT <json>`       | one phase's figures (anything after the JSON value is ignored) |
//! | `<MARKER>ERROR <message>`     | the worker failed; the message is one line |
//!
//! with `<MARKER>` `PLFS-BENCH-` or `PLFS-MDTEST-`. Parent → worker, on its
//! stdin: `GO <unix-ns>` (bench: the common start instant of its one
//! phase), `GO <unix-ns> <phase>` (mdtest: one per phase) and `EXIT`
//! (mdtest: no more phases; end of input means the same).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::Sender;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::BenchError;

/// Which benchmark's workers speak: each prefixes its lines with its own
/// marker, so one benchmark never takes another's lines for its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// `plfs bench` workers and the MPI-IO program.
    Bench,
    /// `plfs bench mdtest` ranks.
    Mdtest,
}

impl Channel {
    pub const fn marker(self) -> &'static str {
        match self {
            Channel::Bench => "PLFS-BENCH-",
            Channel::Mdtest => "PLFS-MDTEST-",
        }
    }
}

/// A line from a worker to the parent; `R` is its result type.
#[derive(Debug, Clone, PartialEq)]
pub enum Report<R> {
    Ready { rank: usize },
    Result(R),
    Error(String),
}

/// A phase named in a GO line.
pub trait Phase: Sized + Copy {
    fn as_str(self) -> &'static str;
    fn parse(word: &str) -> Option<Self>;
}

/// The bench's GO names no phase: a worker runs the one phase of its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPhase {}

impl Phase for NoPhase {
    fn as_str(self) -> &'static str {
        match self {}
    }

    fn parse(_: &str) -> Option<NoPhase> {
        None
    }
}

/// A line from the parent to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order<P> {
    /// Start (the phase) at this unix time in nanoseconds.
    Go { start_ns: u64, phase: Option<P> },
    /// No more phases.
    Exit,
}

/// A protocol line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("unknown message {0:?}")]
    UnknownReport(String),
    #[error("READY without a rank: {0:?}")]
    ReadyWithoutRank(String),
    #[error("unreadable result {json:?}: {message}")]
    UnreadableResult { json: String, message: String },
    #[error("empty result line")]
    EmptyResult,
    #[error("expected \"GO <unix-ns>{}\"{}, got {line:?}", if *.phased { " <phase>" } else { "" }, if *.phased { " or \"EXIT\"" } else { "" })]
    BadOrder { line: String, phased: bool },
    #[error("unknown phase {0:?}")]
    UnknownPhase(String),
}

impl<R: Serialize> Report<R> {
    /// The line (without its newline) a worker prints.
    pub fn encode(&self, channel: Channel) -> Result<String, serde_json::Error> {
        let marker = channel.marker();
        Ok(match self {
            Report::Ready { rank } => format!("{marker}READY {rank}"),
            Report::Result(result) => format!("{marker}RESULT {}", serde_json::to_string(result)?),
            // The parent reads lines: a single line keeps the message whole.
            Report::Error(message) => format!("{marker}ERROR {}", message.replace('\n', " | ")),
        })
    }
}

impl<R: DeserializeOwned> Report<R> {
    /// The report in `line`, or None when the line has no `channel` marker
    /// (other output of the worker or its harness).
    pub fn parse(channel: Channel, line: &str) -> Option<Result<Report<R>, ProtocolError>> {
        let marker = channel.marker();
        let at = line.find(marker)?;
        let rest = &line[at + marker.len()..];
        let (verb, argument) = rest.split_once(' ').unwrap_or((rest, ""));
        Some(match verb {
            "READY" => match argument.split_whitespace().next().map(str::parse) {
                Some(Ok(rank)) => Ok(Report::Ready { rank }),
                _ => Err(ProtocolError::ReadyWithoutRank(rest.to_owned())),
            },
            // One value; whatever a harness appends after it is ignored.
            "RESULT" => match serde_json::Deserializer::from_str(argument).into_iter::<R>().next() {
                Some(Ok(result)) => Ok(Report::Result(result)),
                Some(Err(error)) => Err(ProtocolError::UnreadableResult {
                    json: argument.to_owned(),
                    message: error.to_string(),
                }),
                None => Err(ProtocolError::EmptyResult),
            },
            "ERROR" => Ok(Report::Error(argument.to_owned())),
            _ => Err(ProtocolError::UnknownReport(rest.to_owned())),
        })
    }
}

impl<P: Phase> fmt::Display for Order<P> {
    /// The line (without its newline) the parent writes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::Go { start_ns, phase: None } => write!(f, "GO {start_ns}"),
            Order::Go { start_ns, phase: Some(phase) } => write!(f, "GO {start_ns} {}", phase.as_str()),
            Order::Exit => f.write_str("EXIT"),
        }
    }
}

impl<P: Phase> Order<P> {
    /// Parses one line from the parent. `phased`: the protocol whose GO
    /// names a phase (and which has EXIT); without, only `GO <unix-ns>`.
    pub fn parse(line: &str, phased: bool) -> Result<Order<P>, ProtocolError> {
        let bad = || ProtocolError::BadOrder { line: line.to_owned(), phased };
        let words: Vec<&str> = line.split_whitespace().collect();
        match (words.as_slice(), phased) {
            (["EXIT"], true) => Ok(Order::Exit),
            (["GO", ns], false) => Ok(Order::Go { start_ns: ns.parse().map_err(|_| bad())?, phase: None }),
            (["GO", ns, phase], true) => {
                let start_ns = ns.parse().map_err(|_| bad())?;
                let phase =
                    P::parse(phase).ok_or_else(|| ProtocolError::UnknownPhase((*phase).to_owned()))?;
                Ok(Order::Go { start_ns, phase: Some(phase) })
            }
            _ => Err(bad()),
        }
    }

    /// Writes this order to a worker's stdin, flushed.
    pub fn send(&self, stdin: &mut impl Write) -> io::Result<()> {
        stdin.write_all(format!("{self}\n").as_bytes())?;
        stdin.flush()
    }
}

/// Prints `report` on this worker's stdout, flushed at once so the parent
/// sees it while the worker waits.
pub fn send_report<R: Serialize>(channel: Channel, report: &Report<R>) -> Result<(), BenchError> {
    let line = report
        .encode(channel)
        .map_err(|source| BenchError::Json { what: "encoding the worker's result".to_owned(), source })?;
    let mut out = io::stdout().lock();
    let worker = match channel {
        Channel::Bench => "bench worker",
        Channel::Mdtest => "mdtest worker",
    };
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(|source| BenchError::Pipe {
        phase: worker.to_owned(),
        doing: "writing to stdout".to_owned(),
        source,
    })
}

/// Reads the parent's next order from this worker's stdin; None at the
/// end of input. `worker` names this worker in errors.
pub fn receive_order<P: Phase>(
    input: &mut impl BufRead,
    phased: bool,
    worker: &str,
) -> Result<Option<Order<P>>, BenchError> {
    let mut line = String::new();
    let read = input.read_line(&mut line).map_err(|source| BenchError::Pipe {
        phase: worker.to_owned(),
        doing: "reading stdin".to_owned(),
        source,
    })?;
    if read == 0 {
        return Ok(None);
    }
    Order::parse(&line, phased)
        .map(Some)
        .map_err(|source| BenchError::Malformed { phase: worker.to_owned(), source })
}

/// What the parent hears from one worker.
pub enum Event<R> {
    Report(Report<R>),
    Malformed(ProtocolError),
    /// Its stdout closed (it exited, or is about to).
    Eof,
}

/// Forwards every report on a worker's stdout to `events`, tagged with its
/// rank, then `Eof`; run on a thread of its own per worker.
pub fn forward<R: DeserializeOwned>(
    channel: Channel,
    rank: usize,
    stdout: impl Read,
    events: Sender<(usize, Event<R>)>,
) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let event = match Report::parse(channel, &line) {
            None => continue,
            Some(Ok(report)) => Event::Report(report),
            Some(Err(error)) => Event::Malformed(error),
        };
        if events.send((rank, event)).is_err() {
            return;
        }
    }
    let _ = events.send((rank, Event::Eof));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mdtest::MdPhase;
    use crate::worker::WorkerResult;

    fn result() -> WorkerResult {
        WorkerResult {
            rank: 2,
            began_ns: 10,
            end_ns: 20,
            bytes: 4096,
            records: 1,
            bad_records: 0,
            first_bad: Some("x".to_owned()),
            // What the MPI-IO program sends: it cannot tell its CPU time.
            cpu_ns: 0,
            opened_ns: 12,
            io_done_ns: 18,
        }
    }

    fn parse(channel: Channel, line: &str) -> Option<Result<Report<WorkerResult>, ProtocolError>> {
        Report::parse(channel, line)
    }

    #[test]
    fn every_report_round_trips_with_todays_bytes() {
        let ready: Report<WorkerResult> = Report::Ready { rank: 3 };
        assert_eq!(ready.encode(Channel::Bench).unwrap(), "PLFS-BENCH-READY 3");
        assert_eq!(ready.encode(Channel::Mdtest).unwrap(), "PLFS-MDTEST-READY 3");
        let json = serde_json::to_string(&result()).unwrap();
        let done = Report::Result(result());
        assert_eq!(done.encode(Channel::Bench).unwrap(), format!("PLFS-BENCH-RESULT {json}"));
        let failed: Report<WorkerResult> = Report::Error("open /x: gone\nsecond line".to_owned());
        assert_eq!(failed.encode(Channel::Bench).unwrap(), "PLFS-BENCH-ERROR open /x: gone | second line");
        for channel in [Channel::Bench, Channel::Mdtest] {
            for report in [&ready, &done] {
                assert_eq!(parse(channel, &report.encode(channel).unwrap()), Some(Ok(report.clone())));
            }
            let line = failed.encode(channel).unwrap();
            let message = "open /x: gone | second line".to_owned();
            assert_eq!(parse(channel, &line), Some(Ok(Report::Error(message))));
        }
    }

    #[test]
    fn reports_are_found_after_harness_output_and_only_on_their_channel() {
        let line =
            format!("test worker ... PLFS-BENCH-RESULT {} ok", serde_json::to_string(&result()).unwrap());
        assert_eq!(parse(Channel::Bench, &line), Some(Ok(Report::Result(result()))));
        assert_eq!(parse(Channel::Mdtest, &line), None);
        assert_eq!(parse(Channel::Bench, "running 1 test"), None);
        assert_eq!(parse(Channel::Bench, ""), None);
        // The MPI-IO program's lines, as its printf writes them.
        let mpi = r#"PLFS-BENCH-RESULT {"rank":2,"began_ns":10,"end_ns":20,"bytes":4096,"records":1,"bad_records":0,"first_bad":"x","opened_ns":12,"io_done_ns":18}"#;
        assert_eq!(parse(Channel::Bench, mpi), Some(Ok(Report::Result(result()))));
        // A line without the split (an older program) still parses, as 0s.
        let unsplit = r#"PLFS-BENCH-RESULT {"rank":2,"began_ns":10,"end_ns":20,"bytes":4096,"records":1,"bad_records":0,"first_bad":"x"}"#;
        let zeros = WorkerResult { opened_ns: 0, io_done_ns: 0, ..result() };
        assert_eq!(parse(Channel::Bench, unsplit), Some(Ok(Report::Result(zeros))));
        assert_eq!(
            parse(Channel::Bench, "PLFS-BENCH-ERROR mpiio_bench: bad RECORDS"),
            Some(Ok(Report::Error("mpiio_bench: bad RECORDS".to_owned())))
        );
    }

    #[test]
    fn malformed_reports_are_errors_naming_the_line() {
        let malformed = |line: &str| parse(Channel::Bench, line).unwrap().unwrap_err();
        assert_eq!(malformed("PLFS-BENCH-READY"), ProtocolError::ReadyWithoutRank("READY".to_owned()));
        assert_eq!(malformed("PLFS-BENCH-READY x"), ProtocolError::ReadyWithoutRank("READY x".to_owned()));
        assert_eq!(malformed("PLFS-BENCH-RESULT "), ProtocolError::EmptyResult);
        assert_eq!(malformed("PLFS-BENCH-RESULT"), ProtocolError::EmptyResult);
        let unreadable = malformed("PLFS-BENCH-RESULT {\"rank\":1}");
        assert!(
            matches!(&unreadable, ProtocolError::UnreadableResult { json, .. } if json == "{\"rank\":1}"),
            "{unreadable}"
        );
        assert!(unreadable.to_string().contains("missing field"), "{unreadable}");
        assert_eq!(malformed("PLFS-BENCH-HELLO 1"), ProtocolError::UnknownReport("HELLO 1".to_owned()));
        assert_eq!(malformed("PLFS-BENCH-"), ProtocolError::UnknownReport(String::new()));
    }

    #[test]
    fn orders_round_trip_with_todays_bytes() {
        let go: Order<NoPhase> = Order::Go { start_ns: 1_700_000_000_123_456_789, phase: None };
        assert_eq!(go.to_string(), "GO 1700000000123456789");
        assert_eq!(Order::<NoPhase>::parse("GO 1700000000123456789\n", false), Ok(go));
        let phased = Order::Go { start_ns: 5, phase: Some(MdPhase::Stat) };
        assert_eq!(phased.to_string(), "GO 5 stat");
        assert_eq!(Order::<MdPhase>::Exit.to_string(), "EXIT");
        for order in [phased, Order::Go { start_ns: 0, phase: Some(MdPhase::Create) }, Order::Exit] {
            assert_eq!(Order::<MdPhase>::parse(&order.to_string(), true), Ok(order));
        }
        let mut sent = Vec::new();
        phased.send(&mut sent).unwrap();
        assert_eq!(sent, b"GO 5 stat\n");
    }

    #[test]
    fn malformed_orders_are_errors_naming_the_line() {
        let bench = |line: &str| Order::<NoPhase>::parse(line, false).unwrap_err();
        let mdtest = |line: &str| Order::<MdPhase>::parse(line, true).unwrap_err();
        for line in ["", "GO", "GO x", "GO -1", "GO 1 stat", "EXIT", "go 1", "START 1"] {
            assert_eq!(
                bench(line),
                ProtocolError::BadOrder { line: line.to_owned(), phased: false },
                "{line:?}"
            );
        }
        assert_eq!(bench("GO").to_string(), "expected \"GO <unix-ns>\", got \"GO\"");
        for line in ["", "GO 1", "GO x stat", "GO 1 stat extra", "EXIT now"] {
            assert_eq!(
                mdtest(line),
                ProtocolError::BadOrder { line: line.to_owned(), phased: true },
                "{line:?}"
            );
        }
        assert_eq!(mdtest("GO 1").to_string(), "expected \"GO <unix-ns> <phase>\" or \"EXIT\", got \"GO 1\"");
        assert_eq!(mdtest("GO 1 chmod"), ProtocolError::UnknownPhase("chmod".to_owned()));
    }

    #[test]
    fn a_worker_reads_orders_until_the_end_of_input() {
        let mut input: &[u8] = b"GO 7 create\nEXIT\n";
        let first = receive_order::<MdPhase>(&mut input, true, "rank 0").unwrap();
        assert_eq!(first, Some(Order::Go { start_ns: 7, phase: Some(MdPhase::Create) }));
        assert_eq!(receive_order::<MdPhase>(&mut input, true, "rank 0").unwrap(), Some(Order::Exit));
        assert_eq!(receive_order::<MdPhase>(&mut input, true, "rank 0").unwrap(), None);
        let mut garbage: &[u8] = b"GO soon\n";
        let error = receive_order::<NoPhase>(&mut garbage, false, "worker 3").unwrap_err();
        assert_eq!(error.to_string(), "worker 3: expected \"GO <unix-ns>\", got \"GO soon\\n\"");
    }

    #[test]
    fn the_parent_hears_every_report_then_eof() {
        let (sender, events) = std::sync::mpsc::channel();
        let output = format!(
            "noise\nPLFS-BENCH-READY 4\nPLFS-BENCH-RESULT {}\nPLFS-BENCH-RESULT nope\nPLFS-BENCH-ERROR boom\n",
            serde_json::to_string(&result()).unwrap()
        );
        forward::<WorkerResult>(Channel::Bench, 4, output.as_bytes(), sender);
        let heard: Vec<_> = events.iter().collect();
        assert_eq!(heard.len(), 5);
        assert!(heard.iter().all(|(rank, _)| *rank == 4));
        assert!(matches!(heard[0].1, Event::Report(Report::Ready { rank: 4 })));
        assert!(matches!(&heard[1].1, Event::Report(Report::Result(r)) if *r == result()));
        assert!(matches!(heard[2].1, Event::Malformed(ProtocolError::UnreadableResult { .. })));
        assert!(matches!(&heard[3].1, Event::Report(Report::Error(m)) if m == "boom"));
        assert!(matches!(heard[4].1, Event::Eof));
    }
}
