//! The tests that need no kernel and no root: `render` and `ingest` on
//! recordings in tests/data, the fuzzer, the real mermaid-cli, the
//! checker of the qemu kernel matrix's guest logs, and the guide in docs/
//! against `--help`.

#[allow(dead_code)] // the recording half of the harness is the kernel tests'
#[path = "../common/mod.rs"]
mod common;

/// pprof's messages as proctrace's writer declares them, by the proto's
/// own field numbers, for the tests to read what it wrote.
#[cfg(feature = "pprof")]
#[allow(dead_code)] // the fields a writer sets and no test reads
#[path = "../../src/render/pprof/proto.rs"]
mod pprof_proto;

mod bpf_headers;
mod docs;
mod fuzz;
mod install;
mod kernel_matrix;
mod mermaid;
mod otlp;
mod outputs;
mod render;
mod waits;
mod why_slow;
