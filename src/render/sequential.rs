//! `sequential`: the recording itself, events in causal order.

use std::io::{self, Write};

use super::write_json;
use crate::event::Record;
use crate::recording::Recording;

/// Writes header, events and trailer as JSON lines.
pub fn render(recording: &Recording, out: &mut dyn Write) -> io::Result<()> {
    let header = recording.header.clone().map(Record::Header);
    let trailer = recording.trailer.clone().map(Record::Trailer);
    let events = recording.events.iter();
    for record in header.iter().chain(events).chain(trailer.iter()) {
        write_json(out, record)?;
    }
    Ok(())
}
