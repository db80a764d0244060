//! What a spec asks of each hit after its probe: `keep` the values to
//! send with it, and `if` a filter the kernel evaluates before anything
//! is sent, as bpftrace's predicates are:
//!
//! ```text
//! uprobe:libc:malloc keep arg0 if arg0 >= 65536
//! uretprobe:libc:read if retval < 0
//! uprobe:libc:open keep str(arg0), arg1
//! tracepoint:syscalls:sys_enter_openat keep str(filename) if dfd != -100
//! ```
//!
//! A value is a name the probe's kind knows (`arg0`..`arg5`, `retval`, a
//! tracepoint's field), read as a 64-bit number, or narrowed by a cast
//! (`(int32)retval`: a C `int` returned in a 64-bit register), or as the
//! C string it points to (`str(arg0)`). A condition compares a value
//! with a number; `&&` joins conditions.

use std::fmt;

/// The values and filter of a spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clauses {
    /// `keep`: the values each hit sends, in order.
    pub keep: Vec<Operand>,
    /// `if`: the conditions a hit must pass, all of them.
    pub filter: Vec<Condition>,
}

/// A value a spec names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operand {
    /// The name its kind knows it by.
    pub name: String,
    /// Read narrower than 64 bits: bytes, and whether signed.
    pub cast: Option<(u8, bool)>,
    /// Read as the C string it points to.
    pub string: bool,
}

/// A comparison of a value with a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// The value.
    pub operand: Operand,
    /// How it compares.
    pub op: Op,
    /// With what.
    pub number: i64,
}

/// A comparison, signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Conditions a filter may join.
pub const MAX_CONDITIONS: usize = 4;

/// The casts a value may take, as bpftrace and C write them.
const CASTS: [(&str, u8, bool); 12] = [
    ("int8", 1, true),
    ("uint8", 1, false),
    ("int16", 2, true),
    ("uint16", 2, false),
    ("int32", 4, true),
    ("uint32", 4, false),
    ("int64", 8, true),
    ("uint64", 8, false),
    ("int", 4, true),
    ("unsigned", 4, false),
    ("long", 8, true),
    ("char", 1, true),
];

/// Splits a spec into what names the probe and its clauses.
pub fn split(text: &str) -> Result<(&str, Clauses), String> {
    let (head, filter) = match text.split_once(" if ") {
        Some((head, filter)) => (head, Some(filter)),
        None => (text, None),
    };
    let (head, keep) = match head.split_once(" keep ") {
        Some((head, keep)) => (head, Some(keep)),
        None => (head, None),
    };
    let mut clauses = Clauses::default();
    if let Some(keep) = keep {
        clauses.keep = keep
            .split(',')
            .map(|v| operand(v.trim()))
            .collect::<Result<_, _>>()?;
    }
    if let Some(filter) = filter {
        clauses.filter = filter
            .split("&&")
            .map(|c| condition(c.trim()))
            .collect::<Result<_, _>>()?;
        if clauses.filter.len() > MAX_CONDITIONS {
            return Err(format!(
                "a filter joins at most {MAX_CONDITIONS} conditions with &&"
            ));
        }
    }
    Ok((head.trim_end(), clauses))
}

/// `NAME`, `(CAST)NAME` or `str(NAME)`.
fn operand(text: &str) -> Result<Operand, String> {
    if let Some(inner) = text.strip_prefix("str(").and_then(|t| t.strip_suffix(')')) {
        let name = name(inner.trim())?;
        return Ok(Operand {
            name,
            cast: None,
            string: true,
        });
    }
    let (cast, rest) = match text.strip_prefix('(').and_then(|t| t.split_once(')')) {
        Some((cast, rest)) => {
            let known = CASTS.iter().find(|(c, _, _)| *c == cast.trim());
            let (_, size, signed) = known.ok_or_else(|| {
                let names: Vec<&str> = CASTS.iter().map(|(c, _, _)| *c).collect();
                format!("unknown cast ({cast}): one of {}", names.join(", "))
            })?;
            (Some((*size, *signed)), rest.trim())
        }
        None => (None, text),
    };
    Ok(Operand {
        name: name(rest)?,
        cast,
        string: false,
    })
}

fn name(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !text.starts_with(|c: char| c.is_ascii_digit());
    match valid {
        true => Ok(text.to_owned()),
        false => Err(format!(
            "{text:?} is not a value: argN, retval, a field's name, (CAST)VALUE or str(VALUE)"
        )),
    }
}

/// `VALUE OP NUMBER`.
fn condition(text: &str) -> Result<Condition, String> {
    // Two-character operators first: `<=` before `<`.
    let ops = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    let (at, token, op) = ops
        .iter()
        .filter_map(|(token, op)| Some((text.find(token)?, *token, *op)))
        .min_by_key(|(at, token, _)| (*at, std::cmp::Reverse(token.len())))
        .ok_or_else(|| {
            format!("{text:?} is not a comparison: VALUE OP NUMBER, OP one of == != < <= > >=")
        })?;
    let operand = operand(text[..at].trim())?;
    if operand.string {
        return Err("a filter compares numbers, not strings".into());
    }
    let number = number(text[at + token.len()..].trim())?;
    Ok(Condition {
        operand,
        op,
        number,
    })
}

/// A decimal or `0x` hexadecimal number, negative with `-`.
fn number(text: &str) -> Result<i64, String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let magnitude = match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse::<u64>(),
    }
    .map_err(|_| format!("{text:?} is not a number"))?;
    // As C reads it: the 64 bits, two's complement.
    Ok(match negative {
        true => (magnitude as i64).wrapping_neg(),
        false => magnitude as i64,
    })
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.string {
            return write!(f, "str({})", self.name);
        }
        if let Some((size, signed)) = self.cast {
            let cast = CASTS.iter().find(|(_, s, g)| *s == size && *g == signed);
            write!(f, "({})", cast.map_or("?", |(c, _, _)| *c))?;
        }
        f.write_str(&self.name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        })
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.operand, self.op, self.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(name: &str) -> Operand {
        Operand {
            name: name.into(),
            cast: None,
            string: false,
        }
    }

    #[test]
    fn clauses_split_off_the_probe() {
        let (head, clauses) = split("uprobe:libc:malloc keep arg0 if arg0 >= 65536").unwrap();
        assert_eq!(head, "uprobe:libc:malloc");
        assert_eq!(clauses.keep, [plain("arg0")]);
        assert_eq!(
            clauses.filter,
            [Condition {
                operand: plain("arg0"),
                op: Op::Ge,
                number: 65536
            }]
        );
        let (head, clauses) =
            split("uprobe:./app:std::vector<int, std::allocator<int> >::push_back(int const&)")
                .unwrap();
        assert!(head.ends_with("(int const&)") && clauses == Clauses::default());
        let (_, clauses) =
            split("uretprobe:libc:open if (int32)retval < 0 && retval != 0x10").unwrap();
        assert_eq!(clauses.filter[0].operand.cast, Some((4, true)));
        assert_eq!(clauses.filter[0].number, 0);
        assert_eq!(
            (clauses.filter[1].op, clauses.filter[1].number),
            (Op::Ne, 16)
        );
        let (_, clauses) = split("uprobe:libc:open keep str(arg0), arg1").unwrap();
        assert!(clauses.keep[0].string && !clauses.keep[1].string);
        assert_eq!(clauses.keep[0].to_string(), "str(arg0)");
        let (_, clauses) = split("uretprobe:libc:read if retval <= -1").unwrap();
        assert_eq!(clauses.filter[0].to_string(), "retval <= -1");
    }

    #[test]
    fn bad_clauses_say_what_is_wrong() {
        for (text, says) in [
            ("u:libc:f if arg0 ~ 3", "is not a comparison"),
            ("u:libc:f if arg0 > x", "\"x\" is not a number"),
            ("u:libc:f if str(arg0) == 3", "compares numbers"),
            ("u:libc:f keep (float)arg0", "unknown cast (float)"),
            ("u:libc:f keep 3arg", "is not a value"),
            (
                "u:libc:f if arg0 > 1 && arg1 > 1 && arg2 > 1 && arg3 > 1 && arg4 > 1",
                "at most 4 conditions",
            ),
        ] {
            let err = split(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
