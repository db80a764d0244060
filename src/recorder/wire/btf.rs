//! The kernel's BTF cut down to what the program's CO-RE relocations can
//! use, handed to libbpf in place of the whole of it.
//!
//! libbpf resolves each relocated type by comparing its name with every
//! type of the kernel's BTF, once per type: most of `record`'s start-up
//! (BENCHMARKS.md). The cut-down BTF holds the kernel's types whose
//! names the program's own BTF has, and what those contain without a
//! pointer in between (the fields' layouts, down through embedded structs,
//! unions, arrays and typedefs). A pointer's target is never needed: libbpf
//! only checks that a pointer field is a pointer, and a read through it is
//! a relocation of its own, of a type the program names. So libbpf finds
//! the same candidates and computes the same offsets, from a few thousand
//! types. Anything unexpected gives `None`, and libbpf gets the whole BTF.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::hash::{BuildHasherDefault, Hasher};

const MAGIC: u16 = 0xEB9F;
const HEADER_LEN: usize = 24;
/// name_off, info, and size or type: every type record starts with these.
const COMMON_LEN: usize = 12;

const INT: u32 = 1;
const PTR: u32 = 2;
const ARRAY: u32 = 3;
const STRUCT: u32 = 4;
const UNION: u32 = 5;
const ENUM: u32 = 6;
const FWD: u32 = 7;
const TYPEDEF: u32 = 8;
const VOLATILE: u32 = 9;
const CONST: u32 = 10;
const RESTRICT: u32 = 11;
const FUNC: u32 = 12;
const FUNC_PROTO: u32 = 13;
const VAR: u32 = 14;
const DATASEC: u32 = 15;
const FLOAT: u32 = 16;
const DECL_TAG: u32 = 17;
const TYPE_TAG: u32 = 18;
const ENUM64: u32 = 19;

/// Returns the kernel BTF `kernel` cut down for the program whose own BTF
/// is `local` (both raw BTF, as /sys/kernel/btf/vmlinux and
/// `btf__raw_data` give them).
pub fn cut_down(kernel: &[u8], local: &[u8]) -> Option<Vec<u8>> {
    let local = Btf::parse(local)?;
    let wanted: HashSet<&[u8], Fnv> = local.named_types().collect();
    // Found while the records are indexed, in one pass over 5 MB.
    let mut found = Vec::new();
    let kernel = Btf::parse_visiting(kernel, |id, record, strings| {
        if named_type(record, strings).is_some_and(|name| wanted.contains(name)) {
            found.push(id);
        }
    })?;
    let mut cut = Cut::new(kernel.types.len());
    for id in found {
        cut.keep(id);
    }
    let mut next = 0;
    while let Some(&id) = cut.order.get(next) {
        for target in contained(kernel.record(id)?)? {
            cut.keep(target);
        }
        next += 1;
    }
    cut.write(&kernel)
}

/// Whether `data` is BTF that ends where its last section does: a cut
/// kept in a file, not cut short.
pub fn is_whole_btf(data: &[u8]) -> bool {
    let end = || {
        let header_len = word(data, 4)?;
        let end = |offset| Some(header_len + word(data, offset)? + word(data, offset + 4)?);
        Some(end(8)?.max(end(16)?) as usize)
    };
    Btf::parse(data).is_some() && end() == Some(data.len())
}

/// A raw BTF blob, its type records indexed by id - 1.
struct Btf<'a> {
    types: Vec<&'a [u8]>,
    strings: &'a [u8],
}

impl<'a> Btf<'a> {
    fn parse(data: &'a [u8]) -> Option<Self> {
        Btf::parse_visiting(data, |_, _, _| {})
    }

    /// Parses `data`, handing each type's id, record and the string
    /// section to `visit` as it goes.
    fn parse_visiting(
        data: &'a [u8],
        mut visit: impl FnMut(u32, &'a [u8], &'a [u8]),
    ) -> Option<Self> {
        if u16::from_ne_bytes(data.get(..2)?.try_into().ok()?) != MAGIC {
            return None;
        }
        let header_len = word(data, 4)? as usize;
        let at = |offset| Some(header_len + word(data, offset)? as usize);
        let (type_off, type_len) = (at(8)?, word(data, 12)? as usize);
        let (str_off, str_len) = (at(16)?, word(data, 20)? as usize);
        let mut section = data.get(type_off..type_off.checked_add(type_len)?)?;
        let strings = data.get(str_off..str_off.checked_add(str_len)?)?;
        // Records are 12 bytes and more: 16 on average in vmlinux.
        let mut types = Vec::with_capacity(type_len / 16);
        while !section.is_empty() {
            let len = record_len(section)?;
            let (record, rest) = section.split_at_checked(len)?;
            types.push(record);
            visit(types.len() as u32, record, strings);
            section = rest;
        }
        Some(Btf { types, strings })
    }

    fn record(&self, id: u32) -> Option<&'a [u8]> {
        self.types.get(id.checked_sub(1)? as usize).copied()
    }

    #[cfg(test)]
    fn name_of(&self, id: u32) -> Option<&'a [u8]> {
        self.string(word(self.record(id)?, 0)?)
    }

    fn string(&self, offset: u32) -> Option<&'a [u8]> {
        string_at(self.strings, offset)
    }

    /// The essential names of the types a relocation can name.
    fn named_types(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.types
            .iter()
            .filter_map(|record| named_type(record, self.strings))
    }
}

fn string_at(strings: &[u8], offset: u32) -> Option<&[u8]> {
    let tail = strings.get(offset as usize..)?;
    Some(CStr::from_bytes_until_nul(tail).ok()?.to_bytes())
}

/// The essential name of the type `record` if a relocation can name it.
fn named_type<'a>(record: &[u8], strings: &'a [u8]) -> Option<&'a [u8]> {
    if !is_nameable(kind(record)) {
        return None;
    }
    let name = string_at(strings, word(record, 0)?)?;
    (!name.is_empty()).then(|| essential_name(name))
}

/// The kernel's types kept, in the order they are found: new id = index + 1.
struct Cut {
    new_id: Vec<u32>,
    order: Vec<u32>,
}

impl Cut {
    fn new(types: usize) -> Self {
        Cut {
            new_id: vec![0; types + 1],
            order: Vec::new(),
        }
    }

    fn keep(&mut self, id: u32) {
        if id != 0 && self.new_id[id as usize] == 0 {
            self.order.push(id);
            self.new_id[id as usize] = self.order.len() as u32;
        }
    }

    fn write<'a>(&self, kernel: &Btf<'a>) -> Option<Vec<u8>> {
        let mut strings = Strings::default();
        let mut types = Vec::new();
        for &id in &self.order {
            let mut record = kernel.record(id)?.to_vec();
            rename(&mut record, 0, kernel, &mut strings)?;
            for (offset, is_name) in fields(&record)? {
                if is_name {
                    rename(&mut record, offset, kernel, &mut strings)?;
                } else if kind(&record) == PTR {
                    put(&mut record, offset, 0);
                } else {
                    let target = word(&record, offset)?;
                    put(&mut record, offset, self.new_id[target as usize]);
                }
            }
            types.extend_from_slice(&record);
        }
        let mut out = Vec::with_capacity(HEADER_LEN + types.len() + strings.data.len());
        out.extend_from_slice(&MAGIC.to_ne_bytes());
        out.extend_from_slice(&[1, 0]);
        for value in [HEADER_LEN, 0, types.len(), types.len(), strings.data.len()] {
            out.extend_from_slice(&(value as u32).to_ne_bytes());
        }
        out.extend_from_slice(&types);
        out.extend_from_slice(&strings.data);
        Some(out)
    }
}

/// The new string section, each name once.
struct Strings<'a> {
    data: Vec<u8>,
    offsets: HashMap<&'a [u8], u32, Fnv>,
}

impl Default for Strings<'_> {
    fn default() -> Self {
        Strings {
            data: vec![0],
            offsets: [(&b""[..], 0)].into_iter().collect(),
        }
    }
}

impl<'a> Strings<'a> {
    fn add(&mut self, name: &'a [u8]) -> u32 {
        *self.offsets.entry(name).or_insert_with(|| {
            let offset = self.data.len() as u32;
            self.data.extend_from_slice(name);
            self.data.push(0);
            offset
        })
    }
}

/// FNV-1a: names are short, and SipHash's resistance to chosen keys buys
/// nothing against the kernel's own type names.
type Fnv = BuildHasherDefault<FnvHasher>;

pub struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> Self {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn rename<'a>(
    record: &mut [u8],
    offset: usize,
    kernel: &Btf<'a>,
    strings: &mut Strings<'a>,
) -> Option<()> {
    let name = kernel.string(word(record, offset)?)?;
    put(record, offset, strings.add(name));
    Some(())
}

fn word(data: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        data.get(offset..offset + 4)?.try_into().ok()?,
    ))
}

fn put(data: &mut [u8], offset: usize, value: u32) {
    data[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
}

fn kind(record: &[u8]) -> u32 {
    (word(record, 4).unwrap_or(0) >> 24) & 0x1f
}

fn vlen(record: &[u8]) -> usize {
    (word(record, 4).unwrap_or(0) & 0xffff) as usize
}

/// Kinds a CO-RE relocation may name (functions, variables and sections
/// are matched by libbpf in other ways, if at all).
fn is_nameable(kind: u32) -> bool {
    matches!(
        kind,
        INT | STRUCT | UNION | ENUM | ENUM64 | FWD | TYPEDEF | FLOAT
    )
}

/// A record's length: the common part and what its kind adds.
fn record_len(section: &[u8]) -> Option<usize> {
    let extra = match kind(section.get(..COMMON_LEN)?) {
        INT | VAR | DECL_TAG => 4,
        PTR | FWD | TYPEDEF | VOLATILE | CONST | RESTRICT | FUNC | FLOAT | TYPE_TAG => 0,
        ARRAY => 12,
        STRUCT | UNION | DATASEC | ENUM64 => 12 * vlen(section),
        ENUM | FUNC_PROTO => 8 * vlen(section),
        _ => return None,
    };
    Some(COMMON_LEN + extra)
}

/// The offsets in a record of its names (`true`) and type ids (`false`),
/// past the record's own name.
fn fields(record: &[u8]) -> Option<Vec<(usize, bool)>> {
    let members = |size: usize, name: Option<usize>, ty: Option<usize>| {
        (0..vlen(record))
            .flat_map(move |i| {
                let base = COMMON_LEN + i * size;
                [
                    name.map(|at| (base + at, true)),
                    ty.map(|at| (base + at, false)),
                ]
            })
            .flatten()
            .collect::<Vec<_>>()
    };
    Some(match kind(record) {
        INT | FWD | FLOAT => Vec::new(),
        PTR | TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG => vec![(8, false)],
        ARRAY => vec![(COMMON_LEN, false), (COMMON_LEN + 4, false)],
        STRUCT | UNION => members(12, Some(0), Some(4)),
        ENUM => members(8, Some(0), None),
        ENUM64 => members(12, Some(0), None),
        FUNC_PROTO => {
            let mut fields = vec![(8, false)];
            fields.extend(members(8, Some(0), Some(4)));
            fields
        }
        _ => return None,
    })
}

/// The types a record holds without a pointer in between.
fn contained(record: &[u8]) -> Option<Vec<u32>> {
    if kind(record) == PTR {
        return Some(Vec::new());
    }
    fields(record)?
        .into_iter()
        .filter(|&(_, is_name)| !is_name)
        .map(|(offset, _)| word(record, offset))
        .collect()
}

/// libbpf's bpf_core_essential_name_len: a name up to its flavor suffix
/// (`task_struct___old` is a `task_struct`).
fn essential_name(name: &[u8]) -> &[u8] {
    let is_separator = |s: &[u8]| s[0] != b'_' && s[1..4] == *b"___" && s[4] != b'_';
    (0..name.len().saturating_sub(4))
        .rev()
        .find(|&i| is_separator(&name[i..i + 5]))
        .map_or(name, |i| &name[..=i])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw BTF blob of `types` (records without names) and `strings`.
    fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_ne_bytes().to_vec();
        out.extend_from_slice(&[1, 0]);
        for value in [HEADER_LEN, 0, types.len(), types.len(), strings.len()] {
            out.extend_from_slice(&(value as u32).to_ne_bytes());
        }
        out.extend_from_slice(types);
        out.extend_from_slice(strings);
        out
    }

    fn record(name: u32, kind: u32, vlen: u32, size_or_type: u32, extra: &[u32]) -> Vec<u8> {
        [name, kind << 24 | vlen, size_or_type]
            .iter()
            .chain(extra)
            .flat_map(|word| word.to_ne_bytes())
            .collect()
    }

    #[test]
    fn flavors_are_cut_from_names_as_libbpf_does() {
        assert_eq!(essential_name(b"task_struct___old"), b"task_struct");
        assert_eq!(essential_name(b"task_struct"), b"task_struct");
        assert_eq!(essential_name(b"a____b"), b"a____b");
        assert_eq!(essential_name(b"x___y___z"), b"x___y");
    }

    #[test]
    fn keeps_named_types_and_their_contents_but_not_what_pointers_reach() {
        // 1 int; 2 struct outer { int a; struct inner b; struct far *c; };
        // 3 struct inner { int x; }; 4 ptr -> 5; 5 struct far { int y; };
        // 6 struct unrelated { int z; }.
        let strings = b"\0int\0outer\0a\0b\0c\0inner\0x\0far\0y\0unrelated\0z\0";
        let name = |s: &str| {
            let pattern = format!("\0{s}\0");
            strings
                .windows(pattern.len())
                .position(|w| w == pattern.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut types = record(name("int"), INT, 0, 4, &[32]);
        types.extend(record(
            name("outer"),
            STRUCT,
            3,
            24,
            &[name("a"), 1, 0, name("b"), 3, 32, name("c"), 4, 64],
        ));
        types.extend(record(name("inner"), STRUCT, 1, 4, &[name("x"), 1, 0]));
        types.extend(record(0, PTR, 0, 5, &[]));
        types.extend(record(name("far"), STRUCT, 1, 4, &[name("y"), 1, 0]));
        types.extend(record(name("unrelated"), STRUCT, 1, 4, &[name("z"), 1, 0]));
        let kernel = blob(&types, strings);
        let local_strings = b"\0outer___flavor\0";
        let local = blob(&record(1, STRUCT, 0, 24, &[]), local_strings);

        let cut = cut_down(&kernel, &local).unwrap();
        let cut = Btf::parse(&cut).unwrap();
        let names: Vec<_> = (1..=cut.types.len() as u32)
            .map(|id| String::from_utf8_lossy(cut.name_of(id).unwrap()).into_owned())
            .collect();
        // outer, then what it holds: int, inner, and the pointer (to void).
        assert_eq!(names, ["outer", "int", "inner", ""]);
        let outer = cut.record(1).unwrap();
        let member_types: Vec<_> = (0..3)
            .map(|i| word(outer, 12 + i * 12 + 4).unwrap())
            .collect();
        assert_eq!(member_types, [2, 3, 4]);
        assert_eq!(word(cut.record(4).unwrap(), 8), Some(0));
    }

    #[test]
    fn the_kernel_btf_is_cut_to_a_few_thousand_types_with_the_same_layouts() {
        let Ok(kernel) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            assert!(std::env::var_os("CI").is_none(), "CI needs kernel BTF");
            return;
        };
        let local_strings = b"\0task_struct\0signal_struct\0";
        let mut local = record(1, STRUCT, 0, 0, &[]);
        local.extend(record(13, STRUCT, 0, 0, &[]));
        let cut = cut_down(&kernel, &blob(&local, local_strings)).unwrap();
        let (full, cut) = (Btf::parse(&kernel).unwrap(), Btf::parse(&cut).unwrap());
        assert!(
            cut.types.len() < full.types.len() / 20,
            "{} types",
            cut.types.len()
        );
        fn find<'a>(btf: &Btf<'a>, name: &[u8]) -> &'a [u8] {
            (1..=btf.types.len() as u32)
                .find(|&id| {
                    btf.name_of(id) == Some(name) && kind(btf.record(id).unwrap()) == STRUCT
                })
                .and_then(|id| btf.record(id))
                .unwrap()
        }
        for name in [&b"task_struct"[..], b"signal_struct", b"sched_entity"] {
            let (a, b) = (find(&full, name), find(&cut, name));
            assert_eq!(vlen(a), vlen(b));
            for i in 0..vlen(a) {
                let member = COMMON_LEN + i * 12;
                assert_eq!(
                    full.string(word(a, member).unwrap()),
                    cut.string(word(b, member).unwrap())
                );
                assert_eq!(
                    word(a, member + 8),
                    word(b, member + 8),
                    "offset of member {i}"
                );
            }
        }
    }
}
