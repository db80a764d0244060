//! Naming an address from the one DWARF unit it is in. blazesym reads
//! the abbreviations of every unit of a file before its first answer
//! (libc has 4,126 units), and a recording that samples an offset of
//! libc the names cache has not seen pays for all of them.
//! `.debug_aranges` says which unit holds an address, so only that unit
//! is read here, and its answer is the one blazesym gives: the same
//! function, inlined calls and lines, chosen the same way (BENCHMARKS.md,
//! "Naming from one DWARF unit").
//!
//! Where no function of the DWARF holds an address, blazesym names it
//! from the symbol table with the DWARF's line: the line is found here,
//! and the name asked of blazesym from the symbol table alone, which
//! reads no DWARF. What cannot be read here, and a file whose
//! `.debug_aranges` does not list every unit, is left to blazesym.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, Range, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection};

use super::cache::Named;

type R<'d> = EndianSlice<'d, RunTimeEndian>;

/// How deep a name is followed through abstract origins and
/// specifications, as blazesym does.
const NAME_DEPTH: usize = 16;

/// A mapped ELF file whose DWARF sections are stored uncompressed (the
/// names cache's inflated copies).
pub(crate) struct Mapped(memmap2::Mmap);

impl Mapped {
    pub(crate) fn open(path: &Path) -> Option<Mapped> {
        let file = File::open(path).ok()?;
        // SAFETY: the cache replaces its copies only whole, by rename.
        unsafe { memmap2::Mmap::map(&file) }.ok().map(Mapped)
    }

    /// The file's DWARF, where its sections can be read as they are.
    fn dwarf(&self) -> Option<gimli::Dwarf<R<'_>>> {
        let elf = object::File::parse(&*self.0).ok()?;
        let endian = match elf.is_little_endian() {
            true => RunTimeEndian::Little,
            false => RunTimeEndian::Big,
        };
        let mut stored = true;
        let load = |id: gimli::SectionId| -> Result<R<'_>, ()> {
            let data = match elf.section_by_name(id.name()) {
                Some(section) => match section.compressed_data() {
                    Ok(c) if c.format == object::CompressionFormat::None => c.data,
                    _ => {
                        stored = false;
                        &[]
                    }
                },
                None => &[],
            };
            Ok(EndianSlice::new(data, endian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        stored.then_some(dwarf)
    }

    /// Where the file's units are; `None` where they cannot be found
    /// from `.debug_aranges` (see [`Index`]).
    pub(crate) fn index(&self) -> Option<Index> {
        Index::read(&self.dwarf()?)
    }

    /// The file's units, found through its `index`.
    pub(crate) fn units<'d>(&'d self, index: &'d Index) -> Option<Units<'d>> {
        Some(Units {
            dwarf: self.dwarf()?,
            index,
            read: HashMap::new(),
        })
    }
}

/// Where the units of a file's DWARF are. Reading it means reading every
/// unit's header, which a recording's thirty-odd naming batches paid
/// each time: it is read once per file and kept for the recording.
#[derive(Debug)]
pub(crate) struct Index {
    /// `.debug_aranges`: each range with its unit, by start, and the
    /// greatest end up to it.
    ranges: Vec<(Range, DebugInfoOffset, u64)>,
    /// Every unit's offset, in order.
    offsets: Vec<DebugInfoOffset>,
}

impl Index {
    /// `None` where `.debug_aranges` does not list every compilation
    /// unit: clang and rustc leave it out unless asked, and blazesym then
    /// finds units by their own ranges, which only reading each unit
    /// tells.
    fn read(dwarf: &gimli::Dwarf<R<'_>>) -> Option<Index> {
        let mut ranges = Vec::new();
        let mut listed = std::collections::HashSet::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Some(header) = headers.next().ok()? {
            let unit = header.debug_info_offset();
            listed.insert(unit);
            let mut entries = header.entries();
            while let Some(entry) = entries.next().transpose() {
                let Ok(entry) = entry else { continue };
                if entry.length() != 0 {
                    ranges.push((entry.range(), unit, 0));
                }
            }
        }
        let mut offsets = Vec::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next().ok()? {
            let offset = header.offset().as_debug_info_offset()?;
            let compiled = matches!(header.type_(), gimli::UnitType::Compilation);
            if compiled && !listed.contains(&offset) {
                return None;
            }
            offsets.push(offset);
        }
        // Ties go to the unit first in `.debug_info`, as in blazesym's.
        ranges.sort_by_key(|r| (r.0.begin, r.1 .0));
        let mut most = 0;
        for range in &mut ranges {
            most = most.max(range.0.end);
            range.2 = most;
        }
        Some(Index { ranges, offsets })
    }
}

/// A file's DWARF, each unit read when an address needs it.
pub(crate) struct Units<'d> {
    dwarf: gimli::Dwarf<R<'d>>,
    index: &'d Index,
    read: HashMap<DebugInfoOffset, Option<Unit<'d>>>,
}

impl<'d> Units<'d> {
    /// What the DWARF says of `addr`, as blazesym would answer; `None`
    /// where blazesym must be asked.
    pub(crate) fn name(&mut self, addr: u64) -> Option<Found> {
        let candidates = self.candidates(addr);
        let mut found = None;
        for &unit in &candidates {
            let function = self.unit(unit)?.function(addr);
            if let Some(function) = function {
                found = Some((unit, function));
                break;
            }
        }
        let location = self.location(&candidates, addr)?;
        let Some((unit, function)) = found else {
            return Some(Found::Line(named(None, location)));
        };
        let name = self.function_name(unit, function)?;
        let inlined = match &location {
            Some(_) => self.inlined(unit, function, addr)?,
            None => Vec::new(),
        };
        Some(Found::Frames(chain(name, location, inlined)))
    }

    /// The units whose ranges hold `addr`, in the order blazesym tries
    /// them: the latest start first.
    fn candidates(&self, addr: u64) -> Vec<DebugInfoOffset> {
        let end = self.index.ranges.partition_point(|r| r.0.begin <= addr);
        (self.index.ranges[..end].iter().rev())
            .take_while(|r| addr < r.2)
            .filter(|r| addr < r.0.end)
            .map(|r| r.1)
            .collect()
    }

    /// The unit at `offset`, read the first time; `None` where it cannot
    /// be.
    fn unit(&mut self, offset: DebugInfoOffset) -> Option<&mut Unit<'d>> {
        self.read_unit(offset).map(|(_, unit)| unit)
    }

    /// [`Units::unit`], with the sections it is read from.
    fn read_unit(
        &mut self,
        offset: DebugInfoOffset,
    ) -> Option<(&gimli::Dwarf<R<'d>>, &mut Unit<'d>)> {
        let dwarf = &self.dwarf;
        let unit = self.read.entry(offset).or_insert_with(|| {
            let header = dwarf.debug_info.header_from_offset(offset).ok()?;
            let unit = dwarf.unit(header).ok()?;
            Unit::new(dwarf, unit)
        });
        Some((dwarf, unit.as_mut()?))
    }

    /// The line of `addr` in the first of `candidates` that has one:
    /// `Some(None)` where none has.
    fn location(&mut self, candidates: &[DebugInfoOffset], addr: u64) -> Option<Option<Place>> {
        for &unit in candidates {
            let (dwarf, unit) = self.read_unit(unit)?;
            if let Some(place) = unit.lines(dwarf)?.find(addr) {
                return Some(Some(place));
            }
        }
        Some(None)
    }

    fn function_name(&mut self, unit: DebugInfoOffset, function: usize) -> Option<String> {
        let (lang, attributes) = {
            let unit = self.unit(unit)?;
            (unit.lang, unit.functions[function].name.clone())
        };
        let name = self.name_of(unit, attributes, NAME_DEPTH)?;
        Some(demangled(&name.unwrap_or_default(), lang))
    }

    /// The functions inlined at `addr` into the unit's `function`,
    /// outermost first, each with where it was called.
    fn inlined(
        &mut self,
        unit: DebugInfoOffset,
        function: usize,
        addr: u64,
    ) -> Option<Vec<(String, Option<Place>)>> {
        let calls = {
            let (dwarf, read) = self.read_unit(unit)?;
            read.inlined(dwarf, function)?.at(addr)
        };
        let lang = self.unit(unit)?.lang;
        let mut found = Vec::with_capacity(calls.len());
        for call in calls {
            let name = self
                .name_of(unit, call.name, NAME_DEPTH)?
                .unwrap_or_default();
            let place = match call.file {
                Some(file) => {
                    let (dwarf, read) = self.read_unit(unit)?;
                    let files = &read.lines(dwarf)?.files;
                    (files.get(file as usize)).map(|(dir, name)| Place {
                        path: joined(dir, name),
                        line: Some(call.line),
                    })
                }
                None => None,
            };
            found.push((demangled(&name, lang), place));
        }
        Some(found)
    }

    /// The name `attributes` give, followed through other entries;
    /// `None` where blazesym could not read the entries either.
    fn name_of(
        &mut self,
        unit: DebugInfoOffset,
        attributes: NameAttributes<'d>,
        depth: usize,
    ) -> Option<Option<String>> {
        if let Some(name) = attributes.name {
            return Some(Some(name.to_string_lossy().into_owned()));
        }
        let Some(next) = attributes.next else {
            return Some(None);
        };
        if depth == 0 {
            return Some(None);
        }
        let (unit, entry) = match next {
            AttributeValue::UnitRef(entry) => (unit, entry),
            AttributeValue::DebugInfoRef(offset) => self.unit_holding(offset)?,
            _ => return Some(None),
        };
        let (dwarf, read) = self.read_unit(unit)?;
        let attributes = read.name_attributes(dwarf, entry)?;
        self.name_of(unit, attributes, depth - 1)
    }

    /// The unit an entry of `.debug_info` is in, and its offset there.
    fn unit_holding(&self, offset: DebugInfoOffset) -> Option<(DebugInfoOffset, UnitOffset)> {
        let at = (self.index.offsets.partition_point(|o| o.0 <= offset.0)).checked_sub(1)?;
        let unit = self.index.offsets[at];
        let header = self.dwarf.debug_info.header_from_offset(unit).ok()?;
        Some((unit, offset.to_unit_offset(&header)?))
    }
}

/// What the DWARF says of an address.
#[derive(Debug)]
pub(crate) enum Found {
    /// Its function and those inlined into it, outermost first.
    Frames(Vec<Named>),
    /// Only its line (or not even that): no function of the DWARF holds
    /// it, so blazesym names it from the symbol table, as must be done.
    Line(Named),
}

/// Where an address or a call is in the source.
struct Place {
    path: String,
    line: Option<u32>,
}

/// What names an entry: its own name (the linkage name first), else the
/// entry it was made from.
#[derive(Clone, Default)]
struct NameAttributes<'d> {
    name: Option<R<'d>>,
    next: Option<AttributeValue<R<'d>>>,
}

impl<'d> NameAttributes<'d> {
    fn take(&mut self, unit: gimli::UnitRef<'_, R<'d>>, attr: &gimli::Attribute<R<'d>>) {
        match attr.name() {
            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                if let Ok(name) = unit.attr_string(attr.value()) {
                    self.name = Some(name);
                }
            }
            gimli::DW_AT_name if self.name.is_none() => {
                self.name = unit.attr_string(attr.value()).ok();
            }
            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification if self.next.is_none() => {
                self.next = Some(attr.value());
            }
            _ => {}
        }
    }
}

/// An entry's address ranges, as its attributes give them.
#[derive(Default)]
struct Ranges {
    low: Option<u64>,
    high: Option<u64>,
    size: Option<u64>,
    list: Option<gimli::RangeListsOffset<usize>>,
}

impl Ranges {
    fn take<'d>(
        &mut self,
        unit: gimli::UnitRef<'_, R<'d>>,
        attr: &gimli::Attribute<R<'d>>,
    ) -> Option<()> {
        let address = |value| match value {
            AttributeValue::Addr(addr) => Some(Some(addr)),
            AttributeValue::DebugAddrIndex(index) => unit.address(index).ok().map(Some),
            _ => Some(None),
        };
        match attr.name() {
            gimli::DW_AT_low_pc => self.low = address(attr.value())?.or(self.low),
            gimli::DW_AT_high_pc => match attr.value() {
                AttributeValue::Udata(size) => self.size = Some(size),
                value => self.high = address(value)?.or(self.high),
            },
            gimli::DW_AT_ranges => self.list = unit.attr_ranges_offset(attr.value()).ok()?,
            _ => {}
        }
        Some(())
    }

    /// Each non-empty range; `None` where the list cannot be read.
    fn each<'d>(&self, unit: gimli::UnitRef<'_, R<'d>>) -> Option<Vec<Range>> {
        let mut ranges = Vec::new();
        if let Some(list) = self.list {
            let mut list = unit.ranges(list).ok()?;
            while let Some(range) = list.next().ok()? {
                ranges.push(range);
            }
        } else if let (Some(begin), Some(end)) = (self.low, self.high) {
            ranges.push(Range { begin, end });
        } else if let (Some(begin), Some(size)) = (self.low, self.size) {
            ranges.push(Range {
                begin,
                end: begin + size,
            });
        }
        ranges.retain(|r| r.begin < r.end);
        Some(ranges)
    }
}

/// One unit, read.
struct Unit<'d> {
    unit: gimli::Unit<R<'d>>,
    lang: Option<gimli::DwLang>,
    functions: Vec<Function<'d>>,
    /// Each function's ranges, by start.
    addresses: Vec<(Range, usize)>,
    lines: Option<Option<Lines>>,
    inlined: HashMap<usize, Option<Inlined<'d>>>,
}

struct Function<'d> {
    entry: UnitOffset,
    name: NameAttributes<'d>,
}

impl<'d> Unit<'d> {
    /// The unit's functions: every subprogram with code, at any depth.
    fn new(dwarf: &gimli::Dwarf<R<'d>>, unit: gimli::Unit<R<'d>>) -> Option<Unit<'d>> {
        let mut read = Unit {
            lang: None,
            functions: Vec::new(),
            addresses: Vec::new(),
            lines: None,
            inlined: HashMap::new(),
            unit,
        };
        let unit = gimli::UnitRef::new(dwarf, &read.unit);
        let mut entries = unit.entries_raw(None).ok()?;
        let mut root = true;
        while !entries.is_empty() {
            let entry = entries.next_offset();
            let Some(abbrev) = entries.read_abbreviation().ok()? else {
                continue;
            };
            if std::mem::take(&mut root) {
                for spec in abbrev.attributes() {
                    let attr = entries.read_attribute(*spec).ok()?;
                    if let (gimli::DW_AT_language, AttributeValue::Language(lang)) =
                        (attr.name(), attr.value())
                    {
                        read.lang = Some(lang);
                    }
                }
                continue;
            }
            if abbrev.tag() != gimli::DW_TAG_subprogram {
                entries.skip_attributes(abbrev.attributes()).ok()?;
                continue;
            }
            let (mut name, mut ranges) = (NameAttributes::default(), Ranges::default());
            for spec in abbrev.attributes() {
                let attr = entries.read_attribute(*spec).ok()?;
                name.take(unit, &attr);
                ranges.take(unit, &attr)?;
            }
            let ranges = ranges.each(unit)?;
            if !ranges.is_empty() {
                let at = read.functions.len();
                read.addresses.extend(ranges.into_iter().map(|r| (r, at)));
                read.functions.push(Function { entry, name });
            }
        }
        read.addresses.sort_by_key(|a| a.0.begin);
        Some(read)
    }

    /// The function whose ranges hold `addr`, found as blazesym finds
    /// it (where ranges overlap, the same one).
    fn function(&self, addr: u64) -> Option<usize> {
        let at = self
            .addresses
            .binary_search_by(|(range, _)| within(range, addr));
        at.ok().map(|at| self.addresses[at].1)
    }

    fn lines(&mut self, dwarf: &gimli::Dwarf<R<'d>>) -> Option<&Lines> {
        if self.lines.is_none() {
            let unit = gimli::UnitRef::new(dwarf, &self.unit);
            self.lines = Some(match &self.unit.line_program {
                Some(program) => Some(Lines::new(unit, program.clone())?),
                None => None,
            });
        }
        match &self.lines {
            Some(Some(lines)) => Some(lines),
            _ => Some(&EMPTY),
        }
    }

    fn name_attributes(
        &self,
        dwarf: &gimli::Dwarf<R<'d>>,
        entry: UnitOffset,
    ) -> Option<NameAttributes<'d>> {
        let unit = gimli::UnitRef::new(dwarf, &self.unit);
        let mut entries = unit.entries_raw(Some(entry)).ok()?;
        let abbrev = entries.read_abbreviation().ok()??;
        let mut name = NameAttributes::default();
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec).ok()?;
            // An entry's own linkage name ends the search at once.
            if matches!(
                attr.name(),
                gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name
            ) {
                if let Ok(own) = unit.attr_string(attr.value()) {
                    return Some(NameAttributes {
                        name: Some(own),
                        next: None,
                    });
                }
            }
            name.take(unit, &attr);
        }
        Some(name)
    }

    fn inlined(&mut self, dwarf: &gimli::Dwarf<R<'d>>, function: usize) -> Option<&Inlined<'d>> {
        let entry = self.functions.get(function)?.entry;
        let unit = gimli::UnitRef::new(dwarf, &self.unit);
        (self.inlined)
            .entry(function)
            .or_insert_with(|| Inlined::new(unit, entry))
            .as_ref()
    }
}

static EMPTY: Lines = Lines {
    files: Vec::new(),
    sequences: Vec::new(),
};

fn within(range: &Range, addr: u64) -> Ordering {
    if addr < range.begin {
        Ordering::Greater
    } else if addr >= range.end {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

/// A call of an inlined function.
#[derive(Clone)]
struct Call<'d> {
    name: NameAttributes<'d>,
    file: Option<u64>,
    line: u32,
}

/// The inlined calls in a function: each call's ranges with its depth,
/// by depth, then start.
struct Inlined<'d> {
    calls: Vec<Call<'d>>,
    ranges: Vec<(usize, Range, usize)>,
}

impl<'d> Inlined<'d> {
    fn new(unit: gimli::UnitRef<'_, R<'d>>, function: UnitOffset) -> Option<Inlined<'d>> {
        let mut entries = unit.entries_raw(Some(function)).ok()?;
        let depth = entries.next_depth();
        let abbrev = entries.read_abbreviation().ok()??;
        entries.skip_attributes(abbrev.attributes()).ok()?;
        let mut inlined = Inlined {
            calls: Vec::new(),
            ranges: Vec::new(),
        };
        // The enclosing inlined calls' entry depths, innermost last.
        let mut open: Vec<isize> = Vec::new();
        // A nested subprogram's depth while it is skipped.
        let mut skipping: Option<isize> = None;
        while entries.next_depth() > depth {
            let at = entries.next_depth();
            open.retain(|&d| d < at);
            if skipping.is_some_and(|d| at > d) {
                let abbrev = entries.read_abbreviation().ok()?;
                if let Some(abbrev) = abbrev {
                    entries.skip_attributes(abbrev.attributes()).ok()?;
                }
                continue;
            }
            skipping = None;
            let Some(abbrev) = entries.read_abbreviation().ok()? else {
                continue;
            };
            match abbrev.tag() {
                gimli::DW_TAG_subprogram => {
                    entries.skip_attributes(abbrev.attributes()).ok()?;
                    skipping = Some(at);
                }
                gimli::DW_TAG_inlined_subroutine => {
                    let call = inlined.call(unit, &mut entries, abbrev, open.len())?;
                    inlined.calls.push(call);
                    open.push(at);
                }
                _ => entries.skip_attributes(abbrev.attributes()).ok()?,
            }
        }
        inlined.ranges.sort_by_key(|r| (r.0, r.1.begin));
        Some(inlined)
    }

    fn call(
        &mut self,
        unit: gimli::UnitRef<'_, R<'d>>,
        entries: &mut gimli::EntriesRaw<'_, '_, R<'d>>,
        abbrev: &gimli::Abbreviation,
        depth: usize,
    ) -> Option<Call<'d>> {
        let mut call = Call {
            name: NameAttributes::default(),
            file: None,
            line: 0,
        };
        let mut ranges = Ranges::default();
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec).ok()?;
            call.name.take(unit, &attr);
            ranges.take(unit, &attr)?;
            match (attr.name(), attr.value()) {
                // DWARF 5 numbers files from 0; before it 0 is none.
                (gimli::DW_AT_call_file, AttributeValue::FileIndex(file))
                    if file > 0 || unit.header.version() >= 5 =>
                {
                    call.file = Some(file)
                }
                (gimli::DW_AT_call_line, _) => call.line = attr.udata_value().unwrap_or(0) as u32,
                _ => {}
            }
        }
        let index = self.calls.len();
        let ranges = ranges.each(unit)?;
        self.ranges
            .extend(ranges.into_iter().map(|r| (depth, r, index)));
        Some(call)
    }

    /// The calls that hold `addr`, outermost first.
    fn at(&self, addr: u64) -> Vec<Call<'d>> {
        let mut found = Vec::new();
        let mut ranges = &self.ranges[..];
        loop {
            let depth = found.len();
            let at = ranges
                .binary_search_by(|(d, range, _)| d.cmp(&depth).then_with(|| within(range, addr)));
            let Ok(at) = at else { break };
            found.push(self.calls[ranges[at].2].clone());
            ranges = &ranges[at + 1..];
        }
        found
    }
}

/// A unit's line table: its files as paths, and its rows by sequence.
struct Lines {
    files: Vec<(PathBuf, PathBuf)>,
    /// By start.
    sequences: Vec<Sequence>,
}

struct Sequence {
    range: Range,
    /// By address, one for each.
    rows: Vec<Row>,
}

#[derive(Clone, Copy)]
struct Row {
    address: u64,
    file: u64,
    line: u32,
}

impl Lines {
    fn new<'d>(
        unit: gimli::UnitRef<'_, R<'d>>,
        program: gimli::IncompleteLineProgram<R<'d>>,
    ) -> Option<Lines> {
        let mut sequences = Vec::new();
        let mut rows: Vec<Row> = Vec::new();
        let mut program = program.rows();
        while let Some((_, row)) = program.next_row().ok()? {
            if row.end_sequence() {
                if let Some(first) = rows.first() {
                    let range = Range {
                        begin: first.address,
                        end: row.address(),
                    };
                    let rows = std::mem::take(&mut rows);
                    sequences.push(Sequence { range, rows });
                }
                continue;
            }
            let this = Row {
                address: row.address(),
                file: row.file_index(),
                line: row.line().map_or(0, |l| l.get() as u32),
            };
            // The last row at an address is the one that holds.
            match rows.last_mut() {
                Some(last) if last.address == this.address => *last = this,
                _ => rows.push(this),
            }
        }
        sequences.sort_by_key(|s| s.range.begin);
        let header = program.header();
        let mut files = vec![match header.file(0) {
            Some(file) => file_path(unit, file, header)?,
            None => Default::default(),
        }];
        let mut index = 1;
        while let Some(file) = header.file(index) {
            files.push(file_path(unit, file, header)?);
            index += 1;
        }
        Some(Lines { files, sequences })
    }

    fn find(&self, addr: u64) -> Option<Place> {
        let at = (self.sequences).binary_search_by(|s| within(&s.range, addr));
        let rows = &self.sequences[at.ok()?].rows;
        let at = match rows.binary_search_by(|row| row.address.cmp(&addr)) {
            Ok(at) => at,
            Err(0) => return None,
            Err(at) => at - 1,
        };
        let row = rows[at];
        let (dir, name) = self.files.get(row.file as usize)?;
        Some(Place {
            path: joined(dir, name),
            line: (row.line != 0).then_some(row.line),
        })
    }
}

/// A line table's file as a directory and a name: the unit's directory,
/// with the file's own (where it has one but the first) pushed on it.
fn file_path<'d>(
    unit: gimli::UnitRef<'_, R<'d>>,
    file: &gimli::FileEntry<R<'d>>,
    header: &gimli::LineProgramHeader<R<'d>>,
) -> Option<(PathBuf, PathBuf)> {
    let path = |bytes: R<'_>| PathBuf::from(bytes.to_string_lossy().into_owned());
    let mut dir = unit.comp_dir.map(path).unwrap_or_default();
    if file.directory_index() != 0 {
        if let Some(directory) = file.directory(header) {
            dir.push(path(unit.attr_string(directory).ok()?));
        }
    }
    Some((dir, path(unit.attr_string(file.path_name()).ok()?)))
}

fn joined(dir: &Path, name: &Path) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// The frames blazesym makes of a function, its line and its inlined
/// calls: each frame has the line of the next call in, the innermost
/// the line of the address.
fn chain(
    name: String,
    location: Option<Place>,
    inlined: Vec<(String, Option<Place>)>,
) -> Vec<Named> {
    let Some(mut direct) = location else {
        return vec![named(Some(name), None)];
    };
    let mut frames: Vec<(String, Option<Place>)> = Vec::with_capacity(inlined.len());
    for (name, mut place) in inlined {
        if let Some(last) = frames.last_mut() {
            std::mem::swap(&mut place, &mut last.1);
        } else if let Some(place) = &mut place {
            std::mem::swap(place, &mut direct);
        }
        frames.push((name, place));
    }
    std::iter::once(named(Some(name), Some(direct)))
        .chain(
            frames
                .into_iter()
                .map(|(name, place)| named(Some(name), place)),
        )
        .collect()
}

fn named(function: Option<String>, place: Option<Place>) -> Named {
    Named {
        function,
        line: place.as_ref().and_then(|p| p.line),
        file: place.map(|p| p.path),
    }
}

/// `name` demangled as blazesym does for the unit's language: Rust's and
/// C++'s by theirs, any other's by either.
fn demangled(name: &str, lang: Option<gimli::DwLang>) -> String {
    let rust = || {
        rustc_demangle::try_demangle(name)
            .ok()
            .map(|d| format!("{d:#}"))
    };
    let cpp = || {
        let symbol = cpp_demangle::Symbol::new(name).ok()?;
        symbol.demangle().ok()
    };
    let found = match lang {
        Some(gimli::DW_LANG_Rust) => rust(),
        Some(
            gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_C_plus_plus_17
            | gimli::DW_LANG_C_plus_plus_20,
        ) => cpp(),
        _ => rust().or_else(cpp),
    };
    found
        .map_or_else(|| Cow::Borrowed(name), Cow::Owned)
        .into_owned()
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use blazesym::symbolize::source::{Elf, Source};
    use blazesym::symbolize::{Input, Symbolizer};

    use super::*;
    use crate::stacks::cache::NameCache;
    use crate::stacks::inflated::Inflated;
    use crate::stacks::symbolize::{answer_chain, look_up_inflated};

    /// Each `step`th byte of the `.text` of the file at `path`, named
    /// through its inflated copy as recordings name it, and by blazesym
    /// from the copy's whole DWARF: the same frames for every byte.
    /// Returns what a unit answered for each byte it did (`None` where the
    /// units are not read), and how many bytes there were.
    fn same_as_blazesym(
        path: &Path,
        inflated: &Inflated,
        step: usize,
    ) -> (Option<Vec<Found>>, usize) {
        let elf = std::fs::read(path).unwrap();
        let elf = object::File::parse(&*elf).unwrap();
        let (start, size) = elf.section_by_name(".text").unwrap().file_range().unwrap();
        let offsets: Vec<u64> = (start..start + size).step_by(step).collect();
        let addrs: Vec<u64> = offsets
            .iter()
            .map(|&o| inflated.address(o).unwrap())
            .collect();
        let symbolizer = || {
            Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .enable_demangling(true)
                .build()
        };
        let source = Source::Elf(Elf::new(inflated.path()));
        let whole = symbolizer();
        let expected = whole.symbolize(&source, Input::VirtOffset(&addrs)).unwrap();
        let named = look_up_inflated(&symbolizer(), inflated, &offsets).unwrap();
        for ((named, expected), offset) in named.iter().zip(&expected).zip(&offsets) {
            assert_eq!(named, &answer_chain(expected), "{offset:#x}");
        }
        let mapped = Mapped::open(inflated.path()).unwrap();
        let answered = (inflated.index(&mapped))
            .and_then(|index| mapped.units(index))
            .map(|mut u| addrs.iter().filter_map(|&a| u.name(a)).collect());
        (answered, offsets.len())
    }

    /// Every 16th byte of libc's code, from libc6-dbg's debug file: a unit
    /// answers for nearly all of them.
    #[test]
    fn libc_is_named_from_one_unit_as_blazesym_names_it() {
        let libc = crate::stacks::test_support::self_libc();
        let dir = tempfile::tempdir().unwrap();
        let inflated = Inflated::find(&NameCache::within(dir.path()), &libc);
        let inflated = inflated.expect("libc's debug file (libc6-dbg)");
        let (answered, all) = same_as_blazesym(&libc, &inflated, 16);
        let answered = answered.expect("libc's units read");
        let frames = answered.iter().filter(|a| matches!(a, Found::Frames(_)));
        assert!(
            frames.count() * 100 >= all * 95,
            "{} of {all}",
            answered.len()
        );
        assert!(answered.len() == all, "{} of {all}", answered.len());
    }

    /// C++ templates, namespaces and lambdas inlined into each other.
    const CPP: &str = r#"
        #include <algorithm>
        #include <map>
        #include <string>
        #include <vector>
        namespace shapes {
        template <typename T> struct Box { T v; T twice() const { return v + v; } };
        template <typename T> T total(const std::vector<Box<T>> &boxes) {
            T sum{};
            std::for_each(boxes.begin(), boxes.end(), [&](const Box<T> &b) { sum += b.twice(); });
            return sum;
        }
        }
        int main(int argc, char **argv) {
            std::vector<shapes::Box<long>> boxes(argc * 100, {argc});
            std::map<std::string, long> m{{argv[0], shapes::total(boxes)}};
            std::sort(boxes.begin(), boxes.end(), [](auto &a, auto &b) { return a.v < b.v; });
            return (int)(m.begin()->second + shapes::total(boxes)) & 1;
        }
    "#;

    /// The C++ program built by clang++ with DWARF and `flags`, at
    /// `dir/plain`, and the inflated copy of it with its DWARF compressed.
    /// clang++, not `c++`: that is g++ on one machine and clang++ on
    /// another, and only g++ writes `.debug_aranges` unasked.
    fn packed(flags: &[&str], dir: &Path) -> (PathBuf, Inflated) {
        let (source, plain, packed) = (dir.join("p.cc"), dir.join("plain"), dir.join("packed"));
        std::fs::write(&source, CPP).unwrap();
        let built = Command::new("clang++")
            .args(flags)
            .args(["-g", "-O2", "-Wl,--build-id", "-o"])
            .args([&plain, &source])
            .status();
        assert!(built.is_ok_and(|s| s.success()), "clang++ {flags:?}");
        let packing = Command::new("objcopy")
            .arg("--compress-debug-sections=zlib")
            .args([&plain, &packed])
            .status();
        assert!(packing.is_ok_and(|s| s.success()));
        let cache = NameCache::within(&dir.join("cache"));
        (
            plain,
            Inflated::find(&cache, &packed).expect("a copy is made"),
        )
    }

    /// Every byte of a C++ program's code: names demangled as blazesym
    /// demangles them, inlined calls the same.
    #[test]
    fn cpp_is_named_from_one_unit_as_blazesym_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, inflated) = packed(&["-gdwarf-aranges"], dir.path());
        let (answered, all) = same_as_blazesym(&plain, &inflated, 1);
        let answered = answered.expect("every unit in .debug_aranges");
        assert_eq!(answered.len(), all);
        let frames: Vec<&Vec<Named>> = (answered.iter())
            .filter_map(|a| match a {
                Found::Frames(frames) => Some(frames),
                Found::Line(_) => None,
            })
            .collect();
        assert!(frames.len() * 100 >= all * 90, "{} of {all}", frames.len());
        let names = frames.iter().copied().flatten();
        let names: Vec<&str> = names.filter_map(|n| n.function.as_deref()).collect();
        for demangled in ["shapes::total<long>(", "shapes::Box<long>::twice() const"] {
            assert!(names.iter().any(|n| n.contains(demangled)), "{names:?}");
        }
        assert!(
            frames.iter().any(|chain| chain.len() > 2),
            "no inlined calls"
        );
    }

    /// clang leaves `.debug_aranges` out unless asked: the units are not
    /// read, and blazesym names every byte.
    #[test]
    fn a_file_without_aranges_is_named_by_blazesym() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, inflated) = packed(&[], dir.path());
        let (answered, _) = same_as_blazesym(&plain, &inflated, 1);
        assert!(answered.is_none());
    }
}
