//! Where a function's instructions start, so that a uprobe's `+OFFSET` is
//! checked to be one (the kernel decodes whatever bytes it is given, and a
//! breakpoint in the middle of an instruction changes what the program
//! runs). arm64's are 4 bytes each; x86-64's are decoded one after the
//! other from the entry for their lengths alone: prefixes, the opcode
//! map, ModRM, SIB, displacement and immediate (the layout of the Intel
//! SDM's volume 2, chapter 2, for 64-bit mode), as a compiler lays out
//! code (no data between instructions).

/// The offsets in `code`, a function's bytes from its entry, where its
/// instructions start, in order; they stop where one cannot be decoded.
pub(crate) fn starts(code: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let start = at;
        let len = if cfg!(target_arch = "aarch64") {
            4
        } else {
            x86::length(code.get(start..)?)?
        };
        at = start + len;
        (start < code.len()).then_some(start as u64)
    })
}

mod x86 {
    /// Immediate bytes an opcode takes.
    #[derive(Clone, Copy)]
    pub(super) enum Imm {
        None,
        /// 1, 2 or 4 bytes.
        Fixed(usize),
        /// 4 bytes, 2 with an operand-size prefix.
        Z,
        /// `mov r64, imm64`: 8 with REX.W, else as `Z`.
        V,
        /// A memory offset: 8 bytes, 4 with an address-size prefix.
        Moffs,
        /// `test r/m, imm` of groups 3 (F6: 1 byte, F7: `Z`), by ModRM's
        /// reg field; the group's other instructions have none.
        Group3(bool),
    }

    /// An instruction being decoded: where it is, and what its prefixes
    /// change.
    struct Decoder<'a> {
        code: &'a [u8],
        at: usize,
        operand16: bool,
        address32: bool,
        rex_w: bool,
        /// The ModRM byte, once read.
        modrm: u8,
    }

    /// The length of the instruction `code` starts with, where it decodes.
    pub(super) fn length(code: &[u8]) -> Option<usize> {
        let mut d = Decoder {
            code,
            at: 0,
            operand16: false,
            address32: false,
            rex_w: false,
            modrm: 0,
        };
        d.prefixes()?;
        let op = d.byte()?;
        let (modrm, imm) = match op {
            0x0f => d.two_byte()?,
            // VEX and EVEX: in 64-bit mode these are never LES, LDS, BOUND.
            0xc4 => d.vex(2, None)?,
            0xc5 => d.vex(1, Some(1))?,
            0x62 => d.vex(3, None)?,
            0x8f if d.peek()? & 0x1f >= 8 => d.xop()?,
            _ => one_byte(op)?,
        };
        if modrm {
            d.modrm()?;
        }
        let z = if d.operand16 { 2 } else { 4 };
        let imm = match imm {
            Imm::None => 0,
            Imm::Fixed(n) => n,
            Imm::Z => z,
            Imm::V if d.rex_w => 8,
            Imm::V => z,
            Imm::Moffs if d.address32 => 4,
            Imm::Moffs => 8,
            Imm::Group3(_) if (d.modrm >> 3) & 7 >= 2 => 0,
            Imm::Group3(true) => 1,
            Imm::Group3(false) => z,
        };
        let len = d.at + imm;
        (len <= code.len() && len <= 15).then_some(len)
    }

    impl Decoder<'_> {
        fn byte(&mut self) -> Option<u8> {
            let b = *self.code.get(self.at)?;
            self.at += 1;
            Some(b)
        }

        fn peek(&self) -> Option<u8> {
            self.code.get(self.at).copied()
        }

        /// The legacy prefixes, then a REX prefix, which comes last.
        fn prefixes(&mut self) -> Option<()> {
            loop {
                match self.peek()? {
                    0x66 => self.operand16 = true,
                    0x67 => self.address32 = true,
                    0xf0 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 => {}
                    rex @ 0x40..=0x4f => {
                        self.rex_w = rex & 8 != 0;
                        self.at += 1;
                        return Some(());
                    }
                    _ => return Some(()),
                }
                self.at += 1;
            }
        }

        /// The 0F map, and the 0F 38 and 0F 3A maps behind it.
        fn two_byte(&mut self) -> Option<(bool, Imm)> {
            let op = self.byte()?;
            Some(match op {
                0x38 => {
                    self.byte()?;
                    (true, Imm::None)
                }
                0x3a => {
                    self.byte()?;
                    (true, Imm::Fixed(1))
                }
                // 3DNow!: its opcode comes after the operands.
                0x0f => (true, Imm::Fixed(1)),
                0x05..=0x09 | 0x0b | 0x0e | 0x30..=0x37 | 0x77 | 0xa0..=0xa2 | 0xa8..=0xaa => {
                    (false, Imm::None)
                }
                0xc8..=0xcf => (false, Imm::None),
                0x80..=0x8f => (false, Imm::Z),
                0x70..=0x73 | 0xa4 | 0xac | 0xba | 0xc2 | 0xc4..=0xc6 => (true, Imm::Fixed(1)),
                _ => (true, Imm::None),
            })
        }

        /// A VEX (2 or 3 bytes) or EVEX (4) prefix of `rest` bytes after
        /// its first, then the opcode of its map (`map`, or the prefix's
        /// low bits): 0F 3A's take an immediate byte, and a few of 0F's.
        fn vex(&mut self, rest: usize, map: Option<u8>) -> Option<(bool, Imm)> {
            let first = self.peek()?;
            self.at += rest;
            let map = map.unwrap_or(first & if rest == 3 { 0x7 } else { 0x1f });
            let op = self.byte()?;
            let imm = match (map, op) {
                (3, _) => Imm::Fixed(1),
                (1, 0x70..=0x73 | 0xc2 | 0xc4..=0xc6) => Imm::Fixed(1),
                _ => Imm::None,
            };
            Some((true, imm))
        }

        /// AMD's XOP prefix (3 bytes), then its opcode.
        fn xop(&mut self) -> Option<(bool, Imm)> {
            let map = self.byte()? & 0x1f;
            self.byte()?;
            self.byte()?;
            let imm = match map {
                8 => Imm::Fixed(1),
                0xa => Imm::Fixed(4),
                _ => Imm::None,
            };
            Some((true, imm))
        }

        /// ModRM, then SIB and displacement where it says.
        fn modrm(&mut self) -> Option<()> {
            self.modrm = self.byte()?;
            let (mode, rm) = (self.modrm >> 6, self.modrm & 7);
            if mode == 3 {
                return Some(());
            }
            let mut disp = match mode {
                1 => 1,
                2 => 4,
                _ if rm == 5 => 4,
                _ => 0,
            };
            if rm == 4 {
                let sib = self.byte()?;
                if mode == 0 && sib & 7 == 5 {
                    disp = 4;
                }
            }
            self.at += disp;
            Some(())
        }
    }

    /// Whether a one-byte opcode has ModRM, and its immediate; `None` for
    /// those 64-bit mode does not have.
    fn one_byte(op: u8) -> Option<(bool, Imm)> {
        let imm = |n| Imm::Fixed(n);
        Some(match op {
            // The ALU rows: r/m forms, then AL/eAX with an immediate.
            0x00..=0x3f if op & 7 < 4 => (true, Imm::None),
            0x00..=0x3f if op & 7 == 4 => (false, imm(1)),
            0x00..=0x3f if op & 7 == 5 => (false, Imm::Z),
            0x06 | 0x07 | 0x0e | 0x16 | 0x17 | 0x1e | 0x1f | 0x27 | 0x2f | 0x37 | 0x3f => {
                return None
            }
            0x00..=0x3f => (false, Imm::None),
            0x40..=0x5f => (false, Imm::None),
            0x60..=0x62 | 0x82 | 0x9a | 0xc4 | 0xc5 | 0xd4 | 0xd5 | 0xd6 | 0xea => return None,
            0x63 => (true, Imm::None),
            0x64..=0x67 => (false, Imm::None),
            0x68 => (false, Imm::Z),
            0x69 => (true, Imm::Z),
            0x6a => (false, imm(1)),
            0x6b => (true, imm(1)),
            0x6c..=0x6f => (false, Imm::None),
            0x70..=0x7f => (false, imm(1)),
            0x80 | 0x83 => (true, imm(1)),
            0x81 => (true, Imm::Z),
            0x84..=0x8f => (true, Imm::None),
            0x90..=0x9f => (false, Imm::None),
            0xa0..=0xa3 => (false, Imm::Moffs),
            0xa4..=0xa7 | 0xaa..=0xaf => (false, Imm::None),
            0xa8 => (false, imm(1)),
            0xa9 => (false, Imm::Z),
            0xb0..=0xb7 => (false, imm(1)),
            0xb8..=0xbf => (false, Imm::V),
            0xc0 | 0xc1 | 0xc6 => (true, imm(1)),
            0xc7 => (true, Imm::Z),
            0xc2 | 0xca => (false, imm(2)),
            0xc3 | 0xc9 | 0xcb | 0xcc | 0xce | 0xcf => (false, Imm::None),
            0xc8 => (false, imm(3)),
            0xcd => (false, imm(1)),
            0xd0..=0xd3 | 0xd8..=0xdf => (true, Imm::None),
            0xd7 => (false, Imm::None),
            0xe0..=0xe7 => (false, imm(1)),
            0xe8 | 0xe9 => (false, imm(4)),
            0xeb => (false, imm(1)),
            0xec..=0xef | 0xf1 | 0xf4 | 0xf5 | 0xf8..=0xfd => (false, Imm::None),
            0xf6 => (true, Imm::Group3(true)),
            0xf7 => (true, Imm::Group3(false)),
            0xfe | 0xff => (true, Imm::None),
            // Prefixes, consumed before the opcode.
            _ => return None,
        })
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_told_apart_by_their_lengths() {
        // endbr64; push rbp; mov rbp,rsp; sub rsp,0x20; mov DWORD PTR
        // [rbp-0x14],edi; movabs rax,imm64; lea rax,[rip+0x0]; call rel32;
        // test BYTE PTR [rax],0x1; vmovdqu ymm0,[rsi]; ret
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20, 0x89, 0x7d,
            0xec, 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xe8, 0, 0, 0,
            0, 0xf6, 0x00, 0x01, 0xc5, 0xfe, 0x6f, 0x06, 0xc3,
        ];
        let found: Vec<u64> = starts(&code).collect();
        assert_eq!(found, [0, 4, 5, 8, 12, 15, 25, 32, 37, 40, 44]);
    }

    /// Every instruction start of every function of `file` agrees with
    /// objdump's disassembly of it.
    fn agrees_with_objdump(file: &std::path::Path) -> usize {
        use std::collections::HashSet;
        let Ok(out) = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(file)
            .output()
        else {
            assert!(std::env::var_os("CI").is_none(), "objdump is needed");
            return 0;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let objdump: HashSet<u64> = text
            .lines()
            .filter_map(|line| {
                let (address, rest) = line.trim_start().split_once(":\t")?;
                (!rest.contains("(bad)")).then(|| u64::from_str_radix(address, 16).ok())?
            })
            .collect();
        let data = std::fs::read(file).unwrap();
        let functions = crate::recorder::probes::symbols::tests::all_functions(file);
        let mut checked = 0;
        for (address, offset, size) in functions {
            let code = &data[offset as usize..(offset + size) as usize];
            // objdump shows FWAIT and the x87 instruction after it as
            // one (`fstcw` is 9B D9 /7); the CPU runs them as two.
            let all: Vec<u64> = starts(code).collect();
            let fwait =
                |at: u64| at > 0 && all.contains(&(at - 1)) && code[at as usize - 1] == 0x9b;
            let shown = |at: u64| objdump.contains(&(address + at)) || !fwait(at);
            let ours: Vec<u64> = all.iter().copied().filter(|&at| shown(at)).collect();
            let theirs = (0..size).filter(|i| objdump.contains(&(address + i)));
            assert_eq!(
                ours,
                theirs.collect::<Vec<u64>>(),
                "at {address:#x} in {file:?}"
            );
            checked += ours.len();
        }
        checked
    }

    #[test]
    fn libraries_decode_as_objdump_decodes_them() {
        for name in ["libc", "libm", "libz", "libstdc++"] {
            if let Some(file) = crate::recorder::probes::files::find(name) {
                let checked = agrees_with_objdump(&file);
                assert!(
                    checked > 1000 || std::env::var_os("CI").is_none(),
                    "{name}: {checked}"
                );
            }
        }
    }
}
