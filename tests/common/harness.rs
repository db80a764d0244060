//! Finding and running what the tests need: the proctrace binary (and
//! root, for what records), the tools a test runs, the C workloads built
//! once per test binary, and waits bounded so that a hang fails a test
//! rather than blocking the suite.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use proctrace::event::Pid;

use super::*;

/// Upper bound for anything to finish; only there so that a hang fails the
/// test instead of blocking the suite. Never a timing assertion.
pub const HANG_TIMEOUT: Duration = Duration::from_secs(60);

pub fn proctrace_bin() -> &'static str {
    env!("CARGO_BIN_EXE_proctrace")
}

/// [`proctrace_bin`] for a run that records (`record`, `record --pid`):
/// one that loads the BPF program, so root is checked first
/// ([`require_root`]).
pub fn recorder_bin() -> &'static str {
    require_root();
    proctrace_bin()
}

/// `Recorder::command(command)`: the library recording in this process,
/// which loads the BPF program, so root is checked first
/// ([`require_root`]).
pub fn recorder<I, S>(command: I) -> proctrace::recorder::Recorder
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    require_root();
    proctrace::recorder::Recorder::command(command)
}

/// Root (CAP_BPF), which every test of the kernel binary needs, asked for
/// once a process by the harness wherever a test acts as root: loads the
/// BPF program ([`recorder_bin`], [`recorder`], and so every [`record`]
/// and [`Live`]) or mounts ([`Tmpfs::mount`]). A test that needs none (a
/// refusal before loading, a render) runs as anyone. Without root the
/// first such call ends the whole binary with status 0 and one line on
/// stderr, since every other test of it would skip too, after killing
/// what the running tests started (none of them will end it now). Under
/// CI (the CI variable set and not empty) the test fails instead.
pub fn require_root() {
    static ROOT: OnceLock<bool> = OnceLock::new();
    if *ROOT.get_or_init(|| nix::unistd::geteuid().is_root()) {
        return;
    }
    assert!(
        !ci(),
        "the kernel tests need root (CAP_BPF) to load the BPF program, and CI is set: \
         refusing to skip (`make check` runs them through sudo)"
    );
    static SKIP: Once = Once::new();
    // The first caller exits; any other waits here until it has.
    SKIP.call_once(|| {
        for (pid, _) in descendants(std::process::id() as Pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // Past the test harness's capture of eprintln!.
        let _ = writeln!(
            std::io::stderr(),
            "kernel tests: skipped, they need root (CAP_BPF); `make check` runs them through sudo"
        );
        std::process::exit(0);
    });
}

/// Whether the running kernel is `want` (major, minor) or later.
pub fn kernel_at_least(want: (u32, u32)) -> bool {
    let uname = nix::sys::utsname::uname().unwrap();
    let release = uname.release().to_string_lossy().into_owned();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0)) >= want
}

/// Whether a program the test runs is on the PATH; see [`prerequisite`].
#[must_use]
pub fn have_tool(program: &str) -> bool {
    prerequisite(
        tool_path(program).is_some(),
        &format!("`{program}` on the PATH"),
    )
}

/// `pytest-3` on the tests of `file`, quietly, with node ids relative to
/// `rootdir` and no cache left behind.
pub fn pytest(rootdir: &Path, file: &Path) -> Vec<String> {
    let (rootdir, file) = (rootdir.to_str().unwrap(), file.to_str().unwrap());
    strings(&[
        "pytest-3",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        rootdir,
        file,
    ])
}

/// Runs `command` (a compiler, a build) to its end; panics with its
/// stderr if it fails.
pub fn build(command: &mut Command) {
    let built = command.output().expect("running a build");
    assert!(
        built.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
}

/// The file `program` names on the PATH, links resolved.
pub fn tool_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .and_then(|p| fs::canonicalize(p).ok())
}

/// Whether the CI variable is set and not empty.
fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The one policy for what a test needs from the machine besides root
/// ([`require_root`]): present, the test runs; missing, it fails under CI
/// and is skipped with a message otherwise. Each test asks for what it
/// needs up front, in one form: `if !have_tool("bats") { return; }`
/// (`have_chromium`, `have_collector`...). Tests never install anything:
/// `scripts/install-deps.sh --test` (run by `make test`) installs it all.
#[must_use]
pub fn prerequisite(present: bool, what: &str) -> bool {
    if present {
        return true;
    }
    assert!(
        !ci(),
        "this test needs {what}, and CI is set: refusing to skip \
         (scripts/install-deps.sh --test installs every test prerequisite)"
    );
    eprintln!("skipped: needs {what} (scripts/install-deps.sh --test installs it)");
    false
}

/// Path of the compiled C workload `tests/workloads/<name>.c`. All workloads
/// are compiled once per test binary (`cc -O1 -pthread`) into the target's
/// tmp dir; each binary is renamed into place, so concurrent runs are safe.
pub fn workload(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
        fs::create_dir_all(&out).unwrap();
        for entry in fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            // C and C++, i386 assembly for a 32-bit program that needs no
            // 32-bit libc, and Rust.
            let (compiler, flags): (&str, &[&str]) = match path.extension().and_then(OsStr::to_str)
            {
                Some("c") => ("cc", &["-O1", "-pthread", "-Wall"]),
                Some("cc") => ("c++", &["-O1", "-Wall"]),
                Some("S") => ("cc", &["-m32", "-nostdlib", "-static"]),
                Some("rs") => ("rustc", &["-O"]),
                _ => continue,
            };
            // A first line `// cflags: ...` replaces the flags.
            let source = fs::read_to_string(&path).unwrap_or_default();
            let own: Vec<&str> = source
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("// cflags:"))
                .map(|flags| flags.split_whitespace().collect())
                .unwrap_or_default();
            let flags = if own.is_empty() { flags } else { &own[..] };
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            let tmp = out.join(format!("{stem}.tmp{}", std::process::id()));
            build(
                Command::new(compiler)
                    .args(flags)
                    .arg("-o")
                    .arg(&tmp)
                    .arg(&path)
                    // Legacy Rust mangling, rustc's default before 1.9x, is
                    // asked for with -Z there.
                    .env("RUSTC_BOOTSTRAP", "1"),
            );
            fs::rename(&tmp, out.join(&stem)).unwrap();
        }
        out
    });
    let path = dir.join(name);
    assert!(path.exists(), "no workload tests/workloads/{name}.*");
    path
}

/// Waits for `child` up to [`HANG_TIMEOUT`]; kills it and panics on a hang.
pub fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    wait_within(child, what, HANG_TIMEOUT)
}

/// Waits for `child` up to `bound`; kills it and panics beyond.
pub fn wait_within(child: &mut Child, what: &str, bound: Duration) -> ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
