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
mod control;
mod drain;
mod error;
mod frames;
mod hang;
mod hooks;
pub mod huge_pages;
mod launch;
mod lineage;
mod live;
mod load;
mod notice;
mod policy;
pub mod probes;
pub mod watch;
mod wire;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// The channel of [`LiveRecording::events`] and
/// [`LiveRecording::notices`]: crossbeam's, re-exported so that an
/// embedder can `select!` over it and its own channels with the same
/// version.
pub use crossbeam_channel::Receiver;

pub use error::{Degraded, MemoryLimit, RecordError, WatchError};
pub use hang::Taken;
pub use hooks::RUNS_MAX as ON_HANG_RUNS_MAX;
pub use launch::sudo_owner;
pub use live::{LiveRecording, Stopper};
pub use load::{default_ring_mib, BufferChoice, HookChoice, DEFAULT_MAX_PROCESSES};
pub use notice::{Lingerer, Notice};
pub use policy::DEFAULT_ON_HANG_TIMEOUT;

use crate::event::{Pid, SyscallHook};
use launch::Target;
use load::KernelConfig;
use policy::LingerPolicy;

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
    /// Whether Node is asked for perf maps of its JavaScript functions.
    node_perf_maps: bool,
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
            node_perf_maps: true,
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

    /// Whether the test marks may be one uprobe.multi link where the
    /// kernel has them (the default): off, they are two perf-event
    /// uprobes, as on kernels before 6.6.
    pub fn uprobe_multi(mut self, on: bool) -> Self {
        self.kernel.uprobe_multi = on;
        self
    }

    /// Forces how setsid and setpgid are hooked; `None` takes the cheapest
    /// this kernel allows (fexit, else the syscall tracepoints, else the
    /// raw sys_exit).
    pub fn syscall_hook(mut self, hook: Option<SyscallHook>) -> Self {
        self.kernel.syscall_hook = hook;
        self
    }

    /// For a process that exits when the recording ends, as the CLI
    /// does: detaches the hooks that wait out an RCU grace period each in
    /// a child process, so that this process's exit does not wait for
    /// them, and leaves the files the profile's names were read from
    /// (parsed DWARF, tens of MB) to the exit instead of freeing them
    /// one allocation at a time, as clang's `-disable-free` does.
    pub fn exits_after(mut self, exits_after: bool) -> Self {
        self.kernel.exits_after = exits_after;
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
    /// [`Record::Lingering`](crate::event::Record::Lingering) and, once the root has exited and only such
    /// processes are left, the recording ends. `None` (the default) waits
    /// for the whole tree.
    pub fn linger(mut self, linger: Option<Duration>) -> Self {
        self.policy.linger = linger;
        self
    }

    /// Like timeout(1): after `timeout`, takes a snapshot of the live tree,
    /// then ends it (SIGTERM, SIGKILL 2 s later) and records the exits;
    /// [`Trailer::timed_out`](crate::event::Trailer::timed_out) says so.
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

    /// Follows the tree's waits (`None`: not followed): every context
    /// switch of its threads is added up in the kernel by thread, test,
    /// what it waited on and who woke it; a wait of at least `threshold`
    /// is kept whole, with the kernel and user stacks it waited in and
    /// the stack of the thread of the tree that woke it. Sent after the
    /// last event as [`OffCpu`](crate::event::OffCpu),
    /// [`OnCpu`](crate::event::OnCpu) and
    /// [`LongWait`](crate::event::LongWait) records.
    pub fn off_cpu(mut self, threshold: Option<Duration>) -> Self {
        self.kernel.off_cpu =
            threshold.map(|t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX).max(1));
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

    /// Whether the names given to sampled frames are kept between
    /// recordings and looked up there first (on by default): in
    /// `$XDG_CACHE_HOME/proctrace/names` (else `~/.cache/…`), by each
    /// file's build id, bounded in size ([`crate::stacks::cache`]).
    pub fn name_cache(mut self, on: bool) -> Self {
        self.kernel.name_cache = on;
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

    /// With stacks (a CPU profile, or probes with stacks), whether the
    /// command starts with `--perf-basic-prof-only-functions` added to
    /// `NODE_OPTIONS` (after what it holds already), so that each Node
    /// process of the tree writes `/tmp/perf-PID.map` and its JavaScript
    /// functions are named; on by default. Node never deletes its maps:
    /// those of the Node processes that exited during the recording are
    /// removed once the frames are named.
    pub fn node_perf_maps(mut self, on: bool) -> Self {
        self.node_perf_maps = on;
        self
    }

    /// What says which test runs where, unasked (see
    /// [`Recorder::runner_probes`]); never an error. The marks need the
    /// ring the profile's thread reads.
    fn add_runner_probes(&mut self) {
        if self.kernel.buffer == BufferChoice::Perf {
            return;
        }
        let counted = self.kernel.cpu_profile.is_some() || self.kernel.off_cpu.is_some();
        if counted || !self.kernel.probes.is_empty() {
            self.kernel.test_marks = probes::runner::TestMarks::find();
        }
        let Some(command) = self.target.command() else {
            return;
        };
        let given = &self.kernel.probes;
        let runner = probes::runner::nextest_points(&command, given, load::probes_supported);
        if !runner.is_empty() {
            // Their hits need no stacks, unless probes were asked for.
            self.kernel.probe_stacks &= !given.is_empty();
            self.kernel.probes.extend(runner);
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
        let output = self.command_output.as_deref();
        let stacks = self.kernel.cpu_profile.is_some()
            || (!self.kernel.probes.is_empty() && self.kernel.probe_stacks);
        let node = stacks && self.node_perf_maps;
        let (prepared, command) = self.target.prepare(self.keep_root, output, node)?;
        let policy = LingerPolicy {
            command_output: self.command_output,
            ..self.policy
        };
        live::start(self.kernel, prepared, policy, command)
    }
}
