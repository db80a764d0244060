//! `proctrace record`: runs or attaches, writes the recording.

use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::{Cause, Origin};

use proctrace::event::{SyscallHook, Trailer};
use proctrace::recorder::{self as record, BufferChoice, HookChoice, LiveRecording, Recorder};
use proctrace::recording::{Output, Reserved};

use super::live::Live;
use super::session::{Session, Tree};
use super::status::Status;

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where the recording goes ('-' for stdout, which the command's own
    /// output would then share).
    #[arg(short, long, value_name = "FILE", default_value = "proctrace.ndjson")]
    output: PathBuf,
    /// Record every process on the machine, for `proctrace ingest --root-pid` later.
    #[arg(long)]
    raw: bool,
    /// Use the per-CPU perf buffer even where the kernel has a ring buffer.
    #[arg(long)]
    perf_buffer: bool,
    /// Hook raw tracepoints instead of BTF-typed ones.
    #[arg(long, hide = true)]
    raw_tracepoints: bool,
    /// Hook BTF-typed tracepoints even where setsid and setpgid are not
    /// hooked by fexit.
    #[arg(long, hide = true, conflicts_with = "raw_tracepoints")]
    btf_tracepoints: bool,
    /// Arm the test marks as two perf-event uprobes even where the kernel
    /// has uprobe.multi links.
    #[arg(long, hide = true)]
    no_uprobe_multi: bool,
    /// How to see setsid and setpgid: auto takes the cheapest the kernel allows (fexit,
    /// else the syscall tracepoints, else sys-exit, which every syscall pays for).
    // The path spelled out keeps clap from reading `Option` as "may be
    // absent": `auto` is the None.
    #[arg(long, value_name = "HOOK", value_parser = syscall_hook_parser(), default_value = "auto")]
    syscall_hook: std::option::Option<SyscallHook>,
    /// Under sudo, run the command as root rather than as the invoking user.
    #[arg(long)]
    keep_root: bool,
    /// Most processes of the tree that can be alive at the same time.
    #[arg(long, value_name = "N", default_value_t = record::DEFAULT_MAX_PROCESSES)]
    max_processes: u32,
    /// Size of the kernel's ring buffer in MiB (a power of two) [default: 2 per CPU,
    /// from 4 to 16].
    #[arg(long, value_name = "MIB", value_parser = buffer_mib)]
    buffer_mib: Option<u32>,
    /// Stop waiting for a process DURATION after the process that started it, or the
    /// command itself, has exited (e.g. 2s, 500ms): it is recorded as lingering. Once
    /// the command has exited and only lingering processes are left, the recording ends.
    #[arg(long, value_name = "DURATION", value_parser = super::duration)]
    linger: Option<std::time::Duration>,
    /// No status line and no closing summary on stderr (warnings, errors and what a
    /// snapshot found still show).
    #[arg(short, long)]
    quiet: bool,
    /// Show the tree as it runs, full screen: q leaves the view and recording goes on,
    /// h takes a hang snapshot. The command's output goes to --command-output.
    #[arg(long, conflicts_with = "pids")]
    live: bool,
    /// Send the command's stdout and stderr to FILE, its stdin from /dev/null. With
    /// --live it defaults to the recording's name with .log added.
    #[arg(long, value_name = "FILE", conflicts_with = "pids")]
    command_output: Option<PathBuf>,
    /// Do not record the file descriptors each program starts with.
    #[arg(long)]
    no_fds: bool,
    /// End lingering processes (SIGTERM, then SIGKILL after 2 s) and record their exits.
    #[arg(long, requires = "linger")]
    kill_lingering: bool,
    /// Like timeout(1): after DURATION, take a snapshot of the live tree (on stderr and in
    /// the recording), end the tree (SIGTERM, then SIGKILL 2 s later), record the exits and
    /// exit with 124. 0 means no limit, as for timeout(1).
    #[arg(long, value_name = "DURATION", value_parser = super::duration)]
    timeout: Option<std::time::Duration>,
    /// The signal --timeout ends the tree with, before SIGKILL 2 s later: QUIT makes Go
    /// and Java print their goroutines and threads, ABRT dumps a core. A name (QUIT,
    /// SIGQUIT) or a number.
    #[arg(long, value_name = "SIG", default_value = "TERM", value_parser = signal_name, requires = "timeout")]
    timeout_signal: nix::sys::signal::Signal,
    /// When no process of the tree has forked, exec'd or exited for DURATION while
    /// processes run, take a snapshot of the live tree and say what it waits for; recording
    /// goes on (another snapshot only after new events and another quiet DURATION). 0 means
    /// never, as for --timeout.
    #[arg(long, value_name = "DURATION", value_parser = super::duration)]
    hang_after: Option<std::time::Duration>,
    /// After each snapshot, run CMD through `sh -c` once per culprit (at most 8, the
    /// others are counted), with `{}` replaced by its pid and PROCTRACE_PID set to it:
    /// 'py-spy dump --pid {}', 'eu-stack -p {}', "gdb -batch -p {} -ex 'thread apply all
    /// bt'". Its output and status go into the recording, and under the culprit in
    /// `render -d hang`. With --timeout, it runs before the tree is ended.
    #[arg(long, value_name = "CMD")]
    on_hang: Option<String>,
    /// How long an --on-hang run may take before its whole process group is killed.
    #[arg(long, value_name = "DURATION", value_parser = hook_timeout,
          default_value = "10s", requires = "on_hang")]
    on_hang_timeout: std::time::Duration,
    /// Also keep environment variable NAME of every exec (repeatable); by default only
    /// the test runners' (PYTEST_CURRENT_TEST, BATS_TEST_FILENAME, BATS_TEST_NAME,
    /// NEXTEST_BINARY_ID) are kept, and the rest of each environment is never recorded.
    #[arg(long = "env", value_name = "NAME", value_parser = env_name)]
    env: Vec<String>,
    /// Sample where the tree's processes spend their CPU time, HZ times a second of
    /// each CPU (99 without a value; the `=` is needed): kernel and user stacks of
    /// every thread of the tree, filtered in the kernel, unwound and symbolized when
    /// the recording ends. `render -d cpu`, `-d cpu-folded`, `-d cpu-flamegraph`, `-d pprof`
    /// and `-d html` show them.
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true,
          default_missing_value = "99")]
    cpu_profile: Option<u32>,
    /// Follow where the tree's threads wait: every context switch of the tree is added up
    /// in the kernel by thread, test, what it waited on (sleep, child, pipe, socket, poll,
    /// lock, disk, page fault, runnable) and who woke it; a wait of DURATION or more (1ms
    /// without a value; the `=` is needed) is kept with its kernel and user stacks and its
    /// waker's, the shorter ones counted without stacks. `render -d wall` and
    /// `-d offcpu-folded` show them.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, require_equals = true,
          default_missing_value = "1ms", value_parser = super::duration)]
    off_cpu: Option<std::time::Duration>,
    /// Count the tree's hits of a function, USDT probe or kernel tracepoint
    /// (repeatable): `uprobe:FILE:FUNCTION[+OFFSET]`, `uretprobe:FILE:FUNCTION`,
    /// `usdt:FILE:PROVIDER:NAME` or `tracepoint:CATEGORY:NAME`, FILE a path or a library
    /// or program name (`libc`, `python3`), FUNCTION, NAME and CATEGORY may hold `*` and
    /// `?`; then `keep VALUES` and `if FILTER`. Attached for every process before the
    /// command starts; only the tree's hits leave the kernel, each with its stacks and
    /// kept values. `render -d probes` and `-d probe-folded` show them.
    #[arg(long = "probe", value_name = "SPEC")]
    probes: Vec<String>,
    /// With --probe: count hits and arguments only, without copying and unwinding
    /// the stack at each (cheaper per hit).
    #[arg(long, requires = "probes")]
    no_probe_stacks: bool,
    /// Name tests from command lines and environments alone: without this, a
    /// command that runs nextest has its tests named by nextest's own probes
    /// (test-attempt-start and -done), and with --cpu-profile or --probe a
    /// pytest process's samples and hits are split by the test it says runs.
    #[arg(long)]
    no_runner_probes: bool,
    /// With --cpu-profile or --probe: name the stacks' frames afresh, without
    /// looking in or adding to the names kept from earlier recordings
    /// ($XDG_CACHE_HOME/proctrace/names, by each file's build id).
    #[arg(long)]
    no_cache: bool,
    /// With --cpu-profile (or --probe with stacks): start the command without
    /// adding --perf-basic-prof-only-functions to NODE_OPTIONS. Node's
    /// JavaScript functions are then unnamed, and Node writes no
    /// /tmp/perf-PID.map.
    #[arg(long)]
    no_node_perf_map: bool,
    /// BTF of the running kernel, for kernels without /sys/kernel/btf/vmlinux.
    #[arg(long, value_name = "FILE")]
    btf: Option<PathBuf>,
    /// Record this running process and all its present and future
    /// descendants instead of running a command (repeatable).
    #[arg(long = "pid", value_name = "PID", conflicts_with = "command")]
    pids: Vec<i32>,
    /// When the recording ends, send its spans to the OpenTelemetry collector the
    /// OTEL_EXPORTER_OTLP_* variables name (as `proctrace export otlp` does); a failure
    /// is a warning, never the command's exit status.
    #[cfg(feature = "otlp")]
    #[arg(long)]
    otlp: bool,
    /// The command to record and its arguments.
    #[arg(
        required_unless_present = "pids",
        trailing_var_arg = true,
        value_name = "CMD"
    )]
    command: Vec<std::ffi::OsString>,
}

/// `--syscall-hook`: `auto` (the recorder chooses) or one of the hooks.
fn syscall_hook_parser() -> impl clap::builder::TypedValueParser<Value = Option<SyscallHook>> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    use clap::ValueEnum;
    let hooks = SyscallHook::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value);
    PossibleValuesParser::new(std::iter::once(PossibleValue::new("auto")).chain(hooks))
        .map(|name| SyscallHook::from_str(&name, false).ok())
}

/// Runs `proctrace record`; returns the command's exit status.
pub fn run(args: RecordArgs) -> Result<i32> {
    if args.live && (args.output.as_os_str() == "-" || !io::stdout().is_terminal()) {
        anyhow::bail!("--live needs stdout to be a terminal, and the recording in a file");
    }
    #[cfg(feature = "otlp")]
    if args.otlp && args.output.as_os_str() == "-" {
        anyhow::bail!("--otlp needs the recording in a file, not on stdout");
    }
    let command_output = args.command_output.clone().or_else(|| {
        let mut log = args.output.clone().into_os_string();
        log.push(".log");
        args.live.then(|| log.into())
    });
    let output = reserve_output(&args.output)?;
    super::narration::start();
    let signals = Signals::install()?;
    let recorder = if args.pids.is_empty() {
        Recorder::command(&args.command)
    } else {
        Recorder::attach(args.pids.iter().copied())
    };
    let recording = recorder
        .raw(args.raw)
        .buffer(if args.perf_buffer {
            BufferChoice::Perf
        } else {
            BufferChoice::Auto
        })
        .hooks(match (args.raw_tracepoints, args.btf_tracepoints) {
            (true, _) => HookChoice::Raw,
            (_, true) => HookChoice::Btf,
            _ => HookChoice::Auto,
        })
        .syscall_hook(args.syscall_hook)
        .uprobe_multi(!args.no_uprobe_multi)
        .exits_after(true)
        .keep_root(args.keep_root)
        .max_processes(args.max_processes)
        .ring_bytes(
            args.buffer_mib
                .unwrap_or_else(record::default_ring_mib)
                .saturating_mul(1 << 20),
        )
        .btf(args.btf.clone())
        .linger(args.linger)
        .kill_lingering(args.kill_lingering)
        .timeout(args.timeout.filter(|t| !t.is_zero()))
        .timeout_signal(args.timeout_signal)
        .hang_after(args.hang_after.filter(|t| !t.is_zero()))
        .on_hang(args.on_hang.clone())
        .on_hang_timeout(args.on_hang_timeout)
        .subreaper(true)
        .capture_fds(!args.no_fds)
        .env(args.env.iter().cloned())
        .cpu_profile(args.cpu_profile)
        .off_cpu(args.off_cpu)
        .probes(args.probes.iter().cloned(), !args.no_probe_stacks)
        .runner_probes(!args.no_runner_probes)
        .name_cache(!args.no_cache)
        .node_perf_maps(!args.no_node_perf_map)
        .command_output(command_output.clone())
        .start();
    // Dropped on an error, the reserved output leaves no recording behind
    // for a run that never started, and keeps the one it would replace.
    let recording = recording.map_err(with_hint)?;
    for warning in recording.warnings() {
        say!("proctrace: warning: {warning}");
    }
    signals.watch(&recording);
    let command = proctrace::text::shell_join(&recording.header().command);
    let mut status = Status::new(!args.quiet, recording.root_pid(), command.clone());
    let live = if args.live {
        Some(Live::open(&command).context("opening the terminal")?)
    } else {
        status.show();
        None
    };
    let output = output.begin();
    let tree = if live.is_some() || args.output.as_os_str() == "-" {
        Tree::Kept(Box::default())
    } else {
        Tree::OnDisk(args.output.clone())
    };
    let (processes, totals, output) =
        Session::new(output, tree, &mut status, live).run(recording)?;
    status.close();
    if totals.interrupted {
        tell_left_running(&status);
    }
    if let Some(log) = command_output.filter(|_| !args.quiet) {
        say!("proctrace: the command's output is in {}", log.display());
    }
    report(&output, processes, &totals, args.quiet)?;
    #[cfg(feature = "otlp")]
    if args.otlp {
        super::export::after_record(&args.output, args.quiet);
    }
    Ok(exit_status(&totals, !args.pids.is_empty()))
}

/// Groups of alike processes listed when an interrupted recording leaves
/// processes running; the others are counted.
const LEFT_LISTED: usize = 10;

/// Says which processes of the tree an interrupted recording leaves
/// running (proctrace passes a signal on and no further: what ignores it
/// runs on), alike ones folded into a line: `3 × sleep 30 (pids 7-9)`.
fn tell_left_running(status: &Status) {
    let mut left: Vec<(i32, &str)> = status
        .alive()
        .filter(|(pid, _)| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    if left.is_empty() {
        return;
    }
    left.sort_unstable();
    let mut groups: Vec<(&str, Vec<i32>)> = Vec::new();
    for (pid, command) in &left {
        match groups.iter_mut().find(|(c, _)| c == command) {
            Some((_, pids)) => pids.push(*pid),
            None => groups.push((command, vec![*pid])),
        }
    }
    let runs = if left.len() == 1 { "runs" } else { "run" };
    let processes = proctrace::text::count(left.len(), "process", "processes");
    say!(
        "proctrace: interrupted; {processes} of the tree still {runs}, left running and no \
         longer recorded:"
    );
    for (command, pids) in groups.iter().take(LEFT_LISTED) {
        let command = proctrace::text::shorten(&proctrace::text::visible(command), Some(100));
        match pids[..] {
            [pid] => say!("proctrace:   {pid} {command}"),
            _ => say!(
                "proctrace:   {} × {command} (pids {})",
                pids.len(),
                proctrace::text::pid_ranges(pids.clone())
            ),
        }
    }
    if groups.len() > LEFT_LISTED {
        let more: usize = groups[LEFT_LISTED..].iter().map(|(_, p)| p.len()).sum();
        say!("proctrace:   … and {more} more");
    }
}

/// `err` with what to do about it on the command line: the library's
/// errors say what is wrong, not which flag helps.
fn with_hint(err: record::RecordError) -> anyhow::Error {
    let hint = match err {
        record::RecordError::Permission => "run proctrace with sudo, as a root that has them",
        record::RecordError::NoBtf => "pass a BTF file for it with --btf FILE",
        record::RecordError::RingMemory { limit, .. } => match limit {
            record::MemoryLimit::Cgroup { .. } => {
                "record with a smaller --buffer-mib, or raise the cgroup's memory limit"
            }
            record::MemoryLimit::Memlock { .. } => {
                "record with a smaller --buffer-mib, or raise the limit (ulimit -l unlimited)"
            }
            _ => "record with a smaller --buffer-mib",
        },
        _ => return err.into(),
    };
    anyhow::anyhow!("{err}: {hint}")
}

/// A --buffer-mib the kernel takes: a power of two whose bytes fit the
/// map's 32-bit size.
fn buffer_mib(arg: &str) -> Result<u32, String> {
    const MAX: u32 = 1 << 11;
    match arg.parse::<u32>() {
        Ok(mib) if mib.is_power_of_two() && mib <= MAX => Ok(mib),
        _ => Err(format!("not a power of two from 1 to {MAX}")),
    }
}

/// Says what was lost in the kernel, then fails if the output did, or says
/// what was recorded.
fn report(output: &Output, processes: u64, totals: &Trailer, quiet: bool) -> Result<()> {
    let lost = totals.lost;
    if lost > 0 {
        say!(
            "proctrace: WARNING: {lost} events were lost in the kernel ({} with the buffer full, {} processes \
             not followed with the tracking map full); raise --buffer-mib or --max-processes",
            totals.lost_buffer_full, totals.lost_tracking_full
        );
    }
    if totals.unwatched_32bit_execs > 0 {
        say!(
            "proctrace: WARNING: {} 32-bit programs ran, and this kernel's syscall tracepoints do \
             not see 32-bit setsid and setpgid calls: SetSID/SetPGID events of those programs \
             may be missing; record with --syscall-hook sys-exit to see them",
            totals.unwatched_32bit_execs
        );
    }
    warn_probes(totals);
    warn_waits(totals);
    match output.result() {
        // The reader of `-o -` went away: what it did not read, it did
        // not want, as for `ls | head`.
        Err(err) if super::files::reader_left(&err.source) => return Ok(()),
        result => result?,
    }
    if quiet {
        return Ok(());
    }
    let stopped = if totals.interrupted {
        " (interrupted)"
    } else {
        ""
    };
    say!(
        "proctrace: recorded {} to {}{stopped}",
        proctrace::text::count(processes, "process", "processes"),
        output.name()
    );
    Ok(())
}

/// Hits past which a probe may dominate the run: each costs a trap into
/// the kernel, a few microseconds with its stack (BENCHMARKS.md).
const HOT_PROBE_HITS: u64 = 1_000_000;

/// Says how many probe hits were dropped, and when probes fired so often
/// that they may be most of what the run did.
fn warn_probes(totals: &Trailer) {
    if totals.lost_probe_hits > 0 {
        say!(
            "proctrace: WARNING: {} probe hits were lost (the hits ring was full): the counts \
             are short by that many; record with --no-probe-stacks, or narrow the probes",
            totals.lost_probe_hits
        );
    }
    if totals.stackless_probe_hits > 0 {
        say!(
            "proctrace: WARNING: {} probe hits were counted without their stacks: they came \
             faster than they could be unwound; record with --no-probe-stacks, or narrow the probes",
            totals.stackless_probe_hits
        );
    }
    if totals.probe_hits >= HOT_PROBE_HITS {
        say!(
            "proctrace: WARNING: the probes fired {} times: each hit traps into the kernel, so \
             they may dominate the run's time; narrow them, or record with --no-probe-stacks",
            totals.probe_hits
        );
    }
}

/// Says what of the tree's waits the kernel could not count or deliver.
fn warn_waits(totals: &Trailer) {
    if totals.lost_waits > 0 {
        say!(
            "proctrace: WARNING: {} stretches of the tree's threads' time were not counted (the \
             kernel's table of waits, or of threads, was full): the wait times are short by them",
            totals.lost_waits
        );
    }
    if totals.lost_wait_stacks > 0 {
        say!(
            "proctrace: WARNING: {} long waits lost their stacks (the waits ring, or the table \
             of user stacks, was full): their time is counted without them",
            totals.lost_wait_stacks
        );
    }
}

/// The command's own status, as a shell would report it: the exit code, or
/// 128 + the signal that killed it; 130, as for SIGINT, when it never ended.
/// Attached processes are not proctrace's children: their status is unknown.
fn exit_status(totals: &Trailer, attached: bool) -> i32 {
    if totals.timed_out {
        return 124;
    }
    let interrupted = if totals.interrupted { 128 + SIGINT } else { 0 };
    if attached {
        return interrupted;
    }
    totals
        .root_signal
        .map(|s| 128 + s)
        .or(totals.root_exit_code)
        .unwrap_or(128 + SIGINT)
}

/// The recording's destination ('-' for stdout), checked before anything
/// runs and emptied only once the recording starts. Under sudo a file it
/// creates belongs to the user who asked for it.
fn reserve_output(path: &Path) -> Result<Destination> {
    if path.as_os_str() == "-" {
        return Ok(Destination::Stdout);
    }
    let owner = proctrace::recorder::sudo_owner().map(|(uid, gid)| (uid.as_raw(), gid.as_raw()));
    let reserved =
        Reserved::open(path, owner).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Destination::File(reserved))
}

/// Where the recording goes, before it starts.
enum Destination {
    Stdout,
    File(Reserved),
}

impl Destination {
    /// The output, now that the recording has started.
    fn begin(self) -> Output {
        match self {
            Destination::Stdout => Output::stream(Box::new(io::stdout()), "-"),
            Destination::File(reserved) => reserved.begin(),
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP: the first takes a snapshot of the live tree
/// and ends the recording gracefully, a second ends it at once. Each is
/// passed on to the command (after the snapshot) unless the tree got it
/// already: the terminal sends Ctrl-C and a hangup to its whole foreground
/// process group, as proctrace sends its own group Ctrl-C from the live
/// view, while a signal another process sends (`kill -INT`, a CI runner
/// cancelling the job) reaches proctrace alone, and is passed on as sudo
/// and timeout(1) pass signals on. SIGUSR1 and SIGQUIT take a snapshot
/// and recording goes on.
struct Signals(SignalsInfo<WithOrigin>);

impl Signals {
    /// Installed before the command starts, so that no signal in between
    /// can kill proctrace with its default action.
    fn install() -> Result<Self> {
        let signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGQUIT])
            .context("installing signal handlers")?;
        Ok(Signals(signals))
    }

    /// The first signal stops the recording after a grace period; a second
    /// ends it at once, with what has arrived so far.
    fn watch(mut self, recording: &LiveRecording) {
        let stopper = recording.stopper();
        let root = nix::unistd::Pid::from_raw(recording.root_pid());
        std::thread::spawn(move || {
            let mut stops = 0;
            for origin in self.0.forever() {
                let signal = origin.signal;
                if matches!(signal, SIGUSR1 | SIGQUIT) {
                    stopper.snapshot(signal);
                    continue;
                }
                let pass_on = !reached_the_tree(&origin);
                stops += 1;
                if stops == 1 {
                    // The drain passes it on once the snapshot is taken.
                    stopper.interrupt(signal, pass_on);
                    continue;
                }
                if pass_on {
                    let _ = nix::sys::signal::kill(
                        root,
                        nix::sys::signal::Signal::try_from(signal).ok(),
                    );
                }
                stopper.abort();
            }
        });
    }
}

/// Whether a signal went to the tree as well as to proctrace: the
/// terminal's (sent by the kernel, to the foreground process group) and
/// proctrace's own (to its group, from the live view).
fn reached_the_tree(origin: &Origin) -> bool {
    let own = origin
        .process
        .is_some_and(|p| u32::try_from(p.pid) == Ok(std::process::id()));
    matches!(origin.cause, Cause::Kernel) || own
}

/// `--on-hang-timeout`: a duration with its unit, above 0, which would
/// kill every run as it starts.
fn hook_timeout(text: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(text) {
        Ok(time) if time.is_zero() => Err("0 would kill each run as it starts".to_owned()),
        parsed => parsed.map_err(|e| e.to_string()),
    }
}

/// A variable name as `NAME=value` strings can hold it: `=` would make the
/// name match the start of another variable's value.
fn env_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!("not a variable name: {name:?}"));
    }
    Ok(name.to_string())
}

/// A signal by name (`QUIT`, `SIGQUIT`, `quit`) or number.
fn signal_name(text: &str) -> Result<nix::sys::signal::Signal, String> {
    use std::str::FromStr;
    let upper = text.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    let number = text.parse::<i32>().ok();
    number
        .map_or_else(
            || nix::sys::signal::Signal::from_str(&name).ok(),
            |n| nix::sys::signal::Signal::try_from(n).ok(),
        )
        .ok_or_else(|| format!("no signal {text:?}: give a name such as QUIT or TERM, or a number"))
}
