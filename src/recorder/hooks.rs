//! `--on-hang`: a command run for each culprit of a snapshot, on a thread
//! of its own, each run bounded in time and its output kept for the
//! recording. The drain thread only hands snapshots over and takes the
//! results back, so a hook that hangs never holds up the recording.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;

use super::hang::Taken;
use crate::event::{OnHang, Pid};

/// The command `--on-hang` runs, and how long each run may take.
#[derive(Debug, Clone)]
pub(crate) struct OnHangCommand {
    /// Given to `sh -c`, `{}` replaced by the culprit's pid.
    pub command: String,
    /// After this, the run's process group is killed.
    pub timeout: Duration,
}

/// Most runs per snapshot: beyond it culprits are only counted, so that
/// thousands of leaked processes do not mean thousands of debuggers.
pub const RUNS_MAX: usize = 8;
/// Bytes of output kept per run; the rest is counted.
const OUTPUT_MAX: usize = 64 << 10;
/// How long output is still read once a run has ended: a background
/// process it left may hold the pipe open for ever.
const OUTPUT_GRACE: Duration = Duration::from_millis(200);
/// How long a killed run may take to be reaped before it is given up on.
const KILL_GRACE: Duration = Duration::from_secs(1);
/// Between two looks at runs still going.
const POLL: Duration = Duration::from_millis(20);

/// Statuses of the runs' shells, by pid. As the subreaper the drain waits
/// for any child, hooks' included: it hands their status over here, and
/// holds the lock while it waits, as a run holds it from its spawn until
/// its pid is in, so that no status is lost in between.
pub(crate) type Reaped = HashMap<Pid, Option<WaitStatus>>;

/// The thread that runs the hooks, as the drain sees it.
pub(crate) struct Hooks {
    to: Sender<Arc<Taken>>,
    from: Receiver<Vec<OnHang>>,
    reaped: Arc<Mutex<Reaped>>,
}

impl Hooks {
    /// Starts the thread; `clock` says the time in a record's terms.
    pub fn start(
        command: OnHangCommand,
        clock: impl Fn() -> u64 + Send + 'static,
    ) -> std::io::Result<Hooks> {
        let (to, snapshots) = crossbeam_channel::unbounded::<Arc<Taken>>();
        let (done, from) = crossbeam_channel::unbounded();
        let reaped = Arc::new(Mutex::new(Reaped::new()));
        let shared = Arc::clone(&reaped);
        std::thread::Builder::new()
            .name("proctrace-on-hang".into())
            .spawn(move || {
                for taken in snapshots {
                    let runs = run_for(&command, &taken, &shared, &clock);
                    if done.send(runs).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Hooks { to, from, reaped })
    }

    /// Runs the hook for the culprits of `taken`; its records come back
    /// through [`Hooks::done`], one batch per snapshot.
    pub fn run(&self, taken: Arc<Taken>) {
        let _ = self.to.send(taken);
    }

    /// The records of the snapshots whose runs have all ended, and
    /// whether the thread is gone (it panicked): then no more will come.
    pub fn done(&self) -> (Vec<Vec<OnHang>>, bool) {
        let mut done = Vec::new();
        loop {
            match self.from.try_recv() {
                Ok(runs) => done.push(runs),
                Err(TryRecvError::Empty) => return (done, false),
                Err(TryRecvError::Disconnected) => return (done, true),
            }
        }
    }

    /// The statuses of the hooks' shells, for the drain's reaper.
    pub fn reaped(&self) -> MutexGuard<'_, Reaped> {
        lock(&self.reaped)
    }
}

fn lock(reaped: &Mutex<Reaped>) -> MutexGuard<'_, Reaped> {
    reaped.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the hook for each culprit of `taken` (at most [`RUNS_MAX`]), all
/// at once, and waits for them, up to the timeout.
fn run_for(
    command: &OnHangCommand,
    taken: &Taken,
    reaped: &Mutex<Reaped>,
    clock: &dyn Fn() -> u64,
) -> Vec<OnHang> {
    let culprits = taken.culprits();
    let skipped = culprits.len().saturating_sub(RUNS_MAX) as u64;
    // A timeout past what the clock can say is no timeout.
    let deadline = Instant::now().checked_add(command.timeout);
    let runs: Vec<Run> = culprits
        .iter()
        .take(RUNS_MAX)
        .map(|&pid| Run::start(&command.command, pid, reaped))
        .collect();
    runs.into_iter()
        .map(|run| {
            let mut record = run.finish(deadline, reaped);
            record.timestamp = clock();
            record.snapshot = taken.timestamp;
            record.skipped = skipped;
            record
        })
        .collect()
}

/// One run under way.
struct Run {
    pid: Pid,
    command: String,
    /// The shell's pid, and its process group's; `None` if it did not start.
    shell: Result<Pid, String>,
    output: Arc<Mutex<Output>>,
    /// Closes once the output pipe has no writer left.
    eof: Receiver<()>,
}

#[derive(Default)]
struct Output {
    kept: Vec<u8>,
    cut: u64,
}

impl Run {
    fn start(command: &str, pid: Pid, reaped: &Mutex<Reaped>) -> Run {
        let command = command.replace("{}", &pid.to_string());
        let output = Arc::new(Mutex::new(Output::default()));
        let (eof_tx, eof) = crossbeam_channel::bounded(0);
        let shell = spawn(&command, pid, reaped).map(|(shell, pipe)| {
            let into = Arc::clone(&output);
            // A thread per run: a pipe can only be read in a blocking call,
            // and one left open by a background process must not hold up
            // the others.
            let _ = std::thread::Builder::new()
                .name("proctrace-on-hang-output".into())
                .spawn(move || {
                    read_output(pipe, &into);
                    drop(eof_tx);
                });
            shell
        });
        Run {
            pid,
            command,
            shell: shell.map_err(|err| format!("could not run sh: {err}")),
            output,
            eof,
        }
    }

    /// Waits for the run to end (killing its process group at
    /// `deadline`) and for its output; its record, but for the times.
    fn finish(self, deadline: Option<Instant>, reaped: &Mutex<Reaped>) -> OnHang {
        let mut record = OnHang {
            seq: 0,
            timestamp: 0,
            pid: self.pid,
            snapshot: 0,
            command: self.command,
            exit_code: None,
            signal: None,
            timed_out: false,
            output: String::new(),
            cut: 0,
            skipped: 0,
        };
        let shell = match self.shell {
            Ok(shell) => shell,
            Err(why) => {
                record.output = why;
                return record;
            }
        };
        let status = wait(shell, deadline, reaped).or_else(|| {
            record.timed_out = true;
            let _ = killpg(NixPid::from_raw(shell), Signal::SIGKILL);
            wait(shell, Instant::now().checked_add(KILL_GRACE), reaped)
        });
        match status {
            Some(WaitStatus::Exited(_, code)) => record.exit_code = Some(code),
            Some(WaitStatus::Signaled(_, signal, _)) => record.signal = Some(signal as i32),
            _ => record.signal = Some(Signal::SIGKILL as i32),
        }
        if self.eof.recv_timeout(OUTPUT_GRACE).is_err() {
            // What it left in the background still writes: it goes too.
            let _ = killpg(NixPid::from_raw(shell), Signal::SIGKILL);
        }
        let output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        record.output = String::from_utf8_lossy(&output.kept).into_owned();
        record.cut = output.cut;
        record
    }
}

/// Starts `sh -c command` in a process group of its own, stdout and
/// stderr into one pipe; its pid and the pipe's read end.
fn spawn(command: &str, pid: Pid, reaped: &Mutex<Reaped>) -> std::io::Result<(Pid, std::fs::File)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let stderr = write.try_clone()?;
    let mut reaped = lock(reaped);
    let mut child = Command::new("sh");
    child
        .arg("-c")
        .arg(command)
        .env("PROCTRACE_PID", pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    // SAFETY: give_back is async-signal-safe.
    unsafe {
        child.pre_exec(|| {
            crate::recorder::huge_pages::give_back();
            Ok(())
        })
    };
    let child = child.spawn()?;
    let shell = child.id() as Pid;
    reaped.insert(shell, None);
    Ok((shell, std::fs::File::from(read)))
}

/// Reads a run's output to its end, keeping the first [`OUTPUT_MAX`] bytes.
fn read_output(mut pipe: std::fs::File, into: &Mutex<Output>) {
    let mut buffer = [0u8; 8192];
    while let Ok(n @ 1..) = pipe.read(&mut buffer) {
        let mut output = into.lock().unwrap_or_else(PoisonError::into_inner);
        let room = OUTPUT_MAX.saturating_sub(output.kept.len()).min(n);
        output.kept.extend_from_slice(&buffer[..room]);
        output.cut += (n - room) as u64;
    }
}

/// The shell's status once it has exited, or `None` at `deadline`.
fn wait(shell: Pid, deadline: Option<Instant>, reaped: &Mutex<Reaped>) -> Option<WaitStatus> {
    loop {
        {
            let mut reaped = lock(reaped);
            let waited = waitpid(NixPid::from_raw(shell), Some(WaitPidFlag::WNOHANG));
            let status = match waited {
                Ok(WaitStatus::StillAlive) => None,
                Ok(status) => Some(status),
                // The drain's reaper took it first.
                Err(_) => reaped.get(&shell).copied().flatten(),
            };
            if let Some(status) = status {
                reaped.remove(&shell);
                return Some(status);
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        std::thread::sleep(POLL);
    }
}
