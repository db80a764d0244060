//! tracefs, where the kernel describes its tracepoints: their ids and the
//! layout of their records (`events/CATEGORY/NAME/format`). It is not
//! always mounted: there a thread mounts it in a mount namespace of its
//! own, which nothing else sees and which goes with the thread, so the
//! machine's mounts stay as they were.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};

/// Where tracefs is found when it is mounted.
const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// include/uapi/linux/perf_event.h
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// What `read` finds in tracefs's `events` directory. The answer is
/// taken as soon as it is had: the mounting thread's exit, which
/// unmounts, waits for an RCU grace period.
pub(crate) fn with_events<T: Send>(
    read: impl FnOnce(&Path) -> io::Result<T> + Send,
) -> io::Result<T> {
    if let Some(dir) = MOUNTED
        .iter()
        .map(Path::new)
        .find(|d| d.join("events").is_dir())
    {
        return read(&dir.join("events"));
    }
    let (answer, answered) = crossbeam_channel::bounded(1);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ =
                answer.send(mount_own().and_then(|()| read(&Path::new(MOUNTED[0]).join("events"))));
        });
        answered
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the tracefs thread failed")))
    })
}

/// Mounts tracefs in a mount namespace of this thread's own.
fn mount_own() -> io::Result<()> {
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
    Ok(())
}

/// The id of tracepoint `category/name` under `events`.
pub(crate) fn id(events: &Path, category: &str, name: &str) -> io::Result<u64> {
    let path = events.join(category).join(name).join("id");
    std::fs::read_to_string(path)?
        .trim()
        .parse()
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))
}

/// A perf event on tracepoint `id`, for a BPF program to attach to: one
/// event serves every CPU, since the program runs wherever it fires.
pub(crate) fn open_tracepoint(id: u64) -> io::Result<OwnedFd> {
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
