//! [`ShimComm`]: the [`Comm`] trait over a C `struct plfs_comm_ops`.
//!
//! MPI counts are C ints, so variable-sized exchanges first share every
//! rank's length (on every rank, so all ranks take the same decision when
//! a total does not fit), then move the bytes; broadcasts go in chunks.

use std::ffi::{c_int, c_void};

use plfs::collective::Comm;
use plfs::{Error, ErrorKind, Result};

/// Must match `PLFS_COMM_OPS_VERSION` in include/plfs_mpi.h.
pub const COMM_OPS_VERSION: u32 = 1;

/// Largest piece one broadcast call moves (MPI counts are ints).
const BROADCAST_CHUNK_BYTES: usize = 1 << 30;

type RankFn = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
type BarrierFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type BcastFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int) -> c_int;
type GatherFn = unsafe extern "C" fn(*mut c_void, *const c_void, c_int, *mut c_void, c_int) -> c_int;
type GathervFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    c_int,
    *mut c_void,
    *const c_int,
    *const c_int,
    c_int,
) -> c_int;
type AllgatherFn = unsafe extern "C" fn(*mut c_void, *const c_void, c_int, *mut c_void) -> c_int;
type AllgathervFn =
    unsafe extern "C" fn(*mut c_void, *const c_void, c_int, *mut c_void, *const c_int, *const c_int) -> c_int;
type SplitFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, *mut PlfsCommOps) -> c_int;
type ReleaseFn = unsafe extern "C" fn(*mut c_void);

/// `struct plfs_comm_ops`, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PlfsCommOps {
    pub version: u32,
    pub struct_size: u32,
    pub context: *mut c_void,
    pub rank: Option<RankFn>,
    pub size: Option<RankFn>,
    pub barrier: Option<BarrierFn>,
    pub bcast: Option<BcastFn>,
    pub gather: Option<GatherFn>,
    pub gatherv: Option<GathervFn>,
    pub allgather: Option<AllgatherFn>,
    pub allgatherv: Option<AllgathervFn>,
    pub split: Option<SplitFn>,
    pub release: Option<ReleaseFn>,
}

impl PlfsCommOps {
    /// An all-NULL table, for C to fill in.
    pub fn empty() -> PlfsCommOps {
        PlfsCommOps {
            version: 0,
            struct_size: 0,
            context: std::ptr::null_mut(),
            rank: None,
            size: None,
            barrier: None,
            bcast: None,
            gather: None,
            gatherv: None,
            allgather: None,
            allgatherv: None,
            split: None,
            release: None,
        }
    }
}

/// The functions every table must have, checked once so calls need not.
#[derive(Debug, Clone, Copy)]
struct Functions {
    barrier: BarrierFn,
    bcast: BcastFn,
    gatherv: GathervFn,
    allgather: AllgatherFn,
    allgatherv: AllgathervFn,
    split: SplitFn,
}

/// A communicator given as a C table of MPI calls.
#[derive(Debug)]
pub struct ShimComm {
    context: *mut c_void,
    functions: Functions,
    /// Called on drop (a communicator this side split off); None when the
    /// caller owns the communicator.
    release: Option<ReleaseFn>,
    rank: usize,
    size: usize,
}

/// A real address for an empty buffer. An empty Vec's pointer is 0x1,
/// which is Open MPI's MPI_IN_PLACE: passed as a send buffer it would make
/// MPI read the receive buffer instead (and reject the call).
fn send_buffer(bytes: &[u8]) -> *const c_void {
    static EMPTY: u8 = 0;
    if bytes.is_empty() { std::ptr::addr_of!(EMPTY).cast() } else { bytes.as_ptr().cast() }
}

fn receive_buffer(bytes: &mut [u8], spare: &mut u8) -> *mut c_void {
    if bytes.is_empty() { std::ptr::from_mut(spare).cast() } else { bytes.as_mut_ptr().cast() }
}

fn check(code: c_int, call: &str) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Io, format!("{call} failed with MPI error {code}")))
    }
}

fn as_count(length: usize, what: &str) -> Result<c_int> {
    c_int::try_from(length).map_err(|_| {
        Error::new(
            ErrorKind::Unsupported,
            format!("{what}: {length} bytes is more than one MPI call can move"),
        )
    })
}

impl ShimComm {
    /// Wraps a table after checking its version, size and functions.
    ///
    /// # Safety
    /// The table's functions must behave as include/plfs_mpi.h documents,
    /// and its context must stay valid while the returned value (and any
    /// communicator split from it) lives. If `release` is set, the
    /// returned value owns the context and releases it on drop.
    pub unsafe fn from_ops(ops: &PlfsCommOps) -> Result<ShimComm> {
        if ops.version != COMM_OPS_VERSION || ops.struct_size as usize != std::mem::size_of::<PlfsCommOps>() {
            return Err(Error::invalid(format!(
                "plfs_comm_ops version {} size {} (this libplfs takes version {COMM_OPS_VERSION} size {}): \
                 rebuild against the installed plfs_mpi.h",
                ops.version,
                ops.struct_size,
                std::mem::size_of::<PlfsCommOps>()
            )));
        }
        let missing = || Error::invalid("plfs_comm_ops: a function pointer is NULL");
        let functions = Functions {
            barrier: ops.barrier.ok_or_else(missing)?,
            bcast: ops.bcast.ok_or_else(missing)?,
            gatherv: ops.gatherv.ok_or_else(missing)?,
            allgather: ops.allgather.ok_or_else(missing)?,
            allgatherv: ops.allgatherv.ok_or_else(missing)?,
            split: ops.split.ok_or_else(missing)?,
        };
        let (rank_fn, size_fn) = (ops.rank.ok_or_else(missing)?, ops.size.ok_or_else(missing)?);
        let (mut rank, mut size) = (0 as c_int, 0 as c_int);
        // SAFETY: the caller vouches for the table; the out-pointers are ours.
        unsafe {
            check(rank_fn(ops.context, &mut rank), "MPI_Comm_rank")?;
            check(size_fn(ops.context, &mut size), "MPI_Comm_size")?;
        }
        if size < 1 || rank < 0 || rank >= size {
            return Err(Error::invalid(format!("plfs_comm_ops: rank {rank} of {size} ranks")));
        }
        Ok(ShimComm {
            context: ops.context,
            functions,
            release: ops.release,
            rank: rank as usize,
            size: size as usize,
        })
    }

    /// Every rank's length, on every rank.
    fn all_lengths(&self, mine: usize) -> Result<Vec<usize>> {
        let mine = (mine as u64).to_le_bytes();
        let mut all = vec![0u8; 8 * self.size];
        // SAFETY: 8 bytes from each rank land in size*8 bytes.
        let code = unsafe {
            (self.functions.allgather)(self.context, mine.as_ptr().cast(), 8, all.as_mut_ptr().cast())
        };
        check(code, "MPI_Allgather")?;
        Ok(all
            .chunks_exact(8)
            .map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")) as usize)
            .collect())
    }

    /// Counts and displacements for a v-collective of `lengths`.
    fn layout(lengths: &[usize], what: &str) -> Result<(Vec<c_int>, Vec<c_int>, usize)> {
        let total: usize = lengths.iter().sum();
        as_count(total, what)?;
        let counts: Vec<c_int> = lengths.iter().map(|&length| length as c_int).collect();
        let displacements = counts
            .iter()
            .scan(0, |offset, &count| {
                let start = *offset;
                *offset += count;
                Some(start)
            })
            .collect();
        Ok((counts, displacements, total))
    }

    fn split_up(buffer: &[u8], lengths: &[usize]) -> Vec<Vec<u8>> {
        let mut rest = buffer;
        lengths
            .iter()
            .map(|&length| {
                let (piece, tail) = rest.split_at(length);
                rest = tail;
                piece.to_vec()
            })
            .collect()
    }
}

impl Drop for ShimComm {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: this value owns the context (from_ops contract).
            unsafe { release(self.context) };
        }
    }
}

impl Comm for ShimComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self) -> Result<()> {
        // SAFETY: from_ops contract.
        check(unsafe { (self.functions.barrier)(self.context) }, "MPI_Barrier")
    }

    fn broadcast(&self, root: usize, bytes: &mut Vec<u8>) -> Result<()> {
        let root_rank = root as c_int;
        let mut length = (bytes.len() as u64).to_le_bytes();
        // SAFETY: 8 bytes each way, from our buffer.
        let code = unsafe { (self.functions.bcast)(self.context, length.as_mut_ptr().cast(), 8, root_rank) };
        check(code, "MPI_Bcast")?;
        let length = usize::try_from(u64::from_le_bytes(length))
            .map_err(|_| Error::new(ErrorKind::Unsupported, "broadcast larger than memory"))?;
        if self.rank != root {
            bytes.clear();
            bytes.resize(length, 0);
        }
        for chunk in bytes.chunks_mut(BROADCAST_CHUNK_BYTES) {
            let count = chunk.len() as c_int;
            // SAFETY: every rank's buffer has the same length, chunked alike.
            let code =
                unsafe { (self.functions.bcast)(self.context, chunk.as_mut_ptr().cast(), count, root_rank) };
            check(code, "MPI_Bcast")?;
        }
        Ok(())
    }

    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let lengths = self.all_lengths(mine.len())?;
        let (counts, displacements, total) = ShimComm::layout(&lengths, "gather")?;
        let mut buffer = if self.rank == root { vec![0u8; total] } else { Vec::new() };
        let mut spare = 0u8;
        // SAFETY: counts and displacements describe buffer at the root;
        // elsewhere MPI ignores the receive arguments.
        let code = unsafe {
            (self.functions.gatherv)(
                self.context,
                send_buffer(mine),
                mine.len() as c_int,
                receive_buffer(&mut buffer, &mut spare),
                counts.as_ptr(),
                displacements.as_ptr(),
                root as c_int,
            )
        };
        check(code, "MPI_Gatherv")?;
        Ok((self.rank == root).then(|| ShimComm::split_up(&buffer, &lengths)))
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let lengths = self.all_lengths(mine.len())?;
        let (counts, displacements, total) = ShimComm::layout(&lengths, "allgather")?;
        let mut buffer = vec![0u8; total];
        let mut spare = 0u8;
        // SAFETY: counts and displacements describe buffer.
        let code = unsafe {
            (self.functions.allgatherv)(
                self.context,
                send_buffer(mine),
                mine.len() as c_int,
                receive_buffer(&mut buffer, &mut spare),
                counts.as_ptr(),
                displacements.as_ptr(),
            )
        };
        check(code, "MPI_Allgatherv")?;
        Ok(ShimComm::split_up(&buffer, &lengths))
    }

    fn split(&self, color: u32, key: usize) -> Result<Box<dyn Comm>> {
        let color = c_int::try_from(color).map_err(|_| Error::invalid(format!("split color {color}")))?;
        let key = c_int::try_from(key).map_err(|_| Error::invalid(format!("split key {key}")))?;
        let mut child = PlfsCommOps::empty();
        // SAFETY: from_ops contract; child is ours to fill.
        check(unsafe { (self.functions.split)(self.context, color, key, &mut child) }, "MPI_Comm_split")?;
        // SAFETY: the table's split fills a table it owns through release.
        Ok(Box::new(unsafe { ShimComm::from_ops(&child)? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn rank_of(_: *mut c_void, out: *mut c_int) -> c_int {
        // SAFETY: ShimComm passes its own out-pointer.
        unsafe { *out = 0 };
        0
    }

    unsafe extern "C" fn failing_barrier(_: *mut c_void) -> c_int {
        17
    }

    unsafe extern "C" fn bcast(_: *mut c_void, _: *mut c_void, _: c_int, _: c_int) -> c_int {
        0
    }

    /// A one-rank table: enough to check validation and error mapping.
    unsafe extern "C" fn size_of_one(_: *mut c_void, out: *mut c_int) -> c_int {
        // SAFETY: as rank_of.
        unsafe { *out = 1 };
        0
    }

    unsafe extern "C" fn gatherv(
        _: *mut c_void,
        _: *const c_void,
        _: c_int,
        _: *mut c_void,
        _: *const c_int,
        _: *const c_int,
        _: c_int,
    ) -> c_int {
        0
    }

    unsafe extern "C" fn allgather(_: *mut c_void, _: *const c_void, _: c_int, _: *mut c_void) -> c_int {
        0
    }

    unsafe extern "C" fn allgatherv(
        _: *mut c_void,
        _: *const c_void,
        _: c_int,
        _: *mut c_void,
        _: *const c_int,
        _: *const c_int,
    ) -> c_int {
        0
    }

    unsafe extern "C" fn split(_: *mut c_void, _: c_int, _: c_int, _: *mut PlfsCommOps) -> c_int {
        0
    }

    /// A one-rank table: enough to check validation and error mapping.
    fn table() -> PlfsCommOps {
        PlfsCommOps {
            version: COMM_OPS_VERSION,
            struct_size: std::mem::size_of::<PlfsCommOps>() as u32,
            rank: Some(rank_of),
            size: Some(size_of_one),
            barrier: Some(failing_barrier),
            bcast: Some(bcast),
            gatherv: Some(gatherv),
            allgather: Some(allgather),
            allgatherv: Some(allgatherv),
            split: Some(split),
            ..PlfsCommOps::empty()
        }
    }

    #[test]
    fn tables_of_another_version_or_with_null_functions_are_refused() {
        // SAFETY: the table's functions touch only their out-pointers.
        unsafe {
            assert!(ShimComm::from_ops(&table()).is_ok());
            let old = PlfsCommOps { version: COMM_OPS_VERSION + 1, ..table() };
            assert_eq!(ShimComm::from_ops(&old).unwrap_err().kind(), ErrorKind::InvalidInput);
            let short = PlfsCommOps { struct_size: 8, ..table() };
            assert_eq!(ShimComm::from_ops(&short).unwrap_err().kind(), ErrorKind::InvalidInput);
            let holes = PlfsCommOps { split: None, ..table() };
            assert_eq!(ShimComm::from_ops(&holes).unwrap_err().kind(), ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn mpi_error_codes_become_errors_naming_the_call() {
        // SAFETY: as above.
        let comm = unsafe { ShimComm::from_ops(&table()) }.unwrap();
        assert_eq!((comm.rank(), comm.size()), (0, 1));
        let error = comm.barrier().unwrap_err();
        assert!(error.to_string().contains("MPI_Barrier failed with MPI error 17"), "{error}");
        let mut bytes = b"kept at the root".to_vec();
        comm.broadcast(0, &mut bytes).unwrap();
        assert_eq!(bytes, b"kept at the root");
    }
}
