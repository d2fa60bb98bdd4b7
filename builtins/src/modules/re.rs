//! `re.search`, `re.match`, `re.findall`, `re.sub` (Rust `regex` syntax).

use regex::Regex;
use serde_json::json;
use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;

use crate::host::Host;
use crate::json_value::alloc_json;

/// Regexes kept per sandbox; beyond this the cache is cleared rather than grown.
const CACHE_SIZE: usize = 256;

fn compile(host: &Host, func: &str, pattern: &str) -> anyhow::Result<Regex> {
    let mut cache = host
        .sandbox
        .regexes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(re) = cache.get(pattern) {
        return Ok(re.clone());
    }
    let re = Regex::new(pattern).map_err(|e| anyhow::anyhow!("{func}: invalid pattern: {e}"))?;
    if cache.len() >= CACHE_SIZE {
        cache.clear();
    }
    cache.insert(pattern.to_owned(), re.clone());
    Ok(re)
}

fn match_json(caps: &regex::Captures) -> serde_json::Value {
    let whole = caps.get(0).expect("group 0 always participates in a match");
    let groups: Vec<serde_json::Value> = caps
        .iter()
        .skip(1)
        .map(|g| g.map_or(serde_json::Value::Null, |m| json!(m.as_str())))
        .collect();
    json!({
        "match": whole.as_str(),
        "start": whole.start(),
        "end": whole.end(),
        "groups": groups,
    })
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Finds the first match of `pattern` anywhere in `s`. Returns None, or
    /// `{match, start, end, groups}` (byte offsets; `groups` lists capture groups, None for a group
    /// that did not take part).
    ///
    /// ```python
    /// m = re.search(r"(\d+) passed", out)
    /// passed = int(m["groups"][0]) if m else 0
    /// ```
    fn search<'v>(
        #[starlark(require = pos)] pattern: &str,
        #[starlark(require = pos)] s: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let re = compile(Host::of(eval)?, "re.search", pattern)?;
        Ok(match re.captures(s) {
            Some(caps) => alloc_json(eval.heap(), &match_json(&caps)),
            None => Value::new_none(),
        })
    }

    /// Like `re.search`, but the match must start at the beginning of `s`.
    ///
    /// ```python
    /// re.match(r"v\d+", "v2 released") != None
    /// ```
    fn r#match<'v>(
        #[starlark(require = pos)] pattern: &str,
        #[starlark(require = pos)] s: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let re = compile(Host::of(eval)?, "re.match", pattern)?;
        Ok(match re.captures(s) {
            Some(caps) if caps.get(0).is_some_and(|m| m.start() == 0) => {
                alloc_json(eval.heap(), &match_json(&caps))
            }
            _ => Value::new_none(),
        })
    }

    /// Returns every non-overlapping match: the matched strings when the pattern has no groups,
    /// the one group's text when it has one, and a list of group texts when it has more.
    ///
    /// ```python
    /// re.findall(r"\w+\.rs", out)
    /// ```
    fn findall<'v>(
        #[starlark(require = pos)] pattern: &str,
        #[starlark(require = pos)] s: &str,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let host = Host::of(eval)?;
        let re = compile(host, "re.findall", pattern)?;
        let groups = re.captures_len() - 1;
        let text = |m: Option<regex::Match>| m.map_or(String::new(), |m| m.as_str().to_owned());
        // What the list will take on the heap, counted before it is built: an empty pattern
        // matches at every byte.
        let cap = host.sandbox.limits.max_heap_bytes;
        let mut bytes = 0usize;
        let mut found: Vec<serde_json::Value> = Vec::new();
        for caps in re.captures_iter(s) {
            bytes = bytes.saturating_add(caps.get(0).map_or(0, |m| m.len()) + 32 * (groups + 1));
            if bytes > cap {
                return Err(host.over_limit(
                    crate::error::Limit::Heap,
                    "re.findall",
                    &format!("the matches would take more than {cap} bytes"),
                ));
            }
            found.push(match groups {
                0 => json!(text(caps.get(0))),
                1 => json!(text(caps.get(1))),
                _ => json!((1..=groups).map(|i| text(caps.get(i))).collect::<Vec<_>>()),
            });
        }
        Ok(alloc_json(eval.heap(), &serde_json::Value::Array(found)))
    }

    /// Replaces matches of `pattern` in `s` with `repl` (`$1` or `${name}` refer to groups);
    /// `count` > 0 replaces at most that many.
    ///
    /// ```python
    /// re.sub(r"sk-[A-Za-z0-9]{20,}", "[REDACTED]", text)
    /// ```
    fn sub(
        #[starlark(require = pos)] pattern: &str,
        #[starlark(require = pos)] repl: &str,
        #[starlark(require = pos)] s: &str,
        #[starlark(require = named, default = 0)] count: i32,
        eval: &mut Evaluator,
    ) -> anyhow::Result<String> {
        let host = Host::of(eval)?;
        let re = compile(host, "re.sub", pattern)?;
        let limit = usize::try_from(count.max(0)).unwrap_or(0);
        // Each replacement adds at most `repl` plus one copy of the match per `$` reference:
        // the result's size is bounded before it is built.
        let cap = host.sandbox.limits.max_heap_bytes;
        let references = repl.bytes().filter(|b| *b == b'$').count();
        let mut bound = s.len();
        for (i, m) in re.find_iter(s).enumerate() {
            if limit > 0 && i >= limit {
                break;
            }
            bound = bound.saturating_add(
                repl.len()
                    .saturating_add(references.saturating_mul(m.len())),
            );
            if bound > cap {
                return Err(host.over_limit(
                    crate::error::Limit::Heap,
                    "re.sub",
                    &format!("the result could be larger than {cap} bytes"),
                ));
            }
        }
        Ok(re.replacen(s, limit, repl).into_owned())
    }
}
