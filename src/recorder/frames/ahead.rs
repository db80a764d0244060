//! Naming native and kernel frames on a thread of their own, from the
//! first new stack on, while the command runs.
//!
//! What a first frame in a file costs is reading the file: a library's
//! DWARF inflated and parsed, all of kallsyms for a new kernel address,
//! tens of milliseconds each. Named at the end, the user waited for it
//! after the command; named on the collector's thread, it held up the
//! collector's reading of new mappings, and a short Python child that
//! started meanwhile had its first samples without their Python frames.
//! Here one symbolizer (not `Send`: made on this thread) serves the whole
//! recording, so the end names only what the last stacks added. Its
//! parsed files are freed after it has handed the names over (tens of
//! milliseconds for libc's DWARF, which no one needs to wait for), or
//! not at all in a process that exits next.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::{kernel, native, Modules, Names, Naming, Place, Source};
use crate::stacks::cache::NameCache;
use crate::stacks::symbolize::Symbolizer;

/// Places to name, with the paths of the modules they may refer to.
struct Batch {
    places: Vec<Place>,
    paths: Vec<Arc<str>>,
}

/// The thread that names the places named from files alone.
pub(crate) struct Ahead {
    to: Sender<Batch>,
    named: Receiver<Names>,
}

impl Ahead {
    /// Starts the thread, its names first looked up in `cache`; what it
    /// parsed is left to the process's exit if it `exits_after`.
    pub(crate) fn start(cache: NameCache, exits_after: bool) -> std::io::Result<Ahead> {
        let (to, batches) = crossbeam_channel::unbounded::<Batch>();
        let (done, named) = crossbeam_channel::bounded(1);
        std::thread::Builder::new()
            .name("proctrace-names".into())
            .spawn(move || {
                let mut symbolizer = Symbolizer::with_cache(cache);
                let mut names = Names::default();
                let mut sources: [Box<dyn Source>; 2] =
                    [Box::new(native::Native), Box::new(kernel::Kernel)];
                for batch in batches {
                    let modules = Modules::of_paths(batch.paths);
                    let mut places = batch.places;
                    places.retain(|p| !names.has(p));
                    places.sort_unstable();
                    places.dedup();
                    let mut naming = Naming {
                        symbolizer: &mut symbolizer,
                        modules: &modules,
                        names: &mut names,
                    };
                    for source in &mut sources {
                        source.name(&places, &mut naming);
                    }
                }
                symbolizer.save();
                let _ = done.send(names);
                if exits_after {
                    std::mem::forget(symbolizer);
                }
            })?;
        Ok(Ahead { to, named })
    }

    /// Names the native and kernel places among `places`, in time.
    pub(crate) fn name(&self, places: Vec<Place>, modules: &Modules) {
        let paths = modules.paths.clone();
        let _ = self.to.send(Batch { places, paths });
    }

    /// Names the last `places`, keeps what was learned for the next
    /// recordings, and hands over every name; `None` if the thread
    /// panicked, and named nothing that can be trusted whole.
    pub(crate) fn finish(self, places: Vec<Place>, modules: &Modules) -> Option<Names> {
        self.name(places, modules);
        drop(self.to);
        self.named.recv().ok()
    }
}
