//! Which host this process runs on, as logs, log names and hostdir
//! placement record it. Interfaces and tests pass a fixed name instead
//! (`fs::Options`), so nothing below the façade calls this on its own but
//! the small-file engine's process-wide defaults.
//!
//! Also how many cores this process may count on beside the other ranks
//! of its job on the node, which sizes the work a read hands to threads.

/// This host's name, or "localhost" if the system will not say.
pub fn hostname() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // or truncates within it.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "localhost".to_owned();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// Processes of this job on this node, as an MPI launcher tells its ranks
/// (Open MPI: `OMPI_COMM_WORLD_LOCAL_SIZE`; MPICH's Hydra:
/// `MPI_LOCALNRANKS`); 1 for a process no launcher started.
pub fn local_ranks() -> usize {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

/// This process's share of the cores: the cores it may run on when a
/// launcher bound it to fewer than the node has (the binding is its share
/// already), else the node's cores over the job's ranks on the node.
/// 0 when there are more local ranks than cores.
pub fn cores_per_local_rank() -> usize {
    let usable = std::thread::available_parallelism().map_or(1, usize::from);
    // SAFETY: sysconf reads a system value and touches no memory.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let online = usize::try_from(online).unwrap_or(usable);
    share_of_cores(usable, online, local_ranks())
}

/// [`cores_per_local_rank`] from its inputs.
pub fn share_of_cores(usable: usize, online: usize, local_ranks: usize) -> usize {
    if usable < online { usable } else { usable / local_ranks.max(1) }
}

#[cfg(test)]
mod tests {
    use super::share_of_cores;

    #[test]
    fn a_rank_gets_its_binding_or_its_part_of_the_node() {
        // Unbound: the node's cores over the ranks on it.
        assert_eq!(share_of_cores(2, 2, 1), 2);
        assert_eq!(share_of_cores(2, 2, 4), 0);
        assert_eq!(share_of_cores(2, 2, 5), 0);
        assert_eq!(share_of_cores(16, 16, 4), 4);
        // Bound (Open MPI binds a rank per core when ranks <= cores): the
        // binding is the share, not divided again.
        assert_eq!(share_of_cores(1, 2, 2), 1);
        assert_eq!(share_of_cores(4, 16, 4), 4);
    }
}
