//! Where a CPython interpreter keeps what the frame walk reads, per minor
//! version 3.9 to 3.14: offsets checked against each version's headers
//! and walked on live interpreters (static and shared libpython, Debian's
//! and pyenv's builds). 3.13 and later describe their own layout
//! (`_Py_DebugOffsets`, at the start of `_PyRuntime`), which is read from
//! the file and preferred; what it lacks stays in the table.

use std::fs::File;

use object::read::elf::{ElfFile64, ElfSymbol64};
use object::read::ReadCache;
use object::{Endianness, Object, ObjectSymbol};

use super::lines::Table;
use crate::bpf::types::{py_binary_key, py_flags, py_layout};
use crate::event::Pid;
use crate::recorder::wire::{Mapping, PyCode};
use crate::stacks::segments::Segments;

/// glibc's `struct pthread` (what `pthread_self` returns), from its start
/// to its `tid`: after the TCB header, in a union with 24 pointers of
/// padding (x86_64), or after that padding alone (aarch64).
#[cfg(target_arch = "x86_64")]
pub(super) const PTHREAD_TID: u64 = 720;
#[cfg(target_arch = "aarch64")]
pub(super) const PTHREAD_TID: u64 = 208;

/// Where an interpreter lists its threads, for a dump of each one's
/// frames: offsets from `_PyRuntime` to the first interpreter, from it to
/// its first thread state, and from one thread state to the next.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadList {
    pub(crate) interpreters: u32,
    pub(crate) threads: u32,
    pub(crate) next: u32,
    pub(crate) tid: TidAt,
}

/// Where a thread state says which thread it is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TidAt {
    /// Its `native_thread_id` (3.11+).
    Native(u32),
    /// Its `thread_id`, the thread's `struct pthread` (3.9, 3.10), which
    /// holds the tid PTHREAD_TID bytes in.
    Pthread(u32),
}

/// One interpreter's file, read once: its version's layout and where its
/// eval function and runtime state are.
pub(crate) struct Interpreter {
    minor: u32,
    /// Offsets of the walk, `runtime` still 0.
    layout: py_layout,
    /// Where it lists its threads.
    threads: ThreadList,
    /// `_PyRuntime`'s address in the file.
    runtime: u64,
    /// The file's key when it is loaded where it says (not
    /// position-independent): its layout then holds in every process.
    fixed: Option<py_binary_key>,
    segments: Segments,
    /// File offsets of `_PyEval_EvalFrameDefault`.
    eval: (u64, u64),
    /// Where a compact ASCII and a compact non-ASCII string's text starts.
    ascii_data: usize,
    compact_data: usize,
}

/// The little-endian 8-byte word at `at` of bytes copied from a process.
pub(super) fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Whether the file at `path` may be a CPython interpreter or libpython,
/// by its name: `python3.11`, `libpython3.12.so.1.0`, ...
pub(crate) fn may_be_python(path: &str) -> bool {
    minor_of(path).is_some()
}

/// The minor version a file's name says: `python3.N`, `libpython3.N...`.
fn minor_of(path: &str) -> Option<u32> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("libpython3.")
        .or_else(|| name.strip_prefix("python3."))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let minor = digits.parse().ok()?;
    (9..=14).contains(&minor).then_some(minor)
}

/// The symbol of `elf` that defines `name`, dynamic or not.
pub(super) fn defined<'d, 'f, R: object::ReadRef<'d>>(
    elf: &'f ElfFile64<'d, Endianness, R>,
    name: &str,
) -> Option<ElfSymbol64<'d, 'f, Endianness, R>> {
    elf.dynamic_symbols()
        .chain(elf.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))
}

impl Interpreter {
    /// Reads the interpreter at `path` as process `pid` sees it; `None`
    /// when it is not one this knows.
    pub(crate) fn read(pid: Pid, path: &str) -> Option<Interpreter> {
        let minor = minor_of(path)?;
        let file = super::open_mapped(pid, path).ok()?;
        let key = binary_key(&file.metadata().ok()?);
        let cache = ReadCache::new(file);
        let elf = ElfFile64::<Endianness, _>::parse(&cache).ok()?;
        let symbol = |name: &str| defined(&elf, name).map(|s| (s.address(), s.size()));
        let (runtime, _) = symbol("_PyRuntime")?;
        let (eval, eval_size) = symbol("_PyEval_EvalFrameDefault")?;
        let segments = Segments::of(&elf);
        let mut interpreter = Interpreter {
            minor,
            layout: table(minor)?,
            threads: thread_list(minor)?,
            runtime,
            fixed: (elf.kind() == object::ObjectKind::Executable).then_some(key),
            segments,
            eval: (0, 0),
            ascii_data: if minor <= 11 { 48 } else { 40 },
            compact_data: if minor <= 11 { 72 } else { 56 },
        };
        interpreter.layout.tls_specific = super::tls::key_data(pid);
        let eval = interpreter.segments.file_offset(eval)?;
        interpreter.eval = (eval, eval + eval_size);
        if minor >= 13 {
            let at = interpreter.segments.file_offset(runtime)?;
            let debug = elf_bytes(&cache, at, 768)?;
            interpreter.read_debug_offsets(&debug)?;
        }
        Some(interpreter)
    }

    /// 3.13+: the offsets the interpreter gives itself (`_Py_DebugOffsets`),
    /// at their places in that struct for the version.
    fn read_debug_offsets(&mut self, bytes: &[u8]) -> Option<()> {
        if bytes.get(..8)? != b"xdebugpy" {
            return None;
        }
        let word = |at: usize| u32::try_from(word_at(bytes, at)?).ok();
        // (current_frame, previous, executable, instr_ptr, owner,
        // filename, qualname, linetable, firstlineno, co_code_adaptive,
        // ascii size)
        let places: [usize; 11] = match self.minor {
            13 => [184, 232, 240, 248, 264, 280, 296, 304, 312, 344, 560],
            _ => [208, 256, 264, 272, 288, 320, 336, 344, 352, 384, 640],
        };
        // (interpreters_head, threads_head, next, native_thread_id)
        let list: [usize; 4] = match self.minor {
            13 => [40, 72, 168, 200],
            _ => [40, 72, 192, 224],
        };
        let [interpreters, threads, next, native] = list.map(word);
        self.threads = ThreadList {
            interpreters: interpreters?,
            threads: threads?,
            next: next?,
            tid: TidAt::Native(native?),
        };
        let [frame, previous, code, instr, owner, filename, qualname, lines, first, code_start, ascii] =
            places.map(word);
        let l = &mut self.layout;
        l.tstate_frame = frame?;
        l.frame_previous = previous?;
        l.frame_code = code?;
        l.frame_instr = instr?;
        l.owner_off = owner?;
        l.code_filename = filename?;
        l.code_qualname = qualname?;
        l.code_lines = lines?;
        l.code_firstlineno = first?;
        l.code_instructions = code_start?;
        self.ascii_data = ascii? as usize;
        Some(())
    }

    /// The layout in every process, where the file has fixed addresses.
    pub(crate) fn fixed_layout(&self) -> Option<py_layout> {
        self.fixed.map(|_| self.layout_with(0))
    }

    /// The layout for the process of `mapping`, one of this file's.
    pub(crate) fn layout_at(&self, mapping: &Mapping) -> Option<py_layout> {
        let bias = if self.fixed.is_some() {
            0
        } else {
            // The segment this mapping's file offset starts in, or the
            // page before it.
            let segment = self.segments.holding(mapping.file_offset, 4096).next()?;
            segment.bias(mapping.start, mapping.file_offset)
        };
        Some(self.layout_with(bias))
    }

    /// The layout where the file is mapped `bias` bytes from its
    /// addresses.
    fn layout_with(&self, bias: u64) -> py_layout {
        py_layout {
            runtime: self.runtime.wrapping_add(bias),
            ..self.layout
        }
    }

    /// Where it lists its threads.
    pub(crate) fn thread_list(&self) -> ThreadList {
        self.threads
    }

    /// The file's key, where its layout holds for every process.
    pub(crate) fn binary(&self) -> Option<py_binary_key> {
        self.fixed
    }

    pub(crate) fn is_eval(&self, offset: u64) -> bool {
        (self.eval.0..self.eval.1).contains(&offset)
    }

    /// The identity of a code object as it was copied: the kernel's mix
    /// of its qualified name's and file name's addresses (`py_identity`).
    pub(crate) fn identity_of(&self, code: &PyCode) -> Option<u64> {
        let object = code.object.as_deref()?;
        let word = |at: u32| word_at(object, at as usize);
        let (qualname, filename) = (
            word(self.layout.code_qualname)?,
            word(self.layout.code_filename)?,
        );
        Some(qualname ^ filename.rotate_left(1))
    }

    /// A code object's function at `instruction` (`qualname
    /// (file:line)`, as py-spy names it; `qualname (file)` where the
    /// line is not known) and file.
    pub(crate) fn name(&self, code: &PyCode, instruction: i32) -> Option<(String, String)> {
        let object = code.object.as_deref()?;
        let qualname = self.text(code.qualname.as_deref()?)?;
        let file = self.text(code.filename.as_deref()?)?;
        let at = self.layout.code_firstlineno as usize;
        let first = i32::from_le_bytes(object.get(at..at + 4)?.try_into().ok()?);
        let short = file.rsplit('/').next().unwrap_or(&file);
        let function = match self.line(code, first, instruction) {
            Some(line) => format!("{qualname} ({short}:{line})"),
            None => format!("{qualname} ({short})"),
        };
        Some((function, file))
    }

    /// The line of `instruction` from the code object's line table (a
    /// bytes object: its length at 16, its data from 32).
    fn line(&self, code: &PyCode, first: i32, instruction: i32) -> Option<i32> {
        let bytes = code.lines.as_deref()?;
        let length =
            usize::try_from(i64::from_le_bytes(bytes.get(16..24)?.try_into().ok()?)).ok()?;
        let data = bytes.get(32..)?;
        let table = &data[..length.min(data.len())];
        let whole = table.len() == length;
        Table::of(self.minor).line(table, whole, first, instruction)
    }

    /// The text of a str object's bytes (`PyASCIIObject` and after); a
    /// text longer than the bytes copied ends in `…`.
    fn text(&self, bytes: &[u8]) -> Option<String> {
        let length =
            usize::try_from(i64::from_le_bytes(bytes.get(16..24)?.try_into().ok()?)).ok()?;
        let state = u32::from_le_bytes(bytes.get(32..36)?.try_into().ok()?);
        let (kind, compact, ascii) = ((state >> 2) & 7, state & 32 != 0, state & 64 != 0);
        if !compact {
            return None;
        }
        let start = if ascii {
            self.ascii_data
        } else {
            self.compact_data
        };
        let unit = kind.max(1) as usize;
        let data = bytes.get(start..)?;
        let whole = data.len() >= length * unit;
        let chars = data
            .chunks_exact(unit)
            .take(length)
            .map(|c| c.iter().rev().fold(0u32, |v, &b| v << 8 | u32::from(b)))
            .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
        let mut text: String = chars.collect();
        if !whole {
            text.push('…');
        }
        Some(text)
    }
}

/// The key the kernel finds a file by: its inode and device, in the
/// kernel's encoding (major << 20 | minor).
fn binary_key(meta: &std::fs::Metadata) -> py_binary_key {
    use std::os::unix::fs::MetadataExt;
    let dev = meta.dev();
    py_binary_key {
        ino: meta.ino(),
        dev: libc::major(dev) << 20 | libc::minor(dev),
        ..Default::default()
    }
}

/// Whether the process of `mapping` has it still, as it lists its
/// mappings now.
pub(crate) fn still_mapped(mapping: &Mapping) -> bool {
    // /proc pads addresses to 8 digits.
    let start = format!("{:08x}-", mapping.start);
    std::fs::read_to_string(format!("/proc/{}/maps", mapping.pid)).is_ok_and(|maps| {
        maps.lines()
            .any(|l| l.starts_with(&start) && l.ends_with(mapping.path.as_str()))
    })
}

/// `len` bytes of the file at offset `at`.
fn elf_bytes(cache: &ReadCache<File>, at: u64, len: u64) -> Option<Vec<u8>> {
    use object::ReadRef;
    cache.read_bytes_at(at, len).ok().map(<[u8]>::to_vec)
}

/// Where minor version `minor` lists its threads, measured on each
/// version's interpreter (3.13+ say it themselves: read over this).
fn thread_list(minor: u32) -> Option<ThreadList> {
    let (interpreters, threads, tid) = match minor {
        9 | 10 => (32, 8, TidAt::Pthread(176)),
        11 => (40, 16, TidAt::Native(160)),
        12 => (40, 72, TidAt::Native(144)),
        13 | 14 => (0, 0, TidAt::Native(0)),
        _ => return None,
    };
    Some(ThreadList {
        interpreters,
        threads,
        next: 8,
        tid,
    })
}

/// The offsets of minor version `minor` (x86_64 and aarch64 alike but for
/// the TSS key of 3.9 to 3.11, which follows mutexes 8 bytes larger on
/// aarch64).
fn table(minor: u32) -> Option<py_layout> {
    let arm = cfg!(target_arch = "aarch64");
    let old_key = |x86: u32| if arm { x86 + 16 } else { x86 };
    let base = py_layout {
        code_mask: u64::MAX,
        code_qualname: 128,
        code_filename: 112,
        code_lines: 136,
        shim_owner: 3,
        ..Default::default()
    };
    let lasti = py_flags::PY_LASTI.0 | py_flags::PY_EVERY_ENTRY.0;
    let owner = py_flags::PY_OWNER.0;
    let cframe = py_flags::PY_CFRAME.0;
    Some(match minor {
        9 | 10 => py_layout {
            tss_key: old_key(588),
            tstate_frame: 24,
            frame_code: 32,
            frame_previous: 24,
            frame_instr: if minor == 9 { 104 } else { 96 },
            // No co_qualname before 3.11: co_name.
            code_qualname: 112,
            code_filename: 104,
            code_firstlineno: 40,
            // co_lnotab (3.9), co_linetable (3.10).
            code_lines: 120,
            flags: lasti,
            ..base
        },
        11 => py_layout {
            tss_key: old_key(596),
            tstate_frame: 56,
            cframe_frame: 8,
            cframe_previous: 16,
            frame_code: 32,
            frame_previous: 48,
            frame_instr: 56,
            entry_off: 68,
            owner_off: 69,
            code_instructions: 184,
            code_firstlineno: 72,
            flags: cframe | owner | py_flags::PY_IS_ENTRY.0,
            ..base
        },
        12 => py_layout {
            tss_key: 1548,
            tstate_frame: 56,
            cframe_frame: 0,
            cframe_previous: 8,
            frame_code: 0,
            frame_previous: 8,
            frame_instr: 56,
            owner_off: 70,
            code_instructions: 192,
            code_firstlineno: 68,
            flags: cframe | owner,
            ..base
        },
        13 | 14 => py_layout {
            tss_key: if minor == 13 { 2164 } else { 2340 },
            tstate_frame: 72,
            frame_code: 0,
            frame_previous: 8,
            frame_instr: 56,
            owner_off: if minor == 13 { 70 } else { 74 },
            code_instructions: if minor == 13 { 200 } else { 208 },
            code_firstlineno: 68,
            // 3.14's frames hold a tagged reference to their code.
            code_mask: if minor == 13 { u64::MAX } else { !3 },
            flags: owner,
            ..base
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_files_name() {
        assert_eq!(minor_of("/usr/bin/python3.11"), Some(11));
        assert_eq!(
            minor_of("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0"),
            Some(12)
        );
        assert_eq!(minor_of("/usr/bin/python3"), None);
        assert_eq!(minor_of("/usr/lib/libpython3.8.so"), None);
        assert_eq!(minor_of("/usr/bin/bash"), None);
    }
}
