//! `hang`: for each snapshot of the live tree, who waits for whom, from
//! the root down to the processes nothing else waits on: the culprits,
//! and the deadlocks. The graph is [`crate::analysis::hang`]'s; this only
//! formats it.

use std::io::{self, Write};

use super::Options;
use crate::analysis::hang::{Blocked, ChainLine, Hang, Seen, ThreadCycle, Wait};
use crate::analysis::hottest_stacks;
use crate::analysis::loops::Loop;
use crate::event::{OnHang, Outsider, Peer, Pid, Snapshot, SnapshotCause, WaitHow};
use crate::processes::Processes;
use crate::recording::Recording;
use crate::stacks::Profile;
use crate::text::pid_ranges;
use crate::text::{count, fd_list, seconds, shorten, shorten_command, visible};

/// What a recording cut short means for its snapshots.
pub(super) const CUT_SNAPSHOTS: &str = "a snapshot taken after the cut is missing with it";

/// Columns a command gets in a line of the chain.
const COMMAND_WIDTH: usize = 60;
/// Waits of one process named in a line; the rest are counted.
const WAITS_SHOWN: usize = 3;
/// Prefixes of the answer lines, which `summary` and `markdown` keep.
pub(super) const ANSWERS: [&str; 2] = ["culprit: ", "deadlock: "];

/// Writes every snapshot's wait-for chains.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let processes = &recording.processes;
    let snapshots = processes.snapshots();
    if let Some(note) = super::cut_note(recording, CUT_SNAPSHOTS) {
        writeln!(out, "{note}")?;
    }
    for (i, snapshot) in snapshots.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let snapshot: Vec<_> = snapshot.iter().map(|&(i, s)| (Some(i), s)).collect();
        let Some(hang) = Hang::new(processes, &snapshot) else {
            continue;
        };
        let runs = runs_at(processes, hang.timestamp);
        for line in lines_with(&hang, &runs, Some(&recording.profile)) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The lines that explain one snapshot: a heading, the chains from the
/// root down, then the answer lines (deadlocks, culprits) and the notes.
/// `snapshot` holds the records of one snapshot, each with its process's
/// index in `processes` if known.
pub fn explain(processes: &Processes, snapshot: &[(Option<usize>, &Snapshot)]) -> Vec<String> {
    Hang::new(processes, snapshot).map_or_else(Vec::new, |hang| lines(&hang))
}

/// At most `most` lines of the explanation of `hang`, for a terminal: the
/// heading, the answers, and as much of the chains as fits, then where
/// the rest is.
pub fn explain_short(hang: &Hang, most: usize) -> Vec<String> {
    let lines = lines(hang);
    if lines.len() <= most {
        return lines;
    }
    let (answers, chains): (Vec<&String>, Vec<&String>) =
        lines.iter().skip(1).partition(|l| is_answer(l));
    let room = most.saturating_sub(answers.len().min(most / 2) + 2);
    let answers_shown = most.saturating_sub(room + 2);
    let mut short = vec![lines[0].clone()];
    short.extend(chains.iter().take(room).map(|l| l.to_string()));
    short.extend(answers.iter().take(answers_shown).map(|l| l.to_string()));
    let left = lines.len() - short.len();
    short.push(format!(
        "… {left} more lines: see `proctrace render -d hang`"
    ));
    short
}

fn is_answer(line: &str) -> bool {
    ANSWERS.iter().any(|a| line.starts_with(a)) || line.starts_with("note: ")
}

/// The heading and answer lines of the last snapshot, for `summary`:
/// empty for a recording without snapshots.
pub(super) fn last_culprits(processes: &Processes) -> Vec<String> {
    let lines = last_explained(processes);
    let Some((heading, rest)) = lines.split_first() else {
        return Vec::new();
    };
    std::iter::once(heading)
        .chain(
            rest.iter()
                .filter(|l| ANSWERS.iter().any(|a| l.starts_with(a))),
        )
        .cloned()
        .collect()
}

/// The `--on-hang` runs of the snapshot taken at `timestamp`.
fn runs_at(processes: &Processes, timestamp: u64) -> Vec<&OnHang> {
    let runs = processes.on_hang().iter();
    runs.filter(|r| r.snapshot == timestamp).collect()
}

/// The `--on-hang` runs of the last snapshot.
pub(super) fn last_runs(processes: &Processes) -> Vec<&OnHang> {
    let last = processes.snapshots().pop().unwrap_or_default();
    let timestamp = last.first().map(|(_, s)| s.timestamp);
    timestamp.map_or_else(Vec::new, |t| runs_at(processes, t))
}

/// The [`explain`] lines of the last snapshot: empty for a recording
/// without snapshots.
pub(super) fn last_explained(processes: &Processes) -> Vec<String> {
    let Some(last) = processes.snapshots().pop() else {
        return Vec::new();
    };
    let last: Vec<_> = last.into_iter().map(|(i, s)| (Some(i), s)).collect();
    explain(processes, &last)
}

/// The lines of [`explain`], from the snapshot's analysis.
pub(super) fn lines(hang: &Hang) -> Vec<String> {
    lines_with(hang, &[], None)
}

/// [`lines`], with what `--on-hang` printed for each culprit under it
/// and, from a CPU profile, what a running culprit was busy with.
fn lines_with(hang: &Hang, runs: &[&OnHang], profile: Option<&Profile>) -> Vec<String> {
    let alive = hang.processes.len();
    let mut lines = vec![format!(
        "snapshot at +{} ({}): {} alive",
        seconds(hang.timestamp),
        cause(hang.cause),
        count(alive, "process", "processes")
    )];
    for link in &hang.chains {
        lines.push(chain_line(hang, link));
        if let ([member], Seen::First) = (link.members.as_slice(), &link.seen) {
            let indent = "  ".repeat(link.depth + 1);
            lines.extend(python_stacks(&hang.processes[*member], &indent));
        }
    }
    lines.extend(hang.deadlocks.iter().map(|cycle| deadlock(hang, cycle)));
    let threads = hang.thread_deadlocks.iter();
    lines.extend(threads.map(|cycle| thread_deadlock(hang, cycle)));
    let mut shown = vec![false; runs.len()];
    for group in &hang.culprits {
        lines.push(culprit(hang, group));
        lines.extend(profile.map_or_else(Vec::new, |profile| busy_with(hang, group, profile)));
        for (at, run) in runs.iter().enumerate() {
            if group.iter().any(|&m| hang.processes[m].pid == run.pid) {
                shown[at] = true;
                lines.extend(on_hang_lines(run));
            }
        }
    }
    // Runs for culprits the recorder named but this analysis does not.
    let others = runs.iter().zip(&shown).filter(|(_, &shown)| !shown);
    lines.extend(others.flat_map(|(run, _)| on_hang_lines(run)));
    if let Some(skipped) = runs.first().map(|r| r.skipped).filter(|&n| n > 0) {
        lines.push(format!(
            "  on-hang: not run for {} (at most {} runs per snapshot)",
            count(skipped, "more culprit", "more culprits"),
            runs.len()
        ));
    }
    for p in &hang.processes {
        let notes = p
            .notes
            .iter()
            .map(|note| format!("note: {}: {}", name(p), visible(note)));
        lines.extend(notes);
    }
    lines
}

/// How far back a running culprit's stacks are looked for.
const BUSY_WINDOW_NS: u64 = 5_000_000_000;
/// Stacks shown per running culprit, and functions per stack.
const BUSY_STACKS: usize = 3;
const BUSY_FRAMES: usize = 6;

/// `  busy: 74% of its samples in the last 5 s: spin_a ← work ← main`:
/// the hottest stacks of a culprit that runs rather than waits, from the
/// profile's last seconds.
fn busy_with(hang: &Hang, group: &[usize], profile: &Profile) -> Vec<String> {
    let p = &hang.processes[group[0]];
    if p.state != 'R' {
        return Vec::new();
    }
    let stacks = hottest_stacks(profile, p.pid, hang.timestamp, BUSY_WINDOW_NS);
    // Saturating: a hostile recording's counts may add up past u64.
    let total = stacks
        .iter()
        .fold(0, |sum: u64, s| sum.saturating_add(s.samples));
    let mut lines: Vec<String> = stacks
        .iter()
        .take(BUSY_STACKS)
        .map(|stack| {
            let mut frames: Vec<String> = stack
                .frames
                .iter()
                .take(BUSY_FRAMES)
                .map(|f| visible(f).into_owned())
                .collect();
            if stack.frames.len() > BUSY_FRAMES {
                frames.push("…".into());
            }
            format!(
                "  busy: {:.0}% of its samples in the last {} s: {}",
                stack.samples as f64 * 100.0 / total.max(1) as f64,
                BUSY_WINDOW_NS / 1_000_000_000,
                frames.join(" ← ")
            )
        })
        .collect();
    if stacks.len() > BUSY_STACKS {
        lines.push(format!(
            "  busy: … {} more stacks",
            stacks.len() - BUSY_STACKS
        ));
    }
    lines
}

/// Python frames shown per thread, and distinct stacks per process.
const PYTHON_FRAMES: usize = 8;
const PYTHON_STACKS: usize = 4;

/// `python: thread 12 "worker": take (pool.py:13) ← run (pool.py:40)`,
/// after `indent`: where a process's threads are in Python, as `py-spy
/// dump` shows it, the innermost frame first. Threads in the same place
/// fold.
fn python_stacks(p: &Blocked, indent: &str) -> Vec<String> {
    let mut stacks: Vec<(&Vec<String>, Vec<Pid>)> = Vec::new();
    for (&tid, frames) in &p.python {
        match stacks.iter_mut().find(|(f, _)| *f == frames) {
            Some((_, tids)) => tids.push(tid),
            None => stacks.push((frames, vec![tid])),
        }
    }
    let mut lines: Vec<String> = stacks
        .iter()
        .take(PYTHON_STACKS)
        .map(|(frames, tids)| {
            let who = match tids.as_slice() {
                [tid] if *tid == p.pid => format!("{} (main thread)", p.pid),
                [tid] => thread(p, *tid),
                _ => format!("{} threads of {}", tids.len(), p.pid),
            };
            let mut shown: Vec<String> = frames
                .iter()
                .take(PYTHON_FRAMES)
                .map(|f| visible(f).into_owned())
                .collect();
            if frames.len() > PYTHON_FRAMES {
                shown.push(format!("… {} more", frames.len() - PYTHON_FRAMES));
            }
            format!("{indent}python: {who}: {}", shown.join(" ← "))
        })
        .collect();
    if stacks.len() > PYTHON_STACKS {
        let threads: usize = stacks[PYTHON_STACKS..].iter().map(|(_, t)| t.len()).sum();
        lines.push(format!(
            "{indent}python: … {} in {} more places",
            count(threads, "thread", "threads"),
            stacks.len() - PYTHON_STACKS
        ));
    }
    lines
}

/// `on-hang for PID: `CMD` exited 0`: how one run of `--on-hang` ended.
pub fn on_hang_line(run: &OnHang) -> String {
    let signal = |s: i32| nix::sys::signal::Signal::try_from(s).map_or("a signal", |s| s.as_str());
    let ended = match (run.timed_out, run.exit_code, run.signal) {
        (true, ..) => "was killed after --on-hang-timeout".to_string(),
        (_, Some(code), _) => format!("exited {code}"),
        (_, _, Some(s)) => format!("was killed by {}", signal(s)),
        _ => "could not run".to_string(),
    };
    let mut line = format!(
        "on-hang for {}: `{}` {ended}",
        run.pid,
        visible(&run.command)
    );
    if run.cut > 0 {
        line.push_str(&format!(" ({} bytes of output cut)", run.cut));
    }
    line
}

/// [`on_hang_line`] and the run's output, indented under a culprit.
fn on_hang_lines(run: &OnHang) -> Vec<String> {
    let output = run.output.lines().map(|l| format!("    {}", visible(l)));
    std::iter::once(format!("  {}", on_hang_line(run)))
        .chain(output)
        .collect()
}

/// Why a snapshot was taken, in words.
fn cause(cause: SnapshotCause) -> String {
    match cause {
        SnapshotCause::Signal(signal) => {
            let name =
                nix::sys::signal::Signal::try_from(signal).map_or("a signal", |s| s.as_str());
            format!("proctrace got {name}")
        }
        SnapshotCause::Timeout => "--timeout expired".into(),
        SnapshotCause::Quiet => "no event for the --hang-after time".into(),
        SnapshotCause::Linger => "a process lingered".into(),
    }
}

/// `PID command`, the command it ran at the snapshot.
fn name(p: &Blocked) -> String {
    let command = shorten_command(&visible(&p.command), Some(COMMAND_WIDTH));
    format!("{} {command}", p.pid).trim_end().to_string()
}

/// `PID command`, or `N × command (pids a–b)` for a group.
fn group_name(hang: &Hang, members: &[usize]) -> String {
    let first = &hang.processes[members[0]];
    if members.len() == 1 {
        return name(first);
    }
    let pids = members.iter().map(|&m| hang.processes[m].pid).collect();
    let command = shorten_command(&visible(&first.command), Some(COMMAND_WIDTH));
    format!("{} × {command} (pids {})", members.len(), pid_ranges(pids))
}

fn test(p: &Blocked) -> Option<String> {
    p.test.as_deref().map(|t| visible(t).into_owned())
}

/// One line of a chain.
fn chain_line(hang: &Hang, link: &ChainLine) -> String {
    let indent = "  ".repeat(link.depth);
    let p = &hang.processes[link.members[0]];
    match &link.seen {
        Seen::Cycle(pids) => {
            let cycle: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
            return format!("{indent}↺ {} (a cycle: {})", name(p), cycle.join(" → "));
        }
        Seen::Above => return format!("{indent}{} (see above)", name(p)),
        Seen::First => {}
    }
    let mut line = format!("{indent}{}", group_name(hang, &link.members));
    let parent_test = link.from.and_then(|f| test(&hang.processes[f]));
    if let Some(test) = test(p).filter(|t| Some(t) != parent_test.as_ref()) {
        line.push_str(&format!(" [test \"{test}\"]"));
    }
    if let Some(fds) = link
        .from
        .and_then(|f| fds_held_for(&hang.processes[f], link.members[0]))
    {
        line.push_str(&format!(" with {}", fd_list(&fds)));
    }
    line.push_str(&format!(
        " (alive {}, quiet {}) {}{}",
        seconds(p.alive),
        seconds(p.quiet),
        doing(p),
        held_by(p)
    ));
    if link.culprit {
        line.push_str("  ← culprit");
    }
    line
}

/// The descriptors through which `holder` can end a wait of `waiter`.
fn fds_held_for(waiter: &Blocked, holder: usize) -> Option<Vec<i32>> {
    let mut fds: Vec<i32> = waiter
        .waits
        .iter()
        .flat_map(|w| w.holders.iter().filter(|(h, _)| *h == holder))
        .flat_map(|(_, fds)| fds.iter().copied())
        .collect();
    fds.sort_unstable();
    fds.dedup();
    (!fds.is_empty()).then_some(fds)
}

/// The waits a line names: those another process can end, or else all.
fn shown_waits(p: &Blocked) -> Vec<&Wait> {
    let resolved: Vec<&Wait> = p.waits.iter().filter(|w| !w.holders.is_empty()).collect();
    if resolved.is_empty() {
        p.waits.iter().collect()
    } else {
        resolved
    }
}

/// What the process is doing: the calls its threads wait in and on what,
/// or its state.
fn doing(p: &Blocked) -> String {
    let wchan = p.wchan.as_deref().map(|w| format!(" ({})", visible(w)));
    let wchan = wchan.unwrap_or_default();
    if p.stopped() {
        return format!("stopped{wchan}");
    }
    let waits = shown_waits(p);
    if let Some(children) = waits.iter().find(|w| w.on.how == WaitHow::Children) {
        // A shell's SIGCHLD wait with no child left is just a signal wait.
        let waits_for_children = matches!(children.call.as_str(), "wait4" | "waitid");
        if !children.holders.is_empty() || waits_for_children {
            return format!("waits in {} for its children", children.call);
        }
    }
    if !waits.is_empty() && waits.iter().all(|w| w.on.how != WaitHow::Children) {
        let mut named: Vec<String> = waits
            .iter()
            .take(WAITS_SHOWN)
            .map(|w| wait_text(p, w))
            .collect();
        if waits.len() > WAITS_SHOWN {
            named.push(format!("{} more", waits.len() - WAITS_SHOWN));
        }
        return format!("blocked in {}{wchan}", named.join(" and "));
    }
    match &p.call {
        Some(call) => format!("blocked in {call}{wchan}{}", cpu_text(p, " (", ")")),
        None if p.state == 'R' => format!("running{}", cpu_text(p, ", ", "")),
        None => format!("state {}{wchan}", p.state),
    }
}

/// `99% CPU for the last 0.201s, 12.000s of CPU in its 14.100s`, between
/// `before` and `after`: how much a running process used, where it was
/// watched and used any.
fn cpu_text(p: &Blocked, before: &str, after: &str) -> String {
    let Some(cpu) = p.cpu.filter(|c| c.recent_ns > 0 && c.window_ns > 0) else {
        return String::new();
    };
    let share = cpu.recent_ns as f64 * 100.0 / cpu.window_ns as f64;
    let share = if share < 1.0 {
        "<1".to_string()
    } else {
        format!("{share:.0}")
    };
    format!(
        "{before}{share}% CPU for the last {}, {} of CPU in its {}{after}",
        seconds(cpu.window_ns),
        seconds(cpu.total_ns),
        seconds(p.alive)
    )
}

/// `read(fd 0) on pipe:[12]`, `thread 9 epoll_pwait(fd 5, read) on …`,
/// with why nobody in the tree can end it when that is known.
fn wait_text(p: &Blocked, wait: &Wait) -> String {
    let thread = if wait.tid == p.pid {
        String::new()
    } else {
        format!("{} ", thread(p, wait.tid))
    };
    if matches!(wait.on.peer, Peer::Futex { .. }) {
        return format!("{thread}{}", futex_text(p, wait));
    }
    let single = wait.on.how == WaitHow::Exit
        || matches!(
            wait.call.as_str(),
            "read"
                | "readv"
                | "pread64"
                | "preadv"
                | "write"
                | "writev"
                | "pwrite64"
                | "pwritev"
                | "recvfrom"
                | "recvmsg"
                | "recvmmsg"
                | "sendto"
                | "sendmsg"
                | "sendmmsg"
                | "connect"
                | "accept"
                | "accept4"
                | "flock"
                | "fcntl"
        );
    let args = match (wait.on.fd, single) {
        (Some(fd), true) => format!("(fd {fd})"),
        (Some(fd), false) => format!("(fd {fd}, {})", how(wait.on.how)),
        (None, _) => String::new(),
    };
    let why = match &wait.on.peer {
        Peer::Unresolved { why } => format!(" ({why})"),
        _ => String::new(),
    };
    format!(
        "{thread}{}{args} on {}{why}",
        wait.call,
        visible(&wait.on.what)
    )
}

/// `thread 12 "worker"`: a thread, named when the snapshot read its name.
fn thread(p: &Blocked, tid: Pid) -> String {
    match p.thread_names.get(&tid) {
        Some(name) => format!("thread {tid} \"{}\"", visible(name)),
        None => format!("thread {tid}"),
    }
}

/// `futex on the lock at 0x…, owned by its thread 12 "worker"`, `futex
/// for its thread 12 "worker" to end`, `futex on the word at 0x… in
/// /dev/shm/sem.x (it records no owner)`. The snapshot names exactly the
/// owners that are threads of the waiter's own process: an owner without
/// a holder or a name is outside the tree.
fn futex_text(p: &Blocked, wait: &Wait) -> String {
    let what = visible(&wait.on.what);
    let call = &wait.call;
    let Some(owner) = owner_of(wait) else {
        return format!("{call} on {what} (it records no owner)");
    };
    let own = wait.holders.is_empty() && p.thread_names.contains_key(&owner);
    let whose = match (own, wait.holders.is_empty()) {
        (true, _) if owner == wait.tid => "itself".to_string(),
        (true, _) => format!("its {}", thread(p, owner)),
        (false, false) => format!("thread {owner}"),
        (false, true) => format!("thread {owner}, outside the tree"),
    };
    match wait.on.how {
        WaitHow::Exit => format!("{call} for {whose} to end"),
        _ => format!("{call} on {what}, owned by {whose}"),
    }
}

fn how(how: WaitHow) -> &'static str {
    match how {
        WaitHow::Read => "read",
        WaitHow::Write => "write",
        WaitHow::Lock => "lock",
        WaitHow::Open => "open",
        WaitHow::Connect => "connect",
        WaitHow::Children => "children",
        WaitHow::Exit => "exit",
        WaitHow::Futex => "futex",
    }
}

/// What holds the other end of a wait, and how a waiter uses it: the end
/// (`write end of pipe:[1]`) and the verb (`reads`).
fn end_of(wait: &Wait) -> (String, &'static str) {
    let what = visible(&wait.on.what);
    match (&wait.on.peer, wait.on.how) {
        (Peer::File { .. }, WaitHow::Read) => (format!("write end of {what}"), "reads"),
        (Peer::File { .. }, WaitHow::Write) => (format!("read end of {what}"), "writes"),
        (Peer::File { .. }, _) => (format!("other end of {what}"), "opens"),
        (Peer::Lock { .. }, _) => (format!("the {what}"), "waits for"),
        (Peer::Futex { .. }, _) => (what.into_owned(), "waits for"),
        (_, WaitHow::Read) => (format!("the peer of {what}"), "reads"),
        (_, WaitHow::Write) => (format!("the peer of {what}"), "writes"),
        (_, _) => (format!("the listener of {what}"), "connects to"),
    }
}

/// The end of a chain line: who holds what it waits on.
fn held_by(p: &Blocked) -> String {
    if p.stopped() {
        return String::new();
    }
    let waits = shown_waits(p);
    let holders = waits.iter().any(|w| !w.holders.is_empty());
    let unresolved = |w: &&Wait| matches!(w.on.peer, Peer::Unresolved { .. });
    let Some(wait) = waits.first().filter(|_| !waits.iter().all(unresolved)) else {
        return String::new();
    };
    let end = match (&wait.on.peer, waits.len()) {
        (Peer::Children { .. }, _) => return (if holders { ":" } else { "" }).into(),
        (Peer::Futex { .. }, _) => return futex_held_by(&waits),
        (_, 2..) => "the other ends are",
        (Peer::File { .. }, _) => match wait.on.how {
            WaitHow::Read => "its write end is",
            WaitHow::Write => "its read end is",
            _ => "its other end is",
        },
        (Peer::Socket { .. }, _) if wait.on.how == WaitHow::Connect => "its listener is",
        (Peer::Socket { .. }, _) => "its peer is",
        (Peer::Lock { .. }, _) => "the lock is",
        (Peer::Unresolved { .. }, _) => return String::new(),
    };
    if holders {
        return format!("; {end} held by:");
    }
    let own: Vec<i32> = waits.iter().flat_map(|w| w.own.iter().copied()).collect();
    if waits.iter().all(|w| w.outsiders.is_empty()) && !own.is_empty() {
        return format!("; {end} held only by itself, on {}", fd_list(&own));
    }
    format!("; {end} held by {}", outsiders(&waits))
}

/// The end of a chain line whose first wait is on a futex: the owner's
/// process follows, or the candidates, or why nobody does.
fn futex_held_by(waits: &[&Wait]) -> String {
    let candidates = waits.iter().any(|w| w.candidates);
    let holders = waits.iter().any(|w| !w.holders.is_empty());
    match (candidates, holders) {
        (true, true) => "; no owner is known, it may be held by:".into(),
        (true, false) => "; no owner is known, and no other process of the tree that maps it is free to end the wait".into(),
        (false, true) => "; held by:".into(),
        (false, false) => String::new(),
    }
}

/// Who outside the tree holds what `waits` are on, the first few named:
/// `1234 postgres (outside the tree)`, else `no process of the tree`.
fn outsiders(waits: &[&Wait]) -> String {
    const NAMED: usize = 3;
    let mut all: Vec<&Outsider> = waits.iter().flat_map(|w| &w.outsiders).collect();
    all.sort_by_key(|o| o.pid);
    all.dedup_by_key(|o| o.pid);
    if all.is_empty() {
        return "no process of the tree".into();
    }
    let named: Vec<String> = all
        .iter()
        .take(NAMED)
        .map(|o| format!("{} {}", o.pid, visible(&o.command)))
        .collect();
    let more = match all.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!("{}{more} (outside the tree)", named.join(", "))
}

/// `culprit: PID command (test "t"), blocked in …; holds fd 3 (…) that W reads`.
fn culprit(hang: &Hang, group: &[usize]) -> String {
    let p = &hang.processes[group[0]];
    let mut line = format!("culprit: {}", group_name(hang, group));
    if let Some(test) = test(p) {
        line.push_str(&format!(" (test \"{test}\")"));
    }
    match &p.looping {
        Some(looping) => {
            line.push_str(&format!(", {}", loop_text(looping)));
            if let Some(output) = &hang.output {
                let output = shorten(&visible(output), Some(COMMAND_WIDTH));
                line.push_str(&format!("; last output: {output}"));
            }
        }
        None => line.push_str(&format!(", {}{}", doing(p), held_by(p))),
    }
    // Waiters on the same thing fold: 1,000 waiters on one lock.
    let mut clauses: Vec<(String, String, Vec<usize>)> = Vec::new();
    for (at, w, fds) in &hang.waiters[group[0]] {
        let (what, verb) = holds(&hang.processes[*at].waits[*w], fds);
        match clauses.iter_mut().find(|c| c.0 == what && c.1 == verb) {
            Some(clause) => clause.2.push(*at),
            None => clauses.push((what, verb, vec![*at])),
        }
    }
    for (what, verb, waiters) in clauses {
        for waiters in hang.group(waiters) {
            let waiters = group_name(hang, &waiters);
            line.push_str(&format!("; {what} that {waiters} {verb}"));
        }
    }
    line
}

/// What a culprit holds that a waiter's `wait` is on, through `fds`, and
/// the waiter's verb: `holds fd 3 (write end of pipe:[7])`, `reads`.
fn holds(wait: &Wait, fds: &[i32]) -> (String, String) {
    let (end, verb) = end_of(wait);
    match &wait.on.peer {
        Peer::Futex { .. } if wait.candidates => (
            format!("maps {end}"),
            format!(
                "{verb} (no owner recorded: {})",
                count(
                    wait.holders.len(),
                    "process of the tree maps it",
                    "processes of the tree map it"
                )
            ),
        ),
        Peer::Futex { owner, .. } => {
            let thread = owner.map(|tid| format!(" (its thread {tid})"));
            (
                format!("holds {end}{}", thread.unwrap_or_default()),
                verb.into(),
            )
        }
        _ => (format!("holds {} ({end})", fd_list(fds)), verb.into()),
    }
}

/// `deadlock: 2 threads of 5000 prog wait for each other: thread 5001
/// "a" (futex on the lock at 0x… held by its thread 5002 "b"); …`.
fn thread_deadlock(hang: &Hang, cycle: &ThreadCycle) -> String {
    let p = &hang.processes[cycle.process];
    let members: Vec<String> = cycle
        .tids
        .iter()
        .map(|&tid| {
            let waits = p.waits.iter().filter(|w| w.tid == tid);
            let waits = waits.filter(|w| owner_of(w).is_some_and(|o| cycle.tids.contains(&o)));
            let waits: Vec<String> = waits.map(|w| futex_text(p, w)).collect();
            format!("{} ({})", thread(p, tid), waits.join(" and "))
        })
        .collect();
    let head = match cycle.tids.len() {
        1 => format!("a thread of {} waits for itself", name(p)),
        n => format!("{n} threads of {} wait for each other", name(p)),
    };
    format!("deadlock: {head}: {}", members.join("; "))
}

/// The thread a futex wait's word names.
fn owner_of(wait: &Wait) -> Option<Pid> {
    match wait.on.peer {
        Peer::Futex { owner, .. } => owner,
        _ => None,
    }
}

/// `in a loop: 140 runs in 70.012s, all exit 7: `curl -sf …``: the facts
/// first, as a narrow view cuts the end.
fn loop_text(looping: &Loop) -> String {
    let endings: Vec<String> = looping
        .endings
        .iter()
        .map(|(ending, n)| format!("{n} {ending}"))
        .collect();
    let endings = match looping.endings.as_slice() {
        [(ending, _)] => format!("all {ending}"),
        _ => endings.join(", "),
    };
    format!(
        "in a loop: {} in {}, {endings}: `{}`",
        count(looping.runs, "run", "runs"),
        seconds(looping.span),
        shorten_command(&visible(&looping.command), Some(COMMAND_WIDTH))
    )
}

/// `deadlock: A (blocked in …, waits for B); B (…, waits for A)`.
fn deadlock(hang: &Hang, cycle: &[usize]) -> String {
    let members: Vec<String> = cycle
        .iter()
        .map(|&at| {
            let p = &hang.processes[at];
            let waits_for: Vec<String> = hang
                .targets(at)
                .into_iter()
                .filter(|t| cycle.contains(t))
                .map(|t| hang.processes[t].pid.to_string())
                .collect();
            format!(
                "{} ({}, waits for {})",
                name(p),
                doing(p),
                waits_for.join(", ")
            )
        })
        .collect();
    format!(
        "deadlock: {} processes wait for each other: {}",
        cycle.len(),
        members.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(python: &[(Pid, &[&str])]) -> Blocked {
        let python = python.iter().map(|(tid, frames)| {
            let frames = frames.iter().map(|f| f.to_string()).collect();
            (*tid, frames)
        });
        Blocked {
            pid: 10,
            parent: None,
            command: "python3 serve.py".into(),
            test: None,
            state: 'S',
            alive: 0,
            quiet: 0,
            call: None,
            wchan: None,
            waits: Vec::new(),
            notes: Vec::new(),
            thread_names: Default::default(),
            looping: None,
            cpu: None,
            python: python.collect(),
        }
    }

    #[test]
    fn threads_in_the_same_python_place_fold_and_deep_stacks_say_what_is_left() {
        let deep: Vec<String> = (0..10).map(|i| format!("f{i} (a.py:{i})")).collect();
        let deep: Vec<&str> = deep.iter().map(String::as_str).collect();
        let idle: &[&str] = &["get (queue.py:171)", "work (pool.py:9)"];
        let p = blocked(&[(10, &deep), (11, idle), (12, idle), (13, idle)]);
        assert_eq!(
            python_stacks(&p, "  "),
            [
                "  python: 10 (main thread): f0 (a.py:0) ← f1 (a.py:1) ← f2 (a.py:2) ← \
                 f3 (a.py:3) ← f4 (a.py:4) ← f5 (a.py:5) ← f6 (a.py:6) ← f7 (a.py:7) ← … 2 more",
                "  python: 3 threads of 10: get (queue.py:171) ← work (pool.py:9)",
            ]
        );
    }

    #[test]
    fn past_four_python_places_the_rest_are_counted() {
        let frames: Vec<String> = (0..6).map(|i| format!("f{i} (a.py:1)")).collect();
        let places: Vec<(Pid, [&str; 1])> = (0..6)
            .map(|i| (20 + i, [frames[i as usize].as_str()]))
            .collect();
        let places: Vec<(Pid, &[&str])> = places.iter().map(|(t, f)| (*t, &f[..])).collect();
        let lines = python_stacks(&blocked(&places), "");
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], "python: thread 20: f0 (a.py:1)");
        assert_eq!(lines[4], "python: … 2 threads in 2 more places");
    }
}
