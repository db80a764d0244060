//! What a thread blocked on a futex waits for: the word's address from
//! the call's arguments, the memory it lies in (`/proc/PID/maps`), and,
//! where the word records it, the thread that holds the lock or that a
//! join waits to end (the word read from `/proc/PID/mem`).
//!
//! The kernel keeps no owner for a futex: only the word's meaning does.
//! A PI futex holds its owner's tid (FUTEX_TID_MASK), so does a robust
//! mutex, and glibc's pthread_mutex_t has `__owner` two ints after its
//! lock word on every ABI; glibc's pthread_join waits on the joined
//! thread's tid word, which holds that tid until the thread ends. A
//! semaphore, a condition variable or a runtime's own parking word name
//! nobody: in shared memory, its candidates are the other processes that
//! map it.

use std::cell::OnceCell;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::process::ProcDir;
use crate::event::{Mapped, Peer, Pid, WaitHow, WaitOn};

/// The blocking commands of futex(2) (include/uapi/linux/futex.h).
const FUTEX_WAIT: u64 = 0;
const FUTEX_LOCK_PI: u64 = 6;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAIT_REQUEUE_PI: u64 = 11;
const FUTEX_LOCK_PI2: u64 = 13;
/// Flags of futex(2)'s operation, besides its command.
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
/// The owner's tid in a PI or robust lock word.
const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
/// futex_waitv's per-word flag for process-private memory.
const FUTEX2_PRIVATE: u32 = 128;
/// The most words one futex_waitv waits on (the kernel's FUTEX_WAITV_MAX).
const WAITV_MAX: u64 = 128;
/// The size of a `struct futex_waitv`: val, uaddr, flags, reserved.
const WAITV_SIZE: u64 = 24;
/// glibc's lock word when the lock is held and has waiters.
const CONTENDED: u32 = 2;
/// Where `__owner` is after `__lock` in glibc's pthread_mutex_t.
const OWNER_OFFSET: u64 = 8;

/// One futex word a thread waits on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Word {
    addr: u64,
    /// Process-private: the same address in no other process.
    private: bool,
    /// A PI lock (FUTEX_LOCK_PI): the word holds its owner's tid.
    pi: bool,
}

/// The words a futex(2) or futex_waitv(2) call with `args` waits on;
/// `memory` reads the process's memory (futex_waitv's array).
pub(super) fn words(
    call: &str,
    args: [u64; 6],
    memory: impl Fn(u64, u64) -> Option<Vec<u8>>,
) -> Vec<Word> {
    match call {
        "futex" => {
            let private = args[1] & FUTEX_PRIVATE_FLAG != 0;
            let word = |pi| Word {
                addr: args[0],
                private,
                pi,
            };
            match args[1] & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) {
                FUTEX_WAIT | FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI => vec![word(false)],
                FUTEX_LOCK_PI | FUTEX_LOCK_PI2 => vec![word(true)],
                _ => Vec::new(),
            }
        }
        "futex_waitv" => {
            let count = args[1].min(WAITV_MAX);
            let bytes = memory(args[0], count * WAITV_SIZE).unwrap_or_default();
            bytes
                .chunks_exact(WAITV_SIZE as usize)
                .map(|w| Word {
                    addr: u64::from_ne_bytes(w[8..16].try_into().unwrap_or_default()),
                    private: u32::from_ne_bytes(w[16..20].try_into().unwrap_or_default())
                        & FUTEX2_PRIVATE
                        != 0,
                    pi: false,
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The thread a word names, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Names {
    /// It holds the lock.
    Owner(Pid),
    /// A join waits for it to end.
    Ending(Pid),
}

/// The wait on `word` of a thread of the process whose `/proc` directory
/// is `dir`; `memory` reads its memory, `maps` holds its `/proc/PID/maps`
/// once a word that may be shared needed it. `tids_ours` says whether
/// the tids in its memory are as this process sees them (the same PID
/// namespace): if not, a word names nobody proctrace can find.
/// A word in private memory that names no thread is none: every idle
/// thread of a runtime waits on one, and nothing in the tree ends it.
pub(super) fn wait_on(
    word: Word,
    dir: &ProcDir,
    memory: impl Fn(u64, u64) -> Option<Vec<u8>>,
    maps: &OnceCell<Vec<MapLine>>,
    tids_ours: impl FnOnce() -> bool,
) -> Option<WaitOn> {
    let int = |addr| {
        let bytes = memory(addr, 4)?;
        Some(u32::from_ne_bytes(bytes.try_into().ok()?))
    };
    let shared = if word.private {
        None
    } else {
        let maps = maps.get_or_init(|| parse_maps(&dir.read("maps").unwrap_or_default()));
        let region = maps
            .iter()
            .find(|m| m.start <= word.addr && word.addr < m.end);
        region.filter(|m| m.shared)
    };
    let thread_of = |tid: Pid| dir.file(&format!("task/{tid}/stat")).is_ok();
    // A shared lock may be held by a thread of any process.
    let alive = |tid: Pid| {
        tid > 0
            && (thread_of(tid) || (shared.is_some() && Path::new(&format!("/proc/{tid}")).exists()))
    };
    let value = int(word.addr).filter(|_| tids_ours());
    let names = value.and_then(|value| {
        let tid = (value & FUTEX_TID_MASK) as Pid;
        if word.pi {
            return (tid > 0).then_some(Names::Owner(tid));
        }
        // A robust mutex's word is its owner's tid, which glibc's owner
        // field repeats; a plain mutex's is only "locked, with waiters".
        let owner = int(word.addr.wrapping_add(OWNER_OFFSET)).map(|o| o as Pid);
        let locked = tid > 0 && owner == Some(tid) || value == CONTENDED;
        if let Some(owner) = owner.filter(|&o| locked && alive(o)) {
            return Some(Names::Owner(owner));
        }
        // pthread_join: the word is the joined thread's tid, nothing else.
        (value as Pid > 0 && thread_of(value as Pid)).then_some(Names::Ending(value as Pid))
    });
    let place = match shared {
        Some(m) => format!(" in {}", m.shown()),
        None => String::new(),
    };
    if names.is_none() && shared.is_none() {
        return None;
    }
    let (what, owner) = match names {
        Some(Names::Owner(tid)) => {
            let kind = if word.pi { "PI lock" } else { "lock" };
            (format!("the {kind} at {:#x}{place}", word.addr), Some(tid))
        }
        Some(Names::Ending(tid)) => (format!("thread {tid}"), Some(tid)),
        None => (format!("the word at {:#x}{place}", word.addr), None),
    };
    let how = match names {
        Some(Names::Ending(_)) => WaitHow::Exit,
        _ => WaitHow::Futex,
    };
    Some(WaitOn {
        fd: None,
        how,
        what,
        peer: Peer::Futex {
            owner,
            shared: shared.map(|m| m.object),
            offset: shared.map_or(word.addr, |m| (word.addr - m.start).wrapping_add(m.offset)),
        },
    })
}

/// Whether `pid` is in this process's PID namespace.
pub(super) fn in_our_pid_namespace(pid: Pid) -> bool {
    let ns = |pid: u32| {
        fs::metadata(format!("/proc/{pid}/ns/pid"))
            .ok()
            .map(|m| m.ino())
    };
    ns(pid as u32).is_some() && ns(pid as u32) == ns(std::process::id())
}

/// One line of `/proc/PID/maps`, as far as a futex needs it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MapLine {
    start: u64,
    end: u64,
    /// Mapped shared (`s`), so writes reach the other mappers.
    shared: bool,
    /// Where the mapping starts in its object.
    offset: u64,
    object: Mapped,
    path: String,
}

impl MapLine {
    /// How a line names the object: its path, or what kind it is.
    fn shown(&self) -> String {
        let path = self.path.trim_end_matches(" (deleted)");
        if path == "/dev/zero" {
            "shared anonymous memory".into()
        } else if path.starts_with("/SYSV") {
            format!("System V shared memory {path}")
        } else {
            self.path.clone()
        }
    }
}

/// The lines of the maps file `text`.
pub(super) fn parse_maps(text: &str) -> Vec<MapLine> {
    text.lines().filter_map(parse_map).collect()
}

/// `7f12a000-7f12b000 rw-s 00000000 00:01 1045  /dev/zero (deleted)`
fn parse_map(line: &str) -> Option<MapLine> {
    let mut words = line.splitn(6, ' ');
    let (start, end) = words.next()?.split_once('-')?;
    let perms = words.next()?;
    let offset = u64::from_str_radix(words.next()?, 16).ok()?;
    let (major, minor) = words.next()?.split_once(':')?;
    let ino = words.next()?.parse().ok()?;
    Some(MapLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        shared: perms.as_bytes().get(3) == Some(&b's'),
        offset,
        object: Mapped {
            dev: libc::makedev(
                u32::from_str_radix(major, 16).ok()?,
                u32::from_str_radix(minor, 16).ok()?,
            ),
            ino,
        },
        path: words.next().unwrap_or_default().trim_start().to_owned(),
    })
}

/// The shared objects `pid` maps, of those in `wanted`.
pub(super) fn mapping(pid: Pid, wanted: &[Mapped]) -> Vec<Mapped> {
    let text = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut found: Vec<Mapped> = parse_maps(&text)
        .into_iter()
        .filter(|m| m.shared && wanted.contains(&m.object))
        .map(|m| m.object)
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_gives_the_object_and_where_the_mapping_starts_in_it() {
        let text = "7f12a000-7f12b000 rw-s 00002000 00:01 1045                       /dev/zero (deleted)\n\
                    55d0c000-55d0d000 r--p 00000000 fe:01 77 /usr/bin/cat\n\
                    7ffd0000-7ffd1000 rw-p 00000000 00:00 0 \n";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 3);
        assert_eq!(
            (maps[0].start, maps[0].end, maps[0].shared, maps[0].offset),
            (0x7f12a000, 0x7f12b000, true, 0x2000)
        );
        assert_eq!(
            maps[0].object,
            Mapped {
                dev: libc::makedev(0, 1),
                ino: 1045
            }
        );
        assert_eq!(maps[0].shown(), "shared anonymous memory");
        assert!(!maps[1].shared);
        assert_eq!(maps[1].shown(), "/usr/bin/cat");
        assert_eq!(maps[2].path, "");
    }

    #[test]
    fn a_futex_call_waits_on_its_first_argument_unless_it_wakes() {
        let none = |_, _| None;
        let wait = words("futex", [0x1000, 128, 2, 0, 0, 0], none);
        assert_eq!(
            wait,
            vec![Word {
                addr: 0x1000,
                private: true,
                pi: false
            }]
        );
        let pi = words("futex", [0x1000, FUTEX_LOCK_PI2, 0, 0, 0, 0], none);
        assert!(pi[0].pi && !pi[0].private);
        // FUTEX_WAKE never blocks.
        assert!(words("futex", [0x1000, 1, 1, 0, 0, 0], none).is_empty());
    }

    #[test]
    fn futex_waitv_waits_on_each_word_of_its_array() {
        let mut array = Vec::new();
        for (addr, flags) in [(0x10u64, FUTEX2_PRIVATE), (0x20, 0)] {
            array.extend(0u64.to_ne_bytes());
            array.extend(addr.to_ne_bytes());
            array.extend(flags.to_ne_bytes());
            array.extend(0u32.to_ne_bytes());
        }
        let memory = |addr, len| (addr == 0x500 && len == 48).then(|| array.clone());
        let found = words("futex_waitv", [0x500, 2, 0, 0, 0, 0], memory);
        assert_eq!(
            found
                .iter()
                .map(|w| (w.addr, w.private))
                .collect::<Vec<_>>(),
            vec![(0x10, true), (0x20, false)]
        );
    }
}
