//! The perf maps proctrace had Node write: with stacks, the command starts
//! with `--perf-basic-prof-only-functions` in NODE_OPTIONS, and each Node
//! process of the tree leaves `/tmp/perf-PID.map` behind (hundreds of KiB
//! to megabytes each, one per process of a suite that starts thousands).
//! Once the recording has named its frames from them, the maps of the
//! Node processes that exited are removed; those of a process still
//! running, or that the user asked for (a flag of their own in
//! NODE_OPTIONS), stay.

use std::collections::HashSet;
use std::path::Path;

use crate::event::Pid;
use crate::recorder::wire::Mapping;

#[derive(Default)]
pub(super) struct NodeMaps {
    running: HashSet<Pid>,
    exited: Vec<Pid>,
}

impl NodeMaps {
    /// A process mapped `mapping`: Node's executable makes it one of
    /// Node's.
    pub(super) fn mapped(&mut self, mapping: &Mapping) {
        let name = Path::new(&mapping.path).file_name();
        if name.is_some_and(|name| name == "node" || name == "nodejs") {
            self.running.insert(mapping.pid);
        }
    }

    pub(super) fn exit(&mut self, pid: Pid) {
        if self.running.remove(&pid) {
            self.exited.push(pid);
        }
    }

    /// Removes the maps of the Node processes that exited.
    pub(super) fn remove(self) {
        for pid in self.exited {
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        }
    }
}
