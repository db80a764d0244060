//! The CPU profile (`record --cpu-profile`): sampled stacks of the tree
//! only, unwound through binaries built without frame pointers, named
//! after the processes are gone, and checked against perf.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use crate::common::*;
use proctrace::event::Pid;

/// `hot` samples: three quarters in spin_a, one in spin_b, both under
/// main -> work (tests/workloads/hot.c).
const HOT: [&str; 3] = ["1500", "3", "80"];

/// The collapsed stacks `render -d cpu-folded` writes, by stack.
pub(crate) fn folded(run: &Run) -> BTreeMap<String, u64> {
    let out = run.dir.path().join("cpu.folded");
    render(&run.dir.path().join("rec.ndjson"), "cpu-folded", &out);
    let text = std::fs::read_to_string(&out).unwrap();
    text.lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').expect("STACK COUNT");
            (stack.to_owned(), count.parse().expect("a count"))
        })
        .collect()
}

/// The leaf function's share of all samples, in percent, per function
/// (GCC may name a function's clone `spin_a.constprop.0`).
fn leaf_shares(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    let total: u64 = stacks.values().sum();
    let mut shares = BTreeMap::new();
    for (stack, count) in stacks {
        let leaf = stack.rsplit(';').next().unwrap();
        let function = leaf.split('.').next().unwrap().to_owned();
        *shares.entry(function).or_insert(0.0) += *count as f64 * 100.0 / total as f64;
    }
    shares
}

/// The shares of `spin_a` and `spin_b` among the two, in percent.
fn hot_shares(shares: &BTreeMap<String, f64>) -> BTreeMap<&'static str, f64> {
    let share = |f: &str| shares.get(f).copied().unwrap_or(0.0);
    let both = share("spin_a") + share("spin_b");
    assert!(both > 0.0, "neither hot function sampled: {shares:?}");
    ["spin_a", "spin_b"]
        .into_iter()
        .map(|f| (f, share(f) * 100.0 / both))
        .collect()
}

/// perf's own answer for the same program: the share of the samples whose
/// leaf is each function, unwound with --call-graph dwarf.
fn perf_shares(program: &str, args: &[&str]) -> BTreeMap<String, f64> {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    let recorded = Command::new("perf")
        .args(["record", "-q", "-F", "999", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(recorded.success(), "perf record failed");
    let report = Command::new("perf")
        .args([
            "report",
            "--no-children",
            "--sort",
            "sym",
            "--stdio",
            "-g",
            "none",
            "-i",
        ])
        .arg(&data)
        .output()
        .unwrap();
    let mut shares = BTreeMap::new();
    for line in String::from_utf8_lossy(&report.stdout).lines() {
        // `    76.15%  [.] spin_a.constprop.0`
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [share, _, symbol, ..] = words[..] {
            if let Some(share) = share.strip_suffix('%').and_then(|s| s.parse::<f64>().ok()) {
                let function = symbol.split('.').next().unwrap().to_owned();
                *shares.entry(function).or_insert(0.0) += share;
            }
        }
    }
    shares
}

/// `proctrace record ARGS -- true`, which must fail: its status and stderr.
pub fn refused(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(recorder_bin())
        .args(["record", "-o"])
        .arg(dir.path().join("rec.ndjson"))
        .args(args)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A loop outside the tree, running all along: none of its samples may
/// leave the kernel.
struct Outsider(std::process::Child);

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stacks_without_frame_pointers_reach_main_and_match_perf() {
    if !have_tool("perf") {
        return;
    }
    let hot = workload("hot");
    let outsider = Outsider(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let args = &HOT[..];
    let run = record_with(&opts, &[&[hot.to_str().unwrap()], args].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let samples: Vec<_> = run
        .profile_lines()
        .iter()
        .filter_map(|r| match r {
            proctrace::event::Record::CpuSamples(s) => Some(s),
            _ => None,
        })
        .collect();
    assert!(
        samples.iter().all(|s| s.pid != outsider.0.id() as i32),
        "a sample of a process outside the tree"
    );
    let stacks = folded(&run);
    // Every sample in the two functions came through main and work, in
    // the root and in each short-lived child.
    for (stack, count) in &stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        if let Some(at) = frames.iter().position(|f| f.starts_with("spin_")) {
            assert!(
                at >= 2 && frames[at - 2..at] == ["main", "work"],
                "{stack} {count}: not under main;work"
            );
        }
    }
    let children: Vec<i32> = run.forks().iter().map(|f| f.child_pid).collect();
    assert_eq!(children.len(), 3, "{}", run.text);
    for child in &children {
        let sampled: u64 = samples
            .iter()
            .filter(|s| s.pid == *child)
            .map(|s| s.count)
            .sum();
        assert!(sampled > 0, "child {child} was not sampled");
    }
    // spin_a's share of the two hot functions' samples (spin_b's is the
    // rest): on a loaded machine each tool also samples more of the rest
    // (interrupts, the scheduler, the clock reads), and more so in one
    // run than in the other.
    let share_a = |stacks: &BTreeMap<String, u64>| hot_shares(&leaf_shares(stacks))["spin_a"];
    let ours = share_a(&stacks);
    // perf is as noisy: beside the other tests, six runs of each tool
    // gave spin_a 72.0-74.9% (perf) and 71.4-75.8% (ours). The oracle
    // is the median of three perf runs, not the first run near the known
    // answer: that one could sit 3 points off perf's own mean, and ours
    // then 5 past it on the other side.
    let mut perf: Vec<f64> = (0..3)
        .map(|_| hot_shares(&perf_shares(hot.to_str().unwrap(), args))["spin_a"])
        .collect();
    perf.sort_by(f64::total_cmp);
    let perf = perf[1];
    // A sanity check of the oracle, as wide as ours is held to below:
    // under a CI run's own load perf's median of three once gave spin_a
    // 80.3%, the machine's answer then and not perf's fault.
    assert!(
        (perf - 75.0).abs() < 8.0,
        "perf's own median off 75%: {perf}"
    );
    // Up to three recordings of ours; one must agree.
    let mut tried = vec![ours];
    while (tried.last().unwrap() - perf).abs() >= 5.0 && tried.len() < 3 {
        let again = record_with(&opts, &[&[hot.to_str().unwrap()], args].concat());
        assert_eq!(again.code(), 0, "{}", again.stderr);
        tried.push(share_a(&folded(&again)));
    }
    let ours = *tried.last().unwrap();
    assert!((ours - perf).abs() < 5.0, "ours: {tried:?}, perf: {perf}");
    // The program is known: three quarters and one quarter.
    assert!((ours - 75.0).abs() < 8.0, "{ours}");
}

/// The stacks of `spin` in a profile of `deep DEPTH 300` at 999 Hz
/// (tests/workloads/deep.c), as the frames above the first `descend` and
/// the number of `descend` frames, with their samples.
fn deep_stacks(depth: u32) -> BTreeMap<(String, usize), u64> {
    let deep = workload("deep");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let run = record_with(&opts, &[deep.to_str().unwrap(), &depth.to_string(), "300"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let mut stacks = BTreeMap::new();
    for (stack, count) in folded(&run) {
        let frames: Vec<&str> = stack.split(';').collect();
        if !frames.iter().any(|f| f.starts_with("spin")) {
            continue;
        }
        let first = frames.iter().position(|f| *f == "descend").expect(&stack);
        let descends = frames.iter().filter(|f| **f == "descend").count();
        *stacks
            .entry((frames[..first].join(";"), descends))
            .or_default() += count;
    }
    stacks
}

#[test]
fn a_deep_stack_reaches_its_thread_entry_and_a_deeper_one_says_it_is_cut() {
    // 101 frames of ~270 bytes: past 8 KiB, within the copy's 64 KiB.
    let stacks = deep_stacks(100);
    let entries: BTreeSet<&str> = stacks.keys().map(|(above, _)| above.as_str()).collect();
    let whole = |entry: &str| {
        stacks
            .iter()
            .filter(|((above, descends), _)| above.ends_with(entry) && *descends == 101)
            .map(|(_, count)| count)
            .sum::<u64>()
    };
    // libc's own frames are named only where its symbols are installed.
    let (main, thread) = (whole(";main"), whole(";thread_main"));
    let all: u64 = stacks.values().sum();
    assert!(main > 50 && thread > 50, "{stacks:#?}");
    assert_eq!(main + thread, all, "{stacks:#?}");
    assert!(entries.iter().all(|e| !e.contains("cut")), "{entries:?}");
    // 401 of them, ~110 KiB: cut, and said to be, after as many frames as
    // the copy held.
    let stacks = deep_stacks(400);
    assert!(!stacks.is_empty());
    for ((above, descends), count) in &stacks {
        assert_eq!(above, "deep;[stack cut short]", "{count} samples");
        assert!((200..400).contains(descends), "{descends}: {stacks:#?}");
    }
}

#[test]
fn a_profile_names_the_hottest_functions_per_command() {
    let hot = workload("hot");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=499"]);
    let run = record_with(&opts, &[hot.to_str().unwrap(), "400"]);
    let out = run.dir.path().join("cpu.txt");
    render(&run.dir.path().join("rec.ndjson"), "cpu", &out);
    let text = std::fs::read_to_string(&out).unwrap();
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("CPU profile: ") && header.contains("at 499 Hz"),
        "{text}"
    );
    let first = text.lines().nth(3).unwrap();
    assert!(
        first.contains("spin_a"),
        "the hottest function first:\n{text}"
    );
    assert!(
        text.contains("\nBy command (1 of 1), % of the run's samples:\n  100.0% hot: "),
        "{text}"
    );
}

/// `hot 400 2 50` sampled at 999 Hz: main -> work -> spin_a and spin_b
/// in the root and in its two children.
pub fn record_hot() -> Run {
    let hot = workload("hot");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let run = record_with(&opts, &[hot.to_str().unwrap(), "400", "2", "50"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    run
}

/// The frames of an SVG by inferno, by name: each frame's `<title>` is
/// `name (1,234 samples, 12.34%)`; a function in several stacks counts
/// in each.
fn svg_frames(svg: &str) -> BTreeMap<String, u64> {
    let mut frames = BTreeMap::new();
    for title in svg.split("<title>").skip(1) {
        let title = title.split("</title>").next().unwrap();
        let Some((name, rest)) = title.rsplit_once(" (") else {
            continue;
        };
        let Some((count, _)) = rest.split_once(" samples") else {
            continue;
        };
        let count: u64 = count.replace(',', "").parse().expect("a count");
        *frames.entry(name.to_owned()).or_default() += count;
    }
    frames
}

#[test]
fn cpu_flamegraph_draws_the_sampled_stacks_as_svg() {
    let run = record_hot();
    let svg = run.dir.path().join("cpu.svg");
    render(&run.dir.path().join("rec.ndjson"), "cpu-flamegraph", &svg);
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(&svg)
        .output()
        .expect("running python3");
    assert!(
        parsed.status.success(),
        "not well-formed XML: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(">proctrace: "), "no title");
    let frames = svg_frames(&text);
    // GCC may name a clone `spin_a.constprop.0`.
    let named = |function: &str| {
        frames
            .iter()
            .filter(|(name, _)| name.split('.').next() == Some(function))
            .map(|(_, count)| count)
            .sum::<u64>()
    };
    let all = frames["all"];
    let stacks = folded(&run);
    assert_eq!(all, stacks.values().sum::<u64>(), "{frames:?}");
    for function in ["main", "work", "spin_a", "spin_b"] {
        assert!(named(function) > 0, "{function} missing: {frames:?}");
    }
    // Three quarters of the loop in spin_a, a quarter in spin_b.
    assert!(named("spin_a") > 2 * named("spin_b"), "{frames:?}");
    assert!(named("work") * 10 > all * 9, "{frames:?}");
}

#[test]
fn a_rate_the_kernel_refuses_is_one_line_and_status_2() {
    let max: u32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for (rate, says) in [
        ("0".to_owned(), "at least 1 Hz".to_owned()),
        ((max + 1).to_string(), format!("at most {max} Hz")),
    ] {
        let (status, stderr) = refused(&[&format!("--cpu-profile={rate}")]);
        assert_eq!(status, Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&says), "{stderr}");
    }
}

#[test]
fn the_profile_needs_the_ring_buffer() {
    let (status, stderr) = refused(&["--perf-buffer", "--cpu-profile"]);
    assert_eq!(status, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs the ring buffer"), "{stderr}");
}

/// A culprit that runs rather than waits says what it is busy with.
#[test]
fn a_running_culprit_shows_its_hottest_stacks() {
    let hot = workload("hot");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=499", "--timeout", "1500ms"]);
    let script = format!("{} 60000 | cat", hot.display());
    let run = record_with(&opts, &["sh", "-c", &script]);
    let out = run.dir.path().join("hang.txt");
    render(&run.dir.path().join("rec.ndjson"), "hang", &out);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let culprit = lines
        .iter()
        .position(|l| l.starts_with("culprit: ") && l.contains("running"))
        .unwrap_or_else(|| panic!("no running culprit:\n{text}"));
    let busy: Vec<&&str> = lines[culprit + 1..]
        .iter()
        .take_while(|l| l.starts_with("  busy: "))
        .collect();
    assert!(
        busy.first()
            .is_some_and(|l| l.contains(" of its samples in the last 5 s: spin_a")
                && l.contains("← work ← main")),
        "{text}"
    );
}

/// JIT code is named from the runtime's perf map, read after the process
/// is gone.
#[test]
fn jit_frames_are_named_from_the_perf_map() {
    if !have_tool("node") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("jit.js");
    std::fs::write(
        &script,
        "function hotLoop(n) { let x = 0; for (let i = 0; i < n; i++) x += Math.sqrt(i) * i; return x; }\n\
         let s = 0; for (let k = 0; k < 40; k++) s += hotLoop(5e6); console.log(s > 0);\n",
    )
    .unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    // In its own directory: node leaves its logs where it runs.
    let command = format!(
        "cd {} && exec node --perf-basic-prof jit.js",
        dir.path().display()
    );
    let run = record_with(&opts, &["sh", "-c", &command]);
    let named = run.profile_lines().iter().any(|r| {
        matches!(r, proctrace::event::Record::Frame(f)
            if f.function.as_deref().is_some_and(|name| name.contains("hotLoop")))
    });
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", run.root()));
    assert!(named, "no frame names hotLoop:\n{}", run.text);
}

/// `go tool pprof ARGS FILE`'s stdout, offline: no toolchain download,
/// no cache or saved profiles outside `dir`.
fn go_pprof(dir: &std::path::Path, args: &[&str], file: &std::path::Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", dir)
        .env("GOCACHE", dir.join("cache"))
        .env("GOTOOLCHAIN", "local")
        .env("PPROF_TMPDIR", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The rows of `pprof -top`: (flat%, function).
fn top_rows(top: &str) -> Vec<(f64, String)> {
    top.lines()
        .skip_while(|line| !line.contains("flat%"))
        .skip(1)
        .filter_map(|line| {
            // ` 1296.30ms 74.00% 74.00%  1304.30ms 74.46%  spin_a.constprop.0`
            let words: Vec<&str> = line.split_whitespace().collect();
            let share = words.get(1)?.strip_suffix('%')?.parse().ok()?;
            Some((share, words.get(5..)?.join(" ")))
        })
        .collect()
}

/// What the samples of `-traces` say of `key`: the value each block of
/// the output gives it (`   pid:  5892`).
fn trace_labels(traces: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}:");
    traces
        .lines()
        .filter_map(|line| line.trim().strip_prefix(&prefix))
        .map(|value| value.trim().to_owned())
        .collect()
}

#[test]
fn go_tool_pprof_reads_the_profile_and_splits_it_by_process_and_test() {
    if !have_tool("go") {
        return;
    }
    let hot = workload("hot");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let test = "t/test_hot.py::test_spin";
    opts.env = vec![("PYTEST_CURRENT_TEST".into(), format!("{test} (call)"))];
    let run = record_with(&opts, &[&[hot.to_str().unwrap()], &HOT[..]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let dir = run.dir.path();
    let pb = dir.join("cpu.pb.gz");
    render(&dir.join("rec.ndjson"), "pprof", &pb);

    let top = go_pprof(dir, &["-top", "-nodecount=5"], &pb);
    let rows = top_rows(&top);
    let (share, first) = rows.first().unwrap_or_else(|| panic!("no rows:\n{top}"));
    assert!(first.starts_with("spin_a"), "spin_a first:\n{top}");
    assert!((share - 75.0).abs() < 10.0, "{share}% in spin_a:\n{top}");
    // The same samples as every other view: to the rounding of -top.
    let ours = leaf_shares(&folded(&run));
    assert!((share - ours["spin_a"]).abs() < 0.1, "{ours:?}\n{top}");

    let tags = go_pprof(dir, &["-tags"], &pb);
    for shown in ["pid: Total", "program: Total", "test: Total", test] {
        assert!(tags.contains(shown), "{shown:?} not in:\n{tags}");
    }
    let root = run.root();
    let children: Vec<i32> = run.forks().iter().map(|f| f.child_pid).collect();
    for pid in std::iter::once(root).chain(children.iter().copied()) {
        assert!(tags.contains(&format!(": {pid}\n")), "pid {pid}:\n{tags}");
    }

    // One child's samples only, and all of the test's.
    let child = children[0].to_string();
    let focus = format!("-tagfocus=pid={child}");
    let traces = go_pprof(dir, &[&focus, "-traces"], &pb);
    let pids = trace_labels(&traces, "pid");
    assert!(
        !pids.is_empty() && pids.iter().all(|p| *p == child),
        "{traces}"
    );
    let focus = format!("-tagfocus=test={test}");
    let traces = go_pprof(dir, &[&focus, "-traces"], &pb);
    let all = go_pprof(dir, &["-traces"], &pb);
    assert_eq!(trace_labels(&traces, "pid"), trace_labels(&all, "pid"));
    assert!(trace_labels(&all, "program").iter().all(|p| p == "hot"));
}

/// A `multiprocessing.Pool(2)` script: its workers fork from it and never
/// exec, and spin and call getppid in `work`.
const POOL: &str = "import multiprocessing, os, time
def work(n):
    end = time.process_time() + 0.3
    while time.process_time() < end:
        os.getppid()
    return n
if __name__ == '__main__':
    with multiprocessing.Pool(2) as pool:
        print(pool.map(work, range(2)))
";

/// Every view names a worker that never exec'd as the tree does: `<fork>`
/// and what it inherited, the program where a word must do; none falls
/// back to its pid.
#[test]
fn a_forked_worker_has_one_name_in_every_view() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !prerequisite(python.exists(), "/usr/bin/python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("mp.py");
    std::fs::write(&script, POOL).unwrap();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999", "--probe", "uprobe:libc:getppid"]);
    let run = record_in(dir, &opts, &["/usr/bin/python3", script.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let workers: Vec<Pid> = run
        .children(run.root())
        .into_iter()
        .filter(|&pid| run.execs(pid).is_empty())
        .collect();
    assert!(workers.len() >= 2, "{}", run.text);
    let show = |mode: &str| {
        let out = run.dir.path().join(mode);
        render(&run.dir.path().join("rec.ndjson"), mode, &out);
        std::fs::read_to_string(out).unwrap()
    };
    let tree = show("tree");
    let long = format!("<fork> /usr/bin/python3 {}", script.display());
    for pid in &workers {
        assert!(
            tree.contains(&format!("─ {pid} {long}  +")),
            "{pid}:\n{tree}"
        );
    }
    let folded = show("cpu-folded");
    let programs: BTreeSet<&str> = folded.lines().filter_map(|l| l.split(';').next()).collect();
    assert_eq!(
        programs,
        BTreeSet::from(["<fork> mp.py", "mp.py"]),
        "{folded}"
    );
    let cpu = show("cpu");
    assert!(cpu.contains(" <fork> mp.py: "), "{cpu}");
    let probes = show("probes");
    for pid in &workers {
        assert!(
            probes.contains(&format!("  {pid} <fork> mp.py\n")),
            "{pid}:\n{probes}"
        );
    }
    assert!(
        !cpu.contains("<pid ") && !probes.contains("<pid "),
        "{cpu}\n{probes}"
    );
}

/// `12.3%`, as the views write a share.
fn percent(part: u64, of: u64) -> String {
    format!("{:.1}%", part as f64 * 100.0 / of as f64)
}

/// The `  12.3% NAME: N samples, …` lines of a `cpu` section, as (share,
/// samples).
fn group_lines(section: &str) -> Vec<(String, u64)> {
    section
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("  ") && !l.starts_with("    ") && l.contains(" samples, "))
        .map(|l| {
            let (share, rest) = l.trim_start().split_once(' ').unwrap();
            let samples = rest.rsplit_once(": ").unwrap().1.split(' ').next().unwrap();
            (share.to_owned(), samples.parse().unwrap())
        })
        .collect()
}

/// Half the run inside a test, half outside: the commands' and the test's
/// shares are all of the run's samples, and the tests' heading says how
/// much of the run they hold.
#[test]
fn every_share_of_cpu_says_its_base() {
    let hot = workload("hot");
    let hot = hot.to_str().unwrap();
    let script = format!("{hot} 300; PYTEST_CURRENT_TEST='t.py::test_a (call)' {hot} 300");
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=499"]);
    let run = record_with(&opts, &["sh", "-c", &script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let out = run.dir.path().join("cpu.txt");
    render(&run.dir.path().join("rec.ndjson"), "cpu", &out);
    let text = std::fs::read_to_string(&out).unwrap();
    let total: u64 = text
        .strip_prefix("CPU profile: ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        text.lines().nth(2),
        Some("  self  total  function  (% of the run's samples)"),
        "{text}"
    );
    let (commands, tests) = text.split_once("\nBy test (1 of 1)").expect(&text);
    let commands = commands.split_once("\nBy command (").expect(&text).1;
    let commands = group_lines(commands);
    assert!(!commands.is_empty(), "{text}");
    for (share, samples) in &commands {
        assert_eq!(*share, percent(*samples, total), "{text}");
    }
    let tested = group_lines(tests);
    let [(share, in_test)] = &tested[..] else {
        panic!("one test:\n{text}")
    };
    let in_test = *in_test;
    assert_eq!(*share, percent(in_test, total), "{text}");
    assert!(in_test < total, "samples outside the test:\n{text}");
    let heading = format!(
        ", % of the run's samples, {} in tests:\n",
        percent(in_test, total)
    );
    assert!(tests.starts_with(&heading), "{text}");
    assert!(
        tests.contains("\n      self  total  function  (% of its samples)\n"),
        "{text}"
    );
}

/// The names of the frames are kept for the next recording, by file, and
/// read back from there: an entry edited between two recordings shows in
/// the second. `--no-cache` keeps nothing.
#[test]
fn frame_names_are_kept_between_recordings_unless_no_cache() {
    let cache = tempfile::tempdir().unwrap();
    let names = cache.path().join("proctrace/names");
    let hot = workload("hot");
    let hot = hot.to_str().unwrap();
    let mut opts = Opts::new(Mode::Ring);
    let home = cache.path().to_str().unwrap().to_owned();
    opts.env.push(("XDG_CACHE_HOME".into(), home));
    opts.args = strings(&["--cpu-profile=999", "--no-cache"]);
    let afresh = record_with(&opts, &[hot, "300"]);
    assert!(hot_shares(&leaf_shares(&folded(&afresh)))["spin_a"] > 0.0);
    assert!(!names.exists(), "--no-cache keeps nothing");

    opts.args = strings(&["--cpu-profile=999"]);
    let first = record_with(&opts, &[hot, "300"]);
    assert!(hot_shares(&leaf_shares(&folded(&first)))["spin_a"] > 0.0);
    let entries: Vec<_> = std::fs::read_dir(&names)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let spin_a = |data: &[u8]| data.windows(6).position(|w| w == b"spin_a");
    let kept = entries
        .iter()
        .find(|p| spin_a(&std::fs::read(p).unwrap()).is_some())
        .unwrap_or_else(|| panic!("hot's names kept: {entries:?}"));
    let file_name = kept.file_name().unwrap().to_string_lossy().into_owned();
    assert!(file_name.starts_with("b-"), "kept by build id: {file_name}");
    // Each text is kept once, whole: a name of the same length in its
    // place, with the entry's checksum (its last 4 bytes) made again, is
    // read back as hot's.
    let mut data = std::fs::read(kept).unwrap();
    let at = spin_a(&data).unwrap();
    data[at..at + 6].copy_from_slice(b"kept_a");
    let body = data.len() - 4;
    let crc = crc32fast::hash(&data[..body]);
    data[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(kept, data).unwrap();

    // (An offset the first recording did not sample is named afresh.)
    let second = record_with(&opts, &[hot, "300"]);
    let shares = leaf_shares(&folded(&second));
    let kept = shares.get("kept_a").copied().unwrap_or(0.0);
    let afresh = shares.get("spin_a").copied().unwrap_or(0.0);
    assert!(kept > afresh, "{shares:?}");
}

/// A sample taken while one of the recording's own programs ran (at
/// each fork, and at each exec, which walks the process's 890 open fds)
/// keeps the kernel's frames up to the tracepoint, and none of the
/// program's: they name nothing the command ran, and naming them read all
/// of kallsyms on every recording.
#[test]
fn samples_inside_proctraces_programs_leave_their_frames_out() {
    require_root();
    let script = "for f in $(seq 10 900); do eval \"exec $f</dev/null\"; done; \
                  for ((i = 0; i < 1500; i++)); do /bin/true; done";
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let run = record_with(&opts, &["bash", "-c", script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let stacks = folded(&run);
    let inside = |stack: &str| stack.contains("bpf_trace_run");
    let tracing: u64 = (stacks.iter())
        .filter(|(stack, _)| inside(stack))
        .map(|(_, count)| count)
        .sum();
    assert!(tracing > 0, "no sample while a program ran: {stacks:#?}");
    // Another recording's programs (the suite records in parallel) run
    // at each exec too, and return at once: the exec is not of their
    // tree. Only this recording's reach their subprograms (the fd walk):
    // a program's frame (not the kernel's `__bpf_prog_enter`) that calls
    // another is this recording's.
    let own: Vec<&String> = (stacks.keys())
        .filter(|stack| {
            let programs = stack.split(';').filter(|f| f.starts_with("bpf_prog_"));
            programs.count() > 1
        })
        .collect();
    assert!(own.is_empty(), "{own:#?}");
}

/// A program run under `chroot DIR` is unwound and named from DIR's copy
/// of its file, not from the host's file at the same path: `hot`, static
/// and without frame pointers, as DIR's `/usr/bin/true`.
#[test]
fn a_chrooted_program_is_named_from_the_files_it_maps() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("usr/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/hot.c");
    build(
        Command::new("cc")
            .args([
                "-static",
                "-O2",
                "-fomit-frame-pointer",
                "-fno-inline",
                "-o",
            ])
            .arg(bin.join("true"))
            .arg(&source),
    );
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--cpu-profile=999"]);
    let root_dir = root.path().to_str().unwrap();
    let run = record_with(&opts, &["chroot", root_dir, "/usr/bin/true", "300"]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let stacks = folded(&run);
    let under_main = |leaf: &str| {
        (stacks.iter())
            .filter(|(stack, _)| stack.contains(";main;work;") && stack.contains(leaf))
            .map(|(_, count)| count)
            .sum::<u64>()
    };
    assert!(
        under_main(";spin_a") > 0 && under_main(";spin_b") > 0,
        "no stack reaches main;work;spin_a and spin_b: {stacks:?}"
    );
    let module = format!("{root_dir}/usr/bin/true");
    let spin_a = run.profile_lines().iter().find_map(|r| match r {
        proctrace::event::Record::Frame(f)
            if f.function
                .as_deref()
                .is_some_and(|n| n.starts_with("spin_a")) =>
        {
            Some(f.module.clone())
        }
        _ => None,
    });
    assert_eq!(spin_a, Some(module), "spin_a's file");
}
