//! A recording under way: the handle [`Recorder::start`](super) returns,
//! over the recording's own thread (see [`drain`](super::drain)), which
//! sends the events, in one causal order, over a crossbeam channel.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use crossbeam_channel::Receiver;

use crate::event::{Header, Pid, Record, Trailer, FORMAT_VERSION};
use crate::recorder::control::Control;
use crate::recorder::drain::{self, Outputs};
use crate::recorder::error::{Degraded, RecordError};
use crate::recorder::launch::Prepared;
use crate::recorder::load::KernelConfig;
use crate::recorder::notice::Notice;
use crate::recorder::policy::LingerPolicy;

/// Events queued between the drain thread and the consumer. When the
/// consumer falls behind, the drain blocks and the kernel buffer absorbs
/// the rest (its drops are counted). The channel allocates every slot up
/// front, in RSS and page faults at every start (BENCHMARKS.md), for
/// nothing the ring does not already hold.
const QUEUE_CAPACITY: usize = 1 << 12;

/// Starts the recording's thread, which loads the BPF program and starts
/// `prepared`; returns once it has, or with why it could not.
pub(crate) fn start(
    config: KernelConfig,
    prepared: Prepared,
    policy: LingerPolicy,
    command: Vec<String>,
) -> Result<LiveRecording, RecordError> {
    let start_time = SystemTime::now();
    let control = Arc::new(Control::new());
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
    let (events_tx, events_rx) = crossbeam_channel::bounded(QUEUE_CAPACITY);
    let (notices_tx, notices_rx) = crossbeam_channel::unbounded();
    let outputs = Outputs {
        events: events_tx,
        notices: notices_tx,
        ready: ready_tx,
    };
    let probes = config.probes.iter().map(|p| p.point.clone()).collect();
    let raw = config.raw;
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
        raw,
        buffer: started.buffer,
        syscall_hook: started.syscall_hook,
        cpus: online_cpus(),
        cpu_profile: started.cpu_profile,
        probes,
        off_cpu: started.off_cpu,
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

fn join_error(thread: JoinHandle<Result<Trailer, RecordError>>) -> RecordError {
    match thread.join() {
        Ok(Err(err)) => err,
        _ => RecordError::System {
            context: "the drain thread".into(),
            source: std::io::Error::other("stopped unexpectedly"),
        },
    }
}

/// A recording under way (what `Recorder::start` returns), as opposed
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

    /// Takes a snapshot of the live tree, then, if `pass_on`, sends
    /// `signal` on to the root, and stops as [`Stopper::stop`] does. A
    /// signal that reached the tree already is not passed on: a
    /// terminal's Ctrl-C goes to its whole foreground process group.
    pub fn interrupt(&self, signal: i32, pass_on: bool) {
        self.0.pass_on.store(pass_on, Ordering::Relaxed);
        self.0.interrupt.store(signal, Ordering::Release);
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
