//! `proctrace completions` and `proctrace man`: shell completions and man
//! pages generated from the command's own clap definitions.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

/// Arguments of `proctrace completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// Arguments of `proctrace man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write proctrace.1 and a page for each subcommand (proctrace-record.1, ...) into DIR,
    /// instead of proctrace(1) to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script of `shell`.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<i32> {
    let mut out = io::stdout().lock();
    clap_complete::generate(args.shell, &mut Cli::command(), "proctrace", &mut out);
    out.flush().context("writing the completions")?;
    Ok(0)
}

/// Prints proctrace(1), or writes every page into a directory.
pub fn man(args: ManArgs) -> anyhow::Result<i32> {
    let command = Cli::command();
    let Some(dir) = args.dir else {
        let mut out = io::stdout().lock();
        clap_mangen::Man::new(command).render(&mut out)?;
        out.flush().context("writing the man page")?;
        return Ok(0);
    };
    write_page(&dir, command.clone())?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(&dir, sub, "proctrace")?;
    }
    Ok(0)
}

/// Writes the page of `sub`, a subcommand of `parent`, and of its own
/// subcommands (`proctrace-export-otlp.1`).
fn write_pages(dir: &Path, sub: &clap::Command, parent: &str) -> anyhow::Result<()> {
    let name = format!("{parent} {}", sub.get_name());
    write_page(
        dir,
        sub.clone().name(name.replace(' ', "-")).bin_name(&name),
    )?;
    for nested in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(dir, nested, &name)?;
    }
    Ok(())
}

/// Writes `command`'s page as DIR/NAME.1.
fn write_page(dir: &Path, command: clap::Command) -> anyhow::Result<()> {
    let path = dir.join(format!("{}.1", command.get_name()));
    let mut out = super::files::open_output(Some(&path))?;
    clap_mangen::Man::new(command)
        .render(&mut out)
        .and_then(|()| out.finish())
        .with_context(|| format!("writing {}", path.display()))
}
