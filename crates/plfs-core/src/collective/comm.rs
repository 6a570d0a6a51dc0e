//! The few collective operations an index exchange needs, over any
//! communicator: MPI (through the C shim in `plfs-mpi` or a program's own
//! `MPI_Comm`), or threads in tests. Byte payloads only, so the core never
//! links an MPI library and one build serves Open MPI and MPICH alike.

use crate::error::Result;

/// A group of ranks that take part in a collective open together. Every
/// rank of the group must make the same calls in the same order.
pub trait Comm {
    /// This rank, `0..size()`.
    fn rank(&self) -> usize;

    /// Ranks in the group.
    fn size(&self) -> usize;

    fn barrier(&self) -> Result<()>;

    /// Replaces every rank's `bytes` with `root`'s.
    fn broadcast(&self, root: usize, bytes: &mut Vec<u8>) -> Result<()>;

    /// Every rank's `mine`, in rank order, at `root`; None elsewhere.
    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>>;

    /// Every rank's `mine`, in rank order, at every rank.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;

    /// Splits the group like `MPI_Comm_split`: ranks passing the same
    /// `color` form a new group, ordered by `key` (then by old rank).
    fn split(&self, color: u32, key: usize) -> Result<Box<dyn Comm>>;
}
