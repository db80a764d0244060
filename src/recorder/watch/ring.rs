//! One perf event's ring buffer, mapped read-write so that the reader
//! owns `data_tail` and the kernel never overwrites unread records (it
//! counts them in PERF_RECORD_LOST instead).

use std::ffi::c_void;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`
/// (include/uapi/linux/perf_event.h): the 1 KiB of self-monitoring
/// fields and `__reserved[116*8]` come first.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
/// `struct perf_event_header`: u32 type, u16 misc, u16 size.
pub(super) const HEADER_SIZE: u64 = 8;

/// A mapped ring: the control page, then `data_size` bytes of records.
pub(super) struct Ring {
    fd: OwnedFd,
    base: NonNull<c_void>,
    page: usize,
    data_size: u64,
}

// SAFETY: the mapping belongs to the Ring alone; the kernel's concurrent
// writes go through the atomics and the [tail, head) protocol, whichever
// thread reads.
unsafe impl Send for Ring {}

/// A record found to be impossible (shorter than its header, or longer
/// than what the kernel published): the rest of the ring was skipped.
#[derive(Debug)]
pub(super) struct Garbled;

impl Ring {
    /// Maps `fd`'s ring with `data_pages` (a power of two) pages of records.
    pub(super) fn map(fd: OwnedFd, page: usize, data_pages: usize) -> io::Result<Ring> {
        let len = (data_pages + 1)
            .checked_mul(page)
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh shared mapping of the event's ring; nothing
        // else in this process maps it.
        let base = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )
        }?;
        Ok(Ring {
            fd,
            base,
            page,
            data_size: (data_pages * page) as u64,
        })
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn control(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offset is DATA_HEAD or DATA_TAIL, 8-aligned u64s inside
        // the control page mapped for as long as self lives, which the
        // kernel and this reader only touch atomically.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().byte_add(offset).cast()) }
    }

    /// Hands each record published so far to `each`, in order, then
    /// gives their space back to the kernel.
    pub(super) fn drain(
        &self,
        scratch: &mut Vec<u8>,
        mut each: impl FnMut(&[u8]),
    ) -> Result<(), Garbled> {
        // Acquire pairs with the kernel's store of data_head after it
        // wrote the records (perf_output_put_handle, kernel/events/ring_buffer.c).
        let head = self.control(DATA_HEAD).load(Ordering::Acquire);
        let mut tail = self.control(DATA_TAIL).load(Ordering::Relaxed);
        let mut result = Ok(());
        while head.wrapping_sub(tail) >= HEADER_SIZE {
            let available = head.wrapping_sub(tail);
            if available > self.data_size {
                result = Err(Garbled);
                tail = head;
                break;
            }
            self.copy(tail, HEADER_SIZE, scratch);
            let size = u64::from(u16::from_ne_bytes([scratch[6], scratch[7]]));
            if size < HEADER_SIZE || size > available {
                result = Err(Garbled);
                tail = head;
                break;
            }
            self.copy(tail, size, scratch);
            each(scratch);
            tail = tail.wrapping_add(size);
        }
        // Release: every read of the records above happens before the
        // kernel may write over them.
        self.control(DATA_TAIL).store(tail, Ordering::Release);
        result
    }

    /// Copies the `len` bytes at ring position `at` into `into`, the part
    /// past the end of the ring from its start.
    fn copy(&self, at: u64, len: u64, into: &mut Vec<u8>) {
        into.clear();
        let offset = at % self.data_size;
        let first = len.min(self.data_size - offset);
        for (from, len) in [(offset, first), (0, len - first)] {
            // SAFETY: from + len <= data_size, within the data pages that
            // follow the control page; the kernel does not write
            // [tail, head) until data_tail moves past it.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    self.base
                        .as_ptr()
                        .byte_add(self.page + from as usize)
                        .cast::<u8>(),
                    len as usize,
                )
            };
            into.extend_from_slice(bytes);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let len = (self.data_size as usize) + self.page;
        // SAFETY: the mapping made in map(), unused past this point.
        let _ = unsafe { munmap(self.base, len) };
    }
}
