//! The `proctrace` command: a thin shell over the library (see src/cli/).

use clap::Parser;
use proctrace::record::RecordError;

mod cli;

fn main() {
    let status = cli::Cli::parse().run().unwrap_or_else(|err| {
        eprintln!("proctrace: {err:#}");
        err.downcast_ref::<RecordError>()
            .map_or(2, RecordError::exit_status)
    });
    std::process::exit(status);
}
