//! plfs over MPI without linking MPI into Rust.
//!
//! A communicator reaches Rust as a `struct plfs_comm_ops` (see
//! `include/plfs_mpi.h`): a table of byte collectives made of MPI calls and
//! compiled by the caller's own mpicc. [`ShimComm`] is a
//! [`Comm`](plfs::collective::Comm) over such a table. A C program builds
//! the table from its `MPI_Comm` inline (the header); the `plfs` binary
//! gets the world's from a shim library, [`MpiWorld`], built per MPI by
//! `build.rs` and loaded at run time for the MPI that launched it.

mod shim;
mod world;

pub use shim::{PlfsCommOps, ShimComm};
pub use world::{MPI_SHIM_ENV, MpiFlavor, MpiWorld, built_shim, launched_by};
