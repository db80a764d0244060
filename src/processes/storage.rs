//! How the table stores processes: packed rows, one text buffer, and the
//! items of all processes grouped by process.

use super::{Argv, Ended, ExecView, Processes, TooLarge};
use crate::event::{Exit, Pid, UsedBefore};

/// What the table keeps of each process besides its lists, packed (a
/// table holds hundreds of thousands): an optional field is there when
/// its bit in `set` is.
#[derive(Debug, Clone, Default)]
pub(super) struct Row {
    pub(super) start: u64,
    pub(super) fork: u64,
    pub(super) exit: u64,
    pub(super) pid: Pid,
    pub(super) parent_pid: Pid,
    pub(super) parent: u32,
    pub(super) pgid: Pid,
    pub(super) sid: Pid,
    pub(super) exit_code: i32,
    pub(super) signal: i32,
    pub(super) set: u16,
}

impl Row {
    pub(super) const PARENT_PID: u16 = 1;
    pub(super) const PARENT: u16 = 1 << 1;
    pub(super) const FORK: u16 = 1 << 2;
    pub(super) const EXIT: u16 = 1 << 3;
    pub(super) const PGID: u16 = 1 << 4;
    pub(super) const SID: u16 = 1 << 5;
    pub(super) const EXIT_CODE: u16 = 1 << 6;
    pub(super) const SIGNAL: u16 = 1 << 7;
    pub(super) const CORE_DUMPED: u16 = 1 << 8;

    pub(super) fn get<T>(&self, bit: u16, value: T) -> Option<T> {
        (self.set & bit != 0).then_some(value)
    }

    /// Sets `field` to `value` if there is one, marking it there.
    pub(super) fn put<T>(set: &mut u16, bit: u16, field: &mut T, value: Option<T>) {
        if let Some(value) = value {
            *field = value;
            *set |= bit;
        }
    }

    pub(super) fn parent(&self) -> Option<usize> {
        self.get(Row::PARENT, self.parent as usize)
    }

    pub(super) fn exit(&self) -> Option<Ended> {
        self.get(Row::EXIT, ()).map(|()| Ended {
            timestamp: self.exit,
            exit_code: self.get(Row::EXIT_CODE, self.exit_code),
            signal: self.get(Row::SIGNAL, self.signal),
            core_dumped: self.set & Row::CORE_DUMPED != 0,
        })
    }

    pub(super) fn set_exit(&mut self, exit: &Exit) {
        let set = &mut self.set;
        Row::put(set, Row::EXIT, &mut self.exit, Some(exit.timestamp));
        Row::put(set, Row::EXIT_CODE, &mut self.exit_code, exit.exit_code);
        Row::put(set, Row::SIGNAL, &mut self.signal, exit.signal);
        if exit.core_dumped {
            *set |= Row::CORE_DUMPED;
        }
    }
}

/// What the table keeps of an exec; its strings are in [`Text`]: the
/// filename, the arguments, the command line if it is not
/// `shell_join(argv)`, then the environment's names and values.
#[derive(Debug, Clone)]
pub(super) struct ExecRow {
    pub(super) timestamp: u64,
    pub(super) strings: Run,
    pub(super) argc: u32,
    /// Where its descriptors start in [`Processes::fds`], and how many.
    pub(super) fds: u32,
    pub(super) fd_count: u32,
    pub(super) pgid: Pid,
    pub(super) sid: Pid,
    /// [`ExecRow::SID`]...
    pub(super) set: u16,
    /// Environment variables kept.
    pub(super) env_count: u16,
    pub(super) used_before: Option<UsedBefore>,
}

impl ExecRow {
    pub(super) const SID: u16 = 1;
    pub(super) const ARGV_TRUNCATED: u16 = 1 << 1;
    pub(super) const CMDLINE: u16 = 1 << 2;
    pub(super) const ATTACHED: u16 = 1 << 3;

    pub(super) fn view<'a>(&'a self, table: &'a Processes) -> ExecView<'a> {
        let mut strings = table.text.strings(self.strings);
        let filename = strings.next().unwrap_or_default();
        let argc = self.argc as usize;
        let fds = self.fds as usize;
        let has_cmdline = self.set & ExecRow::CMDLINE != 0;
        let mut env = strings;
        for _ in 0..argc + usize::from(has_cmdline) {
            env.next();
        }
        ExecView {
            timestamp: self.timestamp,
            pgid: self.pgid,
            sid: (self.set & ExecRow::SID != 0).then_some(self.sid),
            filename,
            argv: Argv { strings, len: argc },
            argv_truncated: self.set & ExecRow::ARGV_TRUNCATED != 0,
            attached: self.set & ExecRow::ATTACHED != 0,
            fds: &table.fds[fds..fds + self.fd_count as usize],
            cmdline: if has_cmdline { strings.nth(argc) } else { None },
            env: Argv {
                strings: env,
                len: 2 * usize::from(self.env_count),
            },
            used_before: self.used_before,
        }
    }
}

/// Strings, one after the other in one buffer, their lengths apart and
/// LEB128-coded (one byte each, for most): read in order from where a
/// run of them starts.
#[derive(Debug, Clone, Default)]
pub(super) struct Text {
    pub(super) buffer: String,
    pub(super) lengths: Vec<u8>,
}

/// Where a run of strings starts in [`Text`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub(super) buffer: usize,
    pub(super) lengths: usize,
}

impl Text {
    /// Where the strings pushed next start.
    pub(super) fn run(&self) -> Run {
        Run {
            buffer: self.buffer.len(),
            lengths: self.lengths.len(),
        }
    }

    pub(super) fn push(&mut self, text: &str) {
        self.buffer.push_str(text);
        let mut len = text.len();
        while len >= 0x80 {
            self.lengths.push((len & 0x7f) as u8 | 0x80);
            len >>= 7;
        }
        self.lengths.push(len as u8);
    }

    pub(super) fn strings(&self, run: Run) -> Strings<'_> {
        Strings {
            buffer: &self.buffer[run.buffer..],
            lengths: &self.lengths[run.lengths..],
        }
    }
}

/// The strings of a [`Text`] from a [`Run`] on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Strings<'a> {
    pub(super) buffer: &'a str,
    pub(super) lengths: &'a [u8],
}

impl<'a> Iterator for Strings<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let mut len = 0;
        let mut shift = 0;
        loop {
            let (&byte, rest) = self.lengths.split_first()?;
            self.lengths = rest;
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                break;
            }
        }
        let (string, rest) = self.buffer.split_at(len);
        self.buffer = rest;
        Some(string)
    }
}

/// Items of all processes, those of each process together and in order.
#[derive(Debug, Clone)]
pub(super) struct Grouped<T> {
    pub(super) items: Vec<T>,
    /// Where the items of each process start in `items`, and the end.
    pub(super) starts: Vec<u32>,
}

impl<T> Grouped<T> {
    /// Groups `items`, each given with its process and in order; there
    /// are fewer than 2^32 (the builder checks).
    ///
    /// In place, with four bytes per item aside: a sort would take half
    /// the list again.
    pub(super) fn new(mut items: Vec<(u32, T)>, processes: usize) -> Self {
        let starts = group_starts(items.iter().map(|(process, _)| *process), processes);
        // Each item's place: after those of the processes before its own
        // and those of its own that came before it.
        let mut next = starts.clone();
        let mut places: Vec<u32> = items
            .iter()
            .map(|(process, _)| {
                let place = next[*process as usize];
                next[*process as usize] += 1;
                place
            })
            .collect();
        drop(next);
        for i in 0..items.len() {
            // Swaps the item here to its place until the one that belongs
            // here arrives.
            while places[i] as usize != i {
                let place = places[i] as usize;
                items.swap(i, place);
                places.swap(i, place);
            }
        }
        drop(places);
        // Collected in place: the list is not copied.
        let items = items.into_iter().map(|(_, item)| item).collect();
        Grouped { items, starts }
    }

    pub(super) fn of(&self, process: usize) -> &[T] {
        &self.items[self.starts[process] as usize..self.starts[process + 1] as usize]
    }
}

/// Where the items of each group start, and where the last group ends,
/// when items in the groups `keys` says are put together, group by group:
/// the first half of a counting sort.
pub(super) fn group_starts(keys: impl Iterator<Item = u32>, groups: usize) -> Vec<u32> {
    let mut starts = vec![0; groups + 1];
    for key in keys {
        starts[key as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    starts
}

/// `n` as the table stores counts and indices.
pub(super) fn small(n: usize) -> Result<u32, TooLarge> {
    u32::try_from(n).map_err(|_| TooLarge)
}
