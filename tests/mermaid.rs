//! The Mermaid chart as Mermaid itself sees it: `proctrace render -d
//! mermaid` fed to the real mermaid-cli, whose SVG must show every task
//! label with its colons, '#' and ';' intact.
//!
//! Needs tests/setup-mermaid.sh (chromium from Debian, mermaid-cli from
//! npm). Under CI (the CI variable set) the setup is run if needed and a
//! failure fails the test; elsewhere a missing setup skips it with a note.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn node_dir() -> PathBuf {
    root().join("tests/.node")
}

fn mmdc() -> PathBuf {
    node_dir().join("node_modules/.bin/mmdc")
}

fn ready() -> bool {
    mmdc().exists()
        && node_dir().join("puppeteer.json").exists()
        && Path::new("/usr/bin/chromium").exists()
}

/// Whether mermaid-cli can run, setting it up under CI.
fn set_up() -> bool {
    if ready() {
        return true;
    }
    if std::env::var_os("CI").is_none() {
        eprintln!("skipped: mermaid-cli is not set up; run tests/setup-mermaid.sh");
        return false;
    }
    let status = Command::new(root().join("tests/setup-mermaid.sh"))
        .status()
        .expect("running tests/setup-mermaid.sh");
    assert!(
        status.success() && ready(),
        "CI is set but mermaid-cli could not be set up"
    );
    true
}

/// The text of an SVG with XML's escapes undone.
fn unescape_xml(svg: &str) -> String {
    let mut text = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find('&') {
        let Some(end) = rest[at..].find(';') else {
            break;
        };
        text.push_str(&rest[..at]);
        let entity = &rest[at + 1..at + end];
        let decoded = match entity {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .map(|hex| u32::from_str_radix(hex, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                text.push(c);
                rest = &rest[at + end + 1..];
            }
            None => {
                text.push('&');
                rest = &rest[at + 1..];
            }
        }
    }
    text.push_str(rest);
    text
}

#[test]
fn mermaid_cli_renders_every_label() {
    if !set_up() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart.mmd");
    let svg = dir.path().join("chart.svg");
    let rendered = Command::new(env!("CARGO_BIN_EXE_proctrace"))
        .args(["render", "-d", "mermaid", "-i"])
        .arg(root().join("tests/data/demo.ndjson"))
        .arg("-o")
        .arg(&chart)
        .status()
        .unwrap();
    assert!(rendered.success());

    let output = Command::new(mmdc())
        .arg("-p")
        .arg(node_dir().join("puppeteer.json"))
        .arg("-i")
        .arg(&chart)
        .arg("-o")
        .arg(&svg)
        .output()
        .expect("running mmdc");
    assert!(
        output.status.success(),
        "mmdc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = unescape_xml(&std::fs::read_to_string(&svg).expect("mmdc wrote no SVG"));
    for label in [
        "[1000] bash demo.sh",
        "[1000] <store>/bin/hello --greeting=x:y",
        "[1001] sleep 0.2",
        "[1002] <fork>",
        "[1003] sh -c 'echo a:b # c; exit 1'",
        "[1004] curl -w '%{http_code}' 'http://localhost:8080/#top'",
    ] {
        assert!(text.contains(label), "the SVG lacks the task {label:?}");
    }
}

#[test]
fn xml_escapes_are_undone() {
    assert_eq!(unescape_xml("a&#58;b &lt;fork&gt; &#x23;"), "a:b <fork> #");
    assert_eq!(unescape_xml("&amp;amp;"), "&amp;");
    assert_eq!(unescape_xml("a & b"), "a & b");
}
