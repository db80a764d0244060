//! Text the traced programs chose, made safe to show: command lines quoted
//! for a shell, and any other text escaped for a terminal.
//!
//! An argument may hold any byte but NUL: invalid UTF-8, escape sequences
//! that recolour or rewrite a terminal, newlines that forge lines of
//! output, bidirectional overrides that make text read other than it is.
//! Everything proctrace shows of such text goes through here, so every
//! view escapes the same characters the same way.
//!
//! The formats every view shares live here too: durations (`seconds`,
//! `glance`), lists of fds, and lines cut to a terminal's columns.

use std::borrow::Cow;
use std::fmt;
use std::io;

use serde::Serialize;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Joins argv into one line that a shell would split back into the same
/// words, byte for byte, quoting only where needed.
///
/// A word holding bytes a terminal would act on rather than show
/// (control characters, invisible format characters) or bytes that are
/// not UTF-8 is written `$'...'`, with those bytes as `\n`, `\t`, `\r` or
/// three-digit octal (`\033`), the way bash's `printf %q` writes them and
/// POSIX.1-2024 shells read them. The line is always one line of visible
/// text.
pub fn shell_join<S: AsRef<[u8]>>(argv: &[S]) -> String {
    let mut line = String::new();
    for (i, word) in argv.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        shell_quote(word.as_ref(), &mut line);
    }
    line
}

fn shell_quote(word: &[u8], out: &mut String) {
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(b);
    match std::str::from_utf8(word) {
        Ok(text) if !text.is_empty() && word.iter().all(plain) => out.push_str(text),
        Ok(text) if !text.chars().any(hidden) => {
            out.push('\'');
            out.push_str(&text.replace('\'', r"'\''"));
            out.push('\'');
        }
        _ => dollar_quote(word, out),
    }
}

/// `$'...'`: the one quoting that can spell every byte.
fn dollar_quote(word: &[u8], out: &mut String) {
    out.push_str("$'");
    for chunk in word.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str(r"\\"),
                '\'' => out.push_str(r"\'"),
                c if hidden(c) => escape(c, out),
                c => out.push(c),
            }
        }
        chunk.invalid().iter().for_each(|&b| octal(b, out));
    }
    out.push('\'');
}

/// `text` with every character a terminal would act on rather than show
/// written as the escape [`shell_join`] uses for it (`\033`, `\n`...), so
/// that a line of output stays one line and shows what is there.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            escape(c, &mut shown);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// Writes `value` as compact JSON that is also safe to show on a terminal
/// (`cat` a recording, `render` to stdout): the characters [`visible`]
/// escapes are written `\uXXXX`, besides those JSON itself escapes. Any
/// JSON reader reads the same value.
pub fn write_json<W: io::Write, T: Serialize + ?Sized>(
    out: W,
    value: &T,
) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        TerminalSafe,
    ))
}

struct TerminalSafe;

impl serde_json::ser::Formatter for TerminalSafe {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        out: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| hidden(c)) {
            out.write_all(&rest.as_bytes()[..at])?;
            // Every hidden character is in the Basic Multilingual Plane.
            write!(out, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        out.write_all(rest.as_bytes())
    }
}

fn escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str(r"\n"),
        '\t' => out.push_str(r"\t"),
        '\r' => out.push_str(r"\r"),
        c => c
            .encode_utf8(&mut [0; 4])
            .bytes()
            .for_each(|b| octal(b, out)),
    }
}

/// Always three digits: a digit that follows cannot extend the escape.
fn octal(byte: u8, out: &mut String) {
    out.push_str(&format!("\\{byte:03o}"));
}

/// Whether a terminal would act on `c` rather than show it: the control
/// characters (C0, DEL, C1) and the invisible format characters that hide,
/// reorder or break text (zero-width spaces, bidirectional marks and
/// overrides, line and paragraph separators, the byte-order mark).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061C}' | '\u{180E}' | '\u{200B}' | '\u{200E}' | '\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `1 exec`, `2 execs`.
pub fn count<N: fmt::Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    let word = if n == N::from(1) { one } else { many };
    format!("{n} {word}")
}

/// Nanoseconds as seconds, rounded to the millisecond as the HTML report
/// rounds them: `1.235s`.
pub fn seconds(ns: u64) -> String {
    let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

/// A duration at a glance, for a status line or a live view: `850µs`,
/// `12ms`, `12.3s`, `3m05s`, `1h02m`.
pub fn glance(ns: u64) -> String {
    let duration = std::time::Duration::from_nanos(ns);
    let secs = duration.as_secs();
    match secs {
        0 if ns < 1_000_000 => format!("{}µs", duration.as_micros()),
        0 => format!("{}ms", duration.as_millis()),
        1..60 => format!("{:.1}s", duration.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// A short duration to three digits, down to the nanosecond, for the
/// times of single calls: `850 ns`, `12.3 µs`, `4.1 ms`, `2.0 s`.
pub fn precise(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.1} s", ns as f64 / 1e9),
    }
}

/// `fd 3` or `fds 1, 2, 4`.
pub fn fd_list(fds: &[i32]) -> String {
    let numbers: Vec<String> = fds.iter().map(i32::to_string).collect();
    let noun = if fds.len() == 1 { "fd" } else { "fds" };
    format!("{noun} {}", numbers.join(", "))
}

/// Narrowest a shortened line gets, however little room is left.
const MIN_WIDTH: usize = 12;

/// Cuts `text` to `width` terminal columns, marking the cut with '…': a
/// CJK character takes two columns, a combining mark none.
pub fn shorten(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.map(|w| w.max(MIN_WIDTH)) else {
        return text.to_string();
    };
    if text.width() <= width {
        return text.to_string();
    }
    let mut cut = String::new();
    let mut used = 0;
    for c in text.chars() {
        used += c.width().unwrap_or(0);
        if used > width - 1 {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// `text` over lines of at most `width` columns, broken before a `sep`
/// (a stack's ` ← `), each line after the first indented as `text` is
/// and a little more: every part stays, where [`shorten`] would drop the
/// middle ones. A part too wide by itself, and a text with no `sep`, are
/// cut.
pub fn wrap_at(text: &str, sep: &str, width: usize) -> Vec<String> {
    if text.width() <= width || !text.contains(sep) {
        return vec![shorten(text, Some(width))];
    }
    let indent = &text[..text.len() - text.trim_start_matches(' ').len()];
    let mut parts = text.split(sep);
    let mut line = parts.next().unwrap_or_default().to_string();
    let mut lines = Vec::new();
    for part in parts {
        if line.width() + sep.width() + part.width() <= width {
            line.push_str(sep);
        } else {
            lines.push(shorten(&line, Some(width)));
            line = format!("{indent}   {sep}");
        }
        line.push_str(part);
    }
    lines.push(shorten(&line, Some(width)));
    lines
}

/// Narrowest a word of a command line is cut to, '…' included.
const WORD_KEPT: usize = 16;

/// Cuts a line that holds a command line (`sh -c '…' arg`) to `width`
/// terminal columns by cutting the middle of its widest words, so that
/// every word keeps its start and end and the words after a long one
/// (the argument that tells two such processes apart) stay: `python3 -c
/// 'import time, s…p(100)' server-1008`. Only where no word is left to cut
/// is the line's end cut, as [`shorten`] does.
pub fn shorten_command(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.map(|w| w.max(MIN_WIDTH)) else {
        return text.to_string();
    };
    let mut over = text.width().saturating_sub(width);
    if over == 0 {
        return text.to_string();
    }
    let words = word_spans(text);
    let mut kept: Vec<usize> = words.iter().map(|&(a, b)| text[a..b].width()).collect();
    while over > 0 {
        // The widest word, the first of equals: cut it as far as needed.
        let Some((at, &widest)) = kept
            .iter()
            .enumerate()
            .rev()
            .max_by_key(|&(_, &w)| w)
            .filter(|&(_, &w)| w > WORD_KEPT)
        else {
            break;
        };
        let to = widest.saturating_sub(over).max(WORD_KEPT);
        over -= widest - to;
        kept[at] = to;
    }
    let mut line = String::with_capacity(text.len());
    let mut from = 0;
    for (&(a, b), &keep) in words.iter().zip(&kept) {
        line.push_str(&text[from..a]);
        line.push_str(&cut_middle(&text[a..b], keep));
        from = b;
    }
    line.push_str(&text[from..]);
    shorten(&line, Some(width))
}

/// `word` in `keep` columns: its start, '…', and its last third.
fn cut_middle(word: &str, keep: usize) -> Cow<'_, str> {
    if word.width() <= keep {
        return Cow::Borrowed(word);
    }
    let tail_width = (keep - 1) / 3;
    let head = take_columns(word.chars(), keep - 1 - tail_width);
    let tail: String = take_columns(word.chars().rev(), tail_width)
        .chars()
        .rev()
        .collect();
    Cow::Owned(format!("{head}…{tail}"))
}

/// The characters of `chars` that fit in `columns`, in their order.
fn take_columns(chars: impl Iterator<Item = char>, columns: usize) -> String {
    let mut used = 0;
    chars
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= columns
        })
        .collect()
}

/// The byte ranges of the words of a line as [`shell_join`] quotes them:
/// runs of text between blanks, a quoted blank (`'a b'`, `$'a\' b'`,
/// `a\ b`) inside its word.
fn word_spans(line: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let mut chars = line.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == ' ' {
            if let Some(s) = start.take() {
                spans.push((s, at));
            }
            continue;
        }
        start.get_or_insert(at);
        match c {
            '\\' => {
                chars.next();
            }
            '\'' => {
                // `$'...'` takes backslash escapes, `'...'` none.
                let escapes = at > 0 && line.as_bytes()[at - 1] == b'$';
                while let Some((_, q)) = chars.next() {
                    match q {
                        '\\' if escapes => {
                            chars.next();
                        }
                        '\'' => break,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, line.len()));
    }
    spans
}

/// `pids a–b, c`: pids as ranges where they run on.
pub fn pid_ranges(mut pids: Vec<i32>) -> String {
    pids.sort_unstable();
    let mut ranges: Vec<(i32, i32)> = Vec::new();
    for pid in pids {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == pid => *end = pid,
            _ => ranges.push((pid, pid)),
        }
    }
    let mut text: Vec<String> = ranges
        .iter()
        .take(RANGES_SHOWN)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect();
    if ranges.len() > RANGES_SHOWN {
        text.push(format!("… {} more ranges", ranges.len() - RANGES_SHOWN));
    }
    text.join(", ")
}

/// Ranges of pids named in one line; the count says how many there are.
const RANGES_SHOWN: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_join_quotes_only_what_needs_it() {
        let argv = ["sh", "-c", "echo 'hi' there", "", "a:b", "日本"];
        assert_eq!(
            shell_join(&argv),
            r#"sh -c 'echo '\''hi'\'' there' '' a:b '日本'"#
        );
    }

    #[test]
    fn words_a_terminal_would_act_on_are_spelled_out() {
        let argv: [&[u8]; 4] = [
            b"a\tb\nc",
            b"\x1b[31mred's\\",
            b"\xff\xfeok",
            "\u{202e}x".as_bytes(),
        ];
        assert_eq!(
            shell_join(&argv),
            r"$'a\tb\nc' $'\033[31mred\'s\\' $'\377\376ok' $'\342\200\256x'"
        );
    }

    #[test]
    fn json_hides_nothing_from_a_terminal() {
        let text = "a\u{1b}[2J\u{7f}\u{9b}\u{202e}é\n";
        let mut json = Vec::new();
        write_json(&mut json, &[text]).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert_eq!(json, r#"["a\u001b[2J\u007f\u009b\u202eé\n"]"#);
        assert_eq!(serde_json::from_str::<[String; 1]>(&json).unwrap(), [text]);
    }

    #[test]
    fn visible_text_is_one_line_of_what_is_there() {
        assert_eq!(visible("plain 'text' \\ 日本"), "plain 'text' \\ 日本");
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\nb\x1b[2J\r\u{85}\u{2066}"),
            r"a\nb\033[2J\r\302\205\342\201\246"
        );
    }

    #[test]
    fn a_stack_wraps_at_its_arrows_and_keeps_every_frame() {
        let frames: Vec<String> = (0..12).map(|i| format!("frame{i} (mod.py:{i})")).collect();
        let line = format!("  python: 10: {}", frames.join(" ← "));
        let lines = wrap_at(&line, " ← ", 60);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|l| l.width() <= 60), "{lines:?}");
        assert!(lines[0].starts_with("  python: 10: frame0 (mod.py:0) ← frame1"));
        assert!(
            lines[1..].iter().all(|l| l.starts_with("      ← frame")),
            "{lines:?}"
        );
        let joined = lines.join("").replace("      ← ", " ← ");
        assert_eq!(joined, line);
        // A part wider than the line is cut; a line with no arrow too.
        let wide = format!("a ← {}", "b".repeat(80));
        assert_eq!(
            wrap_at(&wide, " ← ", 60)[1],
            shorten(&format!("    ← {}", "b".repeat(80)), Some(60))
        );
        assert_eq!(
            wrap_at(&"c".repeat(80), " ← ", 60),
            [shorten(&"c".repeat(80), Some(60))]
        );
        assert_eq!(wrap_at("short ← line", " ← ", 60), ["short ← line"]);
    }

    #[test]
    fn shortens_to_terminal_columns() {
        let cjk = "漢字漢字漢字漢字漢字漢字漢字漢字";
        let cut = shorten(cjk, Some(15));
        assert_eq!(cut, "漢字漢字漢字漢…");
        assert_eq!(cut.width(), 15);
    }

    #[test]
    fn shortens_to_width_but_not_below_the_minimum() {
        assert_eq!(shorten("sleep 0.2", Some(20)), "sleep 0.2");
        assert_eq!(
            shorten("abcdefghijklmnopqrstuvwxyz", Some(15)),
            "abcdefghijklmn…"
        );
        assert_eq!(
            shorten("abcdefghijklmnopqrstuvwxyz", Some(1))
                .chars()
                .count(),
            12
        );
        assert_eq!(shorten("abcdefghijklmnopqrstuvwxyz", None).len(), 26);
    }

    #[test]
    fn commands_are_cut_inside_their_widest_words() {
        let script = "'import time, socket; s = socket.socket(); time.sleep(100)'";
        let line = format!("python3 -c {script} server-1008");
        let cut = shorten_command(&line, Some(50));
        assert_eq!(cut, "python3 -c 'import time, sock…ep(100)' server-1008");
        assert_eq!(cut.width(), 50);
        // Quoted blanks are inside their word; words that fit stay whole.
        assert_eq!(
            shorten_command(
                "a 'b c d e f g h i j k l m n o p' $'q\\' r s t u v' w",
                Some(40)
            ),
            "a 'b c d e f g…n o p' $'q\\' r s t u v' w"
        );
        assert_eq!(shorten_command("sh -c 'true'", Some(40)), "sh -c 'true'");
        assert_eq!(shorten_command(&line, None), line);
        // Two long words: the wider is cut first, then both.
        let two = format!("{} {}", "a".repeat(40), "b".repeat(30));
        assert_eq!(
            shorten_command(&two, Some(60)),
            format!("{}…{} {}", "a".repeat(19), "a".repeat(9), "b".repeat(30))
        );
        assert_eq!(
            shorten_command(&two, Some(33)),
            format!(
                "{}…{} {}…{}",
                "a".repeat(10),
                "a".repeat(5),
                "b".repeat(10),
                "b".repeat(5)
            )
        );
        // Nothing left to cut inside a word: the end goes.
        let words = "abcdefgh ".repeat(8);
        assert_eq!(shorten_command(&words, Some(20)), shorten(&words, Some(20)));
        // Columns, not bytes: a CJK character takes two.
        let cjk = format!("run {}", "漢".repeat(20));
        let cut = shorten_command(&cjk, Some(24));
        assert_eq!(cut, "run 漢漢漢漢漢漢…漢漢漢");
        assert!(cut.width() <= 24, "{cut}");
    }

    #[test]
    fn descriptor_lists_read_as_english() {
        assert_eq!(fd_list(&[3]), "fd 3");
        assert_eq!(fd_list(&[1, 2, 4]), "fds 1, 2, 4");
    }

    #[test]
    fn seconds_have_millisecond_precision() {
        assert_eq!(seconds(1_234_567_890), "1.235s");
        assert_eq!(seconds(1_234_499_999), "1.234s");
        assert_eq!(seconds(51_000), "0.000s");
    }

    #[test]
    fn a_glance_picks_the_unit() {
        assert_eq!(glance(850_000), "850µs");
        assert_eq!(glance(12_400_000), "12ms");
        assert_eq!(glance(12_340_000_000), "12.3s");
        assert_eq!(glance(185_000_000_000), "3m05s");
        assert_eq!(glance(3_720_000_000_000), "1h02m");
    }
}
