//! DWARF kept inflated. Distributions compress their debug files
//! (`libc6-dbg`'s libc: 4 MB of zlib, 10 MB inflated), and blazesym
//! inflates every section it reads each time a recording names a new
//! offset of the file: most of what naming cost on a build that samples
//! a few new libc functions each run. The names cache keeps one copy of
//! such a file with its sections stored inflated, under its build id,
//! and frames are named from the copy, mapped rather than inflated.
//!
//! The copy is the file blazesym would read the DWARF from: the debug
//! file under `/usr/lib/debug/.build-id`, checked against the CRC the
//! file's `.gnu_debuglink` gives, or the file itself where it has its own
//! compressed DWARF. Names are looked up in it by address, the file
//! offsets placed through the file's own segments as blazesym does.

use std::cell::OnceCell;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use object::read::ReadCache;
use object::{CompressionFormat, Object, ObjectSection};

use super::cache::{hex, NameCache, LIMIT};
use super::segments::Segments;
use super::units::{Index, Mapped};

/// Where the debug files of build ids are (see `gdb`'s "Separate Debug
/// Files").
const BUILD_ID_DIR: &str = "/usr/lib/debug/.build-id";

/// The most a copy may take: a file that inflates to more is read as it
/// is, rather than push every other entry out of the cache.
const MOST: u64 = LIMIT / 4;

/// A file's DWARF, inflated, and where the file's offsets are loaded.
#[derive(Debug)]
pub(crate) struct Inflated {
    copy: PathBuf,
    /// Where the file's offsets are loaded.
    segments: Segments,
    /// Where the copy's DWARF units are, read the first time a name is
    /// looked up in it.
    index: OnceCell<Option<Index>>,
}

impl Inflated {
    /// The inflated DWARF of the ELF file at `path`, kept in `cache`
    /// (made now if it is not yet); `None` where the DWARF is not
    /// compressed, or the file has no build id to keep it under.
    pub(crate) fn find(cache: &NameCache, path: &Path) -> Option<Inflated> {
        let file = File::open(path).ok()?;
        let data = ReadCache::new(file);
        let elf = object::File::parse(&data).ok()?;
        let build_id = elf.build_id().ok()??;
        let holder = match elf.gnu_debuglink().ok()? {
            Some((_, crc)) => Some((debug_file(build_id)?, crc)),
            None => None,
        };
        let segments = Segments::of(&elf);
        let (holder, crc) = match &holder {
            Some((debug, crc)) => (debug.as_path(), Some(*crc)),
            None => (path, None),
        };
        let key = format!("d-{}", hex(build_id));
        let copy = cache.keep(&key, || {
            worth_inflating(holder, MOST).then(|| inflated_copy(holder, crc))?
        })?;
        Some(Inflated {
            copy,
            segments,
            index: OnceCell::new(),
        })
    }

    /// The copy, an ELF file to name addresses in.
    pub(crate) fn path(&self) -> &Path {
        &self.copy
    }

    /// Where the units of the copy, `mapped`, are; `None` where they
    /// cannot be found from its `.debug_aranges`.
    pub(crate) fn index(&self, mapped: &Mapped) -> Option<&Index> {
        self.index.get_or_init(|| mapped.index()).as_ref()
    }

    /// The address `offset` of the file is loaded at, as blazesym places
    /// it: in the first segment whose file bytes hold it.
    pub(crate) fn address(&self, offset: u64) -> Option<u64> {
        self.segments.address(offset)
    }
}

/// The debug file of `build_id`, where it is installed.
fn debug_file(build_id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    let path = Path::new(BUILD_ID_DIR)
        .join(format!("{first:02x}"))
        .join(format!("{}.debug", hex(rest)));
    path.is_file().then_some(path)
}

/// Whether the file at `path` has its DWARF zlib-compressed, and its
/// sections inflated take at most `most` bytes: read from its headers
/// alone, so that a file too big to keep is not read whole, and its CRC
/// computed, on every recording that names a new offset of it.
fn worth_inflating(path: &Path, most: u64) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let data = ReadCache::new(file);
    let Ok(elf) = object::File::parse(&data) else {
        return false;
    };
    let range = |s: &object::Section<'_, '_, _>| s.compressed_file_range().ok();
    let zlib = (elf.section_by_name(".debug_info").as_ref())
        .and_then(range)
        .is_some_and(|range| range.format == CompressionFormat::Zlib);
    let size: u64 = (elf.sections().filter_map(|s| range(&s)))
        .map(|range| range.uncompressed_size)
        .sum();
    zlib && size <= most
}

/// The file at `path` with its sections inflated, if its bytes match
/// `crc` where one is given.
fn inflated_copy(path: &Path, crc: Option<u32>) -> Option<Vec<u8>> {
    let data = fs::read(path).ok()?;
    if crc.is_some_and(|crc| crc32fast::hash(&data) != crc) {
        log::debug!("{} does not match its debug link", path.display());
        return None;
    }
    inflate_elf(&data, MOST)
}

/// The ELF64 file `data`, little-endian, with its zlib-compressed sections
/// (`SHF_COMPRESSED`) stored inflated and laid out anew, each where its
/// alignment puts it after the one before; program headers as they were.
/// `None` if it is not such a file, has no compressed section, a section
/// does not inflate to the size its header gives, or the copy would take
/// more than `most` bytes.
pub(crate) fn inflate_elf(data: &[u8], most: u64) -> Option<Vec<u8>> {
    let header = Header::read(data)?;
    let mut sections: Vec<Section> = (0..header.shnum)
        .map(|i| Section::read(data, header.shoff + i * SECTION_SIZE))
        .collect::<Option<_>>()?;
    if !sections.iter().any(Section::is_compressed) {
        return None;
    }
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| sections[i].offset);
    let start = (sections.iter().filter(|s| s.has_bytes()))
        .map(|s| s.offset)
        .min()
        .unwrap_or(header.shoff)
        .max(header.headers_end);
    let mut out = data.get(..usize::try_from(start).ok()?)?.to_vec();
    for i in order {
        let section = &mut sections[i];
        if !section.has_bytes() {
            continue;
        }
        let bytes = section.contents(data)?;
        pad_to(&mut out, section.align)?;
        section.offset = out.len() as u64;
        section.size = bytes.len() as u64;
        out.extend_from_slice(&bytes);
        if out.len() as u64 > most {
            return None;
        }
    }
    pad_to(&mut out, 8)?;
    let shoff = out.len() as u64;
    out[SHOFF..SHOFF + 8].copy_from_slice(&shoff.to_le_bytes());
    for section in &sections {
        out.extend_from_slice(&section.to_bytes());
    }
    Some(out)
}

const SHOFF: usize = 0x28;
const SECTION_SIZE: u64 = 64;
const SHT_NOBITS: u32 = 8;
const SHF_COMPRESSED: u64 = 0x800;
const ELFCOMPRESS_ZLIB: u32 = 1;
const CHDR_SIZE: usize = 24;

/// What an ELF64 header says of where the rest is.
struct Header {
    shoff: u64,
    shnum: u64,
    /// Where the header and the program headers end.
    headers_end: u64,
}

impl Header {
    fn read(data: &[u8]) -> Option<Header> {
        let is_elf64_le = data.get(..6) == Some(b"\x7fELF\x02\x01");
        let shentsize = u16_at(data, 0x3a)?;
        if !is_elf64_le || u64::from(shentsize) != SECTION_SIZE {
            return None;
        }
        let phoff = u64_at(data, 0x20)?;
        let phnum = u64::from(u16_at(data, 0x38)?);
        let phentsize = u64::from(u16_at(data, 0x36)?);
        Some(Header {
            shoff: u64_at(data, SHOFF)?,
            // 0 also where the count is kept elsewhere (65,280 sections or
            // more): no section is then compressed, and nothing is copied.
            shnum: u64::from(u16_at(data, 0x3c)?),
            headers_end: (phoff + phnum * phentsize).max(u64::from(u16_at(data, 0x34)?)),
        })
    }
}

/// A section header, with the fields a copy changes taken out.
struct Section {
    raw: [u8; SECTION_SIZE as usize],
    flags: u64,
    offset: u64,
    size: u64,
    align: u64,
}

impl Section {
    fn read(data: &[u8], at: u64) -> Option<Section> {
        let at = usize::try_from(at).ok()?;
        let raw: [u8; SECTION_SIZE as usize] = data.get(at..at + 64)?.try_into().ok()?;
        Some(Section {
            flags: u64_at(&raw, 8)?,
            offset: u64_at(&raw, 24)?,
            size: u64_at(&raw, 32)?,
            align: u64_at(&raw, 48)?,
            raw,
        })
    }

    fn kind(&self) -> u32 {
        u32::from_le_bytes(self.raw[4..8].try_into().expect("4 bytes"))
    }

    fn has_bytes(&self) -> bool {
        self.kind() != 0 && self.kind() != SHT_NOBITS && self.size > 0
    }

    fn is_compressed(&self) -> bool {
        self.has_bytes() && self.flags & SHF_COMPRESSED != 0
    }

    /// The section's bytes, inflated if they were compressed (and its
    /// header then says so: flag cleared, alignment the data's own).
    fn contents(&mut self, data: &[u8]) -> Option<Vec<u8>> {
        let start = usize::try_from(self.offset).ok()?;
        let end = start.checked_add(usize::try_from(self.size).ok()?)?;
        let bytes = data.get(start..end)?;
        if !self.is_compressed() {
            return Some(bytes.to_vec());
        }
        let kind = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
        let size = u64_at(bytes, 8)?;
        if kind != ELFCOMPRESS_ZLIB || size > MOST {
            return None;
        }
        let inflated = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(
            bytes.get(CHDR_SIZE..)?,
            usize::try_from(size).ok()?,
        )
        .ok()?;
        if inflated.len() as u64 != size {
            return None;
        }
        self.flags &= !SHF_COMPRESSED;
        self.align = u64_at(bytes, 16)?;
        Some(inflated)
    }

    fn to_bytes(&self) -> [u8; SECTION_SIZE as usize] {
        let mut raw = self.raw;
        raw[8..16].copy_from_slice(&self.flags.to_le_bytes());
        raw[24..32].copy_from_slice(&self.offset.to_le_bytes());
        raw[32..40].copy_from_slice(&self.size.to_le_bytes());
        raw[48..56].copy_from_slice(&self.align.to_le_bytes());
        raw
    }
}

/// Pads `out` to a multiple of `align`: `None` for an alignment no
/// section of debug information has (not a power of two, or past 64 KiB).
fn pad_to(out: &mut Vec<u8>, align: u64) -> Option<()> {
    let align = usize::try_from(align.max(1)).ok()?;
    (align.is_power_of_two() && align <= 1 << 16).then_some(())?;
    out.resize(out.len().div_ceil(align) * align, 0);
    Some(())
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::symbolize::{Frame, Symbolizer};
    use crate::stacks::test_support::run;

    /// A function inlined into another, so names come as chains.
    const PROGRAM: &str = r#"
        static inline __attribute__((always_inline)) int inner(int x) { return x * 3 + 1; }
        __attribute__((noinline)) int outer(int x) { return inner(x) ^ inner(x + 1); }
        int main(int argc, char **argv) { (void)argv; return outer(argc); }
    "#;

    /// The program built with DWARF at `dir/plain/p`, and at
    /// `dir/packed/p` with its DWARF compressed.
    fn programs(dir: &Path) -> (PathBuf, PathBuf) {
        let source = dir.join("p.c");
        fs::write(&source, PROGRAM).unwrap();
        let (plain, packed) = (dir.join("plain/p"), dir.join("packed/p"));
        for path in [&plain, &packed] {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        let flags = ["-g", "-O2", "-Wl,--build-id", "-o"].map(Path::new);
        run("cc", &[&flags[..], &[&plain, &source]].concat());
        let compress = Path::new("--compress-debug-sections=zlib");
        run("objcopy", &[compress, &plain, &packed]);
        (plain, packed)
    }

    /// Every fourth file offset of the file's `.text`.
    fn text_offsets(path: &Path) -> Vec<u64> {
        let data = fs::read(path).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let (start, size) = elf.section_by_name(".text").unwrap().file_range().unwrap();
        (start..start + size).step_by(4).collect()
    }

    #[test]
    fn a_file_with_compressed_dwarf_is_named_from_its_inflated_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, packed) = programs(dir.path());
        let offsets = text_offsets(&plain);
        let cache = NameCache::within(&dir.path().join("cache"));

        let inflated = Inflated::find(&cache, &packed).expect("a copy is made");
        assert!(inflated.path().starts_with(dir.path().join("cache")));
        assert!(Inflated::find(&NameCache::within(&dir.path().join("c2")), &plain).is_none());
        let expected = Symbolizer::new().user(&plain, &offsets);
        let named = Symbolizer::with_cache(cache).user(&packed, &offsets);
        assert_eq!(named, expected);

        let names = |frames: &[Frame]| -> Vec<String> {
            frames
                .iter()
                .map(|f| f.function.clone().unwrap_or_default())
                .collect()
        };
        let chains: Vec<Vec<String>> = named.iter().map(|f| names(f)).collect();
        assert!(
            chains.contains(&vec!["outer".to_owned(), "inner".to_owned()]),
            "{chains:?}"
        );
        assert!(named
            .iter()
            .flatten()
            .any(|f| f.line.is_some() && f.file.is_some()));
    }

    #[test]
    fn inflated_sections_hold_the_bytes_the_plain_file_has() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, packed) = programs(dir.path());
        let (plain, packed) = (fs::read(plain).unwrap(), fs::read(packed).unwrap());
        assert!(inflate_elf(&plain, MOST).is_none(), "nothing to inflate");
        let copy = inflate_elf(&packed, MOST).unwrap();

        let parse = |data| object::File::parse(data).unwrap();
        let (plain, copy) = (parse(&*plain), parse(&*copy));
        assert_eq!(plain.sections().count(), copy.sections().count());
        for section in plain.sections() {
            let name = section.name().unwrap();
            let copied = copy.section_by_name(name).unwrap();
            let format = copied.compressed_file_range().unwrap().format;
            assert_eq!(format, CompressionFormat::None, "{name}");
            assert_eq!(copied.address(), section.address(), "{name}");
            assert_eq!(copied.data().unwrap(), section.data().unwrap(), "{name}");
        }
        assert!(
            inflate_elf(&packed, copy.section_by_name(".debug_info").unwrap().size()).is_none()
        );
    }

    #[test]
    fn a_file_too_big_to_keep_is_told_from_its_headers() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, packed) = programs(dir.path());
        let copy = inflate_elf(&fs::read(&packed).unwrap(), MOST).unwrap();
        assert!(worth_inflating(&packed, MOST));
        assert!(worth_inflating(&packed, copy.len() as u64));
        assert!(!worth_inflating(&packed, 4096));
        assert!(!worth_inflating(&plain, MOST), "nothing to inflate");
    }

    #[test]
    fn a_cut_or_foreign_file_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let (_, packed) = programs(dir.path());
        let packed = fs::read(packed).unwrap();
        for len in [0, 10, 64, packed.len() / 2, packed.len() - 1] {
            assert!(inflate_elf(&packed[..len], MOST).is_none(), "{len} bytes");
        }
        let mut big_endian = packed.clone();
        big_endian[5] = 2;
        assert!(inflate_elf(&big_endian, MOST).is_none());
    }
}
