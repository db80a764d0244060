//! The system calls a blocked process may be in, by number, for each
//! architecture proctrace records on. `/proc/PID/syscall` gives numbers,
//! which differ by architecture; recordings name the call too, so that
//! they read the same anywhere. This is the one table of them.

/// x86-64's numbers (arch/x86/entry/syscalls/syscall_64.tbl). Recordings
/// made before calls were named carry these numbers alone.
pub const X86_64: &[(i64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (2, "open"),
    (7, "poll"),
    (17, "pread64"),
    (18, "pwrite64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (26, "msync"),
    (34, "pause"),
    (35, "nanosleep"),
    (40, "sendfile"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (56, "clone"),
    (58, "vfork"),
    (61, "wait4"),
    (72, "fcntl"),
    (73, "flock"),
    (74, "fsync"),
    (75, "fdatasync"),
    (128, "rt_sigtimedwait"),
    (130, "rt_sigsuspend"),
    (162, "sync"),
    (202, "futex"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (257, "openat"),
    (270, "pselect6"),
    (271, "ppoll"),
    (275, "splice"),
    (276, "tee"),
    (277, "sync_file_range"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (295, "preadv"),
    (296, "pwritev"),
    (299, "recvmmsg"),
    (306, "syncfs"),
    (307, "sendmmsg"),
    (326, "copy_file_range"),
    (435, "clone3"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

/// arm64's numbers, the generic ones (include/uapi/asm-generic/unistd.h):
/// it has no poll, select, pause, open or epoll_wait.
pub const AARCH64: &[(i64, &str)] = &[
    (22, "epoll_pwait"),
    (25, "fcntl"),
    (32, "flock"),
    (56, "openat"),
    (63, "read"),
    (64, "write"),
    (65, "readv"),
    (66, "writev"),
    (67, "pread64"),
    (68, "pwrite64"),
    (69, "preadv"),
    (70, "pwritev"),
    (71, "sendfile"),
    (72, "pselect6"),
    (73, "ppoll"),
    (76, "splice"),
    (77, "tee"),
    (81, "sync"),
    (82, "fsync"),
    (83, "fdatasync"),
    (84, "sync_file_range"),
    (95, "waitid"),
    (98, "futex"),
    (101, "nanosleep"),
    (115, "clock_nanosleep"),
    (133, "rt_sigsuspend"),
    (137, "rt_sigtimedwait"),
    (202, "accept"),
    (203, "connect"),
    (206, "sendto"),
    (207, "recvfrom"),
    (211, "sendmsg"),
    (212, "recvmsg"),
    (220, "clone"),
    (227, "msync"),
    (242, "accept4"),
    (243, "recvmmsg"),
    (260, "wait4"),
    (267, "syncfs"),
    (269, "sendmmsg"),
    (285, "copy_file_range"),
    (435, "clone3"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

/// The table of the architecture proctrace was built for.
#[cfg(target_arch = "x86_64")]
pub const NATIVE: &[(i64, &str)] = X86_64;
/// The table of the architecture proctrace was built for.
#[cfg(target_arch = "aarch64")]
pub const NATIVE: &[(i64, &str)] = AARCH64;

/// The name of call `nr` in `table`, if it is one a blocked process may be in.
pub fn name_in(table: &[(i64, &'static str)], nr: i64) -> Option<&'static str> {
    table.iter().find(|(n, _)| *n == nr).map(|(_, name)| *name)
}

/// The name of call `nr` on this machine.
pub fn name(nr: i64) -> Option<&'static str> {
    name_in(NATIVE, nr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_tables_name_each_number_once_and_agree_on_the_names_they_share() {
        for table in [X86_64, AARCH64] {
            let mut numbers: Vec<i64> = table.iter().map(|(n, _)| *n).collect();
            numbers.dedup();
            assert_eq!(numbers.len(), table.len(), "sorted, no repeats");
        }
        assert_eq!(name_in(AARCH64, 63), Some("read"));
        assert_eq!(name_in(X86_64, 0), Some("read"));
        assert_eq!(name_in(AARCH64, 7), None, "no poll on arm64");
    }
}
