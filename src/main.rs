mod cli;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => cli::run_render(args),
        Command::Ingest(args) => cli::run_ingest(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("proctrace: {err:#}");
            std::process::exit(2);
        }
    }
}
