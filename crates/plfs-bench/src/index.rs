//! `plfs bench index`: the merged index on its own, without I/O. Records
//! are produced the way writers produce them (the same pattern builder),
//! merged the way readers merge them, then looked up at random.
//!
//! Two cases: N writers × K strided records (the N-1 checkpoint, where
//! patterns should make the index tiny and lookups arithmetic), and random
//! small writes (no pattern to find: memory per record is what counts).

use std::time::Instant;

use plfs::format::frame;
use plfs::format::index_log::{self, Record, WriteRecord};
use plfs::index::pattern::PatternBuilder;
use plfs::index::{LogRef, MergedIndex, Source};
use serde::Serialize;

use crate::plot::{Figure, Plot, Point, Series, XAxis};

#[derive(Debug, Clone)]
pub struct IndexSpec {
    pub writers: u64,
    pub records: u64,
    pub record_bytes: u64,
    /// Random small writes for the second case.
    pub random_writes: u64,
    pub lookups: u64,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IndexCase {
    pub name: String,
    /// Writes the records stand for.
    pub writes: u64,
    /// Index records stored (a pattern counts once).
    pub records_stored: u64,
    /// Bytes those records take in index logs (frames included).
    pub index_log_bytes: u64,
    /// Bytes the same writes take as plain write records.
    pub plain_index_log_bytes: u64,
    pub entries: usize,
    pub memory_bytes: usize,
    pub memory_bytes_per_write: f64,
    pub build_seconds: f64,
    pub lookups: u64,
    pub lookups_per_second: f64,
    /// Every lookup landed where the writes put the byte.
    pub verified: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct IndexReport {
    pub cases: Vec<IndexCase>,
}

impl IndexReport {
    pub fn verified(&self) -> bool {
        self.cases.iter().all(|case| case.verified)
    }

    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "case             writes      stored  log bytes (plain)        entries  memory      B/write  build ms  lookups/s\n",
        );
        for c in &self.cases {
            out += &format!(
                "{:<14} {:>10} {:>10}  {:>9} ({:>11}) {:>8}  {:>9}  {:>8.2}  {:>8.1}  {:>10.0}{}\n",
                c.name,
                c.writes,
                c.records_stored,
                c.index_log_bytes,
                c.plain_index_log_bytes,
                c.entries,
                c.memory_bytes,
                c.memory_bytes_per_write,
                c.build_seconds * 1e3,
                c.lookups_per_second,
                if c.verified { "" } else { "  WRONG" },
            );
        }
        out
    }
}

/// A figure's value of one case.
type CaseValue = fn(&IndexCase) -> f64;

/// One bar per case in each figure: what the paper's index comparison
/// shows (memory per write, log bytes against plain records, build time,
/// lookups per second). One run, so no whiskers.
impl Plot for IndexReport {
    fn figures(&self) -> Vec<Figure> {
        let names: Vec<String> = self.cases.iter().map(|case| case.name.clone()).collect();
        let figure = |name: &str, title: &str, y_label: &str, series: Vec<(&str, CaseValue)>| Figure {
            name: name.to_owned(),
            title: title.to_owned(),
            x_label: "case".to_owned(),
            y_label: y_label.to_owned(),
            x_axis: XAxis::Categories(names.clone()),
            series: series
                .into_iter()
                .map(|(label, value)| Series {
                    name: label.to_owned(),
                    points: self
                        .cases
                        .iter()
                        .enumerate()
                        .map(|(i, case)| Point::single(i as f64, value(case)))
                        .collect(),
                })
                .collect(),
        };
        vec![
            figure(
                "index-memory",
                "Merged index memory per write",
                "bytes per write",
                vec![("merged index", |c| c.memory_bytes_per_write)],
            ),
            figure(
                "index-log-bytes",
                "Index log bytes, stored against plain write records",
                "MiB",
                vec![
                    ("stored (patterns folded)", |c| c.index_log_bytes as f64 / (1 << 20) as f64),
                    ("plain write records", |c| c.plain_index_log_bytes as f64 / (1 << 20) as f64),
                ],
            ),
            figure(
                "index-build",
                "Time to merge the index",
                "ms",
                vec![("build", |c| c.build_seconds * 1e3)],
            ),
            figure(
                "index-lookups",
                "Random lookups per second",
                "lookups per second",
                vec![("lookups", |c| c.lookups_per_second)],
            ),
        ]
    }
}

/// splitmix64: a fixed, seedable sequence, so runs are comparable.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

pub fn run(spec: &IndexSpec) -> IndexReport {
    IndexReport { cases: vec![strided(spec), random(spec)] }
}

/// Writer `w`'s record `k` at `(k * writers + w) * size`: N-1 strided.
fn strided(spec: &IndexSpec) -> IndexCase {
    let (writers, records, size) = (spec.writers, spec.records, spec.record_bytes);
    let logs: Vec<Vec<Record>> = (0..writers)
        .map(|writer| {
            let mut builder = PatternBuilder::new();
            let mut out = Vec::new();
            for k in 0..records {
                out.extend(builder.push(WriteRecord {
                    logical: (k * writers + writer) * size,
                    length: size,
                    physical: 64 + k * size,
                    stamp: k * writers + writer + 1,
                    sequence: k,
                    writer,
                    data_crc: 0,
                }));
            }
            out.extend(builder.take());
            out
        })
        .collect();
    let expect = |offset: u64| {
        let (block, within) = (offset / size, offset % size);
        (LogRef((block % writers) as u32), 64 + (block / writers) * size + within)
    };
    measure("strided", spec, &logs, writers * records, writers * records * size, expect)
}

/// Random small writes (1..=4096 bytes) at shuffled, non-overlapping
/// places, spread over the writers.
fn random(spec: &IndexSpec) -> IndexCase {
    const SLOT: u64 = 4096;
    let count = spec.random_writes;
    let mut random = Random(spec.seed ^ 0x5eed);
    let mut slots: Vec<u64> = (0..count).collect();
    for i in (1..slots.len()).rev() {
        slots.swap(i, random.below(i as u64 + 1) as usize);
    }
    let writers = spec.writers.clamp(1, 64);
    let mut physical = vec![64u64; writers as usize];
    let mut sequence = vec![0u64; writers as usize];
    let mut logs: Vec<Vec<Record>> = vec![Vec::new(); writers as usize];
    // slot -> (log, physical, length), to verify lookups.
    let mut placed: Vec<(u32, u64, u64)> = vec![(0, 0, 0); count as usize];
    for (i, &slot) in slots.iter().enumerate() {
        let writer = (i as u64 % writers) as usize;
        let length = 1 + random.below(SLOT);
        logs[writer].push(Record::Write(WriteRecord {
            logical: slot * SLOT,
            length,
            physical: physical[writer],
            stamp: i as u64 + 1,
            sequence: sequence[writer],
            writer: writer as u64,
            data_crc: 0,
        }));
        placed[slot as usize] = (writer as u32, physical[writer], length);
        physical[writer] += length;
        sequence[writer] += 1;
    }
    let expect = |offset: u64| {
        let (log, physical, length) = placed[(offset / SLOT) as usize];
        let within = offset % SLOT;
        if within < length { (LogRef(log), physical + within) } else { (LogRef(u32::MAX), 0) }
    };
    measure("random-small", spec, &logs, count, count * SLOT, expect)
}

fn measure(
    name: &str,
    spec: &IndexSpec,
    logs: &[Vec<Record>],
    writes: u64,
    span: u64,
    expect: impl Fn(u64) -> (LogRef, u64),
) -> IndexCase {
    let records_stored: u64 = logs.iter().map(|log| log.len() as u64).sum();
    let index_log_bytes: u64 = logs.iter().map(|log| index_log::encode_frames(log).len() as u64).sum();
    let plain_index_log_bytes =
        writes * index_log::WRITE_RECORD_BYTES as u64 + logs.len() as u64 * frame::FRAME_HEADER_BYTES as u64;
    let started = Instant::now();
    let index =
        MergedIndex::from_logs(logs.iter().enumerate().map(|(i, r)| (LogRef(i as u32), r.as_slice())), true);
    let build_seconds = started.elapsed().as_secs_f64();
    // Offsets drawn first so the timed loop is lookups only.
    let mut random = Random(spec.seed);
    let drawn = spec.lookups.clamp(1, 1 << 20).next_power_of_two();
    let offsets: Vec<u64> = (0..drawn).map(|_| random.below(span.max(1))).collect();
    let mut pieces = Vec::with_capacity(4);
    let mut checksum = 0u64;
    let started = Instant::now();
    for i in 0..spec.lookups {
        let offset = offsets[(i & (drawn - 1)) as usize];
        index.lookup_into(offset, 1, &mut pieces);
        if let Some(piece) = pieces.first()
            && let Source::Data { physical, .. } = piece.source
        {
            checksum = checksum.wrapping_add(physical);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    std::hint::black_box(checksum);
    // Verify a sample outside the timed loop.
    let verified = offsets.iter().take(100_000).all(|&offset| {
        index.lookup_into(offset, 1, &mut pieces);
        let (log, physical) = expect(offset);
        match pieces.first().map(|piece| piece.source) {
            Some(Source::Data { log: got, physical: at }) => got == log && at == physical,
            Some(Source::Hole) | None => log == LogRef(u32::MAX),
        }
    });
    IndexCase {
        name: name.to_owned(),
        writes,
        records_stored,
        index_log_bytes,
        plain_index_log_bytes,
        entries: index.entry_count(),
        memory_bytes: index.memory_bytes(),
        memory_bytes_per_write: index.memory_bytes() as f64 / writes.max(1) as f64,
        build_seconds,
        lookups: spec.lookups,
        lookups_per_second: spec.lookups as f64 / seconds.max(1e-9),
        verified,
    }
}
