//! CPython's frames in the CPU profile and the probes' stacks: the Python
//! functions a sample or hit ran, walked by the kernel in every
//! interpreter on the machine (Debian's, static and not
//! position-independent; pyenv's, on a shared libpython), interleaved with
//! the native frames, named after the process is gone, however short it
//! lived, and checked against py-spy's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use crate::cpu_profile::folded;
use proctrace::event::{Pid, Record};

/// The workload whose costs are known: `heavy` three times `light`.
fn pycosts() -> String {
    repo()
        .join("tests/workloads/pycosts.py")
        .to_string_lossy()
        .into_owned()
}

/// Debian's python3 (what `install-deps.sh --test` installs, with
/// pytest), then each pyenv build 3.9 to 3.14 there is.
fn interpreters() -> Vec<PathBuf> {
    let debian = std::fs::canonicalize("/usr/bin/python3").ok();
    if !prerequisite(debian.is_some(), "Debian's python3") {
        return Vec::new();
    }
    let mut found: Vec<PathBuf> = debian.into_iter().collect();
    let pyenv = Path::new("/root/.pyenv/versions");
    let mut versions: Vec<_> = std::fs::read_dir(pyenv)
        .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    versions.sort();
    for version in versions {
        let name = version.file_name().unwrap().to_string_lossy().into_owned();
        let minor = name.split('.').take(2).collect::<Vec<_>>().join(".");
        let python = version.join(format!("bin/python{minor}"));
        if python.exists() && (9..=14).any(|m| minor == format!("3.{m}")) {
            found.push(python);
        }
    }
    found
}

/// A function of the workload as a frame names it when it runs the line
/// of `text` (or its `def` line, where a call starts): `heavy
/// (pycosts.py:24)`, as py-spy names it.
fn frame_at(function: &str, text: &str) -> String {
    let source = std::fs::read_to_string(pycosts()).unwrap();
    let mut lines = source.lines().enumerate();
    let def = format!("def {function}(");
    let (mut at, _) = lines.find(|(_, l)| l.starts_with(&def)).unwrap();
    if !text.starts_with(&def) {
        (at, _) = lines.find(|(_, l)| l.trim() == text).unwrap();
    }
    format!("{function} (pycosts.py:{})", at + 1)
}

/// Samples whose stack has a frame starting with `function (`.
fn under(stacks: &BTreeMap<String, u64>, function: &str) -> u64 {
    let frame = format!("{function} (pycosts.py:");
    let has = |stack: &str| stack.split(';').any(|f| f.starts_with(&frame));
    stacks.iter().filter(|(s, _)| has(s)).map(|(_, n)| n).sum()
}

fn profile(python: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let script = pycosts();
    let python = python.to_str().unwrap();
    let run = record_with(&opts, &[&[python, script.as_str()], args].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        !run.stderr.contains("Python frames are unnamed"),
        "{python}: {}",
        run.stderr
    );
    folded(&run)
}

/// Samples in heavy and light that make a share within 8 points likely
/// (its standard deviation is then ~3 points).
const SHARE_SAMPLES: u64 = 200;

/// pycosts.py's profile with at least [`SHARE_SAMPLES`] samples in heavy
/// and light: its rounds are a fixed amount of work, which a fast machine
/// got through in 197-202 samples at 10 rounds, so they double until the
/// machine gives that many (or 160 rounds do not).
fn profile_enough(python: &Path) -> (BTreeMap<String, u64>, u64, u64) {
    let mut rounds = 10;
    loop {
        let stacks = profile(python, &[&rounds.to_string()]);
        let (heavy, light) = (under(&stacks, "heavy"), under(&stacks, "light"));
        if heavy + light >= SHARE_SAMPLES || rounds >= 160 {
            return (stacks, heavy, light);
        }
        rounds *= 2;
    }
}

#[test]
fn python_functions_have_the_shares_their_costs_say() {
    require_root();
    for python in interpreters() {
        let (stacks, heavy, light) = profile_enough(&python);
        assert!(
            heavy + light >= SHARE_SAMPLES,
            "{python:?}: {heavy} + {light} samples at 160 rounds"
        );
        let share = heavy as f64 * 100.0 / (heavy + light) as f64;
        assert!(
            (share - 75.0).abs() <= 8.0,
            "{python:?}: heavy has {share:.1}% of heavy + light, not 75%"
        );
        // Each under main, with spin inside, each frame named by the line
        // it was running: main's call, heavy's return (or its def line,
        // caught starting), a line of spin's (mostly its loop; a sample
        // may catch it starting or returning).
        let spin_lines = [
            frame_at("spin", "def spin(n):"),
            frame_at("spin", "total = 0"),
            frame_at("spin", "for i in range(n):"),
            frame_at("spin", "total += i % 7"),
            frame_at("spin", "return total"),
        ];
        for stack in stacks.keys().filter(|s| s.contains("heavy (")) {
            let at = |frame: String| stack.find(&frame).unwrap_or(usize::MAX);
            let main = at(frame_at("main", "heavy()"));
            let starting = at(frame_at("heavy", "def heavy():"));
            let heavy = at(frame_at("heavy", "return spin(3 * UNIT)")).min(starting);
            assert!(main < heavy && heavy != usize::MAX, "{python:?}: {stack}");
            if let Some(spin) = stack.find("spin (") {
                let line = stack[spin..].split(';').next().unwrap();
                assert!(
                    heavy < spin && spin_lines.iter().any(|l| l == line),
                    "{python:?}: {stack}"
                );
            }
        }
    }
}

#[test]
fn python_frames_replace_the_eval_loop_between_native_frames() {
    require_root();
    for python in interpreters() {
        let stacks = profile(&python, &["4"]);
        let spinning: Vec<_> = stacks.keys().filter(|s| s.contains("spin (")).collect();
        assert!(!spinning.is_empty(), "{python:?}: no samples in spin");
        for stack in spinning {
            // The interpreter's native entry is outside the Python frames,
            // and no eval frame is left among them.
            let main = stack.find("main (").unwrap();
            let entry = stack.find("Py_RunMain").unwrap_or(usize::MAX);
            assert!(entry < main, "{python:?}: {stack}");
            let python_part = &stack[main..];
            assert!(
                !python_part.contains("_PyEval_EvalFrameDefault;main"),
                "{python:?}: {stack}"
            );
        }
    }
}

/// Python called back from C (tests/workloads/pycalls.py): many samples
/// land while a native eval call enters or returns, when the native
/// stack has one more eval call than the interpreter has groups of
/// frames. The groups still pair with the calls from the outermost in:
/// an eval frame left unpaired is only ever the innermost, never one
/// between the interpreter's entry and the Python frames.
#[test]
fn python_frames_nest_as_the_calls_do_while_calls_enter_and_return() {
    require_root();
    let script = repo().join("tests/workloads/pycalls.py");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    for python in interpreters() {
        let args = [python.to_str().unwrap(), script.to_str().unwrap(), "10000"];
        let run = record_with(&opts, &args);
        assert_eq!(run.code(), 0, "{}", run.stderr);
        let (mut sampled, mut cut) = (0, 0);
        for (stack, count) in folded(&run) {
            let frames: Vec<&str> = stack.split(';').collect();
            let ours = |f: &&str| f.contains(" (pycalls.py:");
            let Some(last) = frames.iter().rposition(ours) else {
                continue;
            };
            sampled += count;
            // A walk that could not read a frame says where it stopped.
            if frames.contains(&"[stack cut short]") {
                cut += count;
                continue;
            }
            let first = frames.iter().position(ours).unwrap();
            assert!(
                frames[first].starts_with("<module> (pycalls.py:"),
                "{python:?}: {stack}"
            );
            assert!(
                !frames[..last].contains(&"_PyEval_EvalFrameDefault"),
                "{python:?}: an eval call paired with another's frames: {stack}"
            );
        }
        assert!(sampled >= 100, "{python:?}: {sampled} samples");
        assert!(cut * 4 <= sampled, "{python:?}: {cut} of {sampled} cut");
    }
}

/// Recursion deeper than the frames the kernel walks: a sample keeps the
/// innermost, and the cut stands where the outer ones were, between them
/// and the eval calls that ran them.
#[test]
fn a_python_stack_deeper_than_the_walk_says_where_it_was_cut() {
    require_root();
    let code = "def down(n):\n    return spin() if n == 0 else down(n - 1)\n\n\
                def spin():\n    t = 0\n    for i in range(2000000):\n        t += i\n\n\
                for _ in range(4):\n    down(150)\n";
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    for python in interpreters() {
        let run = record_with(&opts, &[python.to_str().unwrap(), "-c", code]);
        assert_eq!(run.code(), 0, "{}", run.stderr);
        let mut sampled = 0;
        for (stack, count) in folded(&run) {
            let frames: Vec<&str> = stack.split(';').collect();
            let Some(spin) = frames.iter().position(|f| f.starts_with("spin (")) else {
                continue;
            };
            sampled += count;
            let cut = frames.iter().rposition(|f| *f == "[stack cut short]");
            let cut = cut.unwrap_or_else(|| panic!("{python:?}: not cut: {stack}"));
            // Before 3.11 native calls stand between the Python ones.
            let walked = &frames[cut + 1..spin];
            assert!(
                walked.first().is_some_and(|f| f.starts_with("down ("))
                    && !walked.contains(&"_PyEval_EvalFrameDefault"),
                "{python:?}: {stack}"
            );
        }
        assert!(sampled >= 50, "{python:?}: {sampled} samples");
    }
}

#[test]
fn a_short_python_child_is_named_like_a_long_one() {
    require_root();
    for python in interpreters() {
        short_children_cost_what_the_parent_does(&python);
    }
}

/// Processes of ~30 ms that import (the import machinery's deep stacks
/// are their first samples' and their last): the frames of their samples
/// named, though no second sample may come to copy what a first one
/// could not. Debian's interpreter, walked from the exec on. Copying 8
/// new code objects a sample left 6-10 stacks of ~250 unnamed here; all
/// of them are named now on a quiet machine, and one was not in a full
/// run of the suite (a code object that could not be read as it ran is
/// counted and said, and not named).
#[test]
fn the_deep_first_samples_of_short_python_processes_are_named() {
    require_root();
    let Some(python) = interpreters().into_iter().next() else {
        return;
    };
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let each = format!(
        "{} -c 'import email.parser, http.client, json'",
        python.display()
    );
    let run = record_with(
        &opts,
        &[
            "sh",
            "-c",
            &format!("for i in 1 2 3 4 5 6 7 8; do {each}; done"),
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let stacks = folded(&run);
    let importing = stacks
        .iter()
        .filter(|(s, _)| s.contains(";_find_and_load (<frozen importlib._bootstrap>:"))
        .map(|(_, n)| n)
        .sum::<u64>();
    assert!(importing >= 8, "{importing} samples in imports: {stacks:?}");
    // By code object: one left unnamed is in every distinct stack through
    // it, and whole stacks of nested imports are many.
    let unnamed: std::collections::BTreeSet<&str> = (stacks.keys())
        .flat_map(|s| s.split(';'))
        .filter(|f| f.starts_with("[python]"))
        .collect();
    assert!(unnamed.len() <= 2, "{unnamed:?}\n{}", run.stderr);
}

fn short_children_cost_what_the_parent_does(python: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let times = dir.path().join("times");
    let stacks = profile(python, &["children", "6", times.to_str().unwrap()]);
    // The share of the work's CPU time the children took, as they timed
    // it themselves.
    let mut took = BTreeMap::<String, f64>::new();
    for line in std::fs::read_to_string(&times).unwrap().lines() {
        let (kind, seconds) = line.split_once(' ').unwrap();
        *took.entry(kind.to_owned()).or_default() += seconds.parse::<f64>().unwrap();
    }
    let truth = took["short"] * 100.0 / (took["short"] + took["long"]);
    let short = under(&stacks, "short_child_work");
    let long = under(&stacks, "light");
    assert!(short + long > 100, "{python:?}: {short} + {long} samples");
    let share = short as f64 * 100.0 / (short + long) as f64;
    assert!(
        (share - truth).abs() <= 8.0,
        "{python:?}: the short children have {share:.1}% of the work's samples, \
         and took {truth:.1}% of its CPU time"
    );
}

/// A probe's hits name the Python functions that made them: with
/// `uprobe:libc:malloc` (of 800 bytes), each of the lists `allocate` makes (pyalloc.py)
/// is a hit under `main` and `allocate`, between the interpreter's entry
/// and malloc, in every interpreter. Debian's, at fixed addresses, is
/// read before the command starts: every list from the first is named.
/// One on a shared libpython is found by its mapping once it runs, so it
/// allocates a twentieth as many lists at a time for a second, and at least
/// half of its lists are named.
#[test]
fn probe_hits_name_the_python_function_that_allocates() {
    require_root();
    const LISTS: u64 = 1000;
    let script = repo().join("tests/workloads/pyalloc.py");
    for python in interpreters() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("rounds");
        let fixed = python.starts_with("/usr/bin");
        let mut command = vec![python.clone().into_os_string(), script.clone().into()];
        let at_a_time = if fixed { LISTS } else { LISTS / 20 };
        command.push(at_a_time.to_string().into());
        if !fixed {
            command.extend(["1".into(), report.clone().into_os_string()]);
        }
        let mut opts = Opts::new(Mode::Ring);
        // The lists' 800 bytes alone: the interpreter's start makes
        // thousands of other calls, whose stacks a loaded machine's debug
        // build may not unwind in time (they are then counted without).
        opts.args = strings(&["--probe", "uprobe:libc:malloc if arg0 == 800"]);
        let run = record_in(dir, &opts, &command);
        assert_eq!(run.code(), 0, "{python:?}: {}", run.stderr);
        let rounds = match fixed {
            true => 1,
            false => std::fs::read_to_string(&report)
                .unwrap()
                .trim()
                .parse()
                .unwrap(),
        };
        let lists = at_a_time * rounds;
        let named = allocating_hits(&run, &python);
        let least = if fixed { lists } else { lists / 2 };
        assert!(
            (least..lists + lists / 10).contains(&named),
            "{python:?}: {named} hits in allocate, {lists} lists\n{}\n{:?}",
            run.stderr,
            run.trailer()
        );
        assert_eq!(run.trailer().lost_probe_hits, 0, "{python:?}");
    }
}

/// The hits whose stack passes through pyalloc.py's `allocate`, each
/// checked to have it under `main` and the script's module, under the
/// interpreter's native entry (or the stack's cut) and above malloc.
fn allocating_hits(run: &Run, python: &Path) -> u64 {
    let profile = crate::probes::profile_of(run);
    let mut allocating = 0;
    for hit in &profile.probe_hits {
        let frames = hit.stack.map(|s| profile.stack(s)).unwrap_or_default();
        let names: Vec<&str> = frames
            .iter()
            .map(|f| f.function.as_deref().unwrap_or("?"))
            .collect();
        let at = |prefix: &str| names.iter().position(|n| n.starts_with(prefix));
        let Some(allocate) = at("allocate (pyalloc.py:") else {
            continue;
        };
        let stack = names.join(";");
        let main = at("main (pyalloc.py:").unwrap_or(usize::MAX);
        assert!(main < allocate, "{python:?}: {stack}");
        // The script's module, not another that site compiled, ran and
        // freed at the same address (a .pth file's line: `<string>`).
        let module = names[..main]
            .iter()
            .rev()
            .find(|n| n.starts_with("<module> ("));
        assert!(
            module.is_some_and(|m| m.starts_with("<module> (pyalloc.py:")),
            "{python:?}: {stack}"
        );
        // Where the copy of the native stack was too short for the
        // interpreter's entry, the cut stands in for it.
        let entry = at("Py_").or_else(|| at("[stack cut short]"));
        assert!(
            entry.is_some_and(|entry| entry < main),
            "{python:?}: {stack}"
        );
        assert!(
            names[allocate + 1..].iter().any(|n| n.contains("malloc")),
            "{python:?}: {stack}"
        );
        allocating += hit.count;
    }
    allocating
}

/// py-spy, in tests/.venv (`install-deps.sh --test`).
fn py_spy() -> Option<PathBuf> {
    let path = repo().join("tests/.venv/bin/py-spy");
    prerequisite(path.exists(), "py-spy in tests/.venv").then_some(path)
}

/// The Python part of each stack of `folded` (its frames named `name
/// (file:line)` in pycosts.py, from `main` on), with its samples.
fn python_paths(folded: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut paths = BTreeMap::new();
    for (stack, count) in folded {
        let frames: Vec<&str> = stack
            .split(';')
            .filter(|f| f.contains(" (pycosts.py:") && !f.starts_with("<module>"))
            .collect();
        if frames.first().is_some_and(|f| f.starts_with("main (")) {
            *paths.entry(frames.join(";")).or_default() += count;
        }
    }
    paths
}

/// py-spy, which reads each interpreter's frames from outside, as the
/// oracle: the same Python stacks (function and line, `main` to `spin`)
/// as it finds, and the same share of `heavy` within 8 points.
#[test]
fn python_stacks_match_py_spy() {
    require_root();
    let Some(py_spy) = py_spy() else {
        return;
    };
    for python in interpreters() {
        let ours = python_paths(&profile(&python, &["40"]));
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("py-spy.txt");
        let status = std::process::Command::new(&py_spy)
            .args(["record", "--rate", "500", "--format", "raw", "-o"])
            .arg(&raw)
            .arg("--")
            .arg(&python)
            .args([pycosts().as_str(), "40"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{python:?}: py-spy failed");
        let text = std::fs::read_to_string(&raw).unwrap();
        let theirs: BTreeMap<String, u64> = text
            .lines()
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(stack, n)| (stack.to_owned(), n.parse().unwrap()))
            .collect();
        let theirs = python_paths(&theirs);
        let share = |paths: &BTreeMap<String, u64>| {
            let of = |f: &str| -> u64 {
                let on = paths.iter().filter(|(p, _)| p.contains(&format!(";{f} (")));
                on.map(|(_, n)| n).sum()
            };
            of("heavy") as f64 * 100.0 / (of("heavy") + of("light")).max(1) as f64
        };
        let (a, b) = (share(&ours), share(&theirs));
        assert!(
            (a - b).abs() < 8.0,
            "{python:?}: heavy {a:.1}% here, {b:.1}% by py-spy"
        );
        // Every stack py-spy saw often is one of ours, and the reverse.
        let often = |paths: &BTreeMap<String, u64>| -> Vec<String> {
            let all: u64 = paths.values().sum();
            let kept = paths.iter().filter(|(_, &n)| n * 10 >= all);
            kept.map(|(p, _)| p.clone()).collect()
        };
        for path in often(&theirs) {
            assert!(
                ours.contains_key(&path),
                "{python:?}: py-spy's {path} not here: {ours:?}"
            );
        }
        for path in often(&ours) {
            assert!(
                theirs.contains_key(&path),
                "{python:?}: {path} not py-spy's: {theirs:?}"
            );
        }
    }
}

/// The line of pyhang.py whose text is `text`, trimmed.
fn pyhang_line(text: &str) -> usize {
    let source = std::fs::read_to_string(repo().join("tests/workloads/pyhang.py")).unwrap();
    source.lines().position(|l| l.trim() == text).unwrap() + 1
}

/// `py-spy dump`'s frames of each thread, from its output: `Thread N
/// (idle): "name"` then a frame a line, indented.
fn py_spy_threads(output: &str) -> BTreeMap<Pid, Vec<String>> {
    let mut threads: BTreeMap<Pid, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            current = rest.split(' ').next().and_then(|tid| tid.parse().ok());
            threads.entry(current.unwrap_or(0)).or_default();
        } else if let (Some(tid), Some(frame)) = (current, line.strip_prefix("    ")) {
            threads
                .entry(tid)
                .or_default()
                .push(frame.trim().to_owned());
        }
    }
    threads
}

/// A hung Python process, on every interpreter: each thread's Python
/// frames in the snapshot, exactly those `py-spy dump` (run by
/// `--on-hang`) gives, and under the culprit in the hang view.
#[test]
fn a_hung_python_process_has_each_threads_python_frames() {
    require_root();
    let py_spy = py_spy();
    let script = repo().join("tests/workloads/pyhang.py");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--timeout", "3s"]);
    if let Some(py_spy) = &py_spy {
        let dump = format!("{} dump --pid {{}}", py_spy.display());
        opts.args.extend(strings(&["--on-hang", dump.as_str()]));
    }
    // Side by side: each run waits out its timeout.
    let runs: Vec<(PathBuf, Run)> = std::thread::scope(|scope| {
        let started: Vec<_> = interpreters()
            .into_iter()
            .map(|python| {
                let (opts, script) = (&opts, &script);
                scope.spawn(move || {
                    let run = record_with(opts, &[python.as_os_str(), script.as_os_str()]);
                    (python, run)
                })
            })
            .collect();
        started.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let main = [
        format!(
            "wait_for_reply (pyhang.py:{})",
            pyhang_line("return os.read(fd, 1)")
        ),
        format!("serve (pyhang.py:{})", pyhang_line("wait_for_reply(reply)")),
        format!("<module> (pyhang.py:{})", pyhang_line("serve()")),
    ];
    let worker = format!("take_the_lock (pyhang.py:{})", pyhang_line("with lock:"));
    for (python, run) in runs {
        assert_eq!(run.code(), 124, "{python:?}: {}", run.stderr);
        let root = run.root();
        let taken = crate::hang::snapshots(&run.records);
        let snapshot = taken.iter().find(|s| s.pid == root).expect("a snapshot");
        let ours: BTreeMap<Pid, Vec<String>> = snapshot
            .threads
            .iter()
            .map(|t| (t.tid, t.python.clone()))
            .collect();
        assert_eq!(ours.len(), 2, "{python:?}: {snapshot:?}");
        assert_eq!(ours[&root], main, "{python:?}: {snapshot:?}");
        let (_, other) = ours.iter().find(|(&tid, _)| tid != root).unwrap();
        assert_eq!(other.first(), Some(&worker), "{python:?}: {other:?}");
        let outermost = other.last().unwrap();
        assert!(
            [
                "_bootstrap (threading.py:",
                "Thread._bootstrap (threading.py:"
            ]
            .iter()
            .any(|f| outermost.starts_with(f)),
            "{python:?}: {other:?}"
        );
        if py_spy.is_some() {
            let dump = run.records.iter().find_map(|r| match r {
                Record::OnHang(run) if run.pid == root => Some(run.output.clone()),
                _ => None,
            });
            let dump = dump.expect("py-spy's dump");
            assert_eq!(
                py_spy_threads(&dump),
                ours,
                "{python:?}: py-spy said\n{dump}"
            );
        }
        let view = crate::hang::render_as(&run.dir.path().join("rec.ndjson"), "hang");
        let line = format!("python: {root} (main thread): {}", main.join(" ← "));
        let shown = view.lines().any(|l| l.trim_start() == line);
        assert!(shown, "{python:?}: no {line}\n{view}");
        let page = crate::hang::render_as(&run.dir.path().join("rec.ndjson"), "markdown");
        let unwrapped = unwrap_stack_lines(&page);
        let threads = [main.as_slice(), &other[..other.len().min(8)]];
        for frames in threads {
            let stack = frames.join(" ← ");
            assert!(unwrapped.contains(&stack), "{python:?}: no {stack}\n{page}");
        }
    }
}

/// A markdown page's lines, a stack's line whose frames went on over the
/// next lines (`    ← frame`) joined back: each frame must be there, none
/// cut out of the middle, and each of the stack's lines at most 120
/// columns.
fn unwrap_stack_lines(page: &str) -> String {
    let mut unwrapped = String::new();
    for line in page.lines() {
        let rest = line.trim_start();
        if rest.starts_with("python:") || rest.starts_with("← ") {
            assert!(line.chars().count() <= 120, "{line}\n{page}");
        }
        match rest.strip_prefix("← ") {
            Some(frames) => unwrapped.extend([" ← ", frames]),
            None => unwrapped.extend(["\n", line]),
        }
    }
    unwrapped
}
