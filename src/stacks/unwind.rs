//! Unwinding sampled user stacks: from the registers at a sample and a
//! copy of the top of its stack, the return addresses of the frames that
//! led there, leaf first.
//!
//! The unwind rules come from the mapped files' `.eh_frame` (indexed by
//! `.eh_frame_hdr` where present) or, lacking it, `.debug_frame`, read
//! from disk: a sample is unwound after the fact, possibly after its
//! process exited, so nothing is read from the process. Code with no rule
//! (JIT code, a stripped file, a file that is gone) is unwound through
//! its frame pointers. [framehop] does the unwinding; this module places
//! each file in the process and keeps what it read.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, Unwinder as _};
use memmap2::Mmap;
use object::read::elf::ElfFile64;
use object::{CompressionFormat, Endianness, Object, ObjectSection};

use super::segments::Segments;

/// One executable mapping of a file in a sampled process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Module {
    /// The first address of the mapping.
    pub start: u64,
    /// The address just past the mapping.
    pub end: u64,
    /// The offset in the file of the byte mapped at `start`.
    pub file_offset: u64,
    /// Where to read the file now: its path, or one that still reaches it
    /// (`/proc/PID/root/...` for a process in another mount namespace).
    pub path: PathBuf,
    /// The device and inode of the mapped file (`ino` 0 when unknown),
    /// in any one encoding: they key the cache of files, and are never
    /// compared with the file at `path` (overlayfs shows other numbers).
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// The mapped file's GNU build ID, when known. A file at `path` with
    /// another build ID (replaced since, by an upgrade) is not used: its
    /// rules would unwind wrongly, where frame pointers at worst stop
    /// early.
    pub build_id: Option<Vec<u8>>,
}

impl Module {
    /// The offset in the file of `addr`, if it lies in this mapping.
    pub fn file_offset_of(&self, addr: u64) -> Option<u64> {
        if !(self.start..self.end).contains(&addr) {
            return None;
        }
        (addr - self.start).checked_add(self.file_offset)
    }
}

/// The mapping of `modules` that holds `addr`.
pub fn find_module(modules: &[Module], addr: u64) -> Option<&Module> {
    modules.iter().find(|m| (m.start..m.end).contains(&addr))
}

/// The registers at a sample that unwinding starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Regs {
    /// The instruction pointer (x86_64 `rip`, aarch64 `pc`).
    pub ip: u64,
    /// The stack pointer; the copied stack starts here.
    pub sp: u64,
    /// The frame pointer (x86_64 `rbp`, aarch64 `x29`).
    pub fp: u64,
    /// The link register (aarch64 `x30`); 0 on x86_64.
    pub lr: u64,
}

/// A section's bytes in its file, mapped once and shared by every process
/// that maps the file.
#[derive(Clone, Debug)]
pub(super) struct Bytes {
    file: Arc<Mmap>,
    range: Range<usize>,
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.file[self.range.clone()]
    }
}

#[cfg(target_arch = "x86_64")]
mod native {
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};

    use super::{Bytes, Regs};

    pub type Unwinder = UnwinderX86_64<Bytes>;
    pub type Cache = CacheX86_64;
    pub type UnwindRegs = UnwindRegsX86_64;

    pub fn regs(regs: &Regs, _max_code_address: u64) -> UnwindRegs {
        UnwindRegsX86_64::new(regs.ip, regs.sp, regs.fp)
    }
}

#[cfg(target_arch = "aarch64")]
mod native {
    use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};

    use super::{Bytes, Regs};

    pub type Unwinder = UnwinderAarch64<Bytes>;
    pub type Cache = CacheAarch64;
    pub type UnwindRegs = UnwindRegsAarch64;

    /// Return addresses signed by pointer authentication carry the
    /// signature in their high bits: those above the highest code address
    /// are stripped. With no module known nothing is (the mask of 0 would
    /// shift by 64).
    pub fn regs(regs: &Regs, max_code_address: u64) -> UnwindRegs {
        let mask = match max_code_address {
            0 => PtrAuthMask::new_no_strip(),
            max => PtrAuthMask::from_max_known_address(max),
        };
        UnwindRegsAarch64::new_with_ptr_auth_mask(mask, regs.lr, regs.sp, regs.fp)
    }
}

/// Why a mapped file gives no unwind rules; logged once per file, whose
/// code is then unwound through frame pointers.
#[derive(Debug, thiserror::Error)]
pub(super) enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is no 64-bit ELF file: {source}")]
    Elf {
        path: PathBuf,
        source: object::Error,
    },
    #[error("{path} was replaced: its build ID is not the mapped file's")]
    Replaced { path: PathBuf },
}

/// A section's addresses in the file (SVMAs) and its bytes.
pub(super) struct Section {
    pub svma: Range<u64>,
    pub data: Bytes,
}

/// What one ELF file gives to unwinding, read once; where its functions
/// start too ([`super::bounds`]).
pub(super) struct ElfFile {
    pub segments: Segments,
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr: Option<Section>,
    debug_frame: Option<Bytes>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
}

/// A mapped file as the cache knows it: by inode where known, so that
/// the paths that reach one file (`/proc/PID/root/...` of every process
/// in a container) share it, and a file replaced at the same path is
/// another; by path otherwise. The build ID tells apart a file from the
/// next one to reuse its inode number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum FileKey {
    Inode {
        dev: u64,
        ino: u64,
        build_id: Option<Vec<u8>>,
    },
    Path(PathBuf),
}

impl FileKey {
    fn of(module: &Module) -> Self {
        match module.ino {
            0 => Self::Path(module.path.clone()),
            ino => Self::Inode {
                dev: module.dev,
                ino,
                build_id: module.build_id.clone(),
            },
        }
    }
}

/// A framehop unwinder holding one process's modules, and the list it
/// was built from (a hash collision must not mix two processes).
struct ProcessUnwinder {
    modules: Vec<Module>,
    unwinder: native::Unwinder,
}

/// Past this many module lists (processes, or one process across
/// `dlopen`s), the unwinders are dropped and rebuilt on demand: the
/// files' parsed sections stay.
const MAX_PROCESSES: usize = 256;

/// Unwinds sampled user stacks, keeping each file's unwind sections
/// across samples and processes.
#[derive(Default)]
pub struct Unwinder {
    files: HashMap<FileKey, Option<Arc<ElfFile>>>,
    processes: HashMap<u64, ProcessUnwinder>,
    /// framehop's rule cache, by address; valid across its unwinders
    /// (each has its own generation).
    cache: native::Cache,
    memo: Memo,
}

/// Stacks unwound already, by their modules' key and registers: a stack
/// that starts at the same registers and holds the same words where its
/// unwinding read is the same stack. A probe hit a million times from one
/// place is unwound once.
#[derive(Default)]
struct Memo(foldhash::HashMap<(u64, Regs, usize), Walked>);

/// One unwinding: the words it read (address, and value unless past the
/// copy) and what it found.
struct Walked {
    reads: Vec<(u64, Option<u64>)>,
    found: Unwound,
}

/// A user stack unwound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unwound {
    /// The return addresses from the leaf up (see [`Unwinder::unwind`]).
    pub addrs: Vec<u64>,
    /// The walk stopped short of the thread's first frame: it needed a
    /// word past the copy of the stack, or reached the most frames asked.
    pub cut: bool,
}

impl Unwound {
    /// No stack: no registers were kept, or no frame asked for.
    pub const NONE: &'static Unwound = &Unwound {
        addrs: Vec::new(),
        cut: false,
    };
}

/// Stacks remembered at the most; past it the memo starts afresh.
const MEMO_MAX: usize = 16384;

impl Memo {
    /// What unwinding `stack` from `regs` found before, if it read the
    /// same words.
    fn recall(&self, key: &(u64, Regs, usize), stack: &[u8]) -> Option<&Unwound> {
        let walked = self.0.get(key)?;
        let same = walked
            .reads
            .iter()
            .all(|&(addr, value)| read_word(stack, key.1.sp, addr).ok() == value);
        same.then_some(&walked.found)
    }

    /// Remembers `walked`; what it found.
    fn keep(&mut self, key: (u64, Regs, usize), walked: Walked) -> &Unwound {
        if self.0.len() >= MEMO_MAX {
            self.0.clear();
        }
        &self.0.entry(key).insert_entry(walked).into_mut().found
    }
}

impl Unwinder {
    /// An unwinder that has read no file yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The return addresses of the stack from the leaf up: the first is
    /// `regs.ip`, the others the return addresses as found on the stack
    /// (to symbolize the call, not the instruction after it, look up
    /// [`super::symbolize::lookup_address`]). At most `max` of them.
    ///
    /// `modules` are the process's executable mappings at the sample, in
    /// a stable order (by start, say): the unwinder built for a list is
    /// kept for the next sample that passes the same list. `stack` is the
    /// copy of the stack from `regs.sp` up. Unwinding stops
    /// at the end of the copy, at a frame it cannot unwind, or at the
    /// stack's root; whatever was found until then is returned.
    pub fn unwind(
        &mut self,
        modules: &[Module],
        regs: &Regs,
        stack: &[u8],
        max: usize,
    ) -> Vec<u64> {
        let key = fingerprint(modules);
        let known = self
            .processes
            .get(&key)
            .is_some_and(|p| p.modules == modules);
        if !known {
            self.processes.remove(&key);
        }
        self.unwind_with(key, || modules.to_vec(), regs, stack, max)
            .addrs
            .clone()
    }

    /// [`Unwinder::unwind`] against the modules the caller calls `key`:
    /// the same key must always mean the same list, which `modules` gives
    /// where the unwinder for it is not built yet (a process's mappings
    /// are listed once, not at every sample).
    pub fn unwind_with(
        &mut self,
        key: u64,
        modules: impl FnOnce() -> Vec<Module>,
        regs: &Regs,
        stack: &[u8],
        max: usize,
    ) -> &Unwound {
        if max == 0 {
            return Unwound::NONE;
        }
        let memo_key = (key, *regs, max);
        if self.memo.recall(&memo_key, stack).is_some() {
            return &self.memo.0[&memo_key].found;
        }
        if !self.processes.contains_key(&key) {
            if self.processes.len() >= MAX_PROCESSES {
                self.processes.clear();
            }
            let modules = modules();
            let unwinder = self.build(&modules);
            self.processes
                .insert(key, ProcessUnwinder { modules, unwinder });
        }
        let unwinder = &self.processes[&key].unwinder;
        let walked = walk(unwinder, &mut self.cache, regs, stack, max);
        self.memo.keep(memo_key, walked)
    }

    fn build(&mut self, modules: &[Module]) -> native::Unwinder {
        let mut unwinder = native::Unwinder::new();
        for module in modules {
            let Some(file) = self.file(module) else {
                continue;
            };
            if let Some(placed) = place(&file, module) {
                unwinder.add_module(placed);
            }
        }
        unwinder
    }

    /// The file of `module`, read on first use; `None` if unusable.
    fn file(&mut self, module: &Module) -> Option<Arc<ElfFile>> {
        self.files
            .entry(FileKey::of(module))
            .or_insert_with(|| match load(&module.path, module.build_id.as_deref()) {
                Ok(file) => Some(Arc::new(file)),
                Err(err) => {
                    log::debug!("unwinding by frame pointers only: {err}");
                    None
                }
            })
            .clone()
    }
}

fn fingerprint(modules: &[Module]) -> u64 {
    let mut hasher = DefaultHasher::new();
    modules.hash(&mut hasher);
    hasher.finish()
}

/// Unwinds, keeping the words read on the way.
fn walk(
    unwinder: &native::Unwinder,
    cache: &mut native::Cache,
    regs: &Regs,
    stack: &[u8],
    max: usize,
) -> Walked {
    let mut reads = Vec::new();
    let mut read_stack = |addr| {
        let word = read_word(stack, regs.sp, addr);
        reads.push((addr, word.ok()));
        word
    };
    let start = native::regs(regs, unwinder.max_known_code_address());
    let mut frames = unwinder.iter_frames(regs.ip, start, cache, &mut read_stack);
    let mut addrs = Vec::new();
    // An error ends the walk as the root does: framehop cannot tell a
    // truncated stack from some roots, and the frames so far stand.
    while addrs.len() < max {
        match frames.next() {
            Ok(Some(frame)) => addrs.push(frame.address()),
            Ok(None) | Err(_) => break,
        }
    }
    // A word the copy does not hold past its end: the stack went on.
    let copy_end = regs.sp.saturating_add(stack.len() as u64);
    let past_copy = reads
        .last()
        .is_some_and(|&(addr, value)| value.is_none() && addr.saturating_add(8) > copy_end);
    let cut = addrs.len() == max || past_copy;
    Walked {
        reads,
        found: Unwound { addrs, cut },
    }
}

/// The word at `addr` of the stack copied from `sp`; an error past it.
fn read_word(stack: &[u8], sp: u64, addr: u64) -> Result<u64, ()> {
    let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
    let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
    Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
}

/// `module`'s file as a framehop module placed at the mapping, or `None`
/// if no loadable segment holds its offset.
fn place(file: &ElfFile, module: &Module) -> Option<framehop::Module<Bytes>> {
    let bias = bias(
        &file.segments,
        module.start,
        module.file_offset,
        page_size(),
    )?;
    let info = ExplicitModuleSectionInfo {
        // ELF states addresses absolutely: the base is 0, the bias is the
        // difference between the process's addresses and the file's.
        base_svma: 0,
        text_svma: file.text.clone(),
        got_svma: file.got.clone(),
        eh_frame_svma: file.eh_frame.as_ref().map(|s| s.svma.clone()),
        eh_frame: file.eh_frame.as_ref().map(|s| s.data.clone()),
        eh_frame_hdr_svma: file.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
        eh_frame_hdr: file.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
        debug_frame: file.debug_frame.clone(),
        // Mach-O's, and the code itself, which only a file without unwind
        // sections needs (framehop's prologue analysis).
        text: None,
        stubs_svma: None,
        stub_helper_svma: None,
        unwind_info: None,
        text_segment_svma: None,
        text_segment: None,
    };
    let name = module.path.to_string_lossy().into_owned();
    Some(framehop::Module::new(
        name,
        module.start..module.end,
        bias,
        info,
    ))
}

fn page_size() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(size)) if size > 0 => size as u64,
        _ => 4096,
    }
}

/// What to add to the file's addresses to get the process's: through the
/// loadable segment the mapping at `start` of `file_offset` shows, the
/// executable one where its first page also holds the end of another.
fn bias(segments: &Segments, start: u64, file_offset: u64, page: u64) -> Option<u64> {
    let segment = (segments.holding(file_offset, page))
        .find(|s| s.executable)
        .or_else(|| segments.holding(file_offset, page).next())?;
    Some(segment.bias(start, file_offset))
}

pub(super) fn load(path: &Path, build_id: Option<&[u8]>) -> Result<ElfFile, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let elf = |source| LoadError::Elf {
        path: path.to_owned(),
        source,
    };
    // Mapped, not copied: an unwinding reads a few pages of a section
    // (the index's binary search, one entry's rules), and a process maps
    // files of tens of megabytes it is never sampled in (libLLVM under
    // `ar`: 10 ms and 5 MB to copy). A file truncated under the mapping
    // would kill the recorder with SIGBUS, as it would blazesym, which
    // maps the same files to name their frames.
    // SAFETY: read-only; see above for a file changed in place.
    let map = Arc::new(unsafe { Mmap::map(&File::open(path).map_err(io)?) }.map_err(io)?);
    let file = ElfFile64::<Endianness, _>::parse(&map[..]).map_err(elf)?;
    if let Some(want) = build_id {
        if file.build_id().map_err(elf)? != Some(want) {
            return Err(LoadError::Replaced {
                path: path.to_owned(),
            });
        }
    }
    let section = |name| section(&file, &map, name);
    let eh_frame = section(".eh_frame");
    Ok(ElfFile {
        segments: Segments::of(&file),
        // framehop uses .debug_frame only without .eh_frame: read it only
        // then (it is large in unstripped files).
        debug_frame: match eh_frame {
            Some(_) => None,
            None => section(".debug_frame").map(|s| s.data),
        },
        eh_frame,
        eh_frame_hdr: section(".eh_frame_hdr"),
        text: svma(&file, ".text"),
        got: svma(&file, ".got"),
    })
}

fn svma<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
    name: &str,
) -> Option<Range<u64>> {
    let section = file.section_by_name(name)?;
    Some(section.address()..section.address().saturating_add(section.size()))
}

/// A section's bytes in `map`, the file `file` was parsed from, if
/// present, stored and uncompressed (a compressed `.debug_frame` is left
/// out: rare, and frame pointers remain).
fn section(file: &ElfFile64<'_, Endianness>, map: &Arc<Mmap>, name: &str) -> Option<Section> {
    let section = file.section_by_name(name)?;
    // Where the section is not compressed, this is its file range; where
    // it has none (no bytes in the file), an empty one.
    let stored = section.compressed_file_range().ok()?;
    let start = usize::try_from(stored.offset).ok()?;
    let range = start..start.checked_add(usize::try_from(stored.compressed_size).ok()?)?;
    if stored.format != CompressionFormat::None || range.is_empty() || range.end > map.len() {
        return None;
    }
    Some(Section {
        svma: section.address()..section.address().saturating_add(section.size()),
        data: Bytes {
            file: Arc::clone(map),
            range,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;

    use super::*;
    use crate::stacks::segments::Segment;
    use crate::stacks::symbolize::{lookup_address, Symbolizer};
    use crate::stacks::test_support::{capture_regs, read_self, self_modules};

    /// A sample as the BPF program takes it: registers, and a copy of the
    /// stack from sp, here 8 KiB.
    struct Sample {
        regs: Regs,
        stack: Vec<u8>,
    }

    #[inline(never)]
    fn sampled_outer() -> Sample {
        let sample = sampled_middle();
        // Used after the call, so that the call is no tail call.
        black_box(&sample);
        sample
    }

    #[inline(never)]
    fn sampled_middle() -> Sample {
        let sample = sampled_leaf();
        black_box(&sample);
        sample
    }

    #[inline(never)]
    fn sampled_leaf() -> Sample {
        let regs = capture_regs!();
        Sample {
            regs,
            stack: read_self(regs.sp, 8192),
        }
    }

    /// The functions of `addrs` (an unwound stack), leaf first, inlined
    /// ones before those they are inlined into.
    fn names(modules: &[Module], addrs: &[u64]) -> Vec<String> {
        let mut symbolizer = Symbolizer::new();
        let mut names = Vec::new();
        for (i, &addr) in addrs.iter().enumerate() {
            let lookup = lookup_address(addr, i == 0);
            let Some(module) = find_module(modules, lookup) else {
                names.push(format!("{addr:#x}"));
                continue;
            };
            let offset = module.file_offset_of(lookup).unwrap();
            let chain = symbolizer.user(&module.path, &[offset]).remove(0);
            names.extend(
                chain
                    .into_iter()
                    .rev()
                    .map(|f| f.function.unwrap_or_else(|| format!("{addr:#x}"))),
            );
        }
        names
    }

    #[test]
    fn a_stack_of_this_process_unwinds_through_its_callers() {
        let sample = sampled_outer();
        let modules = self_modules();
        let addrs = Unwinder::new().unwind(&modules, &sample.regs, &sample.stack, 128);
        assert_eq!(addrs[0], sample.regs.ip);
        let names = names(&modules, &addrs);
        let position = |f: &str| {
            names
                .iter()
                .position(|n| n.ends_with(&format!("tests::{f}")))
        };
        let found = [
            "sampled_leaf",
            "sampled_middle",
            "sampled_outer",
            "a_stack_of_this_process_unwinds_through_its_callers",
        ]
        .map(position);
        assert!(
            found.iter().all(Option::is_some) && found.is_sorted(),
            "{found:?} in {names:#?}"
        );
    }

    #[test]
    fn a_file_with_another_build_id_is_not_used() {
        let exe = std::env::current_exe().unwrap();
        let file = load(&exe, None).unwrap();
        assert!(file.eh_frame.is_some() && file.segments.iter().any(|s| s.executable));
        let data = std::fs::read(&exe).unwrap();
        let id = ElfFile64::<Endianness>::parse(&*data)
            .unwrap()
            .build_id()
            .unwrap();
        if let Some(id) = id {
            assert!(load(&exe, Some(id)).is_ok());
        }
        let replaced = load(&exe, Some(b"another file"));
        assert!(
            matches!(replaced, Err(LoadError::Replaced { .. })),
            "{:?}",
            replaced.err()
        );
    }

    #[test]
    fn a_short_copy_of_the_stack_ends_the_unwinding_cleanly() {
        let sample = sampled_outer();
        let modules = self_modules();
        let mut unwinder = Unwinder::new();
        let full = unwinder.unwind(&modules, &sample.regs, &sample.stack, 128);
        let short = unwinder.unwind(&modules, &sample.regs, &sample.stack[..64], 128);
        assert!(
            !short.is_empty() && short.len() < full.len(),
            "{short:x?} of {full:x?}"
        );
        assert_eq!(short[..], full[..short.len()]);
        assert_eq!(
            unwinder.unwind(&modules, &sample.regs, &sample.stack, 2),
            full[..2]
        );
    }

    #[test]
    fn a_stack_is_recalled_only_where_the_words_unwinding_read_are_the_same() {
        let sample = sampled_outer();
        let modules = self_modules();
        let mut unwinder = Unwinder::new();
        let full = unwinder.unwind(&modules, &sample.regs, &sample.stack, 128);
        assert!(full.len() > 2, "{full:x?}");
        // A word no unwinding reads: the same stack.
        let mut stack = sample.stack.clone();
        let unread = stack.len() - 8;
        stack[unread..].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(unwinder.unwind(&modules, &sample.regs, &stack, 128), full);
        // The caller's return address, which it reads: another stack.
        let slot = stack
            .chunks_exact(8)
            .position(|w| u64::from_ne_bytes(w.try_into().unwrap()) == full[1])
            .expect("the return address is on the stack");
        stack[slot * 8..slot * 8 + 8].copy_from_slice(&0u64.to_ne_bytes());
        let changed = unwinder.unwind(&modules, &sample.regs, &stack, 128);
        assert_ne!(changed, full);
        assert_eq!(changed[0], full[0]);
    }

    fn segment(offset: u64, filesz: u64, vaddr: u64, executable: bool) -> Segment {
        Segment {
            offset,
            filesz,
            vaddr,
            executable,
        }
    }

    #[test]
    fn the_bias_places_a_segment_that_starts_inside_a_page() {
        // lld packs segments: the text starts at 0x5234 in the file and at
        // 0x6234 in memory; the mapping of it starts at the page below.
        let segments = Segments::from_iter([
            segment(0, 0x5234, 0, false),
            segment(0x5234, 0x1000, 0x6234, true),
        ]);
        let start = 0x7f00_0000_6000;
        let bias = bias(&segments, start, 0x5000, 0x1000).unwrap();
        assert_eq!(bias, 0x7f00_0000_0000);
    }

    #[test]
    fn a_non_pie_executable_has_no_bias() {
        let segments = Segments::from_iter([
            segment(0, 0x1000, 0x40_0000, false),
            segment(0x1000, 0x3000, 0x40_1000, true),
        ]);
        assert_eq!(bias(&segments, 0x40_1000, 0x1000, 0x1000), Some(0));
    }

    #[test]
    fn an_offset_outside_every_segment_places_nothing() {
        let segments = Segments::from_iter([segment(0, 0x1000, 0, true)]);
        assert_eq!(bias(&segments, 0x1000, 0x9000, 0x1000), None);
    }

    #[test]
    fn the_stack_reads_only_what_was_copied() {
        let stack: Vec<u8> = (0..16).collect();
        assert_eq!(
            read_word(&stack, 0x100, 0x108),
            Ok(u64::from_ne_bytes([8, 9, 10, 11, 12, 13, 14, 15]))
        );
        assert_eq!(read_word(&stack, 0x100, 0x109), Err(()));
        assert_eq!(read_word(&stack, 0x100, 0xf8), Err(()));
        assert_eq!(read_word(&stack, 0x100, u64::MAX), Err(()));
    }

    #[test]
    fn garbage_unwinds_to_a_short_stack_without_panicking() {
        let mut unwinder = Unwinder::new();
        let modules = [Module {
            start: 0x1000,
            end: 0x2000,
            path: "/nonexistent/lib.so".into(),
            ..Default::default()
        }];
        let stack = vec![0xab; 256];
        for regs in [
            Regs {
                ip: 0x1100,
                sp: 0x7000,
                fp: 0x7010,
                lr: 0x1200,
            },
            Regs {
                ip: u64::MAX,
                sp: u64::MAX - 4,
                fp: 0,
                lr: 0,
            },
            Regs::default(),
        ] {
            let frames = unwinder.unwind(&modules, &regs, &stack, 64);
            assert_eq!(frames.first(), Some(&regs.ip));
            assert!(frames.len() <= 64);
        }
        assert!(unwinder
            .unwind(&modules, &Regs::default(), &[], 0)
            .is_empty());
    }
}
