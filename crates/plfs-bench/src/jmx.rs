//! Bytes each HDFS DataNode served and stored, read from the DataNodes'
//! JMX servlets: the PLFS/HDFS paper's Figure 7 (bytes served per node
//! during the read-back, replication 1 against 3).
//!
//! Every DataNode publishes a `DataNodeActivity-<host>-<port>` bean with
//! monotonic `BytesRead` and `BytesWritten` counters; the benchmark takes a
//! [`Snapshot`] before and after each phase and reports the [`delta`].
//! In a MiniDFSCluster all DataNodes share one JVM, so every DataNode's
//! `/jmx` lists every DataNode's bean: beans are keyed by their name, not
//! by the URL that returned them, and a DataNode listed twice counts once.
//!
//! The servlet answers plain HTTP, so a `TcpStream` GET is all it takes.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::error::{BenchError, Result};

/// The query selecting every DataNodeActivity bean of the JVM answering.
pub const DATANODE_ACTIVITY_QUERY: &str = "Hadoop:service=DataNode,name=DataNodeActivity-*";

const BEAN_PREFIX: &str = "Hadoop:service=DataNode,name=DataNodeActivity-";

/// Bounds a dead or wedged DataNode, so a snapshot fails rather than hangs.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A DataNode's counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Counters {
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Every DataNode's counters, keyed by `host:port` (its data-transfer
/// address, from the bean name).
pub type Snapshot = BTreeMap<String, Counters>;

/// What one DataNode did during one phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataNodeBytes {
    /// `host:port` of the DataNode's data-transfer address.
    pub datanode: String,
    /// Bytes the DataNode sent to clients (BytesRead grows on the server
    /// when a client reads).
    pub bytes_read: u64,
    /// Bytes the DataNode stored, replicas included.
    pub bytes_written: u64,
}

/// Parses a `/jmx` answer into counters per DataNode. Beans of other kinds
/// are skipped; a DataNodeActivity bean without numeric BytesRead and
/// BytesWritten is an error, since its figures would silently be zero.
pub fn parse(json: &str) -> Result<Snapshot> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| BenchError::invalid(format!("JMX answer is not JSON: {e}")))?;
    let beans = value
        .get("beans")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| BenchError::invalid("JMX answer has no \"beans\" array"))?;
    let mut snapshot = Snapshot::new();
    for bean in beans {
        let Some(name) = bean.get("name").and_then(serde_json::Value::as_str) else { continue };
        let Some(address) = name.strip_prefix(BEAN_PREFIX) else { continue };
        let counter = |field: &str| {
            bean.get(field)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| BenchError::invalid(format!("JMX bean {name:?} has no numeric {field}")))
        };
        let counters =
            Counters { bytes_read: counter("BytesRead")?, bytes_written: counter("BytesWritten")? };
        merge(&mut snapshot, datanode_label(address), counters);
    }
    Ok(snapshot)
}

/// `127.0.0.1-9866` (the bean name's form) as `127.0.0.1:9866`: the port
/// is after the last dash, host names may contain dashes.
fn datanode_label(address: &str) -> String {
    match address.rsplit_once('-') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{host}:{port}")
        }
        _ => address.to_owned(),
    }
}

/// The same DataNode seen twice (two URLs into one JVM, a moment apart)
/// keeps the larger counters: they only grow, so the larger is the later.
fn merge(snapshot: &mut Snapshot, datanode: String, counters: Counters) {
    let entry = snapshot.entry(datanode).or_default();
    entry.bytes_read = entry.bytes_read.max(counters.bytes_read);
    entry.bytes_written = entry.bytes_written.max(counters.bytes_written);
}

/// Every DataNode's counters, asked of every URL (`http://host:port`, a
/// DataNode's HTTP address). Fails naming the URL that did not answer or
/// that lists no DataNode.
pub fn snapshot(urls: &[String]) -> Result<Snapshot> {
    let mut all = Snapshot::new();
    for url in urls {
        let body = http_get(url, &format!("/jmx?qry={DATANODE_ACTIVITY_QUERY}"))?;
        let one = parse(&body).map_err(|e| BenchError::Jmx { url: url.clone(), problem: e.to_string() })?;
        if one.is_empty() {
            let problem = format!("no {BEAN_PREFIX}* bean (is this a DataNode's HTTP address?)");
            return Err(BenchError::Jmx { url: url.clone(), problem });
        }
        for (datanode, counters) in one {
            merge(&mut all, datanode, counters);
        }
    }
    Ok(all)
}

/// What each DataNode did between two snapshots, in address order. A
/// DataNode absent before (it joined) counts from zero; one whose counter
/// went down was restarted, and its counter restarted from zero too; one
/// absent after is left out, having nothing to report.
pub fn delta(before: &Snapshot, after: &Snapshot) -> Vec<DataNodeBytes> {
    after
        .iter()
        .map(|(datanode, now)| {
            let then = before.get(datanode).copied().unwrap_or_default();
            let grown = |now: u64, then: u64| if now >= then { now - then } else { now };
            DataNodeBytes {
                datanode: datanode.clone(),
                bytes_read: grown(now.bytes_read, then.bytes_read),
                bytes_written: grown(now.bytes_written, then.bytes_written),
            }
        })
        .collect()
}

/// The DataNode HTTP URLs in a launcher's state file: one DataNode a line,
/// `index url [bean]`; blank lines and `#` comments are skipped. The bean
/// name (tools/minidfs writes it) is not needed: beans are keyed by name.
pub fn read_datanode_file(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(BenchError::io("reading", path))?;
    let mut urls = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(index), Some(url), _bean, None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(BenchError::invalid(format!(
                "{}:{}: expected \"index http://host:port [bean]\", got {line:?}",
                path.display(),
                number + 1
            )));
        };
        if index.parse::<u32>().is_err() {
            return Err(BenchError::invalid(format!(
                "{}:{}: {index:?} is not a DataNode index",
                path.display(),
                number + 1
            )));
        }
        split_url(url).map_err(|e| e.context(format!("{}:{}", path.display(), number + 1)))?;
        urls.push(url.to_owned());
    }
    if urls.is_empty() {
        return Err(BenchError::invalid(format!("{}: lists no DataNode", path.display())));
    }
    Ok(urls)
}

/// `http://host:port[/]` as (`host:port`, host). Only plain HTTP: that is
/// what a DataNode's info server speaks unless configured otherwise.
pub fn split_url(url: &str) -> Result<(String, String)> {
    let bad = |problem: &str| BenchError::invalid(format!("DataNode JMX URL {url:?}: {problem}"));
    let rest = url.strip_prefix("http://").ok_or_else(|| bad("expected http://host:port"))?;
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        return Err(bad("expected http://host:port, without a path"));
    }
    let (host, port) =
        authority.rsplit_once(':').ok_or_else(|| bad("no port (expected http://host:port)"))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad("expected http://host:port"));
    }
    Ok((authority.to_owned(), host.to_owned()))
}

/// One HTTP/1.0 GET, read to the end (1.0: the server closes the
/// connection, so the body ends at EOF). Errors name the URL.
pub fn http_get(url: &str, path: &str) -> Result<String> {
    let fail = |problem: String| BenchError::Jmx { url: url.to_owned(), problem };
    let (authority, host) = split_url(url)?;
    let addresses: Vec<_> =
        authority.to_socket_addrs().map_err(|e| fail(format!("resolving {authority}: {e}")))?.collect();
    let mut last_error = None;
    let mut stream = None;
    for address in &addresses {
        match TcpStream::connect_timeout(address, CONNECT_TIMEOUT) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(error) => last_error = Some(error),
        }
    }
    let mut stream = stream.ok_or_else(|| {
        fail(match last_error {
            Some(error) => format!("connecting: {error}"),
            None => format!("{authority} resolves to no address"),
        })
    })?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| fail(format!("setting timeouts: {e}")))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\r\n")
        .map_err(|e| fail(format!("sending the request: {e}")))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| fail(format!("reading the answer: {e}")))?;
    let text = String::from_utf8(raw).map_err(|_| fail("the answer is not UTF-8".to_owned()))?;
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| fail("the answer has no end of headers".to_owned()))?;
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default();
    let code = status.split_whitespace().nth(1).unwrap_or_default();
    if code != "200" {
        return Err(fail(format!("GET {path}: {status}")));
    }
    // A server may chunk even a 1.0 answer; the body is small, decode it whole.
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    if chunked { dechunk(body).map_err(|error| fail(error.to_string())) } else { Ok(body.to_owned()) }
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut body: &str) -> Result<String> {
    let bad = BenchError::Invalid;
    let mut out = String::new();
    loop {
        let (size_line, rest) =
            body.split_once("\r\n").ok_or_else(|| bad("truncated chunked body".to_owned()))?;
        let size_text = size_line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|_| bad(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest.get(..size).ok_or_else(|| bad("truncated chunk".to_owned()))?;
        out.push_str(chunk);
        body =
            rest[size..].strip_prefix("\r\n").ok_or_else(|| bad("chunk not followed by CRLF".to_owned()))?;
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread::JoinHandle;

    use super::*;

    /// The shape Hadoop 3's JMXJsonServlet answers the query with (abridged
    /// to a few of the bean's many fields), here with two DataNodes of one
    /// MiniDFSCluster JVM and a bean of another kind.
    const SAMPLE: &str = r#"{
      "beans" : [ {
        "name" : "Hadoop:service=DataNode,name=DataNodeActivity-127.0.0.1-40123",
        "modelerType" : "DataNodeActivity-127.0.0.1-40123",
        "tag.SessionId" : null,
        "tag.Context" : "dfs",
        "tag.Hostname" : "localhost",
        "BytesWritten" : 52428800,
        "TotalWriteTime" : 311,
        "BytesRead" : 123,
        "TotalReadTime" : 0,
        "BlocksWritten" : 1,
        "BlocksRead" : 1,
        "ReadsFromLocalClient" : 0
      }, {
        "name" : "Hadoop:service=DataNode,name=DataNodeActivity-my-host-9866",
        "modelerType" : "DataNodeActivity-my-host-9866",
        "BytesWritten" : 0,
        "BytesRead" : 4096
      }, {
        "name" : "Hadoop:service=DataNode,name=JvmMetrics",
        "MemHeapUsedM" : 21.5
      } ]
    }"#;

    #[test]
    fn parses_every_datanode_bean_by_its_address() {
        let snapshot = parse(SAMPLE).unwrap();
        assert_eq!(snapshot.len(), 2, "{snapshot:?}");
        assert_eq!(snapshot["127.0.0.1:40123"], Counters { bytes_read: 123, bytes_written: 52428800 });
        assert_eq!(snapshot["my-host:9866"], Counters { bytes_read: 4096, bytes_written: 0 });
    }

    #[test]
    fn rejects_answers_without_the_counters() {
        assert!(parse("<html>").unwrap_err().to_string().contains("not JSON"));
        assert!(parse("{}").unwrap_err().to_string().contains("beans"));
        let missing =
            r#"{"beans":[{"name":"Hadoop:service=DataNode,name=DataNodeActivity-h-1","BytesRead":"x"}]}"#;
        let error = parse(missing).unwrap_err().to_string();
        assert!(error.contains("BytesRead") && error.contains("DataNodeActivity-h-1"), "{error}");
    }

    #[test]
    fn deltas_count_growth_and_restart_from_zero() {
        let before = parse(SAMPLE).unwrap();
        let mut after = before.clone();
        after.get_mut("127.0.0.1:40123").unwrap().bytes_read += 1000;
        // Restarted: its counters began again at zero.
        after.insert("my-host:9866".to_owned(), Counters { bytes_read: 10, bytes_written: 0 });
        after.insert("new:1".to_owned(), Counters { bytes_read: 7, bytes_written: 9 });
        let bytes = delta(&before, &after);
        let read: Vec<(&str, u64, u64)> =
            bytes.iter().map(|d| (d.datanode.as_str(), d.bytes_read, d.bytes_written)).collect();
        assert_eq!(read, [("127.0.0.1:40123", 1000, 0), ("my-host:9866", 10, 0), ("new:1", 7, 9)]);
    }

    /// Serves each body once, in order, as an HTTP/1.1 answer of the
    /// given encoding; returns the requests it got.
    fn serve(bodies: Vec<(u16, String, bool)>) -> (String, JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for (status, body, chunked) in bodies {
                let (mut stream, _) = listener.accept().unwrap();
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                    request.push(byte[0]);
                }
                requests.push(String::from_utf8(request).unwrap());
                let answer = if chunked {
                    let (a, b) = body.split_at(body.len() / 2);
                    format!(
                        "HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\n\r\n",
                        a.len(),
                        b.len()
                    )
                } else {
                    format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                };
                stream.write_all(answer.as_bytes()).unwrap();
            }
            requests
        });
        (url, server)
    }

    #[test]
    fn snapshots_a_served_answer_plain_and_chunked() {
        let (url, server) = serve(vec![(200, SAMPLE.to_owned(), false), (200, SAMPLE.to_owned(), true)]);
        // The same JVM behind two URLs: each DataNode once.
        let snapshot = snapshot(&[url.clone(), format!("{url}/")]).unwrap();
        assert_eq!(snapshot, parse(SAMPLE).unwrap());
        let requests = server.join().unwrap();
        assert_eq!(requests.len(), 2);
        assert!(
            requests[0].starts_with(&format!("GET /jmx?qry={DATANODE_ACTIVITY_QUERY} HTTP/1.0\r\n")),
            "{requests:?}"
        );
    }

    #[test]
    fn failures_name_the_url() {
        let (url, server) = serve(vec![
            (404, "no".to_owned(), false),
            (200, r#"{"beans":[{"name":"Hadoop:service=NameNode,name=FSNamesystem"}]}"#.to_owned(), false),
        ]);
        let error = snapshot(std::slice::from_ref(&url)).unwrap_err().to_string();
        assert!(error.contains(&url) && error.contains("404"), "{error}");
        let error = snapshot(std::slice::from_ref(&url)).unwrap_err().to_string();
        assert!(error.contains(&url) && error.contains("no Hadoop:service=DataNode"), "{error}");
        server.join().unwrap();

        // A port nobody listens on any more.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let dead_url = format!("http://{dead}");
        let error = snapshot(std::slice::from_ref(&dead_url)).unwrap_err().to_string();
        assert!(error.contains(&dead_url) && error.contains("connecting"), "{error}");
        assert!(split_url("https://h:1").unwrap_err().to_string().contains("https://h:1"));
        assert!(split_url("http://h:1/jmx").is_err());
        assert!(split_url("http://h").is_err());
    }

    #[test]
    fn reads_the_launchers_datanode_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("datanodes.txt");
        std::fs::write(
            &path,
            "# written by the launcher\n0 http://127.0.0.1:9864\n\n\
             1 http://127.0.0.1:9865 Hadoop:service=DataNode,name=DataNodeActivity-127.0.0.1-9866\n",
        )
        .unwrap();
        assert_eq!(read_datanode_file(&path).unwrap(), ["http://127.0.0.1:9864", "http://127.0.0.1:9865"]);
        std::fs::write(&path, "0 http://127.0.0.1:9864 bean extra\n").unwrap();
        assert!(read_datanode_file(&path).unwrap_err().to_string().contains(":1:"));
        std::fs::write(&path, "x http://127.0.0.1:9864\n").unwrap();
        assert!(read_datanode_file(&path).unwrap_err().to_string().contains("index"));
        std::fs::write(&path, "\n").unwrap();
        assert!(read_datanode_file(&path).unwrap_err().to_string().contains("no DataNode"));
    }
}
