//! `--probe` specs, as bpftrace writes its probes: `KIND:` then what the
//! kind takes (see [`super::kinds`]): `uprobe:FILE:FUNCTION[+OFFSET]`,
//! `uretprobe:FILE:FUNCTION`, `usdt:FILE:PROVIDER:NAME`,
//! `tracepoint:CATEGORY:NAME`, `kprobe:FUNCTION` (and `kretprobe:`,
//! `fentry:`, `fexit:`).

use super::clauses::{self, Clauses};
use super::error::ProbeError;
use super::kinds;
use super::point::Target;
use crate::event::ProbeKind;

/// A parsed `--probe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// How it attaches.
    pub kind: ProbeKind,
    /// A path, or a library or program name to look up; none for a probe
    /// of the kernel.
    pub file: Option<String>,
    /// What in the file it names.
    pub target: Target,
    /// What its hits keep, and the filter they must pass.
    pub clauses: Clauses,
}

impl ProbeSpec {
    /// Parses a spec; what is wrong with one is said in a line naming it.
    pub fn parse(text: &str) -> Result<ProbeSpec, ProbeError> {
        let malformed = |why: String| ProbeError::Malformed {
            spec: text.to_owned(),
            why,
        };
        let (head, clauses) = clauses::split(text).map_err(malformed)?;
        let (prefix, rest) = head
            .split_once(':')
            .ok_or_else(|| malformed(format!("expected {}", kinds::syntaxes())))?;
        let kind = kinds::by_prefix(prefix).ok_or_else(|| {
            malformed(format!("unknown probe type {prefix:?}: {}", kinds::names()))
        })?;
        let (file, target) = kind.parse(rest).map_err(malformed)?;
        if file.as_deref() == Some("") {
            return Err(malformed("no FILE".into()));
        }
        Ok(ProbeSpec {
            kind: kind.kind(),
            file,
            target,
            clauses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(pattern: &str, offset: u64) -> Target {
        Target::Function {
            pattern: pattern.into(),
            offset,
        }
    }

    #[test]
    fn specs_parse_as_bpftrace_writes_them() {
        let spec = ProbeSpec::parse("uprobe:libc:malloc").unwrap();
        assert_eq!(
            (spec.kind, spec.file.as_deref()),
            (ProbeKind::Uprobe, Some("libc"))
        );
        assert_eq!(spec.target, function("malloc", 0));
        let spec = ProbeSpec::parse("uprobe:/usr/bin/a:b:main+0x10").unwrap();
        assert_eq!(spec.file.as_deref(), Some("/usr/bin/a:b"));
        assert_eq!(spec.target, function("main", 16));
        let spec = ProbeSpec::parse("uretprobe:/bin/bash:read*").unwrap();
        assert_eq!(spec.kind, ProbeKind::Uretprobe);
        let spec = ProbeSpec::parse("usdt:/usr/bin/python3.13:python:function__entry").unwrap();
        assert_eq!(spec.file.as_deref(), Some("/usr/bin/python3.13"));
        assert_eq!(
            spec.target,
            Target::Usdt {
                provider: "python".into(),
                name: "function__entry".into()
            }
        );
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (spec, says) in [
            ("malloc", "expected uprobe:FILE:FUNCTION"),
            ("kprobes:x", "unknown probe type \"kprobes\""),
            ("uprobe:libc", "expected FILE:FUNCTION"),
            ("uprobe::malloc", "no FILE"),
            ("uprobe:libc:", "no FUNCTION"),
            ("uprobe:libc:malloc+x", "+OFFSET \"x\" is not a number"),
            ("uretprobe:libc:malloc+4", "takes no +OFFSET"),
            (
                "usdt:python3:function__entry",
                "expected usdt:FILE:PROVIDER:NAME",
            ),
            ("usdt:python3:py*:x", "PROVIDER must be given"),
        ] {
            let err = ProbeSpec::parse(spec).unwrap_err().to_string();
            assert!(err.contains(says), "{spec}: {err}");
            assert!(err.starts_with(&format!("--probe {spec:?}")), "{err}");
        }
    }
}
