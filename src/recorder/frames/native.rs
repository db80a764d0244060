//! Native code in a file: an address is the file offset it maps, named
//! from the file alone (its symbols, and its DWARF's lines and inlined
//! calls), so a process that is gone is named as well as a live one.

use std::collections::BTreeMap;
use std::path::Path;

use super::{At, Modules, Naming, Place, Source};
use crate::event::Frame;
use crate::recorder::wire::Mapping;

/// Code mapped from a file on disk.
pub(crate) struct Native;

impl Source for Native {
    /// A mapping of a file: `//anon`, `[vdso]`, `[anon:…]` have nothing
    /// on disk to read.
    fn claims(&self, mapping: Option<&Mapping>) -> bool {
        mapping.is_some_and(|m| m.path.starts_with('/') && !m.path.starts_with("//"))
    }

    fn named_from_files(&self) -> bool {
        true
    }

    fn places(&mut self, at: &At<'_>, modules: &mut Modules, out: &mut Vec<Place>) {
        let Some(mapping) = at.mapping else { return };
        let offset = at.addr - mapping.start + mapping.file_offset;
        out.push(Place::Native(modules.id(&mapping.path), offset));
    }

    fn name(&mut self, places: &[Place], naming: &mut Naming<'_>) {
        let mut by_module: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for place in places {
            if let Place::Native(module, offset) = *place {
                by_module.entry(module).or_default().push(offset);
            }
        }
        for (module, offsets) in by_module {
            let path = naming.modules.path(module);
            let symbols = naming.symbolizer.user(Path::new(path), &offsets);
            for (offset, chain) in offsets.iter().zip(symbols) {
                let frames = chain
                    .into_iter()
                    .enumerate()
                    .map(|(i, symbol)| Frame {
                        id: 0,
                        offset: symbol.function.is_none().then_some(symbol.offset),
                        function: symbol.function,
                        module: path.to_string(),
                        kernel: false,
                        // The chain is caller first: each after the first
                        // was inlined into the one before it.
                        inlined: i > 0,
                    })
                    .collect();
                naming.names.add(Place::Native(module, *offset), frames);
            }
        }
    }
}
