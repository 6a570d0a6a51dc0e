//! Collective open: M reader ranks open a file written by N writers
//! without each of them reading all N index logs (the papers' index
//! broadcast, parallel index read and flattened index).
//!
//! [`Comm`] is the communicator seam; `exchange` (crate-private: its
//! messages carry index records and log locations, which are not public)
//! holds what ranks send each other and the [`Plfs`](crate::fs::Plfs)
//! steps that produce it;
//! [`strategy`] combines the steps into the four ways to open
//! ([`open_collective`]); [`local`] is a communicator over threads and
//! [`counting`] counts what a rank's collectives cost; [`close`] is the
//! other end, flatten on close: the writers' in-memory index records
//! gathered to the rank that writes the global index.

pub mod close;
pub mod comm;
pub mod counting;
pub(crate) mod exchange;
pub mod local;
pub mod strategy;

pub use close::{CloseFlatten, flatten_on_close, retain_index};
pub use comm::Comm;
pub use counting::{CommCounts, CountingComm};
pub use local::LocalComm;
pub use strategy::{CollectiveOptions, Strategy, open_collective, open_collective_with};
