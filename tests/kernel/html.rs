//! The HTML report in a real browser: Debian's chromium, headless, opens
//! reports made from a real recording and from a synthetic run of 10,000
//! processes. The page writes what it did into a hidden `#status` element
//! (rows drawn, matches, JavaScript errors caught from the moment it
//! starts), which `--dump-dom` hands back.
//!
//! Without chromium the tests are skipped with a note; under CI (the CI
//! variable set) they fail instead. The real recording needs root: see
//! `crate::common::require_root`.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use proctrace::event::Pid;

use crate::common::browser::{chromium, have_chromium, screenshot, screenshot_at, screenshot_path};
use crate::common::{big_recording, matching, process_count, record_demo, render, Synthetic};

/// What the page reported in `#status`.
#[derive(Debug)]
pub(crate) struct Status {
    pub attributes: HashMap<String, String>,
    text: String,
    /// The whole page as the browser left it.
    pub dom: String,
}

impl Status {
    fn number(&self, name: &str) -> usize {
        let value = self
            .attributes
            .get(name)
            .unwrap_or_else(|| panic!("#status has no {name}: {self:?}"));
        value.parse().unwrap()
    }
}

/// Loads `page` and reads its status; asserts it started without errors.
pub(crate) fn load(page: &Path, fragment: &str) -> Status {
    let dom = chromium(page, fragment, &["--dump-dom"]);
    let start = dom
        .find(r#"<div id="status""#)
        .expect("the page has no #status");
    let tag_end = start + dom[start..].find('>').unwrap();
    let text_end = tag_end + dom[tag_end..].find("</div>").unwrap();
    let attributes = dom[start..tag_end]
        .split(" data-")
        .skip(1)
        .filter_map(|attr| {
            let (name, value) = attr.split_once("=\"")?;
            Some((name.to_string(), value.trim_end_matches('"').to_string()))
        })
        .collect();
    let status = Status {
        attributes,
        text: dom[tag_end + 1..text_end].to_string(),
        dom: dom.clone(),
    };
    assert!(
        !status.dom.contains("data-pwned"),
        "text from the recording ran as script"
    );
    assert_eq!(
        status.attributes.get("ready").map(String::as_str),
        Some("1")
    );
    assert_eq!(status.number("errors"), 0, "errors: {}", status.text);
    status
}

#[test]
fn report_of_a_real_recording_draws_every_process() {
    let dir = tempfile::tempdir().unwrap();
    if !have_chromium() {
        return;
    }
    let recording = record_demo(dir.path());
    let page = dir.path().join("report.html");
    render(&recording, "html", &page);
    let processes = process_count(&recording);
    assert!(
        processes >= 9,
        "the demo recorded only {processes} processes"
    );

    let status = load(&page, "");
    assert_eq!(status.number("processes"), processes);
    assert_eq!(status.number("rows"), processes);
    // The demo fits the window: every row is on screen.
    assert_eq!(status.number("rows-drawn"), processes);

    let sleeps = matching(&recording, "sleep");
    assert!(sleeps >= 2);
    let status = load(&page, "#search=sleep");
    assert_eq!(status.number("matches"), sleeps);
    // Matches and their ancestors, for context: fewer than all.
    let rows = status.number("rows");
    assert!(rows >= sleeps && rows < processes, "{rows} rows");
    assert_eq!(status.number("rows-drawn"), rows);

    // The details of the failing step: its ids, status and whole argv.
    let failed = crate::common::first_failed(&recording).expect("the demo has a failing step");
    let status = load(&page, &format!("#select={failed}"));
    let details = &status.dom[status.dom.find(r#"<aside id="details""#).unwrap()..];
    assert!(
        details.starts_with(r#"<aside id="details">"#),
        "details hidden"
    );
    for shown in [
        format!("<dd>{failed}</dd>"),
        "<dt>pgid</dt>".to_string(),
        "<dd class=\"failed\">exit 3</dd>".to_string(),
        "<li>sh</li><li>-c</li><li>exit 3</li>".to_string(),
    ] {
        assert!(details.contains(&shown), "the details lack {shown}");
    }

    screenshot(&page, &screenshot_path("demo-report.png"));
}

#[test]
fn report_of_ten_thousand_processes_draws_only_what_is_on_screen() {
    if !have_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("big.ndjson");
    big_recording(&recording, 10_000);
    let page = dir.path().join("report.html");
    render(&recording, "html", &page);

    let started = Instant::now();
    let status = load(&page, "");
    eprintln!("10,000 processes: loaded in {:?}", started.elapsed());
    assert_eq!(status.number("processes"), 10_000);
    assert_eq!(status.number("rows"), 10_000);
    let drawn = status.number("rows-drawn");
    assert!(drawn > 10 && drawn < 100, "{drawn} rows drawn");

    let status = load(&page, "#search=is:failed");
    let failed = crate::common::failed_count(&recording);
    assert!(failed > 50, "only {failed} failed");
    assert_eq!(status.number("matches"), failed);
    let status = load(&page, "#search=job42%2F");
    assert_eq!(status.number("matches"), 8);
    screenshot(&page, &screenshot_path("big-report.png"));
}

#[test]
fn argv_cannot_inject_markup_or_script() {
    if !have_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("evil.ndjson");
    let evil = "</script><script>document.body.dataset.pwned=1</script>";
    let mut rec = Synthetic::new(100, &["sh", evil]);
    rec.exec(100, 1, 100, &["sh", evil], 0);
    rec.fork(100, 101, 100, 1_000);
    rec.exec(
        101,
        100,
        100,
        &["echo", "<!--", "<script>", "<img src=x onerror=alert(1)>"],
        1_000,
    );
    rec.exit(101, 100, 100, 0, 1_000);
    rec.exit(100, 1, 100, 1, 1_000);
    rec.write(&recording);
    let page = dir.path().join("report.html");
    render(&recording, "html", &page);

    let html = fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("pwned=1</script>"),
        "argv is in the page raw"
    );
    let status = load(&page, "");
    assert_eq!(status.number("rows"), 2);
    // The text is all there, as text: the filter finds it.
    let status = load(&page, "#search=%3C%2Fscript%3E%3Cscript%3E");
    assert_eq!(status.number("matches"), 1);
    let status = load(&page, "#search=onerror");
    assert_eq!(status.number("matches"), 1);
}

#[test]
fn reports_of_the_fixtures_open() {
    if !have_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // demo: failures and a kill; legacy: no header, the original format;
    // interrupted: no trailer, cut short with its processes cut off;
    // leak: two lingering processes, one killed, one still running.
    for fixture in ["demo", "legacy", "interrupted", "leak"] {
        let input = crate::common::repo().join(format!("tests/data/{fixture}.ndjson"));
        let page = dir.path().join(format!("{fixture}.html"));
        render(&input, "html", &page);
        let status = load(&page, "");
        assert_eq!(
            status.number("processes"),
            process_count(&input),
            "{fixture}"
        );
        assert_eq!(
            status.number("rows-drawn"),
            process_count(&input),
            "{fixture}"
        );
        let status = load(&page, "#search=is:failed");
        assert_eq!(
            status.number("matches"),
            crate::common::failed_count(&input),
            "{fixture}"
        );
        let status = load(&page, "#search=is:lingering");
        let lingering = if fixture == "leak" { 2 } else { 0 };
        assert_eq!(status.number("matches"), lingering, "{fixture}");
        if lingering > 0 {
            assert!(status.dom.contains("Lingering"), "no Lingering fact");
        }
        screenshot(&page, &screenshot_path(&format!("{fixture}-report.png")));
    }
}

/// A tree of known shape and cost (two `usage` burning CPU side by side,
/// then `head | sha256sum`): each process's CPU and RSS in its details,
/// the heaviest children first, the critical path marked, and the load
/// strip's peak of processes alive.
#[test]
fn report_shows_what_processes_used_and_the_critical_path() {
    if !have_chromium() {
        return;
    }
    let run = crate::flamegraph::record_cpu_tree();
    let page = run.dir.path().join("report.html");
    render(&run.dir.path().join("rec.ndjson"), "html", &page);
    let root = run.root();
    let children = run.children(root);
    assert_eq!(children.len(), 4, "{}", run.text);
    let cpu = |pid| run.exit(pid).resources.unwrap().cpu_ns;

    let status = load(&page, &format!("#select={root}"));
    let details = &status.dom[status.dom.find(r#"<aside id="details""#).unwrap()..];
    for shown in [
        "<dt>CPU</dt>",
        "<dt>peak RSS</dt>",
        "<dt>critical path</dt>",
    ] {
        assert!(details.contains(shown), "the details lack {shown}");
    }
    // The root, the `usage` that ended last (the root waited for it
    // before the pipe), then the end of the pipe: what the root waited for.
    let ended_last = |pids: &[Pid]| {
        *pids
            .iter()
            .max_by_key(|&&pid| run.exit(pid).timestamp)
            .unwrap()
    };
    let last = ended_last(&children);
    let usage: Vec<Pid> = children[..2].to_vec();
    let usage = ended_last(&usage);
    assert!(run.children(last).is_empty());
    let status = load(&page, "#search=is:critical");
    assert_eq!(status.number("critical"), 3);
    assert_eq!(status.attributes["order"], format!("{root},{usage},{last}"));
    // sh, both usage, then head and sha256sum: three at once at most.
    assert_eq!(status.number("peak-alive"), 3);
    // Two `usage` of two busy threads each on the CPUs there are: the
    // estimate reaches the CPU count and stops there.
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let cpus = run.header().cpus.expect("the header counts the CPUs");
    assert_eq!(i64::from(cpus), online);
    let busy: f64 = status.attributes["peak-busy"].parse().unwrap();
    assert!(busy > 0.0 && busy <= f64::from(cpus), "{busy} of {cpus}");

    let mut heaviest = children.clone();
    heaviest.sort_by_key(|&pid| std::cmp::Reverse(cpu(pid)));
    let expected: Vec<String> = std::iter::once(root)
        .chain(heaviest)
        .map(|pid| pid.to_string())
        .collect();
    let status = load(&page, "#sort=heaviest");
    assert_eq!(status.attributes["sort"], "heaviest");
    assert_eq!(status.attributes["order"], expected.join(","));
    screenshot(&page, &screenshot_path("resources-report.png"));
}

/// The CPU profile of `hot` (main -> work -> spin_a, spin_b, in the root
/// and two children): each process's flame graph in its details, the
/// whole run's in the CPU view, every function's name drawn in full where
/// its frame has room.
#[test]
fn report_draws_flame_graphs_of_the_cpu_profile() {
    if !have_chromium() {
        return;
    }
    let run = crate::cpu_profile::record_hot();
    let page = run.dir.path().join("report.html");
    render(&run.dir.path().join("rec.ndjson"), "html", &page);
    // The labels a flame graph drew whole, as the page reports them.
    let drawn = |status: &Status, graph: &str| -> Vec<String> {
        let labels = &status.attributes[&format!("flame-{graph}")];
        labels.split('|').map(str::to_owned).collect()
    };
    let has = |labels: &[String], function: &str| {
        labels
            .iter()
            .any(|l| l == function || l.starts_with(&format!("{function}.")))
    };

    let root = run.root();
    let status = load(&page, &format!("#select={root}"));
    assert!(status.number("cpu-stacks") > 0);
    let labels = drawn(&status, "process");
    assert_eq!(labels[0], format!("{root} hot"), "{labels:?}");
    for function in ["main", "work", "spin_a", "spin_b"] {
        assert!(has(&labels, function), "{function} not drawn: {labels:?}");
    }
    let details = &status.dom[status.dom.find(r#"<aside id="details""#).unwrap()..];
    assert!(
        details.contains("<h3>CPU profile</h3>"),
        "no profile in the details"
    );
    // A child is sampled too, in the same functions.
    let child = run.forks()[0].child_pid;
    let status = load(&page, &format!("#select={child}"));
    assert!(has(&drawn(&status, "process"), "spin_a"));

    let status = load(&page, "#cpu");
    assert_eq!(status.attributes["page"], "cpu");
    let labels = drawn(&status, "run");
    assert_eq!(labels[..2], ["all", "hot"], "{labels:?}");
    for function in ["main", "work", "spin_a"] {
        assert!(has(&labels, function), "{function} not drawn: {labels:?}");
    }
    screenshot_at(
        &page,
        &format!("#select={root}"),
        &screenshot_path("cpu-process-report.png"),
    );
    screenshot_at(&page, "#cpu", &screenshot_path("cpu-report.png"));
}

/// The waits of a real `record --off-cpu` recording in the page: their
/// tab, the whole run's flame graph with the reasons as its leaves, and
/// each program's wall time split; the CPU's tab is not there.
#[test]
fn report_draws_the_waits_and_their_split() {
    if !have_chromium() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = crate::common::repo().join("tests/fuzz-corpus/offcpu.ndjson");
    let page = dir.path().join("waits.html");
    render(&input, "html", &page);
    let status = load(&page, "#waits");
    assert_eq!(status.attributes["page"], "waits");
    let labels: Vec<&str> = status.attributes["flame-run"].split('|').collect();
    assert_eq!(labels[0], "all", "{labels:?}");
    for reason in ["[pipe]", "[lock]", "[child]", "[runnable]"] {
        assert!(labels.contains(&reason), "{reason} not drawn: {labels:?}");
    }
    // Three programs: sh, `waits` (three runs) and their forks.
    assert_eq!(status.number("waits-split"), 3);
    assert!(status.dom.contains("<th>program</th>"), "no split table");
    let cpu_tab = &status.dom[status.dom.find(r#"<button id="tab-cpu""#).unwrap()..];
    let cpu_tab = &cpu_tab[..cpu_tab.find('>').unwrap()];
    assert!(cpu_tab.contains("hidden"), "a CPU tab without a profile");
    screenshot_at(&page, "#waits", &screenshot_path("waits-report.png"));
}
