//! Which failures made the run fail, apart from those expected: a
//! configure probe or a `grep -q` fails, and its parent carries on.

use serde::Serialize;

use crate::processes::{Outcome, Processes};

/// The failed processes, in two kinds, each in the order they started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Failures {
    /// Failures on the way to the command's own status: the process is
    /// the command, or its parent's failure, itself propagated, came from
    /// it (see [`failures`]), or its parent never said how it ended.
    pub propagated: Vec<usize>,
    /// Failures the parent carried on from: it exited 0, failed for
    /// another reason, or had exited before and never waited.
    pub handled: Vec<usize>,
}

/// Sorts every failed process into propagated or handled. A failure of a
/// process whose parent failed too reached the parent's status when it is
/// the last failure the parent saw before it exited (`make` exits 2 after
/// the recipe that failed), or when the parent passed its status on
/// (`exit $?`, `set -e`, a signal's 128+N); a `grep -q` that failed
/// before that is carried on from, even though the parent failed later.
pub fn failures(processes: &Processes) -> Failures {
    let end = processes.end();
    let mut propagated = vec![false; processes.len()];
    let mut found = Failures::default();
    // Parents before their children: a parent's kind is known first.
    for (index, _) in processes.depth_first() {
        let process = processes.get(index);
        if !process.outcome().failed() {
            continue;
        }
        let reaches_up = match process.parent {
            None => true,
            Some(parent) => {
                let parent_process = processes.get(parent);
                let waited = parent_process
                    .exit
                    .is_none_or(|e| e.timestamp >= process.end(end));
                let unknown = matches!(
                    parent_process.outcome(),
                    Outcome::Ended | Outcome::Running | Outcome::CutOff
                );
                waited
                    && (unknown
                        || propagated[parent]
                            && (passed_on(process.outcome(), parent_process.outcome())
                                || last_failure(processes, parent) == Some(index)))
            }
        };
        propagated[index] = reaches_up;
        let list = if reaches_up {
            &mut found.propagated
        } else {
            &mut found.handled
        };
        list.push(index);
    }
    let start = |&i: &usize| (processes.get(i).start(), i);
    found.propagated.sort_by_key(start);
    found.handled.sort_by_key(start);
    found
}

/// Whether a parent's status is its child's, passed on.
fn passed_on(child: Outcome, parent: Outcome) -> bool {
    match (child, parent) {
        (Outcome::Killed { signal, .. }, Outcome::Exited(code)) => code == 128 + signal,
        (child, parent) => child == parent,
    }
}

/// The child of `parent` that failed last before the parent exited.
fn last_failure(processes: &Processes, parent: usize) -> Option<usize> {
    let exit = processes.get(parent).exit?.timestamp;
    let ended = |child: usize| processes.get(child).exit.map(|e| e.timestamp);
    processes
        .get(parent)
        .children
        .iter()
        .filter(|&c| processes.get(c).outcome().failed() && ended(c).is_some_and(|t| t <= exit))
        .max_by_key(|&c| (ended(c), c))
}
