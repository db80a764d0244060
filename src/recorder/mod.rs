//! Recording a command's process tree: the engine behind `proctrace record`.
//!
//! [`Recorder`] loads the BPF program, starts the command stopped under
//! ptrace, seeds the kernel-side map with its pid and lets it exec; a
//! thread of its own then drains the kernel's buffer and sends events, in
//! one causal order, over a crossbeam channel to the [`LiveRecording`] handle.
//!
//! ```no_run
//! use proctrace::event::Record;
//! use proctrace::recorder::Recorder;
//!
//! # fn main() -> Result<(), proctrace::recorder::RecordError> {
//! let recording = Recorder::command(["sh", "-c", "ls / | wc -l"]).start()?;
//! println!("recording pid {}", recording.root_pid());
//! // Events arrive as they happen, in causal order; the channel closes
//! // when every process of the tree has exited.
//! for record in recording.events() {
//!     if let Record::Exec(exec) = record {
//!         println!("{} ran {}", exec.pid, exec.cmdline);
//!     }
//! }
//! let totals = recording.finish()?;
//! println!("{} events, {} lost, exit code {:?}", totals.events, totals.lost, totals.root_exit_code);
//! # Ok(())
//! # }
//! ```
//!
//! [`Recorder::attach`] follows processes that already run instead, and
//! [`LiveRecording::stopper`] stops a recording from another thread.

mod collect;
mod drain;
mod error;
mod hang;
mod hooks;
mod launch;
mod lineage;
mod load;
mod notice;
pub mod probes;
pub mod watch;
mod wire;

use nix::sys::eventfd::{EfdFlags, EventFd};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// The channel of [`LiveRecording::events`] and
/// [`LiveRecording::notices`]: crossbeam's, re-exported so that an
/// embedder can `select!` over it and its own channels with the same
/// version.
pub use crossbeam_channel::Receiver;

pub use error::{Degraded, MemoryLimit, RecordError};

/// How long an `--on-hang` run may take, unless
/// [`Recorder::on_hang_timeout`] says otherwise.
pub const DEFAULT_ON_HANG_TIMEOUT: Duration = Duration::from_secs(10);
/// How many processes of the tree can be alive at once, unless
/// [`Recorder::max_processes`] says otherwise.
pub const DEFAULT_MAX_PROCESSES: u32 = defaults::DEFAULT_MAX_PROCESSES.0;
/// The ring buffer's size in MiB, unless [`Recorder::ring_bytes`] says
/// otherwise: 2 MiB per CPU, from 4 to 16 MiB.
pub fn default_ring_mib() -> u32 {
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1) as u32;
    cpus.saturating_mul(defaults::RING_MIB_PER_CPU.0)
        .next_power_of_two()
        .clamp(defaults::MIN_RING_MIB.0, defaults::MAX_DEFAULT_RING_MIB.0)
}
pub use error::WatchError;
pub use hang::Taken;
pub use hooks::RUNS_MAX as ON_HANG_RUNS_MAX;
pub use launch::sudo_owner;
pub use load::{BufferChoice, HookChoice};
pub use notice::{Lingerer, Notice};

use crate::bpf::types::defaults;
use crate::event::{
    BufferKind, CpuProfile, Header, Pid, Record, SyscallHook, Trailer, FORMAT_VERSION,
};
use load::KernelConfig;

/// Events queued between the drain thread and the consumer. When the
/// consumer falls behind, the drain blocks and the kernel buffer absorbs
/// the rest (its drops are counted). The channel allocates every slot up
/// front, in RSS and page faults at every start (BENCHMARKS.md), for
/// nothing the ring does not already hold.
const QUEUE_CAPACITY: usize = 1 << 12;

/// Configures and starts a recording.
#[derive(Debug, Clone)]
pub struct Recorder {
    target: Target,
    keep_root: bool,
    command_output: Option<PathBuf>,
    policy: LingerPolicy,
    kernel: KernelConfig,
    /// The `--probe` specs, resolved at start.
    probe_specs: Vec<String>,
    /// Whether a test runner's own probes name its tests.
    runner_probes: bool,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            buffer: BufferChoice::Auto,
            hooks: HookChoice::Auto,
            syscall_hook: None,
            raw: false,
            max_processes: DEFAULT_MAX_PROCESSES,
            ring_bytes: default_ring_mib() << 20,
            // 1 MiB per CPU: bursts of thousands of processes between polls.
            perf_pages: 256,
            btf: None,
            capture_fds: true,
            env_names: crate::event::RUNNER_VARIABLES
                .iter()
                .map(|n| n.to_string())
                .collect(),
            detach_in_child: false,
            cpu_profile: None,
            probes: Vec::new(),
            probe_stacks: true,
            test_marks: None,
        }
    }
}

impl Recorder {
    /// Records `command` (program and arguments) and its whole tree.
    pub fn command<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self::new(Target::Command(
            command.into_iter().map(Into::into).collect(),
        ))
    }

    /// Records processes that already run, with all their present and
    /// future descendants, until they have all exited.
    pub fn attach(pids: impl IntoIterator<Item = Pid>) -> Self {
        Self::new(Target::Pids(pids.into_iter().collect()))
    }

    fn new(target: Target) -> Self {
        Recorder {
            target,
            keep_root: false,
            command_output: None,
            policy: LingerPolicy::default(),
            kernel: KernelConfig::default(),
            probe_specs: Vec::new(),
            runner_probes: true,
        }
    }

    /// Records every process on the machine, not only the tree (for
    /// `proctrace ingest`). The recording still ends with the tree.
    pub fn raw(mut self, raw: bool) -> Self {
        self.kernel.raw = raw;
        self
    }

    /// Chooses the kernel-to-user buffer.
    pub fn buffer(mut self, buffer: BufferChoice) -> Self {
        self.kernel.buffer = buffer;
        self
    }

    /// Chooses how the scheduler tracepoints are hooked.
    pub fn hooks(mut self, hooks: HookChoice) -> Self {
        self.kernel.hooks = hooks;
        self
    }

    /// Forces how setsid and setpgid are hooked; `None` takes the cheapest
    /// this kernel allows (fexit, else the syscall tracepoints, else the
    /// raw sys_exit).
    pub fn syscall_hook(mut self, hook: Option<SyscallHook>) -> Self {
        self.kernel.syscall_hook = hook;
        self
    }

    /// For a process that exits when the recording ends: detaches the
    /// hooks that wait out an RCU grace period each in a child process,
    /// so that this process's exit does not wait for them.
    pub fn detach_in_child(mut self, detach_in_child: bool) -> Self {
        self.kernel.detach_in_child = detach_in_child;
        self
    }

    /// Under sudo, runs the command as root instead of the invoking user.
    pub fn keep_root(mut self, keep_root: bool) -> Self {
        self.keep_root = keep_root;
        self
    }

    /// Sends the command's stdout and stderr to a file (created or
    /// truncated), and its stdin from /dev/null: for when the terminal is
    /// proctrace's own, as with a full-screen view.
    pub fn command_output(mut self, path: Option<PathBuf>) -> Self {
        self.command_output = path;
        self
    }

    /// Stops waiting for a process once it has outlived the process that
    /// started it, or the root, by `linger`: it is recorded as
    /// [`Record::Lingering`] and, once the root has exited and only such
    /// processes are left, the recording ends. `None` (the default) waits
    /// for the whole tree.
    pub fn linger(mut self, linger: Option<Duration>) -> Self {
        self.policy.linger = linger;
        self
    }

    /// Like timeout(1): after `timeout`, takes a snapshot of the live tree,
    /// then ends it (SIGTERM, SIGKILL 2 s later) and records the exits;
    /// [`Trailer::timed_out`] says so.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.policy.timeout = timeout;
        self
    }

    /// The signal `timeout` ends the tree with first (SIGTERM by default):
    /// SIGQUIT makes Go and Java print their goroutines and threads,
    /// SIGABRT dumps a core. SIGKILL follows 2 s later.
    pub fn timeout_signal(mut self, signal: nix::sys::signal::Signal) -> Self {
        self.policy.timeout_signal = signal;
        self
    }

    /// After each snapshot, runs `command` through `sh -c` once per
    /// culprit of the wait analysis (at most [`ON_HANG_RUNS_MAX`]; the
    /// others are counted), with `{}` replaced by the culprit's pid and
    /// PROCTRACE_PID set to it: `py-spy dump --pid {}`, say. Each run's
    /// output and status are recorded as [`crate::event::OnHang`]. The
    /// runs happen before `timeout` ends the tree.
    pub fn on_hang(mut self, command: Option<String>) -> Self {
        self.policy.on_hang = command;
        self
    }

    /// How long an `on_hang` run may take before its process group is
    /// killed (10 s by default).
    pub fn on_hang_timeout(mut self, timeout: Duration) -> Self {
        self.policy.on_hang_timeout = timeout;
        self
    }

    /// Takes a snapshot of the live tree when no event of it has come for
    /// `quiet` while processes are alive; another only after new events
    /// and another quiet period.
    pub fn hang_after(mut self, quiet: Option<Duration>) -> Self {
        self.policy.hang_after = quiet;
        self
    }

    /// Ends lingering processes (SIGTERM, SIGKILL two seconds later) and
    /// records their exits, instead of leaving them running.
    pub fn kill_lingering(mut self, kill: bool) -> Self {
        self.policy.kill = kill;
        self
    }

    /// Makes this process the subreaper of the tree (PR_SET_CHILD_SUBREAPER):
    /// orphans become its children, are reaped by the recording and can be
    /// killed cleanly. It changes the whole process, so embedders decide;
    /// the default is off.
    pub fn subreaper(mut self, subreaper: bool) -> Self {
        self.policy.subreaper = subreaper;
        self
    }

    /// Most processes of the tree alive at once (size of the kernel map).
    pub fn max_processes(mut self, max: u32) -> Self {
        self.kernel.max_processes = max;
        self
    }

    /// Size of the ring buffer in bytes: a power of two, at least a page
    /// ([`RecordError::RingSize`] otherwise).
    pub fn ring_bytes(mut self, bytes: u32) -> Self {
        self.kernel.ring_bytes = bytes;
        self
    }

    /// Records the file descriptors each program starts with (the default).
    pub fn capture_fds(mut self, capture: bool) -> Self {
        self.kernel.capture_fds = capture;
        self
    }

    /// Keeps these environment variables of every exec too, besides the
    /// test runners' ([`crate::event::RUNNER_VARIABLES`]). The rest of
    /// an environment is dropped as it is decoded, never recorded.
    pub fn env<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        for name in names.into_iter().map(Into::into) {
            if !self.kernel.env_names.contains(&name) {
                self.kernel.env_names.push(name);
            }
        }
        self
    }

    /// BTF of the running kernel, for kernels without /sys/kernel/btf/vmlinux.
    pub fn btf(mut self, path: Option<PathBuf>) -> Self {
        self.kernel.btf = path;
        self
    }

    /// Samples the tree's CPUs `hz` times a second (`None`: no profile):
    /// where each process spent its CPU time, as call stacks, sent after
    /// the last event as [`Frame`](crate::event::Frame),
    /// [`Stack`](crate::event::Stack) and
    /// [`CpuSamples`](crate::event::CpuSamples) records. Only the tree's
    /// samples leave the kernel.
    ///
    /// ```no_run
    /// use proctrace::recorder::Recorder;
    /// use proctrace::stacks::Profile;
    ///
    /// # fn main() -> Result<(), proctrace::recorder::RecordError> {
    /// let recording = Recorder::command(["make", "-j4"]).cpu_profile(Some(99)).start()?;
    /// let mut profile = Profile::default();
    /// for record in recording.events() {
    ///     // Events pass through; the profile's lines come last.
    ///     let _event = profile.take(record);
    /// }
    /// recording.finish()?;
    /// for samples in &profile.samples {
    ///     let leaf = profile.stack(samples.stack).last().map(|f| f.label());
    ///     println!("{} {:?} {}", samples.pid, leaf, samples.count);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn cpu_profile(mut self, hz: Option<u32>) -> Self {
        self.kernel.cpu_profile = hz;
        self
    }

    /// Attaches probes to functions and USDT probes (`--probe` specs,
    /// `uprobe:FILE:FUNCTION[+OFFSET]`, `uretprobe:FILE:FUNCTION`,
    /// `usdt:FILE:PROVIDER:NAME`), for all processes, counting the hits of
    /// the tree only: each process's hits per probe and stack, and the
    /// USDT arguments, sent after the last event as
    /// [`ProbeHits`](crate::event::ProbeHits) and
    /// [`ProbeArgs`](crate::event::ProbeArgs) records; the header lists
    /// the probes. With `stacks`, each hit's user stack is unwound as a
    /// CPU sample's is. The specs are resolved when the recording starts:
    /// a missing file or function is a [`RecordError::Probe`].
    ///
    /// ```no_run
    /// use proctrace::recorder::Recorder;
    /// use proctrace::stacks::Profile;
    ///
    /// # fn main() -> Result<(), proctrace::recorder::RecordError> {
    /// let recording = Recorder::command(["make", "test"])
    ///     .probes(["uprobe:libc:malloc".to_owned()], true)
    ///     .start()?;
    /// let probes = recording.header().probes.clone();
    /// let mut profile = Profile::default();
    /// for record in recording.events() {
    ///     let _event = profile.take(record);
    /// }
    /// recording.finish()?;
    /// for hits in &profile.probe_hits {
    ///     println!("{} {} {}", hits.pid, probes[hits.probe as usize].label(), hits.count);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn probes(mut self, specs: impl IntoIterator<Item = String>, stacks: bool) -> Self {
        self.probe_specs = specs.into_iter().collect();
        self.kernel.probe_stacks = stacks;
        self
    }

    /// Whether test runners say which tests run where (on by default,
    /// where the kernel can follow them; without them tests are named
    /// from command lines and environments): a command that runs nextest
    /// has its tests named by nextest's own probes (`test-attempt-start`
    /// and `-done`), which say each test's process and result, recorded as
    /// [`TestAttempt`](crate::event::TestAttempt)s; and with a CPU profile
    /// or probes, a process that names its current test in a variable
    /// (pytest's `PYTEST_CURRENT_TEST`) has its samples and hits split by
    /// that test ([`CpuSamples::test`](crate::event::CpuSamples::test)).
    pub fn runner_probes(mut self, on: bool) -> Self {
        self.runner_probes = on;
        self
    }

    /// What says which test runs where, unasked (see
    /// [`Recorder::runner_probes`]); never an error. The marks need the
    /// ring the profile's thread reads.
    fn add_runner_probes(&mut self) {
        if self.kernel.buffer == BufferChoice::Perf {
            return;
        }
        if self.kernel.cpu_profile.is_some() || !self.kernel.probes.is_empty() {
            self.kernel.test_marks = probes::runner::TestMarks::find();
        }
        self.add_nextest_probes();
    }

    /// nextest's test probes, where the command runs nextest and this
    /// kernel can attach them.
    fn add_nextest_probes(&mut self) {
        let Target::Command(argv) = &self.target else {
            return;
        };
        let command: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let asked = self.kernel.probes.iter().any(|p| {
            matches!(
                p.place,
                probes::Place::Usdt {
                    attempt: Some(_),
                    ..
                }
            )
        });
        let specs = match asked {
            true => return,
            false => probes::runner::nextest_specs(&command),
        };
        if specs.is_empty() || !load::probes_supported() {
            return;
        }
        // After the probes given, numbered on from them.
        let given = self.kernel.probes.len();
        match probes::resolve(&specs) {
            Ok(runner) if given + runner.len() <= probes::MAX_PROBES => {
                for mut point in runner {
                    point.point.id += given as u32;
                    point.optional = true;
                    self.kernel.probes.push(point);
                }
                self.kernel.probe_stacks &= given > 0;
            }
            Ok(_) => log::debug!("nextest's probes: past the {} probes", probes::MAX_PROBES),
            Err(err) => log::debug!("nextest's probes: {err}"),
        }
    }

    /// Loads the BPF program, starts the command and returns once its first
    /// exec is under way.
    pub fn start(mut self) -> Result<LiveRecording, RecordError> {
        if let Some(hz) = self.kernel.cpu_profile {
            load::check_rate(hz)?;
        }
        self.kernel.probes = probes::resolve(&self.probe_specs)?;
        if self.runner_probes {
            self.add_runner_probes();
        }
        let (prepared, command) = match &self.target {
            Target::Command(argv) => {
                let command = argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                (
                    Prepared::Launch(launch::Launch::new(
                        argv,
                        self.keep_root,
                        self.command_output.as_deref(),
                    )?),
                    command,
                )
            }
            Target::Pids(pids) if pids.is_empty() => return Err(RecordError::NoCommand),
            Target::Pids(pids) => {
                let attach = launch::running::Attach::new(pids)?;
                let command = attach.command();
                (Prepared::Attach(attach), command)
            }
        };
        let start_time = SystemTime::now();
        let control = Arc::new(Control::new());
        let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
        let (events_tx, events_rx) = crossbeam_channel::bounded(QUEUE_CAPACITY);
        let (notices_tx, notices_rx) = crossbeam_channel::unbounded();
        let outputs = drain::Outputs {
            events: events_tx,
            notices: notices_tx,
            ready: ready_tx,
        };
        let policy = LingerPolicy {
            command_output: self.command_output.clone(),
            ..self.policy.clone()
        };
        let config = self.kernel.clone();
        let thread_control = Arc::clone(&control);
        let thread = std::thread::Builder::new()
            .name("proctrace-drain".into())
            .spawn(move || drain::run(config, prepared, policy, thread_control, outputs))
            .map_err(RecordError::system("starting the drain thread"))?;
        let started = match ready_rx.recv() {
            Ok(Ok(started)) => started,
            Ok(Err(err)) => {
                let _ = thread.join();
                return Err(err);
            }
            Err(_) => return Err(join_error(thread)),
        };
        let header = Header {
            format_version: FORMAT_VERSION,
            proctrace_version: env!("CARGO_PKG_VERSION").to_string(),
            start_time: humantime::format_rfc3339_nanos(start_time).to_string(),
            root_pid: started.root_pid,
            command,
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            raw: self.kernel.raw,
            buffer: started.buffer,
            syscall_hook: started.syscall_hook,
            cpus: online_cpus(),
            cpu_profile: started.cpu_profile,
            probes: self.kernel.probes.iter().map(|p| p.point.clone()).collect(),
        };
        Ok(LiveRecording {
            header,
            warnings: started.warnings,
            tracked: started.tracked,
            events: events_rx,
            notices: notices_rx,
            control,
            thread,
        })
    }
}

/// What a recording follows.
#[derive(Debug, Clone)]
enum Target {
    Command(Vec<OsString>),
    Pids(Vec<Pid>),
}

/// A target checked and ready to start on the drain thread.
enum Prepared {
    Launch(launch::Launch),
    Attach(launch::running::Attach),
}

impl Prepared {
    /// Starts following the target, `seed` putting each first process
    /// into the kernel's tracked map; returns the root pid.
    fn start(
        &self,
        probe: &load::Probe<'_>,
        seed: impl Fn(Pid) -> Result<(), RecordError>,
    ) -> Result<Pid, RecordError> {
        match self {
            Prepared::Launch(launch) => launch.start(seed),
            Prepared::Attach(attach) => attach.start(seed, |pid| probe.untrack(pid)),
        }
    }

    /// Whether the root is proctrace's child, whose status it collects.
    fn is_child(&self) -> bool {
        matches!(self, Prepared::Launch(_))
    }
}

fn join_error(thread: JoinHandle<Result<Trailer, RecordError>>) -> RecordError {
    match thread.join() {
        Ok(Err(err)) => err,
        _ => RecordError::System {
            context: "the drain thread".into(),
            source: std::io::Error::other("stopped unexpectedly"),
        },
    }
}

/// What to do about processes that outlive their parent or the root.
#[derive(Debug, Clone)]
struct LingerPolicy {
    linger: Option<Duration>,
    kill: bool,
    subreaper: bool,
    /// `--timeout`: snapshot, then end the tree.
    timeout: Option<Duration>,
    /// What `timeout` ends the tree with, before SIGKILL.
    timeout_signal: nix::sys::signal::Signal,
    /// `--hang-after`: snapshot once the tree has been quiet this long.
    hang_after: Option<Duration>,
    /// `--on-hang`: run for each culprit after a snapshot.
    on_hang: Option<String>,
    on_hang_timeout: Duration,
    /// `--command-output`: its last line goes into each snapshot.
    command_output: Option<PathBuf>,
}

impl Default for LingerPolicy {
    fn default() -> Self {
        LingerPolicy {
            linger: None,
            kill: false,
            subreaper: false,
            timeout: None,
            timeout_signal: nix::sys::signal::Signal::SIGTERM,
            hang_after: None,
            on_hang: None,
            on_hang_timeout: DEFAULT_ON_HANG_TIMEOUT,
            command_output: None,
        }
    }
}

/// What the drain thread reports once it has started the command.
struct Started {
    root_pid: Pid,
    buffer: BufferKind,
    syscall_hook: Option<SyscallHook>,
    warnings: Vec<Degraded>,
    tracked: libbpf_rs::MapHandle,
    cpu_profile: Option<CpuProfile>,
}

/// Requests from the consumer to the drain thread.
#[derive(Debug)]
struct Control {
    stop: AtomicBool,
    abort: AtomicBool,
    /// A signal asking for a snapshot (0: none); recording goes on.
    snapshot: AtomicI32,
    /// A signal to pass on to the root after a snapshot, then stop (0: none).
    interrupt: AtomicI32,
    /// Written after each request: the drain waits on it beside the
    /// kernel's buffer, so a snapshot starts at once, not a poll later.
    wake: Option<EventFd>,
}

impl Control {
    fn new() -> Control {
        Control {
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            snapshot: AtomicI32::new(0),
            interrupt: AtomicI32::new(0),
            wake: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).ok(),
        }
    }

    fn wake(&self) {
        if let Some(wake) = &self.wake {
            let _ = wake.write(1);
        }
    }
}

/// A recording under way (what [`Recorder::start`] returns), as opposed
/// to one read back from a file ([`crate::recording::Recording`]).
pub struct LiveRecording {
    header: Header,
    warnings: Vec<Degraded>,
    tracked: libbpf_rs::MapHandle,
    events: Receiver<Record>,
    notices: Receiver<Notice>,
    control: Arc<Control>,
    thread: JoinHandle<Result<Trailer, RecordError>>,
}

/// Stops a recording from another thread (a signal handler's, say).
#[derive(Debug, Clone)]
pub struct Stopper(Arc<Control>);

impl Stopper {
    /// Ends the recording soon: events already in the kernel's buffer and
    /// the tree's exits within a short grace period are still delivered.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Relaxed);
        self.0.wake();
    }

    /// Ends the recording now, dropping events not yet delivered.
    pub fn abort(&self) {
        self.0.abort.store(true, Ordering::Relaxed);
        self.0.wake();
    }

    /// Takes a snapshot of the live tree, saying it was `signal` that
    /// asked; the recording goes on.
    pub fn snapshot(&self, signal: i32) {
        self.0.snapshot.store(signal, Ordering::Relaxed);
        self.0.wake();
    }

    /// Takes a snapshot of the live tree, then sends `signal` on to the
    /// root (SIGINT is not sent: a terminal delivers it to the tree
    /// itself) and stops as [`Stopper::stop`] does.
    pub fn interrupt(&self, signal: i32) {
        self.0.interrupt.store(signal, Ordering::Relaxed);
        self.0.wake();
    }
}

impl LiveRecording {
    /// The header line for this recording.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The pid of the command.
    pub fn root_pid(&self) -> Pid {
        self.header.root_pid
    }

    /// Limits of this kernel, to tell the user once.
    pub fn warnings(&self) -> &[Degraded] {
        &self.warnings
    }

    /// The map of the processes the kernel side follows, the one it
    /// filters every event with: a BPF hash map whose key is a followed
    /// process's pid (an `i32`, in the initial pid namespace) and whose
    /// value is one byte. A process is in it from its fork (or from
    /// `attach`) until its exit. Its key and value layout is a stable
    /// promise: an embedder may read it, or share it with a BPF object of
    /// its own (`OpenMapMut::reuse_fd`) to follow the same tree, without
    /// depending on the rest of the BPF side. It must not write to it.
    pub fn tracked_map(&self) -> &libbpf_rs::MapHandle {
        &self.tracked
    }

    /// The events, in order; the channel closes when the recording ends.
    pub fn events(&self) -> &Receiver<Record> {
        &self.events
    }

    /// What the recording finds worth saying while it runs: the root
    /// exiting before its tree, lingering processes, signals sent.
    pub fn notices(&self) -> &Receiver<Notice> {
        &self.notices
    }

    /// A handle that can stop the recording from elsewhere.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.control))
    }

    /// Waits for the recording to end and returns its totals. Events not
    /// yet received are discarded.
    pub fn finish(self) -> Result<Trailer, RecordError> {
        drop(self.events);
        self.thread.join().unwrap_or_else(|_| {
            Err(RecordError::System {
                context: "the drain thread".into(),
                source: std::io::Error::other("panicked"),
            })
        })
    }
}

/// How many CPUs are online, if the system says.
fn online_cpus() -> Option<u32> {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(online).ok().filter(|&n| n > 0)
}
