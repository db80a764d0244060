//! Where a function is in its source, as `proctrace probes` lists it: the
//! file and line its entry's debug information gives (DWARF in the file,
//! or a debug file it links to), read by blazesym as frames are.

use std::path::Path;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

/// `FILE:LINE` of the code at each of `offsets` (file offsets) of `file`,
/// where its debug information says.
pub(super) fn sources(file: &Path, offsets: &[u64]) -> Vec<Option<String>> {
    let blaze = Symbolizer::builder().enable_code_info(true).build();
    let source = Source::Elf(Elf::new(file));
    let found = blaze
        .symbolize(&source, Input::FileOffset(offsets))
        .unwrap_or_default();
    let mut found = found.into_iter().map(|symbolized| match symbolized {
        Symbolized::Sym(sym) => sym.code_info.and_then(|code| {
            let line = code.line?;
            Some(format!("{}:{line}", code.to_path().display()))
        }),
        Symbolized::Unknown(_) => None,
    });
    offsets.iter().map(|_| found.next().flatten()).collect()
}
