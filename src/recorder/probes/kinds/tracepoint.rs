//! Tracepoints: `tracepoint:CATEGORY:NAME` fires where the kernel passes
//! one of its static probes (`syscalls:sys_enter_openat`,
//! `sched:sched_process_exec`), on every kernel. tracefs lists them, with
//! the layout of each record (`events/CATEGORY/NAME/format`): a spec's
//! values are the record's fields, read by name at their offsets. The
//! program is attached through a perf event on the tracepoint's id; its
//! cookie says which probe fired, and before Linux 5.15, which has none,
//! a copy of the program that knows its probe (probes.bpf.h's
//! PROBE_COPY: the record's own id, `common_type`, is hidden from BPF
//! programs, whose first 8 bytes of the record hold the registers).

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::path::Path;

use libbpf_rs::{Link, PerfEventOpts};

use super::{not_its_place, program_named, Kind};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::pattern::glob_match;
use crate::recorder::probes::point::{Field, Found, Place, Resolved, Source, Target, Value};
use crate::recorder::probes::tracefs;
use crate::recorder::probes::ProbeError;

/// A tracepoint.
pub(super) struct Tracepoint;

/// Where the kernel lists its tracepoint PMU, which perf events open
/// tracepoints through.
const TRACEPOINT_PMU: &str = "/sys/bus/event_source/devices/tracepoint";

/// The first bytes of a record, which hold a pointer to the registers
/// while a BPF program runs (perf_trace_run_bpf_submit): `common_type`,
/// `common_flags`, `common_preempt_count` and `common_pid` are gone.
const HIDDEN: usize = 8;

impl Kind for Tracepoint {
    fn kind(&self) -> ProbeKind {
        ProbeKind::Tracepoint
    }

    fn prefixes(&self) -> &'static [&'static str] {
        &["tracepoint", "t"]
    }

    fn syntax(&self) -> &'static str {
        "tracepoint:CATEGORY:NAME"
    }

    fn parse(&self, rest: &str) -> Result<(Option<String>, Target), String> {
        let (category, name) = rest
            .split_once(':')
            .ok_or("expected CATEGORY:NAME after the probe type")?;
        if category.is_empty() || name.is_empty() || name.contains(':') {
            return Err("expected tracepoint:CATEGORY:NAME".into());
        }
        let target = Target::Tracepoint {
            category: category.to_owned(),
            name: name.to_owned(),
        };
        Ok((None, target))
    }

    fn what(&self) -> &'static str {
        "tracepoint"
    }

    fn resolve(&self, _: Option<&Path>, target: &Target) -> Result<Vec<Found>, String> {
        let Target::Tracepoint { category, name } = target else {
            return Ok(Vec::new());
        };
        tracefs::with_events(|events| matching(events, category, name))
            .map_err(|err| format!("reading the tracepoints in tracefs: {err}"))
    }

    fn check(&self, points: &[&Resolved], _: bool) -> Result<(), ProbeError> {
        match (Path::new(TRACEPOINT_PMU).exists(), points.first()) {
            (false, Some(point)) => Err(ProbeError::ProbeKernel {
                probe: point.point.spec.clone(),
                why: format!("this kernel has no tracepoint events ({TRACEPOINT_PMU} is missing)"),
            }),
            _ => Ok(()),
        }
    }

    fn value(&self, point: &Found, name: &str) -> Result<Value, String> {
        let Place::Tracepoint { fields, .. } = &point.place else {
            return Err("not a tracepoint".into());
        };
        let Some(field) = fields.iter().find(|f| f.name == name) else {
            let names: Vec<&str> = readable_fields(fields).map(|f| f.name.as_str()).collect();
            return Err(format!(
                "{} has no field {name:?}: its fields are {}",
                point.name,
                names.join(", ")
            ));
        };
        if usize::from(field.offset) < HIDDEN {
            return Err(format!(
                "{name} is one of the fields every record starts with, which BPF programs \
                 cannot read (the kernel keeps the registers there while they run)"
            ));
        }
        field_value(field).ok_or_else(|| {
            format!(
                "the field {name} of {} is a {} of {} bytes: neither a number nor text",
                point.name, field.c_type, field.size
            )
        })
    }

    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], cookies: bool) {
        if !points.is_empty() && cookies {
            progs.probe_tracepoint.set_autoload(true);
        }
    }

    fn copy(&self, point: &Resolved, cookies: bool) -> Option<String> {
        (!cookies).then(|| format!("probe_tracepoint_{}", point.point.id))
    }

    fn attach(
        &self,
        skel: &ProctraceSkel<'_>,
        point: &Resolved,
        cookies: bool,
    ) -> libbpf_rs::Result<Link> {
        let Place::Tracepoint { id, .. } = point.place else {
            return Err(not_its_place());
        };
        let event = tracefs::open_tracepoint(id)?;
        let link = match self.copy(point, cookies) {
            Some(name) => program_named(skel, &name).attach_perf_event(event.as_raw_fd())?,
            None => {
                let opts = PerfEventOpts {
                    cookie: u64::from(point.point.id),
                    ..Default::default()
                };
                skel.progs
                    .probe_tracepoint
                    .attach_perf_event_with_opts(event.as_raw_fd(), opts)?
            }
        };
        // The link closes it.
        let _ = event.into_raw_fd();
        Ok(link)
    }
}

/// The fields of a record a program can read: those past the ones every
/// record starts with.
pub(crate) fn readable_fields(fields: &[Field]) -> impl Iterator<Item = &Field> {
    fields.iter().filter(|f| usize::from(f.offset) >= HIDDEN)
}

/// The tracepoints under `events` whose category and name the patterns
/// match, by category and name, each with its id and fields.
fn matching(events: &Path, category: &str, name: &str) -> io::Result<Vec<Found>> {
    let mut found = Vec::new();
    for (cat, dir) in entries(events, category)? {
        for (event, path) in entries(&dir, name)? {
            let Ok(format) = std::fs::read_to_string(path.join("format")) else {
                continue;
            };
            let id = tracefs::id(events, &cat, &event)?;
            found.push(Found {
                name: format!("{cat}:{event}"),
                symbol: None,
                place: Place::Tracepoint {
                    id,
                    fields: fields(&format),
                },
            });
        }
    }
    Ok(found)
}

/// The directories under `dir` whose names `pattern` matches, in order.
fn entries(dir: &Path, pattern: &str) -> io::Result<Vec<(String, std::path::PathBuf)>> {
    let mut entries: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let wanted = glob_match(pattern, &name) && entry.path().is_dir();
            wanted.then(|| (name, entry.path()))
        })
        .collect();
    entries.sort();
    Ok(entries)
}

/// The fields a tracepoint's `format` lists:
/// `field:TYPE NAME; offset:N; size:N; signed:N;` (tab-separated).
fn fields(format: &str) -> Vec<Field> {
    format
        .lines()
        .filter_map(|line| {
            let mut parts = line.trim().split(';').map(str::trim);
            let declaration = parts.next()?.strip_prefix("field:")?;
            let mut number =
                |key: &str| -> Option<u16> { parts.next()?.strip_prefix(key)?.parse().ok() };
            let (offset, size, signed) = (number("offset:")?, number("size:")?, number("signed:")?);
            let (c_type, name) = declaration.rsplit_once(' ')?;
            // `char prev_comm[16]`: the brackets are the type's.
            let (name, array) = match name.split_once('[') {
                Some((name, rest)) => (name, format!("[{rest}")),
                None => (name, String::new()),
            };
            Some(Field {
                name: name.to_owned(),
                c_type: format!("{}{array}", c_type.trim()),
                offset,
                size,
                signed: signed != 0,
            })
        })
        .collect()
}

/// Where a field is read: a number of its C type's width (a syscall's
/// `int dfd` is 8 bytes in the record, of which the int is 4, so that
/// `dfd == -100` holds for AT_FDCWD), or text (`char[N]`, `__data_loc
/// char[]`); `None` for anything else.
fn field_value(field: &Field) -> Option<Value> {
    let c_type = field.c_type.trim_start_matches("const ");
    let text = |source| Value {
        source,
        size: 8,
        signed: false,
        string: true,
    };
    if c_type.starts_with("__data_loc char[") {
        return Some(text(Source::FieldText {
            offset: field.offset,
            size: 0,
        }));
    }
    if c_type.starts_with("char[") || c_type.starts_with("unsigned char[") {
        return Some(text(Source::FieldText {
            offset: field.offset,
            size: field.size,
        }));
    }
    if c_type.contains('[') || field.size > 8 || !field.size.is_power_of_two() {
        return None;
    }
    let declared = match c_type {
        "int" | "signed int" => Some((4, true)),
        "unsigned int" | "unsigned" => Some((4, false)),
        "short" | "signed short" => Some((2, true)),
        "unsigned short" => Some((2, false)),
        "char" | "signed char" => Some((1, true)),
        "unsigned char" | "bool" => Some((1, false)),
        _ => None,
    };
    let (size, signed) = declared
        .filter(|(size, _)| *size <= field.size)
        .unwrap_or((field.size, field.signed));
    Some(Value {
        source: Source::Field {
            offset: field.offset,
        },
        size: size as u8,
        signed,
        string: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAT: &str = "name: sys_enter_openat
ID: 782
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;
\tfield:char prev_comm[16];\toffset:32;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] name;\toffset:48;\tsize:4;\tsigned:0;

print fmt: \"dfd: 0x%08lx\", ((unsigned long)(REC->dfd))
";

    #[test]
    fn fields_are_read_by_name_from_the_format() {
        let fields = fields(OPENAT);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "common_type",
                "common_pid",
                "__syscall_nr",
                "dfd",
                "filename",
                "prev_comm",
                "name"
            ]
        );
        let value = |name: &str| field_value(fields.iter().find(|f| f.name == name).unwrap());
        let dfd = value("dfd").unwrap();
        assert_eq!(
            (dfd.source, dfd.size, dfd.signed),
            (Source::Field { offset: 16 }, 4, true)
        );
        let filename = value("filename").unwrap();
        assert_eq!((filename.size, filename.string), (8, false));
        let comm = value("prev_comm").unwrap();
        assert_eq!(
            comm.source,
            Source::FieldText {
                offset: 32,
                size: 16
            }
        );
        assert!(comm.string);
        let name = value("name").unwrap();
        assert_eq!(
            name.source,
            Source::FieldText {
                offset: 48,
                size: 0
            }
        );
    }

    #[test]
    fn specs_name_a_category_and_a_tracepoint() {
        let (file, target) = Tracepoint.parse("syscalls:sys_enter_open*").unwrap();
        assert_eq!(file, None);
        assert_eq!(target.to_string(), "syscalls:sys_enter_open*");
        for bad in ["syscalls", ":x", "syscalls:", "a:b:c"] {
            assert!(Tracepoint.parse(bad).is_err(), "{bad}");
        }
    }
}
