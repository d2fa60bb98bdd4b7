//! Lays out the release binary's functions in the order `bench/hot.order` gives (lld's
//! `--symbol-ordering-file`): the code a delegation runs then lies together in a few megabytes
//! instead of scattered across the binary, and a process touches, and keeps resident, that much
//! less of it (bench/order.sh makes the file; BENCHMARKS.md has the figures).
//!
//! Only for release builds for x86_64 Linux with rustc 1.90 or newer, which links with its own
//! lld there; elsewhere (or with `HARNESS_NO_ORDER=1`, or a linker of your own given in
//! `RUSTFLAGS` or `CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER`) the binary is linked as it
//! comes. The order changes where code lies, never what it does.

fn main() {
    println!("cargo::rerun-if-changed=bench/hot.order");
    println!("cargo::rerun-if-env-changed=HARNESS_NO_ORDER");
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let release = env("PROFILE") == "release";
    let target = env("TARGET") == "x86_64-unknown-linux-gnu";
    // A linker of one's own (RUSTFLAGS `-C linker=…`, or the target's `linker` in a config) may
    // not be lld: GNU ld refuses the option.
    let own_linker = env("CARGO_ENCODED_RUSTFLAGS").contains("linker")
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    let order = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("bench/hot.order");
    if release
        && target
        && !own_linker
        && links_with_lld()
        && env("HARNESS_NO_ORDER").is_empty()
        && order.is_file()
    {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        // Names the file lists that this build does not have (the file is a little stale).
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links this target with its own lld: the default on x86_64 Linux since 1.90
/// (before, it linked with the system's `cc` and GNU ld, which has no `--symbol-ordering-file`).
fn links_with_lld() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // `rustc 1.95.0 (59807616e 2026-04-14)`
    let version = String::from_utf8_lossy(&out.stdout);
    let mut parts = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
