//! Fuzzing the reading side: mutated recordings go through the reader,
//! every render mode and ingest. None may panic, the terminal views must
//! stay free of control characters, the JSON ones JSON, and memory must
//! stay within a fixed multiple of the input's size.
//!
//! The corpus is real: the recordings in tests/data (legacy bpftrace ones
//! included) and tests/fuzz-corpus. Each input is a window of one of them
//! with one to four mutations: byte flips, truncations, lines duplicated,
//! dropped, swapped or spliced in from another file, and JSON values
//! replaced (huge and negative numbers, long and hostile strings, wrong
//! types, deep nesting) or keys renamed.
//!
//! `cargo test` runs a short pass. For a long one, optimized but still
//! catching arithmetic overflow:
//! `PROCTRACE_FUZZ_CASES=2000000 CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
//! cargo test --release --test fuzz -- --nocapture`; `PROCTRACE_FUZZ_SEED=N`
//! picks another seed. A failing input is saved
//! in the target's tmp dir, and the message says how to replay it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::ValueEnum;
use serde_json::{json, Value};

use crate::common::{assert_markdown, terminal_unsafe};
use proctrace::event::Record;
use proctrace::recording::ingest;
use proctrace::recording::{Keep, Reader, Recording};
use proctrace::render::{self, Mode, Options, Weight};

/// Cases in the pass `cargo test` runs.
const SHORT_PASS: u64 = 2_000;

/// Memory a case may use: this many bytes per input byte, plus a floor.
/// What the reader keeps is a few hundred bytes per event at worst, and
/// each view adds as much again; a quadratic or runaway allocation shows
/// up far above this.
const BYTES_PER_INPUT_BYTE: usize = 400;
const MEMORY_FLOOR: usize = 8 << 20;

#[test]
fn mutated_recordings_neither_panic_nor_grow_memory() {
    let cases = env_number("PROCTRACE_FUZZ_CASES").unwrap_or(SHORT_PASS);
    let seed = env_number("PROCTRACE_FUZZ_SEED").unwrap_or(0x5EED);
    let mut fuzzer = Fuzzer::new(seed);
    let started = Instant::now();
    let (mut readable, mut worst, mut largest) = (0u64, 0f64, 0usize);
    for case in 0..cases {
        let input = fuzzer.input();
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| measured(&input)));
        let (read, used) = outcome.unwrap_or_else(|_| fail(seed, case, &input, "panicked"));
        readable += u64::from(read);
        largest = largest.max(used);
        if input.len() >= 4096 {
            worst = worst.max(used as f64 / input.len() as f64);
        }
        if used > BYTES_PER_INPUT_BYTE * input.len() + MEMORY_FLOOR {
            fail(seed, case, &input, &format!("used {used} bytes of memory"));
        }
    }
    println!(
        "fuzz: {cases} inputs (seed {seed}), {readable} read as recordings, in {:.1?}; \
         peak memory {} KiB at most, {worst:.0} bytes per byte of input at most (of 4 KiB and more)",
        started.elapsed(),
        largest >> 10
    );
    assert!(
        readable > cases / 10,
        "the mutations leave too little readable"
    );
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: not a number")),
    )
}

/// Saves the input that failed and stops with how to replay it.
fn fail(seed: u64, case: u64, input: &[u8], what: &str) -> ! {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{seed}-{case}.ndjson"));
    std::fs::write(&path, input).unwrap();
    panic!(
        "fuzz case {case} {what}; input saved to {}; replay with \
         proctrace render -i FILE -d MODE, or PROCTRACE_FUZZ_SEED={seed} PROCTRACE_FUZZ_CASES={}",
        path.display(),
        case + 1
    );
}

/// Runs [`exercise`] on `input`; returns whether it read as a recording
/// and the most memory it had allocated at once beyond what it started with.
fn measured(input: &[u8]) -> (bool, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let read = exercise(input);
    (read, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Everything the library does with a recording it is given: read it,
/// render it in every mode, ingest it. Returns whether it read.
fn exercise(input: &[u8]) -> bool {
    let recording = Recording::read(
        &mut Reader::new(std::io::Cursor::new(input), "fuzz"),
        Keep::Events,
    );
    if let Ok(recording) = &recording {
        for &mode in Mode::value_variants() {
            let options = Options {
                color: false,
                width: Some(100),
                weight: Weight::Wall,
                trace_parent: None,
            };
            let mut out = Checked::new(mode);
            match render::render(mode, recording, options, &mut out) {
                // A view of nothing is refused, by the one rule of views.
                Err(e) if mode.missing(recording, options).is_some() => {
                    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
                }
                rendered => {
                    rendered.expect("rendering to memory");
                    out.finish();
                }
            }
        }
    }
    let root = recording
        .as_ref()
        .ok()
        .and_then(|r| r.processes.all().next())
        .map_or(1, |p| p.pid);
    let mut ingested = Vec::new();
    if ingest::ingest(&mut Reader::new(input, "fuzz"), root, &mut ingested).is_ok() {
        let lines = String::from_utf8(ingested).expect("ingest writes UTF-8");
        assert!(lines
            .lines()
            .all(|l| serde_json::from_str::<Record>(l).is_ok()));
    }
    recording.is_ok()
}

/// Where a view is rendered to: terminal views are checked as they are
/// written (they can be large), the others kept and checked at the end.
struct Checked {
    mode: Mode,
    /// Terminal views: the start of a character cut off between writes.
    /// Other views: all their output.
    bytes: Vec<u8>,
}

impl Checked {
    fn new(mode: Mode) -> Self {
        Checked {
            mode,
            bytes: Vec::new(),
        }
    }

    fn terminal(&self) -> bool {
        !self.mode.is_binary()
            && !matches!(
                self.mode,
                Mode::Html
                    | Mode::Perfetto
                    | Mode::Mermaid
                    | Mode::Flamegraph
                    | Mode::CpuFlamegraph
                    | Mode::Markdown
                    | Mode::Otlp
            )
    }

    fn finish(self) {
        let mode = self.mode;
        match mode {
            Mode::Perfetto => {
                serde_json::from_slice::<serde::de::IgnoredAny>(&self.bytes)
                    .unwrap_or_else(|e| panic!("perfetto output is not JSON: {e}"));
            }
            Mode::Html => {
                let page = String::from_utf8(self.bytes).expect("html is UTF-8");
                let template = include_str!("../../src/render/report.html");
                let count = |text: &str| text.matches("</script").count();
                assert_eq!(count(&page), count(template), "html: </script injected");
            }
            Mode::Flamegraph | Mode::CpuFlamegraph => {
                let svg = String::from_utf8(self.bytes).expect("the SVG is UTF-8");
                assert_eq!(svg.matches("<script").count(), 1, "svg: script injected");
                assert!(svg.ends_with("</svg>"), "svg: not whole");
            }
            Mode::Mermaid => {
                let chart = String::from_utf8(self.bytes).expect("mermaid is UTF-8");
                assert!(!chart.contains(['`', '\r']), "mermaid: unescaped text");
            }
            Mode::Markdown => assert_markdown(&String::from_utf8(self.bytes).unwrap()),
            #[cfg(feature = "pprof")]
            Mode::Pprof => {
                let mut profile = Vec::new();
                let mut gzip = flate2::read::GzDecoder::new(&self.bytes[..]);
                std::io::Read::read_to_end(&mut gzip, &mut profile)
                    .unwrap_or_else(|e| panic!("pprof: not gzip: {e}"));
                // The string table's first entry, "", is always there.
                assert!(!profile.is_empty(), "pprof: an empty profile");
            }
            Mode::Otlp => {
                let lines = String::from_utf8(self.bytes).expect("otlp is UTF-8");
                for line in lines.lines() {
                    assert!(!line.contains(terminal_unsafe), "otlp: {line:?}");
                    serde_json::from_str::<serde::de::IgnoredAny>(line)
                        .unwrap_or_else(|e| panic!("otlp: a line is not JSON: {e}"));
                }
            }
            _ => assert!(self.bytes.is_empty(), "{mode:?}: ends mid-character"),
        }
    }
}

impl Write for Checked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        if !self.terminal() {
            return Ok(buf.len());
        }
        let whole = match std::str::from_utf8(&self.bytes) {
            Ok(text) => text.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => panic!("{:?}: output is not UTF-8: {e}", self.mode),
        };
        let text = std::str::from_utf8(&self.bytes[..whole]).unwrap();
        if let Some(c) = text.chars().find(|&c| terminal_unsafe(c)) {
            panic!("{:?}: wrote {c:?} to the terminal in {text:?}", self.mode);
        }
        self.bytes.drain(..whole);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Makes inputs from the corpus.
struct Fuzzer {
    rng: fastrand::Rng,
    /// Each corpus file as its lines.
    corpus: Vec<Vec<Vec<u8>>>,
}

/// Stands for deep nesting, which a `Value` cannot hold: it is put in as
/// text after serializing.
const DEEP: &str = "\u{1}deep\u{1}";

/// Names a mutated line may take for a key.
const KEYS: [&str; 32] = [
    "Header",
    "Fork",
    "Exec",
    "Exit",
    "SetSID",
    "SetPGID",
    "Lingering",
    "Trailer",
    "ExecArgs",
    "ExecFilename",
    "ExecFull",
    "BadExec",
    "seq",
    "timestamp",
    "pid",
    "ppid",
    "pgid",
    "sid",
    "child_pid",
    "parent_pid",
    "argv",
    "argv_raw",
    "filename_raw",
    "cmdline",
    "fds",
    "fd",
    "exit_code",
    "signal",
    "root_pid",
    "end_timestamp",
    "0",
    "18446744073709551616",
];

impl Fuzzer {
    fn new(seed: u64) -> Self {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut corpus = Vec::new();
        for dir in ["tests/data", "tests/fuzz-corpus"] {
            let mut files: Vec<_> = std::fs::read_dir(repo.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read(file).unwrap();
                corpus.push(text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect());
            }
        }
        assert!(corpus.len() >= 8, "the fuzz corpus is missing");
        Fuzzer {
            rng: fastrand::Rng::with_seed(seed),
            corpus,
        }
    }

    /// A window of a corpus file, mutated.
    fn input(&mut self) -> Vec<u8> {
        let file = &self.corpus[self.rng.usize(..self.corpus.len())];
        let start = self.rng.usize(..file.len());
        let end = if self.rng.bool() {
            file.len()
        } else {
            self.rng.usize(start..=file.len())
        };
        let mut lines = file[start.min(end.saturating_sub(1))..end].to_vec();
        for _ in 0..self.rng.usize(1..=4) {
            self.mutate(&mut lines);
        }
        let mut input = lines.join(&b'\n');
        if self.rng.u8(..8) > 0 {
            input.push(b'\n');
        }
        input
    }

    fn mutate(&mut self, lines: &mut Vec<Vec<u8>>) {
        if lines.is_empty() {
            lines.push(self.any_line());
        }
        let i = self.rng.usize(..lines.len());
        let rng = &mut self.rng;
        match rng.u8(..10) {
            0 if !lines[i].is_empty() => {
                let at = rng.usize(..lines[i].len());
                lines[i][at] = if rng.bool() {
                    rng.u8(..)
                } else {
                    lines[i][at] ^ (1 << rng.u8(..8))
                };
            }
            1 => {
                let at = rng.usize(..=lines[i].len());
                lines[i].truncate(at);
            }
            2 => {
                let copies = if rng.u8(..16) == 0 {
                    200
                } else {
                    rng.usize(1..=3)
                };
                let line = lines[i].clone();
                lines.splice(i..i, std::iter::repeat_n(line, copies));
            }
            3 => {
                lines.remove(i);
            }
            4 => {
                let j = rng.usize(..lines.len());
                lines.swap(i, j);
            }
            5 => {
                let line = self.any_line();
                lines.insert(self.rng.usize(..=lines.len()), line);
            }
            _ => {
                if let Some(line) = self.substitute(&lines[i]) {
                    lines[i] = line;
                }
            }
        }
    }

    fn any_line(&mut self) -> Vec<u8> {
        let file = &self.corpus[self.rng.usize(..self.corpus.len())];
        file[self.rng.usize(..file.len())].clone()
    }

    /// The line with one JSON value replaced, or one key renamed or added.
    fn substitute(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        let mut value: Value = serde_json::from_slice(line).ok()?;
        let mut n = self.rng.usize(..count(&value));
        let node = nth(&mut value, &mut n)?;
        match (self.rng.u8(..4), node) {
            (0, Value::Object(map)) if !map.is_empty() => {
                let old = map.keys().nth(self.rng.usize(..map.len()))?.clone();
                let moved = map.remove(&old)?;
                map.insert(self.key(), moved);
            }
            (1, Value::Object(map)) => {
                let (key, new) = (self.key(), self.hostile_value());
                map.insert(key, new);
            }
            (_, node) => *node = self.hostile_value(),
        }
        let text = serde_json::to_string(&value).ok()?;
        let depth = self.rng.usize(1..300);
        let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        Some(
            text.replace(&serde_json::to_string(DEEP).ok()?, &deep)
                .into_bytes(),
        )
    }

    fn key(&mut self) -> String {
        KEYS[self.rng.usize(..KEYS.len())].to_string()
    }

    fn hostile_value(&mut self) -> Value {
        let rng = &mut self.rng;
        match rng.u8(..24) {
            0 => json!(u64::MAX),
            1 => json!(i64::MIN),
            2 => json!(-1),
            3 => json!(0),
            4 => json!(1e308),
            5 => json!(-0.5),
            6 => json!(i64::from(i32::MAX) + 1),
            7 => json!(i32::MIN),
            8 => json!(rng.u64(..)),
            9 => json!(rng.i32(..)),
            10 => json!(""),
            11 => json!("x".repeat(rng.usize(1..20_000))),
            12 => json!("\u{1b}[2J\u{1b}]0;t\u{7}\r\n\u{9b}\u{202e}</script><!--`:#;%%\u{fffd}"),
            13 => json!(["zz", "f", "ff00", "A0"][rng.usize(..4)]),
            14 => json!({"0": "ff", "1000000": "00", "x": 1}),
            15 => Value::Null,
            16 => json!(rng.bool()),
            17 => json!([]),
            18 => json!({}),
            19 => json!([1, "a", null, {"fd": 3}]),
            20 => json!(["sh", "-c", "\u{0}\n\t"]),
            21 => json!({"fd": -1, "kind": "pipe", "target": "\u{1b}x", "dev": u64::MAX, "ino": 0}),
            _ => json!(DEEP),
        }
    }
}

/// How many values `value` holds, itself included.
fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

/// The `n`th value of `value` in preorder.
fn nth<'v>(value: &'v mut Value, n: &mut usize) -> Option<&'v mut Value> {
    if *n == 0 {
        return Some(value);
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|v| nth(v, n)),
        Value::Object(map) => map.values_mut().find_map(|v| nth(v, n)),
        _ => None,
    }
}

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes allocated and their peak.
struct Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

impl Counting {
    fn grew(by: usize) {
        let now = CURRENT.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call goes to the system allocator unchanged; only sizes
// are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            Counting::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            Counting::grew(new_size);
        }
        new
    }
}
