//! Shared harness of the integration tests: runs the real `proctrace record`
//! against the real kernel, parses the recording and checks the invariants
//! every recording must satisfy.

mod collector;
mod markdown;
mod mermaid;
mod otlp;
mod render;
#[allow(unused_imports)]
pub use collector::*;
#[allow(unused_imports)]
pub use markdown::*;
#[allow(unused_imports)]
pub use mermaid::*;
#[allow(unused_imports)]
pub use otlp::*;
#[allow(unused_imports)]
pub use render::*;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use proctrace::event::{BufferKind, Exec, Exit, Fork, Header, Pid, Record, SyscallHook, Trailer};
use proctrace::text::shell_join;

/// Upper bound for anything to finish; only there so that a hang fails the
/// test instead of blocking the suite. Never a timing assertion.
pub const HANG_TIMEOUT: Duration = Duration::from_secs(60);

pub fn proctrace_bin() -> &'static str {
    env!("CARGO_BIN_EXE_proctrace")
}

/// [`proctrace_bin`] for a run that records (`record`, `record --pid`):
/// one that loads the BPF program, so root is checked first
/// ([`require_root`]).
pub fn recorder_bin() -> &'static str {
    require_root();
    proctrace_bin()
}

/// `Recorder::command(command)`: the library recording in this process,
/// which loads the BPF program, so root is checked first
/// ([`require_root`]).
pub fn recorder<I, S>(command: I) -> proctrace::recorder::Recorder
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    require_root();
    proctrace::recorder::Recorder::command(command)
}

/// Root (CAP_BPF), which every test of the kernel binary needs, asked for
/// once a process by the harness wherever a test acts as root: loads the
/// BPF program ([`recorder_bin`], [`recorder`], and so every [`record`]
/// and [`Live`]) or mounts ([`Tmpfs::mount`]). A test that needs none (a
/// refusal before loading, a render) runs as anyone. Without root the
/// first such call ends the whole binary with status 0 and one line on
/// stderr, since every other test of it would skip too, after killing
/// what the running tests started (none of them will end it now). Under
/// CI (the CI variable set and not empty) the test fails instead.
pub fn require_root() {
    static ROOT: OnceLock<bool> = OnceLock::new();
    if *ROOT.get_or_init(|| nix::unistd::geteuid().is_root()) {
        return;
    }
    assert!(
        !ci(),
        "the kernel tests need root (CAP_BPF) to load the BPF program, and CI is set: \
         refusing to skip (`make check` runs them through sudo)"
    );
    static SKIP: Once = Once::new();
    // The first caller exits; any other waits here until it has.
    SKIP.call_once(|| {
        for (pid, _) in descendants(std::process::id() as Pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // Past the test harness's capture of eprintln!.
        let _ = writeln!(
            std::io::stderr(),
            "kernel tests: skipped, they need root (CAP_BPF); `make check` runs them through sudo"
        );
        std::process::exit(0);
    });
}

/// Whether a program the test runs is on the PATH; see [`prerequisite`].
#[must_use]
pub fn have_tool(program: &str) -> bool {
    prerequisite(
        tool_path(program).is_some(),
        &format!("`{program}` on the PATH"),
    )
}

/// `pytest-3` on the tests of `file`, quietly, with node ids relative to
/// `rootdir` and no cache left behind.
pub fn pytest(rootdir: &Path, file: &Path) -> Vec<String> {
    let (rootdir, file) = (rootdir.to_str().unwrap(), file.to_str().unwrap());
    strings(&[
        "pytest-3",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        rootdir,
        file,
    ])
}

/// The file `program` names on the PATH, links resolved.
pub fn tool_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .and_then(|p| fs::canonicalize(p).ok())
}

/// Whether the CI variable is set and not empty.
fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The one policy for what a test needs from the machine besides root
/// ([`require_root`]): present, the test runs; missing, it fails under CI
/// and is skipped with a message otherwise. Each test asks for what it
/// needs up front, in one form: `if !have_tool("bats") { return; }`
/// (`have_chromium`, `have_collector`...). Tests never install anything:
/// `scripts/install-deps.sh --test` (run by `make test`) installs it all.
#[must_use]
pub fn prerequisite(present: bool, what: &str) -> bool {
    if present {
        return true;
    }
    assert!(
        !ci(),
        "this test needs {what}, and CI is set: refusing to skip \
         (scripts/install-deps.sh --test installs every test prerequisite)"
    );
    eprintln!("skipped: needs {what} (scripts/install-deps.sh --test installs it)");
    false
}

/// One `#[test]` per mode for a scenario `fn(Mode)`:
/// `per_mode!(scenario: ring => Ring, perf => Perf);`
#[allow(unused_macros)]
macro_rules! per_mode {
    ($scenario:ident: $($name:ident => $mode:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $scenario($crate::common::Mode::$mode)
            }
        )+
    };
}

/// Path of the compiled C workload `tests/workloads/<name>.c`. All workloads
/// are compiled once per test binary (`cc -O1 -pthread`) into the target's
/// tmp dir; each binary is renamed into place, so concurrent runs are safe.
pub fn workload(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
        fs::create_dir_all(&out).unwrap();
        for entry in fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            // C, and i386 assembly for a 32-bit program that needs no
            // 32-bit libc.
            let flags: &[&str] = match path.extension().and_then(OsStr::to_str) {
                Some("c") => &["-O1", "-pthread", "-Wall"],
                Some("S") => &["-m32", "-nostdlib", "-static"],
                _ => continue,
            };
            // A first line `// cflags: ...` replaces the C flags.
            let source = fs::read_to_string(&path).unwrap_or_default();
            let own: Vec<&str> = source
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("// cflags:"))
                .map(|flags| flags.split_whitespace().collect())
                .unwrap_or_default();
            let flags = if own.is_empty() { flags } else { &own[..] };
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            let tmp = out.join(format!("{stem}.tmp{}", std::process::id()));
            let result = Command::new("cc")
                .args(flags)
                .arg("-o")
                .arg(&tmp)
                .arg(&path)
                .output()
                .expect("running cc");
            assert!(
                result.status.success(),
                "compiling {}:\n{}",
                path.display(),
                String::from_utf8_lossy(&result.stderr)
            );
            fs::rename(&tmp, out.join(&stem)).unwrap();
        }
        out
    });
    let path = dir.join(name);
    assert!(path.exists(), "no workload tests/workloads/{name}.c");
    path
}

/// Kernel hooks and buffer a recording uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Defaults: raw sched tracepoints (BTF-typed where fexit loads), ring buffer.
    Ring,
    /// `--perf-buffer`.
    Perf,
    /// `--btf-tracepoints` (ring buffer): BTF-typed sched tracepoints
    /// where setsid/setpgid are not hooked by fexit.
    BtfTp,
    /// `--btf-tracepoints --perf-buffer`.
    BtfTpPerf,
    /// `--syscall-hook sys-exit`: setsid/setpgid by the raw hook at every
    /// syscall's exit.
    SysExit,
    /// `--syscall-hook tracepoint`: by the classic syscall tracepoints.
    Tracepoint,
}

impl Mode {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Mode::Ring => &[],
            Mode::Perf => &["--perf-buffer"],
            Mode::BtfTp => &["--btf-tracepoints"],
            Mode::BtfTpPerf => &["--btf-tracepoints", "--perf-buffer"],
            Mode::SysExit => &["--syscall-hook", "sys-exit"],
            Mode::Tracepoint => &["--syscall-hook", "tracepoint"],
        }
    }

    /// The syscall hook a recording must say it used; `None` where the
    /// kernel chooses.
    pub fn syscall_hook(self) -> Option<SyscallHook> {
        match self {
            Mode::SysExit => Some(SyscallHook::SysExit),
            Mode::Tracepoint => Some(SyscallHook::Tracepoint),
            _ => None,
        }
    }

    fn buffer(self) -> BufferKind {
        match self {
            Mode::Ring | Mode::BtfTp | Mode::SysExit | Mode::Tracepoint => BufferKind::Ring,
            Mode::Perf | Mode::BtfTpPerf => BufferKind::Perf,
        }
    }
}

/// How to run proctrace.
#[derive(Debug, Clone)]
pub struct Opts {
    pub mode: Mode,
    pub raw: bool,
    pub keep_root: bool,
    pub env: Vec<(String, String)>,
    /// More options of `record`, before the command.
    pub args: Vec<String>,
}

impl Opts {
    pub fn new(mode: Mode) -> Self {
        Opts {
            mode,
            raw: false,
            keep_root: false,
            env: Vec::new(),
            args: Vec::new(),
        }
    }
}

/// A finished `proctrace record` run and its parsed recording.
pub struct Run {
    pub dir: tempfile::TempDir,
    pub command: Vec<String>,
    pub opts: Opts,
    pub status: ExitStatus,
    pub stderr: String,
    pub text: String,
    pub records: Vec<Record>,
}

/// Builds the `proctrace record` command writing to `out`.
pub fn proctrace_command(opts: &Opts, out: &Path, cmd: &[OsString]) -> Command {
    let mut command = Command::new(recorder_bin());
    command.arg("record").arg("-o").arg(out);
    command.args(opts.mode.flags());
    if opts.raw {
        command.arg("--raw");
    }
    if opts.keep_root {
        command.arg("--keep-root");
    }
    command.args(&opts.args);
    command.arg("--").args(cmd);
    for (k, v) in &opts.env {
        command.env(k, v);
    }
    command
}

/// Waits for `child` up to [`HANG_TIMEOUT`]; kills it and panics on a hang.
pub fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    wait_within(child, what, HANG_TIMEOUT)
}

/// Waits for `child` up to `bound`; kills it and panics beyond.
pub fn wait_within(child: &mut Child, what: &str, bound: Duration) -> ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Records `cmd` with the default options of `mode` and checks the
/// invariants of every recording.
pub fn record<S: AsRef<OsStr>>(mode: Mode, cmd: &[S]) -> Run {
    record_with(&Opts::new(mode), cmd)
}

/// Records `cmd` and checks the invariants of every recording.
pub fn record_with<S: AsRef<OsStr>>(opts: &Opts, cmd: &[S]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    record_in(dir, opts, cmd)
}

/// As [`record_with`], in a temp dir the caller prepared.
pub fn record_in<S: AsRef<OsStr>>(dir: tempfile::TempDir, opts: &Opts, cmd: &[S]) -> Run {
    let mut live = Live::start(dir, opts, cmd);
    let status = wait_bounded(&mut live.child, "proctrace record");
    let run = live.finish(status);
    run.check();
    run
}

/// A `proctrace record` still running.
pub struct Live {
    pub dir: tempfile::TempDir,
    pub child: Child,
    pub out: PathBuf,
    stderr_path: PathBuf,
    command: Vec<OsString>,
    opts: Opts,
}

impl Live {
    /// Starts recording `cmd` into `dir/rec.ndjson`.
    pub fn start<S: AsRef<OsStr>>(dir: tempfile::TempDir, opts: &Opts, cmd: &[S]) -> Self {
        let command: Vec<OsString> = cmd.iter().map(|s| s.as_ref().to_owned()).collect();
        let out = dir.path().join("rec.ndjson");
        let stderr_path = dir.path().join("stderr");
        let child = proctrace_command(opts, &out, &command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("starting proctrace");
        Live {
            dir,
            child,
            out,
            stderr_path,
            command,
            opts: opts.clone(),
        }
    }

    pub fn pid(&self) -> Pid {
        self.child.id() as Pid
    }

    /// The recording's text so far.
    pub fn text(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Polls /proc until a descendant of proctrace runs `comm` (the
    /// recording is buffered, so the file cannot tell); returns its pid.
    pub fn wait_for_descendant(&mut self, comm: &str) -> Pid {
        let deadline = Instant::now() + HANG_TIMEOUT;
        loop {
            if let Some(&(pid, _)) = descendants(self.pid()).iter().find(|(_, c)| c == comm) {
                return pid;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "proctrace ended ({status:?}) before {comm} ran:\n{}",
                    self.text()
                );
            }
            assert!(Instant::now() < deadline, "no {comm} under proctrace");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` to proctrace (only).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).unwrap();
    }

    /// Parses the finished recording (without checking it).
    pub fn finish(self, status: ExitStatus) -> Run {
        let stderr = fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let text = fs::read_to_string(&self.out)
            .unwrap_or_else(|e| panic!("no recording ({e}); status {status:?}, stderr:\n{stderr}"));
        let records = parse_lines(&text);
        Run {
            dir: self.dir,
            command: self
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            opts: self.opts,
            status,
            stderr,
            text,
            records,
        }
    }
}

/// Parses every line of a recording; panics on a partial or invalid line.
pub fn parse_lines(text: &str) -> Vec<Record> {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "recording ends in a partial line: {:?}",
        &text[text.len().saturating_sub(200)..]
    );
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<Record>(line)
                .unwrap_or_else(|e| panic!("line {} is not a record ({e}): {line}", i + 1))
        })
        .collect()
}

impl Run {
    pub fn header(&self) -> &Header {
        match self.records.first() {
            Some(Record::Header(h)) => h,
            other => panic!("first line is not a header: {other:?}"),
        }
    }

    pub fn trailer(&self) -> &Trailer {
        match self.records.last() {
            Some(Record::Trailer(t)) => t,
            other => panic!("last line is not a trailer: {other:?}"),
        }
    }

    /// The events between header and trailer.
    /// The events: the lines between header and trailer, up to the CPU
    /// profile's, which come last.
    pub fn events(&self) -> &[Record] {
        let body = &self.records[1..self.records.len() - 1];
        &body[..body
            .iter()
            .position(Record::is_profile)
            .unwrap_or(body.len())]
    }

    /// The CPU profile's and the probes' lines, after the events.
    pub fn profile_lines(&self) -> &[Record] {
        &self.records[1 + self.events().len()..self.records.len() - 1]
    }

    pub fn root(&self) -> Pid {
        self.header().root_pid
    }

    pub fn forks(&self) -> Vec<&Fork> {
        self.events()
            .iter()
            .filter_map(|r| match r {
                Record::Fork(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    pub fn all_execs(&self) -> Vec<&Exec> {
        self.events()
            .iter()
            .filter_map(|r| match r {
                Record::Exec(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    pub fn all_exits(&self) -> Vec<&Exit> {
        self.events()
            .iter()
            .filter_map(|r| match r {
                Record::Exit(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The Execs of `pid`, in order.
    pub fn execs(&self, pid: Pid) -> Vec<&Exec> {
        self.all_execs()
            .into_iter()
            .filter(|e| e.pid == pid)
            .collect()
    }

    /// The one Exit of `pid`.
    pub fn exit(&self, pid: Pid) -> &Exit {
        let exits: Vec<_> = self
            .all_exits()
            .into_iter()
            .filter(|e| e.pid == pid)
            .collect();
        assert_eq!(exits.len(), 1, "exits of {pid}: {exits:?}\n{}", self.text);
        exits[0]
    }

    /// Children `pid` forked, in order.
    pub fn children(&self, pid: Pid) -> Vec<Pid> {
        self.forks()
            .iter()
            .filter(|f| f.parent_pid == pid)
            .map(|f| f.child_pid)
            .collect()
    }

    /// Every process of the tree: the root and every forked child.
    pub fn pids(&self) -> BTreeSet<Pid> {
        let mut pids: BTreeSet<Pid> = self.forks().iter().map(|f| f.child_pid).collect();
        pids.insert(self.root());
        pids
    }

    /// The argv of each Exec of `pid`.
    pub fn argvs(&self, pid: Pid) -> Vec<Vec<String>> {
        self.execs(pid).iter().map(|e| e.argv.clone()).collect()
    }

    /// The exit status proctrace itself returned.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("proctrace killed: {:?}", self.status))
    }

    /// The child of `parent` whose (last) exec had `argv`.
    pub fn child_with_argv(&self, parent: Pid, argv: &[&str]) -> Pid {
        let found: Vec<Pid> = self
            .children(parent)
            .into_iter()
            .filter(|&c| self.argvs(c).iter().any(|a| a == argv))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "children of {parent} that exec'd {argv:?}: {found:?}\n{}",
            self.text
        );
        found[0]
    }

    /// The kind of each event of `pid` in file order (Fork counts for the
    /// child), e.g. `["Fork", "Exec", "Exit"]`.
    pub fn kinds(&self, pid: Pid) -> Vec<&'static str> {
        self.events()
            .iter()
            .filter(|r| r.pid() == Some(pid))
            .map(Record::kind)
            .collect()
    }

    /// The CPU profile's invariants: its lines come together after the
    /// events, frames before the stacks that name them and stacks before
    /// the samples, every id once; the samples are of processes of the
    /// tree and add up to the trailer's count.
    fn check_profile(&self, ctx: &dyn Fn() -> String) {
        let lines = self.profile_lines();
        assert!(
            lines.iter().all(Record::is_profile),
            "profile lines interleaved\n{}",
            ctx()
        );
        if self.header().cpu_profile.is_none() && self.header().probes.is_empty() {
            assert!(
                lines.is_empty(),
                "profile lines without a profile or probes\n{}",
                ctx()
            );
        }
        let probes = self.header().probes.len() as u32;
        let (mut frames, mut stacks) = (BTreeSet::new(), BTreeSet::new());
        let known: BTreeSet<Pid> = self
            .events()
            .iter()
            .filter_map(Record::pid)
            .chain([self.root()])
            .collect();
        let (mut samples, mut hits) = (0, 0);
        for line in lines {
            match line {
                Record::Frame(f) => assert!(frames.insert(f.id), "frame {} twice\n{}", f.id, ctx()),
                Record::Stack(s) => {
                    assert!(stacks.insert(s.id), "stack {} twice\n{}", s.id, ctx());
                    assert!(
                        s.frames.iter().all(|f| frames.contains(f)),
                        "stack {} names an unknown frame\n{}",
                        s.id,
                        ctx()
                    );
                }
                Record::CpuSamples(c) => {
                    assert!(stacks.contains(&c.stack), "{c:?}: no such stack\n{}", ctx());
                    assert!(
                        known.contains(&c.pid),
                        "{c:?}: not a process of the tree\n{}",
                        ctx()
                    );
                    assert!(c.count > 0 && c.first <= c.last, "{c:?}\n{}", ctx());
                    assert!(c.test.as_ref().is_none_or(|t| !t.is_empty()), "{c:?}");
                    samples += c.count;
                }
                Record::ProbeHits(h) => {
                    assert!(
                        h.stack.is_none_or(|s| stacks.contains(&s)),
                        "{h:?}: no such stack\n{}",
                        ctx()
                    );
                    assert!(h.probe < probes, "{h:?}: no such probe\n{}", ctx());
                    assert!(known.contains(&h.pid), "{h:?}: not of the tree\n{}", ctx());
                    assert!(h.count > 0 && h.first <= h.last, "{h:?}\n{}", ctx());
                    assert!(h.test.as_ref().is_none_or(|t| !t.is_empty()), "{h:?}");
                    hits += h.count;
                }
                Record::ProbeLatency(l) => {
                    assert!(l.probe < probes && l.ret < probes, "{l:?}\n{}", ctx());
                    assert!(known.contains(&l.pid), "{l:?}: not of the tree\n{}", ctx());
                    let calls: u64 = l.buckets.iter().map(|[_, n]| n).sum();
                    assert!(calls == l.count && l.min <= l.max, "{l:?}\n{}", ctx());
                }
                Record::ProbeArgs(a) => {
                    assert!(a.probe < probes, "{a:?}: no such probe\n{}", ctx());
                    assert!(known.contains(&a.pid), "{a:?}: not of the tree\n{}", ctx());
                    assert!(a.count > 0, "{a:?}\n{}", ctx());
                    assert!(a.test.as_ref().is_none_or(|t| !t.is_empty()), "{a:?}");
                }
                Record::TestAttempt(a) => {
                    let pids = std::iter::once(a.pid).chain(a.test_pid);
                    assert!(
                        pids.into_iter().all(|p| known.contains(&p)),
                        "{a:?}\n{}",
                        ctx()
                    );
                    let (start, end) = (a.start.unwrap_or(0), a.end.unwrap_or(u64::MAX));
                    assert!(start <= end, "{a:?}\n{}", ctx());
                }
                _ => unreachable!(),
            }
        }
        assert_eq!(samples, self.trailer().samples, "{}", ctx());
        assert_eq!(hits, self.trailer().probe_hits, "{}", ctx());
    }

    /// The invariants every finished recording satisfies.
    pub fn check(&self) {
        let ctx = || format!("stderr:\n{}\nrecording:\n{}", self.stderr, self.text);
        assert!(self.records.len() >= 2, "{}", ctx());
        let header = self.header();
        let trailer = self.trailer();
        for (i, r) in self.records.iter().enumerate() {
            let edge = i == 0 || i == self.records.len() - 1;
            assert_eq!(
                matches!(r, Record::Header(_) | Record::Trailer(_)),
                edge,
                "header/trailer out of place at line {}\n{}",
                i + 1,
                ctx()
            );
        }
        assert_eq!(header.command, self.command, "{}", ctx());
        assert_eq!(header.raw, self.opts.raw, "{}", ctx());
        assert_eq!(header.buffer, self.opts.mode.buffer(), "{}", ctx());
        if let Some(hook) = self.opts.mode.syscall_hook() {
            assert_eq!(header.syscall_hook, Some(hook), "{}", ctx());
        }
        assert_eq!(trailer.events, self.events().len() as u64, "{}", ctx());
        assert_eq!(
            (
                trailer.lost,
                trailer.lost_buffer_full,
                trailer.lost_tracking_full
            ),
            (0, 0, 0),
            "{}",
            ctx()
        );
        // One gapless global order; timestamps never go back.
        let mut last_ts = 0;
        for (i, r) in self.events().iter().enumerate() {
            assert_eq!(r.seq(), Some(i as u64), "seq gap\n{}", ctx());
            let ts = r.timestamp().unwrap();
            assert!(ts >= last_ts, "timestamp goes back at seq {i}\n{}", ctx());
            last_ts = ts;
        }
        assert!(trailer.end_timestamp >= last_ts, "{}", ctx());
        self.check_profile(&ctx);
        for e in self.all_execs() {
            assert_eq!(e.cmdline, shell_join(&e.argv_bytes()), "{}", ctx());
        }
        for e in self.all_exits() {
            assert!(
                e.exit_code.is_some() != e.signal.is_some(),
                "exit needs exactly one of code/signal: {e:?}\n{}",
                ctx()
            );
            assert!(!e.core_dumped || e.signal.is_some(), "{e:?}");
        }
        // An --on-hang run is about a culprit as its snapshot saw it, and
        // ends after it: its process may be gone by then.
        for r in self.events() {
            if let Record::OnHang(run) = r {
                let in_snapshot = self.events().iter().any(|s| {
                    matches!(s, Record::Snapshot(s) if s.pid == run.pid && s.timestamp == run.snapshot)
                });
                assert!(
                    in_snapshot,
                    "{run:?} names no snapshot's process\n{}",
                    ctx()
                );
                assert!(run.timestamp >= run.snapshot, "{run:?}\n{}", ctx());
            }
        }
        // Causal order per process: Fork, then Exec/SetSID/SetPGID, Exit last.
        let mut seen: BTreeMap<Pid, Vec<&'static str>> = BTreeMap::new();
        for r in self.events().iter().filter(|r| r.kind() != "OnHang") {
            let pid = r.pid().unwrap();
            let history = seen.entry(pid).or_default();
            let k = r.kind();
            if !self.header().raw {
                assert!(
                    k != "Fork" || history.is_empty(),
                    "second fork of pid {pid}\n{}",
                    ctx()
                );
            }
            assert!(
                !history.contains(&"Exit") || (self.header().raw && k == "Fork"),
                "{k} of {pid} after its exit\n{}",
                ctx()
            );
            if self.header().raw && k == "Fork" {
                history.clear();
            }
            history.push(k);
        }
        if self.header().raw {
            return;
        }
        // The tree is closed: the root and children of known processes only.
        let root = self.root();
        assert!(
            !self.kinds(root).contains(&"Fork"),
            "root forked\n{}",
            ctx()
        );
        assert_eq!(
            self.events().first().map(Record::kind),
            Some("Exec"),
            "the root's exec comes first\n{}",
            ctx()
        );
        let first = self.execs(root);
        assert!(!first.is_empty(), "{}", ctx());
        let mut alive: BTreeSet<Pid> = [root].into();
        let mut known: BTreeSet<Pid> = [root].into();
        for r in self.events().iter().filter(|r| r.kind() != "OnHang") {
            match r {
                Record::Fork(f) => {
                    assert!(
                        alive.contains(&f.parent_pid),
                        "fork by {} which is not a live process of the tree\n{}",
                        f.parent_pid,
                        ctx()
                    );
                    assert!(known.insert(f.child_pid), "{}", ctx());
                    alive.insert(f.child_pid);
                }
                Record::Exit(e) => {
                    assert!(alive.remove(&e.pid), "exit of unknown {}\n{}", e.pid, ctx());
                }
                other => {
                    let pid = other.pid().unwrap();
                    // Not before its Fork, nor after its Exit.
                    assert!(
                        alive.contains(&pid),
                        "{} of {pid} outside its life in the tree\n{}",
                        other.kind(),
                        ctx()
                    );
                }
            }
        }
        if !trailer.interrupted {
            assert!(alive.is_empty(), "no exit for {alive:?}\n{}", ctx());
            let root_exit = self.exit(root);
            assert_eq!(trailer.root_exit_code, root_exit.exit_code, "{}", ctx());
            assert_eq!(trailer.root_signal, root_exit.signal, "{}", ctx());
            // timeout(1)'s status when `--timeout` ended the tree.
            let expected = match trailer.timed_out {
                true => Some(124),
                false => root_exit.shell_status(),
            };
            assert_eq!(
                self.status.code(),
                expected,
                "proctrace's status is the command's\n{}",
                ctx()
            );
        }
    }
}

/// The recording at `path`, parsed line by line.
pub fn read_records(path: &Path) -> Vec<Record> {
    parse_lines(&fs::read_to_string(path).unwrap())
}

/// The header of parsed records.
pub fn header_in(records: &[Record]) -> &Header {
    records
        .iter()
        .find_map(|r| {
            if let Record::Header(h) = r {
                Some(h)
            } else {
                None
            }
        })
        .expect("a header")
}

/// The trailer of parsed records.
pub fn trailer_in(records: &[Record]) -> &Trailer {
    records
        .iter()
        .find_map(|r| {
            if let Record::Trailer(t) = r {
                Some(t)
            } else {
                None
            }
        })
        .expect("a trailer")
}

/// Whether a terminal would act on `c` rather than show it, in text meant
/// for one, where only the newlines that end lines may be controls.
pub fn terminal_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The most argv bytes (NULs included) a recording keeps.
pub const ARGV_LIMIT: usize = 32 * 1024;

/// Checks a truncated argv: a prefix of `full`, byte for byte, whole
/// entries but maybe the last, within the limit and not much shorter.
pub fn assert_kept_prefix<K: AsRef<[u8]>, F: AsRef<[u8]>>(kept: &[K], full: &[F]) {
    let kept: Vec<&[u8]> = kept.iter().map(AsRef::as_ref).collect();
    let full: Vec<&[u8]> = full.iter().map(AsRef::as_ref).collect();
    assert!(!kept.is_empty() && kept.len() <= full.len());
    let last = kept.len() - 1;
    assert!(kept[..last] == full[..last], "whole entries changed");
    assert!(
        full[last].starts_with(kept[last]),
        "the last kept entry is not a prefix of the original"
    );
    // Each entry and its NUL; a cut last entry may have lost its NUL.
    let mut bytes: usize = kept.iter().map(|a| a.len() + 1).sum();
    if kept[last] != full[last] {
        bytes -= 1;
    }
    assert!(bytes <= ARGV_LIMIT, "kept {bytes} bytes of argv");
    assert!(bytes >= 24 * 1024, "kept only {bytes} bytes of argv");
}

/// argv as owned strings, for comparisons.
pub fn strings(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|s| s.to_string()).collect()
}

/// Every descendant of `pid` with its comm, from /proc.
pub fn descendants(pid: Pid) -> Vec<(Pid, String)> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                let comm = fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
                found.push((child, comm.trim().to_string()));
                todo.push(child);
            }
        }
    }
    found
}

/// Kills a process of ours by pid (SIGKILL) if it still runs `comm`.
pub fn kill_if(pid: Pid, comms: &[&str]) {
    let Ok(comm) = fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return;
    };
    if comms.contains(&comm.trim()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A background process group of ours, killed (by its pgid) on drop.
pub struct Background(pub Child);

impl Background {
    /// Starts `sh -c script` in a process group of its own.
    pub fn sh(script: &str) -> Self {
        Self::spawn(
            Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::null()),
        )
    }

    /// Starts `command` in a process group of its own.
    pub fn spawn(command: &mut Command) -> Self {
        use std::os::unix::process::CommandExt;
        Background(command.process_group(0).spawn().unwrap())
    }

    pub fn pid(&self) -> Pid {
        self.0.id() as Pid
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.0.wait();
    }
}

/// A tmpfs mounted on a temp dir of its own, unmounted on drop (so even
/// when an assertion fails) before the dir goes.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `options` (e.g. "size=64k"), read-only if asked;
    /// mounting needs root.
    pub fn mount(options: &str, read_only: bool) -> Self {
        require_root();
        use nix::mount::MsFlags;
        let dir = tempfile::tempdir().unwrap();
        let flags = if read_only {
            MsFlags::MS_RDONLY
        } else {
            MsFlags::empty()
        };
        nix::mount::mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            flags,
            Some(options),
        )
        .unwrap_or_else(|e| panic!("mounting a tmpfs on {}: {e}", dir.path().display()));
        Tmpfs { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily, should a process of a failed test still hold a file.
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}
