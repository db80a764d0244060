//! Which test of a test suite a process belongs to, named the way the
//! test runner prints it. Every view that speaks of tests asks here.

use std::collections::HashMap;

use crate::processes::Processes;

/// The environment variables a recording keeps by default: those by which
/// test runners tell a test's processes which test they run. pytest sets
/// `PYTEST_CURRENT_TEST` (`path::test (call)`) in its own environment, so
/// every process a test starts inherits it; bats exports
/// `BATS_TEST_DESCRIPTION`; nextest gives each test process the test
/// binary's `NEXTEST_BINARY_ID` (the test itself is in its argv).
pub const RUNNER_VARIABLES: &[&str] = &[
    "PYTEST_CURRENT_TEST",
    "BATS_TEST_DESCRIPTION",
    "NEXTEST_BINARY_ID",
];

/// The test that `index` runs or was started by: the nearest process, from
/// `index` up through its ancestors, that a test runner marks as a test.
pub fn test_of(processes: &Processes, index: usize) -> Option<String> {
    std::iter::once(index)
        .chain(processes.ancestors(index).into_iter().rev())
        .find_map(|a| own_test(processes, a))
}

/// The test a process itself runs, if a runner marks it as one.
///
/// bats: `bats-exec-test` takes the .bats file and then the test's
/// function name (`test_leaks_a_sleeper`), which encodes the description
/// bats prints (`leaks a sleeper`): the description is the `@test` line
/// of that file whose encoding is the name, or the name if the file
/// cannot be read.
fn own_test(processes: &Processes, index: usize) -> Option<String> {
    let process = processes.get(index);
    if process.program() != Some("bats-exec-test") {
        return None;
    }
    let argv = process.execs.last()?.argv;
    let file = argv.iter().position(|a| a.ends_with(".bats"))?;
    let function = argv.get(file + 1)?;
    let descriptions = bats_descriptions(argv.get(file)?);
    let description = descriptions
        .iter()
        .find(|d| bats_function_name(d) == function);
    Some(description.map_or(function, |d| d).to_string())
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
