//! What the PLFS 2.5 fixture tests share: copying a checked-in fixture
//! (crates/plfs-core/testdata/plfs25) onto test backends as 2.5 left it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Copies a fixture's tree (files and metalinks) as 2.5 left it: the
/// access file 0600, which git does not keep.
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
            if entry.file_name() == ".plfsaccess113918400" {
                fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
    }
}
