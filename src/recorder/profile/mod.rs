//! The sampled CPU profile (`record --cpu-profile`) on the recorder's
//! side: the tree's executable mappings as the kernel announces them
//! (enough to symbolize and unwind the samples of processes that are gone
//! by the time they are read), each process's address space over time,
//! and the thread that unwinds the samples against them and counts
//! stacks. Unwinding and naming frames are [`crate::stacks`]' work.

mod attempts;
mod collect;
pub(crate) mod mmaps;
pub(crate) mod spaces;

pub(crate) use collect::Collector;
pub use mmaps::WatchError;
pub(crate) use mmaps::{mapped_now, MmapWatch};
