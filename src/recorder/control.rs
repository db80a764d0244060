//! Between the handle a caller holds and the recording's own thread: the
//! requests that go one way (stop, abort, snapshot) and the report of the
//! start that comes back.

use std::sync::atomic::{AtomicBool, AtomicI32};

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::event::{BufferKind, CpuProfile, OffCpuSettings, Pid, SyscallHook};
use crate::recorder::error::Degraded;

/// What the drain thread reports once it has started the command.
pub(crate) struct Started {
    pub root_pid: Pid,
    pub buffer: BufferKind,
    pub syscall_hook: Option<SyscallHook>,
    pub warnings: Vec<Degraded>,
    pub tracked: libbpf_rs::MapHandle,
    pub cpu_profile: Option<CpuProfile>,
    pub off_cpu: Option<OffCpuSettings>,
}

/// Requests from the consumer to the drain thread.
#[derive(Debug)]
pub(crate) struct Control {
    pub stop: AtomicBool,
    pub abort: AtomicBool,
    /// A signal asking for a snapshot (0: none); recording goes on.
    pub snapshot: AtomicI32,
    /// A signal to stop on after a snapshot (0: none).
    pub interrupt: AtomicI32,
    /// Whether to pass that signal on to the root first.
    pub pass_on: AtomicBool,
    /// Written after each request: the drain waits on it beside the
    /// kernel's buffer, so a snapshot starts at once, not a poll later.
    pub wake: Option<EventFd>,
}

impl Control {
    pub(crate) fn new() -> Control {
        Control {
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            snapshot: AtomicI32::new(0),
            interrupt: AtomicI32::new(0),
            pass_on: AtomicBool::new(false),
            wake: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).ok(),
        }
    }

    pub(crate) fn wake(&self) {
        if let Some(wake) = &self.wake {
            let _ = wake.write(1);
        }
    }
}
