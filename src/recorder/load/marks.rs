//! The uprobes on libc's `setenv` and `unsetenv` that tell the tests
//! inside a process ([`TestMarks`]), attached by a child process of their
//! own while the recording goes on.
//!
//! Registering a uprobe on libc patches every process on the machine that
//! maps it: about 0.1 s here, which a profiled `true` paid in full before
//! it could start. No command needs to wait for it: the variables they
//! watch are set by test runners that have long started by then (pytest
//! names its first test hundreds of milliseconds into its run, after its
//! imports and collection). Unregistering takes as long again; the child
//! does that too, after the recording, and nobody waits for it. They are
//! never needed to record: where they cannot attach, the recording goes on
//! without them, and a test's samples and hits fall to its process's test.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use libbpf_rs::libbpf_sys::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use libbpf_rs::{MapCore, MapFlags};
use nix::fcntl::OFlag;

use super::attach::take_over;
use crate::bpf::ProctraceSkel;
use crate::recorder::probes::runner::{TestMarks, TEST_VARIABLES};

/// The kernel's uprobe PMU, whose perf events are uprobes.
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
/// `_IOW('$', 8, __u32)` and `_IO('$', 0)` (include/uapi/linux/perf_event.h).
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;

/// The child that holds the marks' uprobes: dropping this lets it go, to
/// unregister them and exit.
pub(super) struct MarksChild {
    _finished: OwnedFd,
}

/// Arms the kernel side for [`TEST_VARIABLES`] and forks the child that
/// attaches the marks' programs to `marks`; `None` (said in the log)
/// where that cannot be done.
pub(super) fn attach_apart(skel: &ProctraceSkel<'_>, marks: &TestMarks) -> Option<MarksChild> {
    let prepared = watch_variables(skel).and_then(|()| Uprobes::new(skel, marks));
    let uprobes = match prepared {
        Ok(uprobes) => uprobes,
        Err(why) => {
            log::warn!("naming the tests inside a process: {why}");
            return None;
        }
    };
    let (done, finished) = nix::unistd::pipe2(OFlag::O_CLOEXEC).ok()?;
    // SAFETY: the child makes only raw system calls on what was prepared
    // before the fork (no allocation, no lock), and never returns.
    match unsafe { libc::fork() } {
        0 => unsafe { uprobes.hold(done.as_raw_fd()) },
        -1 => {
            log::warn!("naming the tests inside a process: fork failed");
            None
        }
        _ => Some(MarksChild {
            _finished: finished,
        }),
    }
}

/// Tells the kernel side which variables name a test.
fn watch_variables(skel: &ProctraceSkel<'_>) -> Result<(), String> {
    let variables = &skel.maps.test_variables;
    for name in TEST_VARIABLES {
        // NUL-padded to the key's size, TEST_VARIABLE_CAP (proctrace.h).
        let mut key = vec![0u8; variables.key_size() as usize];
        key[..name.len()].copy_from_slice(name.as_bytes());
        variables
            .update(&key, &[1], MapFlags::ANY)
            .map_err(|err| err.to_string())?;
    }
    Ok(())
}

/// Everything the child needs, made before the fork.
struct Uprobes {
    /// Keeps the path the attributes point to alive.
    _path: CString,
    /// One perf event each, and the program to run on it.
    events: [(perf_event_attr, RawFd); 2],
}

impl Uprobes {
    fn new(skel: &ProctraceSkel<'_>, marks: &TestMarks) -> Result<Uprobes, String> {
        let pmu = std::fs::read_to_string(UPROBE_PMU)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .ok_or_else(|| format!("no uprobe PMU ({UPROBE_PMU})"))?;
        let path = CString::new(marks.file.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        let attr = |offset: u64| {
            let mut attr = perf_event_attr {
                type_: pmu,
                size: std::mem::size_of::<perf_event_attr>() as u32,
                ..Default::default()
            };
            attr.__bindgen_anon_3.uprobe_path = path.as_ptr() as u64;
            attr.__bindgen_anon_4.probe_offset = offset;
            attr
        };
        let progs = &skel.progs;
        let events = [
            (attr(marks.setenv), progs.mark_setenv.as_fd().as_raw_fd()),
            (
                attr(marks.unsetenv),
                progs.mark_unsetenv.as_fd().as_raw_fd(),
            ),
        ];
        Ok(Uprobes {
            _path: path,
            events,
        })
    }

    /// In the child: attaches each program to its uprobe (every process's,
    /// the tree's picked in the kernel), then holds them until `done` is
    /// closed, and closes them.
    ///
    /// # Safety
    /// Only in a child just forked from the process that made `self`.
    unsafe fn hold(&self, done: RawFd) -> ! {
        let mut fds = [-1; 2];
        for (slot, (attr, prog)) in fds.iter_mut().zip(&self.events) {
            // SAFETY: a valid attr for the call; pid -1 and CPU 0 is every
            // process, as libbpf opens a uprobe for all of them.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    attr as *const perf_event_attr,
                    -1,
                    0,
                    -1,
                    PERF_FLAG_FD_CLOEXEC,
                )
            } as RawFd;
            // SAFETY: ioctls on the fd just opened, with the program's fd.
            let armed = fd >= 0
                && unsafe { libc::ioctl(fd, PERF_EVENT_IOC_SET_BPF, *prog) } == 0
                && unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) } == 0;
            *slot = if armed { fd } else { -1 };
        }
        let mut keep = [fds[0], fds[1], done];
        keep.sort_unstable();
        // SAFETY: the child of a fork, with `keep` sorted.
        unsafe { take_over(&keep, done) }
    }
}
