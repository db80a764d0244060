//! The guide in step with the command: every subcommand, every long flag
//! of each and every view of `render -d` that `--help` lists is named in
//! docs/*.md. The man pages are made from the same definitions, so they
//! are covered too. A new flag or view fails here, by name, until the
//! guide says what it does.

use std::fs;

use crate::common::{proctrace_ok, repo};

/// What `proctrace WORDS... --help` prints (the long help, with each
/// value's description).
pub fn help(words: &[&str]) -> String {
    let mut args = words.to_vec();
    args.push("--help");
    String::from_utf8(proctrace_ok(&args).stdout).expect("the help is UTF-8")
}

/// The lines of `section` ("Commands:", "Options:") of a help text.
fn section<'a>(help: &'a str, section: &str) -> Vec<&'a str> {
    let mut inside = false;
    let mut lines = Vec::new();
    for line in help.lines() {
        if !line.is_empty() && !line.starts_with(' ') {
            inside = line == section;
        } else if inside {
            lines.push(line);
        }
    }
    lines
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether `line` defines an option (`  -o, --output <FILE>`,
/// `      --raw`) rather than continuing a description.
fn defines_option(line: &str) -> bool {
    matches!(indent(line), 2 | 6) && line.trim_start().starts_with('-')
}

/// The subcommands a help text lists, `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    section(help, "Commands:")
        .into_iter()
        .filter(|line| indent(line) == 2)
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags a help text lists (`--output`), each once.
fn long_flags(help: &str) -> Vec<String> {
    section(help, "Options:")
        .into_iter()
        .filter(|line| defines_option(line))
        .filter_map(|line| {
            let at = line.find("--")?;
            let flag: String = line[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            Some(format!("--{flag}"))
        })
        .collect()
}

/// The values `render --help` lists for `-d`: the items of its "Possible
/// values:" list (at the description's indent), or of a `[possible
/// values: a, b]` note.
pub fn views(help: &str) -> Vec<String> {
    let options = section(help, "Options:");
    let Some(start) = options
        .iter()
        .position(|line| defines_option(line) && line.contains("--display"))
    else {
        return Vec::new();
    };
    let block = options[start + 1..]
        .iter()
        .take_while(|line| !defines_option(line));
    let mut views = Vec::new();
    let mut listed = false;
    for line in std::iter::once(&options[start]).chain(block) {
        let text = line.trim_start();
        if let Some(at) = text.find("[possible values: ") {
            let list = &text[at + "[possible values: ".len()..];
            let list = list.split(']').next().unwrap_or(list);
            views.extend(list.split(", ").map(|v| v.trim().to_owned()));
        } else if text == "Possible values:" {
            listed = true;
        } else if let Some(item) = text
            .strip_prefix("- ")
            .filter(|_| listed && indent(line) == 10)
        {
            let name = item.split(':').next().unwrap_or(item);
            views.push(name.trim().to_owned());
        }
    }
    views
}

/// Whether `text` holds `word` on its own: not as the start of a longer
/// flag (`--timeout` in `--timeout-signal`) or the end of a longer word.
fn mentions(text: &str, word: &str) -> bool {
    let part_of_word = |c: char| c.is_ascii_alphanumeric() || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(part_of_word) && !after.is_some_and(part_of_word)
    })
}

/// Every docs/*.md, one after another.
fn docs() -> String {
    let dir = repo().join("docs");
    let mut pages: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "no docs/*.md");
    pages
        .iter()
        .map(|path| fs::read_to_string(path).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every command's words (none for `proctrace` itself) and its `--help`,
/// breadth first through the subcommands: `export`, then `export otlp`.
fn every_help() -> Vec<(Vec<String>, String)> {
    let mut commands: Vec<(Vec<String>, String)> = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(words) = (!todo.is_empty()).then(|| todo.remove(0)) {
        let words_ref: Vec<&str> = words.iter().map(String::as_str).collect();
        let text = help(&words_ref);
        for sub in subcommands(&text) {
            let mut deeper = words.clone();
            deeper.push(sub);
            todo.push(deeper);
        }
        commands.push((words, text));
    }
    commands
}

#[test]
fn the_guide_names_every_flag_and_view_of_help() {
    let docs = docs();
    let mut missing = Vec::new();
    let mut flags_seen = 0;
    let commands = every_help();
    for (words, text) in &commands {
        let path = ["proctrace".to_owned()]
            .iter()
            .chain(words)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        if !words.is_empty() && !mentions(&docs, &path) {
            missing.push(format!("the subcommand `{path}`"));
        }
        for flag in long_flags(text) {
            flags_seen += 1;
            if !mentions(&docs, &flag) {
                missing.push(format!("`{path} {flag}`"));
            }
        }
    }
    let names: Vec<_> = commands.iter().map(|(c, _)| c.join(" ")).collect();
    for expected in ["record", "render", "diff", "ingest"] {
        assert!(
            names.iter().any(|n| n == expected),
            "`{expected}` not among the subcommands read from --help: {names:?}"
        );
    }
    assert!(flags_seen > 30, "only {flags_seen} flags read from --help");

    let views = views(&help(&["render"]));
    assert!(
        views.iter().any(|v| v == "tree") && views.iter().any(|v| v == "hang"),
        "the views of `render -d` not read from --help: {views:?}"
    );
    for view in views {
        if !mentions(&docs, &format!("`{view}`")) && !mentions(&docs, &format!("-d {view}")) {
            missing.push(format!("the view `render -d {view}`"));
        }
    }

    assert!(
        missing.is_empty(),
        "docs/*.md do not name {} of what --help lists; add each to docs/guide.md:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// Whether a code span of a help text is a name from code rather than
/// words: `SCREAMING_CASE` or `CamelCase`.
fn is_code_name(span: &str) -> bool {
    let word = !span.is_empty() && span.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let upper = |c: char| c.is_ascii_uppercase();
    let screaming = span.contains('_') && !span.chars().any(|c| c.is_ascii_lowercase());
    let camel = span.starts_with(upper)
        && span.chars().skip(1).any(upper)
        && span.chars().any(|c| c.is_ascii_lowercase());
    word && (screaming || camel)
}

/// `--help` speaks to people: no rustdoc link (``[`Weight`]``), and every
/// name from code it quotes is one the guide explains
/// (`ExportTraceServiceRequest`), not one of proctrace's own (`OTLP_BATCH`).
#[test]
fn the_help_names_nothing_internal() {
    let docs = docs();
    let mut internal = Vec::new();
    for (words, text) in every_help() {
        let command = words.join(" ");
        if text.contains("[`") || text.contains("`]") {
            internal.push(format!("{command}: a rustdoc link"));
        }
        for span in text.split('`').skip(1).step_by(2) {
            if is_code_name(span) && !docs.contains(span) {
                internal.push(format!("{command}: `{span}`"));
            }
        }
    }
    assert!(
        internal.is_empty(),
        "--help names:\n  {}",
        internal.join("\n  ")
    );
    assert!(is_code_name("OTLP_BATCH") && is_code_name("ExportTraceServiceRequest"));
    assert!(!is_code_name("TRACEPARENT") && !is_code_name("-d folded") && !is_code_name("Cpu"));
}

#[test]
fn a_flag_is_found_only_on_its_own() {
    assert!(mentions("with `--timeout 5s`", "--timeout"));
    assert!(mentions("--timeout", "--timeout"));
    assert!(!mentions("`--timeout-signal QUIT`", "--timeout"));
    assert!(!mentions("--on-hang-timeout", "--on-hang"));
    assert!(mentions("| `tree` |", "`tree`"));
}

#[test]
fn help_texts_are_read_as_clap_writes_them() {
    let help = [
        "Usage: x",
        "",
        "Commands:",
        "  otlp  Send spans",
        "        over OTLP",
        "  help  Print",
        "",
        "Options:",
        "  -o, --output <FILE>",
        "          Where --raw goes",
        "",
        "      --raw",
        "  -d, --display <MODE>",
        "          What",
        "          - not a value",
        "",
        "          Possible values:",
        "          - tree:       The tree",
        "          - by-process: Blocks",
        "            - not a value either",
        "",
        "      --weight <W>",
        "          Possible values:",
        "          - cpu: CPU",
        "  -h, --help  Print help",
    ]
    .join("\n");
    assert_eq!(subcommands(&help), ["otlp"]);
    assert_eq!(
        long_flags(&help),
        ["--output", "--raw", "--display", "--weight", "--help"]
    );
    assert_eq!(views(&help), ["tree", "by-process"]);
    let short =
        "Options:\n  -d, --display <MODE>  What [possible values: tree, html]\n  -h, --help\n";
    assert_eq!(views(short), ["tree", "html"]);
}
