//! `probes`: the probes' hits (`record --probe`): per probe its hits, then
//! per test, per command and per process, its most frequent tuples of
//! kept values (overall and per test), each kept number's histogram by
//! power of two (overall and per test), and the calls' latency where a
//! uretprobe was attached too. The probes no process of the tree hit are named at the end, in
//! one line; every list is cut short and says what it left out.

use std::io::{self, Write};

use super::Options;
use crate::analysis::{probe_uses, probed_processes, Latency, ProbeUse, ValueHistogram};
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
    let mut label = visible(&used.probe.label()).into_owned();
    if let Some(filter) = &used.probe.filter {
        label += &format!(" (if {})", visible(filter));
    }
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
    write_list(out, "arguments by test", &by_test, options)?;
    for histogram in &used.histograms {
        write_histogram(out, histogram, options)?;
    }
    Ok(())
}

/// A kept number's hits by power of two, as bpftrace's `hist()` draws
/// them, then per test on a line each.
fn write_histogram(
    out: &mut dyn Write,
    histogram: &ValueHistogram,
    options: Options,
) -> io::Result<()> {
    let hits = histogram
        .buckets
        .iter()
        .fold(0u64, |s, (_, n)| s.saturating_add(*n));
    writeln!(
        out,
        "  {} ({}):",
        visible(&histogram.value),
        count(hits, "hit", "hits")
    )?;
    let rows: Vec<(String, u64)> = histogram
        .buckets
        .iter()
        .map(|(bucket, n)| (bucket_range(*bucket), *n))
        .collect();
    write_bars(out, &rows)?;
    let by_test: Vec<(String, u64)> = histogram
        .by_test
        .iter()
        .map(|(test, buckets)| {
            let hits = buckets.iter().fold(0u64, |s, (_, n)| s.saturating_add(*n));
            let filled = buckets.iter().filter(|(_, n)| *n > 0);
            let spread: Vec<String> = filled
                .map(|(b, n)| format!("{} {n}", bucket_range(*b)))
                .collect();
            (format!("{test}  {}", spread.join(", ")), hits)
        })
        .collect();
    write_list(
        out,
        &format!("{} by test", histogram.value),
        &by_test,
        options,
    )
}

/// A bucket as bpftrace labels it: `[64K, 128K)`, `[0]`, `(-8, -4]`.
fn bucket_range(bucket: i64) -> String {
    match bucket {
        0 => "[0]".to_owned(),
        b if b > 0 => format!("[{}, {})", power_label(b), power_label(b.saturating_mul(2))),
        b => format!("({}, {}]", power_label(b.saturating_mul(2)), power_label(b)),
    }
}

/// A power of two with a binary suffix where it has one (`64K`, `2M`).
fn power_label(n: i64) -> String {
    let suffixes = [
        (60, "E"),
        (50, "P"),
        (40, "T"),
        (30, "G"),
        (20, "M"),
        (10, "K"),
    ];
    let magnitude = n.unsigned_abs();
    let sign = if n < 0 { "-" } else { "" };
    for (shift, suffix) in suffixes {
        if magnitude >= 1 << shift && magnitude % (1 << shift) == 0 {
            return format!("{sign}{}{suffix}", magnitude >> shift);
        }
    }
    n.to_string()
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
    let rows: Vec<(String, u64)> = latency
        .histogram
        .iter()
        .map(|(from, n)| (format!("{}+", precise(*from)), *n))
        .collect();
    write_bars(out, &rows)
}

/// A histogram's rows: each label, its count and a bar as long as its
/// share of the largest.
fn write_bars(out: &mut dyn Write, rows: &[(String, u64)]) -> io::Result<()> {
    let most = rows.iter().map(|(_, n)| *n).max().unwrap_or(1);
    // At least as wide as the latency's labels (`131.1 µs+`).
    let labels = rows.iter().map(|(l, _)| l.chars().count()).max();
    let labels = labels.unwrap_or(0).max(9);
    for (label, n) in rows {
        let width = (n.saturating_mul(BAR)).div_ceil(most.max(1)) as usize;
        let row = format!("    {label:>labels$} {n:>10} {}", "█".repeat(width));
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
