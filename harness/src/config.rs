//! The value shapes every section of a delegation file (and of a project policy) shares: strict
//! strings, seconds, and the reader of the script files a section names. Each section is parsed
//! by the module that uses it; this module only holds what they have in common.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Reads a script a key names, relative to the file that names it: its full path and its text.
/// The assembler gives each file's sections one, reading every script once however many
/// delegations name it.
pub(crate) type ReadScript<'a> = dyn Fn(&str, &Path) -> Result<(PathBuf, String)> + 'a;

/// Reads a string and nothing else: YAML would otherwise turn `task: 123` or `task: yes` into
/// the text "123" or "yes" without a word.
pub(crate) fn string_only<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<String, D::Error> {
    struct Text;
    impl serde::de::Visitor<'_> for Text {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> std::result::Result<String, E> {
            Ok(v)
        }
    }
    d.deserialize_any(Text)
}

/// A key that may be present but empty: `Some(None)` for `verify:` (null), `Some(Some(text))`
/// for a string; absent keys are `None` through `#[serde(default)]`.
pub(crate) fn present_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<String>>, D::Error> {
    #[derive(Deserialize)]
    struct Strict(#[serde(deserialize_with = "string_only")] String);
    Ok(Some(Option::<Strict>::deserialize(d)?.map(|s| s.0)))
}

/// `value` seconds (or `default` when not given) as a duration: more than 0, at most a day.
///
/// # Errors
/// [`ErrorKind::Config`](crate::ErrorKind::Config) naming `file` and `key`.
pub(crate) fn seconds(file: &str, key: &str, value: Option<f64>, default: f64) -> Result<Duration> {
    let s = value.unwrap_or(default);
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(Error::config(format!(
            "{file}: `{key}` must be a number of seconds between 0 and 86400, got {s}"
        )))
    }
}
