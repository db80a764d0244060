//! Opening recordings and outputs, the same way for every subcommand that
//! reads recordings: `-` or nothing is stdin or stdout, errors name the file.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};
use std::path::Path;

use anyhow::Context;

use proctrace::recording::Reader;

/// Opens `path` for reading, stdin for `-` or none.
pub fn open_input(path: Option<&Path>) -> anyhow::Result<Reader<Box<dyn BufRead>>> {
    Ok(match open_file(path)? {
        Some((file, name)) => Reader::new(Box::new(BufReader::new(file)), name),
        None => Reader::new(Box::new(io::stdin().lock()), STDIN),
    })
}

/// Opens `path` for reading, or copies stdin (for `-` or none) to a
/// temporary file: reading a recording may take a second pass.
pub fn open_seekable_input(path: Option<&Path>) -> anyhow::Result<Reader<BufReader<File>>> {
    if let Some((file, name)) = open_file(path)? {
        return Ok(Reader::new(BufReader::new(file), name));
    }
    let mut copy = tempfile::tempfile().context("creating a temporary file")?;
    io::copy(&mut io::stdin().lock(), &mut copy).context("copying stdin")?;
    copy.rewind().context("copying stdin")?;
    Ok(Reader::new(BufReader::new(copy), STDIN))
}

/// How stdin is named in errors and warnings.
const STDIN: &str = "<stdin>";

/// The file at `path` and its name; `None` for stdin (`-` or none).
fn open_file(path: Option<&Path>) -> anyhow::Result<Option<(File, String)>> {
    match path {
        Some(p) if p != Path::new("-") => {
            let file = File::open(p).with_context(|| format!("opening {}", p.display()))?;
            Ok(Some((file, p.display().to_string())))
        }
        _ => Ok(None),
    }
}

/// Opens `path` for writing, stdout for none.
pub fn open_output(path: Option<&Path>) -> anyhow::Result<Box<dyn Write>> {
    match path {
        None => Ok(Box::new(BufWriter::new(io::stdout().lock()))),
        Some(p) => {
            let file = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            Ok(Box::new(BufWriter::new(file)))
        }
    }
}

/// Says on stderr what the reader found odd but could read past.
pub fn print_warnings<R>(reader: &Reader<R>) {
    for warning in reader.warnings() {
        eprintln!("proctrace: warning: {warning}");
    }
}

/// A reader that went away (`| head`) is not an error.
pub fn quiet_broken_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
