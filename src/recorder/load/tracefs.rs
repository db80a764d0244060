//! The classic tracepoints at setsid's and setpgid's exits: their ids come
//! from tracefs, which is not always mounted.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};

use crate::recorder::error::RecordError;

/// Where tracefs is found when it is mounted.
const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const EVENTS: [&str; 2] = ["sys_exit_setsid", "sys_exit_setpgid"];
/// include/uapi/linux/perf_event.h
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// The ids of the two tracepoints. Where tracefs is not mounted, a thread
/// mounts it in a mount namespace of its own, which nothing else sees and
/// which goes with the thread: the machine's mounts stay as they were.
/// The ids are taken as soon as it has them: its exit, which unmounts,
/// waits for an RCU grace period.
pub fn syscall_exit_ids() -> Result<[u64; 2], RecordError> {
    if let Some(ids) = MOUNTED.iter().find_map(|dir| read_ids(Path::new(dir)).ok()) {
        return Ok(ids);
    }
    let (ids_tx, ids_rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = ids_tx.send(read_in_own_namespace());
    });
    ids_rx
        .recv()
        .unwrap_or_else(|_| Err(io::Error::other("the tracefs thread failed")))
        .map_err(RecordError::system(
            "finding the syscall tracepoints in tracefs",
        ))
}

/// Mounts tracefs in a mount namespace of this thread's own and reads the
/// ids there.
fn read_in_own_namespace() -> io::Result<[u64; 2]> {
    // Mounts made here must not propagate to the namespace we left.
    unshare(CloneFlags::CLONE_NEWNS)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    mount(
        Some("tracefs"),
        MOUNTED[0],
        Some("tracefs"),
        MsFlags::empty(),
        None::<&str>,
    )?;
    read_ids(Path::new(MOUNTED[0]))
}

fn read_ids(tracefs: &Path) -> io::Result<[u64; 2]> {
    let id = |event: &str| -> io::Result<u64> {
        let path = tracefs.join("events/syscalls").join(event).join("id");
        fs::read_to_string(path)?
            .trim()
            .parse()
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
    };
    Ok([id(EVENTS[0])?, id(EVENTS[1])?])
}

/// A perf event on tracepoint `id`, for a BPF program to attach to: one
/// event serves every CPU, since the program runs wherever it fires.
pub fn open_tracepoint(id: u64) -> io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys::{perf_event_attr, PERF_TYPE_TRACEPOINT};
    // SAFETY: perf_event_attr is plain data, valid zeroed.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = id;
    // SAFETY: attr outlives the call; pid -1 with cpu 0 is every task.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr,
            -1,
            0,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
