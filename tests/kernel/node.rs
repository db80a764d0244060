//! Node's JavaScript functions in the CPU profile, with no flag: the
//! recorder asks Node for perf maps through NODE_OPTIONS, and removes
//! them once it has read them.

use std::path::Path;

use crate::common::*;
use proctrace::event::Pid;

/// Samples of `node jsloop.js` whose stack names `hotJsLoop`, and all,
/// with Node's pid; `env` for the recording.
fn hot_samples(extra: &[&str], env: &[(&str, &str)]) -> (u64, u64, Pid) {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[&["--cpu-profile=499"], extra].concat());
    opts.env = env.iter().map(|&(k, v)| (k.into(), v.into())).collect();
    let script = repo().join("tests/workloads/jsloop.js");
    let run = record_with(&opts, &["node", script.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let out = run.dir.path().join("cpu.folded");
    render(&run.dir.path().join("rec.ndjson"), "cpu-folded", &out);
    let text = std::fs::read_to_string(&out).unwrap();
    let mut named = 0;
    let mut all = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let count: u64 = count.parse().unwrap();
        all += count;
        if stack.contains("hotJsLoop") {
            named += count;
        }
    }
    (named, all, run.root())
}

#[test]
fn node_functions_are_named_without_flags() {
    require_root();
    if !prerequisite(have_tool("node"), "node") {
        return;
    }
    let (named, all, node) = hot_samples(&[], &[]);
    assert!(all > 100, "{all} samples");
    assert!(named * 2 > all, "{named} of {all} samples name hotJsLoop");
    let map = format!("/tmp/perf-{node}.map");
    assert!(
        !Path::new(&map).exists(),
        "{map}, asked for by proctrace, was left"
    );
    // A map the user asked for stays.
    let own = [("NODE_OPTIONS", "--perf-basic-prof-only-functions")];
    let (named, all, node) = hot_samples(&[], &own);
    assert!(named * 2 > all, "{named} of {all} samples name hotJsLoop");
    let map = format!("/tmp/perf-{node}.map");
    assert!(Path::new(&map).exists(), "{map}, the user's, was removed");
    std::fs::remove_file(map).unwrap();
    let (named, all, _) = hot_samples(&["--no-node-perf-map"], &[]);
    assert!(all > 100, "{all} samples");
    assert_eq!(named, 0, "named without the perf map");
}
