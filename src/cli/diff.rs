//! `proctrace diff`: what changed between two recordings of one command.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::files::{open_output, open_seekable_input, print_warnings};
use proctrace::analysis::diff::{Diff, Slower};
use proctrace::recording::{Keep, Recording};

/// Entries listed per section of the text output.
const LISTED: usize = 50;

/// Arguments of `proctrace diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first run (say, the good one).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second run, compared with the first.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// When a process (or, with `record --off-cpu`, a test) counts as slower in B: a factor
    /// (`2x`) or an added time (`+500ms`); repeat it to require all. Default: `2x` and `+100ms`.
    #[arg(long, value_name = "THRESHOLD")]
    pub slower: Vec<Slower>,
    /// Write JSON (every difference, with pids, tests and paths, every function whose CPU share
    /// moved, and the slower tests' waits) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `proctrace diff`: exit status 0 when nothing differs beyond the
/// thresholds, 1 when something does (errors are 2, as everywhere).
pub fn run(args: DiffArgs) -> anyhow::Result<i32> {
    let a = read(&args.a)?;
    let b = read(&args.b)?;
    let slower = match args.slower.as_slice() {
        [] => &Slower::DEFAULT[..],
        given => given,
    };
    let diff = Diff::compare(&a, &b, slower);
    let mut out = open_output(args.output.as_deref())?;
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &diff)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        proctrace::render::write_diff(&diff, LISTED, &mut out)
    };
    written
        .and_then(|()| out.finish())
        .context("writing the output")?;
    Ok(i32::from(diff.differs()))
}

fn read(path: &Path) -> anyhow::Result<Recording> {
    let mut reader = open_seekable_input(Some(path))?;
    let recording = Recording::read(&mut reader, Keep::Processes);
    print_warnings(&reader);
    // Functions compared as `render` shows them by default.
    let mut recording = recording?;
    recording.profile.fold_inlined();
    Ok(recording)
}
