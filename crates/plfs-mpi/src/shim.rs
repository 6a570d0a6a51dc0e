//! [`ShimComm`]: the [`Comm`] trait over a C `struct plfs_comm_ops`.
//!
//! A receiver must know a message's length before MPI can move it, but a
//! separate round for the lengths doubles the rounds of an exchange, and
//! with more ranks than free cores every round is a wait until each rank
//! has been scheduled. So the first message of each exchange has a fixed
//! size, the length and as much of the payload as fits: a broadcast sends
//! one [`HEAD_BYTES`] head, a gather or allgather one slot per rank (at
//! most [`SLOTS_BYTES`] in all). Payloads that fit take one round; the
//! rest of longer ones follows in a second (every rank saw every length,
//! so all ranks take the same decision, also when a total does not fit an
//! MPI count, a C int); broadcasts go in chunks.

use std::ffi::{c_int, c_void};

use plfs::collective::Comm;
use plfs::{Error, ErrorKind, Result};

/// Must match `PLFS_COMM_OPS_VERSION` in include/plfs_mpi.h.
pub const COMM_OPS_VERSION: u32 = 1;

/// Largest piece one broadcast call moves (MPI counts are ints).
const BROADCAST_CHUNK_BYTES: usize = 1 << 30;

/// A broadcast's first message: the u64 length, then the payload's first
/// bytes. Small enough to go eagerly (no handshake with each receiver)
/// over shared memory in Open MPI and MPICH, large enough for a log list,
/// a host name or an error.
const HEAD_BYTES: usize = 4096;

/// A gather's or allgather's first message gives each rank a slot of at
/// most [`HEAD_BYTES`] (its u64 length, then its first bytes), and all
/// slots together at most this much, so what every rank receives stays
/// bounded as ranks grow (at 8192 ranks and more a slot holds the length
/// alone, the old length round).
const SLOTS_BYTES: usize = 64 << 10;

/// Bytes in front of the payload in a head or slot.
const LENGTH_BYTES: usize = 8;

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

    /// Bytes per rank in the first message of a gather or allgather.
    fn slot_bytes(&self) -> usize {
        (SLOTS_BYTES / self.size).clamp(LENGTH_BYTES, HEAD_BYTES)
    }

    /// Every rank's slot (its length and first bytes), on every rank: the
    /// first round of a gather or allgather, and the only one when every
    /// rank's bytes fit.
    fn exchange_slots(&self, mine: &[u8]) -> Result<Slots> {
        let slot = self.slot_bytes();
        let mut send = vec![0u8; slot];
        put_head(&mut send, mine);
        let mut all = vec![0u8; slot * self.size];
        let count = as_count(slot, "allgather")?;
        // SAFETY: slot bytes from each rank land in size*slot bytes.
        let code = unsafe {
            (self.functions.allgather)(self.context, send.as_ptr().cast(), count, all.as_mut_ptr().cast())
        };
        check(code, "MPI_Allgather")?;
        let lengths = all.chunks_exact(slot).map(head_length).collect::<Result<Vec<_>>>()?;
        Ok(Slots { all, slot, lengths })
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
}

/// What the first round of a gather or allgather gave every rank.
struct Slots {
    all: Vec<u8>,
    slot: usize,
    lengths: Vec<usize>,
}

impl Slots {
    /// Each rank's bytes that did not fit its slot.
    fn rest_lengths(&self) -> Vec<usize> {
        self.lengths.iter().map(|&length| length.saturating_sub(self.slot - LENGTH_BYTES)).collect()
    }

    /// Each rank's bytes: its slot's, then its part of `rest` (the second
    /// round's buffer, laid out by [`Slots::rest_lengths`]).
    fn pieces(&self, rest: &[u8]) -> Vec<Vec<u8>> {
        let mut rest = rest;
        self.all
            .chunks_exact(self.slot)
            .zip(&self.lengths)
            .map(|(slot, &length)| {
                let inline = length.min(self.slot - LENGTH_BYTES);
                let (tail, remaining) = rest.split_at(length - inline);
                rest = remaining;
                let mut piece = Vec::with_capacity(length);
                piece.extend_from_slice(&slot[LENGTH_BYTES..LENGTH_BYTES + inline]);
                piece.extend_from_slice(tail);
                piece
            })
            .collect()
    }
}

/// Writes `payload`'s length and as much of it as fits into `head`;
/// returns how many payload bytes went in.
fn put_head(head: &mut [u8], payload: &[u8]) -> usize {
    head[..LENGTH_BYTES].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let inline = payload.len().min(head.len() - LENGTH_BYTES);
    head[LENGTH_BYTES..LENGTH_BYTES + inline].copy_from_slice(&payload[..inline]);
    inline
}

/// The payload length a head or slot carries.
fn head_length(head: &[u8]) -> Result<usize> {
    let length = u64::from_le_bytes(head[..LENGTH_BYTES].try_into().expect("8 bytes"));
    usize::try_from(length).map_err(|_| Error::new(ErrorKind::Unsupported, "message larger than memory"))
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
        let mut head = vec![0u8; HEAD_BYTES];
        if self.rank == root {
            put_head(&mut head, bytes);
        }
        // SAFETY: HEAD_BYTES each way, from our buffer.
        let code = unsafe {
            (self.functions.bcast)(self.context, head.as_mut_ptr().cast(), HEAD_BYTES as c_int, root_rank)
        };
        check(code, "MPI_Bcast")?;
        let length = head_length(&head)?;
        let inline = length.min(HEAD_BYTES - LENGTH_BYTES);
        if self.rank != root {
            bytes.clear();
            bytes.reserve_exact(length);
            bytes.extend_from_slice(&head[LENGTH_BYTES..LENGTH_BYTES + inline]);
            bytes.resize(length, 0);
        }
        for chunk in bytes[inline..].chunks_mut(BROADCAST_CHUNK_BYTES) {
            let count = chunk.len() as c_int;
            // SAFETY: every rank's buffer has the same length, chunked alike.
            let code =
                unsafe { (self.functions.bcast)(self.context, chunk.as_mut_ptr().cast(), count, root_rank) };
            check(code, "MPI_Bcast")?;
        }
        Ok(())
    }

    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let slots = self.exchange_slots(mine)?;
        let rest_lengths = slots.rest_lengths();
        let (counts, displacements, total) = ShimComm::layout(&rest_lengths, "gather")?;
        let mut rest = Vec::new();
        if total > 0 {
            // Every rank saw every length, so all of them take this round.
            let send = &mine[mine.len() - rest_lengths[self.rank]..];
            rest = if self.rank == root { vec![0u8; total] } else { Vec::new() };
            let mut spare = 0u8;
            // SAFETY: counts and displacements describe rest at the root;
            // elsewhere MPI ignores the receive arguments.
            let code = unsafe {
                (self.functions.gatherv)(
                    self.context,
                    send_buffer(send),
                    send.len() as c_int,
                    receive_buffer(&mut rest, &mut spare),
                    counts.as_ptr(),
                    displacements.as_ptr(),
                    root as c_int,
                )
            };
            check(code, "MPI_Gatherv")?;
        }
        Ok((self.rank == root).then(|| slots.pieces(&rest)))
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let slots = self.exchange_slots(mine)?;
        let rest_lengths = slots.rest_lengths();
        let (counts, displacements, total) = ShimComm::layout(&rest_lengths, "allgather")?;
        let mut rest = vec![0u8; total];
        if total > 0 {
            let send = &mine[mine.len() - rest_lengths[self.rank]..];
            let mut spare = 0u8;
            // SAFETY: counts and displacements describe rest.
            let code = unsafe {
                (self.functions.allgatherv)(
                    self.context,
                    send_buffer(send),
                    send.len() as c_int,
                    receive_buffer(&mut rest, &mut spare),
                    counts.as_ptr(),
                    displacements.as_ptr(),
                )
            };
            check(code, "MPI_Allgatherv")?;
        }
        Ok(slots.pieces(&rest))
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

    /// MPI calls a one-rank table below made, by name.
    #[derive(Default)]
    struct Calls {
        made: Vec<&'static str>,
    }

    fn calls<'a>(context: *mut c_void) -> &'a mut Calls {
        // SAFETY: the tables below carry a live &mut Calls as context.
        unsafe { &mut *context.cast::<Calls>() }
    }

    unsafe extern "C" fn counted_bcast(context: *mut c_void, _: *mut c_void, _: c_int, _: c_int) -> c_int {
        calls(context).made.push("bcast");
        0
    }

    /// One rank: its send buffer is the whole receive buffer.
    unsafe extern "C" fn counted_allgather(
        context: *mut c_void,
        send: *const c_void,
        count: c_int,
        receive: *mut c_void,
    ) -> c_int {
        calls(context).made.push("allgather");
        // SAFETY: count bytes each side (MPI's contract for one rank).
        unsafe { std::ptr::copy_nonoverlapping(send.cast::<u8>(), receive.cast::<u8>(), count as usize) };
        0
    }

    unsafe extern "C" fn counted_allgatherv(
        context: *mut c_void,
        send: *const c_void,
        count: c_int,
        receive: *mut c_void,
        counts: *const c_int,
        displacements: *const c_int,
    ) -> c_int {
        calls(context).made.push("allgatherv");
        // SAFETY: MPI's contract, as the caller gave it.
        unsafe { copy_as_one_rank(send, count, receive, counts, displacements) };
        0
    }

    /// A v-collective of one rank: counts[0] == count bytes land at
    /// displacements[0].
    unsafe fn copy_as_one_rank(
        send: *const c_void,
        count: c_int,
        receive: *mut c_void,
        counts: *const c_int,
        displacements: *const c_int,
    ) {
        // SAFETY: the caller's buffers, as MPI would use them.
        unsafe {
            assert_eq!(*counts, count);
            let at = receive.cast::<u8>().add(*displacements as usize);
            std::ptr::copy_nonoverlapping(send.cast::<u8>(), at, count as usize);
        }
    }

    unsafe extern "C" fn counted_gatherv(
        context: *mut c_void,
        send: *const c_void,
        count: c_int,
        receive: *mut c_void,
        counts: *const c_int,
        displacements: *const c_int,
        _: c_int,
    ) -> c_int {
        calls(context).made.push("gatherv");
        // SAFETY: MPI's contract (the root is the one rank).
        unsafe { copy_as_one_rank(send, count, receive, counts, displacements) };
        0
    }

    #[test]
    fn an_exchange_takes_one_round_when_every_payload_fits_its_head_and_two_otherwise() {
        let mut made = Calls::default();
        let ops = PlfsCommOps {
            context: std::ptr::from_mut(&mut made).cast(),
            bcast: Some(counted_bcast),
            allgather: Some(counted_allgather),
            allgatherv: Some(counted_allgatherv),
            gatherv: Some(counted_gatherv),
            ..table()
        };
        // SAFETY: the functions use the context as the Calls above.
        let comm = unsafe { ShimComm::from_ops(&ops) }.unwrap();
        let fits: Vec<u8> = (0..HEAD_BYTES - LENGTH_BYTES).map(|i| i as u8).collect();
        let longer: Vec<u8> = (0..3 * HEAD_BYTES + 5).map(|i| (i * 7) as u8).collect();
        for (payload, rounds) in [(Vec::new(), 1), (fits.clone(), 1), (longer.clone(), 2)] {
            let before = calls(ops.context).made.len();
            assert_eq!(comm.allgather(&payload).unwrap(), vec![payload.clone()]);
            assert_eq!(comm.gather(0, &payload).unwrap(), Some(vec![payload.clone()]));
            let mut bytes = payload.clone();
            comm.broadcast(0, &mut bytes).unwrap();
            assert_eq!(bytes, payload);
            let made = &calls(ops.context).made[before..];
            assert_eq!(made.len(), 3 * rounds, "{} bytes: {made:?}", payload.len());
        }
        drop(comm);
        assert_eq!(
            made.made[made.made.len() - 6..],
            ["allgather", "allgatherv", "allgather", "gatherv", "bcast", "bcast"]
        );
    }
}
