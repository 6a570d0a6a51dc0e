//! Builds the MPI shim (c/plfs_mpi_shim.c) once for each MPI found, with
//! that MPI's own compiler wrapper, into OUT_DIR. The paths are baked into
//! the crate (PLFS_MPI_SHIM_OPENMPI, PLFS_MPI_SHIM_MPICH) for the loader;
//! nothing here links MPI into Rust.
//!
//! Next to each shim it builds the PMPI wrapper libplfs_mpiio.so
//! (c/plfs_mpiio.c, MPI-IO on plfs for unmodified programs) and copies it
//! to a stable place, `target/<profile>/mpi/<flavor>/libplfs_mpiio.so`:
//! two directories below libplfs.so and libplfs_preload.so, where the
//! wrapper looks for libplfs.so (`make install` keeps that layout under
//! $PREFIX/lib/plfs-mpi/<flavor>/).
//!
//! Beside it goes `mpiio_bench` (c/mpiio_bench.c), the MPI-IO program
//! `plfs bench n1-strided --interface mpiio` runs under mpirun.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (flavor, compiler wrapper): Debian installs both MPIs side by side
/// under suffixed names.
const FLAVORS: [(&str, &str); 2] = [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let include = manifest.join("../../include");
    let source = manifest.join("c/plfs_mpi_shim.c");
    let mpiio_source = manifest.join("c/plfs_mpiio.c");
    let bench_source = manifest.join("c/mpiio_bench.c");
    println!("cargo:rerun-if-changed={}", bench_source.display());
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={}", mpiio_source.display());
    println!("cargo:rerun-if-changed={}", include.join("plfs_mpi.h").display());
    println!("cargo:rerun-if-changed={}", include.join("plfs.h").display());
    println!("cargo:rerun-if-env-changed=PLFS_REQUIRE_MPI");
    // An MPI installed later changes /usr/bin; rebuild the shims then.
    println!("cargo:rerun-if-changed=/usr/bin");
    let required = env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1");

    for (flavor, compiler) in FLAVORS {
        let target = out.join(format!("libplfs_mpi_shim_{flavor}.so"));
        match compile(compiler, &include, &source, &target) {
            Ok(()) => {
                println!("cargo:rustc-env=PLFS_MPI_SHIM_{}={}", flavor.to_uppercase(), target.display());
            }
            Err(why) if required => panic!("PLFS_REQUIRE_MPI=1 but the {flavor} shim was not built: {why}"),
            Err(why) => {
                println!("cargo:warning=no {flavor} MPI shim ({why}); run scripts/install-deps.sh");
                continue;
            }
        }
        let mpiio = out.join(format!("libplfs_mpiio_{flavor}.so"));
        let built = compile(compiler, &include, &mpiio_source, &mpiio)
            .and_then(|()| publish(&out, flavor, &mpiio, "libplfs_mpiio.so"));
        match built {
            Ok(()) => {}
            Err(why) if required => {
                panic!("PLFS_REQUIRE_MPI=1 but the {flavor} libplfs_mpiio.so was not built: {why}")
            }
            Err(why) => println!("cargo:warning=no {flavor} libplfs_mpiio.so ({why})"),
        }
        let bench = out.join(format!("mpiio_bench_{flavor}"));
        let built = compile_program(compiler, &bench_source, &bench)
            .and_then(|()| publish(&out, flavor, &bench, "mpiio_bench"));
        match built {
            Ok(()) => {}
            Err(why) if required => {
                panic!("PLFS_REQUIRE_MPI=1 but the {flavor} mpiio_bench was not built: {why}")
            }
            Err(why) => println!("cargo:warning=no {flavor} mpiio_bench ({why})"),
        }
    }
}

/// Copies a built file to `<target>/<profile>/mpi/<flavor>/<name>`
/// (OUT_DIR is `<target>/<profile>/build/<crate>-<hash>/out`), through a
/// temporary name so a running program never sees half a library.
fn publish(out: &Path, flavor: &str, library: &Path, name: &str) -> Result<(), String> {
    let profile_dir =
        out.ancestors().nth(3).ok_or_else(|| format!("OUT_DIR {} is too short", out.display()))?;
    let dir = profile_dir.join("mpi").join(flavor);
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let staged = dir.join(format!(".{name}.tmp"));
    std::fs::copy(library, &staged).map_err(|error| format!("{}: {error}", staged.display()))?;
    std::fs::rename(&staged, dir.join(name)).map_err(|error| format!("{}: {error}", dir.display()))
}

fn compile(compiler: &str, include: &Path, source: &Path, target: &Path) -> Result<(), String> {
    let output = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(include)
        .arg(source)
        .arg("-o")
        .arg(target)
        .output()
        .map_err(|error| format!("{compiler}: {error}"))?;
    if !output.status.success() {
        return Err(format!("{compiler} failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    Ok(())
}

/// An MPI program (not a library), with the same warnings as errors.
fn compile_program(compiler: &str, source: &Path, target: &Path) -> Result<(), String> {
    let output = Command::new(compiler)
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(source)
        .arg("-o")
        .arg(target)
        .output()
        .map_err(|error| format!("{compiler}: {error}"))?;
    if !output.status.success() {
        return Err(format!("{compiler} failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    Ok(())
}
