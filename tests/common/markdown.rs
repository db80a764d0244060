//! What `render -d markdown` promises whatever the command lines hold.

use super::terminal_unsafe;

/// Checks a page of `render -d markdown` line by line: every line is one
/// the view writes (text of the traced programs cannot start a line),
/// tables keep their columns (no unescaped `|` in a cell), no `<` can open
/// an HTML tag and every `&` is an escape of the view's, and code blocks
/// close where the view closes them.
pub fn assert_markdown(page: &str) {
    let mut fence: Option<&str> = None;
    let mut columns: Option<usize> = None;
    for (n, line) in page.lines().enumerate() {
        let at = || format!("markdown line {}: {line:?}", n + 1);
        assert!(!line.contains(terminal_unsafe), "{}", at());
        if let Some(open) = fence {
            let ticks = line.len() - line.trim_start_matches('`').len();
            assert!(line == open || ticks < open.len(), "{}", at());
            if line == open {
                fence = None;
            }
            continue;
        }
        assert!(!line.contains('<'), "an HTML tag could open: {}", at());
        let bare = line
            .replace("&lt;", "")
            .replace("&gt;", "")
            .replace("&amp;", "");
        assert!(!bare.contains('&'), "a raw entity: {}", at());
        if line.starts_with('|') {
            let cells = unescaped_pipes(line) - 1;
            assert_eq!(*columns.get_or_insert(cells), cells, "{}", at());
            continue;
        }
        columns = None;
        if line.starts_with("```") {
            fence = Some(line.trim_end_matches("text"));
            continue;
        }
        let ours = [
            "## ",
            "### ",
            "**Wall time** ",
            "**Tests** ",
            "> ",
            "… and ",
            "- **Culprit:** ",
            "- **Deadlock:** ",
        ];
        assert!(
            line.is_empty() || ours.iter().any(|start| line.starts_with(start)),
            "a line the view does not write: {}",
            at()
        );
    }
    assert_eq!(fence, None, "a code block is not closed");
}

/// The `|` not escaped by a backslash (itself not escaped).
fn unescaped_pipes(line: &str) -> usize {
    let mut count = 0;
    let mut escaped = false;
    for c in line.chars() {
        if c == '|' && !escaped {
            count += 1;
        }
        escaped = c == '\\' && !escaped;
    }
    count
}
