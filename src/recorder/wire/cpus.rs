//! The kernel's lists of CPUs (`/sys/devices/system/cpu/online`), which
//! the CPU profile and the mmap watch each open a perf event per entry of.

use std::io;

/// Where the kernel lists the CPUs that run.
const ONLINE: &str = "/sys/devices/system/cpu/online";

/// The online CPUs; an error where the list cannot be read or is not one.
pub(crate) fn online_cpus() -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string(ONLINE)?;
    cpu_list(&text)
        .filter(|cpus| !cpus.is_empty())
        .ok_or_else(|| io::Error::other(format!("{ONLINE}: unreadable CPU list {text:?}")))
}

/// A kernel CPU list ("0-3,5,7-8\n"; lib/bitmap.c's format).
pub(crate) fn cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for range in list.trim().split(',').filter(|r| !r.is_empty()) {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
        if last < first || last - first > 1 << 16 {
            return None;
        }
        cpus.extend(first..=last);
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0\n"), Some(vec![0]));
        assert_eq!(cpu_list("0-3,5,7-8\n"), Some(vec![0, 1, 2, 3, 5, 7, 8]));
        assert_eq!(cpu_list(""), Some(vec![]));
        assert_eq!(cpu_list("0-"), None);
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("0-x"), None);
        assert_eq!(cpu_list("0-4294967295"), None);
    }
}
