//! Attaching the loaded programs, and detaching the slow ones at the end.

use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd, RawFd};

use libbpf_rs::{Link, ProgramMut};

use super::tracefs;
use crate::bpf::ProctraceSkel;
use crate::event::SyscallHook;
use crate::recorder::error::RecordError;

pub(super) fn attach_sched(
    skel: &ProctraceSkel<'_>,
    btf_hooks: bool,
) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let sched = if btf_hooks {
        [
            &progs.fork_btf,
            &progs.exec_btf,
            &progs.exec_btf_loop,
            &progs.exit_btf,
        ]
    } else {
        [
            &progs.fork_raw,
            &progs.exec_raw,
            &progs.exec_raw_loop,
            &progs.exit_raw,
        ]
    };
    // Of the two exec programs, one was loaded.
    attach_loaded(sched)
}

/// Attaches those of `programs` that were loaded.
pub(super) fn attach_loaded<'a, 'obj: 'a>(
    programs: impl IntoIterator<Item = &'a ProgramMut<'obj>>,
) -> Result<Vec<Link>, RecordError> {
    programs
        .into_iter()
        .filter(|prog| prog.autoload())
        .map(|prog| {
            let name = prog.name().to_string_lossy().into_owned();
            prog.attach()
                .map_err(RecordError::bpf(format!("attaching {name}")))
        })
        .collect()
}

/// Attaches the fexit or sys_exit programs for setsid and setpgid.
pub(super) fn attach_syscalls(
    skel: &ProctraceSkel<'_>,
    btf_hooks: bool,
    hook: SyscallHook,
) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let programs = match hook {
        SyscallHook::Fexit => vec![
            &progs.setsid_fexit,
            &progs.setpgid_fexit,
            &progs.setpgid_compat_fexit,
        ],
        _ if btf_hooks => vec![&progs.sys_exit_btf],
        _ => vec![&progs.sys_exit_raw],
    };
    attach_loaded(programs)
}

/// Attaches the programs at the classic tracepoints of setsid's and
/// setpgid's exits, whose ids tracefs gave. Each is a perf event, which
/// its link owns.
pub(super) fn attach_tracepoints(
    skel: &ProctraceSkel<'_>,
    [setsid, setpgid]: [u64; 2],
) -> Result<Vec<Link>, RecordError> {
    let progs = &skel.progs;
    let mut links = Vec::new();
    for (prog, id) in [
        (&progs.setsid_tracepoint, setsid),
        (&progs.setpgid_tracepoint, setpgid),
    ] {
        let event = tracefs::open_tracepoint(id)
            .map_err(RecordError::system(format!("opening tracepoint {id}")))?;
        let link = prog
            .attach_perf_event(event.as_raw_fd())
            .map_err(RecordError::bpf(format!("attaching to tracepoint {id}")))?;
        // The link closes it.
        let _ = event.into_raw_fd();
        links.push(link);
    }
    Ok(links)
}

/// Closing a classic tracepoint's perf event waits out an RCU grace period
/// (perf_trace_event_unreg, tens of milliseconds each), a uprobe's waits
/// for the tasks in it, and a process cannot finish exiting while one of
/// its closes waits. A child process
/// takes over the links (libbpf's, and one made by hand): it holds their
/// fds while this process drops its own, which then costs nothing, and
/// closes them itself afterwards.
pub(super) fn detach_in_child(links: Vec<Link>, own: Option<OwnedFd>) {
    let Ok((done, finished)) = nix::unistd::pipe() else {
        return;
    };
    let fds = links
        .iter()
        .map(|link| link.as_fd())
        .chain(own.as_ref().map(AsFd::as_fd));
    let mut keep: Vec<RawFd> = fds.map(|fd| fd.as_raw_fd()).collect();
    keep.push(done.as_raw_fd());
    keep.sort_unstable();
    // SAFETY: the child makes only async-signal-safe calls (the other
    // threads' locks are copied as they were) and never returns.
    if unsafe { libc::fork() } == 0 {
        unsafe { take_over(&keep, done.as_raw_fd()) }
    }
    drop(done);
    drop(links);
    drop(own);
    drop(finished);
}

/// The child of [`detach_in_child`]: closes every fd but the links' (a
/// pipe or terminal held here would keep a reader waiting), waits until
/// its parent has dropped the links, then closes them.
///
/// # Safety
/// Only in a child just forked; `keep` sorted.
pub(super) unsafe fn take_over(keep: &[RawFd], done: RawFd) -> ! {
    // SAFETY: plain system calls on integers and a local byte.
    unsafe {
        let close_range = |low: RawFd, high: libc::c_uint| {
            libc::syscall(libc::SYS_close_range, low as libc::c_uint, high, 0)
        };
        let mut low = 0;
        for &fd in keep {
            if fd > low {
                close_range(low, (fd - 1) as libc::c_uint);
            }
            low = fd + 1;
        }
        close_range(low, libc::c_uint::MAX);
        let mut byte = 0u8;
        while libc::read(done, (&raw mut byte).cast(), 1) < 0 {}
        for &fd in keep {
            libc::close(fd);
        }
        libc::_exit(0)
    }
}
