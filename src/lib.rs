//! proctrace: records the process lifecycle of a command's whole process tree
//! (fork, exec, exit, setsid, setpgid) with eBPF, filtered inside the kernel.

pub mod event;
pub mod ingest;
pub mod processes;
pub mod recording;
pub mod render;

/// The generated libbpf-rs skeleton of the BPF program in `src/bpf/`.
#[allow(missing_docs, clippy::all, non_camel_case_types, non_snake_case)]
pub mod bpf {
    include!(concat!(env!("OUT_DIR"), "/proctrace.skel.rs"));
}
