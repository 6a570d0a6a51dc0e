//! What a restart benchmark's checkpoint holds and who touches which bytes:
//! the file's layout (N-1 strided records, or Pixie3D-like variables of a
//! global 3-D array), each writer's extents in write order, and each
//! reader's extents under every read decomposition. Pure functions of the
//! layout, so the writer and reader processes (and the peers of other
//! formats) agree on them without being told.
//!
//! Contents, a function of the file offset alone so any reader can check
//! any byte:
//! - strided: byte `p` of record `i` (at offset `i * size`) is
//!   [`crate::pattern_byte`]`(i, p)`;
//! - pixie3d: the file is the 8 variables one after the other, each the
//!   global `GX × GY × GZ` array of little-endian f64 with x fastest; the
//!   value at variable `v`, point `(x, y, z)` is
//!   `(v · 2^40 + (z · GY + y) · GX + x) as f64` (exact: below 2^53), so
//!   value number `i` of the file is `(v << 40 | i mod (GX·GY·GZ)) as f64`.

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::pattern::fill_record;

/// Variables of the Pixie3D-like checkpoint (as in the paper's model).
pub const PIXIE3D_VARIABLES: u64 = 8;

/// A byte range of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

/// How the checkpoint is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Writer w writes records k·N + w (k < records) at record · size.
    Strided { writers: u64, records: u64, record_bytes: u64 },
    /// Writer grid `grid` (x, y, z; rank x fastest), each writer one
    /// `block` of every variable.
    Pixie3d { grid: [u64; 3], block: [u64; 3] },
}

/// How the readers split the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decomp {
    /// M = N: reader r reads what writer r wrote, in write order.
    Uniform,
    /// M = N/2.
    Half,
    /// M = N − k.
    MinusK,
    /// M readers on a grid of their own whose blocks do not line up with
    /// the writers' (the paper's 4×4×4 → 4×4×5).
    NonInteger,
    /// The whole file in M contiguous pieces.
    Pieces,
}

impl Decomp {
    pub const ALL: [Decomp; 5] =
        [Decomp::Uniform, Decomp::Half, Decomp::MinusK, Decomp::NonInteger, Decomp::Pieces];

    pub fn as_str(self) -> &'static str {
        match self {
            Decomp::Uniform => "uniform",
            Decomp::Half => "half",
            Decomp::MinusK => "minus-k",
            Decomp::NonInteger => "non-integer",
            Decomp::Pieces => "pieces",
        }
    }

    /// The reader count for N writers: fixed by the decomposition, or
    /// `readers` (non-integer: N + N/4, at least N + 1, when not given;
    /// pieces: N).
    pub fn readers(self, writers: usize, k: usize, readers: Option<usize>) -> Result<usize> {
        let m = match self {
            Decomp::Uniform => writers,
            Decomp::Half => writers / 2,
            Decomp::MinusK => writers.saturating_sub(k),
            Decomp::NonInteger => readers.unwrap_or(writers + (writers / 4).max(1)),
            Decomp::Pieces => readers.unwrap_or(writers),
        };
        if m == 0 {
            return Err(BenchError::invalid(format!(
                "restart: the {} decomposition of {writers} writers (k {k}) leaves no reader",
                self.as_str()
            )));
        }
        Ok(m)
    }

    /// The grid M pixie3d readers place their boxes on (x, y, z; rank x
    /// fastest), or None for pieces, which cut the file instead: the
    /// readers' own most cubic grid, so the writers' grid when M = N, half
    /// of it when M = N/2, otherwise blocks whose edges cut through the
    /// writers'. The restart peers are handed this grid
    /// (`--readers-grid`), so they read exactly what plfs's readers read.
    pub fn reader_grid(self, m: u64) -> Option<[u64; 3]> {
        (self != Decomp::Pieces).then(|| balanced_grid(m))
    }
}

impl std::str::FromStr for Decomp {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<Decomp> {
        Decomp::ALL.into_iter().find(|d| d.as_str() == text).ok_or_else(|| {
            BenchError::invalid(format!(
                "unknown decomposition {text:?} (expected uniform, half, minus-k, non-integer or pieces)"
            ))
        })
    }
}

/// The most cubic grid of `n` processes, (x, y, z) with x ≤ y ≤ z: 4 →
/// 1×2×2, 8 → 2×2×2, 64 → 4×4×4, 80 → 4×4×5, 5 → 1×1×5.
pub fn balanced_grid(n: u64) -> [u64; 3] {
    let mut best = [1, 1, n.max(1)];
    let mut a = 1;
    while a * a * a <= n {
        if n.is_multiple_of(a) {
            let rest = n / a;
            let mut b = a;
            while b * b <= rest {
                if rest.is_multiple_of(b) && rest / b < best[2] {
                    best = [a, b, rest / b];
                }
                b += 1;
            }
        }
        a += 1;
    }
    best
}

/// Part `c` of `total` split as evenly as possible into `parts`.
fn split(total: u64, parts: u64, c: u64) -> (u64, u64) {
    (c * total / parts, (c + 1) * total / parts)
}

/// Appends an extent, merging it into the last one when they touch: a
/// contiguous run is one call, as a hyperslab library would make it.
fn push(extents: &mut Vec<Extent>, offset: u64, len: u64) {
    if len == 0 {
        return;
    }
    if let Some(last) = extents.last_mut()
        && last.offset + last.len == offset
    {
        last.len += len;
        return;
    }
    extents.push(Extent { offset, len });
}

impl Layout {
    pub fn writers(&self) -> u64 {
        match *self {
            Layout::Strided { writers, .. } => writers,
            Layout::Pixie3d { grid, .. } => grid.iter().product(),
        }
    }

    /// The global array's dimensions (pixie3d).
    pub fn global(&self) -> Option<[u64; 3]> {
        match *self {
            Layout::Strided { .. } => None,
            Layout::Pixie3d { grid, block } => Some([0, 1, 2].map(|d| grid[d] * block[d])),
        }
    }

    pub fn file_bytes(&self) -> u64 {
        match *self {
            Layout::Strided { writers, records, record_bytes } => writers * records * record_bytes,
            Layout::Pixie3d { .. } => {
                let [gx, gy, gz] = self.global().unwrap_or_default();
                PIXIE3D_VARIABLES * gx * gy * gz * 8
            }
        }
    }

    /// The grain no read splits: a record's bytes may be split, a value's
    /// may not.
    fn unit(&self) -> u64 {
        match self {
            Layout::Strided { .. } => 1,
            Layout::Pixie3d { .. } => 8,
        }
    }

    /// What writer `w` writes, in the order it writes it.
    pub fn writer_extents(&self, w: u64) -> Vec<Extent> {
        match *self {
            Layout::Strided { writers, records, record_bytes } => {
                let mut extents = Vec::with_capacity(records as usize);
                for k in 0..records {
                    push(&mut extents, (k * writers + w) * record_bytes, record_bytes);
                }
                extents
            }
            Layout::Pixie3d { grid, .. } => self.box_extents(grid, w),
        }
    }

    /// What reader `r` of `m` reads under `decomp`, in the order it reads.
    pub fn reader_extents(&self, decomp: Decomp, m: u64, r: u64) -> Vec<Extent> {
        if decomp == Decomp::Pieces {
            let (unit, bytes) = (self.unit(), self.file_bytes());
            let (first, last) = split(bytes / unit, m, r);
            let mut extents = Vec::new();
            push(&mut extents, first * unit, (last - first) * unit);
            return extents;
        }
        match *self {
            // The writers' streams one after the other, split into M even
            // runs of records: reader r of N is writer r, reader r of N/2
            // writers 2r and 2r+1, and any other M cuts streams apart.
            Layout::Strided { writers, records, record_bytes } => {
                let (first, last) = split(writers * records, m, r);
                let mut extents = Vec::with_capacity((last - first) as usize);
                for i in first..last {
                    let (w, k) = (i / records, i % records);
                    push(&mut extents, (k * writers + w) * record_bytes, record_bytes);
                }
                extents
            }
            Layout::Pixie3d { .. } => self.box_extents(decomp.reader_grid(m).unwrap_or([1, 1, m]), r),
        }
    }

    /// Process `rank`'s block of a `grid` over the global array, every
    /// variable: rows of x, y then z, then the next variable.
    fn box_extents(&self, grid: [u64; 3], rank: u64) -> Vec<Extent> {
        let [gx, gy, gz] = self.global().unwrap_or_default();
        let coords = [rank % grid[0], rank / grid[0] % grid[1], rank / (grid[0] * grid[1])];
        let [(x0, x1), (y0, y1), (z0, z1)] = [0, 1, 2].map(|d| split([gx, gy, gz][d], grid[d], coords[d]));
        let mut extents = Vec::new();
        for v in 0..PIXIE3D_VARIABLES {
            for z in z0..z1 {
                for y in y0..y1 {
                    let value = ((v * gz + z) * gy + y) * gx + x0;
                    push(&mut extents, value * 8, (x1 - x0) * 8);
                }
            }
        }
        extents
    }

    /// Fills `out` with the file's bytes from `offset`; `scratch` is a
    /// buffer the caller keeps (a record, for a partial strided record).
    pub fn fill(&self, offset: u64, out: &mut [u8], scratch: &mut Vec<u8>) {
        match *self {
            Layout::Strided { record_bytes, .. } => {
                let mut done = 0usize;
                while done < out.len() {
                    let at = offset + done as u64;
                    let (record, within) = (at / record_bytes, (at % record_bytes) as usize);
                    let take = (record_bytes as usize - within).min(out.len() - done);
                    let piece = &mut out[done..done + take];
                    if take == record_bytes as usize {
                        fill_record(record, piece);
                    } else {
                        scratch.resize(record_bytes as usize, 0);
                        fill_record(record, scratch);
                        piece.copy_from_slice(&scratch[within..within + take]);
                    }
                    done += take;
                }
            }
            Layout::Pixie3d { .. } => {
                let [gx, gy, gz] = self.global().unwrap_or_default();
                let volume = gx * gy * gz;
                for (index, chunk) in (offset / 8..).zip(out.chunks_exact_mut(8)) {
                    chunk.copy_from_slice(&pixie3d_value(index, volume).to_le_bytes());
                }
            }
        }
    }

    /// Describes the value or byte at `offset` for an error message.
    pub fn describe(&self, offset: u64) -> String {
        match *self {
            Layout::Strided { record_bytes, .. } => {
                format!("record {} byte {}", offset / record_bytes, offset % record_bytes)
            }
            Layout::Pixie3d { .. } => {
                let [gx, gy, gz] = self.global().unwrap_or_default();
                let index = offset / 8;
                let (v, rest) = (index / (gx * gy * gz), index % (gx * gy * gz));
                format!(
                    "variable {v} at (x {}, y {}, z {}), expected {}",
                    rest % gx,
                    rest / gx % gy,
                    rest / (gx * gy),
                    pixie3d_value(index, gx * gy * gz)
                )
            }
        }
    }
}

/// Value number `index` of the pixie3d file (see the module comment).
pub fn pixie3d_value(index: u64, volume: u64) -> f64 {
    (((index / volume) << 40) | (index % volume)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte of the file, exactly once, in the extents of all parts.
    fn assert_exact_cover(layout: &Layout, parts: impl Iterator<Item = Vec<Extent>>, what: &str) {
        let mut all: Vec<Extent> = parts.flatten().collect();
        all.sort_by_key(|e| e.offset);
        let mut next = 0;
        for extent in &all {
            assert_eq!(extent.offset, next, "{what}: gap or overlap at {next} in {layout:?}");
            assert!(extent.len > 0, "{what}: empty extent");
            next += extent.len;
        }
        assert_eq!(next, layout.file_bytes(), "{what}: {layout:?} not covered to its end");
    }

    fn layouts(n: u64) -> Vec<Layout> {
        vec![
            Layout::Strided { writers: n, records: 7, record_bytes: 13 },
            Layout::Strided { writers: n, records: 1, record_bytes: 47001 },
            Layout::Pixie3d { grid: balanced_grid(n), block: [3, 4, 5] },
            Layout::Pixie3d { grid: balanced_grid(n), block: [1, 1, 2] },
        ]
    }

    #[test]
    fn every_decomposition_covers_every_byte_exactly_once() {
        for n in 1..=12u64 {
            for layout in layouts(n) {
                assert_exact_cover(&layout, (0..n).map(|w| layout.writer_extents(w)), "writers");
                for decomp in Decomp::ALL {
                    for readers in [None, Some(1), Some(5), Some(2 * n as usize + 3)] {
                        let Ok(m) = decomp.readers(n as usize, 1, readers) else {
                            assert!(n == 1 && matches!(decomp, Decomp::Half | Decomp::MinusK));
                            continue;
                        };
                        let parts = (0..m as u64).map(|r| layout.reader_extents(decomp, m as u64, r));
                        assert_exact_cover(&layout, parts, &format!("{} with {m} readers", decomp.as_str()));
                    }
                }
            }
        }
    }

    #[test]
    fn uniform_readers_read_their_writers_bytes_in_write_order() {
        for n in 1..=12u64 {
            for layout in layouts(n) {
                for r in 0..n {
                    assert_eq!(layout.reader_extents(Decomp::Uniform, n, r), layout.writer_extents(r));
                }
            }
        }
    }

    #[test]
    fn grids_are_the_papers_and_non_integer_blocks_cut_the_writers() {
        assert_eq!(balanced_grid(64), [4, 4, 4]);
        assert_eq!(balanced_grid(80), [4, 4, 5]);
        assert_eq!(balanced_grid(8), [2, 2, 2]);
        assert_eq!(balanced_grid(4), [1, 2, 2]);
        assert_eq!(balanced_grid(5), [1, 1, 5]);
        assert_eq!(Decomp::NonInteger.readers(64, 1, None).unwrap(), 80);
        assert_eq!(Decomp::NonInteger.readers(8, 1, None).unwrap(), 10);
        assert_eq!(Decomp::Half.readers(8, 1, None).unwrap(), 4);
        assert_eq!(Decomp::MinusK.readers(8, 3, None).unwrap(), 5);
        // 4 writers (1x2x2, 8 z-planes) read by 5 (1x1x5): some reader's
        // block starts inside a writer's.
        let layout = Layout::Pixie3d { grid: [1, 2, 2], block: [2, 2, 4] };
        let starts: Vec<u64> = (0..4).map(|w| layout.writer_extents(w)[0].offset).collect();
        assert!((0..5).any(|r| !starts.contains(&layout.reader_extents(Decomp::NonInteger, 5, r)[0].offset)));
    }

    #[test]
    fn contents_are_the_documented_functions() {
        let layout = Layout::Pixie3d { grid: [1, 2, 2], block: [2, 3, 4] };
        let [gx, gy, gz] = layout.global().unwrap();
        let (v, x, y, z) = (5u64, 1u64, 4u64, 6u64);
        let index = ((v * gz + z) * gy + y) * gx + x;
        let mut out = [0u8; 8];
        layout.fill(index * 8, &mut out, &mut Vec::new());
        assert_eq!(f64::from_le_bytes(out), (v as f64) * 2f64.powi(40) + ((z * gy + y) * gx + x) as f64);

        let strided = Layout::Strided { writers: 2, records: 3, record_bytes: 10 };
        let mut whole = vec![0u8; 60];
        strided.fill(0, &mut whole, &mut Vec::new());
        let mut part = vec![0u8; 17];
        strided.fill(23, &mut part, &mut Vec::new());
        assert_eq!(part, whole[23..40]);
        for (offset, byte) in whole.iter().enumerate() {
            assert_eq!(*byte, crate::pattern_byte(offset as u64 / 10, offset % 10));
        }
    }
}
