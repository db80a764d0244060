//! A recording on its way to disk: the header, the events and the trailer
//! of one run, as whole lines, whatever becomes of the output.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::Writer;
use crate::event::{Header, Record, Trailer};

/// Where a recording goes, and what became of it.
///
/// A failing output does not end the recording: the file is cut back to
/// its last whole line, nothing more is written, and the events handed
/// over after that are counted, so that [`Output::result`] can say what
/// the file holds and what was lost.
pub struct Output {
    name: String,
    writer: Writer<Box<dyn Write + Send>>,
    /// The file written, when it is a regular one: a failed write is cut
    /// back to the last whole line.
    file: Option<File>,
    /// Events handed over, written or not.
    events: u64,
    /// The first write that failed; nothing is written after it.
    failure: Option<io::Error>,
}

/// How a recording's output failed: what it holds and what was lost.
#[derive(Debug, thiserror::Error)]
#[error(
    "writing {name} failed: {source}; it holds the first {kept} events and no trailer, the \
     {lost} events after them were lost"
)]
pub struct OutputError {
    /// The output's name.
    pub name: String,
    /// The first error.
    pub source: io::Error,
    /// Events the output holds, each a whole line.
    pub kept: u64,
    /// Events handed over after those, not written.
    pub lost: u64,
}

impl Output {
    /// Creates `path`, or truncates it if it exists, and says whether it was
    /// created: only a file the recorder created is its to remove after a
    /// failed start or to give away (`-o /dev/null` or an existing file keep
    /// their owner and their existence). `owner` (uid, gid) is given a file
    /// it creates.
    pub fn create(path: &Path, owner: Option<(u32, u32)>) -> io::Result<(Self, bool)> {
        let (file, created) = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => {
                if let Some((uid, gid)) = owner {
                    // Best effort: the recording is still whole, only its owner differs.
                    let _ = std::os::unix::fs::fchown(&file, Some(uid), Some(gid));
                }
                (file, true)
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                let file = OpenOptions::new().write(true).truncate(true).open(path)?;
                (file, false)
            }
            Err(err) => return Err(err),
        };
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        let cut = if regular { file.try_clone().ok() } else { None };
        let mut output = Output::stream(Box::new(file), path.display().to_string());
        output.file = cut;
        Ok((output, created))
    }

    /// Writes to `out`, a stream that cannot be cut back (stdout, a pipe).
    pub fn stream(out: Box<dyn Write + Send>, name: impl Into<String>) -> Self {
        Output {
            name: name.into(),
            writer: Writer::new(out),
            file: None,
            events: 0,
            failure: None,
        }
    }

    /// The output's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes the header, first.
    pub fn header(&mut self, header: &Header) -> io::Result<()> {
        self.put(&Record::Header(header.clone()))
    }

    /// Writes one event, or a line of the CPU profile (not counted as an
    /// event). Returns the error the first time writing fails, so that it
    /// can be told at once while the run goes on; after that events are
    /// only counted.
    pub fn event(&mut self, record: &Record) -> io::Result<()> {
        self.events += u64::from(record.seq().is_some());
        self.put(record)
    }

    /// Writes the recorder's trailer, last, with the events this output
    /// wrote, and flushes.
    pub fn trailer(&mut self, totals: &Trailer) -> io::Result<()> {
        let trailer = Trailer {
            events: self.events,
            ..totals.clone()
        };
        let failed_before = self.failure.is_some();
        let _ = self.put(&Record::Trailer(trailer));
        let _ = self.flush();
        match &self.failure {
            Some(err) if !failed_before => Err(copy(err)),
            _ => Ok(()),
        }
    }

    /// Writes out what is batched, so that a kill loses only what the
    /// kernel still holds.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.failure.is_none() {
            if let Err(err) = self.writer.flush() {
                return Err(copy(self.fail(err)));
            }
        }
        Ok(())
    }

    /// How writing went; once a write failed, what the output holds and
    /// what it lost.
    pub fn result(&self) -> Result<(), OutputError> {
        let Some(err) = &self.failure else {
            return Ok(());
        };
        // The header comes first: every other whole line is an event.
        let kept = self.writer.delivered().saturating_sub(1);
        Err(OutputError {
            name: self.name.clone(),
            source: copy(err),
            kept,
            lost: self.events.saturating_sub(kept),
        })
    }

    fn put(&mut self, record: &Record) -> io::Result<()> {
        if self.failure.is_none() {
            if let Err(err) = self.writer.write(record) {
                return Err(copy(self.fail(err)));
            }
        }
        Ok(())
    }

    /// Ends writing at the last whole line; keeps the error for
    /// [`Output::result`].
    fn fail(&mut self, err: io::Error) -> &io::Error {
        if let Some(file) = &self.file {
            let _ = file.set_len(self.writer.delivered_bytes());
        }
        self.failure.insert(err)
    }
}

/// io::Error is not Clone: the kind and the message are what is told.
fn copy(err: &io::Error) -> io::Error {
    io::Error::new(err.kind(), err.to_string())
}
