//! Opening recordings and outputs, the same way for every subcommand that
//! reads recordings: `-` or nothing is stdin or stdout, errors name the file,
//! and an output file is replaced only once it is whole.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Seek, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use tempfile::NamedTempFile;

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

/// The file at `path` and its name; `None` for stdin (`-` or none). With
/// no `-i` at all, a terminal on stdin is refused: nobody types a
/// recording, and a read would wait there without a word.
fn open_file(path: Option<&Path>) -> anyhow::Result<Option<(File, String)>> {
    match path {
        Some(p) if p != Path::new("-") => {
            let file = File::open(p).with_context(|| format!("opening {}", p.display()))?;
            Ok(Some((file, p.display().to_string())))
        }
        None if io::stdin().is_terminal() => anyhow::bail!(
            "no recording given, and stdin is a terminal: name one with -i FILE, or pipe it in"
        ),
        _ => Ok(None),
    }
}

/// Opens `path` for writing, stdout for none. Nothing is lost if the
/// subcommand fails: a regular file is replaced only by
/// [`OutputFile::finish`].
pub fn open_output(path: Option<&Path>) -> anyhow::Result<OutputFile> {
    let Some(path) = path else {
        return Ok(OutputFile::Stdout(BufWriter::new(io::stdout().lock())));
    };
    let creating = || format!("creating {}", path.display());
    match fs::metadata(path) {
        // A device or a pipe (`/dev/null`, a FIFO) has no contents to keep,
        // and must not be renamed over.
        Ok(meta) if !meta.is_file() => {
            let file = File::create(path).with_context(creating)?;
            Ok(OutputFile::InPlace(BufWriter::new(file)))
        }
        Ok(meta) => {
            // The file a link names is replaced, not the link.
            let target = fs::canonicalize(path).with_context(creating)?;
            let temp = temp_beside(&target, Some(meta.permissions())).with_context(creating)?;
            // Best effort: the output is whole, only its owner may differ.
            let _ = std::os::unix::fs::fchown(temp.as_file(), Some(meta.uid()), Some(meta.gid()));
            Ok(OutputFile::Replacing(BufWriter::new(temp), target))
        }
        Err(_) => {
            let temp = temp_beside(path, None).with_context(creating)?;
            Ok(OutputFile::Replacing(BufWriter::new(temp), path.to_owned()))
        }
    }
}

/// An empty file in `target`'s directory, renamed over `target` once
/// whole: with the `permissions` of the file it replaces, or those a new
/// file gets (0666 less the umask).
fn temp_beside(target: &Path, permissions: Option<fs::Permissions>) -> io::Result<NamedTempFile> {
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temp = tempfile::Builder::new()
        .prefix(".proctrace-")
        .permissions(fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    if let Some(permissions) = permissions {
        temp.as_file().set_permissions(permissions)?;
    }
    Ok(temp)
}

/// Where a subcommand's output goes.
pub enum OutputFile {
    Stdout(BufWriter<io::StdoutLock<'static>>),
    /// A device or a pipe, written as it comes.
    InPlace(BufWriter<File>),
    /// A temporary file beside the target, renamed over it once whole.
    Replacing(BufWriter<NamedTempFile>, PathBuf),
}

impl OutputFile {
    /// Writes out what is buffered and puts the file in its place.
    pub fn finish(self) -> io::Result<()> {
        match self {
            OutputFile::Stdout(mut out) => out.flush(),
            OutputFile::InPlace(mut out) => out.flush(),
            OutputFile::Replacing(out, target) => {
                let temp = out.into_inner().map_err(io::IntoInnerError::into_error)?;
                temp.persist(&target).map(drop).map_err(|e| e.error)
            }
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            OutputFile::Stdout(out) => out,
            OutputFile::InPlace(out) => out,
            OutputFile::Replacing(out, _) => out,
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

/// Says on stderr what the reader found odd but could read past.
pub fn print_warnings<R>(reader: &Reader<R>) {
    for warning in reader.warnings() {
        say!("proctrace: warning: {warning}");
    }
}

/// Whether writing failed because the reader of a pipe went away (`| head`):
/// its choice, not an error of proctrace's.
pub fn reader_left(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::BrokenPipe
}
