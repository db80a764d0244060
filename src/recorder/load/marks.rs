//! The uprobes on libc's `setenv` and `unsetenv` that tell the tests
//! inside a process ([`TestMarks`]), attached by a child process of their
//! own.
//!
//! Registering a uprobe on libc patches every process on the machine that
//! maps it, under locks that every other uprobe registered or unregistered
//! on the machine takes too: 6 to 13 ms here when alone, 250 to 300 ms
//! while three other processes registered and unregistered uprobes on
//! libc, long enough for pytest to run its first two tests before the
//! marks saw them. So the command starts only once the child has armed
//! them (or has said why it could not), while the rest of the recording is
//! set up. Unregistering takes ~80 ms; the child does that after the
//! recording, and nobody waits for it. They are never needed to record:
//! where they cannot attach, the recording goes on without them (a
//! warning says so), and a test's samples and hits fall to its process's
//! test.
//!
//! Where the kernel has uprobe.multi links (6.6+), both are one link made
//! in this process instead ([`attach_multi`]). Two perf events take the kernel's
//! `event_mutex` through each of their grace periods as they close, and
//! the next recording's uprobes need that mutex to arm: a profiled
//! recording right after another waited 0.1-0.4 s for them.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use libbpf_rs::libbpf_sys::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, UprobeMultiOpts};
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};

use super::attach::take_over;
use super::jump;
use super::uprobe_multi::Arming;
use crate::bpf::ProctraceSkel;
use crate::recorder::probes::runner::{TestMarks, TEST_VARIABLES};

/// The kernel's uprobe PMU, whose perf events are uprobes.
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
/// `_IOW('$', 8, __u32)` and `_IO('$', 0)` (include/uapi/linux/perf_event.h).
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;

/// How long the command may be held for the marks to arm: past it, the
/// recording starts without the marks of its first tests (a warning says
/// so) rather than never.
const ARMING_PATIENCE: Duration = Duration::from_secs(5);

/// The marks made ready while the object loads, as the kernel allows.
pub(super) enum Early {
    Link(Arming),
    Child(EarlyChild),
}

impl Early {
    /// Starts making the link (`multi`), or forks the child; where the
    /// child cannot be forked, it is forked after the load as before.
    pub(super) fn start(marks: &TestMarks, multi: bool) -> Option<Early> {
        if multi {
            return Some(Early::Link(Arming::start(marks.clone())));
        }
        EarlyChild::fork(marks)
            .inspect_err(|why| log::debug!("the test marks' early child: {why}"))
            .ok()
            .map(Early::Child)
    }

    /// The link being made, where it is one.
    pub(super) fn arming(&self) -> Option<&Arming> {
        match self {
            Early::Link(arming) => Some(arming),
            Early::Child(_) => None,
        }
    }
}

/// The child that holds the marks' uprobes: dropping this (every copy)
/// lets it go, to unregister them and exit.
pub(super) struct MarksChild {
    /// Where the child says that it armed them: one byte, 0 or an errno.
    armed: OwnedFd,
    _finished: OwnedFd,
    /// The slots its uprobes jump through, where it was forked early.
    _slots: Option<MapHandle>,
}

impl MarksChild {
    /// A copy of this handle, holding `slots` too.
    fn share(&self, slots: &MapHandle) -> Result<MarksChild, String> {
        let copy = |fd: &OwnedFd| fd.try_clone().map_err(|e| format!("copying an fd: {e}"));
        let slots = MapHandle::try_from(slots).map_err(|e| format!("copying an fd: {e}"))?;
        Ok(MarksChild {
            armed: copy(&self.armed)?,
            _finished: copy(&self._finished)?,
            _slots: Some(slots),
        })
    }

    /// Waits until the child has armed the uprobes; says why not, or that
    /// it took too long.
    pub(super) fn wait_armed(&self) -> Result<(), String> {
        let patience = PollTimeout::try_from(ARMING_PATIENCE).unwrap_or(PollTimeout::MAX);
        let mut ready = [PollFd::new(self.armed.as_fd(), PollFlags::POLLIN)];
        match nix::poll::poll(&mut ready, patience) {
            Ok(0) => Err(format!(
                "the uprobes on libc's setenv took over {} s to arm, and the command started \
                 without them",
                ARMING_PATIENCE.as_secs()
            )),
            Ok(_) => read_status(&self.armed),
            Err(errno) => Err(format!("waiting for the uprobes on libc's setenv: {errno}")),
        }
    }
}

/// The child's byte: 0 once both uprobes are armed, else the errno of the
/// first that was not.
fn read_status(armed: &impl AsFd) -> Result<(), String> {
    let mut byte = [0u8];
    match nix::unistd::read(armed, &mut byte) {
        Ok(1) if byte[0] == 0 => Ok(()),
        Ok(1) => Err(format!(
            "the uprobes on libc's setenv: {}",
            nix::errno::Errno::from_raw(i32::from(byte[0]))
        )),
        _ => Err("the process that arms the uprobes on libc's setenv exited first".into()),
    }
}

/// Arms the kernel side for [`TEST_VARIABLES`] and forks the child that
/// attaches the marks' programs to `marks`; why not, where that cannot be
/// done.
pub(super) fn attach_apart(
    skel: &ProctraceSkel<'_>,
    marks: &TestMarks,
) -> Result<MarksChild, String> {
    watch_variables(skel)?;
    let progs = &skel.progs;
    let progs = [progs.mark_setenv.as_fd(), progs.mark_unsetenv.as_fd()];
    fork_holding(&Uprobes::new(progs.map(|fd| fd.as_raw_fd()), marks)?)
}

/// Attaches the marks through the `early` child, else as
/// [`attach_apart`] does.
pub(super) fn attach_early(
    skel: &ProctraceSkel<'_>,
    marks: &TestMarks,
    early: &EarlyChild,
) -> Result<MarksChild, String> {
    let attached = early.attach(skel);
    if attached.is_ok() {
        log::debug!("the test marks armed through the child forked while the object loaded");
    }
    attached.or_else(|why| {
        log::debug!("the test marks' early child: {why}");
        attach_apart(skel, marks)
    })
}

/// The marks' child forked as the object starts to load: its uprobes run
/// two jumps, through slot 0 on setenv and 1 on unsetenv, that the
/// object's `mark_setenv` and `mark_unsetenv` fill once it has loaded.
pub(super) struct EarlyChild {
    child: MarksChild,
    slots: MapHandle,
}

impl EarlyChild {
    fn fork(marks: &TestMarks) -> Result<EarlyChild, String> {
        let slots = jump::slots(2)?;
        let jump = |index| jump::load_jump(c"marks_jump", 0, slots.as_fd(), index);
        let jumps = [jump(0)?, jump(1)?];
        let child = fork_holding(&Uprobes::new(
            jumps.each_ref().map(AsRawFd::as_raw_fd),
            marks,
        )?)?;
        Ok(EarlyChild { child, slots })
    }

    /// Arms the kernel side for [`TEST_VARIABLES`] and fills the slots;
    /// gives a handle of this attempt's on the child.
    fn attach(&self, skel: &ProctraceSkel<'_>) -> Result<MarksChild, String> {
        watch_variables(skel)?;
        jump::fill(&self.slots, 0, skel.progs.mark_setenv.as_fd())?;
        jump::fill(&self.slots, 1, skel.progs.mark_unsetenv.as_fd())?;
        self.child.share(&self.slots)
    }
}

/// Forks the child that attaches `uprobes` and holds them.
fn fork_holding(uprobes: &Uprobes) -> Result<MarksChild, String> {
    let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("a pipe: {e}"));
    let (done, finished) = pipe()?;
    let (armed, say_armed) = pipe()?;
    // SAFETY: the child makes only raw system calls on what was prepared
    // before the fork (no allocation, no lock), and never returns.
    match unsafe { libc::fork() } {
        0 => unsafe { uprobes.hold(say_armed.as_raw_fd(), done.as_raw_fd()) },
        -1 => Err(format!(
            "forking the process that holds them: {}",
            std::io::Error::last_os_error()
        )),
        _ => Ok(MarksChild {
            armed,
            _finished: finished,
            _slots: None,
        }),
    }
}

/// Arms the kernel side for [`TEST_VARIABLES`] and attaches both marks as
/// one uprobe.multi link, its cookie 1 on `setenv`: armed when this
/// returns. The link is the one `early` made while the object loaded
/// ([`uprobe_multi`](super::uprobe_multi)), else one made here (given
/// back). Closing it waits out one grace period, under no lock the next
/// recording's uprobes need: it goes with the slow links.
pub(super) fn attach_multi(
    skel: &ProctraceSkel<'_>,
    marks: &TestMarks,
    early: Option<&Arming>,
) -> Result<Option<Link>, String> {
    watch_variables(skel)?;
    let prog = &skel.progs.mark_multi;
    let armed = early.map(|arming| arming.link().and_then(|link| link.point_at(prog.as_fd())));
    match armed {
        Some(Ok(())) => {
            log::debug!("the test marks armed through the link made while the object loaded");
            return Ok(None);
        }
        Some(Err(why)) => log::debug!("the test marks' early link: {why}"),
        None => {}
    }
    let opts = UprobeMultiOpts {
        offsets: vec![marks.setenv as usize, marks.unsetenv as usize],
        cookies: vec![1, 0],
        ..Default::default()
    };
    prog.attach_uprobe_multi_with_opts(-1, &marks.file, "", opts)
        .map(Some)
        .map_err(|err| format!("the uprobes on libc's setenv: {err}"))
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
            .map_err(|err| format!("the kernel's list of test variables: {err}"))?;
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
    /// `progs` on setenv and unsetenv.
    fn new(progs: [RawFd; 2], marks: &TestMarks) -> Result<Uprobes, String> {
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
        let events = [
            (attr(marks.setenv), progs[0]),
            (attr(marks.unsetenv), progs[1]),
        ];
        Ok(Uprobes {
            _path: path,
            events,
        })
    }

    /// In the child: attaches each program to its uprobe (every process's,
    /// the tree's picked in the kernel), says so on `armed`, then holds
    /// them until `done` is closed, and closes them.
    ///
    /// # Safety
    /// Only in a child just forked from the process that made `self`.
    unsafe fn hold(&self, armed: RawFd, done: RawFd) -> ! {
        let mut fds = [-1; 2];
        let mut status = 0u8;
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
            let ok = fd >= 0
                && unsafe { libc::ioctl(fd, PERF_EVENT_IOC_SET_BPF, *prog) } == 0
                && unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) } == 0;
            if !ok && status == 0 {
                let errno = nix::errno::Errno::last_raw();
                status = u8::try_from(errno).unwrap_or(u8::MAX).max(1);
            }
            *slot = if ok { fd } else { -1 };
        }
        // SAFETY: a one-byte write to the pipe made for it.
        unsafe { libc::write(armed, (&raw const status).cast(), 1) };
        let mut keep = [fds[0], fds[1], done];
        keep.sort_unstable();
        // SAFETY: the child of a fork, with `keep` sorted.
        unsafe { take_over(&keep, done) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_childs_byte_says_armed_or_why_not() {
        let said = |byte: Option<u8>| {
            let (read, write) = nix::unistd::pipe().unwrap();
            if let Some(byte) = byte {
                nix::unistd::write(&write, &[byte]).unwrap();
            }
            drop(write);
            read_status(&read)
        };
        assert_eq!(said(Some(0)), Ok(()));
        let refused = said(Some(libc::EPERM as u8)).unwrap_err();
        assert!(
            refused.ends_with("EPERM: Operation not permitted"),
            "{refused}"
        );
        let gone = said(None).unwrap_err();
        assert!(gone.ends_with("exited first"), "{gone}");
    }
}
