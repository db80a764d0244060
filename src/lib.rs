//! proctrace records the process lifecycle of a whole process tree — every
//! fork, exec, exit, setsid and setpgid — with eBPF, filtered inside the
//! kernel, and reads and renders such recordings.
//!
//! This library is the engine of the `proctrace` command; test runners, CI
//! agents and build tools can embed it to get the events without shelling
//! out. Recording needs root (or `CAP_BPF` and `CAP_PERFMON`) and a kernel
//! with BTF.
//!
//! # Recording a command
//!
//! ```no_run
//! use proctrace::event::Record;
//! use proctrace::record::Recorder;
//!
//! # fn main() -> Result<(), proctrace::record::RecordError> {
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
//! [`record::Recorder::attach`] follows processes that already run instead,
//! and [`record::LiveRecording::stopper`] stops a recording from another thread.
//!
//! # Modules
//!
//! - [`event`]: the event model, one serde type per kind of line.
//! - [`record`]: the recorder (kernel side, launch, drain).
//! - [`recording`]: reading and writing recordings (newline-delimited JSON).
//! - [`processes`]: the process table derived from a recording's events.
//! - [`analysis`]: the answers views give (critical path, failures,
//!   processes that outlived their parent, usage by command and test, who
//!   held a leak's files, the wait-for graph of a hang, the diff of two
//!   runs), as plain data.
//! - [`render`]: the views of a recording (`proctrace render`).
//! - [`ingest`]: re-rooting a raw, system-wide recording at one process.
//! - [`syscalls`]: the names of system calls a blocked process may be in.
//! - [`testname`]: which test of a suite a process belongs to.
//! - [`text`]: making command lines and other traced text safe to show.

pub mod analysis;
pub mod event;
pub mod ingest;
pub mod processes;
pub mod record;
pub mod recording;
pub mod render;
pub mod syscalls;
pub mod testname;
pub mod text;

/// libbpf-rs, whose error [`record::RecordError::Bpf`] carries: re-exported
/// so that an embedder matches on the same version.
pub use libbpf_rs;

/// The generated libbpf-rs skeleton of the BPF program in `src/bpf/`, with
/// the record layouts of `src/bpf/proctrace.h` in `bpf::types`. Hidden: it
/// changes with every change to the BPF side, so it is no stable API.
#[doc(hidden)]
#[allow(missing_docs, clippy::all, non_camel_case_types, non_snake_case)]
pub mod bpf {
    include!(concat!(env!("OUT_DIR"), "/proctrace.skel.rs"));
}
