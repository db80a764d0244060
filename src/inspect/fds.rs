//! The descriptors a live process holds, from `/proc/PID/fd`.

use std::ffi::{CStr, CString};

use nix::dir::Dir;
use nix::fcntl::{readlinkat, AtFlags};
use nix::sys::stat::fstatat;

use super::process::ProcDir;
use crate::event::{Access, Fd, FdKind, HeldFd, Pid};

/// The descriptors `pid` holds now (none once it is gone), each matched
/// against `root_fds`, the descriptors the tree's root started with.
pub fn held_fds(pid: Pid, root_fds: &[Fd]) -> Vec<HeldFd> {
    ProcDir::open(pid).map_or_else(Vec::new, |proc| held(&proc, root_fds))
}

/// How a descriptor was opened, from the mode of its `/proc/PID/fd/N`
/// link itself (`lstat`): the kernel gives it the owner's read and write
/// bits of the open file's mode (tid_fd_update_inode), for a tenth of the
/// cost of reading its fdinfo, which counts in a snapshot of thousands.
fn fd_access(link_mode: u32) -> Option<Access> {
    match (link_mode & 0o400 != 0, link_mode & 0o200 != 0) {
        (true, true) => Some(Access::ReadWrite),
        (true, false) => Some(Access::Read),
        (false, true) => Some(Access::Write),
        (false, false) => None,
    }
}

/// The descriptors `pid` holds now, from /proc, each matched against the
/// descriptors the root started with.
pub(super) fn held(proc: &ProcDir, root_fds: &[Fd]) -> Vec<HeldFd> {
    // Each call is made relative to the fd directory: a snapshot of
    // thousands of processes makes three per descriptor, and the walk
    // from /proc down to it would cost as much as the call.
    let Some(mut dir) = proc.dir("fd") else {
        return Vec::new();
    };
    let names: Vec<CString> = dir
        .iter()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_owned())
        .filter(|name| name.as_bytes() != b"." && name.as_bytes() != b"..")
        .collect();
    let mut held: Vec<HeldFd> = names
        .iter()
        .filter_map(|name| held_fd(&dir, name, root_fds))
        .collect();
    held.sort_by_key(|h| h.fd.fd);
    held
}

/// One descriptor of an fd directory: what it refers to, and how.
fn held_fd(dir: &Dir, name: &CStr, root_fds: &[Fd]) -> Option<HeldFd> {
    let fd: i32 = name.to_str().ok()?.parse().ok()?;
    let target = readlinkat(dir, name).ok()?.to_string_lossy().into_owned();
    // stat follows the link to the open file itself.
    let meta = fstatat(dir, name, AtFlags::empty()).ok()?;
    let fd = Fd {
        fd,
        kind: FdKind::of(meta.st_mode, libc::major(meta.st_rdev)),
        target,
        dev: meta.st_dev,
        ino: meta.st_ino,
    };
    let root_fd = root_fds.iter().find(|r| r.same_file(&fd)).map(|r| r.fd);
    let link = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
    let access = link.and_then(|l| fd_access(l.st_mode));
    Some(HeldFd {
        fd,
        root_fd,
        access,
    })
}
