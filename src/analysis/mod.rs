//! Analyses of a recording: answers computed once from the process table,
//! as plain data that every view formats the same way.
//!
//! - [`diff`]: two runs of the same command compared.
//! - [`hotspots`]: where the CPU went inside the processes, by function
//!   (`record --cpu-profile`); [`sampled_stacks`]: the sampled stacks
//!   with their processes and tests, for the flame graphs.
//! - [`probe_uses`]: the hits of each probe (`record --probe`) per test,
//!   command and process, and its USDT arguments; [`hit_stacks`]: the
//!   stacks at the hits.
//! - [`critical_path`]: where the run's wall time went, link by link.
//! - [`outlived`]: the processes that outlived the process that started
//!   them, with or without `record --linger`.
//! - [`failures`]: the failures that reached the command's status apart
//!   from those a parent carried on from.
//! - [`held`]: who else had the files a lingering process held open.
//! - [`programs`]: what each program of a process used.
//! - [`group_usage`]: what each command group and each test used;
//!   [`slowest`]: the processes that ran longest.
//! - [`hang`]: the wait-for graph of a snapshot of the live tree: who
//!   waits for whom, the culprits and the deadlocks; [`loops`]: the
//!   process that keeps starting a command, which a hang is stuck on.
//! - [`wall`]: each test's and program's wall time split into CPU and
//!   waits by reason (`record --off-cpu`), each with who woke it and
//!   what that waker waited on in turn ([`ChainLink`]), and
//!   [`wall_by_process`] each process's, for the critical path;
//!   [`waited_stacks`]: the stacks waited in, for the flame graphs of
//!   waiting.
//! - [`testname`]: which test of a suite a process belongs to.

mod cpu;
mod critical;
pub mod diff;
mod failures;
pub mod hang;
mod holders;
pub mod loops;
mod outlived;
mod probes;
mod programs;
pub mod testname;
mod usage;
mod waits;
mod wakers;

pub use cpu::{
    hotspots, hottest_stacks, sampled_process, sampled_program, sampled_stacks, CountedStack, Hot,
    HotGroup, HotStack, Hotspots,
};
pub use critical::{critical_path, CriticalPath, Link};
pub use failures::{failures, Failures};
pub use holders::{held, Held, HeldFile, Holder, Others};
pub use outlived::{left_behind, outlived, Outlived, OUTLIVED_MIN_NS};
pub use probes::{hit_stacks, probe_uses, probed_processes, Latency, ProbeUse, ValueHistogram};
pub use programs::{programs, Peak, Program};
pub use usage::{group_usage, slowest, GroupUsage, Usage};
pub use waits::{
    ran_stretches, waited_stacks, wall, wall_by_process, RanStretch, WaitShare, WaitedStack, Wall,
    WallSplit,
};
pub use wakers::ChainLink;
