//! Code of no file, such as JIT compilers write: named through the perf
//! map its runtime writes (`/tmp/perf-PID.map`: Node's
//! `--perf-basic-prof`, Python's `-X perf`), after the process is gone.

use super::{At, Modules, Naming, Place, Source};
use crate::event::Frame;
use crate::recorder::wire::Mapping;

/// Addresses in no mapping known, or in one of no file.
pub(crate) struct Jit;

impl Source for Jit {
    /// Whatever native code did not claim.
    fn claims(&self, _: Option<&Mapping>) -> bool {
        true
    }

    fn places(&mut self, at: &At<'_>, modules: &mut Modules, out: &mut Vec<Place>) {
        let module = at.mapping.map(|m| modules.id(&m.path));
        out.push(Place::Jit(at.sample.pid, at.addr, module));
    }

    fn name(&mut self, places: &[Place], naming: &mut Naming<'_>) {
        for place in places {
            let Place::Jit(pid, addr, module) = *place else {
                continue;
            };
            let function = naming
                .symbolizer
                .perf_map(pid as u32, &[addr])
                .pop()
                .flatten();
            let frame = Frame {
                id: 0,
                offset: function.is_none().then_some(addr),
                function,
                module: module.map_or("[unknown]".into(), |m| naming.modules.path(m).to_string()),
                kernel: false,
                inlined: false,
            };
            naming.names.add(*place, vec![frame]);
        }
    }
}
