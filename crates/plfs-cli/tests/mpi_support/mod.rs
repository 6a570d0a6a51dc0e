//! What the MPI tests of this crate share: whether an MPI program is on
//! PATH, whether a missing one is a failure, and how mpirun starts ranks (`make test` sets
//! PLFS_REQUIRE_MPI=1: scripts/install-deps.sh installs both MPIs).

/// Whether `program` is an executable file in a PATH directory.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Whether a missing MPI must fail the test instead of skipping it.
pub fn required() -> bool {
    std::env::var("PLFS_REQUIRE_MPI").is_ok_and(|value| value == "1")
}

/// Adds to an `mpirun.FLAVOR` command what starts `ranks` copies of
/// `program` with `environment` set in every rank: Open MPI's root and
/// oversubscribe flags, its io component (`io`) and `-x`, or MPICH's
/// `-genv`. Only the ranks get the environment (LD_PRELOAD of the wrapper
/// must not load into mpirun itself).
#[allow(dead_code)] // not every test file that shares this module launches
pub fn launch(
    command: &mut std::process::Command,
    flavor: &str,
    io: Option<&str>,
    environment: &[(&str, &str)],
    ranks: u64,
    program: &std::path::Path,
) {
    if flavor == "openmpi" {
        command.args(["--allow-run-as-root", "--oversubscribe"]);
        // A session directory of its own, beside the program (in the
        // test's temporary directory): jobs of tests running at once
        // otherwise share `$TMPDIR/ompi.<host>.<uid>`, and one removing it
        // as it ends fails another's start ("A call to mkdir was unable to
        // create the desired directory", open-mpi/ompi#8510; the bench's
        // jobs do the same, `OmpiSession`).
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let job = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = program.parent().unwrap_or(std::path::Path::new("/tmp"));
        let session = base.join(format!("ompi-session.{}.{job}", std::process::id()));
        // Open to every user, as /tmp is: some jobs run as a second user.
        if std::fs::create_dir_all(&session).is_ok() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o1777));
            command.env("OMPI_MCA_orte_tmpdir_base", &session);
        }
        if let Some(io) = io {
            command.args(["--mca", "io", io]);
        }
        for (key, value) in environment {
            command.args(["-x", &format!("{key}={value}")]);
        }
    } else {
        for (key, value) in environment {
            command.args(["-genv", key, value]);
        }
    }
    command.args(["-np", &ranks.to_string()]).arg(program);
    command.env_remove("LD_PRELOAD");
}
