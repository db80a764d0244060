//! USDT probes: `usdt:FILE:PROVIDER:NAME` fires where a program's
//! `<sys/sdt.h>` probe sites are (found in its `.note.stapsdt`), with
//! their arguments; libbpf reads the same notes to attach, sets the
//! semaphores and works out where each argument is. The arguments that
//! point to C strings are read as text.

use std::path::Path;

use libbpf_rs::{Link, UsdtOpts};

use super::{arg_index, Kind, ALL_PROCESSES};
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::pattern::is_pattern;
use crate::recorder::probes::point::{Found, Place, Resolved, Source, Target, Value};
use crate::recorder::probes::usdt;

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

    fn parse(&self, rest: &str) -> Result<(String, Target), String> {
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
        Ok((file.to_owned(), target))
    }

    fn what(&self) -> &'static str {
        "USDT probe"
    }

    fn resolve(&self, file: &Path, target: &Target) -> Result<Vec<Found>, String> {
        let Target::Usdt { provider, name } = target else {
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
            return Err(libbpf_rs::Error::from(std::io::Error::from(
                std::io::ErrorKind::InvalidInput,
            )));
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
