//! Programs of a few instructions made by hand, which jump through a
//! program array into the object's programs: attached before the object
//! has loaded, they let the kernel's slow part of attaching (registering
//! uprobes, an RCU grace period) overlap the load. Until a slot is filled
//! the jump falls through and the program returns, as it does again once
//! the array's last fd is closed: the kernel empties a program array then.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys as sys;
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

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

/// `return 0;`
pub(super) fn returns() -> [sys::bpf_insn; 2] {
    [op(MOV_K, 0, 0, 0), op(EXIT, 0, 0, 0)]
}

/// `bpf_tail_call(ctx, slots, index); return 0;`, the context still in r1.
fn jump_through(slots: BorrowedFd<'_>, index: i32) -> [sys::bpf_insn; 6] {
    [
        op(LD_IMM64, 2, sys::BPF_PSEUDO_MAP_FD as u8, slots.as_raw_fd()),
        op(0, 0, 0, 0),
        op(MOV_K, 3, 0, index),
        op(CALL, 0, 0, sys::BPF_FUNC_tail_call as i32),
        op(MOV_K, 0, 0, 0),
        op(EXIT, 0, 0, 0),
    ]
}

/// A program array of `count` slots.
pub(super) fn slots(count: u32) -> Result<MapHandle, String> {
    let opts = sys::bpf_map_create_opts {
        sz: std::mem::size_of::<sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    MapHandle::create(MapType::ProgArray, Some("marks_jump"), 4, 4, count, &opts)
        .map_err(|err| format!("making the jump's slots: {err}"))
}

/// The program named `name` that jumps through slot `index` of `slots`.
pub(super) fn load_jump(
    name: &CStr,
    attach_type: sys::bpf_attach_type,
    slots: BorrowedFd<'_>,
    index: i32,
) -> Result<OwnedFd, String> {
    load(name, attach_type, &jump_through(slots, index)).map_err(failed("loading the jump"))
}

/// Puts `prog` in slot `index` of `slots`.
pub(super) fn fill(slots: &MapHandle, index: u32, prog: BorrowedFd<'_>) -> Result<(), String> {
    let value = prog.as_raw_fd().to_ne_bytes();
    slots
        .update(&index.to_ne_bytes(), &value, MapFlags::ANY)
        .map_err(|err| format!("filling the jump's slot: {err}"))
}

/// A GPL kprobe-type program of `attach_type` (0 for a perf event's),
/// named `name` (as `bpftool prog` and the verifier's budget see it).
pub(super) fn load(
    name: &CStr,
    attach_type: sys::bpf_attach_type,
    insns: &[sys::bpf_insn],
) -> Result<OwnedFd, i32> {
    let mut opts = sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attach_type,
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

/// Says what failed, and the errno.
pub(super) fn failed(what: &'static str) -> impl Fn(i32) -> String {
    move |errno| format!("{what}: {}", nix::errno::Errno::from_raw(errno))
}

/// libbpf's answer, a new fd or a negative errno.
pub(super) fn owned(fd: i32) -> Result<OwnedFd, i32> {
    if fd < 0 {
        return Err(-fd);
    }
    // SAFETY: an fd libbpf just made for us, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
