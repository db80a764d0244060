//! What a spec names in its file, and a point it resolved to: the file
//! and place a probe attaches to, and what the recording's header says of
//! it.

use std::fmt;
use std::path::PathBuf;

use super::attempt::AttemptProbe;
use super::clauses::Op;
use crate::event::ProbePoint;

/// Probes attached at the most, all specs together: each is a perf event
/// and a slot of libbpf's USDT tables (256 by default); proctrace.h's
/// MAX_PROBES sizes the kernel's table of them.
pub const MAX_PROBES: usize = 256;

/// One place to attach to: a point of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// What the recording's header says of it.
    pub point: ProbePoint,
    /// The file to attach to; empty for a probe of the kernel.
    pub file: PathBuf,
    /// Where: the file offset of the function (uprobes), or the USDT's
    /// provider and name for libbpf to find.
    pub place: Place,
    /// Attached unasked (a runner's test probes): where it cannot be,
    /// the recording goes on without it.
    pub optional: bool,
    /// What its hits read, keep and must pass.
    pub reads: Reads,
}

/// What a point's hits read, keep and must pass (a spec's `keep` and
/// `if`), as the kernel is told (proctrace.h's `probe_setting`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// Read at each hit: the kept ones first, then those only the filter
    /// needs. A USDT probe's hits read all their arguments, and these
    /// are empty.
    pub values: Vec<Value>,
    /// Of `values`, the first `kept` are sent with the hit.
    pub kept: usize,
    /// The conditions a hit must pass, on the values read (by index; a
    /// USDT probe's by argument).
    pub filter: Vec<(usize, Op, i64)>,
}

/// One value a hit reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value {
    /// Where.
    pub source: Source,
    /// Its bytes (8 unless cast or a narrower field), and whether signed.
    pub size: u8,
    /// See `size`.
    pub signed: bool,
    /// Read as the C string it points to, where it points to one.
    pub string: bool,
}

/// Where a hit reads a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A function's argument at its entry, by the calling convention.
    Arg(u8),
    /// A function's return value.
    Return,
    /// A USDT probe's argument.
    Usdt(u8),
    /// A number in a tracepoint's record: its bytes there.
    Field {
        /// Bytes into the record.
        offset: u16,
    },
    /// Text in a tracepoint's record: a `char[N]` of `size` bytes at
    /// `offset`, or with `size` 0 a `__data_loc char[]`, whose 4 bytes at
    /// `offset` say where the text is (the low 16 bits, from the
    /// record's start).
    FieldText {
        /// Bytes into the record.
        offset: u16,
        /// The array's bytes; 0 for a `__data_loc`.
        size: u16,
    },
}

/// A point a spec names in its file, before it is numbered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// What the header calls it ([`ProbePoint::name`]).
    pub name: String,
    /// Its symbol, where it is not `name` ([`ProbePoint::symbol`]).
    pub symbol: Option<String>,
    /// Where it attaches.
    pub place: Place,
}

/// See [`Resolved::place`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A file offset.
    Offset(u64),
    /// A kernel function, by its name.
    KernelFunction(String),
    /// A tracepoint, by its id, with its record's fields.
    Tracepoint {
        /// Its id in tracefs, which a perf event opens it by.
        id: u64,
        /// The fields of its record, as its `format` lists them.
        fields: Vec<Field>,
    },
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

/// A field of a tracepoint's record, as tracefs's `format` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its C type (`const char *`, `__data_loc char[]`, `pid_t`).
    pub c_type: String,
    /// Bytes into the record.
    pub offset: u16,
    /// Its bytes.
    pub size: u16,
    /// Whether the format calls it signed.
    pub signed: bool,
}

/// What in the file a spec names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A function name or pattern, and an offset into each match.
    Function {
        /// The name, or a pattern with `*` and `?`.
        pattern: String,
        /// Bytes into the function.
        offset: u64,
    },
    /// A tracepoint's category and name (or patterns of them).
    Tracepoint {
        /// Its category (`syscalls`), or a pattern.
        category: String,
        /// Its name (`sys_enter_openat`), or a pattern.
        name: String,
    },
    /// A USDT probe's provider and name (or a pattern of names).
    Usdt {
        /// The provider, as given.
        provider: String,
        /// The name, or a pattern with `*` and `?`.
        name: String,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Function { pattern, .. } => f.write_str(pattern),
            Target::Usdt { provider, name } => write!(f, "{provider}:{name}"),
            Target::Tracepoint { category, name } => write!(f, "{category}:{name}"),
        }
    }
}
