//! What `make install` puts on a machine, generated from the command's own
//! definitions: bash completions that complete its subcommands and views,
//! man pages groff renders, and the install and uninstall themselves.

use std::path::Path;
use std::process::Command;

use crate::common::have_tool;

const BIN: &str = env!("CARGO_BIN_EXE_proctrace");

/// What bash's completion offers for the words of `line` (the last one
/// being completed), with proctrace's script loaded.
fn bash_completes(line: &[&str]) -> Vec<String> {
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        r#"source <("{BIN}" completions bash) || exit 1
COMP_WORDS=({words})
COMP_CWORD={cword}
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
_proctrace proctrace "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = words.join(" "),
        cword = line.len() - 1,
    );
    let output = Command::new("bash")
        .args(["--norc", "-c", &script])
        .output()
        .expect("running bash");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_views() {
    let offered = bash_completes(&["proctrace", "re"]);
    assert_eq!(offered, ["record", "render"]);
    let views = bash_completes(&["proctrace", "render", "-d", ""]);
    for view in [
        "tree", "summary", "html", "hang", "profile", "markdown", "otlp",
    ] {
        assert!(views.iter().any(|v| v == view), "{view} not in {views:?}");
    }
    let options = bash_completes(&["proctrace", "record", "--li"]);
    assert_eq!(options, ["--linger", "--live"]);
}

#[test]
fn man_pages_render_with_every_option() {
    if !have_tool("groff") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new(BIN)
        .args(["man", "--dir"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(made.success());
    let page = render_page(&dir.path().join("proctrace-record.1"));
    for shown in [
        "proctrace record",
        "--linger",
        "--timeout",
        "--hang-after",
        "--live",
    ] {
        assert!(page.contains(shown), "{shown} not in:\n{page}");
    }
    let page = render_page(&dir.path().join("proctrace.1"));
    for sub in ["record", "render", "ingest", "diff", "view", "export"] {
        assert!(page.contains(sub), "{sub} not in:\n{page}");
    }
    let page = render_page(&dir.path().join("proctrace-export-otlp.1"));
    for shown in [
        "proctrace-export-otlp",
        "--endpoint",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        assert!(page.contains(shown), "{shown} not in:\n{page}");
    }
}

/// A man page as groff typesets it for a terminal, without its hyphens.
fn render_page(page: &Path) -> String {
    let output = Command::new("groff")
        .args(["-man", "-Tutf8", "-rHY=0"])
        .arg(page)
        .env("GROFF_NO_SGR", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    // Typewriter bold is overstriking: keep one of each pair.
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\u{8}') {
            chars.next();
            continue;
        }
        plain.push(c);
    }
    plain.replace(['\u{2010}', '\u{2212}'], "-")
}

#[test]
fn make_install_and_uninstall_under_destdir() {
    if !have_tool("make") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let make = |target: &str| {
        let status = Command::new("make")
            .args([
                "-s",
                "-C",
                env!("CARGO_MANIFEST_DIR"),
                target,
                "PREFIX=/usr",
            ])
            .arg(format!("DESTDIR={}", root.path().display()))
            .arg(format!("BIN={BIN}"))
            .status()
            .unwrap();
        assert!(status.success(), "make {target}");
    };
    let installed = [
        "usr/bin/proctrace",
        "usr/share/man/man1/proctrace.1",
        "usr/share/man/man1/proctrace-record.1",
        "usr/share/man/man1/proctrace-view.1",
        "usr/share/bash-completion/completions/proctrace",
        "usr/share/zsh/site-functions/_proctrace",
        "usr/share/fish/vendor_completions.d/proctrace.fish",
    ];
    make("install");
    for file in installed {
        assert!(root.path().join(file).is_file(), "{file} not installed");
    }
    let version = Command::new(root.path().join("usr/bin/proctrace"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8(version.stdout)
        .unwrap()
        .starts_with("proctrace "));
    make("uninstall");
    for file in installed {
        assert!(!root.path().join(file).exists(), "{file} left behind");
    }
}

/// `--version` names what a release tarball's binary was built from: the
/// commit this checkout is at, the architecture and the features.
#[test]
fn version_says_commit_arch_and_features() {
    let output = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8(output.stdout).unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let commit = String::from_utf8(head.stdout).unwrap();
    let expected = format!(
        "proctrace {} (commit {}",
        env!("CARGO_PKG_VERSION"),
        commit.trim()
    );
    assert!(
        version.starts_with(&expected),
        "{version:?}, not {expected}"
    );
    let arch = format!(", {}, features: cli ", std::env::consts::ARCH);
    assert!(version.contains(&arch), "{version:?} lacks {arch:?}");
}
