//! The portability proof: one static proctrace binary per architecture
//! (x86_64 and aarch64) boots under qemu on every kernel of its matrix
//! (Debian's 5.10, 6.1, 6.12, the newest of trixie-backports, and on x86_64
//! the machine's own where /boot has it) and records a workload with a
//! known process tree exactly, with the ring buffer, the perf buffer, raw
//! tracepoints and an external BTF file, and setsid and setpgid through
//! each of the three syscall hooks (fexit by default wherever the kernel
//! attaches it: every x86_64 kernel here, arm64 from 6.4), a
//! 32-bit program's (i386 or AArch32) included.
//!
//! Booting is tooling, not a test: scripts/kernel-matrix/test.sh (`make
//! kernel-matrix`, part of `make test`) builds the static binary, boots each
//! kernel with scripts/kernel-matrix/run.sh and then runs the ignored test
//! here with PROCTRACE_KERNEL_MATRIX_LOGS naming the directory of guest
//! consoles. The checker's own test runs with the rest of the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use proctrace::event::{BufferKind, Pid, Record, SyscallHook};

/// Recordings the guest makes on each kernel, and the buffer each must use.
const MODES: &[(&str, BufferKind)] = &[
    ("ring", BufferKind::Ring),
    ("perf", BufferKind::Perf),
    ("raw-tp", BufferKind::Ring),
    ("btf-file", BufferKind::Ring),
    ("sys-exit", BufferKind::Ring),
    ("tracepoint", BufferKind::Ring),
];

/// The syscall hook a recording must have used on a kernel of `version`
/// (major, minor) for `arch` (`uname -m`); `None` where the recording must
/// fail.
fn expected_hook(mode: &str, version: (u32, u32), arch: &str) -> Option<SyscallHook> {
    // The classic tracepoints' program reads the saved registers with
    // bpf_task_pt_regs, of 5.15.
    let tracepoint = (version >= (5, 15)).then_some(SyscallHook::Tracepoint);
    // arm64 attaches fexit to a kernel function through ftrace's direct
    // calls, of 6.4 (Debian's 6.1 refuses the attach with ENOTSUPP).
    let fexit = (arch != "aarch64" || version >= (6, 4)).then_some(SyscallHook::Fexit);
    match mode {
        "ring" | "perf" => fexit.or(tracepoint).or(Some(SyscallHook::SysExit)),
        // Raw tracepoints stand in for a kernel without BTF, where fexit
        // cannot attach; the hidden /sys/kernel/btf rules out the typed
        // pointers of the tracepoints' program too.
        "raw-tp" => tracepoint.or(Some(SyscallHook::SysExit)),
        "tracepoint" => tracepoint,
        _ => Some(SyscallHook::SysExit),
    }
}

/// (major, minor) of a `uname -r`.
fn version(release: &str) -> (u32, u32) {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Checks the consoles scripts/kernel-matrix/run.sh left in the directory
/// PROCTRACE_KERNEL_MATRIX_LOGS: one `<kernel>.log` per kernel booted and
/// the `proctrace` binary each guest must have run.
#[test]
#[ignore = "run by scripts/kernel-matrix/test.sh after it boots the kernels"]
fn guests_record_exactly() {
    let dir = std::env::var_os("PROCTRACE_KERNEL_MATRIX_LOGS")
        .expect("PROCTRACE_KERNEL_MATRIX_LOGS names the consoles of scripts/kernel-matrix/run.sh");
    let dir = Path::new(&dir);
    let mut kernels: Vec<String> = std::fs::read_dir(dir)
        .expect("the directory of guest consoles")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".log").map(str::to_owned)
        })
        .collect();
    kernels.sort();
    assert!(!kernels.is_empty(), "no guest console in {}", dir.display());
    let digest = sha256(&dir.join("proctrace"));
    assert!(
        !digest.is_empty(),
        "run.sh left no binary in {}",
        dir.display()
    );

    let mut table = String::new();
    let mut failures = Vec::new();
    for kernel in &kernels {
        let log = std::fs::read_to_string(dir.join(format!("{kernel}.log")))
            .unwrap_or_default()
            .replace('\r', "");
        let release = marker(&log, "===KERNEL ").unwrap_or("?").to_owned();
        let arch = marker(&log, "===ARCH ").unwrap_or("?").to_owned();
        match marker(&log, "===SHA256 ") {
            Some(guest) if guest == digest => {}
            other => failures.push(format!(
                "{kernel}: the guest ran a binary with sha256 {other:?}, not {digest}"
            )),
        }
        let mut row = Vec::new();
        for (mode, buffer) in MODES {
            let hook = expected_hook(mode, version(&release), &arch);
            let result = check_recording(&log, mode, *buffer, hook);
            row.push(format!(
                "{mode}: {}",
                if result.is_ok() { "pass" } else { "FAIL" }
            ));
            if let Err(why) = result {
                failures.push(format!("{kernel} {mode}: {why}"));
            }
        }
        for (what, check) in RECORDINGS.iter().chain(&REFUSALS) {
            let result = check(&log);
            row.push(format!(
                "{what}: {}",
                if result.is_ok() { "pass" } else { "FAIL" }
            ));
            if let Err(why) = result {
                failures.push(format!("{kernel} {what}: {why}"));
            }
        }
        if !log.contains("===DONE===") {
            failures.push(format!(
                "{kernel}: the guest did not finish; its console:\n{log}"
            ));
        }
        writeln!(table, "{kernel} ({release}, {arch}): {}", row.join(", ")).unwrap();
    }
    eprintln!("kernel matrix, proctrace sha256 {digest}:\n{table}");
    assert!(
        failures.is_empty(),
        "kernel matrix failed (consoles in {}):\n{}",
        dir.display(),
        failures.join("\n")
    );
}

/// `recording`, where it took samples and lost none.
fn sampled(
    recording: proctrace::recording::Recording,
) -> Result<proctrace::recording::Recording, String> {
    let trailer = recording.trailer.as_ref().ok_or("no trailer")?;
    if trailer.samples == 0 || trailer.lost_samples != 0 {
        return Err(format!(
            "{} samples, {} lost",
            trailer.samples, trailer.lost_samples
        ));
    }
    Ok(recording)
}

/// The labels of stack `id`'s frames, the outermost caller first.
fn labels(profile: &proctrace::stacks::Profile, id: u32) -> Vec<String> {
    (profile.stack(id).iter())
        .map(|frame| frame.label())
        .collect()
}

/// The CPU profile of /hot (tests/workloads/hot.c, built without frame
/// pointers): samples taken and none lost, and the stacks of its hot
/// loop unwound through its call-frame information up to main.
fn check_profile(log: &str) -> Result<(), String> {
    let recording = sampled(guest_recording(log, "profile")?)?;
    let profile = &recording.profile;
    let reaches_main = profile.samples.iter().any(|samples| {
        let names = labels(profile, samples.stack);
        names
            .windows(3)
            .any(|w| w[0] == "main" && w[1] == "work" && w[2].starts_with("spin_a"))
    });
    if !reaches_main {
        return Err("no stack reaches main;work;spin_a".into());
    }
    Ok(())
}

/// The CPU profile of `/deep 100 100` (tests/workloads/deep.c): its
/// stacks of `spin` hold all 101 `descend` frames, ~27 KiB of stack, under
/// main in the main thread and under thread_main in the other (whose copy
/// ends at its thread pointer), and none is cut.
fn check_deep(log: &str) -> Result<(), String> {
    let profile = guest_recording(log, "deep")?.profile;
    let mut entries = std::collections::BTreeSet::new();
    for samples in &profile.samples {
        let names = labels(&profile, samples.stack);
        if !names.iter().any(|n| n.starts_with("spin")) {
            continue;
        }
        let first = names.iter().position(|n| n == "descend");
        let descends = names.iter().filter(|n| *n == "descend").count();
        match first {
            Some(at) if at > 0 && descends == 101 => entries.insert(names[at - 1].clone()),
            _ => return Err(format!("a stack of spin not whole: {names:?}")),
        };
    }
    let want = ["main", "thread_main"].map(String::from);
    if !want.iter().all(|entry| entries.contains(entry)) {
        return Err(format!(
            "whole stacks under {entries:?}, not main and thread_main"
        ));
    }
    Ok(())
}

/// CPython's frames: `pycosts.py tests 2` (tests/workloads/pycosts.py) in
/// the guest's Debian interpreter, bookworm's 3.11 on x86_64 (offsets from
/// a table), trixie's 3.13 on arm64 (the layout it describes), with only
/// its minimal library. Samples taken and none lost, every Python frame
/// named; each sample in heavy or light has the whole Python stack from
/// `<module>` and counts under the test the process named through libc's
/// setenv; heavy, three times light's work, has about three quarters of
/// their samples (wide bounds: the guest's clock is the emulator's).
fn check_python(log: &str) -> Result<(), String> {
    let recording = sampled(guest_recording(log, "python")?)?;
    let stderr = section(log, "===STDERR python===\n", "===ENDSTDERR python===").unwrap_or("");
    if stderr.contains("Python frames are unnamed") {
        return Err(format!("unnamed Python frames: {stderr}"));
    }
    let profile = &recording.profile;
    let mut tests: BTreeMap<(&str, Option<String>), u64> = BTreeMap::new();
    for samples in &profile.samples {
        let names = labels(profile, samples.stack);
        let at = |function: &str| {
            let frame = format!("{function} (pycosts.py:");
            names.iter().position(|n| n.starts_with(&frame))
        };
        let Some(work) = ["heavy", "light"].into_iter().find(|f| at(f).is_some()) else {
            continue;
        };
        let whole = [at("<module>"), at("main"), at("as_test"), at(work)];
        if !whole
            .windows(2)
            .all(|w| matches!(w, [Some(a), Some(b)] if a < b))
        {
            return Err(format!("a stack of {work} not whole: {names:?}"));
        }
        *tests.entry((work, samples.test.clone())).or_default() += samples.count;
    }
    let test = |work: &str| Some(format!("pycosts.py::test_{work}"));
    let (heavy, light) = (
        tests.get(&("heavy", test("heavy"))),
        tests.get(&("light", test("light"))),
    );
    let (Some(&heavy), Some(&light), 2) = (heavy, light, tests.len()) else {
        return Err(format!("samples by function and test: {tests:?}"));
    };
    let share = heavy as f64 * 100.0 / (heavy + light) as f64;
    if heavy + light < 40 || !(55.0..=92.0).contains(&share) {
        return Err(format!(
            "heavy {heavy} and light {light} samples, not three to one"
        ));
    }
    Ok(())
}

/// `--off-cpu` on `sh -c 'sleep 1; exit 0'`: the programs load and
/// attach on every kernel; the sleep is one long wait of about a second
/// (a late wakeup is counted as runnable after it) with its stack;
/// nothing lost. (Busybox's shell may
/// run the sleep applet itself, with no child to wait for.)
fn check_offcpu(log: &str) -> Result<(), String> {
    use proctrace::event::WaitReason;
    let recording = guest_recording(log, "offcpu")?;
    let trailer = recording.trailer.as_ref().ok_or("no trailer")?;
    if trailer.waits == 0 || trailer.lost_waits != 0 || trailer.lost_wait_stacks != 0 {
        return Err(format!(
            "{} waits, {} lost, {} lost their stacks",
            trailer.waits, trailer.lost_waits, trailer.lost_wait_stacks
        ));
    }
    let waits = &recording.profile.off_cpu;
    // Within 10% of the second: the guest's scheduler clock and its timer
    // are apart by a millisecond under emulation (999.16 ms, arm64 5.10).
    let long = |reason: WaitReason| {
        waits
            .iter()
            .any(|w| w.reason == reason && w.stack.is_some() && w.total_ns >= 900_000_000)
    };
    if !long(WaitReason::Sleep) || !long(WaitReason::Child) {
        return Err(format!(
            "no sleep and child waits of a second with stacks: {waits:?}"
        ));
    }
    Ok(())
}

/// The recordings of programs with known answers, each checked by its
/// own oracle.
const RECORDINGS: [(&str, Check); 9] = [
    ("profile", check_profile),
    ("deep", check_deep),
    ("python", check_python),
    ("offcpu", check_offcpu),
    ("probe", check_probe),
    ("usdt", check_usdt),
    ("kernel-probes", check_kernel_probes),
    ("kprobes", check_kprobes),
    ("fentry", check_fentry),
];

/// `--probe 'tracepoint:sched:sched_process_exec keep filename' --probe
/// 'tracepoint:syscalls:sys_exit_execve keep ret'` on `/hot 50 2 10`,
/// which is exec'd once and execs itself in its 2 children through
/// /proc/self/exe: 3 execs, by those names (a `__data_loc` text field),
/// each returning 0 (a number field), on every kernel (before 5.15 each
/// tracepoint through a copy of the program that knows its probe; tracefs
/// is not mounted in the guest).
fn check_kernel_probes(log: &str) -> Result<(), String> {
    let profile = guest_recording(log, "kernel-probes")?.profile;
    let told = told(&profile);
    let expected = vec![
        (0, vec!["\"/hot\"".to_owned()], 1),
        (0, vec!["\"/proc/self/exe\"".to_owned()], 1),
        (0, vec!["\"/proc/self/exe\"".to_owned()], 1),
        (1, vec!["0".to_owned()], 1),
        (1, vec!["0".to_owned()], 1),
        (1, vec!["0".to_owned()], 1),
    ];
    if told != expected {
        return Err(format!("values told: {told:?}"));
    }
    Ok(())
}

/// `--probe kprobe:security_bprm_check --probe 'kretprobe:security_bprm_check
/// keep retval'` on the 3 execs of `/hot 50 2 10`: 3 entries, each in a
/// stack that names the function, 3 returns of 0 and 3 calls timed, on every kernel
/// (before 5.15 each probe through a copy of the program).
fn check_kprobes(log: &str) -> Result<(), String> {
    check_exec_checks(
        &guest_recording(log, "kprobes")?.profile,
        "security_bprm_check",
    )
}

/// The same through BPF trampolines (`fentry:`, `fexit:`), from 5.17,
/// where they hand their programs the return value, and on arm64 from
/// 6.12 (Debian's 5.10 and 6.1 have no trampolines there: attaching one
/// says ENOTSUPP); refused elsewhere in a line that says why and what
/// reads the function instead.
fn check_fentry(log: &str) -> Result<(), String> {
    let release = marker(log, "===KERNEL ").unwrap_or("?");
    let arm = marker(log, "===ARCH ") == Some("aarch64");
    let v = version(release);
    let refused = v < (5, 17) || arm && v < (6, 12);
    let says = [
        "(bpf_get_func_arg, Linux 5.17): kprobe:",
        "cannot attach BPF trampolines (not supported): kprobe:",
    ];
    let clear = |why: &str| why.lines().count() == 1 && says.iter().any(|s| why.contains(s));
    match (refused, guest_recording(log, "fentry")) {
        (false, recorded) => check_exec_checks(&recorded?.profile, "bprm_execve"),
        (true, Err(why)) if clear(&why) => Ok(()),
        (true, Err(why)) => Err(format!("not the clear refusal: {why}")),
        (true, Ok(_)) => Err("recorded, where the kernel was to refuse".into()),
    }
}

/// Probe 0 at security_bprm_check's entry, each hit's stack through
/// `in_stack`, and probe 1 at its return, keeping the return value, over
/// the 3 execs of `/hot 50 2 10`. (A kprobe's stack starts in the
/// function; a trampoline's may skip it and start in its caller, as on
/// 7.3, while 5.10's kprobe stacks do not reach the caller.)
fn check_exec_checks(profile: &proctrace::stacks::Profile, in_stack: &str) -> Result<(), String> {
    let entries: Vec<_> = profile.probe_hits.iter().filter(|h| h.probe == 0).collect();
    let count: u64 = entries.iter().map(|h| h.count).sum();
    let in_function = entries.iter().all(|h| {
        h.stack.is_some_and(|s| {
            let frames = profile.stack(s);
            let named = |f: &&proctrace::event::Frame| f.function.as_deref() == Some(in_stack);
            frames.iter().any(named) && !frames.iter().any(|f| f.label().starts_with("bpf_prog_"))
        })
    });
    if count != 3 || !in_function {
        return Err(format!(
            "{count} entries, through {in_stack}: {in_function}"
        ));
    }
    let returns: Vec<(Vec<String>, u64)> = profile
        .probe_args
        .iter()
        .filter(|a| a.probe == 1)
        .map(|a| (a.args.iter().map(|v| v.to_string()).collect(), a.count))
        .collect();
    if returns != vec![(vec!["0".to_owned()], 1); 3] {
        return Err(format!("returns told: {returns:?}"));
    }
    // The entry and the return of one function time its calls.
    let timed: u64 = (profile.probe_latency.iter())
        .filter(|l| (l.probe, l.ret) == (0, 1))
        .map(|l| l.count)
        .sum();
    if timed != 3 {
        return Err(format!("{timed} calls timed"));
    }
    Ok(())
}

/// `--probe usdt:/probed:proctrace_test:round --probe
/// usdt:/probed:proctrace_test:named` on `/probed 5`: the round probe
/// once with each of (0, 5) to (4, 5), the named one once with
/// ("allocate", 5), on every kernel (before 5.15 libbpf finds each by
/// its address: /probed is static, at fixed addresses).
fn check_usdt(log: &str) -> Result<(), String> {
    let profile = guest_recording(log, "usdt")?.profile;
    let told = told(&profile);
    let mut expected: Vec<(u32, Vec<String>, u64)> = (0..5)
        .map(|i| (0, vec![i.to_string(), "5".into()], 1))
        .collect();
    expected.push((1, vec!["\"allocate\"".into(), "5".into()], 1));
    if told != expected {
        return Err(format!("arguments told: {told:?}"));
    }
    Ok(())
}

/// Each probe's values as told: (probe, values, count), sorted.
fn told(profile: &proctrace::stacks::Profile) -> Vec<(u32, Vec<String>, u64)> {
    let mut told: Vec<_> = (profile.probe_args.iter())
        .map(|a| {
            let values = a.args.iter().map(|v| v.to_string()).collect();
            (a.probe, values, a.count)
        })
        .collect();
    told.sort();
    told
}

/// The guest's recording `name`, which exited 0.
fn guest_recording(log: &str, name: &str) -> Result<proctrace::recording::Recording, String> {
    let status = marker(log, &format!("===STATUS {name} ")).ok_or("no status")?;
    let stderr_marker = format!("===STDERR {name}===\n");
    let stderr_end = format!("===ENDSTDERR {name}===");
    let stderr = section(log, &stderr_marker, &stderr_end).unwrap_or("");
    if status != "0" {
        return Err(format!("status {status}, stderr {stderr:?}"));
    }
    let (begin, end) = (format!("===BEGIN {name}===\n"), format!("===END {name}==="));
    let text = section(log, &begin, &end).ok_or("no recording")?;
    let mut reader = proctrace::recording::Reader::new(std::io::Cursor::new(text), name);
    proctrace::recording::Recording::read(&mut reader, proctrace::recording::Keep::Processes)
        .map_err(|e| e.to_string())
}

/// `--probe uprobe:/hot:work --probe uretprobe:/hot:work` on `/hot 50`,
/// which calls work() once: exactly one hit of each, the entry's stack
/// through main, and one call timed, on every kernel (before 5.15, with
/// no BPF cookies, each probe has a copy of the program of its own).
fn check_probe(log: &str) -> Result<(), String> {
    let profile = &guest_recording(log, "probe")?.profile;
    let hits: Vec<_> = profile.probe_hits.iter().filter(|h| h.probe == 0).collect();
    let [hit] = hits[..] else {
        return Err(format!("{} lines of the entry's hits, not one", hits.len()));
    };
    let returns: u64 = profile
        .probe_hits
        .iter()
        .filter(|h| h.probe == 1)
        .map(|h| h.count)
        .sum();
    let timed: Vec<_> = profile
        .probe_latency
        .iter()
        .map(|l| (l.probe, l.ret, l.count))
        .collect();
    if returns != 1 || timed != [(0, 1, 1)] {
        return Err(format!("{returns} returns, calls timed {timed:?}"));
    }
    let frames: Vec<String> = hit
        .stack
        .map(|s| profile.stack(s).iter().map(|f| f.label()).collect())
        .unwrap_or_default();
    if hit.count != 1 || !frames.ends_with(&["main".to_owned(), "work".to_owned()]) {
        return Err(format!("{} hits in {frames:?}", hit.count));
    }
    Ok(())
}

fn sha256(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The rest of the line after `prefix`, without the closing `===`.
fn marker<'a>(log: &'a str, prefix: &str) -> Option<&'a str> {
    // The firmware's escape sequences may precede a marker on its line.
    log.lines()
        .find_map(|line| line.find(prefix).map(|at| &line[at + prefix.len()..]))
        .map(|rest| rest.trim_end_matches("==="))
}

fn section<'a>(log: &'a str, begin: &str, end: &str) -> Option<&'a str> {
    let start = log.find(begin)? + begin.len();
    let len = log[start..].find(end)?;
    Some(&log[start..start + len])
}

/// A check of the console of one guest.
type Check = fn(&str) -> Result<(), String>;

/// The errors each guest is made to show, each checked.
const REFUSALS: [(&str, Check); 2] = [
    ("no-BTF error", check_no_btf),
    ("no-memory error", check_no_memory),
];

/// The exit status and stderr the guest printed between `===NAME
/// <status>===` and `===ENDNAME===`.
fn refusal<'a>(log: &'a str, name: &str) -> Result<(&'a str, &'a str), String> {
    let status = marker(log, &format!("==={name} ")).ok_or(format!("no {name} marker"))?;
    let stderr = section(
        log,
        &format!("==={name} {status}===\n"),
        &format!("===END{name}==="),
    )
    .ok_or(format!("no {name} output"))?;
    Ok((status, stderr))
}

/// A ring larger than the guest's memory: the kernel's refusal, said in
/// one line with the size and the flag to lower it.
fn check_no_memory(log: &str) -> Result<(), String> {
    let (status, stderr) = refusal(log, "NOMEM")?;
    let expected = "proctrace: the kernel refused 2048 MiB of memory for the ring buffer \
                    (BPF map \"events\"): out of memory: record with a smaller --buffer-mib\n";
    if status != "2" || stderr != expected {
        return Err(format!(
            "a ring too large for memory: status {status}, stderr {stderr:?}"
        ));
    }
    Ok(())
}

fn check_no_btf(log: &str) -> Result<(), String> {
    let (status, stderr) = refusal(log, "NOBTF")?;
    if status == "0" {
        return Err("recording without BTF succeeded".into());
    }
    if !stderr.contains("no BTF type information") || !stderr.contains("--btf FILE") {
        return Err(format!("unclear error without BTF: {stderr}"));
    }
    Ok(())
}

/// What the workload (scripts/kernel-matrix/workload.sh) must produce.
fn check_recording(
    log: &str,
    mode: &str,
    buffer: BufferKind,
    hook: Option<SyscallHook>,
) -> Result<(), String> {
    let stderr = section(
        log,
        &format!("===STDERR {mode}===\n"),
        &format!("===ENDSTDERR {mode}==="),
    )
    .unwrap_or("(none)");
    let body = section(
        log,
        &format!("===BEGIN {mode}===\n"),
        &format!("===END {mode}==="),
    )
    .ok_or_else(|| format!("no recording printed; proctrace said: {stderr}"))?;
    let status = marker(log, &format!("===STATUS {mode} "));
    let Some(hook) = hook else {
        return match status {
            Some("2") if stderr.contains("does not work on this kernel") => Ok(()),
            _ => Err(format!(
                "expected a clear failure (status 2), got {status:?}: {stderr}"
            )),
        };
    };
    check_tree(body, buffer, hook, status)
        .map_err(|why| format!("{why}\nproctrace said: {stderr}\nrecording:\n{body}"))
}

fn check_tree(
    body: &str,
    buffer: BufferKind,
    hook: SyscallHook,
    status: Option<&str>,
) -> Result<(), String> {
    if status != Some("9") {
        return Err(format!(
            "proctrace exited {status:?}, not 9 (the root's code)"
        ));
    }
    let records: Vec<Record> = body
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| format!("bad line {line:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let Some(Record::Header(header)) = records.first() else {
        return Err("no header".into());
    };
    let Some(Record::Trailer(trailer)) = records.last() else {
        return Err("no trailer".into());
    };
    if header.buffer != buffer {
        return Err(format!("buffer {:?}, expected {buffer:?}", header.buffer));
    }
    if header.syscall_hook != Some(hook) {
        return Err(format!(
            "syscall hook {:?}, expected {hook:?}",
            header.syscall_hook
        ));
    }
    // The classic syscall tracepoints never see a 32-bit syscall.
    let blind = hook == SyscallHook::Tracepoint;
    if trailer.unwatched_32bit_execs != u64::from(blind) {
        return Err(format!(
            "{} unwatched 32-bit execs",
            trailer.unwatched_32bit_execs
        ));
    }
    if trailer.lost != 0 || trailer.interrupted || trailer.root_exit_code != Some(9) {
        return Err(format!("bad trailer {trailer:?}"));
    }
    if trailer.events != records.len() as u64 - 2 {
        return Err(format!("trailer counts {} events", trailer.events));
    }
    let root = header.root_pid;
    if body.contains("matrix-secret") {
        return Err("a variable outside the allowlist was recorded".into());
    }

    let mut forks: BTreeMap<Pid, Pid> = BTreeMap::new();
    let mut execs: BTreeMap<Pid, Vec<Vec<String>>> = BTreeMap::new();
    let mut envs = BTreeMap::new();
    let mut fds = BTreeMap::new();
    let mut exits = BTreeMap::new();
    let mut no_rss = Vec::new();
    let mut setsids = Vec::new();
    let mut setpgids = Vec::new();
    for record in &records[1..records.len() - 1] {
        match record {
            Record::Fork(f) => {
                if forks.insert(f.child_pid, f.parent_pid).is_some() {
                    return Err(format!("pid {} forked twice", f.child_pid));
                }
            }
            Record::Exec(e) => {
                execs.entry(e.pid).or_default().push(e.argv.clone());
                envs.insert(e.pid, e.env.clone());
                let paths = e.fds.iter().map(|f| (f.fd, f.target.clone()));
                fds.insert(e.pid, paths.collect::<Vec<_>>());
            }
            Record::Exit(e) => {
                if exits.insert(e.pid, (e.exit_code, e.signal)).is_some() {
                    return Err(format!("pid {} exited twice", e.pid));
                }
                let Some(resources) = e.resources else {
                    return Err(format!("pid {} exited without resources", e.pid));
                };
                if resources.max_rss_bytes == 0 {
                    no_rss.push(e.pid);
                }
            }
            Record::SetSid(s) => setsids.push((s.pid, s.sid)),
            Record::SetPgid(s) => setpgids.push((s.pid, s.pgid)),
            other => return Err(format!("unexpected record {other:?}")),
        }
    }

    // Root, six children and a grandchild, each exiting once: no thread
    // is a process.
    if forks.len() != 7 {
        return Err(format!("{} forks, expected 7", forks.len()));
    }
    let pids: BTreeSet<Pid> = forks.keys().copied().chain([root]).collect();
    if exits.keys().copied().collect::<BTreeSet<_>>() != pids {
        return Err(format!("exits {exits:?} do not match processes {pids:?}"));
    }
    if execs.keys().any(|pid| !pids.contains(pid)) {
        return Err(format!("exec of an unknown process: {execs:?}"));
    }

    // Each process by what it ran.
    let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let by_exec = |expected: &[Vec<String>]| -> Result<Pid, String> {
        execs
            .iter()
            .find(|(_, seen)| seen.as_slice() == expected)
            .map(|(pid, _)| *pid)
            .ok_or_else(|| format!("no process exec'd {expected:?}; execs: {execs:?}"))
    };
    let root_exec = by_exec(&[argv(&["/bin/sh", "/workload.sh"])])?;
    if root_exec != root {
        return Err(format!(
            "the root is {root}, the workload ran as {root_exec}"
        ));
    }
    let echo = by_exec(&[argv(&["/bin/echo", "hello world", "x"])])?;
    let exit3 = by_exec(&[argv(&["/bin/sh", "-c", "exit 3"])])?;
    let setsid = by_exec(&[
        argv(&["/bin/setsid", "/bin/sh", "-c", "exit 7"]),
        argv(&["/bin/sh", "-c", "exit 7"]),
    ])?;
    let threads = by_exec(&[argv(&["/threads", "arg1"])])?;
    let compat = by_exec(&[argv(&["/compat_setid"])])?;
    let children_of = |parent: Pid| -> Vec<Pid> {
        let children = forks.iter().filter(|(_, p)| **p == parent);
        children.map(|(child, _)| *child).collect()
    };
    let compat_child = children_of(compat);
    let subshell: Vec<Pid> = children_of(root)
        .into_iter()
        .filter(|pid| !execs.contains_key(pid))
        .collect();
    if subshell.len() != 1 || compat_child.len() != 1 || execs.len() != 6 {
        return Err(format!(
            "expected one child without exec: {subshell:?}, one child of the 32-bit \
             program: {compat_child:?}, execs {execs:?}"
        ));
    }
    if children_of(root).len() != 6 {
        return Err(format!("forks {forks:?}: six from the root expected"));
    }
    // Every process had memory mapped (CPU time may be 0 for one that ran
    // less than a tick). Only the 32-bit program's child, a few pages of a
    // fork, may stay within the per-CPU RSS counters' batch (6.2+).
    if no_rss.iter().any(|pid| *pid != compat_child[0]) {
        return Err(format!("pids {no_rss:?} exited with no peak RSS"));
    }

    for (pid, code) in [
        (root, 9),
        (echo, 0),
        (exit3, 3),
        (subshell[0], 5),
        (setsid, 7),
        (threads, 4),
        (compat, 0),
        (compat_child[0], 0),
    ] {
        if exits[&pid] != (Some(code), None) {
            return Err(format!(
                "pid {pid} exited {:?}, expected code {code}",
                exits[&pid]
            ));
        }
    }
    let pytest = BTreeMap::from([(
        "PYTEST_CURRENT_TEST".to_string(),
        "w.py::t (call)".to_string(),
    )]);
    if envs[&echo] != pytest
        || envs
            .iter()
            .any(|(pid, env)| *pid != echo && !env.is_empty())
    {
        return Err(format!(
            "variables {envs:?}, expected {pytest:?} for echo only"
        ));
    }
    // The fd walk and the path walk, through bpf_loop where the kernel has
    // it (5.17+) and unrolled before.
    let has = |pid: Pid, fd: i32, path: &str| fds[&pid].iter().any(|(n, t)| *n == fd && t == path);
    if !has(echo, 1, "/dev/null")
        || !has(exit3, 3, "/workload.sh")
        || !has(exit3, 4, "/proc/version")
    {
        return Err(format!(
            "fds {fds:?}: expected echo's 1 on /dev/null, and 3 on /workload.sh and 4 on /proc/version for exit 3"
        ));
    }
    let mut expected_setsids = vec![(setsid, setsid)];
    let mut expected_setpgids = vec![(threads, threads)];
    if !blind {
        expected_setsids.push((compat_child[0], compat_child[0]));
        expected_setpgids.push((compat, compat));
    }
    if setsids != expected_setsids {
        return Err(format!(
            "SetSID events {setsids:?}, expected {expected_setsids:?}"
        ));
    }
    if setpgids != expected_setpgids {
        return Err(format!(
            "SetPGID events {setpgids:?}, expected {expected_setpgids:?}"
        ));
    }
    Ok(())
}

/// The checker itself: a good recording (6.1, ring buffer) passes, and each
/// kind of damage is caught.
#[test]
fn checker_rejects_wrong_recordings() {
    let good = include_str!("../data/kernel-matrix-6.1-ring.ndjson");
    let fexit = SyscallHook::Fexit;
    check_tree(good, BufferKind::Ring, fexit, Some("9")).expect("the sample recording passes");
    let lines: Vec<&str> = good.lines().collect();
    let without = |needle: &str| {
        lines
            .iter()
            .filter(|line| !line.contains(needle))
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    };
    let bad: Vec<(&str, String)> = vec![
        ("perf expected", good.to_owned()),
        ("tracepoint expected", good.to_owned()),
        ("status", good.to_owned()),
        ("lost", good.replace("\"lost\":0", "\"lost\":1")),
        ("exit code", good.replace("\"exit_code\":4", "\"exit_code\":0")),
        ("argv", good.replace("hello world", "hello")),
        ("no SetPGID", without("SetPGID")),
        ("no SetSID", without("SetSID")),
        ("no trailer", without("Trailer")),
        ("no resources", {
            let cut = |line: &str| match line.find(",\"resources\":") {
                Some(at) => format!("{}}}}}", &line[..at]),
                None => line.to_owned(),
            };
            lines.iter().map(|l| cut(l)).collect::<Vec<_>>().join("\n")
        }),
        ("no variable", good.replace("w.py::t (call)", "w.py::u (call)")),
        ("a wrong path", good.replace("\"/proc/version\"", "\"/version\"")),
        ("a secret", good.replace("w.py::t (call)", "matrix-secret")),
        (
            "a thread as a process",
            good.replacen(
                "{\"Exit\"",
                "{\"Fork\":{\"seq\":99,\"timestamp\":1,\"parent_pid\":146,\"child_pid\":147,\"parent_pgid\":0}}\n{\"Exit\"",
                1,
            ),
        ),
    ];
    for (what, body) in bad {
        let buffer = if what == "perf expected" {
            BufferKind::Perf
        } else {
            BufferKind::Ring
        };
        let status = if what == "status" { "0" } else { "9" };
        let hook = if what == "tracepoint expected" {
            SyscallHook::Tracepoint
        } else {
            fexit
        };
        assert!(
            check_tree(&body, buffer, hook, Some(status)).is_err(),
            "the checker missed: {what}"
        );
    }
}

/// The no-memory check passes the one clear line with status 2, and
/// nothing else.
#[test]
fn checker_wants_the_clear_no_memory_error() {
    let console = |status: &str, stderr: &str| {
        format!("===NOMEM {status}===\n{stderr}===ENDNOMEM===\n===DONE===\n")
    };
    let clear = "proctrace: the kernel refused 2048 MiB of memory for the ring buffer (BPF map \
                 \"events\"): out of memory: record with a smaller --buffer-mib\n";
    assert_eq!(check_no_memory(&console("2", clear)), Ok(()));
    let vague =
        "proctrace: loading the BPF program into the kernel: Invalid argument (os error 22)\n";
    assert!(check_no_memory(&console("2", vague)).is_err());
    assert!(check_no_memory(&console("137", clear)).is_err());
    assert!(check_no_memory("===DONE===\n").is_err());
}

/// Which hook each kernel must pick: arm64 before 6.4 cannot attach fexit
/// to kernel functions, so fexit gives way there and only there.
#[test]
fn expected_hooks_follow_the_kernel() {
    let fexit = Some(SyscallHook::Fexit);
    assert_eq!(expected_hook("ring", (5, 10), "x86_64"), fexit);
    assert_eq!(expected_hook("ring", (6, 12), "aarch64"), fexit);
    assert_eq!(
        expected_hook("ring", (6, 1), "aarch64"),
        Some(SyscallHook::Tracepoint)
    );
    assert_eq!(
        expected_hook("perf", (5, 10), "aarch64"),
        Some(SyscallHook::SysExit)
    );
    assert_eq!(expected_hook("tracepoint", (5, 10), "aarch64"), None);
    assert_eq!(
        expected_hook("raw-tp", (6, 12), "aarch64"),
        Some(SyscallHook::Tracepoint)
    );
}
