//! Why the kernel refused a map its memory, told apart from the other
//! reasons a map cannot be made (the kernel says EINVAL, or ENOMEM, for
//! several).

use std::fs;
use std::path::{Path, PathBuf};

use libbpf_rs::ErrorKind;

use crate::recorder::error::{MemoryLimit, RecordError};

/// The ring buffer's size checked before anything loads: the kernel's
/// own refusal of a bad one is a bare EINVAL.
pub(super) fn check_ring_size(bytes: u32) -> Result<(), RecordError> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map_or(4096, |page| page as u32);
    if bytes.is_power_of_two() && bytes >= page {
        Ok(())
    } else {
        Err(RecordError::RingSize { bytes, page })
    }
}

/// The error for a ring of `bytes` the kernel would not make, where the
/// cause was memory; `None` for any other cause.
pub(super) fn ring_refused(err: &libbpf_rs::Error, bytes: u32) -> Option<RecordError> {
    let limit = match err.kind() {
        ErrorKind::OutOfMemory => cgroup_limit(u64::from(bytes))
            .map_or(MemoryLimit::Ram, |limit| MemoryLimit::Cgroup { limit }),
        // With the privileges already checked, a map refused for
        // permission is one over the memlock limit (before 5.11).
        ErrorKind::PermissionDenied => {
            memlock_limit().map(|limit| MemoryLimit::Memlock { limit })?
        }
        _ => return None,
    };
    Some(RecordError::RingMemory { bytes, limit })
}

/// RLIMIT_MEMLOCK, unless it is unlimited.
fn memlock_limit() -> Option<u64> {
    let (soft, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(soft)
}

/// The limit of the memory cgroup, proctrace's own or one above it, that
/// has less than `bytes` left under it.
fn cgroup_limit(bytes: u64) -> Option<u64> {
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    let (dir, files) = memory_cgroup(&cgroups)?;
    dir.ancestors().find_map(|dir| {
        let read = |name: &str| fs::read_to_string(dir.join(name)).ok();
        // "max" (v2) does not parse: no limit.
        let limit: u64 = read(files.0)?.trim().parse().ok()?;
        let usage: u64 = read(files.1)?.trim().parse().ok()?;
        (limit.saturating_sub(usage) < bytes).then_some(limit)
    })
}

/// The path of a line of /proc/self/cgroup, relative to its hierarchy.
fn path(line: &str) -> Option<&str> {
    Some(line.splitn(3, ':').nth(2)?.trim_start_matches('/'))
}

/// The directory of the memory cgroup in /proc/self/cgroup's `cgroups`,
/// with its limit and usage files: cgroup v1's memory hierarchy where it
/// is mounted, else the unified one (both at their usual places).
fn memory_cgroup(cgroups: &str) -> Option<(PathBuf, (&'static str, &'static str))> {
    let v1 = cgroups.lines().find(|line| {
        line.split(':')
            .nth(1)
            .is_some_and(|controllers| controllers.split(',').any(|c| c == "memory"))
    });
    match v1 {
        Some(line) => Some((
            Path::new("/sys/fs/cgroup/memory").join(path(line)?),
            ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        )),
        None => {
            let line = cgroups.lines().find(|line| line.starts_with("0::"))?;
            Some((
                Path::new("/sys/fs/cgroup").join(path(line)?),
                ("memory.max", "memory.current"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_cgroup_is_v1_where_mounted_else_unified() {
        let hybrid = "4:memory:/a/b\n0::/\n";
        let (dir, files) = memory_cgroup(hybrid).unwrap();
        assert_eq!(dir, Path::new("/sys/fs/cgroup/memory/a/b"));
        assert_eq!(files.0, "memory.limit_in_bytes");
        let (dir, files) = memory_cgroup("0::/user.slice/x\n").unwrap();
        assert_eq!(dir, Path::new("/sys/fs/cgroup/user.slice/x"));
        assert_eq!(files.0, "memory.max");
    }

    #[test]
    fn ring_sizes_are_powers_of_two_of_a_page_or_more() {
        assert!(check_ring_size(4 << 20).is_ok());
        assert!(matches!(
            check_ring_size(3 << 20),
            Err(RecordError::RingSize { bytes, .. }) if bytes == 3 << 20
        ));
        assert!(check_ring_size(1024).is_err());
    }
}
