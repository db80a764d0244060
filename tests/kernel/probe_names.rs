//! Functions named as people write them (`record --probe`): Rust paths
//! (v0 and legacy mangling) and C++ names with and without their
//! parameters, patterns over them, libc's IFUNCs and aliases, and
//! `+OFFSET`s checked; counted exactly in programs whose answers are
//! known, and against perf's own count of the same uprobe.

use std::process::Command;

use crate::common::*;
use crate::cpu_profile::refused;
use crate::probes::profile_of;

/// Calls of `paths::parse::number` per run of the Rust workloads.
const CALLS: u64 = 300;

/// Per probe of `run`, by the header's name: its hits whose stack passes
/// through the function `through`, and all its hits.
fn counts(run: &Run, through: &str) -> Vec<(String, u64, u64)> {
    let profile = profile_of(run);
    // `run(long)` in C++, `rust_v0::run` in Rust.
    let names = |frame: &str| {
        frame == through
            || frame.starts_with(&format!("{through}("))
            || frame.ends_with(&format!("::{through}"))
    };
    run.header()
        .probes
        .iter()
        .map(|probe| {
            let hits = profile.probe_hits.iter().filter(|h| h.probe == probe.id);
            let (mut passing, mut all) = (0, 0);
            for h in hits {
                all += h.count;
                let frames = h.stack.map(|s| profile.stack(s)).unwrap_or_default();
                if frames
                    .iter()
                    .any(|f| f.function.as_deref().is_some_and(names))
                {
                    passing += h.count;
                }
            }
            (probe.name.clone(), passing, all)
        })
        .collect()
}

/// Records `program ARGS` with one `--probe` per spec.
fn record_probes(specs: &[String], command: &[&str]) -> Run {
    let mut opts = Opts::new(Mode::Ring);
    opts.args = specs
        .iter()
        .flat_map(|spec| ["--probe".to_owned(), spec.clone()])
        .collect();
    let run = record_with(&opts, command);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.trailer().lost_probe_hits, 0);
    run
}

#[test]
fn rust_functions_are_named_by_their_paths() {
    for crate_name in ["rust_v0", "rust_legacy"] {
        let program = workload(crate_name);
        let program = program.to_str().unwrap();
        let spec = format!("uprobe:{program}:{crate_name}::paths::parse::*");
        let run = record_probes(&[spec], &[program, &CALLS.to_string()]);
        let mut found = counts(&run, "run");
        found.sort();
        let expected = |name: &str, n| (format!("{crate_name}::paths::parse::{name}"), n, n);
        assert_eq!(
            found,
            [
                expected("inner::digit", 4 * CALLS),
                expected("number", CALLS)
            ],
            "{crate_name}"
        );
        // The header keeps the symbol as linked beside the name.
        let symbols: Vec<&str> = run
            .header()
            .probes
            .iter()
            .filter_map(|p| p.symbol.as_deref())
            .collect();
        let mangled = if crate_name == "rust_v0" { "_R" } else { "_ZN" };
        assert!(
            symbols.len() == 2 && symbols.iter().all(|s| s.starts_with(mangled)),
            "{symbols:?}"
        );
    }
}

#[test]
fn cpp_functions_are_named_with_or_without_their_parameters() {
    let program = workload("thrower");
    let program = program.to_str().unwrap();
    let specs: Vec<String> = ["thrower(int)", "thrower", "Box::push", "_Z7throwerd"]
        .iter()
        .map(|name| format!("uprobe:{program}:{name}"))
        .collect();
    let run = record_probes(&specs, &[program, "250"]);
    let found = counts(&run, "run");
    let expected = [
        ("thrower(int)", 250),
        ("thrower(int)", 250),
        ("thrower(double)", 1),
        ("Box<int>::push(int)", 250),
        ("Box<long>::push(long)", 2),
        ("thrower(double)", 1),
    ];
    let expected: Vec<(String, u64, u64)> = expected
        .iter()
        .map(|(name, n)| (name.to_string(), *n, *n))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn an_ifunc_counts_the_code_this_machine_runs_and_an_alias_its_name() {
    let program = workload("strings");
    let program = program.to_str().unwrap();
    let specs = ["uprobe:libc:strlen", "uprobe:libc:strtoimax"].map(String::from);
    let run = record_probes(&specs, &[program, "400"]);
    // The C library's own start-up calls strlen too, before main.
    let found = counts(&run, "measure");
    let through: Vec<(&str, u64)> = found.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
    assert_eq!(through, [("strlen", 400), ("strtoimax", 400)]);
}

/// The offsets of the instructions of `function` (its symbol) in `file`
/// from its entry, as objdump decodes them.
fn instruction_starts(file: &str, function: &str) -> Vec<u64> {
    let out = Command::new("objdump")
        .args([
            "-d",
            "--no-show-raw-insn",
            &format!("--disassemble={function}"),
            file,
        ])
        .output()
        .expect("objdump");
    let text = String::from_utf8(out.stdout).unwrap();
    let addresses: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim_start().split_once(":\t"))
        .filter_map(|(a, _)| u64::from_str_radix(a, 16).ok())
        .collect();
    addresses.iter().map(|a| a - addresses[0]).collect()
}

#[test]
fn an_offset_is_checked_to_start_an_instruction_inside_the_function() {
    let program = workload("thrower");
    let program = program.to_str().unwrap();
    if !prerequisite(
        Command::new("objdump").arg("--version").output().is_ok(),
        "objdump",
    ) {
        return;
    }
    let starts = instruction_starts(program, "_Z7throweri");
    let second = starts[1];
    let spec = format!("uprobe:{program}:thrower(int)+{second:#x}");
    let run = record_probes(&[spec], &[program, "70"]);
    assert_eq!(counts(&run, "run")[0].1, 70);
    assert_eq!(
        run.header().probes[0].name,
        format!("thrower(int)+{second:#x}")
    );
    // One byte into the first instruction longer than one.
    let long = starts.windows(2).find(|w| w[1] - w[0] > 1).unwrap()[0];
    let inside = format!("uprobe:{program}:thrower(int)+{:#x}", long + 1);
    let past = format!("uprobe:{program}:thrower(int)+99999999");
    for (spec, says) in [
        (inside.as_str(), "is inside an instruction of thrower(int)"),
        (past.as_str(), "is past the end of thrower(int) ("),
    ] {
        let (code, stderr) = refused(&["--probe", spec]);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
    }
}

/// perf's own uprobe on the same function: its count is the oracle.
#[test]
fn a_rust_functions_hits_are_perfs_count() {
    if !prerequisite(
        Command::new("perf").arg("--version").output().is_ok(),
        "perf",
    ) {
        return;
    }
    let program = workload("rust_v0");
    let program = program.to_str().unwrap();
    let run = record_probes(
        &[format!("uprobe:{program}:rust_v0::paths::parse::number")],
        &[program, "123"],
    );
    let ours = counts(&run, "run")[0].1;
    let symbol = run.header().probes[0].symbol.clone().unwrap();
    let perf = perf_uprobe_count(program, &symbol, &[program, "123"]);
    assert_eq!((ours, perf), (123, 123));
}

/// How often `perf stat` counts a uprobe `perf probe` puts on `symbol` of
/// `file` while `command` runs.
pub(crate) fn perf_uprobe_count(file: &str, symbol: &str, command: &[&str]) -> u64 {
    let event = format!("pt{}", std::process::id());
    let added = Command::new("perf")
        .args([
            "probe",
            "-q",
            "-x",
            file,
            "-a",
            &format!("{event}={symbol}"),
        ])
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let group = format!(
        "probe_{}",
        std::path::Path::new(file)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    let stat = Command::new("perf")
        .args(["stat", "-x,", "-e", &format!("{group}:{event}"), "--"])
        .args(command)
        .output()
        .unwrap();
    let _ = Command::new("perf")
        .args(["probe", "-q", "-d", &format!("{group}:{event}")])
        .output();
    let stderr = String::from_utf8_lossy(&stat.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(&event))
        .unwrap_or_else(|| panic!("{stderr}"));
    line.split(',').next().unwrap().trim().parse().unwrap()
}

#[test]
fn probes_lists_functions_demangled_with_their_symbols_and_lines() {
    let program = workload("rust_legacy");
    let program = program.to_str().unwrap();
    let out = Command::new(proctrace_bin())
        .args(["probes", program, "*::parse::number"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let [line] = &text.lines().collect::<Vec<_>>()[..] else {
        panic!("one function: {text}");
    };
    let fields: Vec<&str> = line.split("  ").collect();
    assert_eq!(
        fields[0],
        format!("uprobe:{program}:rust_legacy::paths::parse::number")
    );
    assert!(
        fields[1].starts_with("_ZN11rust_legacy5paths5parse6number17h"),
        "{line}"
    );
    assert!(
        fields[2].ends_with("tests/workloads/rust_paths.inc:9"),
        "{line}"
    );
    let out = Command::new(proctrace_bin())
        .args(["probes", "libc", "strtoimax"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(":strtoimax  (also strtol, strtoq, strtoll"),
        "{text}"
    );
}
