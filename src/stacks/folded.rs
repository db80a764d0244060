//! Collapsed stacks, the input of flame graph tools (FlameGraph's
//! flamegraph.pl, inferno, speedscope): one line per stack, its frames
//! from the root down separated by `;`, then a space and its count.

use std::collections::BTreeMap;

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

/// One collapsed stack: the test where there is one, the program, the
/// frames from the root down, then a pseudo-frame for the leaf where
/// there is one (`[sleep]`, a probe), each made a [`frame`].
pub fn stack(test: Option<&str>, program: &str, frames: &[String], leaf: Option<&str>) -> String {
    let parts: Vec<String> = test
        .into_iter()
        .chain([program])
        .chain(frames.iter().map(String::as_str))
        .chain(leaf)
        .map(frame)
        .collect();
    parts.join(";")
}

/// Adds `count` to `stack`'s line: saturating, as a hostile recording's
/// counts may add up past u64.
pub fn add(lines: &mut BTreeMap<String, u64>, stack: String, count: u64) {
    let line = lines.entry(stack).or_default();
    *line = line.saturating_add(count);
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

    #[test]
    fn a_stack_has_its_test_only_where_there_is_one() {
        let frames = ["main".to_owned(), "f;g".to_owned()];
        assert_eq!(stack(None, "cc", &frames, None), "cc;main;f:g");
        assert_eq!(
            stack(Some("t"), "cc", &frames, Some("[sleep]")),
            "t;cc;main;f:g;[sleep]"
        );
    }
}
