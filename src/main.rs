//! The `proctrace` command: a thin shell over the library (see src/cli/).

use clap::Parser;
use proctrace::recorder::RecordError;

/// `eprintln!` that cannot panic: a stderr whose reader went away (`2>&1
/// | head`, SIGPIPE ignored by `record`) loses the line, not the
/// recording.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;

/// Not libc's malloc: the recorder attaches uprobes there for every
/// process, its own included (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    end_with_the_reader();
    proctrace::recorder::huge_pages::refuse();
    let status = cli::Cli::parse().run().unwrap_or_else(|err| {
        say!("proctrace: {}", message(&err));
        err.downcast_ref::<RecordError>()
            .map_or(2, RecordError::exit_status)
    });
    std::process::exit(status);
}

/// A reader that goes away (`proctrace man | head`) ends proctrace as it
/// ends ls, by SIGPIPE's default action, quietly: Rust's runtime ignores
/// SIGPIPE, so that every write to a closed pipe would be an error, a
/// panic in `println!` and in the crates that print. `record` and `export`
/// ignore it again (cli::Cli::run says why).
fn end_with_the_reader() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: setting a disposition to the default, before any thread
    // starts, is always sound.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
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
