//! The lifecycle records of the events buffer (fork, exec, exit, setsid,
//! setpgid: the layouts of `src/bpf/proctrace.h`) into the event model.

use std::collections::BTreeMap;
use std::mem::size_of;

use super::{copy, Malformed};
use crate::bpf::types::{
    event_header, event_kind, exec_event, exit_event, fd_entry, fork_event, id_event, resources,
};
use crate::event::{
    Exec, Exit, Fd, FdKind, Fork, Pid, RawBytes, Record, Resources, SetPgid, SetSid, UsedBefore,
};
use crate::text::shell_join;

/// Decodes one record; `start` is the monotonic time the recording began,
/// so timestamps come out relative to it. `seq` is left 0 for the caller.
/// Of an exec's environment, only the variables named in `env_names` are
/// kept: the rest is never copied out of `data`.
pub fn decode(data: &[u8], start: u64, env_names: &[String]) -> Result<Record, Malformed> {
    let header: event_header = copy(data).ok_or(Malformed::new(data.len(), 0))?;
    let at = At {
        timestamp: header.timestamp.saturating_sub(start),
        pid: header.pid,
    };
    let record = match event_kind(header.kind) {
        event_kind::EVENT_FORK => copy(data).map(|e| fork(&e, at)),
        event_kind::EVENT_EXEC => copy(data).and_then(|e| exec(&e, data, env_names, at)),
        event_kind::EVENT_EXIT => copy(data).map(|e| exit(&e, at)),
        event_kind::EVENT_SETSID => copy(data).map(|e: id_event| {
            Record::SetSid(SetSid {
                seq: 0,
                timestamp: at.timestamp,
                pid: at.pid,
                sid: e.id,
            })
        }),
        event_kind::EVENT_SETPGID => copy(data).map(|e: id_event| {
            Record::SetPgid(SetPgid {
                seq: 0,
                timestamp: at.timestamp,
                pid: at.pid,
                pgid: e.id,
            })
        }),
        _ => None,
    };
    record.ok_or(Malformed::new(data.len(), header.kind))
}

/// When and in which process a record happened, from its header.
#[derive(Clone, Copy)]
struct At {
    /// Nanoseconds since the recording started.
    timestamp: u64,
    pid: Pid,
}

fn fork(e: &fork_event, at: At) -> Record {
    Record::Fork(Fork {
        seq: 0,
        timestamp: at.timestamp,
        parent_pid: e.parent_pid,
        child_pid: at.pid,
        parent_pgid: e.parent_pgid,
        child_pgid: Some(e.child_pgid),
        child_sid: Some(e.child_sid),
        child_ppid: (e.child_ppid != e.parent_pid).then_some(e.child_ppid),
    })
}

/// An exec: its fixed part `e`, then in `data` after it the filename,
/// the arguments, the environment window and the fds' paths.
fn exec(e: &exec_event, data: &[u8], env_names: &[String], at: At) -> Option<Record> {
    let tail = &data[size_of::<exec_event>()..];
    let (filename, args) = exec_strings(tail, e)?;
    let (filename, filename_raw) = RawBytes::text(filename);
    let (argv, argv_raw) = RawBytes::words(args.iter().copied());
    let env_at = (e.filename_len + e.args_len) as usize;
    let env_window = tail.get(env_at..env_at + e.env_len as usize)?;
    let env = kept_env(env_window, e.env_truncated != 0, env_names);
    let paths_at = env_at + e.env_len as usize;
    let fds = exec_fds(tail.get(paths_at..)?, e)?;
    Some(Record::Exec(Exec {
        seq: 0,
        timestamp: at.timestamp,
        pid: at.pid,
        ppid: e.ppid,
        pgid: e.pgid,
        sid: Some(e.sid),
        filename,
        filename_raw,
        cmdline: shell_join(&args),
        argv,
        argv_raw,
        argv_truncated: e.args_truncated != 0,
        fds,
        fds_truncated: e.fds_truncated != 0,
        env,
        used_before: Some(UsedBefore {
            cpu_ns: e.cpu_ns,
            max_rss_bytes: e.max_rss_pages.saturating_mul(page_size()),
        }),
    }))
}

fn exit(e: &exit_event, at: At) -> Record {
    let (exit_code, signal, core_dumped) = split_status(e.status);
    Record::Exit(Exit {
        seq: 0,
        timestamp: at.timestamp,
        pid: at.pid,
        ppid: e.ppid,
        pgid: e.pgid,
        sid: Some(e.sid),
        exit_code,
        signal,
        core_dumped,
        resources: Some(decode_resources(&e.resources)),
    })
}

/// The filename and the arguments of an exec, as the bytes they are.
fn exec_strings<'a>(tail: &'a [u8], e: &exec_event) -> Option<(&'a [u8], Vec<&'a [u8]>)> {
    let name_len = e.filename_len as usize;
    let name = tail.get(..name_len)?;
    let args = tail.get(name_len..name_len + e.args_len as usize)?;
    let name = name.strip_suffix(&[0]).unwrap_or(name);
    let args = args.strip_suffix(&[0]).unwrap_or(args);
    let argv = if args.is_empty() {
        Vec::new()
    } else {
        args.split(|&b| b == 0).collect()
    };
    Some((name, argv))
}

/// The `NAME=value` strings of an environment window whose name is one of
/// `names`. A `truncated` window is the end of the environment, so its
/// first string is a fragment of a variable and is never taken for one.
fn kept_env(window: &[u8], truncated: bool, names: &[String]) -> BTreeMap<String, String> {
    let mut strings = window.split(|&b| b == 0);
    if truncated {
        strings.next();
    }
    strings
        .filter_map(|string| {
            let eq = string.iter().position(|&b| b == b'=')?;
            let name = names.iter().find(|n| n.as_bytes() == &string[..eq])?;
            Some((name.clone(), lossy(&string[eq + 1..])))
        })
        .collect()
}

/// The fd entries of an exec, each with its path from the path area.
fn exec_fds(paths: &[u8], e: &exec_event) -> Option<Vec<Fd>> {
    let entries = e.fds.get(..e.fd_count as usize)?;
    let mut at = 0;
    entries
        .iter()
        .map(|entry| {
            let names = paths.get(at..at + usize::from(entry.path_len))?;
            at += usize::from(entry.path_len);
            Some(fd(entry, names))
        })
        .collect()
}

/// One fd; `names` are its path's components from the leaf up, each
/// NUL-terminated, as the kernel side walked them.
fn fd(entry: &fd_entry, names: &[u8]) -> Fd {
    let mut components: Vec<String> = names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(lossy)
        .collect();
    components.reverse();
    let cut = if entry.path_truncated != 0 { "..." } else { "" };
    let kind = FdKind::of(entry.mode, split_dev(entry.rdev).0);
    // Named the way /proc/PID/fd names them.
    let target = match kind {
        FdKind::Pipe => format!("pipe:[{}]", entry.ino),
        FdKind::Socket => format!("socket:[{}]", entry.ino),
        FdKind::Other => format!("anon_inode:{}", components.join("/")),
        _ => format!("{cut}/{}", components.join("/")),
    };
    Fd {
        fd: entry.fd,
        kind,
        target,
        dev: user_dev(entry.dev),
        ino: entry.ino,
    }
}

/// The kernel's figures as getrusage() reports them: the precise CPU time
/// split by the tick-sampled user/system ratio (cputime_adjust), pages as
/// bytes.
fn decode_resources(r: &resources) -> Resources {
    let ticks = r.user_ticks_ns.saturating_add(r.system_ticks_ns);
    let user_ns = if ticks == 0 {
        r.cpu_ns
    } else {
        (u128::from(r.cpu_ns) * u128::from(r.user_ticks_ns) / u128::from(ticks)) as u64
    };
    let accounted = |bytes: u64| (bytes != u64::MAX).then_some(bytes);
    Resources {
        cpu_ns: r.cpu_ns,
        user_ns,
        system_ns: r.cpu_ns - user_ns,
        max_rss_bytes: r.max_rss_pages.saturating_mul(page_size()),
        read_bytes: accounted(r.read_bytes),
        write_bytes: accounted(r.write_bytes).map(crate::event::floor_wrapped),
        voluntary_switches: r.voluntary_switches,
        involuntary_switches: r.involuntary_switches,
        partial: r.threads_skipped != 0,
    }
}

fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64)
}

/// The kernel's device numbers are major << 20 | minor.
fn split_dev(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

/// The device number as stat(2) reports it, so it compares with /proc.
fn user_dev(dev: u32) -> u64 {
    let (major, minor) = split_dev(dev);
    libc::makedev(major, minor)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Splits a wait(2) status into (exit code, signal, core dumped).
fn split_status(status: i32) -> (Option<i32>, Option<i32>, bool) {
    let signal = status & 0x7f;
    if signal == 0 {
        (Some((status >> 8) & 0xff), None, false)
    } else {
        (None, Some(signal), status & 0x80 != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::wire::bytes_of;

    #[test]
    fn statuses_split_like_wait() {
        assert_eq!(split_status(3 << 8), (Some(3), None, false));
        assert_eq!(split_status(9), (None, Some(9), false));
        assert_eq!(split_status(0x80 | 11), (None, Some(11), true));
    }

    /// An exec record as the kernel writes it: the fixed part, then the
    /// NUL-terminated filename and arguments.
    fn exec_record(timestamp: u64, name: &[u8], args: &[u8]) -> Vec<u8> {
        exec_record_with_env(timestamp, name, args, b"", false)
    }

    fn exec_record_with_env(
        timestamp: u64,
        name: &[u8],
        args: &[u8],
        env: &[u8],
        env_truncated: bool,
    ) -> Vec<u8> {
        let mut fixed = exec_event::default();
        fixed.header.kind = event_kind::EVENT_EXEC.0;
        fixed.header.pid = 42;
        fixed.header.timestamp = timestamp;
        fixed.filename_len = name.len() as u32;
        fixed.args_len = args.len() as u32;
        fixed.env_len = env.len() as u32;
        fixed.env_truncated = env_truncated.into();
        let mut data = bytes_of(&fixed);
        data.extend_from_slice(name);
        data.extend_from_slice(args);
        data.extend_from_slice(env);
        data
    }

    fn env_of(data: &[u8], names: &[&str]) -> BTreeMap<String, String> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let Record::Exec(exec) = decode(data, 0, &names).unwrap() else {
            panic!("not an exec")
        };
        exec.env
    }

    #[test]
    fn only_the_named_variables_are_kept() {
        let env = b"SECRET=hunter2\0PYTEST_CURRENT_TEST=t.py::a (call)\0PYTEST=x=y\0";
        let data = exec_record_with_env(0, b"/bin/true\0", b"true\0", env, false);
        let kept = env_of(&data, &["PYTEST_CURRENT_TEST", "PYTEST", "HOME"]);
        let expected = [
            ("PYTEST".to_string(), "x=y".to_string()),
            (
                "PYTEST_CURRENT_TEST".to_string(),
                "t.py::a (call)".to_string(),
            ),
        ];
        assert_eq!(kept, BTreeMap::from(expected));
        assert_eq!(env_of(&data, &[]), BTreeMap::new());
    }

    #[test]
    fn the_cut_first_string_of_a_truncated_window_is_not_a_variable() {
        // The window starts inside `XNAME=secret`: its tail must not read
        // as NAME=secret.
        let data = exec_record_with_env(0, b"/bin/true\0", b"", b"NAME=secret\0NAME=ok\0", true);
        let kept = env_of(&data, &["NAME"]);
        assert_eq!(
            kept,
            BTreeMap::from([("NAME".to_string(), "ok".to_string())])
        );
    }

    #[test]
    fn exec_records_carry_filename_and_every_argument() {
        let data = exec_record(1_500, b"/bin/echo\0", b"echo\0\0two words\0");
        let Record::Exec(exec) = decode(&data, 500, &[]).unwrap() else {
            panic!("not an exec")
        };
        assert_eq!(exec.timestamp, 1_000);
        assert_eq!(exec.filename, "/bin/echo");
        assert_eq!(exec.argv, ["echo", "", "two words"]);
        assert_eq!(exec.cmdline, "echo '' 'two words'");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_exactly() {
        let data = exec_record(0, b"/tmp/\xff\n\0", b"ok\0\xc3(\x1b\0\xe6\x97\0");
        let Record::Exec(exec) = decode(&data, 0, &[]).unwrap() else {
            panic!("not an exec")
        };
        assert_eq!(exec.filename, "/tmp/\u{fffd}\n");
        assert_eq!(exec.filename_bytes(), b"/tmp/\xff\n");
        assert_eq!(exec.argv, ["ok", "\u{fffd}(\x1b", "\u{fffd}"]);
        let exact: [&[u8]; 3] = [b"ok", b"\xc3(\x1b", b"\xe6\x97"];
        assert_eq!(exec.argv_bytes(), exact);
        assert_eq!(exec.cmdline, r"ok $'\303(\033' $'\346\227'");

        // Written and read back, the recording still holds every byte.
        let line = serde_json::to_string(&Record::Exec(exec.clone())).unwrap();
        assert!(
            line.contains(r#""argv_raw":{"1":"c3281b","2":"e697"}"#),
            "{line}"
        );
        assert!(
            line.contains(r#""filename_raw":"2f746d702fff0a""#),
            "{line}"
        );
        assert_eq!(
            serde_json::from_str::<Record>(&line).unwrap(),
            Record::Exec(exec)
        );
    }

    #[test]
    fn short_records_are_errors_not_panics() {
        assert!(decode(&[1, 0, 0], 0, &[]).is_err());
        let header = event_header {
            kind: event_kind::EVENT_FORK.0,
            ..Default::default()
        };
        assert!(decode(&bytes_of(&header), 0, &[]).is_err());
    }
}
