//! Frames: a raw sample (its kernel return addresses, its user registers
//! and copy of the top of its user stack) turned into places, where the
//! code was, and at the end every place named once.
//!
//! The user stack is unwound natively (`.eh_frame` rules, else frame
//! pointers: [`crate::stacks::unwind`]); each return address is then
//! handed to the [`Source`] that claims the mapping it lies in, which
//! makes its places and later names them: native code in a file
//! ([`native`]), code of no file, such as a JIT compiler writes
//! ([`jit`]). Kernel addresses are the [`kernel`] source's. CPython's
//! frames come walked from the kernel with the sample ([`python`]): a
//! return address in the interpreter's eval function is replaced by the
//! Python functions that call of it ran.

mod ahead;
mod gaps;
mod jit;
mod kernel;
mod names;
mod native;
mod python;
pub(crate) mod spaces;

use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use crate::bpf::types::{py_binary_key, py_layout};
use crate::event::Pid;
use crate::recorder::wire::{Mapping, PyCode, Sample, Seen};
use crate::stacks::cache::NameCache;
use crate::stacks::symbolize::{lookup_address, Symbolizer};
use crate::stacks::unwind::{Module, Regs, Unwinder, Unwound};
use gaps::Gap;
pub(crate) use names::Names;
pub(crate) use python::dump as dump_python;
use spaces::AddressSpaces;

/// User frames unwound per sample at the most: more than the deepest copy
/// of a stack holds but for tight recursion, which stays marked as cut.
const MAX_USER_FRAMES: usize = 1024;

/// Address spaces whose mappings are kept indexed at the most: past it,
/// they are indexed again as their samples come.
const MAX_INDEXES: usize = 256;

/// A frame before it is named: where the code was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Place {
    /// A kernel address.
    Kernel(u64),
    /// A file offset in a module (an index into [`Modules`]).
    Native(u32, u64),
    /// An address of no file: no known mapping covers it, or one with no
    /// file behind it (its module index), as JIT compilers write code in.
    Jit(Pid, u64, Option<u32>),
    /// Where the stack's frames stop short of its thread's first.
    Gap(Gap),
    /// A Python function of a process: its code object's address and
    /// identity (see `struct py_frame`), and the instruction in it.
    Python(Pid, u64, u64, i32),
}

/// One return address of a sample's user stack, with what is known of it.
pub(crate) struct At<'a> {
    /// The sample it was found in.
    pub sample: &'a Sample,
    /// The address to look up (the call, not the return address).
    pub addr: u64,
    /// The mapping that held it at the sample, if one did.
    pub mapping: Option<&'a Mapping>,
}

/// A kind of code a sample's frames can be in.
pub(crate) trait Source {
    /// Whether a return address in `mapping` (`None`: in no mapping
    /// known) is this source's to turn into places.
    fn claims(&self, mapping: Option<&Mapping>) -> bool;

    /// The places of a return address this source claimed, leaf first.
    fn places(&mut self, at: &At<'_>, modules: &mut Modules, out: &mut Vec<Place>);

    /// Names the places among `places` that are this source's.
    fn name(&mut self, places: &[Place], naming: &mut Naming<'_>);

    /// Whether its places are named from files alone, the same whenever
    /// they are: then on a thread of their own, while the recording runs
    /// (see [`ahead`]).
    fn named_from_files(&self) -> bool {
        false
    }
}

/// The mapped files, by path, and their index.
#[derive(Default)]
pub(crate) struct Modules {
    paths: Vec<Arc<str>>,
    ids: foldhash::HashMap<Arc<str>, u32>,
}

impl Modules {
    /// The index of the module at `path`, made on first sight.
    pub(crate) fn id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = self.paths.len() as u32;
        let path: Arc<str> = Arc::from(path);
        self.ids.insert(Arc::clone(&path), id);
        self.paths.push(path);
        id
    }

    /// The modules at `paths`, by their index.
    fn of_paths(paths: Vec<Arc<str>>) -> Modules {
        Modules {
            paths,
            ids: foldhash::HashMap::default(),
        }
    }

    /// The path of module `id`.
    pub(crate) fn path(&self, id: u32) -> &str {
        &self.paths[id as usize]
    }
}

/// What naming needs: the files read once for every source, the modules,
/// and the frames named so far.
pub(crate) struct Naming<'a> {
    pub symbolizer: &'a mut Symbolizer,
    pub modules: &'a Modules,
    pub names: &'a mut Names,
}

/// The tree's address spaces over time, and what turns its samples into
/// places and names them.
pub(crate) struct Frames {
    /// What naming learned in earlier recordings, and keeps for the next.
    cache: NameCache,
    /// proctrace's own programs, whose frames no stack keeps.
    own_code: Vec<Range<u64>>,
    spaces: AddressSpaces,
    unwinder: Unwinder,
    modules: Modules,
    /// Asked in order to claim a user address, and to name their places.
    sources: Vec<Box<dyn Source + Send>>,
    python: python::Python,
    /// Python frames whose code object was never read, as named.
    unnamed_python: u64,
    /// What names the places named from files, once there are any.
    ahead: Option<ahead::Ahead>,
    /// The process exits when the recording ends: what naming parsed is
    /// left to the exit.
    exits_after: bool,
    /// The places of the last sample, the buffer kept from one to the
    /// next: the collector allocates nothing for a sample it has seen.
    places: Vec<Place>,
    /// The mappings by address of the address spaces samples were last
    /// taken in, by [`space_key`].
    indexes: foldhash::HashMap<u64, spaces::Index>,
}

impl Frames {
    /// Native code, the kernel's, then code of no file; names first
    /// looked up in `cache`.
    pub(crate) fn new(cache: NameCache, own_code: Vec<Range<u64>>, exits_after: bool) -> Frames {
        Frames {
            cache,
            own_code,
            exits_after,
            spaces: AddressSpaces::new(),
            unwinder: Unwinder::new(),
            modules: Modules::default(),
            sources: vec![
                Box::new(native::Native),
                Box::new(kernel::Kernel),
                Box::new(jit::Jit),
                Box::new(gaps::Gaps),
            ],
            places: Vec::new(),
            indexes: foldhash::HashMap::default(),
            python: python::Python::default(),
            unnamed_python: 0,
            ahead: None,
        }
    }

    /// Whether `mapping` is of a CPython interpreter: then the layout the
    /// kernel walks its process's Python frames with, and the file's key
    /// where the layout holds for every process that execs it.
    pub(crate) fn python_mapped(
        &mut self,
        mapping: &Mapping,
    ) -> Option<(py_layout, Option<py_binary_key>)> {
        self.python.mapped(mapping)
    }

    /// The layout of the interpreter at `path` in every process that
    /// execs it, read before any does; where it has fixed addresses.
    pub(crate) fn python_preload(
        &mut self,
        path: &std::path::Path,
    ) -> Option<(py_layout, py_binary_key)> {
        self.python.preload(path)
    }

    /// A code object a process's Python frames ran, as the kernel read it.
    pub(crate) fn py_code(&mut self, code: PyCode) {
        self.python.code(code);
    }

    /// Python frames named as unknown: their code object was never read.
    pub(crate) fn unnamed_python(&self) -> u64 {
        self.unnamed_python
    }

    /// A mapping or exec the kernel announced.
    pub(crate) fn seen(&mut self, seen: Seen) {
        self.spaces.seen(seen);
    }

    /// A mapping a process had before anyone watched.
    pub(crate) fn mapped(&mut self, mapping: Mapping) {
        self.spaces.add(mapping);
    }

    /// `parent` forked `child` at `time`.
    pub(crate) fn fork(&mut self, parent: Pid, child: Pid, time: u64) {
        self.spaces.fork(parent, child, time);
        self.python.fork(parent, child);
    }

    /// `pid` exited at `time` and has no more samples to place.
    pub(crate) fn exit(&mut self, pid: Pid, time: u64) {
        self.spaces.exit(pid, time);
    }

    /// The places of a sample, the running one first: its kernel stack,
    /// then its user stack unwound against the mappings of the time.
    pub(crate) fn places(&mut self, sample: &Sample) -> &[Place] {
        let Frames {
            own_code,
            spaces,
            unwinder,
            modules,
            sources,
            places,
            python,
            indexes,
            ..
        } = self;
        places.clear();
        let kernel = sample.kernel.iter().enumerate();
        let theirs = kernel.filter(|(_, addr)| !own_code.iter().any(|code| code.contains(addr)));
        places.extend(theirs.map(|(i, &addr)| Place::Kernel(lookup_address(addr, i == 0))));
        let mut groups = python::Groups::of(sample);
        let space = space_key(spaces, sample.pid, sample.timestamp);
        if indexes.len() >= MAX_INDEXES && !indexes.contains_key(&space) {
            indexes.clear();
        }
        let index: &spaces::Index =
            (indexes.entry(space)).or_insert_with(|| spaces.index_at(sample.pid, sample.timestamp));
        let unwound = unwind(index, unwinder, space, sample);
        // Each frame's mapping, looked up once for the pairing and the places.
        let natives: Vec<(u64, Option<&Mapping>)> = (unwound.addrs.iter().enumerate())
            .map(|(i, &addr)| {
                let addr = lookup_address(addr, i == 0);
                (addr, index.at(addr))
            })
            .collect();
        let is_eval = |&(addr, mapping): &(u64, Option<&Mapping>)| {
            mapping.is_some_and(|m| python.is_eval(&m.path, addr - m.start + m.file_offset))
        };
        let cut = unwound.cut || sample.python_cut;
        let mut unpaired = unpaired_evals(&groups, cut, || {
            natives.iter().filter(|native| is_eval(native)).count()
        });
        for native in &natives {
            let (addr, mapping) = *native;
            if groups.any() && is_eval(native) {
                if unpaired == 0 {
                    groups.next(places);
                    // The Python frames the walk did not reach were this
                    // call's and its callers'.
                    if sample.python_cut && !groups.any() {
                        places.push(Place::Gap(Gap::Cut));
                    }
                    continue;
                }
                unpaired -= 1;
            }
            let at = At {
                sample,
                addr,
                mapping,
            };
            let source = sources.iter_mut().find(|s| s.claims(mapping));
            if let Some(source) = source {
                source.places(&at, modules, places);
            }
        }
        // Python frames no eval frame was found for are its callers'; a
        // cut stays the outermost frame.
        let rest = groups.any();
        groups.rest(places);
        if unwound.cut || (sample.python_cut && rest) {
            places.push(Place::Gap(Gap::Cut));
        }
        places
    }

    /// Names the places among `places` named from files alone, while the
    /// command runs (see [`ahead`]).
    pub(crate) fn name_ahead(&mut self, places: Vec<Place>) {
        if places.is_empty() {
            return;
        }
        if self.ahead.is_none() {
            match ahead::Ahead::start(self.cache.clone(), self.exits_after) {
                Ok(ahead) => self.ahead = Some(ahead),
                // Named at the end instead, on this thread.
                Err(err) => return log::debug!("cannot name frames ahead: {err}"),
            }
        }
        if let Some(ahead) = &self.ahead {
            ahead.name(places, &self.modules);
        }
    }

    /// Names every place, each by its source, and keeps what naming
    /// learned for the next recordings.
    pub(crate) fn name<'a>(&mut self, places: impl Iterator<Item = &'a Place>) -> Names {
        let mut places: Vec<Place> = places.copied().collect();
        places.sort_unstable();
        places.dedup();
        let ahead = self.ahead.take();
        let named = ahead.and_then(|a| a.finish(places.clone(), &self.modules));
        let named_ahead = named.is_some();
        // Named here where the thread never started, or did not end well.
        let (mut names, mut symbolizer) = match named {
            Some(names) => (names, Symbolizer::new()),
            None => (Names::default(), Symbolizer::with_cache(self.cache.clone())),
        };
        let mut naming = Naming {
            symbolizer: &mut symbolizer,
            modules: &self.modules,
            names: &mut names,
        };
        for source in &mut self.sources {
            if !(named_ahead && source.named_from_files()) {
                source.name(&places, &mut naming);
            }
        }
        self.unnamed_python += self.python.name(&places, &mut naming);
        symbolizer.save();
        names
    }
}

/// The innermost eval calls of a native stack that pair with no group of
/// Python frames, of the `evals` it has. The groups pair with the calls
/// from the outermost in: an innermost call may be on the native stack
/// with its frames already popped (returning) or not yet pushed
/// (entering). None where either stack was `cut`, and the outermost
/// cannot be paired.
fn unpaired_evals(groups: &python::Groups<'_>, cut: bool, evals: impl FnOnce() -> usize) -> usize {
    if !groups.any() || cut {
        return 0;
    }
    evals().saturating_sub(groups.count())
}

/// The return addresses of `sample`'s user stack, leaf first, unwound
/// against its process's mappings: listed again only when they changed,
/// or for a sample from before the change.
fn unwind<'u>(
    index: &spaces::Index,
    unwinder: &'u mut Unwinder,
    space: u64,
    sample: &Sample,
) -> &'u Unwound {
    let [ip, sp, fp, lr] = sample.regs;
    if ip == 0 {
        return Unwound::NONE;
    }
    let modules = || -> Vec<Module> { index.modules().into_iter().map(module_of).collect() };
    let regs = Regs { ip, sp, fp, lr };
    unwinder.unwind_with(space, modules, &regs, &sample.stack, MAX_USER_FRAMES)
}

/// What tells `pid`'s mappings at `time` from any other list of them:
/// the same key, the same mappings (see [`AddressSpaces::version`]).
fn space_key(spaces: &AddressSpaces, pid: Pid, time: u64) -> u64 {
    let (version, since) = spaces.version(pid, time);
    let mut hasher = foldhash::fast::FixedState::default().build_hasher();
    (pid, version).hash(&mut hasher);
    if time < since {
        time.hash(&mut hasher);
    }
    hasher.finish()
}

fn module_of(mapping: &Mapping) -> Module {
    Module {
        start: mapping.start,
        end: mapping.end,
        file_offset: mapping.file_offset,
        path: mapping.path.clone().into(),
        dev: mapping
            .dev
            .map_or(0, |(major, minor)| libc::makedev(major, minor)),
        ino: mapping.ino.unwrap_or(0),
        build_id: mapping.build_id.clone(),
    }
}
