//! Golden files of the words the delegate and the reviewer are sent (`tests/golden/`),
//! compared byte for byte. Regenerate with `HARNESS_BLESS=1 cargo test -p harness --lib golden`,
//! then read the diff: every change to them is a change to what models read, and needs a new
//! template version.

use std::path::PathBuf;

/// Compares `actual` with `tests/golden/NAME`, or writes it there under `HARNESS_BLESS=1`.
pub(crate) fn assert_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("HARNESS_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (create it with HARNESS_BLESS=1 cargo test -p harness --lib golden)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from what is rendered now (HARNESS_BLESS=1 regenerates it; bump the template version):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
