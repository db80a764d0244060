//! What is checked before anything loads: privileges, the memory limit, the PID namespace.

use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::recorder::error::RecordError;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Before Linux 5.11, BPF memory counts against RLIMIT_MEMLOCK. Raising it
/// needs CAP_SYS_RESOURCE, which not every root has; where the raise is
/// refused the kernel is either new enough not to care or the load fails
/// with its own error, so a refusal is never fatal here.
pub(super) fn raise_memlock_limit() {
    let _ = nix::sys::resource::setrlimit(
        nix::sys::resource::Resource::RLIMIT_MEMLOCK,
        nix::sys::resource::RLIM_INFINITY,
        nix::sys::resource::RLIM_INFINITY,
    );
}

/// Checks the effective capabilities in `status` (/proc/self/status).
pub(super) fn check_privileges(status: &str) -> Result<(), RecordError> {
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| effective & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(RecordError::Permission)
    }
}

/// proctrace's PID namespace, so the kernel side can report pids as
/// proctrace sees them: a lower bound of its nesting level (NSpid counts
/// the levels from /proc's namespace down, and /proc need not belong to
/// the initial namespace: `unshare --mount-proc`, containers), and its
/// inode number.
pub(super) fn pid_namespace(status: &str) -> Result<(u32, u32), RecordError> {
    let level = status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map_or(0, |ids| ids.split_whitespace().count().saturating_sub(1));
    let inum = fs::metadata("/proc/self/ns/pid")
        .map_err(RecordError::system("reading /proc/self/ns/pid"))?
        .ino();
    Ok((level as u32, inum as u32))
}
