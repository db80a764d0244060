//! Transparent huge pages, off for proctrace and as they were for what it
//! runs.
//!
//! mimalloc, the binary's allocator, asks for huge pages
//! (`MADV_HUGEPAGE`) on the arenas it reserves, and the kernel zeroes a
//! whole 2 MiB page at the first touch of any byte in it. A recorder
//! touches little of each page and lives a short time: a profiled
//! `python3 -c pass` spent ~55 ms zeroing pages after its command, most
//! of what it cost over a plain `record`. `PR_SET_THP_DISABLE` turns huge
//! pages off for the whole process, the arenas mimalloc reserved before
//! `main` included; a child inherits it through `fork` and `execve`, so
//! the command and the `--on-hang` runs get back the setting proctrace
//! started with.

use std::sync::atomic::{AtomicI32, Ordering};

/// What `PR_GET_THP_DISABLE` said before [`refuse`] changed it; -1 when
/// nothing was changed.
static BEFORE: AtomicI32 = AtomicI32::new(-1);

/// Turns transparent huge pages off for this process, remembering how
/// they were for the children it execs. Best effort: a kernel without
/// the call (before 3.15) keeps its pages.
pub fn refuse() {
    // SAFETY: prctl with integer arguments touches no memory of ours.
    let before = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
    // SAFETY: as above.
    if before == 0 && unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0 {
        BEFORE.store(before, Ordering::Relaxed);
    }
}

/// In a child about to exec: huge pages as they were before [`refuse`].
/// Async-signal-safe (an atomic load and a system call).
pub(crate) fn give_back() {
    if BEFORE.load(Ordering::Relaxed) == 0 {
        // SAFETY: as in `refuse`.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) };
    }
}
