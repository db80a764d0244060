//! Where the functions of a stripped file begin: its unwind tables
//! (`.eh_frame`) describe every function by its start and length, so code
//! no symbol names is still grouped by the function it belongs to
//! (`libz.so.1+0x4a00`, not one row per address: `+0x4a08`, `+0x4a20`).

use std::path::Path;

use gimli::{BaseAddresses, CieOrFde, EhFrame, EhFrameHdr, NativeEndian, UnwindSection};

use super::segments::Segments;
use super::unwind::{load, Bytes, ElfFile};

/// The functions of one file.
#[derive(Debug, Default)]
pub struct Functions {
    table: Table,
}

#[derive(Debug, Default)]
enum Table {
    /// None described (the file cannot be read, or has no `.eh_frame`).
    #[default]
    Empty,
    /// The FDE of an address found through `.eh_frame_hdr`'s sorted
    /// table, as an unwinder finds it: only that FDE is parsed, where
    /// reading every FDE (cc1 has 45,000) cost a build's recording more
    /// than the rest of its naming (BENCHMARKS.md, "Naming without
    /// reading every unit or FDE").
    Indexed(Indexed),
    /// Every FDE's range, by file offset: sorted, not overlapping. For a
    /// file without `.eh_frame_hdr`.
    Ranges(Vec<(u64, u64)>),
}

#[derive(Debug)]
struct Indexed {
    eh_frame: Bytes,
    hdr: Bytes,
    bases: BaseAddresses,
    segments: Segments,
}

impl Functions {
    /// The functions the ELF file at `path` describes; none if it cannot
    /// be read or has no `.eh_frame` (its frames stay one per address).
    pub fn read(path: &Path) -> Self {
        // The unwinder's reading of the file: its unwind sections mapped,
        // not copied (cc1's are 2.7 MB).
        let table = load(path, None).ok().and_then(table);
        Self {
            table: table.unwrap_or_default(),
        }
    }

    /// The file offset where the function holding `offset` begins, if a
    /// function does.
    pub fn start_of(&self, offset: u64) -> Option<u64> {
        match &self.table {
            Table::Empty => None,
            Table::Indexed(indexed) => indexed.start_of(offset),
            Table::Ranges(ranges) => {
                let after = ranges.partition_point(|&(start, _)| start <= offset);
                let &(start, end) = ranges.get(after.checked_sub(1)?)?;
                (offset < end).then_some(start)
            }
        }
    }
}

impl Indexed {
    fn start_of(&self, offset: u64) -> Option<u64> {
        let svma = self.segments.address(offset)?;
        let hdr = EhFrameHdr::new(&self.hdr, NativeEndian).parse(&self.bases, 8);
        let hdr = hdr.ok()?;
        let eh_frame = EhFrame::new(&self.eh_frame, NativeEndian);
        let fde = (hdr.table()?)
            .fde_for_address(&eh_frame, &self.bases, svma, EhFrame::cie_from_offset)
            .ok()?;
        self.segments.file_offset(fde.initial_address())
    }
}

/// The file's functions: through `.eh_frame_hdr` where it has one with a
/// table, else every FDE's range.
fn table(file: ElfFile) -> Option<Table> {
    let eh_frame = file.eh_frame?;
    let segments = file.segments.executable();
    let bases = BaseAddresses::default().set_eh_frame(eh_frame.svma.start);
    if let Some(hdr) = file.eh_frame_hdr {
        let bases = bases.clone().set_eh_frame_hdr(hdr.svma.start);
        let parsed = EhFrameHdr::new(&hdr.data, NativeEndian).parse(&bases, 8);
        if parsed.is_ok_and(|parsed| parsed.table().is_some()) {
            return Some(Table::Indexed(Indexed {
                eh_frame: eh_frame.data,
                hdr: hdr.data,
                bases,
                segments,
            }));
        }
    }
    Some(Table::Ranges(ranges(&eh_frame.data, &bases, &segments)))
}

/// Each FDE's range of code, as file offsets of the segment it lies in,
/// sorted.
fn ranges(data: &[u8], bases: &BaseAddresses, segments: &Segments) -> Vec<(u64, u64)> {
    let eh_frame = EhFrame::new(data, NativeEndian);
    let mut entries = eh_frame.entries(bases);
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
        if let Some(start) = segments.file_offset(fde.initial_address()) {
            ranges.push((start, start.saturating_add(fde.len())));
        }
    }
    ranges.sort_unstable();
    ranges
}

#[cfg(test)]
mod tests {
    use object::{Object, ObjectSection, ObjectSymbol};

    use super::*;

    /// Every function of libc that a symbol names begins where its FDE
    /// says, and each address inside it maps to that start.
    #[test]
    fn libc_functions_begin_where_their_symbols_do() {
        let libc = crate::stacks::test_support::self_libc();
        let functions = Functions::read(&libc);
        assert!(
            matches!(functions.table, Table::Indexed(_)),
            "{functions:?}"
        );
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let malloc = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok("malloc"))
            .map(|s| s.address())
            .unwrap();
        let offset = Segments::of(&file).file_offset(malloc).unwrap();
        assert_eq!(functions.start_of(offset), Some(offset));
        assert_eq!(functions.start_of(offset + 7), Some(offset));
        assert_eq!(functions.start_of(u64::MAX), None);
    }

    /// Found through `.eh_frame_hdr` or from every FDE, each byte of
    /// libc's code is placed in the same function.
    #[test]
    fn the_index_places_code_as_every_fde_does() {
        let libc = crate::stacks::test_support::self_libc();
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let Some(Table::Indexed(indexed)) = table(load(&libc, None).unwrap()) else {
            panic!("libc has an .eh_frame_hdr table");
        };
        let ranges = ranges(&indexed.eh_frame, &indexed.bases, &indexed.segments);
        assert!(ranges.len() > 1000, "{}", ranges.len());
        let all = Functions {
            table: Table::Ranges(ranges),
        };
        let text = file.section_by_name(".text").unwrap().file_range().unwrap();
        let mut placed = 0;
        for offset in (text.0..text.0 + text.1).step_by(7) {
            let start = indexed.start_of(offset);
            assert_eq!(start, all.start_of(offset), "{offset:#x}");
            placed += usize::from(start.is_some());
        }
        assert!(placed > (text.1 / 7) as usize * 9 / 10, "{placed}");
    }
}
