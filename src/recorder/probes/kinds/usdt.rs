//! USDT probes: `usdt:FILE:PROVIDER:NAME` fires where a program's
//! `<sys/sdt.h>` probe sites are (found in its `.note.stapsdt`), with
//! their arguments; libbpf reads the same notes to attach, sets the
//! semaphores and works out where each argument is. The arguments that
//! point to C strings are read as text.

use std::path::Path;

use libbpf_rs::{Link, UsdtOpts};

use super::{arg_index, check_uprobes, not_its_place, Kind, ALL_PROCESSES};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::pattern::is_pattern;
use crate::recorder::probes::point::{Found, Place, Resolved, Source, Target, Value};
use crate::recorder::probes::usdt;
use crate::recorder::probes::ProbeError;

/// A USDT probe.
pub(super) struct Usdt;

impl Kind for Usdt {
    fn kind(&self) -> ProbeKind {
        ProbeKind::Usdt
    }

    fn prefixes(&self) -> &'static [&'static str] {
        &["usdt", "U"]
    }

    fn syntax(&self) -> &'static str {
        "usdt:FILE:PROVIDER:NAME"
    }

    fn parse(&self, rest: &str) -> Result<(Option<String>, Target), String> {
        // The file is all before the last two colons: a path may hold one.
        let parts: Vec<&str> = rest.rsplitn(3, ':').collect();
        let [name, provider, file] = parts[..] else {
            return Err("expected usdt:FILE:PROVIDER:NAME".into());
        };
        if name.is_empty() {
            return Err("no probe NAME".into());
        }
        if provider.is_empty() || is_pattern(provider) {
            return Err("the PROVIDER must be given, without a wildcard".into());
        }
        let target = Target::Usdt {
            provider: provider.to_owned(),
            name: name.to_owned(),
        };
        Ok((Some(file.to_owned()), target))
    }

    fn what(&self) -> &'static str {
        "USDT probe"
    }

    fn resolve(&self, file: Option<&Path>, target: &Target) -> Result<Vec<Found>, String> {
        let (Some(file), Target::Usdt { provider, name }) = (file, target) else {
            return Ok(Vec::new());
        };
        let matched = usdt::matching(file, provider, name)?;
        let points = matched.into_iter().map(|m| Found {
            name: format!("{}:{}", m.provider, m.name),
            symbol: None,
            place: Place::Usdt {
                provider: m.provider,
                name: m.name,
                strings: m.strings,
                attempt: m.attempt,
            },
        });
        Ok(points.collect())
    }

    /// Before BPF cookies (5.15) libbpf tells USDT probes apart by their
    /// address, which it can only for programs linked at fixed addresses.
    fn check(&self, points: &[&Resolved], cookies: bool) -> Result<(), ProbeError> {
        check_uprobes()?;
        match points
            .iter()
            .find(|p| !cookies && !fixed_addresses(&p.file))
        {
            Some(p) => Err(ProbeError::UsdtNeedsCookies {
                probe: p.point.spec.clone(),
                file: p.file.clone(),
            }),
            None => Ok(()),
        }
    }

    fn value(&self, _: &Found, name: &str) -> Result<Value, String> {
        let n = arg_index(name, 6)
            .ok_or_else(|| format!("a USDT probe has its arguments arg0 to arg5, not {name:?}"))?;
        Ok(Value {
            source: Source::Usdt(n),
            size: 8,
            signed: true,
            string: false,
        })
    }

    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], _: bool) {
        if !points.is_empty() {
            progs.probe_usdt.set_autoload(true);
        }
    }

    fn attach(
        &self,
        skel: &ProctraceSkel<'_>,
        point: &Resolved,
        _: bool,
    ) -> libbpf_rs::Result<Link> {
        let Place::Usdt { provider, name, .. } = &point.place else {
            return Err(not_its_place());
        };
        let id = point.point.id;
        let opts = UsdtOpts {
            cookie: u64::from(id),
            ..Default::default()
        };
        skel.progs.probe_usdt.attach_usdt_with_opts(
            ALL_PROCESSES,
            &point.file,
            provider,
            name,
            opts,
        )
    }
}

/// Whether `file` is an ELF executable loaded at the addresses it was
/// linked for (`ET_EXEC`), not a shared library or PIE (`ET_DYN`).
fn fixed_addresses(file: &Path) -> bool {
    use std::io::Read;
    const ET_EXEC: u16 = 2;
    let mut head = [0u8; 18];
    let read = std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut head));
    // e_ident[EI_DATA] (1: little-endian), then e_type at offset 16.
    let e_type = match head[5] {
        1 => u16::from_le_bytes([head[16], head[17]]),
        _ => u16::from_be_bytes([head[16], head[17]]),
    };
    read.is_ok() && e_type == ET_EXEC
}
