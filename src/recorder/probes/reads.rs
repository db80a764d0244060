//! A spec's `keep` and `if` for one of its points: each value it names
//! found where its kind reads it ([`Kind::value`]), the kept ones first,
//! then those only the filter compares.

use super::clauses::{Clauses, Operand};
use super::kinds::Kind;
use super::point::{Found, Reads, Source, Value};
use crate::bpf::types::probe_limits;

/// Values a hit reads at the most (proctrace.h's PROBE_ARGS).
const MAX_VALUES: usize = probe_limits::PROBE_VALUES.0 as usize;
/// Of them, read as strings (PROBE_STRING_ARGS).
const MAX_STRINGS: usize = probe_limits::PROBE_STRINGS.0 as usize;

/// What the hits of `found`, a point of `kind`, read for `clauses`.
pub(super) fn of(kind: &dyn Kind, found: &Found, clauses: &Clauses) -> Result<Reads, String> {
    let mut reads = Reads::default();
    for operand in &clauses.keep {
        let value = value(kind, found, operand)?;
        if let Source::Usdt(_) = value.source {
            return Err(
                "a USDT probe keeps all its arguments: `keep` is for the other kinds".into(),
            );
        }
        reads.values.push(value);
    }
    reads.kept = reads.values.len();
    if reads.values.iter().filter(|v| v.string).count() > MAX_STRINGS {
        return Err(format!("a hit keeps at most {MAX_STRINGS} strings"));
    }
    for condition in &clauses.filter {
        let value = value(kind, found, &condition.operand)?;
        if value.string {
            return Err(format!(
                "{} is text: a filter compares numbers",
                condition.operand
            ));
        }
        let index = match value.source {
            // A USDT hit reads every argument, in order.
            Source::Usdt(n) => usize::from(n),
            _ => match reads.values.iter().position(|v| *v == value) {
                Some(at) => at,
                None => {
                    reads.values.push(value);
                    reads.values.len() - 1
                }
            },
        };
        reads.filter.push((index, condition.op, condition.number));
    }
    if reads.values.len() > MAX_VALUES {
        return Err(format!(
            "a hit reads at most {MAX_VALUES} values, kept and compared together"
        ));
    }
    Ok(reads)
}

/// Where `operand` is read, narrowed or as a string as it asks.
fn value(kind: &dyn Kind, found: &Found, operand: &Operand) -> Result<Value, String> {
    let mut value = kind.value(found, &operand.name)?;
    if let Some((size, signed)) = operand.cast {
        value.size = size.min(value.size);
        value.signed = signed;
    }
    // Text fields are read as text unasked.
    value.string |= operand.string;
    Ok(value)
}
