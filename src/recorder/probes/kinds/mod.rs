//! The kinds of probe, as one table: what a kind's spec looks like after
//! `KIND:`, how its points are found in a file or the kernel, where its
//! hits read the values a spec names, what this kernel must have, what
//! the BPF object needs for them before it loads and how each is
//! attached. A new kind is one entry here and its BPF program. A hit is
//! decoded alike for every kind (the point's id, the thread's registers
//! and stacks, the values its program read).

mod kernel_function;
mod tracepoint;
mod uprobe;
mod usdt;

pub(crate) use tracepoint::readable_fields;

use std::path::Path;

use libbpf_rs::{Link, OpenProgramMut, ProgramMut};

use super::clauses::Op;
use super::point::{Found, Place, Resolved, Source, Target, Value};
use crate::bpf::types::{probe_cmp, probe_setting, value_flags, value_from};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::ProbeError;

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

    /// What follows `KIND:` in a spec: the file (none for a probe of the
    /// kernel), and what in it.
    fn parse(&self, rest: &str) -> Result<(Option<String>, Target), String>;

    /// What its targets are, for errors (`function`).
    fn what(&self) -> &'static str;

    /// The points `target` names in `file` (or the kernel): each one's
    /// name (`malloc`, `python:function__entry`), symbol and place.
    fn resolve(&self, file: Option<&Path>, target: &Target) -> Result<Vec<Found>, String>;

    /// What this kernel lacks to attach `points` of this kind, said in
    /// one line: before anything loads.
    fn check(&self, points: &[&Resolved], cookies: bool) -> Result<(), ProbeError>;

    /// Where its hits read the value `name` (`arg0`, `retval`, a field)
    /// at `point`, as a number of its natural width; what it has instead
    /// where it has no such value.
    fn value(&self, point: &Found, name: &str) -> Result<Value, String>;

    /// Sets what its `points` need before the object loads: the programs
    /// to load (without `cookies`, one per point where a kind needs it).
    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], cookies: bool);

    /// The name of the program copy `configure` chose for `point`, where
    /// the kind has copies.
    fn copy(&self, _point: &Resolved, _cookies: bool) -> Option<String> {
        None
    }

    /// Sets what `copy`, the program copy chosen for `point`, needs
    /// before the object loads, beyond being loaded.
    fn prepare_copy(
        &self,
        _copy: &mut OpenProgramMut<'_>,
        _point: &Resolved,
    ) -> libbpf_rs::Result<()> {
        Ok(())
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

/// What the kernel is told of `point`'s hits: the values they read and
/// keep, the strings among them and the filter they must pass.
pub(crate) fn setting(point: &Resolved) -> probe_setting {
    let reads = &point.reads;
    let mut setting = probe_setting {
        values: reads.values.len() as u32,
        kept: reads.kept as u32,
        conditions: reads.filter.len() as u32,
        ..Default::default()
    };
    for (slot, value) in setting.value.iter_mut().zip(&reads.values) {
        let (from, index, offset) = match value.source {
            Source::Arg(n) | Source::Usdt(n) => (value_from::FROM_ARG, n, 0),
            Source::Return => (value_from::FROM_RETURN, 0, 0),
            Source::Field { offset } => (value_from::FROM_FIELD, 0, offset),
            Source::FieldText { offset, size: 0 } => (value_from::FROM_DATA_LOC, 0, offset),
            Source::FieldText { offset, .. } => (value_from::FROM_FIELD_TEXT, 0, offset),
        };
        slot.from = from.0 as u8;
        slot.index = index;
        slot.offset = offset;
        slot.size = value.size;
        slot.flags = if value.signed {
            value_flags::VALUE_SIGNED.0 as u8
        } else {
            0
        };
    }
    for (slot, &(value, op, number)) in setting.condition.iter_mut().zip(&reads.filter) {
        slot.value = value as u32;
        slot.op = cmp_of(op).0;
        slot.number = number;
    }
    setting.strings = match &point.place {
        Place::Usdt { strings, .. } => *strings,
        _ => (reads.values.iter().take(reads.kept).enumerate())
            .filter(|(_, v)| v.string)
            .fold(0, |mask, (i, _)| mask | 1 << i),
    };
    setting
}

fn cmp_of(op: Op) -> probe_cmp {
    match op {
        Op::Eq => probe_cmp::CMP_EQ,
        Op::Ne => probe_cmp::CMP_NE,
        Op::Lt => probe_cmp::CMP_LT,
        Op::Le => probe_cmp::CMP_LE,
        Op::Gt => probe_cmp::CMP_GT,
        Op::Ge => probe_cmp::CMP_GE,
    }
}

/// Every kind, in the order the errors list them.
pub(crate) static KINDS: [&dyn Kind; 8] = [
    &uprobe::UPROBE,
    &uprobe::URETPROBE,
    &usdt::Usdt,
    &tracepoint::Tracepoint,
    &kernel_function::KPROBE,
    &kernel_function::KRETPROBE,
    &kernel_function::FENTRY,
    &kernel_function::FEXIT,
];

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

/// The value `name` of a function's entry (`argN`, by the calling
/// convention) or, with `ret`, of its return (`retval`), as a probe
/// `called` (`a uprobe`) reads it from the registers.
pub(super) fn function_value(ret: bool, name: &str, called: &str) -> Result<Value, String> {
    let source = match (ret, name) {
        (true, "retval") => Source::Return,
        (false, arg) => Source::Arg(arg_index(arg, 6).ok_or_else(|| {
            format!("{called} has the function's arguments arg0 to arg5, not {name:?}")
        })?),
        (true, _) => {
            return Err(format!(
                "{called} has the function's return value, retval, not {name:?} \
                 (its arguments are gone by the return)"
            ))
        }
    };
    Ok(Value {
        source,
        size: 8,
        signed: true,
        string: false,
    })
}

/// What `attach` answers for a point whose place is not of its kind.
pub(super) fn not_its_place() -> libbpf_rs::Error {
    libbpf_rs::Error::from(std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// `argN` (N below `count`) as its index.
pub(super) fn arg_index(name: &str, count: u8) -> Option<u8> {
    let n: u8 = name.strip_prefix("arg")?.parse().ok()?;
    (n < count && name == format!("arg{n}")).then_some(n)
}

/// Whether this kernel has uprobes, which uprobes and USDT probes need.
pub(super) fn check_uprobes() -> Result<(), ProbeError> {
    match Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        true => Ok(()),
        false => Err(ProbeError::NoUprobes),
    }
}

/// The program `name` of the object: a copy `configure` chose to load.
pub(super) fn program_named<'obj>(skel: &'obj ProctraceSkel<'_>, name: &str) -> ProgramMut<'obj> {
    use libbpf_rs::skel::Skel;
    let copy = skel.object().progs_mut().find(|p| p.name() == name);
    copy.expect("a copy of the program per probe (probes.bpf.h's PROBE_COPIES)")
}
