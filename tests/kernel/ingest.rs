//! `proctrace ingest` against the real kernel: a raw recording, re-rooted,
//! is the ordinary recording of the same run.

use crate::common::*;

/// The events of a recording without their numbering and timing, which
/// differ between two recordings of one run, grouped per process. Each
/// recorder stamps its own time, so two processes' events that happen at
/// nearly the same moment on different CPUs may come out in either order;
/// what must agree is each process's own history. CPU time is read by each
/// recorder's own program at the exec and at the exit, a scheduler update
/// apart, so only its presence must agree.
fn events(
    path: &std::path::Path,
) -> std::collections::BTreeMap<proctrace::event::Pid, Vec<serde_json::Value>> {
    let mut per_process = std::collections::BTreeMap::<_, Vec<_>>::new();
    for mut r in read_records(path) {
        let Some(pid) = r.pid() else { continue };
        r.set_seq(0);
        r.set_timestamp(0);
        let mut value = serde_json::to_value(r).unwrap();
        if let Some(resources) = value.pointer_mut("/Exit/resources") {
            for cpu in ["cpu_ns", "user_ns", "system_ns"] {
                resources[cpu] = serde_json::Value::Null;
            }
        }
        if let Some(used) = value.pointer_mut("/Exec/used_before") {
            used["cpu_ns"] = serde_json::Value::Null;
        }
        per_process.entry(pid).or_default().push(value);
    }
    per_process
}

#[test]
fn ingesting_a_raw_recording_reproduces_the_ordinary_one() {
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
    assert!(expected.len() > 5, "the demo has a tree: {expected:?}");
    let differing: Vec<_> = expected
        .keys()
        .chain(got.keys())
        .filter(|pid| expected.get(pid) != got.get(pid))
        .collect();
    assert!(
        differing.is_empty(),
        "processes whose histories differ: {differing:?}\ningested: {:?}\nordinary: {:?}",
        differing.first().map(|p| got.get(p)),
        differing.first().map(|p| expected.get(p)),
    );
}
