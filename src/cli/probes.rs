//! `proctrace probes`: what a binary offers to probe, or every file a live
//! process maps, as `bpftrace -l` and tplist list it: one `--probe` spec a
//! line, ready for `record --probe`. USDT probes first, with their
//! argument specs and how many sites fire them; then the functions, each
//! as people write it (Rust and C++ demangled) with its symbol as linked
//! where that differs, the other symbols at its address, and the source
//! line of its entry where debug information has it. A spec of the
//! kernel's (`tracepoint:sched:*`) lists the tracepoints, with the fields
//! a spec can keep, or the kernel functions it names.

use anyhow::Result;
use clap::Args;

use proctrace::recorder::probes::usdt::UsdtProbe;
use proctrace::recorder::probes::{list, list_kernel, KernelPoint, ListedFunction};

/// Arguments of `proctrace probes`.
#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// A binary or library (a path, or a name such as `libc` or `python3`), or the pid
    /// of a live process, whose every mapped file is listed; or a spec of the kernel's
    /// probes, as `bpftrace -l` takes it (`tracepoint:syscalls:*`, `kprobe:vfs_*`), to
    /// list the tracepoints (with their fields) or kernel functions it names.
    #[arg(value_name = "FILE|PID|KERNEL-SPEC")]
    pub target: String,
    /// Only the functions and USDT probes this names: a name or a pattern with `*` and
    /// `?` over functions as people write them (`app::parse::*`, `std::vector::push_back`,
    /// `thrower(int)`) or as linked, and over USDT probes' `PROVIDER:NAME` or NAME.
    #[arg(value_name = "PATTERN", default_value = "*")]
    pub pattern: String,
}

/// Aliases shown per function.
const ALIASES: usize = 3;

/// Runs `proctrace probes`; returns the exit code: 1 when there is no
/// probe to list.
pub fn run(args: ProbesArgs) -> Result<i32> {
    if let Some(points) = list_kernel(&args.target) {
        return kernel(&args.target, points?);
    }
    let listed = list(&args.target, &args.pattern)?;
    if listed.is_empty() {
        let what = match args.pattern.as_str() {
            "*" => String::new(),
            pattern => format!(" named {pattern:?}"),
        };
        say!(
            "proctrace: no functions or USDT probes{what} in {}",
            args.target
        );
        return Ok(1);
    }
    for listing in listed {
        let file = listing.file.display().to_string();
        for (probe, sites) in by_name(&listing.usdt) {
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
        for function in &listing.functions {
            println!("uprobe:{file}:{}", function_notes(function));
        }
    }
    Ok(0)
}

/// The points of the kernel a spec names (`tracepoint:syscalls:*`), a
/// tracepoint with its fields; 1 where there are none.
fn kernel(spec: &str, points: Vec<KernelPoint>) -> Result<i32> {
    if points.is_empty() {
        say!("proctrace: this kernel has nothing {spec:?} names");
        return Ok(1);
    }
    for point in points {
        match point.fields.is_empty() {
            true => println!("{}", point.spec),
            false => println!("{}  {}", point.spec, point.fields.join(", ")),
        }
    }
    Ok(0)
}

/// A function's name, then what else is known of it.
fn function_notes(function: &ListedFunction) -> String {
    let mut line = function.name.clone();
    if function.symbol != function.name {
        line += &format!("  {}", function.symbol);
    }
    if !function.aliases.is_empty() {
        let shown = function.aliases.iter().take(ALIASES);
        let shown: Vec<&str> = shown.map(String::as_str).collect();
        line += &format!("  (also {}", shown.join(", "));
        if function.aliases.len() > ALIASES {
            line += &format!(" and {} more", function.aliases.len() - ALIASES);
        }
        line += ")";
    }
    if let Some(source) = &function.source {
        line += &format!("  {source}");
    }
    match function.ifunc {
        Some(true) => line += "  [IFUNC: the code this CPU runs]",
        Some(false) => line += "  [IFUNC: which code runs cannot be told here]",
        None => {}
    }
    line
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
