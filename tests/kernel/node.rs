//! Node's JavaScript functions in the CPU profile, with no flag: the
//! recorder asks Node for perf maps through NODE_OPTIONS.

use crate::common::*;

/// Samples of `node jsloop.js` whose stack names `hotJsLoop`, and all.
fn hot_samples(extra: &[&str]) -> (u64, u64) {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&[&["--cpu-profile=499"], extra].concat());
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
    (named, all)
}

#[test]
fn node_functions_are_named_without_flags() {
    require_root();
    if !prerequisite(have_tool("node"), "node") {
        return;
    }
    let (named, all) = hot_samples(&[]);
    assert!(all > 100, "{all} samples");
    assert!(named * 2 > all, "{named} of {all} samples name hotJsLoop");
    let (named, all) = hot_samples(&["--no-node-perf-map"]);
    assert!(all > 100, "{all} samples");
    assert_eq!(named, 0, "named without the perf map");
}
