use super::*;
use crate::format::index_log::{TruncateRecord, WriteRecord};
use proptest::prelude::*;

/// Byte-level oracle: for each logical byte, which (log, physical byte)
/// holds it, or None for a hole.
#[derive(Default)]
struct Model {
    bytes: Vec<Option<(LogRef, u64)>>,
}

impl Model {
    fn write(&mut self, logical: u64, length: u64, log: LogRef, physical: u64) {
        if length == 0 {
            return;
        }
        let end = (logical + length) as usize;
        if self.bytes.len() < end {
            self.bytes.resize(end, None);
        }
        for i in 0..length {
            self.bytes[(logical + i) as usize] = Some((log, physical + i));
        }
    }

    fn truncate(&mut self, size: u64) {
        self.bytes.resize(size as usize, None);
    }
}

fn expand(index: &MergedIndex) -> Vec<Option<(LogRef, u64)>> {
    let mut out = Vec::new();
    for piece in index.lookup(0, u64::MAX) {
        for i in 0..piece.length {
            out.push(match piece.source {
                Source::Hole => None,
                Source::Data { log, physical } => Some((log, physical + i)),
            });
        }
    }
    out
}

/// Every lookup answer of an index, normalised: adjacent holes merged and
/// adjacent data pieces merged when contiguous in one log, so indexes that
/// store the same mapping differently compare equal.
fn answers(index: &MergedIndex) -> (u64, Vec<Piece>) {
    let mut merged: Vec<Piece> = Vec::new();
    for piece in index.lookup(0, u64::MAX) {
        if let Some(last) = merged.last_mut() {
            let joins = match (last.source, piece.source) {
                (Source::Hole, Source::Hole) => true,
                (Source::Data { log: a, physical: p }, Source::Data { log: b, physical: q }) => {
                    a == b && p + last.length == q
                }
                _ => false,
            };
            if joins {
                last.length += piece.length;
                continue;
            }
        }
        merged.push(piece);
    }
    (index.eof(), merged)
}

#[derive(Debug, Clone)]
enum Op {
    Write { logical: u64, length: u64, log: u32 },
    Truncate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u64..400, 0u64..120, 0u32..4)
            .prop_map(|(logical, length, log)| Op::Write { logical, length, log }),
        1 => (0u64..500).prop_map(Op::Truncate),
    ]
}

proptest! {
    #[test]
    fn matches_byte_model(ops in proptest::collection::vec(op(), 1..60), compress in any::<bool>()) {
        let mut index = MergedIndex::new(compress);
        let mut model = Model::default();
        let mut physical_next = [0u64; 4];
        for op in &ops {
            match *op {
                Op::Write { logical, length, log } => {
                    let physical = physical_next[log as usize];
                    physical_next[log as usize] += length;
                    index.apply_write(logical, length, LogRef(log), physical);
                    model.write(logical, length, LogRef(log), physical);
                }
                Op::Truncate(size) => {
                    index.apply_truncate(size);
                    model.truncate(size);
                }
            }
        }
        prop_assert_eq!(index.eof(), model.bytes.len() as u64);
        prop_assert_eq!(expand(&index), model.bytes.clone());
        // Random sub-range lookups agree with the full expansion.
        for start in (0..model.bytes.len() as u64).step_by(37) {
            let pieces = index.lookup(start, 50);
            let mut position = start;
            for piece in pieces {
                prop_assert_eq!(piece.logical, position);
                for i in 0..piece.length {
                    let expected = model.bytes[(position + i) as usize];
                    let actual = match piece.source {
                        Source::Hole => None,
                        Source::Data { log, physical } => Some((log, physical + i)),
                    };
                    prop_assert_eq!(actual, expected);
                }
                position += piece.length;
            }
            prop_assert_eq!(position, (start + 50).min(model.bytes.len() as u64));
        }
    }

    #[test]
    fn record_order_not_log_order_decides(
        writes in proptest::collection::vec((0u64..200, 1u64..50, 0u32..3, any::<u16>()), 1..40)
    ) {
        // Records are handed over grouped by log in arbitrary order; the merge
        // must apply them by stamp.
        let mut per_log: Vec<Vec<Record>> = vec![Vec::new(); 3];
        let mut by_stamp = Vec::new();
        let mut physical_next = [0u64; 3];
        for (sequence, &(logical, length, log, jitter)) in writes.iter().enumerate() {
            let stamp = u64::from(jitter) * 1000 + sequence as u64;
            let physical = physical_next[log as usize];
            physical_next[log as usize] += length;
            per_log[log as usize].push(Record::Write(WriteRecord {
                logical, length, physical, stamp, sequence: sequence as u64,
                writer: u64::from(log), data_crc: 0,
            }));
            by_stamp.push((stamp, logical, length, log, physical));
        }
        let index = MergedIndex::from_logs(
            per_log.iter().enumerate().map(|(i, records)| (LogRef(i as u32), records.as_slice())),
            true,
        );
        by_stamp.sort();
        let mut model = Model::default();
        for (_, logical, length, log, physical) in by_stamp {
            model.write(logical, length, LogRef(log), physical);
        }
        prop_assert_eq!(expand(&index), model.bytes);
    }
}

proptest! {
    /// The one-pass build for non-overlapping writes gives the same index as
    /// applying the records one by one in stamp order.
    #[test]
    fn one_pass_build_matches_ordered_application(
        segments in proptest::collection::vec((0u64..50, 1u64..40, 0u32..3, any::<bool>()), 1..60),
        shuffle in any::<u64>(),
        compress in any::<bool>(),
    ) {
        let mut position = 0;
        let mut physical_next = [64u64; 3];
        let mut writes = Vec::new();
        for (index, &(gap, length, log, contiguous)) in segments.iter().enumerate() {
            position += if contiguous { 0 } else { gap };
            let physical = physical_next[log as usize];
            physical_next[log as usize] += length + if contiguous { 0 } else { gap };
            writes.push((log, WriteRecord { logical: position, length, physical, stamp: 0, sequence: index as u64, writer: u64::from(log), data_crc: 0 }));
            position += length;
        }
        // Stamps in an order unrelated to offsets.
        for (index, (_, write)) in writes.iter_mut().enumerate() {
            write.stamp = (index as u64).wrapping_mul(shuffle | 1) % 1_000_003;
        }
        let mut per_log: Vec<Vec<Record>> = vec![Vec::new(); 3];
        for (log, write) in &writes {
            per_log[*log as usize].push(Record::Write(*write));
        }
        let built = MergedIndex::from_logs(
            per_log.iter().enumerate().map(|(i, records)| (LogRef(i as u32), records.as_slice())), compress);
        let mut ordered = writes.clone();
        ordered.sort_by_key(|(_, w)| (w.stamp, w.writer, w.sequence));
        let mut applied = MergedIndex::new(compress);
        for (log, write) in ordered {
            applied.apply_write(write.logical, write.length, LogRef(log), write.physical);
        }
        prop_assert!(built.overlay.is_empty(), "non-overlapping writes stay in the frozen layer");
        prop_assert_eq!(answers(&built), answers(&applied));
    }
}

#[test]
fn newest_wins_at_byte_granularity() {
    let mut index = MergedIndex::new(true);
    index.apply_write(0, 100, LogRef(0), 0);
    index.apply_write(10, 5, LogRef(1), 1000);
    let pieces = index.lookup(0, 100);
    assert_eq!(
        pieces,
        vec![
            Piece { logical: 0, length: 10, source: Source::Data { log: LogRef(0), physical: 0 } },
            Piece { logical: 10, length: 5, source: Source::Data { log: LogRef(1), physical: 1000 } },
            Piece { logical: 15, length: 85, source: Source::Data { log: LogRef(0), physical: 15 } },
        ]
    );
}

#[test]
fn truncate_then_grow_leaves_a_hole() {
    let records = [
        Record::Write(WriteRecord {
            logical: 0,
            length: 100,
            physical: 64,
            stamp: 1,
            sequence: 0,
            writer: 1,
            data_crc: 0,
        }),
        Record::Truncate(TruncateRecord { size: 10, stamp: 2, sequence: 1, writer: 1 }),
        Record::Truncate(TruncateRecord { size: 50, stamp: 3, sequence: 2, writer: 1 }),
    ];
    let index = MergedIndex::from_logs([(LogRef(0), &records[..])], true);
    assert_eq!(index.eof(), 50);
    assert_eq!(
        index.lookup(0, 1000),
        vec![
            Piece { logical: 0, length: 10, source: Source::Data { log: LogRef(0), physical: 64 } },
            Piece { logical: 10, length: 40, source: Source::Hole },
        ]
    );
}

#[test]
fn contiguous_appends_collapse_to_one_extent() {
    let mut index = MergedIndex::new(true);
    for i in 0..1000u64 {
        index.apply_write(i * 10, 10, LogRef(0), 64 + i * 10);
    }
    assert_eq!(index.extent_count(), 1);
    let mut plain = MergedIndex::new(false);
    for i in 0..1000u64 {
        plain.apply_write(i * 10, 10, LogRef(0), 64 + i * 10);
    }
    assert_eq!(plain.extent_count(), 1000);
    assert_eq!(expand(&index), expand(&plain));
}

#[test]
fn offsets_near_the_limit_do_not_overflow() {
    let mut index = MergedIndex::new(true);
    index.apply_write(FILE_SIZE_MAX - 10, 100, LogRef(0), 0);
    assert_eq!(index.eof(), FILE_SIZE_MAX);
    assert_eq!(index.lookup(FILE_SIZE_MAX - 5, 100).len(), 1);
    assert!(index.lookup(FILE_SIZE_MAX, 10).is_empty());
}

/// What a simulated process does next, for the pattern/plain equivalence.
#[derive(Debug, Clone)]
enum Step {
    /// Writer starts a strided pattern at `start`.
    Pattern {
        writer: usize,
        start: u64,
        length: u64,
        gap: u64,
    },
    /// Writer writes the next block of its pattern.
    Next {
        writer: usize,
        repeat: u8,
    },
    Irregular {
        writer: usize,
        logical: u64,
        length: u64,
    },
    Truncate {
        writer: usize,
        size: u64,
    },
    /// Writer's index frame is flushed (sync, threshold).
    Flush {
        writer: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0usize..4, 0u64..300, 1u64..20, 0u64..40)
            .prop_map(|(writer, start, length, gap)| Step::Pattern { writer, start, length, gap }),
        8 => (0usize..4, 1u8..6).prop_map(|(writer, repeat)| Step::Next { writer, repeat }),
        2 => (0usize..4, 0u64..400, 1u64..60)
            .prop_map(|(writer, logical, length)| Step::Irregular { writer, logical, length }),
        1 => (0usize..4, 0u64..400).prop_map(|(writer, size)| Step::Truncate { writer, size }),
        1 => (0usize..4).prop_map(|writer| Step::Flush { writer }),
    ]
}

/// One simulated process with four writers, recording every write both as
/// plain records and the way `file.rs` records it (pattern builder + run
/// tracker), so the two logs can be merged and compared.
#[derive(Default)]
struct Simulation {
    plain: Vec<Vec<Record>>,
    patterned: Vec<Vec<Record>>,
    builders: Vec<pattern::PatternBuilder>,
    tracker: pattern::RunTracker,
    physical: Vec<u64>,
    sequence: Vec<u64>,
    cursor: Vec<(u64, u64, u64)>,
    stamp: u64,
    model: Model,
}

impl Simulation {
    fn new(writers: usize) -> Simulation {
        Simulation {
            plain: vec![Vec::new(); writers],
            patterned: vec![Vec::new(); writers],
            builders: (0..writers).map(|_| pattern::PatternBuilder::new()).collect(),
            physical: vec![64; writers],
            sequence: vec![0; writers],
            cursor: vec![(0, 1, 1); writers],
            ..Simulation::default()
        }
    }

    fn end_run(&mut self, writer: usize) {
        if let Some(record) = self.builders[writer].take() {
            self.patterned[writer].push(record);
        }
    }

    fn write(&mut self, writer: usize, logical: u64, length: u64) {
        self.stamp += 1;
        let write = WriteRecord {
            logical,
            length,
            physical: self.physical[writer],
            stamp: self.stamp,
            sequence: self.sequence[writer],
            writer: writer as u64,
            data_crc: 0,
        };
        self.physical[writer] += length;
        self.sequence[writer] += 1;
        self.model.write(logical, length, LogRef(writer as u32), write.physical);
        self.plain[writer].push(Record::Write(write));
        if self.tracker.before_write(writer as u64, logical, logical + length) {
            self.end_run(writer);
        }
        if let Some(ended) = self.builders[writer].push(write) {
            self.patterned[writer].push(ended);
        }
        self.tracker.after_write(writer as u64, self.builders[writer].pending_shape());
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Pattern { writer, start, length, gap } => {
                self.cursor[writer] = (start, length, length + gap);
                self.write(writer, start, length);
                self.cursor[writer].0 += length + gap;
            }
            Step::Next { writer, repeat } => {
                for _ in 0..repeat {
                    let (next, length, stride) = self.cursor[writer];
                    self.write(writer, next, length);
                    self.cursor[writer].0 += stride;
                }
            }
            Step::Irregular { writer, logical, length } => self.write(writer, logical, length),
            Step::Truncate { writer, size } => {
                self.stamp += 1;
                self.tracker.cut_all();
                self.end_run(writer);
                let record = Record::Truncate(TruncateRecord {
                    size,
                    stamp: self.stamp,
                    sequence: self.sequence[writer],
                    writer: writer as u64,
                });
                self.sequence[writer] += 1;
                self.plain[writer].push(record);
                self.patterned[writer].push(record);
                self.model.truncate(size);
            }
            Step::Flush { writer } => self.end_run(writer),
        }
    }

    fn finish(&mut self) {
        for writer in 0..self.builders.len() {
            self.end_run(writer);
        }
    }
}

fn merged(logs: &[Vec<Record>], compress: bool) -> MergedIndex {
    MergedIndex::from_logs(logs.iter().enumerate().map(|(i, r)| (LogRef(i as u32), r.as_slice())), compress)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Pattern records (as writers store them) and plain write records give
    /// the same answers, for interleaved strided runs, irregular writes,
    /// overlaps and truncates; and both match a byte model.
    #[test]
    fn pattern_and_plain_indexes_answer_identically(
        steps in proptest::collection::vec(step(), 1..50),
        compress in any::<bool>(),
    ) {
        let mut simulation = Simulation::new(4);
        for step in &steps {
            simulation.apply(step);
        }
        simulation.finish();
        let plain = merged(&simulation.plain, compress);
        let patterned = merged(&simulation.patterned, compress);
        prop_assert_eq!(answers(&patterned), answers(&plain));
        prop_assert_eq!(expand(&patterned), simulation.model.bytes.clone());
        let data = simulation.model.bytes.iter().filter(|byte| byte.is_some()).count() as u64;
        prop_assert_eq!(patterned.data_bytes(), data);
        prop_assert_eq!(plain.data_bytes(), data);
        // Random sub-ranges agree too (lookups that start inside a block).
        for start in (0..plain.eof()).step_by(13) {
            let normalise = |index: &MergedIndex| -> Vec<(u64, Option<(LogRef, u64)>)> {
                index.lookup(start, 29).iter().flat_map(|piece| (0..piece.length).map(move |i| {
                    (piece.logical + i, match piece.source {
                        Source::Hole => None,
                        Source::Data { log, physical } => Some((log, physical + i)),
                    })
                })).collect()
            };
            prop_assert_eq!(normalise(&patterned), normalise(&plain));
        }
        let patterned_records: usize = simulation.patterned.iter().map(Vec::len).sum();
        let plain_records: usize = simulation.plain.iter().map(Vec::len).sum();
        prop_assert!(patterned_records <= plain_records);
    }
}

#[test]
fn strided_writers_become_one_group() {
    const WRITERS: u64 = 1024;
    const RECORDS: u64 = 100;
    const LENGTH: u64 = 47001;
    let mut logs = Vec::new();
    for writer in 0..WRITERS {
        let mut builder = pattern::PatternBuilder::new();
        let mut records = Vec::new();
        for k in 0..RECORDS {
            let write = WriteRecord {
                logical: (k * WRITERS + writer) * LENGTH,
                length: LENGTH,
                physical: 64 + k * LENGTH,
                stamp: k * WRITERS + writer,
                sequence: k,
                writer,
                data_crc: 0,
            };
            records.extend(builder.push(write));
        }
        records.extend(builder.take());
        assert_eq!(records.len(), 1, "one pattern record per writer");
        logs.push(records);
    }
    let index = merged(&logs, true);
    assert_eq!(index.entry_count(), WRITERS as usize);
    assert_eq!(index.eof(), WRITERS * RECORDS * LENGTH);
    assert!(index.memory_bytes() < 64 << 10, "{} bytes", index.memory_bytes());
    // Block 37 of writer 511, 100 bytes in.
    let logical = (37 * WRITERS + 511) * LENGTH + 100;
    assert_eq!(
        index.lookup(logical, 10),
        vec![Piece {
            logical,
            length: 10,
            source: Source::Data { log: LogRef(511), physical: 64 + 37 * LENGTH + 100 }
        }]
    );
    // A read across a block boundary gets both writers.
    let pieces = index.lookup((5 * WRITERS + 3) * LENGTH + LENGTH - 5, 10);
    assert_eq!(pieces.len(), 2);
    assert_eq!(pieces[1].source, Source::Data { log: LogRef(4), physical: 64 + 5 * LENGTH });
}

#[test]
fn a_late_overwrite_keeps_the_patterns() {
    // Strided runs from two writers, then writer 0 rewrites a header that
    // crosses both: the runs stay one group, the rewrite lands on top.
    let mut simulation = Simulation::new(2);
    simulation.apply(&Step::Pattern { writer: 0, start: 0, length: 10, gap: 10 });
    simulation.apply(&Step::Pattern { writer: 1, start: 10, length: 10, gap: 10 });
    for _ in 0..20 {
        simulation.apply(&Step::Next { writer: 0, repeat: 5 });
        simulation.apply(&Step::Next { writer: 1, repeat: 5 });
    }
    simulation.apply(&Step::Flush { writer: 0 });
    simulation.apply(&Step::Flush { writer: 1 });
    simulation.apply(&Step::Irregular { writer: 0, logical: 5, length: 20 });
    simulation.finish();
    let index = merged(&simulation.patterned, true);
    assert_eq!(answers(&index), answers(&merged(&simulation.plain, true)));
    assert_eq!(index.overlay.extents.len(), 1);
    assert_eq!(index.entry_count(), 3);
}

#[test]
fn overlapping_random_writes_end_as_compact_extents() {
    let mut records = Vec::new();
    let mut state = 7u64;
    for k in 0..5000u64 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let logical = (state >> 33) % 100_000;
        records.push(Record::Write(WriteRecord {
            logical,
            length: 1 + (state >> 20) % 64,
            physical: k * 64,
            stamp: k + 1,
            sequence: k,
            writer: 0,
            data_crc: 0,
        }));
    }
    let index = merged(&[records.clone()], false);
    assert!(index.overlay.is_empty(), "folded into the frozen layer");
    let mut applied = MergedIndex::new(false);
    for record in &records {
        applied.apply(LogRef(0), record);
    }
    assert_eq!(answers(&index), answers(&applied));
    assert!(index.memory_bytes() <= 40 * index.entry_count() + 1024);
}
