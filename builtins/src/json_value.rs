//! JSON values as Starlark values on a heap, exactly (`alloc_json`), and the JSON a script may
//! hand back (`check_json`).

use starlark::values::dict::AllocDict;
use starlark::values::list::AllocList;
use starlark::values::{Heap, Value};

/// Allocates a JSON value on `heap` as the Starlark value of the same shape, exactly: integers
/// of any size become ints (never floats), other numbers floats, arrays lists and objects dicts
/// (in their order).
///
/// Numbers with no finite value (which [`check_json`] refuses before anything is allocated)
/// become infinite floats.
pub(crate) fn alloc_json<'v>(heap: Heap<'v>, value: &serde_json::Value) -> Value<'v> {
    match value {
        serde_json::Value::Null => Value::new_none(),
        serde_json::Value::Bool(b) => Value::new_bool(*b),
        serde_json::Value::Number(n) => alloc_number(heap, n),
        serde_json::Value::String(s) => heap.alloc(s.as_str()),
        serde_json::Value::Array(items) => {
            heap.alloc(AllocList(items.iter().map(|item| alloc_json(heap, item))))
        }
        serde_json::Value::Object(map) => heap.alloc(AllocDict(
            map.iter().map(|(k, v)| (k.as_str(), alloc_json(heap, v))),
        )),
    }
}

fn alloc_number<'v>(heap: Heap<'v>, n: &serde_json::Number) -> Value<'v> {
    if let Some(i) = n.as_i64() {
        return heap.alloc(i);
    }
    if let Some(u) = n.as_u64() {
        return heap.alloc(u);
    }
    // starlark's own conversion tries `as_f64()` before big integers, and with serde_json's
    // `arbitrary_precision` (which starlark enables) that succeeds for any integer text.
    let text = n.to_string();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text.as_str()),
    };
    if !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Some(int) = alloc_big_int(heap, negative, digits)
    {
        return int;
    }
    heap.alloc(text.parse::<f64>().unwrap_or(f64::NAN))
}

/// Builds the Starlark int of a run of decimal digits: limbs of 18 digits (each fits an `i64`)
/// combined pairwise, `hi * base + lo` with the base squared at each level, so long numbers cost
/// big-integer multiplications of balanced sizes rather than one multiplication per limb.
/// `None` only if Starlark int arithmetic fails, which it does not for ints.
fn alloc_big_int<'v>(heap: Heap<'v>, negative: bool, digits: &str) -> Option<Value<'v>> {
    const LIMB_DIGITS: usize = 18;
    const LIMB_BASE: i64 = 1_000_000_000_000_000_000;
    // Least significant limb first.
    let mut limbs: Vec<Value<'v>> = digits
        .as_bytes()
        .rchunks(LIMB_DIGITS)
        .map(|chunk| {
            let limb = chunk
                .iter()
                .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
            heap.alloc(limb)
        })
        .collect();
    let mut base = heap.alloc(LIMB_BASE);
    while limbs.len() > 1 {
        let mut next = Vec::with_capacity(limbs.len().div_ceil(2));
        for pair in limbs.chunks(2) {
            next.push(match *pair {
                [lo, hi] => hi.mul(base, heap).ok()?.add(lo, heap).ok()?,
                [lo] => lo,
                _ => return None,
            });
        }
        limbs = next;
        if limbs.len() > 1 {
            base = base.mul(base, heap).ok()?;
        }
    }
    let magnitude = limbs.pop()?;
    if negative {
        magnitude.minus(heap).ok()
    } else {
        Some(magnitude)
    }
}

/// Refuses JSON values Starlark cannot represent exactly (numbers outside every numeric type).
pub(crate) fn check_json(value: &serde_json::Value) -> Result<(), String> {
    match value {
        serde_json::Value::Number(n) => {
            let text = n.to_string();
            let integer = text
                .trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit());
            if integer || n.as_f64().is_some_and(f64::is_finite) {
                Ok(())
            } else {
                Err(format!("number {text} cannot be represented"))
            }
        }
        serde_json::Value::Array(items) => items.iter().try_for_each(check_json),
        serde_json::Value::Object(map) => map.values().try_for_each(check_json),
        _ => Ok(()),
    }
}
