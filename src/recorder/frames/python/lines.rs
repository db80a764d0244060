//! The line a CPython instruction is on, from its code object's line
//! table as the kernel copied it: 3.9's `co_lnotab`, 3.10's
//! `co_linetable` and 3.11's location table (the format of
//! `Objects/lnotab_notes.txt` of each version). Pure: bytes in, a line
//! out; `None` where the table says the instruction has no line, or
//! where it was cut before the instruction (a long function's table is
//! copied up to a window).

/// The table's format, by minor version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    /// 3.9: (bytes, line delta) pairs; instructions counted in bytes.
    Lnotab,
    /// 3.10: (bytes, line delta) pairs, -128 for no line; instructions
    /// counted in 2-byte code units.
    Linetable,
    /// 3.11 and later: location entries of code units.
    Locations,
}

impl Table {
    pub(crate) fn of(minor: u32) -> Table {
        match minor {
            9 => Table::Lnotab,
            10 => Table::Linetable,
            _ => Table::Locations,
        }
    }

    /// The line of `instruction` (as the version counts it; negative for
    /// a frame not started, on its first line) of a code object whose
    /// first line is `first`; `whole` where `table` is not cut short.
    pub(crate) fn line(
        self,
        table: &[u8],
        whole: bool,
        first: i32,
        instruction: i32,
    ) -> Option<i32> {
        let Ok(instruction) = u64::try_from(instruction) else {
            return Some(first);
        };
        match self {
            Table::Lnotab => lnotab(table, whole, first, instruction),
            Table::Linetable => linetable(table, first, instruction * 2),
            Table::Locations => locations(table, first, instruction * 2),
        }
    }
}

/// 3.9: the line of the instruction at byte `at`: the deltas of every
/// pair whose address it has reached.
fn lnotab(table: &[u8], whole: bool, first: i32, at: u64) -> Option<i32> {
    let (mut addr, mut line) = (0u64, first);
    for pair in table.chunks_exact(2) {
        addr += u64::from(pair[0]);
        if addr > at {
            return Some(line);
        }
        line += i32::from(pair[1] as i8);
    }
    // Past the last pair: its line, unless pairs were cut off after it.
    whole.then_some(line)
}

/// 3.10: pairs of (bytes covered, line delta); -128 covers bytes of no
/// line.
fn linetable(table: &[u8], first: i32, at: u64) -> Option<i32> {
    let (mut end, mut line) = (0u64, first);
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = pair[1] as i8;
        if delta != -128 {
            line += i32::from(delta);
        }
        if (start..end).contains(&at) {
            return (delta != -128).then_some(line);
        }
    }
    None
}

/// 3.11+: entries of a first byte `1cccclll` (a code, a length of
/// `lll + 1` code units) and what the code says follows.
fn locations(table: &[u8], first: i32, at: u64) -> Option<i32> {
    let mut bytes = Reader { table, at: 0 };
    let (mut end, mut line) = (0u64, first);
    while let Some(head) = bytes.byte() {
        let start = end;
        end += 2 * (u64::from(head & 7) + 1);
        let code = (head >> 3) & 15;
        let here = match code {
            15 => None,
            14 => {
                line += bytes.svarint()?;
                for _ in 0..3 {
                    bytes.varint()?;
                }
                Some(line)
            }
            13 => {
                line += bytes.svarint()?;
                Some(line)
            }
            10..=12 => {
                line += i32::from(code) - 10;
                bytes.skip(2)?;
                Some(line)
            }
            _ => {
                bytes.skip(1)?;
                Some(line)
            }
        };
        if (start..end).contains(&at) {
            return here;
        }
    }
    None
}

struct Reader<'t> {
    table: &'t [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let byte = *self.table.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.at += n;
        (self.at <= self.table.len()).then_some(())
    }

    /// Six bits a byte, the least significant first, 0x40 for more.
    fn varint(&mut self) -> Option<u32> {
        let (mut value, mut shift) = (0u32, 0);
        loop {
            let byte = self.byte()?;
            value |= u32::from(byte & 63).checked_shl(shift)?;
            if byte & 64 == 0 {
                return Some(value);
            }
            shift += 6;
        }
    }

    fn svarint(&mut self) -> Option<i32> {
        let value = self.varint()?;
        let magnitude = i32::try_from(value >> 1).ok()?;
        Some(if value & 1 != 0 {
            -magnitude
        } else {
            magnitude
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_adds_the_deltas_the_instruction_has_reached() {
        // Bytes 0-5 on line 10, 6-13 on 11, 14- on 13.
        let table = [6, 1, 8, 2];
        let line = |at| Table::Lnotab.line(&table, true, 10, at);
        assert_eq!([line(0), line(6), line(20)], [Some(10), Some(11), Some(13)]);
        assert_eq!(line(-1), Some(10), "not started: its first line");
        assert_eq!(Table::Lnotab.line(&table, false, 10, 20), None, "cut");
    }

    #[test]
    fn linetable_has_ranges_of_no_line() {
        // Code units 0-1 on line 5 (+0), 2-3 no line, 4-6 on line 7.
        let table = [4, 0, 4, 0x80, 6, 2];
        let line = |at| Table::Linetable.line(&table, true, 5, at);
        assert_eq!(
            [line(1), line(2), line(4), line(9)],
            [Some(5), None, Some(7), None]
        );
    }

    #[test]
    fn locations_read_each_kind_of_entry() {
        let table = [
            // One unit, code 13 (no column), line +1 (svarint 2).
            0x80 | 13 << 3,
            2,
            // Two units, code 5 (short form): same line, one byte more.
            0x80 | 5 << 3 | 1,
            0x11,
            // One unit, code 11 (one line form): line +1, two bytes.
            0x80 | 11 << 3,
            3,
            9,
            // One unit, code 14 (long form): line -2 (svarint 5), then
            // end line, column and end column.
            0x80 | 14 << 3,
            5,
            0,
            4,
            9,
            // One unit with no location.
            0x80 | 15 << 3,
        ];
        let line = |unit| Table::Locations.line(&table, true, 100, unit);
        assert_eq!(
            [line(0), line(1), line(2), line(3), line(4), line(5)],
            [Some(101), Some(101), Some(101), Some(102), Some(100), None]
        );
        assert_eq!(line(6), None, "past the table");
    }
}
