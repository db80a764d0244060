//! The `proctrace` command: a thin shell over the library (see src/cli/).

use clap::Parser;
use proctrace::recorder::RecordError;

mod cli;

fn main() {
    let status = cli::Cli::parse().run().unwrap_or_else(|err| {
        eprintln!("proctrace: {}", message(&err));
        err.downcast_ref::<RecordError>()
            .map_or(2, RecordError::exit_status)
    });
    std::process::exit(status);
}

/// The error and its causes on one line, each said once: a cause whose
/// text its context already quotes (`{name}: {source}`) is not repeated.
fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain().map(ToString::to_string) {
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}
