//! Text the tests compare: what a terminal must not see, argv kept as a
//! prefix of what was passed, and string lists.

/// Whether a terminal would act on `c` rather than show it, in text meant
/// for one, where only the newlines that end lines may be controls.
pub fn terminal_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The most argv bytes (NULs included) a recording keeps.
pub const ARGV_LIMIT: usize = 32 * 1024;

/// Checks a truncated argv: a prefix of `full`, byte for byte, whole
/// entries but maybe the last, within the limit and not much shorter.
pub fn assert_kept_prefix<K: AsRef<[u8]>, F: AsRef<[u8]>>(kept: &[K], full: &[F]) {
    let kept: Vec<&[u8]> = kept.iter().map(AsRef::as_ref).collect();
    let full: Vec<&[u8]> = full.iter().map(AsRef::as_ref).collect();
    assert!(!kept.is_empty() && kept.len() <= full.len());
    let last = kept.len() - 1;
    assert!(kept[..last] == full[..last], "whole entries changed");
    assert!(
        full[last].starts_with(kept[last]),
        "the last kept entry is not a prefix of the original"
    );
    // Each entry and its NUL; a cut last entry may have lost its NUL.
    let mut bytes: usize = kept.iter().map(|a| a.len() + 1).sum();
    if kept[last] != full[last] {
        bytes -= 1;
    }
    assert!(bytes <= ARGV_LIMIT, "kept {bytes} bytes of argv");
    assert!(bytes >= 24 * 1024, "kept only {bytes} bytes of argv");
}

/// argv as owned strings, for comparisons.
pub fn strings(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|s| s.to_string()).collect()
}
