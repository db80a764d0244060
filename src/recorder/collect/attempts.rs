//! Test attempts from a runner's probes (see [`runner`]): each start hit
//! opens one, its done hit closes it; at the end they are the
//! recording's `TestAttempt` records, in the order they started.
//!
//! [`runner`]: crate::recorder::probes::runner

use std::collections::HashMap;

use crate::event::{ArgValue, Pid, TestAttempt};
use crate::recorder::probes::AttemptProbe;
use crate::recorder::wire::Hit;

/// The attempts told so far.
pub(super) struct Attempts {
    probes: HashMap<u32, AttemptProbe>,
    /// Started and not yet done, by runner, suite and name.
    open: HashMap<(Pid, String, String), usize>,
    told: Vec<TestAttempt>,
}

impl Attempts {
    pub fn new(probes: HashMap<u32, AttemptProbe>) -> Attempts {
        Attempts {
            probes,
            open: HashMap::new(),
            told: Vec::new(),
        }
    }

    /// Follows one hit, in time order.
    pub fn hit(&mut self, hit: &Hit) {
        let Some(probe) = self.probes.get(&hit.probe) else {
            return;
        };
        let text = |at: usize| match hit.args.get(at) {
            Some(ArgValue::Text(text)) => Some(text.clone()),
            _ => None,
        };
        let number = |at: Option<usize>| match hit.args.get(at?) {
            Some(ArgValue::Number(n)) => Some(*n),
            _ => None,
        };
        let (Some(suite), Some(name)) = (text(probe.suite), text(probe.name)) else {
            return;
        };
        let (pid, at) = (hit.sample.pid, hit.sample.timestamp);
        let key = (pid, suite.clone(), name.clone());
        let unknown = TestAttempt {
            pid,
            test_pid: None,
            suite,
            name,
            start: None,
            end: None,
            result: None,
            duration_ns: None,
        };
        if probe.start {
            self.open.insert(key, self.told.len());
            self.told.push(TestAttempt {
                test_pid: number(probe.pid).and_then(|n| Pid::try_from(n).ok()),
                start: Some(at),
                ..unknown
            });
            return;
        }
        // A done without its start: the test started before the recording.
        let index = self.open.remove(&key).unwrap_or_else(|| {
            self.told.push(unknown);
            self.told.len() - 1
        });
        let attempt = &mut self.told[index];
        attempt.end = Some(at);
        attempt.result = probe.result.and_then(text);
        attempt.duration_ns = number(probe.duration).and_then(|n| u64::try_from(n).ok());
    }

    /// The attempts, in the order they were told.
    pub fn into_records(self) -> Vec<TestAttempt> {
        self.told
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::wire::Sample;

    fn hit(probe: u32, at: u64, args: Vec<ArgValue>) -> Hit {
        Hit {
            sample: Sample {
                pid: 10,
                tid: 10,
                timestamp: at,
                kernel: Vec::new(),
                regs: [0; 4],
                stack: Vec::new(),
                python: Vec::new(),
                python_cut: false,
            },
            probe,
            args,
        }
    }

    #[test]
    fn a_start_and_its_done_are_one_attempt() {
        let start = AttemptProbe::nextest("test-attempt-start", 5).unwrap();
        let done = AttemptProbe::nextest("test-attempt-done", 6).unwrap();
        let mut attempts = Attempts::new(HashMap::from([(0, start), (1, done)]));
        let text = |s: &str| ArgValue::Text(s.into());
        let json = ArgValue::Number(0x1000);
        let id = ArgValue::Number(0x2000);
        let args = |rest: Vec<ArgValue>| [vec![json.clone(), id.clone()], rest].concat();
        attempts.hit(&hit(
            0,
            5,
            args(vec![text("k"), text("t::a"), ArgValue::Number(42)]),
        ));
        attempts.hit(&hit(
            0,
            6,
            args(vec![text("k"), text("t::b"), ArgValue::Number(43)]),
        ));
        let end = vec![text("k"), text("t::a"), text("fail"), ArgValue::Number(900)];
        attempts.hit(&hit(1, 9, args(end)));
        let end = vec![text("k"), text("t::c"), text("pass"), ArgValue::Number(1)];
        attempts.hit(&hit(1, 9, args(end)));
        let told = attempts.into_records();
        assert_eq!(told.len(), 3);
        assert_eq!(told[0].test_pid, Some(42));
        assert_eq!((told[0].start, told[0].end), (Some(5), Some(9)));
        assert_eq!(told[0].result.as_deref(), Some("fail"));
        assert_eq!(told[0].duration_ns, Some(900));
        assert_eq!((told[1].name.as_str(), told[1].end), ("t::b", None));
        assert_eq!((told[2].name.as_str(), told[2].start), ("t::c", None));
    }
}
