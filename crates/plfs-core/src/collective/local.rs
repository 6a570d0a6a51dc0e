//! A [`Comm`] over threads of one process, for tests and benchmarks that
//! need many ranks without MPI. Every collective is one all-to-all round
//! (each rank deposits bytes, every rank sees all of them), which is slow
//! but obviously correct: the point is to check strategies, not to time
//! them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::Comm;
use crate::error::{Error, ErrorKind, Result};

/// How long a rank waits for the others in one round before giving up, so
/// a strategy bug fails a test instead of hanging it.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// One rank of a group of threads.
#[derive(Debug)]
pub struct LocalComm {
    rank: usize,
    shared: Arc<Shared>,
    /// Splits made so far by this rank (the same on every rank, since
    /// every rank makes the same calls), naming each split's new groups.
    splits: AtomicU64,
}

#[derive(Debug)]
struct Shared {
    size: usize,
    round: Mutex<Round>,
    changed: Condvar,
    /// The groups made by splits: (split number, color) → group state.
    groups: Mutex<HashMap<(u64, u32), Arc<Shared>>>,
}

#[derive(Debug, Default)]
struct Round {
    /// Bumped when every rank has taken the round's result.
    generation: u64,
    deposits: Vec<Option<Vec<u8>>>,
    arrived: usize,
    /// Set once every rank has deposited; ranks take it in turn.
    result: Option<Arc<Vec<Vec<u8>>>>,
    taken: usize,
}

impl Shared {
    fn new(size: usize) -> Arc<Shared> {
        let round = Round { deposits: vec![None; size], ..Round::default() };
        Arc::new(Shared {
            size,
            round: Mutex::new(round),
            changed: Condvar::new(),
            groups: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LocalComm {
    /// `size` ranks of one new group; hand one to each thread.
    pub fn group(size: usize) -> Vec<LocalComm> {
        assert!(size > 0, "a group needs at least one rank");
        let shared = Shared::new(size);
        (0..size).map(|rank| LocalComm { rank, shared: shared.clone(), splits: AtomicU64::new(0) }).collect()
    }

    /// Runs `body` on `size` threads, one rank each, and returns their
    /// results in rank order.
    pub fn run<T: Send>(size: usize, body: impl Fn(&LocalComm) -> T + Sync) -> Vec<T> {
        let ranks = LocalComm::group(size);
        std::thread::scope(|scope| {
            let body = &body;
            let threads: Vec<_> = ranks.into_iter().map(|comm| scope.spawn(move || body(&comm))).collect();
            threads.into_iter().map(|thread| thread.join().expect("a rank thread panicked")).collect()
        })
    }

    /// Deposits `mine` and returns every rank's deposit, in rank order.
    fn round(&self, mine: Vec<u8>) -> Result<Arc<Vec<Vec<u8>>>> {
        let shared = &*self.shared;
        let deadline = Instant::now() + ROUND_TIMEOUT;
        let mut round = shared.lock();
        // A rank that raced ahead waits for the previous round to drain.
        while round.result.is_some() {
            round = self.wait(round, deadline)?;
        }
        let generation = round.generation;
        assert!(round.deposits[self.rank].is_none(), "rank {} deposited twice in one round", self.rank);
        round.deposits[self.rank] = Some(mine);
        round.arrived += 1;
        if round.arrived == shared.size {
            let all = round.deposits.iter_mut().map(|slot| slot.take().unwrap_or_default()).collect();
            round.result = Some(Arc::new(all));
            shared.changed.notify_all();
        }
        while round.generation == generation && round.result.is_none() {
            round = self.wait(round, deadline)?;
        }
        let result = round.result.clone().expect("a finished round has a result");
        round.taken += 1;
        if round.taken == shared.size {
            round.result = None;
            round.arrived = 0;
            round.taken = 0;
            round.generation += 1;
            shared.changed.notify_all();
        }
        Ok(result)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, Round>, deadline: Instant) -> Result<MutexGuard<'a, Round>> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "local comm: rank {} of {} waited {} s for the others",
                    self.rank,
                    self.shared.size,
                    ROUND_TIMEOUT.as_secs()
                ),
            ));
        }
        let (guard, _) =
            self.shared.changed.wait_timeout(guard, left).unwrap_or_else(PoisonError::into_inner);
        Ok(guard)
    }
}

impl Comm for LocalComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn barrier(&self) -> Result<()> {
        self.round(Vec::new()).map(drop)
    }

    fn broadcast(&self, root: usize, bytes: &mut Vec<u8>) -> Result<()> {
        let mine = if self.rank == root { std::mem::take(bytes) } else { Vec::new() };
        let all = self.round(mine)?;
        bytes.clone_from(&all[root]);
        Ok(())
    }

    fn gather(&self, root: usize, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let all = self.round(mine.to_vec())?;
        Ok((self.rank == root).then(|| all.to_vec()))
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(self.round(mine.to_vec())?.to_vec())
    }

    fn split(&self, color: u32, key: usize) -> Result<Box<dyn Comm>> {
        let split = self.splits.fetch_add(1, Ordering::Relaxed);
        let mut mine = color.to_le_bytes().to_vec();
        mine.extend_from_slice(&(key as u64).to_le_bytes());
        let all = self.round(mine)?;
        let mut members: Vec<(u64, usize)> = all
            .iter()
            .enumerate()
            .filter(|(_, bytes)| bytes[..4] == color.to_le_bytes())
            .map(|(rank, bytes)| {
                let key = u64::from_le_bytes(bytes[4..12].try_into().expect("8 key bytes"));
                (key, rank)
            })
            .collect();
        members.sort_unstable();
        let rank =
            members.iter().position(|&(_, rank)| rank == self.rank).expect("a rank is in its own color");
        let shared = self
            .shared
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((split, color))
            .or_insert_with(|| Shared::new(members.len()))
            .clone();
        Ok(Box::new(LocalComm { rank, shared, splits: AtomicU64::new(0) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_deliver_in_rank_order() {
        let results = LocalComm::run(5, |comm| {
            let mut bytes = if comm.rank() == 2 { b"root".to_vec() } else { Vec::new() };
            comm.broadcast(2, &mut bytes).unwrap();
            let gathered = comm.gather(0, &[comm.rank() as u8]).unwrap();
            let all = comm.allgather(&[comm.rank() as u8 * 2]).unwrap();
            comm.barrier().unwrap();
            (bytes, gathered, all)
        });
        for (rank, (bytes, gathered, all)) in results.into_iter().enumerate() {
            assert_eq!(bytes, b"root");
            assert_eq!(gathered.is_some(), rank == 0);
            if let Some(gathered) = gathered {
                assert_eq!(gathered, (0..5u8).map(|r| vec![r]).collect::<Vec<_>>());
            }
            assert_eq!(all, (0..5u8).map(|r| vec![r * 2]).collect::<Vec<_>>());
        }
    }

    #[test]
    fn split_orders_by_key_then_rank_and_groups_are_independent() {
        let results = LocalComm::run(6, |comm| {
            // Colors 0 and 1 by parity; keys reverse the order.
            let group = comm.split((comm.rank() % 2) as u32, 10 - comm.rank()).unwrap();
            let all = group.allgather(&[comm.rank() as u8]).unwrap();
            (group.rank(), group.size(), all)
        });
        assert_eq!(results[0], (2, 3, vec![vec![4], vec![2], vec![0]]));
        assert_eq!(results[5], (0, 3, vec![vec![5], vec![3], vec![1]]));
    }
}
