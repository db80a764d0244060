use std::fmt;
use std::io::{self, BufRead, Seek};

use super::events::{Events, EventsWriter};
use super::legacy::Legacy;
use crate::event::{Exec, Header, Record, Trailer};
use crate::processes::{Builder, Processes, TooLarge};
use crate::stacks::Profile;

/// Why a recording could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The input could not be read at all.
    #[error("{name}: {source}")]
    Io {
        /// The input's display name.
        name: String,
        /// What went wrong.
        source: io::Error,
    },
    /// A line is not a record.
    #[error("{name}:{line}: invalid record: {source}")]
    Invalid {
        /// The input's display name.
        name: String,
        /// 1-based line number.
        line: u64,
        /// Why the line did not parse.
        source: serde_json::Error,
    },
    /// The input holds no record at all: an empty file is no recording.
    #[error("{name}: no records: not a recording (empty, or nothing but blank lines)")]
    Empty {
        /// The input's display name.
        name: String,
    },
    /// The temporary file that holds the events could not be written.
    #[error("keeping the events in a temporary file: {0}")]
    Spool(io::Error),
    /// The recording is too large to render.
    #[error("{name}: too large: {source}")]
    TooLarge {
        /// The input's display name.
        name: String,
        /// What there is too much of.
        source: TooLarge,
    },
}

/// Something odd about a recording that does not stop it from rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadWarning {
    /// The last line was cut off mid-way and was skipped.
    CutOff {
        /// The input's display name.
        name: String,
        /// 1-based line number of the cut-off line.
        line: u64,
    },
    /// A recording with a header ended without a trailer.
    NoTrailer {
        /// The input's display name.
        name: String,
    },
}

impl fmt::Display for ReadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadWarning::CutOff { name, line } => write!(
                f,
                "{name}:{line}: last line is cut off (interrupted recording?), skipped it"
            ),
            ReadWarning::NoTrailer { name } => write!(
                f,
                "{name}: no trailer: the recording is cut short (proctrace was killed, or \
                 the file truncated); what came after the cut is missing"
            ),
        }
    }
}

/// Reads a recording line by line, yielding [`Record`]s.
///
/// Lines written by the original bpftrace-based proctrace are mapped into
/// the same model here, so nothing downstream knows about them: `ExecArgs`
/// and `ExecFilename` lines are folded into the `Exec` they follow, and
/// without a header the first event's time becomes time 0.
pub struct Reader<R> {
    input: R,
    name: String,
    line_no: u64,
    line: String,
    /// An exec waits here for the legacy lines that complete it.
    pending: Option<Exec>,
    /// Ready records, at most two (a flushed exec and the current line).
    ready: Vec<Record>,
    saw_header: bool,
    saw_trailer: bool,
    /// Subtracted from legacy timestamps; set by the first event.
    time_base: Option<u64>,
    warnings: Vec<ReadWarning>,
    done: bool,
}

impl<R> Reader<R> {
    /// The input's display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Warnings collected so far; complete once the reader is exhausted.
    pub fn warnings(&self) -> &[ReadWarning] {
        &self.warnings
    }

    /// Reads from `input`; `name` names it in errors and warnings.
    pub fn new(input: R, name: impl Into<String>) -> Self {
        Reader {
            input,
            name: name.into(),
            line_no: 0,
            line: String::new(),
            pending: None,
            ready: Vec::with_capacity(2),
            saw_header: false,
            saw_trailer: false,
            time_base: None,
            warnings: Vec::new(),
            done: false,
        }
    }
}

impl<R: BufRead> Reader<R> {
    /// Reads the next line into `self.line`; `false` at the end.
    fn next_line(&mut self) -> Result<bool, ReadError> {
        self.line.clear();
        let n = self
            .input
            .read_line(&mut self.line)
            .map_err(|source| ReadError::Io {
                name: self.name.clone(),
                source,
            })?;
        self.line_no += 1;
        Ok(n > 0)
    }

    /// Parses the current line and queues what it yields.
    fn take_line(&mut self) -> Result<(), ReadError> {
        let text = self.line.trim();
        if text.is_empty() {
            return Ok(());
        }
        let parsed = match serde_json::from_str::<Record>(text) {
            Ok(record) => Line::Record(record),
            Err(err) => match serde_json::from_str::<Legacy>(text) {
                Ok(legacy) => Line::Legacy(legacy),
                Err(_) if err.is_eof() && !self.line.ends_with('\n') => {
                    // Only the very last line can lack its newline: the
                    // recorder was stopped while writing it.
                    self.warnings.push(ReadWarning::CutOff {
                        name: self.name.clone(),
                        line: self.line_no,
                    });
                    return Ok(());
                }
                Err(_) => {
                    return Err(ReadError::Invalid {
                        name: self.name.clone(),
                        line: self.line_no,
                        source: err,
                    })
                }
            },
        };
        self.accept(parsed);
        Ok(())
    }

    fn accept(&mut self, line: Line) {
        match line {
            Line::Record(Record::Exec(exec)) => self.hold(exec),
            Line::Record(record) => {
                self.flush();
                self.saw_header |= matches!(record, Record::Header(_));
                self.saw_trailer |= matches!(record, Record::Trailer(_));
                self.ready.push(record);
            }
            Line::Legacy(legacy) => {
                if let Some(done) = legacy.fold_into(&mut self.pending) {
                    self.ready.push(Record::Exec(done));
                }
            }
        }
    }

    fn hold(&mut self, exec: Exec) {
        self.flush();
        self.pending = Some(exec);
    }

    fn flush(&mut self) {
        if let Some(exec) = self.pending.take() {
            self.ready.push(Record::Exec(exec));
        }
    }

    /// Makes legacy timestamps relative to the first event.
    fn rebase(&mut self, mut record: Record) -> Record {
        if self.saw_header {
            return record;
        }
        if let Some(ts) = record.timestamp() {
            let base = *self.time_base.get_or_insert(ts);
            record.set_timestamp(ts.saturating_sub(base));
        }
        record
    }

    fn finish(&mut self) {
        self.flush();
        self.done = true;
        if self.saw_header && !self.saw_trailer {
            self.warnings.push(ReadWarning::NoTrailer {
                name: self.name.clone(),
            });
        }
    }
}

impl<R: BufRead + Seek> Reader<R> {
    /// Starts reading again from the beginning, as if new.
    pub fn rewind(&mut self) -> Result<(), ReadError> {
        self.input.rewind().map_err(|source| ReadError::Io {
            name: self.name.clone(),
            source,
        })?;
        // What it found is found again, warnings included.
        self.line_no = 0;
        self.pending = None;
        self.ready.clear();
        self.saw_header = false;
        self.saw_trailer = false;
        self.time_base = None;
        self.warnings.clear();
        self.done = false;
        Ok(())
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if !self.ready.is_empty() {
                let record = self.ready.remove(0);
                return Some(Ok(self.rebase(record)));
            }
            if self.done {
                return None;
            }
            let step = match self.next_line() {
                Ok(true) => self.take_line(),
                Ok(false) => {
                    self.finish();
                    Ok(())
                }
                Err(err) => Err(err),
            };
            if let Err(err) = step {
                self.done = true;
                return Some(Err(err));
            }
        }
    }
}

/// A whole recording: its header and trailer, the process table derived
/// from its events and, if asked for, the events themselves.
#[derive(Debug)]
pub struct Recording {
    /// The header; `None` for recordings of the original proctrace.
    pub header: Option<Header>,
    /// The trailer; `None` for interrupted or original-proctrace recordings.
    pub trailer: Option<Trailer>,
    /// The processes of the recording.
    pub processes: Processes,
    /// Its CPU profile (`record --cpu-profile`), empty without one.
    pub profile: Profile,
    events: Option<Events>,
}

/// What [`Recording::read`] keeps besides header, trailer and processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing else.
    Processes,
    /// The events, in causal order (on disk, in a temporary file).
    Events,
}

impl Recording {
    /// Reads everything `reader` yields, in one pass when the events come
    /// in causal order, as recordings of this proctrace do.
    pub fn read<R: BufRead + Seek>(reader: &mut Reader<R>, keep: Keep) -> Result<Self, ReadError> {
        if let Some(recording) = Self::read_ordered(reader, keep)? {
            return Ok(recording);
        }
        reader.rewind()?;
        Self::read_unordered(reader, keep)
    }

    /// Whether the file ends without its trailer: proctrace was killed,
    /// or the file truncated ([`Processes::is_cut`]). The profile and the
    /// probes' hits, written last, are missing with it.
    pub fn is_cut(&self) -> bool {
        self.processes.is_cut()
    }

    /// Whether its waits were followed (`record --off-cpu`): its profile
    /// has the times of its threads on and off the CPU.
    pub fn off_cpu(&self) -> bool {
        self.header.as_ref().is_some_and(|h| h.off_cpu.is_some())
    }

    /// The events in causal order, if they were kept.
    pub fn events(&self) -> Option<&Events> {
        self.events.as_ref()
    }

    /// Reads a recording whose events come in causal order; `None` as soon
    /// as one does not.
    ///
    /// Recordings of the original proctrace (no header) may lack `seq`:
    /// they are numbered in the order they come.
    fn read_ordered<R: BufRead>(
        reader: &mut Reader<R>,
        keep: Keep,
    ) -> Result<Option<Self>, ReadError> {
        let mut build = Build::new(reader.name(), keep)?;
        let mut last_key = None;
        for record in &mut *reader {
            let Some(record) = build.profile.take(record?) else {
                continue;
            };
            match record {
                // A header after events changes how they are ordered.
                Record::Header(_) if build.count > 0 => return Ok(None),
                Record::Header(h) => build.header = Some(h),
                Record::Trailer(t) => build.trailer = Some(t),
                mut event => {
                    let key = match build.header {
                        Some(_) => event.seq(),
                        None => event.timestamp(),
                    };
                    if key < last_key {
                        return Ok(None);
                    }
                    last_key = key;
                    if build.header.is_none() {
                        event.set_seq(build.count);
                    }
                    build.add(event)?;
                }
            }
        }
        build.finish().map(Some)
    }

    /// Reads a recording whose events are not in causal order: all of them
    /// into memory, to sort them.
    fn read_unordered<R: BufRead>(reader: &mut Reader<R>, keep: Keep) -> Result<Self, ReadError> {
        let mut build = Build::new(reader.name(), keep)?;
        let mut events = Vec::new();
        for record in reader {
            let Some(record) = build.profile.take(record?) else {
                continue;
            };
            match record {
                Record::Header(h) => build.header = Some(h),
                Record::Trailer(t) => build.trailer = Some(t),
                event => events.push(event),
            }
        }
        order(build.header.is_some(), &mut events);
        for event in events {
            build.add(event)?;
        }
        build.finish()
    }
}

/// Sorts events into causal order: by `seq`, which is exactly that.
///
/// Recordings of the original proctrace (no header) may lack `seq` and
/// write a fork after its child's first events, but its fork timestamps
/// are taken early for exactly that reason: they are sorted by time
/// and numbered in that order.
fn order(has_header: bool, events: &mut [Record]) {
    if has_header {
        events.sort_by_key(Record::seq);
        return;
    }
    events.sort_by_key(Record::timestamp);
    for (seq, event) in (0..).zip(events.iter_mut()) {
        event.set_seq(seq);
    }
}

/// A [`Recording`] being read.
struct Build {
    /// The input's display name.
    name: String,
    header: Option<Header>,
    trailer: Option<Trailer>,
    processes: Builder,
    profile: Profile,
    events: Option<EventsWriter>,
    /// Events so far.
    count: u64,
}

impl Build {
    fn new(name: &str, keep: Keep) -> Result<Self, ReadError> {
        let events = match keep {
            Keep::Processes => None,
            Keep::Events => Some(EventsWriter::new().map_err(ReadError::Spool)?),
        };
        Ok(Build {
            name: name.to_string(),
            header: None,
            trailer: None,
            processes: Builder::default(),
            profile: Profile::default(),
            events,
            count: 0,
        })
    }

    /// Adds the next event in causal order.
    fn add(&mut self, event: Record) -> Result<(), ReadError> {
        self.count += 1;
        let process = self
            .processes
            .add(&event)
            .map_err(|source| ReadError::TooLarge {
                name: self.name.clone(),
                source,
            })?;
        if let (Some(events), Some(process)) = (&mut self.events, process) {
            events.push(&event, process).map_err(ReadError::Spool)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<Recording, ReadError> {
        if self.count == 0 && self.header.is_none() && self.trailer.is_none() {
            return Err(ReadError::Empty { name: self.name });
        }
        let events = self.events.map(EventsWriter::finish).transpose();
        let cut = self.header.is_some() && self.trailer.is_none();
        Ok(Recording {
            processes: self
                .processes
                .finish(self.trailer.as_ref().map(|t| t.end_timestamp), cut),
            header: self.header,
            trailer: self.trailer,
            profile: self.profile,
            events: events.map_err(ReadError::Spool)?,
        })
    }
}

enum Line {
    Record(Record),
    Legacy(Legacy),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Result<Vec<Record>, ReadError>, Vec<ReadWarning>) {
        let mut reader = Reader::new(io::Cursor::new(text), "rec");
        let recording = Recording::read(&mut reader, Keep::Events).map(|recording| {
            let events = recording.events().unwrap();
            let mut lines = events.lines();
            (0..events.len())
                .map(|i| lines.record(i).unwrap())
                .collect()
        });
        (recording, reader.warnings().to_vec())
    }

    #[test]
    fn legacy_exec_args_fold_into_the_exec_keeping_the_longest() {
        let text = r#"{"Exec":{"timestamp":100,"pid":5,"ppid":1,"pgid":5,"cmdline":null}}
{"ExecArgs":{"timestamp":100,"pid":5,"args":"/usr/bin/env bash ./x.sh"}}
{"ExecArgs":{"timestamp":100,"pid":5,"args":"./x.sh"}}
{"ExecFilename":{"timestamp":100,"pid":5,"filename":"/usr/bin/env"}}
{"Exec":{"timestamp":150,"pid":5,"ppid":1,"pgid":5,"cmdline":["bash","./x.sh"]}}
{"BadExec":{"timestamp":160,"pid":5}}
"#;
        let (events, warnings) = read(text);
        let events = events.unwrap();
        assert!(warnings.is_empty());
        let Record::Exec(first) = &events[0] else {
            panic!()
        };
        assert_eq!((first.timestamp, first.seq), (0, 0));
        assert_eq!(first.cmdline, "/usr/bin/env bash ./x.sh");
        assert_eq!(first.filename, "/usr/bin/env");
        assert!(
            first.argv.is_empty(),
            "a joined line is not split into words"
        );
        let Record::Exec(second) = &events[1] else {
            panic!()
        };
        assert_eq!((second.timestamp, second.seq), (50, 1));
        assert_eq!(second.argv, ["bash", "./x.sh"]);
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn events_out_of_order_are_put_in_order() {
        let header = r#"{"Header":{"format_version":1,"proctrace_version":"0","start_time":"","root_pid":5,"command":[],"kernel":"","raw":false}}"#;
        let exec = r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5}}"#;
        let exit = r#"{"Exit":{"seq":1,"timestamp":2,"pid":5,"ppid":1,"pgid":5}}"#;
        let (in_order, _) = read(&format!("{header}\n{exec}\n{exit}\n"));
        let (out_of_order, warnings) = read(&format!("{header}\n{exit}\n{exec}\n"));
        let kinds: Vec<_> = out_of_order.unwrap().iter().map(Record::kind).collect();
        assert_eq!(kinds, ["Exec", "Exit"]);
        assert_eq!(in_order.unwrap().len(), 2);
        assert_eq!(warnings.len(), 1, "the missing trailer, once: {warnings:?}");
    }

    #[test]
    fn only_an_unterminated_unfinished_last_line_is_a_cut() {
        let exec = r#"{"Exec":{"seq":0,"timestamp":1,"pid":5,"ppid":1,"pgid":5}}"#;
        let (recording, warnings) = read(&format!("{exec}\n{{\"Exit\":{{\"seq\":1,\"ti"));
        assert_eq!(recording.unwrap().len(), 1);
        assert_eq!(
            warnings,
            [ReadWarning::CutOff {
                name: "rec".into(),
                line: 2
            }]
        );

        let (recording, _) = read(&format!("{{\"Exit\":{{\"seq\":1,\"ti\n{exec}\n"));
        assert!(matches!(recording, Err(ReadError::Invalid { line: 1, .. })));
    }
}
