//! The restart peers: the ADIOS BP and parallel HDF5 programs
//! (crates/plfs-bench/peers/, built by `make peers` into target/peers/)
//! that write and read the same Pixie3D-like checkpoint as plfs, so a
//! restart benchmark can set plfs beside the formats users would otherwise
//! pick. Each phase is one `mpirun.openmpi` of a program; its ranks check
//! every value they read, and rank 0 prints one `RESULT` line that
//! [`PeerResult`] parses.
//!
//! A peer that is not built (or has no mpirun) is [`PeerUnavailable`], a
//! value the caller reports before running the rest, not an error.
//!
//! ```no_run
//! use plfs_bench::peers::{Decomp, Peer, PeerProgram, PeerRun};
//! // 8 writers, 10 readers on their own 1x2x5 grid.
//! let run = PeerRun::new("/scratch/adios".into(), [64, 64, 64], [2, 2, 2], Decomp::NonInteger, 10);
//! match PeerProgram::find(Peer::Adios) {
//!     Ok(program) => {
//!         let write = program.run_phase(&run, plfs_bench::peers::PeerPhase::Write)?;
//!         // (drop the page cache here)
//!         let read = program.run_phase(&run, plfs_bench::peers::PeerPhase::Read)?;
//!         println!("{} MiB/s write, {} MiB/s read", write.mibs(), read.mibs());
//!     }
//!     Err(unavailable) => eprintln!("{unavailable}"),
//! }
//! # Ok::<(), plfs_bench::BenchError>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

use crate::error::{BenchError, Result};
pub use crate::restart::Decomp;
use crate::restart::{Extent, Layout};

/// Where to look for the peer programs first (else target/peers/ next to
/// the running executable's build directory).
pub const PEERS_DIR_ENV: &str = "PLFS_PEERS_DIR";

/// The MPI the peers are built with: Debian's ADIOS and HDF5 builds for
/// MPI are Open MPI's.
const MPIRUN: &str = "mpirun.openmpi";

/// mpirun's options for every restart phase, plfs's, the direct file's and
/// the peers'. Open MPI refuses root without the first; the bench may run
/// more ranks than this machine has cores.
pub(crate) const MPIRUN_ARGS: [&str; 2] = ["--allow-run-as-root", "--oversubscribe"];

/// mpirun's environment for the same phases. Open MPI yields the CPU while
/// a rank waits in a collective only when a node is oversubscribed, so a
/// phase of as many ranks as cores (half on 2 cores) would busy-poll where
/// one of more ranks yields: this makes every phase wait the same way (a
/// busy-polling rank held its core from the rank it waited for, and plfs's
/// collective open took 100-220 ms instead of 3-60). An environment
/// variable rather than `--mca`: Open MPI refuses a parameter given twice
/// on its command line, and a site's mpirun wrapper (the node tests'
/// `plfs-nodes mpirun`) may pass this one itself; its `--mca` then wins.
pub(crate) const MPIRUN_ENV: [(&str, &str); 1] = [("OMPI_MCA_mpi_yield_when_idle", "1")];

/// A session directory of its own for one Open MPI job, removed when the
/// job is done. Jobs started together on one node otherwise share
/// `$TMPDIR/ompi.<host>.<uid>`, and one job removing it as it ends while
/// another creates it fails the other's start ("A call to mkdir was unable
/// to create the desired directory … File exists", open-mpi/ompi#8510):
/// seen once when the suite ran three restart benches at a time.
pub(crate) struct OmpiSession(PathBuf);

impl OmpiSession {
    pub(crate) fn new() -> Result<OmpiSession> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let job = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("plfs-ompi.{}.{job}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(BenchError::io("creating", &dir))?;
        Ok(OmpiSession(dir))
    }

    /// Gives `command` (an Open MPI mpirun) the options and environment of
    /// every bench job, and this directory (an `--mca` on a wrapper's
    /// command line wins).
    pub(crate) fn apply<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command.args(MPIRUN_ARGS).envs(MPIRUN_ENV).env("OMPI_MCA_orte_tmpdir_base", &self.0)
    }
}

impl Drop for OmpiSession {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each variable of the Pixie3D-like data (restart_common.h's NVARS).
pub const VARIABLES: u64 = 8;

/// A restart peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// ADIOS 1.x writing one BP file, read with bounding-box selections.
    Adios,
    /// Parallel HDF5: one contiguous dataset per variable, hyperslab reads.
    Hdf5,
}

impl Peer {
    pub const ALL: [Peer; 2] = [Peer::Adios, Peer::Hdf5];

    /// Its name in RESULT lines and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Peer::Adios => "adios",
            Peer::Hdf5 => "hdf5",
        }
    }

    /// The program's file name in the peers directory.
    pub fn program_name(self) -> &'static str {
        match self {
            Peer::Adios => "adios_restart",
            Peer::Hdf5 => "hdf5_restart",
        }
    }

    /// The file (or, for ADIOS, the first file) the peer writes in its
    /// directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Peer::Adios => "restart.bp",
            Peer::Hdf5 => "restart.h5",
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Peer {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<Peer> {
        Peer::ALL
            .into_iter()
            .find(|peer| peer.as_str() == text)
            .ok_or_else(|| BenchError::invalid(format!("unknown restart peer {text:?} (adios or hdf5)")))
    }
}

/// Write or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerPhase {
    Write,
    Read,
}

impl PeerPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerPhase::Write => "write",
            PeerPhase::Read => "read",
        }
    }
}

impl FromStr for PeerPhase {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<PeerPhase> {
        match text {
            "write" => Ok(PeerPhase::Write),
            "read" => Ok(PeerPhase::Read),
            _ => Err(BenchError::invalid(format!("unknown phase {text:?} (write or read)"))),
        }
    }
}

fn grid_text<T: fmt::Display>(grid: [T; 3]) -> String {
    format!("{}x{}x{}", grid[0], grid[1], grid[2])
}

/// One peer checkpoint and restart: where, the data's size, the writers'
/// grid and how the readers split it. The readers' regions are the plfs
/// bench's own ([`Decomp::reader_grid`], or the file in M contiguous
/// pieces), handed to the program on its command line.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRun {
    /// The peer's own directory (it writes its file(s) there).
    pub dir: PathBuf,
    /// GX, GY, GZ: points of the global array per variable.
    pub grid: [u64; 3],
    /// PX, PY, PZ: the writers' process grid.
    pub procs: [usize; 3],
    pub decomp: Decomp,
    /// M, the readers.
    pub readers: usize,
    /// Added to every value the readers expect: non-zero only to prove
    /// the check fails.
    pub expect_offset: i64,
    /// ADIOS's write transport, "MPI" (default) or "POSIX".
    pub transport: Option<String>,
    /// Bytes each reader touches and frees right before its clock starts,
    /// as plfs's and the direct file's readers do
    /// ([`crate::host::back_free_memory`]); 0: none.
    pub back_memory_bytes: u64,
}

impl PeerRun {
    pub fn new(dir: PathBuf, grid: [u64; 3], procs: [usize; 3], decomp: Decomp, readers: usize) -> PeerRun {
        PeerRun { dir, grid, procs, decomp, readers, expect_offset: 0, transport: None, back_memory_bytes: 0 }
    }

    /// The peers' run of a `plfs bench restart` pixie3d checkpoint: the
    /// same global array, writer grid, decomposition and M (None for the
    /// strided pattern, which is no array).
    pub fn of_layout(dir: PathBuf, layout: &Layout, decomp: Decomp, readers: usize) -> Option<PeerRun> {
        let grid = layout.global()?;
        let Layout::Pixie3d { grid: procs, .. } = *layout else { return None };
        Some(PeerRun::new(dir, grid, procs.map(|p| p as usize), decomp, readers))
    }

    /// N, the writers.
    pub fn writers(&self) -> usize {
        self.procs.iter().product()
    }

    /// The bytes each phase moves: every variable's whole global array.
    pub fn total_bytes(&self) -> u64 {
        self.grid.iter().product::<u64>() * VARIABLES * size_of::<f64>() as u64
    }

    /// The ranks `phase` runs on.
    pub fn ranks(&self, phase: PeerPhase) -> Result<usize> {
        match phase {
            PeerPhase::Write => Ok(self.writers()),
            PeerPhase::Read if self.readers == 0 => {
                Err(BenchError::invalid(format!("peer read ({}): 0 readers", self.decomp.as_str())))
            }
            PeerPhase::Read => Ok(self.readers),
        }
    }

    /// The command line of `phase` ("write", "read" or "regions").
    fn args(&self, phase: &str) -> Vec<String> {
        let mut args = vec![
            phase.to_owned(),
            "--dir".to_owned(),
            self.dir.display().to_string(),
            "--grid".to_owned(),
            grid_text(self.grid),
            "--procs".to_owned(),
            grid_text(self.procs),
        ];
        if phase != PeerPhase::Write.as_str() {
            args.extend(["--decomp".to_owned(), self.decomp.as_str().to_owned()]);
            if let Some(grid) = self.decomp.reader_grid(self.readers as u64) {
                args.extend(["--readers-grid".to_owned(), grid_text(grid)]);
            }
        }
        if self.expect_offset != 0 {
            args.extend(["--expect-offset".to_owned(), self.expect_offset.to_string()]);
        }
        if let Some(transport) = &self.transport {
            args.extend(["--transport".to_owned(), transport.clone()]);
        }
        if self.back_memory_bytes != 0 && phase == PeerPhase::Read.as_str() {
            args.extend(["--back-memory".to_owned(), self.back_memory_bytes.to_string()]);
        }
        args
    }
}

/// A peer that cannot run here, and why (the bench prints it and runs the
/// rest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("peer {peer} unavailable: {why}")]
pub struct PeerUnavailable {
    pub peer: Peer,
    pub why: String,
}

/// A built peer program and the mpirun that starts it.
#[derive(Debug, Clone)]
pub struct PeerProgram {
    pub peer: Peer,
    pub program: PathBuf,
    pub mpirun: PathBuf,
}

impl PeerProgram {
    /// The peer's program (in $PLFS_PEERS_DIR, else the nearest
    /// target/peers/ above this executable or this crate) and
    /// mpirun.openmpi on PATH.
    pub fn find(peer: Peer) -> std::result::Result<PeerProgram, PeerUnavailable> {
        let unavailable = |why: String| PeerUnavailable { peer, why };
        let candidates = peer_dirs();
        let program = candidates
            .iter()
            .map(|dir| dir.join(peer.program_name()))
            .find(|path| path.is_file())
            .ok_or_else(|| {
                let looked: Vec<String> = candidates.iter().map(|dir| dir.display().to_string()).collect();
                unavailable(format!(
                    "{} is not built (looked in {}; `make peers` builds it, scripts/install-deps.sh installs \
                     its libraries)",
                    peer.program_name(),
                    looked.join(", ")
                ))
            })?;
        let mpirun = on_path(MPIRUN).ok_or_else(|| {
            unavailable(format!("{MPIRUN} is not on PATH (install openmpi-bin: scripts/install-deps.sh)"))
        })?;
        Ok(PeerProgram { peer, program, mpirun })
    }

    /// Runs one phase under mpirun and returns rank 0's RESULT. A wrong
    /// value is [`BenchError::Data`] naming the first bad (v,x,y,z); a
    /// failed or silent program is [`BenchError::Protocol`] with its
    /// output.
    pub fn run_phase(&self, run: &PeerRun, phase: PeerPhase) -> Result<PeerResult> {
        let ranks = run.ranks(phase)?;
        let name = format!("{} {} ({}, {ranks} ranks)", self.peer, phase.as_str(), run.decomp.as_str());
        if phase == PeerPhase::Write {
            std::fs::create_dir_all(&run.dir).map_err(BenchError::io("creating", &run.dir))?;
        }
        let output = self.mpirun(ranks, &run.args(phase.as_str()), &name)?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let result = stdout.lines().find_map(|line| line.strip_prefix("RESULT ")).map(PeerResult::parse);
        let protocol = |problem: String| BenchError::Protocol { phase: name.clone(), problem };
        match result {
            Some(Ok(result)) if result.errors > 0 => Err(BenchError::Data {
                what: format!("{name} of {}", run.dir.display()),
                problem: format!(
                    "{} wrong values; {}",
                    result.errors,
                    first_wrong(&stderr).unwrap_or("no rank named the first")
                ),
            }),
            Some(Ok(result)) if output.status.success() => Ok(result),
            Some(Err(problem)) => Err(protocol(format!("{problem}\nstdout:\n{stdout}\nstderr:\n{stderr}"))),
            _ => Err(protocol(format!(
                "{} exited with {} without a good RESULT line\nstdout:\n{stdout}\nstderr:\n{stderr}",
                self.program.display(),
                output.status
            ))),
        }
    }

    /// What each reader of `run` would read, without reading: the byte
    /// ranges of the pixie3d file (the variables end to end, as plfs and
    /// the direct file hold them), in read order, touching ranges merged,
    /// as [`Layout::reader_extents`] gives them for the plfs readers.
    pub fn reader_regions(&self, run: &PeerRun) -> Result<Vec<Vec<Extent>>> {
        let ranks = run.ranks(PeerPhase::Read)?;
        let name = format!("{} regions ({}, {ranks} ranks)", self.peer, run.decomp.as_str());
        std::fs::create_dir_all(&run.dir).map_err(BenchError::io("creating", &run.dir))?;
        let output = self.mpirun(ranks, &run.args("regions"), &name)?;
        if !output.status.success() {
            return Err(BenchError::Protocol {
                phase: name,
                problem: format!(
                    "exited with {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ),
            });
        }
        (0..ranks)
            .map(|rank| {
                let path = run.dir.join(format!("regions.{rank}"));
                let text = std::fs::read_to_string(&path).map_err(BenchError::io("reading", &path))?;
                text.lines()
                    .map(|line| match line.split_once(' ').map(|(o, l)| (o.parse(), l.parse())) {
                        Some((Ok(offset), Ok(len))) => Ok(Extent { offset, len }),
                        _ => Err(BenchError::Protocol {
                            phase: name.clone(),
                            problem: format!("{}: bad line {line:?}", path.display()),
                        }),
                    })
                    .collect()
            })
            .collect()
    }

    fn mpirun(&self, ranks: usize, args: &[String], name: &str) -> Result<std::process::Output> {
        let session = OmpiSession::new()?;
        session
            .apply(&mut Command::new(&self.mpirun))
            .args(["-np", &ranks.to_string()])
            .arg(&self.program)
            .args(args)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BenchError::io("starting", &self.mpirun)(e).context(name.to_owned()))
    }

    /// Writes the checkpoint, then reads it back: the caller that drops
    /// the page cache in between calls [`PeerProgram::run_phase`] twice.
    pub fn write_then_read(&self, run: &PeerRun) -> Result<(PeerResult, PeerResult)> {
        let write = self.run_phase(run, PeerPhase::Write)?;
        let read = self.run_phase(run, PeerPhase::Read)?;
        Ok((write, read))
    }
}

/// The first "wrong value at (v,x,y,z)" line a rank printed.
fn first_wrong(stderr: &str) -> Option<&str> {
    stderr.lines().find(|line| line.contains("wrong value at"))
}

/// Where peer programs may be: $PLFS_PEERS_DIR alone when set, else
/// `peers/` in each directory above the running executable (a cargo
/// target directory holds target/release/<exe> and target/peers/) and
/// the workspace's own target/peers/.
fn peer_dirs() -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os(PEERS_DIR_ENV) {
        return vec![PathBuf::from(dir)];
    }
    let mut dirs: Vec<PathBuf> = std::env::current_exe()
        .ok()
        .map(|exe| exe.ancestors().skip(1).take(3).map(|dir| dir.join("peers")).collect())
        .unwrap_or_default();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/peers");
    if !dirs.contains(&workspace) {
        dirs.push(workspace);
    }
    dirs
}

pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join(program)).find(|path| path.is_file())
}

/// Rank 0's RESULT line: totals over the phase's ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerResult {
    pub peer: Peer,
    pub phase: PeerPhase,
    /// The `--decomp` name (the write phase reports the default, uniform).
    pub decomp: String,
    pub writers: usize,
    /// The ranks of this phase (M when reading).
    pub ranks: usize,
    /// Bytes of values moved by all ranks.
    pub bytes: u64,
    /// The slowest rank's open..close, after a barrier.
    pub seconds: f64,
    /// The largest rank's peak resident memory.
    pub max_rss_kib: u64,
    /// Wrong values read, over all ranks.
    pub errors: u64,
}

impl PeerResult {
    /// Parses the `key=value` fields after `RESULT `; every field must be
    /// there.
    pub fn parse(fields: &str) -> std::result::Result<PeerResult, String> {
        let field = |key: &str| -> std::result::Result<&str, String> {
            fields
                .split_whitespace()
                .find_map(|pair| pair.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
                .ok_or_else(|| format!("RESULT line without {key}=: {fields:?}"))
        };
        fn number<T: FromStr>(key: &str, text: &str) -> std::result::Result<T, String> {
            text.parse().map_err(|_| format!("RESULT {key}={text:?} is not a number"))
        }
        Ok(PeerResult {
            peer: field("peer")?.parse().map_err(|e: BenchError| e.to_string())?,
            phase: field("phase")?.parse().map_err(|e: BenchError| e.to_string())?,
            decomp: field("decomp")?.to_owned(),
            writers: number("writers", field("writers")?)?,
            ranks: number("ranks", field("ranks")?)?,
            bytes: number("bytes", field("bytes")?)?,
            seconds: number("seconds", field("seconds")?)?,
            max_rss_kib: number("max_rss_kib", field("max_rss_kib")?)?,
            errors: number("errors", field("errors")?)?,
        })
    }

    /// Bandwidth in MiB/s over the slowest rank's time.
    pub fn mibs(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 / (1024.0 * 1024.0) / self.seconds } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_result_line() {
        let line = "peer=hdf5 phase=read decomp=half writers=4 ranks=2 bytes=32256 seconds=0.25 \
                    max_rss_kib=21512 errors=0";
        let result = PeerResult::parse(line).unwrap();
        assert_eq!(result.peer, Peer::Hdf5);
        assert_eq!(result.phase, PeerPhase::Read);
        assert_eq!((result.writers, result.ranks, result.bytes, result.errors), (4, 2, 32256, 0));
        assert_eq!(result.mibs(), 32256.0 / 1048576.0 / 0.25);
        let missing = PeerResult::parse("peer=hdf5 phase=read").unwrap_err();
        assert!(missing.contains("decomp="), "{missing}");
        let bad = PeerResult::parse(&line.replace("bytes=32256", "bytes=lots")).unwrap_err();
        assert!(bad.contains("bytes"), "{bad}");
    }

    #[test]
    fn the_readers_grid_is_the_plfs_readers_and_pieces_need_none() {
        let run = |decomp, readers| PeerRun::new("/d".into(), [7, 6, 12], [1, 2, 2], decomp, readers);
        let args = run(Decomp::Half, 2).args("read");
        assert!(args.windows(2).any(|w| w == ["--readers-grid", "1x1x2"]), "{args:?}");
        let args = run(Decomp::NonInteger, 5).args("read");
        assert!(args.windows(2).any(|w| w == ["--readers-grid", "1x1x5"]), "{args:?}");
        let args = run(Decomp::Pieces, 3).args("read");
        assert!(!args.contains(&"--readers-grid".to_owned()) && args.contains(&"pieces".to_owned()));
        assert!(!run(Decomp::Half, 2).args("write").contains(&"--decomp".to_owned()));
        assert!(run(Decomp::Uniform, 0).ranks(PeerPhase::Read).is_err());
    }
}
