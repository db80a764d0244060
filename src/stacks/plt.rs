//! Names for the PLT stubs of a file, `memset@plt`, as perf gives them.
//!
//! A call into another library goes through a stub in `.plt` or
//! `.plt.sec` that no symbol covers, so a sample in one would be named
//! after the nearest symbol before it (`_init`, the end of `.init`):
//! wrong, and in a hot interpreter loop worth a few percent. The stubs
//! are laid out in the order of the `.rela.plt` relocations, whose
//! symbols name them.
//!
//! The same table holds the names of the file's symbol versions
//! (`GLIBC_2.2.5`, `LLVM_14`): absolute symbols at 0, of no size. Taking
//! a symbol of no size to reach the next one, blazesym hands them the
//! code of a stripped library below its first exported function
//! (`.init`, static functions, constructors), which they never name.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use object::elf::{R_AARCH64_JUMP_SLOT, R_X86_64_JUMP_SLOT};
use object::read::elf::ElfFile64;
use object::read::ReadCache;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SymbolIndex};

/// One section of stubs, by file offset.
struct Stubs {
    offsets: Range<u64>,
    /// Bytes before the first stub that a relocation names (the lazy
    /// resolver's own stub in `.plt`).
    header: u64,
    size: u64,
}

/// The PLT stubs of one file and the functions they call, in order;
/// the names of its symbol versions.
#[derive(Default)]
pub struct Plt {
    sections: Vec<Stubs>,
    names: Vec<String>,
    versions: Vec<String>,
}

impl Plt {
    /// The stubs of the ELF file at `path`; none if it has none or cannot
    /// be read (its frames keep blazesym's names then).
    pub fn read(path: &Path) -> Self {
        File::open(path)
            .ok()
            .and_then(|f| {
                let data = ReadCache::new(f);
                let file = ElfFile64::<Endianness, _>::parse(&data).ok()?;
                Some(Self::of(&file))
            })
            .unwrap_or_default()
    }

    fn of<'data, R: object::ReadRef<'data>>(file: &ElfFile64<'data, Endianness, R>) -> Self {
        let (header, size) = match file.architecture() {
            object::Architecture::X86_64 => (16, 16),
            object::Architecture::Aarch64 => (32, 16),
            _ => return Self::default(),
        };
        // With IBT or BTI, calls go through `.plt.sec`, one stub per
        // relocation; `.plt` then holds only the lazy binding's stubs.
        let sections = [(".plt.sec", 0), (".plt", header)]
            .into_iter()
            .filter_map(|(name, header)| {
                let (start, len) = file.section_by_name(name)?.file_range()?;
                Some(Stubs {
                    offsets: start..start + len,
                    header,
                    size,
                })
            })
            .collect();
        Self {
            sections,
            names: jump_slots(file),
            versions: versions(file),
        }
    }

    /// `FUNCTION@plt` for a file offset inside a stub that calls it.
    pub fn name(&self, offset: u64) -> Option<String> {
        let stubs = self.sections.iter().find(|s| s.offsets.contains(&offset))?;
        let index = (offset - stubs.offsets.start).checked_sub(stubs.header)? / stubs.size;
        let name = self.names.get(usize::try_from(index).ok()?)?;
        Some(format!("{name}@plt"))
    }

    /// Whether `name` is one of the file's symbol versions, which name no
    /// code.
    pub fn is_version(&self, name: &str) -> bool {
        self.versions.iter().any(|v| v == name)
    }
}

/// The names of the file's symbol versions, as `.dynsym` holds them.
fn versions<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
) -> Vec<String> {
    let absolute = |s: &object::read::elf::ElfSymbol64<'data, '_, Endianness, R>| {
        s.section() == object::SymbolSection::Absolute && s.address() == 0 && s.size() == 0
    };
    file.dynamic_symbols()
        .filter(absolute)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect()
}

/// The functions `.rela.plt` binds, in its order.
fn jump_slots<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
) -> Vec<String> {
    let endian = file.endian();
    let Some(symbols) = file.dynamic_symbol_table() else {
        return Vec::new();
    };
    let relocations = file
        .section_by_name(".rela.plt")
        .and_then(|s| s.data().ok())
        .and_then(|d| object::slice_from_all_bytes::<object::elf::Rela64<Endianness>>(d).ok())
        .unwrap_or_default();
    relocations
        .iter()
        .filter(|r| {
            matches!(
                r.r_type(endian, false),
                R_X86_64_JUMP_SLOT | R_AARCH64_JUMP_SLOT
            )
        })
        .map(|r| {
            let index = r.r_sym(endian, false) as usize;
            symbols
                .symbol_by_index(SymbolIndex(index))
                .ok()
                .and_then(|s| s.name().ok())
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary calls libc's `malloc` through a stub of its own.
    #[test]
    fn a_stub_of_this_binary_is_named_for_the_function_it_calls() {
        let exe = std::env::current_exe().unwrap();
        let plt = Plt::read(&exe);
        let names: Vec<String> = plt
            .sections
            .iter()
            .flat_map(|s| (s.offsets.start + s.header..s.offsets.end).step_by(s.size as usize))
            .filter_map(|offset| plt.name(offset))
            .collect();
        assert!(!names.is_empty(), "no stub named in {}", exe.display());
        assert!(
            names.iter().all(|n| n.ends_with("@plt") && n.len() > 4),
            "{names:?}"
        );
    }

    #[test]
    fn an_offset_outside_the_stubs_has_no_stub_name() {
        let plt = Plt {
            sections: vec![Stubs {
                offsets: 0x1000..0x1040,
                header: 16,
                size: 16,
            }],
            names: vec!["memset".into(), "free".into()],
            versions: Vec::new(),
        };
        assert_eq!(plt.name(0x1008), None, "the resolver's stub");
        assert_eq!(plt.name(0x1014).as_deref(), Some("memset@plt"));
        assert_eq!(plt.name(0x1020).as_deref(), Some("free@plt"));
        assert_eq!(plt.name(0x1030), None, "a stub past the relocations");
        assert_eq!(plt.name(0x1040), None);
    }
}
