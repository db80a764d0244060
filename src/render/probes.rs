//! `probes`: the probes' hits (`record --probe`): per probe its hits, then
//! per test, per command and per process, and its most frequent USDT
//! argument tuples (overall and per test), and the calls' latency where a uretprobe was attached
//! too. The probes no process of the tree hit are named at the end, in
//! one line; every list is cut short and says what it left out.

use std::io::{self, Write};

use super::Options;
use crate::analysis::{probe_uses, probed_processes, Latency, ProbeUse};
use crate::event::ArgValue;
use crate::recording::Recording;
use crate::text::{count, precise, shorten, visible};

/// Entries listed per list.
const TOP: usize = 10;

/// What a recording cut short means for its probes' hits.
pub(super) const CUT_HITS: &str =
    "hits are written at a recording's end, so those of the cut part are missing";

/// Writes every probe's hits.
pub fn render(recording: &Recording, options: Options, out: &mut dyn Write) -> io::Result<()> {
    let probes = recording.header.as_ref().map_or(&[][..], |h| &h.probes[..]);
    let profile = &recording.profile;
    let trailer = recording.trailer.as_ref();
    let total: u64 = profile
        .probe_hits
        .iter()
        .fold(0, |s, h| s.saturating_add(h.count));
    writeln!(
        out,
        "Probes: {} attached, {} of {}, {} lost",
        probes.len(),
        count(total, "hit", "hits"),
        count(probed_processes(profile) as u64, "process", "processes"),
        trailer.map_or_else(|| "unknown".to_owned(), |t| t.lost_probe_hits.to_string())
    )?;
    if let Some(note) = super::cut_note(recording, CUT_HITS) {
        writeln!(out, "{note}")?;
    }
    let (hit, unhit): (Vec<ProbeUse>, Vec<ProbeUse>) =
        probe_uses(probes, profile, &recording.processes)
            .into_iter()
            .partition(|used| used.hits > 0);
    for used in &hit {
        writeln!(out)?;
        write_probe(out, used, options)?;
        if let Some(latency) = &used.latency {
            let ret = probes.get(latency.ret as usize).map(|p| p.label());
            write_latency(out, latency, ret.as_deref().unwrap_or("its return"))?;
        }
    }
    write_unhit(out, &unhit, recording.is_cut(), options)
}

/// The probes no process of the tree hit, in one line: a wildcard may
/// attach to hundreds. Of a recording cut short, only that the file has
/// no hit of them.
fn write_unhit(
    out: &mut dyn Write,
    unhit: &[ProbeUse],
    cut: bool,
    options: Options,
) -> io::Result<()> {
    let labels: Vec<String> = unhit
        .iter()
        .take(TOP)
        .map(|used| visible(&used.probe.label()).into_owned())
        .collect();
    let none = if cut {
        "The cut file has no hit of"
    } else {
        "No process of the tree hit"
    };
    let line = match unhit.len() {
        0 => return Ok(()),
        1 => format!("{none} {}", labels[0]),
        n if n <= TOP => format!("{none} {n} probes: {}", labels.join(", ")),
        n => format!(
            "{none} {n} probes: {}, … and {} more",
            labels.join(", "),
            n - TOP
        ),
    };
    writeln!(out)?;
    writeln!(out, "{}", shorten(&line, options.width))
}

fn write_probe(out: &mut dyn Write, used: &ProbeUse, options: Options) -> io::Result<()> {
    let label = visible(&used.probe.label()).into_owned();
    writeln!(out, "{label}: {}", count(used.hits, "hit", "hits"))?;
    write_list(out, "by test", &used.by_test, options)?;
    write_list(out, "by command", &used.by_command, options)?;
    let processes: Vec<(String, u64)> = used
        .by_process
        .iter()
        .map(|(pid, program, n)| (format!("{pid} {program}"), *n))
        .collect();
    write_list(out, "by process", &processes, options)?;
    let args: Vec<(String, u64)> = used
        .args
        .iter()
        .map(|(tuple, n)| (tuple_text(tuple.as_deref()), *n))
        .collect();
    write_list(out, "arguments", &args, options)?;
    let by_test: Vec<(String, u64)> = used
        .args_by_test
        .iter()
        .map(|((test, tuple), n)| (format!("{test} {}", tuple_text(tuple.as_deref())), *n))
        .collect();
    write_list(out, "arguments by test", &by_test, options)
}

fn tuple_text(tuple: Option<&[ArgValue]>) -> String {
    match tuple {
        Some(values) => {
            let values: Vec<String> = values.iter().map(ArgValue::to_string).collect();
            format!("({})", values.join(", "))
        }
        None => "(the other tuples, not kept apart)".to_owned(),
    }
}

/// Widest bar of the latency histogram.
const BAR: u64 = 40;

/// The calls' percentiles, then their histogram by power of two, the
/// empty powers between the first and the last included.
fn write_latency(out: &mut dyn Write, latency: &Latency, ret: &str) -> io::Result<()> {
    writeln!(
        out,
        "  latency to {}: {}, min {}, p50 {}, p90 {}, p99 {}, max {}",
        visible(ret),
        count(latency.calls, "call", "calls"),
        precise(latency.min),
        precise(latency.p50),
        precise(latency.p90),
        precise(latency.p99),
        precise(latency.max)
    )?;
    let most = latency.histogram.iter().map(|(_, n)| *n).max().unwrap_or(1);
    for (from, n) in &latency.histogram {
        let width = (n.saturating_mul(BAR)).div_ceil(most.max(1)) as usize;
        let row = format!(
            "    {:>9} {n:>10} {}",
            format!("{}+", precise(*from)),
            "█".repeat(width)
        );
        writeln!(out, "{}", row.trim_end())?;
    }
    Ok(())
}

/// A list's first entries, and what it left out; nothing for an empty one.
fn write_list(
    out: &mut dyn Write,
    what: &str,
    entries: &[(String, u64)],
    options: Options,
) -> io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  {what} ({} of {}):",
        TOP.min(entries.len()),
        entries.len()
    )?;
    for (name, n) in entries.iter().take(TOP) {
        let line = format!("    {n:>10}  {}", visible(name));
        writeln!(out, "{}", shorten(&line, options.width))?;
    }
    if entries.len() > TOP {
        let rest = entries[TOP..]
            .iter()
            .fold(0u64, |s, (_, n)| s.saturating_add(*n));
        writeln!(
            out,
            "    … {} more with {}",
            entries.len() - TOP,
            count(rest, "hit", "hits")
        )?;
    }
    Ok(())
}
