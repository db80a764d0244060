//! The code an IFUNC stands for on this machine. An IFUNC's symbol
//! (`strlen`, `memcpy`: most of libc's string functions) is the address of
//! a resolver that the dynamic loader calls to pick the code for this CPU;
//! a uprobe there fires only when the loader binds it. proctrace asks its
//! own loader, which picks as every process of the machine does (same
//! file, same CPU): a library proctrace itself has loaded (libc) is looked
//! up with `dlsym`, which runs the resolver, and the answer placed back in
//! the file. A library proctrace has not loaded is not loaded for this
//! (its constructors would run), and a static proctrace has no loader to
//! ask: there the IFUNC is not resolved.

use std::path::Path;

/// The file offset in `file` of the code `symbol`, an IFUNC of it, runs
/// on this machine, where this process's loader can say.
pub(super) fn code_offset(file: &Path, symbol: &str) -> Option<u64> {
    let mapped = mappings().into_iter().find(|m| m.path == file)?;
    let address = loader::resolve(&mapped.path, symbol)?;
    mappings()
        .into_iter()
        .find(|m| m.path == file && (m.start..m.end).contains(&address))
        .map(|m| address - m.start + m.offset)
}

/// A mapping of a file into this process.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: std::path::PathBuf,
}

/// This process's mappings of files, their paths as the files' own.
fn mappings() -> Vec<Mapping> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let offset = fields.nth(1)?;
            let path = fields.nth(2).filter(|p| p.starts_with('/'))?;
            let hex = |text: &str| u64::from_str_radix(text, 16).ok();
            Some(Mapping {
                start: hex(start)?,
                end: hex(end)?,
                offset: hex(offset)?,
                path: std::fs::canonicalize(path).ok()?,
            })
        })
        .collect()
}

#[cfg(not(target_feature = "crt-static"))]
mod loader {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// Where `symbol` of the loaded library `path` is bound in this
    /// process: for an IFUNC, the code its resolver picked.
    pub(super) fn resolve(path: &Path, symbol: &str) -> Option<u64> {
        let path = CString::new(path.as_os_str().as_bytes()).ok()?;
        let symbol = CString::new(symbol).ok()?;
        // SAFETY: RTLD_NOLOAD loads nothing (no constructor runs): it
        // hands out the library already loaded, or null.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if handle.is_null() {
            return None;
        }
        // SAFETY: a live handle; an IFUNC's resolver reads the CPU's
        // features and returns an address, as at any binding.
        let address = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
        // SAFETY: the reference dlopen took above.
        unsafe { libc::dlclose(handle) };
        (!address.is_null()).then_some(address as u64)
    }
}

#[cfg(target_feature = "crt-static")]
mod loader {
    /// A static proctrace has no dynamic loader to ask.
    pub(super) fn resolve(_: &std::path::Path, _: &str) -> Option<u64> {
        None
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The file offset of this process's code at `address`.
    pub(crate) fn offset_in_self(address: usize) -> Option<u64> {
        let address = address as u64;
        mappings()
            .into_iter()
            .find(|m| (m.start..m.end).contains(&address))
            .map(|m| address - m.start + m.offset)
    }

    #[test]
    fn a_library_not_loaded_here_is_not_loaded_for_it() {
        let file = Path::new("/no/such/library.so");
        assert_eq!(code_offset(file, "strlen"), None);
    }
}
