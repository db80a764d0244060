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

use crate::common::require_root;

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

/// Whether the running kernel is `want` or later.
fn kernel_at_least(want: (u32, u32)) -> bool {
    let uname = nix::sys::utsname::uname().unwrap();
    let release = uname.release().to_string_lossy().into_owned();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0)) >= want
}

/// The GNU build id note of an ELF file, found by its header bytes
/// (namesz 4, descsz 20, NT_GNU_BUILD_ID, "GNU").
fn elf_build_id(path: &str) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let header = [
        4u32.to_ne_bytes(),
        20u32.to_ne_bytes(),
        3u32.to_ne_bytes(),
        *b"GNU\0",
    ]
    .concat();
    let at = bytes.windows(header.len()).position(|w| w == header)? + header.len();
    bytes.get(at..at + 20).map(<[u8]>::to_vec)
}

/// The file a mapping names is the one the kernel saw: by build id
/// where the kernel gave one, else by device and inode.
fn same_file(mapping: &Mapping) {
    if mapping.build_id.is_some() {
        assert_eq!(
            mapping.build_id,
            elf_build_id(&mapping.path),
            "{}",
            mapping.path
        );
        assert_eq!((mapping.dev, mapping.ino), (None, None));
    } else {
        let meta = std::fs::metadata(&mapping.path).unwrap();
        let dev = (libc::major(meta.dev()), libc::minor(meta.dev()));
        assert_eq!((mapping.dev, mapping.ino), (Some(dev), Some(meta.ino())));
    }
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
    if kernel_at_least((5, 12)) {
        assert!(watch.build_ids(), "build ids since 5.12");
        assert!(program.build_id.is_some() && libc.build_id.is_some());
    }
    let vdso = ours.iter().find(|m| m.path == "[vdso]").expect("[vdso]");
    assert_eq!((vdso.dev, vdso.ino, &vdso.build_id), (None, None, &None));
    assert_eq!(ours.len(), mappings(&seen).count(), "only the tree's");
}

#[test]
fn the_whole_tree_is_followed_and_nothing_else() {
    let stranger = std::process::Command::new("/bin/true").spawn().unwrap();
    // dash runs the last command of -c in its own process: `:` keeps
    // both trues in children of their own.
    let (sh, seen, watch) = watched(
        &["/bin/sh", "-c", "/bin/true; /bin/true; :"],
        DEFAULT_RING_BYTES,
    );
    let stranger_pid = stranger.id() as Pid;
    assert_eq!(watch.lost(), 0);
    assert!(mappings(&seen).all(|m| m.pid != stranger_pid));
    let mut children: Vec<Pid> = mappings(&seen)
        .filter(|m| m.pid != sh && m.path == true_path())
        .map(|m| m.pid)
        .collect();
    children.sort_unstable();
    children.dedup();
    assert_eq!(children.len(), 2, "both children, forked by sh: {seen:#?}");

    // Each child's own program is announced after its exec, and sh's
    // mappings it was forked with are not announced again.
    for &child in &children {
        let exec = exec_time(&seen, child).expect("the child's exec");
        let own: Vec<&Mapping> = mappings(&seen).filter(|m| m.pid == child).collect();
        assert!(own.iter().all(|m| m.time > exec), "{own:#?}");
        assert!(own.iter().any(|m| m.path.ends_with("/libc.so.6")));
        assert!(!own.iter().any(|m| m.path.ends_with("/dash")), "{own:#?}");
    }
    drop(stranger.wait_with_output());
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
