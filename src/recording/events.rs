//! The events of a recording kept on disk instead of in memory: each as
//! the JSON line a recording holds, in a temporary file, read back in any
//! order through a small cache.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;

use crate::event::Record;

/// The events of a recording in causal order, each with the process it
/// belongs to (its index in the [`Processes`](crate::processes::Processes)
/// table).
#[derive(Debug)]
pub struct Events {
    file: File,
    /// Where each event's line starts in `file`, and where the last ends.
    offsets: Vec<u64>,
    processes: Vec<u32>,
}

/// Writes the lines of [`Events`] as the events come.
pub(crate) struct EventsWriter {
    out: BufWriter<File>,
    offsets: Vec<u64>,
    processes: Vec<u32>,
    line: Vec<u8>,
}

impl EventsWriter {
    /// Writes into a new temporary file, which is gone when [`Events`] is.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(EventsWriter {
            out: BufWriter::with_capacity(1 << 16, tempfile::tempfile()?),
            offsets: vec![0],
            processes: Vec::new(),
            line: Vec::with_capacity(512),
        })
    }

    /// Appends the next event, of the process at index `process`.
    pub(crate) fn push(&mut self, event: &Record, process: usize) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        let end = self.offsets.last().copied().unwrap_or(0) + self.line.len() as u64;
        self.offsets.push(end);
        let process = u32::try_from(process).map_err(io::Error::other)?;
        self.processes.push(process);
        Ok(())
    }

    pub(crate) fn finish(self) -> io::Result<Events> {
        Ok(Events {
            file: self.out.into_inner().map_err(|e| e.into_error())?,
            offsets: self.offsets,
            processes: self.processes,
        })
    }
}

impl Events {
    /// How many events there are.
    pub fn len(&self) -> usize {
        self.processes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }

    /// The process of each event, by its index in the process table.
    pub fn processes(&self) -> &[u32] {
        &self.processes
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
        let (mut at, end) = (self.events.offsets[index], self.events.offsets[index + 1]);
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
            let file_end = self.events.offsets.last().copied().unwrap_or(0);
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
        assert!(events.offsets[count as usize] > 2 * BLOCK * CACHED_BLOCKS as u64);
        let mut lines = events.lines();
        for i in (0..count).rev().step_by(97).chain(0..count) {
            assert_eq!(lines.record(i as usize).unwrap(), event(i));
        }
        assert_eq!(events.processes()[5], 2);
    }
}
