//! A function's names as people write them: the symbol as linked, and
//! for a Rust symbol (legacy or v0 mangling) or a C++ one the names it
//! demangles to. A spec may give any of them, or a pattern over them:
//! `app::parse::*`, `std::vector::push_back`, `thrower(int)`, `thrower`,
//! `_Z7throweri`.

use super::pattern::{glob_match, is_pattern};

/// The names of one symbol: what it is shown as first, then every other
/// name a spec may match it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    /// What people read: the demangled name (Rust's without its hash,
    /// C++'s with its parameters), else the symbol.
    pub shown: String,
    /// `shown`, the symbol, and the shorter forms: a Rust path without
    /// its generic arguments, a C++ name without its parameters, and
    /// without its template arguments too.
    pub forms: Vec<String>,
}

impl Names {
    /// The names of `symbol`.
    pub(crate) fn of(symbol: &str) -> Names {
        let mut demangled = Vec::new();
        if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
            let path = format!("{rust:#}");
            demangled.push(without_turbofish(&path));
            demangled.insert(0, path);
        } else if let Some(cpp) = cpp_forms(symbol) {
            demangled = cpp;
        }
        let mut forms: Vec<String> = Vec::with_capacity(demangled.len() + 1);
        for form in demangled.into_iter().chain([symbol.to_owned()]) {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
        Names {
            shown: forms[0].clone(),
            forms,
        }
    }

    /// Whether `wanted`, a name or a pattern, names this symbol.
    pub(crate) fn matched_by(&self, wanted: &str) -> bool {
        if is_pattern(wanted) {
            self.forms.iter().any(|form| glob_match(wanted, form))
        } else {
            self.forms.iter().any(|form| form == wanted)
        }
    }
}

/// A C++ symbol's names: with its parameters, without, and without its
/// template arguments too (`std::vector::push_back`, as profile-bee takes
/// it); `None` for a symbol that is not C++'s.
fn cpp_forms(symbol: &str) -> Option<Vec<String>> {
    use cpp_demangle::{DemangleOptions, Symbol};
    if !symbol.starts_with("_Z") {
        return None;
    }
    let parsed = Symbol::new(symbol).ok()?;
    let full = parsed.demangle().ok()?;
    let short_options = DemangleOptions::new().no_params().no_return_type();
    let short = parsed.demangle_with_options(&short_options).ok()?;
    let mut forms = vec![full, short.clone()];
    // An operator's name has its own angle brackets.
    if !short.contains("operator") {
        forms.push(without_brackets(&short, '<', '>'));
    }
    Some(forms)
}

/// `text` without its outermost `open`…`close` groups.
fn without_brackets(text: &str, open: char, close: char) -> String {
    let mut depth = 0usize;
    let mut kept = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            c if c == open => depth += 1,
            c if c == close && depth > 0 => depth -= 1,
            c if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept
}

/// A Rust path without the generic arguments of its segments
/// (`app::parse::<u32>` → `app::parse`): the `::<…>` groups, not the
/// `<T as Trait>` that opens a path.
fn without_turbofish(path: &str) -> String {
    let mut kept = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find("::<") {
        kept.push_str(&rest[..at]);
        let group = &rest[at + 2..];
        let mut depth = 0usize;
        let end = group.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth = depth.saturating_sub(1),
                _ => {}
            }
            (depth == 0).then_some(i + 1)
        });
        rest = end.map_or("", |end| &group[end..]);
    }
    kept.push_str(rest);
    kept
}

/// Of several names for one address, the one to show: a public name
/// (no leading `_`) before an internal one, then the shortest, then the
/// first in order (`strtol` before `strtoimax` and `__strtol_internal`).
pub(crate) fn preferred<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .min_by_key(|name| (name.starts_with('_'), name.len(), *name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_symbols_are_named_by_their_paths() {
        // Legacy mangling, with its hash.
        let legacy = Names::of("_ZN3app5parse6number17h0123456789abcdefE");
        assert_eq!(legacy.shown, "app::parse::number");
        assert!(legacy.matched_by("app::parse::number"));
        assert!(legacy.matched_by("app::parse::*"));
        assert!(legacy.matched_by("_ZN3app5parse6number17h0123456789abcdefE"));
        assert!(!legacy.matched_by("app::parse"));
        // v0 mangling: `app::parse::number::<u32>`.
        let v0 = Names::of("_RINvNtCs1234_3app5parse6numbermEB4_");
        assert_eq!(v0.shown, "app::parse::number::<u32>");
        assert!(v0.matched_by("app::parse::number"));
        assert!(v0.matched_by("app::*::number*"));
    }

    #[test]
    fn cpp_symbols_are_named_with_and_without_parameters() {
        let thrower = Names::of("_Z7throweri");
        assert_eq!(thrower.shown, "thrower(int)");
        for name in ["thrower(int)", "thrower", "_Z7throweri", "thr*"] {
            assert!(thrower.matched_by(name), "{name}");
        }
        let push = Names::of("_ZNSt6vectorIiSaIiEE9push_backERKi");
        assert_eq!(
            push.shown,
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert!(push.matched_by("std::vector::push_back"));
        assert!(push.matched_by("std::vector<int, std::allocator<int> >::push_back"));
        assert!(push.matched_by("std::*"));
        assert!(!push.matched_by("push_back"));
    }

    #[test]
    fn c_symbols_are_their_own_names() {
        let malloc = Names::of("malloc");
        assert_eq!((malloc.shown.as_str(), malloc.forms.len()), ("malloc", 1));
        assert!(malloc.matched_by("mall*") && !malloc.matched_by("mall"));
    }

    #[test]
    fn the_public_short_name_of_aliases_is_shown() {
        let names = ["strtoimax", "__strtol_internal", "strtol"];
        assert_eq!(preferred(names), Some("strtol"));
        assert_eq!(preferred(["__libc_malloc", "malloc"]), Some("malloc"));
        assert_eq!(
            without_turbofish("<a::B as c::D>::f::<u8>"),
            "<a::B as c::D>::f"
        );
    }
}
