//! The classic tracepoints at setsid's and setpgid's exits: their ids come
//! from tracefs ([`crate::recorder::probes::tracefs`]).

use crate::recorder::error::RecordError;
pub(crate) use crate::recorder::probes::tracefs::open_tracepoint;
use crate::recorder::probes::tracefs::{id, with_events};

const EVENTS: [&str; 2] = ["sys_exit_setsid", "sys_exit_setpgid"];

/// The ids of the two tracepoints.
pub fn syscall_exit_ids() -> Result<[u64; 2], RecordError> {
    let read = |events: &std::path::Path| {
        Ok([
            id(events, "syscalls", EVENTS[0])?,
            id(events, "syscalls", EVENTS[1])?,
        ])
    };
    with_events(read).map_err(RecordError::system(
        "finding the syscall tracepoints in tracefs",
    ))
}
