//! `struct perf_event_attr` as include/uapi/linux/perf_event.h lays it
//! out (the libc crate locked here has no binding of it), and the
//! `perf_event_open` call.

use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};

use crate::event::Pid;

/// PERF_TYPE_SOFTWARE (enum perf_type_id).
const PERF_TYPE_SOFTWARE: u32 = 1;
/// PERF_COUNT_SW_DUMMY (enum perf_sw_ids, Linux 3.12): counts nothing,
/// exists for its side-band records.
const PERF_COUNT_SW_DUMMY: u64 = 9;
/// PERF_SAMPLE_TID and PERF_SAMPLE_TIME (enum perf_event_sample_format):
/// with `sample_id_all`, every record ends with `{ u32 pid, tid; u64 time; }`.
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
/// PERF_FORMAT_LOST (enum perf_event_read_format; Linux 6.0, 119a784c8127
/// "perf/core: Add a new read format to get a number of lost samples"):
/// read(2) gives `{ u64 value; u64 lost; }`, every record the ring had no
/// room for, side-band ones included (__perf_output_begin).
const PERF_FORMAT_LOST: u64 = 1 << 4;
/// PERF_FLAG_FD_CLOEXEC (Linux 3.14).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// What newer kernels add to the event, refused with EINVAL by the
/// kernels before it (a read format beyond PERF_FORMAT_MAX).
///
/// Build ids in the MMAP2 records (`build_id`, 5.12) are not asked for:
/// the kernel marks a record as holding one by setting a flag in the
/// header it shares between the events of a mapping, and never clears it
/// (perf_event_mmap_output), so the events written after ours, another
/// tool's on the same CPU, would have their device and inode read as a
/// build id (perf 6.1 aborts on it). The files are named by device and
/// inode instead, as before 5.12.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Features {
    /// The lost count in read(2) (6.0).
    pub lost_count: bool,
}

impl Features {
    /// Newest first, each step leaving out the newest addition left.
    pub(super) const NEWEST_FIRST: [Features; 2] = [
        Features { lost_count: true },
        Features { lost_count: false },
    ];
}

/// Bits of the attr's flags word, in the order of its bitfield
/// (`disabled : 1` is bit 0, ...; include/uapi/linux/perf_event.h).
mod bit {
    pub const EXCLUDE_KERNEL: u32 = 5;
    pub const EXCLUDE_HV: u32 = 6;
    pub const MMAP: u32 = 8;
    pub const COMM: u32 = 9;
    pub const TASK: u32 = 13;
    pub const WATERMARK: u32 = 14;
    pub const SAMPLE_ID_ALL: u32 = 18;
    pub const MMAP2: u32 = 23;
    pub const COMM_EXEC: u32 = 24;
    pub const USE_CLOCKID: u32 = 25;
}

/// The kernel's `struct perf_event_attr` through `sig_data`
/// (PERF_ATTR_SIZE_VER7, 128 bytes); the unions take their first
/// member's name.
#[repr(C)]
#[derive(Debug, Default, Clone)]
pub(super) struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    /// `wakeup_events`, or `wakeup_watermark` with the watermark bit.
    wakeup: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
}

/// PERF_ATTR_SIZE_VER7. A kernel older than the struct takes it all the
/// same as long as the fields it does not know are zero
/// (copy_struct_from_user in perf_copy_attr, kernel/events/core.c).
const ATTR_SIZE: usize = 128;
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == ATTR_SIZE);

impl PerfEventAttr {
    /// A dummy event that records, for every task on its CPU, each
    /// executable mapping, each exec and each fork, stamped with the pid
    /// and CLOCK_MONOTONIC time; the readers wake once `wakeup_bytes`
    /// are waiting.
    pub(super) fn mappings(features: Features, wakeup_bytes: u32) -> Self {
        let flags = [
            bit::EXCLUDE_KERNEL,
            bit::EXCLUDE_HV,
            // `mmap` is what turns the records on: the kernel skips
            // perf_event_mmap() unless some event has `mmap` or
            // `mmap_data` (nr_mmap_events, counted in account_event);
            // `mmap2` only chooses the richer record.
            bit::MMAP,
            bit::MMAP2,
            // Only to mark execs: begin_new_exec() emits the COMM record
            // after the old mm is gone and before the new program is
            // mapped, where sched_process_exec comes after.
            bit::COMM,
            bit::COMM_EXEC,
            // The forks, by which the reader follows the tree.
            bit::TASK,
            bit::WATERMARK,
            bit::SAMPLE_ID_ALL,
            bit::USE_CLOCKID,
        ]
        .iter()
        .fold(0u64, |flags, bit| flags | 1 << bit);
        PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: ATTR_SIZE as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
            read_format: if features.lost_count {
                PERF_FORMAT_LOST
            } else {
                0
            },
            flags,
            wakeup: wakeup_bytes,
            // The clock of bpf_ktime_get_ns (ktime_get_mono_fast_ns both),
            // so the times compare with the recording's events.
            clockid: libc::CLOCK_MONOTONIC,
            ..PerfEventAttr::default()
        }
    }
}

/// The records an event with [`Features::lost_count`] could not write:
/// its read(2), `{ u64 value; u64 lost; }` for that read format alone.
pub(super) fn lost(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut values = [0u8; 16];
    if nix::unistd::read(fd, &mut values)? != values.len() {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    let mut lost = [0u8; 8];
    lost.copy_from_slice(&values[8..]);
    Ok(u64::from_ne_bytes(lost))
}

/// perf_event_open(2) for `pid` on `cpu`, alone in its group.
pub(super) fn open(attr: &PerfEventAttr, pid: Pid, cpu: u32) -> io::Result<OwnedFd> {
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: attr is a live perf_event_attr of attr.size bytes, read
    // only during the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid as libc::pid_t,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_sit_where_the_header_puts_them() {
        let [newest, no_lost_count] = Features::NEWEST_FIRST;
        let attr = PerfEventAttr::mappings(newest, 4096);
        // exclude_kernel/hv, mmap (without which there are no MMAP2
        // records at all), comm, task, watermark,
        // sample_id_all, mmap2, comm_exec, use_clockid; never build_id
        // (bit 34).
        let expected = (1 << 5)
            | (1 << 6)
            | (1 << 8)
            | (1 << 9)
            | (1 << 13)
            | (1 << 14)
            | (1 << 18)
            | (1 << 23)
            | (1 << 24)
            | (1 << 25);
        assert_eq!(attr.flags, expected);
        assert_eq!(attr.read_format, 1 << 4);
        assert_eq!(PerfEventAttr::mappings(no_lost_count, 0).flags, expected);
        assert_eq!(PerfEventAttr::mappings(no_lost_count, 0).read_format, 0);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, flags), 40);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, clockid), 92);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sig_data), 120);
    }
}
