//! Probes on the tree (`record --probe`): the specs people write, the
//! files, functions and USDT probes they name, resolved before anything
//! loads so that a typo is one clear line; attaching them is the loader's
//! work, counting their hits the profile's thread's.
//!
//! - `spec`: `uprobe:FILE:FUNCTION[+OFFSET]`, `uretprobe:FILE:FUNCTION`,
//!   `usdt:FILE:PROVIDER:NAME`, parsed;
//! - `files`: a library or program name to the file the tree maps;
//! - `symbols`: a function (or a pattern) to file offsets;
//! - [`runner`]: test runners' probes that name tests (nextest's);
//! - [`usdt`]: the USDT probes a file ships (`.note.stapsdt`).

mod attempt;
mod clauses;
mod error;
pub(crate) mod files;
mod ifunc;
mod instructions;
pub(crate) mod kinds;
mod lines;
mod names;
mod pattern;
mod point;
mod reads;
pub mod runner;
mod spec;
pub(crate) mod symbols;
pub(crate) mod tracefs;
pub mod usdt;

use std::collections::HashMap;
use std::path::PathBuf;

pub use attempt::AttemptProbe;
pub use clauses::{Clauses, Condition, Op, Operand};
pub use error::{ListError, ProbeError};
pub use point::Target;
pub use point::{Found, Place, Reads, Resolved, Source, Value, MAX_PROBES};
pub use spec::ProbeSpec;

use crate::event::{ProbeKind, ProbePoint};

/// What a file offers to probe, as `proctrace probes` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// The file, as the tree maps it.
    pub file: PathBuf,
    /// Its USDT probes, site by site.
    pub usdt: Vec<usdt::UsdtProbe>,
    /// Its functions, in address order.
    pub functions: Vec<ListedFunction>,
}

/// A function a `uprobe:` spec can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFunction {
    /// As people write it: a Rust or C++ symbol demangled.
    pub name: String,
    /// Its symbol as linked.
    pub symbol: String,
    /// The other symbols at its address.
    pub aliases: Vec<String>,
    /// `FILE:LINE` of its entry, where debug information says.
    pub source: Option<String>,
    /// For an IFUNC, whether the code this machine runs was found.
    pub ifunc: Option<bool>,
}

/// The USDT probes and functions of a file (a path, a library or program
/// name), or of every file a live process (a pid) maps, file by file,
/// those `pattern` (a name or pattern of a function, or of a USDT probe's
/// `PROVIDER:NAME` or NAME) names; files with none are left out.
pub fn list(target: &str, pattern: &str) -> Result<Vec<Listing>, ListError> {
    let mut listed = Vec::new();
    for (read, name) in files_of(target)? {
        let unreadable = |why: String| ListError::Unreadable {
            file: name.clone(),
            why,
        };
        if !files::native(&read) {
            return Err(unreadable(NOT_ELF.into()));
        }
        let mut probes = usdt::probes(&read).map_err(unreadable)?;
        probes.retain(|p| {
            let full = format!("{}:{}", p.provider, p.name);
            pattern::glob_match(pattern, &full) || pattern::glob_match(pattern, &p.name)
        });
        let functions = symbols::functions(&read, pattern).map_err(unreadable)?;
        let offsets: Vec<u64> = functions.iter().map(|f| f.offset).collect();
        let sources = lines::sources(&read, &offsets);
        let functions: Vec<ListedFunction> = functions
            .into_iter()
            .zip(sources)
            .map(|(f, source)| ListedFunction {
                name: f.names.shown,
                symbol: f.symbol,
                aliases: f.aliases,
                source,
                ifunc: f.ifunc.map(|i| i == symbols::Ifunc::Resolved),
            })
            .collect();
        if !probes.is_empty() || !functions.is_empty() {
            listed.push(Listing {
                file: name,
                usdt: probes,
                functions,
            });
        }
    }
    Ok(listed)
}

/// A point of the kernel a spec can name, as `proctrace probes` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPoint {
    /// As a spec: `tracepoint:syscalls:sys_enter_openat`, `kprobe:vfs_read`.
    pub spec: String,
    /// A tracepoint's fields a spec can keep, in order; none for a function.
    pub fields: Vec<String>,
}

/// The points of the kernel a spec of a kernel kind names
/// (`tracepoint:syscalls:*`, `kprobe:vfs_*`), in order; `None` for a spec
/// of a file's probe.
pub fn list_kernel(text: &str) -> Option<Result<Vec<KernelPoint>, ProbeError>> {
    let prefix = text.split_once(':')?.0;
    let kind = kinds::by_prefix(prefix)?;
    let (file, target) = kind.parse(&text[prefix.len() + 1..]).ok()?;
    if file.is_some() {
        return None;
    }
    let found = kind
        .resolve(None, &target)
        .map_err(|why| ProbeError::Malformed {
            spec: text.to_owned(),
            why,
        });
    let listed = found.map(|points| {
        points
            .into_iter()
            .map(|point| KernelPoint {
                spec: format!("{}:{}", kind.prefixes()[0], point.name),
                fields: match &point.place {
                    Place::Tracepoint { fields, .. } => (kinds::readable_fields(fields))
                        .map(|f| f.name.clone())
                        .collect(),
                    _ => Vec::new(),
                },
            })
            .collect()
    });
    Some(listed)
}

/// The files `target` stands for: (the file to read, the file to name).
/// A process's files are read through its root, as it sees them.
fn files_of(target: &str) -> Result<Vec<(PathBuf, PathBuf)>, ListError> {
    let no_target = || ListError::NoTarget {
        target: target.to_owned(),
    };
    match target.parse::<u32>() {
        Ok(pid) => mapped_files(pid).ok_or_else(no_target),
        Err(_) => {
            let file = files::find(target).ok_or_else(no_target)?;
            Ok(vec![(file.clone(), file)])
        }
    }
}

/// Why a file that is not a native ELF object has no functions or probes.
const NOT_ELF: &str =
    "not an ELF program or library of this machine (a script? name the file it runs)";

/// The files a live process maps code from, each once, in address order:
/// where to read each, and its name.
fn mapped_files(pid: u32) -> Option<Vec<(PathBuf, PathBuf)>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let executable = fields.nth(1).is_some_and(|perms| perms.contains('x'));
        let path = fields.nth(3).filter(|path| path.starts_with('/'));
        if let Some(path) = path.filter(|_| executable) {
            let name = PathBuf::from(path);
            if !files.iter().any(|(_, known)| *known == name) {
                files.push((PathBuf::from(format!("/proc/{pid}/root{path}")), name));
            }
        }
    }
    Some(files)
}

/// Resolves every spec to the points it attaches to, numbered in order.
pub fn resolve(specs: &[String]) -> Result<Vec<Resolved>, ProbeError> {
    let mut resolved = Vec::new();
    for text in specs {
        let spec = ProbeSpec::parse(text)?;
        let file = spec.file.as_deref().map(|f| file_of(text, f)).transpose()?;
        let kind = kinds::of(spec.kind);
        let places = kind
            .resolve(file.as_deref(), &spec.target)
            .map_err(|why| match &file {
                Some(file) => ProbeError::Unreadable {
                    spec: text.clone(),
                    file: file.clone(),
                    why,
                },
                None => ProbeError::Malformed {
                    spec: text.clone(),
                    why,
                },
            })?;
        let name = spec.target.to_string();
        let lacking = |in_what: String| ProbeError::NotFound {
            spec: text.clone(),
            in_what,
            what: kind.what(),
            name: name.clone(),
        };
        let in_what = file
            .as_ref()
            .map_or("this kernel".to_owned(), |f| f.display().to_string());
        if places.is_empty() {
            return Err(lacking(in_what));
        }
        if resolved.len() + places.len() > MAX_PROBES {
            return Err(ProbeError::TooMany {
                spec: text.clone(),
                in_what,
                matched: places.len(),
            });
        }
        for found in places {
            resolved.push(point(&spec, text, file.clone(), found, resolved.len())?);
        }
    }
    Ok(resolved)
}

/// The file a spec's FILE names, checked to be a native ELF object.
fn file_of(spec: &str, name: &str) -> Result<PathBuf, ProbeError> {
    let file = files::find(name).ok_or_else(|| ProbeError::NoFile {
        spec: spec.to_owned(),
        file: name.to_owned(),
    })?;
    match files::native(&file) {
        true => Ok(file),
        false => Err(ProbeError::Unreadable {
            spec: spec.to_owned(),
            file,
            why: NOT_ELF.into(),
        }),
    }
}

/// Point `id`, `found` by `spec`, with what its hits read.
fn point(
    spec: &ProbeSpec,
    text: &str,
    file: Option<PathBuf>,
    found: Found,
    id: usize,
) -> Result<Resolved, ProbeError> {
    let kind = kinds::of(spec.kind);
    let reads = reads::of(kind, &found, &spec.clauses).map_err(|why| ProbeError::Malformed {
        spec: text.to_owned(),
        why,
    })?;
    let file = file.unwrap_or_default();
    let point = ProbePoint {
        id: id as u32,
        spec: text.to_owned(),
        kind: spec.kind,
        file: file.display().to_string(),
        name: found.name,
        symbol: found.symbol,
        values: spec.clauses.keep.iter().map(|v| v.to_string()).collect(),
        filter: filter_text(&spec.clauses),
    };
    Ok(Resolved {
        point,
        file,
        place: found.place,
        optional: false,
        reads,
    })
}

/// A spec's filter as the header says it: its conditions, normalised.
fn filter_text(clauses: &Clauses) -> Option<String> {
    let conditions: Vec<String> = clauses.filter.iter().map(|c| c.to_string()).collect();
    (!conditions.is_empty()).then(|| conditions.join(" && "))
}

/// The (entry, return) ids attached to the same function of the same
/// file (or of the kernel), as uprobe and uretprobe, kprobe and
/// kretprobe, or fentry and fexit: the time between their hits on a
/// thread is a call's.
pub fn latency_pairs(points: &[ProbePoint]) -> Vec<(u32, u32)> {
    let return_of = |kind| match kind {
        ProbeKind::Uprobe => Some(ProbeKind::Uretprobe),
        ProbeKind::Kprobe => Some(ProbeKind::Kretprobe),
        ProbeKind::Fentry => Some(ProbeKind::Fexit),
        _ => None,
    };
    points
        .iter()
        .filter_map(|entry| Some((entry, return_of(entry.kind)?)))
        .flat_map(|(entry, ret_kind)| {
            points
                .iter()
                .filter(move |ret| {
                    ret.kind == ret_kind && ret.file == entry.file && ret.name == entry.name
                })
                .map(move |ret| (entry.id, ret.id))
        })
        .collect()
}

/// The probes whose hits tell a runner's test attempts, by id.
pub fn attempt_probes(resolved: &[Resolved]) -> HashMap<u32, AttemptProbe> {
    resolved
        .iter()
        .filter_map(|r| match r.place {
            Place::Usdt {
                attempt: Some(attempt),
                ..
            } => Some((r.point.id, attempt)),
            _ => None,
        })
        .collect()
}
