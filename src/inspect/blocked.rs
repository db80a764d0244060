//! What each thread of a live process waits on, decoded at the snapshot:
//! the call from `/proc/PID/task/TID/syscall`, its descriptors from the
//! call's arguments (poll and select sets read from the process's memory,
//! epoll sets from fdinfo), and the other end of each, as far as this
//! machine can tell (socket diagnostics, `/proc/net`, `/proc/locks`).

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::rc::Rc;

use super::futex::{self, MapLine};
use super::process::{ProcDir, Stat};
use super::sockets::{netns_of, Sockets, UnixAddress};
use crate::event::{FdKind, HeldFd, Peer, Pid, ThreadWait, WaitHow, WaitOn};
use crate::syscalls;

/// `F_SETLKW` and `F_OFD_SETLKW` (include/uapi/asm-generic/fcntl.h).
const F_SETLKW: u64 = 7;
const F_OFD_SETLKW: u64 = 38;
/// How many descriptors of a poll or select set are read at most.
const MAX_SET: u64 = 4096;
/// How deep epoll sets inside epoll sets are followed (the kernel's own
/// limit is 5).
const EPOLL_DEPTH: usize = 5;

/// What is read once per snapshot, when the first thread needs it: the
/// locks, and the sockets of each network namespace.
#[derive(Default)]
pub(super) struct Machine {
    sockets: RefCell<HashMap<Option<u64>, Rc<Sockets>>>,
    locks: OnceCell<Vec<LockLine>>,
}

impl Machine {
    /// The sockets of the network namespace `pid` is in.
    fn sockets(&self, pid: Pid) -> Rc<Sockets> {
        let netns = netns_of(pid);
        let mut read = self.sockets.borrow_mut();
        let sockets = read
            .entry(netns)
            .or_insert_with(|| Rc::new(Sockets::read(pid)));
        Rc::clone(sockets)
    }

    fn locks(&self) -> &[LockLine] {
        self.locks.get_or_init(read_locks)
    }
}

/// One process being read: its descriptors, and its memory once opened.
struct Reader<'a> {
    pid: Pid,
    dir: &'a ProcDir,
    /// The state of its one thread, when it has one: its stat was read.
    single: Option<char>,
    fds: &'a [HeldFd],
    machine: &'a Machine,
    mem: OnceCell<Option<File>>,
    maps: OnceCell<Vec<MapLine>>,
    /// Whether its tids are as proctrace sees them.
    pidns_ours: OnceCell<bool>,
}

/// The threads of `pid` and what each waits on, with notes on what could
/// not be read, and the first argument of its main thread's call.
/// `stat` is its stat: with one thread, its only thread is itself, whose
/// state that stat has, and listing them and reading it again is saved.
pub(super) fn threads(
    pid: Pid,
    dir: &ProcDir,
    stat: &Stat,
    fds: &[HeldFd],
    machine: &Machine,
    notes: &mut Vec<String>,
) -> (Vec<ThreadWait>, Option<i64>) {
    let tids = if stat.threads == 1 {
        vec![pid]
    } else {
        let Some(mut tasks) = dir.dir("task") else {
            notes.push("its threads could not be listed: it exited during the snapshot".into());
            return (Vec::new(), None);
        };
        let mut tids: Vec<Pid> = tasks
            .iter()
            .filter_map(|t| t.ok()?.file_name().to_str().ok()?.parse().ok())
            .collect();
        tids.sort_unstable();
        tids
    };
    let reader = Reader {
        pid,
        dir,
        single: (stat.threads == 1).then_some(stat.state),
        fds,
        machine,
        mem: OnceCell::new(),
        maps: OnceCell::new(),
        pidns_ours: OnceCell::new(),
    };
    let mut main_arg = None;
    let mut threads: Vec<ThreadWait> = tids
        .into_iter()
        .filter_map(|tid| match reader.thread(tid) {
            Ok((thread, first_arg)) => {
                if tid == pid {
                    main_arg = first_arg;
                }
                Some(thread)
            }
            Err(why) => {
                notes.push(format!("thread {tid}: {why}"));
                None
            }
        })
        .collect();
    name_futex_threads(dir, &mut threads);
    (threads, main_arg)
}

/// Names the threads of a futex wait that names a thread: the waiter
/// and the owner, so that a chain of threads is told by name. Other
/// threads are left unnamed, a read saved for each.
fn name_futex_threads(dir: &ProcDir, threads: &mut [ThreadWait]) {
    let mut named: Vec<Pid> = Vec::new();
    for t in threads.iter() {
        for on in &t.on {
            if let Peer::Futex {
                owner: Some(owner), ..
            } = on.peer
            {
                named.extend([t.tid, owner]);
            }
        }
    }
    for t in threads.iter_mut().filter(|t| named.contains(&t.tid)) {
        let comm = dir.read(&format!("task/{}/comm", t.tid));
        t.name = comm.ok().map(|c| c.trim_end_matches('\n').to_owned());
    }
}

/// A `/proc/PID/task/TID/syscall` line: the call and its six arguments,
/// or nothing when the thread runs or is not in a call.
fn parse_syscall(line: &str) -> Option<(i64, [u64; 6])> {
    let mut words = line.split_whitespace();
    let nr: i64 = words.next()?.parse().ok().filter(|&nr| nr >= 0)?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((nr, args))
}

/// An fd or a pid is a C int: a register's upper half is noise.
fn int(arg: u64) -> i32 {
    arg as u32 as i32
}

impl Reader<'_> {
    /// A thread, and its call's first argument as a C int.
    fn thread(&self, tid: Pid) -> Result<(ThreadWait, Option<i64>), String> {
        // The main thread's files are also the process's own, a step less.
        let at = if tid == self.pid {
            String::new()
        } else {
            format!("task/{tid}/")
        };
        let read = |file: &str| self.dir.read(&format!("{at}{file}"));
        let gone = |_| "gone during the snapshot".to_string();
        let state = match self.single {
            Some(state) => state,
            None => {
                let stat = read("stat").map_err(gone)?;
                Stat::parse(&stat).ok_or("unreadable stat")?.state
            }
        };
        let line = read("syscall").map_err(gone)?;
        let wchan = read("wchan").ok().filter(|w| !w.is_empty() && w != "0");
        let call = parse_syscall(&line);
        let name = call.and_then(|(nr, _)| syscalls::name(nr));
        let on = match (call, name) {
            (Some((_, args)), Some(name)) if !matches!(state, 'T' | 't') => {
                self.decode(tid, name, args, wchan.as_deref())?
            }
            _ => Vec::new(),
        };
        let thread = ThreadWait {
            tid,
            state,
            name: None,
            wchan,
            syscall: call.map(|(nr, _)| nr),
            call: name.map(str::to_owned),
            on,
            python: Vec::new(),
        };
        Ok((thread, call.map(|(_, args)| i64::from(int(args[0])))))
    }

    /// What call `name` with `args` waits on.
    fn decode(
        &self,
        tid: Pid,
        name: &str,
        args: [u64; 6],
        wchan: Option<&str>,
    ) -> Result<Vec<WaitOn>, String> {
        let fd = int(args[0]);
        Ok(match name {
            "read" | "readv" | "pread64" | "preadv" | "recvfrom" | "recvmsg" | "recvmmsg" => {
                self.on_fd(fd, WaitHow::Read).into_iter().collect()
            }
            "write" | "writev" | "pwrite64" | "pwritev" | "sendto" | "sendmsg" | "sendmmsg" => {
                self.on_fd(fd, WaitHow::Write).into_iter().collect()
            }
            // Copies between descriptors block on either side.
            "splice" | "copy_file_range" => self.copy(args[0], args[2], wchan),
            "tee" => self.copy(args[0], args[1], wchan),
            "sendfile" => self.copy(args[1], args[0], wchan),
            "connect" => self.connect(fd, args[1], args[2]).into_iter().collect(),
            // A server waiting for its next client: named, though any
            // process may connect.
            "accept" | "accept4" => self.on_fd(fd, WaitHow::Read).into_iter().collect(),
            "poll" | "ppoll" => self.poll_set(args[0], args[1])?,
            "select" | "pselect6" => self.select_sets(args[0], args[1], args[2])?,
            "epoll_wait" | "epoll_pwait" | "epoll_pwait2" => self.epoll_set(fd, EPOLL_DEPTH),
            "wait4" => vec![children((fd > 0).then_some(fd))],
            // waitid(P_PID, pid, ...) and waitid(P_PIDFD, fd, ...) wait for
            // that one child.
            "waitid" => vec![children(match args[0] {
                1 => Some(int(args[1])),
                3 => self.pidfd(int(args[1])),
                _ => None,
            })],
            // A shell's `wait` sleeps for SIGCHLD: its children, if any.
            "rt_sigsuspend" | "pause" | "rt_sigtimedwait" => vec![children(None)],
            "flock" => self.lock(tid, fd).into_iter().collect(),
            "fcntl" if matches!(args[1], F_SETLKW | F_OFD_SETLKW) => {
                self.lock(tid, fd).into_iter().collect()
            }
            "futex" | "futex_waitv" => self.futex(name, args),
            "open" => self.fifo(args[0]).into_iter().collect(),
            "openat" => self.fifo(args[1]).into_iter().collect(),
            _ => Vec::new(),
        })
    }

    fn held(&self, fd: i32) -> Option<&HeldFd> {
        self.fds.iter().find(|h| h.fd.fd == fd)
    }

    /// The wait on `fd`: a pipe's other end, a socket's peer; a terminal
    /// or another file is named with why nobody in the tree answers it.
    fn on_fd(&self, fd: i32, how: WaitHow) -> Option<WaitOn> {
        let held = self.held(fd)?;
        let target = &held.fd.target;
        let (what, peer) = match held.fd.kind {
            FdKind::Pipe => (
                target.clone(),
                Peer::File {
                    dev: held.fd.dev,
                    ino: held.fd.ino,
                },
            ),
            FdKind::Socket => self.machine.sockets(self.pid).peer(held.fd.ino, how),
            FdKind::Tty => self.pty_peer(fd).unwrap_or_else(|| {
                (
                    target.clone(),
                    Peer::unresolved("a terminal: whoever types"),
                )
            }),
            _ => (target.clone(), Peer::unresolved("not a pipe or a socket")),
        };
        Some(WaitOn {
            fd: Some(fd),
            how,
            what,
            peer,
        })
    }

    /// A copy from `from` to `to`: it waits to read the one or to write
    /// the other, which the kernel function it sleeps in tells for pipes.
    fn copy(&self, from: u64, to: u64, wchan: Option<&str>) -> Vec<WaitOn> {
        let (read, write) = match wchan {
            Some("pipe_wait_readable") => (true, false),
            Some("pipe_wait_writable") => (false, true),
            _ => (true, true),
        };
        let read = read.then(|| self.on_fd(int(from), WaitHow::Read));
        let write = write.then(|| self.on_fd(int(to), WaitHow::Write));
        read.flatten().into_iter().chain(write.flatten()).collect()
    }

    /// A connect(2) on `fd` to the address at `addr`. A unix socket that
    /// waits there has no peer yet: the listener's backlog is full, and
    /// the listener is found from the address.
    fn connect(&self, fd: i32, addr: u64, len: u64) -> Option<WaitOn> {
        let mut on = self.on_fd(fd, WaitHow::Connect)?;
        if !matches!(on.peer, Peer::Unresolved { .. }) {
            return Some(on);
        }
        let Some((to, shown)) = self.unix_address(addr, len) else {
            return Some(on);
        };
        on.what = format!("{} to {shown} (its backlog is full)", on.what);
        on.peer = self.machine.sockets(self.pid).unix_listener(&to);
        Some(on)
    }

    /// The unix address of `len` bytes at `addr`, and how it is shown.
    fn unix_address(&self, addr: u64, len: u64) -> Option<(UnixAddress, String)> {
        // sa_family, then sun_path: at most 108 bytes.
        let bytes = self.memory(addr, len.min(110), "address").ok()?;
        let (family, path) = bytes.split_at_checked(2)?;
        if u16::from_ne_bytes(family.try_into().ok()?) != libc::AF_UNIX as u16 {
            return None;
        }
        if let Some((0, name)) = path.split_first() {
            let name = format!("@{}", String::from_utf8_lossy(name));
            return Some((UnixAddress::Abstract(name.clone()), name));
        }
        let path = path.split(|&b| b == 0).next()?;
        let path = String::from_utf8_lossy(path).into_owned();
        let meta = fs::metadata(self.resolve(&path)).ok()?;
        let file = UnixAddress::File {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        Some((file, path))
    }

    /// `path` as the process sees it: from its root, or its working
    /// directory when relative.
    fn resolve(&self, path: &str) -> String {
        match path.strip_prefix('/') {
            Some(path) => format!("/proc/{}/root/{path}", self.pid),
            None => format!("/proc/{}/cwd/{path}", self.pid),
        }
    }

    /// The waits of a poll set: readable waits first for each descriptor,
    /// then writable. Runtimes' own wake-up descriptors (eventfd and other
    /// anonymous inodes) are left out: nobody in the tree writes them.
    fn poll_set(&self, addr: u64, count: u64) -> Result<Vec<WaitOn>, String> {
        let bytes = self.memory(addr, count.min(MAX_SET) * 8, "poll set")?;
        let mut on = Vec::new();
        for pollfd in bytes.chunks_exact(8) {
            let fd = i32::from_ne_bytes(pollfd[..4].try_into().unwrap_or_default());
            let events = i16::from_ne_bytes(pollfd[4..6].try_into().unwrap_or_default());
            // POLLIN | POLLPRI, POLLOUT.
            self.push_events(&mut on, fd, events & 0x3 != 0, events & 0x4 != 0);
        }
        Ok(on)
    }

    /// The waits of select's read and write sets, bitmaps of `nfds` bits.
    fn select_sets(&self, nfds: u64, reads: u64, writes: u64) -> Result<Vec<WaitOn>, String> {
        let nfds = nfds.min(MAX_SET);
        let set = |addr: u64| -> Result<Vec<u8>, String> {
            if addr == 0 {
                return Ok(Vec::new());
            }
            self.memory(addr, nfds.div_ceil(64) * 8, "select set")
        };
        let (reads, writes) = (set(reads)?, set(writes)?);
        let bit = |set: &[u8], fd: u64| {
            set.get(fd as usize / 8)
                .is_some_and(|b| b >> (fd % 8) & 1 == 1)
        };
        let mut on = Vec::new();
        for fd in 0..nfds {
            self.push_events(&mut on, fd as i32, bit(&reads, fd), bit(&writes, fd));
        }
        Ok(on)
    }

    /// The waits of an epoll instance: each registered descriptor with its
    /// events, and the descriptors of an epoll set registered inside it.
    fn epoll_set(&self, epfd: i32, depth: usize) -> Vec<WaitOn> {
        let info = self.dir.read(&format!("fdinfo/{epfd}"));
        let mut on = Vec::new();
        for line in info.unwrap_or_default().lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("tfd:") {
                continue;
            }
            let fd: Option<i32> = words.next().and_then(|w| w.parse().ok());
            let events = words
                .skip_while(|&w| w != "events:")
                .nth(1)
                .and_then(|w| u32::from_str_radix(w, 16).ok());
            let (Some(fd), Some(events)) = (fd, events) else {
                continue;
            };
            let nested = self
                .held(fd)
                .is_some_and(|h| h.fd.target == "anon_inode:[eventpoll]");
            if nested && depth > 0 {
                on.extend(self.epoll_set(fd, depth - 1));
            } else {
                // EPOLLIN | EPOLLPRI, EPOLLOUT.
                self.push_events(&mut on, fd, events & 0x3 != 0, events & 0x4 != 0);
            }
        }
        on
    }

    /// Adds the waits for `fd` to be readable or writable, as far as it
    /// was opened for that: Go registers every descriptor for both. A
    /// pidfd is readable once its process has ended.
    fn push_events(&self, on: &mut Vec<WaitOn>, fd: i32, read: bool, write: bool) {
        if let Some(pid) = self.pidfd(fd).filter(|_| read) {
            on.push(WaitOn {
                fd: Some(fd),
                how: WaitHow::Exit,
                what: format!("the pidfd of {pid}"),
                peer: Peer::Children { pid: Some(pid) },
            });
            return;
        }
        let Some(held) = self.held(fd).filter(|h| h.fd.kind != FdKind::Other) else {
            return;
        };
        let read = read && held.access.is_none_or(|a| a.reads());
        let write = write && held.access.is_none_or(|a| a.writes());
        let hows = [(read, WaitHow::Read), (write, WaitHow::Write)];
        for (_, how) in hows.into_iter().filter(|(wanted, _)| *wanted) {
            on.extend(self.on_fd(fd, how));
        }
    }

    /// The other end of a pseudo-terminal master (pexpect, script,
    /// expect): the processes that hold its `/dev/pts/N`, named by the
    /// master's fdinfo.
    fn pty_peer(&self, fd: i32) -> Option<(String, Peer)> {
        self.held(fd).filter(|h| h.fd.target.ends_with("/ptmx"))?;
        let pts = format!("/dev/pts/{}", self.fdinfo(fd, "tty-index:")?);
        let meta = fs::metadata(self.resolve(&pts)).ok()?;
        let peer = Peer::File {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        Some((format!("the terminal {pts}"), peer))
    }

    /// The process pidfd `fd` refers to, while it has not been reaped.
    fn pidfd(&self, fd: i32) -> Option<Pid> {
        self.held(fd)
            .filter(|h| h.fd.target == "anon_inode:[pidfd]" || h.fd.target.starts_with("pidfd:"))?;
        let pid = self.fdinfo(fd, "Pid:")?.parse().ok();
        pid.filter(|&pid: &Pid| pid > 0)
    }

    /// The value of the `key` line of `fd`'s fdinfo.
    fn fdinfo(&self, fd: i32, key: &str) -> Option<String> {
        let info = self.dir.read(&format!("fdinfo/{fd}")).ok()?;
        let value = info.lines().find_map(|l| l.strip_prefix(key))?;
        Some(value.trim().to_owned())
    }

    /// `len` bytes of the process's memory at `addr`.
    fn memory(&self, addr: u64, len: u64, what: &str) -> Result<Vec<u8>, String> {
        let mem = self.mem.get_or_init(|| self.dir.file("mem").ok());
        let unreadable = || format!("its {what} could not be read from its memory");
        let mem = mem.as_ref().ok_or_else(unreadable)?;
        let mut bytes = vec![0; len as usize];
        mem.read_exact_at(&mut bytes, addr)
            .map_err(|_| unreadable())?;
        Ok(bytes)
    }

    /// The NUL-terminated string at `addr`, read a page at a time: the
    /// page after it may not be mapped.
    fn c_string(&self, mut addr: u64) -> Option<String> {
        const PAGE: u64 = 4096;
        let mut bytes = Vec::new();
        while bytes.len() < PAGE as usize {
            let chunk = self.memory(addr, PAGE - addr % PAGE, "path").ok()?;
            match chunk.iter().position(|&b| b == 0) {
                Some(end) => {
                    bytes.extend_from_slice(&chunk[..end]);
                    return Some(String::from_utf8_lossy(&bytes).into_owned());
                }
                None => bytes.extend_from_slice(&chunk),
            }
            addr += chunk.len() as u64;
        }
        None
    }

    /// The lock `tid` waits for on `fd`, and who holds it (`/proc/locks`).
    fn lock(&self, tid: Pid, fd: i32) -> Option<WaitOn> {
        let held = self.held(fd)?;
        let (dev, ino) = (held.fd.dev, held.fd.ino);
        let locks = self.machine.locks();
        let on_file = |l: &&LockLine| l.dev == dev && l.ino == ino;
        let waiting = locks
            .iter()
            .filter(on_file)
            .find(|l| l.blocked && [tid, self.pid, -1].contains(&l.pid))?;
        let holder = locks
            .iter()
            .filter(on_file)
            .find(|l| !l.blocked && l.id == waiting.id)?;
        Some(WaitOn {
            fd: Some(fd),
            how: WaitHow::Lock,
            what: format!("{} lock on {}", holder.class, held.fd.target),
            peer: Peer::Lock {
                pid: holder.pid,
                dev,
                ino,
            },
        })
    }

    /// The futex words a futex(2) or futex_waitv(2) call waits on, with
    /// the thread each names and the shared memory each lies in.
    fn futex(&self, call: &str, args: [u64; 6]) -> Vec<WaitOn> {
        let memory = |addr, len| self.memory(addr, len, "futex word").ok();
        let words = futex::words(call, args, memory).into_iter();
        let ours = || {
            let pid = self.pid;
            *self
                .pidns_ours
                .get_or_init(|| futex::in_our_pid_namespace(pid))
        };
        let on = words.filter_map(|word| futex::wait_on(word, self.dir, memory, &self.maps, ours));
        on.collect()
    }

    /// The FIFO an open(2) at path `addr` waits on the other end of.
    fn fifo(&self, addr: u64) -> Option<WaitOn> {
        let path = self.c_string(addr)?;
        let meta = fs::metadata(self.resolve(&path)).ok()?;
        meta.file_type().is_fifo().then(|| WaitOn {
            fd: None,
            how: WaitHow::Open,
            what: format!("FIFO {path}"),
            peer: Peer::File {
                dev: meta.dev(),
                ino: meta.ino(),
            },
        })
    }
}

fn children(pid: Option<Pid>) -> WaitOn {
    WaitOn {
        fd: None,
        how: WaitHow::Children,
        what: "its children".into(),
        peer: Peer::Children { pid },
    }
}

/// One line of `/proc/locks`.
#[derive(Debug, PartialEq)]
struct LockLine {
    id: u64,
    /// A `->` line: this process waits for the lock of line `id`.
    blocked: bool,
    /// FLOCK, POSIX, OFDLCK.
    class: String,
    pid: Pid,
    dev: u64,
    ino: u64,
}

fn read_locks() -> Vec<LockLine> {
    let text = fs::read_to_string("/proc/locks").unwrap_or_default();
    text.lines().filter_map(parse_lock).collect()
}

/// `1: -> FLOCK  ADVISORY  WRITE 1234 fe:00:5357885 0 EOF`
fn parse_lock(line: &str) -> Option<LockLine> {
    let mut words = line.split_whitespace().peekable();
    let id = words.next()?.trim_end_matches(':').parse().ok()?;
    let blocked = words.next_if_eq(&"->").is_some();
    let class = words.next()?.to_string();
    let pid = words.nth(2)?.parse().ok()?;
    let mut file = words.next()?.split(':');
    let major = u32::from_str_radix(file.next()?, 16).ok()?;
    let minor = u32::from_str_radix(file.next()?, 16).ok()?;
    let ino = file.next()?.parse().ok()?;
    Some(LockLine {
        id,
        blocked,
        class,
        pid,
        dev: libc::makedev(major, minor),
        ino,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syscall_line_gives_the_call_and_its_arguments() {
        let line = "7 0x7ffd1 0x2 0xffffffff 0x0 0x0 0x0 0x7ffc 0x7f12\n";
        assert_eq!(
            parse_syscall(line),
            Some((7, [0x7ffd1, 2, 0xffffffff, 0, 0, 0]))
        );
        assert_eq!(int(0xffffffff), -1);
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(parse_syscall("-1 0x7ffc 0x7f12\n"), None);
    }

    #[test]
    fn a_blocked_lock_line_names_the_line_it_waits_for() {
        let line = parse_lock("3: -> FLOCK  ADVISORY  WRITE 1234 fe:01:5357885 0 EOF").unwrap();
        assert_eq!(
            line,
            LockLine {
                id: 3,
                blocked: true,
                class: "FLOCK".into(),
                pid: 1234,
                dev: libc::makedev(0xfe, 1),
                ino: 5357885,
            }
        );
        let held = parse_lock("3: POSIX  ADVISORY  WRITE 99 08:01:12 0 EOF").unwrap();
        assert!(!held.blocked && held.pid == 99 && held.class == "POSIX");
    }
}
