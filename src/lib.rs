//! proctrace records the process lifecycle of a whole process tree — every
//! fork, exec, exit, setsid and setpgid — with eBPF, filtered inside the
//! kernel, and reads and renders such recordings.
//!
//! This library is the engine of the `proctrace` command; test runners, CI
//! agents and build tools can embed it to get the events without shelling
//! out. Recording needs root (or `CAP_BPF` and `CAP_PERFMON`) and a kernel
//! with BTF.
//!
//! # Reading a recording
//!
//! ```
//! use std::fs::File;
//! use std::io::BufReader;
//!
//! use proctrace::analysis::failures;
//! use proctrace::recording::{Reader, Recording};
//! use proctrace::render::{self, Mode, Options};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = File::open("tests/data/demo.ndjson")?;
//! let mut reader = Reader::new(BufReader::new(file), "demo.ndjson");
//! let recording = Recording::read(&mut reader, Mode::Tree.keep())?;
//! let failed = failures(&recording.processes);
//! println!("{} processes, {} failures that reached the command's status",
//!     recording.processes.len(), failed.propagated.len());
//! render::render(Mode::Tree, &recording, Options::default(), &mut std::io::stdout())?;
//! # Ok(())
//! # }
//! ```
//!
//! # Recording a command
//!
//! `proctrace::recorder::Recorder` (feature `recorder`, on by default)
//! records a command or running processes; its module has an example.
//! Without the feature the library builds with no C toolchain, libbpf or
//! BPF build: it reads, analyses and renders recordings, and snapshots
//! live processes from `/proc` ([`inspect`]).
//!
//! # Modules
//!
//! Data flows one way, each module using only those listed before it:
//!
//! - [`text`], [`syscalls`]: making traced text safe to show; the names of
//!   the system calls a blocked process may be in.
//! - [`event`]: the event model, one serde type per kind of line.
//! - [`inspect`]: live processes in, snapshot records out, from `/proc`.
//! - [`processes`]: the process table derived from a recording's events.
//! - [`recording`]: reading and writing recordings (newline-delimited
//!   JSON), and re-rooting a raw, system-wide one at one process.
//! - [`stacks`]: call stacks, in the collapsed form flame graphs read.
//! - [`analysis`]: the answers views give (critical path, failures,
//!   processes that outlived their parent, usage by command and test, who
//!   held a leak's files, the wait-for graph of a hang, which test a
//!   process belongs to, the diff of two runs), as plain data.
//! - [`render`]: the views of a recording (`proctrace render`).
//! - `recorder` (feature `recorder`): loading the BPF program,
//!   launching or attaching, draining the kernel's buffer.

pub mod analysis;
pub mod event;
pub mod inspect;
#[cfg(feature = "recorder")]
mod private_files;
pub mod processes;
#[cfg(feature = "recorder")]
pub mod recorder;
pub mod recording;
pub mod render;
pub mod stacks;
pub mod syscalls;
pub mod text;

/// libbpf-rs, whose error [`recorder::RecordError::Bpf`] carries: re-exported
/// so that an embedder matches on the same version.
#[cfg(feature = "recorder")]
pub use libbpf_rs;

/// The generated libbpf-rs skeleton of the BPF program in `src/bpf/`, with
/// the record layouts of `src/bpf/proctrace.h` in `bpf::types`. Hidden: it
/// changes with every change to the BPF side, so it is no stable API.
#[cfg(feature = "recorder")]
#[doc(hidden)]
#[allow(missing_docs, clippy::all, non_camel_case_types, non_snake_case)]
pub mod bpf {
    include!(concat!(env!("OUT_DIR"), "/proctrace.skel.rs"));
}
