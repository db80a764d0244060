//! Processes and mounts a test makes and must clean up: its background
//! commands, a tmpfs, and the descendants it may leave.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use proctrace::event::Pid;

use super::*;

/// Every descendant of `pid` with its comm, from /proc.
pub fn descendants(pid: Pid) -> Vec<(Pid, String)> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                let comm = fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
                found.push((child, comm.trim().to_string()));
                todo.push(child);
            }
        }
    }
    found
}

/// Kills a process of ours by pid (SIGKILL) if it still runs `comm`.
pub fn kill_if(pid: Pid, comms: &[&str]) {
    let Ok(comm) = fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return;
    };
    if comms.contains(&comm.trim()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A background process group of ours, killed (by its pgid) on drop.
pub struct Background(pub Child);

impl Background {
    /// Starts `sh -c script` in a process group of its own.
    pub fn sh(script: &str) -> Self {
        Self::spawn(
            Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::null())
                .stdout(Stdio::null()),
        )
    }

    /// Starts `command` in a process group of its own.
    pub fn spawn(command: &mut Command) -> Self {
        use std::os::unix::process::CommandExt;
        Background(command.process_group(0).spawn().unwrap())
    }

    pub fn pid(&self) -> Pid {
        self.0.id() as Pid
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.0.wait();
    }
}

/// A tmpfs mounted on a temp dir of its own, unmounted on drop (so even
/// when an assertion fails) before the dir goes.
pub struct Tmpfs {
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `options` (e.g. "size=64k"), read-only if asked;
    /// mounting needs root.
    pub fn mount(options: &str, read_only: bool) -> Self {
        require_root();
        use nix::mount::MsFlags;
        let dir = tempfile::tempdir().unwrap();
        let flags = if read_only {
            MsFlags::MS_RDONLY
        } else {
            MsFlags::empty()
        };
        nix::mount::mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            flags,
            Some(options),
        )
        .unwrap_or_else(|e| panic!("mounting a tmpfs on {}: {e}", dir.path().display()));
        Tmpfs { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily, should a process of a failed test still hold a file.
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}
