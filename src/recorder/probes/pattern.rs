//! Names matched as shells match file names: what a spec's FUNCTION or
//! USDT NAME may be.

/// Whether `name` matches `pattern`, whose `*` stands for any run of
/// characters and `?` for one.
pub(crate) fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some((&c, rest)) => n
                .split_first()
                .is_some_and(|(&d, tail)| (c == b'?' || c == d) && go(rest, tail)),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// Whether `pattern` has a wildcard.
pub(crate) fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_shells_do() {
        assert!(glob_match("mall*", "malloc"));
        assert!(glob_match("*alloc", "malloc"));
        assert!(glob_match("m?lloc", "malloc"));
        assert!(glob_match("malloc", "malloc"));
        assert!(!glob_match("malloc", "malloc2"));
        assert!(!glob_match("m*x", "malloc"));
        assert!(glob_match("*", ""));
    }
}
