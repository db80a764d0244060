//! CPython's frames: the interpreted functions a sample's native eval
//! calls ran. The kernel walks the interpreter's frame chain at each
//! sample (`src/bpf/python.bpf.h`) once [`Python::mapped`] has found the
//! interpreter in a process and said how its version lays things out
//! ([`layout`]); it sends each code object with its names the first time
//! a process's samples meet it, while the process lives. Here each native
//! frame of the eval function is replaced by the Python frames it ran,
//! and the code objects are named when the recording ends, each frame
//! with the line its instruction is on ([`lines`]).

mod dump;
mod layout;
mod lines;
mod tls;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::{Naming, Place};
use crate::bpf::types::{py_binary_key, py_layout};
use crate::event::{Frame, Pid};
use crate::recorder::wire::{Mapping, PyCode, Sample};
pub(crate) use dump::dump;
pub(crate) use layout::Interpreter;

/// The interpreters found in the tree, and the code objects its samples
/// ran.
#[derive(Default)]
pub(crate) struct Python {
    /// Each file looked at once: the interpreter it holds, if it is one.
    files: HashMap<String, Option<Arc<Interpreter>>>,
    /// The interpreter each process runs.
    of: HashMap<Pid, Arc<Interpreter>>,
    /// The code objects the kernel sent, by process and address: more
    /// than one where an address was reused.
    codes: HashMap<(Pid, u64), Vec<PyCode>>,
}

/// The file process `pid`'s maps name `path`. Its maps show the path from
/// this process where that reaches the file (a chroot), else from the
/// process's root (a container's own mount namespace).
fn open_mapped(pid: Pid, path: &str) -> io::Result<File> {
    File::open(format!("/proc/{pid}/root{path}")).or_else(|_| File::open(path))
}

impl Python {
    /// Whether `mapping` is of an interpreter the process still has
    /// mapped (its announcement may come after an exec): then its
    /// process's layout, for the kernel to walk its frames with, and the
    /// file's key where that layout holds for every process.
    pub(crate) fn mapped(
        &mut self,
        mapping: &Mapping,
    ) -> Option<(py_layout, Option<py_binary_key>)> {
        if !layout::may_be_python(&mapping.path) {
            return None;
        }
        if !layout::still_mapped(mapping) {
            // Gone (or changed) before its mapping was read: the kernel
            // is told nothing, but a process whose frames it walked from
            // its exec (an interpreter at fixed addresses, read before)
            // is named by that interpreter. Under load the collector
            // read a 50 ms process's mapping after its exit, and none of
            // its Python frames was named.
            if let Some(Some(interpreter)) = self.files.get(&mapping.path) {
                self.of.insert(mapping.pid, Arc::clone(interpreter));
            }
            return None;
        }
        let interpreter = interpreter(&mut self.files, mapping.pid, &mapping.path)?;
        let layout = interpreter.layout_at(mapping)?;
        let binary = interpreter.binary();
        self.of.insert(mapping.pid, interpreter);
        Some((layout, binary))
    }

    /// The interpreter at `path` read before any process maps it: its
    /// layout and file, where it has fixed addresses (a process that
    /// execs it is laid out the same).
    pub(crate) fn preload(&mut self, path: &Path) -> Option<(py_layout, py_binary_key)> {
        let path = path.to_str()?;
        if !layout::may_be_python(path) {
            return None;
        }
        let interpreter = interpreter(&mut self.files, std::process::id() as Pid, path)?;
        Some((interpreter.fixed_layout()?, interpreter.binary()?))
    }

    /// `parent` forked `child`, which runs the same interpreter.
    pub(crate) fn fork(&mut self, parent: Pid, child: Pid) {
        if let Some(interpreter) = self.of.get(&parent).cloned() {
            self.of.insert(child, interpreter);
        }
    }

    /// A code object the kernel sent.
    pub(crate) fn code(&mut self, code: PyCode) {
        self.codes
            .entry((code.pid, code.code))
            .or_default()
            .push(code);
    }

    /// Whether file offset `offset` of the file at `path` is in the
    /// interpreter's eval function.
    pub(crate) fn is_eval(&self, path: &str, offset: u64) -> bool {
        let Some(Some(interpreter)) = self.files.get(path) else {
            return false;
        };
        interpreter.is_eval(offset)
    }

    /// Names the Python places among `places`; returns how many could not
    /// be (their code object was never read).
    pub(crate) fn name(&self, places: &[Place], naming: &mut Naming<'_>) -> u64 {
        let mut unnamed = 0;
        for place in places {
            let Place::Python(pid, code, identity, instruction) = *place else {
                continue;
            };
            let named = self.of.get(&pid).and_then(|interpreter| {
                let codes = self.codes.get(&(pid, code))?;
                let code = codes
                    .iter()
                    .find(|c| interpreter.identity_of(c) == Some(identity))?;
                interpreter.name(code, instruction)
            });
            let frame = match named {
                Some((function, file)) => Frame {
                    id: 0,
                    function: Some(function),
                    module: file,
                    offset: None,
                    kernel: false,
                    inlined: false,
                },
                None => {
                    unnamed += 1;
                    Frame {
                        id: 0,
                        function: None,
                        module: "[python]".into(),
                        offset: Some(code),
                        kernel: false,
                        inlined: false,
                    }
                }
            };
            naming.names.add(*place, vec![frame]);
        }
        unnamed
    }
}

/// The interpreter in the file at `path` as process `pid` sees it, read
/// the first time `files` is asked for it.
fn interpreter(
    files: &mut HashMap<String, Option<Arc<Interpreter>>>,
    pid: Pid,
    path: &str,
) -> Option<Arc<Interpreter>> {
    files
        .entry(path.to_owned())
        .or_insert_with(|| Interpreter::read(pid, path).map(Arc::new))
        .clone()
}

/// A sample's Python frames, handed out one native eval call at a time.
pub(crate) struct Groups<'s> {
    pid: Pid,
    frames: &'s [crate::recorder::wire::PyFrame],
}

impl<'s> Groups<'s> {
    pub(crate) fn of(sample: &'s Sample) -> Groups<'s> {
        Groups {
            pid: sample.pid,
            frames: &sample.python,
        }
    }

    /// Whether any frames are left to place.
    pub(crate) fn any(&self) -> bool {
        !self.frames.is_empty()
    }

    /// The native eval calls the frames left to place ran.
    pub(crate) fn count(&self) -> usize {
        let ended = self.frames.iter().filter(|f| f.entry).count();
        ended + usize::from(self.frames.last().is_some_and(|f| !f.entry))
    }

    /// The frames one native eval call ran, the innermost first: up to
    /// and with the next entry frame; none for a call that runs none.
    pub(crate) fn next(&mut self, out: &mut Vec<Place>) {
        let end = self
            .frames
            .iter()
            .position(|f| f.entry)
            .map_or(self.frames.len(), |i| i + 1);
        let (group, rest) = self.frames.split_at(end);
        out.extend(
            (group.iter().filter(|f| !f.no_frame))
                .map(|f| Place::Python(self.pid, f.code, f.identity, f.instruction)),
        );
        self.frames = rest;
    }

    /// The frames no native eval call was found for (the native stack
    /// was cut before them), outermost last.
    pub(crate) fn rest(&mut self, out: &mut Vec<Place>) {
        while self.any() {
            self.next(out);
        }
    }
}
