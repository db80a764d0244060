//! Recordings on disk: newline-delimited JSON, one [`Record`] per line.

mod writer;

pub use writer::Writer;

#[cfg(doc)]
use crate::event::Record;
