//! Real HDFS and S3 servers for tests and benchmarks, started on loopback
//! through `scripts/servers` and stopped by PID when the guard drops.
//!
//! With `PLFS_REQUIRE_SERVERS=1` (set by `make test`) a server that cannot
//! start fails the test, naming the command and its output; without it,
//! [`TestServer::start`] returns `None` and the caller skips, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A running server; dropping it stops the server and removes its state.
#[derive(Debug)]
pub struct TestServer {
    kind: &'static str,
    state: PathBuf,
    url: String,
}

static STARTED: AtomicU32 = AtomicU32::new(0);

impl TestServer {
    /// Starts a server of `kind` ("hdfs" or "s3") with its own state
    /// directory; `env` is passed to the start script (e.g. replication).
    pub fn start(kind: &'static str, env: &[(&str, &str)]) -> Option<TestServer> {
        let script = servers_script();
        let state = repo_root().join("target/servers").join(format!(
            "{kind}-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&state);
        let mut command = Command::new(&script);
        command.arg(kind).arg("start").arg(&state);
        for (key, value) in env {
            command.env(key, value);
        }
        let outcome = command.output();
        let failure = match outcome {
            Ok(output) if output.status.success() => {
                let stdout = String::from_utf8_lossy(&output.stdout);
                match stdout.lines().rev().find(|line| !line.trim().is_empty()) {
                    Some(url) => return Some(TestServer { kind, state, url: url.trim().to_owned() }),
                    None => format!("printed no URL; stderr:\n{}", String::from_utf8_lossy(&output.stderr)),
                }
            }
            Ok(output) => format!(
                "exited with {}; stdout:\n{}\nstderr:\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(error) => format!("could not run: {error}"),
        };
        let _ = Command::new(&script).arg(kind).arg("stop").arg(&state).output();
        let message = format!("{} {kind} start {}: {failure}", script.display(), state.display());
        if std::env::var("PLFS_REQUIRE_SERVERS").is_ok_and(|value| value == "1") {
            panic!("PLFS_REQUIRE_SERVERS=1 but the {kind} test server did not start: {message}");
        }
        eprintln!(
            "skipping: the {kind} test server did not start (set PLFS_REQUIRE_SERVERS=1 to fail instead): {message}"
        );
        None
    }

    /// The server's URL, as the start script printed it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's state directory (PID file, logs, data).
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// Runs another action of `scripts/servers` on this server, such as
    /// `stop-datanode 1`; returns its stdout.
    pub fn control(&self, action: &[&str]) -> std::io::Result<String> {
        let output = Command::new(servers_script()).arg(self.kind).args(action).arg(&self.state).output()?;
        if !output.status.success() {
            return Err(std::io::Error::other(format!(
                "scripts/servers {} {}: {}",
                self.kind,
                action.join(" "),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = Command::new(servers_script()).arg(self.kind).arg("stop").arg(&self.state).output();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn servers_script() -> PathBuf {
    repo_root().join("scripts/servers")
}
