//! Kernel code, named through `/proc/kallsyms`, which is read only when a
//! stack has a kernel frame.

use super::{At, Modules, Naming, Place, Source};
use crate::event::Frame;
use crate::recorder::wire::Mapping;

/// The kernel's addresses, from the kernel stack of a sample.
pub(crate) struct Kernel;

impl Source for Kernel {
    /// No user mapping: the kernel's addresses come apart from them.
    fn claims(&self, _: Option<&Mapping>) -> bool {
        false
    }

    fn named_from_files(&self) -> bool {
        true
    }

    fn places(&mut self, _: &At<'_>, _: &mut Modules, _: &mut Vec<Place>) {}

    fn name(&mut self, places: &[Place], naming: &mut Naming<'_>) {
        let addrs: Vec<u64> = places
            .iter()
            .filter_map(|place| match *place {
                Place::Kernel(addr) => Some(addr),
                _ => None,
            })
            .collect();
        for (addr, symbol) in addrs.iter().zip(naming.symbolizer.kernel(&addrs)) {
            let frame = Frame {
                id: 0,
                offset: symbol.function.is_none().then_some(*addr),
                function: symbol.function,
                module: "[kernel]".into(),
                kernel: true,
                inlined: false,
            };
            naming.names.add(Place::Kernel(*addr), vec![frame]);
        }
    }
}
