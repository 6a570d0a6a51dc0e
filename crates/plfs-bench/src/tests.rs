use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::worker::{placement, plfs_backend_dirs};

fn spec(work: &Path, workload: Workload, target: Target, op: Op, rank: usize, writers: usize) -> WorkerSpec {
    WorkerSpec {
        workload,
        target,
        op,
        rank,
        writers,
        records: 5,
        record_bytes: 4099,
        dir: work.to_path_buf(),
        backends: 3,
        fuse_dir: None,
        store: None,
        verify_reads: Default::default(),
    }
}

fn run_in_process(spec: WorkerSpec) -> WorkerResult {
    let mut prepared = prepare(spec).unwrap();
    execute(&mut prepared, 0).unwrap()
}

fn files_named(dir: &Path, prefix: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_named(&path, prefix, found);
        } else if path.file_name().unwrap().to_str().unwrap().starts_with(prefix) {
            found.push(path);
        }
    }
}

#[test]
fn a_corrupted_byte_in_plfs_data_fails_verification() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path();
    for dir in plfs_backend_dirs(work, 3) {
        std::fs::create_dir_all(dir).unwrap();
    }
    let write = run_in_process(spec(work, Workload::N1Strided, Target::Plfs, Op::Write, 0, 1));
    assert_eq!(write.bytes, 5 * 4099);
    let read = spec(work, Workload::N1Strided, Target::Plfs, Op::Read, 0, 1);
    let clean = run_in_process(read.clone());
    assert_eq!((clean.bad_records, clean.bytes), (0, 5 * 4099), "{:?}", clean.first_bad);

    let mut logs = Vec::new();
    files_named(&work.join("plfs"), "data.", &mut logs);
    assert_eq!(logs.len(), 1, "{logs:?}");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&logs[0]).unwrap();
    let at = file.metadata().unwrap().len() - 1000;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x01], at).unwrap();

    // plfs itself refuses the damaged record (verify_reads: whole)...
    let mut prepared = prepare(read.clone()).unwrap();
    let refused = execute(&mut prepared, 0).unwrap_err().to_string();
    assert!(refused.contains("fail their checksum"), "{refused}");
    // ...and with plfs's check off, the bench's own data check finds it.
    let unchecked = WorkerSpec { verify_reads: plfs::config::VerifyReads::Off, ..read };
    let corrupt = run_in_process(unchecked);
    assert_eq!(corrupt.bad_records, 1);
    let first = corrupt.first_bad.unwrap();
    assert!(first.contains("record 4"), "{first}");
}

#[test]
fn a_corrupted_plain_file_fails_verification() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path();
    std::fs::create_dir_all(work.join("nn")).unwrap();
    run_in_process(spec(work, Workload::Nn, Target::PlainNn, Op::Write, 0, 1));
    let path = work.join("nn").join("file.0");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4 * 4099 + 10).unwrap();
    let result = run_in_process(spec(work, Workload::Nn, Target::PlainNn, Op::Read, 0, 1));
    assert_eq!(result.bad_records, 1);
    assert!(result.first_bad.unwrap().contains("short read"));
}

#[test]
fn n1_placements_cover_every_record_once_at_its_own_offset() {
    let work = Path::new("/nonexistent");
    for workload in [Workload::N1Strided, Workload::N1Segmented] {
        let mut seen = BTreeSet::new();
        for writer in 0..3 {
            let s = spec(work, workload, Target::Plfs, Op::Write, writer, 3);
            for k in 0..5 {
                let (record, offset) = placement(&s, writer, k);
                assert_eq!(offset, record * 4099);
                assert!(seen.insert(record));
            }
        }
        assert_eq!(seen, (0..15).collect());
    }
    let strided = spec(work, Workload::N1Strided, Target::DirectN1, Op::Write, 1, 3);
    assert_eq!(placement(&strided, 1, 2), (7, 7 * 4099));
    let segmented = spec(work, Workload::N1Segmented, Target::DirectN1, Op::Write, 1, 3);
    assert_eq!(placement(&segmented, 1, 2), (7, 7 * 4099));
    let own = spec(work, Workload::N1Strided, Target::PlainNn, Op::Write, 1, 3);
    assert_eq!(placement(&own, 1, 2), (7, 2 * 4099));
}

#[test]
fn readers_read_the_next_rank() {
    let work = Path::new("/nonexistent");
    let read = |rank| crate::worker::source_rank(&spec(work, Workload::Nn, Target::Plfs, Op::Read, rank, 3));
    assert_eq!([read(0), read(1), read(2)], [1, 2, 0]);
    let write = crate::worker::source_rank(&spec(work, Workload::Nn, Target::Plfs, Op::Write, 2, 3));
    assert_eq!(write, 2);
}

#[test]
fn workloads_parse_and_serialize_by_their_cli_names() {
    for workload in [Workload::N1Strided, Workload::N1Segmented, Workload::Nn] {
        assert_eq!(workload.as_str().parse::<Workload>().unwrap(), workload);
        assert_eq!(serde_json::to_string(&workload).unwrap(), format!("\"{workload}\""));
    }
    assert!("n-n".parse::<Workload>().is_err());
}

#[test]
fn worker_main_rejects_a_bad_spec() {
    let error = worker_main(&["{not json".to_owned()]).unwrap_err().to_string();
    assert!(error.contains("spec"), "{error}");
}

/// The FUSE target writes where `fuse_dir` says, shared or per rank like
/// its plain counterparts; any directory stands in for a mount here.
#[test]
fn the_fuse_target_writes_and_verifies_under_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let mount = root.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    std::fs::File::create(mount.join("shared")).unwrap();
    for workload in [Workload::N1Strided, Workload::Nn] {
        for rank in 0..2 {
            let mut write = spec(root.path(), workload, Target::Fuse, Op::Write, rank, 2);
            write.fuse_dir = Some(mount.clone());
            assert_eq!(run_in_process(write).bytes, 5 * 4099);
        }
        let mut read = spec(root.path(), workload, Target::Fuse, Op::Read, 0, 2);
        read.fuse_dir = Some(mount.clone());
        let result = run_in_process(read);
        assert_eq!((result.bytes, result.bad_records), (5 * 4099, 0), "{workload:?}");
    }
    assert_eq!(std::fs::metadata(mount.join("shared")).unwrap().len(), 10 * 4099);
    assert!(mount.join("file.1").exists());
}

/// The raw-nn target streams each writer's records into its own object on
/// the store; a reader of the next writer's object checks every byte.
#[test]
fn raw_store_objects_are_written_in_order_and_a_corrupted_one_fails_verification() {
    let root = tempfile::tempdir().unwrap();
    let run = StoreRun { urls: vec![format!("posix://{}", root.path().display())], run: "r".to_owned() };
    std::fs::create_dir(root.path().join("r-raw")).unwrap();
    let store_spec = |op, rank| WorkerSpec {
        store: Some(run.clone()),
        ..spec(Path::new(""), Workload::N1Strided, Target::RawNn, op, rank, 2)
    };
    for rank in 0..2 {
        assert_eq!(run_in_process(store_spec(Op::Write, rank)).bytes, 5 * 4099);
    }
    // Writer 1's object holds its strided records 1, 3, 5, 7, 9 back to back.
    let object = root.path().join("r-raw").join("object.1");
    let bytes = std::fs::read(&object).unwrap();
    assert_eq!(bytes.len(), 5 * 4099);
    for (k, record) in bytes.chunks(4099).enumerate() {
        assert_eq!(verify_record(2 * k as u64 + 1, record), Ok(()), "record {k}");
    }
    // Reader 0 reads writer 1's object.
    let clean = run_in_process(store_spec(Op::Read, 0));
    assert_eq!((clean.bytes, clean.bad_records), (5 * 4099, 0), "{:?}", clean.first_bad);
    let file = std::fs::OpenOptions::new().write(true).open(&object).unwrap();
    file.write_all_at(&[bytes[2 * 4099 + 17] ^ 0x80], 2 * 4099 + 17).unwrap();
    let corrupt = run_in_process(store_spec(Op::Read, 0));
    assert_eq!(corrupt.bad_records, 1);
    let first = corrupt.first_bad.unwrap();
    assert!(first.contains("record 5") && first.contains("byte 17"), "{first}");
}
