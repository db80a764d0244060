//! Kernel records (the layouts of `src/bpf/proctrace.h`) into the event model.

use std::mem::size_of;

use plain::Plain;

use crate::bpf::types::{event_header, event_kind, exec_event, exit_event, fork_event, id_event};
use crate::event::{shell_join, Exec, Exit, Fork, Record, SetPgid, SetSid};

// SAFETY: plain C structs of integers, valid for any bit pattern.
unsafe impl Plain for event_header {}
unsafe impl Plain for fork_event {}
unsafe impl Plain for exec_event {}
unsafe impl Plain for exit_event {}
unsafe impl Plain for id_event {}

/// A kernel record that does not match the shared layout; only a build of
/// mismatched C and Rust halves could produce one.
#[derive(Debug, thiserror::Error)]
#[error("malformed kernel record ({len} bytes, kind {kind})")]
pub struct Malformed {
    len: usize,
    kind: u32,
}

/// Decodes one record; `start` is the monotonic time the recording began,
/// so timestamps come out relative to it. `seq` is left 0 for the caller.
pub fn decode(data: &[u8], start: u64) -> Result<Record, Malformed> {
    let header: event_header = copy(data).ok_or(Malformed {
        len: data.len(),
        kind: 0,
    })?;
    let malformed = || Malformed {
        len: data.len(),
        kind: header.kind,
    };
    let timestamp = header.timestamp.saturating_sub(start);
    let pid = header.pid;
    let record = match event_kind(header.kind) {
        event_kind::EVENT_FORK => {
            let e: fork_event = copy(data).ok_or_else(malformed)?;
            Record::Fork(Fork {
                seq: 0,
                timestamp,
                parent_pid: e.parent_pid,
                child_pid: pid,
                parent_pgid: e.parent_pgid,
                child_pgid: Some(e.child_pgid),
                child_sid: Some(e.child_sid),
                child_ppid: (e.child_ppid != e.parent_pid).then_some(e.child_ppid),
            })
        }
        event_kind::EVENT_EXEC => {
            let e: exec_event = copy(data).ok_or_else(malformed)?;
            let (filename, argv) =
                exec_strings(&data[size_of::<exec_event>()..], &e).ok_or_else(malformed)?;
            Record::Exec(Exec {
                seq: 0,
                timestamp,
                pid,
                ppid: e.ppid,
                pgid: e.pgid,
                sid: Some(e.sid),
                filename,
                cmdline: shell_join(&argv),
                argv,
                argv_truncated: e.args_truncated != 0,
            })
        }
        event_kind::EVENT_EXIT => {
            let e: exit_event = copy(data).ok_or_else(malformed)?;
            let (exit_code, signal, core_dumped) = split_status(e.status);
            Record::Exit(Exit {
                seq: 0,
                timestamp,
                pid,
                ppid: e.ppid,
                pgid: e.pgid,
                sid: Some(e.sid),
                exit_code,
                signal,
                core_dumped,
            })
        }
        event_kind::EVENT_SETSID => {
            let e: id_event = copy(data).ok_or_else(malformed)?;
            Record::SetSid(SetSid {
                seq: 0,
                timestamp,
                pid,
                sid: e.id,
            })
        }
        event_kind::EVENT_SETPGID => {
            let e: id_event = copy(data).ok_or_else(malformed)?;
            Record::SetPgid(SetPgid {
                seq: 0,
                timestamp,
                pid,
                pgid: e.id,
            })
        }
        _ => return Err(malformed()),
    };
    Ok(record)
}

/// Copies a record out of the buffer: perf samples are only 4-byte aligned,
/// so the bytes cannot be borrowed as the struct in place.
fn copy<T: Plain + Default>(data: &[u8]) -> Option<T> {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, data).ok()?;
    Some(value)
}

fn exec_strings(tail: &[u8], e: &exec_event) -> Option<(String, Vec<String>)> {
    let name_len = e.filename_len as usize;
    let name = tail.get(..name_len)?;
    let args = tail.get(name_len..name_len + e.args_len as usize)?;
    let name = name.strip_suffix(&[0]).unwrap_or(name);
    let args = args.strip_suffix(&[0]).unwrap_or(args);
    let argv = if args.is_empty() {
        Vec::new()
    } else {
        args.split(|&b| b == 0).map(lossy).collect()
    };
    Some((lossy(name), argv))
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

    fn bytes_of<T: Plain>(value: &T) -> Vec<u8> {
        // SAFETY: Plain types have no padding invariants to uphold when read.
        unsafe { plain::as_bytes(value) }.to_vec()
    }

    #[test]
    fn statuses_split_like_wait() {
        assert_eq!(split_status(3 << 8), (Some(3), None, false));
        assert_eq!(split_status(9), (None, Some(9), false));
        assert_eq!(split_status(0x80 | 11), (None, Some(11), true));
    }

    #[test]
    fn exec_records_carry_filename_and_every_argument() {
        let mut fixed = exec_event::default();
        fixed.header.kind = event_kind::EVENT_EXEC.0;
        fixed.header.pid = 42;
        fixed.header.timestamp = 1_500;
        let name = b"/bin/echo\0";
        let args = b"echo\0\0two words\0";
        fixed.filename_len = name.len() as u32;
        fixed.args_len = args.len() as u32;
        let mut data = bytes_of(&fixed);
        data.extend_from_slice(name);
        data.extend_from_slice(args);

        let Record::Exec(exec) = decode(&data, 500).unwrap() else {
            panic!("not an exec")
        };
        assert_eq!(exec.timestamp, 1_000);
        assert_eq!(exec.filename, "/bin/echo");
        assert_eq!(exec.argv, ["echo", "", "two words"]);
        assert_eq!(exec.cmdline, "echo '' 'two words'");
    }

    #[test]
    fn short_records_are_errors_not_panics() {
        assert!(decode(&[1, 0, 0], 0).is_err());
        let header = event_header {
            kind: event_kind::EVENT_FORK.0,
            ..Default::default()
        };
        assert!(decode(&bytes_of(&header), 0).is_err());
    }
}
