//! Golden files of the words the delegate and the reviewer are sent (`tests/golden/`),
//! compared byte for byte. Regenerate with `HARNESS_BLESS=1 cargo test -p harness --lib golden`,
//! then read the diff: every change to them is a change to what models read, and needs a new
//! template version.

/// Compares `actual` with `tests/golden/NAME`, or writes it there under `HARNESS_BLESS=1`.
pub(crate) fn assert_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    harness_testkit::golden::assert_golden(
        &path,
        actual,
        "HARNESS_BLESS=1 cargo test -p harness --lib golden; bump the template version",
    );
}
