//! Golden files: text compared byte for byte with a file kept in the repository, or written
//! there under `HARNESS_BLESS=1` (then read the diff: every change is a change someone reads).

use std::path::Path;

/// Compares `actual` with the file at `path`, or writes it there when `HARNESS_BLESS` is set.
///
/// # Panics
/// When they differ, or the file is missing, saying how to regenerate it (`bless`: the command
/// that does).
pub fn assert_golden(path: &Path, actual: &str, bless: &str) {
    if std::env::var_os("HARNESS_BLESS").is_some() {
        std::fs::write(path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (create it with {bless})", path.display()));
    assert!(
        expected == actual,
        "{} differs from what is made now ({bless} regenerates it; read the diff):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
