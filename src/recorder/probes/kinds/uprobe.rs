//! Uprobes and uretprobes: `uprobe:FILE:FUNCTION[+OFFSET]` fires at a
//! function's entry (or an offset into it), `uretprobe:FILE:FUNCTION` at
//! its returns. Functions are found by name or pattern in the file's
//! symbol tables and attached by file offset. Before Linux 5.15, which
//! has no BPF cookies to say which probe fired, each is attached with a
//! copy of the program that knows its id (probes.bpf.h's UPROBE_COPY).

use std::path::Path;

use libbpf_rs::{Link, UprobeOpts};

use super::{check_uprobes, function_value, not_its_place, program_named, Kind, ALL_PROCESSES};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::instructions;
use crate::recorder::probes::pattern::is_pattern;
use crate::recorder::probes::point::{Found, Place, Resolved, Target, Value};
use crate::recorder::probes::symbols::{self, Function, Ifunc};
use crate::recorder::probes::ProbeError;

/// A uprobe, or with `ret` a uretprobe.
pub(super) struct Uprobe {
    ret: bool,
}

pub(super) static UPROBE: Uprobe = Uprobe { ret: false };
pub(super) static URETPROBE: Uprobe = Uprobe { ret: true };

impl Kind for Uprobe {
    fn kind(&self) -> ProbeKind {
        match self.ret {
            false => ProbeKind::Uprobe,
            true => ProbeKind::Uretprobe,
        }
    }

    fn prefixes(&self) -> &'static [&'static str] {
        match self.ret {
            false => &["uprobe", "u"],
            true => &["uretprobe", "ur"],
        }
    }

    fn syntax(&self) -> &'static str {
        match self.ret {
            false => "uprobe:FILE:FUNCTION",
            true => "uretprobe:FILE:FUNCTION",
        }
    }

    fn parse(&self, rest: &str) -> Result<(Option<String>, Target), String> {
        let (file, function) =
            split_function(rest).ok_or("expected FILE:FUNCTION after the probe type")?;
        let (pattern, offset) = match split_offset(function) {
            Some(_) if self.ret => {
                return Err("a uretprobe fires at the return: it takes no +OFFSET".into())
            }
            Some((pattern, offset)) => (pattern, parse_offset(offset)?),
            None => (function, 0),
        };
        if pattern.is_empty() {
            return Err("no FUNCTION".into());
        }
        let target = Target::Function {
            pattern: pattern.to_owned(),
            offset,
        };
        Ok((Some(file.to_owned()), target))
    }

    fn what(&self) -> &'static str {
        "function"
    }

    fn resolve(&self, file: Option<&Path>, target: &Target) -> Result<Vec<Found>, String> {
        let (Some(file), Target::Function { pattern, offset }) = (file, target) else {
            return Ok(Vec::new());
        };
        let found = symbols::functions(file, pattern)?;
        let exact = !is_pattern(pattern);
        let mut points = Vec::new();
        for function in found {
            if function.ifunc == Some(Ifunc::Unresolved) {
                match exact {
                    true => return Err(unresolved_ifunc(&function)),
                    false => continue,
                }
            }
            let at = function.offset + checked_offset(file, &function, *offset)?;
            let with_offset = |name: &str| match offset {
                0 => name.to_owned(),
                n => format!("{name}+{n:#x}"),
            };
            let name = with_offset(&function.names.shown);
            let symbol = with_offset(&function.symbol);
            points.push(Found {
                symbol: (symbol != name).then_some(symbol),
                name,
                place: Place::Offset(at),
            });
        }
        Ok(points)
    }

    fn check(&self, _: &[&Resolved], _: bool) -> Result<(), ProbeError> {
        check_uprobes()
    }

    fn value(&self, _: &Found, name: &str) -> Result<Value, String> {
        let called = if self.ret { "a uretprobe" } else { "a uprobe" };
        function_value(self.ret, name, called)
    }

    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], cookies: bool) {
        if !points.is_empty() && cookies {
            progs.probe_uprobe.set_autoload(true);
        }
    }

    fn copy(&self, point: &Resolved, cookies: bool) -> Option<String> {
        (!cookies).then(|| copy_name(point.point.id))
    }

    fn attach(
        &self,
        skel: &ProctraceSkel<'_>,
        point: &Resolved,
        cookies: bool,
    ) -> libbpf_rs::Result<Link> {
        let Place::Offset(offset) = point.place else {
            return Err(not_its_place());
        };
        // A kernel without cookies refuses any but 0 (EOPNOTSUPP).
        let opts = UprobeOpts {
            cookie: if cookies {
                u64::from(point.point.id)
            } else {
                0
            },
            retprobe: self.ret,
            ..Default::default()
        };
        let copy;
        let program = match self.copy(point, cookies) {
            Some(name) => {
                copy = program_named(skel, &name);
                &copy
            }
            None => &skel.progs.probe_uprobe,
        };
        program.attach_uprobe_with_opts(ALL_PROCESSES, &point.file, offset as usize, opts)
    }
}

/// The name of the copy of the uprobe program for probe `id`.
fn copy_name(id: u32) -> String {
    format!("probe_uprobe_{id}")
}

/// A spec's FILE and FUNCTION: split at the last colon that is not half
/// of a `::` (a path may hold a colon; a Rust or C++ name holds `::`).
fn split_function(rest: &str) -> Option<(&str, &str)> {
    let bytes = rest.as_bytes();
    let single = |&i: &usize| {
        bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':')
    };
    let at = (0..bytes.len()).rev().find(single)?;
    Some((&rest[..at], &rest[at + 1..]))
}

/// A FUNCTION and its `+OFFSET`: at the last `+` where one follows, but
/// not in a C++ operator's name (`operator+=`, `operator++(int)`).
fn split_offset(function: &str) -> Option<(&str, &str)> {
    let (name, offset) = function.rsplit_once('+')?;
    let operator = name.ends_with("operator") || name.ends_with('+') || offset.contains(')');
    (!offset.is_empty() && !operator).then_some((name, offset))
}

/// Why an IFUNC cannot be probed by its name here.
fn unresolved_ifunc(function: &Function) -> String {
    format!(
        "{} is an IFUNC: the dynamic loader picks its code for this CPU at run time, and a \
         static proctrace has no loader to ask which (a dynamically linked proctrace does)",
        function.names.shown
    )
}

/// `offset` into `function`, checked: within it, and at an instruction's
/// start (a uprobe elsewhere would change what the program runs).
fn checked_offset(file: &Path, function: &Function, offset: u64) -> Result<u64, String> {
    if offset == 0 {
        return Ok(0);
    }
    let name = &function.names.shown;
    if function.size == 0 {
        return Err(format!(
            "the symbol table does not say how long {name} is, so +{offset:#x} cannot be checked \
             to be inside it: probe its entry"
        ));
    }
    if offset >= function.size {
        return Err(format!(
            "+{offset:#x} is past the end of {name} ({} bytes)",
            function.size
        ));
    }
    let code = read_code(file, function).map_err(|err| format!("reading {name}'s code: {err}"))?;
    let next = instructions::starts(&code).find(|&start| start >= offset);
    match next {
        Some(start) if start == offset => Ok(offset),
        next => {
            let before = instructions::starts(&code)
                .take_while(|&s| s < offset)
                .last();
            let near: Vec<String> = before
                .into_iter()
                .chain(next)
                .map(|s| format!("+{s:#x}"))
                .collect();
            Err(format!(
                "+{offset:#x} is inside an instruction of {name} (the nearest start at {})",
                near.join(" and ")
            ))
        }
    }
}

/// The bytes of `function`'s code.
fn read_code(file: &Path, function: &Function) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut code = vec![0; function.size as usize];
    let mut opened = std::fs::File::open(file)?;
    opened.seek(SeekFrom::Start(function.offset))?;
    opened.read_exact(&mut code)?;
    Ok(code)
}

fn parse_offset(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("the +OFFSET {text:?} is not a number"))
}
