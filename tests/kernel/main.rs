//! The tests that record: the real `proctrace record` against the real
//! kernel, so they need root. One binary, one link of libbpf, and every
//! recording checked by the harness in tests/common, which asks for root
//! where a test loads the BPF program (`crate::common::require_root`):
//! without it the whole binary skips, or under CI fails.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod answers;
mod argv;
mod attach;
mod bats;
mod cpu_profile;
mod diff;
mod env;
mod errors;
mod faults;
mod fds;
mod flamegraph;
mod futex;
mod hang;
mod hostile;
mod html;
mod ingest;
mod library;
mod live;
mod loops;
mod mappings;
mod nextest;
mod node;
mod offcpu;
mod otlp;
mod perfetto;
mod probe_kernel;
mod probe_names;
mod probe_values;
mod probes;
mod pytest_split;
mod python;
mod record;
mod regrtest;
mod resources;
mod signals;
mod status;
mod threads;
mod verifier;
mod views;
mod waits;
