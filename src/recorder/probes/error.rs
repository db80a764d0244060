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
    /// The file (or the kernel) has no function, USDT probe or
    /// tracepoint by that name.
    #[error("--probe {spec:?}: {in_what} has no {what} {name:?}")]
    NotFound {
        /// The spec as given.
        spec: String,
        /// The file it resolved to, or `this kernel`.
        in_what: String,
        /// `function`, `USDT probe`, `tracepoint`.
        what: &'static str,
        /// The function or probe (pattern) looked for.
        name: String,
    },
    /// A pattern matched more than can be attached.
    #[error("--probe {spec:?}: {matched} matches in {in_what}, past the {MAX_PROBES} probes proctrace attaches: narrow the pattern")]
    TooMany {
        /// The spec as given.
        spec: String,
        /// The file it resolved to, or `this kernel`.
        in_what: String,
        /// How many points it matched.
        matched: usize,
    },
    /// This kernel cannot attach a probe of this kind (or no more of them).
    #[error("--probe {probe:?}: {why}")]
    ProbeKernel {
        /// The spec as given.
        probe: String,
        /// What the kernel lacks.
        why: String,
    },
    /// The kernel has no uprobes.
    #[error("--probe needs a kernel built with uprobes (CONFIG_UPROBE_EVENTS): /sys/bus/event_source/devices/uprobe is missing")]
    NoUprobes,
    /// Before BPF cookies libbpf finds a USDT probe by its address, which
    /// a shared library or a position-independent program has per process.
    #[error("--probe {probe:?}: a USDT probe in a shared library or position-independent program ({}) needs Linux 5.15 (BPF cookies)", file.display())]
    UsdtNeedsCookies {
        /// The spec as given.
        probe: String,
        /// Its file.
        file: PathBuf,
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
