//! `hash.sha256(s)`.

use sha2::{Digest, Sha256};
use starlark::environment::GlobalsBuilder;
use starlark::starlark_module;

/// Returns the lowercase hex form of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Every hash the record chains and seals is spelled this way: a digit a nibble, no
    // formatter.
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Returns the bytes a hex string spells (either case), or `None` when it is not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Returns the hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

#[starlark_module]
pub(crate) fn members(builder: &mut GlobalsBuilder) {
    /// Returns the SHA-256 of a string's UTF-8 bytes, as 64 lowercase hex digits.
    ///
    /// ```python
    /// hash.sha256("hi") == "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"
    /// ```
    fn sha256(#[starlark(require = pos)] s: &str) -> anyhow::Result<String> {
        Ok(sha256_hex(s.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_spells_every_byte_in_two_lowercase_digits_and_unhex_reads_it_back() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = hex(&bytes);
        assert_eq!(&text[..8], "00010203");
        assert_eq!(&text[text.len() - 4..], "feff");
        assert_eq!(hex(&[0x9f, 0x0a]), "9f0a");
        assert_eq!(unhex(&text), Some(bytes));
        assert_eq!(
            sha256_hex(b"hi"),
            "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"
        );
    }
}
