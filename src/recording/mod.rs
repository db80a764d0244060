//! Recordings on disk: newline-delimited JSON, one [`Record`] per line.

mod reader;
mod writer;

pub use reader::{ReadError, Reader, Recording, Warning};
pub use writer::Writer;

#[cfg(doc)]
use crate::event::Record;
