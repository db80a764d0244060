//! Who outside the tree holds what a process of the tree waits on: the
//! database or daemon a test talks to, the CI runner's end of a pipe.
//! Only asked for when no process of the tree holds it, since it means
//! reading the descriptors of every other process of the machine.

use std::collections::{HashMap, HashSet};
use std::fs;

use super::process::{life, Life};
use crate::event::{Outsider, Pid};
use crate::text::{shell_join, shorten_command};

/// Characters of an outsider's command line kept.
const COMMAND_WIDTH: usize = 80;

/// The processes of the machine, apart from `skip` (the tree, proctrace),
/// that hold each of `targets` (`/proc/PID/fd` link targets such as
/// `socket:[123]` or `pipe:[45]`), in pid order.
pub(super) fn holding(
    targets: &HashSet<String>,
    skip: &HashSet<Pid>,
) -> HashMap<String, Vec<Outsider>> {
    let mut found: HashMap<String, Vec<Outsider>> = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return found;
    };
    let mut pids: Vec<Pid> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid| !skip.contains(pid))
        .collect();
    pids.sort_unstable();
    for pid in pids {
        for target in held(pid, targets) {
            let command = command(pid);
            found
                .entry(target)
                .or_default()
                .push(Outsider { pid, command });
        }
    }
    found
}

/// `pid`, named, if it is still alive.
pub(super) fn outsider(pid: Pid) -> Option<Outsider> {
    (life(pid) != Life::Gone).then(|| Outsider {
        pid,
        command: command(pid),
    })
}

/// Which of `targets` `pid` holds, each once.
fn held(pid: Pid, targets: &HashSet<String>) -> HashSet<String> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
        .map(|link| link.to_string_lossy().into_owned())
        .filter(|link| targets.contains(link))
        .collect()
}

/// What `pid` runs, shortened: its command line, else its name.
fn command(pid: Pid) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv: Vec<&[u8]> = raw.split(|&b| b == 0).filter(|a| !a.is_empty()).collect();
    let line = if argv.is_empty() {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        format!("[{}]", comm.trim_end())
    } else {
        shell_join(&argv)
    };
    shorten_command(&line, Some(COMMAND_WIDTH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_of_a_pipe_outside_the_tree_is_named() {
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(std::process::Stdio::from(std::fs::File::from(write_end)))
            .spawn()
            .unwrap();
        let pid = child.id() as Pid;
        // spawn returns once the child has swapped in its new memory, a
        // moment before the kernel writes its arguments there.
        while fs::read(format!("/proc/{pid}/cmdline")).unwrap().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let me = std::process::id() as Pid;
        let target = fs::read_link(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            read_end.as_raw_fd()
        }))
        .unwrap()
        .to_string_lossy()
        .into_owned();
        let found = holding(&HashSet::from([target.clone()]), &HashSet::from([me]));
        child.kill().unwrap();
        child.wait().unwrap();
        let holders = &found[&target];
        assert_eq!(holders.len(), 1, "{found:?}");
        assert_eq!(holders[0].pid, pid);
        assert_eq!(holders[0].command, "sleep 30");
    }
}
