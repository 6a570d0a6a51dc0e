//! What the MPI tests of this crate share: whether an MPI program is on
//! PATH, and whether a missing one is a failure (`make test` sets
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
