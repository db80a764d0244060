use std::io::{self, Write};

use crate::event::Record;

/// Lines are gathered up to this many bytes before they are written.
const BATCH_BYTES: usize = 1 << 16;

/// Writes records as newline-delimited JSON.
///
/// Each record is serialized whole before it joins the batch, and a batch
/// only ever holds whole lines. An output that fails part way through a
/// batch (a full disk takes what fits) may hold the start of a line; the
/// writer counts what the output took whole, so that the caller can cut it
/// back to [`Writer::delivered_bytes`] and say what was lost.
pub struct Writer<W: Write> {
    out: W,
    batch: Vec<u8>,
    /// Records handed to [`Writer::write`].
    written: u64,
    /// Records in `batch`.
    batched: u64,
    /// Records the output has taken whole.
    delivered: u64,
    /// Bytes of those records.
    delivered_bytes: u64,
}

impl<W: Write> Writer<W> {
    /// Wraps `out`, writing to it in batches.
    pub fn new(out: W) -> Self {
        Writer {
            out,
            batch: Vec::with_capacity(BATCH_BYTES + 4096),
            written: 0,
            batched: 0,
            delivered: 0,
            delivered_bytes: 0,
        }
    }

    /// Appends one record as one line.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        let start = self.batch.len();
        if let Err(err) = crate::text::write_json(&mut self.batch, record) {
            self.batch.truncate(start);
            return Err(err.into());
        }
        self.batch.push(b'\n');
        self.written += 1;
        self.batched += 1;
        if self.batch.len() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Records handed to [`Writer::write`] so far, delivered or not.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Records the output has taken whole so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes of the whole records the output has taken: where a cut-off
    /// output must be truncated to end with a whole line.
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    /// Writes the batch out. On failure the batch is dropped: its records
    /// not taken whole are lost, and any part of a line already written
    /// lies beyond [`Writer::delivered_bytes`].
    pub fn flush(&mut self) -> io::Result<()> {
        let mut done = 0;
        let result = loop {
            if done == self.batch.len() {
                break self.out.flush();
            }
            match self.out.write(&self.batch[done..]) {
                Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => break Err(err),
            }
        };
        let (lines, bytes) = if done == self.batch.len() {
            (self.batched, done)
        } else {
            whole_lines(&self.batch[..done])
        };
        self.delivered += lines;
        self.delivered_bytes += bytes as u64;
        self.batch.clear();
        self.batched = 0;
        result
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.flush()?;
        Ok(self.out)
    }
}

/// The number of whole lines at the start of `bytes`, and their length.
fn whole_lines(bytes: &[u8]) -> (u64, usize) {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines = bytes[..end].iter().filter(|&&b| b == b'\n').count();
    (lines as u64, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SetSid;

    /// An output that takes `room` bytes, then fails as a full disk does.
    struct Full {
        taken: Vec<u8>,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.taken.len());
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn setsid(pid: i32) -> Record {
        Record::SetSid(SetSid {
            seq: 0,
            timestamp: 0,
            pid,
            sid: pid,
        })
    }

    #[test]
    fn a_full_output_is_counted_to_the_last_whole_line() {
        let line = serde_json::to_vec(&setsid(1)).unwrap().len() + 1;
        let mut writer = Writer::new(Full {
            taken: Vec::new(),
            room: 2 * line + line / 2,
        });
        for pid in 1..=4 {
            writer.write(&setsid(pid)).unwrap();
        }
        let err = writer.flush().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!((writer.written(), writer.delivered()), (4, 2));
        assert_eq!(writer.delivered_bytes(), 2 * line as u64);
        let taken = &writer.out.taken;
        assert_eq!(taken.len(), 2 * line + line / 2);
        assert_eq!(taken[2 * line - 1], b'\n');
    }
}
