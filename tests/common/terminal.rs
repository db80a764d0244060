//! A real terminal for the tests of what proctrace draws on one: a tmux
//! server of the test's own, its pane read back as text.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// A tmux server of its own, so that no other session is touched.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn start(width: u16, height: u16, command: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: format!("proctrace-test-{}-{n}", std::process::id()),
        };
        let (width, height) = (width.to_string(), height.to_string());
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &width,
            "-y",
            &height,
            command,
        ]);
        tmux
    }

    pub fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm-256color")
            .output()
            .expect("running tmux");
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    }

    /// The pane's rows as they are on screen.
    pub fn screen(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "t"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits (bounded) until `ready` holds for the screen; returns it.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

impl Tmux {
    /// Types `keys` (tmux key names) into the pane.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend(keys);
        self.run(&args);
    }
}

/// The recording at `path` of `command`, made outside the harness (in a
/// terminal), as a [`Run`] to check.
pub fn finished_run(dir: tempfile::TempDir, path: &Path, command: &[&str]) -> Run {
    let text = std::fs::read_to_string(path).unwrap();
    Run {
        records: parse_lines(&text),
        text,
        dir,
        command: strings(command),
        opts: Opts::new(Mode::Ring),
        status: std::process::ExitStatus::from_raw(0),
        stderr: String::new(),
    }
}
