//! The kinds of probe, as one table: what a kind's spec looks like after
//! `KIND:`, how its points are found in a file, what the BPF object needs
//! for them before it loads and how each is attached. A new kind is one
//! entry here and its BPF program. A hit is decoded alike for every kind
//! (the point's id, the thread's registers and stack, the arguments its
//! program read).

mod uprobe;
mod usdt;

use std::path::Path;

use libbpf_rs::Link;

use super::point::{Found, Resolved, Target};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;

/// Every process, not one: a probe is attached for all of them and the
/// tree's hits are picked in the kernel.
pub(crate) const ALL_PROCESSES: i32 = -1;

/// One kind of probe.
pub(crate) trait Kind: Sync {
    /// What the header and `proctrace probes` call it.
    fn kind(&self) -> ProbeKind;

    /// The names a spec may give it (`uprobe`, and bpftrace's `u`).
    fn prefixes(&self) -> &'static [&'static str];

    /// The whole spec, for errors (`uprobe:FILE:FUNCTION[+OFFSET]`).
    fn syntax(&self) -> &'static str;

    /// What follows `KIND:` in a spec: the file, and what in it.
    fn parse(&self, rest: &str) -> Result<(String, Target), String>;

    /// What its targets are, for errors (`function`).
    fn what(&self) -> &'static str;

    /// The points `target` names in `file`: each one's name (`malloc`,
    /// `python:function__entry`), symbol and place.
    fn resolve(&self, file: &Path, target: &Target) -> Result<Vec<Found>, String>;

    /// Sets what its `points` need before the object loads: the programs
    /// to load (without `cookies`, one per point where a kind needs it).
    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], cookies: bool);

    /// The name of the program copy `configure` chose for `point`, where
    /// the kind has copies.
    fn copy(&self, _point: &Resolved, _cookies: bool) -> Option<String> {
        None
    }

    /// Attaches one point, for every process: the program keeps the
    /// tree's hits.
    fn attach(
        &self,
        skel: &ProctraceSkel<'_>,
        point: &Resolved,
        cookies: bool,
    ) -> libbpf_rs::Result<Link>;
}

/// Every kind, in the order the errors list them.
pub(crate) static KINDS: [&dyn Kind; 3] = [&uprobe::UPROBE, &uprobe::URETPROBE, &usdt::Usdt];

/// The kind of a spec that starts `prefix:`.
pub(crate) fn by_prefix(prefix: &str) -> Option<&'static dyn Kind> {
    KINDS
        .iter()
        .copied()
        .find(|kind| kind.prefixes().contains(&prefix))
}

/// The table's entry for `kind`.
pub(crate) fn of(kind: ProbeKind) -> &'static dyn Kind {
    KINDS
        .iter()
        .copied()
        .find(|k| k.kind() == kind)
        .expect("every ProbeKind has its entry")
}

/// Every kind's syntax, for a spec of none.
pub(crate) fn syntaxes() -> String {
    or_list(KINDS.iter().map(|k| k.syntax()))
}

/// Every kind's name, for a spec of an unknown one.
pub(crate) fn names() -> String {
    or_list(KINDS.iter().map(|k| k.prefixes()[0]))
}

/// `a, b or c`.
fn or_list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => all.concat(),
    }
}
