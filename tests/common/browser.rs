//! Debian's chromium, headless, as the tests' browser: it opens pages and
//! SVGs made from recordings, dumps their DOM, takes screenshots and keeps
//! what the page logged to its console.
//!
//! Without chromium the tests are skipped with a note; under CI (the CI
//! variable set) they fail instead.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const WINDOW: &str = "--window-size=1400,900";

/// Whether chromium is there (`crate::common::prerequisite`).
pub fn have_chromium() -> bool {
    crate::common::prerequisite(Path::new(CHROMIUM).exists(), CHROMIUM)
}

/// Runs headless chromium on `page` (with `#fragment`) and returns its stdout.
pub fn chromium(page: &Path, fragment: &str, extra: &[&str]) -> String {
    run(page, fragment, extra).0
}

/// Like [`chromium`] with `--dump-dom`: the DOM the page left, and the
/// messages it wrote to its console, `LEVEL: message`.
pub fn dom_and_console(page: &Path, fragment: &str) -> (String, Vec<String>) {
    let (dom, stderr) = run(
        page,
        fragment,
        &["--dump-dom", "--enable-logging=stderr", "--v=0"],
    );
    // [pid:tid:time:INFO:CONSOLE:line] "message", source: url (line)
    let console = stderr
        .lines()
        .filter_map(|line| {
            let (prefix, message) = line.split_once(":CONSOLE")?;
            let level = prefix.rsplit(':').next()?;
            Some(format!("{level}: {}", message.split_once("] ")?.1))
        })
        .collect();
    (dom, console)
}

/// Runs chromium; returns its stdout and stderr.
fn run(page: &Path, fragment: &str, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}{fragment}", page.display());
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            WINDOW,
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(&url)
        // Files, not pipes: a page's DOM is megabytes, more than a pipe
        // holds while nobody reads it.
        .stdout(fs::File::create(profile.path().join("stdout")).unwrap())
        .stderr(fs::File::create(profile.path().join("stderr")).unwrap())
        .spawn()
        .expect("starting chromium");
    // A browser that hangs must not hang the test suite.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("chromium did not finish within 120s on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let read = |name: &str| fs::read_to_string(profile.path().join(name)).unwrap();
    assert!(
        status.success(),
        "chromium failed on {url}: {}",
        read("stderr")
    );
    (read("stdout"), read("stderr"))
}

pub fn screenshot(page: &Path, png: &Path) {
    screenshot_at(page, "", png);
}

/// A screenshot of `page` opened at `#fragment`.
pub fn screenshot_at(page: &Path, fragment: &str, png: &Path) {
    let arg = format!("--screenshot={}", png.display());
    chromium(page, fragment, &[&arg]);
    let size = fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "the screenshot {} is empty", png.display());
}

/// Where screenshots go: the target directory, to look at after a run.
pub fn screenshot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}
