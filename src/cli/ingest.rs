//! `proctrace ingest`: one process tree out of a raw, system-wide recording.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::files::{open_input, open_output, print_warnings};
use proctrace::event::Pid;
use proctrace::recording::ingest;

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

/// Runs `proctrace ingest`; returns the exit code.
pub fn run(args: IngestArgs) -> anyhow::Result<i32> {
    let mut reader = open_input(args.input.as_deref())?;
    let mut out = open_output(args.output.as_deref())?;
    let ingested = ingest::ingest(&mut reader, args.root_pid, &mut out);
    print_warnings(&reader);
    let trailer = ingested?;
    out.finish().context("writing the output")?;
    if trailer.events == 0 {
        say!(
            "proctrace: warning: no events of PID {} in {}",
            args.root_pid,
            reader.name()
        );
    }
    Ok(0)
}
