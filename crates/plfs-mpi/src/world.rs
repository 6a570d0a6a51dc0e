//! [`MpiWorld`]: MPI for the `plfs` binary, through a shim loaded at run
//! time. The shim is the only thing linked against an MPI, one build per
//! MPI, so the binary runs under either `mpirun` (and without one).

use std::ffi::{CStr, c_char, c_int};
use std::path::PathBuf;

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use plfs::collective::Comm;
use plfs::{Error, ErrorKind, Result};

use crate::shim::{COMM_OPS_VERSION, PlfsCommOps, ShimComm};

/// A shim to load instead of the built-in choice.
pub const MPI_SHIM_ENV: &str = "PLFS_MPI_SHIM";

/// The MPIs a shim is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiFlavor {
    OpenMpi,
    Mpich,
}

impl MpiFlavor {
    pub fn as_str(self) -> &'static str {
        match self {
            MpiFlavor::OpenMpi => "openmpi",
            MpiFlavor::Mpich => "mpich",
        }
    }
}

/// Which MPI's launcher started this process, from what each launcher
/// sets in its ranks' environment (Open MPI's first: its mpirun may also
/// set PMI variables).
pub fn launched_by() -> Option<MpiFlavor> {
    let set = |name: &str| std::env::var_os(name).is_some_and(|value| !value.is_empty());
    if set("OMPI_COMM_WORLD_SIZE") {
        Some(MpiFlavor::OpenMpi)
    } else if set("PMI_SIZE") || set("PMI_RANK") {
        Some(MpiFlavor::Mpich)
    } else {
        None
    }
}

/// The shim build.rs made for `flavor`, if that MPI was installed.
pub fn built_shim(flavor: MpiFlavor) -> Option<PathBuf> {
    match flavor {
        MpiFlavor::OpenMpi => option_env!("PLFS_MPI_SHIM_OPENMPI").map(PathBuf::from),
        MpiFlavor::Mpich => option_env!("PLFS_MPI_SHIM_MPICH").map(PathBuf::from),
    }
}

type InitFn = unsafe extern "C" fn(*mut PlfsCommOps) -> c_int;
type FinalizeFn = unsafe extern "C" fn() -> c_int;
type LibraryFn = unsafe extern "C" fn() -> *const c_char;
type AbiFn = unsafe extern "C" fn() -> u32;

/// MPI started through a shim, and its world communicator.
#[derive(Debug)]
pub struct MpiWorld {
    comm: Option<ShimComm>,
    finalize: FinalizeFn,
    library: String,
    shim: PathBuf,
    /// Kept loaded for the life of the process (see `finalize`).
    _library: Option<Library>,
}

impl MpiWorld {
    /// Starts MPI when launched by mpirun (or when `PLFS_MPI_SHIM` names a
    /// shim); None when this is a plain process.
    pub fn init() -> Result<Option<MpiWorld>> {
        let path = match std::env::var_os(MPI_SHIM_ENV).filter(|value| !value.is_empty()) {
            Some(path) => PathBuf::from(path),
            None => match launched_by() {
                None => return Ok(None),
                Some(flavor) => built_shim(flavor).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "launched by {} mpirun, but plfs was built without its MPI shim \
                             (install it with scripts/install-deps.sh and rebuild, or set ${MPI_SHIM_ENV})",
                            flavor.as_str()
                        ),
                    )
                })?,
            },
        };
        MpiWorld::load(path).map(Some)
    }

    /// Loads the shim at `path` and starts MPI through it.
    pub fn load(path: PathBuf) -> Result<MpiWorld> {
        let failed = |what: &str, error: libloading::Error| {
            Error::new(ErrorKind::Unavailable, format!("MPI shim {}: {what}: {error}", path.display()))
        };
        // RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols
        // globally, and fail to load when it is opened locally.
        // SAFETY: the shim's initialisers are MPI's own.
        let library = unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| failed("loading", e))?;
        // SAFETY: the symbols have these C signatures in plfs_mpi_shim.c.
        let (abi, init, finalize, describe) = unsafe {
            (
                *library.get::<AbiFn>(b"plfs_mpi_shim_abi\0").map_err(|e| failed("plfs_mpi_shim_abi", e))?,
                *library
                    .get::<InitFn>(b"plfs_mpi_shim_init\0")
                    .map_err(|e| failed("plfs_mpi_shim_init", e))?,
                *library.get::<FinalizeFn>(b"plfs_mpi_shim_finalize\0").map_err(|e| failed("finalize", e))?,
                *library.get::<LibraryFn>(b"plfs_mpi_shim_library\0").map_err(|e| failed("library", e))?,
            )
        };
        // SAFETY: no arguments; returns a constant.
        let abi = unsafe { abi() };
        if abi != COMM_OPS_VERSION {
            return Err(Error::invalid(format!(
                "MPI shim {}: built for plfs_comm_ops version {abi}, this binary takes {COMM_OPS_VERSION}",
                path.display()
            )));
        }
        let mut ops = PlfsCommOps::empty();
        // SAFETY: init fills `ops` for MPI_COMM_WORLD, which the shim keeps
        // in a static for the life of the process.
        let code = unsafe { init(&mut ops) };
        if code != 0 {
            return Err(Error::new(ErrorKind::Unavailable, format!("MPI_Init failed with MPI error {code}")));
        }
        // SAFETY: as above; the shim's table follows plfs_mpi.h.
        let comm = unsafe { ShimComm::from_ops(&ops)? };
        // SAFETY: returns a NUL-terminated static buffer.
        let library_version = unsafe { CStr::from_ptr(describe()) }.to_string_lossy().trim().to_owned();
        Ok(MpiWorld {
            comm: Some(comm),
            finalize,
            library: library_version,
            shim: path,
            _library: Some(library),
        })
    }

    /// MPI_COMM_WORLD.
    pub fn comm(&self) -> &dyn Comm {
        self.comm.as_ref().expect("the world lives until finalize")
    }

    /// The MPI library's own description, e.g. "Open MPI v4.1.4, ...".
    pub fn library(&self) -> &str {
        &self.library
    }

    pub fn shim(&self) -> &PathBuf {
        &self.shim
    }

    /// Stops MPI. The library stays loaded: MPI registers exit handlers
    /// that must still find their code.
    pub fn finalize(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        let Some(comm) = self.comm.take() else { return Ok(()) };
        drop(comm);
        std::mem::forget(self._library.take());
        // SAFETY: every communicator split from the world is gone (they
        // borrow it), so MPI may finalize.
        let code = unsafe { (self.finalize)() };
        if code != 0 {
            return Err(Error::new(ErrorKind::Io, format!("MPI_Finalize failed with MPI error {code}")));
        }
        Ok(())
    }
}

impl Drop for MpiWorld {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            tracing::warn!("{error}");
        }
    }
}
