//! Collapsed stacks, the input of flame graph tools (FlameGraph's
//! flamegraph.pl, inferno, speedscope): one line per stack, its frames
//! from the root down separated by `;`, then a space and its count.

use crate::text::visible;

/// `name` as one frame of a collapsed stack. The format has no escapes:
/// `;` would split the frame, so it becomes `:`; an empty name would
/// vanish from the stack, so it is the shell's `''`; control characters
/// are spelled out as [`visible`] does.
pub fn frame(name: &str) -> String {
    match name {
        "" => "''".to_owned(),
        name => visible(name).replace(';', ":"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_never_splits_or_vanishes() {
        assert_eq!(frame("a;b"), "a:b");
        assert_eq!(frame(""), "''");
        assert_eq!(frame("make"), "make");
    }
}
