//! Every on-disk decoder and the plfsrc parser behind one entry point, so
//! the cargo-fuzz targets (`fuzz/`) and the bounded property test in CI
//! (`tests` below) feed the same list. What they check: no input makes a
//! decoder panic or allocate more than a bounded multiple of its input, and
//! every error says which kind of object was bad; callers add the object's
//! path (`with_context` at each read site).

use std::path::Path;

use crate::error::Result;
use crate::format::access::AccessRecord;
use crate::format::closed::ClosedSummary;
use crate::format::data_log::{DATA_MAGIC, INDEX_MAGIC, LogHeader};
use crate::format::global_index::{CoveredLog, GlobalExtent, GlobalGroup, GlobalIndex, GlobalSlot};
use crate::format::index_log::{self, PatternRecord, Record, TruncateRecord, WriteRecord};
use crate::format::version::VersionRecord;
use crate::layout::LogId;
use crate::smallfile::format as small;

/// One decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// A container's index log: header, then frames of write, pattern and
    /// truncate records.
    IndexLog,
    /// Index records as frames with no header (collective-open messages).
    IndexFrames,
    GlobalIndex,
    Access,
    /// A closed container's stat summary (`meta/closed`).
    ClosedSummary,
    Version,
    Xattr,
    DataLogHeader,
    SmallNameLog,
    SmallIndexLog,
    SmallDataLogHeader,
    Plfsrc,
}

pub const ALL: [Decoder; 12] = [
    Decoder::IndexLog,
    Decoder::IndexFrames,
    Decoder::GlobalIndex,
    Decoder::Access,
    Decoder::ClosedSummary,
    Decoder::Version,
    Decoder::Xattr,
    Decoder::DataLogHeader,
    Decoder::SmallNameLog,
    Decoder::SmallIndexLog,
    Decoder::SmallDataLogHeader,
    Decoder::Plfsrc,
];

/// Where plfsrc text claims to come from: a directory that does not exist,
/// so relative includes in fuzzed text read nothing.
pub const PLFSRC_ORIGIN: &str = "/nonexistent/plfs-fuzz/plfsrc";

impl Decoder {
    /// The fuzz target of `byte % ALL.len()`: one target can cover all.
    pub fn from_byte(byte: u8) -> Decoder {
        ALL[byte as usize % ALL.len()]
    }

    /// Decodes `bytes`, keeping only whether it worked.
    pub fn decode(self, bytes: &[u8]) -> Result<()> {
        match self {
            Decoder::IndexLog => index_log::decode(bytes).map(drop),
            Decoder::IndexFrames => index_log::decode_frames(bytes).map(drop),
            Decoder::GlobalIndex => GlobalIndex::decode(bytes).map(drop),
            Decoder::Access => AccessRecord::decode(bytes).map(drop),
            Decoder::ClosedSummary => ClosedSummary::decode(bytes).map(drop),
            Decoder::Version => VersionRecord::decode(bytes).map(drop),
            Decoder::Xattr => crate::format::xattr::decode(bytes).map(drop),
            Decoder::DataLogHeader => LogHeader::decode(bytes, DATA_MAGIC, "data log").map(drop),
            Decoder::SmallNameLog => {
                small::decode_log::<small::NameRecord>(bytes, small::NAME_LOG_MAGIC).map(drop)
            }
            Decoder::SmallIndexLog => {
                small::decode_log::<small::IndexEntry>(bytes, small::INDEX_LOG_MAGIC).map(drop)
            }
            Decoder::SmallDataLogHeader => {
                LogHeader::decode(bytes, small::DATA_LOG_MAGIC, "small-file data log").map(drop)
            }
            Decoder::Plfsrc => {
                let text = String::from_utf8_lossy(bytes);
                crate::config::plfsrc::parse_str(&text, Path::new(PLFSRC_ORIGIN)).map(drop)
            }
        }
    }

    /// Words one of which every error of this decoder must contain: the
    /// kind of object it was decoding.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Decoder::IndexLog | Decoder::IndexFrames => &["index", "frame"],
            Decoder::GlobalIndex => &["global index"],
            Decoder::Access => &["access"],
            Decoder::ClosedSummary => &["closed summary"],
            Decoder::Version => &["version"],
            Decoder::Xattr => &["xattr", "extended attribute"],
            Decoder::DataLogHeader => &["data log"],
            Decoder::SmallNameLog => &["name log", "frame"],
            Decoder::SmallIndexLog => &["index", "frame"],
            Decoder::SmallDataLogHeader => &["small-file data log"],
            Decoder::Plfsrc => &[PLFSRC_ORIGIN],
        }
    }

    /// Valid encodings, for mutation-based fuzzing.
    pub fn samples(self) -> Vec<Vec<u8>> {
        let header = LogHeader { created_stamp: 7, writer: 3, pid: 42, hostname: "node-1".into() };
        match self {
            Decoder::IndexLog => {
                let mut log = header.encode(INDEX_MAGIC);
                log.extend(index_log::encode_frames(&index_records()));
                vec![log, header.encode(INDEX_MAGIC)]
            }
            Decoder::IndexFrames => vec![index_log::encode_frames(&index_records())],
            Decoder::GlobalIndex => vec![global_index().encode()],
            Decoder::Access => vec![access().encode()],
            Decoder::ClosedSummary => {
                vec![ClosedSummary { access: access(), eof: 1 << 40, bytes: 11, last_stamp: 12 }.encode()]
            }
            Decoder::Version => vec![VersionRecord::current().encode()],
            Decoder::Xattr => vec![crate::format::xattr::encode(b"user value")],
            Decoder::DataLogHeader => vec![header.encode(DATA_MAGIC)],
            Decoder::SmallNameLog => {
                let records = vec![
                    small::NameRecord::Create { stamp: 1, fid: 0, name: "a".into() },
                    small::NameRecord::Rename { stamp: 2, from: "a".into(), to: "b".into() },
                    small::NameRecord::Truncate { stamp: 3, size: 9, name: "b".into() },
                    small::NameRecord::Delete { stamp: 4, name: "b".into() },
                    small::NameRecord::OpenOrCreate { stamp: 5, fid: 1, name: "c".into() },
                ];
                vec![small_log(&header, small::NAME_LOG_MAGIC, &records)]
            }
            Decoder::SmallIndexLog => {
                let entry = small::IndexEntry { fid: 0, logical: 0, length: 5, physical: 64, stamp: 2, data_crc: 9 };
                vec![small_log(&header, small::INDEX_LOG_MAGIC, &[entry, entry])]
            }
            Decoder::SmallDataLogHeader => vec![header.encode(small::DATA_LOG_MAGIC)],
            Decoder::Plfsrc => vec![
                b"- global_params:\n  num_hostdirs: 4\n- mount_point: /mnt/plfs\n  workload: shared_file\n  \
                  backends:\n    - location: posix:///tmp/b0\n      type: canonical\n    - location: /tmp/b1\n      \
                  type: shadow\n"
                    .to_vec(),
                b"- mount_point: /m\n  backends:\n    - location: /a\n".to_vec(),
            ],
        }
    }
}

fn access() -> AccessRecord {
    AccessRecord { mode: 0o640, uid: 1000, gid: 100, atime_ns: 1, mtime_ns: 2, ctime_ns: 3, times_stamp: 4 }
}

fn index_records() -> Vec<Record> {
    vec![
        Record::Write(WriteRecord {
            logical: 0,
            length: 10,
            physical: 64,
            stamp: 5,
            sequence: 1,
            writer: 2,
            data_crc: 3,
        }),
        Record::Pattern(PatternRecord {
            logical: 100,
            length: 10,
            stride: 40,
            count: 4,
            physical: 74,
            stamp_first: 6,
            stamp_last: 9,
            sequence_first: 2,
            writer: 2,
            data_crc: 4,
        }),
        Record::Truncate(TruncateRecord { size: 50, stamp: 10, sequence: 6, writer: 2 }),
    ]
}

fn global_index() -> GlobalIndex {
    GlobalIndex {
        eof: 1000,
        logs: vec![CoveredLog { id: LogId { stamp: 1, writer: 2, pid: 3, host: 4 }, backend: 0, hostdir: 7 }],
        extents: vec![GlobalExtent { logical: 0, length: 500, log: 0, physical: 64 }],
        groups: vec![GlobalGroup {
            start: 1000,
            stride: 100,
            end: 2000,
            slots: vec![GlobalSlot {
                offset: 0,
                length: 50,
                first_block: 0,
                count: 10,
                physical: 64,
                log: 0,
            }],
        }],
        frozen_limit: 1900,
        overlay: vec![GlobalExtent { logical: 10, length: 5, log: 0, physical: 2000 }],
    }
}

fn small_log<R: small::FramedRecord>(header: &LogHeader, magic: &[u8; 8], records: &[R]) -> Vec<u8> {
    let mut log = header.encode(magic);
    let mut frame = small::FrameBuilder::default();
    for record in records {
        frame.push(record);
    }
    log.extend_from_slice(frame.finish().expect("records"));
    log
}

/// Checks one input against one decoder: the decoder returns (no panic)
/// and a failure names the kind of object. The allocation bound is checked
/// by the fuzz targets' `-malloc_limit_mb` and, in the property test, by
/// inputs whose length fields claim far more than the input holds.
pub fn check(decoder: Decoder, bytes: &[u8]) -> std::result::Result<(), String> {
    match decoder.decode(bytes) {
        Ok(()) => Ok(()),
        Err(error) => {
            let message = error.to_string();
            if decoder.names().iter().any(|name| message.contains(name)) {
                Ok(())
            } else {
                Err(format!("{decoder:?}: error does not say what was bad: {message}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A valid sample of `decoder` with `edits` applied: byte flips,
    /// overwrites with extreme values (huge lengths and counts), cuts.
    fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
        for &(at, how, value) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = at % bytes.len();
            match how % 5 {
                0 => bytes[at] ^= value.max(1),
                1 => bytes[at] = value,
                2 => {
                    let end = (at + 4).min(bytes.len());
                    bytes[at..end].fill(0xff);
                }
                3 => bytes.truncate(at),
                _ => bytes.insert(at, value),
            }
        }
        bytes
    }

    #[test]
    fn every_sample_decodes() {
        for decoder in ALL {
            for sample in decoder.samples() {
                decoder.decode(&sample).unwrap_or_else(|error| panic!("{decoder:?}: {error}"));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic_and_errors_name_the_object(
            which in 0u8..11,
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let decoder = Decoder::from_byte(which);
            prop_assert_eq!(check(decoder, &bytes), Ok(()));
            // The same bytes behind a valid magic reach further in.
            for sample in decoder.samples() {
                let mut prefixed = sample[..sample.len().min(8)].to_vec();
                prefixed.extend_from_slice(&bytes);
                prop_assert_eq!(check(decoder, &prefixed), Ok(()));
            }
        }

        #[test]
        fn mutated_encodings_never_panic_and_errors_name_the_object(
            which in 0u8..11,
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6),
        ) {
            let decoder = Decoder::from_byte(which);
            for sample in decoder.samples() {
                let bytes = mutate(sample, &edits);
                prop_assert_eq!(check(decoder, &bytes), Ok(()));
            }
        }
    }
}
