//! The records of the waits ring (`record --off-cpu`): a long wait and
//! the waker of one, each with stacks as a CPU sample has them; the
//! kernel's totals of every wait; and what a wait was on, from the state
//! it slept in, its system call and the kind of file that call was on.

use super::samples::{with_stack, PyFrame, Sample};
use super::{copy, Malformed};
use crate::bpf::types::{
    event_header, event_kind, offcpu_flags, offcpu_state, py_frame, wait_event, wait_key,
    waker_event,
};
use crate::event::{Pid, WaitReason};
use crate::syscalls;

/// What the kernel counted a stretch of a thread's time under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitKey {
    pub pid: Pid,
    pub tid: Pid,
    /// The test marks sent before it (see [`super::Mark::epoch`]).
    pub epoch: u32,
    /// What it was doing: on the CPU, runnable, asleep...
    pub state: u8,
    /// Its system call, -1 for none.
    pub syscall: i32,
    /// The file type (`i_mode >> 12`) of the call's first argument as an fd.
    pub file_type: u16,
    pub flags: u8,
    /// The thread that woke it (0: none).
    pub waker_pid: Pid,
    pub waker_tid: Pid,
}

impl WaitKey {
    pub(crate) fn of(key: &wait_key) -> WaitKey {
        WaitKey {
            pid: key.pid,
            tid: key.tid,
            epoch: key.epoch,
            state: key.state,
            syscall: key.syscall,
            file_type: key.file_type,
            flags: key.flags,
            waker_pid: key.waker_pid,
            waker_tid: key.waker_tid,
        }
    }

    /// Time on the CPU rather than a wait.
    pub fn running(&self) -> bool {
        offcpu_state(u32::from(self.state)) == offcpu_state::OFFCPU_RUNNING
    }

    /// Woken by an interrupt (a timer, a device).
    pub fn by_interrupt(&self) -> bool {
        u32::from(self.flags) & offcpu_flags::OFFCPU_WOKEN_BY_IRQ.0 != 0
    }

    /// The system call's name, where this machine's table has it.
    pub fn call(&self) -> Option<&'static str> {
        let compat = u32::from(self.flags) & offcpu_flags::OFFCPU_COMPAT.0 != 0;
        (self.syscall >= 0 && !compat)
            .then(|| syscalls::name(i64::from(self.syscall)))
            .flatten()
    }

    /// What it waited on, as far as its state, call and file tell.
    pub fn reason(&self) -> WaitReason {
        match offcpu_state(u32::from(self.state)) {
            offcpu_state::OFFCPU_RUNNABLE => return WaitReason::Runnable,
            offcpu_state::OFFCPU_STOPPED => return WaitReason::Stopped,
            _ => {}
        }
        let blocked = offcpu_state(u32::from(self.state)) == offcpu_state::OFFCPU_BLOCKED;
        match self.call() {
            Some(call) => by_call(call, self.file_type, blocked),
            // Not in a system call: a page fault, the one wait outside
            // one that sleeps uninterruptibly.
            None if self.syscall < 0 && blocked => WaitReason::PageFault,
            None if blocked => WaitReason::Disk,
            None => WaitReason::Other,
        }
    }
}

/// The calls whose first argument is an fd, the kind of file of which
/// tells what a wait in them is on: the kernel looks it up for them only.
const FD_CALLS: &[&str] = &[
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "splice",
    "tee",
    "sendfile",
    "copy_file_range",
];

/// [`FD_CALLS`] as the kernel side's bitmap of this machine's numbers.
pub(crate) fn fd_call_bits() -> [u64; 8] {
    let mut bits = [0u64; 8];
    for &(nr, name) in syscalls::NATIVE {
        if FD_CALLS.contains(&name) && (0..512).contains(&nr) {
            bits[nr as usize / 64] |= 1 << (nr % 64);
        }
    }
    bits
}

/// The file types of `i_mode >> 12` (include/uapi/linux/stat.h).
const FIFO: u16 = 0o01;
const CHR: u16 = 0o02;
const BLK: u16 = 0o06;
const REG: u16 = 0o10;
const SOCK: u16 = 0o14;

/// What a wait in `call` on a file of `file_type` is on; `blocked`: it
/// slept uninterruptibly (D), as for I/O and kernel locks.
fn by_call(call: &str, file_type: u16, blocked: bool) -> WaitReason {
    match call {
        "nanosleep" | "clock_nanosleep" | "pause" => WaitReason::Sleep,
        // A vfork's parent waits for the child's exec or exit.
        "wait4" | "waitid" | "vfork" | "clone" | "clone3" => WaitReason::Child,
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait"
        | "epoll_pwait2" => WaitReason::Poll,
        "futex" | "futex_waitv" | "flock" | "fcntl" => WaitReason::Lock,
        "accept" | "accept4" | "connect" | "sendto" | "recvfrom" | "sendmsg" | "recvmsg"
        | "recvmmsg" | "sendmmsg" => WaitReason::Socket,
        "fsync" | "fdatasync" | "sync" | "syncfs" | "sync_file_range" | "msync" => WaitReason::Disk,
        _ => match file_type {
            FIFO => WaitReason::Pipe,
            SOCK => WaitReason::Socket,
            REG | BLK => WaitReason::Disk,
            CHR => WaitReason::Device,
            _ if blocked => WaitReason::Disk,
            _ => WaitReason::Other,
        },
    }
}

/// A long wait as the kernel sent it: its key, times, and its stacks as
/// a sample's (the kernel stack it waited in, the user registers and
/// stack copied as it left the CPU).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub key: WaitKey,
    /// When it left the CPU, was woken (0: not seen) and ran again, in
    /// nanoseconds since the recording started.
    pub off: u64,
    pub woken: u64,
    pub on: u64,
    /// What the kernel added to the totals for it, as it did: the wait
    /// up to its wakeup, and the time runnable after it.
    pub waited_ns: u64,
    pub runnable_ns: u64,
    pub stacks: Sample,
}

/// A thread of the tree as it woke a long wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wakeup {
    pub wakee_tid: Pid,
    /// The waker's stacks; `timestamp` is the wakeup's.
    pub stacks: Sample,
}

/// What the waits ring carries.
pub enum FromWaits {
    Wait(Wait),
    Wakeup(Wakeup),
}

/// Decodes a record of the waits ring; `start` as for [`super::decode`].
pub fn decode_from_waits(data: &[u8], start: u64) -> Result<FromWaits, Malformed> {
    let header: event_header = copy(data).ok_or(Malformed::new(data.len(), 0))?;
    let since = |at: u64| at.saturating_sub(start);
    if event_kind(header.kind) == event_kind::EVENT_WAKER {
        let fixed = std::mem::offset_of!(waker_event, stack);
        let mut e = waker_event::default();
        let stack = with_stack(&mut e, data, fixed, event_kind::EVENT_WAKER, |e| {
            e.stack_len
        })?;
        let frames = (e.kernel_frames as usize).min(e.kernel.len());
        return Ok(FromWaits::Wakeup(Wakeup {
            wakee_tid: e.wakee_tid,
            stacks: Sample {
                pid: e.header.pid,
                tid: e.tid,
                timestamp: since(e.header.timestamp),
                kernel: e.kernel[..frames].to_vec(),
                regs: [e.ip, e.sp, e.fp, e.lr],
                stack: stack.to_vec(),
                python: python_frames(&e.py, e.py_count),
                python_cut: e.py_cut != 0,
            },
        }));
    }
    let fixed = std::mem::offset_of!(wait_event, stack);
    let mut e = wait_event::default();
    let stack = with_stack(&mut e, data, fixed, event_kind::EVENT_WAIT, |e| e.stack_len)?;
    let frames = (e.kernel_frames as usize).min(e.kernel.len());
    let on = e.header.timestamp;
    // As offcpu.bpf.h splits it: no wakeup seen, the wait lasted to the end.
    let woken = if e.woken_at != 0 && e.woken_at >= e.off_at {
        e.woken_at
    } else {
        on
    };
    Ok(FromWaits::Wait(Wait {
        key: WaitKey::of(&e.key),
        off: since(e.off_at),
        woken: if e.woken_at != 0 {
            since(e.woken_at)
        } else {
            0
        },
        on: since(on),
        waited_ns: woken.saturating_sub(e.off_at),
        runnable_ns: on.saturating_sub(woken),
        stacks: Sample {
            pid: e.header.pid,
            tid: e.key.tid,
            // Unwound against the mappings of when it left the CPU.
            timestamp: since(e.off_at),
            kernel: e.kernel[..frames].to_vec(),
            regs: [e.ip, e.sp, e.fp, e.lr],
            stack: stack.to_vec(),
            python: python_frames(&e.py, e.py_count),
            python_cut: e.py_cut != 0,
        },
    }))
}

/// The `count` Python frames the kernel filled in of `py`.
fn python_frames(py: &[py_frame], count: u16) -> Vec<PyFrame> {
    py[..usize::from(count).min(py.len())]
        .iter()
        .map(PyFrame::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(state: offcpu_state, syscall: &str, file_type: u16) -> WaitKey {
        let nr = syscalls::NATIVE
            .iter()
            .find(|(_, name)| *name == syscall)
            .map_or(-1, |(nr, _)| *nr as i32);
        WaitKey {
            pid: 1,
            tid: 1,
            epoch: 0,
            state: state.0 as u8,
            syscall: nr,
            file_type,
            flags: 0,
            waker_pid: 0,
            waker_tid: 0,
        }
    }

    #[test]
    fn reasons_come_from_the_state_the_call_and_the_file() {
        let sleeping = offcpu_state::OFFCPU_SLEEPING;
        let blocked = offcpu_state::OFFCPU_BLOCKED;
        let cases = [
            (key(sleeping, "clock_nanosleep", 0), WaitReason::Sleep),
            (key(sleeping, "wait4", 0), WaitReason::Child),
            (key(sleeping, "read", FIFO), WaitReason::Pipe),
            (key(sleeping, "read", SOCK), WaitReason::Socket),
            (key(sleeping, "read", CHR), WaitReason::Device),
            (key(blocked, "read", REG), WaitReason::Disk),
            (key(sleeping, "futex", 0), WaitReason::Lock),
            (key(blocked, "fsync", REG), WaitReason::Disk),
            (key(sleeping, "ppoll", 0), WaitReason::Poll),
            (key(blocked, "none", 0), WaitReason::PageFault),
            (
                key(offcpu_state::OFFCPU_RUNNABLE, "read", FIFO),
                WaitReason::Runnable,
            ),
            (
                key(offcpu_state::OFFCPU_STOPPED, "none", 0),
                WaitReason::Stopped,
            ),
        ];
        for (key, reason) in cases {
            assert_eq!(key.reason(), reason, "{key:?}");
        }
    }
}
