//! The official OTLP schema, for tests of `render -d otlp`: the Python
//! package opentelemetry-proto in tests/.venv, installed by
//! `scripts/install-deps.sh --test`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::repo;

fn python() -> PathBuf {
    repo().join("tests/.venv/bin/python3")
}

/// Whether opentelemetry-proto can be imported (`super::prerequisite`).
pub fn have_otlp_schema() -> bool {
    let importable = python().exists()
        && Command::new(python())
            .args(["-c", "import opentelemetry.proto"])
            .status()
            .is_ok_and(|s| s.success());
    super::prerequisite(importable, "opentelemetry-proto in tests/.venv")
}

/// Parses every line of the export at `path` into an
/// ExportTraceServiceRequest (tests/common/otlp_check.py); panics on any
/// line the schema refuses. Returns a summary of each span, in order.
pub fn otlp_schema_spans(path: &Path) -> Vec<Value> {
    let output = Command::new(python())
        .arg(repo().join("tests/common/otlp_check.py"))
        .arg(path)
        .output()
        .expect("running tests/.venv/bin/python3");
    assert!(
        output.status.success(),
        "opentelemetry-proto refused {}:\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}
