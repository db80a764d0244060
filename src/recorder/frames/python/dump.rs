//! The Python frames of every thread of a snapshot's processes, read from
//! their memory as `py-spy dump` reads them: what a blocked culprit's
//! threads were doing in Python when the tree hung. The kernel's walk
//! serves only threads that run (a sample) or switch (`--off-cpu`); a
//! thread blocked since before either started is reached here, through
//! the interpreter's own list of its threads.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::layout::{may_be_python, word_at, Interpreter, TidAt, PTHREAD_TID};
use crate::bpf::types::{py_flags, py_layout};
use crate::event::{Pid, Snapshot};
use crate::recorder::watch::mapped_now;
use crate::recorder::wire::PyCode;

/// Python processes read per snapshot at the most: each costs a few
/// hundred reads of its memory.
const MOST_PROCESSES: usize = 64;
/// Threads per process, and frames per thread, read at the most.
const MOST_THREADS: usize = 256;
const MOST_FRAMES: usize = 256;
/// Bytes read of a frame (past its last field the layouts read), a code
/// object (past its line table's pointer) and a name; of a line table,
/// all of it up to this.
const FRAME_BYTES: usize = 128;
const CODE_BYTES: usize = 256;
const STRING_BYTES: usize = 256;
const MOST_LINE_BYTES: u64 = 64 << 10;

/// Adds to each thread of `records` that runs CPython its Python frames,
/// and to a process what could not be read of them.
pub(crate) fn dump(records: &mut [Snapshot]) {
    let mut files: HashMap<String, Option<Arc<Interpreter>>> = HashMap::new();
    let mut dumped = 0;
    for record in records {
        let Some((interpreter, layout)) = interpreter_of(record.pid, &mut files) else {
            continue;
        };
        if dumped == MOST_PROCESSES {
            record.notes.push(format!(
                "its Python frames were not read: {MOST_PROCESSES} Python processes were"
            ));
            continue;
        }
        dumped += 1;
        match Walk::open(record.pid, &interpreter, layout) {
            Ok(walk) => walk.fill(record),
            Err(why) => record
                .notes
                .push(format!("its Python frames could not be read: {why}")),
        }
    }
}

/// The interpreter process `pid` has mapped, and its layout there. Only
/// a process whose program is named as an interpreter is looked at: a
/// snapshot of 10,000 sleeps would read as many lists of mappings.
fn interpreter_of(
    pid: Pid,
    files: &mut HashMap<String, Option<Arc<Interpreter>>>,
) -> Option<(Arc<Interpreter>, py_layout)> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let name = exe.file_name()?.to_str()?;
    if !name.starts_with("python") {
        return None;
    }
    mapped_now(pid, 0)
        .into_iter()
        .filter(|m| may_be_python(&m.path))
        .find_map(|m| {
            let interpreter = super::interpreter(files, pid, &m.path)?;
            let layout = interpreter.layout_at(&m)?;
            Some((interpreter, layout))
        })
}

/// One process's memory, read through its interpreter's layout.
struct Walk<'i> {
    pid: Pid,
    memory: File,
    interpreter: &'i Interpreter,
    layout: py_layout,
    /// Code objects read, by address: a recursive function is read once.
    codes: HashMap<u64, Option<PyCode>>,
}

impl<'i> Walk<'i> {
    fn open(pid: Pid, interpreter: &'i Interpreter, layout: py_layout) -> Result<Walk<'i>, String> {
        let memory = File::open(format!("/proc/{pid}/mem")).map_err(|e| e.to_string())?;
        Ok(Walk {
            pid,
            memory,
            interpreter,
            layout,
            codes: HashMap::new(),
        })
    }

    /// Each thread state's frames onto the snapshot's thread of its tid.
    fn fill(mut self, record: &mut Snapshot) {
        let list = self.interpreter.thread_list();
        let first = self
            .word(self.layout.runtime + u64::from(list.interpreters))
            .and_then(|interp| self.word(interp + u64::from(list.threads)));
        let Some(mut tstate) = first else {
            record
                .notes
                .push("its Python threads could not be read: no interpreter listed".into());
            return;
        };
        let mut ns_tids: Option<HashMap<Pid, Pid>> = None;
        let mut untold = 0;
        for _ in 0..MOST_THREADS {
            if tstate == 0 {
                break;
            }
            let tid = self.tid(tstate, list.tid);
            let frames = self.frames(tstate);
            let ours = tid.map(|tid| {
                if record.threads.iter().any(|t| t.tid == tid) {
                    return tid;
                }
                let map = ns_tids.get_or_insert_with(|| ns_tids_of(self.pid));
                map.get(&tid).copied().unwrap_or(tid)
            });
            match record.threads.iter_mut().find(|t| Some(t.tid) == ours) {
                Some(thread) => thread.python = frames,
                None if !frames.is_empty() => untold += 1,
                None => {}
            }
            let Some(next) = self.word(tstate + u64::from(list.next)) else {
                break;
            };
            tstate = next;
        }
        if untold > 0 {
            record.notes.push(format!(
                "{untold} Python threads' frames not shown: their thread could not be told"
            ));
        }
    }

    /// The thread of the thread state at `tstate`, as its own PID
    /// namespace sees it.
    fn tid(&self, tstate: u64, at: TidAt) -> Option<Pid> {
        match at {
            TidAt::Native(at) => Pid::try_from(self.word(tstate + u64::from(at))?).ok(),
            TidAt::Pthread(at) => {
                let pthread = self.word(tstate + u64::from(at))?;
                let tid = self.bytes(pthread.checked_add(PTHREAD_TID)?, 4)?;
                Some(Pid::from_le_bytes(tid.try_into().ok()?))
            }
        }
    }

    /// The frames of the thread state at `tstate`, the innermost first.
    fn frames(&mut self, tstate: u64) -> Vec<String> {
        let l = self.layout;
        let mut frame = self.word(tstate + u64::from(l.tstate_frame)).unwrap_or(0);
        if l.flags & py_flags::PY_CFRAME.0 != 0 && frame != 0 {
            frame = self.word(frame + u64::from(l.cframe_frame)).unwrap_or(0);
        }
        let mut names = Vec::new();
        let mut links = 0;
        while frame != 0 && links < 4 * MOST_FRAMES {
            links += 1;
            let Some(window) = self.bytes(frame, FRAME_BYTES) else {
                names.push(format!("(frame at {frame:#x} unreadable)"));
                break;
            };
            let previous = word_in(&window, l.frame_previous).unwrap_or(0);
            let shim = l.flags & py_flags::PY_OWNER.0 != 0
                && window.get(l.owner_off as usize).copied().map(u32::from) >= Some(l.shim_owner);
            if !shim {
                if names.len() == MOST_FRAMES {
                    names.push(format!("… more frames past {MOST_FRAMES}"));
                    break;
                }
                names.push(self.name(&window));
            }
            frame = previous;
        }
        names
    }

    /// `qualname (file:line)` of the frame whose bytes are `window`.
    fn name(&mut self, window: &[u8]) -> String {
        let l = self.layout;
        let code = word_in(window, l.frame_code).unwrap_or(0) & l.code_mask;
        let instruction = if l.flags & py_flags::PY_LASTI.0 != 0 {
            word_in(window, l.frame_instr).map_or(-1, |w| w as u32 as i32)
        } else {
            let start = code + u64::from(l.code_instructions);
            word_in(window, l.frame_instr)
                .and_then(|ip| ip.checked_sub(start))
                .and_then(|units| i32::try_from(units / 2).ok())
                .unwrap_or(-1)
        };
        if !self.codes.contains_key(&code) {
            let read = self.code(code);
            self.codes.insert(code, read);
        }
        let named = self.codes[&code]
            .as_ref()
            .and_then(|c| self.interpreter.name(c, instruction));
        named.map_or_else(|| format!("(code at {code:#x} unreadable)"), |(f, _)| f)
    }

    /// The code object at `code` with its names and line table, as the
    /// kernel copies one.
    fn code(&self, code: u64) -> Option<PyCode> {
        let l = self.layout;
        let object = self.some(code, CODE_BYTES)?;
        let string = |at: u32| word_in(&object, at).and_then(|a| self.some(a, STRING_BYTES));
        let lines = word_in(&object, l.code_lines).and_then(|at| {
            let head = self.bytes(at, 32)?;
            let length = word_in(&head, 16)?.min(MOST_LINE_BYTES);
            self.bytes(at, 32 + length as usize)
        });
        Some(PyCode {
            pid: self.pid,
            code,
            qualname: string(l.code_qualname),
            filename: string(l.code_filename),
            lines,
            object: Some(object),
        })
    }

    fn word(&self, at: u64) -> Option<u64> {
        word_at(&self.bytes(at, 8)?, 0)
    }

    /// `len` bytes at `at`, all of them.
    fn bytes(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        let mut buffer = vec![0; len];
        self.memory.read_exact_at(&mut buffer, at).ok()?;
        Some(buffer)
    }

    /// `len` bytes at `at`, or where they run into an unmapped page, as
    /// many as halving `len` down to a quarter allows.
    fn some(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        [len, len / 2, len / 4]
            .into_iter()
            .find_map(|len| self.bytes(at, len))
    }
}

/// The word at offset `at` of `bytes`.
fn word_in(bytes: &[u8], at: u32) -> Option<u64> {
    word_at(bytes, at as usize)
}

/// The tids of `pid`'s threads as its own PID namespace sees them (the
/// last of each `NSpid`) to proctrace's.
fn ns_tids_of(pid: Pid) -> HashMap<Pid, Pid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return HashMap::new();
    };
    tasks
        .filter_map(|task| {
            let ours: Pid = task.ok()?.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/task/{ours}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
            let theirs = line.split_whitespace().last()?.parse().ok()?;
            Some((theirs, ours))
        })
        .collect()
}
