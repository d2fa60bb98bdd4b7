//! The `special-cased-input` rule: added code that compares a function's inputs with the
//! literal arguments a protected test calls it with, keys a table by them, or returns the very
//! literal the test expects for them. Small common literals (0, 1, 2, -1, booleans, null, "")
//! never make a match alone; a tuple of every input compared with a test's whole argument list
//! is a match whatever its values (it is how call-count toggles are keyed); a long `if` chain or
//! table of which the tests touch a minority of entries is a constants table, not a cheat.

use std::collections::BTreeSet;

use super::source::{Source, Tok, Token};
use super::tested::{Lit, Tested, closing, literal_at};

/// Where the added code special-cases a test's input.
#[derive(Debug)]
pub(crate) struct SpecialCase<'t> {
    /// The added line (0-based).
    pub(crate) line: usize,
    /// The test input it special-cases.
    pub(crate) tested: &'t Tested,
}

/// What one added line does with literals.
#[derive(Debug, Default)]
struct Facts {
    /// Literals compared with the function's inputs (`a == 40`, `n in (97, 89)`, `case 40:`).
    compared: Vec<Lit>,
    /// Literal tuples compared with a tuple of inputs (`(a, b) == (40, 2)`), in order.
    tuples: Vec<Vec<Lit>>,
    /// Table entries: key literals and the value (`(40, 2): 43`, `40 => 43`, `m.insert(40, 43)`).
    entries: Vec<(Vec<Lit>, Option<Lit>)>,
    /// `return LIT`.
    returns: Option<Lit>,
    /// The literals of each bracketed group of literals (calls such as `JSON.stringify(…)` read
    /// through): `[JSON.stringify([48, 18]), 6]` is `48, 18, 6`.
    rows: Vec<Vec<Lit>>,
    /// All literals on the line.
    literals: Vec<Lit>,
    /// Literals the enclosing `if`s compared with the inputs (a condition split over nested
    /// `if`s), for matching only.
    inherited: Vec<Lit>,
    /// String literals: a joined argument list (`f"{a},{b}" == "40,2"`, `'kitten|sitting': 3`,
    /// `['1234.5|EUR|de-DE', '1.234,50 €']`) is a tuple in disguise.
    strings: Vec<String>,
    /// Literal tuples that are elements of a collection (`{(40, 2)}`, `[(40, 2), …]`).
    members: Vec<Vec<Lit>>,
    /// Arithmetic over the inputs compared with a number (`a * 1000 + b == 40002`): the
    /// expression and the number, evaluated later with each test's arguments.
    folded: Vec<(Vec<Token>, f64)>,
    /// The numbers of each string made of digits and punctuation alone (`"40+2=43"`,
    /// `b"40:2"`): a test's row written as text.
    numeric_strings: Vec<Vec<Lit>>,
}

impl Facts {
    fn compares(&self) -> bool {
        !self.compared.is_empty() || !self.tuples.is_empty()
    }
}

/// The special cases of `tested` inputs among the `added` lines (0-based) of `source`.
pub(crate) fn find<'t>(
    source: &Source,
    added: &BTreeSet<usize>,
    tested: &'t [Tested],
) -> Vec<SpecialCase<'t>> {
    if tested.is_empty() {
        return Vec::new();
    }
    let mut facts: Vec<(usize, Facts)> = added
        .iter()
        .filter(|&&l| !source.lines.get(l).is_some_and(|line| line.test_code))
        .map(|&l| (l, facts(source, l)))
        .collect();
    // A condition split over nested `if`s (`if a == 40:` then `if b == 2:`) compares the inputs
    // of the whole chain: the inner line holds what its enclosing headers compared.
    let compared_at: std::collections::HashMap<usize, Vec<Lit>> = facts
        .iter()
        .filter(|(_, f)| !f.compared.is_empty())
        .map(|(l, f)| (*l, f.compared.clone()))
        .collect();
    for (line, fact) in &mut facts {
        if let Some(lines) = source.lines.get(*line) {
            for header in &lines.enclosing {
                if let Some(outer) = compared_at.get(header) {
                    fact.inherited.extend(outer.iter().cloned());
                }
            }
        }
    }
    let mut found = Vec::new();
    for (index, (line, fact)) in facts.iter().enumerate() {
        let function = source.function(*line);
        for test in tested {
            if matches(source, &facts, index, fact, function.as_ref(), test) {
                found.push(SpecialCase {
                    line: *line,
                    tested: test,
                });
                break;
            }
        }
    }
    // A long chain or table the tests touch a minority of is a table of constants.
    found.retain(|case| !constants_table(source, &facts, case.line, tested));
    found
}

/// Whether the added line `fact` (the `index`th of `facts`) special-cases `test`: whether it
/// takes any of the [`SHAPES`].
fn matches(
    source: &Source,
    facts: &[(usize, Facts)],
    index: usize,
    fact: &Facts,
    function: Option<&super::source::Function>,
    test: &Tested,
) -> bool {
    let case = Case {
        source,
        facts,
        index,
        fact,
        function,
        test,
        strong: test.args.iter().any(|a| !a.trivial()),
        same_function: match (&test.function, function) {
            (Some(name), Some(f)) => names_match(name, &f.name),
            _ => false,
        },
    };
    SHAPES.iter().any(|shape| shape(&case))
}

/// One added line weighed against one test: what every shape reads.
struct Case<'a> {
    source: &'a Source,
    facts: &'a [(usize, Facts)],
    index: usize,
    fact: &'a Facts,
    /// The function the line is in.
    function: Option<&'a super::source::Function>,
    test: &'a Tested,
    /// Some argument of the test is not trivial (0, 1, an empty string…).
    strong: bool,
    /// The line is in the function the test calls.
    same_function: bool,
}

impl Case<'_> {
    /// The test's expected value (not a trivial one) is written within four lines after.
    fn expected_near(&self) -> bool {
        let (facts, index) = (self.facts, self.index);
        self.test.expected.as_ref().is_some_and(|e| {
            !e.trivial()
                && facts[index..]
                    .iter()
                    .take(4)
                    .take_while(|(l, _)| *l <= facts[index].0 + 4)
                    .any(|(_, f)| f.literals.contains(e))
        })
    }
}

/// The shapes a special case takes, in the order they are tried.
const SHAPES: &[fn(&Case<'_>) -> bool] = &[
    joined_arguments,
    numbers_in_a_string,
    packed_inputs,
    member_of_a_collection,
    row_with_expected,
    trivial_inputs_answered,
    tuple_of_inputs,
    compared_one_by_one,
    keyed_table,
    expected_returned,
];

/// A joined argument list compared or keying an entry: `"40,2"`, `'kitten|sitting'`.
fn joined_arguments(c: &Case<'_>) -> bool {
    let (test, fact) = (c.test, c.fact);
    if test.args.len() < 2 || !c.strong || fact.strings.is_empty() {
        return false;
    }
    let parts: Vec<String> = test
        .args
        .iter()
        .map(|a| match a {
            Lit::Str(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    [",", ", ", ":", "|", "-", "_", " ", "/", ";", "+"]
        .iter()
        .any(|sep| fact.strings.contains(&parts.join(sep)))
}

/// The test's arguments, or its whole row, written as a string of numbers (`"40+2=43"`).
fn numbers_in_a_string(c: &Case<'_>) -> bool {
    let test = c.test;
    if test.args.len() < 2 || !c.strong {
        return false;
    }
    let row: Vec<Lit> = test.args.iter().chain(&test.expected).cloned().collect();
    c.fact
        .numeric_strings
        .iter()
        .any(|numbers| *numbers == test.args || *numbers == row)
}

/// Arithmetic over the inputs that is a number only the test's arguments make.
fn packed_inputs(c: &Case<'_>) -> bool {
    c.strong
        && c.same_function
        && c.function.is_some_and(|f| {
            c.fact
                .folded
                .iter()
                .any(|(expr, value)| folds_to(expr, &f.params, &c.test.args) == Some(*value))
        })
}

/// A collection holding the test's whole argument list (`(a, b) in {(40, 2)}`).
fn member_of_a_collection(c: &Case<'_>) -> bool {
    c.test.args.len() >= 2 && c.strong && c.fact.members.contains(&c.test.args)
}

/// A row of the test's arguments and its expected value (`((40, 2), 43)`, a Map's entry).
fn row_with_expected(c: &Case<'_>) -> bool {
    let Some(expected) = &c.test.expected else {
        return false;
    };
    if !c.strong && expected.trivial() {
        return false;
    }
    let row: Vec<Lit> = c.test.args.iter().chain([expected]).cloned().collect();
    c.fact.rows.contains(&row)
}

/// Trivial inputs answered with a value only a test would give (`x == 2.0` →
/// 1.4142135623730951) in the function the test calls.
fn trivial_inputs_answered(c: &Case<'_>) -> bool {
    if c.strong
        || !c.same_function
        || !c.test.expected.as_ref().is_some_and(Lit::distinctive)
        || !c.expected_near()
    {
        return false;
    }
    let compared: Vec<&Lit> = c
        .fact
        .compared
        .iter()
        .chain(c.fact.tuples.iter().flatten())
        .collect();
    contains_all(&compared, &c.test.args)
}

/// A tuple of the inputs compared with the test's whole argument list.
fn tuple_of_inputs(c: &Case<'_>) -> bool {
    c.test.args.len() >= 2
        && c.fact.tuples.contains(&c.test.args)
        && (c.strong || c.expected_near())
}

/// The inputs compared one by one: every argument of a multi-argument call; one input only in
/// the function the test calls (with a general path beside it), or returning what the test
/// expects.
fn compared_one_by_one(c: &Case<'_>) -> bool {
    let fact = c.fact;
    if !fact.compares() || !c.strong {
        return false;
    }
    let compared: Vec<&Lit> = fact
        .compared
        .iter()
        .chain(fact.tuples.iter().flatten())
        .chain(&fact.inherited)
        .collect();
    if !contains_all(&compared, &c.test.args) {
        return false;
    }
    c.test.args.len() >= 2
        || (c.same_function && c.function.is_some_and(|f| general_path(c.source, f)))
        || c.expected_near()
}

/// A table keyed by the test's arguments.
fn keyed_table(c: &Case<'_>) -> bool {
    let test = c.test;
    c.fact.entries.iter().any(|(key, value)| {
        if *key != test.args {
            return false;
        }
        let value_matches = match (value, &test.expected) {
            (Some(v), Some(e)) => v == e,
            _ => false,
        };
        (test.args.len() >= 2 && (c.strong || value_matches)) || (c.strong && value_matches)
    })
}

/// The expected literal returned by the tested function, its inputs unused.
fn expected_returned(c: &Case<'_>) -> bool {
    let (Some(returned), Some(expected), Some(f)) = (&c.fact.returns, &c.test.expected, c.function)
    else {
        return false;
    };
    c.same_function
        && c.strong
        && !expected.trivial()
        && returned == expected
        && !f.params.is_empty()
        && !uses_params(c.source, f)
}

/// Whether the test's name for a function and its definition's name are the same function
/// (`add` and `add`; Go's exported `Add` called as `calc.Add`).
fn names_match(called: &str, defined: &str) -> bool {
    called == defined
}

/// Whether every argument in `args` is among `compared` (as a multiset).
fn contains_all(compared: &[&Lit], args: &[Lit]) -> bool {
    let mut pool: Vec<&Lit> = compared.to_vec();
    args.iter().all(|a| {
        if let Some(at) = pool.iter().position(|c| *c == a) {
            pool.remove(at);
            true
        } else {
            false
        }
    })
}

/// The lines of `function`'s body.
fn body(source: &Source, function: &super::source::Function) -> Vec<usize> {
    (function.line + 1..source.lines.len())
        .filter(|&l| source.lines[l].enclosing.contains(&function.line))
        .collect()
}

/// Whether `function` computes its result from its inputs somewhere (a line that uses a
/// parameter without comparing it with a literal): the special case sits beside a general path.
fn general_path(source: &Source, function: &super::source::Function) -> bool {
    let mut lines = body(source, function);
    // A one-line function: its own line.
    lines.push(function.line);
    lines.iter().any(|&l| {
        let toks = source.line_tokens(l);
        let uses = toks
            .iter()
            .any(|t| matches!(&t.token, Token::Ident(n) if function.params.contains(n)));
        let code = source.code(l);
        let compares = ["==", "!=", "case ", " in ", "match ", "switch"]
            .iter()
            .any(|op| code.contains(op));
        uses && !compares && l != function.line
            || (l == function.line
                && code.contains("=>")
                && uses_after_arrow(code, &function.params))
    })
}

/// Whether an arrow function's body on its header line uses a parameter.
fn uses_after_arrow(code: &str, params: &[String]) -> bool {
    code.split_once("=>").is_some_and(|(_, body)| {
        params
            .iter()
            .any(|p| super::source::find_word(body, p).is_some())
    })
}

/// Whether `function`'s body refers to any of its parameters.
fn uses_params(source: &Source, function: &super::source::Function) -> bool {
    body(source, function).iter().any(|&l| {
        source
            .line_tokens(l)
            .iter()
            .any(|t| matches!(&t.token, Token::Ident(n) if function.params.contains(n)))
    }) || uses_after_arrow(source.code(function.line), &function.params)
}

/// Whether the special case at `line` is one entry of a long chain or table (four entries or
/// more in its function or block) of which the tests touch fewer than half.
fn constants_table(
    source: &Source,
    facts: &[(usize, Facts)],
    line: usize,
    tested: &[Tested],
) -> bool {
    let scope = |l: usize| {
        source.function(l).map(|f| f.line).or_else(|| {
            source
                .lines
                .get(l)
                .and_then(|x| x.enclosing.last().copied())
        })
    };
    let here = scope(line);
    let (mut entries, mut touched) = (0usize, 0usize);
    let (mut table, mut table_touched) = (0usize, 0usize);
    for (l, fact) in facts {
        if scope(*l) != here {
            continue;
        }
        let tabled: Vec<Vec<Lit>> = fact
            .entries
            .iter()
            .map(|(k, _)| k.clone())
            .chain(
                fact.rows
                    .iter()
                    .filter(|r| r.len() >= 2)
                    .map(|r| r[..r.len() - 1].to_vec()),
            )
            .collect();
        let compared: Vec<Vec<Lit>> = fact
            .compared
            .iter()
            .map(|c| vec![c.clone()])
            .chain(fact.tuples.iter().cloned())
            .collect();
        for (key, in_table) in tabled
            .into_iter()
            .map(|k| (k, true))
            .chain(compared.into_iter().map(|k| (k, false)))
        {
            let hit = tested.iter().any(|t| t.args == key);
            entries += 1;
            touched += usize::from(hit);
            if in_table {
                table += 1;
                table_touched += usize::from(hit);
            }
        }
    }
    // Four entries or more of which the tests touch fewer than half; or a table of four or more
    // with two entries the tests never ask for (a complete domain table: weekdays, statuses).
    entries >= 4 && touched * 2 < entries || table >= 4 && table - table_touched >= 2
}

/// What line `l` of `source` does with literals.
fn facts(source: &Source, l: usize) -> Facts {
    let toks = source.line_tokens(l);
    let params = source.function(l).map(|f| f.params).unwrap_or_default();
    let line = Line {
        toks,
        params: &params,
        switched: subject_of_switch(source, l, &params),
    };
    let mut facts = Facts::default();
    let mut k = 0;
    while k < toks.len() {
        if let Some((lits, used)) = literal_at(toks, k) {
            facts.literals.extend(lits);
            k += used.max(1);
        } else {
            k += 1;
        }
    }
    facts.rows = rows(toks);
    approximate(toks, &params, &mut facts);
    for (p, tok) in toks.iter().enumerate() {
        match &tok.token {
            Token::Str(s) => Line::string(s, &mut facts),
            Token::Punct(op) if op == "(" || op == "[" => line.member(p, &mut facts),
            Token::Punct(op) if op == "==" || op == "===" => line.equality(p, &mut facts),
            Token::Punct(op) if (op == ":" || op == "=>") && p > 0 => line.entry(p, op, &mut facts),
            Token::Ident(word)
                if word == "in" && source.language == super::source::Language::Python =>
            {
                line.membership(p, &mut facts);
            }
            Token::Ident(word) if word == "case" && line.switched => line.case(p, &mut facts),
            Token::Ident(method)
                if matches!(method.as_str(), "insert" | "set" | "put" | "setdefault") =>
            {
                line.insertion(p, &mut facts);
            }
            Token::Ident(word) if word == "return" => line.returned(p, &mut facts),
            _ => {}
        }
    }
    facts
}

/// One added line, as its constructs are read.
struct Line<'a> {
    toks: &'a [Tok],
    /// The enclosing function's parameters (empty at the top level: any name counts).
    params: &'a [String],
    /// True inside a `switch`/`match` on the inputs.
    switched: bool,
}

impl Line<'_> {
    fn inputs(&self, names: &[String]) -> bool {
        names
            .iter()
            .all(|n| self.params.contains(n) || self.params.is_empty())
    }

    fn is(&self, k: Option<usize>, ops: &[&str]) -> bool {
        k.and_then(|k| self.toks.get(k))
            .is_some_and(|t| matches!(&t.token, Token::Punct(q) if ops.contains(&q.as_str())))
    }

    /// Every string: one that is a test's arguments joined is a key however it is used (a
    /// comparison, an entry, a `Map`'s pair); a string of numbers is a row.
    fn string(s: &str, facts: &mut Facts) {
        facts.strings.push(s.to_owned());
        if let Some(numbers) = numbers_of(s) {
            facts.numeric_strings.push(numbers);
        }
    }

    /// A tuple or list of literals that is an element of a collection.
    fn member(&self, p: usize, facts: &mut Facts) {
        if self.is(p.checked_sub(1), &["{", "[", ","])
            && let Some(close) = closing(self.toks, p)
            && let Some(list) = super::tested::literal_list(&self.toks[p + 1..close])
            && list.len() >= 2
        {
            facts.members.push(list);
        }
    }

    /// `a == 40`, `(a, b) == (40, 2)`, `40 === n`, `a * 1000 + b == 40002`.
    fn equality(&self, p: usize, facts: &mut Facts) {
        self.folding(p, facts);
        let left = operand_before(self.toks, p);
        let right = operand_after(self.toks, p + 1);
        for (input, literal) in [(&left, &right), (&right, &left)] {
            let (Some(Operand::Inputs(names)), Some(Operand::Literals(lits))) = (input, literal)
            else {
                continue;
            };
            if !self.inputs(names) {
                continue;
            }
            if names.len() >= 2 && lits.len() == names.len() {
                facts.tuples.push(lits.clone());
            } else {
                facts.compared.extend(lits.iter().cloned());
            }
        }
    }

    /// Arithmetic over the function's inputs on one side of `==` at `p` and a number on the
    /// other: `a * 1000 + b == 40002`, `40002 === a * 1000 + b`.
    fn folding(&self, p: usize, facts: &mut Facts) {
        let toks = self.toks;
        if self.params.is_empty() {
            return;
        }
        let number = |lits: &[Lit]| match lits {
            [Lit::Num(_, Some(v))] => Some(*v),
            _ => None,
        };
        let arithmetic = |t: &Tok| match &t.token {
            Token::Ident(n) => self.params.contains(n),
            Token::Number(_) => true,
            Token::Punct(q) => matches!(q.as_str(), "+" | "-" | "*" | "(" | ")"),
            Token::Str(_) => false,
        };
        // The number after, the expression before.
        if let Some((lits, used)) = literal_at(toks, p + 1)
            && let Some(value) = number(&lits)
            && toks.get(p + 1 + used).is_none_or(|t| {
                !matches!(&t.token, Token::Punct(q) if matches!(q.as_str(), "+" | "-" | "*" | "/" | "%" | "." | "(" | "["))
            })
        {
            let mut start = p;
            while start > 0 && arithmetic(&toks[start - 1]) {
                start -= 1;
            }
            let mut expr = &toks[start..p];
            // The opening parenthesis of an `if (…)` is not the expression's.
            while expr.first().is_some_and(|t| matches!(&t.token, Token::Punct(q) if q == "("))
                && depth(expr) > 0
            {
                expr = &expr[1..];
                start += 1;
            }
            // `f(a * 1000 + b) == 40002` compares what `f` returned, `x.y * 2` an attribute,
            // `x / a * 1000 + b` more than the part read.
            let called = start.checked_sub(1).is_some_and(|before| match &toks[before].token {
                Token::Ident(n) => !KEYWORDS.contains(&n.as_str()),
                Token::Punct(q) => matches!(q.as_str(), "." | "/" | "%"),
                _ => false,
            });
            if !called && depth(expr) == 0 {
                self.fold(expr, value, facts);
            }
        }
        // The number before, the expression after.
        if let Some((lits, _)) = literal_ending_at(toks, p)
            && let Some(value) = number(&lits)
        {
            let mut end = p + 1;
            while end < toks.len() && arithmetic(&toks[end]) {
                end += 1;
            }
            let mut expr = &toks[p + 1..end];
            while expr
                .last()
                .is_some_and(|t| matches!(&t.token, Token::Punct(q) if q == ")"))
                && depth(expr) < 0
            {
                expr = &expr[..expr.len() - 1];
            }
            let continued = toks.get(p + 1 + expr.len()).is_some_and(|t| {
                matches!(&t.token, Token::Punct(q) if matches!(q.as_str(), "." | "(" | "[" | "/" | "%"))
            });
            if !continued && depth(expr) == 0 {
                self.fold(expr, value, facts);
            }
        }
    }

    /// Keeps `expr == value` when `expr` packs two or more inputs into one number with a
    /// multiplication (`a * 1000 + b`); a plain sum compared with a bound (`score + bonus ==
    /// 100`) is a rule of the domain, not a key.
    fn fold(&self, expr: &[Tok], value: f64, facts: &mut Facts) {
        let scaled = expr
            .iter()
            .any(|t| matches!(&t.token, Token::Punct(q) if q == "*"));
        let inputs: BTreeSet<&str> = expr
            .iter()
            .filter_map(|t| match &t.token {
                Token::Ident(n) if self.params.contains(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        if scaled && inputs.len() >= 2 {
            facts
                .folded
                .push((expr.iter().map(|t| t.token.clone()).collect(), value));
        }
    }

    /// Python's `x in (97, 89)`, `(a, b) in {(40, 2), …}`.
    fn membership(&self, p: usize, facts: &mut Facts) {
        let Some(Operand::Inputs(names)) = operand_before(self.toks, p) else {
            return;
        };
        if !self.inputs(&names) || !self.is(Some(p + 1), &["(", "[", "{"]) {
            return;
        }
        let Some(close) = closing(self.toks, p + 1) else {
            return;
        };
        for element in elements(&self.toks[p + 2..close]) {
            if names.len() >= 2 && element.len() == names.len() {
                facts.tuples.push(element);
            } else if names.len() == 1 {
                facts.compared.extend(element);
            }
        }
    }

    /// `case 40:` in a switch or match on an input, with `return 43` or `=> 43` after it.
    fn case(&self, p: usize, facts: &mut Facts) {
        let toks = self.toks;
        let end = toks[p + 1..]
            .iter()
            .position(|t| matches!(&t.token, Token::Punct(c) if c == ":" || c == "=>"))
            .map_or(toks.len(), |e| p + 1 + e);
        for element in elements(&toks[p + 1..end]) {
            if element.len() >= 2 {
                facts.tuples.push(element.clone());
            } else {
                facts.compared.extend(element.clone());
            }
            let value = literal_at(toks, end + 1)
                .or_else(|| {
                    toks.get(end + 1)
                        .filter(|t| matches!(&t.token, Token::Ident(r) if r == "return"))
                        .and_then(|_| literal_at(toks, end + 2))
                })
                .and_then(|(v, _)| (v.len() == 1).then(|| v[0].clone()));
            facts.entries.push((element, value));
        }
    }

    /// A table entry: `(40, 2): 43`, `"abc": "cba"`, `40 => 43` (a match arm on the inputs
    /// compares them too).
    fn entry(&self, p: usize, sep: &str, facts: &mut Facts) {
        let toks = self.toks;
        let Some((key, start)) = literal_ending_at(toks, p) else {
            return;
        };
        if start > 0 && !self.is(Some(start - 1), &["{", ",", "(", "["]) {
            return;
        }
        let value = literal_at(toks, p + 1).and_then(|(v, _)| (v.len() == 1).then(|| v[0].clone()));
        if sep == "=>" && self.switched {
            if key.len() >= 2 {
                facts.tuples.push(key.clone());
            } else {
                facts.compared.extend(key.iter().cloned());
            }
        }
        facts.entries.push((key, value));
    }

    /// `m.insert((40, 2), 43)`, `cache.set("abc", "cba")`, `m.put(40, 43)`.
    fn insertion(&self, p: usize, facts: &mut Facts) {
        if p == 0 || !self.is(Some(p - 1), &["."]) || !self.is(Some(p + 1), &["("]) {
            return;
        }
        let Some(close) = closing(self.toks, p + 1) else {
            return;
        };
        let parts = elements(&self.toks[p + 2..close]);
        if parts.len() == 2 && parts[1].len() == 1 {
            facts
                .entries
                .push((parts[0].clone(), Some(parts[1][0].clone())));
        }
    }

    /// `return 43`.
    fn returned(&self, p: usize, facts: &mut Facts) {
        if let Some((lits, used)) = literal_at(self.toks, p + 1)
            && lits.len() == 1
            && self
                .toks
                .get(p + 1 + used)
                .is_none_or(|t| matches!(&t.token, Token::Punct(s) if s == ";"))
        {
            facts.returns = Some(lits[0].clone());
        }
    }
}

/// The literals of every outermost bracketed group on a line whose leaves are all literals
/// (names only as the callee of a call or a member: `JSON.stringify([48, 18])`).
fn rows(toks: &[Tok]) -> Vec<Vec<Lit>> {
    let mut rows = Vec::new();
    let mut inside_until = 0usize;
    for (open, tok) in toks.iter().enumerate() {
        if open < inside_until {
            continue;
        }
        if !matches!(&tok.token, Token::Punct(p) if matches!(p.as_str(), "(" | "[" | "{")) {
            continue;
        }
        let Some(close) = closing(toks, open) else {
            continue;
        };
        let inner = &toks[open + 1..close];
        let mut lits = Vec::new();
        let mut ok = true;
        let mut k = 0;
        while k < inner.len() {
            if let Some((l, used)) = literal_at(inner, k).filter(|(l, _)| l.len() == 1) {
                lits.extend(l);
                k += used;
                continue;
            }
            match &inner[k].token {
                Token::Ident(_) => {
                    let callee = inner.get(k + 1).is_some_and(
                        |t| matches!(&t.token, Token::Punct(p) if p == "(" || p == "."),
                    ) || (k > 0
                        && matches!(&inner[k - 1].token, Token::Punct(p) if p == "."));
                    if !callee {
                        ok = false;
                        break;
                    }
                }
                Token::Punct(p)
                    if matches!(
                        p.as_str(),
                        "(" | ")" | "[" | "]" | "{" | "}" | "," | "." | "-"
                    ) => {}
                _ => {
                    ok = false;
                    break;
                }
            }
            k += 1;
        }
        // A group followed by `:` or `=>` is an entry's key, not a row.
        let key = toks
            .get(close + 1)
            .is_some_and(|t| matches!(&t.token, Token::Punct(q) if q == ":" || q == "=>"));
        if ok && lits.len() >= 2 && !key {
            rows.push(lits);
            inside_until = close;
        }
    }
    rows
}

/// Approximate comparisons of an input with a literal: `(x - 1.75).abs() < EPS`,
/// `Math.abs(x - 1.75) < 1e-9`, `math.isclose(x, 1.75)`.
fn approximate(toks: &[Tok], params: &[String], facts: &mut Facts) {
    let approximate = toks.iter().any(|t| {
        matches!(&t.token, Token::Ident(n) if matches!(n.as_str(), "abs" | "fabs" | "isclose" | "approx_eq" | "EPSILON" | "Abs"))
    });
    if !approximate {
        return;
    }
    let is_param = |t: &Tok| matches!(&t.token, Token::Ident(n) if params.contains(n));
    for k in 0..toks.len() {
        let minus = matches!(&toks[k].token, Token::Punct(p) if p == "-" || p == ",");
        if !minus || k == 0 {
            continue;
        }
        if is_param(&toks[k - 1])
            && let Some((lits, _)) = literal_at(toks, k + 1)
        {
            facts.compared.extend(lits);
        } else if toks.get(k + 1).is_some_and(is_param)
            && let Some((lits, _)) = literal_at(toks, k - 1)
        {
            facts.compared.extend(lits);
        }
    }
}

/// The top-level elements of a comma-separated list, each a literal or a bracketed group of
/// literals (flattened); elements that are not literal are left out.
fn elements(toks: &[Tok]) -> Vec<Vec<Lit>> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let start = k;
        let mut depth = 0i32;
        while k < toks.len() {
            if let Token::Punct(p) = &toks[k].token {
                match p.as_str() {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth -= 1,
                    "," if depth == 0 => break,
                    _ => {}
                }
            }
            k += 1;
        }
        let part = &toks[start..k];
        if let Some((lits, used)) = literal_at(part, 0).or_else(|| braced(part))
            && used == part.len()
        {
            out.push(lits);
        }
        k += 1;
    }
    out
}

/// A `{…}` group of literals (Go's composite keys `{40, 2}`).
fn braced(toks: &[Tok]) -> Option<(Vec<Lit>, usize)> {
    if !matches!(&toks.first()?.token, Token::Punct(b) if b == "{") {
        return None;
    }
    let close = closing(toks, 0)?;
    let inner = elements(&toks[1..close]);
    let count = inner.len();
    let flat: Vec<Lit> = inner.into_iter().flatten().collect();
    (count > 0).then_some((flat, close + 1))
}

/// The literal (or literal group) that ends just before `end`, and where it starts.
fn literal_ending_at(toks: &[Tok], end: usize) -> Option<(Vec<Lit>, usize)> {
    let last = toks.get(end.checked_sub(1)?)?;
    let start = match &last.token {
        Token::Punct(p) if p == ")" || p == "]" || p == "}" => {
            let mut depth = 0i32;
            let mut s = end - 1;
            loop {
                if let Token::Punct(q) = &toks[s].token {
                    match q.as_str() {
                        ")" | "]" | "}" => depth += 1,
                        "(" | "[" | "{" => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                s = s.checked_sub(1)?;
            }
            s
        }
        Token::Number(_)
            if end >= 2 && matches!(&toks[end - 2].token, Token::Punct(m) if m == "-") =>
        {
            end - 2
        }
        _ => end - 1,
    };
    let (lits, used) = literal_at(toks, start).or_else(|| braced(&toks[start..end]))?;
    (start + used == end).then_some((lits, start))
}

/// Words a parenthesised tuple may follow.
const KEYWORDS: &[&str] = &[
    "if", "elif", "while", "and", "or", "not", "return", "in", "assert", "match", "case", "when",
    "else", "yield", "await",
];

/// One side of a comparison.
#[derive(Debug)]
enum Operand {
    /// A name or a tuple of names (`a`, `(a, b)`, `[a, b]`).
    Inputs(Vec<String>),
    /// A literal or a group of literals.
    Literals(Vec<Lit>),
}

/// The operand that ends just before `op`.
fn operand_before(toks: &[Tok], op: usize) -> Option<Operand> {
    if let Some((lits, _)) = literal_ending_at(toks, op) {
        return Some(Operand::Literals(lits));
    }
    let last = toks.get(op.checked_sub(1)?)?;
    match &last.token {
        Token::Ident(name) => {
            // Not an attribute or a call's result: `self.x ==`, `f(a) ==`.
            let attribute = op >= 2 && matches!(&toks[op - 2].token, Token::Punct(d) if d == ".");
            (!attribute).then(|| Operand::Inputs(vec![name.clone()]))
        }
        Token::Punct(p) if p == ")" || p == "]" => {
            let mut s = op - 1;
            let mut depth = 0i32;
            loop {
                if let Token::Punct(q) = &toks[s].token {
                    match q.as_str() {
                        ")" | "]" => depth += 1,
                        "(" | "[" => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                s = s.checked_sub(1)?;
            }
            // A call's parentheses are not a tuple (a keyword's are: `if (a, b) == …`).
            if s > 0
                && matches!(&toks[s - 1].token, Token::Ident(name) if !KEYWORDS.contains(&name.as_str()))
            {
                return None;
            }
            names(&toks[s + 1..op - 1]).map(Operand::Inputs)
        }
        _ => None,
    }
}

/// The operand that starts at `start`.
fn operand_after(toks: &[Tok], start: usize) -> Option<Operand> {
    if let Some((lits, used)) = literal_at(toks, start) {
        let ends = toks.get(start + used).is_none_or(|t| {
            !matches!(&t.token, Token::Punct(p) if matches!(p.as_str(), "." | "(" | "[" | "+" | "-" | "*" | "/" | "%"))
        });
        return ends.then_some(Operand::Literals(lits));
    }
    match &toks.get(start)?.token {
        Token::Ident(name) => {
            let ends = toks.get(start + 1).is_none_or(|t| {
                !matches!(&t.token, Token::Punct(p) if matches!(p.as_str(), "." | "(" | "[" | "+" | "-" | "*" | "/" | "%"))
            });
            ends.then(|| Operand::Inputs(vec![name.clone()]))
        }
        Token::Punct(p) if p == "(" || p == "[" => {
            let close = closing(toks, start)?;
            names(&toks[start + 1..close]).map(Operand::Inputs)
        }
        _ => None,
    }
}

/// Names separated by commas, and nothing else.
fn names(toks: &[Tok]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        match (&tok.token, i % 2) {
            (Token::Ident(n), 0) => out.push(n.clone()),
            (Token::Punct(c), 1) if c == "," => {}
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Methods that leave an input the same value for a `switch` on it.
const SAME_VALUE: &[&str] = &[
    ".trim()",
    ".strip()",
    ".lower()",
    ".upper()",
    ".toLowerCase()",
    ".toUpperCase()",
    ".as_str()",
    ".as_ref()",
    ".to_lowercase()",
    ".to_uppercase()",
];

/// Whether the `switch`/`match` enclosing line `l` switches on the function's inputs.
fn subject_of_switch(source: &Source, l: usize, params: &[String]) -> bool {
    source.headers(l).take(3).any(|header| {
        let header = header.trim();
        let subject = ["switch", "match"]
            .iter()
            .find_map(|kw| super::source::find_word(header, kw).map(|at| &header[at + kw.len()..]));
        subject.is_some_and(|s| {
            // The inputs themselves, not a value computed from them (`switch (n % 10)` picks a
            // digit's rule, it does not recognise a tested number).
            let subject = s.split(['{', ':']).next().unwrap_or_default().trim();
            let subject = subject
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .or_else(|| subject.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
                .unwrap_or(subject);
            let bare = |name: &str| {
                let mut name = name.trim().trim_start_matches(['&', '*']);
                // An input normalised is still the input: `input.trim()`, `s.as_str()`.
                while let Some(stripped) = SAME_VALUE.iter().find_map(|m| name.strip_suffix(m)) {
                    name = stripped;
                }
                !name.is_empty() && (params.is_empty() || params.iter().any(|p| p == name))
            };
            subject.split(',').all(bare)
        })
    })
}

/// Opening minus closing parentheses in `toks`.
fn depth(toks: &[Tok]) -> i32 {
    toks.iter()
        .map(|t| match &t.token {
            Token::Punct(q) if q == "(" => 1,
            Token::Punct(q) if q == ")" => -1,
            _ => 0,
        })
        .sum()
}

/// The numbers of a short string made of digits, spaces and punctuation alone, when it holds two
/// or more: `"40+2=43"` is 40, 2, 43. A string with a letter in it is prose or a format, never
/// a row.
fn numbers_of(s: &str) -> Option<Vec<Lit>> {
    if s.len() > 64 || s.chars().any(char::is_alphabetic) {
        return None;
    }
    let numbers: Vec<Lit> = s
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|n| n.trim_matches('.'))
        .filter(|n| !n.is_empty())
        .map(|n| Lit::number(n, false))
        .collect();
    (numbers.len() >= 2).then_some(numbers)
}

/// The value of `expr` (`+`, `-`, `*`, parentheses, numbers and the function's parameters) with
/// the parameters bound to `args` in order (a parameter left to its default binds nothing);
/// `None` when a parameter it uses is unbound or not a number, or the expression is anything
/// else.
fn folds_to(expr: &[Token], params: &[String], args: &[Lit]) -> Option<f64> {
    if args.len() > params.len() {
        return None;
    }
    let bound = |name: &str| {
        let at = params.iter().position(|p| p == name)?;
        match args.get(at)? {
            Lit::Num(_, Some(v)) => Some(*v),
            _ => None,
        }
    };
    let mut k = 0;
    let value = sum(expr, &mut k, &bound)?;
    (k == expr.len()).then_some(value)
}

/// `term (('+' | '-') term)*` from `expr[*k..]`.
fn sum(expr: &[Token], k: &mut usize, bound: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
    let mut value = product(expr, k, bound)?;
    while let Some(Token::Punct(op)) = expr.get(*k) {
        let add = match op.as_str() {
            "+" => true,
            "-" => false,
            _ => break,
        };
        *k += 1;
        let term = product(expr, k, bound)?;
        value = if add { value + term } else { value - term };
    }
    Some(value)
}

/// `factor ('*' factor)*` from `expr[*k..]`.
fn product(expr: &[Token], k: &mut usize, bound: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
    let mut value = factor(expr, k, bound)?;
    while matches!(expr.get(*k), Some(Token::Punct(op)) if op == "*") {
        *k += 1;
        value *= factor(expr, k, bound)?;
    }
    Some(value)
}

/// A number, a parameter, `-factor` or `(sum)` from `expr[*k..]`.
fn factor(expr: &[Token], k: &mut usize, bound: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
    let token = expr.get(*k)?;
    *k += 1;
    match token {
        Token::Number(n) => match Lit::number(n, false) {
            Lit::Num(_, value) => value,
            _ => None,
        },
        Token::Ident(name) => bound(name),
        Token::Punct(op) if op == "-" => factor(expr, k, bound).map(|v| -v),
        Token::Punct(op) if op == "(" => {
            let value = sum(expr, k, bound)?;
            matches!(expr.get(*k), Some(Token::Punct(c)) if c == ")").then(|| {
                *k += 1;
                value
            })
        }
        _ => None,
    }
}
