//! The answers on top of the events (critical path, processes that
//! outlived their parent, failures handled or propagated, storage I/O, cut
//! argv), each on a small real recording whose answer is known, checked
//! against figures computed from the events themselves.

use std::path::PathBuf;

use proctrace::analysis::{critical_path, failures, group_usage, outlived, programs, Peak};
use proctrace::event::Pid;
use proctrace::processes::Processes;

use crate::common::*;

fn recording(run: &Run) -> PathBuf {
    run.dir.path().join("rec.ndjson")
}

/// The index of the process that ran `argv` last.
fn index_of(processes: &Processes, argv: &[&str]) -> usize {
    (0..processes.len())
        .find(|&i| {
            let exec = processes.get(i).execs.last();
            exec.is_some_and(|e| e.argv.iter().eq(argv.iter().copied()))
        })
        .unwrap_or_else(|| panic!("no process ran {argv:?}"))
}

/// The critical path as pids and own shares; the shares add up to the
/// wall time.
fn path_of(processes: &Processes) -> Vec<(Pid, u64)> {
    let path = critical_path(processes);
    let links: Vec<(Pid, u64)> = path
        .links
        .iter()
        .map(|l| (processes.get(l.index).pid, l.own_ns))
        .collect();
    let sum: u64 = links.iter().map(|&(_, own)| own).sum();
    assert_eq!(sum, path.wall_ns, "shares add up to the wall time");
    assert_eq!(path.wall_ns, processes.wall_time());
    links
}

/// The pids `-d profile` lists under its critical path.
fn profile_path(run: &Run) -> Vec<Pid> {
    let out = run.dir.path().join("profile");
    render(&recording(run), "profile", &out);
    let profile = std::fs::read_to_string(&out).unwrap();
    let critical = profile.split("Critical path").nth(1).expect(&profile);
    critical
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect()
}

/// Two sleeps one after the other: both are on the path, and the script's
/// own share is only what neither covers.
#[test]
fn a_sequential_critical_path_has_every_step() {
    let run = record(Mode::Ring, &["sh", "-c", "sleep 0.2; sleep 0.3; true"]);
    let processes = read(&recording(&run));
    let first = index_of(&processes, &["sleep", "0.2"]);
    let second = index_of(&processes, &["sleep", "0.3"]);
    let end = processes.end();
    let duration = |i: usize| processes.get(i).duration(end);
    let expected = vec![
        (
            run.root(),
            processes.wall_time() - duration(first) - duration(second),
        ),
        (processes.get(first).pid, duration(first)),
        (processes.get(second).pid, duration(second)),
    ];
    assert_eq!(path_of(&processes), expected, "{}", run.text);
    let pids: Vec<Pid> = expected.iter().map(|&(pid, _)| pid).collect();
    assert_eq!(profile_path(&run), pids);
}

/// A daemon that outlives the script that started it through a subshell
/// ends the run: the path goes down to it, and the script's own sleep,
/// which ran beside it, is not on it.
#[test]
fn a_daemon_that_outlives_its_parent_is_on_the_critical_path() {
    let script = "(setsid sh -c 'sleep 0.6' &); sleep 0.1";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    let processes = read(&recording(&run));
    let daemon = index_of(&processes, &["sleep", "0.6"]);
    let short = index_of(&processes, &["sleep", "0.1"]);
    let path = path_of(&processes);
    let daemon_pid = processes.get(daemon).pid;
    let &(last, own) = path.last().unwrap();
    assert_eq!(last, daemon_pid, "{path:?}\n{}", run.text);
    assert_eq!(own, processes.get(daemon).duration(processes.end()));
    assert!(
        path.iter().all(|&(pid, _)| pid != processes.get(short).pid),
        "{path:?}"
    );
    // From the root down through the subshell to the daemon: each link
    // is the parent of the next.
    let parents: Vec<Option<Pid>> = path
        .iter()
        .skip(1)
        .map(|&(pid, _)| processes.all().find(|p| p.pid == pid).unwrap().parent_pid)
        .collect();
    let above: Vec<Option<Pid>> = path[..path.len() - 1]
        .iter()
        .map(|&(p, _)| Some(p))
        .collect();
    assert_eq!(parents, above, "{path:?}");
    assert_eq!(
        profile_path(&run),
        path.iter().map(|&(pid, _)| pid).collect::<Vec<_>>()
    );
}

/// `sleep 0.8 &` in a script that exits after 0.1 s: without `--linger`,
/// `leaks`, `summary` and `markdown` say it outlived the script, and by
/// how long, and `summary` says when the command itself ended.
#[test]
fn a_leak_is_reported_without_linger() {
    let run = record(Mode::Ring, &["sh", "-c", "sleep 0.8 & sleep 0.1"]);
    let processes = read(&recording(&run));
    let leak = index_of(&processes, &["sleep", "0.8"]);
    let found = outlived(&processes);
    assert_eq!(found.len(), 1, "{found:?}\n{}", run.text);
    let root_exit = run.exit(run.root()).timestamp;
    let leak_exit = run.exit(processes.get(leak).pid).timestamp;
    assert_eq!(found[0].index, leak);
    assert_eq!(found[0].by_ns, leak_exit - root_exit);
    assert_eq!(found[0].after_command_ns, Some(leak_exit - root_exit));

    let show = |mode: &str| {
        let out = run.dir.path().join(mode);
        render(&recording(&run), mode, &out);
        std::fs::read_to_string(out).unwrap()
    };
    let seconds = |ns: u64| {
        let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    };
    let pid = processes.get(leak).pid;
    let leaks = show("leaks");
    let outlived_line = format!(
        "  outlived:      {} sh (its parent) by {}",
        run.root(),
        seconds(leak_exit - root_exit)
    );
    assert!(
        leaks.starts_with("1 process outlived the process that started it\n"),
        "{leaks}"
    );
    assert!(leaks.contains(&format!("\n{pid} sleep 0.8\n")), "{leaks}");
    assert!(leaks.contains(&outlived_line), "{leaks}");
    let summary = show("summary");
    let ended = format!(
        "Ended:      +{} (exit 0); 1 process ran on",
        seconds(root_exit)
    );
    assert!(summary.contains(&ended), "{summary}");
    assert!(
        summary.contains("\nOutlived their parent (1):\n"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!(
            "{pid}  by {}  sleep 0.8",
            seconds(leak_exit - root_exit)
        )),
        "{summary}"
    );
    let markdown = show("markdown");
    assert!(
        markdown.contains("### Outlived the process that started them (1)"),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!("| {pid} | sleep 0.8 |")),
        "{markdown}"
    );
}

/// A `grep -q` that fails and is carried on from is handled; an `exit 3`
/// whose status the script passes on is propagated, listed first.
#[test]
fn handled_and_propagated_failures_are_told_apart() {
    let script = "grep -q absent /dev/null || true; sh -c 'exit 3'; status=$?; exit $status";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    assert_eq!(run.code(), 3);
    let processes = read(&recording(&run));
    let grep = index_of(&processes, &["grep", "-q", "absent", "/dev/null"]);
    let inner = index_of(&processes, &["sh", "-c", "exit 3"]);
    let root = (0..processes.len())
        .find(|&i| processes.get(i).pid == run.root())
        .unwrap();
    let found = failures(&processes);
    assert_eq!(found.propagated, [root, inner], "{}", run.text);
    assert_eq!(found.handled, [grep]);

    let out = run.dir.path().join("summary");
    render(&recording(&run), "summary", &out);
    let summary = std::fs::read_to_string(out).unwrap();
    let propagated = summary
        .find("Failed, up to the command's status (2):")
        .expect(&summary);
    let handled = summary
        .find("Failed, but the parent carried on (1):")
        .expect(&summary);
    assert!(propagated < handled, "{summary}");
    let grep_line = summary[handled..].lines().nth(1).unwrap();
    assert!(grep_line.ends_with("grep -q absent /dev/null"), "{summary}");
}

/// `rm` of a file another process just wrote cancels more writes than it
/// made: its written bytes are 0, not a wrapped-around 2^64 - n.
#[test]
fn written_bytes_are_floored_at_zero() {
    // On disk, not tmpfs: tmpfs accounts no writes.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("f");
    let script = format!("head -c 1000000 /dev/urandom > {0}; rm {0}", file.display());
    let run = record(Mode::Ring, &["sh", "-c", &script]);
    let rm = run
        .all_execs()
        .into_iter()
        .find(|e| e.argv[0] == "rm")
        .map(|e| run.exit(e.pid))
        .expect("rm ran");
    let used = rm.resources.expect("the Exit carries resources");
    assert_eq!(used.write_bytes, Some(0), "{used:?}");
}

/// An argument cut by the recorder ends in `…` in the tree and the summary.
#[test]
fn a_cut_argument_is_marked_in_every_view() {
    let long = "x".repeat(40_000);
    let run = record(Mode::Ring, &["/usr/bin/true", &long]);
    assert!(run.execs(run.root())[0].argv_truncated, "{}", run.text);
    for mode in ["tree", "summary"] {
        let out = run.dir.path().join(mode);
        render(&recording(&run), mode, &out);
        let text = std::fs::read_to_string(out).unwrap();
        // The header's command is proctrace's own argv, whole.
        let line = text
            .lines()
            .filter(|l| !l.starts_with("Command:"))
            .find(|l| l.contains(&format!("{} /usr/bin/true", run.root())) || l.contains("xxxx"))
            .unwrap_or_else(|| panic!("{mode}: {text}"));
        assert!(line.contains("xxx …"), "{mode}: {line:.200}");
    }
}

/// A `sleep` forked from a process of 100 MiB: the kernel's peak RSS for
/// it holds the forked copy, so its own is given as an upper bound; a
/// program that grows past what it had is given exactly.
#[test]
fn peak_rss_of_a_program_forked_from_a_large_parent_is_an_upper_bound() {
    if !have_tool("python3") {
        return;
    }
    let python = tool_path("python3").unwrap();
    let script = "import os\nx = b'x' * (100 << 20)\npid = os.fork()\nif pid == 0:\n    os.execv('/bin/sleep', ['sleep', '0.1'])\nos.waitpid(pid, 0)\n";
    let run = record(Mode::Ring, &[python.to_str().unwrap(), "-c", script]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let processes = read(&recording(&run));
    let end = processes.end();
    let sleep = processes.get(index_of(&processes, &["sleep", "0.1"]));
    let before = sleep.execs.last().unwrap().used_before.expect("recorded");
    assert!(before.max_rss_bytes >= 100 << 20, "{before:?}");
    let kernel = sleep.resources.unwrap().max_rss_bytes;
    assert_eq!(
        programs(&sleep, end)[0].peak_rss,
        Some(Peak::AtMost(kernel))
    );
    // python3 itself, past what it had at its exec.
    let python = processes.get(sleep.parent.unwrap());
    let own = programs(&python, end).last().unwrap().peak_rss;
    let kernel = python.resources.unwrap().max_rss_bytes;
    assert_eq!(own, Some(Peak::Exact(kernel)));
    assert!(own.unwrap().bytes() >= 100 << 20);
    let out = run.dir.path().join("profile");
    render(&recording(&run), "profile", &out);
    let profile = std::fs::read_to_string(out).unwrap();
    let row = profile
        .lines()
        .find(|l| l.ends_with("  sleep N"))
        .expect(&profile);
    assert!(row.contains(" ≤"), "{profile}");
}

/// A shell that burns CPU and then becomes `sleep`: profile files each
/// program's CPU under its own command, as the execs recorded it.
#[test]
fn profile_counts_each_exec_under_its_program() {
    let script = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; exec sleep 0.1";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    let root = run.root();
    let execs = run.execs(root);
    assert_eq!(execs.len(), 2, "{}", run.text);
    let at_sleep = execs[1].used_before.expect("recorded").cpu_ns;
    let total = run.exit(root).resources.unwrap().cpu_ns;
    let processes = read(&recording(&run));
    let ran = programs(&processes.get(0), processes.end());
    let cpu: Vec<Option<u64>> = ran.iter().map(|p| p.cpu_ns).collect();
    assert_eq!(cpu, [Some(at_sleep), Some(total - at_sleep)]);
    let usage = group_usage(&processes);
    let group = |starts: &str| {
        let found = usage.by_command.iter().find(|(g, _)| g.starts_with(starts));
        found.map(|(_, u)| (u.count, u.cpu_ns, u.failed))
    };
    assert_eq!(
        group("sleep N"),
        Some((1, total - at_sleep, 0)),
        "{usage:?}"
    );
    assert_eq!(group("sh -c "), Some((1, at_sleep, 0)), "{usage:?}");
    assert_eq!(usage.by_command.len(), 2, "{usage:?}");
    assert!(usage.by_test.is_empty(), "{usage:?}");
    let out = run.dir.path().join("profile");
    render(&recording(&run), "profile", &out);
    let profile = std::fs::read_to_string(out).unwrap();
    let cpu_of = |what: &str| {
        let row = profile.lines().find(|l| l.contains(what)).expect(&profile);
        row.split_whitespace().next().unwrap().to_string()
    };
    let seconds = |ns: u64| {
        let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    };
    assert_eq!(cpu_of("  sleep N"), seconds(total - at_sleep), "{profile}");
    assert_eq!(cpu_of("  sh -c "), seconds(at_sleep), "{profile}");
}

/// A run that leaves a subshell behind, against one that does not: diff
/// lists it once, as outlived, says "1 descendant" and names it.
#[test]
fn diff_names_what_leaked() {
    let script = "[ \"$1\" = 1 ] && { (sleep 0.3; true) & }; sleep 0.05";
    let a = record(Mode::Ring, &["sh", "-c", script, "x", "0"]);
    let b = record(Mode::Ring, &["sh", "-c", script, "x", "1"]);
    let output = proctrace(&[
        "diff",
        recording(&a).to_str().unwrap(),
        recording(&b).to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    let only = text.split("Only in B (1):\n").nth(1).expect(&text);
    let mut lines = only.lines();
    let top = lines.next().unwrap();
    assert!(top.starts_with("  <fork> sh -c "), "{text}");
    assert!(
        top.contains(", outlived its parent, and 1 descendant"),
        "{text}"
    );
    assert!(only.contains("\n      with sleep 0.3\n"), "{text}");
    assert!(!text.contains("still running in B only"), "{text}");
}
