//! The parallel copy engine behind `plfs cp`: any source to any sink, in
//! contiguous stripes, one thread (and, into plfs, one writer id) each.

use std::fs::{File, OpenOptions, Permissions};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::{Context as _, Result, anyhow, bail};
use indicatif::ProgressBar;
use plfs::fs::FileHandle;
use plfs::open::{OpenFlags, WriterId};

use crate::paths::PlfsPath;

/// Bytes moved per read and write: large enough that per-call costs (an
/// index record per plfs write) vanish next to the data.
pub const CHUNK: usize = 4 << 20;

/// Granularity of hole detection: all-zero blocks are not written, so
/// sparse files stay sparse in both directions.
const ZERO_BLOCK: usize = 64 << 10;

static ZEROS: [u8; ZERO_BLOCK] = [0; ZERO_BLOCK];

pub trait Source: Sync {
    fn size(&self) -> u64;
    /// Permission bits, to give the copy.
    fn mode(&self) -> u32;
    /// Ranges that may hold data; everything else reads as zeros.
    fn data_ranges(&self) -> Vec<Range<u64>>;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;
}

pub trait Sink: Sync {
    /// Writes as stripe `stripe`'s writer.
    fn write_at(&self, stripe: usize, buf: &[u8], offset: u64) -> Result<()>;
    /// Sets the final size (holes at the end were never written) and mode.
    fn finish(self: Box<Self>, size: u64, written_end: u64, mode: u32) -> Result<()>;
}

pub struct LocalSource {
    file: File,
    path: PathBuf,
    size: u64,
    mode: u32,
}

impl LocalSource {
    pub fn open(path: &Path) -> Result<LocalSource> {
        let file = File::open(path).with_context(|| path.display().to_string())?;
        let metadata = file.metadata().with_context(|| path.display().to_string())?;
        if metadata.is_dir() {
            bail!("{}: is a directory (cp copies files)", path.display());
        }
        Ok(LocalSource {
            size: metadata.len(),
            mode: metadata.permissions().mode() & 0o7777,
            file,
            path: path.to_path_buf(),
        })
    }
}

impl Source for LocalSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn mode(&self) -> u32 {
        self.mode
    }

    fn data_ranges(&self) -> Vec<Range<u64>> {
        sparse_ranges(&self.file, self.size).unwrap_or_else(|| std::iter::once(0..self.size).collect())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.file.read_at(buf, offset).with_context(|| format!("{}: read at {offset}", self.path.display()))
    }
}

/// The data ranges of a sparse file, or None when the file system cannot
/// say (then the whole file is read and zero blocks are still skipped).
fn sparse_ranges(file: &File, size: u64) -> Option<Vec<Range<u64>>> {
    let fd = file.as_raw_fd();
    let mut ranges = Vec::new();
    let mut position: u64 = 0;
    while position < size {
        // SAFETY: lseek on a descriptor this File owns; reads use pread, so
        // moving the shared offset disturbs nothing.
        let data = unsafe { libc::lseek(fd, position as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole remains
            }
            return None;
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return None;
        }
        let (data, hole) = (data as u64, (hole as u64).min(size));
        if hole <= data {
            break;
        }
        ranges.push(data..hole);
        position = hole;
    }
    Some(ranges)
}

pub struct PlfsSource {
    handle: FileHandle,
    size: u64,
    mode: u32,
    shown: PathBuf,
}

impl PlfsSource {
    pub fn open(source: &PlfsPath) -> Result<PlfsSource> {
        let attr = source.plfs.stat(&source.path).map_err(|e| source.error(e))?;
        if attr.kind != plfs::attr::FileKind::File {
            bail!("{}: is not a regular file (cp copies files)", source.shown().display());
        }
        let handle = source.plfs.open(&source.path, OpenFlags::RDONLY, 0, 0).map_err(|e| source.error(e))?;
        let size = handle.size().map_err(|e| source.error(e))?;
        Ok(PlfsSource { handle, size, mode: attr.mode & 0o7777, shown: source.shown() })
    }

    pub fn close(self) -> Result<()> {
        self.handle.close().with_context(|| self.shown.display().to_string())
    }
}

impl Source for PlfsSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn mode(&self) -> u32 {
        self.mode
    }

    fn data_ranges(&self) -> Vec<Range<u64>> {
        std::iter::once(0..self.size).collect()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.handle.read(buf, offset).with_context(|| self.shown.display().to_string())
    }
}

pub struct LocalSink {
    file: File,
    path: PathBuf,
}

impl LocalSink {
    /// Creates or truncates `path`, already `size` long so stripes can be
    /// written in any order and holes cost nothing.
    pub fn create(path: &Path, size: u64, mode: u32) -> Result<LocalSink> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .with_context(|| path.display().to_string())?;
        file.set_len(size).with_context(|| format!("{}: set length {size}", path.display()))?;
        Ok(LocalSink { file, path: path.to_path_buf() })
    }
}

impl Sink for LocalSink {
    fn write_at(&self, _stripe: usize, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .with_context(|| format!("{}: write at {offset}", self.path.display()))
    }

    fn finish(self: Box<Self>, _size: u64, _written_end: u64, mode: u32) -> Result<()> {
        // The create mode went through the umask; cp preserves the source's.
        self.file
            .set_permissions(Permissions::from_mode(mode))
            .with_context(|| format!("{}: chmod", self.path.display()))
    }
}

pub struct PlfsSink {
    handle: FileHandle,
    target: PlfsPath,
}

/// The handle's own writer id; stripe `i` writes as writer `i`, so the
/// first stripe shares its log with the open's truncate record.
const HANDLE_WRITER: WriterId = 0;

impl PlfsSink {
    pub fn create(target: &PlfsPath, mode: u32) -> Result<PlfsSink> {
        let flags = OpenFlags::WRONLY.create().truncate();
        let handle =
            target.plfs.open(&target.path, flags, mode, HANDLE_WRITER).map_err(|e| target.error(e))?;
        Ok(PlfsSink { handle, target: target.clone() })
    }
}

impl Sink for PlfsSink {
    fn write_at(&self, stripe: usize, buf: &[u8], offset: u64) -> Result<()> {
        let written =
            self.handle.write_as(buf, offset, stripe as WriterId).map_err(|e| self.target.error(e))?;
        if written != buf.len() {
            bail!("{}: short write at {offset}", self.target.shown().display());
        }
        Ok(())
    }

    fn finish(self: Box<Self>, size: u64, written_end: u64, mode: u32) -> Result<()> {
        let PlfsSink { handle, target } = *self;
        if written_end < size {
            handle.truncate(size).map_err(|e| target.error(e))?;
        }
        handle.close().map_err(|e| target.error(e))?;
        target.plfs.chmod(&target.path, mode).map_err(|e| target.error(e))
    }
}

/// Copies `source` into `sink` with up to `threads` threads, each owning a
/// contiguous stripe. Returns the bytes copied (the logical size).
pub fn copy(source: &dyn Source, sink: Box<dyn Sink>, threads: usize, progress: &ProgressBar) -> Result<u64> {
    let size = source.size();
    let data = source.data_ranges();
    let stripes = stripes(size, threads.max(1));
    let written_end = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let sink_ref: &dyn Sink = sink.as_ref();
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let workers: Vec<_> = stripes
            .iter()
            .enumerate()
            .map(|(index, stripe)| {
                let pieces = intersect(&data, stripe);
                let (written_end, failed) = (&written_end, &failed);
                let stripe_len = stripe.end - stripe.start;
                scope.spawn(move || {
                    let result = copy_stripe(source, sink_ref, index, &pieces, written_end, failed, progress);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    } else {
                        // Holes between data ranges count as copied too.
                        let data_len: u64 = pieces.iter().map(|p| p.end - p.start).sum();
                        progress.inc(stripe_len - data_len);
                    }
                    result
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|_| Err(anyhow!("a copy thread panicked"))))
            .collect()
    });
    for result in results {
        result?;
    }
    sink.finish(size, written_end.load(Ordering::Relaxed), source.mode())?;
    Ok(size)
}

fn copy_stripe(
    source: &dyn Source,
    sink: &dyn Sink,
    stripe: usize,
    pieces: &[Range<u64>],
    written_end: &AtomicU64,
    failed: &AtomicBool,
    progress: &ProgressBar,
) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    for piece in pieces {
        let mut offset = piece.start;
        while offset < piece.end {
            if failed.load(Ordering::Relaxed) {
                return Ok(()); // another stripe failed and reports it
            }
            let want = (piece.end - offset).min(CHUNK as u64) as usize;
            let buf = &mut buf[..want];
            read_full(source, buf, offset)?;
            for (start, end) in nonzero_runs(buf) {
                sink.write_at(stripe, &buf[start..end], offset + start as u64)?;
                written_end.fetch_max(offset + end as u64, Ordering::Relaxed);
            }
            offset += want as u64;
            progress.inc(want as u64);
        }
    }
    Ok(())
}

fn read_full(source: &dyn Source, buf: &mut [u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let count = source.read_at(&mut buf[done..], offset + done as u64)?;
        if count == 0 {
            bail!("source ended at {} while copying (did it shrink?)", offset + done as u64);
        }
        done += count;
    }
    Ok(())
}

/// Byte ranges of `buf` made of blocks that are not all zero, merged.
fn nonzero_runs(buf: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < buf.len() {
        let end = (start + ZERO_BLOCK).min(buf.len());
        // Slice equality is a memcmp, fast even in debug builds.
        if buf[start..end] != ZEROS[..end - start] {
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
        }
        start = end;
    }
    runs
}

/// `size` split into at most `count` contiguous stripes, whole chunks each
/// so no chunk is split between writers.
fn stripes(size: u64, count: usize) -> Vec<Range<u64>> {
    if size == 0 {
        return Vec::new();
    }
    let chunks = size.div_ceil(CHUNK as u64);
    let per_stripe = chunks.div_ceil(count as u64) * CHUNK as u64;
    (0..size).step_by(per_stripe as usize).map(|start| start..(start + per_stripe).min(size)).collect()
}

fn intersect(ranges: &[Range<u64>], with: &Range<u64>) -> Vec<Range<u64>> {
    ranges
        .iter()
        .filter_map(|range| {
            let start = range.start.max(with.start);
            let end = range.end.min(with.end);
            (start < end).then_some(start..end)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_cover_the_file_in_whole_chunks() {
        assert!(stripes(0, 4).is_empty());
        assert_eq!(stripes(1, 4), vec![0..1]);
        let chunk = CHUNK as u64;
        assert_eq!(
            stripes(10 * chunk + 1, 4),
            vec![0..3 * chunk, 3 * chunk..6 * chunk, 6 * chunk..9 * chunk, 9 * chunk..10 * chunk + 1]
        );
        assert_eq!(stripes(2 * chunk, 4), vec![0..chunk, chunk..2 * chunk]);
    }

    #[test]
    fn zero_blocks_are_skipped() {
        let mut buf = vec![0u8; 4 * ZERO_BLOCK + 10];
        assert!(nonzero_runs(&buf).is_empty());
        buf[ZERO_BLOCK + 1] = 1;
        buf[2 * ZERO_BLOCK] = 1;
        buf[4 * ZERO_BLOCK + 9] = 1;
        assert_eq!(
            nonzero_runs(&buf),
            vec![(ZERO_BLOCK, 3 * ZERO_BLOCK), (4 * ZERO_BLOCK, 4 * ZERO_BLOCK + 10)]
        );
    }

    #[test]
    fn intersects_ranges() {
        assert_eq!(intersect(&[0..10, 20..30], &(5..25)), vec![5..10, 20..25]);
        assert!(intersect(&[0..10, 30..40], &(10..20)).is_empty());
    }
}
