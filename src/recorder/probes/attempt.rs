//! What a runner's probe says of a test attempt: which of its arguments
//! name the suite and test, the test's pid, its result and duration.
//! nextest fires `nextest:test-attempt-start` as it starts a test's
//! process and `nextest:test-attempt-done` when it has judged it; each
//! passes a JSON document first, then the test in plain arguments.
//! nextest 0.9.113 added an attempt id (and the pid) after the document;
//! the argument count tells the two layouts apart.

/// The provider of nextest's probes.
pub const NEXTEST: &str = "nextest";

/// Which arguments of a runner's probe say what of a test attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptProbe {
    /// The start of an attempt (else its end).
    pub start: bool,
    /// The suite's: nextest's binary id.
    pub suite: usize,
    /// The test's name.
    pub name: usize,
    /// The test process's pid (at the start).
    pub pid: Option<usize>,
    /// The result (`pass`, `fail`; at the end).
    pub result: Option<usize>,
    /// The duration in nanoseconds (at the end).
    pub duration: Option<usize>,
}

impl AttemptProbe {
    /// The layout of nextest's probe `name` with `args` arguments, if
    /// known.
    pub fn nextest(name: &str, args: usize) -> Option<AttemptProbe> {
        let start = |suite, pid| AttemptProbe {
            start: true,
            suite,
            name: suite + 1,
            pid,
            result: None,
            duration: None,
        };
        let done = |suite| AttemptProbe {
            start: false,
            suite,
            name: suite + 1,
            pid: None,
            result: Some(suite + 2),
            duration: Some(suite + 3),
        };
        match (name, args) {
            ("test-attempt-start", 5) => Some(start(2, Some(4))),
            ("test-attempt-start", 3) => Some(start(1, None)),
            ("test-attempt-done", 6) => Some(done(2)),
            ("test-attempt-done", 5) => Some(done(1)),
            _ => None,
        }
    }

    /// Bit i set where argument i is text: the suite, name and result.
    pub fn strings(&self) -> u32 {
        [Some(self.suite), Some(self.name), self.result]
            .into_iter()
            .flatten()
            .fold(0, |mask, i| mask | 1 << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_of_nextest_are_known() {
        let start = AttemptProbe::nextest("test-attempt-start", 5).unwrap();
        assert_eq!((start.suite, start.name, start.pid), (2, 3, Some(4)));
        assert_eq!(start.strings(), 0b1100);
        let done = AttemptProbe::nextest("test-attempt-done", 6).unwrap();
        assert_eq!((done.result, done.duration), (Some(4), Some(5)));
        assert_eq!(done.strings(), 0b11100);
        let old = AttemptProbe::nextest("test-attempt-start", 3).unwrap();
        assert_eq!((old.suite, old.name, old.pid), (1, 2, None));
        assert_eq!(AttemptProbe::nextest("test-attempt-slow", 5), None);
        assert_eq!(AttemptProbe::nextest("test-attempt-done", 9), None);
    }
}
