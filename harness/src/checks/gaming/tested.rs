//! What the protected tests ask: each call a test makes with literal arguments (`add(40, 2)`),
//! with the literal it expects back when the test says (`== 43`, `assert_eq!(…, 43)`,
//! `expect(…).toBe(43)`, `if got := Add(40, 2); got != 43`), and the rows of table-driven
//! tests (`(40, 2, 43)`, `{a: 40, b: 2, want: 43}`). The `special-cased-input` rule looks for
//! these inputs in the delegate's added code.

use super::source::{Language, Source, Tok, Token};

/// A literal value, compared the way a program would: `43 == 43.0`, `'a' == "a"`.
#[derive(Debug, Clone)]
pub(crate) enum Lit {
    /// A number, as written (lowercased, separators dropped) and as a float when it reads as one.
    Num(String, Option<f64>),
    /// A string's contents.
    Str(String),
    /// `True`/`true`/`False`/`false`.
    Bool(bool),
    /// `None`, `null`, `nil`, `undefined`.
    Null,
}

impl PartialEq for Lit {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Lit::Num(a, x), Lit::Num(b, y)) => match (x, y) {
                (Some(x), Some(y)) => x == y,
                _ => a == b,
            },
            (Lit::Str(a), Lit::Str(b)) => a == b,
            // A number written as a string key (`{'0.5': …}`, every JavaScript object key).
            (Lit::Str(s), Lit::Num(_, Some(v))) | (Lit::Num(_, Some(v)), Lit::Str(s)) => {
                s.trim().parse::<f64>().is_ok_and(|p| p == *v)
            }
            (Lit::Bool(a), Lit::Bool(b)) => a == b,
            (Lit::Null, Lit::Null) => true,
            _ => false,
        }
    }
}

impl Lit {
    /// Small common values a comparison with which says nothing about a test: 0, 1, 2, -1,
    /// booleans, null and the empty string.
    pub(crate) fn trivial(&self) -> bool {
        match self {
            Lit::Num(_, Some(v)) => [0.0, 1.0, 2.0, -1.0].contains(v),
            Lit::Num(..) => false,
            Lit::Str(s) => s.trim().is_empty(),
            Lit::Bool(_) | Lit::Null => true,
        }
    }

    /// Whether it is too particular to be anything but a test's value: a number of six
    /// significant digits or more, or a string of eight characters or more.
    pub(crate) fn distinctive(&self) -> bool {
        match self {
            Lit::Num(text, _) => text.chars().filter(char::is_ascii_digit).count() >= 6,
            Lit::Str(s) => s.chars().count() >= 8,
            Lit::Bool(_) | Lit::Null => false,
        }
    }

    /// The literal of a name, when it is one (`True`, `nil`, …).
    fn of_ident(name: &str) -> Option<Lit> {
        Some(match name {
            "True" | "true" => Lit::Bool(true),
            "False" | "false" => Lit::Bool(false),
            "None" | "null" | "nil" | "undefined" => Lit::Null,
            _ => return None,
        })
    }

    /// A number token's value, negated when `negative`.
    pub(crate) fn number(text: &str, negative: bool) -> Lit {
        let value = if let Some(hex) = text.strip_prefix("0x") {
            i64::from_str_radix(hex, 16).ok().map(|v| v as f64)
        } else {
            text.trim_end_matches('j').parse::<f64>().ok()
        };
        let sign = if negative { "-" } else { "" };
        Lit::Num(
            format!("{sign}{text}"),
            value.map(|v| if negative { -v } else { v }),
        )
    }
}

impl std::fmt::Display for Lit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lit::Num(text, _) => f.write_str(text),
            Lit::Str(s) => write!(f, "{s:?}"),
            Lit::Bool(b) => write!(f, "{b}"),
            Lit::Null => f.write_str("null"),
        }
    }
}

/// One input a test gives the code: a call with literal arguments, or a table row.
#[derive(Debug, Clone)]
pub(crate) struct Tested {
    /// The function called (`add`), when the test names it; `None` for a table row.
    pub(crate) function: Option<String>,
    /// Its literal arguments, in order.
    pub(crate) args: Vec<Lit>,
    /// The literal the test expects back, when it says.
    pub(crate) expected: Option<Lit>,
    /// The test file, relative to the workspace.
    pub(crate) file: String,
    /// The line (1-based).
    pub(crate) line: usize,
}

impl Tested {
    /// `(40, 2)`: the arguments as the finding shows them.
    pub(crate) fn shown_args(&self) -> String {
        let args: Vec<String> = self.args.iter().map(ToString::to_string).collect();
        format!("({})", args.join(", "))
    }
}

/// Calls that assert rather than compute: never the function under test.
const FRAMEWORK: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "assert_matches",
    "debug_assert",
    "assertEqual",
    "assertEquals",
    "assertNotEqual",
    "assertTrue",
    "assertFalse",
    "assertIs",
    "assertIsNone",
    "assertIn",
    "assertAlmostEqual",
    "assertRaises",
    "assertRaisesRegex",
    "expect",
    "strictEqual",
    "deepStrictEqual",
    "notStrictEqual",
    "equal",
    "deepEqual",
    "notEqual",
    "ok",
    "Equal",
    "EqualValues",
    "NotEqual",
    "True",
    "False",
    "Nil",
    "NoError",
    "Error",
    "Errorf",
    "Fatal",
    "Fatalf",
    "Log",
    "Logf",
    "Run",
    "Skip",
    "Skipf",
    "Helper",
    "Parallel",
    "describe",
    "it",
    "test",
    "each",
    "print",
    "println",
    "printf",
    "Printf",
    "Println",
    "Sprintf",
    "format",
    "len",
    "str",
    "int",
    "float",
    "repr",
    "list",
    "dict",
    "set",
    "tuple",
    "range",
    "parametrize",
    "param",
    "fixture",
    "mark",
    "raises",
    "approx",
    "toBe",
    "toEqual",
    "toStrictEqual",
    "toBeCloseTo",
    "toThrow",
    "toMatch",
    "toContain",
    "String",
    "Number",
    "Boolean",
    "Some",
    "Ok",
    "Err",
    "vec",
    "format_args",
    "panic",
    "unwrap",
    "expect_err",
    "require",
    "import",
    "beforeEach",
    "afterEach",
    "beforeAll",
    "afterAll",
    "skip",
    "only",
    "todo",
    "new",
    "New",
    "from",
    "to_string",
    "into",
    "Deserialize",
    "open",
    "Path",
    "join",
    "setUp",
];

/// Assertion calls whose other literal argument is the expected value:
/// `assertEqual(add(40, 2), 43)`, `assert_eq!(43, add(40, 2))`, `assert.Equal(t, 43, …)`.
const ASSERT_EQUAL: &[&str] = &[
    "assertEqual",
    "assertEquals",
    "assertAlmostEqual",
    "assert_eq",
    "strictEqual",
    "deepStrictEqual",
    "equal",
    "deepEqual",
    "Equal",
    "EqualValues",
    "eq",
    "assertIs",
];

/// Matchers of `expect(…).X(value)` whose value is the expected one.
const EXPECT_MATCHERS: &[&str] = &[
    "toBe",
    "toEqual",
    "toStrictEqual",
    "toBeCloseTo",
    "toMatchObject",
    "to_equal",
];

/// Fields of a table row that hold the expected value (`want: 43`) and that hold no input
/// (`name: "adds"`).
const EXPECTED_FIELDS: &[&str] = &[
    "want", "expected", "expect", "exp", "out", "output", "result", "res", "answer", "wantErr",
];
const LABEL_FIELDS: &[&str] = &[
    "name",
    "desc",
    "description",
    "title",
    "msg",
    "message",
    "label",
    "id",
];

/// Every input the test `source` (at `file`) gives: its literal calls and table rows.
pub(crate) fn inputs(source: &Source, file: &str) -> Vec<Tested> {
    let toks = &source.tokens;
    let mut found = Vec::new();
    for i in 0..toks.len() {
        let Token::Ident(name) = &toks[i].token else {
            continue;
        };
        // A call `name(` or a macro `name!(`.
        let open = match (toks.get(i + 1), toks.get(i + 2)) {
            (Some(t), _) if is_punct(t, "(") => i + 1,
            (Some(bang), Some(t)) if is_punct(bang, "!") && is_punct(t, "(") => i + 2,
            _ => continue,
        };
        if FRAMEWORK.contains(&name.as_str()) || is_definition(toks, i, source.language) {
            continue;
        }
        let Some(close) = closing(toks, open) else {
            continue;
        };
        let Some(args) = literal_list(&toks[open + 1..close]) else {
            continue;
        };
        if args.is_empty() {
            continue;
        }
        let expected = expected_after(toks, close)
            .or_else(|| expected_before(toks, i))
            .or_else(|| expected_in_assert(toks, i, close))
            .or_else(|| expected_by_truth(toks, i));
        found.push(Tested {
            function: Some(name.clone()),
            args,
            expected,
            file: file.to_owned(),
            line: toks[i].line + 1,
        });
    }
    found.extend(rows(source, file));
    found.extend(map_entries(source, file));
    found
}

/// The entries of a map literal that drives a test (`{10: "55", 93: "…"}`, `CASES = {"1h":
/// 3600}`): each key an input, its value the expected answer.
fn map_entries(source: &Source, file: &str) -> Vec<Tested> {
    let toks = &source.tokens;
    let mut found = Vec::new();
    for k in 1..toks.len() {
        if !is_punct(&toks[k], ":") {
            continue;
        }
        // `KEY: VALUE` where the key follows `{` or `,` (or starts a line in a multi-line map).
        let Some((key, _)) = literal_at(toks, k - 1).filter(|(l, used)| l.len() == 1 && *used == 1)
        else {
            continue;
        };
        let opens = k < 2
            || matches!(&toks[k - 2].token, Token::Punct(p) if p == "{" || p == ",")
            || toks[k - 2].line < toks[k - 1].line;
        if !opens {
            continue;
        }
        let Some((value, used)) = literal_at(toks, k + 1).filter(|(l, _)| l.len() == 1) else {
            continue;
        };
        let ends = toks
            .get(k + 1 + used)
            .is_none_or(|t| matches!(&t.token, Token::Punct(p) if p == "," || p == "}"));
        if ends {
            found.push(Tested {
                function: None,
                args: key,
                expected: value.into_iter().next(),
                file: file.to_owned(),
                line: toks[k].line + 1,
            });
        }
    }
    found
}

/// Whether the name at `i` is being defined, not called (`def add(`, `fn add(`,
/// `function add(`, `func Add(`).
fn is_definition(toks: &[Tok], i: usize, _language: Language) -> bool {
    i > 0
        && matches!(&toks[i - 1].token, Token::Ident(k) if matches!(k.as_str(), "def" | "fn" | "function" | "func" | "class" | "struct"))
}

fn is_punct(tok: &Tok, p: &str) -> bool {
    matches!(&tok.token, Token::Punct(x) if x == p)
}

/// The index of the bracket closing the one at `open`.
pub(crate) fn closing(toks: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, tok) in toks.iter().enumerate().skip(open) {
        if let Token::Punct(p) = &tok.token {
            match p.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// The values of a comma-separated list when every element is a literal (or a bracketed list
/// of literals, flattened); `None` otherwise.
pub(crate) fn literal_list(toks: &[Tok]) -> Option<Vec<Lit>> {
    let mut values = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let (lit, used) = literal_at(toks, k)?;
        values.extend(lit);
        k += used;
        match toks.get(k) {
            None => break,
            Some(t) if is_punct(t, ",") => k += 1,
            Some(_) => return None,
        }
    }
    Some(values)
}

/// Number types whose value is written as one literal argument: `Decimal("19.99")`,
/// `Fraction(1, 3)` is not one (two arguments), `BigInt("9007199254740993")` is.
const NUMBER_TYPES: &[&str] = &["Decimal", "Fraction", "BigInt", "BigDecimal", "Big"];

/// The literal (or bracketed literals) starting at `k`, and how many tokens it takes.
pub(crate) fn literal_at(toks: &[Tok], k: usize) -> Option<(Vec<Lit>, usize)> {
    match &toks.get(k)?.token {
        Token::Number(n) => Some((vec![Lit::number(n, false)], 1)),
        Token::Str(s) => Some((vec![Lit::Str(s.clone())], 1)),
        // A number type built from one literal, `Decimal("19.99")`, is that literal.
        Token::Ident(name) if NUMBER_TYPES.contains(&name.as_str()) => {
            if !is_punct(toks.get(k + 1)?, "(") {
                return None;
            }
            let close = closing(toks, k + 1)?;
            let (lit, used) = literal_at(toks, k + 2)?;
            (lit.len() == 1 && k + 2 + used == close).then_some((lit, close - k + 1))
        }
        Token::Ident(name) => Lit::of_ident(name).map(|l| (vec![l], 1)),
        Token::Punct(p) if p == "-" => match &toks.get(k + 1)?.token {
            Token::Number(n) => Some((vec![Lit::number(n, true)], 2)),
            _ => None,
        },
        Token::Punct(p) if p == "(" || p == "[" => {
            let close = closing(toks, k)?;
            let inner = literal_list(&toks[k + 1..close])?;
            Some((inner, close - k + 1))
        }
        _ => None,
    }
}

/// `call == 43`, `call != 43` (Go's `got != want` on one line: `if got := f(); got != 43`).
fn expected_after(toks: &[Tok], close: usize) -> Option<Lit> {
    let line = toks[close].line;
    let mut k = close + 1;
    while k < toks.len() && toks[k].line == line {
        if let Token::Punct(p) = &toks[k].token {
            if matches!(p.as_str(), "==" | "===" | "!=" | "!==") {
                return literal_at(toks, k + 1).and_then(|(l, _)| single(l));
            }
            if matches!(p.as_str(), ")" | "{" | ",") && k == close + 1 {
                // `assert_eq!(f(x), 43)` is handled by the assert rule; `f(x) {` ends here.
                return None;
            }
        }
        k += 1;
    }
    None
}

/// `43 == call`.
fn expected_before(toks: &[Tok], start: usize) -> Option<Lit> {
    // Step over a receiver: `43 == calc.add(…)`.
    let mut k = start;
    while k >= 2 && is_punct(&toks[k - 1], ".") && matches!(toks[k - 2].token, Token::Ident(_)) {
        k -= 2;
    }
    let op = toks.get(k.checked_sub(1)?)?;
    if !matches!(&op.token, Token::Punct(p) if matches!(p.as_str(), "==" | "===")) {
        return None;
    }
    // The literal ends just before the operator.
    let end = k - 1;
    (0..end)
        .rev()
        .take(8)
        .find_map(|s| literal_at(toks, s).filter(|(_, used)| s + used == end))
        .and_then(|(l, _)| single(l))
}

/// `assertEqual(call, 43)`, `assert_eq!(43, call)`, `assert.Equal(t, 43, call)`,
/// `expect(call).toBe(43)`.
fn expected_in_assert(toks: &[Tok], start: usize, close: usize) -> Option<Lit> {
    // Step over a receiver.
    let mut begin = start;
    while begin >= 2
        && is_punct(&toks[begin - 1], ".")
        && matches!(toks[begin - 2].token, Token::Ident(_))
    {
        begin -= 2;
    }
    // The parenthesis the call sits in, as any argument of it.
    let mut depth = 0i32;
    let mut open = begin.checked_sub(1)?;
    loop {
        if let Token::Punct(p) = &toks[open].token {
            match p.as_str() {
                ")" | "]" | "}" => depth += 1,
                "(" | "[" | "{" if depth == 0 => break,
                "(" | "[" | "{" => depth -= 1,
                ";" => return None,
                _ => {}
            }
        }
        open = open.checked_sub(1)?;
    }
    if !is_punct(&toks[open], "(") {
        return None;
    }
    let name_at = if open >= 2 && is_punct(&toks[open - 1], "!") {
        open - 2
    } else {
        open.checked_sub(1)?
    };
    let Token::Ident(outer) = &toks[name_at].token else {
        return None;
    };
    let outer_close = closing(toks, open)?;
    if outer == "expect" && outer_close == close + 1 {
        // `expect(call).toBe(43)`.
        let (dot, matcher, paren) = (
            toks.get(outer_close + 1)?,
            toks.get(outer_close + 2)?,
            toks.get(outer_close + 3)?,
        );
        let Token::Ident(matcher) = &matcher.token else {
            return None;
        };
        if is_punct(dot, ".") && EXPECT_MATCHERS.contains(&matcher.as_str()) && is_punct(paren, "(")
        {
            return literal_at(toks, outer_close + 4).and_then(|(l, _)| single(l));
        }
        return None;
    }
    if !ASSERT_EQUAL.contains(&outer.as_str()) {
        return None;
    }
    // The outer call's other arguments: exactly one literal among them is the expected value.
    let mut literals = Vec::new();
    let mut k = open + 1;
    while k < outer_close {
        if k == begin {
            k = close + 1;
        } else if let Some((lit, used)) = literal_at(toks, k) {
            let ends_argument = toks
                .get(k + used)
                .is_some_and(|t| is_punct(t, ",") || k + used == outer_close);
            if ends_argument {
                literals.extend(single(lit));
            }
            k += used;
        } else {
            // Skip one argument (a name such as Go's `t`, a message).
            while k < outer_close && !is_punct(&toks[k], ",") {
                k = match &toks[k].token {
                    Token::Punct(p) if matches!(p.as_str(), "(" | "[" | "{") => {
                        closing(toks, k).map_or(outer_close, |c| c + 1)
                    }
                    _ => k + 1,
                };
            }
        }
        if k < outer_close && is_punct(&toks[k], ",") {
            k += 1;
        }
    }
    (literals.len() == 1).then(|| literals.remove(0))
}

/// `assertTrue(call)`, `assert call`, `assert!(call)`, `assert not call`: the expected value is
/// a boolean.
fn expected_by_truth(toks: &[Tok], start: usize) -> Option<Lit> {
    let before = |n: usize| start.checked_sub(n).and_then(|k| toks.get(k));
    match (before(2).map(|t| &t.token), before(1).map(|t| &t.token)) {
        (Some(Token::Ident(a)), Some(Token::Punct(p))) if p == "(" => match a.as_str() {
            "assertTrue" | "True" => Some(Lit::Bool(true)),
            "assertFalse" | "False" => Some(Lit::Bool(false)),
            _ => None,
        },
        (_, Some(Token::Ident(a))) if a == "assert" => Some(Lit::Bool(true)),
        (Some(Token::Ident(a)), Some(Token::Ident(n))) if a == "assert" && n == "not" => {
            Some(Lit::Bool(false))
        }
        _ => None,
    }
}

fn single(mut lits: Vec<Lit>) -> Option<Lit> {
    (lits.len() == 1).then(|| lits.remove(0))
}

/// The rows of table-driven tests: a bracketed group of two or more literals that is an element
/// of a larger list (`[(40, 2, 43), …]`, `{40, 2, 43},`, `{a: 40, b: 2, want: 43}`), read as its
/// inputs and, last or by name, its expected value.
fn rows(source: &Source, file: &str) -> Vec<Tested> {
    let toks = &source.tokens;
    let mut found = Vec::new();
    for k in 0..toks.len() {
        let Token::Punct(p) = &toks[k].token else {
            continue;
        };
        if !matches!(p.as_str(), "(" | "[" | "{") {
            continue;
        }
        // An element: after `,` or an opening bracket, never a call's parentheses.
        let element = k.checked_sub(1).map(|b| &toks[b].token).is_some_and(
            |t| matches!(t, Token::Punct(q) if matches!(q.as_str(), "," | "[" | "{" | "(")),
        );
        if !element {
            continue;
        }
        let Some(close) = closing(toks, k) else {
            continue;
        };
        let inner = &toks[k + 1..close];
        // A row holds scalars: a list of lists is the table, not a row of it.
        let flat = !inner
            .iter()
            .any(|t| matches!(&t.token, Token::Punct(q) if matches!(q.as_str(), "(" | "[" | "{")));
        let row = if let Some(values) = literal_list(inner).filter(|_| flat) {
            // Positional: a leading label string among numbers is the case's name.
            let mut values = values;
            if values.len() >= 3
                && matches!(values[0], Lit::Str(_))
                && values[1..].iter().all(|v| matches!(v, Lit::Num(..)))
            {
                values.remove(0);
            }
            if values.len() < 2 {
                continue;
            }
            let expected = values.pop();
            Some((values, expected))
        } else {
            named_row(inner)
        };
        let Some((args, expected)) = row else {
            continue;
        };
        if args.is_empty() {
            continue;
        }
        found.push(Tested {
            function: None,
            args,
            expected,
            file: file.to_owned(),
            line: toks[k].line + 1,
        });
    }
    found
}

/// A row of `name: literal` fields (Go struct literals, JS objects).
fn named_row(inner: &[Tok]) -> Option<(Vec<Lit>, Option<Lit>)> {
    let mut args = Vec::new();
    let mut expected = None;
    let mut k = 0;
    let mut fields = 0;
    while k < inner.len() {
        let Token::Ident(field) = &inner[k].token else {
            return None;
        };
        if !inner.get(k + 1).is_some_and(|t| is_punct(t, ":")) {
            return None;
        }
        let (lit, used) = literal_at(inner, k + 2)?;
        fields += 1;
        if EXPECTED_FIELDS.contains(&field.as_str()) {
            expected = single(lit);
        } else if !LABEL_FIELDS.contains(&field.as_str()) {
            args.extend(lit);
        }
        k += 2 + used;
        match inner.get(k) {
            None => break,
            Some(t) if is_punct(t, ",") => k += 1,
            Some(_) => return None,
        }
    }
    (fields >= 2).then_some((args, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(language: Language, text: &str) -> Vec<(Option<String>, String, Option<String>)> {
        inputs(&Source::new(language, text), "t")
            .into_iter()
            .map(|t| {
                (
                    t.function.clone(),
                    t.shown_args(),
                    t.expected.map(|e| e.to_string()),
                )
            })
            .collect()
    }

    #[test]
    fn calls_with_literal_arguments_and_their_expected_values() {
        let cases: &[(Language, &str, &str, &str)] = &[
            (
                Language::Python,
                "def test_add():\n    assert add(40, 2) == 43\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Python,
                "self.assertEqual(calc.add(40, 2), 43)\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Python,
                "assert 43 == add(40, 2)\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Rust,
                "assert_eq!(add(40, 2), 43);\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Rust,
                "assert_eq!(43, add(40, 2));\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::JavaScript,
                "expect(add(40, 2)).toBe(43);\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::JavaScript,
                "assert.strictEqual(add(40, 2), 43);\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Go,
                "if got := Add(40, 2); got != 43 {\n",
                "(40, 2)",
                "43",
            ),
            (
                Language::Go,
                "assert.Equal(t, 43, Add(40, 2))\n",
                "(40, 2)",
                "43",
            ),
            (Language::Python, "assert is_prime(97)\n", "(97)", "true"),
            (
                Language::Python,
                "self.assertFalse(is_prime(91))\n",
                "(91)",
                "false",
            ),
        ];
        for (language, text, args, expected) in cases {
            let got = found(*language, text);
            assert!(
                got.iter()
                    .any(|(_, a, e)| a == args && e.as_deref() == Some(*expected)),
                "{text}: {got:?}"
            );
        }
    }

    #[test]
    fn table_rows_are_inputs_and_framework_calls_are_not() {
        let go =
            "tests := []struct{ a, b, want int }{\n\t{40, 2, 43},\n\t{a: 7, b: 8, want: 15},\n}\n";
        let got = found(Language::Go, go);
        assert!(
            got.contains(&(None, "(40, 2)".into(), Some("43".into()))),
            "{got:?}"
        );
        assert!(
            got.contains(&(None, "(7, 8)".into(), Some("15".into()))),
            "{got:?}"
        );
        let py = "@pytest.mark.parametrize('a,b,want', [(40, 2, 43), (-5, 5, 0)])\ndef test(a, b, want):\n    print('x')\n";
        let got = found(Language::Python, py);
        assert!(
            got.contains(&(None, "(40, 2)".into(), Some("43".into()))),
            "{got:?}"
        );
        assert!(!got.iter().any(|(f, _, _)| f.as_deref() == Some("print")));
    }
}
