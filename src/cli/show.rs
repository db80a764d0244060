//! `proctrace render` and `proctrace ingest`: reading recordings back.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use proctrace::event::Pid;
use proctrace::ingest;
use proctrace::recording::{Reader, Recording};
use proctrace::render::{self, Mode, Options};

/// Arguments of `proctrace render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The recording to read; `-` or none reads stdin.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// What to render.
    #[arg(
        short = 'd',
        long = "display",
        value_enum,
        default_value_t,
        value_name = "MODE"
    )]
    pub mode: Mode,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Arguments of `proctrace ingest`.
#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The raw recording to read; `-` or none reads stdin.
    #[arg(short, long, value_name = "RAW")]
    pub input: Option<PathBuf>,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The process whose tree to extract.
    #[arg(long, value_name = "PID")]
    pub root_pid: Pid,
}

/// Runs `proctrace render`; returns the exit code.
pub fn render(args: RenderArgs) -> anyhow::Result<i32> {
    let mut reader = open_seekable_input(args.input.as_deref())?;
    let recording = Recording::read(&mut reader, args.mode.keep());
    print_warnings(&reader);
    let recording = recording?;
    let options = match &args.output {
        None => terminal_options(),
        Some(_) => Options::default(),
    };
    let mut out = open_output(args.output.as_deref())?;
    let written =
        render::render(args.mode, &recording, options, &mut out).and_then(|()| out.flush());
    quiet_broken_pipe(written).context("writing the output")?;
    Ok(0)
}

/// Runs `proctrace ingest`; returns the exit code.
pub fn ingest(args: IngestArgs) -> anyhow::Result<i32> {
    let mut reader = open_input(args.input.as_deref())?;
    let out = open_output(args.output.as_deref())?;
    let ingested = ingest::ingest(&mut reader, args.root_pid, out);
    print_warnings(&reader);
    let trailer = ingested?;
    if trailer.events == 0 {
        eprintln!(
            "proctrace: warning: no events of PID {} in {}",
            args.root_pid,
            reader.name()
        );
    }
    Ok(0)
}

/// Opens `path` for reading, stdin for `-` or none.
fn open_input(path: Option<&Path>) -> anyhow::Result<Reader<Box<dyn BufRead>>> {
    Ok(match open_file(path)? {
        Some((file, name)) => Reader::new(Box::new(BufReader::new(file)), name),
        None => Reader::new(Box::new(io::stdin().lock()), STDIN),
    })
}

/// Opens `path` for reading, or copies stdin (for `-` or none) to a
/// temporary file: reading a recording may take a second pass.
fn open_seekable_input(path: Option<&Path>) -> anyhow::Result<Reader<BufReader<File>>> {
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
fn open_output(path: Option<&Path>) -> anyhow::Result<Box<dyn Write>> {
    match path {
        None => Ok(Box::new(BufWriter::new(io::stdout().lock()))),
        Some(p) => {
            let file = File::create(p).with_context(|| format!("creating {}", p.display()))?;
            Ok(Box::new(BufWriter::new(file)))
        }
    }
}

/// Colours and the terminal's width when stdout is a terminal; colours
/// only if NO_COLOR is unset (or empty, as no-color.org says).
fn terminal_options() -> Options {
    let stdout = io::stdout();
    if !stdout.is_terminal() {
        return Options::default();
    }
    Options {
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        width: terminal_size::terminal_size_of(&stdout).map(|(w, _)| usize::from(w.0)),
    }
}

fn print_warnings<R>(reader: &Reader<R>) {
    for warning in reader.warnings() {
        eprintln!("proctrace: warning: {warning}");
    }
}

/// A reader that went away (`| head`) is not an error.
fn quiet_broken_pipe(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
