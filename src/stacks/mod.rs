//! Call stacks, and the names of their frames: what the flame graphs of a
//! recording are drawn from.
//!
//! Today the stacks are those of the process tree itself, one frame per
//! program from the root down ([`crate::render`]'s `folded` and
//! `flamegraph`). Sampled CPU stacks and the stacks at a probe's hits
//! share this home as they land: sampling and unwinding on the recorder's
//! side, symbolizing and folding here, once for every view.
//!
//! - [`folded`]: the collapsed form (`root;child;leaf COUNT`) that
//!   FlameGraph, inferno and speedscope read.

pub mod folded;
