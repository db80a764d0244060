//! Where glibc keeps a thread's first pthread keys, from its thread
//! pointer: the data of key 0 in `struct pthread`'s `specific_1stblock`,
//! which the kernel reads the interpreter's thread state from.
//!
//! On x86_64 the thread pointer is the start of `struct pthread` and the
//! place has stayed at 792 from glibc 2.28 to 2.41. On aarch64 it is the
//! end of the struct, so the place moves with its size: tp - 1576 in
//! bookworm's 2.36, tp - 1544 in trixie's 2.41. There it is read from the
//! libc a process maps, in the first instructions of its
//! `pthread_getspecific`.

use std::fs::{self, File};

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSymbol};

use crate::event::Pid;

/// The place where nothing better is known.
#[cfg(target_arch = "x86_64")]
const DEFAULT: i64 = 792;
#[cfg(target_arch = "aarch64")]
const DEFAULT: i64 = -1576;

/// The offset from the thread pointer to key 0's data in process `pid`
/// (else in this machine's libc).
pub(super) fn key_data(pid: Pid) -> i64 {
    if !cfg!(target_arch = "aarch64") {
        return DEFAULT;
    }
    let libc = match libc_of(pid) {
        Some(path) => super::open_mapped(pid, &path),
        None => crate::recorder::probes::files::find("libc")
            .ok_or(std::io::ErrorKind::NotFound.into())
            .and_then(File::open),
    };
    libc.ok()
        .and_then(|file| from_libc(&file))
        .unwrap_or(DEFAULT)
}

/// The libc process `pid` maps, by the path its maps show.
fn libc_of(pid: Pid) -> Option<String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let path = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            path.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("libc.so"))
        })?;
    Some(path.to_owned())
}

/// The place `pthread_getspecific` of the aarch64 libc in `file` reads.
fn from_libc(file: &File) -> Option<i64> {
    let cache = ReadCache::new(file);
    let elf = object::read::elf::ElfFile64::<object::Endianness, _>::parse(&cache).ok()?;
    let function = super::layout::defined(&elf, "pthread_getspecific")?;
    let section = elf.section_by_index(function.section_index()?).ok()?;
    let code = section.data_range(function.address(), 64).ok()??;
    from_aarch64(code)
}

/// From aarch64 code that adds the thread pointer to a negative base (a
/// `sub` from the key's offset, or a `mov` of it) and loads the key's
/// data at an offset from the sum: the base plus that offset.
fn from_aarch64(code: &[u8]) -> Option<i64> {
    let words = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    let (mut base, mut thread_pointer) = (None, false);
    for word in words.take(16) {
        match word {
            // sub xD, xN, #imm{, lsl #12}
            w if w & 0xff80_0000 == 0xd100_0000 => {
                let shift = if w & (1 << 22) != 0 { 12 } else { 0 };
                base.get_or_insert(-(i64::from((w >> 10) & 0xfff) << shift));
            }
            // movn xD, #imm{, lsl #hw}: the complement
            w if w & 0xff80_0000 == 0x9280_0000 => {
                let hw = (w >> 21) & 3;
                base.get_or_insert(!(i64::from((w >> 5) & 0xffff) << (16 * hw)));
            }
            // mrs xT, tpidr_el0
            w if w & 0xffff_ffe0 == 0xd53b_d040 => thread_pointer = true,
            // ldr xT, [xN, #imm]: the key's data, once both are known
            w if w & 0xffc0_0000 == 0xf940_0000 && thread_pointer => {
                let at = base? + i64::from((w >> 10) & 0xfff) * 8;
                return ((-4096..0).contains(&at) && at % 8 == 0).then_some(at);
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn aarch64_glibc_places_as_their_code_reads_them() {
        // bookworm's 2.36: ubfiz; mrs; sub x0, x0, #0x630; add; ldr x0, [x2, #8]
        let bookworm = [
            0x2a0003e1, 0x71007c1f, 0x54000248, 0xd37c7c20, 0xd53bd042, 0xd118c000, 0x8b000042,
            0xf9400440,
        ];
        assert_eq!(from_aarch64(&code(&bookworm)), Some(-1576));
        // trixie's 2.41: bti; ...; mov x0, #-1552; mrs; add; add; ldr x0, [x2, #8]
        let trixie = [
            0xd503245f, 0x2a0003e1, 0x71007c1f, 0x54000248, 0x9280c1e0, 0xd53bd042, 0x8b215000,
            0x8b000042, 0xf9400440,
        ];
        assert_eq!(from_aarch64(&code(&trixie)), Some(-1544));
        // Without the thread pointer read, or with x86 code: nothing.
        assert_eq!(from_aarch64(&code(&[0x9280c1e0, 0xf9400440])), None);
        assert_eq!(
            from_aarch64(&[0x48, 0x83, 0xc0, 0x31, 0x48, 0xc1, 0xe0, 0x04]),
            None
        );
    }
}
