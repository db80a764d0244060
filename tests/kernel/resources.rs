//! What a process used, read in the kernel as its last thread exits,
//! against what the kernel told the process itself just before: getrusage()
//! and its CPU clock. tests/workloads/usage.c has two threads burn CPU,
//! touches 64 MiB, writes 1 MiB with fsync and sleeps.

use crate::common::*;

/// The scheduler tick at the lowest HZ a distribution builds with (100):
/// what the CPU clock may move between the report and the exit.
const TICK_NS: u64 = 10_000_000;
const PAGE: u64 = 4096;
/// Writes are accounted as pages are dirtied: a page or two may count
/// twice, or after a figure was read.
const DIRTIED_AGAIN: u64 = 2 * PAGE;
/// What the filesystem may write for a file's own blocks (inode, extents,
/// journal) and charge to the writer, beyond the file's data.
const FS_METADATA: u64 = 32 * PAGE;
/// The kernel's per-CPU RSS counter batch, with room: 64 pages.
const RSS_BATCH: u64 = 64 * PAGE;

#[test]
fn resources_match_what_the_kernel_told_the_process() {
    // On disk, not tmpfs, so that the write reaches the block layer.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let report = dir.path().join("report");
    let workload = workload("usage");
    let run = record(
        Mode::Ring,
        &[
            workload.as_os_str(),
            dir.path().as_os_str(),
            report.as_os_str(),
        ],
    );
    let text = std::fs::read_to_string(&report).unwrap();
    let told: Vec<u64> = text
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [cpu_ns, maxrss_kb, oublock, nvcsw] = told[..] else {
        panic!("report {text:?}")
    };
    let exit = run.exit(run.root());
    assert_eq!(exit.exit_code, Some(0));
    let used = exit.resources.expect("the Exit carries resources");

    // 200 ms of CPU at the least, and no more than a tick after the report.
    assert!(cpu_ns >= 200_000_000, "{text}");
    assert!(
        used.cpu_ns >= cpu_ns && used.cpu_ns - cpu_ns <= TICK_NS,
        "recorded {used:?}, told {text}"
    );
    assert_eq!(used.user_ns + used.system_ns, used.cpu_ns);
    // The burn loops read their CPU clock in a syscall: both modes show.
    assert!(used.user_ns > 0 && used.system_ns > 0, "{used:?}");
    // The mm's RSS counters are per-CPU and batched: what the process
    // reads of itself may lag by a batch, which the exit syncs.
    assert!(
        used.max_rss_bytes.abs_diff(maxrss_kb * 1024) <= RSS_BATCH,
        "recorded {used:?}, told {text}"
    );
    assert!(used.max_rss_bytes >= 64 << 20, "{used:?}");
    // The report is written after getrusage(): its page may be dirtied,
    // and so accounted, after the figures it holds.
    let written = used.write_bytes.expect("I/O accounting");
    assert!(
        written >= oublock * 512 && written - oublock * 512 <= DIRTIED_AGAIN,
        "recorded {used:?}, told {text}"
    );
    assert!(oublock * 512 >= 1 << 20, "told {text}");
    // The report itself may block once or twice before the exit.
    assert!(
        used.voluntary_switches >= nvcsw && used.voluntary_switches <= nvcsw + 4,
        "recorded {used:?}, told {text}"
    );
    assert!(used.voluntary_switches >= 5, "five sleeps: {used:?}");
    assert!(!used.partial);
}

/// Every process of an ordinary recording carries its figures, and a
/// parent's do not include its children's.
#[test]
fn every_exit_has_its_own_figures() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("data");
    let script = format!(
        "dd if=/dev/zero of={} bs=64k count=16 conv=fsync 2>/dev/null; true",
        data.display()
    );
    let run = record(Mode::Ring, &["sh", "-c", &script, "x"]);
    let exits = run.all_exits();
    assert!(exits.iter().all(|e| e.resources.is_some()), "{}", run.text);
    let dd = run
        .all_execs()
        .into_iter()
        .find(|e| e.argv[0] == "dd")
        .map(|e| run.exit(e.pid))
        .expect("dd ran");
    let sh = run.exit(run.root());
    let (dd, sh) = (dd.resources.unwrap(), sh.resources.unwrap());
    let written = dd.write_bytes.expect("I/O accounting");
    assert!(
        (1 << 20..=(1 << 20) + FS_METADATA).contains(&written),
        "{dd:?}"
    );
    assert_eq!(
        sh.write_bytes,
        Some(0),
        "the shell wrote nothing itself: {sh:?}"
    );
}

/// The critical path of a known tree: the root waits for a short sleep and
/// a subshell whose sleep is the longest, so the path runs root → subshell
/// → its sleep; `-d profile` lists it after the commands.
#[test]
fn critical_path_follows_the_slowest_chain() {
    let script = "sleep 0.1 & sh -c 'sleep 0.4; true'; wait";
    let run = record(Mode::Ring, &["sh", "-c", script]);
    let pid_of = |argv: &[&str]| {
        run.all_execs()
            .into_iter()
            .find(|e| e.argv == argv)
            .map(|e| e.pid)
            .unwrap_or_else(|| panic!("no exec of {argv:?}"))
    };
    let subshell = pid_of(&["sh", "-c", "sleep 0.4; true"]);
    let slow = pid_of(&["sleep", "0.4"]);
    let input = run.dir.path().join("rec.ndjson");
    let recording = proctrace::recording::Recording::read(
        &mut proctrace::recording::Reader::new(
            std::io::BufReader::new(std::fs::File::open(&input).unwrap()),
            "rec",
        ),
        proctrace::recording::Keep::Processes,
    )
    .unwrap();
    let processes = &recording.processes;
    let path: Vec<i32> = proctrace::analysis::critical_path(processes)
        .links
        .iter()
        .map(|l| processes.get(l.index).pid)
        .collect();
    assert_eq!(path, [run.root(), subshell, slow], "{}", run.text);
    let out = run.dir.path().join("profile");
    render(&input, "profile", &out);
    let profile = std::fs::read_to_string(&out).unwrap();
    let critical = profile.split("Critical path").nth(1).expect(&profile);
    let pids: Vec<i32> = critical
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert_eq!(pids, path, "{profile}");
    assert!(profile.contains("  sleep N\n"), "{profile}");
}
