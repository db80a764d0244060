//! Issue #33, "hang diagnosis for every wait": one real program per kind
//! of wait a suite hangs in, recorded until `--timeout` takes the
//! snapshot, with the exact culprit or deadlock the chain must end at,
//! and never a waiter called a culprit.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{build, have_tool, record_with, Background, Mode, Opts, Run};
use crate::hang::{line_with, render_as};
use proctrace::event::Pid;

/// Long enough for any of these programs to reach its wait on a loaded
/// machine; the snapshot is taken when it expires.
const TIMEOUT: &str = "3s";

/// Records `argv` until the timeout; returns the run and `render -d hang`.
pub(crate) fn hung(argv: &[&str]) -> (Run, String) {
    hung_with(&[], argv)
}

/// [`hung`], with more options to `record`.
fn hung_with(args: &[&str], argv: &[&str]) -> (Run, String) {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = ["--timeout", TIMEOUT]
        .iter()
        .chain(args)
        .map(|a| a.to_string())
        .collect();
    let run = record_with(&opts, argv);
    assert_eq!(run.code(), 124, "{}", run.stderr);
    let view = render_as(&run.dir.path().join("rec.ndjson"), "hang");
    (run, view)
}

fn python(script: &str) -> (Run, String) {
    hung(&["/usr/bin/python3", "-c", script])
}

/// The answer lines of a view that start with `kind`.
pub(crate) fn answers<'a>(view: &'a str, kind: &str) -> Vec<&'a str> {
    view.lines().filter(|l| l.starts_with(kind)).collect()
}

/// The one culprit of `view`, which must be `pid`.
pub(crate) fn the_culprit(view: &str, pid: Pid) -> &str {
    let culprits = answers(view, "culprit: ");
    assert_eq!(culprits.len(), 1, "{view}");
    assert!(
        culprits[0].starts_with(&format!("culprit: {pid} ")),
        "{view}"
    );
    culprits[0]
}

/// The process whose last exec had `argv`.
fn with_argv(run: &Run, argv: &[&str]) -> Pid {
    let found: Vec<Pid> = run
        .pids()
        .into_iter()
        .filter(|&p| run.argvs(p).last().is_some_and(|a| a == argv))
        .collect();
    assert_eq!(found.len(), 1, "{argv:?} in\n{}", run.text);
    found[0]
}

/// The one child `parent` forked that never exec'd.
fn forked(run: &Run, parent: Pid) -> Pid {
    let found: Vec<Pid> = run
        .children(parent)
        .into_iter()
        .filter(|&c| run.argvs(c).is_empty())
        .collect();
    assert_eq!(found.len(), 1, "{}", run.text);
    found[0]
}

/// A child that leaves a grandchild holding its stdout and stderr.
const LEAKY: &str = "['sh', '-c', 'sleep 1000 & echo hi']";

/// What a leaked grandchild holds of a pipe its runner reads.
const PIPE: &str = "(write end of pipe:[";

/// The leaked `sleep 1000` is the culprit, holding the pipes the root
/// waits on; the root is no culprit.
fn leaked_sleep_is_the_culprit(run: &Run, view: &str, call: &str, end: &str) {
    let sleep = with_argv(run, &["sleep", "1000"]);
    let culprit = the_culprit(view, sleep);
    let root = run.root();
    assert!(culprit.contains(end), "{view}");
    assert!(culprit.contains(&format!("that {root} ")), "{view}");
    let waiter = line_with(view, &[&format!("  {root} ")]);
    assert!(waiter.contains(call), "{view}");
    assert!(waiter.ends_with("held by:"), "{view}");
}

#[test]
fn python_capture_output_waits_in_poll_for_the_leaked_grandchild() {
    let (run, view) = python(&format!(
        "import subprocess; subprocess.run({LEAKY}, capture_output=True)"
    ));
    leaked_sleep_is_the_culprit(&run, &view, "blocked in poll(fd ", PIPE);
}

#[test]
fn select_on_a_pipe_waits_for_the_leaked_grandchild() {
    let (run, view) = python(&format!(
        "import os, select, subprocess\n\
         p = subprocess.Popen({LEAKY}, stdout=subprocess.PIPE)\n\
         while True:\n\
         \x20   select.select([p.stdout], [], [])\n\
         \x20   if not os.read(p.stdout.fileno(), 100): break\n"
    ));
    // glibc makes select(2) a pselect6 on some machines.
    let call = if view.contains("blocked in pselect6") {
        "blocked in pselect6(fd "
    } else {
        "blocked in select(fd "
    };
    leaked_sleep_is_the_culprit(&run, &view, call, PIPE);
}

#[test]
fn asyncio_waits_in_epoll_for_the_leaked_grandchild() {
    let (run, view) = python(&format!(
        "import asyncio\n\
         async def main():\n\
         \x20   p = await asyncio.create_subprocess_exec(*{LEAKY}, stdout=asyncio.subprocess.PIPE)\n\
         \x20   await p.communicate()\n\
         asyncio.run(main())\n"
    ));
    leaked_sleep_is_the_culprit(&run, &view, "blocked in epoll_wait(fd ", PIPE);
}

#[test]
fn node_exec_file_waits_in_epoll_for_the_leaked_grandchild() {
    if !have_tool("node") {
        return;
    }
    let script =
        "require('child_process').execFile('sh', ['-c', 'sleep 1000 & echo hi'], () => {})";
    let (run, view) = hung(&["node", "-e", script]);
    // libuv waits in epoll_pwait from Node 20 on, in epoll_wait before.
    leaked_sleep_is_the_culprit(
        &run,
        &view,
        "blocked in epoll_",
        "(the peer of unix socket:[",
    );
}

/// `parent` and `child` scripts after a fork, in one python.
fn forking(setup: &str, child: &str, parent: &str) -> String {
    format!(
        "import os, socket, time, fcntl\n{setup}\n\
         if os.fork() == 0:\n{child}\n\
         else:\n{parent}\n"
    )
}

#[test]
fn a_socketpair_reader_waits_for_the_process_holding_the_peer() {
    let (run, view) = python(&forking(
        "a, b = socket.socketpair()",
        "    a.close(); time.sleep(1000)",
        "    b.close(); a.recv(1)",
    ));
    let root = run.root();
    let child = forked(&run, root);
    let culprit = the_culprit(&view, child);
    assert!(culprit.contains("(the peer of unix socket:["), "{view}");
    let waiter = line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in recvfrom(fd 3) on unix socket:[",
        ],
    );
    assert!(waiter.ends_with("its peer is held by:"), "{view}");
}

#[test]
fn a_path_socket_client_waits_for_the_server_that_never_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let path = path.to_str().unwrap();
    let (run, view) = python(&forking(
        &format!("s = socket.socket(socket.AF_UNIX); s.bind('{path}'); s.listen()"),
        "    c, _ = s.accept(); time.sleep(1000)",
        &format!(
            "    s.close(); c = socket.socket(socket.AF_UNIX); c.connect('{path}'); c.recv(1)"
        ),
    ));
    let root = run.root();
    the_culprit(&view, forked(&run, root));
    line_with(&view, &[&format!("  {root} "), "on unix socket:[", path]);
}

/// A unix client blocked in connect(2) on a listener whose backlog is
/// full (`listen(0)`, one connection already queued) waits for the
/// process holding the listener, found from the address it connects to.
fn a_unix_connect_waits_for_the_listener_at(address: &str, shown: &str) {
    let (run, view) = python(&forking(
        &format!("s = socket.socket(socket.AF_UNIX); s.bind({address}); s.listen(0)"),
        "    time.sleep(1000)",
        &format!(
            "    s.close(); c = socket.socket(socket.AF_UNIX); c.connect({address})\n    \
             d = socket.socket(socket.AF_UNIX); d.connect({address})"
        ),
    ));
    let root = run.root();
    let culprit = the_culprit(&view, forked(&run, root));
    let to = format!(" to {shown} (its backlog is full)");
    assert!(culprit.contains("the listener of unix socket:["), "{view}");
    assert!(culprit.contains(&format!("{to}) that {root} ")), "{view}");
    assert!(culprit.ends_with(" connects to"), "{view}");
    let waiter = line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in connect(fd 4) on unix socket:[",
        ],
    );
    assert!(waiter.contains(&to), "{view}");
    assert!(waiter.ends_with("its listener is held by:"), "{view}");
}

/// A runtime that waits for a child through its pidfd (asyncio on
/// Python 3.12+, Go 1.23+, systemd) waits for that child, not its
/// sibling.
fn a_pidfd_waiter_waits_for_its_process(wait: &str, shown: &str) {
    let (run, view) = python(&format!(
        "import os, select, subprocess\n\
         p = subprocess.Popen(['sleep', '1000'])\n\
         q = subprocess.Popen(['sleep', '2000'])\n\
         fd = os.pidfd_open(p.pid)\n{wait}\n"
    ));
    let sleep = with_argv(&run, &["sleep", "1000"]);
    the_culprit(&view, sleep);
    let root = run.root();
    let shown = shown.replace("{sleep}", &sleep.to_string());
    let waiter = line_with(&view, &[&format!("  {root} "), &shown]);
    assert!(waiter.ends_with(':'), "{view}");
}

#[test]
fn polling_a_pidfd_waits_for_its_process() {
    a_pidfd_waiter_waits_for_its_process(
        "pl = select.poll(); pl.register(fd, select.POLLIN); pl.poll()",
        "blocked in poll(fd 3) on the pidfd of {sleep} (",
    );
}

#[test]
fn waitid_on_a_pidfd_waits_for_its_child() {
    a_pidfd_waiter_waits_for_its_process(
        "os.waitid(os.P_PIDFD, fd, os.WEXITED)",
        "waits in waitid for its children",
    );
}

#[test]
fn a_unix_connect_to_a_full_backlog_waits_for_the_listener() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let path = path.to_str().unwrap();
    a_unix_connect_waits_for_the_listener_at(&format!("'{path}'"), path);
}

#[test]
fn an_abstract_unix_connect_to_a_full_backlog_waits_for_the_listener() {
    let name = format!("proctrace-test-{}", std::process::id());
    a_unix_connect_waits_for_the_listener_at(&format!("'\\0{name}'"), &format!("@{name}"));
}

#[test]
fn a_loopback_tcp_client_waits_for_the_listener_that_never_accepts() {
    let (run, view) = python(&forking(
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()",
        "    time.sleep(1000)",
        "    c = socket.create_connection(s.getsockname()); s.close(); c.recv(1)",
    ));
    let root = run.root();
    let culprit = the_culprit(&view, forked(&run, root));
    assert!(culprit.contains("(not yet accepted)) that"), "{view}");
    line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in recvfrom(fd 4) on TCP 127.0.0.1:",
        ],
    );
}

#[test]
fn a_connected_udp_client_waits_for_the_process_bound_where_it_sends() {
    let (run, view) = python(&forking(
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0))",
        "    time.sleep(1000)",
        "    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(s.getsockname()); \
         s.close(); c.send(b'x'); c.recv(1)",
    ));
    let root = run.root();
    let culprit = the_culprit(&view, forked(&run, root));
    assert!(culprit.contains("(the peer of UDP 127.0.0.1:"), "{view}");
    let waiter = line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in recvfrom(fd 4) on UDP 127.0.0.1:",
        ],
    );
    assert!(waiter.ends_with("its peer is held by:"), "{view}");
}

/// A test sandbox with a network namespace of its own (`unshare -n`, as
/// bazel's sandbox makes): its unix and loopback TCP sockets are read in
/// its namespace, not proctrace's, and lead to the server.
#[test]
fn sockets_of_a_sandbox_network_namespace_lead_to_the_server() {
    if !have_tool("unshare") {
        return;
    }
    // Bring the namespace's loopback up (SIOCSIFFLAGS, IFF_UP | IFF_RUNNING).
    let script = "import os, socket, time, fcntl, struct\n\
        lo = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
        fcntl.ioctl(lo, 0x8914, struct.pack('16sH14s', b'lo', 0x41, bytes(14)))\n\
        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
        a, b = socket.socketpair()\n\
        if os.fork() == 0:\n    a.close(); c, _ = s.accept(); time.sleep(1000)\n\
        else:\n    b.close(); c = socket.create_connection(s.getsockname()); s.close()\n    \
        if os.fork() == 0:\n        c.recv(1)\n    else:\n        a.recv(1)\n";
    let (run, view) = hung(&["unshare", "-n", "/usr/bin/python3", "-c", script]);
    let root = run.root();
    let children = run.children(root);
    assert_eq!(children.len(), 2, "{}", run.text);
    let (server, client) = (children[0], children[1]);
    let culprit = the_culprit(&view, server);
    assert!(culprit.contains("(the peer of unix socket:["), "{view}");
    assert!(culprit.contains("(the peer of TCP 127.0.0.1:"), "{view}");
    assert!(culprit.contains(&format!("that {client} ")), "{view}");
    assert!(culprit.contains(&format!("that {root} ")), "{view}");
}

#[test]
fn a_flock_waiter_waits_for_the_holder_which_waits_for_its_command() {
    if !have_tool("flock") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let lock = lock.to_str().unwrap();
    let script = format!("flock {lock} sleep 1000 & sleep 0.5; flock {lock} true");
    let (run, view) = hung(&["sh", "-c", &script]);
    let sleep = with_argv(&run, &["sleep", "1000"]);
    the_culprit(&view, sleep);
    let holder = with_argv(&run, &["flock", lock, "sleep", "1000"]);
    let waiter = with_argv(&run, &["flock", lock, "true"]);
    let line = line_with(&view, &[&format!("  {waiter} flock")]);
    assert!(
        line.contains("blocked in flock(fd 3) on FLOCK lock on"),
        "{view}"
    );
    assert!(line.ends_with("the lock is held by:"), "{view}");
    line_with(
        &view,
        &[
            &format!("  {holder} flock"),
            "waits in wait4 for its children:",
        ],
    );
}

#[test]
fn an_fcntl_lock_waiter_waits_for_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let lock = lock.to_str().unwrap();
    let (run, view) = python(&forking(
        &format!("f = open('{lock}', 'w'); fcntl.lockf(f, fcntl.LOCK_EX)"),
        &format!("    g = open('{lock}', 'w'); fcntl.lockf(g, fcntl.LOCK_EX)"),
        "    time.sleep(1000)",
    ));
    let root = run.root();
    let culprit = the_culprit(&view, root);
    let child = forked(&run, root);
    assert!(
        culprit.contains(&format!("(the POSIX lock on {lock}) that {child} ")),
        "{view}"
    );
}

#[test]
fn opening_a_fifo_nobody_writes_says_no_process_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let fifo = fifo.to_str().unwrap();
    let (run, view) = hung(&["sh", "-c", &format!("mkfifo {fifo}; cat {fifo}")]);
    let cat = with_argv(&run, &["cat", fifo]);
    let culprit = the_culprit(&view, cat);
    let nobody = "its other end is held by no process of the tree";
    assert!(
        culprit.contains(&format!("blocked in openat on FIFO {fifo}")) && culprit.ends_with(nobody),
        "{view}"
    );
    line_with(&view, &[&format!("  {cat} cat"), nobody]);
}

/// A reader that forgot to close its own copy of the write end never
/// sees end-of-file once its child is done: it is its own culprit, and
/// the answer says so rather than that nobody holds the write end.
#[test]
fn a_reader_holding_its_own_write_end_is_told_so() {
    let (run, view) = python(&forking(
        "r, w = os.pipe()",
        "    os.close(r); os.write(w, b'x')",
        "    os.wait()\n    while os.read(r, 1): pass",
    ));
    let root = run.root();
    let culprit = the_culprit(&view, root);
    let own = "its write end is held only by itself, on fd 4";
    assert!(
        culprit.contains("blocked in read(fd 3) on pipe:["),
        "{view}"
    );
    assert!(culprit.ends_with(own), "{view}");
}

/// splice(2) between two pipes waits on the side the kernel sleeps on
/// (here reading), not on both.
#[test]
fn a_splice_waits_for_the_writer_of_the_pipe_it_reads() {
    let (run, view) = python(&forking(
        "r, w = os.pipe(); r2, w2 = os.pipe()",
        "    os.close(r); time.sleep(1000)",
        "    os.close(w); os.splice(r, w2, 100)",
    ));
    let root = run.root();
    let culprit = the_culprit(&view, forked(&run, root));
    assert!(
        culprit.contains("holds fd 4 (write end of pipe:["),
        "{view}"
    );
    assert!(culprit.ends_with(" reads"), "{view}");
    let waiter = line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in splice(fd 3, read) on pipe:[",
        ],
    );
    assert!(waiter.ends_with("its write end is held by:"), "{view}");
    assert!(!waiter.contains("splice(fd 6, write)"), "{view}");
}

/// pexpect, script and expect read a pseudo-terminal's master: they wait
/// for the processes on its `/dev/pts/N`, here a child waiting for input.
#[test]
fn a_pty_master_reader_waits_for_the_process_on_the_terminal() {
    let (run, view) = python(
        "import os, pty\npid, fd = pty.fork()\n\
         if pid == 0:\n    input()\nelse:\n    os.read(fd, 100)\n",
    );
    let root = run.root();
    let child = forked(&run, root);
    let culprit = the_culprit(&view, child);
    assert!(culprit.contains("(a terminal: whoever types)"), "{view}");
    assert!(
        culprit.contains("(write end of the terminal /dev/pts/"),
        "{view}"
    );
    let waiter = line_with(
        &view,
        &[
            &format!("  {root} "),
            "blocked in read(fd 3) on the terminal /dev/pts/",
        ],
    );
    assert!(waiter.ends_with("its write end is held by:"), "{view}");
}

/// A client of a server outside the tree: the chain's top, waiting on a
/// socket no process of the tree holds the peer of, is the culprit, and
/// the server is named.
#[test]
fn a_client_of_a_server_outside_the_tree_is_the_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let path = path.to_str().unwrap();
    let script = format!(
        "import socket, time\ns = socket.socket(socket.AF_UNIX); s.bind('{path}'); s.listen()\n\
         c, _ = s.accept(); time.sleep(1000)"
    );
    let server = Background::spawn(Command::new("/usr/bin/python3").args(["-c", &script]));
    let socket = Path::new(path);
    let ready = (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        socket.exists()
    });
    assert!(ready, "the server never listened");
    let (run, view) = python(&format!(
        "import socket\nc = socket.socket(socket.AF_UNIX); c.connect('{path}'); c.recv(1)"
    ));
    let outsider = server.pid();
    drop(server);
    let culprit = the_culprit(&view, run.root());
    assert!(
        culprit.contains("blocked in recvfrom(fd 3) on unix socket:["),
        "{view}"
    );
    assert!(culprit.contains(path), "{view}");
    let held = format!("; its peer is held by {outsider} /usr/bin/python3 -c ");
    assert!(culprit.contains(&held), "{view}");
    assert!(culprit.ends_with(" (outside the tree)"), "{view}");
}

/// A lock taken by a process outside the tree (a daemon a previous job
/// left behind): /proc/locks names it, and so does the answer.
#[test]
fn a_lock_held_outside_the_tree_names_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    let ready = dir.path().join("ready");
    let (lock, ready) = (lock.to_str().unwrap(), ready.to_str().unwrap());
    let script = format!(
        "import fcntl, time\nf = open('{lock}', 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n\
         open('{ready}', 'w'); time.sleep(1000)"
    );
    let holder = Background::spawn(Command::new("/usr/bin/python3").args(["-c", &script]));
    let locked = (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        Path::new(ready).exists()
    });
    assert!(locked, "the holder never took the lock");
    let (run, view) = python(&format!(
        "import fcntl\nf = open('{lock}', 'w'); fcntl.flock(f, fcntl.LOCK_EX)"
    ));
    let outsider = holder.pid();
    drop(holder);
    let culprit = the_culprit(&view, run.root());
    assert!(
        culprit.contains("blocked in flock(fd 3) on FLOCK lock on "),
        "{view}"
    );
    let held = format!("; the lock is held by {outsider} /usr/bin/python3 -c ");
    assert!(culprit.contains(&held), "{view}");
    assert!(culprit.ends_with(" (outside the tree)"), "{view}");
}

/// The one deadlock line, naming exactly `members`.
fn the_deadlock(view: &str, members: &[Pid]) {
    let deadlocks = answers(view, "deadlock: ");
    assert_eq!(deadlocks.len(), 1, "{view}");
    for pid in members {
        assert!(
            deadlocks[0].contains(&format!(" {pid} "))
                || deadlocks[0].contains(&format!(": {pid} ")),
            "{view}"
        );
    }
    assert!(
        deadlocks[0].starts_with(&format!(
            "deadlock: {} processes wait for each other: ",
            members.len()
        )),
        "{view}"
    );
    assert!(answers(view, "culprit: ").is_empty(), "{view}");
}

#[test]
fn two_processes_writing_full_pipes_to_each_other_are_a_deadlock() {
    let (run, view) = python(&forking(
        "r1, w1 = os.pipe(); r2, w2 = os.pipe()",
        "    os.close(w1); os.close(r2); os.write(w2, b'x' * 1000000); os.read(r1, 1)",
        "    os.close(w2); os.close(r1); os.write(w1, b'x' * 1000000); os.read(r2, 1)",
    ));
    let root = run.root();
    the_deadlock(&view, &[root, forked(&run, root)]);
}

#[test]
fn popen_wait_on_a_child_writing_a_full_pipe_is_a_deadlock_in_every_view() {
    let (run, view) = python(
        "import subprocess\n\
         p = subprocess.Popen(['head', '-c', '1000000', '/dev/zero'], stdout=subprocess.PIPE)\n\
         p.wait()\n",
    );
    let root = run.root();
    let head = with_argv(&run, &["head", "-c", "1000000", "/dev/zero"]);
    the_deadlock(&view, &[root, head]);
    let path = run.dir.path().join("rec.ndjson");
    let summary = render_as(&path, "summary");
    line_with(
        &summary,
        &[
            "  deadlock: 2 processes wait for each other: ",
            &format!("{head} head"),
        ],
    );
    let markdown = render_as(&path, "markdown");
    line_with(
        &markdown,
        &["- **Deadlock:** 2 processes wait for each other: "],
    );
    line_with(
        &run.stderr,
        &["proctrace: deadlock: 2 processes wait for each other: "],
    );
    assert_eq!(
        flagged_spans(&render_as(&path, "otlp"), "proctrace.hang.deadlock"),
        [root, head].into_iter().collect(),
    );
}

/// The pids of the OTLP/JSON spans that carry `key` set to true.
fn flagged_spans(otlp: &str, key: &str) -> std::collections::BTreeSet<Pid> {
    let attribute = |span: &serde_json::Value, name: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == name)
            .map(|a| a["value"].clone())
    };
    let requests = otlp.lines().map(|l| serde_json::from_str(l).unwrap());
    let spans: Vec<serde_json::Value> = requests
        .flat_map(|r: serde_json::Value| {
            let resources = r["resourceSpans"].as_array().unwrap().clone();
            resources.into_iter().flat_map(|resource| {
                let scopes = resource["scopeSpans"].as_array().unwrap().clone();
                scopes
                    .into_iter()
                    .flat_map(|scope| scope["spans"].as_array().unwrap().clone())
            })
        })
        .collect();
    spans
        .iter()
        .filter(|span| attribute(span, key).is_some_and(|v| v["boolValue"] == true))
        .filter_map(|span| {
            attribute(span, "process.pid")?["intValue"]
                .as_str()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn a_stopped_child_waited_for_is_the_culprit() {
    let (run, view) = python(
        "import os, signal, subprocess\n\
         p = subprocess.Popen(['sleep', '1000'])\n\
         os.kill(p.pid, signal.SIGSTOP)\n\
         p.wait()\n",
    );
    let sleep = with_argv(&run, &["sleep", "1000"]);
    let culprit = the_culprit(&view, sleep);
    assert!(culprit.contains(", stopped"), "{view}");
}

#[test]
fn hundreds_of_alike_leaked_sleeps_are_one_culprit_line() {
    let (run, view) = hung(&[
        "sh",
        "-c",
        "for i in $(seq 300); do sleep 1000 & done; wait",
    ]);
    let sleeps: Vec<Pid> = run
        .pids()
        .into_iter()
        .filter(|&p| run.argvs(p).last().is_some_and(|a| a == &["sleep", "1000"]))
        .collect();
    assert_eq!(sleeps.len(), 300);
    let culprits = answers(&view, "culprit: ");
    assert_eq!(culprits.len(), 1, "{view}");
    let ranges = proctrace::text::pid_ranges(sleeps);
    assert!(
        culprits[0].starts_with(&format!(
            "culprit: 300 × sleep 1000 (pids {ranges}), blocked in clock_nanosleep"
        )),
        "{view}"
    );
    assert!(view.lines().count() < 10, "{view}");
    assert!(run.stderr.lines().count() < 45, "{}", run.stderr);
}

/// A `go test` binary, built before recording, whose TestHang waits in
/// exec.Command().Output() for a child that leaves a grandchild behind.
fn go_test_binary(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("go.mod"), "module hang\n\ngo 1.19\n").unwrap();
    std::fs::write(
        dir.join("hang_test.go"),
        "package hang\n\nimport (\n\t\"os/exec\"\n\t\"testing\"\n)\n\n\
         func TestHang(t *testing.T) {\n\
         \tout, err := exec.Command(\"sh\", \"-c\", \"sleep 1000 & echo hi\").Output()\n\
         \tt.Log(string(out), err)\n}\n",
    )
    .unwrap();
    let binary = dir.join("hang.test");
    build(
        Command::new("go")
            .args(["test", "-c", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(dir)
            .env("HOME", dir)
            .env("GOCACHE", dir.join("cache"))
            .env("GOPATH", dir.join("gopath"))
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod"),
    );
    binary
}

#[test]
fn go_exec_output_waits_in_epoll_for_the_leaked_grandchild() {
    if !have_tool("go") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let binary = go_test_binary(dir.path());
    let (run, view) = hung(&[binary.to_str().unwrap(), "-test.run", "TestHang"]);
    // On whichever thread the runtime's netpoller blocks.
    leaked_sleep_is_the_culprit(&run, &view, " epoll_pwait(fd ", PIPE);
}

#[test]
fn timeout_signal_quit_makes_go_print_its_goroutines() {
    if !have_tool("go") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let binary = go_test_binary(dir.path());
    let argv = [binary.to_str().unwrap(), "-test.run", "TestHang"];
    let (run, _) = hung_with(&["--timeout-signal", "QUIT"], &argv);
    // Go's dump goes to the test binary's stderr, which is proctrace's.
    assert!(run.stderr.contains("SIGQUIT: quit"), "{}", run.stderr);
    assert!(run.stderr.contains("goroutine 1 ["), "{}", run.stderr);
    assert_eq!(
        run.exit(run.root()).exit_code,
        Some(2),
        "Go exits 2 after the dump"
    );
}
