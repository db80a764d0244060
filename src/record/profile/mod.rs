//! The sampled CPU profile (`record --cpu-profile`): what is needed to
//! symbolize and unwind the samples of processes that are gone by the
//! time they are read.

pub(crate) mod mmaps;
pub(crate) mod spaces;
