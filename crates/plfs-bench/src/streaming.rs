//! One process streaming a large file in big blocks, through the library
//! and through a FUSE mount of the same backends, in the same run: what an
//! archiver or `cp` sees. Each path reads the file the *other* one wrote,
//! so neither read is served from a page cache it filled itself.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use plfs::fs::Plfs;
use plfs::open::OpenFlags;
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::pattern::{fill_record, verify_record};
use crate::runner::drop_page_cache;
use crate::worker::read_full;

const MIB: f64 = (1u64 << 20) as f64;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamingReport {
    pub bytes: u64,
    pub block_bytes: usize,
    pub write_library_mibs: f64,
    pub write_fuse_mibs: f64,
    pub read_library_mibs: f64,
    pub read_fuse_mibs: f64,
    /// FUSE mount / library.
    pub write_ratio: f64,
    pub read_ratio: f64,
    /// Whether the page cache was dropped before each read (needs root),
    /// so reads came from the disk rather than memory.
    pub cold_reads: bool,
    pub verified: bool,
}

impl StreamingReport {
    pub fn to_text(&self) -> String {
        format!(
            "streaming {:.0} MiB in {} KiB blocks, one process:\n\
             {:<24} {:>12} {:>12}\n\
             {:<24} {:>12.1} {:>12.1}\n\
             {:<24} {:>12.1} {:>12.1}\n\
             FUSE mount / library: write {:.2}x  read {:.2}x\n\
             reads: {}\n\
             verified: {}\n",
            self.bytes as f64 / MIB,
            self.block_bytes >> 10,
            "",
            "write MiB/s",
            "read MiB/s",
            "library",
            self.write_library_mibs,
            self.read_library_mibs,
            "FUSE mount",
            self.write_fuse_mibs,
            self.read_fuse_mibs,
            self.write_ratio,
            self.read_ratio,
            if self.cold_reads {
                "cold (page cache dropped before each)"
            } else {
                "from the page cache (not root)"
            },
            if self.verified { "every byte read back matched" } else { "NO" },
        )
    }
}

/// Streams `bytes` through `plfs` (as the logical file `/<name>.library`)
/// and through `mount_root`, the FUSE mount point of the same backends
/// (as `<name>.fuse`), then reads each back the other way and verifies.
/// `fuse_first` puts the mount's write and read before the library's:
/// virtual disks absorb a burst and then slow down, so callers alternate
/// the order between runs rather than always favour one path.
pub fn streaming(
    plfs: &Plfs,
    mount_root: &Path,
    name: &str,
    bytes: u64,
    block_bytes: usize,
    fuse_first: bool,
) -> Result<StreamingReport> {
    if block_bytes == 0 || bytes == 0 {
        return Err(BenchError::invalid("streaming: size and block must be positive"));
    }
    let blocks = bytes.div_ceil(block_bytes as u64);
    let total = blocks * block_bytes as u64;
    let library_path = format!("/{name}.library");
    let fuse_name = format!("{name}.fuse");
    let mount_path = mount_root.join(&fuse_name);
    let mut buf = vec![0u8; block_bytes];

    let write_library = |buf: &mut [u8]| -> Result<f64> {
        let started = Instant::now();
        let handle = plfs
            .open(&library_path, OpenFlags::WRONLY.create().truncate(), 0o644, u64::from(std::process::id()))
            .map_err(BenchError::plfs("library open", library_path.as_str()))?;
        for block in 0..blocks {
            fill_record(block, buf);
            handle
                .write(buf, block * block_bytes as u64)
                .map_err(BenchError::plfs("library write", library_path.as_str()))?;
        }
        handle.sync().map_err(BenchError::plfs("library sync", library_path.as_str()))?;
        handle.close().map_err(BenchError::plfs("library close", library_path.as_str()))?;
        Ok(started.elapsed().as_secs_f64())
    };
    let write_fuse = |buf: &mut [u8]| -> Result<f64> {
        let started = Instant::now();
        let mut file = File::create(&mount_path).map_err(BenchError::io("create", &mount_path))?;
        for block in 0..blocks {
            fill_record(block, buf);
            file.write_all(buf).map_err(BenchError::io("write", &mount_path))?;
        }
        file.sync_all().map_err(BenchError::io("fsync", &mount_path))?;
        Ok(started.elapsed().as_secs_f64())
    };
    // Each path reads the file the other one wrote.
    let read_library = |buf: &mut [u8]| -> Result<(f64, bool)> {
        let started = Instant::now();
        let mut verified = true;
        let fuse_logical = format!("/{fuse_name}");
        let handle = plfs
            .open(&fuse_logical, OpenFlags::RDONLY, 0, 0)
            .map_err(BenchError::plfs("library open", fuse_logical.as_str()))?;
        for block in 0..blocks {
            let mut filled = 0;
            while filled < block_bytes {
                let count = handle
                    .read(&mut buf[filled..], block * block_bytes as u64 + filled as u64)
                    .map_err(BenchError::plfs("library read", fuse_logical.as_str()))?;
                if count == 0 {
                    break;
                }
                filled += count;
            }
            verified &= filled == block_bytes && verify_record(block, buf).is_ok();
        }
        handle.close().map_err(BenchError::plfs("library close", fuse_logical))?;
        Ok((started.elapsed().as_secs_f64(), verified))
    };
    let library_through_mount = mount_root.join(library_path.trim_start_matches('/'));
    let read_fuse = |buf: &mut [u8]| -> Result<(f64, bool)> {
        let started = Instant::now();
        let mut verified = true;
        let mut file =
            File::open(&library_through_mount).map_err(BenchError::io("open", &library_through_mount))?;
        for block in 0..blocks {
            let filled = read_full(&mut file, buf).map_err(BenchError::io("read", &library_through_mount))?;
            verified &= filled == block_bytes && verify_record(block, buf).is_ok();
        }
        Ok((started.elapsed().as_secs_f64(), verified))
    };

    let (write_library, write_fuse) = if fuse_first {
        let fuse = write_fuse(&mut buf)?;
        (write_library(&mut buf)?, fuse)
    } else {
        let library = write_library(&mut buf)?;
        (library, write_fuse(&mut buf)?)
    };
    let mut cold_reads = drop_page_cache().is_ok();
    let ((read_library, library_ok), (read_fuse, fuse_ok)) = if fuse_first {
        let fuse = read_fuse(&mut buf)?;
        cold_reads &= drop_page_cache().is_ok();
        (read_library(&mut buf)?, fuse)
    } else {
        let library = read_library(&mut buf)?;
        cold_reads &= drop_page_cache().is_ok();
        (library, read_fuse(&mut buf)?)
    };
    let verified = library_ok && fuse_ok;

    let fuse_logical = format!("/{fuse_name}");
    for (cleanup, path) in
        [(plfs.unlink(&library_path), &library_path), (plfs.unlink(&fuse_logical), &fuse_logical)]
    {
        cleanup.map_err(BenchError::plfs("removing the streaming file", path.as_str()))?;
    }
    let mibs = |seconds: f64| total as f64 / MIB / seconds.max(1e-9);
    Ok(StreamingReport {
        bytes: total,
        block_bytes,
        write_library_mibs: mibs(write_library),
        write_fuse_mibs: mibs(write_fuse),
        read_library_mibs: mibs(read_library),
        read_fuse_mibs: mibs(read_fuse),
        write_ratio: write_library / write_fuse.max(1e-9),
        read_ratio: read_library / read_fuse.max(1e-9),
        cold_reads,
        verified,
    })
}
