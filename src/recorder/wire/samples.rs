//! The records of the samples and hits rings: a CPU sample or a probe's
//! hit (registers and a copy of the top of the user stack), and a
//! process's word on which test runs in it.

use std::cell::RefCell;

use plain::Plain;

use super::{copy, Malformed};
use crate::bpf::types::{
    event_header, event_kind, hit_event, mark_event, py_code_event, py_entry, py_frame, py_part,
    sample_event,
};
use crate::event::{pytest_node_id, ArgValue, Pid};

/// One CPU sample as the kernel sent it, before unwinding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The process and thread sampled.
    pub pid: Pid,
    pub tid: Pid,
    /// Nanoseconds since the recording started.
    pub timestamp: u64,
    /// Kernel return addresses, the interrupted one first.
    pub kernel: Vec<u64>,
    /// The user registers: instruction, stack and frame pointers, link
    /// register; all 0 where the kernel could not give them.
    pub regs: [u64; 4],
    /// The top of the user stack, from the stack pointer up.
    pub stack: Vec<u8>,
    /// The thread's Python frames, the innermost first (none outside a
    /// CPython interpreter).
    pub python: Vec<PyFrame>,
    /// The interpreter's frame chain went on past `python`.
    pub python_cut: bool,
}

/// One Python frame of a sample: a code object and where in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyFrame {
    /// The code object's address in the process, and what tells it from
    /// another once at the same address (see `struct py_frame`).
    pub code: u64,
    pub identity: u64,
    /// The instruction, as the interpreter's version counts it (see
    /// `recorder::frames::python`); -1 where unknown.
    pub instruction: i32,
    /// The outermost frame of one native eval call.
    pub entry: bool,
    /// Not a frame: a stand-in, with `entry`, for a native eval call that
    /// runs none at the sample (it had not pushed its first yet, or had
    /// popped its last), so that the calls' groups still pair with the
    /// native stack's.
    pub no_frame: bool,
}

impl From<&py_frame> for PyFrame {
    fn from(f: &py_frame) -> PyFrame {
        PyFrame {
            code: f.code,
            identity: f.identity,
            instruction: f.instruction,
            entry: f.entry != 0,
            no_frame: f.entry == py_entry::PY_NO_FRAME.0,
        }
    }
}

/// A code object of a process as the kernel copied it the first time its
/// samples met it: raw bytes of the object, of its two name strings and
/// of its line table, for the interpreter's version to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyCode {
    pub pid: Pid,
    /// Its address in the process.
    pub code: u64,
    /// The object's bytes; its qualified name's and file name's (each
    /// `None` where it could not be read).
    pub object: Option<Vec<u8>>,
    pub qualname: Option<Vec<u8>>,
    pub filename: Option<Vec<u8>>,
    /// Its line table's bytes object (head and table), `None` where it
    /// could not be read.
    pub lines: Option<Vec<u8>>,
}

/// What the samples ring carries.
pub enum FromSamples {
    Sample(Sample),
    PyCode(PyCode),
}

/// Decodes a record of the samples ring; `start` and `buffer` as for
/// [`decode_sample`].
pub fn decode_from_samples(
    data: &[u8],
    start: u64,
    buffer: Vec<u8>,
) -> Result<FromSamples, Malformed> {
    let header: event_header = copy(data).ok_or(Malformed::new(data.len(), 0))?;
    if event_kind(header.kind) != event_kind::EVENT_PY_CODE {
        return decode_sample(data, start, buffer).map(FromSamples::Sample);
    }
    let e: Box<py_code_event> = copy_boxed(data).ok_or(Malformed::new(data.len(), header.kind))?;
    let part = |part: py_part, window: &[u8]| {
        let read = usize::from(e.read[part.0 as usize]).min(window.len());
        (read > 0).then(|| window[..read].to_vec())
    };
    Ok(FromSamples::PyCode(PyCode {
        pid: e.header.pid,
        code: e.code,
        object: part(py_part::PY_OBJECT, &e.object),
        qualname: part(py_part::PY_QUALNAME, &e.qualname),
        filename: part(py_part::PY_FILENAME, &e.filename),
        lines: part(py_part::PY_LINES, &e.lines),
    }))
}

/// A record too large for the stack, copied out of the buffer.
fn copy_boxed<T: Plain + Default>(data: &[u8]) -> Option<Box<T>> {
    let mut e = Box::<T>::default();
    // SAFETY: a plain C struct of integers, valid for any bytes.
    let bytes = unsafe { plain::as_mut_bytes(&mut *e) };
    bytes.copy_from_slice(data.get(..bytes.len())?);
    Some(e)
}

thread_local! {
    /// The fixed parts of the last records read, kept from one to the
    /// next: a record has room for a whole stack copy (64 KiB for a
    /// sample), of which only the fixed part is read into it.
    static SAMPLE: RefCell<Box<sample_event>> = RefCell::default();
    static HIT: RefCell<Box<hit_event>> = RefCell::default();
}

/// Decodes a record of the samples ring into a sample whose stack copy is
/// `buffer`'s (emptied first: a buffer of an earlier sample, handed back,
/// is filled without allocating); `start` as for [`decode`]. Only the
/// part of the stack copy the kernel sent is read.
pub fn decode_sample(data: &[u8], start: u64, buffer: Vec<u8>) -> Result<Sample, Malformed> {
    let fixed = std::mem::offset_of!(sample_event, stack);
    SAMPLE.with_borrow_mut(|e| {
        let stack = with_stack(&mut **e, data, fixed, event_kind::EVENT_SAMPLE, |e| {
            e.stack_len
        })?;
        let frames = (e.kernel_frames as usize).min(e.kernel.len());
        let python = &e.py[..(e.py_count as usize).min(e.py.len())];
        Ok(Sample {
            pid: e.header.pid,
            tid: e.tid,
            timestamp: e.header.timestamp.saturating_sub(start),
            kernel: e.kernel[..frames].to_vec(),
            regs: [e.ip, e.sp, e.fp, e.lr],
            stack: filled(buffer, stack),
            python: python.iter().map(PyFrame::from).collect(),
            python_cut: e.py_cut != 0,
        })
    })
}

/// `buffer`, emptied, with `bytes` in it.
fn filled(mut buffer: Vec<u8>, bytes: &[u8]) -> Vec<u8> {
    buffer.clear();
    buffer.extend_from_slice(bytes);
    buffer
}

/// One hit of a probe as the kernel sent it: a sample of the user stack
/// (no kernel stack: a uprobe fires in user mode), and which probe, with
/// its USDT arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The thread, its registers and stack copy (all 0 and empty when
    /// recorded without stacks).
    pub sample: Sample,
    /// The probe's id.
    pub probe: u32,
    /// The USDT arguments read (none for a uprobe).
    pub args: Vec<ArgValue>,
}

/// Decodes a probe's hit; `start` and `buffer` as for [`decode_sample`].
fn decode_hit(data: &[u8], start: u64, buffer: Vec<u8>) -> Result<Hit, Malformed> {
    let fixed = std::mem::offset_of!(hit_event, stack);
    HIT.with_borrow_mut(|e| {
        // The kernel stack's addresses, then the user stack's bytes.
        let stacks = with_stack(&mut **e, data, fixed, event_kind::EVENT_HIT, |e| {
            e.kernel_frames
                .saturating_mul(8)
                .saturating_add(u32::from(e.py_count) * size_of::<py_frame>() as u32)
                .saturating_add(e.stack_len)
        })?;
        let (kernel, rest) = stacks.split_at(e.kernel_frames as usize * 8);
        let (python, stack) = rest.split_at(e.py_count as usize * size_of::<py_frame>());
        let count = (e.arg_count as usize).min(e.args.len());
        // The strings fill their slots in argument order.
        let mut strings = e.strings.iter();
        let args = (0..count)
            .map(|i| {
                let read = e.string_mask & (1 << i) != 0;
                let text = read.then(|| strings.next()).flatten();
                let text = text.and_then(|s| c_text(s));
                text.map_or(ArgValue::Number(e.args[i]), ArgValue::Text)
            })
            .collect();
        Ok(Hit {
            sample: Sample {
                pid: e.header.pid,
                tid: e.tid,
                timestamp: e.header.timestamp.saturating_sub(start),
                kernel: kernel
                    .chunks_exact(8)
                    .map(|a| u64::from_ne_bytes(a.try_into().expect("8 bytes")))
                    .collect(),
                regs: [e.ip, e.sp, e.fp, e.lr],
                stack: filled(buffer, stack),
                python: python
                    .chunks_exact(size_of::<py_frame>())
                    .map(|bytes| {
                        let mut frame = py_frame::default();
                        plain::copy_from_bytes(&mut frame, bytes).expect("a whole frame");
                        PyFrame::from(&frame)
                    })
                    .collect(),
                python_cut: e.py_cut != 0,
            },
            probe: e.probe,
            args,
        })
    })
}

/// A process's word on which test runs in it now, from the variable a
/// runner sets before each test (pytest's `PYTEST_CURRENT_TEST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub pid: Pid,
    /// Nanoseconds since the recording started.
    pub timestamp: u64,
    /// The test, as its runner names it (pytest's node id, without the
    /// phase); `None` once the variable is unset, between tests.
    pub test: Option<String>,
    /// The marks of the tree so far, this one included, by which the
    /// kernel's off-CPU totals are kept apart per test.
    pub epoch: u32,
}

/// What the hits ring carries.
pub enum FromHits {
    Hit(Hit),
    Mark(Mark),
}

/// Decodes a record of the hits ring; `start` and `buffer` (for a hit's
/// stack) as for [`decode_sample`].
pub fn decode_from_hits(data: &[u8], start: u64, buffer: Vec<u8>) -> Result<FromHits, Malformed> {
    let header: event_header = copy(data).ok_or(Malformed::new(data.len(), 0))?;
    if event_kind(header.kind) != event_kind::EVENT_TEST_MARK {
        return decode_hit(data, start, buffer).map(FromHits::Hit);
    }
    let e: mark_event = copy(data).ok_or(Malformed::new(data.len(), header.kind))?;
    let value = (e.set != 0).then(|| c_text(&e.value)).flatten();
    Ok(FromHits::Mark(Mark {
        pid: e.header.pid,
        timestamp: e.header.timestamp.saturating_sub(start),
        test: value.map(|v| pytest_node_id(&v).to_owned()),
        epoch: e.epoch,
    }))
}

/// A record that ends where its copy of the user stack does: its fixed
/// part (the first `fixed` bytes) read into `e` (what lies past it there
/// is never read), and the `stack_len` bytes of stack after it.
pub(super) fn with_stack<'d, T: Plain>(
    e: &mut T,
    data: &'d [u8],
    fixed: usize,
    kind: event_kind,
    stack_len: impl Fn(&T) -> u32,
) -> Result<&'d [u8], Malformed> {
    let malformed = || Malformed::new(data.len(), kind.0);
    let head = data.get(..fixed).ok_or_else(malformed)?;
    // SAFETY: a plain C struct of integers, valid for any bytes.
    let bytes = unsafe { plain::as_mut_bytes(e) };
    bytes[..fixed].copy_from_slice(head);
    let len = stack_len(e) as usize;
    data.get(fixed..fixed + len).ok_or_else(malformed)
}

/// The text of a C string the kernel read, if it is text: a pointer to
/// anything else reads as bytes that are not, and stays a number. The
/// skeleton's types make C's `char` an `i8` on every architecture (the
/// BPF target's), though Rust's `c_char` is `u8` on aarch64.
fn c_text(bytes: &[i8]) -> Option<String> {
    let bytes: Vec<u8> = bytes
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        // Cut at the buffer's end in the middle of a character: the
        // characters before it stand.
        Err(err) if err.utf8_error().error_len().is_none() => {
            let whole = err.utf8_error().valid_up_to();
            let mut bytes = err.into_bytes();
            bytes.truncate(whole);
            String::from_utf8(bytes).ok()?
        }
        Err(_) => return None,
    };
    (!text.is_empty() && !text.chars().any(char::is_control)).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::wire::bytes_of;

    #[test]
    fn hit_strings_fill_their_slots_in_argument_order() {
        let mut hit = hit_event::default();
        hit.header.kind = event_kind::EVENT_HIT.0;
        hit.header.timestamp = 50;
        hit.arg_count = 5;
        hit.args = [1, 2, 3, 4, 42, 0];
        // Arguments 2 and 3 were read: slots 0 and 1.
        hit.string_mask = 0b1100;
        for (slot, text) in [(0, &b"suite\0"[..]), (1, b"name\0")] {
            for (to, &from) in hit.strings[slot].iter_mut().zip(text) {
                *to = from as _;
            }
        }
        let fixed = std::mem::offset_of!(hit_event, stack);
        let decoded = decode_hit(&bytes_of(&hit)[..fixed], 10, Vec::new()).unwrap();
        let text = |s: &str| ArgValue::Text(s.into());
        let n = ArgValue::Number;
        assert_eq!(
            decoded.args,
            [n(1), n(2), text("suite"), text("name"), n(42)]
        );
        assert_eq!(decoded.sample.timestamp, 40);
    }

    #[test]
    fn a_hit_carries_its_kernel_stack_before_its_user_stack() {
        let mut hit = hit_event::default();
        hit.header.kind = event_kind::EVENT_HIT.0;
        hit.kernel_frames = 2;
        hit.stack_len = 3;
        let stacks = [0xffff_8000_0000_1000u64, 0xffff_8000_0000_2000];
        for (i, address) in stacks.iter().enumerate() {
            hit.stack[i * 8..i * 8 + 8].copy_from_slice(&address.to_ne_bytes());
        }
        hit.stack[16..19].copy_from_slice(&[7, 8, 9]);
        let fixed = std::mem::offset_of!(hit_event, stack);
        let decoded = decode_hit(&bytes_of(&hit)[..fixed + 19], 0, Vec::new()).unwrap();
        assert_eq!(decoded.sample.kernel, stacks);
        assert_eq!(decoded.sample.stack, [7, 8, 9]);
        let cut = decode_hit(&bytes_of(&hit)[..fixed + 18], 0, Vec::new());
        assert!(cut.is_err(), "a record cut short is malformed");
    }

    #[test]
    fn text_cut_in_a_character_keeps_the_whole_ones() {
        let c = |bytes: &[u8]| c_text(&bytes.iter().map(|&b| b as _).collect::<Vec<i8>>());
        assert_eq!(c(b"t::caf\xc3\xa9\0").as_deref(), Some("t::café"));
        assert_eq!(c(b"t::caf\xc3\0").as_deref(), Some("t::caf"));
        assert_eq!(c(b"t::\xff\xfe\0"), None);
        assert_eq!(c(b"line\nbreak\0"), None);
    }
}
