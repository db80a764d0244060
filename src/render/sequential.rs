//! `sequential`: the recording itself, events in causal order.

use std::io::{self, Write};

use super::Options;
use super::{events, write_json};
use crate::event::Record;
use crate::recording::Recording;

/// Writes header, events and trailer as JSON lines.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let events = events(recording)?;
    if let Some(header) = recording.header.clone() {
        write_json(out, &Record::Header(header))?;
    }
    let mut lines = events.lines();
    for index in 0..events.len() {
        lines.write(index, out)?;
    }
    if let Some(trailer) = recording.trailer.clone() {
        write_json(out, &Record::Trailer(trailer))?;
    }
    Ok(())
}
