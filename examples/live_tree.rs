//! Prints the process tree as it grows: each new process indented under
//! its parent, each exec and exit as it happens.
//!
//! `sudo cargo run --example live_tree -- sh -c 'sleep 1 & ls | wc -l; wait'`

use std::collections::HashMap;

use proctrace::event::{Pid, Record};
use proctrace::recorder::Recorder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let command: Vec<String> = std::env::args().skip(1).collect();
    if command.is_empty() {
        return Err("usage: live_tree CMD [ARGS...]".into());
    }
    let recording = Recorder::command(command).start()?;
    let mut depth: HashMap<Pid, usize> = HashMap::from([(recording.root_pid(), 0)]);
    for record in recording.events() {
        let pid = record.pid().unwrap_or_default();
        let ms = record.timestamp().unwrap_or_default() as f64 / 1e6;
        let line = match &record {
            Record::Fork(fork) => {
                let level = depth.get(&fork.parent_pid).map_or(0, |d| d + 1);
                depth.insert(fork.child_pid, level);
                format!("+ {pid} (from {})", fork.parent_pid)
            }
            Record::Exec(exec) => format!("  {pid} runs {}", exec.cmdline),
            Record::Exit(exit) => match (exit.exit_code, exit.signal) {
                (_, Some(signal)) => format!("- {pid} killed by signal {signal}"),
                (code, None) => format!("- {pid} exited {}", code.unwrap_or_default()),
            },
            Record::SetSid(s) => format!("  {pid} leads session {}", s.sid),
            Record::SetPgid(g) => format!("  {pid} joins group {}", g.pgid),
            Record::Lingering(l) => format!("  {pid} lingers, {} fds open", l.fds.len()),
            // Header, trailer, and kinds of record newer than this example.
            _ => continue,
        };
        let indent = "  ".repeat(depth.get(&pid).copied().unwrap_or(0));
        println!("{ms:>10.3} ms {indent}{line}");
    }
    recording.finish()?;
    Ok(())
}
