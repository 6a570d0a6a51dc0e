//! Read-ahead through the façade, over real POSIX backends wrapped in a
//! store that watches the data-log reads in flight across all of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::clock::{ManualClock, Stamper};
use crate::config::{BackendRole, Tuning};
use crate::error::Result;
use crate::fs::{Options, Plfs};
use crate::layout::{self, LogKind};
use crate::open::OpenFlags;
use crate::store::hooked::{HookedStore, Hooks};
use crate::store::posix::PosixStore;
use crate::store::{SharedStore, StorePath};
use crate::striping::{Layout, StripingConfig};

/// Data-log reads in flight across every backend, the most seen at once,
/// and on which backends. Until the first time two are in flight, a data
/// read waits (up to `PATIENCE`) for a second one: so a reader that
/// issues concurrent reads is seen doing so however the threads are
/// scheduled, and one that does not is seen alone (after one wait).
#[derive(Debug, Default)]
struct Gauge {
    state: Mutex<GaugeState>,
    changed: Condvar,
    /// Bytes data-log reads returned.
    data_bytes: AtomicU64,
    /// Set once two reads were in flight, or a read waited in vain.
    settled: AtomicBool,
}

#[derive(Debug, Default)]
struct GaugeState {
    /// Backends of the reads in flight, one entry per read.
    in_flight: Vec<usize>,
    /// The most reads in flight at once, and the distinct backends then.
    most: usize,
    most_backends: usize,
}

const PATIENCE: Duration = Duration::from_secs(5);

impl Gauge {
    fn read(&self, backend: usize, read: &mut dyn FnMut() -> Result<usize>) -> Result<usize> {
        let mut state = self.state.lock().unwrap();
        state.in_flight.push(backend);
        let now = state.in_flight.len();
        if now > state.most {
            let mut backends = state.in_flight.clone();
            backends.sort_unstable();
            backends.dedup();
            (state.most, state.most_backends) = (now, backends.len());
        }
        if now >= 2 {
            self.settled.store(true, Ordering::SeqCst);
        }
        self.changed.notify_all();
        if !self.settled.load(Ordering::SeqCst) {
            let (next, timeout) = self
                .changed
                .wait_timeout_while(state, PATIENCE, |_| !self.settled.load(Ordering::SeqCst))
                .unwrap();
            state = next;
            if timeout.timed_out() {
                self.settled.store(true, Ordering::SeqCst);
            }
        }
        drop(state);
        let result = read();
        let mut state = self.state.lock().unwrap();
        let at = state.in_flight.iter().position(|b| *b == backend).expect("counted");
        state.in_flight.swap_remove(at);
        if let Ok(count) = &result {
            self.data_bytes.fetch_add(*count as u64, Ordering::SeqCst);
        }
        result
    }

    fn most(&self) -> (usize, usize) {
        let state = self.state.lock().unwrap();
        (state.most, state.most_backends)
    }
}

/// One backend's view of the gauge: its data-log reads are counted.
struct Gauged {
    backend: usize,
    gauge: Arc<Gauge>,
}

impl Hooks for Gauged {
    fn watches_reads(&self, path: &StorePath) -> bool {
        path.file_name().and_then(layout::parse_log_name).is_some_and(|(kind, _)| kind == LogKind::Data)
    }
    fn read(&self, read: &mut dyn FnMut() -> Result<usize>) -> Result<usize> {
        self.gauge.read(self.backend, read)
    }
}

const BACKENDS: usize = 4;
const UNIT: usize = 64 << 10;

/// A mount striping every file over four gauged POSIX backends in 64 KiB
/// units.
fn striped_mount(dir: &std::path::Path, gauge: &Arc<Gauge>) -> Plfs {
    let stores = (0..BACKENDS)
        .map(|backend| {
            let root = dir.join(format!("b{backend}"));
            std::fs::create_dir_all(&root).unwrap();
            let posix = PosixStore::new(&root, format!("file://{}", root.display())).unwrap();
            let hooks = Arc::new(Gauged { backend, gauge: gauge.clone() });
            let store = HookedStore { inner: Arc::new(posix), hooks };
            (Arc::new(store) as SharedStore, BackendRole::Any)
        })
        .collect();
    let options = Options {
        hostname: "node0".into(),
        pid: 4242,
        uid: 0,
        gid: 0,
        stamper: Stamper::new(Arc::new(ManualClock::new(1_000_000))),
        tuning: Tuning { threadpool_size: 8, ..Tuning::default() },
    };
    let layout: Layout = "-E -1 -c -1 -S 64K".parse().unwrap();
    let striping = StripingConfig { default_layout: Some(layout), ..StripingConfig::default() };
    Plfs::with_striping(stores, options, striping).unwrap()
}

fn unit_bytes(unit: usize, version: u8) -> Vec<u8> {
    (0..UNIT).map(|i| (i as u8).wrapping_mul(31) ^ (unit as u8).wrapping_mul(7) ^ version).collect()
}

/// A reader streaming a striped file one stripe unit at a time keeps
/// several backends reading at once, and reads every byte right while a
/// writer of the same process overwrites a unit it has fetched ahead and
/// appends past the end between its reads.
#[test]
fn streaming_read_keeps_backends_busy_and_never_serves_stale_bytes() {
    const UNITS: usize = 32;
    const APPENDED: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let gauge = Arc::new(Gauge::default());
    let plfs = striped_mount(dir.path(), &gauge);
    let path = "/striped";
    let mut model: Vec<Vec<u8>> = (0..UNITS).map(|unit| unit_bytes(unit, 0)).collect();
    let writer = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    for (unit, bytes) in model.iter().enumerate() {
        assert_eq!(writer.write(bytes, (unit * UNIT) as u64).unwrap(), UNIT);
    }
    writer.close().unwrap();
    let placed = plfs.data_per_backend(path).unwrap();
    assert_eq!(placed.len(), BACKENDS, "the file is striped over every backend: {placed:?}");

    let reader = plfs.open(path, OpenFlags::RDONLY, 0, 0).unwrap();
    let writer = plfs.open(path, OpenFlags::WRONLY, 0, 2).unwrap();
    let mut buf = vec![0u8; UNIT];
    for unit in 0..UNITS + APPENDED {
        assert_eq!(reader.read(&mut buf, (unit * UNIT) as u64).unwrap(), UNIT, "unit {unit}");
        assert!(buf == model[unit], "unit {unit} reads back as last written");
        if unit == 0 {
            // Units 1..3 are being fetched ahead now: replace one and grow
            // the file past its end.
            let replaced = unit_bytes(2, 0x55);
            writer.write(&replaced, (2 * UNIT) as u64).unwrap();
            model[2] = replaced;
            for extra in UNITS..UNITS + APPENDED {
                let bytes = unit_bytes(extra, 0);
                writer.write(&bytes, (extra * UNIT) as u64).unwrap();
                model.push(bytes);
            }
        }
    }
    assert_eq!(reader.read(&mut buf, ((UNITS + APPENDED) * UNIT) as u64).unwrap(), 0, "end of file");
    writer.close().unwrap();
    reader.close().unwrap();

    let (most, backends) = gauge.most();
    assert!(
        most >= 2 && backends >= 2,
        "a streaming read had at most {most} data reads in flight, on {backends} backends"
    );
    // Each byte is read from its backend about once: the fetched-ahead
    // copy of the replaced unit is the only waste.
    let read = gauge.data_bytes.load(Ordering::SeqCst);
    let file = ((UNITS + APPENDED) * UNIT) as u64;
    assert!(read <= file + 2 * UNIT as u64, "{read} data bytes read for a {file}-byte file");
}

/// A read elsewhere ends the stream: what was fetched ahead is dropped,
/// and a reader jumping about reads each piece where the index says.
#[test]
fn a_jump_drops_the_read_ahead() {
    const UNITS: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let gauge = Arc::new(Gauge::default());
    gauge.settled.store(true, Ordering::SeqCst);
    let plfs = striped_mount(dir.path(), &gauge);
    let path = "/jumps";
    let writer = plfs.open(path, OpenFlags::WRONLY.create(), 0o644, 1).unwrap();
    for unit in 0..UNITS {
        writer.write(&unit_bytes(unit, 0), (unit * UNIT) as u64).unwrap();
    }
    writer.close().unwrap();
    let reader = plfs.open(path, OpenFlags::RDONLY, 0, 0).unwrap();
    let mut buf = vec![0u8; UNIT];
    for unit in [0, 9, 3, 4, 5, 15, 1] {
        assert_eq!(reader.read(&mut buf, (unit * UNIT) as u64).unwrap(), UNIT);
        assert!(buf == unit_bytes(unit, 0), "unit {unit}");
    }
    reader.close().unwrap();
}
