//! A recording on its way to disk: the header, the events and the trailer
//! of one run, as whole lines, whatever becomes of the output.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// A file opened for what a run will write, not yet emptied: until the run
/// starts, what the file held stays whole, since a run that never starts
/// (a bad flag, a missing command) must not cost the file it would have
/// replaced. [`Reserved::empty`] (or [`Reserved::begin`]) empties it once
/// the run has started; dropped before, a file created for it is removed
/// and an existing one is left as it was.
#[derive(Debug)]
pub struct Reserved {
    file: File,
    claim: Claim,
}

/// A reserved file's path, removed when dropped if the file was created
/// for a run that never started.
#[derive(Debug)]
struct Claim {
    path: PathBuf,
    created: bool,
    /// Whether the run started: the file is its now, and stays.
    started: AtomicBool,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.created && !self.started.load(Ordering::Relaxed) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Reserved {
    /// Opens `path` for writing, creating it if need be, and leaves what
    /// it holds untouched. Only a file created here is the run's to remove
    /// after a failed start or to give away: `owner` (uid, gid) is given a
    /// file it creates, while `/dev/null` or an existing file keep theirs.
    pub fn open(path: &Path, owner: Option<(u32, u32)>) -> io::Result<Reserved> {
        let (file, created) = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => {
                if let Some((uid, gid)) = owner {
                    // Best effort: what is written is whole, only its owner differs.
                    let _ = std::os::unix::fs::fchown(&file, Some(uid), Some(gid));
                }
                (file, true)
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                (OpenOptions::new().write(true).open(path)?, false)
            }
            Err(err) => return Err(err),
        };
        let claim = Claim {
            path: path.to_owned(),
            created,
            started: AtomicBool::new(false),
        };
        Ok(Reserved { file, claim })
    }

    /// The file, to write to once emptied.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The run has started: the file is emptied (a regular one; a device
    /// or a pipe has nothing to empty) and kept whatever follows.
    pub fn empty(&self) -> io::Result<()> {
        self.claim.started.store(true, Ordering::Relaxed);
        if self.file.metadata()?.is_file() {
            self.file.set_len(0)?;
        }
        Ok(())
    }

    /// The recording has started: empties the file and writes to it. A
    /// file that cannot be emptied is an output that failed before its
    /// first line, told by [`Output::result`] like any other.
    pub fn begin(self) -> Output {
        let emptied = self.empty();
        let Reserved { file, claim } = self;
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        let cut = if regular { file.try_clone().ok() } else { None };
        let mut output = Output::stream(Box::new(file), claim.path.display().to_string());
        output.file = cut;
        if let Err(err) = emptied {
            output.failure = Some(err);
        }
        output
    }
}

impl Output {
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
