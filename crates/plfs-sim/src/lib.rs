//! Deterministic simulation of plfs, after SlateDB's `dst/` and
//! TigerBeetle's VOPR: a seed picks a workload of several processes over
//! memory backends, the store faults that strike it and the steps at which
//! the machine crashes; after every crash and `recover --fix` the files are
//! checked against a model of what was written and made durable. The same
//! seed always takes the same steps, so a failing seed is its own
//! reproducer (`plfs-sim --seed S`).
//!
//! Everything that could vary between runs is injected: time (one manual
//! clock), randomness (PCG64 from the seed), hostnames and pids (see
//! [`world::PID_BASE`]); each step runs to completion before the next, and
//! reads use one thread.

pub mod model;
pub mod rng;
pub mod sim;
pub mod sweep;
pub mod world;

pub use sim::{Config, Failure, Stats, run};
