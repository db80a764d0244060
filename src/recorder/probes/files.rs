//! A probe's FILE to a path, as bpftrace resolves it: a path as given; a
//! library name (`libc`, `libssl.so.3`) as the dynamic loader finds it,
//! through ld.so.cache; a program name through PATH. Symbolic links are
//! followed: uprobes attach to the file itself, whatever its name.

use std::env;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

const LD_SO_CACHE: &str = "/etc/ld.so.cache";
/// The cache format of glibc 2.32 and later (and beside the old one
/// before): its magic, then the entry count and the string table length.
const CACHE_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const HEADER_LEN: usize = 48;
const ENTRY_LEN: usize = 24;

/// The file `name` stands for, where there is one.
pub(crate) fn find(name: &str) -> Option<PathBuf> {
    let found = if name.contains('/') {
        Some(PathBuf::from(name))
    } else {
        library(name).or_else(|| program(name))
    };
    found
        .filter(|path| path.is_file())
        .and_then(|path| fs::canonicalize(path).ok())
}

/// The library `name` names in ld.so.cache: `libc.so.6` exactly, or
/// `libc`/`c` as the first `libc.so…` of this machine's architecture.
fn library(name: &str) -> Option<PathBuf> {
    let cache = fs::read(LD_SO_CACHE).ok()?;
    let entries = cache_entries(&cache)?;
    let prefixes = [format!("{name}.so"), format!("lib{name}.so")];
    let exact = entries.iter().find(|(soname, _)| soname == name);
    let by_prefix = || {
        entries.iter().find(|(soname, path)| {
            prefixes.iter().any(|p| soname.starts_with(p.as_str())) && native(Path::new(path))
        })
    };
    exact
        .or_else(by_prefix)
        .map(|(_, path)| PathBuf::from(path))
}

/// (soname, path) of every entry of the cache, in its order (the loader's
/// preference).
fn cache_entries(cache: &[u8]) -> Option<Vec<(String, String)>> {
    let start = find_bytes(cache, CACHE_MAGIC)?;
    let new = &cache[start..];
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(new.get(at..at + 4)?.try_into().ok()?))
    };
    let count = word(CACHE_MAGIC.len())? as usize;
    let string = |offset: u32| -> Option<String> {
        let bytes = new.get(offset as usize..)?;
        let end = bytes.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
    };
    (0..count)
        .map(|i| {
            let at = HEADER_LEN + i * ENTRY_LEN;
            Some((string(word(at + 4)?)?, string(word(at + 8)?)?))
        })
        .collect()
}

fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether `path` is an ELF file of this machine's word size and
/// architecture: the cache lists 32-bit libraries beside the native ones,
/// and PATH has scripts (pyenv's shims) where programs are expected.
pub(super) fn native(path: &Path) -> bool {
    let mut bytes = [0u8; 20];
    let read = fs::File::open(path).and_then(|mut file| file.read_exact(&mut bytes));
    // e_ident[EI_CLASS] == ELFCLASS64, and e_machine.
    let machine = if cfg!(target_arch = "aarch64") {
        183u16
    } else {
        62
    };
    read.is_ok()
        && bytes.starts_with(b"\x7fELF")
        && bytes[4] == 2
        && u16::from_le_bytes([bytes[18], bytes[19]]) == machine
}

/// The program `name` on PATH.
fn program(name: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_is_found_as_the_loader_finds_it() {
        let libc = find("libc").expect("libc in ld.so.cache");
        assert!(libc.to_string_lossy().contains("libc.so"), "{libc:?}");
        assert_eq!(find("c"), Some(libc.clone()));
        assert_eq!(find("libc.so.6"), Some(libc));
        assert!(find("libno-such-library").is_none());
        assert!(find("/no/such/file").is_none());
        assert!(find("sh").is_some(), "a program on PATH");
    }
}
