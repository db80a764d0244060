use std::io::{self, BufWriter, Write};

use crate::event::Record;

/// Writes records as newline-delimited JSON.
///
/// Each record is serialized whole before it reaches the buffer, and the
/// buffer only ever flushes at record boundaries, so whatever stops the
/// writer, the file holds whole lines.
pub struct Writer<W: Write> {
    out: BufWriter<W>,
    line: Vec<u8>,
    written: u64,
}

impl<W: Write> Writer<W> {
    /// Wraps `out`, buffering it.
    pub fn new(out: W) -> Self {
        Writer {
            out: BufWriter::with_capacity(1 << 16, out),
            line: Vec::with_capacity(512),
            written: 0,
        }
    }

    /// Appends one record as one line.
    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        self.line.clear();
        crate::text::write_json(&mut self.line, record)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)?;
        self.written += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Pushes buffered lines to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}
