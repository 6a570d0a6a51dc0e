//! PLFS 2.5 containers read in place through a real FUSE mount, by
//! unmodified programs: the checked-in fixtures (crates/plfs-core/testdata/
//! plfs25, made by the generator in plfs-core's `plfs25_fixtures`, which
//! also checks their content against what the writers wrote) are copied to
//! two backends and mounted. `cat` through the kernel must give the bytes
//! the library reads (`plfs cp`), `ls` and `stat` must show a 0600 file of
//! that size, writes must fail naming `plfs migrate`, another user must be
//! refused, and `plfs map`/`query`/`version` must say PLFS 2.5.

mod fuse_support;
mod plfs25_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use fuse_support::{PlfsMount, bash, describe, run, serial};
use plfs25_support::copy_tree;

const TIMEOUT: Duration = Duration::from_secs(60);
const SCENARIOS: &[&str] = &["strided", "overlap", "truncate", "metalink", "flattened", "open"];

#[test]
fn plfs25_fixtures_read_through_fuse_and_refuse_writes() {
    let _guard = serial();
    let site = tempfile::Builder::new().prefix("plfs25-site.").tempdir().unwrap();
    fs::set_permissions(site.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plfs-core/testdata/plfs25");
    for scenario in SCENARIOS {
        let backends: Vec<_> = ["b0", "b1"].iter().map(|b| site.path().join(scenario).join(b)).collect();
        for backend in &backends {
            fs::create_dir_all(backend).unwrap();
        }
        copy_tree(&fixtures.join(scenario), &site.path().join(scenario));
        let mount = PlfsMount::over_backends(&backends, &["allow_other"]);
        let name = format!("{scenario}.ckpt");
        let file = mount.path(&name);
        let file_text = file.to_str().unwrap();
        // The library's bytes, as another node reads them.
        let copied = mount.scratch(&name);
        let output = mount.plfs(&["cp", file_text, copied.to_str().unwrap()]);
        assert!(output.status.success(), "{scenario}: plfs cp: {}", describe(&output));
        let library = fs::read(&copied).unwrap();
        assert!(!library.is_empty(), "{scenario}");
        // cat, ls and stat through the kernel.
        let cat = run(std::process::Command::new("cat").arg(&file), TIMEOUT);
        assert!(cat.status.success(), "{scenario}: cat: {}", describe(&cat));
        assert!(cat.stdout == library, "{scenario}: cat through FUSE differs from the library's read");
        let listing = bash(
            &format!("ls -l {:?} && stat -c '%s %a %F' {:?}", mount.mountpoint, file),
            &mount.root,
            TIMEOUT,
        );
        let text = String::from_utf8_lossy(&listing.stdout);
        assert!(listing.status.success(), "{scenario}: {}", describe(&listing));
        assert!(text.contains("-rw------- ") && text.contains(&name), "{scenario}: {text}");
        assert!(text.contains(&format!("{} 600 regular", library.len())), "{scenario}: {text}");
        // Writes fail (EACCES), naming plfs migrate in the daemon's log.
        let shell = |script: String| run(std::process::Command::new("bash").arg("-c").arg(script), TIMEOUT);
        let write = shell(format!("echo more >> {file_text:?}"));
        assert!(!write.status.success(), "{scenario}: a write succeeded");
        assert!(String::from_utf8_lossy(&write.stderr).contains("Permission denied"), "{}", describe(&write));
        let truncate = shell(format!("truncate -s 0 {file_text:?}"));
        assert!(!truncate.status.success(), "{scenario}: truncate succeeded");
        assert!(fs::read(&file).unwrap() == library, "{scenario}: a refused write changed the file");
        // Another user: the file is 0600 root's, as 2.5 made it.
        let other = run(
            std::process::Command::new("runuser").args(["-u", "nobody", "--", "cat", file_text]),
            TIMEOUT,
        );
        assert!(!other.status.success(), "{scenario}: nobody read a 0600 file");
        // The tools say what the file is.
        for (args, expected) in [
            (vec!["version", file_text], "PLFS 2.5.0 (data format 1.0) container"),
            (vec!["map", file_text, "--totals"], "PLFS 2.5 container"),
            (vec!["query", file_text], "PLFS 2.5 container"),
        ] {
            let output = mount.plfs(&args);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success() && stdout.contains(expected),
                "{scenario}: plfs {args:?}: {}",
                describe(&output)
            );
        }
        let query = String::from_utf8_lossy(&mount.plfs(&["query", file_text]).stdout).into_owned();
        assert!(query.contains("dropping.index.") && query.contains("dropping.data."), "{query}");
        if *scenario == "metalink" {
            assert!(query.contains("metalink"), "{query}");
        }
        let flatten = mount.plfs(&["flatten", file_text]);
        assert!(!flatten.status.success(), "{scenario}: flatten wrote into a 2.5 container");
        assert!(String::from_utf8_lossy(&flatten.stderr).contains("plfs migrate"), "{}", describe(&flatten));
    }
}
