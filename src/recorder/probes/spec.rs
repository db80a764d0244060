//! `--probe` specs, as bpftrace writes its probes:
//! `uprobe:FILE:FUNCTION[+OFFSET]`, `uretprobe:FILE:FUNCTION`,
//! `usdt:FILE:PROVIDER:NAME`.

use std::fmt;

use super::ProbeError;
use crate::event::ProbeKind;

/// A parsed `--probe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// How it attaches.
    pub kind: ProbeKind,
    /// A path, or a library or program name to look up.
    pub file: String,
    /// What in the file it names.
    pub target: Target,
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
        }
    }
}

impl ProbeSpec {
    /// Parses a spec; what is wrong with one is said in a line naming it.
    pub fn parse(text: &str) -> Result<ProbeSpec, ProbeError> {
        let malformed = |why: &str| ProbeError::Malformed {
            spec: text.to_owned(),
            why: why.to_owned(),
        };
        let (kind, rest) = text.split_once(':').ok_or_else(|| {
            malformed(
                "expected uprobe:FILE:FUNCTION, uretprobe:FILE:FUNCTION or usdt:FILE:PROVIDER:NAME",
            )
        })?;
        let kind = match kind {
            "uprobe" | "u" => ProbeKind::Uprobe,
            "uretprobe" | "ur" => ProbeKind::Uretprobe,
            "usdt" | "U" => ProbeKind::Usdt,
            _ => {
                return Err(malformed(&format!(
                    "unknown probe type {kind:?}: uprobe, uretprobe or usdt"
                )))
            }
        };
        // The file is all before the last one (usdt: two) colons: a path
        // may hold a colon, a function or provider may not.
        let parts: Vec<&str> = rest.rsplitn(3, ':').collect();
        let (file, target) = match kind {
            ProbeKind::Usdt => match parts.as_slice() {
                [name, provider, file] => (*file, usdt_target(provider, name)),
                _ => return Err(malformed("expected usdt:FILE:PROVIDER:NAME")),
            },
            _ => match rest.rsplit_once(':') {
                Some((file, function)) => (file, function_target(kind, function)),
                None => return Err(malformed("expected FILE:FUNCTION after the probe type")),
            },
        };
        if file.is_empty() {
            return Err(malformed("no FILE"));
        }
        let target = target.map_err(|why| malformed(&why))?;
        if let Target::Usdt { provider, .. } = &target {
            if provider.is_empty() || super::pattern::is_pattern(provider) {
                return Err(malformed("the PROVIDER must be given, without a wildcard"));
            }
        }
        Ok(ProbeSpec {
            kind,
            file: file.to_owned(),
            target,
        })
    }
}

fn usdt_target(provider: &str, name: &str) -> Result<Target, String> {
    if name.is_empty() {
        return Err("no probe NAME".into());
    }
    Ok(Target::Usdt {
        provider: provider.to_owned(),
        name: name.to_owned(),
    })
}

fn function_target(kind: ProbeKind, function: &str) -> Result<Target, String> {
    let (pattern, offset) = match function.split_once('+') {
        Some((pattern, offset)) => {
            if kind == ProbeKind::Uretprobe {
                return Err("a uretprobe fires at the return: it takes no +OFFSET".into());
            }
            (pattern, parse_offset(offset)?)
        }
        None => (function, 0),
    };
    if pattern.is_empty() {
        return Err("no FUNCTION".into());
    }
    Ok(Target::Function {
        pattern: pattern.to_owned(),
        offset,
    })
}

fn parse_offset(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("the +OFFSET {text:?} is not a number"))
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
        assert_eq!((spec.kind, spec.file.as_str()), (ProbeKind::Uprobe, "libc"));
        assert_eq!(spec.target, function("malloc", 0));
        let spec = ProbeSpec::parse("uprobe:/usr/bin/a:b:main+0x10").unwrap();
        assert_eq!(spec.file, "/usr/bin/a:b");
        assert_eq!(spec.target, function("main", 16));
        let spec = ProbeSpec::parse("uretprobe:/bin/bash:read*").unwrap();
        assert_eq!(spec.kind, ProbeKind::Uretprobe);
        let spec = ProbeSpec::parse("usdt:/usr/bin/python3.13:python:function__entry").unwrap();
        assert_eq!(spec.file, "/usr/bin/python3.13");
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
            ("kprobe:libc:malloc", "unknown probe type \"kprobe\""),
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
