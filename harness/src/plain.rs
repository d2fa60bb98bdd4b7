//! Configuration errors in plain words: what serde and the YAML reader say, rewritten for the
//! person who wrote the file — a misspelt key gets its likely meaning, `expected u32` becomes
//! "a whole number", a tab is named as a tab.

/// `message` (a serde or YAML error) in plain words.
pub(crate) fn plain(message: &str) -> String {
    let mut text = message.to_owned();
    if let Some(suggested) = did_you_mean(&text) {
        text = suggested;
    }
    for (machine, words) in [
        ("expected u8", "expected a whole number (0 to 255)"),
        ("expected u16", "expected a whole number (0 to 65535)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        (
            "expected a sequence",
            "expected a list (`[a, b]` or `- a` lines)",
        ),
        ("expected a map", "expected a mapping (`key: value` lines)"),
        ("invalid type: ", ""),
    ] {
        text = text.replace(machine, words);
    }
    const TAB: &str = "found a tab character";
    if let (Some(start), Some((line, column))) = (text.find(TAB), position(&text)) {
        return format!("{}{}", &text[..start], tab_at(line, column));
    }
    text
}

/// What a tab in the indentation is, in plain words.
fn tab_at(line: usize, column: usize) -> String {
    format!(
        "a tab at line {line}, column {column}: YAML indents with spaces only — replace it with spaces"
    )
}

/// A YAML reader's `message` about `source` in plain words: as [`plain`], and a character the
/// reader cannot start a token with is named for what it is — a tab ("a tab at line 3, column
/// 1: YAML indents with spaces only — replace it with spaces"), or a reserved character such as
/// `@` or `` ` `` (quote the value).
pub(crate) fn plain_yaml(message: &str, source: &str) -> String {
    const NO_TOKEN: &str = "found character that cannot start any token";
    if !message.contains(NO_TOKEN) {
        return plain(message);
    }
    let at = position(message);
    let found = at.and_then(|(line, column)| {
        source
            .lines()
            .nth(line.checked_sub(1)?)?
            .chars()
            .nth(column.checked_sub(1)?)
    });
    let (Some((line, column)), Some(found)) = (at, found) else {
        return plain(message);
    };
    let start = message.find(NO_TOKEN).unwrap_or(0);
    let before = &message[..start];
    if found == '\t' {
        return format!("{before}{}", tab_at(line, column));
    }
    format!(
        "{before}{found:?} at line {line}, column {column} cannot start a YAML value (`@` and `` ` `` are reserved): put the value in quotes"
    )
}

/// The `line L column C` a YAML reader's message names.
fn position(message: &str) -> Option<(usize, usize)> {
    let rest = &message[message.find("line ")? + "line ".len()..];
    let (line, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("column ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((line.parse().ok()?, column.parse().ok()?))
}

/// `unknown field `X`, expected one of `a`, `b`, …` with the known key closest to X named, when
/// one is close enough to be a misspelling.
fn did_you_mean(message: &str) -> Option<String> {
    let start = message.find("unknown field `")? + "unknown field `".len();
    let end = start + message[start..].find('`')?;
    let unknown = &message[start..end];
    let expected = &message[end + 1..];
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let best = closest(unknown, &known)?;
    Some(message.replacen(
        &format!("unknown field `{unknown}`"),
        &format!("unknown key `{unknown}` (did you mean `{best}`?)"),
        1,
    ))
}

/// The name of `known` closest to `unknown`, when one is close enough to be a misspelling.
pub(crate) fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let (best, score) = known
        .iter()
        .map(|k| (*k, strsim::jaro_winkler(unknown, k)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    (score >= 0.8).then_some(best)
}

/// ` (did you mean `X`?)` for the name of `known` closest to `unknown`, or nothing.
pub(crate) fn did_you_mean_of(unknown: &str, known: &[&str]) -> String {
    closest(unknown, known)
        .map(|best| format!(" (did you mean `{best}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_key_gets_its_likely_meaning() {
        let said = plain(
            "unknown field `checs`, expected one of `task`, `delegate`, `checks`, `criteria` at line 3 column 1",
        );
        assert!(
            said.starts_with("unknown key `checs` (did you mean `checks`?)"),
            "{said}"
        );
        // Nothing near: no guess.
        let said = plain("unknown field `zzz`, expected one of `task`, `delegate`");
        assert!(!said.contains("did you mean"), "{said}");
    }

    #[test]
    fn types_and_tabs_are_said_in_plain_words() {
        assert_eq!(
            plain(
                "max_verify_retries: invalid type: string \"many\", expected u32 at line 3 column 21"
            ),
            "max_verify_retries: string \"many\", expected a whole number (0 or more) at line 3 column 21"
        );
        assert_eq!(
            plain(
                "found a tab character that violates indentation at line 2 column 1, while scanning a plain scalar at line 1 column 7"
            ),
            "a tab at line 2, column 1: YAML indents with spaces only — replace it with spaces"
        );
    }

    #[test]
    fn a_character_yaml_cannot_start_with_is_named_for_what_it_is() {
        let message = "found character that cannot start any token at line 3 column 1, while scanning for the next token";
        assert_eq!(
            plain_yaml(message, "task: x\ndelegate:\n\tkind: command\n"),
            "a tab at line 3, column 1: YAML indents with spaces only — replace it with spaces"
        );
        let said = plain_yaml(
            "found character that cannot start any token at line 1 column 7, while scanning for the next token",
            "task: @here\n",
        );
        assert_eq!(
            said,
            "'@' at line 1, column 7 cannot start a YAML value (`@` and `` ` `` are reserved): put the value in quotes"
        );
        // A position past the text: said as the reader said it.
        assert!(plain_yaml(message, "").contains("cannot start any token"));
    }
}
