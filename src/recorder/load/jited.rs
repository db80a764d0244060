//! Where the kernel put the code of proctrace's own programs: a stack
//! taken from inside one of them (a waker's, a probe's) has their frames
//! innermost. They name nothing the user ran, and their addresses change
//! with every load, so a kernel name cached by address never holds them:
//! each such stack would have the whole of kallsyms read (~100 ms) again.

use std::ops::Range;

use libbpf_rs::libbpf_sys::{bpf_prog_get_info_by_fd, bpf_prog_info, bpf_program__fd};
use libbpf_rs::skel::Skel;
use libbpf_rs::AsRawLibbpf;

use crate::bpf::ProctraceSkel;

/// The kernel addresses of the loaded programs' functions; none where
/// the kernel hides them (kptr_restrict).
pub(super) fn own_code(skel: &ProctraceSkel<'_>) -> Vec<Range<u64>> {
    skel.object()
        .progs()
        .filter_map(|prog| {
            // SAFETY: a program of the loaded object; -1 where not loaded.
            let fd = unsafe { bpf_program__fd(prog.as_libbpf_object().as_ptr()) };
            (fd >= 0).then(|| functions(fd))
        })
        .flatten()
        .collect()
}

/// The functions of program `fd`, asked of the kernel in two steps: how
/// many, then where.
fn functions(fd: i32) -> Vec<Range<u64>> {
    let mut info = bpf_prog_info::default();
    let mut len = size_of::<bpf_prog_info>() as u32;
    // SAFETY: `info` is as large as `len` says.
    if unsafe { bpf_prog_get_info_by_fd(fd, &mut info, &mut len) } != 0 {
        return Vec::new();
    }
    let count = info.nr_jited_ksyms.min(info.nr_jited_func_lens) as usize;
    let mut starts = vec![0u64; count];
    let mut lens = vec![0u32; count];
    let mut asked = bpf_prog_info {
        nr_jited_ksyms: count as u32,
        jited_ksyms: starts.as_mut_ptr() as u64,
        nr_jited_func_lens: count as u32,
        jited_func_lens: lens.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = size_of::<bpf_prog_info>() as u32;
    // SAFETY: the kernel writes at most `count` entries into each buffer.
    if count == 0 || unsafe { bpf_prog_get_info_by_fd(fd, &mut asked, &mut len) } != 0 {
        return Vec::new();
    }
    starts
        .into_iter()
        .zip(lens)
        .filter(|&(start, len)| start != 0 && len != 0)
        .map(|(start, len)| start..start + u64::from(len))
        .collect()
}
