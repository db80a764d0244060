//! uprobe.multi links (6.6+) made by hand: the probe for the kernel's
//! support, and the test marks' link, made while the object loads.
//!
//! Making the marks' link registers two uprobes on libc, which sleeps an
//! RCU grace period with the command held (5 to 21 ms here, most of what
//! a profiled `record -- true` pays over an unprofiled one). The object's
//! own `mark_multi` can only be attached once the object has loaded, so
//! the link is made first, on a thread of its own, from a program of five
//! instructions that jumps through a one-slot program array; once the
//! object has loaded, `mark_multi` goes in that slot. Until then the jump
//! falls through and the program returns, as it does again once the
//! array's last fd is closed: the kernel empties a program array then.

use std::cell::{Cell, OnceCell};
use std::ffi::{c_ulong, CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::thread::JoinHandle;

use libbpf_rs::libbpf_sys as sys;

use crate::recorder::probes::runner::TestMarks;

/// Whether the kernel has uprobe.multi links, probed as libbpf probes
/// it: a program of that attach type loads, and a link on `/` is refused
/// for the file (EBADF), not for its type (EINVAL before 6.6, whose
/// kernels may load the program all the same).
pub(super) fn kernel_has_uprobe_multi() -> bool {
    let returns = [op(MOV_K, 0, 0, 0), op(EXIT, 0, 0, 0)];
    load(c"", &returns)
        .is_ok_and(|prog| link(prog.as_fd(), c"/", &[0], &[]).err() == Some(libc::EBADF))
}

/// The test marks' link, its cookie 1 on `setenv` as `mark_multi`
/// expects, and the slot it jumps through.
pub(super) struct EarlyLink {
    slot: OwnedFd,
    /// Closing it waits out one grace period: it goes with the slow links.
    pub(super) link: OwnedFd,
}

impl EarlyLink {
    fn make(marks: &TestMarks) -> Result<EarlyLink, String> {
        let slot = one_slot().map_err(failed("making the jump's slot"))?;
        let prog =
            load(c"marks_jump", &jump_through(slot.as_fd())).map_err(failed("loading the jump"))?;
        let path = CString::new(marks.file.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        let offsets = [marks.setenv as c_ulong, marks.unsetenv as c_ulong];
        let link =
            link(prog.as_fd(), &path, &offsets, &[1, 0]).map_err(failed("linking the jump"))?;
        Ok(EarlyLink { slot, link })
    }

    /// Puts `prog` in the slot: the marks are armed when this returns.
    pub(super) fn point_at(&self, prog: BorrowedFd<'_>) -> Result<(), String> {
        let (key, value) = (0u32, prog.as_raw_fd());
        // SAFETY: a map fd of ours and two 4-byte values that outlive the call.
        let err = unsafe {
            sys::bpf_map_update_elem(
                self.slot.as_raw_fd(),
                (&raw const key).cast(),
                (&raw const value).cast(),
                sys::BPF_ANY.into(),
            )
        };
        match err {
            0 => Ok(()),
            err => Err(failed("filling the jump's slot")(-err)),
        }
    }
}

/// Says what failed, and the errno.
fn failed(what: &'static str) -> impl Fn(i32) -> String {
    move |errno| format!("{what}: {}", nix::errno::Errno::from_raw(errno))
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

const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM
const MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

fn op(code: u8, dst: u8, src: u8, imm: i32) -> sys::bpf_insn {
    let mut insn = sys::bpf_insn {
        code,
        imm,
        ..Default::default()
    };
    insn.set_dst_reg(dst);
    insn.set_src_reg(src);
    insn
}

/// `bpf_tail_call(ctx, slot, 0); return 0;`, the context still in r1.
fn jump_through(slot: BorrowedFd<'_>) -> [sys::bpf_insn; 6] {
    [
        op(LD_IMM64, 2, sys::BPF_PSEUDO_MAP_FD as u8, slot.as_raw_fd()),
        op(0, 0, 0, 0),
        op(MOV_K, 3, 0, 0),
        op(CALL, 0, 0, sys::BPF_FUNC_tail_call as i32),
        op(MOV_K, 0, 0, 0),
        op(EXIT, 0, 0, 0),
    ]
}

fn one_slot() -> Result<OwnedFd, i32> {
    // SAFETY: no pointer but a static name.
    let fd = unsafe {
        sys::bpf_map_create(
            sys::BPF_MAP_TYPE_PROG_ARRAY,
            c"marks_jump".as_ptr(),
            4,
            4,
            1,
            std::ptr::null(),
        )
    };
    owned(fd)
}

/// A GPL program of the uprobe.multi attach type, named `name` (as
/// `bpftool prog` and the verifier's budget see it).
fn load(name: &CStr, insns: &[sys::bpf_insn]) -> Result<OwnedFd, i32> {
    let mut opts = sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<sys::bpf_prog_load_opts>() as _,
        expected_attach_type: sys::BPF_TRACE_UPROBE_MULTI,
        ..Default::default()
    };
    // SAFETY: instructions and options that outlive the call.
    let fd = unsafe {
        sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_KPROBE,
            name.as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &mut opts,
        )
    };
    owned(fd)
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
    owned(fd)
}

/// libbpf's answer, a new fd or a negative errno.
fn owned(fd: i32) -> Result<OwnedFd, i32> {
    if fd < 0 {
        return Err(-fd);
    }
    // SAFETY: an fd libbpf just made for us, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
