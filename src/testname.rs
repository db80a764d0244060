//! Which test of a test suite a process belongs to, named the way the
//! test runner prints it. Every view that speaks of tests asks here.

use crate::processes::Processes;

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
/// function name (`test_leaks_a_sleeper`).
fn own_test(processes: &Processes, index: usize) -> Option<String> {
    let process = processes.get(index);
    if process.program() != Some("bats-exec-test") {
        return None;
    }
    let argv = process.execs.last()?.argv;
    let file = argv.iter().position(|a| a.ends_with(".bats"))?;
    argv.get(file + 1).map(str::to_string)
}
