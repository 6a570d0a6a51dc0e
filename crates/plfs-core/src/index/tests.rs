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
            prop_assert!(index.check_disjoint());
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
        prop_assert_eq!(built, applied);
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
