//! PROCTRACE_DEBUG: the recorder's narration (the library logs it through
//! the `log` facade) and libbpf's, on stderr, which is the command's
//! terminal too, so only when asked for. Each line is stamped with the
//! milliseconds since start and its thread, so that the start-up's
//! critical path reads off one run (BENCHMARKS.md).

use std::io::Write as _;
use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Starts the narration if PROCTRACE_DEBUG is set; else silences libbpf.
pub fn start() {
    if std::env::var_os("PROCTRACE_DEBUG").is_none() {
        libbpf_rs::set_print(None);
        return;
    }
    START.get_or_init(Instant::now);
    if log::set_logger(&Narration).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    // libbpf's lines end with their newline.
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, |_, line| say(&line))));
}

/// Writes `text` stamped.
fn say(text: &str) {
    let at = START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3;
    let thread = std::thread::current();
    let _ = write!(
        std::io::stderr(),
        "proctrace: +{at:.2} ms [{}] {text}",
        thread.name().unwrap_or("?")
    );
}

/// The library's narration: proctrace's own records only.
struct Narration;

impl log::Log for Narration {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("proctrace")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            say(&format!("{}\n", record.args()));
        }
    }

    fn flush(&self) {}
}
