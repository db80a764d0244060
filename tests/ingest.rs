//! `proctrace ingest` against the real kernel: a raw recording, re-rooted,
//! is the ordinary recording of the same run.

mod common;

use std::fs;
use std::process::Command;

use common::*;
use proctrace::event::Record;

/// The events of a recording without their numbering and timing, which
/// differ between two recordings of one run.
fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
    parse_lines(&fs::read_to_string(path).unwrap())
        .into_iter()
        .filter(|r| !matches!(r, Record::Header(_) | Record::Trailer(_)))
        .map(|mut r| {
            r.set_seq(0);
            r.set_timestamp(0);
            serde_json::to_value(r).unwrap()
        })
        .collect()
}

#[test]
fn ingesting_a_raw_recording_reproduces_the_ordinary_one() {
    if !have_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (raw, inner, ingested) = (
        dir.path().join("raw"),
        dir.path().join("inner"),
        dir.path().join("ingested"),
    );
    let demo = repo().join("demo/demo.sh");
    // An ordinary recording of the demo, made inside a raw recording of
    // the whole machine: both see the very same processes.
    let status = Command::new(proctrace_bin())
        .args(["record", "--raw", "-o"])
        .arg(&raw)
        .args(["--", proctrace_bin(), "record", "-o"])
        .arg(&inner)
        .arg("--")
        .arg(&demo)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let root = parse_lines(&fs::read_to_string(&inner).unwrap())
        .iter()
        .find_map(|r| {
            if let Record::Header(h) = r {
                Some(h.root_pid)
            } else {
                None
            }
        })
        .unwrap();
    let ingest = Command::new(proctrace_bin())
        .args(["ingest", "-i"])
        .arg(&raw)
        .args(["--root-pid", &root.to_string(), "-o"])
        .arg(&ingested)
        .output()
        .unwrap();
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    let raw_trailer = parse_lines(&fs::read_to_string(&raw).unwrap())
        .into_iter()
        .find_map(|r| {
            if let Record::Trailer(t) = r {
                Some(t)
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!(
        raw_trailer.lost, 0,
        "the raw recording lost events: {raw_trailer:?}"
    );
    let expected = events(&inner);
    let got = events(&ingested);
    assert!(expected.len() > 20, "the demo has a tree: {expected:?}");
    let first_difference = expected.iter().zip(&got).position(|(e, g)| e != g);
    assert!(
        first_difference.is_none() && got.len() == expected.len(),
        "ingested {} events, the ordinary recording has {}; first difference at {first_difference:?}: {:?} vs {:?}",
        got.len(),
        expected.len(),
        first_difference.map(|i| &got[i]),
        first_difference.map(|i| &expected[i]),
    );
}
