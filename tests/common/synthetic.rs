//! Recordings without recording: synthetic ones of any size, built event
//! by event, and what a recording holds as `proctrace render` reads it.

use std::fs;
use std::path::Path;

use proctrace::event::{Exec, Exit, Fork, Header, Pid, Record, SetPgid, Trailer, FORMAT_VERSION};
use proctrace::processes::Processes;
use proctrace::recording::{Keep, Reader, Recording};

/// Reads the processes of a recording the way `proctrace render` does.
pub fn read(path: &Path) -> Processes {
    let file = std::io::BufReader::new(fs::File::open(path).unwrap());
    let mut reader = Reader::new(file, path.display().to_string());
    Recording::read(&mut reader, Keep::Processes)
        .unwrap()
        .processes
}

/// How many processes the recording at `path` holds.
pub fn process_count(path: &Path) -> usize {
    read(path).len()
}

/// How many processes of the recording at `path` failed.
pub fn failed_count(path: &Path) -> usize {
    let processes = read(path);
    processes.all().filter(|p| p.outcome().failed()).count()
}

/// The pid of the first process that failed.
pub fn first_failed(path: &Path) -> Option<Pid> {
    let processes = read(path);
    let failed = processes.all().find(|p| p.outcome().failed());
    failed.map(|p| p.pid)
}

/// How many processes a search for `text` should find: those whose
/// description, command lines or executed files contain it.
pub fn matching(path: &Path, text: &str) -> usize {
    let processes = read(path);
    (0..processes.len())
        .filter(|&i| {
            let process = processes.get(i);
            processes.describe(i).contains(text)
                || process
                    .execs
                    .iter()
                    .any(|e| e.cmdline().contains(text) || e.filename.contains(text))
        })
        .count()
}

/// Builds a recording event by event, numbering and timing them.
pub struct Synthetic {
    records: Vec<Record>,
    seq: u64,
    now: u64,
}

impl Synthetic {
    pub fn new(root_pid: Pid, command: &[&str]) -> Self {
        let header = Header {
            format_version: FORMAT_VERSION,
            proctrace_version: "0.1.0".into(),
            start_time: "2026-11-21T07:40:00.000000000Z".into(),
            root_pid,
            command: command.iter().map(|s| s.to_string()).collect(),
            kernel: "6.1.0".into(),
            raw: false,
            buffer: Default::default(),
            syscall_hook: None,
            cpus: Some(2),
            cpu_profile: None,
            off_cpu: None,
            probes: Vec::new(),
        };
        Synthetic {
            records: vec![Record::Header(header)],
            seq: 0,
            now: 1_000,
        }
    }

    fn push(&mut self, mut record: Record, step: u64) {
        self.now += step;
        record.set_seq(self.seq);
        self.seq += 1;
        self.records.push(record);
    }

    pub fn fork(&mut self, parent: Pid, child: Pid, pgid: Pid, step: u64) {
        let now = self.now + step;
        self.push(
            Record::Fork(Fork {
                seq: 0,
                timestamp: now,
                parent_pid: parent,
                child_pid: child,
                parent_pgid: pgid,
                child_pgid: Some(pgid),
                child_sid: Some(1),
                child_ppid: None,
            }),
            step,
        );
    }

    pub fn exec(&mut self, pid: Pid, ppid: Pid, pgid: Pid, argv: &[&str], step: u64) {
        let now = self.now + step;
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        self.push(
            Record::Exec(Exec {
                seq: 0,
                timestamp: now,
                pid,
                ppid,
                pgid,
                sid: Some(1),
                filename: format!("/usr/bin/{}", argv[0]),
                filename_raw: None,
                cmdline: proctrace::text::shell_join(&argv),
                argv,
                argv_raw: Default::default(),
                argv_truncated: false,
                fds: Vec::new(),
                fds_truncated: false,
                env: Default::default(),
                used_before: None,
            }),
            step,
        );
    }

    pub fn setpgid(&mut self, pid: Pid, pgid: Pid, step: u64) {
        let now = self.now + step;
        self.push(
            Record::SetPgid(SetPgid {
                seq: 0,
                timestamp: now,
                pid,
                pgid,
            }),
            step,
        );
    }

    pub fn exit(&mut self, pid: Pid, ppid: Pid, pgid: Pid, code: i32, step: u64) {
        let now = self.now + step;
        self.push(
            Record::Exit(Exit {
                seq: 0,
                timestamp: now,
                pid,
                ppid,
                pgid,
                sid: Some(1),
                exit_code: Some(code),
                signal: None,
                core_dumped: false,
                resources: None,
            }),
            step,
        );
    }

    /// Writes the recording with its trailer to `path`.
    pub fn write(mut self, path: &Path) {
        let trailer = Trailer {
            events: self.seq,
            end_timestamp: self.now + 1_000_000,
            ..Trailer::default()
        };
        self.records.push(Record::Trailer(trailer));
        let lines: Vec<String> = self
            .records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        fs::write(path, lines.concat()).unwrap();
    }
}

/// A build-like run of `n` processes: a make that starts one shell per
/// job, each in its own process group running a few compilers; every
/// 97th compiler fails and the last few are still running at the end.
pub fn big_recording(path: &Path, n: usize) {
    const ROOT: Pid = 1000;
    let mut rec = Synthetic::new(ROOT, &["make", "-j8"]);
    rec.exec(ROOT, 999, ROOT, &["make", "-j8"], 0);
    let mut next: Pid = ROOT + 1;
    let mut made = 1;
    let mut job = 0;
    while made < n {
        let shell = next;
        next += 1;
        made += 1;
        rec.fork(ROOT, shell, ROOT, 20_000);
        rec.setpgid(shell, shell, 5_000);
        rec.exec(
            shell,
            ROOT,
            shell,
            &["sh", "-c", &format!("job {job}")],
            10_000,
        );
        let mut compilers = Vec::new();
        for k in 0..8 {
            if made >= n {
                break;
            }
            let cc = next;
            next += 1;
            made += 1;
            let file = format!("src/job{job}/file{k}.c");
            rec.fork(shell, cc, shell, 3_000);
            rec.exec(cc, shell, shell, &["cc", "-O2", "-c", &file], 4_000);
            compilers.push(cc);
        }
        let lingering = made + 10 > n;
        for cc in compilers {
            if !lingering {
                let code = i32::from((cc - ROOT) % 97 == 0);
                rec.exit(cc, shell, shell, code, 150_000);
            }
        }
        if !lingering {
            rec.exit(shell, ROOT, shell, 0, 10_000);
        }
        job += 1;
    }
    rec.exit(ROOT, 999, ROOT, 0, 50_000);
    rec.write(path);
}
