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
mod files;
mod pattern;
pub mod runner;
mod spec;
mod symbols;
pub mod usdt;

use std::collections::HashMap;
use std::path::PathBuf;

pub use attempt::AttemptProbe;
pub use spec::{ProbeSpec, Target};

use crate::event::{ProbeKind, ProbePoint};

/// Probes attached at the most, all specs together: each is a perf event
/// and a slot of libbpf's USDT tables (256 by default); proctrace.h's
/// MAX_PROBES sizes the kernel's table of them.
pub const MAX_PROBES: usize = 256;

/// Why a `--probe` cannot be attached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The spec does not parse.
    #[error("--probe {spec:?}: {why}")]
    Malformed {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// No such file, and no library or program of that name.
    #[error("--probe {spec:?}: no file {file:?} (not a path, nor a library in ld.so.cache, nor a program on PATH)")]
    NoFile {
        /// The spec as given.
        spec: String,
        /// Its FILE.
        file: String,
    },
    /// The file cannot be read as an ELF object.
    #[error("--probe {spec:?}: reading {}: {why}", file.display())]
    Unreadable {
        /// The spec as given.
        spec: String,
        /// The file it resolved to.
        file: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The file has no function or USDT probe by that name.
    #[error("--probe {spec:?}: {} has no {what} {name:?}", file.display())]
    NotFound {
        /// The spec as given.
        spec: String,
        /// The file it resolved to.
        file: PathBuf,
        /// `function` or `USDT probe`.
        what: &'static str,
        /// The function or probe (pattern) looked for.
        name: String,
    },
    /// A pattern matched more than can be attached.
    #[error("--probe {spec:?}: {matched} matches in {}, past the {MAX_PROBES} probes proctrace attaches: narrow the pattern", file.display())]
    TooMany {
        /// The spec as given.
        spec: String,
        /// The file it resolved to.
        file: PathBuf,
        /// How many points it matched.
        matched: usize,
    },
}

/// What `proctrace probes` lists cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// Neither a file nor a live process.
    #[error("{target:?}: no such process, and no such file (nor a library in ld.so.cache, nor a program on PATH)")]
    NoTarget {
        /// The target as given.
        target: String,
    },
    /// A file that cannot be read as ELF.
    #[error("reading {}: {why}", file.display())]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// The USDT probes of a file (a path, a library or program name), or of
/// every file a live process (a pid) maps, file by file; files without
/// probes are left out.
pub fn list_usdt(target: &str) -> Result<Vec<(PathBuf, Vec<usdt::UsdtProbe>)>, ListError> {
    let no_target = || ListError::NoTarget {
        target: target.to_owned(),
    };
    // (the file to read, the file to name): a process's files are read
    // through its root, as it sees them.
    let files: Vec<(PathBuf, PathBuf)> = match target.parse::<u32>() {
        Ok(pid) => mapped_files(pid).ok_or_else(no_target)?,
        Err(_) => {
            let file = files::find(target).ok_or_else(no_target)?;
            vec![(file.clone(), file)]
        }
    };
    let mut listed = Vec::new();
    for (read, name) in files {
        let unreadable = |why: String| ListError::Unreadable {
            file: name.clone(),
            why,
        };
        if !files::native(&read) {
            return Err(unreadable(NOT_ELF.into()));
        }
        let probes = usdt::probes(&read).map_err(unreadable)?;
        if !probes.is_empty() {
            listed.push((name, probes));
        }
    }
    Ok(listed)
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

/// One place to attach to: a point of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What the recording's header says of it.
    pub point: ProbePoint,
    /// The file to attach to.
    pub file: PathBuf,
    /// Where: the file offset of the function (uprobes), or the USDT's
    /// provider and name for libbpf to find.
    pub place: Place,
    /// Attached unasked (a runner's test probes): where it cannot be,
    /// the recording goes on without it.
    pub optional: bool,
}

/// See [`Resolved::place`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A file offset.
    Offset(u64),
    /// A USDT probe.
    Usdt {
        /// Its provider.
        provider: String,
        /// Its name.
        name: String,
        /// Bit i: argument i is read as a C string where it points to one.
        strings: u32,
        /// What its arguments say of a test, where a runner fires it.
        attempt: Option<AttemptProbe>,
    },
}

/// Resolves every spec to the points it attaches to, numbered in order.
pub fn resolve(specs: &[String]) -> Result<Vec<Resolved>, ProbeError> {
    let mut resolved = Vec::new();
    for text in specs {
        let spec = ProbeSpec::parse(text)?;
        let file = files::find(&spec.file).ok_or_else(|| ProbeError::NoFile {
            spec: text.clone(),
            file: spec.file.clone(),
        })?;
        let unreadable = |why: String| ProbeError::Unreadable {
            spec: text.clone(),
            file: file.clone(),
            why,
        };
        if !files::native(&file) {
            return Err(unreadable(NOT_ELF.into()));
        }
        let places: Vec<(String, Place)> = match &spec.target {
            Target::Function { pattern, offset } => symbols::functions(&file, pattern)
                .map_err(unreadable)?
                .into_iter()
                .map(|(name, at)| {
                    let name = match offset {
                        0 => name,
                        n => format!("{name}+{n:#x}"),
                    };
                    (name, Place::Offset(at + offset))
                })
                .collect(),
            Target::Usdt { provider, name } => usdt::matching(&file, provider, name)
                .map_err(unreadable)?
                .into_iter()
                .map(|m| {
                    let label = format!("{}:{}", m.provider, m.name);
                    let place = Place::Usdt {
                        provider: m.provider,
                        name: m.name,
                        strings: m.strings,
                        attempt: m.attempt,
                    };
                    (label, place)
                })
                .collect(),
        };
        if places.is_empty() {
            return Err(ProbeError::NotFound {
                spec: text.clone(),
                file,
                what: match spec.kind {
                    ProbeKind::Usdt => "USDT probe",
                    _ => "function",
                },
                name: spec.target.to_string(),
            });
        }
        if resolved.len() + places.len() > MAX_PROBES {
            return Err(ProbeError::TooMany {
                spec: text.clone(),
                file,
                matched: places.len(),
            });
        }
        for (name, place) in places {
            let point = ProbePoint {
                id: resolved.len() as u32,
                spec: text.clone(),
                kind: spec.kind,
                file: file.display().to_string(),
                name,
            };
            resolved.push(Resolved {
                point,
                file: file.clone(),
                place,
                optional: false,
            });
        }
    }
    Ok(resolved)
}

/// The (uprobe, uretprobe) ids attached to the same function of the same
/// file: the time between their hits on a thread is a call's.
pub fn latency_pairs(points: &[ProbePoint]) -> Vec<(u32, u32)> {
    let entries = points.iter().filter(|p| p.kind == ProbeKind::Uprobe);
    entries
        .flat_map(|entry| {
            points
                .iter()
                .filter(|ret| {
                    ret.kind == ProbeKind::Uretprobe
                        && ret.file == entry.file
                        && ret.name == entry.name
                })
                .map(|ret| (entry.id, ret.id))
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
