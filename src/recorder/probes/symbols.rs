//! A function name or pattern to the file offsets uprobes attach at, from
//! the file's symbol tables (`.symtab` and the exported `.dynsym`): every
//! symbol at one address is one function, named as people write it
//! ([`Names`]); an IFUNC, whose code the dynamic loader picks at run
//! time, is the implementation this machine runs where that can be told
//! ([`super::ifunc`]).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use memmap2::Mmap;
use object::{Object, ObjectSymbol, SymbolFlags, SymbolKind};

use super::ifunc;
use super::names::{preferred, Names};
use crate::stacks::segments::Segments;

/// One function of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Function {
    /// The symbol it is shown by: of several at its address, the one the
    /// spec named, else the [`preferred`] one.
    pub symbol: String,
    /// `symbol`'s names as people write them.
    pub names: Names,
    /// The other symbols at its address, [`preferred`] first.
    pub aliases: Vec<String>,
    /// Its address as linked: the code's, for an IFUNC the code this
    /// machine runs (see `ifunc`).
    pub address: u64,
    /// The file offset of `address`: where a uprobe attaches.
    pub offset: u64,
    /// Its bytes; 0 where the symbol does not say.
    pub size: u64,
    /// What an IFUNC's name stands for.
    pub ifunc: Option<Ifunc>,
}

/// An IFUNC, whose symbol's address is its resolver's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ifunc {
    /// The code the dynamic loader picks on this machine, at `address`.
    Resolved,
    /// Which code runs cannot be told here (a static proctrace has no
    /// dynamic loader to ask): `address` is the resolver's.
    Unresolved,
}

/// The symbols at one address.
#[derive(Default)]
struct Group {
    symbols: Vec<String>,
    size: u64,
    ifunc: bool,
}

/// The functions of `file` that `wanted` (a name or pattern over the
/// [`Names`] of its symbols) names, in address order, each once.
pub(super) fn functions(file: &Path, wanted: &str) -> Result<Vec<Function>, String> {
    functions_where(file, |names| names.matched_by(wanted))
}

/// The functions of `file` with a symbol whose names `wanted` takes, as
/// [`functions`] gives them.
pub(super) fn functions_where(
    file: &Path,
    wanted: impl Fn(&Names) -> bool,
) -> Result<Vec<Function>, String> {
    // Mapped, not read: only the symbol tables and headers are touched,
    // where a copy of libc is 2 MB of fresh pages, on the path of every
    // profiled recording's start (the test marks). As the unwinder maps
    // the same files: a file truncated under the mapping would end the
    // recorder with SIGBUS.
    // SAFETY: read-only; see above for a file changed in place.
    let data = unsafe { Mmap::map(&fs::File::open(file).map_err(|err| err.to_string())?) }
        .map_err(|err| err.to_string())?;
    let elf = object::File::parse(&*data).map_err(|err| err.to_string())?;
    // A uprobe is placed by file offset.
    let segments = Segments::of(&elf);
    let mut found = Vec::new();
    for (address, group) in groups(&elf) {
        let named: Vec<(&str, Names)> = group
            .symbols
            .iter()
            .map(|s| (s.as_str(), Names::of(s)))
            .filter(|(_, names)| wanted(names))
            .collect();
        let Some(symbol) = preferred(named.iter().map(|(s, _)| *s)) else {
            continue;
        };
        let names = named.iter().find(|(s, _)| *s == symbol).map(|(_, n)| n);
        let function = Function {
            symbol: symbol.to_owned(),
            names: names.cloned().unwrap_or_else(|| Names::of(symbol)),
            aliases: aliases(&group.symbols, symbol),
            address,
            offset: 0,
            size: group.size,
            ifunc: None,
        };
        let function = match group.ifunc {
            true => resolved(file, &segments, function),
            false => function,
        };
        if let Some(offset) = segments.file_offset(function.address) {
            found.push(Function { offset, ..function });
        }
    }
    Ok(found)
}

/// Every function symbol of `elf` by address.
fn groups(elf: &object::File<'_>) -> BTreeMap<u64, Group> {
    let mut by_address: BTreeMap<u64, Group> = BTreeMap::new();
    for symbol in elf.symbols().chain(elf.dynamic_symbols()) {
        let Ok(name) = symbol.name() else { continue };
        if symbol.kind() != SymbolKind::Text
            || symbol.is_undefined()
            || symbol.address() == 0
            || name.is_empty()
        {
            continue;
        }
        let group = by_address.entry(symbol.address()).or_default();
        if !group.symbols.iter().any(|s| s == name) {
            group.symbols.push(name.to_owned());
        }
        group.size = group.size.max(symbol.size());
        // The symbol's value is the function that picks the code
        // (`strlen`'s per CPU), not the code.
        let ifunc = matches!(symbol.flags(), SymbolFlags::Elf { st_info, .. }
            if st_info.st_type() == object::elf::STT_GNU_IFUNC);
        group.ifunc |= ifunc;
    }
    by_address
}

/// The symbols of a group but `symbol`, the preferred first.
fn aliases(symbols: &[String], symbol: &str) -> Vec<String> {
    let mut others: Vec<&str> = symbols
        .iter()
        .map(String::as_str)
        .filter(|s| *s != symbol)
        .collect();
    others.sort_by_key(|name| (name.starts_with('_'), name.len(), *name));
    others.into_iter().map(str::to_owned).collect()
}

/// An IFUNC as the code this machine runs, where the loader can say.
fn resolved(file: &Path, segments: &Segments, function: Function) -> Function {
    let code =
        ifunc::code_offset(file, &function.symbol).and_then(|offset| segments.address(offset));
    match code {
        Some(address) => Function {
            address,
            // The resolver's size says nothing of the code's.
            size: 0,
            ifunc: Some(Ifunc::Resolved),
            ..function
        },
        None => Function {
            ifunc: Some(Ifunc::Unresolved),
            ..function
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// (address, file offset, size) of every function of `file` with a
    /// size, IFUNCs' resolvers left out.
    pub(crate) fn all_functions(file: &Path) -> Vec<(u64, u64, u64)> {
        let data = fs::read(file).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let segments = Segments::of(&elf);
        groups(&elf)
            .into_iter()
            .filter(|(_, group)| group.size > 0 && !group.ifunc)
            .filter_map(|(address, group)| {
                Some((address, segments.file_offset(address)?, group.size))
            })
            .collect()
    }

    fn libc() -> std::path::PathBuf {
        super::super::files::find("libc").expect("libc")
    }

    #[test]
    fn libc_functions_are_found_by_name_and_pattern() {
        let malloc = functions(&libc(), "malloc").unwrap();
        assert_eq!(malloc.len(), 1, "{malloc:?}");
        assert_eq!(malloc[0].symbol, "malloc");
        assert!(malloc[0].aliases.contains(&"__libc_malloc".to_owned()));
        let many = functions(&libc(), "mall*").unwrap();
        assert!(many.iter().any(|f| f.symbol == "malloc"), "{many:?}");
        assert!(functions(&libc(), "no_such_function_here")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn an_alias_is_named_as_the_spec_names_it() {
        let strtol = functions(&libc(), "strtol").unwrap();
        assert_eq!(strtol[0].symbol, "strtol");
        let strtoimax = functions(&libc(), "strtoimax").unwrap();
        assert_eq!(strtoimax[0].symbol, "strtoimax");
        assert_eq!(strtoimax[0].offset, strtol[0].offset);
        let both = functions(&libc(), "strto?max").unwrap();
        assert!(both.iter().any(|f| f.symbol == "strtoimax"), "{both:?}");
        let pattern = functions(&libc(), "strto*").unwrap();
        let at = pattern
            .iter()
            .find(|f| f.offset == strtol[0].offset)
            .unwrap();
        assert_eq!(at.symbol, "strtol", "the public short name of the two");
    }

    #[test]
    fn an_ifunc_is_the_code_this_machine_runs() {
        let [strlen] = &functions(&libc(), "strlen").unwrap()[..] else {
            panic!("one strlen");
        };
        assert!(strlen.ifunc.is_some(), "{strlen:?}");
        if cfg!(target_feature = "crt-static") {
            return;
        }
        assert_eq!(strlen.ifunc, Some(Ifunc::Resolved));
        assert_eq!(strlen.symbol, "strlen");
        // The code this process's own calls of strlen run.
        let ours = ifunc::tests::offset_in_self(libc::strlen as *const () as usize);
        assert_eq!(Some(strlen.offset), ours);
    }
}
