//! `proctrace ingest` against the real kernel: a raw recording, re-rooted,
//! is the ordinary recording of the same run.

mod common;

use common::*;
use proctrace::event::Record;

/// The events of a recording without their numbering and timing, which
/// differ between two recordings of one run.
fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
    read_records(path)
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
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let (raw_s, inner_s, ingested_s) = (path(&raw), path(&inner), path(&ingested));
    let demo = path(&demo);
    proctrace_ok(&[
        "record",
        "--raw",
        "-o",
        &raw_s,
        "--",
        proctrace_bin(),
        "record",
        "-o",
        &inner_s,
        "--",
        &demo,
    ]);
    let root = header_in(&read_records(&inner)).root_pid.to_string();
    proctrace_ok(&[
        "ingest",
        "-i",
        &raw_s,
        "--root-pid",
        &root,
        "-o",
        &ingested_s,
    ]);
    let raw_trailer = trailer_in(&read_records(&raw)).clone();
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
