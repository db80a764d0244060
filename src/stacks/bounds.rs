//! Where the functions of a stripped file begin: its unwind tables
//! (`.eh_frame`) describe every function by its start and length, so code
//! no symbol names is still grouped by the function it belongs to
//! (`libz.so.1+0x4a00`, not one row per address: `+0x4a08`, `+0x4a20`).

use std::fs::File;
use std::path::Path;

use gimli::{BaseAddresses, CieOrFde, EhFrame, NativeEndian, UnwindSection};
use object::read::elf::ElfFile64;
use object::read::ReadCache;
use object::{Endianness, Object, ObjectSection, ObjectSegment};

/// The functions of one file, by file offset: sorted, not overlapping.
#[derive(Debug, Default)]
pub struct Functions {
    ranges: Vec<(u64, u64)>,
}

impl Functions {
    /// The functions the ELF file at `path` describes; none if it cannot
    /// be read or has no `.eh_frame` (its frames stay one per address).
    pub fn read(path: &Path) -> Self {
        let ranges = File::open(path).ok().and_then(|f| {
            let data = ReadCache::new(f);
            let file = ElfFile64::<Endianness, _>::parse(&data).ok()?;
            Some(ranges(&file))
        });
        let mut ranges = ranges.unwrap_or_default();
        ranges.sort_unstable();
        Self { ranges }
    }

    /// The file offset where the function holding `offset` begins, if a
    /// function does.
    pub fn start_of(&self, offset: u64) -> Option<u64> {
        let after = self.ranges.partition_point(|&(start, _)| start <= offset);
        let &(start, end) = self.ranges.get(after.checked_sub(1)?)?;
        (offset < end).then_some(start)
    }
}

/// Each FDE's range of code, as file offsets of the segment it lies in.
fn ranges<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
) -> Vec<(u64, u64)> {
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .filter(|s| s.permissions().executable())
        .map(|s| (s.address(), s.size(), s.file_range().0))
        .collect();
    let to_offset = |svma: u64| {
        let &(vaddr, _, offset) = segments
            .iter()
            .find(|&&(vaddr, size, _)| (vaddr..vaddr.saturating_add(size)).contains(&svma))?;
        Some(svma - vaddr + offset)
    };
    let eh_frame = EhFrame::new(data, NativeEndian);
    let bases = BaseAddresses::default().set_eh_frame(section.address());
    let mut entries = eh_frame.entries(&bases);
    let mut ranges = Vec::new();
    // A malformed entry ends the list: the ranges before it stand.
    while let Ok(Some(entry)) = entries.next() {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let Ok(fde) =
            partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset))
        else {
            continue;
        };
        if let Some(start) = to_offset(fde.initial_address()) {
            ranges.push((start, start.saturating_add(fde.len())));
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use object::ObjectSymbol;

    use super::*;

    /// Every function of libc that a symbol names begins where its FDE
    /// says, and each address inside it maps to that start.
    #[test]
    fn libc_functions_begin_where_their_symbols_do() {
        let libc = crate::stacks::test_support::self_libc();
        let functions = Functions::read(&libc);
        assert!(functions.ranges.len() > 1000, "{}", functions.ranges.len());
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let malloc = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok("malloc"))
            .map(|s| s.address())
            .unwrap();
        // libc's executable segment is mapped at its file offset's vaddr
        // minus a constant; find malloc's file offset through it.
        let segment = file
            .segments()
            .find(|s| {
                s.permissions().executable()
                    && (s.address()..s.address() + s.size()).contains(&malloc)
            })
            .unwrap();
        let offset = malloc - segment.address() + segment.file_range().0;
        assert_eq!(functions.start_of(offset), Some(offset));
        assert_eq!(functions.start_of(offset + 7), Some(offset));
        assert_eq!(functions.start_of(u64::MAX), None);
    }
}
