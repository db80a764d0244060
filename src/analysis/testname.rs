//! Which test of a test suite a process belongs to, named the way the
//! test runner prints it. Every view that speaks of tests asks here.

use std::collections::HashMap;

use crate::event::{pytest_node_id, TestAttempt};
use crate::processes::Processes;

/// The test that `index` runs or was started by: the nearest process, from
/// `index` up through its ancestors, that a test runner marks as a test.
///
/// Under bats that is the nearest `bats-exec-test`: the variables bats
/// exports are inherited by what it runs outside a test (`setup_file`,
/// `source`, an empty name) and by a nested suite's own bats, so they
/// name a test only where no `bats-exec-test` was recorded (`record
/// --pid`).
pub fn test_of(processes: &Processes, index: usize) -> Option<String> {
    let marked = marking(processes, index)?;
    if !is_bats_exec_test(processes, marked) {
        return own_test(processes, marked);
    }
    let exec = processes.get(marked).execs.last()?;
    let file = exec.argv.iter().position(|a| a.ends_with(".bats"))?;
    bats_test(exec.argv.get(file)?, exec.argv.get(file + 1)?)
}

/// The tests of lines of samples or probe hits: the one their process
/// said ran in it then (the line's `test`, from pytest's variable), else
/// the process's own ([`test_of`]), looked up once per process.
pub(crate) struct LineTests<'a> {
    processes: &'a Processes,
    of: HashMap<usize, Option<String>>,
}

impl<'a> LineTests<'a> {
    pub fn new(processes: &'a Processes) -> LineTests<'a> {
        LineTests {
            processes,
            of: HashMap::new(),
        }
    }

    /// The test of a line that `said` its own, of `process`.
    pub fn of(&mut self, said: Option<&str>, process: Option<usize>) -> Option<String> {
        if let Some(test) = said {
            return Some(test.to_owned());
        }
        let processes = self.processes;
        let index = process?;
        let known = self.of.entry(index);
        known.or_insert_with(|| test_of(processes, index)).clone()
    }
}

/// The process whose test `index` belongs to (see [`test_of`]).
fn marking(processes: &Processes, index: usize) -> Option<usize> {
    let chain: Vec<usize> = std::iter::once(index)
        .chain(processes.ancestors(index).into_iter().rev())
        .collect();
    let bats = chain.iter().find(|&&a| is_bats_exec_test(processes, a));
    bats.or_else(|| chain.iter().find(|&&a| own_test(processes, a).is_some()))
        .copied()
}

fn is_bats_exec_test(processes: &Processes, index: usize) -> bool {
    processes.get(index).program() == Some("bats-exec-test")
}

/// The test a process itself runs, if a runner marks it as one (bats'
/// `bats-exec-test` aside: see [`test_of`]): the runner's own word where
/// its probes said it (nextest's), else what its command line or
/// environment says.
fn own_test(processes: &Processes, index: usize) -> Option<String> {
    match processes.attempt_of(index) {
        Some(attempt) => Some(attempt_test(processes, index, attempt)),
        None => inferred_test(processes, index),
    }
}

/// An attempt's test as nextest prints it, `BINARY_ID NAME`: the name
/// whole from the command line where the probe's was cut short.
fn attempt_test(processes: &Processes, index: usize, attempt: &TestAttempt) -> String {
    let exec = processes.get(index).execs.last();
    let whole = exec
        .and_then(|e| e.arg_after("--exact"))
        .filter(|name| attempt.names(name));
    format!(
        "{} {}",
        attempt.suite,
        whole.map_or(&attempt.name[..], |n| n)
    )
}

/// The test a process runs by its command line or environment alone.
fn inferred_test(processes: &Processes, index: usize) -> Option<String> {
    let process = processes.get(index);
    let exec = process.execs.last()?;
    if let (Some(file), Some(function)) =
        (exec.env("BATS_TEST_FILENAME"), exec.env("BATS_TEST_NAME"))
    {
        return bats_variables_test(file, function);
    }
    if let Some(current) = exec.env("PYTEST_CURRENT_TEST") {
        return Some(pytest_node_id(current).to_string());
    }
    let args: Vec<&str> = exec.argv.iter().collect();
    go_test(&args)
        .or_else(|| rust_test(&args, exec.env("NEXTEST_BINARY_ID")))
        .or_else(|| cpython_test(&args))
}

/// The suite of the test `index` runs or was started by, where its
/// runner tells: the .bats file, pytest's test file, nextest's binary id,
/// the go or cargo test binary (without cargo's hash).
pub fn suite_of(processes: &Processes, index: usize) -> Option<String> {
    let marked = marking(processes, index)?;
    if let Some(attempt) = processes.attempt_of(marked) {
        return Some(attempt.suite.clone());
    }
    let exec = processes.get(marked).execs.last()?;
    let args: Vec<&str> = exec.argv.iter().collect();
    if let Some(file) = args.iter().find(|a| a.ends_with(".bats")) {
        return Some(file.to_string());
    }
    let from_env = ["BATS_TEST_FILENAME", "NEXTEST_BINARY_ID"]
        .iter()
        .find_map(|name| exec.env(name));
    let pytest = exec
        .env("PYTEST_CURRENT_TEST")
        .and_then(|c| c.split_once("::"));
    if let Some(suite) = from_env.or(pytest.map(|(file, _)| file)) {
        return Some(suite.to_string());
    }
    let program = args.first()?.rsplit('/').next()?;
    let name = match program.strip_suffix(".test") {
        Some(package) => package,
        None => program.rsplit_once('-').map_or(program, |(name, _)| name),
    };
    Some(name.to_string())
}

/// Whether `index` is the runner's own process for one test, so that its
/// exit status is the test's result: bats-exec-test, a go or cargo test
/// binary run for one test. pytest runs tests inside its own process.
pub fn runs_one_test(processes: &Processes, index: usize) -> bool {
    let process = processes.get(index);
    let Some(exec) = process.execs.last() else {
        return false;
    };
    if is_bats_exec_test(processes, index) || processes.attempt_of(index).is_some() {
        return true;
    }
    let args: Vec<&str> = exec.argv.iter().collect();
    go_test(&args).is_some() || rust_test(&args, exec.env("NEXTEST_BINARY_ID")).is_some()
}

/// The tests a runner's probes named, checked against what the command
/// lines and environments say of the same processes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunnerCheck {
    /// The attempts the probes told.
    pub attempts: usize,
    /// Of those, the ones whose process was not recorded.
    pub unplaced: usize,
    /// The ones whose name agrees with the inferred one.
    pub agree: usize,
    /// The ones whose process says another test, or none: (process,
    /// the runner's name, the inferred one).
    pub named_otherwise: Vec<(usize, String, Option<String>)>,
    /// The ones whose verdict disagrees with their process's exit:
    /// (process, the runner's result).
    pub judged_otherwise: Vec<(usize, String)>,
}

/// Checks the runner's word on its tests (see [`RunnerCheck`]).
pub fn runner_check(processes: &Processes) -> RunnerCheck {
    let mut check = RunnerCheck::default();
    for (index, attempt) in processes.attempts() {
        check.attempts += 1;
        let Some(index) = index else {
            check.unplaced += 1;
            continue;
        };
        let named = attempt_test(processes, index, attempt);
        let inferred = inferred_test(processes, index);
        if inferred.as_deref() == Some(&named[..]) {
            check.agree += 1;
        } else {
            check.named_otherwise.push((index, named, inferred));
        }
        let exited_0 = processes.get(index).exit.map(|e| e.exit_code == Some(0));
        let expected = match attempt.result.as_deref() {
            Some("pass" | "leak") => Some(true),
            Some("fail" | "leak-fail") => Some(false),
            _ => None,
        };
        if let (Some(expected), Some(exited_0)) = (expected, exited_0) {
            if expected != exited_0 {
                let result = attempt.result.clone().unwrap_or_default();
                check.judged_otherwise.push((index, result));
            }
        }
    }
    check
}

/// go test: the package's `pkg.test` binary runs the tests its
/// `-test.run` pattern selects (`go test -run '^TestX$'`); the pattern,
/// without the anchors, is the test when it names one.
fn go_test(argv: &[&str]) -> Option<String> {
    if !argv.first()?.ends_with(".test") {
        return None;
    }
    let pattern = argv.iter().enumerate().find_map(|(i, arg)| {
        let arg = arg
            .strip_prefix("-test.run")
            .or(arg.strip_prefix("--test.run"))?;
        match arg.strip_prefix('=') {
            Some(value) => Some(value),
            None if arg.is_empty() => argv.get(i + 1).copied(),
            None => None,
        }
    })?;
    let name = pattern.strip_prefix('^').unwrap_or(pattern);
    let name = name.strip_suffix('$').unwrap_or(name);
    (!name.is_empty()).then(|| name.to_string())
}

/// cargo test: a test binary (`target/.../deps/NAME-<hash>`, or any
/// program nextest started with `--exact`) runs the tests
/// its filter selects; nextest starts one per test as `BINARY --exact
/// TEST`, and prints it as `BINARY_ID TEST`. Plain `cargo test` runs all
/// tests of a binary in one process: it names none unless one filter
/// was given.
fn rust_test(argv: &[&str], binary_id: Option<&str>) -> Option<String> {
    // The processes a test starts inherit NEXTEST_BINARY_ID too: only
    // the test binary has `--exact`.
    let nextest = binary_id.is_some() && argv.contains(&"--exact");
    if !nextest && !is_cargo_test_binary(argv.first()?) {
        return None;
    }
    // libtest's options that take a value, which is no filter.
    const VALUED: [&str; 7] = [
        "--test-threads",
        "--skip",
        "--logfile",
        "--format",
        "--color",
        "-Z",
        "--shuffle-seed",
    ];
    let mut filters = Vec::new();
    let mut args = argv[1..].iter();
    while let Some(arg) = args.next() {
        if VALUED.contains(arg) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(*arg);
        }
    }
    let [test] = filters[..] else {
        return None;
    };
    Some(match binary_id {
        Some(binary) if nextest => format!("{binary} {test}"),
        _ => test.to_string(),
    })
}

/// CPython's own test runner (`python3 -m test -jN`): each worker process
/// runs one test module, named in the JSON it is given: `-m
/// test.libregrtest.worker '{"tests": ["test_json"], …}'` since 3.11.7
/// and 3.12, `-m test.regrtest --worker-args '[{…}, "test_json"]'`
/// before.
fn cpython_test(argv: &[&str]) -> Option<String> {
    let module = argv.iter().position(|&arg| arg == "-m")? + 1;
    let json = match argv.get(module)? {
        &"test.libregrtest.worker" => argv.get(module + 1)?,
        &"test.regrtest" | &"test" => {
            let flag = argv.iter().position(|&arg| arg == "--worker-args")?;
            argv.get(flag + 1)?
        }
        _ => return None,
    };
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let test = match &value {
        serde_json::Value::Object(runtests) => {
            match runtests.get("tests")?.as_array()?.as_slice() {
                [test] => test,
                _ => return None,
            }
        }
        serde_json::Value::Array(args) => args.last()?,
        _ => return None,
    };
    test.as_str().map(str::to_owned)
}

/// `.../deps/NAME-<16 hex digits>`, as cargo names test binaries.
fn is_cargo_test_binary(program: &str) -> bool {
    let mut parts = program.rsplit('/');
    let file = parts.next().unwrap_or_default();
    let hash = file.rsplit_once('-').map_or("", |(_, hash)| hash);
    parts.next() == Some("deps") && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

/// bats: `bats-exec-test` takes the .bats file and then the test's
/// function name (`test_leaks_a_sleeper`), which encodes the description
/// bats prints (`leaks a sleeper`): the description is the `@test` line
/// of that file whose encoding is the name, or the name if the file
/// cannot be read.
fn bats_test(file: &str, function: &str) -> Option<String> {
    let descriptions = bats_descriptions(file);
    let description = descriptions
        .iter()
        .find(|d| bats_function_name(d) == function);
    Some(description.map_or(function, |d| d).to_string())
}

/// bats' variables as a test: none for an empty name, or one that is no
/// `@test` of a file that can be read (`source` while bats loads files).
fn bats_variables_test(file: &str, function: &str) -> Option<String> {
    let descriptions = bats_descriptions(file);
    if function.is_empty() {
        return None;
    }
    match descriptions
        .iter()
        .find(|d| bats_function_name(d) == function)
    {
        Some(description) => Some(description.clone()),
        None if descriptions.is_empty() => Some(function.to_string()),
        None => None,
    }
}

/// The descriptions of the `@test` lines of a .bats file, read once.
fn bats_descriptions(path: &str) -> std::rc::Rc<Vec<String>> {
    thread_local! {
        static READ: std::cell::RefCell<HashMap<String, std::rc::Rc<Vec<String>>>> =
            Default::default();
    }
    READ.with(|read| {
        let mut read = read.borrow_mut();
        let found = read.entry(path.to_string()).or_insert_with(|| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            std::rc::Rc::new(text.lines().filter_map(bats_test_line).collect())
        });
        std::rc::Rc::clone(found)
    })
}

/// The description of `@test "description" {`, as bats reads it.
fn bats_test_line(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("@test")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    // As bats' own pattern: the description runs to the last `{` after a
    // blank, whatever the body on the same line holds.
    let brace = rest
        .rmatch_indices(" {")
        .chain(rest.rmatch_indices("\t{"))
        .map(|(i, _)| i)
        .max()?;
    let quoted = rest[..brace].trim();
    let mut chars = quoted.chars();
    match chars.next()? {
        '"' => {
            let mut text = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => return Some(text),
                    '\\' => text.push(chars.next()?),
                    c => text.push(c),
                }
            }
            None
        }
        '\'' => quoted[1..].strip_suffix('\'').map(str::to_string),
        _ => Some(quoted.to_string()),
    }
}

/// The function name bats 1.x gives a test (`bats_encode_test_name` in
/// bats-preprocess): descriptions of letters, digits, spaces, `_` and `-`
/// keep their letters, with `_` as `-5f` then every `-` as `-2d` (so `_`
/// ends up `-2d5f`) and spaces as `_`; any other description has each
/// character but letters, digits and spaces as `-` and its hex code.
pub fn bats_function_name(description: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-');
    let body = if description.chars().all(plain) {
        description
            .replace('_', "-5f")
            .replace('-', "-2d")
            .replace(' ', "_")
    } else {
        description
            .chars()
            .map(|c| match c {
                ' ' => "_".to_string(),
                c if c.is_ascii_alphanumeric() => c.to_string(),
                c => format!("-{:02x}", u32::from(c)),
            })
            .collect()
    };
    format!("test_{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bats_names_are_encoded_as_bats_1_8_does() {
        assert_eq!(
            bats_function_name("leaks a sleeper"),
            "test_leaks_a_sleeper"
        );
        assert_eq!(bats_function_name("a_b-c"), "test_a-2d5fb-2dc");
        assert_eq!(bats_function_name("it's 100%"), "test_it-27s_100-25");
    }

    #[test]
    fn bats_tests_are_their_description_else_their_function() {
        let dir = std::env::temp_dir().join(format!("testname-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.bats");
        std::fs::write(&file, "@test \"it's 100%\" {\n}\n").unwrap();
        let file = file.to_str().unwrap();
        let named = bats_test(file, "test_it-27s_100-25");
        let unknown = bats_test(file, "test_other");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(named.as_deref(), Some("it's 100%"));
        assert_eq!(unknown.as_deref(), Some("test_other"));
    }

    #[test]
    fn pytest_tests_are_their_node_id() {
        assert_eq!(
            pytest_node_id("t/test_a.py::test_b (call)"),
            "t/test_a.py::test_b"
        );
        assert_eq!(
            pytest_node_id("t.py::C::test[x (call)] (setup)"),
            "t.py::C::test[x (call)]"
        );
        assert_eq!(pytest_node_id("t.py::test_c (teardown)"), "t.py::test_c");
        assert_eq!(pytest_node_id("t.py::test_d"), "t.py::test_d");
    }

    #[test]
    fn go_tests_are_the_run_pattern_of_a_test_binary() {
        let run = |argv: &[&str]| go_test(argv);
        assert_eq!(
            run(&[
                "/tmp/go-build1/b001/pkg.test",
                "-test.paniconexit0",
                "-test.run=^TestHang$"
            ]),
            Some("TestHang".into())
        );
        assert_eq!(
            run(&["./pkg.test", "-test.run", "TestA|TestB"]),
            Some("TestA|TestB".into())
        );
        assert_eq!(run(&["./pkg.test", "-test.v=true"]), None);
        assert_eq!(run(&["/bin/grep", "-test.run=x"]), None);
    }

    #[test]
    fn rust_tests_are_the_filter_of_a_test_binary() {
        let nextest = Some("proctrace::kernel");
        let binary = "/src/target/debug/deps/kernel-0123456789abcdef";
        assert_eq!(
            rust_test(&[binary, "--exact", "hang::names", "--nocapture"], nextest),
            Some("proctrace::kernel hang::names".into())
        );
        // What a test starts inherits the variable, not the name.
        assert_eq!(rust_test(&["/bin/sleep", "1000"], nextest), None);
        assert_eq!(
            rust_test(&[binary, "--test-threads", "1", "hang::"], None),
            Some("hang::".into())
        );
        // All tests in one process, or in one thread each: no one test.
        assert_eq!(rust_test(&[binary], None), None);
        assert_eq!(rust_test(&[binary, "a", "b"], None), None);
        assert_eq!(rust_test(&["/usr/bin/sleep", "5"], None), None);
        assert_eq!(
            rust_test(&["/x/deps/kernel-nothex0123456789", "t"], None),
            None
        );
    }

    #[test]
    fn cpython_workers_are_their_test_module() {
        let python = "/usr/bin/python3";
        let worker = |json: &str| {
            let argv = [python, "-B", "-u", "-m", "test.libregrtest.worker", json];
            cpython_test(&argv)
        };
        assert_eq!(
            worker(r#"{"tests": ["test_json"], "random_seed": 190085893}"#),
            Some("test_json".into())
        );
        assert_eq!(worker(r#"{"tests": ["test_a", "test_b"]}"#), None);
        assert_eq!(worker("not json"), None);
        let old = [
            python,
            "-m",
            "test.regrtest",
            "--worker-args",
            r#"[{"verbose": 0}, "test_textwrap"]"#,
        ];
        assert_eq!(cpython_test(&old), Some("test_textwrap".into()));
        // The runner's own process runs no one test.
        assert_eq!(
            cpython_test(&[python, "-m", "test", "-j2", "test_json"]),
            None
        );
        assert_eq!(cpython_test(&[python, "-m", "json.tool", "x.json"]), None);
    }

    #[test]
    fn test_lines_give_their_description() {
        assert_eq!(
            bats_test_line(r#"@test "x \"y\" z" {"#).as_deref(),
            Some(r#"x "y" z"#)
        );
        assert_eq!(
            bats_test_line("  @test 'plain' {").as_deref(),
            Some("plain")
        );
        assert_eq!(bats_test_line("@testing {"), None);
        assert_eq!(
            bats_test_line(r#"@test "one line" { true; }"#).as_deref(),
            Some("one line")
        );
    }
}
