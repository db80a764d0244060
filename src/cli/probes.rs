//! `proctrace probes`: the USDT probes a binary ships, or those of every
//! file a live process maps, as `bpftrace -l 'usdt:…'` and tplist list
//! them: one `usdt:FILE:PROVIDER:NAME` per probe, ready for `record
//! --probe`, with its argument specs and how many sites fire it.

use anyhow::Result;
use clap::Args;

use proctrace::recorder::probes::list_usdt;
use proctrace::recorder::probes::usdt::UsdtProbe;

/// Arguments of `proctrace probes`.
#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// A binary or library (a path, or a name such as `libc` or `python3`), or the pid
    /// of a live process, whose every mapped file is listed.
    #[arg(value_name = "FILE|PID")]
    pub target: String,
}

/// Runs `proctrace probes`; returns the exit code: 1 when there is no
/// probe to list.
pub fn run(args: ProbesArgs) -> Result<i32> {
    let listed = list_usdt(&args.target)?;
    if listed.is_empty() {
        say!("proctrace: no USDT probes in {}", args.target);
        return Ok(1);
    }
    for (file, probes) in listed {
        let file = file.display().to_string();
        for (probe, sites) in by_name(&probes) {
            let sites = match sites {
                1 => String::new(),
                n => format!("  ({n} sites)"),
            };
            let semaphore = if probe.semaphore == 0 {
                ""
            } else {
                "  [semaphore]"
            };
            println!(
                "usdt:{file}:{}:{}  {}{sites}{semaphore}",
                probe.provider, probe.name, probe.args
            );
        }
    }
    Ok(0)
}

/// Each probe once, at its first site, with its number of sites.
fn by_name(probes: &[UsdtProbe]) -> Vec<(&UsdtProbe, usize)> {
    let mut listed: Vec<(&UsdtProbe, usize)> = Vec::new();
    for probe in probes {
        let same = |(p, _): &&mut (&UsdtProbe, usize)| {
            p.provider == probe.provider && p.name == probe.name
        };
        match listed.iter_mut().find(same) {
            Some((_, sites)) => *sites += 1,
            None => listed.push((probe, 1)),
        }
    }
    listed
}
