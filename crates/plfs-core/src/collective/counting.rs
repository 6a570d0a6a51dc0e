//! A [`Comm`] wrapper that counts what a rank's collectives cost: calls of
//! each kind, and the point-to-point messages and bytes they stand for
//! under the textbook algorithm MPI libraries use for each (the wrapper
//! sees only the payloads, so the algorithm is an assumption, stated here
//! and in docs/COST_MODEL.md):
//!
//! - broadcast: a binomial tree (MPICH numbering, relative to the root):
//!   P−1 messages of the payload, ⌈log2 P⌉ rounds;
//! - gather: linear, as `MPI_Gatherv` does for unequal payloads: every
//!   other rank sends its payload straight to the root, P−1 messages, the
//!   root receiving all of them (one round, but P−1 receives at the root);
//! - allgather: Bruck's algorithm: ⌈log2 P⌉ rounds; in round k every rank
//!   sends the min(2^k, P − 2^k) payloads it holds to rank − 2^k, so
//!   P·⌈log2 P⌉ messages in all and every payload reaches every other rank
//!   once ((P−1)·Σ payload bytes);
//! - split: an allgather of each rank's color (4 bytes) and key (8 bytes),
//!   as `MPI_Comm_split` does;
//! - barrier: a binomial fan-in then fan-out of empty messages, 2·(P−1)
//!   messages and 2·⌈log2 P⌉ rounds.
//!
//! Counts are per rank (the rank's own sends and receives); sum them over
//! ranks for totals. A split group counts into its parent's counters, so
//! one snapshot covers everything a rank did.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Comm;
use crate::error::Result;

/// Bytes one rank sends per rank of a split (its color and key).
pub const SPLIT_ENTRY_BYTES: u64 = 4 + 8;

/// Declares [`CommCounts`] and its atomic twin with the same fields.
macro_rules! comm_counts {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// A snapshot of one rank's [`CountingComm`] counters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
        pub struct CommCounts {
            $($(#[$doc])* pub $field: u64,)*
        }

        #[derive(Debug, Default)]
        struct Counters {
            $($field: AtomicU64,)*
        }

        impl Counters {
            fn snapshot(&self) -> CommCounts {
                CommCounts { $($field: self.$field.load(Ordering::Relaxed),)* }
            }

            fn add(&self, counts: &CommCounts) {
                $(self.$field.fetch_add(counts.$field, Ordering::Relaxed);)*
            }
        }

        /// Field by field: several ranks' counts together.
        impl std::ops::Add for CommCounts {
            type Output = CommCounts;

            fn add(self, other: CommCounts) -> CommCounts {
                CommCounts { $($field: self.$field + other.$field,)* }
            }
        }

        impl std::iter::Sum for CommCounts {
            fn sum<I: Iterator<Item = CommCounts>>(counts: I) -> CommCounts {
                counts.fold(CommCounts::default(), |total, counts| total + counts)
            }
        }
    };
}

comm_counts! {
    barriers,
    broadcasts,
    gathers,
    allgathers,
    splits,
    /// Point-to-point messages this rank sent.
    messages_sent,
    messages_received,
    /// Payload bytes in those messages.
    bytes_sent,
    bytes_received,
    /// Latency rounds of the calls (the same on every rank of a call).
    rounds,
}

/// ⌈log2 p⌉ (0 for one rank).
pub fn ceil_log2(p: u64) -> u64 {
    if p <= 1 { 0 } else { u64::from(64 - (p - 1).leading_zeros()) }
}

/// Children of relative rank `relative` in a binomial tree over `size`
/// ranks: `relative + 2^k` for every `2^k` below the lowest set bit of
/// `relative` (every `2^k` below `size` for the root).
pub fn binomial_children(relative: u64, size: u64) -> u64 {
    let limit = if relative == 0 { u64::MAX } else { relative & relative.wrapping_neg() };
    let mut children = 0;
    let mut step = 1u64;
    while step < limit && relative + step < size {
        children += 1;
        step <<= 1;
    }
    children
}

/// Counts a rank's collectives; wraps any communicator (`&LocalComm`,
/// `Box<dyn Comm>`, …).
#[derive(Debug)]
pub struct CountingComm<C> {
    inner: C,
    counters: Arc<Counters>,
}

impl<C> CountingComm<C>
where
    C: Deref,
    C::Target: Comm,
{
    pub fn new(inner: C) -> CountingComm<C> {
        CountingComm { inner, counters: Arc::default() }
    }

    pub fn counts(&self) -> CommCounts {
        self.counters.snapshot()
    }

    fn count(&self, counts: CommCounts) {
        self.counters.add(&counts);
    }

    fn size_u64(&self) -> u64 {
        self.inner.size() as u64
    }
}

/// What a Bruck allgather of `all` (every rank's payload, in rank order)
/// costs rank `me`: in round k it sends the payloads of ranks me, me + 1,
/// …, as many as it holds beyond those it already sent (min(2^k, P − 2^k)).
fn bruck(all: &[Vec<u8>], me: usize) -> CommCounts {
    let size = all.len();
    let total: u64 = all.iter().map(|bytes| bytes.len() as u64).sum();
    let rounds = ceil_log2(size as u64);
    let mut sent = 0;
    let mut held = 1;
    while held < size {
        let count = held.min(size - held);
        sent += (0..count).map(|j| all[(me + j) % size].len() as u64).sum::<u64>();
        held += count;
    }
    CommCounts {
        messages_sent: rounds,
        messages_received: rounds,
        bytes_sent: sent,
        bytes_received: total - all[me].len() as u64,
        rounds,
        ..CommCounts::default()
    }
}

impl<C> Comm for CountingComm<C>
where
    C: Deref,
    C::Target: Comm,
{
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn barrier(&self) -> Result<()> {
        self.inner.barrier()?;
        let (size, relative) = (self.size_u64(), self.rank() as u64);
        let messages = binomial_children(relative, size) + u64::from(relative != 0);
        self.count(CommCounts {
            barriers: 1,
            messages_sent: messages,
            messages_received: messages,
            rounds: 2 * ceil_log2(size),
            ..CommCounts::default()
        });
        Ok(())
    }

    fn broadcast(&self, root: usize, bytes: &mut Vec<u8>) -> Result<()> {
        self.inner.broadcast(root, bytes)?;
        let size = self.size_u64();
        let relative = ((self.rank() + self.size() - root) % self.size()) as u64;
        let length = bytes.len() as u64;
        let children = binomial_children(relative, size);
        let received = u64::from(relative != 0);
        self.count(CommCounts {
            broadcasts: 1,
            messages_sent: children,
            messages_received: received,
            bytes_sent: children * length,
            bytes_received: received * length,
            rounds: ceil_log2(size),
            ..CommCounts::default()
        });
        Ok(())
    }

    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let gathered = self.inner.gather(root, mine)?;
        let rounds = u64::from(self.size() > 1);
        let counts = match &gathered {
            Some(all) => CommCounts {
                messages_received: self.size_u64() - 1,
                bytes_received: all.iter().map(|bytes| bytes.len() as u64).sum::<u64>() - mine.len() as u64,
                ..CommCounts::default()
            },
            None => CommCounts { messages_sent: 1, bytes_sent: mine.len() as u64, ..CommCounts::default() },
        };
        self.count(CommCounts { gathers: 1, rounds, ..counts });
        Ok(gathered)
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let all = self.inner.allgather(mine)?;
        self.count(CommCounts { allgathers: 1, ..bruck(&all, self.rank()) });
        Ok(all)
    }

    fn split(&self, color: u32, key: usize) -> Result<Box<dyn Comm>> {
        let group = self.inner.split(color, key)?;
        // Bruck over 12-byte entries: P − 1 entries sent and received.
        let (size, rounds) = (self.size_u64(), ceil_log2(self.size_u64()));
        self.count(CommCounts {
            splits: 1,
            messages_sent: rounds,
            messages_received: rounds,
            bytes_sent: (size - 1) * SPLIT_ENTRY_BYTES,
            bytes_received: (size - 1) * SPLIT_ENTRY_BYTES,
            rounds,
            ..CommCounts::default()
        });
        Ok(Box::new(CountingComm { inner: group, counters: Arc::clone(&self.counters) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::LocalComm;

    #[test]
    fn a_binomial_tree_has_one_parent_per_rank_and_log_depth() {
        for size in 1..=70u64 {
            let children: u64 = (0..size).map(|rank| binomial_children(rank, size)).sum();
            assert_eq!(children, size - 1, "{size} ranks");
            assert_eq!(binomial_children(0, size), ceil_log2(size), "{size} ranks");
        }
        assert_eq!((ceil_log2(1), ceil_log2(2), ceil_log2(5), ceil_log2(8), ceil_log2(9)), (0, 1, 3, 3, 4));
        // 8 ranks: 0 → 1, 2, 4; 4 → 5, 6; 6 → 7; odd ranks are leaves.
        let tree: Vec<u64> = (0..8).map(|rank| binomial_children(rank, 8)).collect();
        assert_eq!(tree, [3, 0, 1, 0, 2, 0, 1, 0]);
    }

    #[test]
    fn counts_every_call_with_the_stated_algorithms() {
        let size = 5usize;
        let per_rank = LocalComm::run(size, |comm| {
            let comm = CountingComm::new(comm);
            // Root 2 broadcasts 10 bytes.
            let mut bytes = if comm.rank() == 2 { vec![7; 10] } else { Vec::new() };
            comm.broadcast(2, &mut bytes).unwrap();
            // Rank r gathers r bytes to 0, then allgathers r + 1 bytes.
            comm.gather(0, &vec![1; comm.rank()]).unwrap();
            comm.allgather(&vec![1; comm.rank() + 1]).unwrap();
            comm.barrier().unwrap();
            // A split into two groups counts into the same counters.
            let group = comm.split((comm.rank() % 2) as u32, comm.rank()).unwrap();
            group.barrier().unwrap();
            comm.counts()
        });
        let total: CommCounts = per_rank.iter().copied().sum();
        let p = size as u64;
        assert_eq!(
            (total.broadcasts, total.gathers, total.allgathers, total.barriers, total.splits),
            (p, p, p, 2 * p, p)
        );
        // Groups of 3 (ranks 0, 2, 4) and 2 (ranks 1, 3) barrier: 2·2 + 2·1.
        let log = ceil_log2(p);
        let messages = (p - 1) + (p - 1) + p * log + 2 * (p - 1) + p * log + 6;
        assert_eq!(total.messages_sent, messages);
        assert_eq!(total.messages_received, messages);
        // Broadcast 4·10, gather 1+2+3+4, allgather (p−1)·Σ(r+1), split 12·p·(p−1).
        let bytes = 4 * 10 + 10 + (p - 1) * 15 + SPLIT_ENTRY_BYTES * p * (p - 1);
        assert_eq!((total.bytes_sent, total.bytes_received), (bytes, bytes));
        // Rank 2: the broadcast to relative ranks 1, 2 and 4 (3 × 10 bytes),
        // its 2 gathered bytes, the allgathered payloads of ranks 2, then 2
        // and 3, then 2 (3 + 7 + 3), and 4 split entries.
        assert_eq!(per_rank[2].bytes_sent, 30 + 2 + 13 + 4 * SPLIT_ENTRY_BYTES);
        // Rank 0 received: 1 (broadcast) + 4 (gather root) + 3 (allgather)
        // + 3 (barrier, root of 5) + 3 (split) + 2 (barrier, root of its 3).
        assert_eq!(per_rank[0].messages_received, 16);
        assert_eq!(per_rank[1].messages_received, 1 + 3 + 1 + 3 + 1);
        // Rounds: broadcast 3, gather 1, allgather 3, barrier 6, split 3,
        // then the barrier of the rank's own group (of 3: 4; of 2: 2).
        assert_eq!((per_rank[0].rounds, per_rank[1].rounds), (20, 18));
    }
}
