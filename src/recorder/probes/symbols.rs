//! A function name or pattern to the file offsets uprobes attach at, from
//! the file's symbol tables (`.symtab`, else the exported `.dynsym`).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use super::pattern::{glob_match, is_pattern};

/// The functions of `file` that `pattern` names, each once (aliases at
/// one address keep the first name in order), with their file offsets.
pub(super) fn functions(file: &Path, pattern: &str) -> Result<Vec<(String, u64)>, String> {
    functions_where(file, |name| {
        if is_pattern(pattern) {
            glob_match(pattern, name)
        } else {
            name == pattern
        }
    })
}

/// The functions of `file` whose names are `wanted`, as [`functions`]
/// gives them: several looked up in one read of the file.
pub(super) fn functions_where(
    file: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<(String, u64)>, String> {
    let data = fs::read(file).map_err(|err| err.to_string())?;
    let elf = object::File::parse(&*data).map_err(|err| err.to_string())?;
    let mut by_address: BTreeMap<u64, String> = BTreeMap::new();
    for symbol in elf.symbols().chain(elf.dynamic_symbols()) {
        let Ok(name) = symbol.name() else { continue };
        if symbol.kind() != SymbolKind::Text || !symbol.is_definition() || !wanted(name) {
            continue;
        }
        let entry = by_address
            .entry(symbol.address())
            .or_insert_with(|| name.to_owned());
        if name < entry.as_str() {
            *entry = name.to_owned();
        }
    }
    let mut found: Vec<(String, u64)> = by_address
        .into_iter()
        .filter_map(|(address, name)| Some((name, file_offset(&elf, address)?)))
        .collect();
    found.sort();
    Ok(found)
}

/// Where the code at virtual address `address` is in the file: a uprobe
/// is placed by file offset.
fn file_offset(elf: &object::File<'_>, address: u64) -> Option<u64> {
    elf.segments().find_map(|segment| {
        let (offset, size) = segment.file_range();
        let start = segment.address();
        (start..start + size)
            .contains(&address)
            .then(|| address - start + offset)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_functions_are_found_by_name_and_pattern() {
        let libc = super::super::files::find("libc").expect("libc");
        let malloc = functions(&libc, "malloc").unwrap();
        assert_eq!(malloc.len(), 1, "{malloc:?}");
        assert_eq!(malloc[0].0, "malloc");
        let many = functions(&libc, "mall*").unwrap();
        assert!(many.iter().any(|(name, _)| name == "malloc"), "{many:?}");
        assert!(functions(&libc, "no_such_function_here")
            .unwrap()
            .is_empty());
    }
}
