//! Uprobes and uretprobes: `uprobe:FILE:FUNCTION[+OFFSET]` fires at a
//! function's entry (or an offset into it), `uretprobe:FILE:FUNCTION` at
//! its returns. Functions are found by name or pattern in the file's
//! symbol tables and attached by file offset. Before Linux 5.15, which
//! has no BPF cookies to say which probe fired, each is attached with a
//! copy of the program that knows its id (probes.bpf.h's UPROBE_COPY).

use std::path::Path;

use libbpf_rs::{Link, ProgramMut, UprobeOpts};

use super::{Kind, ALL_PROCESSES};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::point::{Place, Resolved, Target};
use crate::recorder::probes::symbols;

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

    fn parse(&self, rest: &str) -> Result<(String, Target), String> {
        // The file is all before the last colon: a path may hold one, a
        // function may not.
        let (file, function) = rest
            .rsplit_once(':')
            .ok_or("expected FILE:FUNCTION after the probe type")?;
        let (pattern, offset) = match function.split_once('+') {
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
        Ok((file.to_owned(), target))
    }

    fn what(&self) -> &'static str {
        "function"
    }

    fn resolve(&self, file: &Path, target: &Target) -> Result<Vec<(String, Place)>, String> {
        let Target::Function { pattern, offset } = target else {
            return Ok(Vec::new());
        };
        let found = symbols::functions(file, pattern)?;
        let points = found.into_iter().map(|(name, at)| {
            let name = match offset {
                0 => name,
                n => format!("{name}+{n:#x}"),
            };
            (name, Place::Offset(at + offset))
        });
        Ok(points.collect())
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
            return Err(libbpf_rs::Error::from(std::io::Error::from(
                std::io::ErrorKind::InvalidInput,
            )));
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

/// The program `name` of the object: a copy `configure` chose to load.
fn program_named<'obj>(skel: &'obj ProctraceSkel<'_>, name: &str) -> ProgramMut<'obj> {
    use libbpf_rs::skel::Skel;
    let copy = skel.object().progs_mut().find(|p| p.name() == name);
    copy.expect("a copy of the uprobe program per probe (probes.bpf.h)")
}

fn parse_offset(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("the +OFFSET {text:?} is not a number"))
}
