//! Why a `--probe` cannot be attached, and why `proctrace probes` cannot
//! list a target's probes: each said in one line that names the spec.

use std::path::PathBuf;

use super::point::MAX_PROBES;

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
