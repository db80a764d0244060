//! Call stacks, and the names of their frames: what the flame graphs of a
//! recording are drawn from.
//!
//! Today the stacks are those of the process tree itself, one frame per
//! program from the root down ([`crate::render`]'s `folded` and
//! `flamegraph`). Sampled CPU stacks and the stacks at a probe's hits
//! share this home as they land: sampling on the recorder's side,
//! unwinding, symbolizing and folding here, once for every view.
//!
//! - [`folded`]: the collapsed form (`root;child;leaf COUNT`) that
//!   FlameGraph, inferno and speedscope read.
//! - `unwind` (feature `recorder`): the return addresses of a sampled
//!   user stack, from its registers and a copy of its top, with the
//!   mapped files' unwind tables (framehop) or frame pointers.
//! - `symbolize` (feature `recorder`): the names of those addresses:
//!   functions, lines and inlined calls from ELF and DWARF files, kernel
//!   symbols from kallsyms (blazesym), JIT functions from perf maps.
//! - [`Profile`]: a recording's CPU profile as read back.
//!
//! Unwinding and symbolizing read the files of the recorded processes,
//! so they run while recording; a recording holds the names, and reading
//! it needs neither.

#[cfg(feature = "recorder")]
mod bounds;
#[cfg(feature = "recorder")]
pub mod cache;
pub mod folded;
#[cfg(feature = "recorder")]
mod inflated;
#[cfg(feature = "recorder")]
mod ksyms;
#[cfg(feature = "recorder")]
mod plt;
mod profile;
#[cfg(feature = "recorder")]
pub(crate) mod segments;
#[cfg(feature = "recorder")]
pub mod symbolize;
#[cfg(all(test, feature = "recorder"))]
pub(crate) mod test_support;
#[cfg(feature = "recorder")]
mod texts;
#[cfg(feature = "recorder")]
mod units;
#[cfg(feature = "recorder")]
pub mod unwind;

pub use profile::Profile;
