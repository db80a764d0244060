//! The executable mappings of a tree as the kernel announces them
//! (`proctrace::recorder::watch`), against the running kernel: programs
//! started held before their exec, as the recorder starts the root.

use std::ffi::CString;
use std::io;
use std::os::unix::fs::MetadataExt;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;
use proctrace::event::Pid;
use proctrace::recorder::watch::{Mapping, MmapWatch, Seen, WatchError, DEFAULT_RING_BYTES};

use crate::common::{have_tool, kernel_at_least, require_root};

/// Forks `argv`, stopped before its exec, as the recorder holds the root.
/// (std's Command waits for the exec in spawn, so it cannot be used.)
fn spawn_held(argv: &[&str]) -> Pid {
    let args: Vec<CString> = argv.iter().map(|a| CString::new(*a).unwrap()).collect();
    let mut pointers: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: the child only makes async-signal-safe calls on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            // Held, it would keep the other tests' pipes open (their
            // O_CLOEXEC ends close only at the exec).
            libc::syscall(libc::SYS_close_range, 3, libc::c_uint::MAX, 0);
            libc::raise(libc::SIGSTOP);
            libc::execv(pointers[0], pointers.as_ptr());
            libc::_exit(127);
        }
    }
    assert!(pid > 0, "fork: {}", io::Error::last_os_error());
    let status = waitpid(NixPid::from_raw(pid), Some(WaitPidFlag::WUNTRACED)).unwrap();
    assert!(
        matches!(status, WaitStatus::Stopped(_, Signal::SIGSTOP)),
        "{status:?}"
    );
    pid
}

/// Lets a held child exec and waits for it to exit successfully.
fn release(pid: Pid) {
    kill(NixPid::from_raw(pid), Signal::SIGCONT).unwrap();
    let status = waitpid(NixPid::from_raw(pid), None).unwrap();
    assert_eq!(status, WaitStatus::Exited(NixPid::from_raw(pid), 0));
}

/// Runs `argv` under a watch; everything announced, and the watch.
fn watched(argv: &[&str], ring_bytes: usize) -> (Pid, Vec<Seen>, MmapWatch) {
    require_root();
    let pid = spawn_held(argv);
    let mut watch = MmapWatch::open_with(pid, ring_bytes).expect("perf events (as root)");
    release(pid);
    let mut seen = Vec::new();
    watch.drain(|s| seen.push(s));
    (pid, seen, watch)
}

fn mappings(seen: &[Seen]) -> impl Iterator<Item = &Mapping> {
    seen.iter().filter_map(|s| match s {
        Seen::Mapped(m) => Some(m),
        Seen::Exec { .. } => None,
    })
}

fn exec_time(seen: &[Seen], of: Pid) -> Option<u64> {
    seen.iter().find_map(|s| match s {
        Seen::Exec { pid, time } if *pid == of => Some(*time),
        _ => None,
    })
}

fn true_path() -> String {
    std::fs::canonicalize("/bin/true")
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The file a mapping names is the one the kernel saw, by device and
/// inode: the watch asks for no build ids (see `watch::attr::Features`).
fn same_file(mapping: &Mapping) {
    let meta = std::fs::metadata(&mapping.path).unwrap();
    let dev = (libc::major(meta.dev()), libc::minor(meta.dev()));
    assert_eq!((mapping.dev, mapping.ino), (Some(dev), Some(meta.ino())));
    assert_eq!(mapping.build_id, None);
}

#[test]
fn a_program_and_its_libraries_are_seen_from_its_exec() {
    let (pid, seen, watch) = watched(&["/bin/true"], DEFAULT_RING_BYTES);
    assert_eq!((watch.lost(), watch.garbled()), (0, 0));
    let exec = exec_time(&seen, pid).expect("the exec is announced");
    let ours: Vec<&Mapping> = mappings(&seen).filter(|m| m.pid == pid).collect();
    let program = ours.iter().find(|m| m.path == true_path()).expect("true");
    let libc = ours
        .iter()
        .find(|m| m.path.ends_with("/libc.so.6"))
        .expect("libc");
    for mapping in [program, libc] {
        assert!(mapping.time > exec, "mapped after the exec");
        assert!(mapping.start < mapping.end);
        same_file(mapping);
    }
    let vdso = ours.iter().find(|m| m.path == "[vdso]").expect("[vdso]");
    assert_eq!((vdso.dev, vdso.ino, &vdso.build_id), (None, None, &None));
    assert_eq!(ours.len(), mappings(&seen).count(), "only the tree's");
}

#[test]
fn the_whole_tree_is_followed_and_nothing_else() {
    require_root();
    // dash runs the last command of -c in its own process: `:` keeps
    // each true in a process of its own, the last one a grandchild.
    let sh = spawn_held(&[
        "/bin/sh",
        "-c",
        "/bin/true; /bin/true; /bin/sh -c '/bin/true; :'; :",
    ]);
    let mut watch = MmapWatch::open(sh).expect("perf events (as root)");
    // The events are every process's: one outside the tree, while they
    // are open, is left out.
    let stranger = std::process::Command::new("/bin/true").status().unwrap();
    assert!(stranger.success());
    release(sh);
    let mut seen = Vec::new();
    watch.drain(|s| seen.push(s));
    assert_eq!(watch.lost(), 0);
    let pids: std::collections::BTreeSet<Pid> = seen
        .iter()
        .map(|s| match s {
            Seen::Mapped(m) => m.pid,
            Seen::Exec { pid, .. } => *pid,
        })
        .collect();
    let mut children: Vec<Pid> = mappings(&seen)
        .filter(|m| m.pid != sh && m.path == true_path())
        .map(|m| m.pid)
        .collect();
    children.sort_unstable();
    children.dedup();
    assert_eq!(
        children.len(),
        3,
        "two children and a grandchild: {seen:#?}"
    );
    // sh, the three trues and the inner sh: nothing else.
    assert_eq!(pids.len(), 5, "{pids:?}");

    // Each child's own program is announced after its exec, and sh's
    // mappings it was forked with are not announced again.
    for &child in &children {
        let exec = exec_time(&seen, child).expect("the child's exec");
        let own: Vec<&Mapping> = mappings(&seen).filter(|m| m.pid == child).collect();
        assert!(own.iter().all(|m| m.time > exec), "{own:#?}");
        assert!(own.iter().any(|m| m.path.ends_with("/libc.so.6")));
        assert!(!own.iter().any(|m| m.path.ends_with("/dash")), "{own:#?}");
    }
}

/// The watch's events are every process's: another tool's records of
/// the same mappings are written after ours, and must read as that tool
/// asked. A build id asked for here once made perf 6.1 abort ("assertion
/// failed at util/build-id.c"): the kernel left the record header's
/// build-id flag set for the events after ours.
#[test]
fn another_tools_records_are_left_as_it_asked() {
    require_root();
    if !have_tool("perf") {
        return;
    }
    let held = spawn_held(&["/bin/true"]);
    let watch = MmapWatch::open(held).expect("perf events (as root)");
    let dir = tempfile::tempdir().unwrap();
    let perf = std::process::Command::new("perf")
        .args(["record", "-q", "-o"])
        .arg(dir.path().join("perf.data"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    release(held);
    drop(watch);
    assert!(
        perf.status.success(),
        "perf record beside the watch: {:?}\n{}",
        perf.status,
        String::from_utf8_lossy(&perf.stderr)
    );
}

#[test]
fn a_full_ring_wakes_its_poller_and_what_it_lost_is_counted() {
    require_root();
    // SAFETY: sysconf has no preconditions.
    let (page, online) = unsafe {
        (
            libc::sysconf(libc::_SC_PAGESIZE),
            libc::sysconf(libc::_SC_NPROCESSORS_ONLN),
        )
    };
    // Some 50 programs' mappings, a few KiB, into a page per CPU.
    let script = "i=0; while [ $i -lt 50 ]; do /bin/true; i=$((i+1)); done";
    let pid = spawn_held(&["/bin/sh", "-c", script]);
    let mut watch = MmapWatch::open_with(pid, 1).unwrap();
    release(pid);
    let mut fds: Vec<PollFd> = watch
        .fds()
        .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
        .collect();
    assert_eq!(fds.len() as i64, online);
    assert!(poll(&mut fds, PollTimeout::ZERO).unwrap() > 0, "readable");
    let mut seen = 0;
    watch.drain(|_| seen += 1);
    // Before 6.0 the kernel reports a loss only with a later record that
    // fits, which may never come.
    assert_eq!(watch.counts_every_loss(), kernel_at_least((6, 0)));
    if watch.counts_every_loss() {
        assert!(
            watch.lost() > 0,
            "{seen} records fit in {page} bytes per CPU"
        );
    }
    assert!(seen > 0);
    assert_eq!(watch.garbled(), 0);
}

#[test]
fn a_process_gone_is_named() {
    require_root();
    let pid = spawn_held(&["/bin/true"]);
    release(pid);
    match MmapWatch::open(pid) {
        Err(WatchError::NoSuchProcess(gone)) => assert_eq!(gone, pid),
        other => panic!("{:?}", other.map(|_| ())),
    }
}
