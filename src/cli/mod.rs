//! The command line: one subcommand per file, this one dispatches.

mod diff;
mod docs;
#[cfg(feature = "otlp")]
mod export;
mod files;
mod ingest;
mod live;
mod narration;
mod probes;
mod record;
mod render;
mod session;
mod status;
mod tui;
mod view;

use clap::{Parser, Subcommand};

/// Records and shows the process lifecycle of a command's whole process tree.
#[derive(Debug, Parser)]
#[command(
    name = "proctrace",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PROCTRACE_BUILD_INFO"), ")"),
    about,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command (or attach to running processes) and record every fork, exec, exit,
    /// setsid and setpgid of its process tree.
    Record(record::RecordArgs),
    /// Render a recording as one of its views: a summary (the default), a process tree, where the
    /// time and the CPU went, the hang, leaks, flame graphs, an HTML report, a Perfetto trace...
    Render(render::RenderArgs),
    /// Extract one process tree from a raw (system-wide) recording.
    Ingest(ingest::IngestArgs),
    /// Compare two recordings of one command: processes in one run only, changed exit statuses,
    /// slower steps, processes that lingered or hung in one run only. Exit status 1 if any.
    Diff(diff::DiffArgs),
    /// Send recordings to an OpenTelemetry collector.
    #[cfg(feature = "otlp")]
    Export(export::ExportArgs),
    /// Open a recording in the full-screen view, at any moment of the run.
    View(view::ViewArgs),
    /// List the USDT probes of a binary or library, or of every file a live process maps,
    /// as `record --probe` specs with their argument specs.
    Probes(probes::ProbesArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// Print the man page, proctrace(1), or write every page into a directory.
    Man(docs::ManArgs),
}

impl Cli {
    /// Runs the subcommand; returns the process exit status.
    pub fn run(self) -> anyhow::Result<i32> {
        let outlives = match self.command {
            Command::Record(_) => true,
            #[cfg(feature = "otlp")]
            Command::Export(_) => true,
            _ => false,
        };
        if outlives {
            outlive_the_reader();
        }
        match self.command {
            Command::Record(args) => record::run(args),
            Command::Render(args) => render::run(args),
            Command::Ingest(args) => ingest::run(args),
            Command::Diff(args) => diff::run(args),
            Command::View(args) => view::run(args),
            Command::Probes(args) => probes::run(args),
            #[cfg(feature = "otlp")]
            Command::Export(args) => export::run(args),
            Command::Completions(args) => docs::completions(args),
            Command::Man(args) => docs::man(args),
        }
    }
}

/// SIGPIPE ignored again (main gives it its default action), for the
/// subcommands that must outlive a reader: `record`, whose reader of
/// `-o -` going away (`| head`) ends its output, not proctrace, which
/// killed would leave the command running on, orphaned behind the shell's
/// back; `record --otlp` and `export`, whose collector may close a
/// connection under a write (writev, as h2 writes, sends no MSG_NOSIGNAL).
/// The write fails instead, and is handled.
fn outlive_the_reader() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: ignoring a signal, before any thread starts, is always sound.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigIgn) };
}

/// A duration as people give one: `2s`, `500ms`, `1m 30s`, or a bare
/// number of seconds (`30`, `0.5`), as timeout(1) takes it.
fn duration(text: &str) -> Result<std::time::Duration, String> {
    let seconds = text.trim().parse::<f64>().ok();
    match seconds {
        Some(s) => std::time::Duration::try_from_secs_f64(s).map_err(|e| e.to_string()),
        None => humantime::parse_duration(text).map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_read_with_a_unit_or_as_seconds() {
        let read = |t| super::duration(t);
        assert_eq!(read("30"), Ok(Duration::from_secs(30)));
        assert_eq!(read("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(read("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(read("1m 30s"), Ok(Duration::from_secs(90)));
        assert!(read("-1").is_err() && read("soon").is_err() && read("inf").is_err());
    }
}
