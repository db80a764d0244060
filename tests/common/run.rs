//! Recording a command with the real `proctrace record` (each mode of the
//! kernel hooks and buffer), or watching a live run, and reading what it
//! wrote: the runs the kernel tests check.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use proctrace::event::{BufferKind, Exec, Exit, Fork, Header, Pid, Record, SyscallHook, Trailer};

use super::*;

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
    pub fn flags(self) -> &'static [&'static str] {
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

    pub fn buffer(self) -> BufferKind {
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
