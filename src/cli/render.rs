//! `proctrace render`: a recording as one of the views of `proctrace::render`.

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::files::{open_output, open_seekable_input, print_warnings};
use proctrace::recording::Recording;
use proctrace::render::{self, Mode, Options, Weight};

/// Arguments of `proctrace render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The recording to read; `-` or none reads stdin.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// The view to show.
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
    /// What `-d folded` and `-d flamegraph` weigh each process by.
    #[arg(long, value_enum, default_value_t, value_name = "WEIGHT")]
    pub weight: Weight,
    /// Show functions inlined into others as frames of their own, with
    /// the time spent in them; by default their time is the function's
    /// they were inlined into, as `perf report` counts it. pprof always
    /// keeps them, as lines of their function.
    #[arg(long)]
    pub inline: bool,
}

/// Runs `proctrace render`; returns the exit code.
pub fn run(args: RenderArgs) -> anyhow::Result<i32> {
    // As gzip does: bytes on a terminal are garbage, and may be escape
    // sequences. Checked first, before a large recording is read.
    if args.mode.is_binary() && args.output.is_none() && io::stdout().is_terminal() {
        anyhow::bail!(
            "-d {} is binary: write it to a file with -o FILE, or pipe it",
            mode_name(args.mode)
        );
    }
    let mut reader = open_seekable_input(args.input.as_deref())?;
    let recording = Recording::read(&mut reader, args.mode.keep());
    print_warnings(&reader);
    let mut recording = recording?;
    if !args.inline && !args.mode.keeps_inlined() {
        recording.profile.fold_inlined();
    }
    let options = Options {
        weight: args.weight,
        ..match &args.output {
            None => terminal_options(),
            Some(_) => Options::default(),
        }
    };
    // Into a temporary file beside -o's: a view refused half-way leaves
    // the file it would have replaced as it was.
    let mut out = open_output(args.output.as_deref())?;
    let written = match args.mode {
        Mode::Otlp => render::otlp::write(&recording, &otlp_context(), &mut out),
        mode => render::render(mode, &recording, options, &mut out),
    };
    let written = written.and_then(|()| out.finish());
    match written {
        // The view refused the recording (it holds nothing the view is
        // drawn from): the reason is about the recording, not writing.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            Err(anyhow::Error::new(e).context(format!(
                "{} has nothing for -d {}",
                reader.name(),
                mode_name(args.mode)
            )))
        }
        written => written.context("writing the output"),
    }?;
    Ok(0)
}

/// The mode as `-d` names it.
fn mode_name(mode: Mode) -> String {
    use clap::ValueEnum;
    mode.to_possible_value()
        .map_or_else(|| format!("{mode:?}"), |v| v.get_name().to_owned())
}

/// The trace context and resource of the environment (`TRACEPARENT`,
/// `OTEL_SERVICE_NAME`, the CI run's variables), as `export otlp` reads
/// them. A malformed value is ignored, not an error: the spans still make
/// a trace.
fn otlp_context() -> render::otlp::Context {
    let (context, warnings) = render::otlp::Context::from_env(&|name| std::env::var(name).ok());
    for warning in warnings {
        say!("proctrace: warning: {warning}");
    }
    context
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
        ..Options::default()
    }
}
