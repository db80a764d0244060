//! Naming the frames of sampled stacks: user code by file offset in its
//! ELF file (symbols, and DWARF lines and inlined calls where the file or
//! its debug file has them), kernel code through `/proc/kallsyms`, JIT
//! code through the perf map its runtime writes.
//!
//! User frames are named from the file alone, so a process that exited
//! is named as well as a live one. [blazesym] reads the files and caches
//! them; the perf maps are parsed here, since blazesym reads them only
//! for a live process.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolized};

use super::bounds::Functions;
use super::cache::{Entries, NameCache, Named, Stamp};
use super::inflated::Inflated;
use super::ksyms::Ksyms;
use super::plt::Plt;
use super::units::{self, Found};

/// One frame of a stack, named as far as the files allow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// The function, demangled (Rust and C++); `None` if no symbol
    /// covers the address.
    pub function: Option<String>,
    /// The source file of the address in that function, with its
    /// directory when the debug information names one.
    pub file: Option<String>,
    /// The line in `file`.
    pub line: Option<u32>,
    /// The file name of the module (`libc.so.6`), or `[kernel]`.
    pub module: String,
    /// What was looked up: the file offset in the module, or the kernel
    /// address.
    pub offset: u64,
}

/// The address to look up for a frame of an unwound stack. Every frame
/// but the leaf holds a return address, that of the instruction after
/// the call: the call itself is one byte before it, and it is the call
/// whose line and inlined functions name the frame (the next instruction
/// may be another line, another inlined function, or even another
/// function after a call that does not return). The leaf's address is
/// the instruction the sample interrupted, looked up as it is.
pub fn lookup_address(addr: u64, is_leaf: bool) -> u64 {
    match is_leaf {
        true => addr,
        false => addr.saturating_sub(1),
    }
}

/// The module name frames of the kernel carry.
const KERNEL: &str = "[kernel]";

/// Names frames, keeping the files it read (blazesym's caches), the perf
/// maps it parsed and, in its [`NameCache`], what it learned for the next
/// recordings ([`Symbolizer::save`]). Not `Send` (blazesym's caches are
/// `Rc`s): make it on the thread that symbolizes.
pub struct Symbolizer {
    blaze: blazesym::symbolize::Symbolizer,
    perf_maps: HashMap<u32, PerfMap>,
    /// By file, as it was when read (see [`Stamp`]).
    plts: HashMap<(PathBuf, Option<Stamp>), Plt>,
    functions: HashMap<(PathBuf, Option<Stamp>), Functions>,
    /// Where a file's DWARF is kept inflated, once looked for.
    inflated: HashMap<(PathBuf, Option<Stamp>), Option<Inflated>>,
    cache: NameCache,
    kept: Entries,
    /// The kernel's core text as kept this boot, once looked at.
    core_text: Option<Ksyms>,
    /// kallsyms as read during this symbolizer's life, once needed.
    kallsyms: Option<Ksyms>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    /// A symbolizer with lines, inlined functions and demangling on, and
    /// no cache.
    pub fn new() -> Self {
        Self::with_cache(NameCache::off())
    }

    /// A symbolizer that first looks in `cache`.
    pub fn with_cache(cache: NameCache) -> Self {
        let blaze = blazesym::symbolize::Symbolizer::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .build();
        Self {
            blaze,
            perf_maps: HashMap::new(),
            plts: HashMap::new(),
            functions: HashMap::new(),
            inflated: HashMap::new(),
            cache,
            kept: Entries::default(),
            core_text: None,
            kallsyms: None,
        }
    }

    /// Keeps what was learned in the cache, for the next recordings.
    pub fn save(&mut self) {
        let grown = std::mem::take(&mut self.kept).store();
        self.cache.grew(grown);
    }

    /// The frames at `offsets`, file offsets in the ELF file at `path`
    /// (pass [`lookup_address`]es). One list per offset: the function
    /// the code belongs to, then the functions inlined into it down to
    /// the one the offset lies in — caller first. An offset with no name
    /// still has its one frame, with `module` and `offset` only.
    pub fn user(&mut self, path: &Path, offsets: &[u64]) -> Vec<Vec<Frame>> {
        let module = module_name(path);
        let file = (path.to_owned(), Stamp::of(path));
        let entry = self.kept.file(&self.cache, path, file.1);
        let missing: Vec<u64> = offsets.iter().copied().filter(|&o| !entry.has(o)).collect();
        if !missing.is_empty() {
            let inflated = (self.inflated.entry(file.clone()))
                .or_insert_with(|| Inflated::find(&self.cache, path));
            let mut found = look_up(&self.blaze, path, inflated.as_ref(), &missing);
            let plt = self
                .plts
                .entry(file.clone())
                .or_insert_with(|| Plt::read(path));
            for (i, &offset) in missing.iter().enumerate() {
                let named = match (plt.name(offset), found.get_mut(i).and_then(Option::take)) {
                    (Some(stub), _) => vec![kept(Some(&stub), None)],
                    (None, Some(named)) if !names_version(plt, &named) => named,
                    _ => vec![kept(None, None)],
                };
                entry.learn(offset, named);
            }
        }
        let mut named: Vec<Vec<Frame>> = offsets
            .iter()
            .map(|&offset| frames(entry.get(offset), &module, offset))
            .collect();
        self.group_unnamed(file, &mut named);
        named
    }

    /// Code no symbol names is known by the start of the function its
    /// file's unwind tables place it in, where they do: one frame for
    /// the function rather than one per address sampled in it.
    fn group_unnamed(&mut self, file: (PathBuf, Option<Stamp>), named: &mut [Vec<Frame>]) {
        let mut unnamed = named
            .iter_mut()
            .flatten()
            .filter(|f| f.function.is_none())
            .peekable();
        if unnamed.peek().is_none() {
            return;
        }
        let functions = self
            .functions
            .entry(file)
            .or_insert_with_key(|(path, _)| Functions::read(path));
        for frame in unnamed {
            frame.offset = functions.start_of(frame.offset).unwrap_or(frame.offset);
        }
    }

    /// The frames at `addrs`, kernel addresses (pass
    /// [`lookup_address`]es), one each: `/proc/kallsyms` knows neither
    /// lines nor inlined functions. Unnamed when it shows no addresses
    /// (`kernel.kptr_restrict` without `CAP_SYSLOG`).
    pub fn kernel(&mut self, addrs: &[u64]) -> Vec<Frame> {
        addrs
            .iter()
            .map(|&addr| {
                let cached = (self.kept.kernel(&self.cache).get(addr))
                    .and_then(|named| named.first().cloned())
                    .filter(|named| !named.function.as_deref().is_some_and(is_jited));
                let named = cached.or_else(|| {
                    let name = self.kernel_symbol(addr)?;
                    let named = kept(Some(&name), None);
                    // BPF code is named for this recording only: the next
                    // program loaded may be put at the same address. An
                    // address kptr_restrict hides names nothing: not kept.
                    if !is_jited(&name) {
                        let entry = self.kept.kernel(&self.cache);
                        entry.learn(addr, vec![named.clone()]);
                    }
                    Some(named)
                });
                frame(named, KERNEL, addr)
            })
            .collect()
    }

    /// The kernel symbol `addr` is in: from the core text kept this boot,
    /// else from kallsyms, read once (and its core text kept).
    fn kernel_symbol(&mut self, addr: u64) -> Option<String> {
        let cache = &self.cache;
        let core = self
            .core_text
            .get_or_insert_with(|| cache.kernel_text().unwrap_or_default());
        if let Some(name) = core.name(addr) {
            return Some(name.to_owned());
        }
        if self.kallsyms.is_none() {
            let live = Ksyms::read();
            // Kept once a boot: an address in a module reads kallsyms on
            // every recording, and needs no new copy of the core text.
            if core.is_empty() {
                if let Some(core) = live.core_text() {
                    self.cache.keep_kernel_text(&core);
                }
            }
            self.kallsyms = Some(live);
        }
        let live = self.kallsyms.as_ref()?;
        live.name(addr).map(str::to_owned)
    }

    /// The names of `addrs`, absolute addresses in process `pid`, from
    /// the perf map its JIT writes (`/tmp/perf-PID.map`: Node's
    /// `--perf-basic-prof`, Python's `-X perf`, the JVM's perf agents).
    /// `None` where it names nothing. The map is read again when it grew.
    pub fn perf_map(&mut self, pid: u32, addrs: &[u64]) -> Vec<Option<String>> {
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let map = self.perf_maps.entry(pid).or_default();
        map.refresh(&path);
        addrs
            .iter()
            .map(|&addr| map.name(addr).map(str::to_owned))
            .collect()
    }
}

/// The frames of `offsets` of the file at `path`, one list each (`None`
/// for an offset no symbol names): from its DWARF kept inflated where
/// there is such a copy and it can be read ([`look_up_inflated`]), else
/// by blazesym in the file (and its debug file).
fn look_up(
    blaze: &blazesym::symbolize::Symbolizer,
    path: &Path,
    inflated: Option<&Inflated>,
    offsets: &[u64],
) -> Vec<Option<Vec<Named>>> {
    if let Some(found) = inflated.and_then(|i| look_up_inflated(blaze, i, offsets)) {
        return found;
    }
    let source = Source::Elf(Elf::new(path));
    let found = symbolize(blaze, &source, Input::FileOffset(offsets), path);
    if found.len() != offsets.len() {
        return vec![None; offsets.len()];
    }
    found.iter().map(answer_chain).collect()
}

/// [`look_up`] by address in the inflated copy: from the one DWARF unit
/// an address is in where that answers (its name from the symbol table
/// alone where no function of the DWARF holds it), else by blazesym from
/// the whole DWARF. `None` where blazesym cannot read the copy.
pub(super) fn look_up_inflated(
    blaze: &blazesym::symbolize::Symbolizer,
    inflated: &Inflated,
    offsets: &[u64],
) -> Option<Vec<Option<Vec<Named>>>> {
    let copy = inflated.path();
    let addrs: Vec<Option<u64>> = offsets.iter().map(|&o| inflated.address(o)).collect();
    let mapped = units::Mapped::open(copy);
    let mut units = mapped.as_ref().and_then(|m| m.units(inflated.index(m)?));
    let found: Vec<Option<Found>> = (addrs.iter())
        .map(|a| units.as_mut().zip(*a).and_then(|(u, a)| u.name(a)))
        .collect();
    let asked = |line: bool| -> Vec<u64> {
        let unanswered = |found: &Option<Found>| match found {
            Some(Found::Line(_)) => line,
            Some(Found::Frames(_)) => false,
            None => !line,
        };
        (addrs.iter().zip(&found))
            .filter(|(_, found)| unanswered(found))
            .filter_map(|(addr, _)| *addr)
            .collect()
    };
    let (lines, rest) = (asked(true), asked(false));
    let mut symbols = Elf::new(copy);
    symbols.debug_syms = false;
    let mut symbols = symbolize(
        blaze,
        &Source::Elf(symbols),
        Input::VirtOffset(&lines),
        copy,
    );
    let mut named = symbolize(
        blaze,
        &Source::Elf(Elf::new(copy)),
        Input::VirtOffset(&rest),
        copy,
    );
    if symbols.len() != lines.len() || named.len() != rest.len() {
        return None;
    }
    symbols.reverse();
    named.reverse();
    let answer = |(addr, found): (&Option<u64>, Option<Found>)| {
        addr.as_ref()?;
        match found {
            Some(Found::Frames(frames)) => Some(frames),
            Some(Found::Line(mut line)) => match symbols.pop()? {
                Symbolized::Sym(sym) => {
                    line.function = Some(sym.name.into_owned());
                    Some(vec![line])
                }
                Symbolized::Unknown(_) => None,
            },
            None => answer_chain(&named.pop()?),
        }
    };
    Some(addrs.iter().zip(found).map(answer).collect())
}

/// Whether `named` is a symbol version's name alone, which blazesym
/// gives code below a stripped library's first exported function (see
/// [`Plt`]).
fn names_version(plt: &Plt, named: &[Named]) -> bool {
    match named {
        [only] if only.file.is_none() => {
            only.function.as_deref().is_some_and(|f| plt.is_version(f))
        }
        _ => false,
    }
}

/// The frames of blazesym's answer, if it names a symbol.
pub(super) fn answer_chain(found: &Symbolized<'_>) -> Option<Vec<Named>> {
    match found {
        Symbolized::Sym(sym) => Some(sym_chain(sym)),
        _ => None,
    }
}

/// blazesym's answer, one per input; empty if it failed as a whole (the
/// file is gone or no ELF file), which is logged. blazesym reads the
/// file even for no input: it is not asked then.
fn symbolize<'b>(
    blaze: &'b blazesym::symbolize::Symbolizer,
    source: &Source,
    input: Input<&[u64]>,
    what: &Path,
) -> Vec<Symbolized<'b>> {
    if let Input::VirtOffset([]) | Input::FileOffset([]) = input {
        return Vec::new();
    }
    blaze.symbolize(source, input).unwrap_or_else(|err| {
        log::debug!("cannot symbolize in {}: {err}", what.display());
        Vec::new()
    })
}

/// Whether kallsyms' `name` is code the BPF JIT wrote: programs, their
/// trampolines and dispatchers, which come and go during a boot.
fn is_jited(name: &str) -> bool {
    ["bpf_prog_", "bpf_trampoline_", "bpf_dispatcher_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

fn module_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
        .into_owned()
}

/// The function of `sym`, then those inlined into it, caller first. Each
/// has the line it is at: blazesym gives the outer function the line of
/// the first inlined call, each inlined function that of the next call,
/// the innermost the line of the address.
fn sym_chain(sym: &Sym) -> Vec<Named> {
    let outer = kept(Some(&sym.name), sym.code_info.as_deref());
    let inlined = sym
        .inlined
        .iter()
        .map(|f| kept(Some(&f.name), f.code_info.as_ref()));
    std::iter::once(outer).chain(inlined).collect()
}

/// A frame as the cache keeps it.
fn kept(function: Option<&str>, code: Option<&CodeInfo>) -> Named {
    Named {
        function: function.map(str::to_owned),
        file: code.map(|c| c.to_path().to_string_lossy().into_owned()),
        line: code.and_then(|c| c.line),
    }
}

/// The frames of `offset` in `module` as kept; one unnamed where none is.
/// Names read from the cache's file are fresh copies: moved, not copied
/// again.
fn frames(kept: Option<Cow<'_, [Named]>>, module: &str, offset: u64) -> Vec<Frame> {
    match kept {
        Some(named) if !named.is_empty() => (named.into_owned().into_iter())
            .map(|n| frame(Some(n), module, offset))
            .collect(),
        _ => vec![frame(None, module, offset)],
    }
}

fn frame(named: Option<Named>, module: &str, offset: u64) -> Frame {
    let (function, file, line) = named.map_or((None, None, None), |n| (n.function, n.file, n.line));
    Frame {
        function,
        file,
        line,
        module: module.to_owned(),
        offset,
    }
}

/// One function a JIT wrote to its perf map.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JitFunction {
    start: u64,
    end: u64,
    name: String,
}

/// A perf map as last read: its length, to tell when the JIT appended,
/// and its functions by start (among equal starts, in the file's order).
#[derive(Debug, Default)]
struct PerfMap {
    len: Option<u64>,
    functions: Vec<JitFunction>,
}

/// How far before an address to look for a function holding it: JITs
/// rarely overlap code, and when they do a few entries cover it.
const PERF_MAP_LOOKBACK: usize = 8;

impl PerfMap {
    /// Reads the map again if its length changed; a missing map is empty.
    fn refresh(&mut self, path: &Path) {
        let len = fs::metadata(path).ok().map(|m| m.len());
        if len == self.len {
            return;
        }
        self.len = len;
        self.functions = match fs::read(path) {
            Ok(data) => parse_perf_map(&String::from_utf8_lossy(&data)),
            Err(_) => Vec::new(),
        };
    }

    /// The name of the function holding `addr`: the latest written among
    /// those that start at the same place (a JIT reuses freed code).
    fn name(&self, addr: u64) -> Option<&str> {
        let after = self.functions.partition_point(|f| f.start <= addr);
        self.functions[..after]
            .iter()
            .rev()
            .take(PERF_MAP_LOOKBACK)
            .find(|f| addr < f.end)
            .map(|f| f.name.as_str())
    }
}

/// The functions of a perf map, lines `START SIZE NAME` (hexadecimal,
/// `0x` optional; the name runs to the end of the line and may hold
/// spaces); lines that are not skipped.
fn parse_perf_map(text: &str) -> Vec<JitFunction> {
    let mut functions: Vec<JitFunction> = text.lines().filter_map(parse_perf_map_line).collect();
    functions.sort_by_key(|f| f.start);
    functions
}

fn parse_perf_map_line(line: &str) -> Option<JitFunction> {
    let (start, rest) = line.trim_start().split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ')?;
    let start = parse_hex(start)?;
    let end = start.checked_add(parse_hex(size)?)?;
    let name = name.trim();
    (!name.is_empty()).then(|| JitFunction {
        start,
        end,
        name: name.to_owned(),
    })
}

fn parse_hex(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;

    use super::*;
    use crate::stacks::segments::Segments;
    use crate::stacks::test_support::{run, self_modules};
    use crate::stacks::unwind::find_module;

    #[inline(never)]
    fn a_function_to_find() -> u64 {
        black_box(42)
    }

    #[test]
    fn a_function_of_this_binary_is_named_by_its_file_offset() {
        let addr = a_function_to_find as *const () as usize as u64;
        let modules = self_modules();
        let module = find_module(&modules, addr).expect("the test binary maps its code");
        let offset = module.file_offset_of(addr).unwrap();
        let frames = Symbolizer::new().user(&module.path, &[offset]);
        let names: Vec<_> = frames[0]
            .iter()
            .filter_map(|f| f.function.as_deref())
            .collect();
        assert!(
            names
                .iter()
                .any(|n| n.ends_with("tests::a_function_to_find")),
            "{names:?} at {offset:#x} in {}",
            module.path.display()
        );
        assert_eq!(frames[0][0].module, module_name(&module.path));
    }

    /// The address of a function of the running kernel, if kallsyms shows
    /// addresses.
    fn kallsyms_address(name: &str) -> Option<u64> {
        let kallsyms = fs::read_to_string("/proc/kallsyms").ok()?;
        let line = kallsyms
            .lines()
            .find(|l| l.ends_with(&format!(" T {name}")))?;
        let addr = u64::from_str_radix(line.split(' ').next()?, 16).ok()?;
        (addr != 0).then_some(addr)
    }

    #[test]
    fn a_kernel_function_is_named_through_kallsyms() {
        let Some(addr) = kallsyms_address("schedule") else {
            // Addresses show as zeros without CAP_SYSLOG: CI runs as root
            // and must see them.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "/proc/kallsyms shows no addresses"
            );
            eprintln!("skipped: /proc/kallsyms shows no addresses (not root?)");
            return;
        };
        let frames = Symbolizer::new().kernel(&[addr, addr + 1]);
        for frame in &frames {
            assert_eq!(frame.function.as_deref(), Some("schedule"));
            assert_eq!(frame.module, KERNEL);
        }
        assert_eq!(frames[1].offset, addr + 1);
    }

    #[test]
    fn return_addresses_are_looked_up_at_the_call() {
        assert_eq!(lookup_address(0x1000, true), 0x1000);
        assert_eq!(lookup_address(0x1000, false), 0xfff);
        assert_eq!(lookup_address(0, false), 0);
    }

    #[test]
    fn a_perf_map_names_its_ranges_and_skips_bad_lines() {
        let map = PerfMap {
            len: None,
            functions: parse_perf_map(
                "0x1000 10 LazyCompile:~main /app/index.js:1\n\
                 garbage\n\
                 2000 zz bad size\n\
                 1800 8 py::f:/x.py\n\
                 1800 8 py::g:/x.py\n\
                 3000 100\n",
            ),
        };
        assert_eq!(map.name(0x1000), Some("LazyCompile:~main /app/index.js:1"));
        assert_eq!(map.name(0x100f), Some("LazyCompile:~main /app/index.js:1"));
        assert_eq!(map.name(0x1010), None);
        assert_eq!(map.name(0x1804), Some("py::g:/x.py"));
        assert_eq!(map.name(0x3000), None);
        assert_eq!(map.name(0), None);
    }

    #[test]
    fn a_perf_map_is_read_again_when_the_jit_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf-1.map");
        let mut map = PerfMap::default();
        map.refresh(&path);
        assert_eq!(map.name(0x10), None);
        fs::write(&path, "10 10 first\n").unwrap();
        map.refresh(&path);
        assert_eq!(map.name(0x10), Some("first"));
        fs::write(&path, "10 10 first\n40 10 second\n").unwrap();
        map.refresh(&path);
        assert_eq!(map.name(0x44), Some("second"));
    }

    /// A stripped library whose symbols have a version, at `dir/lib.so`.
    fn versioned_library(dir: &Path) -> PathBuf {
        let (source, script, library) = (dir.join("l.c"), dir.join("l.map"), dir.join("lib.so"));
        fs::write(&source, "int exported(int x) { return x * 7 + 1; }\n").unwrap();
        fs::write(&script, "VERS_1 { global: exported; local: *; };\n").unwrap();
        let script = format!("-Wl,--version-script={}", script.display());
        let flags = ["-shared", "-fPIC", "-O2", &script, "-o"].map(Path::new);
        run("cc", &[&flags[..], &[&library, &source]].concat());
        run("strip", &[&library]);
        library
    }

    /// The file offsets of the first byte of `section`, and of exported
    /// function `symbol`.
    fn offsets(path: &Path, section: &str, symbol: &str) -> (u64, u64) {
        use object::{Object, ObjectSection, ObjectSymbol};
        let data = fs::read(path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let function = (elf.dynamic_symbols().find(|s| s.name() == Ok(symbol))).unwrap();
        let offset = Segments::of(&elf).file_offset(function.address()).unwrap();
        let start = elf
            .section_by_name(section)
            .unwrap()
            .file_range()
            .unwrap()
            .0;
        (start, offset)
    }

    #[test]
    fn code_below_the_first_exported_function_is_not_named_by_a_version() {
        let dir = tempfile::tempdir().unwrap();
        let library = versioned_library(dir.path());
        let (init, exported) = offsets(&library, ".init", "exported");
        let frames = Symbolizer::new().user(&library, &[init, exported]);
        let names: Vec<_> = (frames.iter()).map(|f| f[0].function.as_deref()).collect();
        assert_eq!(
            names,
            [None, Some("exported")],
            "at {init:#x} and {exported:#x}"
        );
    }

    #[test]
    fn an_unreadable_file_keeps_every_offset_unnamed() {
        let mut symbolizer = Symbolizer::new();
        let frames = symbolizer.user(Path::new("/nonexistent/libgone.so"), &[0x10, 0x20]);
        assert_eq!(
            frames,
            vec![
                vec![frame(None, "libgone.so", 0x10)],
                vec![frame(None, "libgone.so", 0x20)]
            ]
        );
    }
}
