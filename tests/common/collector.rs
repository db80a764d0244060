//! A real OpenTelemetry collector for the tests of `export otlp` and
//! `record --otlp`: rotel (PyPI, its binary in tests/.venv, installed by
//! `scripts/install-deps.sh --test`) on loopback, forwarding what it gets
//! over OTLP/HTTP to tests/common/otlp_receiver.py, which parses it with
//! the official schema and writes each span as a JSON line.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::repo;

/// How long a test waits for spans or a port, at most.
const WAIT: Duration = Duration::from_secs(60);

/// rotel's binary, inside its Python package.
fn rotel() -> Option<PathBuf> {
    let lib = repo().join("tests/.venv/lib");
    let pythons = std::fs::read_dir(lib).ok()?;
    pythons
        .flatten()
        .map(|python| python.path().join("site-packages/rotel/rotel-agent"))
        .find(|path| path.exists())
}

/// Whether rotel and opentelemetry-proto are installed (`super::prerequisite`).
pub fn have_collector() -> bool {
    let present = rotel().is_some() && super::have_otlp_schema();
    super::prerequisite(present, "rotel in tests/.venv")
}

/// A port nothing listens on, for now.
pub fn free_port() -> u16 {
    free_ports()[0]
}

/// Two distinct ports nothing listens on, for now: both are held at once,
/// so the kernel cannot hand out the same one twice.
pub fn free_ports() -> [u16; 2] {
    let listeners = [0, 1].map(|_| TcpListener::bind("127.0.0.1:0").unwrap());
    listeners.map(|listener| listener.local_addr().unwrap().port())
}

/// rotel and the receiver behind it; both killed when dropped.
pub struct Collector {
    /// rotel's OTLP/gRPC port.
    pub grpc: u16,
    /// rotel's OTLP/HTTP port.
    pub http: u16,
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

/// How many fresh pairs of ports `Collector::start` tries.
const START_TRIES: usize = 5;

impl Collector {
    /// A collector on free ports. A port is free only until rotel binds
    /// it: a parallel test's connection may take it first, and then rotel
    /// exits and the next pair is tried.
    pub fn start() -> Self {
        let mut failures = Vec::new();
        for _ in 0..START_TRIES {
            let [grpc, http] = free_ports();
            match Self::try_start_on(grpc, http) {
                Ok(collector) => return collector,
                Err(failure) if failure.contains("Address already in use") => {
                    failures.push(failure)
                }
                Err(failure) => panic!("{failure}"),
            }
        }
        panic!("rotel found no free ports in {START_TRIES} tries: {failures:#?}")
    }

    /// A collector on these ports, once it accepts connections on both;
    /// or why rotel exited before it did.
    pub fn try_start_on(grpc: u16, http: u16) -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("receiver.port");
        let python = repo().join("tests/.venv/bin/python3");
        let receiver = Command::new(python)
            .arg(repo().join("tests/common/otlp_receiver.py"))
            .arg(&port_file)
            .arg(dir.path().join("spans.ndjson"))
            .spawn()
            .expect("starting tests/common/otlp_receiver.py");
        let mut collector = Collector {
            grpc,
            http,
            children: vec![receiver],
            dir,
        };
        let receiver_port = wait_for(
            || std::fs::read_to_string(&port_file).ok(),
            "the receiver's port",
            String::new,
        );
        let errors = collector.dir.path().join("rotel.stderr");
        let rotel = Command::new(rotel().expect("rotel in tests/.venv"))
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--exporter", "otlp", "--otlp-exporter-protocol", "http"])
            .args([
                "--otlp-exporter-endpoint",
                &format!("http://127.0.0.1:{receiver_port}"),
            ])
            // rotel drops the resource of the spans it splits off a batch
            // past its size (8192 spans by default), as a loaded machine's
            // late timeout lets two exports meet: one batch, never split.
            .args([
                "--otlp-exporter-compression",
                "none",
                "--batch-timeout",
                "20ms",
                "--batch-max-size",
                "1000000",
            ])
            .arg("--pid-file")
            .arg(collector.dir.path().join("rotel.pid"))
            .arg("--log-file")
            .arg(collector.dir.path().join("rotel.log"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .expect("starting rotel");
        collector.children.push(rotel);
        let ports = [grpc, http];
        let rotel_said = || std::fs::read_to_string(&errors).unwrap_or_default();
        wait_for(
            || {
                if let Some(status) = collector.children[1].try_wait().unwrap() {
                    return Some(Err(format!("rotel exited ({status}): {}", rotel_said())));
                }
                let listening = ports
                    .iter()
                    .all(|&port| TcpStream::connect(("127.0.0.1", port)).is_ok());
                listening.then_some(Ok(()))
            },
            "rotel's ports",
            rotel_said,
        )?;
        Ok(collector)
    }

    /// `http://127.0.0.1:PORT` of rotel's OTLP/HTTP receiver.
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http)
    }

    /// `http://127.0.0.1:PORT` of rotel's OTLP/gRPC receiver.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }

    /// The spans received so far.
    pub fn received(&self) -> Vec<Value> {
        spans_in(&self.dir.path().join("spans.ndjson"))
    }

    /// Waits until `count` spans have arrived; returns them. Panics with
    /// what did arrive if they do not.
    pub fn spans(&self, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        loop {
            let spans = self.received();
            if spans.len() >= count || Instant::now() > deadline {
                assert_eq!(spans.len(), count, "spans received: {spans:#?}");
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spans_in(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines = text.lines().filter(|line| line.ends_with('}'));
    lines
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `ready`'s value once it has one; panics after `WAIT` with `what` and
/// what `said` gives (a child's words).
fn wait_for<T>(mut ready: impl FnMut() -> Option<T>, what: &str, said: impl Fn() -> String) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not ready within {WAIT:?}; {}",
            said()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An attribute of a received span (or event), `Null` if it has none.
pub fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"].get(key).unwrap_or(&Value::Null)
}

/// An int attribute (a decimal string in the JSON mapping).
pub fn int_attr(span: &Value, key: &str) -> i64 {
    let value = attr(span, key)["intValue"].as_str();
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {span}"))
}

/// A string attribute.
pub fn attr_str<'a>(span: &'a Value, key: &str) -> &'a str {
    attr(span, key)["stringValue"].as_str().unwrap_or_default()
}

/// The process spans and test spans of one recording, received.
pub struct Received<'a> {
    /// Process spans by pid (pids are unique in one recording here).
    pub processes: std::collections::HashMap<i32, &'a Value>,
    /// Test spans by test name.
    pub tests: std::collections::HashMap<&'a str, &'a Value>,
}

/// Checks the received spans of the recording at `input`: one per process
/// (by `process.pid`) and one per test they name, all in `trace_id`, the
/// roots under `root_parent` (empty: none); each process under its parent
/// process's span, or under its test's span where its test begins, and
/// each test span under the span of its first process's parent.
pub fn check_trace<'a>(
    input: &Path,
    spans: &'a [Value],
    trace_id: &str,
    root_parent: &str,
) -> Received<'a> {
    let processes = super::read(input);
    let (with_pid, tests): (Vec<&Value>, Vec<&Value>) = spans
        .iter()
        .partition(|s| !attr(s, "process.pid").is_null());
    let by_pid: std::collections::HashMap<i32, &Value> = with_pid
        .iter()
        .map(|s| (int_attr(s, "process.pid") as i32, *s))
        .collect();
    assert_eq!(by_pid.len(), processes.len(), "one span per process");
    let by_test: std::collections::HashMap<&str, &Value> = tests
        .iter()
        .map(|s| (attr_str(s, "test.case.name"), *s))
        .collect();
    assert_eq!(by_test.len(), tests.len(), "one span per test: {tests:#?}");
    let ids: std::collections::HashSet<&str> = spans
        .iter()
        .map(|s| s["span_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    for process in processes.all() {
        let span = by_pid[&process.pid];
        assert_eq!(span["trace_id"], trace_id);
        assert!(span["start"].as_u64() <= span["end"].as_u64(), "{span}");
        let test = attr_str(span, "proctrace.test");
        let parent = process.parent.map(|p| by_pid[&processes.get(p).pid]);
        let expected = match parent {
            _ if !test.is_empty()
                && parent.map(|p| attr_str(p, "proctrace.test")) != Some(test) =>
            {
                by_test[test]["span_id"].as_str().unwrap()
            }
            Some(parent) => parent["span_id"].as_str().unwrap(),
            None => root_parent,
        };
        assert_eq!(
            span["parent_span_id"], expected,
            "parent of {}",
            process.pid
        );
    }
    for (name, span) in &by_test {
        let first = with_pid
            .iter()
            .filter(|s| attr_str(s, "proctrace.test") == *name)
            .min_by_key(|s| s["start"].as_u64())
            .expect("a test span has processes");
        let parent = by_pid
            .values()
            .find(|p| p["span_id"] == first["parent_span_id"]);
        let parent_pid = attr(first, "process.parent_pid");
        let expected = by_pid
            .values()
            .find(|p| attr(p, "process.pid") == parent_pid)
            .map_or(root_parent, |p| p["span_id"].as_str().unwrap());
        assert!(
            parent.is_none(),
            "{name}: the first process is under its test"
        );
        assert_eq!(span["parent_span_id"], expected, "parent of test {name}");
        assert_eq!(span["trace_id"], trace_id);
    }
    Received {
        processes: by_pid,
        tests: by_test,
    }
}
