//! Source text as the gaming rules read it, per language: each line twice — `code`, with
//! comments and the contents of string literals blanked (a call pattern never fires inside a
//! docstring), and `text`, with only comments blanked (an environment variable's name is a
//! string) — both column for column with the original; the literal and identifier tokens with
//! their lines; and each line's enclosing blocks (the `def`, `fn`, `if __name__ …` it sits in),
//! which is what tells an exit in `main` from one in a library function.

/// The languages the rules know, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Language {
    /// `.py`, `.pyi`.
    Python,
    /// JavaScript and TypeScript: `.js`, `.mjs`, `.cjs`, `.jsx`, `.ts`, `.mts`, `.cts`, `.tsx`.
    JavaScript,
    /// `.rs`.
    Rust,
    /// `.go`.
    Go,
}

impl Language {
    /// The language of `path`, by its extension; `None` for anything else.
    pub(crate) fn of(path: &str) -> Option<Self> {
        let ext = path.rsplit_once('.').map(|(_, e)| e)?;
        Some(match ext {
            "py" | "pyi" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => Language::JavaScript,
            "rs" => Language::Rust,
            "go" => Language::Go,
            _ => return None,
        })
    }

    /// Its name in rule tables and messages.
    #[cfg(test)]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::JavaScript => "javascript",
            Language::Rust => "rust",
            Language::Go => "go",
        }
    }

    /// Whether its blocks are delimited by braces (all but Python).
    fn braces(self) -> bool {
        !matches!(self, Language::Python)
    }
}

/// One token the rules care about: a literal, a name or a punctuation mark.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A name: `add`, `self`, `True`, `nil`.
    Ident(String),
    /// A number as written, `_` separators and type suffixes dropped: `40`, `3.14`, `0x1f`.
    Number(String),
    /// A string literal's contents (escapes decoded where simple).
    Str(String),
    /// Punctuation: one character, or a known operator (`==`, `===`, `!=`, `!==`, `=>`, `::`,
    /// `->`, `:=`).
    Punct(String),
}

/// A token and the line (0-based) it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tok {
    pub(crate) token: Token,
    pub(crate) line: usize,
}

/// One line, in the two views the rules match.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Comments and string contents blanked.
    pub(crate) code: String,
    /// Comments blanked, strings kept.
    pub(crate) text: String,
    /// The enclosing block headers (line indexes), outermost first.
    pub(crate) enclosing: Vec<usize>,
    /// True inside test code kept in a product file (a Rust `#[cfg(test)] mod`, vitest's
    /// `if (import.meta.vitest)`).
    pub(crate) test_code: bool,
}

/// A source file, lexed.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) language: Language,
    pub(crate) lines: Vec<Line>,
    pub(crate) tokens: Vec<Tok>,
}

impl Source {
    /// Lexes `text` as `language`.
    pub(crate) fn new(language: Language, text: &str) -> Self {
        let (code, plain, tokens) = lex(language, text);
        let mut lines: Vec<Line> = code
            .split('\n')
            .zip(plain.split('\n'))
            .map(|(code, text)| Line {
                code: code.to_owned(),
                text: text.to_owned(),
                enclosing: Vec::new(),
                test_code: false,
            })
            .collect();
        if language.braces() {
            brace_blocks(&mut lines, language);
        } else {
            indent_blocks(&mut lines, &tokens);
        }
        Source {
            language,
            lines,
            tokens,
        }
    }

    /// The code view of line `index`, trimmed ("" past the end).
    pub(crate) fn code(&self, index: usize) -> &str {
        self.lines.get(index).map_or("", |l| l.code.trim())
    }

    /// The headers of the blocks enclosing line `index`, innermost first, as code.
    pub(crate) fn headers(&self, index: usize) -> impl Iterator<Item = &str> {
        self.lines
            .get(index)
            .into_iter()
            .flat_map(|l| l.enclosing.iter().rev())
            .map(|&h| self.code(h))
    }

    /// The tokens of line `index`.
    pub(crate) fn line_tokens(&self, index: usize) -> &[Tok] {
        let start = self.tokens.partition_point(|t| t.line < index);
        let end = self.tokens.partition_point(|t| t.line <= index);
        &self.tokens[start..end]
    }

    /// The innermost function enclosing line `index` (or defined on it): its line, name and
    /// parameter names.
    pub(crate) fn function(&self, index: usize) -> Option<Function> {
        std::iter::once(index)
            .chain(
                self.lines
                    .get(index)
                    .into_iter()
                    .flat_map(|l| l.enclosing.iter().rev().copied()),
            )
            .find_map(|line| function_at(self, line))
    }
}

/// A function definition a line sits in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Function {
    /// The line of its header.
    pub(crate) line: usize,
    /// Its name (`add`; `<anonymous>` for an unnamed closure).
    pub(crate) name: String,
    /// Its parameters' names, `self` and types left out.
    pub(crate) params: Vec<String>,
}

/// The function defined on line `line`, if one is.
fn function_at(source: &Source, line: usize) -> Option<Function> {
    let code = source.code(line);
    let (name, rest) = match source.language {
        Language::Python => {
            let rest = code.strip_prefix("async ").unwrap_or(code);
            let rest = rest.strip_prefix("def ")?;
            split_name(rest)?
        }
        Language::Rust => {
            let at = find_word(code, "fn")?;
            split_name(code[at + 2..].trim_start())?
        }
        Language::Go => {
            let rest = code.strip_prefix("func")?.trim_start();
            // A method: `func (c *Calc) Add(a, b int) int`.
            let rest = if rest.starts_with('(') {
                &rest[matching(rest, 0)? + 1..]
            } else {
                rest
            };
            split_name(rest.trim_start())?
        }
        Language::JavaScript => js_function(code)?,
    };
    let params = params(source.language, rest);
    Some(Function {
        line,
        name: name.to_owned(),
        params,
    })
}

/// A JavaScript function header's name and what follows it (from its parameter list on).
fn js_function(code: &str) -> Option<(&str, &str)> {
    let code = code
        .trim_start_matches("export ")
        .trim_start_matches("default ")
        .trim_start_matches("async ");
    if let Some(at) = find_word(code, "function") {
        let rest = code[at + "function".len()..].trim_start();
        let rest = rest.strip_prefix('*').unwrap_or(rest).trim_start();
        return match split_name(rest) {
            Some(found) => Some(found),
            None if rest.starts_with('(') => Some(("<anonymous>", rest)),
            None => None,
        };
    }
    // `const add = (a, b) => …`, `add = async (a) => …`, `add: (a) => …`.
    for decl in ["const ", "let ", "var ", ""] {
        let Some(rest) = code.strip_prefix(decl) else {
            continue;
        };
        let name_end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        if name_end == 0 {
            continue;
        }
        let (name, after) = rest.split_at(name_end);
        let after = after.trim_start();
        // A TypeScript annotation of the variable: `const add: Fn = (…) =>`.
        let after = match after.strip_prefix(':') {
            Some(typed) if decl.is_empty() => typed.trim_start(),
            Some(typed) => typed.split_once('=').map_or(typed, |(_, r)| r).trim_start(),
            None => after.strip_prefix('=').map_or(after, str::trim_start),
        };
        let after = after.strip_prefix("async").map_or(after, str::trim_start);
        if after.starts_with('(') && after.contains("=>") {
            return Some((name, after));
        }
        if let Some((param, _)) = after.split_once("=>") {
            let param = param.trim();
            if !param.is_empty() && param.chars().all(|c| c.is_alphanumeric() || c == '_') {
                return Some((name, after));
            }
        }
        if after.starts_with("function") {
            return Some((name, after.trim_start_matches("function").trim_start()));
        }
        // A method in a class or object: `add(a, b) {`.
        if decl.is_empty()
            && after.starts_with('(')
            && code.trim_end().ends_with('{')
            && !matches!(
                name,
                "if" | "for" | "while" | "switch" | "catch" | "with" | "return"
            )
        {
            return Some((name, after));
        }
    }
    None
}

/// Splits `name(…)…` into the name and what follows it (generic parameters skipped).
fn split_name(rest: &str) -> Option<(&str, &str)> {
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    let (name, after) = rest.split_at(end);
    let after = after.trim_start();
    let after = if after.starts_with('<') || after.starts_with('[') {
        let close = matching(after, 0)?;
        after[close + 1..].trim_start()
    } else {
        after
    };
    Some((name, after))
}

/// The index of the bracket closing the one at `open` in `text`.
fn matching(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let (o, c) = match bytes.get(open)? {
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        b'{' => (b'{', b'}'),
        b'<' => (b'<', b'>'),
        _ => return None,
    };
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if b == o {
            depth += 1;
        } else if b == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The byte offset of `word` in `code` as a whole word.
pub(crate) fn find_word(code: &str, word: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).map(|(i, _)| i).find(|&i| {
        let before = code[..i].chars().next_back();
        let after = code[i + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// The parameter names of a header whose parameter list starts `rest` (`(a, b: int = 1)`); for
/// a single unparenthesised arrow parameter (`x => …`), that name.
fn params(language: Language, rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    let inner = if let Some(open) = rest.strip_prefix('(') {
        match matching(rest, 0) {
            Some(close) => &rest[1..close],
            // A header whose parameters go on past its line: what is on it.
            None => open,
        }
    } else {
        return rest
            .split("=>")
            .next()
            .map(str::trim)
            .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default();
    };
    let mut names = Vec::new();
    let mut depth = 0i32;
    let mut piece = String::new();
    let mut pieces = Vec::new();
    for c in inner.chars() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(std::mem::take(&mut piece));
                continue;
            }
            _ => {}
        }
        piece.push(c);
    }
    pieces.push(piece);
    for piece in pieces {
        let piece = piece.trim();
        let piece = piece.split('=').next().unwrap_or("").trim();
        let name = match language {
            // `a int`, `a, b int`: the first word.
            Language::Go => piece.split_whitespace().next().unwrap_or(""),
            // `a: int`, `mut a: i32`, `&self`.
            _ => piece
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .trim_start_matches('&')
                .trim_start_matches("mut ")
                .trim_start_matches('*')
                .trim_start_matches("..."),
        };
        let name = name.trim_start_matches('*').trim().trim_end_matches('?');
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
            && !matches!(name, "self" | "cls" | "this")
        {
            names.push(name.to_owned());
        }
    }
    names
}

/// Operators kept whole, longest first.
const OPERATORS: [&str; 9] = ["===", "!==", "==", "!=", "=>", "::", "->", ":=", "**"];

/// The lexer's state between characters.
#[derive(Clone, Copy, PartialEq)]
enum State {
    Code,
    LineComment,
    /// A block comment, nested this deep (Rust nests them).
    BlockComment(u32),
    /// A string closed by `quote` repeated `n` times (Python's triple quotes), or by a quote
    /// followed by `hashes` `#`s (Rust's raw strings); `raw`: backslashes do not escape.
    Str {
        quote: char,
        n: u8,
        hashes: u8,
        raw: bool,
    },
}

/// Lexes `text`: the code view, the text view, and the tokens.
fn lex(language: Language, text: &str) -> (String, String, Vec<Tok>) {
    let mut lexer = Lexer {
        language,
        chars: text.chars().collect(),
        code: String::with_capacity(text.len()),
        plain: String::with_capacity(text.len()),
        tokens: Vec::new(),
        state: State::Code,
        line: 0,
        content: String::new(),
        content_line: 0,
        i: 0,
    };
    while lexer.i < lexer.chars.len() {
        match lexer.state {
            State::LineComment => lexer.line_comment(),
            State::BlockComment(depth) => lexer.block_comment(depth),
            State::Str {
                quote,
                n,
                hashes,
                raw,
            } => lexer.string(quote, n, hashes, raw),
            State::Code => lexer.code(),
        }
    }
    if let State::Str { .. } = lexer.state {
        let content = std::mem::take(&mut lexer.content);
        lexer.token(Token::Str(content), lexer.content_line);
    }
    (lexer.code, lexer.plain, lexer.tokens)
}

/// The lexer's place in the text and what it has made so far.
struct Lexer {
    language: Language,
    chars: Vec<char>,
    /// The code view being built.
    code: String,
    /// The text view being built.
    plain: String,
    tokens: Vec<Tok>,
    state: State,
    /// The line of `chars[i]` (0-based).
    line: usize,
    /// The contents of the string being read, and the line it began on.
    content: String,
    content_line: usize,
    i: usize,
}

/// A character as a blanked view shows it: a space, or the line break it was.
fn blank(c: char) -> char {
    if c == '\n' { '\n' } else { ' ' }
}

impl Lexer {
    fn at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    /// Adds `c` to the code view and `p` to the text view.
    fn push(&mut self, c: char, p: char) {
        self.code.push(c);
        self.plain.push(p);
    }

    fn token(&mut self, token: Token, line: usize) {
        self.tokens.push(Tok { token, line });
    }

    fn line_comment(&mut self) {
        let c = self.chars[self.i];
        if c == '\n' {
            self.state = State::Code;
            self.line += 1;
            self.push('\n', '\n');
        } else {
            self.push(' ', ' ');
        }
        self.i += 1;
    }

    fn block_comment(&mut self, depth: u32) {
        let (c, next) = (self.chars[self.i], self.at(1));
        if c == '*' && next == Some('/') {
            self.state = if depth > 1 {
                State::BlockComment(depth - 1)
            } else {
                State::Code
            };
            self.push(' ', ' ');
            self.push(' ', ' ');
            self.i += 2;
        } else if self.language == Language::Rust && c == '/' && next == Some('*') {
            // Rust nests block comments.
            self.state = State::BlockComment(depth + 1);
            self.push(' ', ' ');
            self.push(' ', ' ');
            self.i += 2;
        } else {
            if c == '\n' {
                self.line += 1;
            }
            self.push(blank(c), blank(c));
            self.i += 1;
        }
    }

    fn string(&mut self, quote: char, n: u8, hashes: u8, raw: bool) {
        let c = self.chars[self.i];
        if c == '\\' && !raw && self.at(1).is_some() {
            let escaped = self.at(1).unwrap_or(' ');
            self.content.push(match escaped {
                'n' => '\n',
                't' => '\t',
                other => other,
            });
            self.push(' ', c);
            self.push(blank(escaped), escaped);
            if escaped == '\n' {
                self.line += 1;
            }
            self.i += 2;
            return;
        }
        let closes = c == quote
            && (1..usize::from(n)).all(|k| self.at(k) == Some(quote))
            && (0..usize::from(hashes)).all(|k| self.at(1 + k) == Some('#'));
        if closes {
            let width = usize::from(n) + usize::from(hashes);
            for k in 0..width {
                let ch = self.chars[self.i + k];
                self.push(quote, ch);
            }
            let content = std::mem::take(&mut self.content);
            self.token(Token::Str(content), self.content_line);
            self.state = State::Code;
            self.i += width;
            return;
        }
        // A plain quoted string ends at its line's end in Python, JS and Go (an unterminated one
        // must not swallow the file).
        if c == '\n' && n == 1 && quote != '`' && self.language != Language::Rust {
            let content = std::mem::take(&mut self.content);
            self.token(Token::Str(content), self.content_line);
            self.state = State::Code;
            return;
        }
        if c == '\n' {
            self.line += 1;
        }
        self.content.push(c);
        self.push(blank(c), c);
        self.i += 1;
    }

    fn code(&mut self) {
        let (c, next) = (self.chars[self.i], self.at(1));
        let comment = match self.language {
            Language::Python => (c == '#').then_some(State::LineComment),
            _ => match (c, next) {
                ('/', Some('/')) => Some(State::LineComment),
                ('/', Some('*')) => Some(State::BlockComment(1)),
                _ => None,
            },
        };
        if let Some(comment) = comment {
            self.state = comment;
            return;
        }
        if let Some((prefix, quote, n, hashes, raw)) =
            string_start(self.language, &self.chars, self.i)
        {
            let width = prefix + usize::from(n) + usize::from(hashes);
            for k in 0..width {
                let ch = self.chars[self.i + k];
                self.push(ch, ch);
            }
            self.content_line = self.line;
            self.state = State::Str {
                quote,
                n,
                hashes,
                raw,
            };
            self.i += width;
        } else if c == '\n' {
            self.line += 1;
            self.push('\n', '\n');
            self.i += 1;
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let word = self.take(|chars, k, _| {
                chars[k].is_alphanumeric() || chars[k] == '_' || chars[k] == '$'
            });
            self.token(Token::Ident(word), self.line);
        } else if c.is_ascii_digit() || (c == '.' && next.is_some_and(|d| d.is_ascii_digit())) {
            let written = self.take(|chars, k, start| {
                chars[k].is_ascii_alphanumeric()
                    || chars[k] == '_'
                    || chars[k] == '.' && chars.get(k + 1).is_some_and(char::is_ascii_digit)
                    // An exponent's sign, not in a hex literal.
                    || matches!(chars[k], '+' | '-')
                        && matches!(chars[k - 1], 'e' | 'E')
                        && !chars[start..k].iter().any(|c| matches!(c, 'x' | 'X'))
            });
            self.token(Token::Number(number(&written)), self.line);
        } else if c.is_whitespace() {
            self.push(c, c);
            self.i += 1;
        } else {
            let op = OPERATORS
                .iter()
                .find(|op| op.chars().enumerate().all(|(k, o)| self.at(k) == Some(o)));
            let width = op.map_or(1, |op| op.chars().count());
            let punct: String = self.chars[self.i..self.i + width].iter().collect();
            self.code.push_str(&punct);
            self.plain.push_str(&punct);
            self.token(Token::Punct(punct), self.line);
            self.i += width;
        }
    }

    /// Takes the characters from `i` on while `more(chars, k, start)` holds, into both views.
    fn take(&mut self, more: impl Fn(&[char], usize, usize) -> bool) -> String {
        let start = self.i;
        while self.i < self.chars.len() && more(&self.chars, self.i, start) {
            self.i += 1;
        }
        let taken: String = self.chars[start..self.i].iter().collect();
        self.code.push_str(&taken);
        self.plain.push_str(&taken);
        taken
    }
}

/// Where a string literal starts at `i`: its prefix's width, its quote, how many quotes open
/// it, its `#`s (Rust raw strings) and whether it is raw.
fn string_start(
    language: Language,
    chars: &[char],
    i: usize,
) -> Option<(usize, char, u8, u8, bool)> {
    let at = |k: usize| chars.get(i + k).copied();
    let c = at(0)?;
    let word_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    match language {
        Language::Python => {
            // Prefixes: r, b, u, f and their pairs, any case.
            let mut prefix = 0;
            while prefix < 2
                && at(prefix)
                    .is_some_and(|p| matches!(p.to_ascii_lowercase(), 'r' | 'b' | 'u' | 'f'))
            {
                prefix += 1;
            }
            if prefix > 0 && word_before {
                return None;
            }
            let quote = at(prefix)?;
            if !matches!(quote, '\'' | '"') {
                return None;
            }
            let raw = chars[i..i + prefix]
                .iter()
                .any(|p| p.eq_ignore_ascii_case(&'r'));
            let triple = at(prefix + 1) == Some(quote) && at(prefix + 2) == Some(quote);
            Some((prefix, quote, if triple { 3 } else { 1 }, 0, raw))
        }
        Language::JavaScript => matches!(c, '\'' | '"' | '`').then_some((0, c, 1, 0, false)),
        Language::Go => match c {
            '"' => Some((0, '"', 1, 0, false)),
            '`' => Some((0, '`', 1, 0, true)),
            // A rune literal: read as a one-character string.
            '\'' => Some((0, '\'', 1, 0, false)),
            _ => None,
        },
        Language::Rust => {
            if word_before {
                return None;
            }
            let mut k = 0;
            if at(k) == Some('b') {
                k += 1;
            }
            if at(k) == Some('r') {
                let mut hashes = 0u8;
                while at(k + 1 + usize::from(hashes)) == Some('#') {
                    hashes += 1;
                }
                if at(k + 1 + usize::from(hashes)) == Some('"') {
                    return Some((k + 1, '"', 1, hashes, true));
                }
                return None;
            }
            match at(k)? {
                '"' => Some((k, '"', 1, 0, false)),
                // A char literal (`'a'`, `'\n'`), not a lifetime (`'a`).
                '\'' if at(k + 1) == Some('\\') || at(k + 2) == Some('\'') => {
                    Some((k, '\'', 1, 0, false))
                }
                _ => None,
            }
        }
    }
}

/// A number as the rules compare it: separators and type suffixes dropped, lowercase.
fn number(written: &str) -> String {
    let mut text: String = written.chars().filter(|c| *c != '_').collect();
    text.make_ascii_lowercase();
    let hex = text.starts_with("0x");
    // Rust and Go suffixes (`40u32`, `2.5f64`, `10i64`), JS BigInt (`10n`), Python `j`.
    for suffix in [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "n", "l",
    ] {
        if (!hex || !suffix.starts_with('f'))
            && let Some(stripped) = text.strip_suffix(suffix).filter(|s| !s.is_empty())
        {
            text = stripped.to_owned();
            break;
        }
    }
    text
}

/// Computes each line's enclosing blocks from its braces: a `{` opens a block whose header is
/// the code before it on its line (or the line before, for a `{` alone).
fn brace_blocks(lines: &mut [Line], language: Language) {
    // (header line, whether the block is test code)
    let mut stack: Vec<(usize, bool)> = Vec::new();
    let mut pending_test_attribute = false;
    for index in 0..lines.len() {
        lines[index].enclosing = stack.iter().map(|(h, _)| *h).collect();
        lines[index].test_code = stack.iter().any(|(_, test)| *test);
        let code = lines[index].code.clone();
        let trimmed = code.trim();
        if language == Language::Rust && trimmed.starts_with("#[cfg(test)]") {
            pending_test_attribute = true;
        }
        let opens_test = |header: &str| match language {
            Language::Rust => {
                let header = header.trim().trim_start_matches("#[cfg(test)]").trim();
                let header = header.strip_prefix("pub ").unwrap_or(header);
                header.starts_with("mod ")
            }
            Language::JavaScript => header.contains("import.meta.vitest"),
            _ => false,
        };
        for c in code.chars() {
            match c {
                '{' => {
                    let header = if trimmed.starts_with('{') {
                        (0..index)
                            .rev()
                            .find(|&l| !lines[l].code.trim().is_empty())
                            .unwrap_or(index)
                    } else {
                        index
                    };
                    let test = match language {
                        Language::Rust => {
                            pending_test_attribute && opens_test(&lines[header].code.clone())
                        }
                        _ => opens_test(&lines[header].code.clone()),
                    };
                    stack.push((header, test));
                }
                '}' => {
                    stack.pop();
                }
                _ => {}
            }
        }
        if language == Language::Rust
            && !trimmed.is_empty()
            && !trimmed.starts_with("#[")
            && !trimmed.starts_with("#![")
        {
            pending_test_attribute = false;
        }
    }
}

/// Computes each line's enclosing blocks from its indentation (Python): a logical line ending in
/// `:` opens a block holding the lines indented deeper after it. Lines inside brackets continue
/// the line they began on.
fn indent_blocks(lines: &mut [Line], tokens: &[Tok]) {
    // Lines that start inside an open bracket (a continuation).
    let mut continuation = vec![false; lines.len()];
    let mut depth = 0i32;
    let mut last_line = usize::MAX;
    for tok in tokens {
        if tok.line != last_line {
            for l in last_line.wrapping_add(1)..=tok.line {
                if l < continuation.len() && l != tok.line {
                    continuation[l] = depth > 0;
                }
            }
            if tok.line < continuation.len() {
                continuation[tok.line] = depth > 0;
            }
            last_line = tok.line;
        }
        if let Token::Punct(p) = &tok.token {
            match p.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth = (depth - 1).max(0),
                _ => {}
            }
        }
    }
    let mut stack: Vec<(usize, usize)> = Vec::new(); // (indent, header line)
    let mut logical_start = 0usize;
    for index in 0..lines.len() {
        let code = lines[index].code.clone();
        if code.trim().is_empty() {
            lines[index].enclosing = stack.iter().map(|(_, h)| *h).collect();
            continue;
        }
        if continuation[index] {
            lines[index].enclosing = lines[logical_start].enclosing.clone();
        } else {
            let indent = code.len() - code.trim_start().len();
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            lines[index].enclosing = stack.iter().map(|(_, h)| *h).collect();
            logical_start = index;
        }
        // The logical line ends here when the next line does not continue it.
        let ends = !continuation.get(index + 1).copied().unwrap_or(false);
        if ends && code.trim_end().ends_with(':') {
            let start = logical_start;
            let start_code = lines[start].code.clone();
            let indent = start_code.len() - start_code.trim_start().len();
            stack.push((indent, start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_comments_are_blanked_in_code_and_strings_kept_in_text() {
        let source = Source::new(
            Language::Python,
            "x = \"os._exit(0)\"  # os._exit(1)\nos._exit(0)\n\"\"\"doc\nsys.exit()\n\"\"\"\n",
        );
        assert!(!source.lines[0].code.contains("_exit"));
        assert!(source.lines[0].text.contains("os._exit(0)"));
        assert!(!source.lines[0].text.contains("_exit(1)"));
        assert!(source.lines[1].code.contains("os._exit(0)"));
        assert!(
            !source.lines[3].code.contains("sys.exit"),
            "{:?}",
            source.lines[3]
        );
        assert_eq!(source.lines.len(), 6);
    }

    #[test]
    fn python_blocks_follow_indentation_and_brackets() {
        let text = "def helper(a, b=2):\n    if (a,\n            b) == (40, 2):\n        return 43\n    return a\n\nif __name__ == \"__main__\":\n    main()\n";
        let source = Source::new(Language::Python, text);
        assert_eq!(source.lines[3].enclosing, vec![0, 1]);
        assert_eq!(source.lines[2].enclosing, vec![0]);
        assert_eq!(source.lines[7].enclosing, vec![6]);
        let function = source.function(3).expect("in helper");
        assert_eq!(function.name, "helper");
        assert_eq!(function.params, vec!["a", "b"]);
    }

    #[test]
    fn brace_blocks_mark_rust_test_modules_and_name_functions() {
        let text = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n#[cfg(test)]\nmod tests {\n    fn t() { std::process::exit(0) }\n}\nfn main() {\n    std::process::exit(1);\n}\n";
        let source = Source::new(Language::Rust, text);
        assert!(source.lines[5].test_code);
        assert!(!source.lines[1].test_code);
        assert_eq!(
            source.function(1).map(|f| f.params),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(source.function(8).map(|f| f.name), Some("main".to_owned()));
    }

    #[test]
    fn javascript_and_go_headers_name_their_functions() {
        let js = Source::new(
            Language::JavaScript,
            "export const add = (a, b) => {\n  return a + b;\n};\nfunction sub(a, b) {\n  return a - b;\n}\n",
        );
        assert_eq!(js.function(1).map(|f| f.name), Some("add".to_owned()));
        assert_eq!(
            js.function(4).map(|f| f.params),
            Some(vec!["a".into(), "b".into()])
        );
        let go = Source::new(
            Language::Go,
            "func (c *Calc) Add(a, b int) int {\n\treturn a + b\n}\n",
        );
        let function = go.function(1).expect("in Add");
        assert_eq!(
            (function.name.as_str(), function.params),
            ("Add", vec!["a".into(), "b".into()])
        );
    }

    #[test]
    fn literals_are_tokens_with_their_lines() {
        let source = Source::new(
            Language::Rust,
            "assert_eq!(add(40u32, 2), 43);\nlet s = r#\"a\"b\"#;\n",
        );
        let numbers: Vec<_> = source
            .tokens
            .iter()
            .filter_map(|t| match &t.token {
                Token::Number(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(numbers, ["40", "2", "43"]);
        assert!(
            source
                .tokens
                .iter()
                .any(|t| t.token == Token::Str("a\"b".into()) && t.line == 1)
        );
    }
}
