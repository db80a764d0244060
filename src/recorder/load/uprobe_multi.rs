//! uprobe.multi links (6.6+) made by hand: the probe for the kernel's
//! support, and the test marks' link, made on a thread of its own while
//! the object loads: registering its two uprobes on libc sleeps an RCU
//! grace period (5 to 21 ms here) that the command would otherwise wait
//! out, held. The link runs a [`jump`] into the object's `mark_multi`,
//! whose cookie (1 on setenv) reaches it through the same run context.

use std::cell::{Cell, OnceCell};
use std::ffi::{c_ulong, CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::thread::JoinHandle;

use libbpf_rs::libbpf_sys as sys;
use libbpf_rs::MapHandle;

use super::jump;
use crate::recorder::probes::runner::TestMarks;

/// Whether the kernel has uprobe.multi links, probed as libbpf probes
/// it: a program of that attach type loads, and a link on `/` is refused
/// for the file (EBADF), not for its type (EINVAL before 6.6, whose
/// kernels may load the program all the same).
pub(super) fn kernel_has_uprobe_multi() -> bool {
    let prog = jump::load(c"", sys::BPF_TRACE_UPROBE_MULTI, &jump::returns());
    prog.is_ok_and(|prog| link(prog.as_fd(), c"/", &[0], &[]).err() == Some(libc::EBADF))
}

/// The test marks' link, its cookie 1 on `setenv` as `mark_multi`
/// expects, and the slot it jumps through.
pub(super) struct EarlyLink {
    slot: MapHandle,
    /// Closing it waits out one grace period: it goes with the slow links.
    pub(super) link: OwnedFd,
}

impl EarlyLink {
    fn make(marks: &TestMarks) -> Result<EarlyLink, String> {
        let slot = jump::slots(1)?;
        let prog = jump::load_jump(c"marks_jump", sys::BPF_TRACE_UPROBE_MULTI, slot.as_fd(), 0)?;
        let path = CString::new(marks.file.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        let offsets = [marks.setenv as c_ulong, marks.unsetenv as c_ulong];
        let link = link(prog.as_fd(), &path, &offsets, &[1, 0])
            .map_err(jump::failed("linking the jump"))?;
        Ok(EarlyLink { slot, link })
    }

    /// Puts `prog` in the slot: the marks are armed when this returns.
    pub(super) fn point_at(&self, prog: BorrowedFd<'_>) -> Result<(), String> {
        jump::fill(&self.slot, 0, prog)
    }
}

/// The [`EarlyLink`] being made on a thread of its own, joined once.
pub(super) struct Arming {
    thread: Cell<Option<JoinHandle<Result<EarlyLink, String>>>>,
    made: OnceCell<Result<EarlyLink, String>>,
}

impl Arming {
    pub(super) fn start(marks: TestMarks) -> Arming {
        let thread = std::thread::Builder::new()
            .name("proctrace-marks".into())
            .spawn(move || EarlyLink::make(&marks));
        Arming {
            thread: Cell::new(thread.ok()),
            made: OnceCell::new(),
        }
    }

    /// The link, once made; why not.
    pub(super) fn link(&self) -> Result<&EarlyLink, String> {
        let made = self
            .made
            .get_or_init(|| match self.thread.take().map(JoinHandle::join) {
                Some(Ok(made)) => made,
                Some(Err(_)) => Err("the thread that made it panicked".into()),
                None => Err("no thread to make it".into()),
            });
        made.as_ref().map_err(Clone::clone)
    }

    /// The link, where [`Arming::link`] gave it.
    pub(super) fn into_link(self) -> Option<EarlyLink> {
        self.made.into_inner()?.ok()
    }
}

/// A uprobe.multi link of `prog` on `offsets` of `path` in every process,
/// with `cookies` (none if empty, else one per offset).
fn link(
    prog: BorrowedFd<'_>,
    path: &CStr,
    offsets: &[c_ulong],
    cookies: &[u64],
) -> Result<OwnedFd, i32> {
    let mut opts = sys::bpf_link_create_opts {
        sz: std::mem::size_of::<sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.uprobe_multi = sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
        path: path.as_ptr(),
        offsets: offsets.as_ptr(),
        cookies: if cookies.is_empty() {
            std::ptr::null()
        } else {
            cookies.as_ptr()
        },
        cnt: offsets.len() as u32,
        ..Default::default()
    };
    // SAFETY: a program fd and options whose pointers outlive the call.
    let fd =
        unsafe { sys::bpf_link_create(prog.as_raw_fd(), -1, sys::BPF_TRACE_UPROBE_MULTI, &opts) };
    jump::owned(fd)
}
