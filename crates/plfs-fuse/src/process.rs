//! Who is calling: FUSE requests carry the calling thread's id and primary
//! group only; `access` needs the supplementary groups too, from /proc.
//! (Writes are not told apart by caller: the daemon has one writer, so one
//! log pair per file on this node, see `filesystem`.)

/// Supplementary groups of a caller, for `access`. The FUSE request only
/// carries the primary gid.
pub fn groups(tid: u32) -> Vec<u32> {
    status_field(tid, "Groups:")
        .map(|list| list.split_whitespace().filter_map(|group| group.parse().ok()).collect())
        .unwrap_or_default()
}

fn status_field(tid: u32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix(key)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_this_process_parse() {
        // Whatever the list is, reading it must not fail or invent entries.
        let groups = groups(std::process::id());
        assert!(groups.len() < 65536);
    }
}
