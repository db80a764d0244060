//! The tests that need no kernel and no root: `render` and `ingest` on
//! recordings in tests/data, the fuzzer, the real mermaid-cli, and the
//! checker of the qemu kernel matrix's guest logs.

#[allow(dead_code)] // the recording half of the harness is the kernel tests'
#[path = "../common/mod.rs"]
mod common;

mod bpf_headers;
mod fuzz;
mod install;
mod kernel_matrix;
mod mermaid;
mod otlp;
mod render;
