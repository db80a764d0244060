//! The real mermaid-cli, for tests that render charts the way Mermaid does.
//!
//! Needs chromium from Debian and mermaid-cli from npm in tests/.node, both
//! installed by `scripts/install-deps.sh --test`.

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

/// Whether mermaid-cli can run (`super::prerequisite`).
pub fn have_mermaid() -> bool {
    super::prerequisite(
        mermaid_ready(),
        "mermaid-cli in tests/.node and Debian's chromium",
    )
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
