//! The tree's executable mappings as the kernel tells them: the records
//! of perf's ring (layouts from `enum perf_event_type` in
//! include/uapi/linux/perf_event.h), and the lines of /proc/PID/maps for
//! what a process had mapped before anyone watched. Every length comes
//! from the kernel and is checked: a record too short for its fields is
//! skipped, never trusted.

use crate::event::Pid;

/// An executable mapping made by a process of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The process (thread group) that made it.
    pub pid: Pid,
    /// When, in CLOCK_MONOTONIC nanoseconds (the recording's clock).
    pub time: u64,
    /// Its first address.
    pub start: u64,
    /// The address just past it.
    pub end: u64,
    /// The offset in the file `start` maps.
    pub file_offset: u64,
    /// The file's path as the mapping process saw it (relative to its
    /// root directory), or the kernel's name: `[vdso]`, `//anon`, ...
    pub path: String,
    /// The file's device (major, minor); `None` for a mapping of no file
    /// (`[vdso]`, `//anon`).
    pub dev: Option<(u32, u32)>,
    /// The file's inode, likewise.
    pub ino: Option<u64>,
    /// The file's GNU build id (the note's bytes), where whoever made
    /// the mapping knew it; never from the watch, which asks the kernel
    /// for device and inode only (see `watch::attr::Features`).
    pub build_id: Option<Vec<u8>>,
}

/// What the kernel announces about the tree's address spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// `pid` exec'd at `time`: the mappings it had before are gone, and
    /// the new program's are announced after this. Stamped as the old
    /// address space is dropped, before the new program is mapped (the
    /// recording's exec event, from sched_process_exec, comes after the
    /// new program's mappings).
    Exec {
        /// The process.
        pid: Pid,
        /// When, in CLOCK_MONOTONIC nanoseconds.
        time: u64,
    },
    /// A new executable mapping.
    Mapped(Mapping),
}

/// `7f1c2c000000-7f1c2c022000 r-xp 00022000 fe:01 1234  /usr/lib/libc.so.6`
pub(crate) fn maps_line(pid: Pid, time: u64, line: &str) -> Option<Mapping> {
    let mut words = line.split_whitespace();
    let (start, end) = words.next()?.split_once('-')?;
    if words.next()?.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let file_offset = u64::from_str_radix(words.next()?, 16).ok()?;
    let (major, minor) = words.next()?.split_once(':')?;
    let dev = (
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    let ino: u64 = words.next()?.parse().ok()?;
    let path = words.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        pid,
        time,
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        file_offset,
        path,
        dev: (ino != 0).then_some(dev),
        ino: (ino != 0).then_some(ino),
        build_id: None,
    })
}

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_FORK: u32 = 7;
const PERF_RECORD_MMAP2: u32 = 10;
/// In a COMM record's misc: the name changed because of an exec (Linux
/// 3.16, 82b897782d10 "perf: Differentiate exec() and non-exec() comm
/// events").
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
/// The `sample_id` every record ends with under `sample_id_all`, for our
/// sample_type: `{ u32 pid, tid; } { u64 time; }`.
const SAMPLE_ID_SIZE: usize = 16;

/// What one record says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    Seen(Seen),
    /// PERF_RECORD_FORK of a new process (not of a thread): `pid` was
    /// forked by `parent` at `time`.
    Fork {
        pid: Pid,
        parent: Pid,
        time: u64,
    },
    /// PERF_RECORD_LOST: this many records did not fit in the ring.
    Lost(u64),
    /// Records of no interest here: a COMM that is no exec (a thread
    /// renamed), MMAP2 of a mapping that is not executable, any other
    /// type.
    Ignored,
    /// A record too short for what its type says it holds.
    Malformed,
}

/// Decodes one whole record, header included.
pub(crate) fn parse(record: &[u8]) -> Parsed {
    let (Some(kind), Some(misc)) = (u32_at(record, 0), u16_at(record, 4)) else {
        return Parsed::Malformed;
    };
    let parsed = match kind {
        PERF_RECORD_MMAP2 => mmap2(record).map(|m| m.map_or(Parsed::Ignored, Parsed::Seen)),
        PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => exec(record),
        PERF_RECORD_LOST => u64_at(record, 16).map(Parsed::Lost),
        PERF_RECORD_FORK => fork(record),
        _ => Some(Parsed::Ignored),
    };
    parsed.unwrap_or(Parsed::Malformed)
}

/// PERF_RECORD_MMAP2: `Some(None)` for a mapping that is not executable.
/// Its union is device and inode whatever the header's misc says: the
/// watch never asks for build ids, and the flag that says a record holds
/// one (PERF_RECORD_MISC_MMAP_BUILD_ID) is left set by the kernel for
/// every event written after one that asked (perf_event_mmap_output).
fn mmap2(record: &[u8]) -> Option<Option<Seen>> {
    const PROT: usize = 64;
    const FILENAME: usize = 72;
    let pid = pid_at(record, 8)?;
    let start = u64_at(record, 16)?;
    let len = u64_at(record, 24)?;
    let file_offset = u64_at(record, 32)?;
    let prot = u32_at(record, PROT)?;
    let time = time(record)?;
    let name = record.get(FILENAME..record.len().checked_sub(SAMPLE_ID_SIZE)?)?;
    if prot & libc::PROT_EXEC as u32 == 0 {
        return Some(None);
    }
    let dev = (u32_at(record, 40)?, u32_at(record, 44)?);
    let ino = u64_at(record, 48)?;
    // 0:0 and inode 0 name no file ([vdso], //anon): no file system has
    // device 0:0 (unnamed devices start at minor 1).
    let file = ino != 0 || dev != (0, 0);
    Some(Some(Seen::Mapped(Mapping {
        pid,
        time,
        start,
        end: start.checked_add(len)?,
        file_offset,
        path: c_string(name),
        dev: file.then_some(dev),
        ino: file.then_some(ino),
        build_id: None,
    })))
}

/// PERF_RECORD_COMM of an exec: `u32 pid, tid; char comm[]`.
fn exec(record: &[u8]) -> Option<Parsed> {
    Some(Parsed::Seen(Seen::Exec {
        pid: pid_at(record, 8)?,
        time: time(record)?,
    }))
}

/// PERF_RECORD_FORK: `u32 pid, ppid, tid, ptid; u64 time`; a thread's
/// has its process's pid as ppid.
fn fork(record: &[u8]) -> Option<Parsed> {
    let (pid, parent) = (pid_at(record, 8)?, pid_at(record, 12)?);
    if pid == parent {
        return Some(Parsed::Ignored);
    }
    Some(Parsed::Fork {
        pid,
        parent,
        time: u64_at(record, 24)?,
    })
}

/// The time of the record's sample_id trailer.
fn time(record: &[u8]) -> Option<u64> {
    u64_at(record, record.len().checked_sub(8)?)
}

/// A NUL-terminated name in its padded field; lossy where it is not UTF-8.
fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn pid_at(record: &[u8], at: usize) -> Option<Pid> {
    Pid::try_from(u32_at(record, at)?).ok()
}

fn u16_at(record: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(record.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(record: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(record.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(record: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(record.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the kernel writes it: header, body, sample_id.
    fn record(kind: u32, misc: u16, body: &[u8], pid: u32, time: u64) -> Vec<u8> {
        let size = 8 + body.len() + SAMPLE_ID_SIZE;
        let mut out = kind.to_ne_bytes().to_vec();
        out.extend(misc.to_ne_bytes());
        out.extend((size as u16).to_ne_bytes());
        out.extend(body);
        out.extend(pid.to_ne_bytes());
        out.extend(pid.to_ne_bytes());
        out.extend(time.to_ne_bytes());
        out
    }

    fn mmap2_body(union: [u8; 24], prot: u32, name: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        for word in [42u32, 43] {
            body.extend(word.to_ne_bytes());
        }
        for word in [0x7f00_0000_0000u64, 0x2000, 0x1000] {
            body.extend(word.to_ne_bytes());
        }
        body.extend(union);
        body.extend(prot.to_ne_bytes());
        body.extend(2u32.to_ne_bytes());
        body.extend(name);
        body.resize(body.len().next_multiple_of(8), 0);
        body
    }

    #[test]
    fn an_mmap2_with_device_and_inode() {
        let mut union = [0u8; 24];
        union[0..4].copy_from_slice(&259u32.to_ne_bytes());
        union[4..8].copy_from_slice(&3u32.to_ne_bytes());
        union[8..16].copy_from_slice(&1234u64.to_ne_bytes());
        let body = mmap2_body(
            union,
            (libc::PROT_READ | libc::PROT_EXEC) as u32,
            b"/usr/bin/true\0",
        );
        let Parsed::Seen(Seen::Mapped(m)) = parse(&record(10, 2, &body, 42, 99)) else {
            panic!("a mapping");
        };
        assert_eq!((m.pid, m.time), (42, 99));
        assert_eq!(
            (m.start, m.end, m.file_offset),
            (0x7f00_0000_0000, 0x7f00_0000_2000, 0x1000)
        );
        assert_eq!(m.path, "/usr/bin/true");
        assert_eq!(
            (m.dev, m.ino, m.build_id),
            (Some((259, 3)), Some(1234), None)
        );
    }

    #[test]
    fn a_mapping_of_no_file_has_no_device_or_inode() {
        let body = mmap2_body([0; 24], libc::PROT_EXEC as u32, b"[vdso]\0");
        let Parsed::Seen(Seen::Mapped(m)) = parse(&record(10, 0, &body, 7, 1)) else {
            panic!("a mapping");
        };
        assert_eq!((m.dev, m.ino, m.build_id), (None, None, None));
    }

    #[test]
    fn a_build_id_flag_left_by_another_event_is_not_believed() {
        let mut union = [0u8; 24];
        union[0..4].copy_from_slice(&259u32.to_ne_bytes());
        union[4..8].copy_from_slice(&3u32.to_ne_bytes());
        union[8..16].copy_from_slice(&1234u64.to_ne_bytes());
        let body = mmap2_body(union, libc::PROT_EXEC as u32, b"/usr/bin/true\0");
        let Parsed::Seen(Seen::Mapped(m)) = parse(&record(10, 1 << 14, &body, 7, 1)) else {
            panic!("a mapping");
        };
        assert_eq!(
            (m.dev, m.ino, m.build_id),
            (Some((259, 3)), Some(1234), None)
        );
    }

    #[test]
    fn data_mappings_renames_and_others_are_ignored() {
        let body = mmap2_body([0; 24], libc::PROT_READ as u32, b"/etc/ld.so.cache\0");
        assert_eq!(parse(&record(10, 0, &body, 1, 1)), Parsed::Ignored);
        let comm = [1u32.to_ne_bytes(), 2u32.to_ne_bytes(), *b"wor\0", [0; 4]].concat();
        assert_eq!(parse(&record(3, 0, &comm, 1, 1)), Parsed::Ignored);
        assert_eq!(parse(&record(4, 0, &[0; 8], 1, 1)), Parsed::Ignored);
        assert_eq!(
            parse(&record(3, 1 << 13, &comm, 1, 5)),
            Parsed::Seen(Seen::Exec { pid: 1, time: 5 })
        );
    }

    #[test]
    fn a_process_forked_is_told_and_a_thread_is_not() {
        let body = |pid: u32, ppid: u32| {
            [pid, ppid, pid + 1, ppid + 1]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .chain(77u64.to_ne_bytes())
                .collect::<Vec<u8>>()
        };
        assert_eq!(
            parse(&record(7, 0, &body(12, 10), 12, 77)),
            Parsed::Fork {
                pid: 12,
                parent: 10,
                time: 77
            }
        );
        assert_eq!(parse(&record(7, 0, &body(10, 10), 10, 77)), Parsed::Ignored);
        assert_eq!(
            parse(&record(7, 0, &body(12, 10)[..12], 12, 77)[..20]),
            Parsed::Malformed
        );
    }

    #[test]
    fn lost_records_are_counted() {
        let body = [9u64.to_ne_bytes(), 17u64.to_ne_bytes()].concat();
        assert_eq!(parse(&record(2, 0, &body, 0, 0)), Parsed::Lost(17));
    }

    #[test]
    fn short_records_are_malformed_not_trusted() {
        let body = mmap2_body([0; 24], libc::PROT_EXEC as u32, b"/x\0");
        let whole = record(10, 0, &body, 1, 1);
        for len in [0, 7, 8, 40, 70, 80] {
            assert_eq!(parse(&whole[..len]), Parsed::Malformed, "{len} bytes");
        }
        let mut wrapped = whole.clone();
        wrapped[24..32].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(parse(&wrapped), Parsed::Malformed, "start + len overflows");
    }
}
