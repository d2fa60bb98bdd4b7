//! Bounds on the shape of a value before anything walks it recursively. Starlark converts,
//! encodes and prints values by recursion, with no bound of its own: a script that nests a list
//! a million deep and then returns, encodes or prints it would overflow the thread's stack and
//! abort the process. Every such conversion looks here first, with an explicit stack.

use starlark::values::Value;
use starlark::values::dict::DictRef;
use starlark::values::list::ListRef;
use starlark::values::structs::StructRef;
use starlark::values::tuple::TupleRef;

use crate::error::Limit;

/// Why a value may not be converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooBig {
    /// The limit it would break.
    pub(crate) limit: Limit,
    /// What about it, for the message.
    pub(crate) what: String,
}

/// Checks that `value` nests containers at most `max_depth` deep and that its text form would
/// take at most about `max_bytes` (shared parts counted each time they appear, as an encoding
/// would write them), without recursion and in time bounded by `max_bytes`.
pub(crate) fn check(value: Value, max_depth: usize, max_bytes: usize) -> Result<(), TooBig> {
    let mut stack: Vec<(Value, usize)> = vec![(value, 0)];
    let mut bytes: usize = 0;
    while let Some((value, depth)) = stack.pop() {
        // Every value costs at least a few bytes of output (`1,`), strings their length.
        bytes = bytes.saturating_add(value.unpack_str().map_or(2, str::len) + 2);
        if bytes > max_bytes {
            return Err(TooBig {
                limit: Limit::Heap,
                what: format!("would take more than {max_bytes} bytes as text"),
            });
        }
        let before = stack.len();
        if let Some(list) = ListRef::from_value(value) {
            stack.extend(list.iter().map(|v| (v, depth + 1)));
        } else if let Some(tuple) = TupleRef::from_value(value) {
            stack.extend(tuple.iter().map(|v| (v, depth + 1)));
        } else if let Some(dict) = DictRef::from_value(value) {
            for (k, v) in dict.iter() {
                stack.push((k, depth + 1));
                stack.push((v, depth + 1));
            }
        } else if let Some(fields) = StructRef::from_value(value) {
            stack.extend(fields.iter().map(|(_, v)| (v, depth + 1)));
        }
        if stack.len() > before && depth + 1 > max_depth {
            return Err(TooBig {
                limit: Limit::Nesting,
                what: format!("nests lists, tuples, dicts or structs more than {max_depth} deep"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use starlark::values::Heap;
    use starlark::values::list::AllocList;

    use super::*;

    #[test]
    fn deep_wide_and_shared_values_are_refused_before_any_walk_recurses() {
        Heap::temp(|heap| {
            let mut deep = heap.alloc(AllocList::EMPTY);
            for _ in 0..1_000_000 {
                deep = heap.alloc(AllocList([deep]));
            }
            let err = check(deep, 100, usize::MAX).expect_err("too deep");
            assert_eq!(err.limit, Limit::Nesting);

            let mut shallow = heap.alloc(AllocList::EMPTY);
            for _ in 0..100 {
                shallow = heap.alloc(AllocList([shallow]));
            }
            assert!(check(shallow, 100, usize::MAX).is_ok());
            assert!(check(shallow, 99, usize::MAX).is_err());

            // Sixty doublings share one list: 2^60 elements to write out, found out early.
            let mut shared = heap.alloc("x");
            for _ in 0..60 {
                shared = heap.alloc(AllocList([shared, shared]));
            }
            let err = check(shared, 100, 1 << 20).expect_err("too big");
            assert_eq!(err.limit, Limit::Heap);
        });
    }
}
