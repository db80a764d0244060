//! The real mermaid-cli, for tests that render charts the way Mermaid does.
//!
//! Needs tests/setup-mermaid.sh (chromium from Debian, mermaid-cli from
//! npm). Under CI (the CI variable set) the setup is run if needed and a
//! failure fails the test; elsewhere a missing setup skips it with a note.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::repo;

fn node_dir() -> PathBuf {
    repo().join("tests/.node")
}

fn mmdc() -> PathBuf {
    node_dir().join("node_modules/.bin/mmdc")
}

fn mermaid_ready() -> bool {
    mmdc().exists()
        && node_dir().join("puppeteer.json").exists()
        && Path::new("/usr/bin/chromium").exists()
}

/// Whether mermaid-cli can run, setting it up under CI.
pub fn mermaid_set_up() -> bool {
    if mermaid_ready() {
        return true;
    }
    if std::env::var_os("CI").is_none() {
        eprintln!("skipped: mermaid-cli is not set up; run tests/setup-mermaid.sh");
        return false;
    }
    let status = Command::new(repo().join("tests/setup-mermaid.sh"))
        .status()
        .expect("running tests/setup-mermaid.sh");
    assert!(
        status.success() && mermaid_ready(),
        "CI is set but mermaid-cli could not be set up"
    );
    true
}

/// The SVG mermaid-cli makes of the chart at `chart` (written next to it).
pub fn mermaid_svg(chart: &Path) -> String {
    let svg = chart.with_extension("svg");
    let output = Command::new(mmdc())
        .arg("-p")
        .arg(node_dir().join("puppeteer.json"))
        .arg("-i")
        .arg(chart)
        .arg("-o")
        .arg(&svg)
        .output()
        .expect("running mmdc");
    assert!(
        output.status.success(),
        "mmdc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(&svg).expect("mmdc wrote no SVG")
}

/// The text of an SVG with XML's escapes undone.
pub fn unescape_xml(svg: &str) -> String {
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
