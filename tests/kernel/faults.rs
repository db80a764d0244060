//! Faults and floods: proctrace killed, its disk full, its reader slow, its
//! tree forking 50,000 processes or reusing pids. Whatever happens, the
//! traced tree is unharmed and nothing is lost without being said.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use nix::sys::signal::Signal;
use nix::sys::stat::Mode as FileMode;
use proctrace::event::Record;

/// proctrace's peak resident memory while 50,000 processes go through it.
/// What it holds is bounded by construction: the kernel's ring buffer
/// (16 MiB, mapped), the queue between the drain thread and the writer
/// (65,536 records of a few hundred bytes: some 30 MiB at worst), the
/// 100 ms reorder window and one batch of output; libbpf and the binary
/// add a few MiB. 200 MiB leaves room for allocator slack and nothing for
/// a leak that grows with the number of processes.
const PEAK_BOUND_KIB: u64 = 200 * 1024;

/// A flood takes long on a loaded 2-core machine; only a hang fails it.
const FLOOD_TIMEOUT: Duration = Duration::from_secs(300);

/// `proctrace record -o out -- cmd`, stderr into `dir/stderr`.
fn record_command(dir: &Path, out: &Path, cmd: &[OsString]) -> Command {
    let mut command = proctrace_command(&Opts::new(Mode::Ring), out, cmd);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join("stderr")).unwrap());
    command
}

/// The run of `cmd` whose recording is `text`, parsed (whole lines only).
fn finished(dir: tempfile::TempDir, cmd: &[OsString], status: ExitStatus, text: String) -> Run {
    let stderr = fs::read_to_string(dir.path().join("stderr")).unwrap_or_default();
    let records = parse_lines(&text);
    Run {
        dir,
        command: cmd
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        opts: Opts::new(Mode::Ring),
        status,
        stderr,
        text,
        records,
    }
}

fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_owned()).collect()
}

/// Polls `done` until it holds, within [`HANG_TIMEOUT`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "still waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A recording cut short: a header, then events numbered without a gap,
/// and no trailer. Returns the events.
fn cut_short(records: &[Record]) -> &[Record] {
    assert!(matches!(records.first(), Some(Record::Header(_))));
    let events = &records[1..];
    for (i, record) in events.iter().enumerate() {
        assert!(
            !matches!(record, Record::Header(_) | Record::Trailer(_)),
            "line {}: {record:?}",
            i + 2
        );
        assert_eq!(record.seq(), Some(i as u64), "seq gap");
    }
    events
}

/// `proctrace render` reads a recording without a trailer, and says so.
fn renders_with_missing_trailer_warning(path: &Path) {
    let output = proctrace_ok(&["render", "-i", path.to_str().unwrap(), "-d", "summary"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no trailer"), "{stderr}");
}

/// The BPF objects (programs, maps, links) whose fds process `pid` holds.
fn bpf_objects(pid: i32) -> BTreeSet<(String, u32)> {
    let mut found = BTreeSet::new();
    for entry in fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let info = fs::read_to_string(entry.path()).unwrap_or_default();
        for line in info.lines() {
            for kind in ["prog_id", "map_id", "link_id"] {
                if let Some(id) = line.strip_prefix(kind).and_then(|l| l.strip_prefix(':')) {
                    found.insert((kind.to_string(), id.trim().parse().unwrap()));
                }
            }
        }
    }
    found
}

/// Which of `objects` the kernel still has loaded.
fn still_loaded(objects: &BTreeSet<(String, u32)>) -> Vec<(String, u32)> {
    use libbpf_rs::query::{LinkInfoIter, MapInfoIter, ProgInfoIter};
    let mut loaded: BTreeSet<(String, u32)> = BTreeSet::new();
    loaded.extend(ProgInfoIter::default().map(|p| ("prog_id".to_string(), p.id)));
    loaded.extend(MapInfoIter::default().map(|m| ("map_id".to_string(), m.id)));
    loaded.extend(LinkInfoIter::default().map(|l| ("link_id".to_string(), l.id)));
    objects.intersection(&loaded).cloned().collect()
}

/// kill -9 of proctrace mid-recording: the tree runs on to its end, the
/// kernel drops every program, map and link proctrace had, and the
/// recording holds, in whole lines, all that was drained before the kill.
#[test]
fn kill_9_spares_the_tree_and_leaves_nothing_attached() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("go");
    let marker = dir.path().join("marker");
    nix::unistd::mkfifo(&fifo, FileMode::S_IRUSR | FileMode::S_IWUSR).unwrap();
    // Blocked on the fifo, the tree is idle when proctrace is killed.
    let script = format!(
        r#"/bin/true; read line < "{}"; /bin/true; echo "$line" > "{}""#,
        fifo.display(),
        marker.display()
    );
    let mut live = Live::start(dir, &Opts::new(Mode::Ring), &["sh", "-c", &script]);
    // Header, Exec sh, Fork, Exec true, Exit true: written while proctrace
    // waits for more, not held back until it ends.
    wait_until("the first events in the file", || {
        live.text().lines().count() >= 5
    });
    let objects = bpf_objects(live.pid());
    assert!(
        ["prog_id", "map_id", "link_id"]
            .iter()
            .all(|kind| objects.iter().any(|(k, _)| k == kind)),
        "{objects:?}"
    );
    assert_eq!(still_loaded(&objects).len(), objects.len());

    live.signal(Signal::SIGKILL);
    let status = wait_bounded(&mut live.child, "proctrace after kill -9");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // The tree is still there, waiting on the fifo (no reader: ENXIO).
    let mut go = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .expect("the tree is gone");
    go.write_all(b"finished\n").unwrap();
    drop(go);
    wait_until("the tree to finish", || {
        fs::read_to_string(&marker).is_ok_and(|m| m == "finished\n")
    });
    wait_until("the kernel to drop proctrace's BPF objects", || {
        still_loaded(&objects).is_empty()
    });

    let run = live.finish(status);
    let events = cut_short(&run.records);
    let kinds: Vec<_> = events.iter().take(4).map(Record::kind).collect();
    assert_eq!(kinds, ["Exec", "Fork", "Exec", "Exit"], "{}", run.text);
    renders_with_missing_trailer_warning(&run.dir.path().join("rec.ndjson"));
}

/// The number after `before` in `text`.
fn number_after(text: &str, before: &str) -> u64 {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in {text:?}"))
        + before.len();
    let digits: String = text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The output fills up mid-recording: proctrace says at once which file
/// failed and why, keeps following the tree to its end, cuts the file
/// back to whole lines and exits 2 saying what it kept and what it lost.
#[test]
fn a_full_disk_spares_the_tree_and_counts_the_loss() {
    let tmpfs = Tmpfs::mount("size=64k", false);
    let out = tmpfs.path().join("rec.ndjson");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    // Some 6,000 events of 100-odd bytes: ten times what fits.
    let cmd = os(&[
        &"sh",
        &"-c",
        &r#""$0" 3000 && echo done > "$1""#,
        &workload("flood"),
        &marker,
    ]);
    let mut child = record_command(dir.path(), &out, &cmd)
        .spawn()
        .expect("starting proctrace");
    let status = wait_bounded(&mut child, "proctrace on a full disk");
    // proctrace waited for the whole tree, which ran to its end.
    assert_eq!(fs::read_to_string(&marker).unwrap(), "done\n");
    let text = fs::read_to_string(&out).unwrap();
    let run = finished(dir, &cmd, status, text);
    assert_eq!(run.code(), 2, "{}", run.stderr);
    let name = out.display().to_string();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines.iter().any(|l| l.contains(&name)
            && l.contains("No space left on device")
            && l.contains("runs on")),
        "{}",
        run.stderr
    );
    let last = lines.last().unwrap();
    assert!(last.contains(&name), "{last}");
    let kept = number_after(last, "holds the first ");
    let lost = number_after(last, "trailer, the ");
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(!run.stderr.contains("WARNING"), "{}", run.stderr);

    let events = cut_short(&run.records);
    assert_eq!(events.len() as u64, kept);
    assert!(kept > 0 && lost > 0, "{last}");
    // Exec sh, Fork + Exec flood, 3000 Forks and Exits, two Exits.
    assert_eq!(kept + lost, 6005, "{last}");
    renders_with_missing_trailer_warning(&out);
}

/// A flood of `n` processes (the `flood` workload as the root): recorded
/// whole, or its losses in the trailer and on stderr, never silently short.
/// 50,000 processes outrun pid_max, so a pid may come round again within
/// the tree: each Fork must be of a pid not alive, each Exit of one alive.
fn check_flood(run: &Run, n: u64) {
    let trailer = run.trailer();
    assert_eq!(trailer.events, run.events().len() as u64);
    let mut alive: BTreeSet<i32> = [run.root()].into();
    let (mut forks, mut exits) = (0, 0);
    for (i, record) in run.events().iter().enumerate() {
        assert_eq!(record.seq(), Some(i as u64), "seq gap");
        match record {
            Record::Fork(f) => {
                forks += 1;
                assert!(alive.insert(f.child_pid), "{f:?} of a live pid");
            }
            Record::Exit(e) => {
                exits += 1;
                assert!(alive.remove(&e.pid), "{e:?} of no live pid");
            }
            _ => {}
        }
    }
    if trailer.lost == 0 {
        assert!(!trailer.interrupted, "{trailer:?}");
        assert_eq!((forks, exits), (n, n + 1), "{}", run.stderr);
        assert!(alive.is_empty(), "no exit for {alive:?}");
        assert_eq!(run.code(), 0, "{}", run.stderr);
        assert!(!run.stderr.contains("lost"), "{}", run.stderr);
    } else {
        let warning = format!("WARNING: {} events were lost", trailer.lost);
        assert!(run.stderr.contains(&warning), "{}", run.stderr);
        // Each process's Fork and Exit, the root's Exec and Exit: each
        // either recorded or counted as lost.
        assert_eq!(trailer.events + trailer.lost, 2 * n + 2, "{trailer:?}");
    }
}

/// The recording goes to a pipe whose reader waits 3 s before it reads:
/// the writer blocks, events queue behind it, and all arrive.
#[test]
fn a_slow_reader_loses_nothing_silently() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("rec.fifo");
    let copy = dir.path().join("rec.ndjson");
    nix::unistd::mkfifo(&fifo, FileMode::S_IRUSR | FileMode::S_IWUSR).unwrap();
    let cmd = os(&[&workload("flood"), &"5000"]);
    // Made (root checked) before the reader starts, which nothing would
    // end if the test stopped there.
    let mut record = record_command(dir.path(), &fifo, &cmd);
    let script = r#"exec 3< "$0"; sleep 3; exec cat <&3 > "$1""#;
    let mut reader = Command::new("sh")
        .args(["-c", script])
        .args([&fifo, &copy])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = record.spawn().expect("starting proctrace");
    let status = wait_bounded(&mut child, "proctrace writing to a slow pipe");
    let read = wait_bounded(&mut reader, "the pipe's reader");
    assert!(read.success());
    let text = fs::read_to_string(&copy).unwrap();
    let run = finished(dir, &cmd, status, text);
    check_flood(&run, 5000);
}

/// Waits for `child` (bounded); returns its status and the peak resident
/// memory, in KiB, of it and of the children it reaped.
fn wait_with_peak(child: &mut Child, bound: Duration) -> (ExitStatus, u64) {
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + bound;
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data, filled in by wait4.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to our own locals.
        let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if waited == pid {
            return (ExitStatus::from_raw(status), usage.ru_maxrss as u64);
        }
        assert_eq!(waited, 0, "wait4: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("proctrace did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 50,000 processes as fast as they can be made, in waves of 500: all
/// recorded (or the losses counted), in bounded memory.
#[test]
fn a_fork_bomb_is_recorded_in_bounded_memory() {
    let flood = workload("flood");
    let cmd = [flood.as_os_str(), "50000".as_ref()];
    let mut live = Live::start(tempfile::tempdir().unwrap(), &Opts::new(Mode::Ring), &cmd);
    let (status, peak_kib) = wait_with_peak(&mut live.child, FLOOD_TIMEOUT);
    let run = live.finish(status);
    eprintln!("proctrace's peak memory for 50,000 processes: {peak_kib} KiB");
    check_flood(&run, 50_000);
    assert!(
        peak_kib < PEAK_BOUND_KIB,
        "proctrace peaked at {peak_kib} KiB"
    );
}

/// Pids of a tracked tree exit and are taken again by processes outside
/// it, in a PID namespace whose pid_max leaves 100 pids to go round;
/// proctrace runs in it, so those are the pids it follows. The outsider
/// that got a tracked pid execs a program of its own name, which must
/// not be recorded.
fn pid_reuse(mount_proc: bool) {
    // Before 6.14 pid_max is global: lowering it would starve the machine.
    if !kernel_at_least((6, 14)) {
        eprintln!("skipped: pid_max is per PID namespace only since Linux 6.14");
        return;
    }
    let global_pid_max = fs::read_to_string("/proc/sys/kernel/pid_max").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reuse = workload("reuse");
    let outsider = d.join("proctrace-outsider");
    std::os::unix::fs::symlink(&reuse, &outsider).unwrap();
    // Pids start again at 300 once they reach pid_max: burn up to 300
    // first, so that tracked pids come round again.
    let script = r#"
        echo 400 > /proc/sys/kernel/pid_max || exit 90
        "$1" burn 300 || exit 91
        "$1" outsider "$2" "$2/proctrace-outsider" & o=$!
        "$0" record -o "$2/rec.ndjson" -- "$1" tracked "$2" 10 2> "$2/stderr"; r=$?
        wait $o; echo $? > "$2/outsider-status"
        exit $r"#;
    let mut unshare = Command::new("unshare");
    unshare.args(["--pid", "--fork", "--kill-child"]);
    if mount_proc {
        unshare.arg("--mount-proc");
    }
    let mut child = unshare
        .args(["sh", "-c", script, recorder_bin()])
        .arg(&reuse)
        .arg(d)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, "the PID namespace");
    assert_eq!(
        fs::read_to_string("/proc/sys/kernel/pid_max").unwrap(),
        global_pid_max
    );
    let read_pids = |name: &str| -> Vec<i32> {
        fs::read_to_string(d.join(name))
            .unwrap_or_default()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    };
    let tracked = read_pids("tracked");
    let reused = read_pids("reused");
    // The outsider really ran with a pid the tree had had.
    assert_eq!(
        fs::read_to_string(d.join("outsider-status"))
            .unwrap()
            .trim(),
        "0"
    );
    assert_eq!(reused.len(), 1);
    assert!(
        tracked.contains(&reused[0]),
        "{reused:?} not in {tracked:?}"
    );

    let text = fs::read_to_string(d.join("rec.ndjson")).unwrap();
    let cmd = os(&[&reuse, &"tracked", &d, &"10"]);
    let run = finished(dir, &cmd, status, text);
    run.check();
    let root = run.root();
    assert_eq!(run.children(root), tracked, "{}", run.text);
    assert!(
        !run.text.contains("proctrace-outsider"),
        "the outsider was recorded:\n{}",
        run.text
    );
    assert_eq!(run.code(), 0, "{}", run.stderr);
}

#[test]
fn reused_pids_are_not_recorded() {
    pid_reuse(false);
}

/// With a /proc of the namespace's own (as in a container), NSpid shows
/// only the innermost level: the kernel side must find the namespace's
/// level itself.
#[test]
fn reused_pids_are_not_recorded_with_the_namespace_proc() {
    pid_reuse(true);
}
