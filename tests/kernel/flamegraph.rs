//! Flame graphs of a real recording: `-d folded` holds each process's own
//! CPU time under the chain of programs that started it, loads in the
//! real speedscope app, and `-d flamegraph` draws the same stacks as an
//! SVG chromium opens.

use std::collections::BTreeMap;
use std::fs;

use crate::common::browser::{dom_and_console, have_chromium, screenshot, screenshot_path};
use crate::common::*;
use proctrace::event::Pid;

/// Records two processes of known CPU cost and a pipeline under sh.
pub fn record_cpu_tree() -> Run {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let usage = workload("usage");
    let d = dir.path().display();
    let script = format!(
        "{u} {d} {d}/r1 & {u} {d} {d}/r2; wait; head -c 20000000 /dev/zero | sha256sum",
        u = usage.display()
    );
    let run = record_in(dir, &Opts::new(Mode::Ring), &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    run
}

/// What `folded` must say, worked out from the events themselves: each
/// process's frames are the programs (argv[0]'s file name) from the root
/// down, `<fork> ` and its nearest ancestor's for one that never exec'd
/// (none of this tree execs after forking); its weight its CPU time in
/// whole microseconds.
fn expected_stacks(run: &Run) -> BTreeMap<String, u64> {
    let parent: BTreeMap<Pid, Pid> = run
        .forks()
        .iter()
        .map(|f| (f.child_pid, f.parent_pid))
        .collect();
    let program = |pid: Pid| {
        let argv = run.argvs(pid).last().cloned()?;
        Some(argv[0].rsplit('/').next().unwrap().to_string())
    };
    let frame = |pid: Pid| match program(pid) {
        Some(program) => program,
        None => {
            let mut up = parent[&pid];
            let inherited = loop {
                match program(up) {
                    Some(program) => break program,
                    None => up = parent[&up],
                }
            };
            format!("<fork> {inherited}")
        }
    };
    let mut stacks = BTreeMap::new();
    for exit in run.all_exits() {
        let weight = exit.resources.expect("every Exit has resources").cpu_ns / 1_000;
        let mut frames = vec![frame(exit.pid)];
        let mut pid = exit.pid;
        while let Some(&up) = parent.get(&pid) {
            frames.push(frame(up));
            pid = up;
        }
        frames.reverse();
        if weight > 0 {
            *stacks.entry(frames.join(";")).or_default() += weight;
        }
    }
    stacks
}

/// The lines of `folded`, same stacks added up as the tools do.
fn folded_stacks(text: &str) -> BTreeMap<String, u64> {
    let mut stacks = BTreeMap::new();
    for line in text.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("`stack weight`");
        *stacks.entry(stack.to_string()).or_default() += weight.parse::<u64>().unwrap();
    }
    stacks
}

#[test]
fn folded_stacks_are_each_process_cpu_under_its_ancestors() {
    let run = record_cpu_tree();
    let input = run.dir.path().join("rec.ndjson");
    let folded = run.dir.path().join("out.folded");
    render(&input, "folded", &folded);
    let text = fs::read_to_string(&folded).unwrap();
    crate::hostile::assert_folded(&text);
    let stacks = folded_stacks(&text);
    assert_eq!(stacks, expected_stacks(&run), "{}", run.text);
    // Each usage burned 200 ms or more; its stack is the heaviest.
    assert!(stacks["sh;usage"] >= 400_000, "{stacks:?}");
    assert!(stacks.contains_key("sh;sha256sum") && stacks.contains_key("sh;head"));
}

/// speedscope's page, from npm in tests/.node.
fn speedscope() -> std::path::PathBuf {
    repo().join("tests/.node/node_modules/speedscope/dist/release/index.html")
}

/// Whether speedscope is installed (`crate::common::prerequisite`).
fn have_speedscope() -> bool {
    prerequisite(speedscope().exists(), "speedscope in tests/.node")
}

#[test]
fn folded_stacks_load_in_speedscope() {
    if !have_chromium() || !have_speedscope() {
        return;
    }
    let app = speedscope();
    let run = record_cpu_tree();
    let folded = run.dir.path().join("cpu.folded");
    render(&run.dir.path().join("rec.ndjson"), "folded", &folded);
    // What speedscope's own command line does with a local file: a script
    // that hands the app the file, named in the page's fragment.
    let loader = run.dir.path().join("load.js");
    let base64 = std::process::Command::new("base64")
        .arg("-w0")
        .arg(&folded)
        .output()
        .expect("running base64");
    fs::write(
        &loader,
        format!(
            "speedscope.loadFileFromBase64(\"cpu.folded\", \"{}\")",
            String::from_utf8(base64.stdout).unwrap()
        ),
    )
    .unwrap();
    let (dom, console) = dom_and_console(&app, &format!("#localProfilePath={}", loader.display()));
    assert!(
        dom.contains("<title>cpu.folded - speedscope</title>"),
        "speedscope did not open the profile; console: {console:#?}"
    );
    assert!(
        console
            .iter()
            .any(|m| m.contains("Importing as collapsed stack format")),
        "{console:#?}"
    );
    let errors: Vec<_> = console
        .iter()
        .filter(|m| m.starts_with("ERROR") || m.starts_with("WARNING"))
        .collect();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}

#[test]
fn flamegraph_svg_draws_the_stacks_in_chromium() {
    if !have_chromium() {
        return;
    }
    let run = record_cpu_tree();
    let input = run.dir.path().join("rec.ndjson");
    let svg = run.dir.path().join("cpu.svg");
    render(&input, "flamegraph", &svg);
    let (dom, console) = dom_and_console(&svg, "");
    let errors: Vec<_> = console.iter().filter(|m| m.starts_with("ERROR")).collect();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    // Each frame's tooltip: `name (1,234 µs of CPU, 12.34%)`.
    let frames: BTreeMap<&str, u64> = dom
        .split("<title>")
        .skip(1)
        .filter_map(|t| {
            let (name, rest) = t.split_once(" (")?;
            let count = rest.split_once(" µs of CPU")?.0.replace(',', "");
            Some((name, count.parse().ok()?))
        })
        .collect();
    let expected = expected_stacks(&run);
    let total: u64 = expected.values().sum();
    assert_eq!(frames.get("all"), Some(&total), "{frames:?}");
    let usage: u64 = expected
        .iter()
        .filter(|(stack, _)| stack.ends_with(";usage"))
        .map(|(_, weight)| weight)
        .sum();
    assert_eq!(frames.get("usage"), Some(&usage), "{frames:?}");
    for program in ["sh", "head", "sha256sum"] {
        assert!(
            frames.contains_key(program),
            "{program} missing: {frames:?}"
        );
    }
    screenshot(&svg, &screenshot_path("flamegraph.png"));
}
