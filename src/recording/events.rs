//! The events of a recording kept on disk instead of in memory: each as
//! the JSON line a recording holds, in a temporary file, read back in any
//! order through a small cache.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

use crate::event::Record;

/// The events of a recording in causal order, and those of each process
/// (by its index in the [`Processes`](crate::processes::Processes) table).
#[derive(Debug)]
pub struct Events {
    file: File,
    /// Where each event's line starts in `file`, and where the last ends.
    offsets: Offsets,
    /// The next event of the same process, for each event.
    next: Vec<u32>,
    /// The first event of each process.
    first: Vec<u32>,
}

/// Marks the end of a list in [`Events::next`].
const NONE: u32 = u32::MAX;

/// Writes the lines of [`Events`] as the events come.
pub(crate) struct EventsWriter {
    out: BufWriter<File>,
    offsets: Offsets,
    next: Vec<u32>,
    first: Vec<u32>,
    /// The last event so far of each process.
    last: Vec<u32>,
    line: Vec<u8>,
}

/// Ascending file offsets, four bytes each: their low halves, and where
/// the high half changes.
#[derive(Debug, Default)]
struct Offsets {
    low: Vec<u32>,
    /// From which index on each high half holds.
    high: Vec<(usize, u32)>,
}

impl Offsets {
    fn push(&mut self, offset: u64) {
        let high = (offset >> 32) as u32;
        if self.high.last().map_or(0, |&(_, h)| h) != high {
            self.high.push((self.low.len(), high));
        }
        self.low.push(offset as u32);
    }

    fn get(&self, index: usize) -> u64 {
        let changes = self.high.partition_point(|&(from, _)| from <= index);
        let high = changes.checked_sub(1).map_or(0, |at| self.high[at].1);
        u64::from(high) << 32 | u64::from(self.low[index])
    }

    fn last(&self) -> u64 {
        self.low
            .len()
            .checked_sub(1)
            .map_or(0, |last| self.get(last))
    }
}

impl EventsWriter {
    /// Writes into a new temporary file, which is gone when [`Events`] is.
    pub(crate) fn new() -> io::Result<Self> {
        let mut offsets = Offsets::default();
        offsets.push(0);
        Ok(EventsWriter {
            out: BufWriter::with_capacity(1 << 16, tempfile::tempfile()?),
            offsets,
            next: Vec::new(),
            first: Vec::new(),
            last: Vec::new(),
            line: Vec::with_capacity(512),
        })
    }

    /// Appends the next event, of the process at index `process`.
    pub(crate) fn push(&mut self, event: &Record, process: usize) -> io::Result<()> {
        self.line.clear();
        crate::text::write_json(&mut self.line, event)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.offsets
            .push(self.offsets.last() + self.line.len() as u64);
        let index = u32::try_from(self.next.len())
            .ok()
            .filter(|&i| i != NONE)
            .ok_or_else(|| io::Error::other("more than 2^32 - 1 events"))?;
        self.next.push(NONE);
        if process >= self.first.len() {
            self.first.resize(process + 1, NONE);
            self.last.resize(process + 1, NONE);
        }
        match self.last[process] {
            NONE => self.first[process] = index,
            last => self.next[last as usize] = index,
        }
        self.last[process] = index;
        Ok(())
    }

    pub(crate) fn finish(self) -> io::Result<Events> {
        Ok(Events {
            file: self.out.into_inner().map_err(|e| e.into_error())?,
            offsets: self.offsets,
            next: self.next,
            first: self.first,
        })
    }
}

impl Events {
    /// How many events there are.
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// The events of the process at `process` in the process table, in
    /// order, by their indices.
    pub fn of_process(&self, process: usize) -> impl Iterator<Item = usize> + '_ {
        let listed = |at: u32| (at != NONE).then_some(at as usize);
        let first = self.first.get(process).copied().and_then(listed);
        std::iter::successors(first, move |&at| listed(self.next[at]))
    }

    /// A reader of the events' lines.
    pub fn lines(&self) -> Lines<'_> {
        Lines {
            events: self,
            blocks: (0..CACHED_BLOCKS).map(|_| Block::default()).collect(),
        }
    }
}

/// Bytes read from the file at once.
const BLOCK: u64 = 64 * 1024;
/// Blocks kept: 4 MiB. Renderers read the events of processes that ran
/// at about the same time together, which are near each other.
const CACHED_BLOCKS: usize = 64;

/// Reads the lines of [`Events`], in any order.
#[derive(Debug)]
pub struct Lines<'a> {
    events: &'a Events,
    /// Block `n` of the file is cached in slot `n % CACHED_BLOCKS`.
    blocks: Vec<Block>,
}

#[derive(Debug, Default)]
struct Block {
    number: Option<u64>,
    data: Vec<u8>,
}

impl Lines<'_> {
    /// Writes the line of the event at `index`, its newline included.
    pub fn write(&mut self, index: usize, out: &mut dyn Write) -> io::Result<()> {
        let offsets = &self.events.offsets;
        let (mut at, end) = (offsets.get(index), offsets.get(index + 1));
        while at < end {
            let data = self.block(at / BLOCK)?;
            let from = (at % BLOCK) as usize;
            let to = data.len().min(from + (end - at) as usize);
            out.write_all(&data[from..to])?;
            at += (to - from) as u64;
        }
        Ok(())
    }

    /// The event at `index`, read back.
    pub fn record(&mut self, index: usize) -> io::Result<Record> {
        let mut line = Vec::new();
        self.write(index, &mut line)?;
        Ok(serde_json::from_slice(&line)?)
    }

    fn block(&mut self, number: u64) -> io::Result<&[u8]> {
        let slot = &mut self.blocks[(number % CACHED_BLOCKS as u64) as usize];
        if slot.number != Some(number) {
            let start = number * BLOCK;
            let file_end = self.events.offsets.last();
            slot.data.resize((file_end - start).min(BLOCK) as usize, 0);
            self.events.file.read_exact_at(&mut slot.data, start)?;
            slot.number = Some(number);
        }
        Ok(&slot.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SetSid;

    #[test]
    fn offsets_past_4_gib_keep_their_high_half() {
        let mut offsets = Offsets::default();
        let all = [
            0,
            7,
            (1 << 32) - 1,
            1 << 32,
            (1 << 32) + 5,
            5 << 32,
            (5 << 32) + 1,
        ];
        for offset in all {
            offsets.push(offset);
        }
        let back: Vec<u64> = (0..all.len()).map(|i| offsets.get(i)).collect();
        assert_eq!(back, all);
        assert_eq!(offsets.last(), (5 << 32) + 1);
    }

    #[test]
    fn lines_read_back_in_any_order_across_blocks() {
        let mut writer = EventsWriter::new().unwrap();
        let count = 200_000;
        let event = |i: u64| {
            Record::SetSid(SetSid {
                seq: i,
                timestamp: i * 7,
                pid: 1,
                sid: 1,
            })
        };
        for i in 0..count {
            writer.push(&event(i), i as usize % 3).unwrap();
        }
        let events = writer.finish().unwrap();
        assert!(events.offsets.last() > 2 * BLOCK * CACHED_BLOCKS as u64);
        let mut lines = events.lines();
        for i in (0..count).rev().step_by(97).chain(0..count) {
            assert_eq!(lines.record(i as usize).unwrap(), event(i));
        }
        let of_two: Vec<usize> = events.of_process(2).take(3).collect();
        assert_eq!(of_two, [2, 5, 8]);
        assert_eq!(events.of_process(3).count(), 0);
    }
}
