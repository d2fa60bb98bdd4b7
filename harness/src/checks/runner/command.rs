//! A check's command as words with their places, so a runner's own report can be asked for by
//! editing the command the operator wrote as little as possible: insert `-json` after `go test`,
//! append `--json --outputFile=…` to the `jest` command of `npm ci && npx jest`. A check given as
//! `argv` is edited word by word; one given as `run` (a shell string) is edited in place, and
//! only where its words are plain: a command built by substitutions (`$(…)`, backquotes) or read
//! from a here-document is left alone, and its runner is read from its summary line instead.

use std::ops::Range;

/// A word of a shell command and where it is in the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word with its quotes removed.
    pub(crate) text: String,
    /// Its bytes in the script (quotes included).
    pub(crate) span: Range<usize>,
}

/// A check's command, in the form it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `argv:` — a program and its arguments, no shell.
    Argv(Vec<String>),
    /// `run:` — a shell script run by `sh -c`.
    Shell(String),
}

/// One simple command of a script: its words (operators excluded), with the place where text
/// appended to it goes (before its redirections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Simple {
    pub(crate) words: Vec<Word>,
    /// Where appended arguments go.
    pub(crate) end: usize,
}

/// An edit of one simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Insert arguments after its `n`th word.
    After(usize, Vec<String>),
    /// Append arguments at its end (before redirections).
    Append(Vec<String>),
    /// Replace its `n`th word.
    Replace(usize, String),
}

impl Command {
    /// The command a check's argv holds: `sh -c SCRIPT` is a shell script.
    pub(crate) fn of(argv: &[String]) -> Self {
        match argv {
            [sh, c, script] if sh == "sh" && c == "-c" => Command::Shell(script.clone()),
            argv => Command::Argv(argv.to_vec()),
        }
    }

    /// The argv that runs it.
    pub(crate) fn argv(&self) -> Vec<String> {
        match self {
            Command::Argv(argv) => argv.clone(),
            Command::Shell(script) => vec!["sh".to_owned(), "-c".to_owned(), script.clone()],
        }
    }

    /// Its simple commands, in order; `None` for a script too clever to edit safely.
    pub(crate) fn simples(&self) -> Option<Vec<Simple>> {
        match self {
            Command::Argv(argv) => Some(vec![Simple {
                words: argv
                    .iter()
                    .enumerate()
                    .map(|(i, w)| Word {
                        text: w.clone(),
                        span: i..i + 1,
                    })
                    .collect(),
                end: argv.len(),
            }]),
            Command::Shell(script) => split(script),
        }
    }

    /// The command with `edit` applied to its `index`th simple command.
    pub(crate) fn edited(&self, index: usize, edit: &Edit) -> Option<Command> {
        let simples = self.simples()?;
        let simple = simples.get(index)?;
        match self {
            Command::Argv(argv) => {
                let mut argv = argv.clone();
                match edit {
                    Edit::After(n, args) => {
                        let at = (*n + 1).min(argv.len());
                        argv.splice(at..at, args.iter().cloned());
                    }
                    Edit::Append(args) => argv.extend(args.iter().cloned()),
                    Edit::Replace(n, word) => *argv.get_mut(*n)? = word.clone(),
                }
                Some(Command::Argv(argv))
            }
            Command::Shell(script) => {
                let quoted = |args: &[String]| -> String {
                    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
                };
                let mut script = script.clone();
                match edit {
                    Edit::After(n, args) => {
                        let at = simple.words.get(*n)?.span.end;
                        script.insert_str(at, &format!(" {}", quoted(args)));
                    }
                    Edit::Append(args) => {
                        script.insert_str(simple.end, &format!(" {}", quoted(args)));
                    }
                    Edit::Replace(n, word) => {
                        let span = simple.words.get(*n)?.span.clone();
                        script.replace_range(span, &quote(word));
                    }
                }
                Some(Command::Shell(script))
            }
        }
    }
}

/// `word` quoted for `sh` when it needs it.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Splits a shell script into simple commands; `None` when it uses substitutions, backquotes or
/// here-documents (its words are then not what runs).
fn split(script: &str) -> Option<Vec<Simple>> {
    if script.contains("$(") || script.contains('`') || script.contains("<<") {
        return None;
    }
    let bytes = script.as_bytes();
    let mut simples = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut end: Option<usize> = None;
    let mut i = 0;
    let mut last_word_end = 0;
    let close =
        |words: &mut Vec<Word>, end: &mut Option<usize>, last: usize, simples: &mut Vec<Simple>| {
            if !words.is_empty() {
                simples.push(Simple {
                    words: std::mem::take(words),
                    end: end.take().unwrap_or(last),
                });
            }
            *end = None;
        };
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' => i += 1,
            b'\n' | b';' | b'|' | b'&' | b'(' | b')' => {
                close(&mut words, &mut end, last_word_end, &mut simples);
                i += 1;
            }
            b'#' if i == 0 || bytes[i - 1].is_ascii_whitespace() => {
                // A comment to the end of the line.
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            _ => {
                let start = i;
                let mut text = String::new();
                let mut quote: Option<u8> = None;
                while i < bytes.len() {
                    let b = bytes[i];
                    match quote {
                        Some(q) if b == q => quote = None,
                        Some(b'"') if b == b'\\' && i + 1 < bytes.len() => {
                            i += 1;
                            text.push(bytes[i] as char);
                        }
                        Some(_) => text.push(b as char),
                        None => match b {
                            b'\'' | b'"' => quote = Some(b),
                            b'\\' if i + 1 < bytes.len() => {
                                i += 1;
                                text.push(bytes[i] as char);
                            }
                            // `2>&1`: the `&` of a redirection is part of its word.
                            b'&' if text.ends_with(['>', '<']) => text.push('&'),
                            b' ' | b'\t' | b'\n' | b';' | b'|' | b'&' | b'(' | b')' => break,
                            _ => text.push(b as char),
                        },
                    }
                    i += 1;
                }
                if quote.is_some() {
                    return None;
                }
                // Non-ASCII bytes were pushed one by one: take the word from the script.
                let raw = &script[start..i];
                let text = if raw.is_ascii() {
                    text
                } else {
                    raw.replace(['\'', '"'], "")
                };
                let redirect = text.starts_with('>')
                    || text.starts_with('<')
                    || text.split_once(['>', '<']).is_some_and(|(fd, _)| {
                        !fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit())
                    });
                if redirect {
                    end.get_or_insert(last_word_end);
                } else if end.is_none() {
                    words.push(Word {
                        text,
                        span: start..i,
                    });
                    last_word_end = i;
                }
            }
        }
    }
    close(&mut words, &mut end, last_word_end, &mut simples);
    Some(simples)
}

/// The program a simple command runs, past environment assignments and wrappers (`env`,
/// `timeout 60`, `nice`, `exec`, `time`, `npx`, `uv run`, `poetry run`, `pipenv run`, `yarn`,
/// `pnpm exec`, `bunx`): its index among the words.
pub(crate) fn program(words: &[Word]) -> Option<usize> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].text.as_str();
        let base = w.rsplit('/').next().unwrap_or(w);
        if w.contains('=') && !w.starts_with('-') && !w.starts_with('=') {
            i += 1;
            continue;
        }
        match base {
            "env" | "exec" | "time" | "nice" | "nohup" | "command" | "npx" | "bunx" => {
                i += 1;
                // Their own options: `env -i`, `npx --yes`, `nice -n 10`.
                while i < words.len() && words[i].text.starts_with('-') {
                    i += if words[i].text == "-n" { 2 } else { 1 };
                }
            }
            "timeout" => {
                i += 1;
                while i < words.len() && words[i].text.starts_with('-') {
                    i += 1;
                }
                i += 1; // the duration
            }
            "uv" | "poetry" | "pipenv" | "pdm" | "hatch" | "rye"
                if words.get(i + 1).is_some_and(|n| n.text == "run") =>
            {
                i += 2;
            }
            "pnpm" | "yarn"
                if words
                    .get(i + 1)
                    .is_some_and(|n| n.text == "exec" || n.text == "dlx") =>
            {
                i += 2;
            }
            "yarn" | "pnpm"
                if words
                    .get(i + 1)
                    .is_some_and(|n| matches!(n.text.as_str(), "jest" | "vitest" | "mocha")) =>
            {
                i += 1;
            }
            "cd" => return None,
            _ => return Some(i),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(simple: &Simple) -> Vec<&str> {
        simple.words.iter().map(|w| w.text.as_str()).collect()
    }

    #[test]
    fn a_script_splits_into_simple_commands_with_their_words() {
        let command =
            Command::Shell("npm ci && npx jest --ci 2>&1 | tee out.txt; echo 'a b'".into());
        let simples = command.simples().expect("plain");
        assert_eq!(texts(&simples[0]), ["npm", "ci"]);
        assert_eq!(texts(&simples[1]), ["npx", "jest", "--ci"]);
        assert_eq!(texts(&simples[3]), ["echo", "a b"]);
        assert_eq!(program(&simples[1].words), Some(1));
        assert!(
            Command::Shell("pytest $(cat files)".into())
                .simples()
                .is_none()
        );
    }

    #[test]
    fn edits_land_where_the_runner_reads_them() {
        let command = Command::Shell("cd app && go test ./... > log.txt".into());
        let edited = command
            .edited(1, &Edit::After(1, vec!["-json".into()]))
            .expect("edited");
        assert_eq!(
            edited,
            Command::Shell("cd app && go test -json ./... > log.txt".into())
        );
        let edited = Command::Shell("npx jest 2>&1".into())
            .edited(
                0,
                &Edit::Append(vec!["--outputFile=/tmp/r dir/j.json".into()]),
            )
            .expect("edited");
        assert_eq!(
            edited,
            Command::Shell("npx jest '--outputFile=/tmp/r dir/j.json' 2>&1".into())
        );
        let argv = Command::Argv(vec!["node".into(), "--test".into(), "test/".into()]);
        let edited = argv
            .edited(0, &Edit::After(1, vec!["--x".into()]))
            .expect("edited");
        assert_eq!(edited.argv(), ["node", "--test", "--x", "test/"]);
        let replaced = Command::Shell("npx vitest run".into())
            .edited(0, &Edit::Replace(2, "list".into()))
            .expect("edited");
        assert_eq!(replaced, Command::Shell("npx vitest list".into()));
    }
}
