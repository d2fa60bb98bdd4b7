//! What the fixed prompts (the retry prompt, the critic's review prompt) are made of: a template
//! read once into parts, a table of phrases hashed with it, and a diff cut to a number of lines.
//! Every word the code sends that a verdict did not say is in one of them, so the SHA-256 on the
//! spans and the records covers it all.

/// Lines of the changes-so-far diff a prompt quotes, at most.
pub const MAX_DIFF_LINES: usize = 500;

/// A fixed prompt: its template, read once, and its phrases.
#[derive(Debug)]
pub(crate) struct Prompt {
    template: Template,
    phrases: &'static [(&'static str, &'static str)],
    sha256: String,
}

impl Prompt {
    /// Reads `template` and hashes it with `phrases`: the template, then each phrase as a line
    /// `\nNAME: PHRASE`.
    pub(crate) fn new(
        template: &'static str,
        phrases: &'static [(&'static str, &'static str)],
    ) -> Self {
        let mut text = template.to_owned();
        for (name, phrase) in phrases {
            text.push_str(&format!("\n{name}: {phrase}"));
        }
        Prompt {
            template: Template::parse(template),
            phrases,
            sha256: harness_builtins::sha256_hex(text.as_bytes()),
        }
    }

    /// The SHA-256 of every word of it.
    pub(crate) fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The phrase named `name`, filled with `values` (`{key}` → value, in one pass).
    pub(crate) fn phrase(&self, name: &str, values: &[(&str, &str)]) -> String {
        let phrase = self
            .phrases
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, text)| *text)
            .expect("a phrase of the prompt");
        fill(phrase, values)
    }

    /// The template filled with `values` (by name); a value is never read as template.
    pub(crate) fn render(&self, values: &[(&str, &str)]) -> String {
        self.template.render(values)
    }
}

/// The lines of `diff` a prompt quotes (at most [`MAX_DIFF_LINES`]) and how many more it cut.
pub(crate) fn diff_lines(diff: &[String]) -> (Vec<&str>, usize) {
    let mut lines: Vec<&str> = diff.iter().flat_map(|d| d.lines()).collect();
    let cut = lines.len().saturating_sub(MAX_DIFF_LINES);
    lines.truncate(MAX_DIFF_LINES);
    (lines, cut)
}

/// A template read once: text, `{name}` placeholders, and `{?name}…{/name}` sections kept only
/// when `name` has something to say.
#[derive(Debug)]
struct Template {
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Text(&'static str),
    Value(&'static str),
    Section(&'static str, Vec<Part>),
}

impl Template {
    /// Reads `text`; a `{` that opens no placeholder is text.
    ///
    /// # Panics
    /// On a section that is not closed, or a close that matches no open section: the templates
    /// are constants of this crate, read on first use (and by its tests).
    fn parse(text: &'static str) -> Self {
        let (parts, _) = Self::parts(text, None);
        Template { parts }
    }

    /// The parts of `text` up to the end of `section` (when inside one), and what follows it.
    fn parts(mut text: &'static str, section: Option<&str>) -> (Vec<Part>, &'static str) {
        let mut parts = Vec::new();
        while let Some(start) = text.find('{') {
            if start > 0 {
                parts.push(Part::Text(&text[..start]));
            }
            let tail = &text[start..];
            let name_end = tail.find('}').filter(|&end| {
                tail[1..end]
                    .chars()
                    .all(|c| "?/_".contains(c) || c.is_ascii_lowercase())
            });
            let Some(end) = name_end else {
                parts.push(Part::Text(&tail[..1]));
                text = &tail[1..];
                continue;
            };
            let name = &tail[1..end];
            text = &tail[end + 1..];
            if let Some(opened) = name.strip_prefix('?') {
                let (inner, after) = Self::parts(text, Some(opened));
                parts.push(Part::Section(opened, inner));
                text = after;
            } else if let Some(closed) = name.strip_prefix('/') {
                assert!(
                    Some(closed) == section,
                    "the template closes {{/{closed}}} where {section:?} is open"
                );
                return (parts, text);
            } else {
                parts.push(Part::Value(name));
            }
        }
        assert!(
            section.is_none(),
            "the template's section {section:?} is not closed"
        );
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        (parts, "")
    }

    /// Fills the template with `values` (by name); a value is never read as template.
    fn render(&self, values: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(1024);
        Self::render_parts(&self.parts, values, &mut out);
        out
    }

    fn render_parts(parts: &[Part], values: &[(&str, &str)], out: &mut String) {
        let value = |name: &str| {
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map_or("", |(_, value)| *value)
        };
        for part in parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Value(name) => out.push_str(value(name)),
                Part::Section(name, inner) if !value(name).is_empty() => {
                    Self::render_parts(inner, values, out);
                }
                Part::Section(..) => {}
            }
        }
    }
}

/// Fills `template`'s placeholders in one pass: what a value says (a reason quoting
/// `{details}`, say) is never filled in again.
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(
        template.len() + values.iter().map(|(_, value)| value.len()).sum::<usize>(),
    );
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        match values.iter().find(|(key, _)| tail.starts_with(key)) {
            Some((key, value)) => {
                out.push_str(value);
                rest = &tail[key.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_kept_only_when_they_have_something_to_say() {
        let template = Template::parse("a{?x} [{x}]{/x} {y} {\"json\": 1}");
        assert_eq!(
            template.render(&[("x", "1"), ("y", "{x}")]),
            "a [1] {x} {\"json\": 1}"
        );
        assert_eq!(template.render(&[("y", "2")]), "a 2 {\"json\": 1}");
    }

    #[test]
    #[should_panic(expected = "is not closed")]
    fn a_section_left_open_is_refused() {
        Template::parse("a{?x} {x}");
    }

    #[test]
    #[should_panic(expected = "closes {/y}")]
    fn a_close_without_its_open_is_refused() {
        Template::parse("a{?x} {x}{/y}");
    }
}
