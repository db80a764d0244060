//! Recordings on disk: newline-delimited JSON, one [`Record`] per line.

mod events;
pub mod ingest;
mod legacy;
mod output;
mod reader;
mod writer;

pub use events::{Events, Lines};
pub use output::{Output, OutputError, Reserved};
pub use reader::{Keep, ReadError, ReadWarning, Reader, Recording};
pub use writer::Writer;

#[cfg(doc)]
use crate::event::Record;
