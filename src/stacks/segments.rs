//! Where an ELF file's bytes load: its loadable segments, to go from an
//! address the file states to a file offset and back, and to place the
//! file in a process from one of its mappings. Unwinding, naming, the
//! probes and the Python frames all go through here, so that they agree
//! on where a byte of a file is.

use object::{Object, ObjectSegment};

/// A loadable segment: `filesz` bytes at `offset` in the file, loaded at
/// `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
    pub executable: bool,
}

impl Segment {
    /// What to add to the file's addresses to get the process's, for the
    /// mapping at `start` of `file_offset` placed by this segment.
    pub(crate) fn bias(&self, start: u64, file_offset: u64) -> u64 {
        let svma = self
            .vaddr
            .wrapping_add(file_offset)
            .wrapping_sub(self.offset);
        start.wrapping_sub(svma)
    }
}

/// A file's loadable segments, in the order its program headers list them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Segments(Vec<Segment>);

impl Segments {
    pub(crate) fn of<'data>(file: &impl Object<'data>) -> Segments {
        let segments = file.segments().map(|s| {
            let (offset, filesz) = s.file_range();
            Segment {
                offset,
                filesz,
                vaddr: s.address(),
                executable: s.permissions().executable(),
            }
        });
        Segments(segments.collect())
    }

    /// Only those whose code may run.
    pub(crate) fn executable(self) -> Segments {
        Segments(self.0.into_iter().filter(|s| s.executable).collect())
    }

    /// Where in the file the bytes loaded at `address` are: in the first
    /// segment whose file bytes load there (none for `.bss`).
    pub(crate) fn file_offset(&self, address: u64) -> Option<u64> {
        self.0.iter().find_map(|s| {
            let at = address.checked_sub(s.vaddr)?;
            (at < s.filesz).then(|| s.offset + at)
        })
    }

    /// The address the file's byte at `offset` loads at: in the first
    /// segment whose file bytes hold it, as blazesym places it.
    pub(crate) fn address(&self, offset: u64) -> Option<u64> {
        self.0.iter().find_map(|s| {
            let at = offset.checked_sub(s.offset)?;
            (at < s.filesz).then(|| s.vaddr + at)
        })
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Segment> {
        self.0.iter()
    }

    /// The segments a mapping of the file from `file_offset` may show: a
    /// mapping starts at the page boundary at or below its segment's
    /// offset, so its first page may also hold the end of the segment
    /// before.
    pub(crate) fn holding(&self, file_offset: u64, page: u64) -> impl Iterator<Item = &Segment> {
        self.0.iter().filter(move |s| {
            let first = s.offset - s.offset % page.max(1);
            (first..s.offset.saturating_add(s.filesz)).contains(&file_offset)
        })
    }
}

impl FromIterator<Segment> for Segments {
    fn from_iter<I: IntoIterator<Item = Segment>>(segments: I) -> Self {
        Segments(segments.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(list: &[(u64, u64, u64, bool)]) -> Segments {
        let segment = |&(offset, filesz, vaddr, executable)| Segment {
            offset,
            filesz,
            vaddr,
            executable,
        };
        list.iter().map(segment).collect()
    }

    #[test]
    fn offsets_and_addresses_go_both_ways_through_their_segment() {
        // lld packs segments: the text starts at 0x5234 in the file and at
        // 0x6234 in memory.
        let packed = segments(&[(0, 0x5234, 0, false), (0x5234, 0x1000, 0x6234, true)]);
        assert_eq!(packed.file_offset(0x6300), Some(0x5300));
        assert_eq!(packed.address(0x5300), Some(0x6300));
        assert_eq!(packed.address(0x100), Some(0x100));
        // Between the two in memory, and past the file's bytes.
        assert_eq!(packed.file_offset(0x5300), None);
        assert_eq!(packed.address(0x6234), None);
        assert_eq!(packed.executable().address(0x100), None);
    }

    #[test]
    fn a_mapping_from_the_page_below_shows_both_segments() {
        let packed = segments(&[(0, 0x5234, 0, false), (0x5234, 0x1000, 0x6234, true)]);
        let held: Vec<_> = packed.holding(0x5000, 0x1000).map(|s| s.offset).collect();
        assert_eq!(held, [0, 0x5234]);
        assert_eq!(packed.holding(0x9000, 0x1000).count(), 0);
    }
}
